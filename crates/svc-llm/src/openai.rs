//! The remote brain: any OpenAI-compatible chat-completions endpoint (llama.cpp's server,
//! Ollama's OpenAI layer, vLLM), sans-IO.
//!
//! The pipeline owns the HTTP client: it POSTs [`request_body`] to `…/v1/chat/completions` and
//! hands each server-sent event's `data` payload to [`StreamParser::push_data`], which turns it
//! into [`StreamEvent`]s. Nothing here touches a socket or the clock, so every dialect quirk is
//! tested on canned payloads.
//!
//! Dialects differ in small ways, all tolerated here:
//! - `usage` comes in a last chunk whose `choices` is empty (OpenAI, vLLM, Ollama with
//!   `stream_options.include_usage`) or beside the finishing choice (llama.cpp);
//! - `delta.role` appears in the first chunk only, in every chunk, or never;
//! - `delta.content` is absent, `null` or `""` in chunks that carry nothing;
//! - tool calls come as many fragments keyed by `index` (OpenAI, vLLM, llama.cpp) or whole in one
//!   chunk (Ollama), with `finish_reason` `tool_calls` or, from older servers, `stop`;
//! - errors come as `{"error": {...}}`, `{"error": "text"}` or vLLM's `{"object": "error", ...}`.
//!
//! The parser is bounded: tool-call text (ids, names, arguments) is capped at
//! [`MAX_TOOL_CALL_BYTES`] per response and the number of calls at [`MAX_TOOL_CALLS`]; text deltas
//! are passed through, not kept.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::types::{ChatMessage, ChatRole, Finish, GenerateParams, ToolCall, ToolDef};

/// Most bytes of tool-call ids, names and arguments one response may accumulate.
pub const MAX_TOOL_CALL_BYTES: usize = 64 * 1024;

/// Most tool calls one response may make.
pub const MAX_TOOL_CALLS: usize = 32;

/// The JSON body of a streaming chat-completions request.
///
/// `stream: true` with `stream_options.include_usage` so the last chunk reports token counts;
/// tools in OpenAI's `{"type": "function", "function": {...}}` form, omitted when there are none
/// (some servers reject an empty list).
pub fn request_body(model: &str, messages: &[ChatMessage], tools: &[ToolDef], params: &GenerateParams) -> Value {
    let mut body = json!({
        "model": model,
        "messages": messages.iter().map(message_json).collect::<Vec<_>>(),
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": params.max_tokens,
        "temperature": decimal(params.temperature),
        "top_p": decimal(params.top_p),
        "seed": params.seed,
    });
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
                })
            })
            .collect();
    }
    body
}

/// `x` as the decimal it was written as: `0.2f32` widened to f64 would go out as
/// `0.20000000298023224`.
fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

fn message_json(message: &ChatMessage) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), message.role.as_str().into());
    match message.role {
        ChatRole::Assistant if !message.tool_calls.is_empty() => {
            // OpenAI's own form: no text beside the calls is `null`, not "".
            let content = if message.content.is_empty() { Value::Null } else { message.content.clone().into() };
            out.insert("content".into(), content);
            let calls = message
                .tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
            out.insert("tool_calls".into(), Value::Array(calls));
        }
        ChatRole::Tool => {
            out.insert("tool_call_id".into(), message.tool_call_id.clone().unwrap_or_default().into());
            out.insert("content".into(), message.content.clone().into());
        }
        _ => {
            out.insert("content".into(), message.content.clone().into());
        }
    }
    Value::Object(out)
}

/// One thing the stream said.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// Text to speak, in order.
    TextDelta(String),
    /// A complete tool call, emitted when its choice finishes (or at `[DONE]` if the server never
    /// said it finished).
    ToolCall(ToolCall),
    /// Token counts for the whole request.
    Usage {
        /// Tokens in the prompt.
        prompt_tokens: u32,
        /// Tokens generated.
        completion_tokens: u32,
    },
    /// The choice finished. `finish` is [`Finish::ToolCalls`] whenever tool calls were emitted,
    /// whatever the server's reason said.
    Finish {
        /// The reason, mapped.
        finish: Finish,
        /// The server's own `finish_reason` text.
        reason: String,
    },
    /// The `[DONE]` sentinel: the stream is over.
    Done,
    /// Something went wrong; the stream may or may not go on.
    Error(StreamError),
}

