use super::*;
use crate::analysis::{best_correlation, speech_like_signal};
use crate::{FRAME_SAMPLES, OpusEncoder};

/// Where the test stream's RTP clock starts (an extended timestamp past one 32-bit wrap).
const T0: u64 = (1 << 32) + 12_345;

/// One second of the speech-like signal and its packets, each with its RTP timestamp.
fn stream() -> (Vec<i16>, Vec<(u64, Vec<u8>)>) {
    let source = speech_like_signal(48_000);
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let packets = source
        .chunks_exact(FRAME_SAMPLES)
        .enumerate()
        .map(|(k, frame)| (T0 + (k * FRAME_SAMPLES) as u64, encoder.encode_frame(frame).expect("encodes")))
        .collect();
    (source, packets)
}

#[test]
fn an_in_order_stream_decodes_to_the_source() {
    let (source, packets) = stream();
    let mut track = TrackDecoder::new().expect("decoder");
    let mut out = Vec::new();
    for (ts, packet) in &packets {
        let outcome = track.push(*ts, packet, &mut out).expect("decodes");
        assert_eq!(outcome, PushOutcome::Decoded { filled: 0, decoded: FRAME_SAMPLES });
    }
    assert_eq!(out.len(), source.len());
    let c = best_correlation(&source, &out, 2_000);
    assert!(c.coefficient > 0.95 && c.lag_samples.abs_diff(312) <= 8, "{c:?}");
    let stats = track.stats();
    assert_eq!((stats.packets_decoded, stats.decoded_samples, stats.concealed_samples), (50, 48_000, 0));
    assert_eq!(track.expected_timestamp(), Some(T0 + 48_000));
}

#[test]
fn losses_are_filled_so_the_output_keeps_the_rtp_clock() {
    let (source, packets) = stream();
    // Single losses (recoverable by FEC) and a burst of three (concealed, then FEC for the last).
    let lost = [4, 11, 23, 30, 31, 32, 44];
    let mut track = TrackDecoder::new().expect("decoder");
    let mut out = Vec::new();
    for (k, (ts, packet)) in packets.iter().enumerate() {
        if lost.contains(&k) {
            continue;
        }
        let outcome = track.push(*ts, packet, &mut out).expect("decodes");
        let hole = (0..k).rev().take_while(|j| lost.contains(j)).count();
        assert_eq!(
            outcome,
            PushOutcome::Decoded { filled: hole * FRAME_SAMPLES, decoded: FRAME_SAMPLES },
            "packet {k}"
        );
        // After every packet the output ends where that packet ends on the RTP clock.
        assert_eq!(out.len() as u64, ts + FRAME_SAMPLES as u64 - T0);
    }
    assert_eq!(out.len(), source.len());
    assert_eq!(track.stats().concealed_samples, (lost.len() * FRAME_SAMPLES) as u64);
    let c = best_correlation(&source, &out, 2_000);
    assert!(c.coefficient > 0.9 && c.lag_samples.abs_diff(312) <= 8, "{c:?}");
}

#[test]
fn duplicates_and_late_packets_are_dropped() {
    let (source, packets) = stream();
    let mut track = TrackDecoder::new().expect("decoder");
    let mut out = Vec::new();
    let mut order: Vec<usize> = (0..packets.len()).collect();
    // 10 arrives after 11 (so 10 is recovered from 11, then dropped when it arrives), 20 twice,
    // and 5 again much later.
    order.swap(10, 11);
    order.insert(21, 20);
    order.insert(40, 5);
    let mut dropped = 0;
    for k in order {
        let (ts, packet) = &packets[k];
        let before = out.len();
        match track.push(*ts, packet, &mut out).expect("valid packet") {
            PushOutcome::DroppedLate => {
                dropped += 1;
                assert_eq!(out.len(), before);
            }
            outcome => assert_eq!(out.len(), before + outcome.samples_appended()),
        }
    }
    assert_eq!(dropped, 3);
    assert_eq!(track.stats().dropped_late, 3);
    assert_eq!(out.len(), source.len());
    assert!(best_correlation(&source, &out, 2_000).coefficient > 0.9);
}

