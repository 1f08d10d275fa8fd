use super::*;
use crate::FRAME_SAMPLES;
use crate::analysis::{best_correlation, speech_like_signal};

/// Encodes `signal` (a whole number of frames) into packets.
fn encode_all(encoder: &mut OpusEncoder, signal: &[i16]) -> Vec<Vec<u8>> {
    signal.chunks_exact(FRAME_SAMPLES).map(|frame| encoder.encode_frame(frame).expect("encodes")).collect()
}

#[test]
fn round_trip_preserves_the_waveform_delayed_by_the_lookahead() {
    let source = speech_like_signal(48_000);
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let mut decoder = OpusDecoder::new().expect("decoder");
    let mut decoded = Vec::new();
    let packets = encode_all(&mut encoder, &source);
    for packet in &packets {
        assert_eq!(decoder.decode(packet, &mut decoded).expect("decodes"), FRAME_SAMPLES);
    }
    // 40 kbit/s is 100 bytes per 20 ms on average; VBR spends less on the pauses.
    let bytes: usize = packets.iter().map(Vec::len).sum();
    assert!((3_500..5_500).contains(&bytes), "{bytes} bytes in 1 s");
    // The bitrate leaves room for more than wideband even with the FEC copy and a cheap
    // complexity (at 32 kbit/s libopus would narrow to 8 kHz).
    let narrow = packets
        .iter()
        .filter(|p| {
            !matches!(
                svc_opus::packet::bandwidth(p),
                Ok(svc_opus::Bandwidth::Superwideband | svc_opus::Bandwidth::Fullband)
            )
        })
        .count();
    assert!(narrow <= 2, "{narrow} of 50 packets narrower than 12 kHz");
    assert_eq!(decoded.len(), source.len());
    assert_eq!(encoder.lookahead_samples(), 312, "2.5 ms + 4 ms at 48 kHz");
    let c = best_correlation(&source, &decoded, 4_800);
    assert!(c.coefficient >= 0.9, "{c:?}");
    assert!(c.lag_samples.abs_diff(312) <= 8, "{c:?}");
}

#[test]
fn settings_libopus_rejects_are_errors() {
    for config in [
        EncoderConfig { complexity: 11, ..EncoderConfig::VOICE },
        EncoderConfig { expected_loss_percent: 101, ..EncoderConfig::VOICE },
        EncoderConfig { bitrate_bps: -5, ..EncoderConfig::VOICE },
    ] {
        let error = OpusEncoder::with_config(config).expect_err("invalid setting");
        assert!(matches!(error, AudioError::Codec { .. }), "{config:?}: {error:?}");
    }
    let voip = OpusEncoder::with_config(EncoderConfig { application: OpusApplication::Voip, ..EncoderConfig::VOICE });
    assert_eq!(voip.expect("valid").lookahead_samples(), 312);
}

#[test]
fn encoder_accepts_only_whole_frames() {
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    for len in [0, 1, FRAME_SAMPLES - 1, FRAME_SAMPLES + 1, 2 * FRAME_SAMPLES] {
        let error = encoder.encode_frame(&vec![0; len]).expect_err("not one frame");
        assert!(matches!(error, AudioError::FrameLength { expected: FRAME_SAMPLES, actual } if actual == len));
    }
    let mut packet = vec![1, 2, 3];
    assert!(encoder.encode_frame_into(&[0; 10], &mut packet).is_err());
    assert!(packet.is_empty());
    encoder.encode_frame_into(&[0; FRAME_SAMPLES], &mut packet).expect("encodes");
    assert!(!packet.is_empty() && packet.len() < MAX_PACKET_BYTES);
}

