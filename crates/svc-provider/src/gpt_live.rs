//! OpenAI GPT-Live (provider_b_live): sans-IO codec for `/v1/live/sessions` (providers.md §4).
//!
//! GPT-Live is full duplex and owns its turn-taking, so this codec derives what the others get
//! as events: user turns from the input transcript's timing (a gap of `turn_gap` on the model's
//! clock, or that long without a new fragment), and response start/stop from an energy gate on
//! the continuous output audio (which includes silent frames).
//!
//! Delegation: `responses` (upstream runs the Responses model; its function calls come out as
//! tool calls and one `response.create` follows only when every open call of the session has an
//! output and no backend response runs), `client` (delegation events out, appends in) and `svc`
//! (upstream `client` delegation; this codec runs the backend itself by calling the Responses API
//! over HTTP with the session's transcript and streams the answer back as appends). Appends are
//! split to the per-append cap.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde_json::{Value, json};
use svc_domain::model::{Delegation, Knobs};
use svc_domain::session_config::InterruptionSensitivity;
use svc_http::{HttpEvent, HttpRequest};
use svc_provider_core::{AppendChannel, ProviderEvent, ProviderInput, ResponseStatus, Role, SessionSetup};

use crate::codec::{
    self, Codec, ConnectFailure, ConnectRequest, Core, Link, Transmit, cut_point, decode_pcm, split_for_append,
};
use crate::rotation::CapRotation;
use crate::unread::ReadReceipt;
use crate::usage;

/// Audio rate both ways (set once at start).
pub const RATE_HZ: u32 = 24_000;
/// RMS (of samples scaled to ±1) above which output audio counts as speech (LiveKit's gate, §4.5).
pub const SPEECH_RMS: f64 = 0.0006;
/// Silence that ends an assistant response, in samples (0.8 s).
const END_SILENCE_SAMPLES: u64 = RATE_HZ as u64 * 8 / 10;
/// Largest live-model prompt in estimated tokens (upstream cap 16,384, §4.2; the spec allows
/// 131,072 characters of instructions).
pub const INSTRUCTIONS_MAX_TOKENS: usize = 16_000;
/// Most `input` history messages a session start takes (§4.2).
const HISTORY_MAX_MESSAGES: usize = 128;
/// Error codes that end the session (LiveKit's GPT-Live fatal list, §1.5).
const FATAL_CODES: [&str; 7] = [
    "invalid_api_key",
    "insufficient_quota",
    "billing_hard_limit_reached",
    "credit_balance_exhausted",
    "account_deactivated",
    "forbidden",
    "unauthorized",
];

/// Where `svc` delegation sends its backend requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// Responses API URL.
    pub url: String,
    /// Authentication headers.
    pub headers: Vec<(String, String)>,
    /// Backend model when the session names none.
    pub model: String,
}

