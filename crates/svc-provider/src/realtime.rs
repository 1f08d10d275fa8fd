//! OpenAI Realtime (provider_b, provider_b_mini) and xAI Grok voice (provider_c): one sans-IO
//! codec for the OpenAI-compatible realtime protocol, with a [`Dialect`] for xAI's differences
//! (providers.md §3 and §5).
//!
//! What this codec guarantees, whatever the upstream does:
//! - every `response.create` goes through one sequencer (`sequencer.rs`): sent only while no
//!   response is active or requested, re-queued if the upstream still answers
//!   `conversation_already_has_active_response`;
//! - every tool call is answered upstream exactly once (blocking calls by the runtime's result,
//!   non-blocking ones at once with a "started" output, open calls at close by an error output);
//! - truncation on barge-in is clamped to the audio received for the item and skipped when none;
//! - the hard session cap (OpenAI 60 min, xAI 120 min) is met by rotating early, at a quiet
//!   moment, onto a fresh upstream session reseeded from the transcript.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use serde_json::{Value, json};
use svc_provider_core::{ProviderEvent, ProviderInput, ResponseStatus, Role, Scheduling, SessionSetup, ToolBehavior};

use crate::codec::{self, Codec, ConnectFailure, ConnectRequest, Core, Link, Transmit, cut_point, decode_pcm};
use crate::rotation::CapRotation;
use crate::unread::ReadReceipt;
use crate::usage;
use svc_wire::rest::UsageTokens;

mod events;
mod sequencer;
mod session;

use events::KNOWN_UNUSED_EVENTS;
use sequencer::{Gates, ResponseRequest, ResponseSequencer};
pub use session::session_update;

/// Both directions run at 24 kHz PCM16.
pub const RATE_HZ: u32 = 24_000;
/// The least audio a commit takes (100 ms: the service refuses a smaller buffer).
const MIN_COMMIT_SAMPLES: usize = RATE_HZ as usize / 10;
/// Input transcription model for OpenAI sessions.
pub const OPENAI_TRANSCRIBE_MODEL: &str = "gpt-4o-mini-transcribe";
/// Input transcription model for xAI sessions.
pub const XAI_TRANSCRIBE_MODEL: &str = "grok-transcribe";

/// Error codes after which the session cannot continue (providers.md §1.5).
const FATAL_CODES: [&str; 8] = [
    "invalid_api_key",
    "insufficient_quota",
    "billing_hard_limit_reached",
    "credit_balance_exhausted",
    "account_deactivated",
    "forbidden",
    "model_not_found",
    "unauthorized",
];

/// Which flavour of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI Realtime GA.
    OpenAi,
    /// xAI Grok voice: `voice`/`turn_detection` at the top of `session`, cumulative user
    /// transcripts, `force_message` greetings, usage sometimes at top level.
    Xai,
}

/// One tool call the upstream made and that is not settled yet.
#[derive(Debug, Clone)]
struct Call {
    name: String,
    /// Non-blocking: answered upstream at once; the runtime's result arrives later.
    background: bool,
    /// The upstream has its `function_call_output`.
    answered_upstream: bool,
}

/// The assistant audio item currently playing (for truncation and the heard transcript).
#[derive(Debug, Clone, Default)]
struct AssistantItem {
    id: String,
    samples: u64,
    transcript: String,
    started_ms: u64,
    /// The final transcript went out.
    final_emitted: bool,
    /// Cut off by a barge-in: later audio and transcript of the item are dropped.
    truncated: bool,
    /// The server's detector heard the user over this item's audio: its final transcript is
    /// the heard share, which the runtime's [`ProviderInput::BargeIn`] (answering
    /// `Interrupted`) tells; the item's `transcript.done`, often right behind, must not
    /// finalize the whole text first.
    awaiting_barge_in: bool,
}

