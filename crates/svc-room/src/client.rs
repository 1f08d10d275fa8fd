//! [`RoomClient`]: a LiveKit client in Rust over str0m — what an official SDK does on the wire,
//! reduced to audio and data.
//!
//! It speaks LiveKit's v0 signalling (research/livekit.md §2–§3, §7): a WebSocket to
//! `<url>/rtc?access_token=…&auto_subscribe=1&protocol=16&client_protocol=0&sdk=rust` carrying
//! binary protobuf `SignalRequest`/`SignalResponse`, and two peer connections:
//!
//! - the **subscriber** PC, offered by the server (which is ICE-lite): we answer with a full-ICE,
//!   controlling str0m [`Rtc`]. It carries the server-created `_reliable`/`_lossy` data channels
//!   and one sendonly Opus m-line per subscribed track, whose msid is `<PA_sid>|<TR_sid>`.
//! - the **publisher** PC, offered by us right after the join (LiveKit's "fast publish"): the
//!   `_reliable` (ordered, reliable) and `_lossy` (unordered, no retransmits) data channels, and,
//!   after [`RoomClient::publish_audio`] sent `add_track` and got `track_published`, a sendonly
//!   Opus m-line whose msid track id is the `add_track` `cid` (how the server binds the m-line to
//!   the publication).
//!
//! Each PC has its own UDP socket: the server tells a participant's two connections apart by the
//! client's address, as it does for browsers.
//!
//! # Shape
//!
//! The protocol lives in `ClientCore`, a sans-IO state machine (no sockets, no clock: every
//! input carries `now`; outputs are polled), in the style of the room's own [`crate::core`].
//! One tokio task — the IO shell — owns the core, the WebSocket's write half and both UDP
//! sockets; a small reader task decodes incoming signal frames for it, and the [`RoomClient`]
//! handle talks to it over a bounded channel. str0m's rule holds in one place:
//! after every mutation of an `Rtc`, `ClientCore::drain` polls it until `Timeout`.
//!
//! # Use
//!
//! ```no_run
//! # async fn demo(token: String, opus_frames: Vec<Vec<u8>>) -> Result<(), svc_room::client::ClientError> {
//! use svc_room::client::{ClientEvent, ClientOptions, RoomClient};
//! let mut client = RoomClient::connect("ws://127.0.0.1:8080/room", &token, ClientOptions::default()).await?;
//! client.publish_audio("microphone").await?;
//! let audio = client.audio_sender();
//! for (k, frame) in opus_frames.into_iter().enumerate() {
//!     audio.send_opus(960 * k as u64, frame)?; // one 20 ms frame every 20 ms, paced by the caller
//! }
//! client.send_data(b"hello".to_vec(), Some("chat"), true, &[]).await?;
//! while let Some(event) = client.next_event().await {
//!     if let ClientEvent::AudioFrame(frame) = event { /* frame.opus, frame.received_at */ }
//! }
//! # Ok(()) }
//! ```
//!
//! Not supported (yet): TLS (`wss://`; plain `ws://` only), resume/reconnect, TURN, video,
//! RPC helpers (RPC packets arrive as [`ClientEvent::Packet`]), and more than one audio track.
//! This is also the seed of the "external LiveKit" path (agent joins a real LiveKit server).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use livekit_protocol as proto;
use prost::Message as _;
use str0m::change::{SdpAnswer, SdpOffer, SdpPendingOffer};
use str0m::channel::{ChannelConfig, ChannelId, Reliability};
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive, Transmit};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// Signalling protocol version we announce (v0 without the packet trailer of 17).
const PROTOCOL_VERSION: u32 = 16;
/// Commands queued from the handle to the IO task (audio frames included).
const COMMAND_QUEUE: usize = 512;
/// Signal messages read ahead of the IO task.
const SIGNAL_QUEUE: usize = 64;
/// Largest datagram read (WebRTC keeps packets under the path MTU).
const MAX_DATAGRAM: usize = 2048;
/// Datagrams handled per socket wake-up before the task looks at its other inputs again.
const RECEIVE_BATCH: usize = 32;
/// Largest data packet we send (the room forwards up to 64 KiB).
const MAX_DATA_PAYLOAD: usize = 60_000;
/// The msid stream id of our published audio.
const STREAM_ID: &str = "svc-client-stream";

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
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            connect_timeout: Duration::from_secs(10),
            publish_timeout: Duration::from_secs(10),
            udp_ip: None,
            auto_subscribe: true,
            event_queue: 4096,
        }
    }
}

/// Why a client operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The URL is not a `ws://` URL with a host.
    #[error("invalid room URL {0:?}: expected ws://host[:port][/path]")]
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
    /// Any other data packet (RPC request/ack/response, transcription, …), as sent by the room.
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

/// Which of our two peer connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    /// We offer; our microphone and our outgoing data.
    Publisher,
    /// The server offers; subscribed audio and incoming data.
    Subscriber,
}

/// Commands from the handles to the IO task.
enum Command {
    PublishAudio { name: String, reply: oneshot::Sender<Result<String, ClientError>> },
    WriteAudio { rtp_timestamp: u64, opus: Arc<[u8]> },
    SendData { packet: DataRequest, reply: oneshot::Sender<Result<(), ClientError>> },
    Stats { reply: oneshot::Sender<ClientStats> },
    Leave,
}

struct DataRequest {
    payload: Vec<u8>,
    topic: Option<String>,
    reliable: bool,
    destinations: Vec<String>,
}

/// A LiveKit client connected to one room. Dropping it leaves the room.
pub struct RoomClient {
    info: JoinInfo,
    commands: mpsc::Sender<Command>,
    events: mpsc::Receiver<ClientEvent>,
    publish_timeout: Duration,
    task: Option<tokio::task::JoinHandle<()>>,
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
        self.commands.try_send(command).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => ClientError::QueueFull,
            mpsc::error::TrySendError::Closed(_) => ClientError::Closed,
        })
    }
}

