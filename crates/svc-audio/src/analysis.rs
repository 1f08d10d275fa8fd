//! Comparing audio: did what arrived sound like what was sent?
//!
//! Tests and benchmarks send a known signal through the room (Opus, RTP, jitter, loss) and check
//! the received PCM against it. Energy alone proves nothing (noise has energy too), so the check
//! is the normalised cross-correlation, maximised over the unknown delay of the path.

use std::f64::consts::PI;

use rustfft::{FftPlanner, num_complex::Complex};

/// The best alignment of a received signal with its reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Correlation {
    /// Normalised cross-correlation at [`Correlation::lag_samples`], in `-1.0..=1.0`: ≈ 1.0 for
    /// a copy (at any gain), ≈ 0.0 for unrelated audio. 0.0 when either side is silent there.
    pub coefficient: f64,
    /// How many samples later the reference appears in the received signal: `received[n + lag]`
    /// lines up with `reference[n]`. Negative when the received signal starts inside the
    /// reference.
    pub lag_samples: isize,
    /// Samples of the reference the coefficient was computed over (where both signals overlap at
    /// that lag). Compare it with the reference's length to check that *all* of it arrived.
    pub overlap_samples: usize,
}

/// Finds the lag in `-max_lag..=max_lag` at which `received` best matches `reference`, and how
/// well it matches.
///
/// For each lag the coefficient is `Σ r·x / √(Σ r² · Σ x²)` over the samples where the two
/// overlap, so a perfectly delayed copy scores 1.0 whatever its gain, leading silence or extra
/// tail, and unrelated noise scores near 0. Lags whose overlap is shorter than half of the shorter
/// signal are not considered: over a few samples anything can correlate. The correlation for all
/// lags at once comes from one FFT product (`O(n log n)` in the summed length), the energies from
/// prefix sums.
///
/// Returns a zero [`Correlation`] when either signal is empty.
#[must_use]
pub fn best_correlation(reference: &[i16], received: &[i16], max_lag: usize) -> Correlation {
    let none = Correlation { coefficient: 0.0, lag_samples: 0, overlap_samples: 0 };
    if reference.is_empty() || received.is_empty() {
        return none;
    }
    let (ref_len, recv_len) = (reference.len(), received.len());
    let min_overlap = (ref_len.min(recv_len) / 2).max(1);
    let sums = cross_correlation(reference, received);
    let ref_energy = prefix_energy(reference);
    let recv_energy = prefix_energy(received);
    let fft_len = sums.len();

    // Lags where any overlap exists: received index n + lag must land in 0..recv_len for some
    // reference index n in 0..ref_len. Slice lengths fit in isize, so these cannot overflow.
    let max_lag = isize::try_from(max_lag).unwrap_or(isize::MAX);
    let lowest = (1 - ref_len as isize).max(-max_lag);
    let highest = (recv_len as isize - 1).min(max_lag);

    let mut best = none;
    let mut best_score = f64::NEG_INFINITY;
    for lag in lowest..=highest {
        // Overlap in reference indices: first..end.
        let first = (-lag).max(0) as usize;
        let end = (ref_len as isize).min(recv_len as isize - lag) as usize;
        let overlap = end.saturating_sub(first);
        if overlap < min_overlap {
            continue;
        }
        let e_ref = (ref_energy[end] - ref_energy[first]) as f64;
        let recv_first = (first as isize + lag) as usize;
        let e_recv = (recv_energy[recv_first + overlap] - recv_energy[recv_first]) as f64;
        let denominator = (e_ref * e_recv).sqrt();
        let coefficient = if denominator > 0.0 {
            // Negative lags sit at the end of the circular correlation.
            let index = if lag >= 0 { lag as usize } else { fft_len - lag.unsigned_abs() };
            (sums[index] / denominator).clamp(-1.0, 1.0)
        } else {
            0.0
        };
        // Ties go to the smaller delay; exact ties only happen on degenerate (e.g. silent) input.
        let better = coefficient > best_score
            || (coefficient == best_score && lag.unsigned_abs() < best.lag_samples.unsigned_abs());
        if better {
            best_score = coefficient;
            best = Correlation { coefficient, lag_samples: lag, overlap_samples: overlap };
        }
    }
    best
}

