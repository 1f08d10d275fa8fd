//! The data-channel protocol: JSON control messages between a client and the session runtime,
//! carried on the media room's reliable data channel (spec "Events").
//!
//! Every message is one JSON object discriminated by `type`. [`ClientMessage`] is what a client
//! sends, [`ServerEvent`] what the runtime publishes. Both are dumb serde shapes: the bounds the
//! spec puts on fields (`send-context` 1 to 4096 characters, `connect-timings` with at least two
//! properties, …) are enforced by the runtime at its boundary, not here, so a client SDK can build
//! messages with these types and still learn from the server what it refuses.
//!
//! Messages whose JSON exceeds [`ENVELOPE_THRESHOLD_BYTES`] travel as chunks ([`chunk_message`]):
//! `envelope-chunk` from the client, `server-envelope-chunk` from the server.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Messages whose serialized JSON is longer than this many bytes are sent as chunks.
pub const ENVELOPE_THRESHOLD_BYTES: usize = 12_000;
/// Bytes of the inner message's UTF-8 each chunk carries (before base64).
pub const ENVELOPE_CHUNK_BYTES: usize = 8_000;

/// Who spoke a transcript or completed a turn (upper case on the data channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Speaker {
    /// The end user.
    #[serde(rename = "USER")]
    User,
    /// The agent.
    #[serde(rename = "ASSISTANT")]
    Assistant,
}

/// A valid tool this deployment cannot run (`ready.rejected_tools`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedToolEntry {
    /// The tool's name (the wire kind for server tools).
    pub name: String,
    /// Why it is unavailable.
    pub reason: String,
}

/// Cumulative token counters of `svc.usage` (each event supersedes the previous one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCounters {
    /// Input text tokens.
    pub input_text_tokens: i64,
    /// Input image tokens.
    pub input_image_tokens: i64,
    /// Input audio tokens.
    pub input_audio_tokens: i64,
    /// Cached input tokens.
    pub input_cached_tokens: i64,
    /// Output text tokens.
    pub output_text_tokens: i64,
    /// Output audio tokens.
    pub output_audio_tokens: i64,
    /// All tokens.
    pub total_tokens: i64,
}

/// `tool_job_result.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// The job finished.
    Completed,
    /// The job failed.
    Failed,
}

/// `delegation-append.channel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationChannel {
    /// Silent context for the voice model.
    Thinking,
    /// Something the model paraphrases to the user.
    Commentary,
    /// A standing instruction.
    Instructions,
}

/// A client → server message (spec "Client to server"). Fields beyond those listed are ignored,
/// so clients may add fields without breaking older servers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ClientMessage {
    /// Toggle the microphone gate.
    #[serde(rename = "mute")]
    Mute {
        /// Muted or not.
        muted: bool,
    },
    /// A typed user turn; the model answers.
    #[serde(rename = "send-text")]
    SendText {
        /// The text.
        content: String,
    },
    /// A background note on the provider's pre-turn channel (1 to 4096 characters).
    #[serde(rename = "send-context")]
    SendContext {
        /// The note.
        content: String,
    },
    /// One image frame.
    #[serde(rename = "send-image")]
    SendImage {
        /// `image/jpeg`, `image/png`, …
        mime_type: String,
        /// Base64 of the encoded image.
        data: String,
        /// Labels concurrent video streams.
        stream_id: String,
    },
    /// End of the user's turn under manual turn-taking (not a session end).
    #[serde(rename = "activity-end")]
    ActivityEnd,
    /// Bind the agent's audio input to the sender.
    #[serde(rename = "bind-input")]
    BindInput,
    /// Terminal result of a background client tool.
    #[serde(rename = "tool_job_result")]
    ToolJobResult {
        /// The job.
        job_id: String,
        /// The client tool that ran it.
        tool_name: String,
        /// How it ended.
        status: JobStatus,
        /// Structured result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// Model-facing summary.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// Model-facing error text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Hand text to the voice model under GPT-Live delegation (1 to 4096 characters).
    #[serde(rename = "delegation-append")]
    DelegationAppend {
        /// Which channel.
        channel: DelegationChannel,
        /// The text.
        content: String,
        /// The delegation it answers; absent steers the session as a whole.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delegation_id: Option<String>,
    },
    /// Client-side connect durations, reported once per session.
    #[serde(rename = "connect-timings")]
    ConnectTimings {
        /// Microphone acquisition.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mic_ms: Option<u64>,
        /// Join to `ready`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ready_ms: Option<u64>,
        /// The start request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_ms: Option<u64>,
        /// Joining the room.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        room_ms: Option<u64>,
        /// The start response's `timings`, echoed back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<Value>,
    },
    /// The user ends the session.
    #[serde(rename = "end")]
    End,
    /// Heartbeat; answered with `pong`.
    #[serde(rename = "ping")]
    Ping,
    /// One chunk of an oversized client message.
    #[serde(rename = "envelope-chunk")]
    EnvelopeChunk(EnvelopeChunk),
}

