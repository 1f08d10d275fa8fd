//! The room as a sans-IO state machine: participants, their two str0m peer connections, tracks,
//! data routing and the LiveKit signalling rules. It never touches a socket or reads a clock; the
//! room actor ([`crate::actor`]) feeds it signal messages, UDP datagrams, local commands and time,
//! and carries out what [`RoomCore::poll_output`] asks for.
//!
//! Invariant (str0m's rule): after every mutation of an `Rtc` it is drained with `poll_output`
//! until `Timeout`. Mutations only mark the connection dirty; [`crate::rtc::flush`] is the one
//! place that drains, so events that cause writes into other connections are handled the same way.
//!
//! By concern: [`participants`] (join, leave, updates, attributes), [`negotiation`] (signalling,
//! SDP, the str0m connections), [`media`] (audio forwarding), [`data`] (packet routing and
//! backlog), [`in_process`] (the runtime's in-process participants). This file holds the types,
//! the timers and the drain policy. `crate::sim` runs the core against the client's core in
//! virtual time.

mod admin;
mod data;
mod in_process;
mod media;
mod negotiation;
mod notify;
mod participants;
#[cfg(test)]
mod tests;

pub(crate) use admin::{AdminAnswer, AdminCommand, AdminError};
use data::TokenBucket;
#[cfg(test)]
pub(crate) use notify::events;
pub(crate) use participants::leave_request;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use livekit_protocol as proto;
use prost::Message as _;
use str0m::change::{SdpAnswer, SdpOffer, SdpPendingOffer};
use str0m::channel::{ChannelConfig, ChannelId, Reliability};
use str0m::crypto::dtls::DtlsCert;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive, Transmit};
use str0m::{Candidate, Event, IceConnectionState, IceCreds, Input, Rtc, RtcError};
use svc_audio::{AudioOutQueue, OpusEncoder, OutQueueConfig};

use crate::ids::Ids;
use crate::model::{
    DataMessage, LeaveReason, Participant, ParticipantKind, RemoteAudioFrame, RoomEvent, TrackPublication,
};
use crate::rtc::{self, Dirty, DrainRtc, PeerConnection};

/// A participant's handle inside one room.
pub(crate) type Key = u64;

/// The sender of what the server API sends: no participant has it (keys start at 1).
pub(crate) const SERVER_KEY: Key = 0;

/// Which of a remote participant's two peer connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PcRole {
    /// Client offers; carries the client's microphone and its outgoing data.
    Publisher,
    /// Server offers; carries subscribed audio and data to the client.
    Subscriber,
}

/// Version reported to clients: JS refuses an empty one, RPC needs ≥ 1.8.0, Rust parses semver.
pub(crate) const SERVER_VERSION: &str = "1.9.0";
/// Signalling protocol we speak (v0, before the packet trailer of 17).
pub(crate) const SERVER_PROTOCOL: i32 = 16;

/// Largest data packet the room forwards. JS refuses to send more than 64 000 bytes; a little
/// headroom covers the protobuf envelope.
pub(crate) const MAX_DATA_PACKET_BYTES: usize = 65_536;
/// Packets queued for a client whose data channels are not open yet.
const MAX_PENDING_PACKETS: usize = 64;
/// Reliable bytes one subscriber may have waiting for its SCTP send buffer (see `write_packet`).
pub(crate) const MAX_RELIABLE_BACKLOG_BYTES: usize = 1024 * 1024;
/// The backlog drains when the reliable channel's buffered amount falls below this.
const RELIABLE_LOW_THRESHOLD: usize = 32 * 1024;
/// Tracks one participant may publish (audio only; a client needs one or two).
const MAX_TRACKS_PER_PARTICIPANT: usize = 8;
/// Bytes of attributes plus metadata a participant may carry.
pub(crate) const MAX_PARTICIPANT_STATE_BYTES: usize = 64 * 1024;
/// Data budget per sender: a burst of this many packets…
const DATA_BURST_PACKETS: f64 = 400.0;
/// …refilled at this rate. A flood beyond it is dropped at the sender, never at the receivers.
const DATA_PACKETS_PER_SECOND: f64 = 200.0;
/// Byte budget per sender, burst and rate.
const DATA_BURST_BYTES: f64 = 2.0 * 1024.0 * 1024.0;
const DATA_BYTES_PER_SECOND: f64 = 1024.0 * 1024.0;
/// Silence after which a connected media path counts as broken.
const MEDIA_DEAD_AFTER: Duration = Duration::from_secs(30);

