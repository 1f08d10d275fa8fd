//! Gemini Live (provider_a): sans-IO codec for `BidiGenerateContent` (providers.md §2).
//!
//! Session limits are handled natively: the setup always asks for resumption handles
//! (`sessionResumption`); on `goAway` (or an unexpected close) the codec waits until no tool
//! call is open and the latest handle is resumable, closes the old socket, and resumes with the
//! handle. The client messages sent since the last resumable `sessionResumptionUpdate` arrived
//! are not in that handle's state: they are kept and replayed on the new connection (Google's
//! documented approach, "buffering messages sent since last SessionResumptionTokenUpdate"), and
//! user audio that arrives meanwhile is buffered. `sessionResumption.transparent`, which would
//! make the server acknowledge messages by index, is Vertex-only: the google-genai SDK refuses it
//! for the Gemini Developer API that svc speaks, so it is never sent.
//!
//! Framing: the service sends every message as JSON in a *binary* frame; the driver hands the
//! codec the payload of either frame type. One message may carry several fields (usage beside
//! `serverContent`, several `serverContent` fields at once): each is handled, usage first.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use svc_domain::model::{EndOfSpeechSensitivity, Knobs, ProviderAKnobs, ProviderATurnDetection};
use svc_domain::session_config::InterruptionSensitivity;
use svc_provider_core::{
    ProviderEvent, ProviderInput, ResponseStatus, Role, Scheduling, SessionSetup, ToolBehavior, TranscriptTurn,
};

use crate::codec::{self, Codec, ConnectFailure, ConnectRequest, Core, Link, Transmit, cut_point, decode_pcm};
use crate::unread::ReadReceipt;
use crate::usage;

/// User audio rate sent upstream.
pub const INPUT_RATE_HZ: u32 = 16_000;
/// Assistant audio rate.
pub const OUTPUT_RATE_HZ: u32 = 24_000;
/// Unacknowledged client messages kept for replay, at most (about 10 s of 20 ms audio frames,
/// ~0.5 MB: the per-session memory budget is 4 MiB).
const REPLAY_MAX_MESSAGES: usize = 500;

/// The `setup` message for `setup` (the knob mapping of §2.3–2.4), resuming `handle` if given.
pub fn setup_message(setup: &SessionSetup, handle: Option<&str>) -> Value {
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
    let mut generation = json!({"responseModalities": ["AUDIO"]});
    if let Some(voice) = &setup.voice {
        generation["speechConfig"] = json!({"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": voice}}});
    }
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
    /// The service interrupted this turn while its audio played: the final transcript is the
    /// heard share, which the runtime's [`ProviderInput::BargeIn`] (answering `Interrupted`)
    /// tells; the turn's end must not finalize the whole text before it arrives.
    awaiting_barge_in: bool,
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
    handle: Option<String>,
    /// The latest update said resumable.
    resumable: bool,
    /// Resuming with a handle right now.
    resuming: bool,
    go_away: Option<GoAway>,
    reconnecting: bool,
    /// Client messages sent since the last resumable handle arrived: not in its state, so
    /// replayed when resuming with it (bounded by [`REPLAY_MAX_MESSAGES`]).
    since_handle: VecDeque<String>,
    /// Usage of the model turn in progress: the latest `usageMetadata` snapshot, committed at
    /// `turnComplete` (several snapshots of one turn must not add up, providers.md §2.9).
    turn_usage: Option<Value>,
    /// A turn completed without usage: a snapshot arriving before the next turn starts is its.
    usage_owed: bool,
    /// svc_vad: an `activityStart` was sent without its `activityEnd` yet.
    activity_open: bool,
    /// server_vad: the user is speaking, as the service signals it (`voiceActivity`) or, when it
    /// sends none, as its transcription and interruptions show it.
    user_speaking: bool,
    /// The service sends `voiceActivity`: the inference from transcripts is not needed.
    voice_activity_seen: bool,
    /// Tool responses produced while the link was down: they go first after setup (§2.2 step 5).
    pending_tool_responses: Vec<String>,
    calls: BTreeMap<String, Call>,
    turn: ModelTurn,
    user_text: String,
    user_started_ms: Option<u64>,
    muted: bool,
    /// Turns of the transcript a fresh upstream session is seeded with: those recorded before
    /// the last ready link went down (turns given while it was down are sent as they were held).
    seed_turns: usize,
}

