//! [`SessionCore`]: one voice session as a plain state machine.
//!
//! The core sits between the room (participants, the user's audio, data messages, the tool-result
//! RPC) and the provider adapter (its [`ProviderEvent`]s), and decides everything the spec's
//! Events section describes: readiness, input binding, turn state and markers, transcripts of the
//! audio actually heard, tools answered exactly once, silence hooks, chunking, the duration cap,
//! usage and what is stored. It never does IO and never reads the clock: every `handle_*` takes
//! `now`, results come out of [`SessionCore::poll_output`], and [`SessionCore::poll_timeout`] says
//! when to call [`SessionCore::handle_timeout`]. The actor in [`crate::actor`] carries outputs out.
//! Tests drive it in virtual time.

pub mod envelope;
pub mod hooks;
pub mod inbound;
pub mod playback;
pub mod tools;
pub mod turn_gate;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use svc_domain::model::{Delegation, Knobs};
use svc_domain::session_config::STATE_MAX_BYTES;
use svc_domain::start::ResolvedSession;
use svc_domain::tools::{HookAction, STATE_TOOL_NAME, ServerTool, ToolSpec};
use svc_provider::api::{AppendChannel, ProviderError, ProviderEvent, ProviderInput, ResponseStatus};
use svc_wire::events::{
    ClientMessage, DelegationChannel, JobStatus, RejectedToolEntry, ServerEvent, Speaker, UsageCounters, chunk_message,
};
use svc_wire::rest::UsageTokens;

use self::envelope::Reassembler;
use self::hooks::{Firing, SilenceHooks};
use self::inbound::Dropped;
use self::playback::{FRAME, Playback};
use self::tools::{AnswerRefusal, CLIENT_TOOL_TIMEOUT, ToolAnswer, ToolLedger};
use self::turn_gate::{GateEvent, TurnGate};

/// Attribute LiveKit's UI components read the agent's state from.
pub const AGENT_STATE_ATTRIBUTE: &str = "lk.agent.state";
/// Attribute a late joiner reads readiness from.
pub const READY_ATTRIBUTE: &str = "svc.ready";
/// Past this size the `svc.ready` attribute degrades to `session_id` and `max_session_seconds`
/// (a catalog agent's tool list can be long; attributes travel in every participant update).
pub const READY_ATTRIBUTE_MAX_BYTES: usize = 4096;
/// A final transcript the provider has not sent this long after its response ended is made from
/// the fragments heard.
const FINAL_TRANSCRIPT_GRACE: Duration = Duration::from_millis(1500);
/// An `end_call` (tool or hook) waits this long for the goodbye to start before hanging up.
const GOODBYE_START_GRACE: Duration = Duration::from_secs(3);
/// And at most this long in all.
const GOODBYE_MAX_WAIT: Duration = Duration::from_secs(20);
/// A frame sent with `send-image` is fresh for vision tools this long.
const FRESH_FRAME: Duration = Duration::from_secs(10);
/// The agent shows `thinking` at most this long without a response.
const THINKING_MAX: Duration = Duration::from_secs(30);
/// Silence sent to a listener whose media just connected, before anything else (500 ms).
const PRIMING_FRAMES: usize = 25;
/// Delegations remembered for `delegation-append`.
const DELEGATIONS_REMEMBERED: usize = 64;

/// Timing policy of a session (defaults in [`Timing::default`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// A client tool unanswered this long is answered upstream as an error.
    pub tool_timeout: Duration,
    /// No participant joined this long after the start: the session ends (`no_participant`).
    pub join_timeout: Duration,
    /// The last participant dropped (not a deliberate leave): the session waits this long for
    /// a rejoin before it ends (`participant_left`).
    pub rejoin_grace: Duration,
    /// The provider did not become ready this long after the start: the session fails.
    pub provider_ready_timeout: Duration,
    /// `session-ending-soon` comes this long before the cap (or at half the cap if shorter).
    pub ending_soon_lead: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            tool_timeout: CLIENT_TOOL_TIMEOUT,
            join_timeout: Duration::from_secs(60),
            rejoin_grace: Duration::from_secs(10),
            provider_ready_timeout: Duration::from_secs(20),
            ending_soon_lead: Duration::from_secs(30),
        }
    }
}

/// What the core needs to run a session.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// The session id.
    pub session_id: String,
    /// The agent's participant identity (its own data never comes back to it).
    pub agent_identity: String,
    /// Wall-clock time of `now` at construction, in epoch microseconds (stored timestamps).
    pub started_at_us: i64,
    /// The resolved configuration.
    pub session: Arc<ResolvedSession>,
    /// Rate of the PCM given to [`SessionCore::handle_user_audio`].
    pub input_rate_hz: u32,
    /// Timing policy.
    pub timing: Timing,
}

/// Who is in the room, as the core needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Identity.
    pub identity: String,
    /// Another agent (never bound as input, does not keep the session alive).
    pub is_agent: bool,
    /// Media is connected: audio released now is heard.
    pub active: bool,
    /// Publishes an audio track.
    pub publishes_audio: bool,
}

/// Where a phone dial-out stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialStatus {
    /// The phone rings.
    Ringing,
    /// Answered; audio flows.
    Answered,
    /// Never answered (final).
    Failed,
    /// Over after an answer (final).
    Ended,
    /// A key was pressed on the phone.
    Dtmf,
}

impl DialStatus {
    /// The wire word (`dial-progress.status`).
    pub fn as_str(self) -> &'static str {
        match self {
            DialStatus::Ringing => "ringing",
            DialStatus::Answered => "answered",
            DialStatus::Failed => "failed",
            DialStatus::Ended => "ended",
            DialStatus::Dtmf => "dtmf",
        }
    }
}

/// One step of a phone dial-out, as the session reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct DialUpdate {
    /// The dial.
    pub dial_id: String,
    /// Where it stands.
    pub status: DialStatus,
    /// Why it failed or ended.
    pub reason: Option<String>,
    /// The SIP status of a failure.
    pub sip_status: Option<u16>,
    /// `phone` or `svc`, for an end.
    pub ended_by: Option<&'static str>,
    /// From the answer to the end, for an end.
    pub duration_seconds: Option<f64>,
    /// The key, for `Dtmf`.
    pub digit: Option<char>,
}

/// How the session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndStatus {
    /// Ended normally (`completed`).
    Completed,
    /// Ended by a failure (`error`).
    Error,
}

/// Usage numbers at the end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageTotals {
    /// Assistant turns with content.
    pub turn_count: i64,
    /// User talk time.
    pub user_speaking_ms: i64,
    /// Agent talk time (audio released).
    pub agent_speaking_ms: i64,
    /// Latest cumulative tokens, if the provider reported any.
    pub tokens: Option<UsageTokens>,
}

impl UsageTotals {
    /// Whether anything happened worth a usage record (spec: a session without turn or speech
    /// activity has usage `unavailable`).
    pub fn had_activity(&self) -> bool {
        self.turn_count > 0 || self.user_speaking_ms > 0 || self.agent_speaking_ms > 0
    }
}

/// The end of the session.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// `completed` or `error`.
    pub status: EndStatus,
    /// The `session-ended` reason.
    pub reason: String,
    /// Usage.
    pub usage: UsageTotals,
}