/// The `session.start` for `setup` with `history` as `input` (the knob mapping of §4.3).
pub fn session_start(setup: &SessionSetup, history: &[(Role, String)], event_id: &str) -> Value {
    let delegation = match setup.model.delegation.unwrap_or(Delegation::Responses) {
        Delegation::Responses => {
            let mut responses = json!({});
            if let Knobs::ProviderBLive(knobs) = &setup.model.knobs {
                if let Some(model) = &knobs.responses_model {
                    responses["model"] = json!(model);
                }
                responses["instructions"] =
                    json!(knobs.responses_instructions.clone().unwrap_or_else(|| setup.instructions.clone()));
                if let Some(effort) = knobs.reasoning_effort {
                    responses["reasoning"] = json!({"effort": effort.as_str()});
                }
                if let Some(verbosity) = knobs.verbosity {
                    responses["text"] = json!({"verbosity": verbosity.as_str()});
                }
                if let Some(choice) = knobs.tool_choice {
                    responses["tool_choice"] = json!(choice.as_str());
                }
                if let Some(parallel) = knobs.parallel_tool_calls {
                    responses["parallel_tool_calls"] = json!(parallel);
                }
                if let Some(max) = knobs.max_output_tokens {
                    responses["max_output_tokens"] = json!(max);
                }
                if let Some(tier) = knobs.service_tier {
                    responses["service_tier"] = json!(tier.as_str());
                }
            }
            if !setup.tools.is_empty() {
                let tools: Vec<Value> = setup
                    .tools
                    .iter()
                    .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}))
                    .collect();
                responses["tools"] = json!(tools);
            }
            json!({"type": "responses", "responses": responses})
        }
        Delegation::Client | Delegation::Svc => json!({"type": "client"}),
    };
    let prompt = match interruption_note(setup.interruption_sensitivity) {
        Some(note) => format!("{}\n\n{note}", setup.system_prompt()),
        None => setup.system_prompt(),
    };
    let (instructions, _) = fit_instructions(&prompt);
    let mut session = json!({
        "model": setup.model.model_id,
        "instructions": instructions,
        "audio": {"format": {"type": "audio/pcm", "rate": RATE_HZ}},
        "delegation": delegation,
    });
    if let Some(voice) = &setup.voice {
        session["audio"]["output"] = json!({"voice": voice});
    }
    if !history.is_empty() {
        let skip = history.len().saturating_sub(HISTORY_MAX_MESSAGES);
        let input: Vec<Value> = history[skip..]
            .iter()
            .map(|(role, text)| match role {
                Role::User => {
                    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
                }
                Role::Assistant => {
                    json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
                }
            })
            .collect();
        session["input"] = json!(input);
    }
    json!({"type": "session.start", "event_id": event_id, "session": session})
}

/// Interruption sensitivity as GPT-Live can take it: the voice model decides itself when the
/// caller barges in, steered only by its instructions (the SDK: "Frontend instructions for
/// voice, conversation, interruptions").
fn interruption_note(sensitivity: InterruptionSensitivity) -> Option<&'static str> {
    match sensitivity {
        InterruptionSensitivity::Low => Some(
            "When the caller talks while you speak, keep going unless they clearly want the floor: \
             do not stop for short sounds, coughs or backchannels such as \"mm-hm\".",
        ),
        InterruptionSensitivity::Default => None,
        InterruptionSensitivity::High => {
            Some("Stop speaking as soon as the caller starts to talk, even briefly, and listen.")
        }
    }
}

/// The live prompt cut to [`INSTRUCTIONS_MAX_TOKENS`] at a sentence end; `true` when cut. Under
/// `responses` delegation the backend still gets the full instructions.
pub fn fit_instructions(prompt: &str) -> (String, bool) {
    if crate::codec::estimate_tokens(prompt) <= INSTRUCTIONS_MAX_TOKENS {
        return (prompt.to_owned(), false);
    }
    let first = split_for_append(prompt, INSTRUCTIONS_MAX_TOKENS).into_iter().next().unwrap_or_default();
    (first, true)
}

#[derive(Debug, Default)]
struct UserTurn {
    started_ms: u64,
    text: String,
    last_end_ms: u64,
    last_delta_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct Speech {
    speaking: bool,
    silence: u64,
    samples: u64,
    transcript: String,
    started_ms: u64,
    final_emitted: bool,
    truncated: bool,
}

#[derive(Debug)]
struct Job {
    delegation_id: String,
    answer: String,
    status: Option<u16>,
    usage: Option<Value>,
}

/// GPT-Live server events (openai 3.57.0 `openai.types.live.ServerEvent`) svc does not act on,
/// on purpose (docs/providers/gpt-live.md): acknowledgements of what svc itself sent, the
/// `decisions` delegation svc does not use, audio fixtures, SIP transport events of a leg svc
/// does not use, and informational notices. Anything else is logged once as unknown.
const KNOWN_UNUSED_EVENTS: [&str; 18] = [
    "session.updated",
    "session.input_audio.append",
    "session.input_audio.muted",
    "session.input_audio.unmuted",
    "session.instructions.appended",
    "session.thinking.appended",
    "session.commentary.appended",
    "session.output_audio.fixture.playing",
    "session.output_audio.fixture.played",
    "decision.event",
    "decision.item.created",
    "decision.item.deleted",
    "info",
    "transport.answered",
    "transport.ringing",
    "transport.failed",
    "transport.dtmf.received",
    "transport.dtmf.sent",
];

/// The GPT-Live codec.
#[derive(Debug)]
pub struct GptLiveCodec {
    core: Core,
    setup: SessionSetup,
    connect: ConnectRequest,
    backend: Backend,
    delegation: Delegation,
    /// When the upstream session is replaced before its cap.
    rotation: CapRotation,
    muted: bool,
    user: Option<UserTurn>,
    last_user_text: String,
    speech: Speech,
    /// Open backend function calls (responses delegation): call id → delegation id.
    open_calls: BTreeMap<String, String>,
    backend_running: usize,
    outputs_pending: bool,
    jobs: HashMap<u64, Job>,
    seq: u64,
}

impl GptLiveCodec {
    /// A codec for `setup` connecting with `connect`; `backend` serves `svc` delegation.
    pub fn new(setup: SessionSetup, connect: ConnectRequest, backend: Backend) -> GptLiveCodec {
        GptLiveCodec {
            delegation: setup.model.delegation.unwrap_or(Delegation::Responses),
            core: Core::start(RATE_HZ, &setup, &connect),
            setup,
            connect,
            backend,
            rotation: CapRotation::default(),
            muted: false,
            user: None,
            last_user_text: String::new(),
            speech: Speech::default(),
            open_calls: BTreeMap::new(),
            backend_running: 0,
            outputs_pending: false,
            jobs: HashMap::new(),
            seq: 0,
        }
    }

