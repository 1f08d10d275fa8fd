//! The one error type of the crate.

use svc_wire::ValidationIssue;

/// Why an import body was rejected. Messages never quote the payload.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The raw body passed `max_body_bytes`.
    #[error("request body is larger than the import limit")]
    BodyTooLarge,
    /// The decoded audio passed `max_audio_bytes`.
    #[error("decoded audio is larger than the import limit")]
    AudioTooLarge,
    /// `audio_wav_base64` is not standard base64 (padding optional, no whitespace, only `\/` as
    /// an escape).
    #[error("audio_wav_base64 is not valid base64")]
    InvalidBase64,
    /// The decoded audio is not a mono PCM/float WAV; the reason never quotes the payload.
    #[error("audio_wav_base64 is not a supported WAV file: {0}")]
    InvalidWav(String),
    /// `transcript` has more turns than allowed.
    #[error("transcript has more than {max} turns")]
    TooManyTurns {
        /// The limit.
        max: usize,
    },
    /// The body is not valid JSON; the position is in the body as sent.
    #[error("request body is not valid JSON ({category} error at line {line}, column {column})")]
    InvalidJson {
        /// 1-based line.
        line: usize,
        /// Column as serde_json counts it (bytes into the line).
        column: usize,
        /// `syntax`, `eof` or `data` (from [`serde_json::error::Category`]).
        category: &'static str,
    },
    /// Well-formed JSON that breaks the schema; every problem found is listed.
    #[error("request body failed validation ({} problem(s))", .0.len())]
    Validation(Vec<ValidationIssue>),
    /// The body stream failed.
    #[error("reading the request body failed: {0}")]
    Body(String),
    /// Spooling to a temporary file failed.
    #[error("spooling the import body failed: {0}")]
    Io(#[from] std::io::Error),
}
