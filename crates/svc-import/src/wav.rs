//! Incremental validation of a RIFF/WAVE header, fed with decoded audio bytes as they arrive.
//!
//! Only the header is inspected: `RIFF` + size + `WAVE`, then chunks until `data`. Everything
//! after the `data` chunk header is counted, never parsed.

use crate::ImportError;

/// `WAVE_FORMAT_PCM`.
const FORMAT_PCM: u16 = 1;
/// `WAVE_FORMAT_IEEE_FLOAT`.
const FORMAT_FLOAT: u16 = 3;
/// `WAVE_FORMAT_EXTENSIBLE`: the real format is the first two bytes of the sub-format GUID.
const FORMAT_EXTENSIBLE: u16 = 0xFFFE;
/// Size of a `fmt ` chunk that carries the `WAVE_FORMAT_EXTENSIBLE` fields.
const FMT_EXTENSIBLE_LEN: usize = 40;
/// A `fmt ` chunk is at most a few dozen bytes; a bigger one is not a WAV we understand, and
/// buffering it whole must stay cheap.
const FMT_MAX_LEN: usize = 1024;

/// What the header of an accepted WAV says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavInfo {
    /// Samples per second (> 0).
    pub sample_rate: u32,
    /// Always 1: only mono is accepted.
    pub channels: u16,
    /// 8, 16, 24 or 32.
    pub bits_per_sample: u16,
    /// The `fmt ` chunk's format tag as sent: 1 (PCM), 3 (IEEE float) or 0xFFFE (extensible).
    pub format_tag: u16,
    /// Bytes of sample data actually present: the declared `data` size, or fewer when the stream
    /// ended early (writers that stream often leave the size wrong or as a placeholder).
    pub data_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Format {
    sample_rate: u32,
    channels: u16,
    bits_per_sample: u16,
    format_tag: u16,
}

#[derive(Debug)]
enum State {
    /// Collecting the 12-byte `RIFF` header.
    Riff,
    /// Collecting an 8-byte chunk header.
    ChunkHeader,
    /// Collecting the body (plus pad byte) of a `fmt ` chunk of this many bytes.
    Fmt { len: usize },
    /// Skipping the rest of a chunk we do not care about.
    Skip { remaining: u64 },
    /// Inside the `data` chunk: the header is done.
    Data { declared: u32, present: u64 },
}

/// Push-based WAV header validator.
#[derive(Debug)]
pub(crate) struct WavValidator {
    state: State,
    /// Bytes of the header piece being collected (never more than [`FMT_MAX_LEN`] + 1).
    buf: Vec<u8>,
    format: Option<Format>,
}

