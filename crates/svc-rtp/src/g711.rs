//! G.711 (ITU-T G.711): μ-law (PCMU, RTP payload type 0) and A-law (PCMA, payload type 8), one
//! byte per 8 kHz sample. The encoders are the classic bit-exact segment search (as in the ITU's
//! reference and Sun's `g711.c`); the decoders are tables built from the same definition at
//! compile time.

/// The two G.711 laws, named as in SDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum G711 {
    /// μ-law, `PCMU/8000`, static payload type 0.
    Pcmu,
    /// A-law, `PCMA/8000`, static payload type 8.
    Pcma,
}

impl G711 {
    /// The static RTP payload type (RFC 3551 table 4).
    #[must_use]
    pub fn payload_type(self) -> u8 {
        match self {
            G711::Pcmu => 0,
            G711::Pcma => 8,
        }
    }

    /// The law for a static payload type, if it is one of the two.
    #[must_use]
    pub fn from_payload_type(payload_type: u8) -> Option<G711> {
        match payload_type {
            0 => Some(G711::Pcmu),
            8 => Some(G711::Pcma),
            _ => None,
        }
    }

    /// Encodes linear samples, appending one byte per sample to `out`.
    pub fn encode(self, pcm: &[i16], out: &mut Vec<u8>) {
        match self {
            G711::Pcmu => out.extend(pcm.iter().map(|&s| linear_to_ulaw(s))),
            G711::Pcma => out.extend(pcm.iter().map(|&s| linear_to_alaw(s))),
        }
    }

    /// Decodes bytes, appending one linear sample per byte to `out`.
    pub fn decode(self, bytes: &[u8], out: &mut Vec<i16>) {
        let table = match self {
            G711::Pcmu => &ULAW_TO_LINEAR,
            G711::Pcma => &ALAW_TO_LINEAR,
        };
        out.extend(bytes.iter().map(|&b| table[usize::from(b)]));
    }
}

/// The upper end of each μ-law segment on the 14-bit magnitude scale.
const ULAW_SEGMENT_END: [i32; 8] = [0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF];
/// The upper end of each A-law segment on the 13-bit magnitude scale.
const ALAW_SEGMENT_END: [i32; 8] = [0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF];
/// μ-law's bias, on the 14-bit scale (0x84 on the 16-bit one).
const ULAW_BIAS: i32 = 0x84 >> 2;
/// The largest 14-bit magnitude μ-law represents before the bias.
const ULAW_CLIP: i32 = 8159;

fn segment(value: i32, ends: &[i32; 8]) -> usize {
    ends.iter().position(|&end| value <= end).unwrap_or(8)
}

/// Encodes one 16-bit linear sample as μ-law.
#[must_use]
pub fn linear_to_ulaw(sample: i16) -> u8 {
    let mut value = i32::from(sample) >> 2;
    let mask = if value < 0 {
        value = -value;
        0x7F
    } else {
        0xFF
    };
    value = value.min(ULAW_CLIP) + ULAW_BIAS;
    let seg = segment(value, &ULAW_SEGMENT_END);
    let code = if seg >= 8 { 0x7F } else { (seg << 4) as i32 | ((value >> (seg + 1)) & 0x0F) };
    (code ^ mask) as u8
}

/// Encodes one 16-bit linear sample as A-law.
#[must_use]
pub fn linear_to_alaw(sample: i16) -> u8 {
    let mut value = i32::from(sample) >> 3;
    let mask = if value >= 0 {
        0xD5
    } else {
        value = -value - 1;
        0x55
    };
    let seg = segment(value, &ALAW_SEGMENT_END);
    let code = if seg >= 8 {
        0x7F
    } else {
        let shift = if seg < 2 { 1 } else { seg };
        (seg << 4) as i32 | ((value >> shift) & 0x0F)
    };
    (code ^ mask) as u8
}

const fn ulaw_to_linear(code: u8) -> i16 {
    let code = !code;
    let magnitude = ((((code & 0x0F) as i32) << 3) + 0x84) << ((code & 0x70) >> 4);
    (if code & 0x80 != 0 { 0x84 - magnitude } else { magnitude - 0x84 }) as i16
}

const fn alaw_to_linear(code: u8) -> i16 {
    let code = code ^ 0x55;
    let mut magnitude = ((code & 0x0F) as i32) << 4;
    let seg = (code & 0x70) >> 4;
    magnitude += if seg == 0 { 8 } else { 0x108 };
    if seg > 1 {
        magnitude <<= seg - 1;
    }
    (if code & 0x80 != 0 { magnitude } else { -magnitude }) as i16
}