/// One chunk of an oversized message (both directions share the fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeChunk {
    /// Groups the chunks of one message.
    pub envelope_id: String,
    /// Position, 0 to `total - 1`.
    pub seq: u32,
    /// Number of chunks.
    pub total: u32,
    /// Base64 of this fragment of the inner message's UTF-8 bytes.
    pub data: String,
}

/// A server → client event (spec "Server to client").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ServerEvent {
    /// The agent is up.
    #[serde(rename = "ready")]
    Ready {
        /// The session.
        session_id: String,
        /// `{name, tools}` for a catalog agent; null for inline.
        agent: Value,
        /// Valid tools this deployment cannot run.
        rejected_tools: Vec<RejectedToolEntry>,
        /// The effective cap; null means none.
        max_session_seconds: Option<u32>,
    },
    /// The upstream model session is being replaced; transport and state survive.
    #[serde(rename = "reconnecting")]
    Reconnecting {
        /// Time the old upstream session still has, when known.
        seconds_remaining: Option<f64>,
    },
    /// The session ends shortly and keeps running until `session-ended`.
    #[serde(rename = "session-ending-soon")]
    SessionEndingSoon {
        /// Time left.
        seconds_remaining: f64,
        /// Why (`max_session_duration`, …).
        reason: String,
    },
    /// Published just before teardown.
    #[serde(rename = "session-ended")]
    SessionEnded {
        /// Why.
        reason: String,
    },
    /// A failure: the session is dead (`fatal`) or only this turn failed.
    #[serde(rename = "error")]
    Error {
        /// Error code (spec "Data-channel error codes").
        code: String,
        /// Human-readable text.
        message: String,
        /// Whether the session is over.
        fatal: bool,
    },
    /// Answer to `ping`.
    #[serde(rename = "pong")]
    Pong,
    /// Transcript: fragments append, finals replace.
    #[serde(rename = "transcript")]
    Transcript {
        /// Who spoke.
        role: Speaker,
        /// Fragment, or the whole turn when final.
        text: String,
        /// Final text of the turn.
        is_final: bool,
    },
    /// The model's text channel.
    #[serde(rename = "model-text")]
    ModelText {
        /// Fragment or final text.
        text: String,
        /// Last piece.
        is_final: bool,
    },
    /// End of a turn; turn state is driven off this.
    #[serde(rename = "turn-complete")]
    TurnComplete {
        /// Whose turn ended.
        role: Speaker,
    },
    /// Voice activity of the user started.
    #[serde(rename = "user-started-speaking")]
    UserStartedSpeaking,
    /// Voice activity of the user stopped.
    #[serde(rename = "user-stopped-speaking")]
    UserStoppedSpeaking,
    /// The first audio frame of the assistant turn left the server.
    #[serde(rename = "bot-started-speaking")]
    BotStartedSpeaking,
    /// The last audio frame of the assistant turn left the server.
    #[serde(rename = "bot-stopped-speaking")]
    BotStoppedSpeaking,
    /// The model began generating.
    #[serde(rename = "bot-llm-started")]
    BotLlmStarted,
    /// The model finished generating.
    #[serde(rename = "bot-llm-stopped")]
    BotLlmStopped,
    /// Speech synthesis started (immediately before `bot-started-speaking`).
    #[serde(rename = "bot-tts-started")]
    BotTtsStarted,
    /// Speech synthesis finished (immediately before `bot-stopped-speaking`).
    #[serde(rename = "bot-tts-stopped")]
    BotTtsStopped,
    /// A silence hook fired (the action is already performed).
    #[serde(rename = "user-speech-timeout")]
    UserSpeechTimeout {
        /// The session.
        session_id: String,
        /// Silence that triggered it.
        silence_ms: u64,
        /// Firings so far (this one included).
        trigger_count: u32,
        /// The hook's bound.
        max_count: u32,
        /// What was done (the hook's action, in its wire shape).
        action: Value,
    },
    /// A server tool was called.
    #[serde(rename = "tool-call")]
    ToolCall {
        /// The call.
        tool_call_id: String,
        /// The tool.
        name: String,
    },
    /// The server began running a tool.
    #[serde(rename = "tool-dispatch-started")]
    ToolDispatchStarted {
        /// The call.
        tool_call_id: String,
        /// The tool.
        name: String,
    },
    /// A server tool finished.
    #[serde(rename = "tool-result")]
    ToolResult {
        /// The call.
        tool_call_id: String,
        /// Whether it succeeded.
        ok: bool,
        /// Short summary.
        summary: Option<String>,
    },
    /// Run a client-declared tool locally; answer with the `svc.tool_result` RPC.
    #[serde(rename = "tool-invocation")]
    ToolInvocation {
        /// Correlates the answer.
        request_id: String,
        /// The model's call id.
        tool_call_id: String,
        /// The tool.
        name: String,
        /// Arguments.
        args: Value,
        /// `realtime` (the voice model) or `server` (a backend svc runs).
        origin: String,
        /// False marks an informational mirror executed out of band.
        executable: bool,
    },
    /// GPT-Live delegation opened; answer with `delegation-append`.
    #[serde(rename = "delegation-created")]
    DelegationCreated {
        /// Id the appends carry.
        delegation_id: String,
        /// What the user said in the prompting turn.
        transcript: String,
    },
    /// Cumulative token usage.
    #[serde(rename = "svc.usage")]
    Usage(UsageCounters),
    /// Full session state after a `set_state` write.
    #[serde(rename = "svc.session-state")]
    SessionState {
        /// The state.
        state: Value,
        /// Keys the write changed.
        updated_keys: Vec<String>,
        /// Problems with the write.
        warnings: Vec<String>,
        /// `state.stage`, hoisted.
        stage: Option<String>,
    },
    /// A phone dial-out's progress (`POST /realtime/session/{id}/dial`).
    #[serde(rename = "dial-progress")]
    DialProgress {
        /// The `dial_id` the dial route answered with.
        dial_id: String,
        /// `ringing`, `answered`, `failed` (final, never answered), `ended` (final, after an
        /// answer), or `dtmf` (a key pressed on the phone).
        status: String,
        /// Why it failed or ended (`busy`, `no_answer`, `rejected`, `hangup`, …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The SIP status of a failure, when one came.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sip_status: Option<u16>,
        /// `ended`: who hung up, `phone` or `svc`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended_by: Option<String>,
        /// `ended`: seconds from the answer to the end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_seconds: Option<f64>,
        /// `dtmf`: the key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digit: Option<String>,
    },
    /// One chunk of an oversized server message.
    #[serde(rename = "server-envelope-chunk")]
    ServerEnvelopeChunk(EnvelopeChunk),
}

