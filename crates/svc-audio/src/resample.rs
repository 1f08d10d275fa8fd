//! Streaming band-limited resampling of mono i16 PCM between the room's 48 kHz and provider rates.
//!
//! Why: LiveKit delivers Opus-decoded 48 kHz frames, while providers want (and send) PCM16 at
//! their own rate (providers.md §1.1): Gemini takes 16 kHz and returns 24 kHz, OpenAI Realtime
//! 24 kHz, GPT-Live 16 or 24 kHz, xAI 8–48 kHz, G.711 paths 8 kHz. The runtime feeds each
//! provider at its rate (48 kHz → 8/16/24 kHz) and, where it publishes provider audio at 48 kHz,
//! brings it back up (16/24 kHz → 48 kHz); a phone call's media path (`svc-rtp`) converts between
//! the room and G.711's 8 kHz both ways. One [`Resampler`] per direction per stream.
//!
//! How: a rational `L/M` polyphase FIR (the ratio reduced by its greatest common divisor: 48 kHz
//! → 16 kHz is 1/3, 24 kHz → 16 kHz 2/3, espeak-ng's 22.05 kHz → 24 kHz 160/147), so every output
//! sample is exactly one phase's dot product with the newest inputs. The prototype low-pass is a
//! Kaiser-windowed sinc designed at the up-sampled rate with its cutoff at 0.45 × the lower sample
//! rate (pass band to 0.4×, stop band from 0.5×, i.e. the lower Nyquist, ~80 dB attenuation),
//! which removes aliases when going down and images when going up. Each phase is normalised to unity DC gain.
//!
//! Streaming: input is pushed sample by sample into a doubled delay line, so arbitrary chunk
//! sizes give bit-identical output to one-shot processing; `process` does not allocate beyond
//! growing the caller's `output`. The filter has linear phase: output sample `k + latency` lines up
//! with input time `k` (see [`Resampler::latency_samples`]); [`Resampler::flush`] drains the tail.

use thiserror::Error;

/// Stop-band attenuation the Kaiser design aims for, in dB.
const ATTENUATION_DB: f64 = 80.0;
/// Pass-band edge as a fraction of the lower of the two sample rates.
const PASS_EDGE: f64 = 0.40;
/// Stop-band edge as a fraction of the lower of the two sample rates (its Nyquist).
const STOP_EDGE: f64 = 0.50;

/// The highest sample rate a [`Resampler`] takes or gives.
pub const MAX_RATE_HZ: u32 = 384_000;
/// The largest term of a reduced ratio `L/M` (the filter holds about `L` × 50 coefficients).
pub const MAX_FACTOR: usize = 1_000;

/// Why a [`Resampler`] cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ResampleError {
    /// The rate pair is not a supported conversion (a rate of 0 or above [`MAX_RATE_HZ`], or a
    /// ratio whose reduced terms exceed [`MAX_FACTOR`]).
    #[error(
        "unsupported resampling {from_hz} Hz -> {to_hz} Hz (supported: rates 1..=384000 Hz whose ratio reduces to terms of at most 1000)"
    )]
    Unsupported {
        /// Requested input rate.
        from_hz: u32,
        /// Requested output rate.
        to_hz: u32,
    },
}

/// Streaming polyphase resampler for mono i16 PCM.
///
/// Any two rates up to [`MAX_RATE_HZ`] whose ratio reduces to terms of at most [`MAX_FACTOR`]
/// (every rate pair of the room, the providers, the phone and espeak-ng); a rate to itself is a
/// pass-through with zero latency.
#[derive(Debug, Clone)]
pub struct Resampler {
    from_hz: u32,
    to_hz: u32,
    /// Up-sampling factor.
    up: usize,
    /// Down-sampling factor.
    down: usize,
    /// Taps per phase.
    taps: usize,
    /// `up` phases of `taps` coefficients each, phase `p` at `[p * taps..(p + 1) * taps]`,
    /// ordered newest input first.
    phases: Vec<f32>,
    /// Delay line of length `2 * taps`; each sample is written twice so that the newest `taps`
    /// samples are always the contiguous slice `delay[pos..pos + taps]`, newest first.
    delay: Vec<f32>,
    pos: usize,
    /// Position of the next output in the up-sampled domain, relative to the next input sample.
    next: usize,
    /// Filter group delay in the up-sampled domain (a multiple of `up * down`).
    group_delay: usize,
}

