//! Rate conversion between the room's 48 kHz and the telephone's 8 kHz, an integer ratio of 6.
//!
//! One Kaiser-windowed sinc low-pass (192 taps at 48 kHz, cut-off 3.7 kHz, β = 7) serves both
//! directions: the [`Downsampler`] filters then keeps every sixth sample, the [`Upsampler`] runs
//! the same filter as six 32-tap polyphase branches (zero-stuffing without the multiplications by
//! zero). The filter is flat within 0.1 dB to about 3.1 kHz and down more than 60 dB from about
//! 4.3 kHz, so what G.711 can carry passes and nothing above 8 kHz's Nyquist frequency folds
//! back (measured in the tests below). Each direction delays by half the filter, 95.5 samples at
//! 48 kHz (2 ms).
//!
//! `svc-provider` has a general resampler, but it lives a layer above this crate; this one only
//! needs one ratio and keeps the telephone path self-contained.

/// The rate ratio between the room and the telephone.
pub const RATIO: usize = 6;
/// Filter length, in 48 kHz taps: 32 per polyphase branch.
const TAPS: usize = RATIO * BRANCH_TAPS;
const BRANCH_TAPS: usize = 32;
const CUTOFF_HZ: f64 = 3_700.0;
const KAISER_BETA: f64 = 7.0;

/// The zeroth-order modified Bessel function of the first kind, by its power series (which
/// converges quickly for the β a window uses).
fn bessel_i0(x: f64) -> f64 {
    let (mut sum, mut term) = (1.0, 1.0);
    for k in 1..50 {
        let factor = x / (2.0 * k as f64);
        term *= factor * factor;
        sum += term;
        if term < sum * 1e-12 {
            break;
        }
    }
    sum
}

/// The low-pass filter at 48 kHz, normalised to unit gain at DC.
fn low_pass() -> [f32; TAPS] {
    let centre = (TAPS - 1) as f64 / 2.0;
    let cutoff = CUTOFF_HZ / 48_000.0;
    let mut taps = [0f64; TAPS];
    for (n, tap) in taps.iter_mut().enumerate() {
        let t = n as f64 - centre;
        let sinc = if t == 0.0 {
            2.0 * cutoff
        } else {
            (2.0 * std::f64::consts::PI * cutoff * t).sin() / (std::f64::consts::PI * t)
        };
        let ratio = t / centre;
        let window = bessel_i0(KAISER_BETA * (1.0 - ratio * ratio).max(0.0).sqrt()) / bessel_i0(KAISER_BETA);
        *tap = sinc * window;
    }
    let sum: f64 = taps.iter().sum();
    taps.map(|tap| (tap / sum) as f32)
}

fn to_i16(sample: f32) -> i16 {
    sample.round().clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16
}

/// 48 kHz → 8 kHz. Streaming: any input length works, and six input samples make one output
/// sample whatever the chunking (a 960-sample room frame gives exactly 160).
#[derive(Debug, Clone)]
pub struct Downsampler {
    taps: [f32; TAPS],
    /// The last `TAPS - 1` input samples, then the unconsumed input.
    history: Vec<f32>,
    /// Index in `history` of the next output's window.
    next: usize,
}

impl Default for Downsampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Downsampler {
    /// A converter whose history is silence.
    #[must_use]
    pub fn new() -> Downsampler {
        Downsampler { taps: low_pass(), history: vec![0.0; TAPS - 1], next: 0 }
    }

    /// Converts `input` (48 kHz), appending the 8 kHz output to `out`.
    pub fn process(&mut self, input: &[i16], out: &mut Vec<i16>) {
        self.history.extend(input.iter().map(|&s| f32::from(s)));
        while let Some(window) = self.history.get(self.next..self.next + TAPS) {
            let sum: f32 = window.iter().zip(&self.taps).map(|(x, h)| x * h).sum();
            out.push(to_i16(sum));
            self.next += RATIO;
        }
        self.history.drain(..self.next);
        self.next = 0;
    }

    /// Forgets the history, for a new stream.
    pub fn reset(&mut self) {
        self.history.clear();
        self.history.resize(TAPS - 1, 0.0);
        self.next = 0;
    }
}

/// 8 kHz → 48 kHz: six output samples per input sample.
#[derive(Debug, Clone)]
pub struct Upsampler {
    /// `branches[p][j]`: the taps producing output phase `p`, ordered oldest input first and
    /// scaled by the ratio (zero-stuffing divides the signal's energy among six samples).
    branches: [[f32; BRANCH_TAPS]; RATIO],
    /// The last `BRANCH_TAPS` input samples, oldest first.
    history: [f32; BRANCH_TAPS],
}

impl Default for Upsampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Upsampler {
    /// A converter whose history is silence.
    #[must_use]
    pub fn new() -> Upsampler {
        let taps = low_pass();
        let mut branches = [[0f32; BRANCH_TAPS]; RATIO];
        for (phase, branch) in branches.iter_mut().enumerate() {
            for (j, tap) in branch.iter_mut().enumerate() {
                *tap = RATIO as f32 * taps[phase + RATIO * (BRANCH_TAPS - 1 - j)];
            }
        }
        Upsampler { branches, history: [0.0; BRANCH_TAPS] }
    }