impl GeminiCodec {
    /// A codec for `setup`, connecting with `connect`.
    pub fn new(setup: SessionSetup, connect: ConnectRequest) -> GeminiCodec {
        let core = Core::start(INPUT_RATE_HZ, &setup, &connect);
        let resuming = setup.resumption_handle.is_some();
        let setup_history_len = setup.history.len();
        GeminiCodec {
            handle: setup.resumption_handle.clone(),
            resumable: setup.resumption_handle.is_some(),
            core,
            setup,
            connect,
            // A handle from a prior svc session resumes it natively (`resume_session_id`).
            resuming,
            go_away: None,
            reconnecting: false,
            since_handle: VecDeque::new(),
            turn_usage: None,
            usage_owed: false,
            activity_open: false,
            user_speaking: false,
            voice_activity_seen: false,
            pending_tool_responses: Vec::new(),
            calls: BTreeMap::new(),
            turn: ModelTurn::default(),
            user_text: String::new(),
            user_started_ms: None,
            muted: false,
            // A prior session's transcript seeds the first upstream session (unless its handle
            // resumes it natively).
            seed_turns: setup_history_len,
        }
    }

    fn server_vad(&self) -> bool {
        matches!(&self.setup.model.knobs, Knobs::ProviderA(k) if matches!(k.turn_detection, ProviderATurnDetection::ServerVad { .. }))
    }

    /// Sends a client message on a ready link (kept for replay until a handle covers it), or
    /// keeps it for later.
    fn send_client(&mut self, frame: String) {
        if self.core.link != Link::Ready {
            self.core.send_when_ready(frame);
            return;
        }
        self.since_handle.push_back(frame.clone());
        if self.since_handle.len() > REPLAY_MAX_MESSAGES {
            self.since_handle.pop_front();
        }
        self.core.send(frame);
    }