impl Resampler {
    /// Builds a resampler from `from_hz` to `to_hz`.
    ///
    /// # Errors
    ///
    /// [`ResampleError::Unsupported`] for a rate of 0 or above [`MAX_RATE_HZ`], or a ratio whose
    /// reduced terms exceed [`MAX_FACTOR`].
    pub fn new(from_hz: u32, to_hz: u32) -> Result<Self, ResampleError> {
        let unsupported = ResampleError::Unsupported { from_hz, to_hz };
        if from_hz == 0 || to_hz == 0 || from_hz > MAX_RATE_HZ || to_hz > MAX_RATE_HZ {
            return Err(unsupported);
        }
        let common = gcd(from_hz, to_hz);
        let (up, down) = ((to_hz / common) as usize, (from_hz / common) as usize);
        if up > MAX_FACTOR || down > MAX_FACTOR {
            return Err(unsupported);
        }
        Ok(Self::design(from_hz, to_hz, up, down))
    }

    /// 48 kHz → 8 kHz: the room to the telephone (G.711).
    pub fn room_to_telephone() -> Self {
        Self::design(48_000, 8_000, 1, 6)
    }

    /// 8 kHz → 48 kHz: the telephone to the room.
    pub fn telephone_to_room() -> Self {
        Self::design(8_000, 48_000, 6, 1)
    }

    /// The filter for `from_hz * up / down = to_hz` (`up` and `down` coprime).
    fn design(from_hz: u32, to_hz: u32, up: usize, down: usize) -> Self {
        if up == 1 && down == 1 {
            return Self {
                from_hz,
                to_hz,
                up,
                down,
                taps: 0,
                phases: Vec::new(),
                delay: Vec::new(),
                pos: 0,
                next: 0,
                group_delay: 0,
            };
        }

        // Kaiser design at the up-sampled rate `from_hz * up`, in cycles per sample.
        let rate = f64::from(from_hz) * up as f64;
        let low = f64::from(from_hz.min(to_hz));
        let transition = (STOP_EDGE - PASS_EDGE) * low / rate;
        let cutoff = 0.5 * (PASS_EDGE + STOP_EDGE) * low / rate;
        let order = (ATTENUATION_DB - 8.0) / (2.285 * 2.0 * std::f64::consts::PI * transition);
        // The group delay is a whole number of input and output samples when one factor is 1
        // (the room's, the providers' and the phone's ratios: latency and flush are exact); for
        // a fractional ratio a multiple of `up * down` would make the filter hundreds of times
        // longer than its design (160 × 147 for 22.05 → 24 kHz), so the delay is a whole number
        // of input samples and its output-side figure is rounded (at most half a sample off).
        let step = if up == 1 || down == 1 { up * down } else { up };
        let half = ((order / 2.0).ceil() as usize).div_ceil(step) * step;
        let length = 2 * half + 1;
        let taps = length.div_ceil(up);
        let beta = 0.1102 * (ATTENUATION_DB - 8.7);
        let i0_beta = bessel_i0(beta);

        let mut prototype = vec![0.0f64; taps * up];
        for (n, h) in prototype.iter_mut().enumerate().take(length) {
            let t = n as f64 - half as f64;
            let x = 2.0 * cutoff * t;
            let sinc = if t == 0.0 { 1.0 } else { (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x) };
            let r = t / half as f64;
            let window = bessel_i0(beta * (1.0 - r * r).max(0.0).sqrt()) / i0_beta;
            *h = 2.0 * cutoff * sinc * window;
        }

        // Polyphase split: phase p, tap j uses h[p + j * up] against input x[i - j].
        let mut phases = vec![0.0f32; taps * up];
        for p in 0..up {
            let sum: f64 = (0..taps).map(|j| prototype[p + j * up]).sum();
            for j in 0..taps {
                phases[p * taps + j] = (prototype[p + j * up] / sum) as f32;
            }
        }

        Self { from_hz, to_hz, up, down, taps, phases, delay: vec![0.0; 2 * taps], pos: 0, next: 0, group_delay: half }
    }