    /// Converts `input` (8 kHz), appending the 48 kHz output to `out`.
    pub fn process(&mut self, input: &[i16], out: &mut Vec<i16>) {
        out.reserve(input.len() * RATIO);
        for &sample in input {
            self.history.copy_within(1.., 0);
            self.history[BRANCH_TAPS - 1] = f32::from(sample);
            for branch in &self.branches {
                let sum: f32 = branch.iter().zip(&self.history).map(|(h, x)| h * x).sum();
                out.push(to_i16(sum));
            }
        }
    }

    /// Forgets the history, for a new stream.
    pub fn reset(&mut self) {
        self.history = [0.0; BRANCH_TAPS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f64, rate: f64, seconds: f64, amplitude: f64) -> Vec<i16> {
        let n = (rate * seconds) as usize;
        (0..n).map(|i| (amplitude * (2.0 * std::f64::consts::PI * hz * i as f64 / rate).sin()).round() as i16).collect()
    }

    fn rms(samples: &[i16]) -> f64 {
        (samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len() as f64).sqrt()
    }

    fn db(ratio: f64) -> f64 {
        20.0 * ratio.log10()
    }

    /// Power at `hz`, by the Goertzel algorithm, as an amplitude.
    fn amplitude_at(samples: &[i16], hz: f64, rate: f64) -> f64 {
        let w = 2.0 * std::f64::consts::PI * hz / rate;
        let (mut s1, mut s2) = (0.0, 0.0);
        for &x in samples {
            let s = f64::from(x) + 2.0 * w.cos() * s1 - s2;
            s2 = s1;
            s1 = s;
        }
        let power = s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2;
        2.0 * power.sqrt() / samples.len() as f64
    }

    fn down(input: &[i16]) -> Vec<i16> {
        let mut converter = Downsampler::new();
        let mut out = Vec::new();
        for frame in input.chunks(960) {
            converter.process(frame, &mut out);
        }
        out
    }

    fn up(input: &[i16]) -> Vec<i16> {
        let mut converter = Upsampler::new();
        let mut out = Vec::new();
        for frame in input.chunks(160) {
            converter.process(frame, &mut out);
        }
        out
    }

    #[test]
    fn down_keeps_the_telephone_band_and_rejects_what_would_alias() {
        for hz in [300.0, 1_000.0, 3_000.0] {
            let input = tone(hz, 48_000.0, 0.5, 10_000.0);
            let output = down(&input);
            assert_eq!(output.len(), input.len() / 6);
            let gain = db(rms(&output[100..]) / rms(&input));
            assert!(gain.abs() < 0.5, "{hz} Hz: {gain:.2} dB");
        }
        for hz in [5_000.0, 7_000.0, 12_000.0] {
            let input = tone(hz, 48_000.0, 0.5, 10_000.0);
            let gain = db(rms(&down(&input)[100..]) / rms(&input));
            assert!(gain < -40.0, "{hz} Hz folds back at {gain:.1} dB");
        }
    }

    #[test]
    fn up_keeps_the_tone_and_suppresses_its_images() {
        for hz in [300.0, 1_000.0, 3_000.0] {
            let input = tone(hz, 8_000.0, 0.5, 10_000.0);
            let output = up(&input);
            assert_eq!(output.len(), input.len() * 6);
            let steady = &output[600..];
            let gain = db(amplitude_at(steady, hz, 48_000.0) / 10_000.0);
            assert!(gain.abs() < 0.5, "{hz} Hz: {gain:.2} dB");
            // Zero-stuffing mirrors the tone around multiples of 8 kHz.
            for image in [8_000.0 - hz, 8_000.0 + hz, 16_000.0 - hz] {
                let level = db(amplitude_at(steady, image, 48_000.0) / 10_000.0);
                assert!(level < -40.0, "{hz} Hz's image at {image} Hz: {level:.1} dB");
            }
        }
    }

    #[test]
    fn chunking_does_not_change_the_output() {
        let input = tone(440.0, 48_000.0, 0.1, 8_000.0);
        let whole = down(&input);
        let mut converter = Downsampler::new();
        let mut pieces = Vec::new();
        for chunk in input.chunks(7) {
            converter.process(chunk, &mut pieces);
        }
        assert_eq!(whole, pieces);
    }

    #[test]
    fn full_scale_clips_instead_of_wrapping() {
        let square: Vec<i16> = (0..4_800).map(|i| if (i / 24) % 2 == 0 { i16::MAX } else { i16::MIN }).collect();
        let output = up(&down(&square));
        // Gibbs overshoot saturates; a wrap would flip the sign of a full-scale sample.
        assert!(output.iter().any(|&s| s == i16::MAX || s == i16::MIN) || rms(&output) > 1_000.0);
        assert!(output.windows(2).all(|w| (i32::from(w[0]) - i32::from(w[1])).abs() < 40_000));
    }
}
