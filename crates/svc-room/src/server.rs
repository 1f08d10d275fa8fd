//! [`RoomServer`]: the registry of live rooms, the UDP sockets, and the entry points used by the
//! HTTP layer (signalling routes) and by the session runtime (in-process participants).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket as StdUdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use livekit_protocol as proto;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actor::{LOCAL_QUEUE, LocalPost, POST_QUEUE, ROOM_QUEUE, RoomActor, RoomCommand};
use crate::agents::AgentDispatch;
use crate::core::{
    AdminAnswer, AdminCommand, AdminError, JoinRequest, Key, MediaSettings, Permissions, RoomCore, RoomDescription,
    RoomOptions, SERVER_KEY,
};
use crate::ids::Ids;
use crate::local::{LocalParticipant, LocalShared};
use crate::model::{LeaveReason, ParticipantKind};
use crate::signal::RoomLink;
use crate::sip::SipDialer;
use crate::token::RoomCredentials;
use crate::udp::{RoomId, UdpMux};
use crate::wall_clock::unix_ms;
use crate::webhook::{WebhookConfig, Webhooks};

/// How the room server runs.
#[derive(Debug, Clone)]
pub struct RoomServerConfig {
    /// UDP port for all WebRTC traffic (0 = any free port).
    pub udp_port: u16,
    /// Addresses to bind and advertise as ICE host candidates. Empty: loopback plus the address
    /// of the interface that holds the default route.
    pub node_ips: Vec<IpAddr>,
    /// Bound addresses that clients reach at another address, with the same port (a 1:1 NAT: a
    /// cloud VM's private address and its public one): the public one is advertised instead.
    pub public_ips: Vec<(IpAddr, IpAddr)>,
    /// How long an empty room lives before it closes.
    pub empty_timeout: Duration,
    /// Seconds between client pings (sent in the join response).
    pub ping_interval_seconds: i32,
    /// Seconds of silence after which either side gives up.
    pub ping_timeout_seconds: i32,
    /// Where the rooms' webhook events go (none by default).
    pub webhooks: WebhookConfig,
    /// How long an agent worker has to answer a job offer before the next one is asked.
    pub agent_answer_timeout: Duration,
}

impl Default for RoomServerConfig {
    fn default() -> RoomServerConfig {
        RoomServerConfig {
            udp_port: 7882,
            node_ips: Vec::new(),
            public_ips: Vec::new(),
            empty_timeout: Duration::from_secs(300),
            ping_interval_seconds: 5,
            ping_timeout_seconds: 15,
            webhooks: WebhookConfig::default(),
            agent_answer_timeout: crate::agents::dispatcher::ANSWER_TIMEOUT,
        }
    }
}

/// Why the room server could not start or a room operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    /// Binding the UDP sockets failed.
    #[error("binding the room's UDP socket on {address}: {source}")]
    Bind {
        /// What was bound.
        address: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// No DTLS certificate could be generated.
    #[error("generating the DTLS certificate failed")]
    Certificate,
    /// The server is shutting down.
    #[error("the room server is shutting down")]
    ShuttingDown,
    /// The room closed while the request was in flight.
    #[error("the room closed")]
    RoomClosed,
    /// The room's queue for in-process participants is full (the room is behind): what was
    /// handed over without waiting was dropped.
    #[error("the room is busy; dropped")]
    Busy,
    /// The room has as many participants as its `max_participants` allows (LiveKit's words).
    #[error("room has exceeded its max participants")]
    Full,
    /// A local participant command failed.
    #[error(transparent)]
    Local(#[from] crate::core::LocalError),
    /// The connection to a room on another server failed, or that server refused a command.
    #[error("external room: {0}")]
    Client(#[from] crate::client::ClientError),
}

/// Options for joining a room in-process.
#[derive(Debug, Clone)]
pub struct LocalJoinOptions {
    /// Identity (unique in the room; joining with a taken identity replaces the holder).
    pub identity: String,
    /// Display name.
    pub name: String,
    /// Kind; the session runtime joins as [`ParticipantKind::Agent`].
    pub kind: ParticipantKind,
    /// Initial metadata.
    pub metadata: String,
    /// Initial attributes.
    pub attributes: std::collections::BTreeMap<String, String>,
}

struct RoomEntry {
    id: RoomId,
    sender: mpsc::Sender<RoomCommand>,
    posts: mpsc::Sender<LocalPost>,
}

struct Inner {
    credentials: RoomCredentials,
    config: RoomServerConfig,
    settings: Arc<MediaSettings>,
    mux: Arc<UdpMux>,
    rooms: Mutex<HashMap<String, RoomEntry>>,
    next_room_id: AtomicU64,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    /// The webhook senders, when URLs are configured; they outlive the rooms (see `shutdown`).
    webhooks: Option<Arc<Webhooks>>,
    webhook_tasks: TaskTracker,
    webhook_drain: CancellationToken,
    /// Agent dispatch and the agent workers (`/agent`).
    agents: AgentDispatch,
    /// What `livekit.SIP` dials through, once the server's phone service installed it; taken at
    /// shutdown (the dialer holds this server: the pair would otherwise keep each other alive).
    sip: Mutex<Option<Arc<dyn SipDialer>>>,
}

/// The embedded LiveKit-compatible room server. Cheap to clone.
#[derive(Clone)]
pub struct RoomServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RoomServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomServer").field("udp", &self.udp_addrs()).finish_non_exhaustive()
    }
}