/// The OpenAI-compatible realtime codec.
#[derive(Debug)]
pub struct RealtimeCodec {
    core: Core,
    setup: SessionSetup,
    dialect: Dialect,
    connect: ConnectRequest,
    /// When the upstream session is replaced before its cap.
    rotation: CapRotation,
    /// Every `response.create` and `response.cancel` goes through it.
    responses: ResponseSequencer,
    assistant: Option<AssistantItem>,
    user_speaking: bool,
    /// User item id → speech start (ms since origin) and accumulated transcript.
    user_items: HashMap<String, (u64, String)>,
    last_speech_started_ms: u64,
    last_audio_out: Option<Instant>,
    calls: BTreeMap<String, Call>,
    /// Every call id the current upstream session announced: a call arrives twice
    /// (`response.function_call_arguments.done`, then `response.output_item.done`), and the
    /// runtime may have answered it in between (so it is no longer in `calls`).
    announced_calls: HashSet<String>,
    /// Samples appended since the last commit (the server's or ours).
    uncommitted_samples: usize,
    muted: bool,
    /// An event without its `item_id` failed the current turn (reported once per turn).
    missing_item_reported: bool,
}

impl RealtimeCodec {
    /// A codec for `setup`, connecting with `connect` (see [`crate::endpoint`]).
    pub fn new(setup: SessionSetup, dialect: Dialect, connect: ConnectRequest) -> RealtimeCodec {
        RealtimeCodec {
            core: Core::start(RATE_HZ, &setup, &connect),
            setup,
            dialect,
            connect,
            rotation: CapRotation::default(),
            responses: ResponseSequencer::default(),
            assistant: None,
            user_speaking: false,
            user_items: HashMap::new(),
            last_speech_started_ms: 0,
            last_audio_out: None,
            calls: BTreeMap::new(),
            announced_calls: HashSet::new(),
            uncommitted_samples: 0,
            muted: false,
            missing_item_reported: false,
        }
    }

    fn instructions(&self) -> String {
        let prompt = self.setup.system_prompt();
        // xAI bills every conversation item, so reseeding goes into the instructions (§5.1).
        if self.dialect == Dialect::Xai {
            let history = self.core.history_text();
            if !history.is_empty() {
                return format!("{prompt}\n\n{}", reseed_preamble(&history));
            }
        }
        prompt
    }

    // ---- response sequencer -------------------------------------------------------------

    fn request_response(&mut self, request: ResponseRequest) {
        self.responses.request(request);
        self.pump_responses();
    }

    /// Sends the queued `response.create` if the sequencer and the gates allow it.
    fn pump_responses(&mut self) {
        let gates = Gates {
            link_ready: self.core.link == Link::Ready,
            user_speaking: self.user_speaking,
            tool_call_open: self.tool_call_open(),
        };
        if let Some(create) = self.responses.poll_create(gates) {
            self.core.send_json(&create.frame());
        }
    }

    /// Sends `response.cancel` unless no response is active or it was cancelled already.
    fn cancel_response(&mut self) {
        if self.responses.cancel() {
            self.core.send_json(&json!({"type": "response.cancel"}));
        }
    }

    /// A tool call has no output upstream yet.
    fn tool_call_open(&self) -> bool {
        self.calls.values().any(|call| !call.answered_upstream)
    }

    // ---- input ------------------------------------------------------------------------------

    fn send_audio(&mut self, pcm: &[i16]) {
        if self.muted {
            return;
        }
        let Some(audio) = self.core.user_audio(pcm) else { return };
        self.uncommitted_samples += audio.len();
        let frame = audio_frame(audio);
        self.core.send(frame);
    }

    /// The client ends the user's turn (`activity-end`) before the server's detector would:
    /// commit what was appended and ask for the answer. Nothing to commit (the server committed
    /// already, or less than the 100 ms it accepts) leaves the turn to the server.
    fn end_user_turn(&mut self) {
        if self.core.link != Link::Ready || self.uncommitted_samples < MIN_COMMIT_SAMPLES {
            return;
        }
        self.uncommitted_samples = 0;
        self.core.send_json(&json!({"type": "input_audio_buffer.commit"}));
        if self.user_speaking {
            self.user_speaking = false;
            self.core.emit(ProviderEvent::UserSpeechStopped);
        }
        self.request_response(ResponseRequest::default());
    }

    fn add_item(&mut self, item: Value) {
        self.core.send_when_ready(json!({"type": "conversation.item.create", "item": item}).to_string());
    }

