//! The crate's error type.

use thiserror::Error;

/// Everything that can go wrong in this crate.
///
/// Audio from outside (RTP payloads, WAV files) is untrusted: every malformed input ends here,
/// never in a panic.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AudioError {
    /// A frame handed to the encoder did not hold exactly one 20 ms frame.
    #[error("an Opus frame must hold exactly {expected} samples, got {actual}")]
    FrameLength {
        /// Samples required ([`crate::FRAME_SAMPLES`]).
        expected: usize,
        /// Samples given.
        actual: usize,
    },
    /// An Opus packet that cannot be decoded (empty, bad table-of-contents, longer than 120 ms,
    /// or rejected by libopus).
    #[error("invalid Opus packet: {reason}")]
    InvalidPacket {
        /// What was wrong.
        reason: &'static str,
    },
    /// A request to conceal more audio in one call than [`crate::opus::MAX_CONCEAL_SAMPLES`].
    #[error("cannot conceal {requested} samples in one call (at most {max})")]
    ConcealTooLong {
        /// Samples asked for.
        requested: usize,
        /// The bound.
        max: usize,
    },
    /// A sample rate libopus does not run at (8, 12, 16, 24 or 48 kHz).
    #[error("Opus cannot run at {rate_hz} Hz (8, 12, 16, 24 or 48 kHz)")]
    UnsupportedRate {
        /// The rate asked for.
        rate_hz: u32,
    },
    /// libopus failed where no input of ours should make it fail (creation, settings).
    #[error("libopus {function} failed: {description}")]
    Codec {
        /// The libopus function.
        function: &'static str,
        /// libopus's description of its error code.
        description: &'static str,
    },
    /// The bytes are not a RIFF/WAVE file.
    #[error("not a WAV file: {reason}")]
    NotWav {
        /// What was missing.
        reason: &'static str,
    },
    /// A WAV file that ends before its header or its declared data does.
    #[error("truncated WAV file: {reason}")]
    WavTruncated {
        /// Which part is cut short.
        reason: &'static str,
    },
    /// A well-formed WAV file in a format other than integer PCM with 16 bits per sample.
    #[error("unsupported WAV format: tag {format_tag:#06x}, {bits_per_sample} bits per sample (need PCM16)")]
    WavUnsupported {
        /// The `fmt ` chunk's format tag (1 = PCM; 0xFFFE = extensible, resolved to its sub-format).
        format_tag: u16,
        /// Bits per sample.
        bits_per_sample: u16,
    },
    /// A WAV header whose fields contradict each other or are out of range, or samples that
    /// cannot be written as a WAV file.
    #[error("malformed WAV: {reason}")]
    WavMalformed {
        /// What is inconsistent.
        reason: &'static str,
    },
    /// Reading or writing a file failed.
    #[error("WAV file IO failed: {0}")]
    Io(#[from] std::io::Error),
    /// An [`crate::AudioOutQueue`] refused audio; see [`QueueFull`].
    #[error(transparent)]
    QueueFull(#[from] QueueFull),
}

impl AudioError {
    /// Maps a libopus error, keeping "the packet is bad" apart from "libopus is unhappy".
    pub(crate) fn from_opus(error: &svc_opus::Error) -> Self {
        if error.is_invalid_packet() {
            Self::InvalidPacket { reason: "libopus rejected the packet" }
        } else {
            Self::Codec { function: error.function, description: error.description() }
        }
    }
}

/// [`crate::AudioOutQueue::push_pcm`] refused a chunk because it would exceed the queue's bound.
///
/// Nothing of the refused chunk was queued: the caller still owns all of it and decides whether to
/// wait (the queue drains at real time), drop it, or end the utterance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "audio queue full: {rejected_samples} samples refused, {buffered_samples} buffered of at most {capacity_samples}"
)]
pub struct QueueFull {
    /// Samples in the refused chunk.
    pub rejected_samples: usize,
    /// Samples buffered when it was refused.
    pub buffered_samples: usize,
    /// The queue's bound, in samples.
    pub capacity_samples: usize,
}