static CRYPTO: Once = Once::new();

impl RoomServer {
    /// Installs the dialer behind LiveKit's SIP service (`CreateSIPParticipant`); until then
    /// `livekit.SIP` answers that dial-out is not configured. A second call replaces the first.
    pub fn set_sip_dialer(&self, dialer: Arc<dyn SipDialer>) {
        *self.inner.sip.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(dialer);
    }

    pub(crate) fn sip_dialer(&self) -> Option<Arc<dyn SipDialer>> {
        self.inner.sip.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Binds the UDP sockets and starts their receive loops. Rooms are created on demand.
    pub async fn start(config: RoomServerConfig, credentials: RoomCredentials) -> Result<RoomServer, RoomError> {
        CRYPTO.call_once(|| str0m::crypto::from_feature_flags().install_process_default());
        let ips = if config.node_ips.is_empty() { default_node_ips() } else { config.node_ips.clone() };
        let mux = UdpMux::bind(&ips, config.udp_port, &config.public_ips)
            .await
            .map_err(|source| RoomError::Bind { address: format!("{ips:?} port {}", config.udp_port), source })?;
        let dtls_cert =
            str0m::crypto::from_feature_flags().dtls_provider.generate_certificate().ok_or(RoomError::Certificate)?;
        let settings = Arc::new(MediaSettings {
            candidates: mux.local_addrs(),
            dtls_cert,
            ping_interval: config.ping_interval_seconds.max(1),
            ping_timeout: config.ping_timeout_seconds.max(2),
            node_id: format!("ND_{}", std::process::id()),
            webhooks: !config.webhooks.urls.is_empty(),
        });
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        mux.spawn_receivers(&tasks, shutdown.clone());
        let (webhook_tasks, webhook_drain) = (TaskTracker::new(), CancellationToken::new());
        let webhooks = Webhooks::start(&config.webhooks, credentials.clone(), &webhook_tasks, webhook_drain.clone());
        let agents = AgentDispatch::start(credentials.clone(), config.agent_answer_timeout, &tasks, shutdown.clone());
        Ok(RoomServer {
            inner: Arc::new(Inner {
                credentials,
                config,
                settings,
                mux,
                rooms: Mutex::new(HashMap::new()),
                next_room_id: AtomicU64::new(1),
                shutdown,
                tasks,
                webhooks,
                webhook_tasks,
                webhook_drain,
                agents,
                sip: Mutex::new(None),
            }),
        })
    }

    /// The signalling routes (`/rtc`, `/rtc/validate`, `/rtc/v1…`) and LiveKit's server API
    /// (`/twirp/livekit.RoomService/…`); mount them at the path of
    /// the room URL handed to clients (e.g. `/room`).
    pub fn router(&self) -> axum::Router {
        crate::signal::router(self.clone())
            .merge(crate::twirp::router(self.clone()))
            .merge(crate::agents::socket::router(self.clone()))
    }

    /// LiveKit's server API alone (`/twirp/livekit.<Service>/<Method>`), for the root of the
    /// origin: the Node server SDK posts there whatever path its URL has (the Python SDK keeps the
    /// path and reaches [`RoomServer::router`]'s copy).
    pub fn server_api_router(&self) -> axum::Router {
        crate::twirp::router(self.clone())
    }

    /// The UDP addresses advertised to clients.
    pub fn udp_addrs(&self) -> Vec<SocketAddr> {
        self.inner.settings.candidates.clone()
    }

    /// Token verification for joins.
    pub fn credentials(&self) -> &RoomCredentials {
        &self.inner.credentials
    }

    /// Agent dispatch (the server API's `AgentDispatchService`, the `/agent` workers).
    pub(crate) fn agent_dispatch(&self) -> &AgentDispatch {
        &self.inner.agents
    }

    /// What the server says of itself.
    pub(crate) fn server_info(&self) -> proto::ServerInfo {
        self.inner.settings.server_info()
    }

    pub(crate) fn ping_timeout_seconds(&self) -> i32 {
        self.inner.settings.ping_timeout
    }

    /// Names of the rooms that are open now.
    pub fn room_names(&self) -> Vec<String> {
        let rooms = self.inner.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut names: Vec<String> = rooms.keys().cloned().collect();
        names.sort();
        names
    }

    /// How many rooms are open now (for metrics).
    pub fn room_count(&self) -> usize {
        self.inner.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Known UDP routes (ufrags, learned addresses); for tests and metrics.
    pub fn udp_route_count(&self) -> (usize, usize) {
        self.inner.mux.route_count()
    }

    /// The command channel of an open room, without creating one.
    fn existing_room(&self, name: &str) -> Option<mpsc::Sender<RoomCommand>> {
        let rooms = self.inner.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        rooms.get(name).map(|entry| entry.sender.clone()).filter(|sender| !sender.is_closed())
    }

    /// The room's command and post channels, creating the room if it does not exist (with
    /// `options` when given: a `CreateRoom`, a token's `roomConfig`), and whether it did.
    fn open_room(
        &self,
        name: &str,
        options: Option<&RoomOptions>,
    ) -> Result<(mpsc::Sender<RoomCommand>, mpsc::Sender<LocalPost>, bool), RoomError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(RoomError::ShuttingDown);
        }
        let mut rooms = self.inner.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = rooms.get(name)
            && !entry.sender.is_closed()
        {
            return Ok((entry.sender.clone(), entry.posts.clone(), false));
        }
        let id = self.inner.next_room_id.fetch_add(1, Ordering::Relaxed);
        let (sender, commands) = mpsc::channel(ROOM_QUEUE);
        let (post_sender, posts) = mpsc::channel(POST_QUEUE);
        let weak = Arc::downgrade(&self.inner);
        let room_name = name.to_owned();
        let mut core = RoomCore::new(
            Instant::now(),
            name.to_owned(),
            unix_ms(),
            self.inner.settings.clone(),
            Ids::from_entropy(),
            self.inner.config.empty_timeout,
        );
        if let Some(options) = options {
            core.apply_options(options);
        }
        core.opened();
        let agents = options.map(|options| options.agents.clone()).unwrap_or_default();
        self.inner.agents.room_opened(core.describe().room, agents);
        let dispatch = self.inner.agents.clone();
        let actor = RoomActor {
            id,
            name: name.to_owned(),
            core,
            webhooks: self.inner.webhooks.clone(),
            dispatch: dispatch.clone(),
            commands,
            sender: sender.clone(),
            posts,
            mux: self.inner.mux.clone(),
            datagrams_dropped: Arc::default(),
            shutdown: self.inner.shutdown.clone(),
            on_exit: Box::new(move |id| {
                if let Some(inner) = weak.upgrade() {
                    let mut rooms = inner.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    // Not a newer room of the same name: this one's dispatches end with it.
                    if rooms.get(&room_name).is_some_and(|entry| entry.id == id) {
                        rooms.remove(&room_name);
                        dispatch.room_closed(&room_name);
                    }
                }
            }),
        };
        self.inner.tasks.spawn(actor.run());
        rooms.insert(name.to_owned(), RoomEntry { id, sender: sender.clone(), posts: post_sender.clone() });
        Ok((sender, post_sender, true))
    }

