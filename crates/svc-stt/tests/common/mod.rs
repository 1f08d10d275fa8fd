//! Helpers for the tests that run the real Whisper model: where the model is, speech made on the
//! spot with espeak-ng (resampled to 16 kHz), and the word error rate.
//!
//! Shared by the integration tests and the timing example (through `#[path]`), so some helpers
//! are unused in one of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use svc_stt::{RATE_HZ, WhisperModel};

/// The converted model's directory: `$SVC_LOCAL_MODELS/whisper-base`, by default under the
/// workspace's `target/local-models`. Panics with what to do when it is not there, so that a test
/// needing the model can never pass without it.
pub fn model_dir() -> PathBuf {
    let root = std::env::var_os("SVC_LOCAL_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/local-models"));
    let dir = root.join("whisper-base");
    let missing: Vec<&str> = svc_stt::REQUIRED_FILES.iter().copied().filter(|f| !dir.join(f).is_file()).collect();
    assert!(
        missing.is_empty(),
        "the Whisper model is not installed: {} lacks {missing:?}. Run `svc models install`, or convert the \
         CTranslate2 package with `cargo run --release -p svc-stt --example convert -- <ct2 dir> {}`, \
         or point SVC_LOCAL_MODELS at a directory holding whisper-base/",
        dir.display(),
        dir.display()
    );
    dir
}

/// The model, loaded once per test binary and shared (as the service shares it between sessions).
pub fn model() -> Arc<WhisperModel> {
    static MODEL: OnceLock<Arc<WhisperModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = model_dir();
            let t = Instant::now();
            let m = WhisperModel::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
            eprintln!("loaded Whisper from {} in {:.2} s", dir.display(), t.elapsed().as_secs_f64());
            Arc::new(m)
        })
        .clone()
}

/// `text` spoken by espeak-ng (en-us, 150 words per minute), as 16 kHz mono samples in ±1.
pub fn speak(text: &str) -> Vec<f32> {
    speak_as(text, "en-us", 150)
}

/// `text` spoken by espeak-ng in `voice` at `words_per_minute`, as 16 kHz mono samples in ±1.
pub fn speak_as(text: &str, voice: &str, words_per_minute: u32) -> Vec<f32> {
    let dir = tempfile::tempdir().expect("temp dir");
    let wav = dir.path().join("speech.wav");
    let status = Command::new("espeak-ng")
        .args(["-v", voice, "-s", &words_per_minute.to_string(), "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .expect("espeak-ng must be installed (apt-get install espeak-ng)");
    assert!(status.success(), "espeak-ng failed: {status}");
    let (rate, samples) = read_wav(&std::fs::read(&wav).expect("espeak-ng wrote the file"));
    resample(&samples, rate, RATE_HZ)
}

/// `seconds` of digital silence.
pub fn silence(seconds: f32) -> Vec<f32> {
    vec![0.0; (seconds * RATE_HZ as f32) as usize]
}

/// Reads a mono 16-bit PCM WAV file: (sample rate, samples in ±1).
pub fn read_wav(bytes: &[u8]) -> (u32, Vec<f32>) {
    assert!(bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WAVE", "not a WAV file");
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let mut pos = 12;
    let mut rate = None;
    while pos + 8 <= bytes.len() {
        let id = &bytes[pos..pos + 4];
        let size = u32_at(pos + 4) as usize;
        let body = pos + 8;
        match id {
            b"fmt " => {
                assert_eq!(u16_at(body), 1, "PCM");
                assert_eq!(u16_at(body + 2), 1, "mono");
                assert_eq!(u16_at(body + 14), 16, "16-bit");
                rate = Some(u32_at(body + 4));
            }
            b"data" => {
                let end = (body + size).min(bytes.len());
                let samples = bytes[body..end]
                    .chunks_exact(2)
                    .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])) / 32768.0)
                    .collect();
                return (rate.expect("fmt before data"), samples);
            }
            _ => {}
        }
        pos = body + size + (size & 1);
    }
    panic!("no data chunk");
}

/// Band-limited resampling by windowed sinc (Blackman window, 32 zero crossings each side), with the
/// cut-off just below the lower of the two Nyquist frequencies.
pub fn resample(input: &[f32], from: u32, to: u32) -> Vec<f32> {
    if from == to {
        return input.to_vec();
    }
    let ratio = f64::from(to) / f64::from(from);
    let cutoff = 0.95 * ratio.min(1.0);
    let half_width = 32.0 / cutoff;
    let n_out = (input.len() as f64 * ratio).floor() as usize;
    (0..n_out)
        .map(|n| {
            let t = n as f64 / ratio;
            let lo = (t - half_width).ceil().max(0.0) as usize;
            let hi = ((t + half_width).floor() as usize).min(input.len().saturating_sub(1));
            let mut acc = 0.0;
            for (k, &x) in input.iter().enumerate().take(hi + 1).skip(lo) {
                let d = k as f64 - t;
                let sinc = if d == 0.0 {
                    cutoff
                } else {
                    (std::f64::consts::PI * cutoff * d).sin() / (std::f64::consts::PI * d)
                };
                let w = d / half_width;
                let window =
                    0.42 + 0.5 * (std::f64::consts::PI * w).cos() + 0.08 * (2.0 * std::f64::consts::PI * w).cos();
                acc += f64::from(x) * sinc * window;
            }
            acc as f32
        })
        .collect()
}

pub use svc_testkit::speech::word_error_rate as wer;
