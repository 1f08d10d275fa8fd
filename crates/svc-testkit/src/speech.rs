//! Speech-like PCM without external tools: a small formant synthesiser.
//!
//! Each letter of the text becomes a short voiced segment (a glottal pulse train at a gliding
//! pitch, shaped by two vowel formants), spaces become pauses, and every segment has an attack
//! and release envelope. The result has the spectral shape, pitch and rhythm of speech — enough
//! for voice-activity detectors, resamplers and correlation checks — and is fully deterministic.

use std::f64::consts::PI;

/// Milliseconds of sound per letter.
pub const MS_PER_LETTER: u32 = 55;
/// Milliseconds of pause per space.
pub const MS_PER_SPACE: u32 = 90;

/// (F1, F2) of a few vowels, Hz.
const FORMANTS: [(f64, f64); 5] = [(730.0, 1090.0), (530.0, 1840.0), (270.0, 2290.0), (570.0, 840.0), (300.0, 870.0)];

/// Synthesises `text` as mono PCM16 at `rate_hz`.
pub fn speech(text: &str, rate_hz: u32) -> Vec<i16> {
    let rate = f64::from(rate_hz);
    let mut out = Vec::new();
    let mut phase = 0.0f64;
    for (index, c) in text.chars().enumerate() {
        if c.is_whitespace() {
            out.extend(std::iter::repeat_n(0i16, (rate_hz * MS_PER_SPACE / 1000) as usize));
            continue;
        }
        let samples = (rate_hz * MS_PER_LETTER / 1000) as usize;
        let (f1, f2) = FORMANTS[(c as usize + index) % FORMANTS.len()];
        let pitch_start = 110.0 + ((c as u32 % 7) as f64) * 12.0;
        for n in 0..samples {
            let t = n as f64 / samples as f64;
            let pitch = pitch_start * (1.0 + 0.15 * (PI * t).sin());
            phase += pitch / rate;
            if phase >= 1.0 {
                phase -= 1.0;
            }
            // Harmonics of the pitch weighted by their distance to the two formants.
            let mut value = 0.0;
            let mut harmonic = 1.0;
            while harmonic * pitch < (rate / 2.0).min(4000.0) {
                let freq = harmonic * pitch;
                let weight = resonance(freq, f1, 90.0) + 0.6 * resonance(freq, f2, 120.0) + 0.02;
                value += weight * (2.0 * PI * harmonic * phase).sin() / harmonic.sqrt();
                harmonic += 1.0;
            }
            let envelope = (t * 8.0).min(1.0) * ((1.0 - t) * 8.0).min(1.0);
            out.push((value * envelope * 5000.0).clamp(-32_000.0, 32_000.0) as i16);
        }
    }
    out
}

fn resonance(freq: f64, centre: f64, bandwidth: f64) -> f64 {
    let x = (freq - centre) / bandwidth;
    1.0 / (1.0 + x * x)
}

/// Milliseconds of `samples` at `rate_hz`.
pub fn duration_ms(samples: usize, rate_hz: u32) -> u64 {
    samples as u64 * 1000 / u64::from(rate_hz)
}

/// Normalised cross-correlation of `a` and `b` over their common length (1.0 = identical shape).
pub fn correlation(a: &[i16], b: &[i16]) -> f64 {
    let n = a.len().min(b.len());
    if n == 0 {
        return 0.0;
    }
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for i in 0..n {
        let (x, y) = (f64::from(a[i]), f64::from(b[i]));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    ab / (aa.sqrt() * bb.sqrt())
}

/// Lowercase words without punctuation (apostrophes inside words kept): what a word error rate
/// compares.
pub fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| c.is_whitespace() || (c.is_ascii_punctuation() && c != '\''))
        .map(|w| w.trim_matches('\'').to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word error rate of `hypothesis` against `reference`: word-level Levenshtein distance
/// (substitutions, insertions, deletions) over the number of reference words.
pub fn word_error_rate(reference: &str, hypothesis: &str) -> f64 {
    let (r, h) = (words(reference), words(hypothesis));
    if r.is_empty() {
        return if h.is_empty() { 0.0 } else { 1.0 };
    }
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut row = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            let sub = prev[j] + usize::from(rw != hw);
            row[j + 1] = sub.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[h.len()] as f64 / r.len() as f64
}

/// Root-mean-square level of `samples`.
pub fn rms(samples: &[i16]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    (samples.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / samples.len() as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_has_rhythm_and_level() {
        let pcm = speech("hi there", 24_000);
        assert_eq!(pcm.len(), 7 * 24 * 55 + 24 * 90);
        assert!(rms(&pcm) > 500.0, "audible: {}", rms(&pcm));
        // The pause between the words is silent.
        let pause = &pcm[2 * 24 * 55..2 * 24 * 55 + 24 * 90];
        assert_eq!(rms(pause), 0.0);
        assert!(correlation(&pcm, &pcm) > 0.999);
        assert!(correlation(&pcm, &speech("other words", 24_000)) < 0.5);
    }
}
