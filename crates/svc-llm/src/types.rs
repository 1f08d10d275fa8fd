//! The conversation and generation types both brains share: what goes in (messages, tools,
//! sampling parameters) and what comes out (text, tool calls, token counts, why it stopped).
//!
//! They are plain data, shaped after OpenAI's chat-completions messages because that is the
//! lingua franca of the endpoints the remote brain talks to; the embedded brain renders the same
//! messages into SmolLM2's ChatML prompt.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions for the model (persona, rules). Never dropped when a prompt is shortened.
    System,
    /// What the person said (the transcript of their turn).
    User,
    /// What the model replied, possibly with tool calls.
    Assistant,
    /// The result of one tool call, answering [`ChatMessage::tool_call_id`].
    Tool,
}

impl ChatRole {
    /// The role's name on the wire and in ChatML: `system`, `user`, `assistant`, `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChatRole::System => "system",
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
            ChatRole::Tool => "tool",
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: ChatRole,
    /// The text. May be empty for an assistant message that only calls tools.
    pub content: String,
    /// The tools an assistant message called (empty for every other role).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`ChatRole::Tool`] message: the [`ToolCall::id`] it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message with no tool calls.
    pub fn new(role: ChatRole, content: impl Into<String>) -> Self {
        ChatMessage { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(ChatRole::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(ChatRole::User, content)
    }

    /// An assistant message without tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(ChatRole::Assistant, content)
    }

    /// An assistant message that called tools (its `content` is what it said alongside, if any).
    pub fn assistant_with_tool_calls(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        ChatMessage { tool_calls, ..Self::new(ChatRole::Assistant, content) }
    }

    /// The result of the tool call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage { tool_call_id: Some(tool_call_id.into()), ..Self::new(ChatRole::Tool, content) }
    }
}

/// A tool (function) the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The function's name, as the model must spell it.
    pub name: String,
    /// What it does and when to use it; the model reads this.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Identifies the call; the tool's result message carries it back as `tool_call_id`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text (as OpenAI sends them). Endpoints do not guarantee it parses.
    pub arguments: String,
}

/// How to sample a reply.
///
/// The embedded brain uses every field. The remote brain sends `max_tokens`, `temperature`,
/// `top_p` and `seed` (the standard chat-completions fields); `top_k`, `repeat_penalty`,
/// `no_repeat_ngram` and `ascii_only` are not standard and stay local.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenerateParams {
    /// Most tokens to generate; generation ends with [`Finish::Length`] when it is reached.
    pub max_tokens: u32,
    /// Softmax temperature; `0.0` means greedy (always the most likely token).
    pub temperature: f32,
    /// Nucleus sampling: keep the most likely tokens whose probabilities sum to `top_p` (0, 1].
    pub top_p: f32,
    /// Keep only the `top_k` most likely tokens before nucleus sampling; `0` keeps all.
    pub top_k: u32,
    /// Divides (or for negative logits multiplies) the logits of tokens seen recently; `1.0` is off.
    pub repeat_penalty: f32,
    /// Seeds the sampler: the same prompt, parameters and seed give the same text.
    pub seed: u64,
    /// A token that would say again an n-gram of this many tokens already in the reply is never
    /// picked (`0` is off): a small model otherwise says the same clause twice.
    pub no_repeat_ngram: u32,
    /// Only tokens of plain ASCII text: pins the reply to English (a 135M model asked about
    /// France otherwise answers in French), and keeps out emoji the voice cannot say.
    pub ascii_only: bool,
}

impl Default for GenerateParams {
    /// SmolLM2's model card suggests temperature 0.2 and top-p 0.9; a mild repetition penalty
    /// keeps the 135M model from looping.
    fn default() -> Self {
        GenerateParams {
            max_tokens: 200,
            temperature: 0.2,
            top_p: 0.9,
            top_k: 40,
            repeat_penalty: 1.1,
            seed: 0,
            no_repeat_ngram: 0,
            ascii_only: false,
        }
    }
}

impl GenerateParams {
    /// Checks the values are usable (finite, in range).
    pub fn validate(&self) -> Result<(), LlmError> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(LlmError::InvalidParams(format!(
                "temperature {} is not a finite value >= 0",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(LlmError::InvalidParams(format!("top_p {} is not in (0, 1]", self.top_p)));
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return Err(LlmError::InvalidParams(format!(
                "repeat_penalty {} is not a finite value > 0",
                self.repeat_penalty
            )));
        }
        Ok(())
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// The model ended its turn.
    Stop,
    /// `max_tokens` (or the context) was reached.
    Length,
    /// The caller's callback asked to stop (barge-in).
    Cancelled,
    /// The model called tools and waits for their results.
    ToolCalls,
    /// The endpoint withheld the rest (`content_filter`); never produced by the embedded brain.
    ContentFilter,
}

/// The outcome of one embedded generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// The text to speak: everything streamed to the callback, tool-call markup excluded.
    pub text: String,
    /// The tools the model called (only tools that were offered).
    pub tool_calls: Vec<ToolCall>,
    /// Tokens in the prompt the model read (after shortening).
    pub prompt_tokens: u32,
    /// Tokens the model generated, end-of-turn token included.
    pub output_tokens: u32,
    /// Messages left out of the prompt to keep it within its budget (oldest first).
    pub dropped_messages: u32,
    /// Why it ended.
    pub finish: Finish,
}

/// What can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The model file could not be read.
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The model file is not a usable GGUF (missing tensor or metadata, unsupported layout).
    #[error("bad model file: {0}")]
    BadModel(String),
    /// The tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A tensor operation failed while running the model.
    #[error("inference: {0}")]
    Inference(String),
    /// The parameters are out of range.
    #[error("invalid parameters: {0}")]
    InvalidParams(String),
    /// The messages cannot fit the prompt budget even after dropping every droppable turn
    /// (the system prompt alone is too long).
    #[error("prompt too long: {needed} tokens needed, budget {budget}")]
    PromptTooLong {
        /// Tokens the kept part needs.
        needed: usize,
        /// The budget.
        budget: usize,
    },
}

impl From<candle_core::Error> for LlmError {
    fn from(error: candle_core::Error) -> Self {
        LlmError::Inference(error.to_string())
    }
}
