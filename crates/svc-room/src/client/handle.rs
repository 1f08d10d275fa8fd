//! The public face of the client: [`RoomClient`], its options, events and errors. Every call
//! becomes a [`Command`] on a bounded channel to the IO shell ([`super::shell`]), which owns the
//! protocol state; nothing here touches a socket or the core.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use livekit_protocol as proto;
use tokio::sync::{mpsc, oneshot};

use super::core::{DataRequest, MAX_DATA_PAYLOAD};
use crate::{RpcError, RpcInvocation};
/// How [`RoomClient::connect`] connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Bound on the whole connect: WebSocket, join response, both peer connections up and the
    /// data channels open.
    pub connect_timeout: Duration,
    /// Bound on [`RoomClient::publish_audio`] (`add_track` → `track_published` → negotiated).
    pub publish_timeout: Duration,
    /// Local IP for the two UDP sockets (our ICE host candidates). `None`: the address the
    /// system would use to reach the server's host (loopback for a loopback server).
    pub udp_ip: Option<IpAddr>,
    /// Subscribe to every track in the room (`auto_subscribe=1`).
    pub auto_subscribe: bool,
    /// Events buffered for the application. Audio frames beyond it are dropped (counted in
    /// [`ClientStats::audio_frames_dropped`]), other events too (counted in
    /// [`ClientStats::events_dropped`]): the IO task never waits for the application.
    pub event_queue: usize,
    /// RPC methods the application answers ([`ClientEvent::RpcRequest`]); every request is
    /// acknowledged, and one for another method refused, as LiveKit's SDKs do.
    pub rpc_methods: Vec<String>,
    /// What a `wss://` server's certificate is verified with; `None`: the webpki roots
    /// (`svc_http::tls_config`), as for every other outbound connection of svc's.
    pub tls: Option<std::sync::Arc<svc_http::TlsClientConfig>>,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            connect_timeout: Duration::from_secs(10),
            publish_timeout: Duration::from_secs(10),
            udp_ip: None,
            auto_subscribe: true,
            event_queue: 4096,
            rpc_methods: Vec::new(),
            tls: None,
        }
    }
}

/// Why a client operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The URL is not a `ws://` or `wss://` URL with a host.
    #[error("invalid room URL {0:?}: expected ws://host[:port][/path] or wss://…")]
    Url(String),
    /// The WebSocket could not be opened (refused, HTTP error such as 401, …).
    #[error("signal connection failed: {0}")]
    Connect(String),
    /// A bounded wait ran out.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// The server sent a leave instead of (or right after) the join response.
    #[error("the server refused the join: {0:?}")]
    Refused(proto::DisconnectReason),
    /// The server broke the protocol (no join first, bad SDP, …).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A socket failed.
    #[error("io: {0}")]
    Io(String),
    /// A peer connection failed.
    #[error("peer connection: {0}")]
    Rtc(String),
    /// The client is closed (left, removed, or the connection broke).
    #[error("the client is closed")]
    Closed,
    /// The command queue is full (audio is sent faster than the IO task can write it).
    #[error("command queue full")]
    QueueFull,
    /// No audio track was published yet.
    #[error("no audio track published")]
    NotPublished,
    /// Only one audio track per client.
    #[error("an audio track is already published")]
    AlreadyPublished,
    /// The data channel is not open.
    #[error("data channel not open")]
    ChannelNotOpen,
    /// The data payload is over the limit.
    #[error("data payload of {0} bytes exceeds {MAX_DATA_PAYLOAD}")]
    PacketTooLarge(usize),
    /// The SCTP send buffer is full; the packet was not sent.
    #[error("data channel buffer full")]
    BufferFull,
    /// The server refused a request (`RequestResponse`: not allowed, over a limit, …).
    #[error("the server refused the request: {0}")]
    Rejected(String),
}

/// What the join response told us.
#[derive(Debug, Clone)]
pub struct JoinInfo {
    /// The room's name.
    pub room_name: String,
    /// The room's `RM_…` id.
    pub room_sid: String,
    /// Our `PA_…` id.
    pub participant_sid: String,
    /// Our identity (from the token).
    pub identity: String,
    /// `server_info.version`.
    pub server_version: String,
    /// Seconds between our pings.
    pub ping_interval: Duration,
    /// Silence after which we give up on the server.
    pub ping_timeout: Duration,
    /// Who was in the room when we joined.
    pub other_participants: Vec<proto::ParticipantInfo>,
}