/// What went wrong in a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The payload is not JSON.
    #[error("payload is not JSON ({detail}): {excerpt}")]
    BadJson {
        /// The JSON parser's message.
        detail: String,
        /// The start of the payload.
        excerpt: String,
    },
    /// JSON, but not a chat-completions chunk nor an error object.
    #[error("unexpected payload: {excerpt}")]
    UnexpectedShape {
        /// The start of the payload.
        excerpt: String,
    },
    /// The server reported an error.
    #[error("upstream error{}: {message}", code.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Upstream {
        /// The server's message.
        message: String,
        /// Its `code` or `type`, if any.
        code: Option<String>,
    },
    /// The tool calls' text passed [`MAX_TOOL_CALL_BYTES`]; the call being built was dropped.
    #[error("tool calls exceed {limit} bytes; call {index} dropped")]
    ToolCallTooLarge {
        /// The cap.
        limit: usize,
        /// The call's `index` in the stream.
        index: u64,
    },
    /// More than [`MAX_TOOL_CALLS`] calls; the extra ones were dropped.
    #[error("more than {limit} tool calls; call {index} dropped")]
    TooManyToolCalls {
        /// The cap.
        limit: usize,
        /// The dropped call's `index`.
        index: u64,
    },
    /// A tool call finished without a name; it was dropped.
    #[error("tool call {index} has no name")]
    ToolCallWithoutName {
        /// The call's `index` in the stream.
        index: u64,
    },
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    /// Over the byte cap: keep swallowing its fragments, never emit it.
    dropped: bool,
}

/// Turns the `data` payloads of one streamed response into [`StreamEvent`]s. One parser per
/// request.
#[derive(Debug, Default)]
pub struct StreamParser {
    calls: BTreeMap<u64, PartialCall>,
    /// Indices refused by the count cap (reported once each).
    refused: Vec<u64>,
    call_bytes: usize,
    emitted_calls: usize,
    /// The index of the last fragment, for fragments that carry neither index nor id.
    last_index: Option<u64>,
}