#[test]
fn malformed_packets_are_typed_errors_and_leave_the_decoder_usable() {
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let mut decoder = OpusDecoder::new().expect("decoder");
    let mut out = vec![7_i16; 3];
    // TOC config 1 = SILK NB 20 ms. Code 3 with zero frames; code 3 with 7 × 20 ms = 140 ms;
    // code 1 (two equal frames) with an odd payload; code 2 whose first length overruns.
    let malformed: [&[u8]; 5] = [&[], &[0x0B, 0x00], &[0x0B, 0x07, 1, 2, 3], &[0x09, 1, 2, 3], &[0x0A, 200, 1, 2]];
    for packet in malformed {
        let error = decoder.decode(packet, &mut out).expect_err("malformed");
        assert!(matches!(error, AudioError::InvalidPacket { .. }), "{packet:?}: {error:?}");
        assert_eq!(out, [7, 7, 7], "output untouched");
    }
    // Random bytes either decode (many byte strings are valid Opus) or fail cleanly.
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    for _ in 0..2_000 {
        let len = (state % 300) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let before = out.len();
        match decoder.decode(&bytes, &mut out) {
            Ok(n) => assert_eq!(out.len(), before + n),
            Err(_) => assert_eq!(out.len(), before),
        }
    }
    let packet = encoder.encode_frame(&speech_like_signal(FRAME_SAMPLES)).expect("encodes");
    out.clear();
    assert_eq!(decoder.decode(&packet, &mut out).expect("still decodes"), FRAME_SAMPLES);
}

#[test]
fn concealment_appends_exactly_what_was_asked_and_continues_the_signal() {
    let source = speech_like_signal(10 * FRAME_SAMPLES);
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let mut decoder = OpusDecoder::new().expect("decoder");
    let mut out = Vec::new();
    // Frames 0..4 cover a voiced stretch of the first syllable.
    for packet in &encode_all(&mut encoder, &source)[..4] {
        decoder.decode(packet, &mut out).expect("decodes");
    }
    let before = out.len();
    for samples in [1_000, 120, 7, 0] {
        assert_eq!(decoder.conceal(samples, &mut out).expect("conceals"), samples);
    }
    assert_eq!(out.len(), before + 1_127);
    // Concealment extrapolates the voice rather than writing silence.
    assert!(out[before..before + 480].iter().any(|&s| s.unsigned_abs() > 300));

    let error = decoder.conceal(MAX_CONCEAL_SAMPLES + 1, &mut out).expect_err("too long");
    assert!(matches!(error, AudioError::ConcealTooLong { .. }));
    assert_eq!(out.len(), before + 1_127);
    assert_eq!(decoder.conceal(MAX_CONCEAL_SAMPLES, &mut out).expect("at the bound"), MAX_CONCEAL_SAMPLES);
}

/// Decodes `packets` with packet `lost` missing, filling the hole with `fill`; returns the
/// samples written for the hole.
fn recover(packets: &[Vec<u8>], lost: usize, fec: bool) -> Vec<i16> {
    let mut decoder = OpusDecoder::new().expect("decoder");
    let mut out = Vec::new();
    for packet in &packets[..lost] {
        decoder.decode(packet, &mut out).expect("decodes");
    }
    let start = out.len();
    let filled = if fec {
        decoder.decode_fec(&packets[lost + 1], FRAME_SAMPLES, &mut out)
    } else {
        decoder.conceal(FRAME_SAMPLES, &mut out)
    };
    assert_eq!(filled.expect("fills"), FRAME_SAMPLES);
    out[start..].to_vec()
}

#[test]
fn in_band_fec_recovers_a_lost_frame_better_than_concealment() {
    let source = speech_like_signal(48_000);
    let packets = encode_all(&mut OpusEncoder::new_voice().expect("encoder"), &source);
    let mut reference = Vec::new();
    let mut decoder = OpusDecoder::new().expect("decoder");
    for packet in &packets {
        decoder.decode(packet, &mut reference).expect("decodes");
    }
    // Lose frames in the middle of voiced stretches (each syllable is 12.5 frames long) and
    // compare what each method writes for them with what the lost packet decodes to.
    let mut fec_total = 0.0;
    let mut plc_total = 0.0;
    let lost_frames = [3, 16, 28, 41];
    for lost in lost_frames {
        let truth = &reference[lost * FRAME_SAMPLES..(lost + 1) * FRAME_SAMPLES];
        let fec = best_correlation(truth, &recover(&packets, lost, true), 0).coefficient;
        let plc = best_correlation(truth, &recover(&packets, lost, false), 0).coefficient;
        fec_total += fec;
        plc_total += plc;
    }
    let (fec, plc) = (fec_total / 4.0, plc_total / 4.0);
    assert!(fec > 0.8, "FEC recovery correlates {fec:.3}");
    assert!(fec > plc + 0.1, "FEC {fec:.3} vs concealment {plc:.3}");
}