/// One Opus frame of a subscribed track, as it arrived.
#[derive(Debug, Clone)]
pub struct ClientAudioFrame {
    /// Publisher's `PA_…` id (from the m-line's msid).
    pub participant_sid: Arc<str>,
    /// Publisher's identity (from participant updates; empty if unknown).
    pub participant_identity: Arc<str>,
    /// The track's `TR_…` id.
    pub track_sid: Arc<str>,
    /// RTP timestamp, 48 kHz clock, extended to 64 bits.
    pub rtp_timestamp: u64,
    /// When the datagram carrying it was read from the socket.
    pub received_at: Instant,
    /// The Opus payload.
    pub opus: Arc<[u8]>,
}

/// A user data packet from another participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientData {
    /// Sender identity, as filled in by the server.
    pub from_identity: String,
    /// Sender `PA_…` id.
    pub from_sid: String,
    /// Topic, if the sender set one.
    pub topic: Option<String>,
    /// Payload.
    pub payload: Vec<u8>,
    /// Whether it came over the reliable channel.
    pub reliable: bool,
}

/// What the client sees happen.
#[derive(Debug, Clone)]
pub enum ClientEvent {
    /// A participant's info changed (joined, attributes, tracks, left: `state` DISCONNECTED).
    /// Updates older than what we already have are dropped, as the SDKs do.
    ParticipantUpdate(proto::ParticipantInfo),
    /// A remote track was added to our subscriber connection; its audio follows as
    /// [`ClientEvent::AudioFrame`].
    TrackSubscribed {
        /// Publisher `PA_…` id.
        participant_sid: String,
        /// Publisher identity (empty if unknown).
        participant_identity: String,
        /// Track `TR_…` id.
        track_sid: String,
    },
    /// The server says our published track reached its first subscriber.
    OwnTrackSubscribed {
        /// Our track's `TR_…` id.
        track_sid: String,
    },
    /// One received audio frame.
    AudioFrame(ClientAudioFrame),
    /// A user data packet.
    Data(ClientData),
    /// An RPC request for one of [`ClientOptions::rpc_methods`], already acknowledged; answer
    /// it with [`RoomClient::try_respond_rpc`] within its `response_timeout`.
    RpcRequest(RpcInvocation),
    /// Something handed over without waiting ([`RoomClient::try_send_data`],
    /// [`RoomClient::try_set_attributes`], [`RoomClient::try_respond_rpc`]) failed.
    CommandFailed {
        /// What it was.
        command: &'static str,
        /// Why.
        error: ClientError,
    },
    /// Any other data packet (RPC ack/response, transcription, …), as sent by the room.
    Packet(proto::DataPacket),
    /// The server told us to leave.
    Left {
        /// Why.
        reason: proto::DisconnectReason,
        /// Whether the server suggests reconnecting.
        can_reconnect: bool,
    },
    /// The client is closed; the last event.
    Closed {
        /// `None` after a leave (ours or the server's); otherwise what broke.
        error: Option<ClientError>,
    },
}

/// Counters of one client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Audio frames written to the publisher connection.
    pub audio_frames_sent: u64,
    /// Audio frames the application asked to send that could not be written (not published or
    /// not connected).
    pub audio_frames_unsent: u64,
    /// Audio frames received on the subscriber connection.
    pub audio_frames_received: u64,
    /// Received audio frames dropped because the application did not read events.
    pub audio_frames_dropped: u64,
    /// Other events dropped because the application did not read events.
    pub events_dropped: u64,
    /// Data packets received.
    pub data_packets_received: u64,
    /// Datagrams read from the two sockets.
    pub datagrams_received: u64,
    /// Datagrams written to the two sockets.
    pub datagrams_sent: u64,
    /// Last signalling round trip measured by ping_req/pong_resp, in ms.
    pub rtt_ms: Option<i64>,
}

/// Commands from the handles to the IO task.
pub(super) enum Command {
    PublishAudio {
        name: String,
        reply: oneshot::Sender<Result<String, ClientError>>,
    },
    WriteAudio {
        rtp_timestamp: u64,
        opus: Arc<[u8]>,
    },
    SendData {
        packet: DataRequest,
        reply: oneshot::Sender<Result<(), ClientError>>,
    },
    /// Handed over without waiting; a failure comes back as [`ClientEvent::CommandFailed`].
    Post(Post),
    Stats {
        reply: oneshot::Sender<ClientStats>,
    },
    Leave,
}