    /// Server API `CreateRoom`: opens `name` with `options`, or, as LiveKit does, leaves a room
    /// that is already open as it is; answers the room either way.
    pub async fn create_room(&self, name: &str, options: RoomOptions) -> Result<RoomDescription, RoomError> {
        for _ in 0..2 {
            let (sender, _, _) = self.open_room(name, Some(&options))?;
            if let Some(description) = describe(&sender).await {
                return Ok(description);
            }
        }
        Err(RoomError::RoomClosed)
    }

    /// Carries out a server API command in `room`; `None` when the room is not open.
    pub(crate) async fn admin(&self, room: &str, command: AdminCommand) -> Option<Result<AdminAnswer, AdminError>> {
        ask(&self.existing_room(room)?, |reply| RoomCommand::Admin { command, reply }).await
    }

    /// Server API `PerformRpc`: calls `method` on `destination` in `room` as the server (no
    /// caller identity); `None` when the room is not open.
    pub(crate) async fn perform_rpc(
        &self,
        room: &str,
        destination: &str,
        method: &str,
        payload: &str,
        response_timeout: Duration,
    ) -> Option<Result<String, crate::local::RpcError>> {
        let sender = self.existing_room(room)?;
        Some(crate::rpc::perform(&sender, SERVER_KEY, destination, method, payload, response_timeout).await)
    }

    /// Whether an open room `name` has no place for `request` (its `max_participants`).
    pub(crate) async fn is_full_for(&self, name: &str, request: &JoinRequest) -> bool {
        let Some(sender) = self.existing_room(name) else { return false };
        ask(&sender, |reply| RoomCommand::IsFull { request: request.clone(), reply }).await.unwrap_or(false)
    }