    fn handle_tool_result(&mut self, call_id: &str, output: &Value, is_error: bool, scheduling: Option<Scheduling>) {
        let Some(call) = self.calls.get(call_id).cloned() else {
            self.core.error(false, "unknown_tool_call", format!("no open tool call {call_id}; result dropped"));
            return;
        };
        let text = output_text(output, is_error);
        if call.background {
            // Answered upstream already ("started"): inject the result as context, per scheduling.
            self.calls.remove(call_id);
            let scheduling = scheduling.or(self.setup.tool_policy.of(&call.name).scheduling).unwrap_or_default();
            self.add_item(json!({
                "type": "message", "role": "system",
                "content": [{"type": "input_text", "text": format!("Result of background tool {} (call {call_id}): {text}", call.name)}],
            }));
            match scheduling {
                Scheduling::Silent => {}
                Scheduling::WhenIdle => self.request_response(ResponseRequest::default()),
                Scheduling::Interrupt => {
                    self.cancel_response();
                    self.request_response(ResponseRequest::default());
                }
            }
            return;
        }
        self.calls.remove(call_id);
        self.add_item(json!({"type": "function_call_output", "call_id": call_id, "output": text}));
        self.responses.expect_follow_up();
        self.maybe_follow_up();
    }

    /// One `response.create` after every output of the turn is in (parallel calls).
    fn maybe_follow_up(&mut self) {
        if self.responses.follow_up(self.tool_call_open()) {
            self.pump_responses();
        }
    }

    fn barge_in(&mut self, played_ms: u64) {
        self.cancel_response();
        let Some(item) = self.assistant.as_mut() else { return };
        if item.truncated {
            return;
        }
        item.truncated = true;
        item.awaiting_barge_in = false;
        let (end_ms, received_ms, heard) = cut_point(&item.transcript, item.samples, RATE_HZ, played_ms);
        let (id, started_ms, final_emitted) = (item.id.clone(), item.started_ms, item.final_emitted);
        item.final_emitted = true;
        // Clamp to audio received; skip when none ("Only model output audio messages can be truncated").
        if received_ms > 0 && !id.is_empty() {
            self.core.send_json(&json!({
                "type": "conversation.item.truncate", "item_id": id, "content_index": 0, "audio_end_ms": end_ms,
            }));
        }
        self.core.report_cut(started_ms, &heard, final_emitted, self.setup.text_only);
    }

    fn close(&mut self) {
        if self.core.link == Link::Closed {
            return;
        }
        self.core.set_closing();
        let open: Vec<String> =
            self.calls.iter().filter(|(_, call)| !call.answered_upstream).map(|(id, _)| id.clone()).collect();
        if self.core.link == Link::Ready {
            for call_id in &open {
                self.add_item(json!({"type": "function_call_output", "call_id": call_id,
                    "output": "{\"error\":\"the session ended before the tool finished\"}"}));
            }
        }
        let pending: Vec<String> = self.calls.keys().cloned().collect();
        self.calls.clear();
        if !pending.is_empty() {
            self.core.emit(ProviderEvent::ToolCallsCancelled { call_ids: pending });
        }
        self.core.shut("closed by svc");
    }

    // ---- rotation ----------------------------------------------------------------------------

    fn quiet(&self, now: Instant) -> bool {
        self.responses.is_idle()
            && !self.user_speaking
            && !self.tool_call_open()
            && self.last_audio_out.is_none_or(|at| now.saturating_duration_since(at) >= self.setup.limits.quiet_gap)
    }

    fn maybe_rotate(&mut self, now: Instant) {
        if self.core.link != Link::Ready || self.core.closing() {
            return;
        }
        let quiet = self.quiet(now);
        if self.rotation.due(now, &self.setup.limits, quiet) {
            self.start_rotation(None);
        }
    }

    /// Replaces the upstream session: emit `reconnecting`, open a new socket, reseed on ready.
    fn start_rotation(&mut self, seconds_remaining: Option<f64>) {
        if self.rotation.begin() {
            self.core.emit(ProviderEvent::Reconnecting { seconds_remaining });
        }
        self.reset_upstream_state();
        self.core.link = Link::Connecting;
        self.core.transmit(Transmit::Connect(self.connect.clone()));
    }