/// Settings shared by every room of the server.
pub(crate) struct MediaSettings {
    /// Host candidates advertised in every SDP (one per bound UDP socket).
    pub candidates: Vec<SocketAddr>,
    /// One DTLS certificate for every connection; generating one per PC costs milliseconds.
    pub dtls_cert: DtlsCert,
    /// Seconds between client pings.
    pub ping_interval: i32,
    /// Seconds without traffic after which a client gives up.
    pub ping_timeout: i32,
    /// Identifies this node in `server_info`.
    pub node_id: String,
    /// Someone receives webhook events: the core builds none otherwise.
    pub webhooks: bool,
}

impl MediaSettings {
    /// What the server says of itself (join responses, agent worker registrations).
    pub(crate) fn server_info(&self) -> proto::ServerInfo {
        proto::ServerInfo {
            edition: proto::server_info::Edition::Standard as i32,
            version: SERVER_VERSION.to_owned(),
            protocol: SERVER_PROTOCOL,
            region: String::new(),
            node_id: self.node_id.clone(),
            debug_info: String::new(),
            agent_protocol: 1,
        }
    }
}

/// Grants of a joining participant, from its token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Permissions {
    pub can_publish: bool,
    pub can_subscribe: bool,
    pub can_publish_data: bool,
    pub can_update_metadata: bool,
    pub hidden: bool,
}

impl Permissions {
    /// Everything; used for in-process participants.
    pub(crate) const ALL: Permissions = Permissions {
        can_publish: true,
        can_subscribe: true,
        can_publish_data: true,
        can_update_metadata: true,
        hidden: false,
    };

    fn to_proto(self, kind: ParticipantKind) -> proto::ParticipantPermission {
        #[allow(deprecated)]
        proto::ParticipantPermission {
            can_subscribe: self.can_subscribe,
            can_publish: self.can_publish,
            can_publish_data: self.can_publish_data,
            can_publish_sources: Vec::new(),
            hidden: self.hidden,
            recorder: false,
            can_update_metadata: self.can_update_metadata,
            agent: kind == ParticipantKind::Agent,
            can_subscribe_metrics: false,
            can_manage_agent_session: false,
        }
    }
}

/// Who is joining, from a verified token and the connect query.
#[derive(Debug, Clone)]
pub(crate) struct JoinRequest {
    pub identity: String,
    pub name: String,
    pub metadata: String,
    pub attributes: BTreeMap<String, String>,
    pub kind: ParticipantKind,
    pub permissions: Permissions,
    pub auto_subscribe: bool,
    pub client_protocol: i32,
}

/// What the actor must do.
// Outputs live for microseconds in one queue; boxing the big signal messages would cost an
// allocation each for no memory saved.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum CoreOutput {
    /// Send a signal message to a remote participant.
    Signal { to: Key, message: proto::signal_response::Message },
    /// Close the participant's signal connection (after any leave already queued).
    CloseSignal { to: Key },
    /// The room stayed empty for its timeout: it is over.
    Expired,
    /// Send a UDP datagram.
    Transmit { source: SocketAddr, destination: SocketAddr, contents: Vec<u8> },
    /// Deliver to an in-process participant.
    Local { to: Key, output: LocalOutput },
    /// Route STUN for this ICE username fragment to this participant's connection.
    RouteAdded { ufrag: String, key: Key, role: PcRole },
    /// Forget every route of this participant.
    RoutesRemoved { key: Key },
    /// Tell the webhook receivers (`crate::webhook`); boxed: rare, and the largest output.
    Webhook(Box<proto::WebhookEvent>),
    /// An agent participant left (agent dispatch recovers the job of a worker that died).
    AgentLeft { identity: String },
    /// An RPC acknowledgement or response for the server's own call (`PerformRpc`).
    ServerRpc { from_identity: String, packet: proto::data_packet::Value },
}

/// Something for an in-process participant.
#[derive(Debug)]
pub(crate) enum LocalOutput {
    /// A room event for the application.
    Event(RoomEvent),
    /// An RPC packet (request, ack or response) for the participant's RPC manager.
    Rpc { from_identity: String, packet: proto::data_packet::Value },
}

