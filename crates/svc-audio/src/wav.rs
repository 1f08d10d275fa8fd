//! PCM16 WAV files: reading test speech (espeak-ng writes these) and writing recordings.
//!
//! Only integer PCM with 16 bits per sample is read, plain or `WAVE_FORMAT_EXTENSIBLE`; any other
//! format is a typed error, never a guess. Chunks other than `fmt ` and `data` (`LIST`, `fact`,
//! `cue `, …) are skipped. Every length in the file is checked against the bytes present, so a
//! hostile header can neither panic the reader nor make it allocate more than the input's size.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::AudioError;

/// `WAVE_FORMAT_PCM`.
const FORMAT_PCM: u16 = 1;
/// `WAVE_FORMAT_EXTENSIBLE`: the real format is the first two bytes of the sub-format GUID.
const FORMAT_EXTENSIBLE: u16 = 0xFFFE;
/// Bytes of a `fmt ` chunk body that holds the basic fields.
const FMT_BASIC_LEN: usize = 16;
/// Bytes of a `fmt ` chunk body that holds the extensible fields, up to the sub-format.
const FMT_EXTENSIBLE_LEN: usize = 26;
/// A `data` size at or above this, larger than the bytes that follow, is a placeholder left by a
/// writer that streamed to a pipe and could not seek back (espeak-ng `--stdout` writes
/// 0x7FFFF000, others 0xFFFFFFFF): the data runs to the end of the file. A smaller size that
/// overruns the file means the file was cut short.
const STREAMING_SIZE_PLACEHOLDER: u32 = 0x7FFF_0000;

/// A decoded WAV file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wav {
    /// Sample frames per second.
    pub sample_rate: u32,
    /// Interleaved channels (at least 1).
    pub channels: u16,
    /// Samples, interleaved by channel; the length is a multiple of `channels`.
    pub samples: Vec<i16>,
}

impl Wav {
    /// Sample frames (samples per channel).
    #[must_use]
    pub fn frames(&self) -> usize {
        self.samples.len() / usize::from(self.channels.max(1))
    }

    /// Playing time.
    #[must_use]
    pub fn duration(&self) -> Duration {
        if self.sample_rate == 0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(self.frames() as f64 / f64::from(self.sample_rate))
    }

    /// The samples mixed down to one channel (the mean of each frame's channels).
    #[must_use]
    pub fn to_mono(&self) -> Vec<i16> {
        let channels = usize::from(self.channels.max(1));
        if channels == 1 {
            return self.samples.clone();
        }
        self.samples
            .chunks_exact(channels)
            .map(|frame| {
                let sum: i32 = frame.iter().map(|&s| i32::from(s)).sum();
                // The mean of i16 values is an i16.
                (sum / channels as i32) as i16
            })
            .collect()
    }
}

/// Parses a PCM16 WAV file held in memory.
///
/// # Errors
///
/// [`AudioError::NotWav`] without a RIFF/WAVE header; [`AudioError::WavTruncated`] when the header
/// or the declared data is cut short; [`AudioError::WavUnsupported`] for formats other than PCM16;
/// [`AudioError::WavMalformed`] for inconsistent fields (zero channels or rate, a block size that
/// does not match, a partial sample frame, a missing or repeated `fmt ` chunk).
pub fn read_wav(bytes: &[u8]) -> Result<Wav, AudioError> {
    let riff = bytes.get(..12).ok_or(AudioError::NotWav { reason: "shorter than a RIFF header" })?;
    if &riff[0..4] != b"RIFF" || &riff[8..12] != b"WAVE" {
        return Err(AudioError::NotWav { reason: "no RIFF/WAVE signature" });
    }
    // The RIFF size is not trusted: streaming writers leave it 0 or a placeholder. The chunks
    // themselves are bounded by the bytes present.
    let mut rest = &bytes[12..];
    let mut format: Option<Format> = None;
    loop {
        let Some(header) = rest.get(..8) else {
            return Err(match format {
                None => AudioError::WavMalformed { reason: "no fmt chunk" },
                Some(_) => AudioError::WavMalformed { reason: "no data chunk" },
            });
        };
        let id = &header[0..4];
        let size = u32_at(header, 4);
        let body_and_beyond = &rest[8..];
        if id == b"data" {
            let format = format.ok_or(AudioError::WavMalformed { reason: "data chunk before fmt chunk" })?;
            let declared = usize::try_from(size).unwrap_or(usize::MAX);
            let data = match body_and_beyond.get(..declared) {
                Some(data) => data,
                None if size >= STREAMING_SIZE_PLACEHOLDER => body_and_beyond,
                None => {
                    return Err(AudioError::WavTruncated { reason: "data chunk is shorter than its declared size" });
                }
            };
            return format.samples(data);
        }
        // Chunks are word-aligned: an odd-sized chunk is followed by a pad byte, which a file may
        // omit at its very end.
        let body = body_and_beyond
            .get(..usize::try_from(size).unwrap_or(usize::MAX))
            .ok_or(AudioError::WavTruncated { reason: "a chunk is shorter than its declared size" })?;
        if id == b"fmt " {
            if format.is_some() {
                return Err(AudioError::WavMalformed { reason: "more than one fmt chunk" });
            }
            format = Some(Format::parse(body)?);
        }
        let padded = body.len() + (body.len() & 1);
        rest = body_and_beyond.get(padded..).unwrap_or_default();
    }
}

