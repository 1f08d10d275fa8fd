//! The work [`super::LocalCore`] hands to its shell, and what comes back.

use svc_llm::{ChatMessage, GenerateParams, Generation, ToolDef};

/// Work for the shell. Jobs of one lane run one at a time in order: transcriptions and
/// generations share the brain lane; speech has its own lane.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// Transcribe 16 kHz audio.
    Transcribe {
        /// Correlates the outcome.
        id: u64,
        /// The audio.
        pcm: Vec<i16>,
        /// A partial transcription of a turn still open.
        partial: bool,
    },
    /// Generate a reply, streaming its text.
    Generate {
        /// Correlates the outcome.
        id: u64,
        /// System prompt first, then the conversation.
        messages: Vec<ChatMessage>,
        /// Tools offered.
        tools: Vec<ToolDef>,
        /// Sampling.
        params: GenerateParams,
    },
    /// Stop generation `id` now (its outcome still comes, as cancelled).
    Cancel {
        /// The generation.
        id: u64,
    },
    /// Speak a sentence.
    Speak {
        /// Correlates the outcome.
        id: u64,
        /// The text.
        text: String,
    },
    /// Read the conversation so far into the model without replying, so that the next reply
    /// (these messages plus the user's next one) reads only what is new. Worth doing only while
    /// the brain lane has nothing else to do: the shell drops it when other work is waiting.
    ReadAhead {
        /// System prompt first, then the conversation.
        messages: Vec<ChatMessage>,
        /// Tools offered.
        tools: Vec<ToolDef>,
    },
    /// Drop every queued speech job older than `before` (a barge-in).
    DropSpeech {
        /// Jobs with a smaller id are stale.
        before: u64,
    },
}

/// What came of a [`Job`].
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A transcription finished.
    Transcribed {
        /// The job.
        id: u64,
        /// The text, or why it failed.
        result: Result<String, String>,
    },
    /// A piece of a generation's text.
    Text {
        /// The generation.
        id: u64,
        /// The piece.
        text: String,
    },
    /// A generation ended.
    Generated {
        /// The generation.
        id: u64,
        /// What it made, or why it failed.
        result: Result<Generation, String>,
    },
    /// A sentence was spoken.
    Spoken {
        /// The job.
        id: u64,
        /// PCM16 at [`super::SPEECH_RATE_HZ`], or why it failed.
        result: Result<Vec<i16>, String>,
    },
}
