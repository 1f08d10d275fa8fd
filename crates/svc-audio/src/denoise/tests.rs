use super::*;
use crate::analysis::best_correlation;
use crate::wav::read_wav_file;

/// 16 kHz espeak-ng speech from tests/fixtures, brought to 48 kHz by linear interpolation (the
/// speech has nothing above 8 kHz to lose).
fn speech48(name: &str) -> Vec<i16> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    let wav = read_wav_file(format!("{path}{name}")).expect("fixture");
    let mut out = Vec::with_capacity(wav.samples.len() * 3);
    for pair in wav.samples.windows(2) {
        let (a, b) = (f32::from(pair[0]), f32::from(pair[1]));
        for k in 0..3 {
            out.push((a + (b - a) * k as f32 / 3.0) as i16);
        }
    }
    out
}

fn noise(samples: usize, amplitude: i16, seed: u64) -> Vec<i16> {
    let mut x = seed;
    (0..samples)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 48) as i16) / (i16::MAX / amplitude).max(1)
        })
        .collect()
}

/// Noise shaped like a fan or an air vent (white noise through a one-pole low-pass): RNNoise was
/// trained on such noise. Synthetic white noise it barely touches (measured: 3 to 5 dB).
fn fan(samples: usize, amplitude: i16, seed: u64) -> Vec<i16> {
    let mut y = 0.0f32;
    noise(samples, amplitude, seed)
        .into_iter()
        .map(|s| {
            y = 0.9 * y + 0.3 * f32::from(s);
            y as i16
        })
        .collect()
}

fn run(mode: NoiseMode, pcm: &[i16]) -> Vec<i16> {
    let mut filter = NoiseFilter::new(mode);
    let mut out = Vec::new();
    for chunk in pcm.chunks(960) {
        filter.process(chunk, &mut out);
    }
    out
}

fn rms_db(pcm: &[i16]) -> f64 {
    let energy = pcm.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / pcm.len().max(1) as f64;
    10.0 * (energy.max(1e-9) / (32768.0f64 * 32768.0)).log10()
}

fn scaled(pcm: &[i16], factor: f32) -> Vec<i16> {
    pcm.iter().map(|s| (f32::from(*s) * factor) as i16).collect()
}

#[test]
fn denoise_removes_steady_noise_and_keeps_the_speech() {
    let speech = speech48("near-talker-16k.wav");
    let lead = 48_000; // a second of noise alone first
    let mut clean = vec![0i16; lead];
    clean.extend_from_slice(&speech);
    let hiss = fan(clean.len(), 1_500, 1);
    let noisy: Vec<i16> = clean.iter().zip(&hiss).map(|(s, n)| s.saturating_add(*n)).collect();
    let out = run(NoiseMode::Denoise, &noisy);
    assert_eq!(out.len(), noisy.len() / FRAME * FRAME);
    // The noise-only second, after RNNoise settled (the last half of it).
    let before = rms_db(&noisy[lead / 2..lead]);
    let after = rms_db(&out[lead / 2 + LATENCY_SAMPLES..lead]);
    assert!(before - after >= 10.0, "noise {before:.1} dBFS → {after:.1} dBFS");
    let kept = best_correlation(&clean[lead..], &out[lead..], 4_800);
    assert!(kept.coefficient >= 0.9, "speech kept: {kept:?}");
    assert!(
        kept.lag_samples.abs_diff(LATENCY_SAMPLES as isize) <= 8,
        "lag {} against {LATENCY_SAMPLES}",
        kept.lag_samples
    );
}

#[test]
fn voice_focus_attenuates_a_quieter_second_voice_that_denoise_keeps() {
    let near = speech48("near-talker-16k.wav");
    let far = scaled(&speech48("far-talker-16k.wav"), 0.1); // 20 dB down: across the room
    let mut input = near.clone();
    input.extend(vec![0; 24_000]);
    let far_at = input.len();
    input.extend_from_slice(&far);
    input.extend(vec![0; 24_000]);
    let near_again = input.len();
    input.extend_from_slice(&near);
    let denoised = run(NoiseMode::Denoise, &input);
    let focused = run(NoiseMode::VoiceFocus, &input);
    let segment = |pcm: &[i16], at: usize, len: usize| rms_db(&pcm[at + LATENCY_SAMPLES..at + len]);
    let far_in = rms_db(&input[far_at..far_at + far.len()]);
    let far_denoised = segment(&denoised, far_at, far.len());
    let far_focused = segment(&focused, far_at, far.len());
    assert!(far_in - far_denoised < 4.0, "denoise keeps every voice: {far_in:.1} → {far_denoised:.1} dBFS");
    assert!(
        far_denoised - far_focused >= 10.0,
        "voice_focus drops the far voice: {far_denoised:.1} → {far_focused:.1} dBFS"
    );
    // The primary talker passes in both modes, before and after the background voice.
    for (mode, out) in [("denoise", &denoised), ("voice_focus", &focused)] {
        for at in [0, near_again] {
            let kept = best_correlation(&near, &out[at..(at + near.len() + 4_800).min(out.len())], 4_800);
            assert!(kept.coefficient >= 0.9, "{mode}: the near talker at {at}: {kept:?}");
        }
    }
}

#[test]
fn chunking_does_not_change_the_output_and_silence_stays_silent() {
    let speech = speech48("near-talker-16k.wav");
    let whole = {
        let mut filter = NoiseFilter::new(NoiseMode::VoiceFocus);
        let mut out = Vec::new();
        filter.process(&speech, &mut out);
        out
    };
    for size in [1, 333, 960, 4_801] {
        let mut filter = NoiseFilter::new(NoiseMode::VoiceFocus);
        let mut out = Vec::new();
        for chunk in speech.chunks(size) {
            filter.process(chunk, &mut out);
        }
        assert_eq!(out, whole, "chunks of {size}");
    }
    let silent = run(NoiseMode::Denoise, &vec![0; 48_000]);
    assert!(silent.iter().all(|s| s.unsigned_abs() <= 1));
    let mut filter = NoiseFilter::new(NoiseMode::VoiceFocus);
    let mut out = Vec::new();
    filter.process(&[i16::MIN; 5_000], &mut out);
    filter.process(&[i16::MAX; 5_000], &mut out);
    assert_eq!(filter.mode(), NoiseMode::VoiceFocus);
}
