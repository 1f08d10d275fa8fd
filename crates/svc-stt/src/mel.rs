//! Whisper's audio front end: the Slaney mel filterbank and the log-mel spectrogram, computed here
//! instead of shipped as a file.
//!
//! The filterbank reproduces librosa's `mel(sr=16000, n_fft=400, n_mels=80)` (Slaney mel scale,
//! Slaney area normalisation), which is what OpenAI's `mel_filters.npz` holds. The spectrogram
//! follows OpenAI's `log_mel_spectrogram`: periodic Hann window of 400 samples, hop 160, centred
//! frames with reflect padding, power spectrum, mel projection, `log10` clamped at 1e-10, then
//! clamped to (max − 8) and mapped by (x + 4) / 4. Whisper was trained on exactly these features;
//! candle's own `pcm_to_mel` uses whisper.cpp's uncentred frames and pads to 15 s multiples, which
//! is why it is not used.

use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

/// Whisper's FFT size: 25 ms at 16 kHz.
pub(crate) const N_FFT: usize = 400;
/// Hop between frames: 10 ms at 16 kHz.
pub(crate) const HOP: usize = 160;
/// Frequency bins of a real FFT of [`N_FFT`] points.
pub(crate) const N_FREQS: usize = N_FFT / 2 + 1;

/// Hz → mel on the Slaney scale (linear below 1 kHz, logarithmic above), as librosa with `htk=False`.
fn hz_to_mel(hz: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    let min_log_mel = MIN_LOG_HZ / F_SP;
    let logstep = 6.4f64.ln() / 27.0;
    if hz >= MIN_LOG_HZ { min_log_mel + (hz / MIN_LOG_HZ).ln() / logstep } else { hz / F_SP }
}

/// The inverse of [`hz_to_mel`].
fn mel_to_hz(mel: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    let min_log_mel = MIN_LOG_HZ / F_SP;
    let logstep = 6.4f64.ln() / 27.0;
    if mel >= min_log_mel { MIN_LOG_HZ * (logstep * (mel - min_log_mel)).exp() } else { F_SP * mel }
}

/// numpy's `linspace(start, stop, n)`: `start + i * step`, the last point exactly `stop`.
fn linspace(start: f64, stop: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![start];
    }
    let step = (stop - start) / (n - 1) as f64;
    (0..n).map(|i| if i == n - 1 { stop } else { start + i as f64 * step }).collect()
}

/// The mel filterbank, `n_mels` rows of [`N_FREQS`] weights, row-major.
///
/// Triangles between consecutive mel-spaced frequencies from 0 Hz to `sample_rate / 2`, each scaled
/// by 2 / (its bandwidth in Hz) so that every filter has the same area.
pub(crate) fn mel_filters(sample_rate: u32, n_mels: usize) -> Vec<f32> {
    let nyquist = f64::from(sample_rate) / 2.0;
    let fft_freqs = linspace(0.0, nyquist, N_FREQS);
    let mel_f: Vec<f64> = linspace(hz_to_mel(0.0), hz_to_mel(nyquist), n_mels + 2).into_iter().map(mel_to_hz).collect();
    let mut out = vec![0f32; n_mels * N_FREQS];
    for (i, row) in out.chunks_exact_mut(N_FREQS).enumerate() {
        let (lo, mid, hi) = (mel_f[i], mel_f[i + 1], mel_f[i + 2]);
        let enorm = 2.0 / (hi - lo);
        for (w, &f) in row.iter_mut().zip(&fft_freqs) {
            let lower = (f - lo) / (mid - lo);
            let upper = (hi - f) / (hi - mid);
            *w = (lower.min(upper).max(0.0) * enorm) as f32;
        }
    }
    out
}

/// Computes log-mel spectrograms; built once per model and shared by all calls.
pub(crate) struct LogMel {
    filters: Vec<f32>,
    n_mels: usize,
    window: Vec<f32>,
    fft: Arc<dyn Fft<f32>>,
}

impl std::fmt::Debug for LogMel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogMel").field("n_mels", &self.n_mels).finish_non_exhaustive()
    }
}