/// A signal compared window by window: [`piecewise_correlation`]'s answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Piecewise {
    /// The best alignment of the whole signal, which anchors the windows.
    pub overall: Correlation,
    /// One entry per window of the reference that is not silent, in order; each lag is absolute
    /// (`received[n + lag]` lines up with `reference[n]` inside that window).
    pub windows: Vec<Correlation>,
}

impl Piecewise {
    /// The share of windows (0.0 when there are none) that correlate at `min_coefficient` or more.
    #[must_use]
    pub fn share_at_least(&self, min_coefficient: f64) -> f64 {
        if self.windows.is_empty() {
            return 0.0;
        }
        let good = self.windows.iter().filter(|w| w.coefficient >= min_coefficient).count();
        good as f64 / self.windows.len() as f64
    }
}

/// Compares `received` with `reference` window by window, each window free to find its own lag
/// within `max_drift` samples of the whole signal's best lag.
///
/// A live audio path may move its delay while it plays: an adaptive jitter buffer that runs dry
/// conceals one frame and plays the rest 20 ms later, by design. One such step halves a
/// whole-signal correlation although every word arrived intact; window by window it costs at
/// most the window it falls in. Windows of the reference quieter than −50 dBFS (pauses) are
/// left out: they carry nothing to recognise. A window whose audio never arrived scores 0.
#[must_use]
pub fn piecewise_correlation(reference: &[i16], received: &[i16], window: usize, max_drift: usize) -> Piecewise {
    let overall = best_correlation(reference, received, reference.len().max(received.len()));
    let window = window.max(1);
    let mut windows = Vec::new();
    for start in (0..reference.len()).step_by(window) {
        let piece = &reference[start..(start + window).min(reference.len())];
        if rms_dbfs(piece) < -50.0 {
            continue;
        }
        // Where this window should sit in `received`, widened by the drift allowed either side.
        let centre = start as isize + overall.lag_samples;
        let from = (centre - max_drift as isize).clamp(0, received.len() as isize) as usize;
        let to = (centre + (piece.len() + max_drift) as isize).clamp(0, received.len() as isize) as usize;
        let found = best_correlation(piece, &received[from..to], to - from);
        let found = Correlation { lag_samples: from as isize + found.lag_samples - start as isize, ..found };
        windows.push(found);
    }
    Piecewise { overall, windows }
}

/// How much of `reference` arrived in `received`, in order: the energy-weighted mean of each
/// `window`'s correlation along the best path of lags through the signal, in `0.0..=1.0`.
///
/// A live audio path moves its delay while it plays: an adaptive jitter buffer that meets a late
/// packet conceals and plays the rest later (a step of 20–80 ms under network jitter), and catches
/// up a few milliseconds at a time. Every word still arrives, in order. Each window is therefore
/// free to sit at its own lag within `max_drift` samples of the whole signal's best lag, and the
/// lags of neighbouring windows are chosen together (dynamic programming over the windows, in the
/// order they were spoken): a move of up to `slack` samples from one window to the next is free, a
/// larger one (a step) costs as much as an average window scores at best. So one step costs about
/// one window, wherever it falls. Following the lag window by window instead loses it for good at
/// the first step wider than its search, and scores the rest of the signal as missing (a reply
/// with one 50 ms step scored 0.51 that way, 0.95 this way). Missing or garbled audio still scores
/// low: no lag matches it. Windows of the reference without energy are left out. 0.0 when there is
/// nothing to compare.
#[must_use]
pub fn aligned_correlation(reference: &[i16], received: &[i16], window: usize, slack: usize, max_drift: usize) -> f64 {
    let window = window.max(1);
    let overall = best_correlation(reference, received, reference.len().max(received.len()));
    let lags = 2 * max_drift + 1;
    let energy = |pcm: &[i16]| pcm.iter().map(|&s| f64::from(s) * f64::from(s)).sum::<f64>();
    let pieces: Vec<(usize, &[i16], f64)> = (0..reference.len())
        .step_by(window)
        .map(|start| (start, &reference[start..(start + window).min(reference.len())]))
        .map(|(start, piece)| (start, piece, energy(piece)))
        .filter(|(_, piece, energy)| piece.len() >= window / 2 && *energy > 0.0)
        .collect();
    let total: f64 = pieces.iter().map(|(_, _, energy)| energy).sum();
    if pieces.is_empty() || total == 0.0 {
        return 0.0;
    }
    // A step costs an average window wherever it falls (a quiet window would make it cheap).
    let step_cost = total / pieces.len() as f64;
    // `best[k]`: the best score of a path through the windows so far that ends at lag
    // `overall.lag_samples - max_drift + k`.
    let mut best: Option<Vec<f64>> = None;
    for (start, piece, energy) in pieces {
        let first_lag = start as isize + overall.lag_samples - max_drift as isize;
        let scores = window_scores(piece, energy, received, first_lag, lags).into_iter().map(|c| energy * c.max(0.0));
        best = Some(match best {
            None => scores.collect(),
            Some(previous) => {
                let stepped = previous.iter().copied().fold(f64::NEG_INFINITY, f64::max) - step_cost;
                let near = sliding_max(&previous, slack);
                scores.zip(near).map(|(score, near)| score + near.max(stepped)).collect()
            }
        });
    }
    best.map_or(0.0, |best| best.into_iter().fold(0.0, f64::max) / total)
}