    fn next_id(&mut self, kind: &str) -> String {
        self.seq += 1;
        format!("svc_{kind}_{}", self.seq)
    }

    fn append(&mut self, channel: AppendChannel, delegation_id: Option<&str>, content: &str) {
        for piece in split_for_append(content, self.setup.limits.append_max_tokens) {
            let event_id = self.next_id("append");
            self.core.send_when_ready(
                json!({"type": channel.command(), "event_id": event_id, "delegation_id": delegation_id, "content": piece})
                    .to_string(),
            );
        }
    }

    fn history_pairs(&self) -> Vec<(Role, String)> {
        self.core.history().map(|turn| (turn.role, turn.text.clone())).collect()
    }

    // ---- user turns (from transcript timing) ------------------------------------------------

    fn on_input_transcript(&mut self, now: Instant, event: &Value) {
        let delta = event.get("delta").and_then(Value::as_str).unwrap_or("");
        let start = event.get("start_ms").and_then(Value::as_u64).unwrap_or(0);
        let end = event.get("end_ms").and_then(Value::as_u64).unwrap_or(start);
        let gap = u64::try_from(self.setup.limits.turn_gap.as_millis()).unwrap_or(800);
        if let Some(turn) = &self.user
            && start.saturating_sub(turn.last_end_ms) >= gap
        {
            self.finish_user_turn();
        }
        if self.user.is_none() {
            let started_ms = self.core.ms(now);
            self.user = Some(UserTurn { started_ms, ..UserTurn::default() });
            self.core.emit(ProviderEvent::UserSpeechStarted);
            if self.speech.speaking {
                self.core.emit(ProviderEvent::Interrupted);
            }
        }
        let Some(turn) = self.user.as_mut() else { return };
        turn.text.push_str(delta);
        turn.last_end_ms = end;
        turn.last_delta_at = Some(now);
        let started = turn.started_ms;
        if !delta.is_empty() {
            self.core.emit(ProviderEvent::UserTranscript {
                text: delta.to_owned(),
                is_final: false,
                speech_started_ms: started,
            });
        }
    }

    fn finish_user_turn(&mut self) {
        if let Some(turn) = self.user.take() {
            let text = turn.text.trim().to_owned();
            self.core.emit(ProviderEvent::UserSpeechStopped);
            self.core.emit(ProviderEvent::UserTranscript {
                text: text.clone(),
                is_final: true,
                speech_started_ms: turn.started_ms,
            });
            self.core.record_turn(turn.started_ms, Role::User, &text);
            self.last_user_text = text;
        }
    }

    // ---- assistant speech (energy gate) ----------------------------------------------------

