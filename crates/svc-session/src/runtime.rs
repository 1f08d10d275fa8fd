//! [`Runtime`]: where started sessions go. For each one it joins the room as the agent (kind
//! AGENT, voice track published), opens the provider adapter, and spawns the session's actor; a
//! shutdown ends every session cleanly (`session-ended`, status and usage stored) before the
//! rooms close.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use svc_domain::start::ResolvedSession;
use svc_provider::endpoint::ProviderEnv;
use svc_provider_core::{Role, SessionSetup, TranscriptTurn};
use svc_room::RoomServer;
use svc_store::Store;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actor::{Recording, SessionActor, SessionCommand};
use crate::core::{AGENT_STATE_ATTRIBUTE, CoreConfig, SessionCore, Timing, UsageTotals};
use crate::external_room::{ExternalRooms, SessionOwner, SipDialError};
use crate::input::InputAudio;
use crate::media::{MediaCounts, MediaTotals};
use crate::persist::Persister;
use crate::recording::{RecordingFile, StereoAligner};
use crate::room::{AgentRoom, EmbeddedRoom};

/// A resumption handle younger than this resumes natively (Gemini keeps handles for two hours);
/// an older one is not tried, and the new session is seeded with the transcript instead.
pub const RESUMPTION_HANDLE_WARM_FOR: Duration = Duration::from_secs(2 * 3600);
/// Requests waiting for one session's actor (it reads them between events).
const COMMAND_QUEUE: usize = 8;
/// File descriptors a session opens as it starts and runs (the provider's socket, its TLS and
/// DNS, the recording), with one to spare: [`Runtime::can_start`] needs this many free.
pub const SESSION_DESCRIPTORS: usize = 4;
/// How long [`Runtime::end_session`] waits for the session to store its end.
pub const END_WAIT: Duration = Duration::from_secs(10);

/// How the runtime runs sessions.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The store.
    pub store: Store,
    /// Where the sessions' rooms are.
    pub rooms: SessionRooms,
    /// Provider credentials and endpoints.
    pub provider_env: ProviderEnv,
    /// The local provider's shared models and capacity (`provider_local`), when configured.
    pub local: Option<Arc<svc_local::LocalEngines>>,
    /// Where recordings go (`--recordings-dir`; shared by the nodes of a deployment, a session
    /// taken over continues its recording there).
    pub recordings_dir: PathBuf,
    /// This node's id, recorded on the sessions it runs.
    pub node_id: String,
    /// Timing policy of sessions.
    pub timing: Timing,
    /// Phone dial-out, when a SIP trunk is configured.
    pub phone: Option<svc_phone::PhoneService>,
    /// The backends of the server tools that need one (`web_search`, the vision tools).
    pub tool_backends: Arc<svc_tools::ToolBackends>,
}

/// Where the sessions' rooms are.
#[derive(Debug, Clone)]
pub enum SessionRooms {
    /// The embedded room, in this process.
    Embedded(RoomServer),
    /// A LiveKit server the agents join as clients (the room named in each [`SessionRequest`]
    /// is open there).
    External(ExternalRooms),
}

/// What [`Runtime::start_session`] prepared before the agent joined the room.
struct Start {
    request: SessionRequest,
    setup: SessionSetup,
    identity: String,
    input_rate_hz: u32,
    local: bool,
    /// The usage of the parts that ran on another node, for a session taken over.
    carried: UsageTotals,
}

/// A session to run.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    /// Session id.
    pub session_id: String,
    /// The room the user was given credentials for.
    pub room_name: String,
    /// The resolved configuration.
    pub session: Arc<ResolvedSession>,
    /// The local provider's slot, when the start route already took it (`provider_local`);
    /// without one, a local session takes its slot here.
    pub local_slot: Option<svc_local::Permit>,
}

