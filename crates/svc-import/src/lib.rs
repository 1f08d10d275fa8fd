//! Streaming parser for `POST /api/v1/external/sessions/import` bodies.
//!
//! An import body may be 256 MB, nearly all of it the base64 WAV in `audio_wav_base64`. The
//! server must never hold several copies of that in memory, so the body is never buffered whole
//! and never handed to serde as one value. Instead:
//!
//! 1. A sans-IO scanner (`scanner.rs`) follows the JSON's lexical structure byte by byte, across
//!    arbitrary chunk boundaries. The string value of the top-level key `audio_wav_base64`
//!    (matched on the *decoded* key, so `"audio_wav_\u0062ase64"` counts) is base64-decoded
//!    on the fly, its WAV header checked as the bytes arrive (`wav.rs`), and the decoded bytes
//!    are written to a temporary file in the caller's spool directory.
//! 2. Everything else, "the rest", is forwarded verbatim with `null` in place of the audio
//!    string. It is kept in memory up to 8 MiB and spilled to a second temporary file beyond.
//! 3. The rest is parsed into a [`serde_json::Value`] (on a blocking thread when it comes from
//!    disk) and walked by hand (`validate.rs`), so that every schema problem is reported at
//!    once, with a `loc` under `"body"` and a message that never quotes the payload.
//!
//! # Invariants
//!
//! - Memory is bounded by the rest limit plus one feed slice (64 KiB of body, ~48 KiB decoded),
//!   plus the parsed rest: the audio is only ever in memory one slice at a time.
//! - The scanner agrees with a JSON parser on valid JSON. On invalid JSON it may misjudge the
//!   structure but never panics, and the rest keeps every byte up to the first invalid one, so
//!   the rest is valid JSON exactly when the body is.
//! - The temporary files are deleted when dropped, so every error path cleans up after itself.
//! - `InvalidJson` positions refer to the body as sent: the scanner remembers where `null`
//!   replaced the audio string and shifts columns on that line back.
//!
//! # Which error wins
//!
//! The nominal order is: body too large > audio too large > invalid base64 > invalid WAV >
//! invalid JSON > too many turns > validation issues. But the body is read once, front to back,
//! and reading stops at the first streaming error (that is what keeps a bad 256 MB upload cheap
//! to reject), so a problem later in the body cannot be known. Precisely:
//!
//! 1. [`ImportError::BodyTooLarge`] is checked on each chunk before the chunk is scanned.
//! 2. Inside the audio, the error whose cause comes *first in the body* wins, whatever the
//!    chunking: the decoded bytes before an invalid base64 character still go through the WAV
//!    and size checks first. Of [`ImportError::AudioTooLarge`], [`ImportError::InvalidBase64`]
//!    and [`ImportError::InvalidWav`], the WAV header problem therefore usually wins (it shows in
//!    the first bytes); the nominal order breaks ties at the same position.
//! 3. After the whole body: [`ImportError::InvalidJson`], then [`ImportError::TooManyTurns`],
//!    then [`ImportError::Validation`] listing every schema problem.
//!
//! A body that ends inside the audio string is reported as `InvalidJson` (an `eof` error), not
//! as a truncated WAV.

mod error;
mod scanner;
mod validate;
mod wav;

#[cfg(test)]
mod tests;

use std::io;
use std::path::Path;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use svc_domain::limits::{IMPORT_MAX_AUDIO_BYTES, IMPORT_MAX_BODY_BYTES, IMPORT_MAX_TURNS};
use svc_wire::rest::TranscriptTurn;
use tempfile::NamedTempFile;
use tokio::io::{AsyncSeekExt, AsyncWriteExt, BufWriter};

pub use error::ImportError;
pub use wav::WavInfo;

use scanner::{ImportScanner, ScanSink, ScanSummary};

/// Size limits of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportLimits {
    /// Largest raw body, in bytes.
    pub max_body_bytes: u64,
    /// Largest decoded audio, in bytes.
    pub max_audio_bytes: u64,
    /// Most transcript turns.
    pub max_turns: usize,
}

impl Default for ImportLimits {
    /// The contract's limits from [`svc_domain::limits`].
    fn default() -> Self {
        Self {
            max_body_bytes: IMPORT_MAX_BODY_BYTES,
            max_audio_bytes: IMPORT_MAX_AUDIO_BYTES,
            max_turns: IMPORT_MAX_TURNS,
        }
    }
}