    fn on_output_audio(&mut self, now: Instant, pcm: Vec<i16>) {
        let voiced = rms(&pcm) > SPEECH_RMS;
        let n = pcm.len() as u64;
        if voiced && !self.speech.speaking {
            self.speech = Speech {
                speaking: true,
                started_ms: self.core.ms(now),
                transcript: std::mem::take(&mut self.speech.transcript),
                ..Speech::default()
            };
            self.core.emit(ProviderEvent::ResponseStarted);
        }
        if self.speech.speaking {
            self.speech.samples += n;
            if voiced {
                self.speech.silence = 0;
            } else {
                self.speech.silence += n;
                if self.speech.silence >= END_SILENCE_SAMPLES {
                    self.end_speech();
                }
            }
        }
        if !self.speech.truncated {
            self.core.emit(ProviderEvent::AssistantAudio { pcm, sample_rate: RATE_HZ });
        }
    }

    fn end_speech(&mut self) {
        self.speech.speaking = false;
        if !self.speech.final_emitted {
            self.speech.final_emitted = true;
            let text = self.speech.transcript.trim().to_owned();
            self.core.emit(ProviderEvent::AssistantTranscript { text: text.clone(), is_final: true });
            self.core.record_turn(self.speech.started_ms, Role::Assistant, &text);
        }
        let status = if self.speech.truncated { ResponseStatus::Cancelled } else { ResponseStatus::Completed };
        self.core.emit(ProviderEvent::ResponseDone { status });
        self.speech = Speech::default();
    }

    fn send_audio(&mut self, pcm: &[i16]) {
        if let Some(audio) = self.core.user_audio(pcm) {
            let frame = audio_frame(audio);
            self.core.send(frame);
        }
    }

    fn barge_in(&mut self, played_ms: u64) {
        // The model stops itself; we only cut the transcript to what was heard.
        if self.speech.truncated || (self.speech.samples == 0 && self.speech.transcript.is_empty()) {
            return;
        }
        self.speech.truncated = true;
        let (_, _, heard) = cut_point(&self.speech.transcript, self.speech.samples, RATE_HZ, played_ms);
        let final_emitted = std::mem::replace(&mut self.speech.final_emitted, true);
        // GPT-Live sessions always speak: there is no text-only mode to report in.
        self.core.report_cut(self.speech.started_ms, &heard, final_emitted, false);
    }

    // ---- delegation ----------------------------------------------------------------------------

    fn on_delegation_created(&mut self, event: &Value) {
        let Some(id) = event.pointer("/delegation/id").and_then(Value::as_str).map(str::to_owned) else { return };
        if self.delegation == Delegation::Responses {
            return; // Informational: the upstream runs the backend.
        }
        // Upstream gives no task text: the prompting turn is our current (or last) user turn.
        let transcript = match &self.user {
            Some(turn) => turn.text.trim().to_owned(),
            None => self.last_user_text.clone(),
        };
        self.core.emit(ProviderEvent::DelegationCreated { delegation_id: id.clone(), transcript: transcript.clone() });
        if self.delegation == Delegation::Svc {
            self.run_backend(&id, &transcript);
        }
    }

    /// `svc` delegation: ask the Responses API, with the transcript as context.
    fn run_backend(&mut self, delegation_id: &str, task: &str) {
        let mut input: Vec<Value> = self
            .core
            .history()
            .map(|turn| match turn.role {
                Role::User => json!({"role": "user", "content": turn.text}),
                Role::Assistant => json!({"role": "assistant", "content": turn.text}),
            })
            .collect();
        if !task.is_empty() && self.user.is_some() {
            input.push(json!({"role": "user", "content": task}));
        }
        let mut body = json!({"model": self.backend.model, "input": input, "stream": true});
        if let Knobs::ProviderBLive(knobs) = &self.setup.model.knobs {
            if let Some(model) = &knobs.responses_model {
                body["model"] = json!(model);
            }
            body["instructions"] =
                json!(knobs.responses_instructions.clone().unwrap_or_else(|| self.setup.instructions.clone()));
            if let Some(effort) = knobs.reasoning_effort {
                body["reasoning"] = json!({"effort": effort.as_str()});
            }
            if let Some(verbosity) = knobs.verbosity {
                body["text"] = json!({"verbosity": verbosity.as_str()});
            }
            if let Some(max) = knobs.max_output_tokens {
                body["max_output_tokens"] = json!(max);
            }
            if let Some(tier) = knobs.service_tier {
                body["service_tier"] = json!(tier.as_str());
            }
        } else {
            body["instructions"] = json!(self.setup.instructions);
        }
        self.seq += 1;
        let id = self.seq;
        self.jobs.insert(
            id,
            Job { delegation_id: delegation_id.to_owned(), answer: String::new(), status: None, usage: None },
        );
        self.core.transmit(Transmit::Http(HttpRequest {
            id,
            url: self.backend.url.clone(),
            headers: self.backend.headers.clone(),
            body: body.to_string(),
        }));
    }