/// `piece`'s normalised correlation with `received` at the `lags` lags from `first_lag` on
/// (`received[n + lag]` against `piece[n]`); 0.0 where `piece` does not lie wholly inside it.
/// `piece_energy` is `Σ piece[n]²`, which the caller already has.
fn window_scores(piece: &[i16], piece_energy: f64, received: &[i16], first_lag: isize, lags: usize) -> Vec<f64> {
    let mut scores = vec![0.0; lags];
    // The stretch of `received` those lags reach, clipped to what exists.
    let from = first_lag.clamp(0, received.len() as isize) as usize;
    let to = (first_lag + (lags - 1 + piece.len()) as isize).clamp(0, received.len() as isize) as usize;
    if to - from < piece.len() {
        return scores;
    }
    let stretch = &received[from..to];
    let sums = cross_correlation(piece, stretch);
    let energy = prefix_energy(stretch);
    for offset in 0..=stretch.len() - piece.len() {
        let stretch_energy = (energy[offset + piece.len()] - energy[offset]) as f64;
        let denominator = (piece_energy * stretch_energy).sqrt();
        let k = (from + offset) as isize - first_lag;
        if denominator > 0.0 && (0..lags as isize).contains(&k) {
            scores[k as usize] = (sums[offset] / denominator).clamp(-1.0, 1.0);
        }
    }
    scores
}

/// `out[k]` = the largest of `values[k - reach ..= k + reach]` (clipped to the slice), with a
/// monotonic queue: linear in the length whatever the reach.
fn sliding_max(values: &[f64], reach: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(values.len());
    let mut queue = std::collections::VecDeque::<usize>::new();
    let mut next = 0;
    for k in 0..values.len() {
        while next < values.len() && next <= k + reach {
            while queue.back().is_some_and(|&i| values[i] <= values[next]) {
                queue.pop_back();
            }
            queue.push_back(next);
            next += 1;
        }
        while queue.front().is_some_and(|&i| i + reach < k) {
            queue.pop_front();
        }
        out.push(queue.front().map_or(f64::NEG_INFINITY, |&i| values[i]));
    }
    out
}

/// `out[lag] = Σ_n reference[n] · received[n + lag]` for every lag, circularly indexed
/// (`out[len - k]` holds lag `-k`), computed as `IFFT(FFT(received) · conj(FFT(reference)))` on a
/// length that rules out wrap-around.
fn cross_correlation(reference: &[i16], received: &[i16]) -> Vec<f64> {
    let fft_len = (reference.len() + received.len()).next_power_of_two();
    let mut planner = FftPlanner::<f64>::new();
    let forward = planner.plan_fft_forward(fft_len);
    let inverse = planner.plan_fft_inverse(fft_len);
    let padded = |signal: &[i16]| {
        let mut buffer = vec![Complex::new(0.0, 0.0); fft_len];
        for (slot, &sample) in buffer.iter_mut().zip(signal) {
            slot.re = f64::from(sample);
        }
        buffer
    };
    let mut ref_spectrum = padded(reference);
    let mut recv_spectrum = padded(received);
    forward.process(&mut ref_spectrum);
    forward.process(&mut recv_spectrum);
    for (x, r) in recv_spectrum.iter_mut().zip(&ref_spectrum) {
        *x *= r.conj();
    }
    inverse.process(&mut recv_spectrum);
    // rustfft does not normalise; the round trip scales by the length.
    let scale = 1.0 / fft_len as f64;
    recv_spectrum.iter().map(|c| c.re * scale).collect()
}

