//! The user's audio on its way in: decoded by libopus straight to the provider's input rate, or,
//! when the session asks for noise cancellation, decoded at 48 kHz (the filter's rate), filtered
//! and resampled once to the provider's rate.

use svc_audio::denoise::{NoiseFilter, NoiseMode};
use svc_audio::resample::Resampler;
use svc_domain::session_config::NoiseCancellation;

/// Decoding and filtering of the bound participant's audio.
#[derive(Debug)]
pub struct InputAudio {
    provider_rate_hz: u32,
    filter: Option<(NoiseFilter, Option<Resampler>)>,
    filtered: Vec<i16>,
}

impl InputAudio {
    /// The input path of a session whose provider takes `provider_rate_hz`.
    pub fn new(provider_rate_hz: u32, noise_cancellation: NoiseCancellation) -> InputAudio {
        let mode = match noise_cancellation {
            NoiseCancellation::Off => None,
            NoiseCancellation::Denoise => Some(NoiseMode::Denoise),
            NoiseCancellation::VoiceFocus => Some(NoiseMode::VoiceFocus),
        };
        let filter = mode.map(|mode| {
            let resampler = if provider_rate_hz == svc_audio::denoise::RATE_HZ {
                None
            } else {
                Resampler::new(svc_audio::denoise::RATE_HZ, provider_rate_hz).ok()
            };
            (NoiseFilter::new(mode), resampler)
        });
        InputAudio { provider_rate_hz, filter, filtered: Vec::new() }
    }

    /// The rate Opus frames are decoded at.
    pub fn decode_rate_hz(&self) -> u32 {
        if self.filter.is_some() { svc_audio::denoise::RATE_HZ } else { self.provider_rate_hz }
    }

    /// Decoded PCM at [`InputAudio::decode_rate_hz`] → PCM at the provider's rate, in a new
    /// buffer of its own (the provider's channel takes it).
    pub fn process(&mut self, decoded: &[i16]) -> Vec<i16> {
        let Some((filter, resampler)) = self.filter.as_mut() else { return decoded.to_vec() };
        self.filtered.clear();
        filter.process(decoded, &mut self.filtered);
        match resampler {
            Some(resampler) => {
                let mut out = Vec::with_capacity(self.filtered.len() / 2);
                resampler.process(&self.filtered, &mut out);
                out
            }
            None => self.filtered.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_filter_audio_passes_at_the_provider_rate() {
        let mut input = InputAudio::new(16_000, NoiseCancellation::Off);
        assert_eq!(input.decode_rate_hz(), 16_000);
        assert_eq!(input.process(&[1, 2, 3]), vec![1, 2, 3]);
    }

    #[test]
    fn with_a_filter_audio_is_decoded_at_48_khz_and_leaves_at_the_provider_rate() {
        for (rate, mode) in [(16_000, NoiseCancellation::Denoise), (24_000, NoiseCancellation::VoiceFocus)] {
            let mut input = InputAudio::new(rate, mode);
            assert_eq!(input.decode_rate_hz(), 48_000);
            let mut out = 0;
            for _ in 0..50 {
                out += input.process(&[0; 960]).len();
            }
            let expected = rate as usize; // one second
            assert!(out.abs_diff(expected) <= expected / 50, "{out} samples at {rate} Hz for 1 s");
        }
    }
}