impl StreamParser {
    /// A parser for a new response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one SSE `data` payload. Empty payloads (keep-alives) yield nothing; a stray
    /// `data:` prefix is tolerated.
    pub fn push_data(&mut self, data: &str) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        let data = data.trim();
        let data = data.strip_prefix("data:").map(str::trim_start).unwrap_or(data);
        if data.is_empty() {
            return events;
        }
        if data == "[DONE]" {
            self.flush_calls(&mut events);
            events.push(StreamEvent::Done);
            return events;
        }
        let value: Value = match serde_json::from_str(data) {
            Ok(value) => value,
            Err(error) => {
                events.push(StreamEvent::Error(StreamError::BadJson {
                    detail: error.to_string(),
                    excerpt: excerpt(data),
                }));
                return events;
            }
        };
        if let Some(error) = upstream_error(&value) {
            events.push(StreamEvent::Error(error));
            return events;
        }
        let Some(object) = value.as_object() else {
            events.push(StreamEvent::Error(StreamError::UnexpectedShape { excerpt: excerpt(data) }));
            return events;
        };
        let choices = object.get("choices").and_then(Value::as_array);
        let usage = object.get("usage").filter(|usage| usage.is_object());
        if choices.is_none() && usage.is_none() {
            events.push(StreamEvent::Error(StreamError::UnexpectedShape { excerpt: excerpt(data) }));
            return events;
        }
        for choice in choices.into_iter().flatten() {
            // One reply is requested (no `n`); a server sending more choices is ignored beyond the first.
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            self.push_choice(choice, &mut events);
        }
        if let Some(usage) = usage {
            let count = |key: &str| {
                usage.get(key).and_then(Value::as_u64).map(|n| u32::try_from(n).unwrap_or(u32::MAX)).unwrap_or(0)
            };
            events.push(StreamEvent::Usage {
                prompt_tokens: count("prompt_tokens"),
                completion_tokens: count("completion_tokens"),
            });
        }
        events
    }

    fn push_choice(&mut self, choice: &Value, events: &mut Vec<StreamEvent>) {
        // Non-streaming servers (or a fallback path) may send `message` instead of `delta`.
        let delta = choice.get("delta").or_else(|| choice.get("message"));
        if let Some(delta) = delta {
            if let Some(text) = delta.get("content").and_then(Value::as_str)
                && !text.is_empty()
            {
                events.push(StreamEvent::TextDelta(text.to_owned()));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, call) in calls.iter().enumerate() {
                    self.push_call_fragment(position, call, events);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            let emitted = self.flush_calls(events);
            let finish = if emitted > 0 || self.emitted_calls > 0 {
                Finish::ToolCalls
            } else {
                match reason {
                    "length" => Finish::Length,
                    "tool_calls" | "function_call" => Finish::ToolCalls,
                    "content_filter" => Finish::ContentFilter,
                    // "stop", "eos", and whatever else a server invents: the model ended its turn.
                    _ => Finish::Stop,
                }
            };
            events.push(StreamEvent::Finish { finish, reason: reason.to_owned() });
        }
    }

    fn push_call_fragment(&mut self, position: usize, call: &Value, events: &mut Vec<StreamEvent>) {
        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            // Without `index` (some servers that send whole calls): a new id is a new call, a
            // known id is that call, and a bare fragment continues the call seen last.
            None if !id.is_empty() => match self.calls.iter().find(|(_, c)| c.id == id) {
                Some((&index, _)) => index,
                None => self.calls.keys().next_back().map_or(position as u64, |last| last + 1),
            },
            None => self.last_index.unwrap_or(position as u64),
        };
        self.last_index = Some(index);
        if !self.calls.contains_key(&index) {
            if self.calls.len() + self.emitted_calls >= MAX_TOOL_CALLS {
                if !self.refused.contains(&index) {
                    if self.refused.len() < MAX_TOOL_CALLS {
                        self.refused.push(index);
                    }
                    events.push(StreamEvent::Error(StreamError::TooManyToolCalls { limit: MAX_TOOL_CALLS, index }));
                }
                return;
            }
            self.calls.insert(index, PartialCall::default());
        }
        let Some(partial) = self.calls.get_mut(&index) else { return };
        if partial.dropped {
            return;
        }
        let function = call.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default();
        // Arguments are a JSON string in OpenAI's protocol; a server that sends an object gets it
        // re-encoded rather than lost.
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let id_grows = partial.id.is_empty() && !id.is_empty();
        // A name is sent whole in one fragment, but some servers repeat it in every fragment:
        // the first one counts.
        let name_grows = partial.name.is_empty() && !name.is_empty();
        let added = if id_grows { id.len() } else { 0 } + if name_grows { name.len() } else { 0 } + arguments.len();
        if self.call_bytes + added > MAX_TOOL_CALL_BYTES {
            partial.dropped = true;
            partial.arguments = String::new();
            events.push(StreamEvent::Error(StreamError::ToolCallTooLarge { limit: MAX_TOOL_CALL_BYTES, index }));
            return;
        }
        self.call_bytes += added;
        if id_grows {
            partial.id = id.to_owned();
        }
        if name_grows {
            partial.name = name.to_owned();
        }
        partial.arguments.push_str(&arguments);
    }

    /// Emits every call built so far; returns how many.
    fn flush_calls(&mut self, events: &mut Vec<StreamEvent>) -> usize {
        let mut emitted = 0;
        for (index, partial) in std::mem::take(&mut self.calls) {
            if partial.dropped {
                continue;
            }
            if partial.name.is_empty() {
                events.push(StreamEvent::Error(StreamError::ToolCallWithoutName { index }));
                continue;
            }
            let id = if partial.id.is_empty() { format!("call_{index}") } else { partial.id };
            // `{}` is what "no arguments" means to every tool runner; an empty string is not JSON.
            let arguments = if partial.arguments.trim().is_empty() { "{}".to_owned() } else { partial.arguments };
            events.push(StreamEvent::ToolCall(ToolCall { id, name: partial.name, arguments }));
            emitted += 1;
        }
        self.emitted_calls += emitted;
        emitted
    }
}

/// The error object in any of the dialects' shapes, if `value` is one.
fn upstream_error(value: &Value) -> Option<StreamError> {
    let code_of = |object: &Value| {
        ["code", "type"].iter().find_map(|key| match object.get(*key) {
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Number(number)) => Some(number.to_string()),
            _ => None,
        })
    };
    match value.get("error") {
        Some(Value::String(message)) => {
            return Some(StreamError::Upstream { message: message.clone(), code: None });
        }
        Some(error @ Value::Object(_)) => {
            let message =
                error.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| error.to_string());
            return Some(StreamError::Upstream { message, code: code_of(error) });
        }
        _ => {}
    }
    if value.get("object").and_then(Value::as_str) == Some("error") {
        let message =
            value.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| value.to_string());
        return Some(StreamError::Upstream { message, code: code_of(value) });
    }
    None
}

/// The first 200 characters of a payload, for error messages.
fn excerpt(data: &str) -> String {
    let mut end = data.len().min(200);
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    data[..end].to_owned()
}

#[cfg(test)]
mod tests;