    fn on_response_event(&mut self, event: &Value) {
        let delegation_id = event.get("delegation_id").and_then(Value::as_str).unwrap_or("").to_owned();
        let inner = event.get("event").unwrap_or(&Value::Null);
        match inner.get("type").and_then(Value::as_str).unwrap_or("") {
            "response.created" => self.backend_running += 1,
            "response.output_item.done" => {
                // Function calls only from completed items (the first item is often reasoning).
                let item = inner.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call")
                    && item.get("status").and_then(Value::as_str).is_none_or(|s| s == "completed")
                    && let Some(call_id) = item.get("call_id").and_then(Value::as_str)
                    && !self.open_calls.contains_key(call_id)
                {
                    let name = item.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
                    let raw = item.get("arguments").and_then(Value::as_str).unwrap_or("{}");
                    let arguments = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
                    self.open_calls.insert(call_id.to_owned(), delegation_id);
                    self.core.emit(ProviderEvent::ToolCall { call_id: call_id.to_owned(), name, arguments });
                }
            }
            "response.output_text.delta" => {
                let delta = inner.get("delta").and_then(Value::as_str).unwrap_or("").to_owned();
                self.core.emit(ProviderEvent::ModelText { text: delta, is_final: false, thought: false });
            }
            "response.completed" => {
                self.backend_running = self.backend_running.saturating_sub(1);
                if let Some(report) = inner.pointer("/response/usage").and_then(usage::from_gpt_live_responses) {
                    self.core.usage.record(&report);
                    self.core.emit_usage();
                }
                self.maybe_continue();
            }
            "response.failed" | "response.incomplete" => {
                self.backend_running = self.backend_running.saturating_sub(1);
                // Outputs for a failed response are refused: forget its calls (§4.6 step 4).
                let dropped: Vec<String> =
                    self.open_calls.iter().filter(|(_, d)| **d == delegation_id).map(|(c, _)| c.clone()).collect();
                for call_id in &dropped {
                    self.open_calls.remove(call_id);
                }
                if !dropped.is_empty() {
                    self.core.emit(ProviderEvent::ToolCallsCancelled { call_ids: dropped });
                }
                self.append(
                    AppendChannel::Thinking,
                    None,
                    "The background task failed; tell the caller it did not work.",
                );
                self.core.error(false, "backend_failed", "the delegated Responses run failed");
                self.maybe_continue();
            }
            _ => {}
        }
    }

    /// One `response.create` when every open call of the session has its output and no backend
    /// response runs (else `function_call_outputs_required` stalls the backend, §4.6 step 3).
    fn maybe_continue(&mut self) {
        if self.outputs_pending
            && self.open_calls.is_empty()
            && self.backend_running == 0
            && self.core.link == Link::Ready
        {
            self.outputs_pending = false;
            let event_id = self.next_id("response");
            self.core.send_json(&json!({"type": "response.create", "event_id": event_id}));
        }
    }

    fn tool_result(&mut self, call_id: &str, output: &Value, is_error: bool) {
        if self.open_calls.remove(call_id).is_none() {
            self.core.error(false, "unknown_tool_call", format!("no open tool call {call_id}; result dropped"));
            return;
        }
        let text = match (output, is_error) {
            (Value::String(text), false) => text.clone(),
            (value, false) => value.to_string(),
            (value, true) => json!({"error": value}).to_string(),
        };
        self.core.send_json(&json!({"type": "response.item.create",
            "item": {"type": "function_call_output", "call_id": call_id, "output": text}}));
        self.outputs_pending = true;
        self.maybe_continue();
    }