    /// Forget what belonged to the old upstream session.
    fn reset_upstream_state(&mut self) {
        self.responses.reset();
        self.announced_calls.clear();
        self.uncommitted_samples = 0;
        self.user_speaking = false;
        let lost: Vec<String> =
            self.calls.iter().filter(|(_, call)| !call.answered_upstream).map(|(id, _)| id.clone()).collect();
        self.calls.retain(|_, call| call.answered_upstream);
        if !lost.is_empty() {
            self.core.emit(ProviderEvent::ToolCallsCancelled { call_ids: lost });
        }
        if let Some(item) = self.assistant.take()
            && !item.final_emitted
            && !item.transcript.is_empty()
        {
            self.core.record_turn(item.started_ms, Role::Assistant, &item.transcript);
        }
    }

    // ---- upstream events ---------------------------------------------------------------------

    fn on_session_created(&mut self, event: &Value) {
        if self.dialect == Dialect::Xai {
            // xAI silently falls back on unknown model ids: compare the echo (§5.1).
            if let Some(model) = event.pointer("/session/model").and_then(Value::as_str)
                && model != self.setup.model.model_id
            {
                self.core.error(
                    false,
                    "model_mismatch",
                    format!("asked for {} but the upstream runs {model}", self.setup.model.model_id),
                );
            }
        }
        let instructions = self.instructions();
        let update = session_update(&self.setup, self.dialect, &instructions);
        self.core.send_json(&update);
        self.core.link = Link::Configuring;
    }

    fn on_session_updated(&mut self, now: Instant, event: &Value) {
        if self.core.link != Link::Configuring {
            return;
        }
        let reseeding = self.core.was_ready;
        self.core.mark_ready();
        if self.dialect == Dialect::OpenAi {
            let history = self.core.history_text();
            if !history.is_empty() {
                // One system message, not assistant-role items (those push the model to text, §3.1).
                self.add_item(json!({"type": "message", "role": "system",
                    "content": [{"type": "input_text", "text": reseed_preamble(&history)}]}));
            }
        }
        for frame in self.core.take_held_frames(audio_frame) {
            self.core.send(frame);
        }
        self.rotation.on_ready(now);
        if reseeding {
            self.core.emit(ProviderEvent::Reconnected { resumed: false });
        } else {
            self.core.was_ready = true;
            let id = event.pointer("/session/id").and_then(Value::as_str).map(str::to_owned);
            self.core.emit(ProviderEvent::Ready { upstream_session_id: id });
        }
        if let Some(greeting) = self.core.greeting_once(&self.setup) {
            self.greet(&greeting);
        }
        self.pump_responses();
    }

    fn greet(&mut self, greeting: &str) {
        match self.dialect {
            // Verbatim TTS with the full response lifecycle, no response.create (§5.2).
            Dialect::Xai => self.add_item(json!({"type": "force_message", "role": "assistant",
                "content": [{"type": "output_text", "text": greeting}], "interruptible": true})),
            Dialect::OpenAi => self.request_response(ResponseRequest {
                instructions: Some(format!("Say exactly this greeting to the user, then wait: {greeting}")),
            }),
        }
    }

    fn on_error(&mut self, event: &Value) {
        let error = event.get("error").unwrap_or(event);
        let code = error.get("code").and_then(Value::as_str).unwrap_or("").to_owned();
        let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
        let message = error.get("message").and_then(Value::as_str).unwrap_or("upstream error").to_owned();
        if code == "conversation_already_has_active_response" {
            // Our create raced an automatic one: re-queue it, it goes out after response.done.
            let event_id = error.get("event_id").and_then(Value::as_str).unwrap_or("");
            self.responses.on_already_active(event_id);
            return;
        }
        if code == "session_expired" {
            self.start_rotation(Some(0.0));
            return;
        }
        let fatal = FATAL_CODES.contains(&code.as_str())
            || matches!(kind, "authentication_error" | "permission_error" | "insufficient_quota");
        if !fatal
            && let Some(event_id) = error.get("event_id").and_then(Value::as_str)
            && self.responses.on_create_failed(event_id)
        {
            self.pump_responses();
        }
        let code = if code.is_empty() { kind.to_owned() } else { code };
        self.core.error(fatal, code, message);
    }