    /// Input rate in Hz.
    pub fn from_hz(&self) -> u32 {
        self.from_hz
    }

    /// Output rate in Hz.
    pub fn to_hz(&self) -> u32 {
        self.to_hz
    }

    /// Delay introduced by the filter, in output samples: output sample `k + latency_samples()`
    /// corresponds to input time `k` (expressed at the output rate; exact when one term of the
    /// ratio is 1, rounded to the nearest sample otherwise).
    pub fn latency_samples(&self) -> usize {
        (self.group_delay + self.down / 2) / self.down
    }

    /// Resamples `input` (any length, including 0) and appends the result to `output`.
    ///
    /// Filter state carries over between calls, so feeding a stream in chunks yields exactly the
    /// same samples as feeding it at once. Does not allocate beyond growing `output`.
    pub fn process(&mut self, input: &[i16], output: &mut Vec<i16>) {
        if self.taps == 0 {
            output.extend_from_slice(input);
            return;
        }
        output.reserve((input.len() * self.up).div_ceil(self.down));
        for &sample in input {
            self.push(f32::from(sample), output);
        }
    }

    /// Ends the stream: drains the samples still inside the filter (by feeding silence for one
    /// group delay), appends them to `output`, and resets the state for a new stream.
    pub fn flush(&mut self, output: &mut Vec<i16>) {
        if self.taps == 0 {
            return;
        }
        for _ in 0..self.group_delay / self.up {
            self.push(0.0, output);
        }
        self.reset();
    }

    /// Forgets all history (as after [`new`](Self::new)) without emitting anything.
    pub fn reset(&mut self) {
        self.delay.fill(0.0);
        self.pos = 0;
        self.next = 0;
    }

    /// Pushes one input sample and emits every output sample that becomes computable.
    fn push(&mut self, sample: f32, output: &mut Vec<i16>) {
        let taps = self.taps;
        self.pos = if self.pos == 0 { taps - 1 } else { self.pos - 1 };
        self.delay[self.pos] = sample;
        self.delay[self.pos + taps] = sample;
        let window = &self.delay[self.pos..self.pos + taps];
        while self.next < self.up {
            let phase = &self.phases[self.next * taps..(self.next + 1) * taps];
            output.push(to_i16(dot(window, phase)));
            self.next += self.down;
        }
        self.next -= self.up;
    }
}

/// Converts a whole clip (a sentence of speech, a test signal) from `from_hz` to `to_hz`: the
/// stream resampled and flushed, with the filter's delay taken off, so the result lines up with
/// the input and lasts as long (`len × to / from` samples, rounded).
///
/// # Errors
///
/// [`ResampleError::Unsupported`] as for [`Resampler::new`].
pub fn resample_clip(pcm: &[i16], from_hz: u32, to_hz: u32) -> Result<Vec<i16>, ResampleError> {
    let mut resampler = Resampler::new(from_hz, to_hz)?;
    let mut out = Vec::new();
    resampler.process(pcm, &mut out);
    resampler.flush(&mut out);
    let length = (pcm.len() as u64 * u64::from(to_hz) + u64::from(from_hz) / 2) / u64::from(from_hz);
    let start = resampler.latency_samples().min(out.len());
    out.drain(..start);
    out.resize(usize::try_from(length).unwrap_or(usize::MAX), 0);
    Ok(out)
}