    fn send_audio(&mut self, pcm: &[i16]) {
        if self.muted {
            return;
        }
        let Some(audio) = self.core.user_audio(pcm) else { return };
        let frame = audio_frame(audio);
        self.send_client(frame);
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
        turn.awaiting_barge_in = false;
        let (_, _, heard) = cut_point(&turn.transcript, turn.samples, OUTPUT_RATE_HZ, played_ms);
        let (started, final_emitted) = (turn.started_ms, turn.final_emitted);
        turn.final_emitted = true;
        self.core.report_cut(started, &heard, final_emitted, self.setup.text_only);
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

    /// Under server_vad, the user's speech as the service reports it: `user-started-speaking`
    /// and `user-stopped-speaking` (svc_vad's come from svc's own detector).
    fn user_speech(&mut self, speaking: bool) {
        if !self.server_vad() || speaking == self.user_speaking {
            return;
        }
        self.user_speaking = speaking;
        self.core.emit(if speaking { ProviderEvent::UserSpeechStarted } else { ProviderEvent::UserSpeechStopped });
    }

    fn on_voice_activity(&mut self, activity: &Value) {
        match activity.get("type").and_then(Value::as_str) {
            Some("ACTIVITY_START") => {
                self.voice_activity_seen = true;
                self.user_speech(true);
            }
            Some("ACTIVITY_END") => {
                self.voice_activity_seen = true;
                self.user_speech(false);
            }
            _ => {}
        }
    }

    fn start_model_turn(&mut self, now: Instant) {
        if !self.voice_activity_seen {
            // Without voiceActivity, the model answering is the sign the user's turn ended.
            self.user_speech(false);
        }
        if !self.turn.active {
            // A turn still owed its heard share never got the runtime's answer; the runtime
            // then keeps the fragments it played as the final (its grace timer).
            let started_ms = self.core.ms(now);
            self.turn = ModelTurn { active: true, started_ms, ..ModelTurn::default() };
            self.usage_owed = false;
            self.core.emit(ProviderEvent::ResponseStarted);
        }
    }

    /// One `usageMetadata` snapshot. Within a turn the latest wins (committed at
    /// `turnComplete`); one that arrives after a turn completed without usage is that turn's.
    fn on_usage(&mut self, usage: &Value) {
        if self.usage_owed && !self.turn.active {
            self.usage_owed = false;
            self.commit_usage(usage);
        } else {
            self.turn_usage = Some(usage.clone());
        }
    }

    fn commit_usage(&mut self, usage: &Value) {
        if let Some(report) = usage::from_gemini(usage) {
            self.core.usage.record(&report);
            self.core.emit_usage();
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
            if !self.voice_activity_seen {
                self.user_speech(true);
            }
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
            let turn = &mut self.turn;
            if !self.setup.text_only && turn.samples > 0 && !turn.truncated && !turn.final_emitted {
                turn.awaiting_barge_in = true;
            }
            self.core.emit(ProviderEvent::Interrupted);
            self.end_model_turn(ResponseStatus::Cancelled);
            if !self.voice_activity_seen {
                // The service's detector heard the user over the reply.
                self.user_speech(true);
            }
        }
        if content.get("generationComplete").and_then(Value::as_bool) == Some(true) {
            self.end_model_turn(ResponseStatus::Completed);
        }
        if content.get("turnComplete").and_then(Value::as_bool) == Some(true) {
            self.end_model_turn(ResponseStatus::Completed);
            self.finish_user_turn();
            if !self.turn.final_emitted && !self.turn.truncated && !self.turn.awaiting_barge_in {
                self.turn.final_emitted = true;
                let (text, started) = (self.turn.transcript.clone(), self.turn.started_ms);
                self.core.emit_assistant_final(self.setup.text_only, &text);
                self.core.record_turn(started, Role::Assistant, &text);
            }
            match self.turn_usage.take() {
                Some(usage) => self.commit_usage(&usage),
                None => self.usage_owed = true,
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
        // What the old connection got after its last handle is not in the resumed state:
        // replay it. A fresh session (no handle, or the handle refused) is reseeded from the
        // transcript instead, so old audio is not replayed into it.
        let sent_since_handle = std::mem::take(&mut self.since_handle);
        let replay: Vec<String> = if resumed { sent_since_handle.into() } else { Vec::new() };
        // Tool responses go first after setup (§2.2 step 5); then what the old connection got
        // after its handle; then, on a fresh session, the transcript; then what was given while
        // the link was down, commands and audio in the order they came (an activity signal
        // must not overtake its audio).
        for frame in std::mem::take(&mut self.pending_tool_responses) {
            self.send_client(frame);
        }
        for frame in replay {
            self.send_client(frame);
        }
        if !resumed && self.seed_turns > 0 {
            let turns: Vec<Value> = self
                .core
                .history()
                .take(self.seed_turns)
                .map(|turn: &TranscriptTurn| {
                    let role = if turn.role == Role::User { "user" } else { "model" };
                    json!({"role": role, "parts": [{"text": turn.text}]})
                })
                .collect();
            self.send_client(json!({"clientContent": {"turns": turns, "turnComplete": false}}).to_string());
        }
        for frame in self.core.take_held_frames(audio_frame) {
            self.send_client(frame);
        }
        if let Some(greeting) = self.core.greeting_once(&self.setup) {
            self.greet(&greeting);
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
        // Only resumable updates carry a usable handle (§2.2). Its state holds what was sent
        // before it: only what is sent from now on needs replaying when resuming with it.
        let Some(handle) = update.get("newHandle").and_then(Value::as_str).filter(|h| !h.is_empty() && resumable)
        else {
            return;
        };
        self.since_handle.clear();
        if self.handle.as_deref() != Some(handle) {
            self.handle = Some(handle.to_owned());
            self.core.emit(ProviderEvent::ResumptionHandle(Some(handle.to_owned())));
        }
    }

    /// A goAway's rotation waits for a resumable handle with no blocking call open (a handle
    /// from before the call resumes into a session that never saw it) and, under svc_vad, for
    /// the user's activity to end: without the Developer API's acknowledgements a message in
    /// flight when a handle is taken can be lost, and outside an activity that is silence.
    /// The goAway deadline rotates regardless.
    fn can_resume_now(&self) -> bool {
        self.calls.values().all(|call| call.non_blocking) && self.resumable && !self.activity_open
    }

    fn maybe_rotate(&mut self) {
        if self.go_away.is_some() && self.core.link == Link::Ready && self.can_resume_now() {
            self.rotate();
        }
    }

    /// Leaves a connection that was ready (what it got since its last handle stays for replay).
    fn leave_connection(&mut self) {
        self.turn.active = false;
        self.seed_turns = self.core.history().count();
        // A new connection starts without an open activity of ours.
        self.activity_open = false;
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

/// svc_vad's activity signals (automatic activity detection is disabled then).
const ACTIVITY_START: &str = "{\"realtimeInput\":{\"activityStart\":{}}}";
const ACTIVITY_END: &str = "{\"realtimeInput\":{\"activityEnd\":{}}}";
/// server_vad's flush of the service's detector (microphone muted, or the client's activity-end).
const AUDIO_STREAM_END: &str = "{\"realtimeInput\":{\"audioStreamEnd\":true}}";

/// Top-level fields of a server message (`LiveServerMessage`, google-genai 3.6.1) that svc
/// knows (`voiceActivityDetectionSignal` is read as nothing: `voiceActivity` says more).
const KNOWN_FIELDS: [&str; 9] = [
    "setupComplete",
    "serverContent",
    "toolCall",
    "toolCallCancellation",
    "usageMetadata",
    "goAway",
    "sessionResumptionUpdate",
    "voiceActivity",
    "voiceActivityDetectionSignal",
];

fn audio_frame(pcm: &[i16]) -> String {
    codec::audio_frame("{\"realtimeInput\":{\"audio\":{\"data\":\"", pcm, "\",\"mimeType\":\"audio/pcm;rate=16000\"}}}")
}

impl Codec for GeminiCodec {
    fn handle_input(&mut self, now: Instant, input: ProviderInput) {
        self.core.ms(now);
        if self.core.link == Link::Closed {
            return;
        }
        match input {
            ProviderInput::NativeAudio(pcm) => self.send_audio(&pcm),
            ProviderInput::Text(text) => {
                let ms = self.core.ms(now);
                self.core.record_turn(ms, Role::User, &text);
                let frame = json!({"realtimeInput": {"text": text}}).to_string();
                if self.server_vad() || self.activity_open {
                    self.send_client(frame);
                } else {
                    // Automatic activity detection is off under svc_vad: the service takes
                    // realtime input as a turn only between activity signals (the SDK's
                    // `LiveClientRealtimeInput`: "end of turn … derived from user activity").
                    self.send_client(ACTIVITY_START.to_owned());
                    self.send_client(frame);
                    self.send_client(ACTIVITY_END.to_owned());
                }
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
                    self.activity_open = true;
                    self.send_client(ACTIVITY_START.to_owned());
                    self.core.emit(ProviderEvent::UserSpeechStarted);
                }
            }
            ProviderInput::ActivityEnd if self.server_vad() => {
                // The client ends the turn (`activity-end`): flush the service's detector, as
                // the SDK documents `audioStreamEnd` for a microphone that stops.
                if !self.muted {
                    self.send_client(AUDIO_STREAM_END.to_owned());
                }
                self.user_speech(false);
            }
            ProviderInput::ActivityEnd => {
                self.activity_open = false;
                self.send_client(ACTIVITY_END.to_owned());
                self.core.emit(ProviderEvent::UserSpeechStopped);
                self.maybe_rotate();
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
                    self.send_client(AUDIO_STREAM_END.to_owned());
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
        let setup = setup_message(&self.setup, handle.as_deref());
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
        let Some(fields) = event.as_object() else {
            self.core.error(false, "bad_frame", "upstream sent JSON that is not an object");
            return;
        };
        for key in fields.keys().filter(|key| !KNOWN_FIELDS.contains(&key.as_str()) && *key != "error") {
            self.core.note_unknown(key);
        }
        if let Some(error) = event.get("error") {
            // The SDK raises a message without known fields as an API error (`live.py`); the
            // service closes the socket after a fatal one, which decides the session's fate.
            let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
            self.core.error(false, "upstream_error", message);
        }
        // Usage first: it may ride in the message that completes its turn (§2.9).
        if let Some(usage) = event.get("usageMetadata") {
            self.on_usage(usage);
        }
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
        if let Some(activity) = event.get("voiceActivity") {
            self.on_voice_activity(activity);
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
        self.maybe_rotate();
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
        if self.handle.is_some() {
            // Resuming replays every message since the handle, the unread audio among them.
            self.core.forget_unread_audio();
        } else {
            self.core.keep_unread_audio();
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