    fn close(&mut self) {
        if self.core.link == Link::Closed {
            return;
        }
        self.core.set_closing();
        let open: Vec<String> = self.open_calls.keys().cloned().collect();
        if self.core.link == Link::Ready {
            for call_id in &open {
                self.core.send_json(&json!({"type": "response.item.create", "item": {"type": "function_call_output",
                    "call_id": call_id, "output": "{\"error\":\"the session ended before the tool finished\"}"}}));
            }
            self.core.send_json(&json!({"type": "session.close"}));
        }
        self.open_calls.clear();
        if !open.is_empty() {
            self.core.emit(ProviderEvent::ToolCallsCancelled { call_ids: open });
        }
        self.core.shut("closed by svc");
    }

    // ---- rotation ----------------------------------------------------------------------------

    fn quiet(&self) -> bool {
        !self.speech.speaking
            && self.user.is_none()
            && self.open_calls.is_empty()
            && self.backend_running == 0
            && self.jobs.is_empty()
    }

    fn maybe_rotate(&mut self, now: Instant) {
        if self.core.link != Link::Ready || self.core.closing() {
            return;
        }
        let quiet = self.quiet();
        if self.rotation.due(now, &self.setup.limits, quiet) {
            self.rotate(None);
        }
    }

    /// A fresh session seeded with the transcript as `input` (lossy: pending delegations end).
    fn rotate(&mut self, seconds_remaining: Option<f64>) {
        self.prepare_rotation(seconds_remaining);
        if self.core.link == Link::Ready {
            self.core.send_json(&json!({"type": "session.close"}));
        }
        self.core.link = Link::Connecting;
        self.core.transmit(Transmit::Connect(self.connect.clone()));
    }

    /// Ends what belonged to the old upstream session and announces `reconnecting` once.
    fn prepare_rotation(&mut self, seconds_remaining: Option<f64>) {
        if self.rotation.begin() {
            self.core.emit(ProviderEvent::Reconnecting { seconds_remaining });
        }
        self.finish_user_turn();
        if self.speech.speaking {
            self.end_speech();
        }
        let lost: Vec<String> = self.open_calls.keys().cloned().collect();
        self.open_calls.clear();
        if !lost.is_empty() {
            self.core.emit(ProviderEvent::ToolCallsCancelled { call_ids: lost });
        }
        self.backend_running = 0;
        self.outputs_pending = false;
    }

    fn on_session_started(&mut self, now: Instant, event: &Value) {
        if self.core.link != Link::Configuring {
            return;
        }
        self.core.mark_ready();
        self.rotation.on_ready(now);
        if self.core.was_ready {
            self.core.usage.begin_upstream_session();
            self.core.emit(ProviderEvent::Reconnected { resumed: false });
        } else {
            self.core.was_ready = true;
            let id = event.pointer("/session/id").and_then(Value::as_str).map(str::to_owned);
            self.core.emit(ProviderEvent::Ready { upstream_session_id: id });
        }
        if self.muted {
            // A new session starts unmuted (§4.4).
            self.core.send_json(&json!({"type": "session.input_audio.mute"}));
        }
        for frame in self.core.take_held_frames(audio_frame) {
            self.core.send(frame);
        }
        if let Some(greeting) = self.core.greeting_once(&self.setup) {
            self.greet(&greeting);
        }
    }

    fn greet(&mut self, greeting: &str) {
        // commentary is the fastest near-verbatim path to speech (§4.4).
        self.append(AppendChannel::Commentary, None, &format!("Greet the caller now, saying: {greeting}"));
    }