/// Why a session could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The server is shutting down.
    #[error("the session runtime is shutting down")]
    ShuttingDown,
    /// The server is draining: its live sessions run to their end, new ones go elsewhere.
    #[error("this server is draining before it stops")]
    Draining,
    /// The process is out of file descriptors (its `ulimit -n`).
    #[error("this server is out of file descriptors: {0}")]
    Descriptors(std::io::Error),
    /// The agent could not join the room.
    #[error("the agent could not join the room: {0}")]
    Room(#[from] svc_room::RoomError),
    /// The provider adapter could not start.
    #[error(transparent)]
    Provider(#[from] svc_provider::StartError),
    /// The local provider cannot take the session (models missing, or at capacity).
    #[error(transparent)]
    Local(#[from] svc_local::Unavailable),
    /// The model's family has no adapter.
    #[error("no adapter for the provider family `{0}`")]
    UnknownFamily(String),
}

struct Inner {
    config: RuntimeConfig,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    live: AtomicUsize,
    /// What the ended sessions' media paths dropped or sent late, summed.
    media_totals: Arc<MediaTotals>,
    /// The sessions running on this node, by id: how the rest of the server reaches one.
    sessions: Mutex<HashMap<String, Running>>,
    /// When a drain ends the sessions still running (`None`: not draining).
    drain_end: Mutex<Option<Instant>>,
}

/// A running session as the registry knows it.
struct Running {
    room_name: String,
    commands: tokio::sync::mpsc::Sender<SessionCommand>,
    /// Cancelled when the session's task has finished (its end stored, its room left).
    finished: CancellationToken,
}

/// A phone call to place into a running session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialRequest {
    /// The `dial_id`.
    pub dial_id: String,
    /// The session.
    pub session_id: String,
    /// The callee, E.164.
    pub phone_number: String,
    /// The caller id to present; `None`: the trunk's default.
    pub caller_number: Option<String>,
    /// The session's room, as stored (a session on a LiveKit server may run on another node).
    pub room_name: Option<String>,
}

/// Why [`Runtime::dial`] placed no call.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// No SIP trunk is configured.
    #[error("this server has no phone trunk configured")]
    NoTrunk,
    /// The session does not run on this node.
    #[error("the session is not running on this node")]
    NotRunning,
    /// The phone service refused the call.
    #[error(transparent)]
    Phone(#[from] svc_phone::PhoneError),
    /// The LiveKit server that holds the session's room refused or failed the call.
    #[error("the LiveKit server did not place the call: {0}")]
    LiveKit(svc_room::server_api::ServerApiError),
}

/// Why [`Runtime::end_session`] did not end a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EndError {
    /// No session with that id runs on this node.
    #[error("the session is not running on this node")]
    NotRunning,
    /// It did not finish within [`END_WAIT`].
    #[error("the session did not end in time")]
    TimedOut,
}

