//! Gemini Live (provider_a): sans-IO codec for `BidiGenerateContent` (providers.md §2).
//!
//! Session limits are handled natively: the setup always asks for resumption handles
//! (`sessionResumption`) and, in transparent mode, for `lastConsumedClientMessageIndex`; on
//! `goAway` (or an unexpected close) the codec waits until no tool call is open and the latest
//! handle is resumable, closes the old socket, and resumes with the handle. Client messages
//! the server has not acknowledged as consumed are replayed on the new connection, and user
//! audio that arrives meanwhile is buffered — so no user audio is lost across a rotation.
//!
//! Message indices (transparent mode): the first client message after `setup` on a connection
//! has index 0; `lastConsumedClientMessageIndex` acknowledges every message up to and including
//! it. (The exact base is not documented; see docs/API-DESIGN.md "Known quirks".)

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use svc_domain::model::{EndOfSpeechSensitivity, Knobs, ProviderAKnobs, ProviderATurnDetection};
use svc_domain::session_config::InterruptionSensitivity;

use crate::api::{
    ProviderEvent, ProviderInput, ResponseStatus, Role, Scheduling, SessionSetup, ToolBehavior, TranscriptTurn,
};
use crate::codec::{Codec, ConnectFailure, ConnectRequest, Core, Link, Transmit, decode_pcm, encode_pcm, heard_text};
use crate::usage;

/// User audio rate sent upstream.
pub const INPUT_RATE_HZ: u32 = 16_000;
/// Assistant audio rate.
pub const OUTPUT_RATE_HZ: u32 = 24_000;
/// Unacknowledged client messages kept for replay, at most (about 10 s of 20 ms audio frames,
/// ~0.5 MB: the per-session memory budget is 4 MiB).
const REPLAY_MAX_MESSAGES: usize = 500;