/// Greatest common divisor.
fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Dot product with eight independent accumulators (lets the compiler vectorise the loop while
/// keeping the summation order, hence the output, deterministic).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks_a = a.chunks_exact(8);
    let chunks_b = b.chunks_exact(8);
    let tail: f32 = chunks_a.remainder().iter().zip(chunks_b.remainder()).map(|(x, y)| x * y).sum();
    for (ca, cb) in chunks_a.zip(chunks_b) {
        for k in 0..8 {
            acc[k] += ca[k] * cb[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Rounds and clamps to the i16 range.
fn to_i16(value: f32) -> i16 {
    value.round().clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16
}

/// Modified Bessel function of the first kind, order 0 (power series).
fn bessel_i0(x: f64) -> f64 {
    let mut sum = 1.0;
    let mut term = 1.0;
    let half = x / 2.0;
    for k in 1..64 {
        term *= (half / k as f64) * (half / k as f64);
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(rate: u32, freq: f64, amplitude: f64, len: usize) -> Vec<i16> {
        (0..len)
            .map(|n| {
                (amplitude * (2.0 * std::f64::consts::PI * freq * n as f64 / f64::from(rate)).sin()).round() as i16
            })
            .collect()
    }

    fn run(from: u32, to: u32, input: &[i16]) -> Vec<i16> {
        let mut r = Resampler::new(from, to).expect("supported");
        let mut out = Vec::new();
        r.process(input, &mut out);
        r.flush(&mut out);
        out
    }

    fn rms(x: &[i16]) -> f64 {
        (x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / x.len() as f64).sqrt()
    }

    /// Goertzel magnitude (peak amplitude estimate) of `freq` in `x`.
    fn goertzel(x: &[i16], rate: u32, freq: f64) -> f64 {
        let w = 2.0 * std::f64::consts::PI * freq / f64::from(rate);
        let coeff = 2.0 * w.cos();
        let (mut s1, mut s2) = (0.0, 0.0);
        for &v in x {
            let s0 = f64::from(v) + coeff * s1 - s2;
            s2 = s1;
            s1 = s0;
        }
        let power = s1 * s1 + s2 * s2 - coeff * s1 * s2;
        2.0 * power.max(0.0).sqrt() / x.len() as f64
    }

    fn zero_crossings(x: &[i16]) -> usize {
        x.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count()
    }

    /// A steady-state window away from both filter edges: whole 1 kHz cycles at every rate.
    fn settled(x: &[i16], rate: u32) -> &[i16] {
        let margin = (rate / 10) as usize; // 100 ms
        let len = (rate / 2) as usize; // 500 ms = 500 whole cycles of 1 kHz
        &x[margin..margin + len]
    }

    #[test]
    fn one_khz_keeps_frequency_and_amplitude_down() {
        let input = sine(48_000, 1000.0, 10_000.0, 48_000);
        for to in [24_000, 16_000, 8_000] {
            let out = run(48_000, to, &input);
            assert_eq!(
                out.len(),
                (48_000 * to as usize / 48_000) + Resampler::new(48_000, to).expect("ok").latency_samples()
            );
            let s = settled(&out, to);
            // 500 cycles → 1000 sign changes (±1 at the window edges).
            let zc = zero_crossings(s);
            assert!((999..=1001).contains(&zc), "{to}: {zc} zero crossings");
            let amp = goertzel(s, to, 1000.0);
            let err_db = 20.0 * (amp / 10_000.0).log10();
            assert!(err_db.abs() < 0.5, "{to}: amplitude error {err_db} dB");
            let rms_db = 20.0 * (rms(s) * 2f64.sqrt() / 10_000.0).log10();
            assert!(rms_db.abs() < 0.5, "{to}: rms error {rms_db} dB");
        }
    }

    #[test]
    fn one_khz_keeps_frequency_and_amplitude_up() {
        for from in [16_000, 24_000] {
            let input = sine(from, 1000.0, 10_000.0, from as usize);
            let out = run(from, 48_000, &input);
            let s = settled(&out, 48_000);
            let zc = zero_crossings(s);
            assert!((999..=1001).contains(&zc), "{from}: {zc} zero crossings");
            let err_db = 20.0 * (goertzel(s, 48_000, 1000.0) / 10_000.0).log10();
            assert!(err_db.abs() < 0.5, "{from}: amplitude error {err_db} dB");
        }
    }

    #[test]
    fn ten_khz_is_rejected_going_to_16k() {
        let input = sine(48_000, 10_000.0, 10_000.0, 48_000);
        let out = run(48_000, 16_000, &input);
        let s = settled(&out, 16_000);
        let attenuation_db = 20.0 * (rms(s) / rms(&input)).log10();
        assert!(attenuation_db < -40.0, "10 kHz only attenuated by {attenuation_db} dB");
    }

    #[test]
    fn images_are_rejected_going_up() {
        // 1 kHz at 16 kHz up to 48 kHz: zero-stuffing images at 15 and 17 kHz must be gone.
        let input = sine(16_000, 1000.0, 10_000.0, 16_000);
        let out = run(16_000, 48_000, &input);
        let s = settled(&out, 48_000);
        for image in [15_000.0, 17_000.0] {
            let db = 20.0 * (goertzel(s, 48_000, image) / 10_000.0).log10();
            assert!(db < -60.0, "image at {image} Hz only {db} dB down");
        }
    }

    #[test]
    fn fractional_ratios_keep_a_tone() {
        // espeak-ng to the local provider, Gemini's speech into a 16 kHz recording and back,
        // CD-rate WAVs to and from the room.
        for (from, to) in [(22_050, 24_000), (24_000, 16_000), (16_000, 24_000), (44_100, 48_000), (48_000, 44_100)] {
            let out = run(from, to, &sine(from, 1000.0, 10_000.0, from as usize));
            let s = settled(&out, to);
            let zc = zero_crossings(s);
            assert!((999..=1001).contains(&zc), "{from} -> {to}: {zc} zero crossings");
            let err_db = 20.0 * (goertzel(s, to, 1000.0) / 10_000.0).log10();
            assert!(err_db.abs() < 0.5, "{from} -> {to}: amplitude error {err_db} dB");
        }
    }

    #[test]
    fn fractional_ratios_reject_what_would_alias_and_their_images() {
        // 10 kHz cannot exist at 16 kHz: going down from 24 kHz it must be removed, not folded to 6 kHz.
        let out = run(24_000, 16_000, &sine(24_000, 10_000.0, 10_000.0, 24_000));
        let folded_db = 20.0 * (goertzel(settled(&out, 16_000), 16_000, 6_000.0) / 10_000.0).log10();
        assert!(folded_db < -60.0, "10 kHz folded to 6 kHz at only {folded_db} dB");
        // Going up from 22.05 kHz, a 10 kHz tone's image at 12.05 kHz must be gone.
        let out = run(22_050, 24_000, &sine(22_050, 10_000.0, 10_000.0, 22_050));
        let image_db = 20.0 * (goertzel(settled(&out, 24_000), 24_000, 12_050.0) / 10_000.0).log10();
        assert!(image_db < -60.0, "image at 12.05 kHz only {image_db} dB down");
    }

    #[test]
    fn a_clip_lines_up_with_its_input_and_lasts_as_long() {
        let from = sine(22_050, 440.0, 10_000.0, 22_050);
        let to = resample_clip(&from, 22_050, 24_000).expect("supported");
        assert_eq!(to.len(), 24_000);
        let reference = sine(24_000, 440.0, 10_000.0, 24_000);
        // Away from the edges the clip is the same tone sampled at the new rate, shifted by less
        // than half a sample (a fractional ratio's delay rounded): no other shift fits better.
        let error = |shift: usize| -> f64 {
            to[500 + shift..23_000 + shift]
                .iter()
                .zip(&reference[502..23_002])
                .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs())
                .sum::<f64>()
                / 22_500.0
        };
        let best = (0..5).min_by(|a, b| error(*a).total_cmp(&error(*b)));
        assert_eq!(best, Some(2), "errors by shift −2..=2: {:?}", (0..5).map(error).collect::<Vec<_>>());
        assert!(error(2) < 400.0, "mean error {}", error(2));
        let room = resample_clip(&sine(48_000, 440.0, 10_000.0, 960), 48_000, 16_000).expect("supported");
        assert_eq!(room.len(), 320);
        assert_eq!(resample_clip(&from, 22_050, 22_050), Ok(from.clone()));
        assert_eq!(resample_clip(&[], 22_050, 24_000), Ok(Vec::new()));
        assert!(resample_clip(&from, 22_050, 0).is_err());
    }

    /// Tiny deterministic PRNG (xorshift) so the test needs no dependency.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn chunked_equals_one_shot_bit_exact() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<i16> = (0..20_000).map(|_| (xorshift(&mut rng) >> 48) as i16).collect();
        for (from, to) in [
            (48_000, 24_000),
            (48_000, 16_000),
            (48_000, 8_000),
            (24_000, 48_000),
            (16_000, 48_000),
            (48_000, 48_000),
            (22_050, 24_000),
            (24_000, 16_000),
        ] {
            let one_shot = run(from, to, &noise);
            let mut r = Resampler::new(from, to).expect("supported");
            let mut chunked = Vec::new();
            let mut rest = &noise[..];
            while !rest.is_empty() {
                let n = (xorshift(&mut rng) % 1500) as usize; // includes empty chunks
                let (chunk, tail) = rest.split_at(n.min(rest.len()));
                r.process(chunk, &mut chunked);
                rest = tail;
            }
            r.flush(&mut chunked);
            assert_eq!(chunked, one_shot, "{from} -> {to}");
        }
    }

    #[test]
    fn round_trip_correlates() {
        let input = sine(48_000, 1000.0, 10_000.0, 48_000);
        for mid in [16_000, 24_000] {
            let mut down = Resampler::new(48_000, mid).expect("ok");
            let mut up = Resampler::new(mid, 48_000).expect("ok");
            let delay = down.latency_samples() * (48_000 / mid) as usize + up.latency_samples();
            let mut low = Vec::new();
            down.process(&input, &mut low);
            down.flush(&mut low);
            let mut back = Vec::new();
            up.process(&low, &mut back);
            up.flush(&mut back);
            let a = &input[4_800..43_200];
            let b = &back[4_800 + delay..43_200 + delay];
            let dot: f64 = a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
            let corr = dot / (rms(a) * rms(b) * a.len() as f64);
            assert!(corr >= 0.99, "48k -> {mid} -> 48k correlation {corr}");
        }
    }

    /// The telephone path (svc-rtp), a room frame at a time: what G.711 carries passes, and
    /// nothing folds back below 8 kHz's Nyquist frequency.
    #[test]
    fn room_to_telephone_keeps_the_telephone_band_and_rejects_what_would_alias() {
        let down = |input: &[i16]| {
            let mut converter = Resampler::room_to_telephone();
            let mut out = Vec::new();
            for frame in input.chunks(960) {
                converter.process(frame, &mut out);
            }
            out
        };
        for freq in [300.0, 1_000.0, 3_000.0] {
            let input = sine(48_000, freq, 10_000.0, 24_000);
            let output = down(&input);
            assert_eq!(output.len(), input.len() / 6, "six room samples make one telephone sample");
            let gain_db = 20.0 * (rms(&output[100..]) / rms(&input)).log10();
            assert!(gain_db.abs() < 0.5, "{freq} Hz: {gain_db:.2} dB");
        }
        for freq in [5_000.0, 7_000.0, 12_000.0] {
            let input = sine(48_000, freq, 10_000.0, 24_000);
            let gain_db = 20.0 * (rms(&down(&input)[100..]) / rms(&input)).log10();
            assert!(gain_db < -40.0, "{freq} Hz folds back at {gain_db:.1} dB");
        }
    }

    #[test]
    fn telephone_to_room_keeps_the_tone_and_suppresses_its_images() {
        for freq in [300.0, 1_000.0, 3_000.0] {
            let input = sine(8_000, freq, 10_000.0, 4_000);
            let mut converter = Resampler::telephone_to_room();
            let mut output = Vec::new();
            for frame in input.chunks(160) {
                converter.process(frame, &mut output);
            }
            assert_eq!(output.len(), input.len() * 6);
            let steady = &output[600..];
            let gain_db = 20.0 * (goertzel(steady, 48_000, freq) / 10_000.0).log10();
            assert!(gain_db.abs() < 0.5, "{freq} Hz: {gain_db:.2} dB");
            // Up-sampling mirrors the tone around multiples of 8 kHz.
            for image in [8_000.0 - freq, 8_000.0 + freq, 16_000.0 - freq] {
                let level_db = 20.0 * (goertzel(steady, 48_000, image) / 10_000.0).log10();
                assert!(level_db < -40.0, "{freq} Hz's image at {image} Hz: {level_db:.1} dB");
            }
        }
    }

    #[test]
    fn unsupported_ratios_are_typed_errors() {
        for (from, to) in [(0, 0), (48_000, 0), (0, 16_000), (400_000, 48_000), (48_000, 44_101), (1_009, 1_013)] {
            assert_eq!(Resampler::new(from, to).err(), Some(ResampleError::Unsupported { from_hz: from, to_hz: to }));
        }
    }

    #[test]
    fn silence_in_silence_out_and_empty_input() {
        for (from, to) in
            [(48_000, 24_000), (48_000, 16_000), (48_000, 8_000), (24_000, 48_000), (16_000, 48_000), (8_000, 48_000)]
        {
            let mut r = Resampler::new(from, to).expect("ok");
            let mut out = Vec::new();
            r.process(&[], &mut out);
            assert!(out.is_empty());
            r.process(&vec![0; 960], &mut out);
            r.flush(&mut out);
            assert!(!out.is_empty());
            assert!(out.iter().all(|&s| s == 0), "{from} -> {to}");
            let mut empty = Resampler::new(from, to).expect("ok");
            let mut out = Vec::new();
            empty.flush(&mut out);
            assert!(out.iter().all(|&s| s == 0));
        }
    }

    #[test]
    fn full_scale_input_clamps_without_panicking() {
        let square: Vec<i16> = (0..4_800).map(|n| if (n / 24) % 2 == 0 { i16::MAX } else { i16::MIN }).collect();
        for (from, to) in [(48_000, 16_000), (16_000, 48_000)] {
            let out = run(from, to, &square);
            assert!(!out.is_empty());
        }
    }

    #[test]
    fn identity_is_a_pass_through() {
        let input = sine(48_000, 440.0, 1000.0, 960);
        let mut r = Resampler::new(48_000, 48_000).expect("ok");
        assert_eq!(r.latency_samples(), 0);
        let mut out = Vec::new();
        r.process(&input, &mut out);
        r.flush(&mut out);
        assert_eq!(out, input);
    }

    #[test]
    fn frame_sizes_and_latency() {
        // A 20 ms room frame yields exactly 20 ms at the provider rate, in steady state.
        for (to, expected) in [(24_000, 480), (16_000, 320), (8_000, 160)] {
            let mut r = Resampler::new(48_000, to).expect("ok");
            let mut out = Vec::new();
            r.process(&[0; 960], &mut out);
            assert_eq!(out.len(), expected);
        }
        let mut r = Resampler::new(16_000, 48_000).expect("ok");
        let mut out = Vec::new();
        r.process(&[0; 320], &mut out);
        assert_eq!(out.len(), 960);
        for (from, to) in [(48_000, 24_000), (48_000, 16_000), (48_000, 8_000), (24_000, 48_000), (16_000, 48_000)] {
            let r = Resampler::new(from, to).expect("ok");
            assert!(r.latency_samples() > 0 && r.latency_samples() < to as usize / 100, "{from}->{to}");
            assert_eq!((r.from_hz(), r.to_hz()), (from, to));
        }
    }
}