/// `out[i] = Σ_{n<i} signal[n]²`, exact in integers (a sample's square is below 2³⁰, so u64 holds
/// more than 2³³ samples).
fn prefix_energy(signal: &[i16]) -> Vec<u64> {
    let mut sums = Vec::with_capacity(signal.len() + 1);
    let mut total = 0_u64;
    sums.push(0);
    for &sample in signal {
        let value = i64::from(sample);
        total = total.saturating_add((value * value) as u64);
        sums.push(total);
    }
    sums
}

/// Root-mean-square level relative to a full-scale square wave (32768), in dB: 0 dBFS is the
/// loudest possible, a full-scale sine is about −3 dBFS, and silence (or no samples) is −∞.
#[must_use]
pub fn rms_dbfs(pcm: &[i16]) -> f64 {
    if pcm.is_empty() {
        return f64::NEG_INFINITY;
    }
    let energy: f64 = pcm.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    let rms = (energy / pcm.len() as f64).sqrt();
    if rms == 0.0 { f64::NEG_INFINITY } else { 20.0 * (rms / 32_768.0).log10() }
}

/// A deterministic speech-like test signal of `samples` samples at 48 kHz: a glottal-like
/// harmonic series (fundamental gliding between 90 and 190 Hz, harmonics falling off at
/// 1/k up to 3.4 kHz) under a syllable envelope (4 syllables a second, with short pauses),
/// peaking near −5 dBFS at about −20 dBFS RMS.
///
/// Codecs tuned for speech treat it like a voice, unlike a pure tone or noise; its pitch
/// movement makes every lag distinct, so correlation finds one clear peak.
#[must_use]
pub fn speech_like_signal(samples: usize) -> Vec<i16> {
    let rate = f64::from(crate::SAMPLE_RATE_HZ);
    let mut phase = 0.0_f64;
    (0..samples)
        .map(|n| {
            let t = n as f64 / rate;
            // Intonation: a slow glide plus a faster wobble, never repeating within a syllable.
            let pitch = 140.0 + 40.0 * (2.0 * PI * 0.7 * t).sin() + 10.0 * (2.0 * PI * 5.3 * t).sin();
            phase += 2.0 * PI * pitch / rate;
            let harmonics = (3_400.0 / pitch) as usize;
            let mut value = 0.0;
            for k in 1..=harmonics {
                // A moving "formant" emphasis makes the spectrum change from syllable to syllable.
                let formant = 1.0 + 0.8 * (2.0 * PI * (0.9 * t + k as f64 / 7.0)).sin();
                value += formant * (k as f64 * phase).sin() / k as f64;
            }
            // Syllables of 250 ms: 200 ms voiced with a raised-cosine shape, 50 ms pause.
            let within = (t * 4.0).fract() * 0.25;
            let envelope = if within < 0.2 { (PI * within / 0.2).sin().powi(2) } else { 0.0 };
            (value * envelope * 6_000.0).clamp(-32_768.0, 32_767.0) as i16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic white noise (xorshift), so a failure reproduces.
    fn noise(samples: usize, seed: u64, amplitude: f64) -> Vec<i16> {
        let mut state = seed | 1;
        (0..samples)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let unit = (state >> 11) as f64 / (1_u64 << 53) as f64 * 2.0 - 1.0;
                (unit * amplitude) as i16
            })
            .collect()
    }

    #[test]
    fn identical_signals_correlate_fully_at_lag_zero() {
        let signal = speech_like_signal(24_000);
        let c = best_correlation(&signal, &signal, 2_000);
        assert!(c.coefficient > 0.999_999, "{c:?}");
        assert_eq!(c.lag_samples, 0);
        assert_eq!(c.overlap_samples, signal.len());
    }

    #[test]
    fn delayed_copy_with_leading_silence_and_tail_is_found_at_its_lag() {
        let reference = speech_like_signal(48_000);
        let mut received = vec![0_i16; 1_234];
        received.extend_from_slice(&reference);
        received.extend(noise(3_000, 7, 50.0));
        let c = best_correlation(&reference, &received, 4_800);
        assert!(c.coefficient > 0.999, "{c:?}");
        assert_eq!(c.lag_samples, 1_234);
        assert_eq!(c.overlap_samples, reference.len());
    }

    #[test]
    fn received_starting_inside_the_reference_has_a_negative_lag() {
        let reference = speech_like_signal(48_000);
        let received = &reference[500..40_000];
        let c = best_correlation(&reference, received, 4_800);
        assert!(c.coefficient > 0.999, "{c:?}");
        assert_eq!(c.lag_samples, -500);
        assert_eq!(c.overlap_samples, received.len());
    }

    #[test]
    fn a_lag_beyond_max_lag_is_not_found() {
        let reference = speech_like_signal(48_000);
        let mut received = vec![0_i16; 5_000];
        received.extend_from_slice(&reference);
        let c = best_correlation(&reference, &received, 4_800);
        assert!(c.coefficient < 0.9, "{c:?}");
        assert!(c.lag_samples.unsigned_abs() <= 4_800);
    }

    #[test]
    fn gain_does_not_matter() {
        let reference = speech_like_signal(48_000);
        let quieter: Vec<i16> = reference.iter().map(|&s| s / 8).collect();
        let c = best_correlation(&reference, &quieter, 1_000);
        assert!(c.coefficient > 0.999, "{c:?}");
        assert_eq!(c.lag_samples, 0);
    }

    #[test]
    fn noise_does_not_resemble_speech() {
        let reference = speech_like_signal(48_000);
        let unrelated = noise(48_000, 42, 8_000.0);
        let c = best_correlation(&reference, &unrelated, 4_800);
        assert!(c.coefficient.abs() < 0.1, "{c:?}");
    }

    #[test]
    fn moderately_noisy_copy_still_correlates_but_less() {
        let reference = speech_like_signal(48_000);
        let noisy: Vec<i16> =
            reference.iter().zip(noise(48_000, 9, 2_000.0)).map(|(&s, n)| s.saturating_add(n)).collect();
        let c = best_correlation(&reference, &noisy, 100);
        assert!(c.coefficient > 0.8 && c.coefficient < 0.999, "{c:?}");
        assert_eq!(c.lag_samples, 0);
    }

    #[test]
    fn silence_and_empty_inputs_give_zero() {
        let reference = speech_like_signal(4_800);
        assert_eq!(best_correlation(&reference, &[0; 4_800], 100).coefficient, 0.0);
        assert_eq!(best_correlation(&[], &reference, 100).overlap_samples, 0);
        assert_eq!(best_correlation(&reference, &[], 100).coefficient, 0.0);
        let one = best_correlation(&[5], &[7], usize::MAX);
        assert_eq!((one.lag_samples, one.overlap_samples), (0, 1));
        assert!((one.coefficient - 1.0).abs() < 1e-9);
    }

    #[test]
    fn rms_levels() {
        assert_eq!(rms_dbfs(&[]), f64::NEG_INFINITY);
        assert_eq!(rms_dbfs(&[0; 10]), f64::NEG_INFINITY);
        assert!(rms_dbfs(&[-32_768; 10]).abs() < 1e-9);
        let sine: Vec<i16> =
            (0..48_000).map(|n| (32_767.0 * (2.0 * PI * 1_000.0 * f64::from(n) / 48_000.0).sin()) as i16).collect();
        assert!((rms_dbfs(&sine) + 3.01).abs() < 0.01, "{}", rms_dbfs(&sine));
        let half: Vec<i16> = sine.iter().map(|&s| s / 2).collect();
        assert!((rms_dbfs(&sine) - rms_dbfs(&half) - 6.02).abs() < 0.01);
    }

    #[test]
    fn speech_like_signal_is_deterministic_and_has_pauses() {
        let a = speech_like_signal(48_000);
        assert_eq!(a, speech_like_signal(48_000));
        let level = rms_dbfs(&a);
        assert!((-30.0..-6.0).contains(&level), "{level}");
        // 200..250 ms of every syllable is a pause.
        assert!(a[10_000..12_000].iter().all(|&s| s == 0));
        assert!(a[2_000..8_000].iter().any(|&s| s.unsigned_abs() > 3_000));
    }

    #[test]
    fn a_delay_step_halfway_costs_one_window_not_the_whole_signal() {
        // What an adaptive jitter buffer does when it runs dry: 20 ms concealed, the rest later.
        let reference = speech_like_signal(3 * 48_000);
        let step = 60_000 + 4_800; // inside a syllable, in the middle of a window
        let mut received = vec![0_i16; 24_000];
        received.extend_from_slice(&reference[..step]);
        received.extend(std::iter::repeat_n(0, 960));
        received.extend_from_slice(&reference[step..]);
        let whole = best_correlation(&reference, &received, received.len());
        assert!(whole.coefficient < 0.8, "the whole-signal check fails on it: {whole:?}");
        let pieces = piecewise_correlation(&reference, &received, 12_000, 4_800);
        assert_eq!(pieces.windows.len(), 12);
        assert!(pieces.share_at_least(0.8) >= 11.0 / 12.0, "{pieces:?}");
        assert_eq!(pieces.windows[0].lag_samples, 24_000);
        assert_eq!(pieces.windows[11].lag_samples, 24_960);
    }

    #[test]
    fn windows_of_noise_or_missing_audio_do_not_pass() {
        let reference = speech_like_signal(48_000);
        let pieces = piecewise_correlation(&reference, &noise(60_000, 3, 3_000.0), 12_000, 4_800);
        assert_eq!(pieces.share_at_least(0.5), 0.0, "{pieces:?}");
        // Only the first half arrived: the second half's windows find nothing.
        let pieces = piecewise_correlation(&reference, &reference[..24_000], 12_000, 4_800);
        assert_eq!(pieces.windows.len(), 4);
        assert!((pieces.share_at_least(0.8) - 0.5).abs() < 1e-9, "{pieces:?}");
        assert_eq!(piecewise_correlation(&reference, &[], 12_000, 4_800).share_at_least(0.1), 0.0);
    }

    #[test]
    fn an_aligned_correlation_forgives_a_delay_step_and_not_what_is_lost_or_garbled() {
        // A second of the speech-like signal at 16 kHz, received 200 ms late.
        let reference: Vec<i16> = speech_like_signal(48_000).into_iter().step_by(3).collect();
        let late = |pcm: &[i16]| [vec![0; 3_200], pcm.to_vec(), vec![0; 3_200]].concat();
        let score = |received: &[i16]| aligned_correlation(&reference, received, 1_600, 640, 3_200);
        assert!(score(&late(&reference)) > 0.99);
        // A jitter buffer's 60 ms step at 420 ms (wider than the slack) costs about a window.
        let step = 6_720;
        let stepped = [&reference[..step], &[0; 960][..], &reference[step..]].concat();
        let stepped = score(&late(&stepped));
        assert!(stepped > 0.85, "{stepped}");
        // Half of it missing, or played backwards, scores low.
        let mut missing = reference.clone();
        missing[8_000..].fill(0);
        let mut garbled = reference.clone();
        garbled[8_000..].reverse();
        for (name, received) in [("missing", missing), ("garbled", garbled)] {
            let score = score(&late(&received));
            assert!(score < 0.8, "{name}: {score}");
        }
        assert_eq!(score(&[]), 0.0);
        assert_eq!(aligned_correlation(&[], &reference, 1_600, 640, 3_200), 0.0);
    }

    #[test]
    fn a_sliding_max_covers_the_reach_either_side() {
        let values = [1.0, 5.0, 2.0, 0.0, 0.0, 3.0];
        assert_eq!(sliding_max(&values, 0), values.to_vec());
        assert_eq!(sliding_max(&values, 1), vec![5.0, 5.0, 5.0, 2.0, 3.0, 3.0]);
        assert_eq!(sliding_max(&values, 9), vec![5.0; 6]);
    }
}