/// Something to store.
#[derive(Debug, Clone, PartialEq)]
pub enum Persist {
    /// A transcript turn (only when the transcript may be stored).
    Turn {
        /// When it began, epoch µs.
        ts_us: i64,
        /// `user` or `assistant`.
        role: &'static str,
        /// The text.
        text: String,
    },
    /// A timeline event.
    Timeline {
        /// When, epoch µs.
        ts_us: i64,
        /// Type slug.
        kind: &'static str,
        /// Details (never transcript content unless the transcript may be stored).
        data: Value,
    },
    /// The provider's current resumption handle.
    ResumptionHandle(Option<String>),
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Publish JSON on the reliable data channel, to everyone or one participant.
    Data {
        /// One message (already chunked when it was too long).
        json: String,
        /// One recipient, or everyone.
        to: Option<String>,
    },
    /// Merge these into the agent's attributes.
    Attributes(BTreeMap<String, String>),
    /// Send to the provider adapter.
    Provider(ProviderInput),
    /// Publish this 20 ms Opus frame now; `due` is its place on the media clock (RTP time).
    Audio {
        /// The frame.
        opus: Bytes,
        /// When it is due: consecutive frames are exactly 20 ms apart.
        due: Instant,
        /// Silence between responses: nothing to record.
        silence: bool,
    },
    /// Decode audio of this participant (and no other) for [`SessionCore::handle_user_audio`].
    BindInput(Option<String>),
    /// Store this.
    Persist(Persist),
    /// The session is over: store the end, leave and close the room. Nothing follows.
    Finished(Finish),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Running,
    Finished,
}

#[derive(Debug)]
struct PendingEnd {
    reason: &'static str,
    status: EndStatus,
    requested_at: Instant,
    /// The newest response when the end was asked for: the goodbye is a later one.
    seq_at_request: u64,
}

/// One session's state. See the module docs.
#[derive(Debug)]
pub struct SessionCore {
    cfg: CoreConfig,
    start: Instant,
    phase: Phase,
    outputs: VecDeque<Output>,
    // Provider.
    provider_ready: bool,
    // Room.
    peers: BTreeMap<String, Peer>,
    ever_joined: bool,
    alone_deadline: Option<Instant>,
    bound: Option<String>,
    bind_sticky: bool,
    muted: bool,
    // Turns.
    playback: Playback,
    user_speaking_since: Option<Instant>,
    user_turn_ended_at: Option<Instant>,
    thinking_since: Option<Instant>,
    agent_state: &'static str,
    pending_finals: Vec<(u64, Instant)>,
    gate: Option<TurnGate>,
    // Tools.
    tools: ToolLedger,
    client_tools: BTreeSet<String>,
    server_tools: BTreeSet<ServerTool>,
    delegations: VecDeque<String>,
    latest_image: Option<(Instant, String, Vec<u8>)>,
    /// The agent's session state, when it has one (`set_state`).
    state: Option<serde_json::Map<String, Value>>,
    // Hooks and the end.
    hooks: SilenceHooks,
    pending_end: Option<PendingEnd>,
    ending_soon_sent: bool,
    // Data channel.
    envelopes: Reassembler,
    next_envelope: u64,
    /// The session's phone dial-out: its id and whether its outcome is known.
    dial: Option<(String, bool)>,
    connect_timings_taken: bool,
    // Usage.
    turn_count: i64,
    user_speaking_ms: i64,
    tokens: Option<UsageTokens>,
}

impl SessionCore {
    /// A session starting at `now`: the agent shows `initializing` until the provider is ready.
    pub fn new(cfg: CoreConfig, now: Instant) -> SessionCore {
        let agent = &cfg.session.agent;
        let client_tools = agent
            .tools
            .iter()
            .filter_map(|tool| match tool {
                ToolSpec::Client(client) => Some(client.name.clone()),
                ToolSpec::Server(_) => None,
            })
            .collect();
        let server_tools = agent
            .tools
            .iter()
            .filter_map(|tool| match tool {
                ToolSpec::Server(kind) => Some(*kind),
                ToolSpec::Client(_) => None,
            })
            .collect();
        let gate = TurnGate::for_session(&cfg.session, cfg.input_rate_hz);
        let mut core = SessionCore {
            hooks: SilenceHooks::new(&agent.hooks),
            start: now,
            phase: Phase::Running,
            outputs: VecDeque::new(),
            provider_ready: false,
            peers: BTreeMap::new(),
            ever_joined: false,
            alone_deadline: None,
            bound: None,
            bind_sticky: false,
            muted: false,
            playback: Playback::default(),
            user_speaking_since: None,
            user_turn_ended_at: None,
            thinking_since: None,
            agent_state: "",
            pending_finals: Vec::new(),
            gate,
            tools: ToolLedger::default(),
            client_tools,
            server_tools,
            delegations: VecDeque::new(),
            latest_image: None,
            state: cfg.session.agent.state.clone(),
            pending_end: None,
            ending_soon_sent: false,
            envelopes: Reassembler::default(),
            next_envelope: 0,
            dial: None,
            connect_timings_taken: false,
            turn_count: 0,
            user_speaking_ms: 0,
            tokens: None,
            cfg,
        };
        let model = &core.cfg.session.model;
        let data = json!({
            "provider": model.alias.as_str(),
            "model": model.model_id,
            "agent": core.cfg.session.agent.name,
            "resumed_from": core.cfg.session.resume_session_id,
            "turn_detection": if core.gate.is_some() { "svc_vad" } else { "upstream" },
        });
        core.timeline(now, "agent.joined", data);
        core.update_agent_state(now);
        core
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.cfg.session_id
    }