impl ServerEvent {
    /// The event's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerEvent::Ready { .. } => "ready",
            ServerEvent::Reconnecting { .. } => "reconnecting",
            ServerEvent::SessionEndingSoon { .. } => "session-ending-soon",
            ServerEvent::SessionEnded { .. } => "session-ended",
            ServerEvent::DialProgress { .. } => "dial-progress",
            ServerEvent::Error { .. } => "error",
            ServerEvent::Pong => "pong",
            ServerEvent::Transcript { .. } => "transcript",
            ServerEvent::ModelText { .. } => "model-text",
            ServerEvent::TurnComplete { .. } => "turn-complete",
            ServerEvent::UserStartedSpeaking => "user-started-speaking",
            ServerEvent::UserStoppedSpeaking => "user-stopped-speaking",
            ServerEvent::BotStartedSpeaking => "bot-started-speaking",
            ServerEvent::BotStoppedSpeaking => "bot-stopped-speaking",
            ServerEvent::BotLlmStarted => "bot-llm-started",
            ServerEvent::BotLlmStopped => "bot-llm-stopped",
            ServerEvent::BotTtsStarted => "bot-tts-started",
            ServerEvent::BotTtsStopped => "bot-tts-stopped",
            ServerEvent::UserSpeechTimeout { .. } => "user-speech-timeout",
            ServerEvent::ToolCall { .. } => "tool-call",
            ServerEvent::ToolDispatchStarted { .. } => "tool-dispatch-started",
            ServerEvent::ToolResult { .. } => "tool-result",
            ServerEvent::ToolInvocation { .. } => "tool-invocation",
            ServerEvent::DelegationCreated { .. } => "delegation-created",
            ServerEvent::Usage(_) => "svc.usage",
            ServerEvent::SessionState { .. } => "svc.session-state",
            ServerEvent::ServerEnvelopeChunk(_) => "server-envelope-chunk",
        }
    }

    /// The event as JSON text.
    pub fn to_json(&self) -> String {
        // A closed enum of plain data with string keys always serializes.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

/// Splits a serialized message into the chunk messages that carry it, or `None` when it is at or
/// under [`ENVELOPE_THRESHOLD_BYTES`] and travels whole. `wrap` builds one chunk message (a
/// [`ServerEvent::ServerEnvelopeChunk`] or a [`ClientMessage::EnvelopeChunk`]).
///
/// Fragments are cut on byte boundaries, not character boundaries: the receiver concatenates the
/// decoded bytes before it decodes UTF-8 (spec "Chunking").
pub fn chunk_message<T>(json: &str, envelope_id: &str, wrap: impl Fn(EnvelopeChunk) -> T) -> Option<Vec<T>> {
    if json.len() <= ENVELOPE_THRESHOLD_BYTES {
        return None;
    }
    let fragments: Vec<&[u8]> = json.as_bytes().chunks(ENVELOPE_CHUNK_BYTES).collect();
    let total = u32::try_from(fragments.len()).unwrap_or(u32::MAX);
    Some(
        fragments
            .into_iter()
            .enumerate()
            .map(|(seq, fragment)| {
                wrap(EnvelopeChunk {
                    envelope_id: envelope_id.to_owned(),
                    seq: u32::try_from(seq).unwrap_or(u32::MAX),
                    total,
                    data: base64::engine::general_purpose::STANDARD.encode(fragment),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn client_messages_parse_from_the_spec_spelling_and_ignore_extra_fields() {
        let cases = [
            (json!({"type": "mute", "muted": true}), ClientMessage::Mute { muted: true }),
            (
                json!({"type": "send-text", "content": "hi", "extra": 1}),
                ClientMessage::SendText { content: "hi".into() },
            ),
            (json!({"type": "activity-end"}), ClientMessage::ActivityEnd),
            (json!({"type": "bind-input"}), ClientMessage::BindInput),
            (json!({"type": "end"}), ClientMessage::End),
            (json!({"type": "ping"}), ClientMessage::Ping),
            (
                json!({"type": "tool_job_result", "job_id": "j", "tool_name": "t", "status": "failed", "error": "x"}),
                ClientMessage::ToolJobResult {
                    job_id: "j".into(),
                    tool_name: "t".into(),
                    status: JobStatus::Failed,
                    result: None,
                    summary: None,
                    error: Some("x".into()),
                },
            ),
            (
                json!({"type": "delegation-append", "channel": "commentary", "content": "c"}),
                ClientMessage::DelegationAppend {
                    channel: DelegationChannel::Commentary,
                    content: "c".into(),
                    delegation_id: None,
                },
            ),
        ];
        for (value, expected) in cases {
            let parsed: ClientMessage = serde_json::from_value(value.clone()).expect("parses");
            assert_eq!(parsed, expected, "{value}");
        }
        for bad in [json!({"type": "mute"}), json!({"type": "nope"}), json!({"muted": true}), json!([1])] {
            assert!(serde_json::from_value::<ClientMessage>(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn server_events_serialize_with_the_spec_names() {
        let ready = ServerEvent::Ready {
            session_id: "s".into(),
            agent: Value::Null,
            rejected_tools: vec![],
            max_session_seconds: Some(60),
        };
        assert_eq!(
            serde_json::to_value(&ready).expect("json"),
            json!({"type": "ready", "session_id": "s", "agent": null, "rejected_tools": [], "max_session_seconds": 60})
        );
        let usage = ServerEvent::Usage(UsageCounters { total_tokens: 3, ..Default::default() });
        let value = serde_json::to_value(&usage).expect("json");
        assert_eq!(value["type"], "svc.usage");
        assert_eq!(value["total_tokens"], 3);
        assert_eq!(value.as_object().map(|o| o.len()), Some(8), "type plus the seven counters");
        let transcript = ServerEvent::Transcript { role: Speaker::Assistant, text: "a".into(), is_final: true };
        assert_eq!(
            serde_json::to_value(&transcript).expect("json"),
            json!({"type": "transcript", "role": "ASSISTANT", "text": "a", "is_final": true})
        );
        for event in [ServerEvent::Pong, ServerEvent::BotTtsStarted, ready, usage, transcript] {
            assert_eq!(serde_json::to_value(&event).expect("json")["type"], event.kind());
        }
    }

    #[test]
    fn messages_over_the_threshold_split_into_base64_chunks_that_reassemble() {
        assert!(chunk_message(&"x".repeat(ENVELOPE_THRESHOLD_BYTES), "e", ServerEvent::ServerEnvelopeChunk).is_none());
        let text = format!("{{\"type\":\"send-text\",\"content\":\"{}\"}}", "é".repeat(10_000));
        let chunks = chunk_message(&text, "env-1", |chunk| chunk).expect("chunked");
        assert_eq!(chunks.len(), text.len().div_ceil(ENVELOPE_CHUNK_BYTES));
        let mut bytes = Vec::new();
        for (seq, chunk) in chunks.iter().enumerate() {
            assert_eq!(
                (chunk.seq as usize, chunk.total as usize, chunk.envelope_id.as_str()),
                (seq, chunks.len(), "env-1")
            );
            bytes.extend(base64::engine::general_purpose::STANDARD.decode(&chunk.data).expect("base64"));
        }
        assert_eq!(String::from_utf8(bytes).expect("utf-8"), text);
    }
}