impl RoomClient {
    /// Connects to the room at `url` (the LiveKit URL, e.g. `ws://host:8080/room`) with a join
    /// token, and returns once both peer connections are up and the data channels are open.
    pub async fn connect(url: &str, token: &str, options: ClientOptions) -> Result<RoomClient, ClientError> {
        let timeout = options.connect_timeout;
        tokio::time::timeout(timeout, connect(url, token, options))
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
        let packet = DataRequest {
            payload: payload.into(),
            topic: topic.map(str::to_owned),
            reliable,
            destinations: destinations.to_vec(),
        };
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::SendData { packet, reply }).await.map_err(|_| ClientError::Closed)?;
        answer.await.map_err(|_| ClientError::Closed)?
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

    /// The client's counters.
    pub async fn stats(&self) -> Result<ClientStats, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Stats { reply }).await.map_err(|_| ClientError::Closed)?;
        answer.await.map_err(|_| ClientError::Closed)
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

type WebSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The `/rtc` URL for a LiveKit URL: the path gets `rtc` appended (`ws://h/room` → `ws://h/room/rtc`).
fn signal_url(url: &str, token: &str, auto_subscribe: bool) -> Result<(String, String), ClientError> {
    let rest = url.strip_prefix("ws://").ok_or_else(|| ClientError::Url(url.to_owned()))?;
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(authority, path)| (authority, path));
    if authority.is_empty() {
        return Err(ClientError::Url(url.to_owned()));
    }
    let path = path.split(['?', '#']).next().unwrap_or_default().trim_end_matches('/');
    let prefix = if path.is_empty() { String::new() } else { format!("/{path}") };
    let query = format!(
        "access_token={}&auto_subscribe={}&protocol={PROTOCOL_VERSION}&client_protocol=0&sdk=rust&version={}&adaptive_stream=0",
        percent_encode(token),
        u8::from(auto_subscribe),
        env!("CARGO_PKG_VERSION"),
    );
    Ok((format!("ws://{authority}{prefix}/rtc?{query}"), authority.to_owned()))
}

/// Percent-encodes everything but RFC 3986 unreserved characters (JWTs only need `.`, `-`, `_`).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The local IP the system would use to reach `authority` (`host[:port]`).
async fn route_ip(authority: &str) -> Result<IpAddr, ClientError> {
    let target = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let address = tokio::net::lookup_host(&target)
        .await
        .map_err(|error| ClientError::Connect(format!("resolving {authority}: {error}")))?
        .next()
        .ok_or_else(|| ClientError::Connect(format!("{authority} has no address")))?;
    if address.ip().is_loopback() {
        return Ok(address.ip());
    }
    let unspecified: IpAddr = if address.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { IpAddr::from([0u16; 8]) };
    let probe = std::net::UdpSocket::bind((unspecified, 0)).map_err(|error| ClientError::Io(error.to_string()))?;
    probe.connect(address).map_err(|error| ClientError::Io(error.to_string()))?;
    probe.local_addr().map(|local| local.ip()).map_err(|error| ClientError::Io(error.to_string()))
}

async fn connect(url: &str, token: &str, options: ClientOptions) -> Result<RoomClient, ClientError> {
    let (signal_url, authority) = signal_url(url, token, options.auto_subscribe)?;
    let ip = match options.udp_ip {
        Some(ip) => ip,
        None => route_ip(&authority).await?,
    };
    let publisher_socket =
        UdpSocket::bind((ip, 0)).await.map_err(|error| ClientError::Io(format!("binding udp on {ip}: {error}")))?;
    let subscriber_socket =
        UdpSocket::bind((ip, 0)).await.map_err(|error| ClientError::Io(format!("binding udp on {ip}: {error}")))?;
    let local = |socket: &UdpSocket| socket.local_addr().map_err(|error| ClientError::Io(error.to_string()));
    let (publisher_addr, subscriber_addr) = (local(&publisher_socket)?, local(&subscriber_socket)?);

    // Nagle off: signalling is small request/response messages.
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(signal_url.as_str(), None, true)
        .await
        .map_err(|error| ClientError::Connect(error.to_string()))?;
    let join = match read_signal(&mut ws).await? {
        proto::signal_response::Message::Join(join) => join,
        proto::signal_response::Message::Leave(leave) => {
            return Err(ClientError::Refused(disconnect_reason(leave.reason)));
        }
        other => {
            return Err(ClientError::Protocol(format!(
                "expected the join response first, got {}",
                message_name(&other)
            )));
        }
    };
    let now = Instant::now();
    let (core, info) = ClientCore::new(now, join, publisher_addr, subscriber_addr)?;
    let (commands, command_queue) = mpsc::channel(COMMAND_QUEUE);
    let (events_in, events) = mpsc::channel(options.event_queue.max(16));
    let (ready, is_ready) = oneshot::channel();
    // The signal stream is read on a task of its own: tungstenite zeroes its whole read buffer
    // (128 KiB) on every poll that finds no data, and the IO task wakes for every datagram.
    let (sink, stream) = ws.split();
    let (signals_in, signals) = mpsc::channel(SIGNAL_QUEUE);
    let reader = tokio::spawn(read_signals(stream, signals_in));
    let shell = Shell {
        core,
        sink,
        signals,
        reader,
        publisher_socket,
        subscriber_socket,
        commands: command_queue,
        events: events_in,
        ready: Some(ready),
        publish_reply: None,
    };
    let task = tokio::spawn(shell.run());
    match is_ready.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(error),
        Err(_) => return Err(ClientError::Closed),
    }
    Ok(RoomClient { info, commands, events, publish_timeout: options.publish_timeout, task: Some(task) })
}

/// What the signal reader hands the IO task.
enum SignalInput {
    Message(Box<proto::signal_response::Message>),
    /// The connection ended (with the error, if it broke).
    Closed(Option<String>),
}