const fn table(alaw: bool) -> [i16; 256] {
    let mut out = [0i16; 256];
    let mut code = 0;
    while code < 256 {
        out[code] = if alaw { alaw_to_linear(code as u8) } else { ulaw_to_linear(code as u8) };
        code += 1;
    }
    out
}

/// μ-law byte → linear sample.
pub static ULAW_TO_LINEAR: [i16; 256] = table(false);
/// A-law byte → linear sample.
pub static ALAW_TO_LINEAR: [i16; 256] = table(true);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_code_points() {
        assert_eq!(ULAW_TO_LINEAR[0xFF], 0);
        assert_eq!(ULAW_TO_LINEAR[0x7F], 0);
        assert_eq!(ULAW_TO_LINEAR[0x00], -32_124);
        assert_eq!(ULAW_TO_LINEAR[0x80], 32_124);
        assert_eq!(linear_to_ulaw(0), 0xFF);
        assert_eq!(linear_to_ulaw(i16::MAX), 0x80);
        assert_eq!(linear_to_ulaw(i16::MIN), 0x00);
        assert_eq!(ALAW_TO_LINEAR[0xD5], 8);
        assert_eq!(ALAW_TO_LINEAR[0x55], -8);
        assert_eq!(ALAW_TO_LINEAR[0xAA], 32_256);
        assert_eq!(ALAW_TO_LINEAR[0x2A], -32_256);
        assert_eq!(linear_to_alaw(0), 0xD5);
        assert_eq!(linear_to_alaw(-1), 0x55);
        assert_eq!(linear_to_alaw(i16::MAX), 0xAA);
        assert_eq!(linear_to_alaw(i16::MIN), 0x2A);
    }

    #[test]
    fn every_code_decodes_and_re_encodes_to_itself() {
        for code in 0..=255u8 {
            let ulaw = ULAW_TO_LINEAR[usize::from(code)];
            // μ-law has two zeros (0x7F and 0xFF); the encoder picks positive zero.
            let expected = if code == 0x7F { 0xFF } else { code };
            assert_eq!(linear_to_ulaw(ulaw), expected, "μ-law {code:#04x} → {ulaw}");
            let alaw = ALAW_TO_LINEAR[usize::from(code)];
            assert_eq!(linear_to_alaw(alaw), code, "A-law {code:#04x} → {alaw}");
        }
    }

    #[test]
    fn decoded_values_are_monotonic_in_the_code() {
        // Within each sign, larger magnitude codes decode to larger magnitudes.
        let mut ulaw: Vec<i16> = ULAW_TO_LINEAR.to_vec();
        ulaw.sort_unstable();
        ulaw.dedup();
        assert_eq!(ulaw.len(), 255, "255 distinct μ-law levels");
        let mut alaw: Vec<i16> = ALAW_TO_LINEAR.to_vec();
        alaw.sort_unstable();
        alaw.dedup();
        assert_eq!(alaw.len(), 256, "256 distinct A-law levels");
    }

    #[test]
    fn round_trip_error_is_bounded_over_the_whole_range() {
        for law in [G711::Pcmu, G711::Pcma] {
            let (mut worst_small, mut worst_relative) = (0i32, 0f64);
            for sample in i16::MIN..=i16::MAX {
                let mut bytes = Vec::new();
                law.encode(&[sample], &mut bytes);
                let mut back = Vec::new();
                law.decode(&bytes, &mut back);
                let error = (i32::from(back[0]) - i32::from(sample)).abs();
                let magnitude = i32::from(sample).abs();
                if magnitude < 256 {
                    worst_small = worst_small.max(error);
                } else if magnitude < 32_000 {
                    worst_relative = worst_relative.max(f64::from(error) / f64::from(magnitude));
                }
            }
            // Measured: 11 (μ-law) and 8 (A-law) near zero, half a step plus the encoders'
            // truncation; higher up 1/20 (μ-law, whose bias makes low segments coarser) and 1/32.
            assert!(worst_small <= 12, "{law:?}: error {worst_small} near zero");
            assert!(worst_relative <= 1.0 / 19.0, "{law:?}: relative error {worst_relative}");
        }
    }

    #[test]
    fn payload_types() {
        assert_eq!(G711::from_payload_type(0), Some(G711::Pcmu));
        assert_eq!(G711::from_payload_type(8), Some(G711::Pcma));
        assert_eq!(G711::from_payload_type(9), None);
        assert_eq!(G711::Pcma.payload_type(), 8);
    }
}
