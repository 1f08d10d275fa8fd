//! Audio building blocks shared by the room and the providers.
//!
//! The media room carries exactly one audio format between the voice-agent runtime and WebRTC
//! peers: 48 kHz mono PCM16, as Opus in 20 ms frames. This crate holds everything that format
//! needs, as pure code that never does IO on its own (the WAV file helpers aside) and never reads
//! the clock:
//!
//! - [`opus`]: [`OpusEncoder`] (speech settings, in-band FEC) and [`OpusDecoder`] (decode, loss
//!   concealment, FEC recovery).
//! - [`Framer`]: cuts PCM of any length into 960-sample frames.
//! - [`TrackDecoder`]: turns one received RTP audio stream back into PCM whose length follows the
//!   RTP clock, filling losses with FEC and concealment and dropping late packets.
//! - [`AudioOutQueue`]: the sans-IO pacer for publishing: buffered PCM out as one frame every
//!   20 ms with RTP timestamps and marker bits, under a bound on buffered audio.
//! - [`vad`]: [`vad::TurnDetector`], svc's own turn detection (`svc_vad`) on 16 kHz audio.
//! - [`denoise`]: [`denoise::NoiseFilter`], `noise_cancellation` (`denoise`, `voice_focus`) at
//!   48 kHz.
//! - [`wav`]: reading and writing PCM16 WAV files, for tests, benchmarks and recordings.
//! - [`analysis`]: normalised cross-correlation and levels, to check received audio against what
//!   was sent.
//! - [`resample`]: [`resample::Resampler`], streaming band-limited resampling between any two
//!   rates of the room, the providers, the phone and espeak-ng (any ratio reducing to small
//!   terms), and [`resample::resample_clip`] for a whole sentence.
//!
//! Everything works at [`SAMPLE_RATE_HZ`] with one channel unless a type says otherwise.
//!
//! # Latency the integrator must know
//!
//! Opus delays audio by its look-ahead ([`OpusEncoder::lookahead_samples`], 312 samples = 6.5 ms
//! at 48 kHz): the first decoded samples of a stream are the codec's warm-up, and sample `n` of
//! the input comes out at about sample `n + 312` of the output (307–310 measured on speech).
//! Compare received audio with [`analysis::best_correlation`], which finds that lag.

use std::time::Duration;

pub mod analysis;
pub mod denoise;
mod error;
mod framer;
pub mod opus;
mod pacer;
pub mod resample;
mod track;
pub mod vad;
pub mod wav;

pub use error::{AudioError, QueueFull};
pub use framer::Framer;
pub use opus::{OpusDecoder, OpusEncoder};
pub use pacer::{AudioOutQueue, OutQueueConfig, PacedFrame};
pub use track::{PushOutcome, TrackDecoder, TrackDecoderConfig, TrackStats};

/// Sample rate of all audio in the room (and of the Opus RTP clock, RFC 7587).
pub const SAMPLE_RATE_HZ: u32 = 48_000;

/// Samples in one 20 ms mono frame at [`SAMPLE_RATE_HZ`]; the RTP timestamp step per frame.
pub const FRAME_SAMPLES: usize = 960;

/// Duration of one frame of [`FRAME_SAMPLES`] samples.
pub const FRAME_DURATION: Duration = Duration::from_millis(20);

/// Samples of one channel in `duration` at [`SAMPLE_RATE_HZ`], rounded down and saturating.
#[must_use]
pub fn samples_in(duration: Duration) -> usize {
    let samples = duration.as_nanos() * u128::from(SAMPLE_RATE_HZ) / 1_000_000_000;
    usize::try_from(samples).unwrap_or(usize::MAX)
}

/// Playing time of `samples` samples at [`SAMPLE_RATE_HZ`].
#[must_use]
pub fn duration_of(samples: usize) -> Duration {
    // u64 nanoseconds overflow only past 584 years of audio; saturate rather than wrap.
    let nanos = (samples as u128 * 1_000_000_000 / u128::from(SAMPLE_RATE_HZ)).min(u128::from(u64::MAX));
    Duration::from_nanos(nanos as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_constants_agree() {
        assert_eq!(samples_in(FRAME_DURATION), FRAME_SAMPLES);
        assert_eq!(duration_of(FRAME_SAMPLES), FRAME_DURATION);
        assert_eq!(samples_in(Duration::from_secs(120)), 5_760_000);
        assert_eq!(samples_in(Duration::MAX), usize::MAX);
    }
}