/// A command nobody waits for.
pub(super) enum Post {
    Data(DataRequest),
    Attributes(HashMap<String, String>),
    RpcResponse { caller: String, request_id: String, result: Result<String, RpcError> },
}

impl Post {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Post::Data(_) => "send_data",
            Post::Attributes(_) => "set_attributes",
            Post::RpcResponse { .. } => "respond_rpc",
        }
    }
}

/// A LiveKit client connected to one room. Dropping it leaves the room.
pub struct RoomClient {
    pub(super) info: JoinInfo,
    pub(super) commands: mpsc::Sender<Command>,
    pub(super) events: mpsc::Receiver<ClientEvent>,
    pub(super) publish_timeout: Duration,
    pub(super) task: Option<tokio::task::JoinHandle<()>>,
    /// [`ClientStats::audio_frames_dropped`], counted here only (the IO task adds to it, and
    /// fills it into the stats it reports), so the handle reads it without asking.
    pub(super) audio_dropped: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for RoomClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomClient")
            .field("room", &self.info.room_name)
            .field("identity", &self.info.identity)
            .field("sid", &self.info.participant_sid)
            .finish_non_exhaustive()
    }
}

/// The event stream of a [`RoomClient`], split off with [`RoomClient::split_events`].
#[derive(Debug)]
pub struct ClientEvents {
    events: mpsc::Receiver<ClientEvent>,
}

impl ClientEvents {
    /// The next event; `None` after [`ClientEvent::Closed`].
    pub async fn next(&mut self) -> Option<ClientEvent> {
        self.events.recv().await
    }

    /// The next event if one is queued.
    pub fn try_next(&mut self) -> Option<ClientEvent> {
        self.events.try_recv().ok()
    }
}

/// A cheap, cloneable handle that sends audio frames of a [`RoomClient`] from another task.
#[derive(Clone)]
pub struct AudioSender {
    commands: mpsc::Sender<Command>,
}

impl std::fmt::Debug for AudioSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudioSender").finish_non_exhaustive()
    }
}

impl AudioSender {
    /// Sends one Opus frame of the published track with RTP timestamp `rtp_timestamp` (48 kHz
    /// clock; advance it by 960 per 20 ms frame). Never waits: the caller paces the frames.
    pub fn send_opus(&self, rtp_timestamp: u64, opus: impl Into<Arc<[u8]>>) -> Result<(), ClientError> {
        let command = Command::WriteAudio { rtp_timestamp, opus: opus.into() };
        self.commands.try_send(command).map_err(queue_refusal)
    }
}

impl RoomClient {
    /// Connects to the room at `url` (the LiveKit URL, e.g. `ws://host:8080/room`) with a join
    /// token, and returns once both peer connections are up and the data channels are open.
    pub async fn connect(url: &str, token: &str, options: ClientOptions) -> Result<RoomClient, ClientError> {
        let timeout = options.connect_timeout;
        tokio::time::timeout(timeout, super::shell::connect(url, token, options))
            .await
            .map_err(|_| ClientError::Timeout("connect"))?
    }

    /// What the join response said.
    pub fn info(&self) -> &JoinInfo {
        &self.info
    }