/// Commands of an in-process participant.
#[derive(Debug)]
pub(crate) enum LocalCommand {
    PublishAudio {
        name: String,
    },
    UnpublishTrack {
        track_sid: String,
    },
    PushAudio {
        track_sid: String,
        pcm: Vec<i16>,
    },
    /// The track sid is shared with the sending handle, so a frame costs no allocation.
    PushOpus {
        track_sid: Arc<str>,
        opus: Bytes,
        media_time: Option<Instant>,
    },
    ClearAudio {
        track_sid: String,
    },
    SendData {
        payload: Bytes,
        topic: Option<String>,
        reliable: bool,
        destinations: Vec<String>,
    },
    SendRpc {
        destination: String,
        value: proto::data_packet::Value,
    },
    SetAttributes {
        attributes: BTreeMap<String, String>,
    },
    SetMetadata {
        metadata: String,
    },
    RemoveParticipant {
        identity: String,
    },
    Leave,
}

/// The answer to a [`LocalCommand`].
#[derive(Debug)]
pub(crate) enum LocalReply {
    Done,
    TrackPublished { track_sid: String, counters: Arc<TrackCounters> },
    Cleared { discarded_samples: usize },
    Removed(bool),
    Failed(LocalError),
}

impl LocalCommand {
    /// The command's name, for logs and failure events.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            LocalCommand::PublishAudio { .. } => "publish_audio",
            LocalCommand::UnpublishTrack { .. } => "unpublish_track",
            LocalCommand::PushAudio { .. } => "push_audio",
            LocalCommand::PushOpus { .. } => "push_opus",
            LocalCommand::ClearAudio { .. } => "clear_audio",
            LocalCommand::SendData { .. } => "send_data",
            LocalCommand::SendRpc { .. } => "send_rpc",
            LocalCommand::SetAttributes { .. } => "set_attributes",
            LocalCommand::SetMetadata { .. } => "set_metadata",
            LocalCommand::RemoveParticipant { .. } => "remove_participant",
            LocalCommand::Leave => "leave",
        }
    }
}

/// An in-process track's counts, shared between the room (which counts) and the track's handle
/// (which reads them, and counts the frames its full queue refused), without a lock.
#[derive(Debug, Default)]
pub(crate) struct TrackCounters {
    /// Samples released to listeners so far.
    pub(crate) played_samples: AtomicU64,
    /// Pre-encoded frames lost: refused by a full queue or by the room.
    pub(crate) dropped: AtomicU64,
    /// Pre-encoded frames the room sent more than [`LATE_AFTER`] after their media time.
    pub(crate) late: AtomicU64,
}

/// A pre-encoded frame that leaves more than this after its media time counts as late: one
/// frame of 20 ms is within pacing, more is a stall the listener hears.
pub const LATE_AFTER: Duration = Duration::from_millis(20);

/// How long a received audio packet waits for a missing earlier one before it is delivered with
/// the hole (which the runtime's decoder fills from FEC or conceals). str0m delivers a track's
/// packets in sequence order and, by default, holds the packets behind a hole until 15 have
/// queued or 1 s has passed: every lost packet of a user's voice then delayed the rest of it by
/// 300 ms. 60 ms still puts back the reordering of a path with 60 ms of jitter.
pub const AUDIO_REORDER_WAIT: Duration = Duration::from_millis(60);

/// Why a local command failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalError {
    /// The track does not exist or belongs to someone else.
    #[error("no such track: {0}")]
    UnknownTrack(String),
    /// The participant already publishes the maximum number of tracks.
    #[error("too many tracks")]
    TooManyTracks,
    /// The audio queue is full; the audio was not accepted.
    #[error("audio queue full: {0}")]
    AudioQueueFull(String),
    /// The data packet is larger than the room forwards.
    #[error("data packet of {0} bytes exceeds the {MAX_DATA_PACKET_BYTES}-byte limit")]
    PacketTooLarge(usize),
    /// Attributes plus metadata exceed the per-participant limit.
    #[error("participant attributes and metadata exceed {MAX_PARTICIPANT_STATE_BYTES} bytes")]
    StateTooLarge,
    /// The participant is no longer in the room.
    #[error("not in the room")]
    NotInRoom,
    /// The audio encoder failed.
    #[error("audio encoder: {0}")]
    Encoder(String),
}