/// The session runtime. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("node_id", &self.inner.config.node_id)
            .field("live", &self.live_sessions())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime with no session yet.
    pub fn new(config: RuntimeConfig) -> Runtime {
        Runtime {
            inner: Arc::new(Inner {
                config,
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                live: AtomicUsize::new(0),
                media_totals: Arc::default(),
                sessions: Mutex::new(HashMap::new()),
                drain_end: Mutex::new(None),
            }),
        }
    }

    /// How the runtime runs sessions.
    pub(crate) fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Sessions running now.
    pub fn live_sessions(&self) -> usize {
        self.inner.live.load(Ordering::Relaxed)
    }

    /// Media rooms open in this process's room server (a session's, or one opened by LiveKit's
    /// server API).
    pub fn open_rooms(&self) -> usize {
        match &self.inner.config.rooms {
            SessionRooms::Embedded(room) => room.room_count(),
            // The rooms are the LiveKit server's, not this process's.
            SessionRooms::External(_) => 0,
        }
    }

    /// What the media paths of the sessions that ended so far dropped or sent late, summed.
    pub fn media_totals(&self) -> MediaCounts {
        self.inner.media_totals.snapshot()
    }

    /// Starts a session: returns once the agent is in the room and the adapter is connecting.
    pub async fn start_session(&self, request: SessionRequest) -> Result<(), RuntimeError> {
        self.start(request, None).await
    }

    /// Starts a session whose agent joins with a token a LiveKit server signed for it (worker
    /// mode: the job's assignment), at `url`; as [`Runtime::start_session`] otherwise.
    pub async fn start_assigned(&self, request: SessionRequest, url: &str, token: &str) -> Result<(), RuntimeError> {
        self.start(request, Some((url, token))).await
    }

    /// When session `session_id`, running here, has finished (its end stored, its room left);
    /// `None` when it does not run here.
    pub fn session_finished(&self, session_id: &str) -> Option<CancellationToken> {
        self.sessions().get(session_id).map(|running| running.finished.clone())
    }

    async fn start(&self, request: SessionRequest, assigned: Option<(&str, &str)>) -> Result<(), RuntimeError> {
        let inner = &self.inner;
        if inner.shutdown.is_cancelled() {
            return Err(RuntimeError::ShuttingDown);
        }
        // Refused while draining; the descriptor probe of `can_start` is the caller's, asked
        // before it stored the session (the start route does), and not done twice.
        if self.is_draining() {
            return Err(RuntimeError::Draining);
        }
        let config = &inner.config;
        let session = request.session.clone();
        let local = session.model.family == svc_local::FAMILY;
        let input_rate_hz =
            if local { Some(svc_local::INPUT_RATE_HZ) } else { svc_provider::input_rate_hz(&session.model) }
                .ok_or_else(|| RuntimeError::UnknownFamily(session.model.family.clone()))?;
        let setup = self.setup(&session).await;
        // A session resumed from itself is one taken over from a node that died: its usage
        // so far is counted on (the dead node's heartbeats stored it).
        let carried = if session.resume_session_id.as_deref() == Some(request.session_id.as_str()) {
            self.usage_so_far(&request.session_id).await
        } else {
            UsageTotals::default()
        };
        let identity = agent_identity(&request.session_id);
        let name = session.agent.name.clone().unwrap_or_else(|| "Agent".to_owned());
        let attributes = BTreeMap::from([(AGENT_STATE_ATTRIBUTE.to_owned(), "initializing".to_owned())]);
        let room_name = &request.room_name;
        match &config.rooms {
            SessionRooms::Embedded(server) => {
                let room = EmbeddedRoom::join(server, room_name, &identity, &name, attributes).await?;
                self.launch(Start { request, setup, identity, input_rate_hz, local, carried }, room).await
            }
            SessionRooms::External(external) => {
                let mut room = match assigned {
                    Some((url, token)) => external.join_assigned(url, token, room_name).await?,
                    None => external.join(room_name, &identity, &name, attributes).await?,
                };
                room.watch_owner(self.owner(&request.session_id));
                self.launch(Start { request, setup, identity, input_rate_hz, local, carried }, room).await
            }
        }
    }

    /// Opens the provider, assembles the session's actor in `room` and runs it.
    async fn launch<R: AgentRoom>(&self, start: Start, room: R) -> Result<(), RuntimeError> {
        let Start { request, setup, identity, input_rate_hz, local, carried } = start;
        let inner = &self.inner;
        let config = &inner.config;
        let session = request.session.clone();
        let provider = if local {
            let engines =
                config.local.as_ref().ok_or_else(|| RuntimeError::UnknownFamily(session.model.family.clone()))?;
            match request.local_slot.clone() {
                Some(permit) => svc_local::start_with(&setup, engines, permit, CancellationToken::new()),
                None => svc_local::start(&setup, engines, CancellationToken::new())?,
            }
        } else {
            svc_provider::start(setup, &config.provider_env, CancellationToken::new())?
        };
        let started = crate::actor::now();
        let started_us = epoch_us();
        if let Err(error) = config.store.claim_session(&request.session_id, &config.node_id, started_us).await {
            tracing::warn!(session.id = %request.session_id, %error, "could not record the session's node");
        }
        let mut core = SessionCore::new(
            CoreConfig {
                session_id: request.session_id.clone(),
                agent_identity: identity,
                started_at_us: started_us,
                session: session.clone(),
                input_rate_hz,
                timing: config.timing,
            },
            started,
        );
        core.carry_usage(carried);
        let mut media = MediaCounts::default();
        let taken_over = session.resume_session_id.as_deref() == Some(request.session_id.as_str());
        let recording = match session
            .store
            .audio
            .then(|| self.recording(&request.session_id, input_rate_hz, started, taken_over))
        {
            Some(Ok(recording)) => {
                core.keep_agent_pcm();
                Some(recording)
            }
            Some(Err(error)) => {
                tracing::warn!(session.id = %request.session_id, %error, "cannot create the recording; the session runs without");
                core.handle_recording_failed(started, &format!("creating the recording: {error}"));
                media.recordings_failed = 1;
                None
            }
            None => None,
        };
        let (commands, command_rx) = tokio::sync::mpsc::channel(COMMAND_QUEUE);
        let finished = CancellationToken::new();
        let actor = SessionActor {
            core,
            room,
            provider,
            persister: Persister::start(config.store.clone(), &request.session_id),
            input: InputAudio::new(input_rate_hz, session.agent.audio.noise_cancellation),
            recording,
            shutdown: inner.shutdown.clone(),
            commands: command_rx,
            clock_origin: (started, started_us),
            dial_hangup: None,
            room_dials: Default::default(),
            owner: matches!(config.rooms, SessionRooms::External(_)).then(|| self.owner(&request.session_id)),
            media,
            media_totals: inner.media_totals.clone(),
            tool_backends: config.tool_backends.clone(),
            tool_jobs: crate::actor::ToolJobs::default(),
        };
        inner.live.fetch_add(1, Ordering::Relaxed);
        self.sessions().insert(
            request.session_id.clone(),
            Running { room_name: request.room_name.clone(), commands: commands.clone(), finished: finished.clone() },
        );
        // A drain that began while this session was starting reaches it too.
        if let Some(ends_at) = self.drain_end() {
            self.tell_drain(&request.session_id, &commands, ends_at);
        }
        let runtime = self.clone();
        let session_id = request.session_id.clone();
        inner.tasks.spawn(async move {
            actor.run().await;
            runtime.sessions().remove(&session_id);
            runtime.inner.live.fetch_sub(1, Ordering::Relaxed);
            finished.cancel();
        });
        tracing::info!(session.id = %request.session_id, room = %request.room_name, "agent joined; session running");
        Ok(())
    }

    /// Whether session `session_id` runs on this node.
    pub fn is_running(&self, session_id: &str) -> bool {
        self.sessions().contains_key(session_id)
    }

    /// Ends session `session_id` (`session-ended` with `reason`, its end stored, the room left)
    /// and returns once it has finished, within [`END_WAIT`].
    pub async fn end_session(&self, session_id: &str, reason: &str) -> Result<(), EndError> {
        let (commands, finished) = {
            let sessions = self.sessions();
            let running = sessions.get(session_id).ok_or(EndError::NotRunning)?;
            (running.commands.clone(), running.finished.clone())
        };
        // A session that has just ended on its own has dropped its receiver: it is finishing
        // anyway, and `finished` says when.
        let _ = commands.send(SessionCommand::End { reason: reason.to_owned() }).await;
        tokio::time::timeout(END_WAIT, finished.cancelled()).await.map_err(|_| EndError::TimedOut)
    }

    /// The caller id of dials that name none, when dial-out is configured.
    pub fn trunk_caller_number(&self) -> Option<&str> {
        match &self.inner.config.rooms {
            SessionRooms::External(rooms) => rooms.sip_trunk().map(|trunk| trunk.caller_number.as_str()),
            SessionRooms::Embedded(_) => {
                self.inner.config.phone.as_ref().map(|phone| phone.config().caller_number.as_str())
            }
        }
    }

    /// Places a phone call into a running session's room: the callee joins at once as a SIP
    /// participant (`sip.callStatus` `dialing`) and is heard once they answer. Returns once the INVITE is out; the call's progress goes to the session
    /// (`dial-progress` events, timeline) and its outcome and billed time to the store.
    pub async fn dial(&self, request: DialRequest) -> Result<(), DialError> {
        if let SessionRooms::External(rooms) = &self.inner.config.rooms {
            return dial_through_livekit(rooms, request).await;
        }
        let phone = self.inner.config.phone.as_ref().ok_or(DialError::NoTrunk)?;
        let (room_name, commands) = {
            let sessions = self.sessions();
            let running = sessions.get(&request.session_id).ok_or(DialError::NotRunning)?;
            (running.room_name.clone(), running.commands.clone())
        };
        // The number presented, so the timeline says what the callee saw.
        let caller_number = request.caller_number.unwrap_or_else(|| phone.config().caller_number.clone());
        let call = phone
            .dial(svc_phone::DialRequest {
                room_name,
                session_id: request.session_id.clone(),
                dial_id: request.dial_id.clone(),
                phone_number: request.phone_number.clone(),
                caller_number: Some(caller_number.clone()),
                participant: Default::default(),
            })
            .await?;
        tracing::info!(session.id = %request.session_id, dial.id = %request.dial_id, "dial placed");
        let placed = SessionCommand::DialPlaced {
            dial_id: request.dial_id.clone(),
            phone_number: request.phone_number,
            caller_number,
            hangup: call.hangup_handle(),
        };
        // A session that has just ended takes no more commands; the call still runs its course
        // (the room closes under it) and is metered below.
        let _ = commands.send(placed).await;
        let store = self.inner.config.store.clone();
        self.inner.tasks.spawn(watch_dial(call, request.dial_id, commands, store));
        Ok(())
    }

    /// The registry. A poisoned lock still holds a consistent map (every change is one insert
    /// or remove), so it is used as it is.
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.inner.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// This node as the runner of `session_id`, as the store records it.
    fn owner(&self, session_id: &str) -> SessionOwner {
        let config = &self.inner.config;
        SessionOwner { store: config.store.clone(), session_id: session_id.to_owned(), node_id: config.node_id.clone() }
    }

    /// The usage session `session_id` stored so far (the heartbeats of the node that ran it).
    async fn usage_so_far(&self, session_id: &str) -> UsageTotals {
        match self.inner.config.store.session(session_id).await {
            Ok(Some(row)) => UsageTotals {
                turn_count: row.turn_count.unwrap_or(0),
                user_speaking_ms: row.user_speaking_ms.unwrap_or(0),
                agent_speaking_ms: row.agent_speaking_ms.unwrap_or(0),
                tokens: row.tokens,
            },
            Ok(None) => UsageTotals::default(),
            Err(error) => {
                tracing::warn!(session.id = %session_id, %error, "could not read the usage of the session taken over");
                UsageTotals::default()
            }
        }
    }

    /// The adapter's setup, with the prior conversation when the session resumes one.
    async fn setup(&self, session: &ResolvedSession) -> SessionSetup {
        let mut setup = SessionSetup::from_resolved(session);
        let Some(prior) = &session.resume_session_id else { return setup };
        // A resumed conversation never greets again.
        setup.greeting = None;
        let store = &self.inner.config.store;
        match store.transcript(prior).await {
            Ok(turns) => {
                setup.history = turns
                    .into_iter()
                    .map(|turn| TranscriptTurn {
                        role: if turn.role == "assistant" { Role::Assistant } else { Role::User },
                        text: turn.text,
                    })
                    .collect();
            }
            Err(error) => tracing::warn!(%error, "could not load the transcript of the session to resume"),
        }
        match store.resumption_handle(prior).await {
            Ok(Some((handle, issued_us))) => {
                let age = Duration::from_micros(u64::try_from(epoch_us() - issued_us).unwrap_or(u64::MAX));
                if age < RESUMPTION_HANDLE_WARM_FOR {
                    setup.resumption_handle = Some(handle);
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "could not load the resumption handle of the session to resume"),
        }
        setup
    }

    /// The session's recording; a session `taken_over` from a node that died continues the
    /// recording that node left unfinished (when the nodes share the recordings directory).
    fn recording(
        &self,
        session_id: &str,
        rate_hz: u32,
        started: Instant,
        taken_over: bool,
    ) -> std::io::Result<Recording> {
        let dir = &self.inner.config.recordings_dir;
        let file = if taken_over {
            RecordingFile::continue_or_create(dir, session_id, rate_hz, std::time::SystemTime::now())?
        } else {
            RecordingFile::create(dir, session_id, rate_hz)?
        };
        Ok(Recording::new(StereoAligner::new(rate_hz, started), file))
    }

    /// Drains the node before it stops: new sessions are refused ([`RuntimeError::Draining`],
    /// so the server answers 503 and clients retry elsewhere) and every live session keeps
    /// running until it ends by itself or `within` has passed, when it ends with
    /// `server_shutdown` after a `session-ending-soon`. Returns at once; [`Runtime::idle`] says
    /// when the last session has ended.
    pub fn drain(&self, within: Duration) {
        let ends_at = crate::actor::now() + within;
        {
            let mut drain_end = self.inner.drain_end.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if drain_end.is_some_and(|end| end <= ends_at) {
                return;
            }
            *drain_end = Some(ends_at);
        }
        let sessions: Vec<(String, tokio::sync::mpsc::Sender<SessionCommand>)> =
            self.sessions().iter().map(|(id, running)| (id.clone(), running.commands.clone())).collect();
        for (session_id, commands) in sessions {
            self.tell_drain(&session_id, &commands, ends_at);
        }
    }

    /// Whether a session can start here now: not while draining, nor without the file
    /// descriptors a session needs (a start would otherwise be accepted and then fail in its
    /// first second, its provider socket or recording refused). The error says why, for a 503.
    pub fn can_start(&self) -> Result<(), RuntimeError> {
        if self.is_draining() {
            return Err(RuntimeError::Draining);
        }
        // Probing is the only exact test: the limit counts descriptor numbers, and the process
        // has holes below its highest. Four opens and closes of /dev/null, next to a start's
        // database writes and room join.
        let probe: std::io::Result<Vec<std::fs::File>> =
            (0..SESSION_DESCRIPTORS).map(|_| std::fs::File::open("/dev/null")).collect();
        probe.map(drop).map_err(RuntimeError::Descriptors)
    }

    /// Whether the node is draining ([`Runtime::drain`]).
    pub fn is_draining(&self) -> bool {
        self.drain_end().is_some()
    }

    fn drain_end(&self) -> Option<Instant> {
        *self.inner.drain_end.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tell_drain(&self, session_id: &str, commands: &tokio::sync::mpsc::Sender<SessionCommand>, ends_at: Instant) {
        if let Err(error) = commands.try_send(SessionCommand::Drain { ends_at }) {
            // A session whose queue is full (or that is ending) is ended by `shutdown` once the
            // drain is over, without the warning.
            tracing::warn!(session.id = %session_id, %error, "could not tell the session about the drain");
        }
    }

    /// Resolves once no session runs (no new one can start after [`Runtime::drain`]).
    pub async fn idle(&self) {
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }

    /// Ends every session (each says `session-ended` with reason `server_shutdown` and stores its
    /// end) and returns when all have finished.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }
}

/// A dial through the LiveKit server that holds the session's room, from any node: the agent
/// follows the call wherever the session runs (`crate::phone_call`).
async fn dial_through_livekit(rooms: &ExternalRooms, request: DialRequest) -> Result<(), DialError> {
    let trunk = rooms.sip_trunk().ok_or(DialError::NoTrunk)?;
    let room = request.room_name.as_deref().ok_or(DialError::NotRunning)?;
    let caller_number = request.caller_number.as_deref().unwrap_or(&trunk.caller_number);
    let dial = crate::external_room::SipDialOut {
        room,
        dial_id: &request.dial_id,
        phone_number: &request.phone_number,
        caller_number,
    };
    match rooms.dial(dial).await {
        Ok(()) => {
            tracing::info!(session.id = %request.session_id, dial.id = %request.dial_id, "dial placed through the LiveKit server");
            Ok(())
        }
        Err(SipDialError::NoTrunk) => Err(DialError::NoTrunk),
        // The room is gone: the session is ending.
        Err(SipDialError::Server(error)) if error.code() == Some("not_found") => Err(DialError::NotRunning),
        Err(SipDialError::Server(error)) => Err(DialError::LiveKit(error)),
    }
}

/// Follows one dial to its end: each step goes to the session, the outcome and the billed
/// seconds (answered time, rounded up) to the store.
async fn watch_dial(
    mut call: svc_phone::PhoneCall,
    dial_id: String,
    session: tokio::sync::mpsc::Sender<SessionCommand>,
    store: Store,
) {
    use crate::core::{DialStatus, DialUpdate};
    use svc_phone::{DialProgress, EndedBy};
    let mut answered_us = None;
    // (answered at, outcome slug, billed seconds), once the call is over.
    let (answered_us, outcome, billed_seconds) = loop {
        let Some(progress) = call.progress.recv().await else {
            // The phone service stopped without a final word (it always gives one; defensive).
            break (answered_us, "lost".to_owned(), 0);
        };
        let mut update = DialUpdate::new(&dial_id, DialStatus::Ringing);
        let mut last = None;
        match progress {
            DialProgress::Ringing => {}
            DialProgress::Answered => {
                answered_us = Some(epoch_us());
                update.status = DialStatus::Answered;
            }
            DialProgress::Failed { reason, status, .. } => {
                update.status = DialStatus::Failed;
                update.sip_status = status;
                last = Some((None, reason.clone(), 0));
                update.reason = Some(reason);
            }
            DialProgress::Ended { by, reason, answered_for } => {
                update.status = DialStatus::Ended;
                update.ended_by = Some(match by {
                    EndedBy::Phone => "phone",
                    EndedBy::Svc => "svc",
                });
                update.duration_seconds = Some(answered_for.as_secs_f64());
                let billed = crate::phone_call::billed_seconds(answered_for);
                last = Some((answered_us, "completed".to_owned(), billed));
                update.reason = Some(reason);
            }
            DialProgress::Dtmf { digit } => {
                update.status = DialStatus::Dtmf;
                update.digit = Some(digit);
            }
        }
        tracing::info!(dial.id = %dial_id, status = update.status.as_str(), reason = ?update.reason, "dial progress");
        // The session may have ended first; the call's outcome is stored all the same.
        let _ = session.send(SessionCommand::Dial(update)).await;
        if let Some(outcome) = last {
            break outcome;
        }
    };
    let record = svc_store::DialOutcome { answered_us, ended_us: epoch_us(), outcome: &outcome, billed_seconds };
    if let Err(error) = store.finish_dial(&dial_id, &record).await {
        tracing::warn!(dial.id = %dial_id, %error, "storing the outcome of a dial failed");
    }
}

/// The identity of session `session_id`'s agent in its room, on whichever node runs it.
pub fn agent_identity(session_id: &str) -> String {
    format!("agent-{session_id}")
}

pub(crate) fn epoch_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX))
}
