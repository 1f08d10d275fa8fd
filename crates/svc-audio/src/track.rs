//! Decoding one received RTP audio stream into PCM that follows the sender's clock.
//!
//! The room hands the runtime each Opus packet of a subscribed track with its RTP timestamp,
//! in arrival order, without a jitter buffer (the runtime forwards audio to a provider as it
//! arrives; waiting would only add latency). [`TrackDecoder`] keeps the decoded PCM aligned with
//! the RTP clock anyway: a hole in the timestamps is filled with recovered (FEC) or concealed
//! audio of the same length, a packet whose time has already been written is dropped, and a jump
//! too large to be a loss starts a new talkspurt instead of a flood of silence.
//!
//! A sender with DTX off (a browser, a str0m client) keeps sending the same tiny packet while its
//! microphone is silent. Once such a packet has decoded to exact digital silence, the same bytes
//! again in order are answered with zeros without calling libopus: the decoder's state after a
//! frame of silence decoded from silence is the state it already has, so what follows decodes
//! as it would have (concealment of a later loss included).

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
    /// Packets answered with silence without decoding: byte-identical repeats of a tiny packet
    /// that had decoded to digital silence (counted in `packets_decoded` too).
    pub silent_repeats: u64,
}

/// The largest packet taken for a silent frame (a 20 ms Opus frame of silence is 1 to 3 bytes;
/// a frame with any sound in it is far larger).
const MAX_SILENT_PACKET_BYTES: usize = 8;

/// How many times in a row a tiny packet must decode to digital silence before its repeats are
/// skipped: by then the decoder's memory of the sound before (energies, filter tails, which
/// decay below one LSB before they reach zero) has settled on silence.
const SILENT_DECODES_BEFORE_SKIPPING: u32 = 3;

/// The last packet, if it was tiny and decoded to digital silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SilentPacket {
    bytes: [u8; MAX_SILENT_PACKET_BYTES],
    len: usize,
    samples: usize,
    /// Times in a row it was decoded (not skipped) to silence.
    decoded_silent: u32,
}

impl SilentPacket {
    fn matches(&self, packet: &[u8]) -> bool {
        self.bytes.get(..self.len) == Some(packet)
    }
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
    /// The previous packet, when it was a tiny one that decoded to silence.
    silent: Option<SilentPacket>,
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
            silent: None,
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
            self.silent = None;
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
            self.silent = None;
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
        let repeat = self.silent.filter(|silent| gap == 0 && silent.matches(packet));
        if let Some(silent) = repeat.filter(|silent| silent.decoded_silent >= SILENT_DECODES_BEFORE_SKIPPING) {
            out.resize(out.len() + silent.samples, 0);
            self.stats.silent_repeats += 1;
            self.advance(rtp_timestamp, silent.samples);
            return Ok(PushOutcome::Decoded { filled: 0, decoded: silent.samples });
        }
        self.silent = None;
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
        // Only a tiny packet decoded in order to exact silence, several times in a row, is
        // skipped when it repeats (see `SILENT_DECODES_BEFORE_SKIPPING`).
        if gap == 0 && packet.len() <= MAX_SILENT_PACKET_BYTES && out[start..].iter().all(|sample| *sample == 0) {
            let mut bytes = [0; MAX_SILENT_PACKET_BYTES];
            bytes[..packet.len()].copy_from_slice(packet);
            let decoded_silent = repeat.map_or(1, |silent| silent.decoded_silent + 1);
            self.silent = Some(SilentPacket { bytes, len: packet.len(), samples: decoded, decoded_silent });
        }
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
