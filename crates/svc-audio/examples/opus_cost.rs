//! CPU cost of Opus per 20 ms frame, and what each encoder setting buys.
//!
//! Run in release on an otherwise quiet machine:
//!
//! ```text
//! cargo run --release -p svc-audio --example opus_cost [speech.wav]
//! ```
//!
//! Encodes the crate's speech-like test signal (or the given PCM16 WAV, linearly resampled to
//! 48 kHz if needed, which is fine for a cost measurement) with [`EncoderConfig::VOICE`] at each
//! complexity and with single settings changed, and prints per 20 ms frame:
//!
//! - encode, decode, concealment and FEC-recovery time, the best of several rounds, so that other
//!   processes on a shared machine inflate the figures as little as possible;
//! - the bitrate, and the correlation of the loss-free decoded audio with the input;
//! - with every other packet lost, how well FEC recovery and plain concealment each reproduce the
//!   lost frames (correlation with the loss-free decode of those frames, voiced frames only);
//! - the audio bandwidth libopus chose.

use std::time::{Duration, Instant};

use svc_audio::analysis::{best_correlation, rms_dbfs, speech_like_signal};
use svc_audio::opus::{EncoderConfig, OpusApplication, OpusEncoder};
use svc_audio::{AudioError, FRAME_SAMPLES, OpusDecoder, SAMPLE_RATE_HZ, wav};

/// Timing rounds per setting; the fastest is reported.
const ROUNDS: usize = 15;

/// Frames quieter than this are pauses, where any fill "matches"; they are left out of the
/// recovery figures.
const VOICED_DBFS: f64 = -35.0;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let signal = match std::env::args().nth(1) {
        Some(path) => {
            let wav = wav::read_wav_file(&path)?;
            println!("input: {path} ({} Hz, {:.1} s)", wav.sample_rate, wav.duration().as_secs_f64());
            to_48k(&wav.to_mono(), wav.sample_rate)
        }
        None => {
            println!("input: analysis::speech_like_signal, 3 s");
            speech_like_signal(3 * SAMPLE_RATE_HZ as usize)
        }
    };
    let frames: Vec<&[i16]> = signal.chunks_exact(FRAME_SAMPLES).collect();
    println!("libopus {}, {} frames of 20 ms, best of {ROUNDS} rounds", svc_opus::version(), frames.len());
    println!(
        "{:<22} {:>9} {:>9} {:>10} {:>8} {:>7} {:>6} {:>8} {:>8}  band",
        "setting", "encode µs", "decode µs", "conceal µs", "fec µs", "kbit/s", "corr", "lost:fec", "lost:plc"
    );

    let mut settings: Vec<(String, EncoderConfig)> = [0, 1, 2, 3, 4, 5, 6, 8, 10]
        .into_iter()
        .map(|complexity| {
            (format!("voice, complexity {complexity}"), EncoderConfig { complexity, ..EncoderConfig::VOICE })
        })
        .collect();
    // The shipped settings with one thing changed.
    let variants = [
        ("voice, VoIP profile", EncoderConfig { application: OpusApplication::Voip, ..EncoderConfig::VOICE }),
        ("voice, no FEC", EncoderConfig { inband_fec: false, ..EncoderConfig::VOICE }),
        ("voice, 32 kbit/s", EncoderConfig { bitrate_bps: 32_000, ..EncoderConfig::VOICE }),
        ("voice, 5 % loss", EncoderConfig { expected_loss_percent: 5, ..EncoderConfig::VOICE }),
    ];
    settings.extend(variants.into_iter().map(|(name, config)| (name.to_owned(), config)));

    for (name, config) in settings {
        let mut packets = Vec::new();
        let encode = best_of(|| {
            let mut encoder = OpusEncoder::with_config(config)?;
            packets.clear();
            let start = Instant::now();
            for frame in &frames {
                packets.push(encoder.encode_frame(frame)?);
            }
            Ok(start.elapsed())
        })?;
        let mut decoded = Vec::with_capacity(signal.len());
        let decode = best_of(|| {
            let mut decoder = OpusDecoder::new()?;
            decoded.clear();
            let start = Instant::now();
            for packet in &packets {
                decoder.decode(packet, &mut decoded)?;
            }
            Ok(start.elapsed())
        })?;
        let mut concealed = Vec::with_capacity(signal.len());
        let conceal =
            best_of(|| lossy(&packets, &mut concealed, |decoder, _, out| decoder.conceal(FRAME_SAMPLES, out)))?;
        let mut recovered = Vec::with_capacity(signal.len());
        let fec = best_of(|| {
            lossy(&packets, &mut recovered, |decoder, next, out| decoder.decode_fec(next, FRAME_SAMPLES, out))
        })?;

        let lost_frames = packets.len().saturating_sub(1) / 2;
        let per_frame = |total: Duration, count: usize| total.as_secs_f64() * 1e6 / count.max(1) as f64;
        let bytes: usize = packets.iter().map(Vec::len).sum();
        let kbps = bytes as f64 * 8.0 / (packets.len() as f64 * 0.02) / 1000.0;
        let correlation = best_correlation(&signal[..decoded.len()], &decoded, 2_000);
        println!(
            "{name:<22} {:>9.1} {:>9.1} {:>10.1} {:>8.1} {kbps:>7.1} {:>6.3} {:>8.3} {:>8.3}  {}",
            per_frame(encode, packets.len()),
            per_frame(decode, packets.len()),
            per_frame(conceal, lost_frames),
            per_frame(fec, lost_frames),
            correlation.coefficient,
            lost_frame_similarity(&decoded, &recovered),
            lost_frame_similarity(&decoded, &concealed),
            dominant_bandwidth(&packets),
        );
    }
    Ok(())
}

