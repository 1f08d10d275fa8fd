//! Decoding one received RTP audio stream into PCM that follows the sender's clock.
//!
//! The room hands the runtime each Opus packet of a subscribed track with its RTP timestamp,
//! in arrival order, without a jitter buffer (the runtime forwards audio to a provider as it
//! arrives; waiting would only add latency). [`TrackDecoder`] keeps the decoded PCM aligned with
//! the RTP clock anyway: a hole in the timestamps is filled with recovered (FEC) or concealed
//! audio of the same length, a packet whose time has already been written is dropped, and a jump
//! too large to be a loss starts a new talkspurt instead of a flood of silence.

use std::time::Duration;

use crate::opus::{MAX_CONCEAL_SAMPLES, OpusDecoder, packet_samples};
use crate::{AudioError, samples_in};

/// Settings for [`TrackDecoder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackDecoderConfig {
    /// The longest hole in the timestamps that is filled (with FEC and concealment) so that the
    /// output keeps pace with the RTP clock. Longer holes are a pause or an outage, not a loss,
    /// and start a new talkspurt. Capped at one second ([`MAX_CONCEAL_SAMPLES`]).
    pub max_gap_fill: Duration,
    /// How far back a packet may be and still count as merely late (dropped). A packet further
    /// back means the sender's clock restarted, and starts a new talkspurt.
    pub max_reorder: Duration,
}

impl Default for TrackDecoderConfig {
    /// 200 ms of fill (ten 20 ms packets: beyond that, concealment is silence anyway), and 2 s of
    /// reordering (far more than any real network reorders, far less than a clock restart).
    fn default() -> Self {
        Self { max_gap_fill: Duration::from_millis(200), max_reorder: Duration::from_secs(2) }
    }
}

/// What [`TrackDecoder::push`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// The packet continued the stream: `filled` samples of recovered or concealed audio for the
    /// hole before it, then its own `decoded` samples, were appended.
    Decoded {
        /// Samples filled in for lost audio before the packet (0 when nothing was lost).
        filled: usize,
        /// Samples decoded from the packet.
        decoded: usize,
    },
    /// The packet's timestamp jumped further than a loss can explain (forwards beyond
    /// `max_gap_fill`, or backwards beyond `max_reorder`): the decoder started afresh at it and
    /// appended its `decoded` samples, with nothing filled in between. The output no longer
    /// follows the RTP clock across the jump; a consumer that needs wall-clock alignment (a
    /// recording) inserts its own silence from `expected_timestamp` to the packet's.
    Resynced {
        /// Where the next packet was expected.
        expected_timestamp: u64,
        /// Samples decoded from the packet.
        decoded: usize,
    },
    /// The packet starts before audio already written (a duplicate or a late reordered packet)
    /// and was dropped; nothing was appended.
    DroppedLate,
}

impl PushOutcome {
    /// Samples this push appended to the output.
    #[must_use]
    pub fn samples_appended(&self) -> usize {
        match *self {
            Self::Decoded { filled, decoded } => filled + decoded,
            Self::Resynced { decoded, .. } => decoded,
            Self::DroppedLate => 0,
        }
    }
}

/// Running totals of a [`TrackDecoder`], for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackStats {
    /// Packets decoded.
    pub packets_decoded: u64,
    /// Samples decoded from packets.
    pub decoded_samples: u64,
    /// Samples filled in for lost audio (FEC recovery and concealment).
    pub concealed_samples: u64,
    /// Duplicate and late packets dropped.
    pub dropped_late: u64,
    /// Timestamp jumps that started a new talkspurt.
    pub resyncs: u64,
    /// Packets refused as malformed.
    pub invalid_packets: u64,
}

/// Sans-IO decoder for one received Opus RTP stream (no jitter buffer: packets are decoded as
/// they arrive).
///
/// Feed it every packet with its RTP timestamp extended to 64 bits (so it never wraps); it
/// appends mono PCM (48 kHz, or the rate given to [`TrackDecoder::with_rate`]) whose length
/// tracks the timestamps: after the first packet at `t0`, the output holds `t - t0` samples (at
/// 48 kHz; proportionally fewer at a lower rate) when a packet ending at `t` has been pushed,
/// across losses of up to `max_gap_fill`. Timestamps are always on the 48 kHz RTP clock.
#[derive(Debug)]
pub struct TrackDecoder {
    decoder: OpusDecoder,
    /// RTP ticks (48 kHz) per output sample: 1 at 48 kHz, 2 at 24 kHz, 3 at 16 kHz, …
    ticks_per_sample: u64,
    max_gap_samples: u64,
    max_reorder_samples: u64,
    /// Timestamp where the next packet should start (the end of the audio written so far);
    /// `None` before the first packet.
    expected: Option<u64>,
    stats: TrackStats,
}