fn invalid(reason: &str) -> ImportError {
    ImportError::InvalidWav(reason.to_owned())
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

impl WavValidator {
    pub(crate) fn new() -> Self {
        Self { state: State::Riff, buf: Vec::new(), format: None }
    }

    /// Feeds the next decoded bytes.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) -> Result<(), ImportError> {
        while !bytes.is_empty() {
            let need = match &mut self.state {
                State::Data { present, .. } => {
                    *present += bytes.len() as u64;
                    return Ok(());
                }
                State::Skip { remaining } => {
                    let n = bytes.len().min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                    *remaining -= n as u64;
                    bytes = &bytes[n..];
                    if *remaining == 0 {
                        self.state = State::ChunkHeader;
                    }
                    continue;
                }
                State::Riff => 12,
                State::ChunkHeader => 8,
                State::Fmt { len } => *len,
            };
            let take = (need - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buf.len() == need {
                self.complete_piece()?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Handles a fully collected header piece in `self.buf`.
    fn complete_piece(&mut self) -> Result<(), ImportError> {
        let buf = &self.buf;
        self.state = match self.state {
            State::Riff => {
                if &buf[0..4] != b"RIFF" || &buf[8..12] != b"WAVE" {
                    return Err(invalid("not a RIFF/WAVE file"));
                }
                // The RIFF size is not checked: streaming writers leave it 0 or 0xFFFFFFFF.
                State::ChunkHeader
            }
            State::ChunkHeader => {
                let size = u32_at(buf, 4);
                // Chunks are word-aligned: an odd-sized chunk is followed by a pad byte.
                let padded = u64::from(size) + u64::from(size & 1);
                match &buf[0..4] {
                    b"fmt " if self.format.is_some() => {
                        return Err(invalid("more than one fmt chunk"));
                    }
                    b"fmt " => match usize::try_from(padded) {
                        Ok(len) if (16..=FMT_MAX_LEN + 1).contains(&len) => State::Fmt { len },
                        _ => return Err(invalid("fmt chunk has an unsupported size")),
                    },
                    b"data" if self.format.is_none() => {
                        return Err(invalid("data chunk before fmt chunk"));
                    }
                    b"data" => State::Data { declared: size, present: 0 },
                    _ if padded == 0 => State::ChunkHeader,
                    _ => State::Skip { remaining: padded },
                }
            }
            State::Fmt { .. } => {
                self.format = Some(parse_fmt(buf)?);
                State::ChunkHeader
            }
            // These states never collect into `buf`.
            State::Skip { .. } | State::Data { .. } => return Ok(()),
        };
        Ok(())
    }

    /// Ends the stream: the header must have reached the `data` chunk.
    pub(crate) fn finish(&self) -> Result<WavInfo, ImportError> {
        match (&self.state, self.format) {
            (State::Data { declared, present }, Some(format)) => {
                // 0 and 0xFFFFFFFF are the placeholders streaming writers leave behind.
                let data_bytes = match *declared {
                    0 | u32::MAX => *present,
                    declared => u64::from(declared).min(*present),
                };
                Ok(WavInfo {
                    sample_rate: format.sample_rate,
                    channels: format.channels,
                    bits_per_sample: format.bits_per_sample,
                    format_tag: format.format_tag,
                    data_bytes,
                })
            }
            (State::Riff, _) => Err(invalid("truncated RIFF header")),
            (State::ChunkHeader, _) if !self.buf.is_empty() => Err(invalid("truncated chunk header")),
            (State::Fmt { .. }, _) => Err(invalid("truncated fmt chunk")),
            (_, None) => Err(invalid("no fmt chunk")),
            (_, Some(_)) => Err(invalid("no data chunk")),
        }
    }
}

/// Checks a complete `fmt ` chunk body (at least 16 bytes, possibly with a trailing pad byte).
fn parse_fmt(body: &[u8]) -> Result<Format, ImportError> {
    let format_tag = u16_at(body, 0);
    let channels = u16_at(body, 2);
    let sample_rate = u32_at(body, 4);
    let bits_per_sample = u16_at(body, 14);
    let effective = match format_tag {
        FORMAT_PCM | FORMAT_FLOAT => format_tag,
        FORMAT_EXTENSIBLE if body.len() >= FMT_EXTENSIBLE_LEN => u16_at(body, 24),
        FORMAT_EXTENSIBLE => return Err(invalid("extensible fmt chunk is too short")),
        _ => return Err(invalid("unsupported format (PCM, IEEE float or extensible only)")),
    };
    if effective != FORMAT_PCM && effective != FORMAT_FLOAT {
        return Err(invalid("unsupported extensible sub-format (PCM or IEEE float only)"));
    }
    if channels != 1 {
        return Err(invalid("audio must be mono (1 channel)"));
    }
    if sample_rate == 0 {
        return Err(invalid("sample rate must be positive"));
    }
    if !matches!(bits_per_sample, 8 | 16 | 24 | 32) {
        return Err(invalid("bits per sample must be 8, 16, 24 or 32"));
    }
    if effective == FORMAT_FLOAT && bits_per_sample != 32 {
        return Err(invalid("IEEE float audio must be 32 bits per sample"));
    }
    Ok(Format { sample_rate, channels, bits_per_sample, format_tag })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A canonical 44-byte header followed by `data`; `fmt_tail` is appended to the 16-byte
    /// `fmt ` body (for the extensible layout).
    pub(crate) fn wav_with(
        format_tag: u16,
        channels: u16,
        sample_rate: u32,
        bits: u16,
        fmt_tail: &[u8],
        data: &[u8],
    ) -> Vec<u8> {
        let fmt_len = 16 + fmt_tail.len() as u32;
        let block_align = channels * bits / 8;
        let mut out = Vec::with_capacity(44 + data.len());
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(4 + 8 + fmt_len + 8 + data.len() as u32).to_le_bytes());
        out.extend_from_slice(b"WAVEfmt ");
        out.extend_from_slice(&fmt_len.to_le_bytes());
        out.extend_from_slice(&format_tag.to_le_bytes());
        out.extend_from_slice(&channels.to_le_bytes());
        out.extend_from_slice(&sample_rate.to_le_bytes());
        out.extend_from_slice(&(sample_rate * u32::from(block_align)).to_le_bytes());
        out.extend_from_slice(&block_align.to_le_bytes());
        out.extend_from_slice(&bits.to_le_bytes());
        out.extend_from_slice(fmt_tail);
        out.extend_from_slice(b"data");
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
        out
    }

    /// A mono 16-bit PCM WAV with `samples` samples of a 440 Hz sine.
    pub(crate) fn sine_wav(sample_rate: u32, samples: usize) -> Vec<u8> {
        let data: Vec<u8> = (0..samples)
            .flat_map(|i| {
                let t = i as f64 / f64::from(sample_rate);
                let v = (t * 440.0 * std::f64::consts::TAU).sin() * 12_000.0;
                (v as i16).to_le_bytes()
            })
            .collect();
        wav_with(FORMAT_PCM, 1, sample_rate, 16, &[], &data)
    }

    fn validate_in_pieces(bytes: &[u8], piece: usize) -> Result<WavInfo, ImportError> {
        let mut v = WavValidator::new();
        for chunk in bytes.chunks(piece.max(1)) {
            v.push(chunk)?;
        }
        v.finish()
    }

    fn reason(result: Result<WavInfo, ImportError>) -> String {
        match result {
            Err(ImportError::InvalidWav(reason)) => reason,
            other => panic!("expected InvalidWav, got {other:?}"),
        }
    }

    #[test]
    fn accepts_mono_pcm_at_any_split() {
        let wav = sine_wav(16_000, 100);
        for piece in 1..=wav.len() {
            let info = validate_in_pieces(&wav, piece).expect("valid wav");
            assert_eq!(
                info,
                WavInfo { sample_rate: 16_000, channels: 1, bits_per_sample: 16, format_tag: 1, data_bytes: 200 }
            );
        }
    }

    #[test]
    fn accepts_float_and_extensible() {
        let info = validate_in_pieces(&wav_with(FORMAT_FLOAT, 1, 48_000, 32, &[], &[0; 8]), 7).expect("float");
        assert_eq!((info.format_tag, info.bits_per_sample), (3, 32));

        // cbSize, valid bits, channel mask, then the sub-format GUID starting with the real tag.
        let mut tail = vec![22, 0, 24, 0, 4, 0, 0, 0];
        tail.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xAA, 0, 0x38, 0x9B, 0x71]);
        let info =
            validate_in_pieces(&wav_with(FORMAT_EXTENSIBLE, 1, 44_100, 24, &tail, &[0; 9]), 5).expect("extensible");
        assert_eq!((info.format_tag, info.data_bytes), (0xFFFE, 9));

        tail[8] = 2; // ADPCM sub-format
        let bad = wav_with(FORMAT_EXTENSIBLE, 1, 44_100, 24, &tail, &[]);
        assert!(reason(validate_in_pieces(&bad, 3)).contains("sub-format"));
    }

    #[test]
    fn skips_unknown_chunks_and_tolerates_short_data() {
        let mut wav = sine_wav(8_000, 10);
        // Insert an odd-sized LIST chunk (with its pad byte) between fmt and data.
        let list = [b"LIST".as_slice(), &3u32.to_le_bytes(), b"abc\0"].concat();
        wav.splice(36..36, list);
        // Declare more data than present: real-world writers get sizes wrong.
        let data_size_at = wav.len() - 20 - 4;
        wav[data_size_at..data_size_at + 4].copy_from_slice(&1000u32.to_le_bytes());
        let info = validate_in_pieces(&wav, 1).expect("valid");
        assert_eq!(info.data_bytes, 20);
    }

    #[test]
    fn rejects_what_is_not_mono_pcm_wav() {
        assert!(reason(validate_in_pieces(&wav_with(1, 2, 16_000, 16, &[], &[0; 4]), 4)).contains("mono"));
        assert!(reason(validate_in_pieces(&wav_with(1, 1, 0, 16, &[], &[]), 4)).contains("sample rate"));
        assert!(reason(validate_in_pieces(&wav_with(1, 1, 8_000, 12, &[], &[]), 4)).contains("bits"));
        assert!(reason(validate_in_pieces(&wav_with(3, 1, 8_000, 16, &[], &[]), 4)).contains("float"));
        assert!(reason(validate_in_pieces(&wav_with(7, 1, 8_000, 8, &[], &[]), 4)).contains("unsupported"));
        assert!(reason(validate_in_pieces(b"ID3\x04 this is an mp3, honest", 4)).contains("RIFF"));
        assert!(reason(validate_in_pieces(b"RIFF\0\0", 4)).contains("truncated RIFF"));
        assert!(reason(validate_in_pieces(b"", 4)).contains("truncated RIFF"));

        let wav = sine_wav(8_000, 4);
        assert!(reason(validate_in_pieces(&wav[..30], 4)).contains("truncated fmt"));
        assert!(reason(validate_in_pieces(&wav[..40], 4)).contains("truncated chunk header"));
        assert!(reason(validate_in_pieces(&wav[..36], 4)).contains("no data chunk"));

        let data_first = [b"RIFF\0\0\0\0WAVEdata\0\0\0\0".as_slice(), &wav[12..]].concat();
        assert!(reason(validate_in_pieces(&data_first, 4)).contains("before fmt"));
        let two_fmts = [&wav[..36], &wav[12..]].concat();
        assert!(reason(validate_in_pieces(&two_fmts, 4)).contains("more than one fmt"));
        let no_fmt = [b"RIFF\0\0\0\0WAVELIST\x02\0\0\0ab".as_slice()].concat();
        assert!(reason(validate_in_pieces(&no_fmt, 4)).contains("no fmt"));
    }
}
