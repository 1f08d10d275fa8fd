//! RTP packets (RFC 3550 §5.1): parsing that is total over any byte slice, serialisation, and
//! the unwrapping of 16-bit sequence numbers and 32-bit timestamps into monotonic 64-bit values.

use thiserror::Error;

/// Length of the fixed RTP header, before CSRCs and the extension.
pub const RTP_HEADER_LEN: usize = 12;

/// Why bytes are not an RTP packet. Every malformed input ends here, never in a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PacketError {
    /// Fewer bytes than the headers announce.
    #[error("truncated packet: {needed} bytes needed, {actual} present")]
    Truncated {
        /// Bytes the headers require.
        needed: usize,
        /// Bytes present.
        actual: usize,
    },
    /// The version field is not 2.
    #[error("unsupported RTP version {0}")]
    Version(u8),
    /// The padding count is zero or longer than what follows the headers.
    #[error("invalid padding length {0}")]
    Padding(u8),
    /// A field holds a value the protocol does not allow.
    #[error("invalid {0}")]
    Invalid(&'static str),
}

/// One RTP packet, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtpPacket {
    /// The marker bit: for audio, the first packet of a talkspurt.
    pub marker: bool,
    /// Payload type (7 bits).
    pub payload_type: u8,
    /// Sequence number.
    pub sequence: u16,
    /// Timestamp on the payload's media clock.
    pub timestamp: u32,
    /// Synchronisation source.
    pub ssrc: u32,
    /// Contributing sources (at most 15).
    pub csrcs: Vec<u32>,
    /// The payload, without padding and headers; a header extension is skipped, not kept.
    pub payload: Vec<u8>,
}

impl RtpPacket {
    /// Parses one RTP packet. Total: any input gives a packet or a [`PacketError`].
    pub fn parse(bytes: &[u8]) -> Result<RtpPacket, PacketError> {
        let truncated = |needed: usize| PacketError::Truncated { needed, actual: bytes.len() };
        let fixed: &[u8; RTP_HEADER_LEN] = bytes.first_chunk().ok_or_else(|| truncated(RTP_HEADER_LEN))?;
        let version = fixed[0] >> 6;
        if version != 2 {
            return Err(PacketError::Version(version));
        }
        let has_padding = fixed[0] & 0x20 != 0;
        let has_extension = fixed[0] & 0x10 != 0;
        let csrc_count = usize::from(fixed[0] & 0x0F);
        let mut at = RTP_HEADER_LEN + 4 * csrc_count;
        let csrc_bytes = bytes.get(RTP_HEADER_LEN..at).ok_or_else(|| truncated(at))?;
        let csrcs = csrc_bytes.chunks_exact(4).map(be_u32).collect();
        if has_extension {
            // RFC 3550 §5.3.1: a 16-bit profile word, a 16-bit length in 32-bit words, then the words.
            let header = bytes.get(at..at + 4).ok_or_else(|| truncated(at + 4))?;
            let words = usize::from(u16::from_be_bytes([header[2], header[3]]));
            at += 4 + 4 * words;
            if bytes.len() < at {
                return Err(truncated(at));
            }
        }
        let mut end = bytes.len();
        if has_padding {
            let count = bytes.last().copied().unwrap_or(0);
            if count == 0 || usize::from(count) > end - at {
                return Err(PacketError::Padding(count));
            }
            end -= usize::from(count);
        }
        Ok(RtpPacket {
            marker: fixed[1] & 0x80 != 0,
            payload_type: fixed[1] & 0x7F,
            sequence: u16::from_be_bytes([fixed[2], fixed[3]]),
            timestamp: be_u32(&fixed[4..8]),
            ssrc: be_u32(&fixed[8..12]),
            csrcs,
            payload: bytes[at..end].to_vec(),
        })
    }

    /// Serialises the packet (no padding, no extension).
    ///
    /// # Errors
    /// [`PacketError::Invalid`] when the payload type needs more than 7 bits or there are more
    /// than 15 CSRCs, which the header cannot express.
    pub fn to_bytes(&self) -> Result<Vec<u8>, PacketError> {
        if self.payload_type > 0x7F {
            return Err(PacketError::Invalid("payload type"));
        }
        let csrc_count = u8::try_from(self.csrcs.len()).ok().filter(|n| *n <= 15);
        let Some(csrc_count) = csrc_count else { return Err(PacketError::Invalid("CSRC count")) };
        let mut out = Vec::with_capacity(RTP_HEADER_LEN + 4 * self.csrcs.len() + self.payload.len());
        out.push(0x80 | csrc_count);
        out.push(u8::from(self.marker) << 7 | self.payload_type);
        out.extend_from_slice(&self.sequence.to_be_bytes());
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.ssrc.to_be_bytes());
        for csrc in &self.csrcs {
            out.extend_from_slice(&csrc.to_be_bytes());
        }
        out.extend_from_slice(&self.payload);
        Ok(out)
    }
}

/// Whether a datagram on a multiplexed port is RTCP rather than RTP (RFC 5761 §4: the second
/// byte of RTCP is a packet type in 192..=223, which RTP payload types with the marker bit avoid).
#[must_use]
pub fn is_rtcp(bytes: &[u8]) -> bool {
    bytes.len() >= 2 && bytes[0] >> 6 == 2 && (192..=223).contains(&bytes[1])
}

/// Reads a big-endian `u32` from the first four bytes; zero-filled if fewer, so callers that
/// checked lengths never see the fallback.
pub(crate) fn be_u32(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    for (slot, byte) in word.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    u32::from_be_bytes(word)
}