    fn on_error(&mut self, event: &Value) {
        let error = event.get("error").unwrap_or(event);
        let code = error.get("code").and_then(Value::as_str).unwrap_or("").to_owned();
        let message = error.get("message").and_then(Value::as_str).unwrap_or("upstream error").to_owned();
        // Before `session.started` an error means the session never began.
        let fatal = FATAL_CODES.contains(&code.as_str()) || self.core.link != Link::Ready;
        let code = if code.is_empty() { "upstream_error".to_owned() } else { code };
        self.core.error(fatal, code, message);
    }
}

fn rms(pcm: &[i16]) -> f64 {
    if pcm.is_empty() {
        return 0.0;
    }
    let sum: f64 = pcm.iter().map(|s| (f64::from(*s) / 32768.0).powi(2)).sum();
    (sum / pcm.len() as f64).sqrt()
}

fn audio_frame(pcm: &[i16]) -> String {
    codec::audio_frame("{\"type\":\"session.input_audio.append\",\"audio\":\"", pcm, "\"}")
}

impl Codec for GptLiveCodec {
    fn handle_input(&mut self, now: Instant, input: ProviderInput) {
        self.core.ms(now);
        if self.core.link == Link::Closed {
            return;
        }
        match input {
            ProviderInput::NativeAudio(pcm) => self.send_audio(&pcm),
            ProviderInput::Text(text) => {
                // No user-text channel: ask for a reply as commentary (§4.4).
                let ms = self.core.ms(now);
                self.core.record_turn(ms, Role::User, &text);
                self.last_user_text = text.clone();
                self.append(
                    AppendChannel::Commentary,
                    None,
                    &format!("Reply to the caller now. The caller typed: {text}"),
                );
            }
            ProviderInput::Context(text) => self.append(AppendChannel::Thinking, None, &text),
            ProviderInput::Note { text, respond } => {
                let channel = if respond { AppendChannel::Commentary } else { AppendChannel::Thinking };
                self.append(channel, None, &text);
            }
            // Audio only; the model owns turn-taking.
            ProviderInput::Image { .. } | ProviderInput::ActivityStart | ProviderInput::ActivityEnd => {}
            ProviderInput::ToolResult { call_id, output, is_error, .. } => {
                self.tool_result(&call_id, &output, is_error)
            }
            ProviderInput::DelegationAppend { delegation_id, channel, content } => {
                self.append(channel, delegation_id.as_deref(), &content);
            }
            ProviderInput::BargeIn { played_ms } => self.barge_in(played_ms),
            ProviderInput::Greeting(text) => self.greet(&text),
            ProviderInput::Mute(muted) => {
                if muted != self.muted && self.core.link == Link::Ready {
                    let kind = if muted { "session.input_audio.mute" } else { "session.input_audio.unmute" };
                    self.core.send_json(&json!({"type": kind}));
                }
                self.muted = muted;
            }
            ProviderInput::Close => self.close(),
        }
        self.maybe_rotate(now);
    }

    fn handle_connected(&mut self, _now: Instant) {
        if self.core.link != Link::Connecting {
            return;
        }
        let history = self.history_pairs();
        let event_id = self.next_id("start");
        if !self.core.was_ready && fit_instructions(&self.setup.system_prompt()).1 {
            self.core.error(
                false,
                "instructions_truncated",
                format!(
                    "the live model takes about {INSTRUCTIONS_MAX_TOKENS} tokens of instructions; the rest was cut"
                ),
            );
        }
        let start = session_start(&self.setup, &history, &event_id);
        self.core.send_json(&start);
        self.core.link = Link::Configuring;
    }

    fn handle_connect_failed(&mut self, now: Instant, failure: ConnectFailure) {
        self.core.connect_failed(now, failure);
    }

