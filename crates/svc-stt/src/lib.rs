//! Speech to text on the machine, for the local voice pipeline: OpenAI Whisper *base* run with
//! candle (pure Rust, CPU only), from the weights that ship in a Python package in CTranslate2
//! (faster-whisper) form.
//!
//! Two steps, both here so that no Python is needed:
//! 1. once, at install time, [`convert_ct2`] turns the package's `model.bin` into safetensors
//!    with the names candle-transformers' Whisper loads ([`REQUIRED_FILES`]);
//! 2. at run time, [`WhisperModel::load`] reads them and [`WhisperModel::transcribe`] turns
//!    16 kHz mono audio ([`RATE_HZ`]) into English text. One model serves many sessions at once.
//!
//! ```no_run
//! use std::{path::Path, sync::Arc};
//!
//! # fn main() -> Result<(), svc_stt::SttError> {
//! svc_stt::convert_ct2(Path::new("ct2"), Path::new("models/whisper-base"))?;
//! let model = Arc::new(svc_stt::WhisperModel::load(Path::new("models/whisper-base"))?);
//! let pcm_16k: Vec<f32> = vec![0.0; 3 * svc_stt::RATE_HZ as usize];
//! let transcript = model.transcribe(&pcm_16k)?; // blocking: call it off the async runtime
//! assert!(transcript.text.is_empty());
//! # Ok(()) }
//! ```
//!
//! Nothing here touches the network.

mod convert;
mod ct2;
mod decoding;
mod error;
mod mel;
mod model;
mod net;
mod safetensors;
mod tokenizer;

pub use convert::{CONFIG_FILE, REQUIRED_FILES, TOKENIZER_FILE, WEIGHTS_FILE, convert_ct2};
pub use error::SttError;
pub use model::{AudioContext, Transcript, WhisperModel};

/// The sample rate [`WhisperModel::transcribe`] expects: Whisper was trained on 16 kHz audio.
pub const RATE_HZ: u32 = 16_000;