    fn on_speech_started(&mut self, now: Instant, event: &Value) {
        let started_ms = self.core.ms(now);
        self.user_speaking = true;
        self.last_speech_started_ms = started_ms;
        if let Some(id) = event.get("item_id").and_then(Value::as_str) {
            self.user_items.insert(id.to_owned(), (started_ms, String::new()));
        }
        self.core.emit(ProviderEvent::UserSpeechStarted);
        // Our detector config sets `interrupt_response`: the server cancels the active response
        // itself, so a barge-in only needs to truncate.
        self.responses.cancelled_by_server();
        let text_only = self.setup.text_only;
        if let Some(item) = self.assistant.as_mut().filter(|item| !item.truncated && item.samples > 0) {
            item.awaiting_barge_in = !text_only && !item.final_emitted;
            self.core.emit(ProviderEvent::Interrupted);
        }
    }

    /// The event's `item_id`. One missing (or empty) fails the turn, reported once per turn; the
    /// event is then ignored rather than filed under an empty id (where its text or audio would
    /// mix with another broken event's, and a truncate would name no item).
    fn item_id(&mut self, event: &Value) -> Option<String> {
        let id = event.get("item_id").and_then(Value::as_str).filter(|id| !id.is_empty()).map(str::to_owned);
        if id.is_none() && !self.missing_item_reported {
            self.missing_item_reported = true;
            let kind = event.get("type").and_then(Value::as_str).unwrap_or("an event");
            self.core.error(false, "missing_item_id", format!("{kind} without an item_id; this turn is incomplete"));
        }
        id
    }

    fn user_item_start(&self, id: &str) -> u64 {
        match self.user_items.get(id) {
            Some((ms, _)) => *ms,
            None => self.last_speech_started_ms,
        }
    }

    fn on_user_transcript(&mut self, kind: &str, event: &Value) {
        let Some(id) = self.item_id(event) else { return };
        let speech_started_ms = self.user_item_start(&id);
        match kind {
            "delta" => {
                let delta = event.get("delta").and_then(Value::as_str).unwrap_or("");
                if delta.is_empty() {
                    return;
                }
                if let Some((_, text)) = self.user_items.get_mut(&id) {
                    text.push_str(delta);
                }
                self.core.emit(ProviderEvent::UserTranscript {
                    text: delta.to_owned(),
                    is_final: false,
                    speech_started_ms,
                });
            }
            "updated" => {
                // xAI: cumulative, and the word being heard may still be corrected. Fragments
                // cannot be taken back, so the last word (finished or not) waits for the next
                // update, and only what extends the words already sent goes out; the final has
                // the corrected text.
                let full = event.get("transcript").and_then(Value::as_str).unwrap_or("");
                let heard = full.trim_end();
                let stable = heard.rfind(char::is_whitespace).map_or("", |end| &heard[..end + 1]);
                let entry = self.user_items.entry(id).or_insert((speech_started_ms, String::new()));
                if let Some(extension) = stable.strip_prefix(entry.1.as_str())
                    && !extension.is_empty()
                {
                    let extension = extension.to_owned();
                    entry.1 = stable.to_owned();
                    self.core.emit(ProviderEvent::UserTranscript {
                        text: extension,
                        is_final: false,
                        speech_started_ms,
                    });
                }
            }
            _ => {
                let text = event.get("transcript").and_then(Value::as_str).unwrap_or("").to_owned();
                self.user_items.remove(&id);
                self.core.emit(ProviderEvent::UserTranscript { text: text.clone(), is_final: true, speech_started_ms });
                self.core.record_turn(speech_started_ms, Role::User, &text);
            }
        }
    }

    fn on_audio_delta(&mut self, now: Instant, event: &Value) {
        let Some(pcm) = event.get("delta").and_then(Value::as_str).and_then(decode_pcm) else {
            self.core.error(false, "bad_audio", "undecodable audio delta");
            return;
        };
        let Some(item_id) = self.item_id(event) else { return };
        self.ensure_item(&item_id);
        if let Some(item) = self.assistant.as_mut() {
            item.samples += pcm.len() as u64;
            if item.truncated {
                // Audio of an item the user already cut off: never play it.
                return;
            }
        }
        self.last_audio_out = Some(now);
        if !self.setup.text_only {
            self.core.emit(ProviderEvent::AssistantAudio { pcm, sample_rate: RATE_HZ });
        }
    }