#[test]
fn a_huge_timestamp_jump_resyncs_without_allocating() {
    let (_, packets) = stream();
    let mut track = TrackDecoder::new().expect("decoder");
    let mut out = Vec::new();
    for (ts, packet) in &packets[..5] {
        track.push(*ts, packet, &mut out).expect("decodes");
    }
    let far = T0 + (1 << 40);
    let outcome = track.push(far, &packets[5].1, &mut out).expect("decodes");
    assert_eq!(outcome, PushOutcome::Resynced { expected_timestamp: T0 + 5 * 960, decoded: FRAME_SAMPLES });
    assert_eq!(out.len(), 6 * FRAME_SAMPLES);
    assert!(out.capacity() < 1 << 20, "capacity {}", out.capacity());
    // The stream continues from the new position...
    let outcome = track.push(far + 960, &packets[6].1, &mut out).expect("decodes");
    assert_eq!(outcome, PushOutcome::Decoded { filled: 0, decoded: FRAME_SAMPLES });
    // ...and a jump back further than any reordering is a restart, not a late packet.
    let outcome = track.push(T0 + 7 * 960, &packets[7].1, &mut out).expect("decodes");
    assert!(matches!(outcome, PushOutcome::Resynced { .. }), "{outcome:?}");
    // Timestamps at the very end of the clock neither panic nor wrap.
    track.push(u64::MAX - 10, &packets[8].1, &mut out).expect("decodes");
    assert_eq!(track.expected_timestamp(), Some(u64::MAX));
    assert_eq!(track.stats().resyncs, 3);
    assert_eq!(out.len(), 9 * FRAME_SAMPLES);
}

#[test]
fn gaps_up_to_the_bound_are_filled_and_longer_ones_resync() {
    let (_, packets) = stream();
    let config = TrackDecoderConfig::default();
    let bound = crate::samples_in(config.max_gap_fill) as u64;
    assert_eq!(bound, 9_600);
    let mut track = TrackDecoder::with_config(config).expect("decoder");
    let mut out = Vec::new();
    track.push(T0, &packets[0].1, &mut out).expect("decodes");
    // Exactly the bound, then a gap that is no multiple of 2.5 ms.
    let at = T0 + 960 + bound;
    assert_eq!(
        track.push(at, &packets[1].1, &mut out).expect("decodes"),
        PushOutcome::Decoded { filled: 9_600, decoded: 960 }
    );
    let at = at + 960 + 1_001;
    assert_eq!(
        track.push(at, &packets[2].1, &mut out).expect("decodes"),
        PushOutcome::Decoded { filled: 1_001, decoded: 960 }
    );
    assert_eq!(out.len() as u64, at + 960 - T0);
    // One sample past the bound is a new talkspurt.
    let at = at + 960 + bound + 1;
    assert!(matches!(
        track.push(at, &packets[3].1, &mut out).expect("decodes"),
        PushOutcome::Resynced { decoded: 960, .. }
    ));
}

#[test]
fn garbage_packets_are_errors_and_count_as_lost() {
    let (_, packets) = stream();
    let mut track = TrackDecoder::new().expect("decoder");
    let mut out = Vec::new();
    track.push(T0, &packets[0].1, &mut out).expect("decodes");
    let before = out.len();
    for garbage in [&[][..], &[0x0B, 0x00], &[0xFF, 0xFF, 0xFF]] {
        let error = track.push(T0 + 960, garbage, &mut out).expect_err("garbage");
        assert!(matches!(error, AudioError::InvalidPacket { .. }), "{error:?}");
    }
    // A garbage packet with an absurd timestamp must not move the clock either.
    assert!(track.push(T0 + (1 << 40), &[0x0B, 0x00], &mut out).is_err());
    assert_eq!(out.len(), before);
    assert_eq!(track.expected_timestamp(), Some(T0 + 960));
    assert_eq!(track.stats().invalid_packets, 4);
    // The next good packet fills the garbage packet's slot.
    let outcome = track.push(T0 + 1_920, &packets[2].1, &mut out).expect("decodes");
    assert_eq!(outcome, PushOutcome::Decoded { filled: 960, decoded: 960 });
}

/// Two single-frame packets of the same configuration as one code-3 packet (RFC 6716 §3.2.5:
/// the TOC with code 3, a frame-count byte with the VBR flag, the first frame's length, then
/// both frames).
fn two_frame_packet(first: &[u8], second: &[u8]) -> Vec<u8> {
    assert_eq!(first[0] & 0xFC, second[0] & 0xFC, "same configuration");
    assert_eq!(first[0] & 0x03, 0, "single-frame packets");
    let (a, b) = (&first[1..], &second[1..]);
    let mut packet = vec![(first[0] & 0xFC) | 3, 0x80 | 2];
    if a.len() < 252 {
        packet.push(a.len() as u8);
    } else {
        let low = 252 + (a.len() - 252) % 4;
        packet.push(low as u8);
        packet.push(((a.len() - low) / 4) as u8);
    }
    packet.extend_from_slice(a);
    packet.extend_from_slice(b);
    packet
}

#[test]
fn packets_of_other_durations_advance_the_clock_by_their_length() {
    let (source, packets) = stream();
    // Two 20 ms frames combined into one 40 ms packet, as senders with ptime 40 do.
    let combined = two_frame_packet(&packets[2].1, &packets[3].1);
    let mut track = TrackDecoder::new().expect("decoder");
    let mut out = Vec::new();
    track.push(T0, &packets[0].1, &mut out).expect("decodes");
    track.push(T0 + 960, &packets[1].1, &mut out).expect("decodes");
    assert_eq!(
        track.push(T0 + 1_920, &combined, &mut out).expect("decodes"),
        PushOutcome::Decoded { filled: 0, decoded: 1_920 }
    );
    assert_eq!(track.expected_timestamp(), Some(T0 + 3_840));
    // A 20 ms packet starting inside the 40 ms one is late.
    assert_eq!(track.push(T0 + 2_880, &packets[3].1, &mut out).expect("valid"), PushOutcome::DroppedLate);
    track.push(T0 + 3_840, &packets[4].1, &mut out).expect("decodes");
    assert_eq!(out.len(), 5 * FRAME_SAMPLES);
    assert!(best_correlation(&source[..out.len()], &out, 2_000).coefficient > 0.9);
}