/// The `setup` message for `setup` (the knob mapping of §2.3–2.4).
pub fn setup_message(setup: &SessionSetup, handle: Option<&str>, transparent: bool) -> Value {
    let default_knobs = ProviderAKnobs {
        temperature: None,
        max_output_tokens: None,
        thinking_level: None,
        include_thoughts: None,
        turn_detection: ProviderATurnDetection::SvcVad(Default::default()),
    };
    let knobs = match &setup.model.knobs {
        Knobs::ProviderA(knobs) => knobs,
        _ => &default_knobs,
    };
    let mut generation = json!({
        "responseModalities": ["AUDIO"],
        "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": setup.voice}}},
    });
    if let Some(temperature) = knobs.temperature {
        generation["temperature"] = json!(temperature);
    }
    if let Some(max) = knobs.max_output_tokens {
        generation["maxOutputTokens"] = json!(max);
    }
    if knobs.thinking_level.is_some() || knobs.include_thoughts.is_some() {
        let mut thinking = json!({});
        if let Some(level) = knobs.thinking_level {
            thinking["thinkingLevel"] = json!(level.as_str().to_ascii_uppercase());
        }
        if let Some(include) = knobs.include_thoughts {
            thinking["includeThoughts"] = json!(include);
        }
        generation["thinkingConfig"] = thinking;
    }
    let detection = match &knobs.turn_detection {
        ProviderATurnDetection::SvcVad(_) => json!({"disabled": true}),
        ProviderATurnDetection::ServerVad { end_of_speech_sensitivity, silence_duration_ms, prefix_padding_ms } => {
            let mut vad = json!({"disabled": false});
            match setup.interruption_sensitivity {
                InterruptionSensitivity::Low => vad["startOfSpeechSensitivity"] = json!("START_SENSITIVITY_LOW"),
                InterruptionSensitivity::High => vad["startOfSpeechSensitivity"] = json!("START_SENSITIVITY_HIGH"),
                InterruptionSensitivity::Default => {}
            }
            if let Some(sensitivity) = end_of_speech_sensitivity {
                vad["endOfSpeechSensitivity"] = json!(match sensitivity {
                    EndOfSpeechSensitivity::Low => "END_SENSITIVITY_LOW",
                    EndOfSpeechSensitivity::High => "END_SENSITIVITY_HIGH",
                });
            }
            if let Some(ms) = prefix_padding_ms {
                vad["prefixPaddingMs"] = json!(ms);
            }
            if let Some(ms) = silence_duration_ms {
                vad["silenceDurationMs"] = json!(ms);
            }
            vad
        }
    };
    let mut resumption = json!({});
    if let Some(handle) = handle {
        resumption["handle"] = json!(handle);
    }
    if transparent {
        resumption["transparent"] = json!(true);
    }
    let mut message = json!({
        "model": format!("models/{}", setup.model.model_id),
        "generationConfig": generation,
        "systemInstruction": {"parts": [{"text": setup.system_prompt()}]},
        "realtimeInputConfig": {"automaticActivityDetection": detection},
        "inputAudioTranscription": {},
        "outputAudioTranscription": {},
        "sessionResumption": resumption,
        "contextWindowCompression": {"triggerTokens": 100_000, "slidingWindow": {"targetTokens": 60_000}},
    });
    if !setup.tools.is_empty() {
        let declarations: Vec<Value> = setup
            .tools
            .iter()
            .map(|tool| {
                let mut declaration = json!({"name": tool.name, "description": tool.description,
                    "parametersJsonSchema": tool.parameters});
                // Models without async calls take no `behavior`; the others get it explicitly
                // (3.8 defaults to NON_BLOCKING, so BLOCKING must be said).
                if setup.model.background_tools {
                    declaration["behavior"] = json!(match setup.tool_policy.of(&tool.name).behavior {
                        ToolBehavior::Blocking => "BLOCKING",
                        ToolBehavior::NonBlocking => "NON_BLOCKING",
                    });
                }
                declaration
            })
            .collect();
        message["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    json!({"setup": message})
}

/// `"50s"` / `"1.5s"` (protobuf Duration JSON) → duration.
fn parse_duration(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

#[derive(Debug, Clone)]
struct Call {
    name: String,
    non_blocking: bool,
}

/// The model turn being generated or played.
#[derive(Debug, Default)]
struct ModelTurn {
    active: bool,
    done_emitted: bool,
    samples: u64,
    transcript: String,
    started_ms: u64,
    final_emitted: bool,
    truncated: bool,
    usage: Option<Value>,
}

/// Rotation in progress.
#[derive(Debug, Clone, Copy)]
struct GoAway {
    /// Rotate at the latest at.
    deadline: Instant,
    seconds_left: f64,
}

/// The Gemini Live codec.
#[derive(Debug)]
pub struct GeminiCodec {
    core: Core,
    setup: SessionSetup,
    connect: ConnectRequest,
    transparent: bool,
    handle: Option<String>,
    /// The latest update said resumable.
    resumable: bool,
    /// Resuming with a handle right now.
    resuming: bool,
    go_away: Option<GoAway>,
    reconnecting: bool,
    /// Index of the next client message on this connection.
    next_index: u64,
    /// Sent, not yet acknowledged as consumed: (index, frame).
    unacked: VecDeque<(u64, String)>,
    /// The server acknowledged consumption on this connection at least once.
    acked_here: bool,
    /// Tool responses produced while the link was down: they go first after setup (§2.2 step 5).
    pending_tool_responses: Vec<String>,
    calls: BTreeMap<String, Call>,
    turn: ModelTurn,
    user_text: String,
    user_started_ms: Option<u64>,
    greeted: bool,
    muted: bool,
    seeded: bool,
}

impl GeminiCodec {
    /// A codec for `setup`, connecting with `connect`; transparent resumption on.
    pub fn new(setup: SessionSetup, connect: ConnectRequest) -> GeminiCodec {
        GeminiCodec::with_transparent(setup, connect, true)
    }

    /// As [`GeminiCodec::new`], choosing transparent resumption (Vertex documents it; the
    /// Developer API SDK refuses it — turn it off there if the server rejects the setup).
    pub fn with_transparent(setup: SessionSetup, connect: ConnectRequest, transparent: bool) -> GeminiCodec {
        let mut core = Core::new(INPUT_RATE_HZ, setup.limits.reconnect_audio_ms, setup.limits.reconnect_budget);
        for turn in &setup.history {
            core.record_turn(0, turn.role, &turn.text);
        }
        core.transmit(Transmit::Connect(connect.clone()));
        let resuming = setup.resumption_handle.is_some();
        GeminiCodec {
            handle: setup.resumption_handle.clone(),
            resumable: setup.resumption_handle.is_some(),
            core,
            setup,
            connect,
            transparent,
            // A handle from a prior svc session resumes it natively (`resume_session_id`).
            resuming,
            go_away: None,
            reconnecting: false,
            next_index: 0,
            unacked: VecDeque::new(),
            acked_here: false,
            pending_tool_responses: Vec::new(),
            calls: BTreeMap::new(),
            turn: ModelTurn::default(),
            user_text: String::new(),
            user_started_ms: None,
            greeted: false,
            muted: false,
            seeded: false,
        }
    }

    fn server_vad(&self) -> bool {
        matches!(&self.setup.model.knobs, Knobs::ProviderA(k) if matches!(k.turn_detection, ProviderATurnDetection::ServerVad { .. }))
    }

    /// Sends a client message on a ready link (indexed for replay), or keeps it for later.
    fn send_client(&mut self, frame: String) {
        if self.core.link != Link::Ready {
            self.core.send_when_ready(frame);
            return;
        }
        if self.transparent {
            self.unacked.push_back((self.next_index, frame.clone()));
            if self.unacked.len() > REPLAY_MAX_MESSAGES {
                self.unacked.pop_front();
            }
        }
        self.next_index += 1;
        self.core.send(frame);
    }

    fn send_audio(&mut self, pcm: &[i16], native: bool) {
        if self.muted {
            return;
        }
        if self.core.link == Link::Ready {
            let resampled = self.core.input_pcm(pcm, native);
            if resampled.is_empty() {
                return;
            }
            let frame = audio_frame(resampled);
            self.send_client(frame);
        } else {
            let resampled = self.core.input_pcm(pcm, native).to_vec();
            self.core.buffer_audio(&resampled);
        }
    }

    fn tool_response(&mut self, call_id: &str, output: &Value, is_error: bool, scheduling: Option<Scheduling>) {
        let Some(call) = self.calls.remove(call_id) else {
            // Cancelled by the server (toolCallCancellation) or answered already: never resend.
            self.core.error(false, "unknown_tool_call", format!("no open tool call {call_id}; result dropped"));
            return;
        };
        let payload = if is_error { json!({"error": output}) } else { json!({"output": output}) };
        let mut response = json!({"id": call_id, "name": call.name, "response": payload});
        if call.non_blocking {
            let scheduling =
                scheduling.or(self.setup.tool_policy.of(&call.name).scheduling).unwrap_or(Scheduling::WhenIdle);
            response["scheduling"] = json!(scheduling.gemini());
        }
        let frame = json!({"toolResponse": {"functionResponses": [response]}}).to_string();
        if self.core.link == Link::Ready {
            self.send_client(frame);
        } else {
            self.pending_tool_responses.push(frame);
        }
    }

    fn barge_in(&mut self, played_ms: u64) {
        let turn = &mut self.turn;
        if turn.truncated || turn.samples == 0 && turn.transcript.is_empty() {
            return;
        }
        turn.truncated = true;
        let received_ms = turn.samples * 1000 / u64::from(OUTPUT_RATE_HZ);
        let heard = heard_text(&turn.transcript, played_ms.min(received_ms), received_ms);
        let (started, final_emitted) = (turn.started_ms, turn.final_emitted);
        turn.final_emitted = true;
        if final_emitted {
            self.core.emit(ProviderEvent::AssistantTruncated { heard: heard.clone() });
        } else {
            self.emit_assistant_final(&heard);
        }
        self.core.replace_turn(started, Role::Assistant, &heard);
    }

    fn emit_assistant_final(&mut self, text: &str) {
        if self.setup.text_only {
            self.core.emit(ProviderEvent::ModelText { text: text.to_owned(), is_final: true, thought: false });
        } else {
            self.core.emit(ProviderEvent::AssistantTranscript { text: text.to_owned(), is_final: true });
        }
    }

    fn finish_user_turn(&mut self) {
        if let Some(started) = self.user_started_ms.take() {
            let text = std::mem::take(&mut self.user_text);
            self.core.emit(ProviderEvent::UserTranscript {
                text: text.trim().to_owned(),
                is_final: true,
                speech_started_ms: started,
            });
            self.core.record_turn(started, Role::User, &text);
        }
    }

    fn start_model_turn(&mut self, now: Instant) {
        if !self.turn.active {
            let started_ms = self.core.ms(now);
            self.turn = ModelTurn { active: true, started_ms, ..ModelTurn::default() };
            self.core.emit(ProviderEvent::ResponseStarted);
        }
    }

    fn end_model_turn(&mut self, status: ResponseStatus) {
        if self.turn.active && !self.turn.done_emitted {
            self.turn.done_emitted = true;
            self.core.emit(ProviderEvent::ResponseDone { status });
        }
    }

    fn on_server_content(&mut self, now: Instant, content: &Value) {
        // One message may carry several fields: handle each (§2.4, 3.1 note).
        if let Some(fragment) = content.pointer("/inputTranscription/text").and_then(Value::as_str)
            && !fragment.is_empty()
        {
            let started = match self.user_started_ms {
                Some(ms) => ms,
                None => {
                    let ms = self.core.ms(now);
                    self.user_started_ms = Some(ms);
                    ms
                }
            };
            self.user_text.push_str(fragment);
            self.core.emit(ProviderEvent::UserTranscript {
                text: fragment.to_owned(),
                is_final: false,
                speech_started_ms: started,
            });
        }
        if let Some(parts) = content.pointer("/modelTurn/parts").and_then(Value::as_array) {
            self.start_model_turn(now);
            for part in parts {
                if let Some(data) = part.pointer("/inlineData/data").and_then(Value::as_str) {
                    let Some(pcm) = decode_pcm(data) else {
                        self.core.error(false, "bad_audio", "undecodable audio part");
                        continue;
                    };
                    self.turn.samples += pcm.len() as u64;
                    if !self.setup.text_only && !self.turn.truncated {
                        self.core.emit(ProviderEvent::AssistantAudio { pcm, sample_rate: OUTPUT_RATE_HZ });
                    }
                } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                    let thought = part.get("thought").and_then(Value::as_bool).unwrap_or(false);
                    let include =
                        matches!(&self.setup.model.knobs, Knobs::ProviderA(k) if k.include_thoughts == Some(true));
                    if !thought || include {
                        self.core.emit(ProviderEvent::ModelText { text: text.to_owned(), is_final: false, thought });
                    }
                }
            }
        }
        if let Some(fragment) = content.pointer("/outputTranscription/text").and_then(Value::as_str)
            && !fragment.is_empty()
        {
            self.start_model_turn(now);
            if !self.turn.truncated {
                self.turn.transcript.push_str(fragment);
                if self.setup.text_only {
                    self.core.emit(ProviderEvent::ModelText {
                        text: fragment.to_owned(),
                        is_final: false,
                        thought: false,
                    });
                } else {
                    self.core.emit(ProviderEvent::AssistantTranscript { text: fragment.to_owned(), is_final: false });
                }
            }
        }
        if content.get("interrupted").and_then(Value::as_bool) == Some(true) {
            self.core.emit(ProviderEvent::Interrupted);
            self.end_model_turn(ResponseStatus::Cancelled);
        }
        if content.get("generationComplete").and_then(Value::as_bool) == Some(true) {
            self.end_model_turn(ResponseStatus::Completed);
        }
        if content.get("turnComplete").and_then(Value::as_bool) == Some(true) {
            self.end_model_turn(ResponseStatus::Completed);
            self.finish_user_turn();
            if !self.turn.final_emitted && !self.turn.truncated {
                self.turn.final_emitted = true;
                let (text, started) = (self.turn.transcript.clone(), self.turn.started_ms);
                self.emit_assistant_final(&text);
                self.core.record_turn(started, Role::Assistant, &text);
            }
            if let Some(report) = self.turn.usage.take().and_then(|u| usage::from_gemini(&u)) {
                self.core.usage.record(&report);
                self.core.emit_usage();
            }
            if let Some(reason) = content.get("turnCompleteReason").and_then(Value::as_str)
                && reason != "TURN_COMPLETE_REASON_UNSPECIFIED"
                && reason != "NEED_MORE_INPUT"
            {
                self.core.error(false, reason.to_ascii_lowercase(), format!("turn ended: {reason}"));
            }
            self.turn.active = false;
        }
    }

    fn on_setup_complete(&mut self, event: &Value) {
        if self.core.link != Link::Configuring {
            return;
        }
        self.core.mark_ready();
        let resumed = self.resuming;
        self.resuming = false;
        self.go_away = None;
        if self.core.was_ready {
            self.reconnecting = false;
            self.core.emit(ProviderEvent::Reconnected { resumed });
        } else {
            self.core.was_ready = true;
            let id = event.pointer("/setupComplete/sessionId").and_then(Value::as_str).map(str::to_owned);
            self.core.emit(ProviderEvent::Ready { upstream_session_id: id });
        }
        // Replay what the old connection did not consume (transparent), re-indexed here.
        let replay: Vec<String> = std::mem::take(&mut self.unacked).into_iter().map(|(_, frame)| frame).collect();
        // Tool responses go first after setup; then what the old connection did not consume;
        // then commands given while the link was down.
        for frame in std::mem::take(&mut self.pending_tool_responses) {
            self.send_client(frame);
        }
        for frame in replay {
            self.send_client(frame);
        }
        for frame in self.core.take_pending() {
            self.send_client(frame);
        }
        if !resumed && !self.seeded && self.core.history().next().is_some() {
            self.seeded = true;
            let turns: Vec<Value> = self
                .core
                .history()
                .map(|turn: &TranscriptTurn| {
                    let role = if turn.role == Role::User { "user" } else { "model" };
                    json!({"role": role, "parts": [{"text": turn.text}]})
                })
                .collect();
            self.send_client(json!({"clientContent": {"turns": turns, "turnComplete": false}}).to_string());
        }
        for chunk in self.core.take_buffered_audio(INPUT_RATE_HZ as usize / 10) {
            let frame = audio_frame(&chunk);
            self.send_client(frame);
        }
        if !self.greeted {
            self.greeted = true;
            if self.setup.history.is_empty()
                && self.setup.resumption_handle.is_none()
                && let Some(greeting) = self.setup.greeting.clone()
            {
                self.greet(&greeting);
            }
        }
    }

    fn greet(&mut self, greeting: &str) {
        // 3.x answers a bare placeholder with an empty turn: ask for the greeting (§2.5).
        let frame = json!({"clientContent": {"turns": [{"role": "user",
            "parts": [{"text": format!("Greet the user with: {greeting}")}]}], "turnComplete": true}});
        self.send_client(frame.to_string());
    }

    fn on_resumption_update(&mut self, update: &Value) {
        let resumable = update.get("resumable").and_then(Value::as_bool).unwrap_or(false);
        self.resumable = resumable;
        // Only resumable updates carry a usable handle (§2.2). The handle's state includes the
        // client messages up to the index reported with it: those need no replay. An index
        // reported without a usable handle does not help, since we could not resume there.
        let Some(handle) = update.get("newHandle").and_then(Value::as_str).filter(|h| !h.is_empty() && resumable)
        else {
            return;
        };
        if let Some(index) = update.get("lastConsumedClientMessageIndex") {
            let index = index.as_u64().or_else(|| index.as_str().and_then(|s| s.parse().ok()));
            if let Some(index) = index {
                self.acked_here = true;
                while self.unacked.front().is_some_and(|(i, _)| *i <= index) {
                    self.unacked.pop_front();
                }
            }
        }
        if self.handle.as_deref() != Some(handle) {
            self.handle = Some(handle.to_owned());
            self.core.emit(ProviderEvent::ResumptionHandle(Some(handle.to_owned())));
        }
    }

    fn can_resume_now(&self) -> bool {
        self.calls.values().all(|call| call.non_blocking) && self.resumable
    }

    /// Leaves a connection that was ready: what it did not acknowledge stays for replay, unless
    /// it never acknowledged anything (then nothing is known to be lost or kept: replay nothing
    /// rather than duplicate audio).
    fn leave_connection(&mut self) {
        if !self.acked_here {
            self.unacked.clear();
        }
        self.acked_here = false;
        self.next_index = 0;
        self.turn.active = false;
    }

    /// Rotation: close the old socket, reconnect with the latest handle.
    fn rotate(&mut self) {
        if self.core.link == Link::Ready {
            self.leave_connection();
        }
        self.resuming = self.handle.is_some();
        self.go_away = None;
        self.core.link = Link::Connecting;
        self.core.transmit(Transmit::Connect(self.connect.clone()));
    }

    fn begin_reconnecting(&mut self, seconds_left: Option<f64>) {
        if !self.reconnecting {
            self.reconnecting = true;
            self.core.emit(ProviderEvent::Reconnecting { seconds_remaining: seconds_left });
        }
    }

    fn close(&mut self) {
        if self.core.link == Link::Closed {
            return;
        }
        self.core.set_closing();
        let open: Vec<String> = self.calls.keys().cloned().collect();
        for call_id in &open {
            self.tool_response(call_id, &json!("the session ended before the tool finished"), true, None);
        }
        if !open.is_empty() {
            self.core.emit(ProviderEvent::ToolCallsCancelled { call_ids: open });
        }
        self.core.shut("closed by svc");
    }

    fn classify_close(code: Option<u16>, reason: &str) -> Option<(&'static str, String)> {
        let lower = reason.to_ascii_lowercase();
        match code {
            Some(1007) => Some(("invalid_argument", format!("upstream rejected the session (1007): {reason}"))),
            Some(1008) => Some(("model_unavailable", format!("upstream policy violation (1008): {reason}"))),
            _ if lower.contains("resource_exhausted") || lower.contains("quota") => {
                Some(("quota_exceeded", format!("upstream quota exhausted: {reason}")))
            }
            _ => None,
        }
    }
}

fn audio_frame(pcm: &[i16]) -> String {
    let mut frame = String::with_capacity(pcm.len() * 8 / 3 + 96);
    frame.push_str("{\"realtimeInput\":{\"audio\":{\"data\":\"");
    frame.push_str(&encode_pcm(pcm));
    frame.push_str("\",\"mimeType\":\"audio/pcm;rate=16000\"}}}");
    frame
}

impl Codec for GeminiCodec {
    fn handle_input(&mut self, now: Instant, input: ProviderInput) {
        self.core.ms(now);
        if self.core.link == Link::Closed {
            return;
        }
        match input {
            ProviderInput::Audio(pcm) => self.send_audio(&pcm, false),
            ProviderInput::NativeAudio(pcm) => self.send_audio(&pcm, true),
            ProviderInput::Text(text) => {
                let ms = self.core.ms(now);
                self.core.record_turn(ms, Role::User, &text);
                self.send_client(json!({"realtimeInput": {"text": text}}).to_string());
            }
            ProviderInput::Context(text) => {
                // A role is mandatory on 3.x (1007 otherwise); `model` notes open no turn (§2.5).
                self.send_client(
                    json!({"clientContent": {"turns": [{"role": "model", "parts": [{"text": text}]}], "turnComplete": false}})
                        .to_string(),
                );
            }
            ProviderInput::Note { text, respond } => {
                // A user-role turn is what makes Gemini answer; a `model` note opens none (§2.5).
                let role = if respond { "user" } else { "model" };
                self.send_client(
                    json!({"clientContent": {"turns": [{"role": role, "parts": [{"text": text}]}], "turnComplete": respond}})
                        .to_string(),
                );
            }
            ProviderInput::Image { mime, data } => {
                let data = base64::engine::general_purpose::STANDARD.encode(data);
                self.send_client(json!({"realtimeInput": {"video": {"data": data, "mimeType": mime}}}).to_string());
            }
            ProviderInput::ActivityStart => {
                if !self.server_vad() {
                    self.finish_user_turn();
                    self.user_started_ms = Some(self.core.ms(now));
                    self.send_client("{\"realtimeInput\":{\"activityStart\":{}}}".to_owned());
                    self.core.emit(ProviderEvent::UserSpeechStarted);
                }
            }
            ProviderInput::ActivityEnd => {
                if !self.server_vad() {
                    self.send_client("{\"realtimeInput\":{\"activityEnd\":{}}}".to_owned());
                    self.core.emit(ProviderEvent::UserSpeechStopped);
                }
            }
            ProviderInput::ToolResult { call_id, output, is_error, scheduling } => {
                self.tool_response(&call_id, &output, is_error, scheduling);
            }
            ProviderInput::DelegationAppend { .. } => {
                self.core.error(false, "delegation_unsupported", "delegation appends need provider_b_live");
            }
            ProviderInput::BargeIn { played_ms } => self.barge_in(played_ms),
            ProviderInput::Greeting(text) => self.greet(&text),
            ProviderInput::Mute(muted) => {
                if muted && !self.muted && self.server_vad() {
                    // Flush the server's detector when the microphone goes quiet (§2.5).
                    self.send_client("{\"realtimeInput\":{\"audioStreamEnd\":true}}".to_owned());
                }
                self.muted = muted;
            }
            ProviderInput::Close => self.close(),
        }
    }

    fn handle_connected(&mut self, _now: Instant) {
        if self.core.link != Link::Connecting {
            return;
        }
        let handle = if self.resuming { self.handle.clone() } else { None };
        let setup = setup_message(&self.setup, handle.as_deref(), self.transparent);
        self.core.send_json(&setup);
        self.core.link = Link::Configuring;
    }

    fn handle_connect_failed(&mut self, now: Instant, failure: ConnectFailure) {
        // Gemini refuses an exhausted quota at the handshake; the rest is the shared rule.
        if failure.status == Some(429) {
            self.core.error(true, "quota_exceeded", failure.message);
        } else {
            self.core.connect_failed(now, failure);
        }
    }

    fn handle_upstream_message(&mut self, now: Instant, frame: &[u8]) {
        let Some(event) = self.core.parse_frame(now, frame) else { return };
        if event.get("setupComplete").is_some() {
            self.on_setup_complete(&event);
        }
        if let Some(content) = event.get("serverContent") {
            self.on_server_content(now, content);
        }
        if let Some(calls) = event.pointer("/toolCall/functionCalls").and_then(Value::as_array) {
            for call in calls {
                let Some(id) = call.get("id").and_then(Value::as_str) else { continue };
                let name = call.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
                let non_blocking = self.setup.model.background_tools
                    && self.setup.tool_policy.of(&name).behavior == ToolBehavior::NonBlocking;
                self.calls.insert(id.to_owned(), Call { name: name.clone(), non_blocking });
                let arguments = call.get("args").cloned().unwrap_or_else(|| json!({}));
                self.core.emit(ProviderEvent::ToolCall { call_id: id.to_owned(), name, arguments });
            }
        }
        if let Some(ids) = event.pointer("/toolCallCancellation/ids").and_then(Value::as_array) {
            let ids: Vec<String> = ids.iter().filter_map(Value::as_str).map(str::to_owned).collect();
            for id in &ids {
                self.calls.remove(id);
            }
            if !ids.is_empty() {
                self.core.emit(ProviderEvent::ToolCallsCancelled { call_ids: ids });
            }
        }
        if let Some(usage) = event.get("usageMetadata") {
            // Keep the latest snapshot of the turn; committed at turnComplete (§2.9).
            self.turn.usage = Some(usage.clone());
        }
        if let Some(update) = event.get("sessionResumptionUpdate") {
            self.on_resumption_update(update);
        }
        if let Some(go_away) = event.get("goAway") {
            let left =
                go_away.get("timeLeft").and_then(Value::as_str).and_then(parse_duration).unwrap_or(Duration::ZERO);
            // Leave a second of margin before the server's own close.
            let deadline = now + left.saturating_sub(Duration::from_secs(1));
            self.go_away = Some(GoAway { deadline, seconds_left: left.as_secs_f64() });
            self.begin_reconnecting(Some(left.as_secs_f64()));
        }
        if self.go_away.is_some() && self.core.link == Link::Ready && self.can_resume_now() {
            self.rotate();
        }
    }

    fn handle_upstream_closed(&mut self, now: Instant, code: Option<u16>, reason: &str) {
        if self.core.link == Link::Closed || self.core.closing() {
            self.core.shut("upstream closed");
            return;
        }
        if let Some((code, message)) = GeminiCodec::classify_close(code, reason) {
            if self.resuming && code != "quota_exceeded" {
                // The handle was refused: start fresh, reseeded from the transcript (§2.2 step 6).
                self.handle = None;
                self.resuming = false;
                self.core.emit(ProviderEvent::ResumptionHandle(None));
                self.core.schedule_retry(now, &message);
                return;
            }
            self.core.error(true, code, message);
            return;
        }
        if !self.core.was_ready {
            self.core.error(true, "upstream_closed", format!("closed during setup ({code:?}): {reason}"));
            return;
        }
        self.begin_reconnecting(self.go_away.map(|g| g.seconds_left));
        if self.core.link == Link::Ready {
            self.leave_connection();
        }
        self.go_away = None;
        self.core.schedule_retry(now, &format!("closed ({code:?}): {reason}"));
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.core.link == Link::Backoff && self.core.retry_at.is_some_and(|at| now >= at) {
            self.core.retry_at = None;
            self.rotate();
            return;
        }
        if let Some(go_away) = self.go_away
            && now >= go_away.deadline
            && self.core.link == Link::Ready
        {
            // Out of time waiting for a post-tool handle: resume with the latest one.
            self.rotate();
        }
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
            Link::Ready => self.go_away.map(|g| g.deadline),
            _ => None,
        }
    }

    fn resumption_handle(&self) -> Option<&str> {
        self.handle.as_deref()
    }

    fn is_closed(&self) -> bool {
        self.core.is_closed()
    }
}