    fn ensure_item(&mut self, item_id: &str) {
        if self.assistant.as_ref().is_none_or(|item| item.id != item_id) {
            self.assistant = Some(AssistantItem {
                id: item_id.to_owned(),
                started_ms: self.responses.started_ms(),
                ..AssistantItem::default()
            });
        }
    }

    fn on_response_done(&mut self, event: &Value) {
        let response = event.get("response").unwrap_or(&Value::Null);
        let status = match response.get("status").and_then(Value::as_str) {
            Some("cancelled") => ResponseStatus::Cancelled,
            Some("incomplete") => ResponseStatus::Incomplete,
            Some("failed") => ResponseStatus::Failed,
            _ => ResponseStatus::Completed,
        };
        // xAI sometimes puts usage at the top level and leaves `response.usage` without counts
        // (§5.3–5.4): the first place that maps to a report with tokens wins, so a field the
        // provider adds to an empty `response.usage` cannot hide the real one.
        let map = |report: &Value| match self.dialect {
            Dialect::OpenAi => usage::from_openai_realtime(report),
            Dialect::Xai => usage::from_xai(report),
        };
        let mapped = [response.get("usage"), event.get("usage")]
            .into_iter()
            .flatten()
            .filter_map(map)
            .find(|tokens| *tokens != UsageTokens::default());
        if let Some(tokens) = mapped {
            self.core.usage.record(&tokens);
            self.core.emit_usage();
        }
        if status == ResponseStatus::Failed {
            let message = response
                .pointer("/status_details/error/message")
                .and_then(Value::as_str)
                .unwrap_or("response failed")
                .to_owned();
            self.core.error(false, "response_failed", message);
        }
        self.responses.on_done();
        self.core.emit(ProviderEvent::ResponseDone { status });
        self.maybe_follow_up();
        self.pump_responses();
    }

    fn on_function_call(&mut self, event: &Value) {
        let Some(call_id) = event.get("call_id").and_then(Value::as_str) else { return };
        if !self.announced_calls.insert(call_id.to_owned()) {
            return; // Seen via the other event already (and perhaps answered since).
        }
        let name = event.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
        let raw = event.get("arguments").and_then(Value::as_str).unwrap_or("{}");
        let arguments = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
        let background =
            self.setup.tool_policy.of(&name).behavior == ToolBehavior::NonBlocking && self.setup.model.background_tools;
        self.calls.insert(call_id.to_owned(), Call { name: name.clone(), background, answered_upstream: background });
        if background {
            // The model keeps talking: answer now, deliver the result later as context.
            self.add_item(json!({"type": "function_call_output", "call_id": call_id,
                "output": "{\"status\":\"started\",\"note\":\"running in the background; the result will follow\"}"}));
            self.responses.expect_follow_up();
        }
        self.core.emit(ProviderEvent::ToolCall { call_id: call_id.to_owned(), name, arguments });
    }