#[test]
fn fec_needs_a_valid_next_packet_and_a_bounded_gap() {
    let mut decoder = OpusDecoder::new().expect("decoder");
    let mut out = vec![1_i16];
    assert!(matches!(decoder.decode_fec(&[], 960, &mut out), Err(AudioError::InvalidPacket { .. })));
    let packet = OpusEncoder::new_voice().expect("encoder").encode_frame(&[0; FRAME_SAMPLES]).expect("encodes");
    assert!(matches!(
        decoder.decode_fec(&packet, MAX_CONCEAL_SAMPLES + 1, &mut out),
        Err(AudioError::ConcealTooLong { .. })
    ));
    assert_eq!(out, [1]);
    // A gap shorter than the packet's frame is concealed, still to the exact length.
    assert_eq!(decoder.decode_fec(&packet, 500, &mut out).expect("fills"), 500);
    assert_eq!(decoder.decode_fec(&packet, 2_500, &mut out).expect("fills"), 2_500);
    assert_eq!(out.len(), 3_001);
}

#[test]
fn packet_samples_reads_durations() {
    let packet = OpusEncoder::new_voice().expect("encoder").encode_frame(&[0; FRAME_SAMPLES]).expect("encodes");
    assert_eq!(packet_samples(&packet).expect("valid"), FRAME_SAMPLES);
    // Code 3, two 20 ms frames, CBR: 40 ms.
    assert_eq!(packet_samples(&[0x0B, 0x02, 0, 0]).expect("valid"), 1_920);
    assert!(packet_samples(&[]).is_err());
}

#[test]
fn every_native_rate_round_trips_and_the_bitstream_does_not_depend_on_it() {
    let source48 = speech_like_signal(48_000);
    for rate in OPUS_RATES_HZ {
        let step = (SAMPLE_RATE_HZ / rate) as usize;
        // Decimation is a fair stand-in for a band-limited source: the test signal's energy sits
        // below 4 kHz.
        let source: Vec<i16> = source48.iter().step_by(step).copied().collect();
        let mut encoder = OpusEncoder::with_rate(EncoderConfig::VOICE, rate).expect("encoder");
        assert_eq!(encoder.frame_samples(), frame_samples_at(rate));
        let packets: Vec<Vec<u8>> =
            source.chunks_exact(encoder.frame_samples()).map(|f| encoder.encode_frame(f).expect("encodes")).collect();
        assert_eq!(packets.len(), 50, "{rate} Hz");
        let mut same_rate = OpusDecoder::with_rate(rate).expect("decoder");
        let mut decoded = Vec::new();
        for packet in &packets {
            assert_eq!(same_rate.decode(packet, &mut decoded).expect("decodes"), frame_samples_at(rate));
        }
        let c = best_correlation(&source, &decoded, rate as usize / 10);
        assert!(c.coefficient >= 0.9, "{rate} Hz: {c:?}");
        // A 48 kHz receiver (a WebRTC client) decodes the same packets.
        let mut full = OpusDecoder::new().expect("decoder");
        let mut decoded48 = Vec::new();
        for packet in &packets {
            assert_eq!(full.decode(packet, &mut decoded48).expect("decodes"), FRAME_SAMPLES);
        }
        // The concealment bound scales with the rate.
        assert!(same_rate.conceal(rate as usize + 1, &mut decoded).is_err());
        assert_eq!(
            same_rate.conceal(rate as usize / 50 + 7, &mut Vec::new()).expect("conceals"),
            rate as usize / 50 + 7
        );
    }
    assert!(matches!(OpusEncoder::with_rate(EncoderConfig::VOICE, 44_100), Err(AudioError::UnsupportedRate { .. })));
    assert!(matches!(OpusDecoder::with_rate(22_050), Err(AudioError::UnsupportedRate { .. })));
}