struct Participant_ {
    sid: String,
    identity: String,
    /// The identity every audio frame of this participant carries: allocated once per join,
    /// not once per frame.
    frame_identity: Arc<str>,
    name: String,
    metadata: String,
    attributes: BTreeMap<String, String>,
    kind: ParticipantKind,
    permissions: Permissions,
    client_protocol: i32,
    joined_at_ms: i64,
    /// Bumped on every change; clients drop updates whose version is not newer.
    version: u32,
    state: proto::participant_info::State,
    /// Published tracks by sid; only `bound` ones are visible to others.
    tracks: BTreeMap<String, Track>,
    /// Last reliable sequence seen from this sender (dedupe, as LiveKit does).
    last_reliable_sequence: u32,
    data_budget: TokenBucket,
    body: Body,
}

enum Body {
    Remote(Box<RemotePeer>),
    Local(LocalPeer),
}

struct Track {
    info: proto::TrackInfo,
    /// Media is flowing (remote: the m-line is negotiated; local: immediately).
    bound: bool,
    /// `track_subscribed` was sent to the publisher.
    announced_subscribed: bool,
    /// For in-process tracks: the paced audio source.
    local: Option<LocalTrack>,
}

struct LocalTrack {
    queue: AudioOutQueue,
    encoder: OpusEncoder,
    counters: Arc<TrackCounters>,
    /// Extends the queue's 32-bit RTP clock.
    rtp_base: u64,
    last_rtp: u32,
    /// Pre-encoded frames (`PushOpus`): when the last one went out and its RTP time.
    last_opus: Option<(Instant, u64)>,
}

struct LocalPeer;

struct RemotePeer {
    publisher: PeerConnection,
    subscriber: PeerConnection,
    /// Channel ids on the publisher PC and whether each is the reliable one.
    publisher_channels: HashMap<ChannelId, bool>,
    /// Server-created channels on the subscriber PC: (reliable, lossy) and whether they are open.
    subscriber_reliable: Option<ChannelId>,
    subscriber_lossy: Option<ChannelId>,
    reliable_open: bool,
    lossy_open: bool,
    /// Packets waiting for the subscriber channels to open: (reliable, bytes).
    pending_packets: VecDeque<(bool, Arc<[u8]>)>,
    /// Reliable packets waiting for room in the SCTP send buffer, in order.
    reliable_backlog: VecDeque<Arc<[u8]>>,
    /// Their bytes.
    reliable_backlog_bytes: usize,
    /// Outstanding subscriber offer; never two at once.
    pending_offer: Option<(u32, SdpPendingOffer)>,
    /// Something changed while an offer was outstanding.
    renegotiate: bool,
    next_offer_id: u32,
    /// Downstream audio: track sid → mid on the subscriber PC.
    downstream: HashMap<String, Mid>,
    /// The Opus payload type negotiated on the subscriber PC.
    downstream_pt: Option<Pt>,
    /// Upstream audio: publisher mid → track sid.
    upstream: HashMap<Mid, Arc<str>>,
    /// `add_track` requests waiting for their m-line: (cid, track sid).
    pending_publications: Vec<(String, String)>,
    auto_subscribe: bool,
    /// Explicit subscriptions when auto-subscribe is off.
    subscriptions: HashSet<String>,
    subscriber_connected: bool,
    last_media_activity: Instant,
}

/// One room.
pub(crate) struct RoomCore {
    name: String,
    sid: String,
    created_at_ms: i64,
    settings: Arc<MediaSettings>,
    participants: BTreeMap<Key, Participant_>,
    by_identity: HashMap<String, Key>,
    next_key: Key,
    outputs: VecDeque<CoreOutput>,
    dirty: Dirty<(Key, PcRole)>,
    /// The participants' keys for a walk that mutates the room as it goes, one buffer per walk
    /// (timers, a frame's delivery, which the timers can start): kept for their capacity, so
    /// that a packet or a tick allocates nothing of ours.
    timeout_keys: Vec<Key>,
    audio_keys: Vec<Key>,
    ids: Ids,
    /// A room nobody has joined yet closes after this long (the actor ends when it sees
    /// [`CoreOutput::Expired`]).
    empty_timeout: Duration,
    /// A room everyone has left closes after this long (LiveKit's `departure_timeout`).
    departure_timeout: Duration,
    /// Someone has been in the room: its idle limit is the departure timeout from then on.
    anyone_joined: bool,
    /// Nobody has been in the room since.
    empty_since: Option<Instant>,
    closed: bool,
    /// Closing once the reliable data sent so far is delivered, with why and the latest moment
    /// ([`RoomCore::close_after_delivery`]).
    closing: Option<(LeaveReason, Instant)>,
    /// `room_finished` went out (it goes once, whichever way the room ends).
    finished: bool,
    /// Set by the server API (`CreateRoom`, `UpdateRoomMetadata`); shown in the room's info.
    metadata: String,
    /// The cap a `CreateRoom` asked for (0: none), shown in the room's info.
    max_participants: u32,
}