    fn dispatch(&mut self, now: Instant, event: &Value) {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "session.created" | "conversation.created" if self.core.link == Link::Connecting => {
                self.on_session_created(event);
            }
            "session.updated" => self.on_session_updated(now, event),
            "error" => self.on_error(event),
            "input_audio_buffer.speech_started" => self.on_speech_started(now, event),
            "input_audio_buffer.committed" | "input_audio_buffer.cleared" => self.uncommitted_samples = 0,
            "input_audio_buffer.speech_stopped" => {
                self.user_speaking = false;
                self.core.emit(ProviderEvent::UserSpeechStopped);
                // A turn typed while the user spoke was held back; it may go now.
                self.pump_responses();
            }
            "conversation.item.input_audio_transcription.delta" => self.on_user_transcript("delta", event),
            "conversation.item.input_audio_transcription.updated" => self.on_user_transcript("updated", event),
            "conversation.item.input_audio_transcription.completed" => self.on_user_transcript("completed", event),
            "conversation.item.input_audio_transcription.failed" => {
                let mut done = event.clone();
                done["transcript"] = json!("");
                self.on_user_transcript("completed", &done);
            }
            "response.created" => {
                self.missing_item_reported = false;
                let started_ms = self.core.ms(now);
                self.responses.on_created(started_ms);
                self.core.emit(ProviderEvent::ResponseStarted);
            }
            "response.output_item.added" => {
                if event.pointer("/item/type").and_then(Value::as_str) == Some("message")
                    && let Some(id) = event.pointer("/item/id").and_then(Value::as_str)
                {
                    let id = id.to_owned();
                    self.ensure_item(&id);
                }
            }
            "response.output_audio.delta" | "response.audio.delta" => self.on_audio_delta(now, event),
            "response.output_audio_transcript.delta" | "response.audio_transcript.delta" => {
                let delta = event.get("delta").and_then(Value::as_str).unwrap_or("").to_owned();
                let Some(item_id) = self.item_id(event) else { return };
                self.ensure_item(&item_id);
                let truncated = self.assistant.as_mut().is_some_and(|item| {
                    if !item.truncated {
                        item.transcript.push_str(&delta);
                    }
                    item.truncated
                });
                if !truncated && !delta.is_empty() {
                    if self.setup.text_only {
                        self.core.emit(ProviderEvent::ModelText { text: delta, is_final: false, thought: false });
                    } else {
                        self.core.emit(ProviderEvent::AssistantTranscript { text: delta, is_final: false });
                    }
                }
            }
            "response.output_audio_transcript.done" | "response.audio_transcript.done" => {
                let Some(item_id) = self.item_id(event) else { return };
                self.ensure_item(&item_id);
                if let Some(item) = self.assistant.as_mut()
                    && !item.truncated
                    && !item.final_emitted
                {
                    if let Some(text) = event.get("transcript").and_then(Value::as_str) {
                        item.transcript = text.to_owned();
                    }
                    if item.awaiting_barge_in {
                        // The barge-in's answer finalizes it with the heard share.
                        return;
                    }
                    item.final_emitted = true;
                    let (text, started) = (item.transcript.clone(), item.started_ms);
                    self.core.emit_assistant_final(self.setup.text_only, &text);
                    self.core.record_turn(started, Role::Assistant, &text);
                }
            }
            "response.output_text.delta" | "response.text.delta" => {
                let delta = event.get("delta").and_then(Value::as_str).unwrap_or("").to_owned();
                self.core.emit(ProviderEvent::ModelText { text: delta, is_final: false, thought: false });
            }
            "response.output_text.done" | "response.text.done" => {
                let text = event.get("text").and_then(Value::as_str).unwrap_or("").to_owned();
                self.core.record_turn(self.responses.started_ms(), Role::Assistant, &text);
                self.core.emit(ProviderEvent::ModelText { text, is_final: true, thought: false });
            }
            "response.function_call_arguments.done" => self.on_function_call(event),
            "response.output_item.done" => {
                if let Some(item) = event.get("item")
                    && item.get("type").and_then(Value::as_str) == Some("function_call")
                {
                    self.on_function_call(item);
                }
            }
            "response.done" => self.on_response_done(event),
            kind if KNOWN_UNUSED_EVENTS.contains(&kind) => {}
            kind => self.core.note_unknown(kind),
        }
    }
}

fn reseed_preamble(history: &str) -> String {
    format!(
        "This conversation continues from an earlier connection. Do not greet the user again. \
         Transcript so far:\n{history}"
    )
}

fn audio_frame(pcm: &[i16]) -> String {
    codec::audio_frame("{\"type\":\"input_audio_buffer.append\",\"audio\":\"", pcm, "\"}")
}

/// A tool result as the string OpenAI-style outputs carry.
fn output_text(output: &Value, is_error: bool) -> String {
    match (output, is_error) {
        (Value::String(text), false) => text.clone(),
        (value, false) => value.to_string(),
        (value, true) => json!({"error": value}).to_string(),
    }
}