    /// The room and everyone in it, if it is open (server API: `ListRooms`, `ListParticipants`).
    pub async fn describe_room(&self, name: &str) -> Option<RoomDescription> {
        describe(&self.existing_room(name)?).await
    }

    /// Sends a join to the room, recreating the room once if it closed in between; a room the
    /// join creates gets `options` (a token's `roomConfig`).
    async fn join(
        &self,
        room: &str,
        options: Option<&RoomOptions>,
        make: impl Fn(oneshot::Sender<Option<Key>>) -> RoomCommand,
    ) -> Result<(mpsc::Sender<RoomCommand>, mpsc::Sender<LocalPost>, Key), RoomError> {
        for _ in 0..2 {
            let (sender, posts, _) = self.open_room(room, options)?;
            let (reply, key) = oneshot::channel();
            if sender.send(make(reply)).await.is_err() {
                continue;
            }
            match key.await {
                Ok(Some(key)) => return Ok((sender, posts, key)),
                Ok(None) => return Err(RoomError::Full),
                Err(_) => {}
            }
        }
        Err(RoomError::RoomClosed)
    }

    pub(crate) async fn join_remote(
        &self,
        room: &str,
        request: JoinRequest,
        signal: mpsc::Sender<proto::signal_response::Message>,
        options: Option<&RoomOptions>,
    ) -> Result<(RoomLink, Key), RoomError> {
        let (sender, _, key) = self
            .join(room, options, |reply| RoomCommand::JoinRemote {
                request: request.clone(),
                signal: signal.clone(),
                reply,
            })
            .await?;
        Ok((RoomLink { sender }, key))
    }

    /// Joins `room` in-process (creating it if needed), with no WebRTC hop: audio arrives as
    /// Opus frames straight from the publishers' connections.
    pub async fn join_local(&self, room: &str, options: LocalJoinOptions) -> Result<LocalParticipant, RoomError> {
        let request = JoinRequest {
            identity: options.identity.clone(),
            name: options.name,
            metadata: options.metadata,
            attributes: options.attributes,
            kind: options.kind,
            permissions: Permissions::ALL,
            auto_subscribe: true,
            client_protocol: 0,
        };
        let (events, receiver) = mpsc::channel(LOCAL_QUEUE);
        let shared = Arc::new(LocalShared::default());
        let (sender, posts, key) = self
            .join(room, None, |reply| RoomCommand::JoinLocal {
                request: request.clone(),
                events: events.clone(),
                shared: shared.clone(),
                reply,
            })
            .await?;
        Ok(LocalParticipant::new(room.to_owned(), options.identity, key, (sender, posts), receiver, shared))
    }

    /// Closes a room: every participant gets a leave with `reason`. Returns whether it existed.
    pub async fn close_room(&self, room: &str, reason: LeaveReason) -> bool {
        match self.existing_room(room) {
            Some(sender) => sender.send(RoomCommand::Close { reason }).await.is_ok(),
            None => false,
        }
    }

    /// Closes every room (participants get a leave with `SERVER_SHUTDOWN`) and stops the UDP
    /// loops, then gives the webhooks the rooms queued as they closed their last chance
    /// ([`WebhookConfig::drain_for`]); returns when every task has ended.
    pub async fn shutdown(&self) {
        self.inner.sip.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        self.inner.webhook_drain.cancel();
        self.inner.webhook_tasks.close();
        self.inner.webhook_tasks.wait().await;
    }
}

async fn describe(sender: &mpsc::Sender<RoomCommand>) -> Option<RoomDescription> {
    ask(sender, |reply| RoomCommand::Describe { reply }).await
}

/// Sends a room a command that carries its reply channel and waits for the answer; `None` when
/// the room closed first.
async fn ask<T>(
    sender: &mpsc::Sender<RoomCommand>,
    command: impl FnOnce(oneshot::Sender<T>) -> RoomCommand,
) -> Option<T> {
    let (reply, answer) = oneshot::channel();
    sender.send(command(reply)).await.ok()?;
    answer.await.ok()
}

/// Loopback (local clients, tests) plus the address of the interface holding the default route
/// (found by "connecting" a UDP socket, which sends nothing).
fn default_node_ips() -> Vec<IpAddr> {
    let mut ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    let routed = StdUdpSocket::bind("0.0.0.0:0")
        .and_then(|socket| socket.connect("192.0.2.1:9").map(|()| socket))
        .and_then(|socket| socket.local_addr());
    if let Ok(address) = routed {
        let ip = address.ip();
        if !ip.is_loopback() && !ip.is_unspecified() {
            ips.push(ip);
        }
    }
    ips
}