/// Reads and parses a PCM16 WAV file.
///
/// # Errors
///
/// [`AudioError::Io`] if the file cannot be read; otherwise as [`read_wav`].
pub fn read_wav_file(path: impl AsRef<Path>) -> Result<Wav, AudioError> {
    read_wav(&std::fs::read(path)?)
}

/// Writes `samples` (interleaved by channel) as a canonical 44-byte-header PCM16 WAV file.
///
/// # Errors
///
/// [`AudioError::WavMalformed`] for zero channels or sample rate, a sample count that is not a
/// multiple of `channels`, or more data than a WAV file can describe (4 GiB);
/// [`AudioError::Io`] if writing fails.
pub fn write_wav(mut writer: impl Write, sample_rate: u32, channels: u16, samples: &[i16]) -> Result<(), AudioError> {
    if channels == 0 || sample_rate == 0 {
        return Err(AudioError::WavMalformed { reason: "channels and sample rate must be positive" });
    }
    if !samples.len().is_multiple_of(usize::from(channels)) {
        return Err(AudioError::WavMalformed { reason: "sample count is not a multiple of the channel count" });
    }
    let block_align =
        channels.checked_mul(2).ok_or(AudioError::WavMalformed { reason: "too many channels for 16-bit frames" })?;
    let byte_rate = sample_rate
        .checked_mul(u32::from(block_align))
        .ok_or(AudioError::WavMalformed { reason: "byte rate does not fit the header" })?;
    let data_len = samples
        .len()
        .checked_mul(2)
        .and_then(|len| u32::try_from(len).ok())
        .filter(|len| len.checked_add(36).is_some())
        .ok_or(AudioError::WavMalformed { reason: "more audio than a WAV file can hold" })?;

    let mut bytes = Vec::with_capacity(44 + samples.len() * 2);
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + data_len).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    bytes.extend_from_slice(&16_u32.to_le_bytes());
    bytes.extend_from_slice(&FORMAT_PCM.to_le_bytes());
    bytes.extend_from_slice(&channels.to_le_bytes());
    bytes.extend_from_slice(&sample_rate.to_le_bytes());
    bytes.extend_from_slice(&byte_rate.to_le_bytes());
    bytes.extend_from_slice(&block_align.to_le_bytes());
    bytes.extend_from_slice(&16_u16.to_le_bytes());
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&data_len.to_le_bytes());
    for sample in samples {
        bytes.extend_from_slice(&sample.to_le_bytes());
    }
    // One write of the whole file: an unbuffered `File` would otherwise see a syscall per sample.
    writer.write_all(&bytes)?;
    writer.flush()?;
    Ok(())
}

/// Writes a PCM16 WAV file at `path`, replacing any file there.
///
/// # Errors
///
/// As [`write_wav`].
pub fn write_wav_file(
    path: impl AsRef<Path>,
    sample_rate: u32,
    channels: u16,
    samples: &[i16],
) -> Result<(), AudioError> {
    write_wav(std::fs::File::create(path)?, sample_rate, channels, samples)
}

/// The fields of a `fmt ` chunk this reader needs.
#[derive(Debug, Clone, Copy)]
struct Format {
    sample_rate: u32,
    channels: u16,
}

impl Format {
    fn parse(body: &[u8]) -> Result<Self, AudioError> {
        if body.len() < FMT_BASIC_LEN {
            return Err(AudioError::WavTruncated { reason: "fmt chunk is shorter than 16 bytes" });
        }
        let mut format_tag = u16_at(body, 0);
        let channels = u16_at(body, 2);
        let sample_rate = u32_at(body, 4);
        let block_align = u16_at(body, 12);
        let bits_per_sample = u16_at(body, 14);
        if format_tag == FORMAT_EXTENSIBLE {
            if body.len() < FMT_EXTENSIBLE_LEN {
                return Err(AudioError::WavTruncated { reason: "extensible fmt chunk is missing its sub-format" });
            }
            format_tag = u16_at(body, 24);
        }
        if format_tag != FORMAT_PCM || bits_per_sample != 16 {
            return Err(AudioError::WavUnsupported { format_tag, bits_per_sample });
        }
        if channels == 0 || sample_rate == 0 {
            return Err(AudioError::WavMalformed { reason: "zero channels or zero sample rate" });
        }
        if u32::from(block_align) != u32::from(channels) * 2 {
            return Err(AudioError::WavMalformed { reason: "block size does not match the channel count" });
        }
        Ok(Self { sample_rate, channels })
    }

    fn samples(self, data: &[u8]) -> Result<Wav, AudioError> {
        if !data.len().is_multiple_of(usize::from(self.channels) * 2) {
            return Err(AudioError::WavTruncated { reason: "data ends inside a sample frame" });
        }
        let samples = data.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]])).collect();
        Ok(Wav { sample_rate: self.sample_rate, channels: self.channels, samples })
    }
}

/// Little-endian u16 at `at`; callers have checked that `at + 2 <= bytes.len()`.
fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// Little-endian u32 at `at`; callers have checked that `at + 4 <= bytes.len()`.
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests;