/// A parsed and validated import body.
#[derive(Debug)]
pub struct ImportBody {
    /// Everything but the audio.
    pub metadata: ImportMetadata,
    /// The audio, when `audio_wav_base64` was a string (absent or `null` gives `None`).
    pub audio: Option<SpooledAudio>,
}

/// The import's fields other than the audio.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportMetadata {
    /// Epoch seconds (finite).
    pub started_at: f64,
    /// Epoch seconds (finite, not before `started_at`).
    pub ended_at: Option<f64>,
    /// Session title.
    pub title: Option<String>,
    /// Provider that served the call.
    pub provider: Option<String>,
    /// Transcript turns, in body order.
    pub transcript: Vec<TranscriptTurn>,
}

/// The decoded audio, spooled to disk.
#[derive(Debug)]
pub struct SpooledAudio {
    /// A temporary file in the caller's spool directory holding the decoded WAV exactly as
    /// sent, positioned at its start. Deleted on drop unless persisted.
    pub file: NamedTempFile,
    /// Length of `file`.
    pub bytes: u64,
    /// What the WAV header says.
    pub wav: WavInfo,
}

/// Reads, splits and validates an import body; see the crate documentation for the design and
/// which error wins when several apply.
///
/// Temporary files go to `spool_dir`. The stream is not read past the first error; a
/// [`ImportError::BodyTooLarge`] is returned as soon as the byte count passes the limit.
pub async fn read_import_body<S, E>(body: S, spool_dir: &Path, limits: &ImportLimits) -> Result<ImportBody, ImportError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::error::Error + Send + Sync + 'static,
{
    let (body, _) = read_with(body, spool_dir, limits, &Config::default()).await?;
    Ok(body)
}

/// Tunables that tests shrink.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The rest stays in memory up to this many bytes, then spills to disk.
    pub(crate) rest_memory_limit: usize,
    /// Body chunks are scanned in slices of at most this many bytes, which bounds the staging
    /// buffers whatever chunk sizes the stream delivers.
    pub(crate) feed_slice: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self { rest_memory_limit: 8 * 1024 * 1024, feed_slice: 64 * 1024 }
    }
}

/// What tests want to know about how a body was read.
#[derive(Debug)]
pub(crate) struct ReadStats {
    /// The rest went over [`Config::rest_memory_limit`] and was parsed from disk.
    #[cfg_attr(not(test), expect(dead_code, reason = "only tests look at how a body was read"))]
    pub(crate) rest_spilled: bool,
}

/// [`read_import_body`] with explicit tunables.
pub(crate) async fn read_with<S, E>(
    mut body: S,
    spool_dir: &Path,
    limits: &ImportLimits,
    config: &Config,
) -> Result<(ImportBody, ReadStats), ImportError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut scanner = ImportScanner::new(limits.max_audio_bytes);
    let mut spools = Spools { dir: spool_dir, config, staged: Staged::default(), rest: None, audio: None };
    let mut received: u64 = 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ImportError::Body(e.to_string()))?;
        received += chunk.len() as u64;
        if received > limits.max_body_bytes {
            return Err(ImportError::BodyTooLarge);
        }
        for piece in chunk.chunks(config.feed_slice.max(1)) {
            scanner.push(piece, &mut spools.staged)?;
            spools.drain().await?;
        }
    }
    let summary = scanner.finish(&mut spools.staged)?;
    spools.drain().await?;

    let audio = match (summary.wav, spools.audio) {
        (None, _) => None,
        (Some(wav), spool) => {
            // A complete WAV header means bytes arrived, so the spool exists; stay total anyway.
            let spool = match spool {
                Some(spool) => spool,
                None => Spool::create(spool_dir).await?,
            };
            let (file, bytes) = spool.finish().await?;
            Some(SpooledAudio { file, bytes, wav })
        }
    };

    let rest_spilled = spools.rest.is_some();
    let max_turns = limits.max_turns;
    let metadata = match spools.rest {
        None => check_rest(serde_json::from_slice(&spools.staged.rest), &summary, max_turns),
        Some(spool) => {
            let (file, _) = spool.finish().await?;
            // A spilled rest is big: parse and walk it off the async threads. `file` moves into
            // the task and is deleted when it is done.
            tokio::task::spawn_blocking(move || {
                check_rest(serde_json::from_reader(io::BufReader::new(file.as_file())), &summary, max_turns)
            })
            .await
            .map_err(io::Error::other)?
        }
    }?;
    Ok((ImportBody { metadata, audio }, ReadStats { rest_spilled }))
}