impl TrackDecoder {
    /// A decoder with [`TrackDecoderConfig::default`].
    ///
    /// # Errors
    ///
    /// [`AudioError::Codec`] if libopus cannot create a decoder.
    pub fn new() -> Result<Self, AudioError> {
        Self::with_config(TrackDecoderConfig::default())
    }

    /// A decoder with the given settings (`max_gap_fill` is capped at one second).
    ///
    /// # Errors
    ///
    /// [`AudioError::Codec`] if libopus cannot create a decoder.
    pub fn with_config(config: TrackDecoderConfig) -> Result<Self, AudioError> {
        Self::with_rate(config, crate::SAMPLE_RATE_HZ)
    }

    /// A decoder that outputs `rate_hz` (one of [`crate::opus::OPUS_RATES_HZ`]): the runtime
    /// decodes a user's audio straight to its provider's input rate.
    ///
    /// # Errors
    ///
    /// [`AudioError::UnsupportedRate`] for another rate; [`AudioError::Codec`] if libopus cannot
    /// create a decoder.
    pub fn with_rate(config: TrackDecoderConfig, rate_hz: u32) -> Result<Self, AudioError> {
        let decoder = OpusDecoder::with_rate(rate_hz)?;
        Ok(Self {
            decoder,
            ticks_per_sample: u64::from(crate::SAMPLE_RATE_HZ / rate_hz),
            max_gap_samples: samples_in(config.max_gap_fill).min(MAX_CONCEAL_SAMPLES) as u64,
            max_reorder_samples: samples_in(config.max_reorder) as u64,
            expected: None,
            stats: TrackStats::default(),
        })
    }

    /// Decodes the packet sent at `rtp_timestamp` (the 48 kHz RTP clock, extended to 64 bits),
    /// appending to `out` any fill for lost audio before it and then its own samples.
    ///
    /// # Errors
    ///
    /// [`AudioError::InvalidPacket`] for a packet that is not valid Opus. Nothing is appended, the
    /// decoder's position is unchanged (so the packet's audio counts as lost when the next one
    /// arrives), and it stays usable.
    pub fn push(&mut self, rtp_timestamp: u64, packet: &[u8], out: &mut Vec<i16>) -> Result<PushOutcome, AudioError> {
        // Validate before touching any state: a garbage packet must not move the clock.
        if let Err(error) = packet_samples(packet) {
            self.stats.invalid_packets += 1;
            return Err(error);
        }
        let Some(expected) = self.expected else {
            let decoded = self.decode(packet, out)?;
            self.advance(rtp_timestamp, decoded);
            return Ok(PushOutcome::Decoded { filled: 0, decoded });
        };
        let jumped = if rtp_timestamp < expected {
            if expected - rtp_timestamp <= self.max_reorder_samples {
                self.stats.dropped_late += 1;
                return Ok(PushOutcome::DroppedLate);
            }
            true
        } else {
            rtp_timestamp - expected > self.max_gap_samples
        };
        if jumped {
            // Concealing across the jump would make up audio that never existed; continuing the
            // old decoder state would smear the old talkspurt's tail into the new one.
            self.decoder.reset()?;
            let decoded = self.decode(packet, out)?;
            self.advance(rtp_timestamp, decoded);
            self.stats.resyncs += 1;
            return Ok(PushOutcome::Resynced { expected_timestamp: expected, decoded });
        }
        // At most `max_gap_samples`, which is at most MAX_CONCEAL_SAMPLES; in output samples, at
        // most one second at the decoder's rate.
        let gap = ((rtp_timestamp - expected) / self.ticks_per_sample) as usize;
        let start = out.len();
        let filled = if gap > 0 { self.decoder.decode_fec(packet, gap, out)? } else { 0 };
        let decoded = match self.decode(packet, out) {
            Ok(decoded) => decoded,
            Err(error) => {
                out.truncate(start);
                return Err(error);
            }
        };
        self.stats.concealed_samples += filled as u64;
        self.advance(rtp_timestamp, decoded);
        Ok(PushOutcome::Decoded { filled, decoded })
    }

    /// Totals so far.
    #[must_use]
    pub fn stats(&self) -> TrackStats {
        self.stats
    }

    /// The timestamp at which the next packet continues the stream (`None` before the first).
    #[must_use]
    pub fn expected_timestamp(&self) -> Option<u64> {
        self.expected
    }

    fn decode(&mut self, packet: &[u8], out: &mut Vec<i16>) -> Result<usize, AudioError> {
        self.decoder.decode(packet, out).inspect_err(|_| self.stats.invalid_packets += 1)
    }

    fn advance(&mut self, rtp_timestamp: u64, decoded: usize) {
        self.stats.packets_decoded += 1;
        self.stats.decoded_samples += decoded as u64;
        self.expected = Some(rtp_timestamp.saturating_add(decoded as u64 * self.ticks_per_sample));
    }
}

#[cfg(test)]
mod tests;
