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

mod client_messages;
mod ending;
pub mod envelope;
pub mod hooks;
pub mod inbound;
pub mod playback;
mod provider_events;
mod tool_calls;
mod tool_jobs;
pub mod tools;
pub mod turn_gate;
mod turns;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use svc_domain::model::{Delegation, Knobs};
use svc_domain::session_config::STATE_MAX_BYTES;
use svc_domain::start::ResolvedSession;
use svc_domain::tools::{HookAction, STATE_TOOL_NAME, ServerTool, ToolSpec};
use svc_provider_core::{AppendChannel, ProviderError, ProviderEvent, ProviderInput, ResponseStatus};
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

pub use self::tool_jobs::{MAX_TOOL_JOBS, TOOL_JOB_BACKSTOP, ToolJob, ToolJobOutcome};

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

impl DialUpdate {
    /// Dial `dial_id` at `status`, nothing else said yet.
    pub fn new(dial_id: &str, status: DialStatus) -> DialUpdate {
        DialUpdate {
            dial_id: dial_id.to_owned(),
            status,
            reason: None,
            sip_status: None,
            ended_by: None,
            duration_seconds: None,
            digit: None,
        }
    }
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

    /// These totals and `other`'s, summed (the token counters field by field).
    pub fn plus(&self, other: &UsageTotals) -> UsageTotals {
        let tokens = match (&self.tokens, &other.tokens) {
            (Some(a), Some(b)) => Some(a.plus(b)),
            (one, other) => one.clone().or_else(|| other.clone()),
        };
        UsageTotals {
            turn_count: self.turn_count + other.turn_count,
            user_speaking_ms: self.user_speaking_ms + other.user_speaking_ms,
            agent_speaking_ms: self.agent_speaking_ms + other.agent_speaking_ms,
            tokens,
        }
    }

    /// As the store keeps it.
    pub fn record(&self) -> svc_store::UsageRecord {
        svc_store::UsageRecord {
            turn_count: self.turn_count,
            user_speaking_ms: self.user_speaking_ms,
            agent_speaking_ms: self.agent_speaking_ms,
            tokens: self.tokens.clone(),
        }
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
        /// The PCM it was encoded from and its rate, when the core keeps it for the recording
        /// ([`SessionCore::keep_agent_pcm`]).
        pcm: Option<(Box<[i16]>, u32)>,
    },
    /// Decode audio of this participant (and no other) for [`SessionCore::handle_user_audio`].
    BindInput(Option<String>),
    /// Store this.
    Persist(Persist),
    /// Run this server tool on its backend in the background, then report the outcome with
    /// [`SessionCore::handle_tool_job_done`].
    RunTool(ToolJob),
    /// Stop the job of this call (timed out, abandoned by the model, or the session ends); its
    /// outcome is no longer wanted.
    AbortTool {
        /// The call.
        call_id: String,
    },
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
    /// Backend-run server tools in flight.
    tool_jobs: tool_jobs::RunningJobs,
    /// The agent's session state, when it has one (`set_state`).
    state: Option<serde_json::Map<String, Value>>,
    // Hooks and the end.
    hooks: SilenceHooks,
    pending_end: Option<PendingEnd>,
    ending_soon_sent: bool,
    /// The server is draining: the session ends by then (`server_shutdown`) unless it ends first.
    drain_end: Option<Instant>,
    drain_warned: bool,
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
    /// The usage of the parts of the session that ran before it was taken over here.
    carried: UsageTotals,
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
            tool_jobs: tool_jobs::RunningJobs::default(),
            state: cfg.session.agent.state.clone(),
            pending_end: None,
            ending_soon_sent: false,
            drain_end: None,
            drain_warned: false,
            envelopes: Reassembler::default(),
            next_envelope: 0,
            dial: None,
            connect_timings_taken: false,
            turn_count: 0,
            user_speaking_ms: 0,
            tokens: None,
            carried: UsageTotals::default(),
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
        // A session taken over from a node that died (worker mode resumes it from itself): the
        // client hears that the agent is reconnecting; `ready` follows as at any start.
        if core.cfg.session.resume_session_id.as_deref() == Some(core.cfg.session_id.as_str()) {
            core.timeline(now, "session.taken_over", json!({}));
            core.emit(ServerEvent::Reconnecting { seconds_remaining: None }, None);
        }
        core.update_agent_state(now);
        core
    }

    /// Counts the usage of the parts of the session that ran before it was taken over here
    /// (stored by the node that ran them) into this one's.
    pub fn carry_usage(&mut self, earlier: UsageTotals) {
        self.carried = earlier;
    }

    /// Hands every agent frame out with the PCM it was encoded from (for the recording, which
    /// then needs no decoder of its own).
    pub fn keep_agent_pcm(&mut self) {
        self.playback.keep_pcm();
    }

    /// Agent frames the playback queue could not hold so far (the provider ran too far ahead).
    pub fn output_frames_overflowed(&self) -> u64 {
        self.playback.dropped_frames
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
        consider(self.tool_jobs.next_deadline());
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
        if let Some((soon, end)) = self.drain_times() {
            consider((!self.drain_warned).then_some(soon));
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
        self.expire_tool_jobs(now);
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
                self.warn_ending_soon(now, end, "max_session_duration");
            }
        }
        if self.drain_due(now) {
            return;
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
                self.cancel_tool_jobs(&call_ids);
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

    /// The server is draining: the session keeps running until `ends_at` and then ends with
    /// `server_shutdown`, unless it ends first; the clients are told `session-ending-soon` as for
    /// the duration cap (at once when the end is nearer than the warning's lead).
    pub fn handle_drain(&mut self, now: Instant, ends_at: Instant) {
        if self.phase == Phase::Finished || self.drain_end.is_some_and(|end| end <= ends_at) {
            return;
        }
        self.drain_end = Some(ends_at);
        self.drain_warned = false;
        if !self.drain_due(now) {
            self.after(now);
        }
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

    /// A phone dial-out was placed into this session's room (the call rings), presenting
    /// `caller_number`.
    pub fn handle_dial_placed(&mut self, now: Instant, dial_id: &str, phone_number: &str, caller_number: &str) {
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
    /// After the session's end the update is still said and kept: the call ends with the
    /// session (the phone's hangup is what ended it, or the actor hangs it up), and the actor
    /// waits for its last word before it closes the room, so the clients hear how it ended.
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
        self.emit(event, None);
    }

    /// Whether a dial-out was placed and its outcome is not known yet.
    pub fn dial_in_progress(&self) -> bool {
        self.dial.as_ref().is_some_and(|(_, over)| !over)
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