    fn handle_upstream_message(&mut self, now: Instant, frame: &[u8]) {
        let Some(event) = self.core.parse_frame(now, frame) else { return };
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "session.started" => self.on_session_started(now, &event),
            "session.output_audio.delta" => match event.get("delta").and_then(Value::as_str).and_then(decode_pcm) {
                Some(pcm) => self.on_output_audio(now, pcm),
                None => self.core.error(false, "bad_audio", "undecodable audio delta"),
            },
            "session.output_transcript.delta" => {
                let delta = event.get("delta").and_then(Value::as_str).unwrap_or("").to_owned();
                if !self.speech.truncated && !delta.is_empty() {
                    self.speech.transcript.push_str(&delta);
                    self.core.emit(ProviderEvent::AssistantTranscript { text: delta, is_final: false });
                }
            }
            "session.input_transcript.delta" => self.on_input_transcript(now, &event),
            "session.delegation.created" => self.on_delegation_created(&event),
            "response.event" => self.on_response_event(&event),
            "session.usage.updated" => {
                if let Some(seconds) = event.pointer("/usage").and_then(usage::gpt_live_voice_seconds) {
                    self.core.usage.record_session_audio_seconds(seconds);
                }
            }
            "session.closed" => match event.get("reason").and_then(Value::as_str).unwrap_or("") {
                "close_requested" => self.core.shut("upstream session closed"),
                "content" => self.core.error(true, "content_policy", "the upstream ended the session (content)"),
                reason => {
                    let reason = reason.to_owned();
                    if reason == "expired" {
                        self.rotate(Some(0.0));
                    } else {
                        self.rotate(None);
                    }
                }
            },
            "error" => self.on_error(&event),
            kind if KNOWN_UNUSED_EVENTS.contains(&kind) => {}
            kind => self.core.note_unknown(kind),
        }
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
        if self.core.link == Link::Connecting {
            return; // The old socket of a rotation closing.
        }
        self.core.keep_unread_audio();
        self.prepare_rotation(None);
        self.core.schedule_retry(now, &format!("closed ({code:?}): {reason}"));
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.core.link == Link::Backoff && self.core.retry_at.is_some_and(|at| now >= at) {
            self.core.retry_at = None;
            self.core.link = Link::Connecting;
            self.core.transmit(Transmit::Connect(self.connect.clone()));
        }
        if let Some(turn) = &self.user
            && turn.last_delta_at.is_some_and(|at| now >= at + self.setup.limits.turn_gap)
        {
            self.finish_user_turn();
        }
        self.maybe_rotate(now);
    }

    fn handle_http(&mut self, now: Instant, id: u64, event: HttpEvent) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        match event {
            HttpEvent::Status(status) => job.status = Some(status),
            HttpEvent::Data(data) => {
                let Ok(value) = serde_json::from_str::<Value>(&data) else { return };
                match value.get("type").and_then(Value::as_str) {
                    Some("response.output_text.delta") => {
                        job.answer.push_str(value.get("delta").and_then(Value::as_str).unwrap_or(""));
                    }
                    Some("response.completed") => job.usage = value.pointer("/response/usage").cloned(),
                    // A non-streaming body: the whole response.
                    _ if value.get("output").is_some() && job.answer.is_empty() => {
                        if let Some(text) = value.pointer("/output/0/content/0/text").and_then(Value::as_str) {
                            job.answer = text.to_owned();
                        }
                        job.usage = value.get("usage").cloned();
                    }
                    _ => {}
                }
            }
            HttpEvent::Done | HttpEvent::Failed(_) => {
                let Some(job) = self.jobs.remove(&id) else { return };
                let ok = job.status.is_some_and(|s| (200..300).contains(&s)) && !job.answer.trim().is_empty();
                if let Some(report) = job.usage.as_ref().and_then(usage::from_gpt_live_responses) {
                    self.core.usage.record(&report);
                    self.core.emit_usage();
                }
                if ok {
                    self.append(AppendChannel::Commentary, Some(&job.delegation_id), job.answer.trim());
                } else {
                    let why = match &event {
                        HttpEvent::Failed(message) => message.clone(),
                        _ => format!("HTTP {}", job.status.unwrap_or(0)),
                    };
                    self.append(
                        AppendChannel::Commentary,
                        Some(&job.delegation_id),
                        "Sorry, I could not complete that request.",
                    );
                    self.core.error(false, "backend_failed", format!("svc delegation backend failed: {why}"));
                }
            }
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
        let turn_end = self.user.as_ref().and_then(|t| t.last_delta_at).map(|at| at + self.setup.limits.turn_gap);
        let other = match self.core.link {
            Link::Backoff => self.core.retry_at,
            // Quiet here is state alone (no quiet gap): every change of it re-checks.
            Link::Ready => self.rotation.deadline(&self.setup.limits, None),
            _ => None,
        };
        match (turn_end, other) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn resumption_handle(&self) -> Option<&str> {
        None
    }

    fn is_closed(&self) -> bool {
        self.core.is_closed()
    }
}