impl Codec for RealtimeCodec {
    fn handle_input(&mut self, now: Instant, input: ProviderInput) {
        self.core.ms(now);
        if self.core.link == Link::Closed {
            return;
        }
        match input {
            ProviderInput::NativeAudio(pcm) => self.send_audio(&pcm),
            ProviderInput::Text(text) => {
                self.add_item(json!({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text}]}));
                let ms = self.core.ms(now);
                self.core.record_turn(ms, Role::User, &text);
                self.request_response(ResponseRequest::default());
            }
            ProviderInput::Context(text) => self.add_item(json!({"type": "message", "role": "system",
                "content": [{"type": "input_text", "text": text}]})),
            ProviderInput::Note { text, respond } => {
                self.add_item(json!({"type": "message", "role": "system",
                    "content": [{"type": "input_text", "text": text}]}));
                if respond {
                    // The sequencer holds it until a response in progress is done.
                    self.request_response(ResponseRequest::default());
                }
            }
            ProviderInput::Image { mime, data } => {
                if self.dialect == Dialect::OpenAi {
                    use base64::Engine as _;
                    let url = format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(data));
                    self.add_item(json!({"type": "message", "role": "user",
                        "content": [{"type": "input_image", "image_url": url, "detail": "auto"}]}));
                }
            }
            // Server VAD starts turns on these providers; the client may end one early.
            ProviderInput::ActivityStart => {}
            ProviderInput::ActivityEnd => self.end_user_turn(),
            ProviderInput::ToolResult { call_id, output, is_error, scheduling } => {
                self.handle_tool_result(&call_id, &output, is_error, scheduling);
            }
            ProviderInput::DelegationAppend { .. } => {
                self.core.error(false, "delegation_unsupported", "delegation appends need provider_b_live");
            }
            ProviderInput::BargeIn { played_ms } => self.barge_in(played_ms),
            ProviderInput::Greeting(text) => self.greet(&text),
            ProviderInput::Mute(muted) => self.muted = muted,
            ProviderInput::Close => self.close(),
        }
        self.maybe_rotate(now);
    }

    fn handle_connected(&mut self, _now: Instant) {
        // The upstream speaks first (`session.created`).
    }

    fn handle_connect_failed(&mut self, now: Instant, failure: ConnectFailure) {
        self.core.connect_failed(now, failure);
    }

    fn handle_upstream_message(&mut self, now: Instant, frame: &[u8]) {
        let Some(event) = self.core.parse_frame(now, frame) else { return };
        self.dispatch(now, &event);
        self.maybe_rotate(now);
    }

    fn handle_upstream_closed(&mut self, now: Instant, code: Option<u16>, reason: &str) {
        if self.core.link == Link::Closed || self.core.closing() {
            self.core.shut("upstream closed");
            return;
        }
        if !self.core.was_ready {
            self.core.error(true, "upstream_closed", format!("closed during setup ({code:?}): {reason}"));
            return;
        }
        self.core.keep_unread_audio();
        if self.rotation.begin() {
            self.core.emit(ProviderEvent::Reconnecting { seconds_remaining: None });
            self.reset_upstream_state();
        }
        self.core.schedule_retry(now, &format!("closed ({code:?}): {reason}"));
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.core.link == Link::Backoff && self.core.retry_at.is_some_and(|at| now >= at) {
            self.core.retry_at = None;
            self.core.link = Link::Connecting;
            self.core.transmit(Transmit::Connect(self.connect.clone()));
        }
        self.maybe_rotate(now);
    }

    fn handle_read_receipt(&mut self, _now: Instant, receipt: ReadReceipt) {
        self.core.read_receipt(receipt);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.core.poll_transmit()
    }

    fn poll_event(&mut self) -> Option<ProviderEvent> {
        self.core.poll_event()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.core.link {
            Link::Backoff => self.core.retry_at,
            Link::Ready => {
                let quiet_from = self.last_audio_out.map(|at| at + self.setup.limits.quiet_gap);
                self.rotation.deadline(&self.setup.limits, quiet_from)
            }
            _ => None,
        }
    }

    fn resumption_handle(&self) -> Option<&str> {
        None
    }

    fn is_closed(&self) -> bool {
        self.core.is_closed()
    }
}
