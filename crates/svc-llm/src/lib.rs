//! The reply model ("brain") of svc's offline voice pipeline (VAD → Whisper → LLM → TTS).
//!
//! Two brains behind the same message types ([`ChatMessage`], [`ToolDef`], [`GenerateParams`]):
//!
//! - **Embedded**: [`SmolLm`], SmolLM2-135M-Instruct from a GGUF file, run by candle on the CPU
//!   in this process. Streams its reply token by token through a callback that can stop it
//!   (barge-in). Load it once and share it through an `Arc`.
//! - **Remote**: any OpenAI-compatible chat-completions endpoint, sans-IO: [`openai::request_body`]
//!   builds the streaming request and [`openai::StreamParser`] turns each server-sent event's
//!   `data` into [`openai::StreamEvent`]s. The caller does the HTTP.
//!
//! Layout: [`types`] (shared types), [`openai`] (remote), [`smollm`] (embedded), [`tokenizer`]
//! (the GGUF's byte-level BPE, UTF-8-safe streaming), [`tools`] (tool calling for the embedded
//! model, and the trial showing the 135M model does not call tools); the ChatML prompt with its
//! budget and the sampler are private.
//!
//! # Speed of the embedded brain
//!
//! SmolLM2-135M-Instruct Q4_1 (re-quantized to Q8_0 at load, see [`smollm`]) on the 2-core
//! build machine (AMD EPYC with AVX-512), candle 0.11.1, both cores idle otherwise, measured by
//! `tests/smollm.rs`:
//!
//! | | candle, 2 threads (default) | candle, `CANDLE_NUM_THREADS=1` | llama.cpp, 2 threads (research note) |
//! |---|---|---|---|
//! | load | 0.43 s | 0.42 s | 0.09–0.13 s |
//! | time to first token, 34-token prompt | 180–190 ms | 310 ms | 110–130 ms |
//! | prompt reading | 180–190 tokens/s | 110 tokens/s | 300–370 tokens/s |
//! | generation | 68–85 tokens/s | 57–64 tokens/s | 104–119 tokens/s |
//! | next turn of a conversation (176-token prompt) | 165–175 ms (prefix reused) instead of 0.9 s | 260 ms instead of 1.5 s | – |
//!
//! So candle is about 1.5 times slower than llama.cpp per token and 2 times slower reading a
//! prompt. Two things keep the per-turn latency at llama.cpp's level anyway: the state after
//! each prompt is kept and the next turn reads only what is new (a
//! conversation's time to first token stays flat), and [`SmolLm::warm_up`] reads the system
//! prompt while the user is still speaking.
//!
//! **Other processes on the same cores.** candle's CPU thread pool waits for its workers by
//! spinning. When another process (a build, Whisper, a TTS) keeps a core busy, a 2-thread
//! generation collapses to 3–9 tokens/s with 0.8–1.3 s to the first token, while a 1-thread one
//! keeps about 60 tokens/s and 0.3 s. The thread count can only be set by the environment
//! (`CANDLE_NUM_THREADS`, read once when candle first runs; `RAYON_NUM_THREADS` also counts),
//! so it is the deployment's choice: `CANDLE_NUM_THREADS=1` when the pipeline's stages overlap
//! on a 2-core machine.

pub mod openai;
mod prompt;
mod sampler;
pub mod smollm;
pub mod tokenizer;
pub mod tools;
pub mod types;

pub use smollm::SmolLm;
pub use tokenizer::{Tokenizer, Utf8Stream};
pub use tools::ToolPrompt;
pub use types::{ChatMessage, ChatRole, Finish, GenerateParams, Generation, LlmError, ToolCall, ToolDef};
