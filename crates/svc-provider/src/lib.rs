//! Upstream speech-to-speech providers (Gemini Live, OpenAI Realtime, OpenAI GPT-Live, xAI Grok).
//!
//! Today this crate holds the pure foundations every adapter shares: [`usage`] (each provider's
//! usage reports mapped onto the spec's nine token fields, summed across upstream sessions) and
//! [`resample`] (between the room's 48 kHz and each provider's rate). The per-provider sans-IO
//! codecs and the one WebSocket driver land here next (issue 5).

pub mod resample;
pub mod usage;