/// What the server API may set on a room it creates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoomOptions {
    /// How long the room stays open if nobody joins (the server's default when `None`).
    pub empty_timeout: Option<Duration>,
    /// How long the room stays open after everyone has left (the server's default when `None`).
    pub departure_timeout: Option<Duration>,
    /// The room's metadata.
    pub metadata: String,
    /// The most participants the room is for (0: no cap).
    pub max_participants: u32,
    /// The agents dispatched to the room as it opens.
    pub agents: Vec<proto::RoomAgentDispatch>,
}

impl RoomOptions {
    /// LiveKit's room settings (`CreateRoomRequest`, a token's `roomConfig`): a timeout of 0 is
    /// the server's default.
    pub fn livekit(
        empty_timeout: u32,
        departure_timeout: u32,
        max_participants: u32,
        metadata: String,
        agents: Vec<proto::RoomAgentDispatch>,
    ) -> RoomOptions {
        let seconds = |value: u32| (value > 0).then(|| Duration::from_secs(value.into()));
        RoomOptions {
            empty_timeout: seconds(empty_timeout),
            departure_timeout: seconds(departure_timeout),
            metadata,
            max_participants,
            agents,
        }
    }
}

/// A room's state as the server API reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomDescription {
    /// The room.
    pub room: proto::Room,
    /// Everyone in it, in the order they joined.
    pub participants: Vec<proto::ParticipantInfo>,
}

impl RoomCore {
    /// An empty room, created at `now` (`created_at_ms` on the wall clock); it closes when it
    /// stays empty for `empty_timeout` (before anyone joined, and after everyone left, until a
    /// `CreateRoom` sets a departure timeout of its own).
    pub(crate) fn new(
        now: Instant,
        name: String,
        created_at_ms: i64,
        settings: Arc<MediaSettings>,
        mut ids: Ids,
        empty_timeout: Duration,
    ) -> RoomCore {
        RoomCore {
            name,
            sid: ids.room_sid(),
            created_at_ms,
            settings,
            participants: BTreeMap::new(),
            by_identity: HashMap::new(),
            next_key: 1,
            outputs: VecDeque::new(),
            dirty: Dirty::default(),
            timeout_keys: Vec::new(),
            audio_keys: Vec::new(),
            ids,
            empty_timeout,
            departure_timeout: empty_timeout,
            anyone_joined: false,
            empty_since: Some(now),
            closed: false,
            closing: None,
            finished: false,
            metadata: String::new(),
            max_participants: 0,
        }
    }

    /// Applies what a `CreateRoom` asked for to the room it created.
    pub(crate) fn apply_options(&mut self, options: &RoomOptions) {
        if let Some(timeout) = options.empty_timeout {
            self.empty_timeout = timeout;
        }
        if let Some(timeout) = options.departure_timeout {
            self.departure_timeout = timeout;
        }
        self.metadata.clone_from(&options.metadata);
        self.max_participants = options.max_participants;
    }

    /// The room and everyone in it, hidden participants included (an administrator's view).
    pub(crate) fn describe(&self) -> RoomDescription {
        RoomDescription {
            room: self.room_info(),
            participants: self.participants.values().map(Participant_::to_proto).collect(),
        }
    }

    /// The key the next join will get (the actor registers its channel under it first).
    pub(crate) fn next_key_hint(&self) -> Key {
        self.next_key
    }