async fn read_signals(mut stream: futures_util::stream::SplitStream<WebSocket>, signals: mpsc::Sender<SignalInput>) {
    loop {
        let input = match stream.next().await {
            Some(Ok(WsMessage::Binary(bytes))) => match decode_signal(&bytes) {
                Ok(message) => SignalInput::Message(Box::new(message)),
                // One bad frame is the server's bug, not a reason to drop the call.
                Err(error) => {
                    tracing::debug!(%error, "signal frame ignored");
                    continue;
                }
            },
            Some(Ok(WsMessage::Text(_) | WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_))) => continue,
            Some(Ok(WsMessage::Close(_))) | None => SignalInput::Closed(None),
            Some(Err(error)) => SignalInput::Closed(Some(error.to_string())),
        };
        let closed = matches!(input, SignalInput::Closed(_));
        if signals.send(input).await.is_err() || closed {
            return;
        }
    }
}

async fn read_signal(ws: &mut WebSocket) -> Result<proto::signal_response::Message, ClientError> {
    loop {
        match ws.next().await {
            Some(Ok(WsMessage::Binary(bytes))) => return decode_signal(&bytes),
            Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_))) => continue,
            Some(Ok(WsMessage::Text(_))) => return Err(ClientError::Protocol("text signal frame".to_owned())),
            Some(Ok(WsMessage::Close(frame))) => {
                return Err(ClientError::Connect(format!("closed by the server: {frame:?}")));
            }
            Some(Err(error)) => return Err(ClientError::Connect(error.to_string())),
            None => return Err(ClientError::Connect("closed by the server".to_owned())),
        }
    }
}

fn decode_signal(bytes: &[u8]) -> Result<proto::signal_response::Message, ClientError> {
    proto::SignalResponse::decode(bytes)
        .map_err(|error| ClientError::Protocol(format!("undecodable SignalResponse: {error}")))?
        .message
        .ok_or_else(|| ClientError::Protocol("empty SignalResponse".to_owned()))
}

fn disconnect_reason(value: i32) -> proto::DisconnectReason {
    proto::DisconnectReason::try_from(value).unwrap_or(proto::DisconnectReason::UnknownReason)
}

fn message_name(message: &proto::signal_response::Message) -> String {
    let debug = format!("{message:?}");
    debug.split(['(', ' ', '{']).next().unwrap_or_default().to_owned()
}

fn unix_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
}

// -------------------------------------------------------------------------------------------
// The IO shell

struct Shell {
    core: ClientCore,
    sink: futures_util::stream::SplitSink<WebSocket, WsMessage>,
    signals: mpsc::Receiver<SignalInput>,
    reader: tokio::task::JoinHandle<()>,
    publisher_socket: UdpSocket,
    subscriber_socket: UdpSocket,
    commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<ClientEvent>,
    ready: Option<oneshot::Sender<Result<(), ClientError>>>,
    publish_reply: Option<oneshot::Sender<Result<String, ClientError>>>,
}

impl Shell {
    async fn run(mut self) {
        let mut publisher_buffer = vec![0u8; MAX_DATAGRAM];
        let mut subscriber_buffer = vec![0u8; MAX_DATAGRAM];
        // One timer, moved when the core's deadline moves (a new one per wake-up costs).
        let mut armed = self.core.poll_timeout();
        let timer = tokio::time::sleep_until(armed.unwrap_or_else(far_future).into());
        tokio::pin!(timer);
        let outcome = loop {
            if let Some(outcome) = self.carry_out().await {
                break outcome;
            }
            let wake = self.core.poll_timeout();
            if wake != armed {
                armed = wake;
                timer.as_mut().reset(wake.unwrap_or_else(far_future).into());
            }
            tokio::select! {
                command = self.commands.recv() => {
                    let now = Instant::now();
                    match command {
                        Some(command) => self.handle_command(now, command),
                        // Every handle is gone: leave.
                        None => self.core.leave(),
                    }
                }
                received = self.subscriber_socket.recv_from(&mut subscriber_buffer) => {
                    self.receive(Role::Subscriber, received, &mut subscriber_buffer);
                }
                received = self.publisher_socket.recv_from(&mut publisher_buffer) => {
                    self.receive(Role::Publisher, received, &mut publisher_buffer);
                }
                input = self.signals.recv() => match input {
                    Some(SignalInput::Message(message)) => self.core.handle_signal(Instant::now(), unix_ms(), *message),
                    Some(SignalInput::Closed(error)) => self.core.signal_closed(error),
                    None => self.core.signal_closed(None),
                },
                () = &mut timer, if armed.is_some() => {
                    self.core.handle_timeout(Instant::now(), unix_ms());
                    // A fired timer stays ready: re-arm it whatever the next deadline is.
                    armed = None;
                }
            }
        };
        // Say goodbye properly (a leave may already be queued ahead of this), then close.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.sink.close()).await;
        self.reader.abort();
        self.core.disconnect();
        let error = outcome.clone().unwrap_or(ClientError::Closed);
        if let Some(ready) = self.ready.take() {
            // The caller gave up waiting; nothing to tell it.
            let _ = ready.send(Err(error.clone()));
        }
        if let Some(reply) = self.publish_reply.take() {
            // The caller gave up waiting; nothing to tell it.
            let _ = reply.send(Err(error));
        }
        // A reader that stopped reading does not need the close event.
        let _ = self.events.try_send(ClientEvent::Closed { error: outcome });
    }

    fn handle_command(&mut self, now: Instant, command: Command) {
        match command {
            Command::PublishAudio { name, reply } => {
                if self.publish_reply.is_some() {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(Err(ClientError::AlreadyPublished));
                } else if let Err(error) = self.core.publish_audio(now, name) {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(Err(error));
                } else {
                    self.publish_reply = Some(reply);
                }
            }
            Command::WriteAudio { rtp_timestamp, opus } => self.core.write_audio(now, rtp_timestamp, opus),
            Command::SendData { packet, reply } => {
                // The caller gave up waiting; nothing to tell it.
                let _ = reply.send(self.core.send_data(now, packet));
            }
            Command::Stats { reply } => {
                // The caller gave up waiting; nothing to tell it.
                let _ = reply.send(self.core.stats);
            }
            Command::Leave => self.core.leave(),
        }
    }