    /// Publishes our (one) microphone audio track: `add_track`, `track_published`, then the
    /// publisher renegotiation with the Opus m-line. Returns the track's `TR_…` id.
    pub async fn publish_audio(&self, name: &str) -> Result<String, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::PublishAudio { name: name.to_owned(), reply })
            .await
            .map_err(|_| ClientError::Closed)?;
        match tokio::time::timeout(self.publish_timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(ClientError::Closed),
            Err(_) => Err(ClientError::Timeout("track_published and the publisher answer")),
        }
    }

    /// A handle for sending audio frames (see [`AudioSender::send_opus`]).
    pub fn audio_sender(&self) -> AudioSender {
        AudioSender { commands: self.commands.clone() }
    }

    /// Sends one Opus frame (see [`AudioSender::send_opus`]).
    pub fn send_opus(&self, rtp_timestamp: u64, opus: impl Into<Arc<[u8]>>) -> Result<(), ClientError> {
        self.audio_sender().send_opus(rtp_timestamp, opus)
    }

    /// Sends a user data packet on the reliable or lossy channel, to `destinations` (identities)
    /// or everyone else when empty.
    pub async fn send_data(
        &self,
        payload: impl Into<Vec<u8>>,
        topic: Option<&str>,
        reliable: bool,
        destinations: &[String],
    ) -> Result<(), ClientError> {
        let packet = DataRequest::new(payload.into(), topic, reliable, destinations);
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::SendData { packet, reply }).await.map_err(|_| ClientError::Closed)?;
        answer.await.map_err(|_| ClientError::Closed)?
    }

    /// [`RoomClient::send_data`] without waiting: only a full command queue or a closed client
    /// is refused here; what fails later comes back as [`ClientEvent::CommandFailed`].
    pub fn try_send_data(
        &self,
        payload: impl Into<Vec<u8>>,
        topic: Option<&str>,
        reliable: bool,
        destinations: &[String],
    ) -> Result<(), ClientError> {
        self.post(Post::Data(DataRequest::new(payload.into(), topic, reliable, destinations)))
    }

    /// Merges `attributes` into ours (an empty value deletes a key), without waiting; a refusal
    /// (the token does not grant `canUpdateOwnMetadata`, a limit) comes back as
    /// [`ClientEvent::CommandFailed`].
    pub fn try_set_attributes(&self, attributes: HashMap<String, String>) -> Result<(), ClientError> {
        self.post(Post::Attributes(attributes))
    }

    /// Answers an RPC request ([`ClientEvent::RpcRequest`]) with a payload or an error, without
    /// waiting; failures as for [`RoomClient::try_send_data`].
    pub fn try_respond_rpc(
        &self,
        caller: &str,
        request_id: &str,
        result: Result<String, RpcError>,
    ) -> Result<(), ClientError> {
        self.post(Post::RpcResponse { caller: caller.to_owned(), request_id: request_id.to_owned(), result })
    }

    fn post(&self, post: Post) -> Result<(), ClientError> {
        self.commands.try_send(Command::Post(post)).map_err(queue_refusal)
    }

    /// The next event; `None` after [`ClientEvent::Closed`].
    pub async fn next_event(&mut self) -> Option<ClientEvent> {
        self.events.recv().await
    }

    /// The next event if one is queued.
    pub fn try_next_event(&mut self) -> Option<ClientEvent> {
        self.events.try_recv().ok()
    }

    /// Splits off the event stream, so that one task reads events while another sends; the
    /// returned client's own [`RoomClient::next_event`] then yields `None`.
    pub fn split_events(mut self) -> (RoomClient, ClientEvents) {
        let (_, closed) = mpsc::channel(1);
        let events = std::mem::replace(&mut self.events, closed);
        (self, ClientEvents { events })
    }

    /// Received audio frames dropped because the application did not read events, so far
    /// (as [`ClientStats::audio_frames_dropped`], without waiting for the IO task).
    pub fn audio_frames_dropped(&self) -> u64 {
        self.audio_dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The client's counters.
    pub async fn stats(&self) -> Result<ClientStats, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Stats { reply }).await.map_err(|_| ClientError::Closed)?;
        answer.await.map_err(|_| ClientError::Closed)
    }

    /// Asks the IO task to leave the room without waiting for it (see [`RoomClient::leave`]).
    pub fn try_leave(&self) -> Result<(), ClientError> {
        self.commands.try_send(Command::Leave).map_err(queue_refusal)
    }

    /// Leaves the room (a leave with CLIENT_INITIATED, then the WebSocket close) and waits up
    /// to two seconds for the IO task to finish.
    pub async fn leave(mut self) {
        // The client task already ended: it has left.
        let _ = self.commands.send(Command::Leave).await;
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for RoomClient {
    fn drop(&mut self) {
        // Ask the IO task to leave; should the queue be full, it leaves anyway once the last
        // handle is gone and its command channel closes.
        let _ = self.commands.try_send(Command::Leave);
    }
}

/// Why the IO task's queue refused a command handed over without waiting.
fn queue_refusal<T>(error: mpsc::error::TrySendError<T>) -> ClientError {
    match error {
        mpsc::error::TrySendError::Full(_) => ClientError::QueueFull,
        mpsc::error::TrySendError::Closed(_) => ClientError::Closed,
    }
}
