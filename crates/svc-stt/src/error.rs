//! The crate's one error type: every failure says which file or which stage went wrong, so an
//! installer or an operator can act on it without reading the code.

use std::path::PathBuf;

/// What went wrong while converting, loading or running the speech-to-text model.
#[derive(Debug, thiserror::Error)]
pub enum SttError {
    /// A file the conversion or the model needs does not exist.
    #[error("missing file {path}: run `svc models install` (or the converter) first")]
    MissingFile {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// Reading or writing a file failed for another reason than its absence.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file exists but is not what it should be: truncated, foreign, or of an unsupported variant.
    #[error("bad format in {path}: {detail}")]
    BadFormat {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it, with the byte offset where that helps.
        detail: String,
    },
    /// The weights could not be turned into a model (a tensor missing or of the wrong shape).
    #[error("loading the model from {path} failed: {source}")]
    Load {
        /// The model directory.
        path: PathBuf,
        /// candle's error.
        #[source]
        source: candle_core::Error,
    },
    /// The audio handed to `transcribe` cannot be used (for example it holds NaN or infinite samples).
    #[error("invalid audio: {0}")]
    InvalidAudio(String),
    /// Running the network failed.
    #[error("inference failed: {0}")]
    Inference(#[from] candle_core::Error),
}

impl SttError {
    /// Maps an I/O error on `path` to [`SttError::MissingFile`] when the file is absent, else [`SttError::Io`].
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if source.kind() == std::io::ErrorKind::NotFound {
            SttError::MissingFile { path }
        } else {
            SttError::Io { path, source }
        }
    }

    /// A [`SttError::BadFormat`] for `path`.
    pub(crate) fn format(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        SttError::BadFormat { path: path.into(), detail: detail.into() }
    }
}