    fn receive(&mut self, role: Role, first: std::io::Result<(usize, SocketAddr)>, buffer: &mut [u8]) {
        let socket = match role {
            Role::Publisher => &self.publisher_socket,
            Role::Subscriber => &self.subscriber_socket,
        };
        let Ok(destination) = socket.local_addr() else { return };
        let mut next = Some(first);
        let mut handled = 0;
        while let Some(received) = next.take() {
            match received {
                Ok((length, source)) => {
                    self.core.handle_receive(Instant::now(), role, source, destination, &buffer[..length]);
                }
                // ICMP errors surface as receive errors on Linux; keep serving.
                Err(error) => tracing::trace!(%error, "udp receive error"),
            }
            handled += 1;
            if handled < RECEIVE_BATCH {
                match socket.try_recv_from(buffer) {
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                    other => next = Some(other),
                }
            }
        }
    }

    /// Carries out everything the core asked for; `Some` when the client is done.
    async fn carry_out(&mut self) -> Option<Option<ClientError>> {
        while let Some(output) = self.core.poll_output() {
            match output {
                ClientOutput::Transmit(role, transmit) => {
                    let socket = match role {
                        Role::Publisher => &self.publisher_socket,
                        Role::Subscriber => &self.subscriber_socket,
                    };
                    // Never wait: a full socket buffer loses the datagram, which WebRTC tolerates.
                    if socket.try_send_to(&transmit.contents, transmit.destination).is_ok() {
                        self.core.stats.datagrams_sent += 1;
                    }
                }
                ClientOutput::Signal(message) => {
                    let bytes = proto::SignalRequest { message: Some(message) }.encode_to_vec();
                    if let Err(error) = self.sink.send(WsMessage::Binary(bytes.into())).await {
                        self.core.signal_closed(Some(error.to_string()));
                    }
                }
                ClientOutput::Event(event) => {
                    let audio = matches!(event, ClientEvent::AudioFrame(_));
                    if self.events.try_send(event).is_err() {
                        if audio {
                            self.core.stats.audio_frames_dropped += 1;
                        } else {
                            self.core.stats.events_dropped += 1;
                        }
                    }
                }
                ClientOutput::Ready => {
                    if let Some(ready) = self.ready.take() {
                        // The caller gave up waiting; nothing to tell it.
                        let _ = ready.send(Ok(()));
                    }
                }
                ClientOutput::Published(result) => {
                    if let Some(reply) = self.publish_reply.take() {
                        // The caller gave up waiting; nothing to tell it.
                        let _ = reply.send(result);
                    }
                }
                ClientOutput::Close(error) => return Some(error),
            }
        }
        None
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

// -------------------------------------------------------------------------------------------
// The sans-IO core

/// What the IO shell must do.
enum ClientOutput {
    /// Send a datagram from the socket of this connection.
    Transmit(Role, Transmit),
    /// Send a signal message.
    Signal(proto::signal_request::Message),
    /// Hand an event to the application.
    Event(ClientEvent),
    /// Connected: both PCs up, data channels open.
    Ready,
    /// The outcome of a publish.
    Published(Result<String, ClientError>),
    /// Close the signal connection and stop; `None` after a leave.
    Close(Option<ClientError>),
}

/// A subscribed track: (publisher sid, publisher identity, track sid).
type Downstream = (Arc<str>, Arc<str>, Arc<str>);

/// Our published track.
struct OwnTrack {
    cid: String,
    /// `TR_…` once `track_published` arrived.
    sid: Option<String>,
    /// Our m-line on the publisher PC, once added.
    mid: Option<Mid>,
    /// The negotiated Opus payload type, once the answer arrived.
    pt: Option<Pt>,
}

/// The client's protocol state: signalling, both peer connections, our track, data channels,
/// pings. Pure: every input carries `now`; outputs are polled.
struct ClientCore {
    identity: String,
    publisher: Rtc,
    subscriber: Rtc,
    publisher_timeout: Instant,
    subscriber_timeout: Instant,
    outputs: VecDeque<ClientOutput>,
    dirty: Vec<Role>,

    publisher_pending: Option<(u32, SdpPendingOffer)>,
    publisher_renegotiate: bool,
    publisher_next_offer_id: u32,
    publisher_reliable: Option<ChannelId>,
    publisher_lossy: Option<ChannelId>,
    publisher_reliable_open: bool,
    publisher_lossy_open: bool,
    track: Option<OwnTrack>,
    /// Reliable data sequence (the server drops `sequence <= last` per sender).
    data_sequence: u32,

    subscriber_reliable: Option<ChannelId>,
    subscriber_lossy: Option<ChannelId>,
    /// Downstream tracks by mid: (participant sid, identity, track sid).
    downstream: HashMap<Mid, Downstream>,
    participants: HashMap<String, proto::ParticipantInfo>,

    publisher_connected: bool,
    subscriber_connected: bool,
    ready: bool,

    ping_interval: Duration,
    ping_timeout: Duration,
    next_ping: Instant,
    last_signal: Instant,
    refresh_token: Option<String>,
    closed: bool,
    stats: ClientStats,
}

impl ClientCore {
    fn new(
        now: Instant,
        join: proto::JoinResponse,
        publisher_addr: SocketAddr,
        subscriber_addr: SocketAddr,
    ) -> Result<(ClientCore, JoinInfo), ClientError> {
        let room = join.room.ok_or_else(|| ClientError::Protocol("join response without a room".to_owned()))?;
        let me = join
            .participant
            .ok_or_else(|| ClientError::Protocol("join response without our participant".to_owned()))?;
        let seconds = |value: i32, default: u64| {
            Duration::from_secs(u64::try_from(value).ok().filter(|s| *s > 0).unwrap_or(default))
        };
        let ping_interval = seconds(join.ping_interval, 5);
        let ping_timeout = seconds(join.ping_timeout, 15);
        let info = JoinInfo {
            room_name: room.name,
            room_sid: room.sid,
            participant_sid: me.sid,
            identity: me.identity.clone(),
            server_version: join.server_info.map(|server| server.version).unwrap_or(join.server_version),
            ping_interval,
            ping_timeout,
            other_participants: join.other_participants.clone(),
        };
        let mut core = ClientCore {
            identity: me.identity,
            publisher: new_rtc(now, publisher_addr)?,
            subscriber: new_rtc(now, subscriber_addr)?,
            publisher_timeout: now,
            subscriber_timeout: now,
            outputs: VecDeque::new(),
            dirty: Vec::new(),
            publisher_pending: None,
            publisher_renegotiate: false,
            publisher_next_offer_id: 1,
            publisher_reliable: None,
            publisher_lossy: None,
            publisher_reliable_open: false,
            publisher_lossy_open: false,
            track: None,
            data_sequence: 0,
            subscriber_reliable: None,
            subscriber_lossy: None,
            downstream: HashMap::new(),
            participants: join.other_participants.into_iter().map(|p| (p.sid.clone(), p)).collect(),
            publisher_connected: false,
            subscriber_connected: false,
            ready: false,
            ping_interval,
            ping_timeout,
            next_ping: now + ping_interval,
            last_signal: now,
            refresh_token: None,
            closed: false,
            stats: ClientStats::default(),
        };
        // str0m's ICE agent has no notion of time (and so never schedules a check) until it has
        // seen a timeout; an offer handled first would otherwise leave it idle for good.
        for role in [Role::Publisher, Role::Subscriber] {
            core.touch(now, role);
        }
        // Fast publish: negotiate the publisher PC (data channels) right away.
        core.renegotiate_publisher();
        core.flush(now);
        Ok((core, info))
    }

    fn poll_output(&mut self) -> Option<ClientOutput> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let soonest = self.publisher_timeout.min(self.subscriber_timeout).min(self.next_ping);
        Some(soonest.min(self.last_signal + self.ping_timeout))
    }

    fn close(&mut self, error: Option<ClientError>) {
        if !self.closed {
            self.closed = true;
            self.outputs.push_back(ClientOutput::Close(error));
        }
    }

    fn disconnect(&mut self) {
        self.publisher.disconnect();
        self.subscriber.disconnect();
    }

    /// We leave: a leave request, then close.
    fn leave(&mut self) {
        if self.closed {
            return;
        }
        self.outputs.push_back(ClientOutput::Signal(proto::signal_request::Message::Leave(proto::LeaveRequest {
            can_reconnect: false,
            reason: proto::DisconnectReason::ClientInitiated as i32,
            action: proto::leave_request::Action::Disconnect as i32,
            regions: None,
        })));
        self.close(None);
    }

    fn signal_closed(&mut self, error: Option<String>) {
        let error = error.unwrap_or_else(|| "the server closed the signal connection".to_owned());
        self.close(Some(ClientError::Connect(error)));
    }

    // ---------------------------------------------------------------------------------------
    // Signalling

    fn handle_signal(&mut self, now: Instant, now_ms: i64, message: proto::signal_response::Message) {
        use proto::signal_response::Message as M;
        if self.closed {
            return;
        }
        self.last_signal = now;
        match message {
            M::Offer(offer) => self.handle_subscriber_offer(offer),
            M::Answer(answer) => self.handle_publisher_answer(answer),
            M::Trickle(trickle) => self.handle_trickle(trickle),
            M::Update(update) => {
                for info in update.participants {
                    self.apply_participant(info);
                }
            }
            M::TrackPublished(published) => self.handle_track_published(published),
            M::TrackSubscribed(subscribed) => {
                self.outputs.push_back(ClientOutput::Event(ClientEvent::OwnTrackSubscribed {
                    track_sid: subscribed.track_sid,
                }));
            }
            M::Leave(leave) => {
                self.outputs.push_back(ClientOutput::Event(ClientEvent::Left {
                    reason: disconnect_reason(leave.reason),
                    can_reconnect: leave.can_reconnect,
                }));
                // Before we are connected a leave is a refusal; after, the end of the session.
                let error = (!self.ready).then(|| ClientError::Refused(disconnect_reason(leave.reason)));
                self.close(error);
            }
            M::PongResp(pong) => {
                self.stats.rtt_ms = Some(now_ms.saturating_sub(pong.last_ping_timestamp).max(0));
            }
            M::RefreshToken(token) => self.refresh_token = Some(token),
            M::Join(_) => tracing::debug!("second join response ignored"),
            // Pong, room and speaker updates, quality, stream state, request responses: nothing
            // an audio client acts on.
            _ => {}
        }
        self.flush(now);
    }

    fn apply_participant(&mut self, info: proto::ParticipantInfo) {
        if self.participants.get(&info.sid).is_some_and(|known| known.version > info.version) {
            return;
        }
        if info.state == proto::participant_info::State::Disconnected as i32 {
            self.participants.remove(&info.sid);
        } else {
            self.participants.insert(info.sid.clone(), info.clone());
        }
        self.outputs.push_back(ClientOutput::Event(ClientEvent::ParticipantUpdate(info)));
    }

    fn handle_subscriber_offer(&mut self, offer: proto::SessionDescription) {
        let answer = SdpOffer::from_sdp_string(&offer.sdp)
            .map_err(|error| error.to_string())
            .and_then(|parsed| self.subscriber.sdp_api().accept_offer(parsed).map_err(|error| error.to_string()));
        match answer {
            Ok(answer) => {
                self.outputs.push_back(ClientOutput::Signal(proto::signal_request::Message::Answer(
                    proto::SessionDescription {
                        r#type: "answer".to_owned(),
                        sdp: answer.to_sdp_string(),
                        id: offer.id,
                        mid_to_track_id: HashMap::new(),
                    },
                )));
                self.mark_dirty(Role::Subscriber);
            }
            Err(error) => self.close(Some(ClientError::Protocol(format!("subscriber offer rejected: {error}")))),
        }
    }

    fn handle_publisher_answer(&mut self, answer: proto::SessionDescription) {
        let Some((id, pending)) = self.publisher_pending.take() else {
            tracing::debug!("publisher answer without an outstanding offer");
            return;
        };
        if answer.id != 0 && answer.id != id {
            // An answer to an older offer; keep waiting for ours.
            self.publisher_pending = Some((id, pending));
            return;
        }
        let accepted = SdpAnswer::from_sdp_string(&answer.sdp).map_err(|error| error.to_string()).and_then(|parsed| {
            self.publisher.sdp_api().accept_answer(pending, parsed).map_err(|error| error.to_string())
        });
        if let Err(error) = accepted {
            self.close(Some(ClientError::Protocol(format!("publisher answer rejected: {error}"))));
            return;
        }
        self.mark_dirty(Role::Publisher);
        // The answer that carries our m-line completes the publication.
        if let Some(track) = &mut self.track
            && let (Some(mid), Some(sid), None) = (track.mid, track.sid.clone(), track.pt)
        {
            let pt = self.publisher.writer(mid).and_then(|writer| writer.payload_params().next().map(|p| p.pt()));
            match pt {
                Some(pt) => {
                    track.pt = Some(pt);
                    self.outputs.push_back(ClientOutput::Published(Ok(sid)));
                }
                None => self.outputs.push_back(ClientOutput::Published(Err(ClientError::Protocol(
                    "the publisher answer negotiated no Opus".to_owned(),
                )))),
            }
        }
        if std::mem::take(&mut self.publisher_renegotiate) {
            self.renegotiate_publisher();
        }
    }

    fn handle_trickle(&mut self, trickle: proto::TrickleRequest) {
        // Servers that trickle (LiveKit proper) send pion's ICECandidateInit JSON.
        let Ok(init) = serde_json::from_str::<serde_json::Value>(&trickle.candidate_init) else { return };
        let Some(text) = init.get("candidate").and_then(|c| c.as_str()).filter(|c| !c.is_empty()) else { return };
        let Ok(candidate) = Candidate::from_sdp_string(text) else { return };
        if trickle.target == proto::SignalTarget::Subscriber as i32 {
            self.subscriber.add_remote_candidate(candidate);
            self.mark_dirty(Role::Subscriber);
        } else {
            self.publisher.add_remote_candidate(candidate);
            self.mark_dirty(Role::Publisher);
        }
    }

    fn handle_track_published(&mut self, published: proto::TrackPublishedResponse) {
        let Some(track) = &mut self.track else { return };
        if track.cid != published.cid || track.sid.is_some() {
            return;
        }
        let Some(info) = published.track else {
            self.outputs.push_back(ClientOutput::Published(Err(ClientError::Protocol(
                "track_published without a track".to_owned(),
            ))));
            return;
        };
        track.sid = Some(info.sid);
        self.renegotiate_publisher();
    }

    /// Offers on the publisher PC what it should carry now (the data channels on the first
    /// offer, our audio m-line once the track is published). One offer at a time.
    fn renegotiate_publisher(&mut self) {
        if self.publisher_pending.is_some() {
            self.publisher_renegotiate = true;
            return;
        }
        let first = self.publisher_next_offer_id == 1;
        let add_media = self.track.as_ref().is_some_and(|track| track.sid.is_some() && track.mid.is_none());
        if !first && !add_media {
            return;
        }
        let mut api = self.publisher.sdp_api();
        if first {
            self.publisher_reliable = Some(api.add_channel_with_config(ChannelConfig {
                label: "_reliable".to_owned(),
                ordered: true,
                reliability: Reliability::Reliable,
                negotiated: None,
                protocol: String::new(),
            }));
            self.publisher_lossy = Some(api.add_channel_with_config(ChannelConfig {
                label: "_lossy".to_owned(),
                ordered: false,
                reliability: Reliability::MaxRetransmits { retransmits: 0 },
                negotiated: None,
                protocol: String::new(),
            }));
        }
        if add_media && let Some(track) = &mut self.track {
            // The server binds the m-line to the publication by msid track id == cid.
            let mid = api.add_media(
                MediaKind::Audio,
                Direction::SendOnly,
                Some(STREAM_ID.to_owned()),
                Some(track.cid.clone()),
                None,
            );
            track.mid = Some(mid);
        }
        let Some((offer, pending)) = api.apply() else { return };
        let id = self.publisher_next_offer_id;
        self.publisher_next_offer_id += 1;
        self.publisher_pending = Some((id, pending));
        self.outputs.push_back(ClientOutput::Signal(proto::signal_request::Message::Offer(
            proto::SessionDescription {
                r#type: "offer".to_owned(),
                sdp: offer.to_sdp_string(),
                id,
                mid_to_track_id: HashMap::new(),
            },
        )));
        self.mark_dirty(Role::Publisher);
    }

    // ---------------------------------------------------------------------------------------
    // Commands

    fn publish_audio(&mut self, now: Instant, name: String) -> Result<(), ClientError> {
        if self.track.is_some() {
            return Err(ClientError::AlreadyPublished);
        }
        let cid = format!("svc-{}", uuid::Uuid::new_v4().simple());
        #[allow(deprecated)]
        let request = proto::AddTrackRequest {
            cid: cid.clone(),
            name,
            r#type: proto::TrackType::Audio as i32,
            source: proto::TrackSource::Microphone as i32,
            disable_red: true,
            stream: STREAM_ID.to_owned(),
            ..Default::default()
        };
        self.outputs.push_back(ClientOutput::Signal(proto::signal_request::Message::AddTrack(request)));
        self.track = Some(OwnTrack { cid, sid: None, mid: None, pt: None });
        self.flush(now);
        Ok(())
    }

    fn write_audio(&mut self, now: Instant, rtp_timestamp: u64, opus: Arc<[u8]>) {
        let target = self.track.as_ref().and_then(|track| Some((track.mid?, track.pt?)));
        let Some((mid, pt)) = target.filter(|_| self.publisher_connected) else {
            self.stats.audio_frames_unsent += 1;
            return;
        };
        let Some(writer) = self.publisher.writer(mid) else {
            self.stats.audio_frames_unsent += 1;
            return;
        };
        match writer.write(pt, now, MediaTime::new(rtp_timestamp, Frequency::FORTY_EIGHT_KHZ), opus) {
            Ok(()) => self.stats.audio_frames_sent += 1,
            Err(error) => {
                tracing::debug!(%error, "audio write failed");
                self.stats.audio_frames_unsent += 1;
            }
        }
        self.mark_dirty(Role::Publisher);
        self.flush(now);
    }

    fn send_data(&mut self, now: Instant, request: DataRequest) -> Result<(), ClientError> {
        if request.payload.len() > MAX_DATA_PAYLOAD {
            return Err(ClientError::PacketTooLarge(request.payload.len()));
        }
        let (channel, open) = if request.reliable {
            (self.publisher_reliable, self.publisher_reliable_open)
        } else {
            (self.publisher_lossy, self.publisher_lossy_open)
        };
        let Some(id) = channel.filter(|_| open) else { return Err(ClientError::ChannelNotOpen) };
        let sequence = if request.reliable {
            self.data_sequence += 1;
            self.data_sequence
        } else {
            0
        };
        #[allow(deprecated)]
        let packet = proto::DataPacket {
            kind: if request.reliable { proto::data_packet::Kind::Reliable } else { proto::data_packet::Kind::Lossy }
                as i32,
            // The server fills in the sender; it never trusts these.
            participant_identity: self.identity.clone(),
            destination_identities: request.destinations.clone(),
            sequence,
            participant_sid: String::new(),
            value: Some(proto::data_packet::Value::User(proto::UserPacket {
                payload: request.payload,
                topic: request.topic,
                destination_identities: request.destinations,
                ..Default::default()
            })),
        };
        let bytes = packet.encode_to_vec();
        let written = match self.publisher.channel(id) {
            Some(mut channel) => channel.write(true, &bytes).map_err(|error| ClientError::Rtc(error.to_string())),
            None => Err(ClientError::ChannelNotOpen),
        };
        self.mark_dirty(Role::Publisher);
        self.flush(now);
        match written? {
            true => Ok(()),
            false => Err(ClientError::BufferFull),
        }
    }

    // ---------------------------------------------------------------------------------------
    // UDP and time

    fn handle_receive(
        &mut self,
        now: Instant,
        role: Role,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) {
        if self.closed {
            return;
        }
        self.stats.datagrams_received += 1;
        let Ok(receive) = Receive::new(Protocol::Udp, source, destination, contents) else { return };
        if let Err(error) = self.rtc(role).handle_input(Input::Receive(now, receive)) {
            tracing::debug!(%error, ?role, "datagram rejected");
        }
        self.mark_dirty(role);
        self.flush(now);
    }

    fn handle_timeout(&mut self, now: Instant, now_ms: i64) {
        if self.closed {
            return;
        }
        for role in [Role::Publisher, Role::Subscriber] {
            let due = match role {
                Role::Publisher => self.publisher_timeout,
                Role::Subscriber => self.subscriber_timeout,
            };
            if due <= now {
                self.touch(now, role);
            }
        }
        if self.next_ping <= now {
            // Both the current and the legacy ping, as the SDKs send them.
            let rtt = self.stats.rtt_ms.unwrap_or(0);
            self.outputs.push_back(ClientOutput::Signal(proto::signal_request::Message::PingReq(proto::Ping {
                timestamp: now_ms,
                rtt,
            })));
            self.outputs.push_back(ClientOutput::Signal(proto::signal_request::Message::Ping(now_ms)));
            self.next_ping = now + self.ping_interval;
        }
        if now >= self.last_signal + self.ping_timeout {
            self.close(Some(ClientError::Timeout("the server (ping timeout)")));
        }
        self.flush(now);
    }

    /// Gives a connection the current time (and marks it for draining).
    fn touch(&mut self, now: Instant, role: Role) {
        if let Err(error) = self.rtc(role).handle_input(Input::Timeout(now)) {
            tracing::debug!(%error, ?role, "timeout rejected");
        }
        self.mark_dirty(role);
    }

    fn rtc(&mut self, role: Role) -> &mut Rtc {
        match role {
            Role::Publisher => &mut self.publisher,
            Role::Subscriber => &mut self.subscriber,
        }
    }

    fn mark_dirty(&mut self, role: Role) {
        if !self.dirty.contains(&role) {
            self.dirty.push(role);
        }
    }

    /// Drains every dirty connection, handling the events that come out (which may dirty a
    /// connection again).
    fn flush(&mut self, now: Instant) {
        while let Some(role) = self.dirty.pop() {
            for event in self.drain(role) {
                self.handle_rtc_event(now, role, event);
            }
        }
    }

    /// str0m's rule, in one place: poll until `Timeout`.
    fn drain(&mut self, role: Role) -> Vec<Event> {
        let mut events = Vec::new();
        let (rtc, timeout) = match role {
            Role::Publisher => (&mut self.publisher, &mut self.publisher_timeout),
            Role::Subscriber => (&mut self.subscriber, &mut self.subscriber_timeout),
        };
        loop {
            match rtc.poll_output() {
                Ok(Output::Timeout(at)) => {
                    *timeout = at;
                    break;
                }
                Ok(Output::Transmit(transmit)) => self.outputs.push_back(ClientOutput::Transmit(role, transmit)),
                Ok(Output::Event(event)) => events.push(event),
                Err(error) => {
                    *timeout += Duration::from_secs(3600);
                    if !self.closed {
                        self.closed = true;
                        self.outputs
                            .push_back(ClientOutput::Close(Some(ClientError::Rtc(format!("{role:?}: {error}")))));
                    }
                    break;
                }
            }
        }
        events
    }

    fn handle_rtc_event(&mut self, now: Instant, role: Role, event: Event) {
        match event {
            Event::Connected => {
                match role {
                    Role::Publisher => self.publisher_connected = true,
                    Role::Subscriber => self.subscriber_connected = true,
                }
                self.check_ready();
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                self.close(Some(ClientError::Rtc(format!("{role:?} ICE disconnected"))));
            }
            Event::ChannelOpen(id, label) => {
                match (role, label.as_str()) {
                    (Role::Publisher, _) if Some(id) == self.publisher_reliable => self.publisher_reliable_open = true,
                    (Role::Publisher, _) if Some(id) == self.publisher_lossy => self.publisher_lossy_open = true,
                    (Role::Subscriber, "_reliable") => self.subscriber_reliable = Some(id),
                    (Role::Subscriber, "_lossy") => self.subscriber_lossy = Some(id),
                    _ => {}
                }
                self.check_ready();
            }
            Event::ChannelData(data) => {
                let reliable = match role {
                    Role::Subscriber if Some(data.id) == self.subscriber_reliable => true,
                    Role::Subscriber if Some(data.id) == self.subscriber_lossy => false,
                    _ => return,
                };
                self.handle_packet(reliable, &data.data);
            }
            Event::MediaAdded(added) if role == Role::Subscriber && added.kind == MediaKind::Audio => {
                self.subscribe(added.mid);
            }
            Event::MediaData(data) if role == Role::Subscriber => {
                let Some((participant_sid, participant_identity, track_sid)) = self.downstream.get(&data.mid).cloned()
                else {
                    return;
                };
                self.stats.audio_frames_received += 1;
                self.outputs.push_back(ClientOutput::Event(ClientEvent::AudioFrame(ClientAudioFrame {
                    participant_sid,
                    participant_identity,
                    track_sid,
                    rtp_timestamp: data.time.rebase(Frequency::FORTY_EIGHT_KHZ).numer(),
                    received_at: data.network_time,
                    opus: data.data,
                })));
            }
            _ => {}
        }
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    fn check_ready(&mut self) {
        if !self.ready
            && self.publisher_connected
            && self.subscriber_connected
            && self.publisher_reliable_open
            && self.publisher_lossy_open
            && self.subscriber_reliable.is_some()
        {
            self.ready = true;
            self.outputs.push_back(ClientOutput::Ready);
        }
    }

    /// A downstream m-line appeared: its msid is `<PA_sid>|<TR_sid> <TR_sid>`.
    fn subscribe(&mut self, mid: Mid) {
        let Some(media) = self.subscriber.media(mid) else { return };
        let (stream, track) = (media.stream_id().to_owned(), media.track_id().to_owned());
        let (participant_sid, track_sid) = match stream.split_once('|') {
            Some((participant, packed_track)) => (participant.to_owned(), packed_track.to_owned()),
            None => (stream, track),
        };
        let identity = self.participants.get(&participant_sid).map(|p| p.identity.clone()).unwrap_or_default();
        self.downstream.insert(
            mid,
            (Arc::from(participant_sid.as_str()), Arc::from(identity.as_str()), Arc::from(track_sid.as_str())),
        );
        self.outputs.push_back(ClientOutput::Event(ClientEvent::TrackSubscribed {
            participant_sid,
            participant_identity: identity,
            track_sid,
        }));
    }

    fn handle_packet(&mut self, reliable: bool, bytes: &[u8]) {
        let Ok(packet) = proto::DataPacket::decode(bytes) else {
            tracing::debug!("undecodable data packet ignored");
            return;
        };
        self.stats.data_packets_received += 1;
        let event = match packet.value {
            Some(proto::data_packet::Value::User(user)) => ClientEvent::Data(ClientData {
                from_identity: packet.participant_identity,
                from_sid: packet.participant_sid,
                topic: user.topic,
                payload: user.payload,
                reliable,
            }),
            _ => ClientEvent::Packet(packet),
        };
        self.outputs.push_back(ClientOutput::Event(event));
    }
}

fn new_rtc(now: Instant, local: SocketAddr) -> Result<Rtc, ClientError> {
    // Full ICE (the room server is ICE-lite, and two lite agents cannot connect); Opus only, so
    // the publisher answer and our subscriber answer negotiate plain Opus.
    let mut rtc = Rtc::builder().clear_codecs().enable_opus(true, false).set_stats_interval(None).build(now);
    let candidate =
        Candidate::host(local, "udp").map_err(|error| ClientError::Io(format!("host candidate {local}: {error}")))?;
    rtc.add_local_candidate(candidate);
    Ok(rtc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signal_url_appends_rtc_to_the_path_and_carries_the_v0_parameters() {
        let (url, authority) = signal_url("ws://127.0.0.1:8080/room", "a.b-c_d", true).expect("valid url");
        assert_eq!(authority, "127.0.0.1:8080");
        assert!(
            url.starts_with("ws://127.0.0.1:8080/room/rtc?access_token=a.b-c_d&auto_subscribe=1&protocol=16"),
            "{url}"
        );
        assert!(url.contains("client_protocol=0") && url.contains("sdk=rust"), "{url}");
        let (url, _) = signal_url("ws://host/", "t", false).expect("valid url");
        assert!(url.starts_with("ws://host/rtc?access_token=t&auto_subscribe=0"), "{url}");
        let (url, _) = signal_url("ws://host/a/b/", "t", true).expect("valid url");
        assert!(url.starts_with("ws://host/a/b/rtc?"), "{url}");
    }

    #[test]
    fn only_plain_websocket_urls_with_a_host_are_accepted() {
        assert!(matches!(signal_url("wss://host/room", "t", true), Err(ClientError::Url(_))));
        assert!(matches!(signal_url("http://host/room", "t", true), Err(ClientError::Url(_))));
        assert!(matches!(signal_url("ws:///room", "t", true), Err(ClientError::Url(_))));
    }

    #[test]
    fn tokens_are_percent_encoded() {
        assert_eq!(percent_encode("a b+c/="), "a%20b%2Bc%2F%3D");
    }
}