/// Turns the parsed rest into metadata, or the JSON / turn-count / validation error.
fn check_rest(
    parsed: serde_json::Result<serde_json::Value>,
    summary: &ScanSummary,
    max_turns: usize,
) -> Result<ImportMetadata, ImportError> {
    let value = parsed.map_err(|err| json_error(err, summary))?;
    validate::into_metadata(value, summary.duplicate_audio_key, max_turns)
}

/// Maps a serde_json error on the rest to a position in the body as sent.
fn json_error(err: serde_json::Error, summary: &ScanSummary) -> ImportError {
    use serde_json::error::Category;
    let category = match err.classify() {
        Category::Io => return ImportError::Io(err.into()),
        Category::Syntax => "syntax",
        Category::Data => "data",
        Category::Eof => "eof",
    };
    let (line, column) = summary.body_position(err.line(), err.column());
    ImportError::InvalidJson { line, column, category }
}

/// The scanner's output of one slice, waiting to be written out. While the rest is not spilled,
/// `rest` *is* the in-memory rest.
#[derive(Debug, Default)]
struct Staged {
    rest: Vec<u8>,
    audio: Vec<u8>,
}

impl ScanSink for Staged {
    fn rest(&mut self, bytes: &[u8]) {
        self.rest.extend_from_slice(bytes);
    }

    fn audio(&mut self, bytes: &[u8]) {
        self.audio.extend_from_slice(bytes);
    }
}

/// Where the scanner's output goes.
struct Spools<'a> {
    dir: &'a Path,
    config: &'a Config,
    staged: Staged,
    /// Present once the rest passed [`Config::rest_memory_limit`].
    rest: Option<Spool>,
    /// Created on the first decoded audio byte.
    audio: Option<Spool>,
}

impl Spools<'_> {
    /// Moves staged bytes to their files.
    async fn drain(&mut self) -> io::Result<()> {
        if !self.staged.audio.is_empty() {
            if self.audio.is_none() {
                self.audio = Some(Spool::create(self.dir).await?);
            }
            if let Some(spool) = &mut self.audio {
                spool.write(&self.staged.audio).await?;
            }
            self.staged.audio.clear();
        }
        if self.rest.is_none() && self.staged.rest.len() > self.config.rest_memory_limit {
            let mut spool = Spool::create(self.dir).await?;
            spool.write(&self.staged.rest).await?;
            // Give the big in-memory buffer back; from now on it only stages one slice.
            self.staged.rest = Vec::new();
            self.rest = Some(spool);
        } else if let Some(spool) = &mut self.rest {
            spool.write(&self.staged.rest).await?;
            self.staged.rest.clear();
        }
        Ok(())
    }
}

/// A temporary file being written through a buffered async handle.
struct Spool {
    file: NamedTempFile,
    writer: BufWriter<tokio::fs::File>,
    bytes: u64,
}

impl Spool {
    async fn create(dir: &Path) -> io::Result<Self> {
        let dir = dir.to_owned();
        let (file, handle) = tokio::task::spawn_blocking(move || {
            let file = NamedTempFile::new_in(dir)?;
            // A duplicate of the descriptor: it shares the file offset with `file`.
            let handle = file.as_file().try_clone()?;
            io::Result::Ok((file, handle))
        })
        .await
        .map_err(io::Error::other)??;
        let writer = BufWriter::with_capacity(256 * 1024, tokio::fs::File::from_std(handle));
        Ok(Self { file, writer, bytes: 0 })
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes).await?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and rewinds, so the returned file reads from its start.
    async fn finish(mut self) -> io::Result<(NamedTempFile, u64)> {
        self.writer.flush().await?;
        self.writer.into_inner().rewind().await?;
        Ok((self.file, self.bytes))
    }
}