#[test]
fn a_decoder_at_a_lower_rate_keeps_the_48_khz_rtp_clock() {
    let (_, packets) = stream();
    let lost = [7, 8];
    let mut track = TrackDecoder::with_rate(TrackDecoderConfig::default(), 16_000).expect("decoder");
    let mut out = Vec::new();
    for (k, (ts, packet)) in packets.iter().enumerate() {
        if lost.contains(&k) {
            continue;
        }
        let outcome = track.push(*ts, packet, &mut out).expect("decodes");
        let expected_fill = if k == 9 { 2 * 320 } else { 0 };
        assert_eq!(outcome, PushOutcome::Decoded { filled: expected_fill, decoded: 320 }, "packet {k}");
    }
    assert_eq!(out.len(), 16_000, "one second at 16 kHz, losses included");
    assert_eq!(track.expected_timestamp(), Some(T0 + 48_000), "the clock stays at 48 kHz");
}

/// The frame libwebrtc sends while a track is muted or its microphone gives digital silence
/// with DTX off: CELT, fullband, 20 ms, the silence flag, again and again.
const BROWSER_SILENCE: [u8; 3] = [0xf8, 0xff, 0xfe];

/// Half a second of speech, then `silent_frames` of the browser's silent frame, then speech
/// again, each packet with its RTP timestamp.
fn speech_silence_speech(silent_frames: usize) -> Vec<(u64, Vec<u8>)> {
    let speech = speech_like_signal(24_000);
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let mut packets: Vec<Vec<u8>> = Vec::new();
    for frame in speech.chunks_exact(FRAME_SAMPLES) {
        packets.push(encoder.encode_frame(frame).expect("encodes"));
    }
    packets.extend(std::iter::repeat_n(BROWSER_SILENCE.to_vec(), silent_frames));
    for frame in speech.chunks_exact(FRAME_SAMPLES) {
        packets.push(encoder.encode_frame(frame).expect("encodes"));
    }
    packets.into_iter().enumerate().map(|(k, packet)| (T0 + (k * FRAME_SAMPLES) as u64, packet)).collect()
}

#[test]
fn repeated_silent_packets_skip_the_decoder_and_lose_nothing() {
    let packets = speech_silence_speech(100);
    for rate in [48_000, 24_000, 16_000] {
        // What decoding every packet gives, against what the track decoder gives.
        let mut reference_decoder = crate::opus::OpusDecoder::with_rate(rate).expect("decoder");
        let mut reference = Vec::new();
        for (_, packet) in &packets {
            reference_decoder.decode(packet, &mut reference).expect("decodes");
        }
        let mut track = TrackDecoder::with_rate(TrackDecoderConfig::default(), rate).expect("decoder");
        let mut out = Vec::new();
        for (ts, packet) in &packets {
            track.push(*ts, packet, &mut out).expect("decodes");
        }
        let skipped = track.stats().silent_repeats;
        assert!(skipped >= 60, "most of the silence skips libopus at {rate} Hz: {skipped}");
        assert_eq!(track.stats().packets_decoded, packets.len() as u64);
        assert_eq!(out.len(), reference.len(), "the output keeps the RTP clock");
        assert!(out == reference, "the speech after the silence decodes sample for sample the same at {rate} Hz");
    }
}

#[test]
fn a_loss_after_skipped_silence_is_concealed_as_without_skipping() {
    let packets = speech_silence_speech(50);
    // Half a second of speech (25 frames), one second of silence; the first speech packet after
    // the silence is lost, and the next one recovers it with FEC.
    let lost = 25 + 50;
    let mut reference_decoder = crate::opus::OpusDecoder::new().expect("decoder");
    let mut reference = Vec::new();
    let mut track = TrackDecoder::new().expect("decoder");
    let mut out = Vec::new();
    for (k, (ts, packet)) in packets.iter().enumerate() {
        if k == lost {
            continue;
        }
        if k == lost + 1 {
            reference_decoder.decode_fec(packet, FRAME_SAMPLES, &mut reference).expect("recovers");
        }
        reference_decoder.decode(packet, &mut reference).expect("decodes");
        track.push(*ts, packet, &mut out).expect("decodes");
    }
    assert!(track.stats().silent_repeats > 0);
    assert!(out == reference, "recovery across skipped silence is unchanged");
}