/// The fastest of [`ROUNDS`] runs of `run`.
fn best_of(mut run: impl FnMut() -> Result<Duration, AudioError>) -> Result<Duration, AudioError> {
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        best = best.min(run()?);
    }
    Ok(best)
}

/// Decodes the even packets into `out` and fills in each odd one, as lost, with `fill` (which is
/// handed the packet after the lost one); times only the fills.
fn lossy(
    packets: &[Vec<u8>],
    out: &mut Vec<i16>,
    mut fill: impl FnMut(&mut OpusDecoder, &[u8], &mut Vec<i16>) -> Result<usize, AudioError>,
) -> Result<Duration, AudioError> {
    let mut decoder = OpusDecoder::new()?;
    out.clear();
    let mut spent = Duration::ZERO;
    for received in (0..packets.len().saturating_sub(2)).step_by(2) {
        decoder.decode(&packets[received], out)?;
        let start = Instant::now();
        fill(&mut decoder, &packets[received + 2], out)?;
        spent += start.elapsed();
    }
    Ok(spent)
}

/// Mean correlation of the odd (lost and filled-in) frames of `filled` with the same frames of
/// the loss-free decode, over voiced frames.
fn lost_frame_similarity(reference: &[i16], filled: &[i16]) -> f64 {
    let pairs = reference.chunks_exact(FRAME_SAMPLES).zip(filled.chunks_exact(FRAME_SAMPLES)).skip(1).step_by(2);
    let scores: Vec<f64> = pairs
        .filter(|(truth, _)| rms_dbfs(truth) > VOICED_DBFS)
        .map(|(truth, fill)| best_correlation(truth, fill, 0).coefficient)
        .collect();
    scores.iter().sum::<f64>() / scores.len().max(1) as f64
}

/// The audio bandwidth most packets were coded with (libopus narrows it when the bitrate, after
/// its allowances for complexity and the FEC copy, is too low for more).
fn dominant_bandwidth(packets: &[Vec<u8>]) -> &'static str {
    let names = ["narrow (4 kHz)", "medium (6 kHz)", "wide (8 kHz)", "super-wide (12 kHz)", "full (20 kHz)"];
    let mut counts = [0_usize; 5];
    for packet in packets {
        let band = match svc_opus::packet::bandwidth(packet) {
            Ok(svc_opus::Bandwidth::Narrowband) => 0,
            Ok(svc_opus::Bandwidth::Mediumband) => 1,
            Ok(svc_opus::Bandwidth::Wideband) => 2,
            Ok(svc_opus::Bandwidth::Superwideband) => 3,
            _ => 4,
        };
        counts[band] += 1;
    }
    let most = (0..counts.len()).max_by_key(|&band| counts[band]).unwrap_or(4);
    names[most]
}

/// Linear interpolation to 48 kHz: crude, but the codec's cost does not depend on it.
fn to_48k(input: &[i16], rate: u32) -> Vec<i16> {
    if rate == SAMPLE_RATE_HZ || input.is_empty() {
        return input.to_vec();
    }
    let len = (input.len() as u64 * u64::from(SAMPLE_RATE_HZ) / u64::from(rate)) as usize;
    (0..len)
        .map(|n| {
            let position = n as f64 * f64::from(rate) / f64::from(SAMPLE_RATE_HZ);
            let index = position as usize;
            let a = f64::from(input[index.min(input.len() - 1)]);
            let b = f64::from(input[(index + 1).min(input.len() - 1)]);
            (a + (b - a) * position.fract()) as i16
        })
        .collect()
}