    /// Whether the session is over.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// The next thing to do.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`SessionCore::handle_timeout`] is due next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.phase == Phase::Finished {
            return None;
        }
        let timing = &self.cfg.timing;
        let mut next: Option<Instant> = None;
        let mut consider = |at: Option<Instant>| {
            if let Some(at) = at {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        };
        consider(self.playback.poll_timeout());
        consider(self.tools.next_deadline());
        consider(self.hooks.poll_timeout());
        consider(self.envelopes.next_expiry());
        consider(self.alone_deadline);
        consider((!self.ever_joined).then_some(self.start + timing.join_timeout));
        consider((!self.provider_ready).then_some(self.start + timing.provider_ready_timeout));
        consider(self.pending_finals.iter().map(|(_, at)| *at).min());
        consider(self.pending_end.as_ref().map(|end| end.requested_at + GOODBYE_START_GRACE));
        consider(self.thinking_since.map(|since| since + THINKING_MAX));
        consider(self.latest_image.as_ref().map(|(at, _, _)| *at + FRESH_FRAME));
        if let Some(cap) = self.cap() {
            let (soon, end) = self.cap_times(cap);
            consider((!self.ending_soon_sent).then_some(soon));
            consider(Some(end));
        }
        next
    }

    // -----------------------------------------------------------------------------------------
    // Inputs

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.phase == Phase::Finished {
            return;
        }
        self.pump(now);
        for expired in self.tools.expire(now) {
            let message = format!("The client did not answer within {} s.", self.cfg.timing.tool_timeout.as_secs());
            self.provider(ProviderInput::ToolResult {
                call_id: expired.call_id.clone(),
                output: json!({"error": "timeout", "message": message}),
                is_error: true,
                scheduling: None,
            });
            let data = json!({"tool_call_id": expired.call_id, "name": expired.name, "request_id": expired.request_id});
            self.timeline(now, "tool.timeout", data);
        }
        for firing in self.hooks.fire_due(now) {
            self.fire_hook(now, firing);
            if self.phase == Phase::Finished {
                return;
            }
        }
        self.envelopes.expire(now);
        if self.latest_image.as_ref().is_some_and(|(at, _, _)| *at + FRESH_FRAME <= now) {
            self.latest_image = None;
        }
        let due_finals: Vec<u64> =
            self.pending_finals.iter().filter(|(_, at)| *at <= now).map(|(seq, _)| *seq).collect();
        for seq in due_finals {
            self.pending_finals.retain(|(s, _)| *s != seq);
            self.finish_response(now, seq, true);
        }
        if self.thinking_since.is_some_and(|since| since + THINKING_MAX <= now) {
            self.thinking_since = None;
        }
        let timing = self.cfg.timing;
        if !self.provider_ready && now >= self.start + timing.provider_ready_timeout {
            self.fatal(now, "upstream_disconnect", "The model did not become ready in time.");
            return;
        }
        if !self.ever_joined && now >= self.start + timing.join_timeout {
            self.finish(now, "no_participant", EndStatus::Completed);
            return;
        }
        if self.alone_deadline.is_some_and(|at| at <= now) {
            self.finish(now, "participant_left", EndStatus::Completed);
            return;
        }
        if let Some(cap) = self.cap() {
            let (soon, end) = self.cap_times(cap);
            if now >= end {
                self.finish(now, "max_session_duration", EndStatus::Completed);
                return;
            }
            if !self.ending_soon_sent && now >= soon {
                self.ending_soon_sent = true;
                let seconds_remaining = end.saturating_duration_since(now).as_secs_f64();
                self.emit(
                    ServerEvent::SessionEndingSoon { seconds_remaining, reason: "max_session_duration".into() },
                    None,
                );
                self.timeline(now, "session.ending_soon", json!({"seconds_remaining": seconds_remaining}));
            }
        }
        self.after(now);
    }

    /// A participant joined, or changed (media connected, a track published).
    pub fn handle_peer(&mut self, now: Instant, peer: Peer) {
        if self.phase == Phase::Finished || peer.identity == self.cfg.agent_identity || peer.is_agent {
            return;
        }
        let identity = peer.identity.clone();
        let new = !self.peers.contains_key(&identity);
        let publishes = peer.publishes_audio;
        let became_active = peer.active && !self.peers.get(&identity).is_some_and(|p| p.active);
        self.peers.insert(identity.clone(), peer);
        if became_active && !self.playback.responses.iter().any(|r| r.speaking) {
            // A new listener's jitter buffer settles on silence, not on the first words.
            self.playback.prime(PRIMING_FRAMES);
        }
        if new {
            self.ever_joined = true;
            self.alone_deadline = None;
            self.timeline(now, "participant.joined", json!({"identity": identity}));
            if self.provider_ready {
                let ready = self.ready_event();
                self.emit(ready, Some(&identity));
            }
        }
        // Before any `bind-input`, the input follows the first publisher; a sticky binding waits
        // for its participant to come back.
        let rebind = match &self.bound {
            None => true,
            Some(bound) => !self.bind_sticky && !self.peers.contains_key(bound),
        };
        if publishes && rebind {
            self.bind(now, Some(identity.clone()), false);
        }
        if new && self.provider_ready && self.peers.len() == 1 && self.turn_count == 0 && self.user_may_speak_first() {
            self.hooks.arm(now);
        }
        self.playback.audience = self.peers.values().any(|p| p.active);
        self.after(now);
    }

    /// A participant left; `deliberate` when it left on its own rather than dropped.
    pub fn handle_peer_left(&mut self, now: Instant, identity: &str, deliberate: bool) {
        if self.phase == Phase::Finished || self.peers.remove(identity).is_none() {
            return;
        }
        self.timeline(now, "participant.left", json!({"identity": identity, "deliberate": deliberate}));
        if self.bound.as_deref() == Some(identity) && !self.bind_sticky {
            let next = self.peers.values().find(|p| p.publishes_audio).map(|p| p.identity.clone());
            self.bind(now, next, false);
        }
        self.playback.audience = self.peers.values().any(|p| p.active);
        if self.peers.is_empty() {
            if deliberate {
                self.finish(now, "participant_left", EndStatus::Completed);
                return;
            }
            self.alone_deadline = Some(now + self.cfg.timing.rejoin_grace);
        }
        self.after(now);
    }

    /// PCM of the bound participant, at the configured input rate.
    pub fn handle_user_audio(&mut self, now: Instant, pcm: Vec<i16>) {
        if self.phase == Phase::Finished || self.muted {
            return;
        }
        let Some(gate) = self.gate.as_mut() else {
            self.provider(ProviderInput::NativeAudio(pcm));
            return;
        };
        let events = gate.push(&pcm);
        for event in events {
            self.gate_event(now, event);
        }
        self.after(now);
    }

    /// One data packet from `from`.
    pub fn handle_data(&mut self, now: Instant, from: &str, payload: &[u8]) -> Result<(), Dropped> {
        if self.phase == Phase::Finished {
            return Ok(());
        }
        let message = inbound::parse(payload)?;
        let result = match message {
            ClientMessage::EnvelopeChunk(chunk) => match self.envelopes.push(now, from, chunk) {
                Ok(None) => Ok(()),
                Ok(Some(whole)) => match inbound::parse(whole.as_bytes()) {
                    Ok(ClientMessage::EnvelopeChunk(_)) => Err(Dropped::OutOfBounds("a chunk inside an envelope")),
                    Ok(inner) => {
                        self.handle_message(now, from, inner);
                        Ok(())
                    }
                    Err(dropped) => Err(dropped),
                },
                Err(refusal) => Err(Dropped::OutOfBounds(refusal.as_str())),
            },
            message => {
                self.handle_message(now, from, message);
                Ok(())
            }
        };
        self.after(now);
        result
    }

    /// The `svc.tool_result` RPC from `caller`; the answer is the RPC response.
    pub fn handle_tool_result(&mut self, now: Instant, caller: &str, payload: &str) -> Result<String, AnswerRefusal> {
        if self.phase == Phase::Finished {
            return Err(AnswerRefusal::SessionEnded);
        }
        let answer = ToolAnswer::parse(payload)?;
        let (call_id, name) = self.tools.answer(&answer.request_id, &answer.tool_call_id)?;
        let (output, is_error) = match (answer.result, answer.error) {
            (_, Some(error)) => (json!({"error": error}), true),
            (Some(result), None) => (result, false),
            (None, None) => (Value::Null, false),
        };
        let mut data = json!({"tool_call_id": call_id, "name": name, "ok": !is_error, "from": caller});
        if self.cfg.session.store.transcript {
            data["output"] = output.clone();
        }
        self.timeline(now, "tool.result", data);
        self.provider(ProviderInput::ToolResult { call_id, output, is_error, scheduling: None });
        self.after(now);
        Ok(r#"{"accepted":true}"#.to_owned())
    }

    /// One event of the provider adapter.
    pub fn handle_provider_event(&mut self, now: Instant, event: ProviderEvent) {
        if self.phase == Phase::Finished {
            return;
        }
        match event {
            ProviderEvent::Ready { upstream_session_id } => self.on_provider_ready(now, upstream_session_id),
            ProviderEvent::UserSpeechStarted => self.user_started(now),
            ProviderEvent::UserSpeechStopped => self.user_stopped(now),
            ProviderEvent::UserTranscript { text, is_final, speech_started_ms } => {
                self.on_user_transcript(now, text, is_final, speech_started_ms)
            }
            ProviderEvent::AssistantAudio { pcm, sample_rate } => self.on_assistant_audio(now, &pcm, sample_rate),
            ProviderEvent::AssistantTranscript { text, is_final } => self.on_assistant_transcript(now, text, is_final),
            ProviderEvent::AssistantTruncated { heard } => self.on_truncated(now, heard),
            ProviderEvent::ModelText { text, is_final, thought } => self.on_model_text(now, text, is_final, thought),
            ProviderEvent::ResponseStarted => self.on_response_started(now),
            ProviderEvent::ResponseDone { status } => self.on_response_done(now, &status),
            ProviderEvent::Interrupted => self.barge_in(now, "provider"),
            ProviderEvent::ToolCall { call_id, name, arguments } => self.on_tool_call(now, call_id, name, arguments),
            ProviderEvent::ToolCallsCancelled { call_ids } => {
                let requests = self.tools.cancel(&call_ids);
                self.timeline(now, "tool.cancelled", json!({"tool_call_ids": call_ids, "request_ids": requests}));
            }
            ProviderEvent::DelegationCreated { delegation_id, transcript } => {
                if self.delegations.len() >= DELEGATIONS_REMEMBERED {
                    self.delegations.pop_front();
                }
                self.delegations.push_back(delegation_id.clone());
                self.timeline(now, "delegation.created", json!({"delegation_id": delegation_id}));
                self.emit(ServerEvent::DelegationCreated { delegation_id, transcript }, None);
            }
            ProviderEvent::Usage(tokens) => {
                self.emit(ServerEvent::Usage(counters(&tokens)), None);
                self.tokens = Some(tokens);
            }
            ProviderEvent::Reconnecting { seconds_remaining } => {
                self.timeline(now, "provider.reconnecting", json!({"seconds_remaining": seconds_remaining}));
                self.emit(ServerEvent::Reconnecting { seconds_remaining }, None);
            }
            ProviderEvent::Reconnected { resumed } => {
                self.timeline(now, "provider.reconnected", json!({"resumed": resumed}));
                self.emit_raw(json!({"type": "svc.reconnected", "resumed": resumed}).to_string(), None);
            }
            ProviderEvent::ResumptionHandle(handle) => {
                self.outputs.push_back(Output::Persist(Persist::ResumptionHandle(handle)))
            }
            ProviderEvent::Error(error) => self.on_provider_error(now, error),
            ProviderEvent::Closed { reason } => {
                self.fatal(now, "upstream_disconnect", &format!("The model session closed: {reason}"));
            }
        }
        self.after(now);
    }

    /// The agent is no longer in the room (the room closed, or it was removed).
    pub fn handle_room_closed(&mut self, now: Instant) {
        self.finish(now, "room_closed", EndStatus::Completed);
    }

    /// The server is shutting down.
    pub fn handle_shutdown(&mut self, now: Instant) {
        self.finish(now, "server_shutdown", EndStatus::Completed);
    }

    /// The server ends the session for `reason` (a slug, sent in `session-ended`): the stored
    /// session is being deleted, for example.
    pub fn handle_end_request(&mut self, now: Instant, reason: &str) {
        self.finish(now, reason, EndStatus::Completed);
    }

    /// A phone dial-out was placed into this session's room (the call rings).
    pub fn handle_dial_placed(&mut self, now: Instant, dial_id: &str, phone_number: &str, caller_number: Option<&str>) {
        if self.phase == Phase::Finished {
            return;
        }
        self.dial = Some((dial_id.to_owned(), false));
        self.timeline(
            now,
            "dial.placed",
            json!({"dial_id": dial_id, "phone_number": phone_number, "caller_number": caller_number}),
        );
    }

    /// What became of the session's phone dial-out: a `dial-progress` event for the clients and
    /// a timeline entry. The phone's participant joins and leaves the room like any user, so
    /// input binding and the session's end follow the usual rules.
    ///
    /// After the session's end the update still reaches the timeline (the call usually ends
    /// with the session: the phone's hangup is what ended it, or the closing room hangs it up),
    /// but no client hears it any more.
    pub fn handle_dial_update(&mut self, now: Instant, update: DialUpdate) {
        let Some((_, over)) = self.dial.as_mut().filter(|(dial_id, _)| *dial_id == update.dial_id) else {
            return;
        };
        if *over {
            return;
        }
        *over = matches!(update.status, DialStatus::Failed | DialStatus::Ended);
        let kind = match update.status {
            DialStatus::Ringing => "dial.ringing",
            DialStatus::Answered => "dial.answered",
            DialStatus::Failed => "dial.failed",
            DialStatus::Ended => "dial.ended",
            DialStatus::Dtmf => "dial.dtmf",
        };
        let event = ServerEvent::DialProgress {
            dial_id: update.dial_id,
            status: update.status.as_str().to_owned(),
            reason: update.reason,
            sip_status: update.sip_status,
            ended_by: update.ended_by.map(str::to_owned),
            duration_seconds: update.duration_seconds,
            digit: update.digit.map(String::from),
        };
        let mut data = serde_json::to_value(&event).unwrap_or_default();
        if let Some(fields) = data.as_object_mut() {
            fields.remove("type");
        }
        self.timeline(now, kind, data);
        if self.phase != Phase::Finished {
            self.emit(event, None);
        }
    }

    /// Whether a dial-out was placed and its outcome is not known yet.
    pub fn dial_in_progress(&self) -> bool {
        self.dial.as_ref().is_some_and(|(_, over)| !over)
    }

    // -----------------------------------------------------------------------------------------
    // Client messages

    fn handle_message(&mut self, now: Instant, from: &str, message: ClientMessage) {
        match message {
            ClientMessage::Mute { muted } => {
                if muted != self.muted {
                    self.muted = muted;
                    self.provider(ProviderInput::Mute(muted));
                    if muted && let Some(gate) = self.gate.as_mut() {
                        let events = gate.force_end();
                        for event in events {
                            self.gate_event(now, event);
                        }
                    }
                    self.timeline(now, "input.mute", json!({"muted": muted, "from": from}));
                }
            }
            ClientMessage::SendText { content } => {
                self.barge_in(now, "send-text");
                self.hooks.user_spoke();
                self.emit(ServerEvent::Transcript { role: Speaker::User, text: content.clone(), is_final: true }, None);
                self.emit(ServerEvent::TurnComplete { role: Speaker::User }, None);
                self.store_turn(now, self.ts_us(now), "user", &content);
                self.user_turn_ended_at = Some(now);
                self.thinking_since = Some(now);
                self.provider(ProviderInput::Text(content));
            }
            ClientMessage::SendContext { content } => self.provider(ProviderInput::Context(content)),
            ClientMessage::SendImage { mime_type, data, stream_id } => {
                let Some(bytes) = inbound::decode_image(&data) else {
                    tracing::debug!(session.id = %self.cfg.session_id, "send-image data is not base64; dropped");
                    return;
                };
                if self.server_tools.contains(&ServerTool::ExamineImage) {
                    self.latest_image = Some((now, mime_type.clone(), bytes.clone()));
                }
                self.timeline(now, "input.image", json!({"stream_id": stream_id, "bytes": bytes.len()}));
                self.provider(ProviderInput::Image { mime: mime_type, data: bytes });
            }
            ClientMessage::ActivityEnd => match self.gate.as_mut() {
                Some(gate) => {
                    let events = gate.force_end();
                    for event in events {
                        self.gate_event(now, event);
                    }
                }
                None => self.provider(ProviderInput::ActivityEnd),
            },
            ClientMessage::BindInput => self.bind(now, Some(from.to_owned()), true),
            ClientMessage::ToolJobResult { job_id, tool_name, status, result, summary, error } => {
                if !self.client_tools.contains(&tool_name) {
                    tracing::debug!(session.id = %self.cfg.session_id, "tool_job_result for an undeclared tool; dropped");
                    return;
                }
                if !self.tools.first_job_result(&job_id) {
                    return;
                }
                let outcome = match status {
                    JobStatus::Completed => "completed",
                    JobStatus::Failed => "failed",
                };
                let detail = match (status, &summary, &error, &result) {
                    (JobStatus::Failed, _, Some(error), _) => error.clone(),
                    (_, Some(summary), _, _) => summary.clone(),
                    (_, _, _, Some(result)) => result.to_string(),
                    _ => String::new(),
                };
                let text = format!(
                    "The background job {job_id} of the tool {tool_name} has {outcome}. {detail}\n\
                     Tell the user about it when it fits the conversation."
                );
                let mut data = json!({"job_id": job_id, "name": tool_name, "status": outcome});
                if self.cfg.session.store.transcript {
                    data["detail"] = json!(detail);
                }
                self.timeline(now, "tool.job_result", data);
                self.provider(ProviderInput::Note { text, respond: true });
            }
            ClientMessage::DelegationAppend { channel, content, delegation_id } => {
                let delegating =
                    matches!(self.cfg.session.model.delegation, Some(Delegation::Client | Delegation::Svc));
                let known = delegation_id.as_ref().is_none_or(|id| self.delegations.contains(id));
                if !delegating || !known {
                    tracing::debug!(session.id = %self.cfg.session_id, delegating, known, "delegation-append dropped");
                    return;
                }
                let channel = match channel {
                    DelegationChannel::Thinking => AppendChannel::Thinking,
                    DelegationChannel::Commentary => AppendChannel::Commentary,
                    DelegationChannel::Instructions => AppendChannel::Instructions,
                };
                self.provider(ProviderInput::DelegationAppend { delegation_id, channel, content });
            }
            ClientMessage::ConnectTimings { mic_ms, ready_ms, request_ms, room_ms, server } => {
                if !self.connect_timings_taken {
                    self.connect_timings_taken = true;
                    let data = json!({"mic_ms": mic_ms, "ready_ms": ready_ms, "request_ms": request_ms,
                        "room_ms": room_ms, "server": server, "from": from});
                    self.timeline(now, "client.connect_timings", data);
                }
            }
            ClientMessage::End => self.finish(now, "client_ended", EndStatus::Completed),
            ClientMessage::Ping => self.emit(ServerEvent::Pong, Some(from)),
            ClientMessage::EnvelopeChunk(_) => {}
        }
    }

    fn bind(&mut self, now: Instant, identity: Option<String>, sticky: bool) {
        self.bind_sticky |= sticky;
        if self.bound == identity {
            return;
        }
        self.bound = identity.clone();
        if let Some(gate) = self.gate.as_mut() {
            let events = gate.force_end();
            for event in events {
                self.gate_event(now, event);
            }
        }
        self.timeline(now, "input.bound", json!({"identity": identity, "sticky": sticky}));
        self.outputs.push_back(Output::BindInput(identity));
    }

    // -----------------------------------------------------------------------------------------
    // Provider events

    fn on_provider_ready(&mut self, now: Instant, upstream_session_id: Option<String>) {
        if self.provider_ready {
            return;
        }
        self.provider_ready = true;
        self.timeline(now, "provider.ready", json!({"upstream_session_id": upstream_session_id}));
        let ready = self.ready_event();
        let json = ready_json(&ready);
        let attribute = if json.len() <= READY_ATTRIBUTE_MAX_BYTES {
            json
        } else {
            json!({"type": "ready", "session_id": self.cfg.session_id,
                "max_session_seconds": self.cfg.session.max_session_seconds})
            .to_string()
        };
        self.outputs.push_back(Output::Attributes(BTreeMap::from([(READY_ATTRIBUTE.to_owned(), attribute)])));
        self.emit(ready, None);
        if !self.peers.is_empty() && self.user_may_speak_first() {
            self.hooks.arm(now);
        }
    }

    /// Without a greeting (or on resume, which never greets) the user is expected to speak
    /// first, so the silence clock runs from when both sides are there.
    fn user_may_speak_first(&self) -> bool {
        self.cfg.session.agent.greeting.is_none() || self.cfg.session.resume_session_id.is_some()
    }

    fn ready_event(&self) -> ServerEvent {
        let session = &self.cfg.session;
        ServerEvent::Ready {
            session_id: self.cfg.session_id.clone(),
            agent: session.ready_agent(),
            rejected_tools: session
                .rejected_tools
                .iter()
                .map(|tool| RejectedToolEntry { name: tool.name.clone(), reason: tool.reason.clone() })
                .collect(),
            max_session_seconds: session.max_session_seconds,
        }
    }

    fn user_started(&mut self, now: Instant) {
        if self.user_speaking_since.is_none() {
            self.user_speaking_since = Some(now);
        }
        self.hooks.user_spoke();
        self.thinking_since = None;
        self.emit(ServerEvent::UserStartedSpeaking, None);
    }

    fn user_stopped(&mut self, now: Instant) {
        if let Some(since) = self.user_speaking_since.take() {
            self.user_speaking_ms += millis(now.saturating_duration_since(since));
        }
        self.user_turn_ended_at = Some(now);
        self.thinking_since = Some(now);
        self.emit(ServerEvent::UserStoppedSpeaking, None);
    }

    fn on_user_transcript(&mut self, now: Instant, text: String, is_final: bool, speech_started_ms: u64) {
        if is_final {
            if text.trim().is_empty() {
                return;
            }
            self.emit(ServerEvent::Transcript { role: Speaker::User, text: text.clone(), is_final: true }, None);
            self.emit(ServerEvent::TurnComplete { role: Speaker::User }, None);
            let ts = self.cfg.started_at_us + i64::try_from(speech_started_ms * 1000).unwrap_or(i64::MAX / 2);
            self.store_turn(now, ts, "user", &text);
            if let Some(gate) = self.gate.as_mut() {
                gate.set_transcript_hint(&text);
            }
        } else if !text.is_empty() {
            if let Some(gate) = self.gate.as_mut() {
                gate.append_transcript_hint(&text);
            }
            self.emit(ServerEvent::Transcript { role: Speaker::User, text, is_final: false }, None);
        }
    }

    fn on_response_started(&mut self, now: Instant) {
        if let Some(open) = self.playback.open_response() {
            // A response that never said it ended is over once the next one starts.
            open.done = true;
            let seq = open.seq;
            self.maybe_finish(now, seq);
        }
        self.playback.start_response();
        self.hooks.disarm();
        if self.thinking_since.is_none() {
            self.thinking_since = Some(now);
        }
        self.emit(ServerEvent::BotLlmStarted, None);
    }

    fn on_response_done(&mut self, now: Instant, status: &ResponseStatus) {
        self.emit(ServerEvent::BotLlmStopped, None);
        let Some(seq) = self.playback.responses.iter().rev().find(|r| !r.done).map(|r| r.seq) else { return };
        self.playback.flush_remainder();
        if let Some(response) = self.playback.response(seq) {
            response.done = true;
        }
        if *status == ResponseStatus::Failed {
            self.emit(
                ServerEvent::Error {
                    code: "internal_error".into(),
                    message: "The model's response failed.".into(),
                    fatal: false,
                },
                None,
            );
        }
        self.maybe_finish(now, seq);
    }

    fn on_assistant_audio(&mut self, now: Instant, pcm: &[i16], rate_hz: u32) {
        if !self.cfg.session.agent.audio.output {
            return;
        }
        let newest = self.playback.responses.back();
        let cut = newest.is_some_and(|r| r.cut && !r.done);
        if cut {
            // Audio of a response the user interrupted: never heard.
            return;
        }
        if newest.is_none_or(|r| r.done) {
            // Audio without a response to belong to: it starts one.
            self.on_response_started(now);
        }
        if !self.playback.push_pcm(pcm, rate_hz) {
            tracing::warn!(session.id = %self.cfg.session_id, rate_hz, "provider audio at a rate Opus cannot encode; dropped");
        }
        self.pump(now);
    }

    fn on_assistant_transcript(&mut self, now: Instant, text: String, is_final: bool) {
        if !is_final {
            if text.is_empty() {
                return;
            }
            if self.playback.push_fragment(text.clone()).is_none() {
                // No response to pace it by: it is heard as it comes.
                self.emit(ServerEvent::Transcript { role: Speaker::Assistant, text, is_final: false }, None);
            }
            self.pump(now);
            return;
        }
        let target = self.playback.responses.iter().rev().find(|r| !r.finished).map(|r| r.seq);
        match target {
            Some(seq) => {
                if let Some(response) = self.playback.response(seq) {
                    response.final_text = Some(text);
                }
                self.maybe_finish(now, seq);
            }
            // A final with no response to pace it by (an adapter that sent no response events).
            None if !text.trim().is_empty() => {
                self.emit(
                    ServerEvent::Transcript { role: Speaker::Assistant, text: text.clone(), is_final: true },
                    None,
                );
                self.emit(ServerEvent::TurnComplete { role: Speaker::Assistant }, None);
                self.store_turn(now, self.ts_us(now), "assistant", &text);
                self.turn_count += 1;
            }
            None => {}
        }
    }

    fn on_truncated(&mut self, now: Instant, heard: String) {
        // The cut response waiting for its final, else the newest unfinished one.
        let target = self
            .pending_finals
            .first()
            .map(|(seq, _)| *seq)
            .or_else(|| self.playback.responses.iter().rev().find(|r| !r.finished).map(|r| r.seq));
        if let Some(seq) = target
            && let Some(response) = self.playback.response(seq)
        {
            response.final_text = Some(heard);
            self.maybe_finish(now, seq);
        }
    }

    fn on_model_text(&mut self, now: Instant, text: String, is_final: bool, thought: bool) {
        let text_only = !self.cfg.session.agent.audio.output;
        if !text_only || thought {
            if !text.is_empty() || is_final {
                self.emit(ServerEvent::ModelText { text, is_final: is_final && !thought }, None);
            }
            return;
        }
        // Text-only: model text is the response.
        let seq = match self.playback.responses.iter().rev().find(|r| !r.finished && !r.cut) {
            Some(response) => response.seq,
            None => {
                self.on_response_started(now);
                self.playback.responses.back().map_or(0, |r| r.seq)
            }
        };
        if let Some(response) = self.playback.response(seq) {
            response.had_text = true;
            if is_final {
                response.final_text = Some(text.clone());
            }
        }
        self.emit(ServerEvent::ModelText { text, is_final }, None);
        if is_final {
            self.maybe_finish(now, seq);
        }
    }

    fn on_provider_error(&mut self, now: Instant, error: ProviderError) {
        if error.fatal {
            self.timeline(now, "provider.error", json!({"code": error.code, "message": error.message, "fatal": true}));
            self.fatal(now, "upstream_disconnect", &error.message);
        } else {
            self.timeline(now, "provider.error", json!({"code": error.code, "message": error.message, "fatal": false}));
            self.emit(ServerEvent::Error { code: "internal_error".into(), message: error.message, fatal: false }, None);
        }
    }

    // -----------------------------------------------------------------------------------------
    // svc_vad

    fn gate_event(&mut self, now: Instant, event: GateEvent) {
        match event {
            GateEvent::SpeechStarted { preroll } => {
                // The user talks over the agent: it stops at once, without waiting for the model.
                self.barge_in(now, "svc_vad");
                self.provider(ProviderInput::ActivityStart);
                if !preroll.is_empty() {
                    self.provider(ProviderInput::NativeAudio(preroll));
                }
            }
            GateEvent::Audio(pcm) => self.provider(ProviderInput::NativeAudio(pcm)),
            GateEvent::SpeechEnded => self.provider(ProviderInput::ActivityEnd),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Playback, turns and markers

    /// Releases every frame that is due.
    fn pump(&mut self, now: Instant) {
        while let Some(released) = self.playback.release(now) {
            self.outputs.push_back(Output::Audio { opus: released.opus, due: released.due, silence: released.silence });
            if released.first {
                if let Some(response) = self.playback.response(released.seq) {
                    response.speaking = true;
                }
                self.thinking_since = None;
                self.hooks.disarm();
                self.emit(ServerEvent::BotTtsStarted, None);
                self.emit(ServerEvent::BotStartedSpeaking, None);
                if let Some(ended) = self.user_turn_ended_at.take() {
                    let latency_ms = millis(now.saturating_duration_since(ended));
                    self.timeline(now, "turn.latency", json!({"response_ms": latency_ms}));
                }
            }
            for fragment in released.fragments {
                self.emit(ServerEvent::Transcript { role: Speaker::Assistant, text: fragment, is_final: false }, None);
            }
            let seq = released.seq;
            self.maybe_finish(now, seq);
        }
    }

    /// Finishes a response whose audio has all been played and whose generation is done.
    fn maybe_finish(&mut self, now: Instant, seq: u64) {
        let pending = self.playback.pending_of(seq);
        let Some(response) = self.playback.response(seq) else { return };
        if response.finished || (!response.done && !response.cut) || (pending && !response.cut) {
            return;
        }
        if response.final_text.is_none()
            && (response.had_audio() || response.had_text || !response.fragments.is_empty())
        {
            // The final transcript may still be on its way.
            if !self.pending_finals.iter().any(|(s, _)| *s == seq) {
                self.pending_finals.push((seq, now + FINAL_TRANSCRIPT_GRACE));
            }
            self.stop_speaking(seq);
            return;
        }
        self.finish_response(now, seq, false);
    }

    fn stop_speaking(&mut self, seq: u64) {
        if let Some(response) = self.playback.response(seq)
            && response.speaking
        {
            response.speaking = false;
            self.emit(ServerEvent::BotTtsStopped, None);
            self.emit(ServerEvent::BotStoppedSpeaking, None);
        }
    }

    /// Ends a response: stop markers, the final transcript and `turn-complete`. With `forced`,
    /// the final is what was heard because the provider sent none in time.
    fn finish_response(&mut self, now: Instant, seq: u64, forced: bool) {
        self.stop_speaking(seq);
        self.pending_finals.retain(|(s, _)| *s != seq);
        let text_only = !self.cfg.session.agent.audio.output;
        let Some(response) = self.playback.response(seq) else { return };
        if response.finished {
            return;
        }
        response.finished = true;
        let heard_all = !response.cut;
        let text = match (&response.final_text, forced) {
            (Some(text), false) => Some(text.clone()),
            _ => {
                let mut heard = std::mem::take(&mut response.released_text);
                if heard_all {
                    for (_, fragment) in response.fragments.drain(..) {
                        heard.push_str(&fragment);
                    }
                }
                let heard = heard.trim();
                (!heard.is_empty()).then(|| heard.to_owned())
            }
        };
        let had_content = response.had_audio() || response.had_text || text.is_some();
        if !had_content {
            self.playback.prune();
            return;
        }
        let text = text.unwrap_or_default();
        if !text_only {
            self.emit(ServerEvent::Transcript { role: Speaker::Assistant, text: text.clone(), is_final: true }, None);
        }
        self.emit(ServerEvent::TurnComplete { role: Speaker::Assistant }, None);
        if !text.trim().is_empty() {
            self.store_turn(now, self.ts_us(now), "assistant", text.trim());
        }
        self.turn_count += 1;
        self.thinking_since = None;
        self.playback.prune();
        if self.playback.queued() == 0 {
            self.hooks.arm(now);
        }
    }

    /// The user talks over the agent: drop what was not played, tell the provider how much was.
    fn barge_in(&mut self, now: Instant, cause: &'static str) {
        let target = self
            .playback
            .responses
            .iter()
            .find(|r| !r.finished && !r.cut && (r.released > 0 || r.enqueued > 0))
            .map(|r| (r.seq, r.played_ms(), r.released > 0));
        let Some((seq, played_ms, audible)) = target else { return };
        let dropped = self.playback.clear();
        self.stop_speaking(seq);
        self.timeline(now, "turn.barge_in", json!({"played_ms": played_ms, "dropped_frames": dropped, "cause": cause}));
        // Responses queued behind it were never heard: they end without a turn.
        let unheard: Vec<u64> =
            self.playback.responses.iter().filter(|r| !r.finished && r.seq != seq).map(|r| r.seq).collect();
        for other in unheard {
            if let Some(response) = self.playback.response(other) {
                response.finished = true;
            }
        }
        if audible {
            self.provider(ProviderInput::BargeIn { played_ms });
            // The adapter answers with the heard text (a final or a truncation); until then, or
            // if it does not, the fragments released so far are the final.
            if !self.pending_finals.iter().any(|(s, _)| *s == seq) {
                self.pending_finals.insert(0, (seq, now + FINAL_TRANSCRIPT_GRACE));
            }
            if let Some(response) = self.playback.response(seq) {
                response.final_text = None;
            }
        } else {
            self.provider(ProviderInput::BargeIn { played_ms: 0 });
            if let Some(response) = self.playback.response(seq) {
                response.finished = true;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Tools

    fn on_tool_call(&mut self, now: Instant, call_id: String, name: String, arguments: Value) {
        if self.tools.seen(&call_id) {
            return;
        }
        if name == STATE_TOOL_NAME && self.state.is_some() {
            self.write_state(now, call_id, &arguments);
            return;
        }
        if self.client_tools.contains(&name) {
            let request_id = self.tools.invoke(now, &call_id, &name, self.cfg.timing.tool_timeout);
            let origin = match (&self.cfg.session.model.knobs, self.cfg.session.model.delegation) {
                (Knobs::ProviderBLive(_), Some(Delegation::Responses)) => "server",
                _ => "realtime",
            };
            let mut data = json!({"tool_call_id": call_id, "name": name, "request_id": request_id});
            if self.cfg.session.store.transcript {
                data["args"] = arguments.clone();
            }
            self.timeline(now, "tool.invocation", data);
            let args = if arguments.is_object() { arguments } else { json!({"_raw": arguments}) };
            self.emit(
                ServerEvent::ToolInvocation {
                    request_id,
                    tool_call_id: call_id,
                    name,
                    args,
                    origin: origin.to_owned(),
                    executable: true,
                },
                None,
            );
            return;
        }
        match ServerTool::from_wire(&name).filter(|tool| self.server_tools.contains(tool)) {
            Some(tool) => self.run_server_tool(now, call_id, tool, arguments),
            None => {
                self.timeline(now, "tool.unknown", json!({"tool_call_id": call_id, "name": name}));
                self.provider(ProviderInput::ToolResult {
                    call_id,
                    output: json!({"error": "unknown_tool", "message": "This session has no tool by that name."}),
                    is_error: true,
                    scheduling: None,
                });
            }
        }
    }

    fn run_server_tool(&mut self, now: Instant, call_id: String, tool: ServerTool, arguments: Value) {
        let name = tool.as_str().to_owned();
        self.emit(ServerEvent::ToolCall { tool_call_id: call_id.clone(), name: name.clone() }, None);
        self.emit(ServerEvent::ToolDispatchStarted { tool_call_id: call_id.clone(), name: name.clone() }, None);
        let (ok, summary, output) = match tool {
            ServerTool::EndCall => {
                self.end_after_goodbye(now, "end_call");
                (
                    true,
                    "ending the call after the goodbye".to_owned(),
                    json!({"ok": true, "message": "The call ends after you finish speaking. Say a short goodbye."}),
                )
            }
            ServerTool::SpeakerLog => {
                let mut data = json!({"tool_call_id": call_id});
                if self.cfg.session.store.transcript {
                    data["entry"] = arguments;
                }
                self.timeline(now, "tool.speaker_log", data);
                (true, "logged".to_owned(), json!({"ok": true}))
            }
            ServerTool::ExamineImage => match self.latest_image.clone() {
                Some((at, mime, data)) if at + FRESH_FRAME > now => {
                    self.provider(ProviderInput::Image { mime, data });
                    let age_ms = millis(now.saturating_duration_since(at));
                    (
                        true,
                        format!("latest frame attached ({age_ms} ms old)"),
                        json!({"ok": true, "frame_age_ms": age_ms,
                            "message": "The latest frame is now in the conversation; look at it to answer."}),
                    )
                }
                _ => (
                    false,
                    "no_fresh_frame".to_owned(),
                    json!({"error": "no_fresh_frame",
                        "message": format!("No camera or screen frame arrived in the last {} s.", FRESH_FRAME.as_secs())}),
                ),
            },
            other => (
                false,
                "not_available".to_owned(),
                json!({"error": "not_available", "message": format!("{other} is not available here.")}),
            ),
        };
        self.timeline(now, "tool.server", json!({"tool_call_id": call_id, "name": name, "ok": ok, "summary": summary}));
        self.provider(ProviderInput::ToolResult { call_id: call_id.clone(), output, is_error: !ok, scheduling: None });
        self.emit(ServerEvent::ToolResult { tool_call_id: call_id, ok, summary: Some(summary) }, None);
    }

    /// `set_state`: merges the model's write into the session state, publishes the whole state
    /// (`svc.session-state`) and answers the model with it.
    fn write_state(&mut self, now: Instant, call_id: String, arguments: &Value) {
        let Some(state) = self.state.as_mut() else { return };
        let before = state.clone();
        let mut updated_keys = Vec::new();
        let mut warnings = Vec::new();
        match arguments {
            Value::Object(args) => {
                match args.get("values") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(values)) => {
                        for (key, value) in values {
                            let changed = if value.is_null() {
                                state.remove(key).is_some()
                            } else if state.get(key) != Some(value) {
                                state.insert(key.clone(), value.clone());
                                true
                            } else {
                                false
                            };
                            if changed {
                                updated_keys.push(key.clone());
                            }
                        }
                    }
                    Some(_) => warnings.push("`values` should be an object; it was ignored".to_owned()),
                }
                match args.get("stage") {
                    None | Some(Value::Null) => {}
                    Some(stage @ Value::String(_)) => {
                        if state.get("stage") != Some(stage) {
                            state.insert("stage".to_owned(), stage.clone());
                            if !updated_keys.iter().any(|key| key == "stage") {
                                updated_keys.push("stage".to_owned());
                            }
                        }
                    }
                    Some(_) => warnings.push("`stage` should be a string; it was ignored".to_owned()),
                }
                if args.keys().any(|key| key != "values" && key != "stage") {
                    warnings.push("only `values` and `stage` are read; other arguments were ignored".to_owned());
                }
            }
            _ => warnings.push("the arguments should be an object with `values` and `stage`".to_owned()),
        }
        if Value::Object(state.clone()).to_string().len() > STATE_MAX_BYTES {
            *state = before;
            updated_keys.clear();
            warnings
                .push(format!("the write would make the state larger than {STATE_MAX_BYTES} bytes; it was refused"));
        }
        let state = Value::Object(state.clone());
        let stage = state.get("stage").and_then(Value::as_str).map(str::to_owned);
        let mut data = json!({"tool_call_id": call_id, "updated_keys": updated_keys, "warnings": warnings});
        if self.cfg.session.store.transcript {
            data["state"] = state.clone();
        }
        self.timeline(now, "state.updated", data);
        self.provider(ProviderInput::ToolResult {
            call_id,
            output: json!({"ok": warnings.is_empty(), "state": state, "warnings": warnings}),
            is_error: false,
            scheduling: None,
        });
        self.emit(ServerEvent::SessionState { state, updated_keys, warnings, stage }, None);
    }

    // -----------------------------------------------------------------------------------------
    // Hooks and the end

    fn fire_hook(&mut self, now: Instant, firing: Firing) {
        let action = serde_json::to_value(&firing.hook.action).unwrap_or(Value::Null);
        self.timeline(
            now,
            "hook.fired",
            json!({"name": firing.hook.name, "trigger_count": firing.trigger_count, "silence_ms": firing.silence_ms}),
        );
        self.emit(
            ServerEvent::UserSpeechTimeout {
                session_id: self.cfg.session_id.clone(),
                silence_ms: firing.silence_ms,
                trigger_count: firing.trigger_count,
                max_count: firing.hook.effective_max_count(),
                action,
            },
            None,
        );
        let silence_s = firing.silence_ms as f64 / 1000.0;
        match firing.hook.action {
            HookAction::Say { text: Some(text), .. } => self.provider(ProviderInput::Greeting(text)),
            HookAction::Say { text: None, prompt } => {
                let prompt = prompt.unwrap_or_default();
                self.provider(ProviderInput::Note {
                    text: format!("The user has been silent for {silence_s:.0} seconds. {prompt}"),
                    respond: true,
                });
            }
            HookAction::EndCall { farewell: Some(farewell) } => {
                self.provider(ProviderInput::Greeting(farewell));
                self.end_after_goodbye(now, "silence_timeout");
            }
            HookAction::EndCall { farewell: None } => self.finish(now, "silence_timeout", EndStatus::Completed),
        }
    }

    fn end_after_goodbye(&mut self, now: Instant, reason: &'static str) {
        if self.pending_end.is_none() {
            let seq_at_request = self.playback.responses.back().map_or(0, |r| r.seq);
            self.pending_end =
                Some(PendingEnd { reason, status: EndStatus::Completed, requested_at: now, seq_at_request });
        }
    }

    /// Checks that run after every input: a pending end whose goodbye is over.
    fn after(&mut self, now: Instant) {
        if self.phase == Phase::Finished {
            return;
        }
        // Someone may have just become able to hear queued audio.
        self.pump(now);
        if let Some(end) = &self.pending_end {
            let idle = self.playback.queued() == 0 && self.playback.responses.iter().all(|r| r.finished);
            let newest = self.playback.responses.back().map_or(0, |r| r.seq);
            let waited = now.saturating_duration_since(end.requested_at);
            let goodbye_over = idle && (newest > end.seq_at_request || waited >= GOODBYE_START_GRACE);
            if goodbye_over || waited >= GOODBYE_MAX_WAIT {
                let (reason, status) = (end.reason, end.status);
                self.finish(now, reason, status);
                return;
            }
        }
        self.update_agent_state(now);
    }

    fn fatal(&mut self, now: Instant, code: &str, message: &str) {
        if self.phase == Phase::Finished {
            return;
        }
        self.emit(ServerEvent::Error { code: code.to_owned(), message: message.to_owned(), fatal: true }, None);
        self.finish(now, "upstream_error", EndStatus::Error);
    }

    fn finish(&mut self, now: Instant, reason: &str, status: EndStatus) {
        if self.phase == Phase::Finished {
            return;
        }
        self.playback.clear();
        self.emit(ServerEvent::SessionEnded { reason: reason.to_owned() }, None);
        let usage = self.usage_totals(now);
        let status_slug = match status {
            EndStatus::Completed => "completed",
            EndStatus::Error => "error",
        };
        self.timeline(
            now,
            "session.ended",
            json!({"reason": reason, "status": status_slug, "turns": usage.turn_count,
                "user_speaking_ms": usage.user_speaking_ms, "agent_speaking_ms": usage.agent_speaking_ms}),
        );
        self.tools.close_all();
        self.provider(ProviderInput::Close);
        self.phase = Phase::Finished;
        self.outputs.push_back(Output::Finished(Finish { status, reason: reason.to_owned(), usage }));
    }

    /// Usage so far.
    pub fn usage_totals(&self, now: Instant) -> UsageTotals {
        let ongoing = self.user_speaking_since.map_or(0, |since| millis(now.saturating_duration_since(since)));
        UsageTotals {
            turn_count: self.turn_count,
            user_speaking_ms: self.user_speaking_ms + ongoing,
            agent_speaking_ms: i64::try_from(self.playback.released_total).unwrap_or(i64::MAX)
                * FRAME.as_millis() as i64,
            tokens: self.tokens.clone(),
        }
    }

    fn cap(&self) -> Option<Duration> {
        self.cfg.session.max_session_seconds.map(|seconds| Duration::from_secs(u64::from(seconds)))
    }

    fn cap_times(&self, cap: Duration) -> (Instant, Instant) {
        let lead = self.cfg.timing.ending_soon_lead.min(cap / 2);
        (self.start + cap - lead, self.start + cap)
    }

    fn update_agent_state(&mut self, now: Instant) {
        let speaking = self.playback.responses.iter().any(|r| r.speaking);
        let responding = self.playback.responses.iter().any(|r| !r.done && !r.cut);
        let state = if !self.provider_ready {
            "initializing"
        } else if speaking {
            "speaking"
        } else if self.thinking_since.is_some_and(|since| now < since + THINKING_MAX) || responding {
            "thinking"
        } else {
            "listening"
        };
        if state != self.agent_state {
            self.agent_state = state;
            self.outputs
                .push_back(Output::Attributes(BTreeMap::from([(AGENT_STATE_ATTRIBUTE.to_owned(), state.to_owned())])));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Output helpers

    fn provider(&mut self, input: ProviderInput) {
        self.outputs.push_back(Output::Provider(input));
    }

    fn emit(&mut self, event: ServerEvent, to: Option<&str>) {
        self.emit_raw(event.to_json(), to);
    }

    fn emit_raw(&mut self, json: String, to: Option<&str>) {
        self.next_envelope += 1;
        let envelope_id = format!("srv_{}", self.next_envelope);
        match chunk_message(&json, &envelope_id, ServerEvent::ServerEnvelopeChunk) {
            Some(chunks) => {
                for chunk in chunks {
                    self.outputs.push_back(Output::Data { json: chunk.to_json(), to: to.map(str::to_owned) });
                }
            }
            None => self.outputs.push_back(Output::Data { json, to: to.map(str::to_owned) }),
        }
    }

    fn ts_us(&self, now: Instant) -> i64 {
        self.cfg.started_at_us + i64::try_from(now.saturating_duration_since(self.start).as_micros()).unwrap_or(0)
    }

    fn timeline(&mut self, now: Instant, kind: &'static str, data: Value) {
        let ts_us = self.ts_us(now);
        self.outputs.push_back(Output::Persist(Persist::Timeline { ts_us, kind, data }));
    }

    fn store_turn(&mut self, _now: Instant, ts_us: i64, role: &'static str, text: &str) {
        if self.cfg.session.store.transcript {
            self.outputs.push_back(Output::Persist(Persist::Turn { ts_us, role, text: text.to_owned() }));
        }
    }
}

fn ready_json(ready: &ServerEvent) -> String {
    ready.to_json()
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn counters(tokens: &UsageTokens) -> UsageCounters {
    UsageCounters {
        input_text_tokens: tokens.input_text_tokens,
        input_image_tokens: tokens.input_image_tokens,
        input_audio_tokens: tokens.input_audio_tokens,
        input_cached_tokens: tokens.input_cached_tokens,
        output_text_tokens: tokens.output_text_tokens,
        output_audio_tokens: tokens.output_audio_tokens,
        total_tokens: tokens.total_tokens,
    }
}

/// Identities in the room for tests and diagnostics.
impl SessionCore {
    /// Participants the core counts (not agents).
    pub fn peers(&self) -> HashSet<String> {
        self.peers.keys().cloned().collect()
    }

    /// The bound input participant.
    pub fn bound_input(&self) -> Option<&str> {
        self.bound.as_deref()
    }

    /// Bytes of chunked client messages waiting for their other chunks.
    pub fn buffered_envelope_bytes(&self) -> usize {
        self.envelopes.buffered_bytes()
    }
}

#[cfg(test)]
mod tests;