    /// Nobody is in the room (the core itself decides when that ends it).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.participants.is_empty()
    }

    /// Whether someone with `identity` is in the room.
    pub(crate) fn has_identity(&self, identity: &str) -> bool {
        self.by_identity.contains_key(identity)
    }

    /// The next thing for the actor to do.
    pub(crate) fn poll_output(&mut self) -> Option<CoreOutput> {
        self.outputs.pop_front()
    }

    /// When [`RoomCore::handle_timeout`] must run next.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mut soonest: Option<Instant> = None;
        let mut consider = |at: Instant| soonest = Some(soonest.map_or(at, |s| s.min(at)));
        for participant in self.participants.values() {
            match &participant.body {
                Body::Remote(remote) => {
                    consider(remote.publisher.timeout);
                    consider(remote.subscriber.timeout);
                }
                Body::Local(_) => {
                    for track in participant.tracks.values() {
                        if let Some(at) = track.local.as_ref().and_then(|local| local.queue.next_deadline()) {
                            consider(at);
                        }
                    }
                }
            }
        }
        if let Some(since) = self.empty_since.filter(|_| !self.closed) {
            consider(since + self.idle_limit());
        }
        if let Some((_, until)) = self.closing {
            consider(until);
        }
        soonest
    }

    /// Reliable bytes waiting for a subscriber's SCTP buffer (tests: the backlog stays bounded).
    #[cfg(test)]
    pub(crate) fn reliable_backlog_bytes(&self, key: Key) -> usize {
        self.remote(key).map_or(0, |remote| remote.reliable_backlog_bytes)
    }

    /// How long the room may stay empty: until someone first joins, the empty timeout; after
    /// everyone has left, the departure timeout.
    fn idle_limit(&self) -> Duration {
        if self.anyone_joined { self.departure_timeout } else { self.empty_timeout }
    }

    /// Keeps track of when the room became empty (called whenever someone joins or leaves).
    fn note_occupancy(&mut self, now: Instant) {
        self.anyone_joined |= !self.participants.is_empty();
        if self.participants.is_empty() {
            self.empty_since.get_or_insert(now);
        } else {
            self.empty_since = None;
        }
    }

    /// A datagram the demultiplexer routed to this participant's connection.
    pub(crate) fn handle_receive(
        &mut self,
        now: Instant,
        key: Key,
        role: PcRole,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        let Ok(receive) = Receive::new(Protocol::Udp, source, destination, contents) else { return };
        let connection = match role {
            PcRole::Publisher => &mut remote.publisher,
            PcRole::Subscriber => &mut remote.subscriber,
        };
        connection.path.received(source, destination, contents);
        if let Err(error) = connection.rtc.handle_input(Input::Receive(now, receive)) {
            tracing::debug!(room = %self.name, %error, "datagram rejected");
        }
        self.mark_dirty(key, role);
        self.flush(now);
        // A closing room ends as soon as the last acknowledgement is in.
        self.close_if_delivered(now);
    }

    /// Drives every connection's timers and the in-process audio pacing.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let mut keys = std::mem::take(&mut self.timeout_keys);
        keys.clear();
        keys.extend(self.participants.keys().copied());
        let mut dead = Vec::new();
        for &key in &keys {
            let Some(participant) = self.participants.get_mut(&key) else { continue };
            match &mut participant.body {
                Body::Remote(remote) => {
                    for role in [PcRole::Publisher, PcRole::Subscriber] {
                        let connection = match role {
                            PcRole::Publisher => &mut remote.publisher,
                            PcRole::Subscriber => &mut remote.subscriber,
                        };
                        match connection.handle_timeout(now) {
                            Ok(true) => self.dirty.mark((key, role)),
                            Ok(false) => {}
                            // Logged and drained anyway: str0m may still have output queued.
                            Err(error) => {
                                tracing::warn!(room = %self.name, identity = %participant.identity, %error, ?role, "timeout failed");
                                self.dirty.mark((key, role));
                            }
                        }
                    }
                    // In case a low-buffer event was missed, the timers also drain the backlog.
                    if !remote.reliable_backlog.is_empty() && data::flush_backlog(remote) {
                        self.dirty.mark((key, PcRole::Subscriber));
                    }
                    if remote.subscriber_connected
                        && now.saturating_duration_since(remote.last_media_activity) > MEDIA_DEAD_AFTER
                        && !remote.subscriber.rtc.is_alive()
                    {
                        dead.push(key);
                    }
                }
                Body::Local(_) => {
                    let due: Vec<String> = participant
                        .tracks
                        .iter()
                        .filter(|(_, track)| {
                            track.local.as_ref().and_then(|l| l.queue.next_deadline()).is_some_and(|at| at <= now)
                        })
                        .map(|(sid, _)| sid.clone())
                        .collect();
                    for track_sid in due {
                        self.send_local_audio(now, key, &track_sid);
                    }
                }
            }
        }
        self.timeout_keys = keys;
        for key in dead {
            self.remove_participant(now, key, LeaveReason::MediaFailure, true);
        }
        self.flush(now);
        if self.close_if_delivered(now) {
            return;
        }
        if !self.closed && self.empty_since.is_some_and(|since| now >= since + self.idle_limit()) {
            self.closed = true;
            self.finished(proto::RoomEndReason::RoomEndIdleTimeout);
            self.outputs.push_back(CoreOutput::Expired);
        }
    }

    fn mark_dirty(&mut self, key: Key, role: PcRole) {
        self.dirty.mark((key, role));
    }

    /// Drains every dirty connection (see [`crate::rtc`]).
    fn flush(&mut self, now: Instant) {
        rtc::flush(self, now);
    }

    fn handle_rtc_event(&mut self, now: Instant, key: Key, role: PcRole, event: Event) {
        match event {
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                tracing::info!(room = %self.name, ?role, "ICE disconnected");
                self.remove_participant(now, key, LeaveReason::MediaFailure, true);
            }
            Event::Connected if role == PcRole::Subscriber => {
                self.subscriber_connected(now, key);
            }
            Event::MediaAdded(added) if role == PcRole::Publisher && added.kind == MediaKind::Audio => {
                self.bind_publication(now, key, added.mid);
            }
            Event::MediaData(data) if role == PcRole::Publisher => {
                self.forward_media(now, key, data.mid, data.time, data.network_time, data.data);
            }
            Event::ChannelOpen(id, label) => self.channel_open(key, role, id, &label),
            Event::ChannelBufferedAmountLow(_) if role == PcRole::Subscriber => {
                let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
                if data::flush_backlog(remote) {
                    self.mark_dirty(key, PcRole::Subscriber);
                }
            }
            Event::ChannelData(data) => {
                let reliable = match role {
                    PcRole::Publisher => self.remote(key).and_then(|r| r.publisher_channels.get(&data.id).copied()),
                    PcRole::Subscriber => self.remote(key).map(|r| Some(data.id) == r.subscriber_reliable),
                };
                if let Some(reliable) = reliable {
                    self.handle_client_packet(now, key, reliable, &data.data);
                }
            }
            _ => {}
        }
    }

    fn remote(&self, key: Key) -> Option<&RemotePeer> {
        match self.participants.get(&key).map(|p| &p.body) {
            Some(Body::Remote(remote)) => Some(remote),
            _ => None,
        }
    }

    fn subscriber_connected(&mut self, now: Instant, key: Key) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let Body::Remote(remote) = &mut participant.body else { return };
        remote.subscriber_connected = true;
        remote.last_media_activity = now;
        if participant.state != proto::participant_info::State::Active {
            participant.state = proto::participant_info::State::Active;
            participant.version += 1;
            self.broadcast_update(key, false);
            self.notify_joined(key);
        }
    }
}

impl DrainRtc for RoomCore {
    type Key = (Key, PcRole);

    fn dirty(&mut self) -> &mut Dirty<(Key, PcRole)> {
        &mut self.dirty
    }

    fn connection(&mut self, (key, role): (Key, PcRole)) -> Option<&mut PeerConnection> {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return None };
        Some(match role {
            PcRole::Publisher => &mut remote.publisher,
            PcRole::Subscriber => &mut remote.subscriber,
        })
    }

    fn transmit(&mut self, _: (Key, PcRole), transmit: Transmit) {
        self.outputs.push_back(CoreOutput::Transmit {
            source: transmit.source,
            destination: transmit.destination,
            contents: transmit.contents.into(),
        });
    }

    /// The connection is dead (its timers stopped); its removal follows from the ICE state
    /// event or the signal connection.
    fn failed(&mut self, (_, role): (Key, PcRole), error: RtcError) {
        tracing::info!(room = %self.name, %error, ?role, "peer connection failed");
    }

    fn handle_event(&mut self, now: Instant, (key, role): (Key, PcRole), event: Event) {
        self.handle_rtc_event(now, key, role, event);
    }
}