impl LogMel {
    /// A front end with `n_mels` Slaney filters at `sample_rate`.
    pub(crate) fn new(sample_rate: u32, n_mels: usize) -> Self {
        // torch.hann_window(400) is periodic: the denominator is N, not N − 1.
        let window = (0..N_FFT)
            .map(|i| (0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / N_FFT as f64).cos()) as f32)
            .collect();
        let fft = FftPlanner::new().plan_fft_forward(N_FFT);
        LogMel { filters: mel_filters(sample_rate, n_mels), n_mels, window, fft }
    }

    /// Mel bands per frame.
    pub(crate) fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// The normalised log-mel spectrogram of `samples` followed by silence, `n_frames` frames long,
    /// as `n_mels` rows of `n_frames` values (the layout of Whisper's `[n_mels, frames]` input).
    ///
    /// Frame `t` is centred on sample `t * HOP` of the signal zero-padded to `n_frames * HOP` samples
    /// and reflect-padded by `N_FFT / 2` at both ends; samples beyond that length are ignored.
    pub(crate) fn compute(&self, samples: &[f32], n_frames: usize) -> Vec<f32> {
        let len = n_frames * HOP;
        let at = |i: usize| samples.get(i).copied().unwrap_or(0.0);
        // The padded signal's sample `p` is `x[p - N_FFT/2]`, reflected (without repeating the edge) at both ends.
        let padded = |p: usize| -> f32 {
            let half = N_FFT / 2;
            if p < half {
                at(half - p)
            } else if p - half < len {
                at(p - half)
            } else {
                let j = p - half;
                (2 * (len - 1)).checked_sub(j).map_or(0.0, at)
            }
        };
        let mut power = vec![0f32; N_FREQS];
        let mut buf = vec![Complex::new(0f32, 0f32); N_FFT];
        let mut scratch = vec![Complex::new(0f32, 0f32); self.fft.get_inplace_scratch_len()];
        let mut mel = vec![0f32; self.n_mels * n_frames];
        for t in 0..n_frames {
            for (k, (b, w)) in buf.iter_mut().zip(&self.window).enumerate() {
                *b = Complex::new(padded(t * HOP + k) * w, 0.0);
            }
            self.fft.process_with_scratch(&mut buf, &mut scratch);
            for (p, c) in power.iter_mut().zip(&buf) {
                *p = c.norm_sqr();
            }
            for (m, filter) in self.filters.chunks_exact(N_FREQS).enumerate() {
                let e: f32 = filter.iter().zip(&power).map(|(f, p)| f * p).sum();
                mel[m * n_frames + t] = e.max(1e-10).log10();
            }
        }
        let floor = mel.iter().copied().fold(f32::NEG_INFINITY, f32::max) - 8.0;
        for v in &mut mel {
            *v = (v.max(floor) + 4.0) / 4.0;
        }
        mel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values from librosa's algorithm evaluated in float64 (the note's Appendix A).
    #[test]
    fn filterbank_matches_librosa() {
        let f = mel_filters(16_000, 80);
        assert_eq!(f.len(), 80 * N_FREQS);
        let at = |m: usize, k: usize| f[m * N_FREQS + k];
        let cases: [(usize, usize, f32); 9] = [
            (0, 1, 0.024_862_594),
            (0, 2, 0.0),
            (1, 1, 0.001_990_822),
            (1, 2, 0.022_871_772),
            (10, 11, 0.004_954_375),
            (40, 43, 0.014_735_566),
            (79, 192, 0.003_164_712),
            (79, 199, 0.000_448_759),
            (79, 200, 0.0),
        ];
        for (m, k, want) in cases {
            let got = at(m, k);
            assert!((got - want).abs() <= 1e-6 * want.abs().max(1e-3), "filter[{m}][{k}] = {got}, want {want}");
        }
        // The DC bin belongs to no filter and every filter is a single non-negative bump.
        assert_eq!(at(0, 0), 0.0);
        for row in f.chunks_exact(N_FREQS) {
            assert!(row.iter().all(|&w| w >= 0.0));
            let nonzero: Vec<usize> = (0..N_FREQS).filter(|&k| row[k] > 0.0).collect();
            assert!(!nonzero.is_empty());
            assert_eq!(nonzero.len(), nonzero[nonzero.len() - 1] - nonzero[0] + 1, "a filter with a gap");
        }
    }

    #[test]
    fn slaney_scale_round_trips() {
        for hz in [0.0, 100.0, 999.0, 1000.0, 4321.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9);
        }
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
    }

    #[test]
    fn a_tone_lights_its_band_and_silence_is_flat() {
        let lm = LogMel::new(16_000, 80);
        // A 1 kHz tone: the loudest band is the one whose filter peaks nearest 1 kHz.
        let tone: Vec<f32> =
            (0..16_000).map(|i| (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / 16_000.0).sin()).collect();
        let n_frames = 200;
        let mel = lm.compute(&tone, n_frames);
        assert_eq!(mel.len(), 80 * n_frames);
        let t = 50;
        let loudest =
            (0..80).max_by(|&a, &b| mel[a * n_frames + t].total_cmp(&mel[b * n_frames + t])).expect("80 bands");
        let filters = mel_filters(16_000, 80);
        let peak_bin = (0..N_FREQS)
            .max_by(|&a, &b| filters[loudest * N_FREQS + a].total_cmp(&filters[loudest * N_FREQS + b]))
            .expect("bins");
        assert!((peak_bin as i64 - 25).abs() <= 1, "band {loudest} peaks at bin {peak_bin}, 1 kHz is bin 25");
        // Normalised: the maximum is (log10(max) + 4) / 4 and nothing is more than 2 below it.
        let max = mel.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert!(mel.iter().all(|&v| v >= max - 2.0 - 1e-6));

        let silence = lm.compute(&[], 100);
        assert!(silence.iter().all(|&v| (v - (-10.0f32 + 4.0) / 4.0).abs() < 1e-6));
    }
}