/// Turns a wrapping counter of `BITS` bits (16 for sequence numbers, 32 for timestamps) into a
/// monotonic 64-bit value: each new value is taken as the one nearest the highest seen so far,
/// so reordering within half the counter's range is understood and wraps count as cycles.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unwrapper<const BITS: u32> {
    highest: Option<u64>,
}

/// Extends 16-bit RTP sequence numbers.
pub type SeqUnwrapper = Unwrapper<16>;
/// Extends 32-bit RTP timestamps.
pub type TimestampUnwrapper = Unwrapper<32>;

impl<const BITS: u32> Unwrapper<BITS> {
    const RANGE: i64 = 1 << BITS;

    /// An unwrapper that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Unwrapper { highest: None }
    }

    /// The extended value of `value` (its low `BITS` bits are used). The first value seen starts
    /// one full cycle up, so values reordered before it still have room below.
    pub fn extend(&mut self, value: u32) -> u64 {
        let value = i64::from(value) & (Self::RANGE - 1);
        let Some(highest) = self.highest else {
            let first = value as u64 + Self::RANGE as u64;
            self.highest = Some(first);
            return first;
        };
        let highest_i = highest as i64;
        let mut delta = value - (highest_i & (Self::RANGE - 1));
        if delta > Self::RANGE / 2 {
            delta -= Self::RANGE;
        } else if delta < -Self::RANGE / 2 {
            delta += Self::RANGE;
        }
        let extended = (highest_i + delta).max(0) as u64;
        if extended > highest {
            self.highest = Some(extended);
        }
        extended
    }

    /// The highest extended value seen.
    #[must_use]
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Forgets everything, for a new source.
    pub fn reset(&mut self) {
        self.highest = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RtpPacket {
        RtpPacket {
            marker: true,
            payload_type: 8,
            sequence: 0xFFFE,
            timestamp: 0xDEAD_BEEF,
            ssrc: 0x1234_5678,
            csrcs: vec![1, 2],
            payload: vec![0xD5; 160],
        }
    }

    #[test]
    fn round_trips() {
        let packet = sample();
        let bytes = packet.to_bytes().expect("valid");
        assert_eq!(bytes.len(), 12 + 8 + 160);
        assert_eq!(bytes[0], 0x82);
        assert_eq!(bytes[1], 0x88);
        assert_eq!(RtpPacket::parse(&bytes), Ok(packet));
    }

    #[test]
    fn skips_extension_and_strips_padding() {
        let mut bytes = vec![0x80 | 0x20 | 0x10, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
        bytes.extend_from_slice(&[0xBE, 0xDE, 0, 1, 9, 9, 9, 9]); // one extension word
        bytes.extend_from_slice(&[7, 7, 7]);
        bytes.extend_from_slice(&[0, 0, 3]); // three bytes of padding
        let packet = RtpPacket::parse(&bytes).expect("valid");
        assert_eq!(packet.payload, [7, 7, 7]);
        assert_eq!((packet.sequence, packet.timestamp, packet.ssrc), (1, 2, 3));
    }

    #[test]
    fn rejects_what_is_not_rtp() {
        assert!(matches!(RtpPacket::parse(&[0x80; 11]), Err(PacketError::Truncated { .. })));
        assert_eq!(RtpPacket::parse(&[0x40; 12]), Err(PacketError::Version(1)));
        let mut padded = vec![0xA0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(RtpPacket::parse(&padded), Err(PacketError::Padding(0)));
        padded[12] = 2;
        assert_eq!(RtpPacket::parse(&padded), Err(PacketError::Padding(2)));
        let csrcs = [0x8F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3];
        assert!(matches!(RtpPacket::parse(&csrcs), Err(PacketError::Truncated { needed: 72, .. })));
        let long_extension = [0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xBE, 0xDE, 0, 2, 1, 1, 1, 1];
        assert!(matches!(RtpPacket::parse(&long_extension), Err(PacketError::Truncated { needed: 24, .. })));
    }

    #[test]
    fn refuses_to_write_what_the_header_cannot_hold() {
        let mut packet = sample();
        packet.payload_type = 128;
        assert_eq!(packet.to_bytes(), Err(PacketError::Invalid("payload type")));
        packet.payload_type = 0;
        packet.csrcs = vec![0; 16];
        assert_eq!(packet.to_bytes(), Err(PacketError::Invalid("CSRC count")));
    }

    #[test]
    fn demultiplexes_rtcp() {
        assert!(is_rtcp(&[0x80, 200]));
        assert!(is_rtcp(&[0x81, 201, 0, 7]));
        assert!(!is_rtcp(&[0x80, 0]));
        assert!(!is_rtcp(&[0x80, 0x80 | 8]));
        assert!(!is_rtcp(&[0x80]));
    }

    #[test]
    fn sequence_numbers_unwrap_across_the_wrap_and_reordering() {
        let mut seq = SeqUnwrapper::new();
        let base = seq.extend(65_534);
        assert_eq!(seq.extend(65_535), base + 1);
        assert_eq!(seq.extend(1), base + 3);
        assert_eq!(seq.extend(0), base + 2, "reordered across the wrap");
        assert_eq!(seq.highest(), Some(base + 3));
        assert_eq!(seq.extend(65_533), base - 1, "older than the first");
        let mut ts = TimestampUnwrapper::new();
        let base = ts.extend(u32::MAX - 159);
        assert_eq!(ts.extend(0), base + 160);
        assert_eq!(ts.extend(u32::MAX - 319), base - 160);
    }
}
