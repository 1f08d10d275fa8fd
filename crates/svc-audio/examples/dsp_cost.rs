//! CPU cost per 20 ms frame of the runtime's input DSP: the `svc_vad` turn detector (16 kHz) and
//! the noise filter in both modes (48 kHz), against the Opus decode of the same frame measured in
//! the same run. Run in release on an otherwise quiet machine:
//!
//! ```text
//! cargo run --release -p svc-audio --example dsp_cost
//! ```
//!
//! The input is the crate's espeak fixture (tests/fixtures/near-talker-16k.wav), repeated; each
//! figure is the best of several rounds, so other processes on a shared machine inflate it least.

use std::time::{Duration, Instant};

use svc_audio::denoise::{NoiseFilter, NoiseMode};
use svc_audio::opus::{EncoderConfig, OpusDecoder, OpusEncoder};
use svc_audio::vad::{TurnDetector, TurnDetectorConfig, VadOutput};
use svc_audio::wav;

const ROUNDS: usize = 9;

fn best(mut round: impl FnMut() -> Duration) -> Duration {
    (0..ROUNDS).map(|_| round()).min().unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/near-talker-16k.wav");
    let speech16 = wav::read_wav_file(path)?.samples;
    let speech16: Vec<i16> = speech16.iter().copied().cycle().take(speech16.len() * 4).collect();
    let speech48: Vec<i16> = speech16.iter().flat_map(|s| [*s; 3]).collect();
    let frames16: Vec<&[i16]> = speech16.chunks_exact(320).collect();
    let frames48: Vec<&[i16]> = speech48.chunks_exact(960).collect();
    let n = frames16.len() as f64;

    let mut encoder = OpusEncoder::with_config(EncoderConfig::VOICE)?;
    let packets: Vec<Vec<u8>> = frames48.iter().map(|f| encoder.encode_frame(f)).collect::<Result<_, _>>()?;
    let decode48 = best(|| {
        let mut decoder = OpusDecoder::new().expect("decoder");
        let mut out = Vec::with_capacity(960);
        let start = Instant::now();
        for packet in &packets {
            out.clear();
            let _ = decoder.decode(packet, &mut out);
        }
        start.elapsed()
    });
    let decode16 = best(|| {
        let mut decoder = OpusDecoder::with_rate(16_000).expect("decoder");
        let mut out = Vec::with_capacity(320);
        let start = Instant::now();
        for packet in &packets {
            out.clear();
            let _ = decoder.decode(packet, &mut out);
        }
        start.elapsed()
    });
    let vad = best(|| {
        let mut detector = TurnDetector::new(TurnDetectorConfig::default());
        let mut out: Vec<VadOutput> = Vec::new();
        let start = Instant::now();
        for frame in &frames16 {
            out.clear();
            detector.push(frame, &mut out);
        }
        start.elapsed()
    });
    let filter = |mode| {
        best(|| {
            let mut filter = NoiseFilter::new(mode);
            let mut out = Vec::with_capacity(960);
            let start = Instant::now();
            for frame in &frames48 {
                out.clear();
                filter.process(frame, &mut out);
            }
            start.elapsed()
        })
    };
    let denoise = filter(NoiseMode::Denoise);
    let focus = filter(NoiseMode::VoiceFocus);
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n;
    println!("{} frames of 20 ms, best of {ROUNDS} rounds", frames16.len());
    println!("{:<34} {:>10} {:>14}", "step", "µs/frame", "× Opus decode");
    for (name, cost) in [
        ("Opus decode at 48 kHz (baseline)", decode48),
        ("Opus decode at 16 kHz", decode16),
        ("svc_vad turn detector (16 kHz)", vad),
        ("noise filter: denoise (48 kHz)", denoise),
        ("noise filter: voice_focus (48 kHz)", focus),
    ] {
        println!("{name:<34} {:>10.1} {:>14.2}", per(cost), per(cost) / per(decode48));
    }
    Ok(())
}
