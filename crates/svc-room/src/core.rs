//! The room as a sans-IO state machine: participants, their two str0m peer connections, tracks,
//! data routing and the LiveKit signalling rules. It never touches a socket or reads a clock; the
//! room actor ([`crate::actor`]) feeds it signal messages, UDP datagrams, local commands and time,
//! and carries out what [`RoomCore::poll_output`] asks for.
//!
//! Invariant (str0m's rule): after every mutation of an `Rtc` it is drained with `poll_output`
//! until `Timeout`. Mutations only mark the connection dirty; [`RoomCore::flush`] is the one place
//! that drains, so events that cause writes into other connections are handled the same way.

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
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, IceCreds, Input, Output, Rtc};
use svc_audio::{AudioOutQueue, OpusEncoder, OutQueueConfig};

use crate::ids;
use crate::model::{
    DataMessage, LeaveReason, Participant, ParticipantKind, RemoteAudioFrame, RoomEvent, TrackPublication,
};

/// A participant's handle inside one room.
pub(crate) type Key = u64;

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
const MAX_RELIABLE_BACKLOG_BYTES: usize = 1024 * 1024;
/// The backlog drains when the reliable channel's buffered amount falls below this.
const RELIABLE_LOW_THRESHOLD: usize = 32 * 1024;
/// Tracks one participant may publish (audio only; a client needs one or two).
const MAX_TRACKS_PER_PARTICIPANT: usize = 8;
/// Bytes of attributes plus metadata a participant may carry.
const MAX_PARTICIPANT_STATE_BYTES: usize = 64 * 1024;
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
    /// Send a UDP datagram.
    Transmit { source: SocketAddr, destination: SocketAddr, contents: Vec<u8> },
    /// Deliver to an in-process participant.
    Local { to: Key, output: LocalOutput },
    /// Route STUN for this ICE username fragment to this participant's connection.
    RouteAdded { ufrag: String, key: Key, role: PcRole },
    /// Forget every route of this participant.
    RoutesRemoved { key: Key },
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
    PublishAudio { name: String },
    UnpublishTrack { track_sid: String },
    PushAudio { track_sid: String, pcm: Vec<i16> },
    PushOpus { track_sid: String, opus: Bytes, media_time: Option<Instant> },
    ClearAudio { track_sid: String },
    SendData { payload: Bytes, topic: Option<String>, reliable: bool, destinations: Vec<String> },
    SendRpc { destination: String, value: proto::data_packet::Value },
    SetAttributes { attributes: BTreeMap<String, String> },
    SetMetadata { metadata: String },
    RemoveParticipant { identity: String },
    Leave,
}

/// The answer to a [`LocalCommand`].
#[derive(Debug)]
pub(crate) enum LocalReply {
    Done,
    TrackPublished { track_sid: String, played_samples: Arc<AtomicU64> },
    Cleared { discarded_samples: usize },
    Removed(bool),
    Failed(LocalError),
}

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
    played_samples: Arc<AtomicU64>,
    /// Extends the queue's 32-bit RTP clock.
    rtp_base: u64,
    last_rtp: u32,
    /// Pre-encoded frames (`PushOpus`): when the last one went out and its RTP time.
    last_opus: Option<(Instant, u64)>,
}

struct LocalPeer;

struct RemotePeer {
    publisher: Rtc,
    subscriber: Rtc,
    publisher_timeout: Instant,
    subscriber_timeout: Instant,
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
    upstream: HashMap<Mid, String>,
    /// `add_track` requests waiting for their m-line: (cid, track sid).
    pending_publications: Vec<(String, String)>,
    auto_subscribe: bool,
    /// Explicit subscriptions when auto-subscribe is off.
    subscriptions: HashSet<String>,
    subscriber_connected: bool,
    last_media_activity: Instant,
}

/// A token bucket over packets and bytes.
struct TokenBucket {
    packets: f64,
    bytes: f64,
    refreshed: Instant,
    dropped: u64,
}

impl TokenBucket {
    fn new(now: Instant) -> TokenBucket {
        TokenBucket { packets: DATA_BURST_PACKETS, bytes: DATA_BURST_BYTES, refreshed: now, dropped: 0 }
    }

    fn admit(&mut self, now: Instant, size: usize) -> bool {
        let elapsed = now.saturating_duration_since(self.refreshed).as_secs_f64();
        self.refreshed = now.max(self.refreshed);
        self.packets = (self.packets + elapsed * DATA_PACKETS_PER_SECOND).min(DATA_BURST_PACKETS);
        self.bytes = (self.bytes + elapsed * DATA_BYTES_PER_SECOND).min(DATA_BURST_BYTES);
        if self.packets >= 1.0 && self.bytes >= size as f64 {
            self.packets -= 1.0;
            self.bytes -= size as f64;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
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
    dirty: Vec<(Key, PcRole)>,
    closed: bool,
}

impl RoomCore {
    pub(crate) fn new(name: String, created_at_ms: i64, settings: Arc<MediaSettings>) -> RoomCore {
        RoomCore {
            name,
            sid: ids::room_sid(),
            created_at_ms,
            settings,
            participants: BTreeMap::new(),
            by_identity: HashMap::new(),
            next_key: 1,
            outputs: VecDeque::new(),
            dirty: Vec::new(),
            closed: false,
        }
    }

    /// The key the next join will get (the actor registers its channel under it first).
    pub(crate) fn next_key_hint(&self) -> Key {
        self.next_key
    }

    /// Nobody is in the room.
    pub(crate) fn is_empty(&self) -> bool {
        self.participants.is_empty()
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
                    consider(remote.publisher_timeout);
                    consider(remote.subscriber_timeout);
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
        soonest
    }

    // ---------------------------------------------------------------------------------------
    // Joining and leaving

    /// Admits a remote (WebRTC) participant: answers with the join response and the first
    /// subscriber offer, and tells everyone else.
    pub(crate) fn join_remote(&mut self, now: Instant, now_ms: i64, request: JoinRequest) -> Key {
        self.kick_duplicate(now, &request.identity);
        let key = self.allocate_key();
        let remote = self.new_remote_peer(now, key, request.auto_subscribe);
        let participant = Participant_ {
            sid: ids::participant_sid(),
            identity: request.identity.clone(),
            name: request.name,
            metadata: request.metadata,
            attributes: request.attributes,
            kind: request.kind,
            permissions: request.permissions,
            client_protocol: request.client_protocol,
            joined_at_ms: now_ms,
            version: 1,
            state: proto::participant_info::State::Joined,
            tracks: BTreeMap::new(),
            last_reliable_sequence: 0,
            data_budget: TokenBucket::new(now),
            body: Body::Remote(Box::new(remote)),
        };
        self.participants.insert(key, participant);
        self.by_identity.insert(request.identity, key);

        let join = self.join_response(key);
        self.outputs.push_back(CoreOutput::Signal { to: key, message: proto::signal_response::Message::Join(join) });
        self.broadcast_update(key, false);
        self.announce_joined_to_locals(key);
        self.renegotiate(now, key);
        self.flush(now);
        key
    }

    /// Admits an in-process participant. It sees everyone already present as join events.
    pub(crate) fn join_local(&mut self, now: Instant, now_ms: i64, request: JoinRequest) -> Key {
        self.kick_duplicate(now, &request.identity);
        let key = self.allocate_key();
        let participant = Participant_ {
            sid: ids::participant_sid(),
            identity: request.identity.clone(),
            name: request.name,
            metadata: request.metadata,
            attributes: request.attributes,
            kind: request.kind,
            permissions: Permissions::ALL,
            client_protocol: 0,
            joined_at_ms: now_ms,
            version: 1,
            state: proto::participant_info::State::Active,
            tracks: BTreeMap::new(),
            last_reliable_sequence: 0,
            data_budget: TokenBucket::new(now),
            body: Body::Local(LocalPeer),
        };
        self.participants.insert(key, participant);
        self.by_identity.insert(request.identity, key);

        let others: Vec<Key> = self.participants.keys().copied().filter(|other| *other != key).collect();
        for other in others {
            let Some(participant) = self.participants.get(&other) else { continue };
            if participant.permissions.hidden {
                continue;
            }
            let snapshot = participant.snapshot();
            let tracks: Vec<TrackPublication> = participant
                .tracks
                .values()
                .filter(|track| track.bound)
                .map(|track| TrackPublication {
                    sid: track.info.sid.clone(),
                    name: track.info.name.clone(),
                    muted: track.info.muted,
                })
                .collect();
            let identity = participant.identity.clone();
            self.local_event(key, RoomEvent::ParticipantJoined(snapshot));
            for track in tracks {
                self.local_event(
                    key,
                    RoomEvent::TrackPublished { participant_identity: identity.clone(), track: track.clone() },
                );
                self.mark_track_subscribed(other, &track.sid);
            }
        }
        self.broadcast_update(key, false);
        self.announce_joined_to_locals(key);
        self.flush(now);
        key
    }

    fn allocate_key(&mut self) -> Key {
        let key = self.next_key;
        self.next_key += 1;
        key
    }

    fn kick_duplicate(&mut self, now: Instant, identity: &str) {
        if let Some(existing) = self.by_identity.get(identity).copied() {
            self.remove_participant(now, existing, LeaveReason::DuplicateIdentity, true);
        }
    }

    /// Removes a participant, telling it why (a leave before its connection closes) and
    /// telling everyone else it left.
    pub(crate) fn remove_participant(&mut self, now: Instant, key: Key, reason: LeaveReason, notify_self: bool) {
        let Some(mut participant) = self.participants.remove(&key) else { return };
        if self.by_identity.get(&participant.identity) == Some(&key) {
            self.by_identity.remove(&participant.identity);
        }
        match &mut participant.body {
            Body::Remote(remote) => {
                if notify_self {
                    self.outputs.push_back(CoreOutput::Signal {
                        to: key,
                        message: proto::signal_response::Message::Leave(leave_request(reason, false)),
                    });
                }
                self.outputs.push_back(CoreOutput::CloseSignal { to: key });
                remote.publisher.disconnect();
                remote.subscriber.disconnect();
                self.outputs.push_back(CoreOutput::RoutesRemoved { key });
            }
            Body::Local(_) => {
                if notify_self {
                    self.outputs.push_back(CoreOutput::Local {
                        to: key,
                        output: LocalOutput::Event(RoomEvent::Disconnected { reason }),
                    });
                }
            }
        }
        self.dirty.retain(|(dirty, _)| *dirty != key);

        participant.state = proto::participant_info::State::Disconnected;
        participant.version += 1;
        if !participant.permissions.hidden {
            let mut info = participant.to_proto();
            info.disconnect_reason = reason.to_proto() as i32;
            let removed_tracks: Vec<String> =
                participant.tracks.values().filter(|track| track.bound).map(|track| track.info.sid.clone()).collect();
            let others: Vec<Key> = self.participants.keys().copied().collect();
            for other in others {
                let Some(target) = self.participants.get(&other) else { continue };
                match &target.body {
                    Body::Remote(_) => self.outputs.push_back(CoreOutput::Signal {
                        to: other,
                        message: proto::signal_response::Message::Update(proto::ParticipantUpdate {
                            participants: vec![info.clone()],
                        }),
                    }),
                    Body::Local(_) => {
                        for track_sid in &removed_tracks {
                            self.local_event(
                                other,
                                RoomEvent::TrackUnpublished {
                                    participant_identity: participant.identity.clone(),
                                    track_sid: track_sid.clone(),
                                },
                            );
                        }
                        self.local_event(
                            other,
                            RoomEvent::ParticipantLeft {
                                identity: participant.identity.clone(),
                                sid: participant.sid.clone(),
                                reason,
                            },
                        );
                    }
                }
            }
            // Their tracks leave everyone's subscriber connection.
            let remotes: Vec<Key> = self.remote_keys();
            for other in remotes {
                self.renegotiate(now, other);
            }
        }
        self.flush(now);
    }

    /// Closes the room: everyone gets a leave with the reason.
    pub(crate) fn close(&mut self, now: Instant, reason: LeaveReason) {
        self.closed = true;
        let keys: Vec<Key> = self.participants.keys().copied().collect();
        for key in keys {
            self.remove_participant(now, key, reason, true);
        }
    }

    /// The participant's signal connection ended (without a leave, or after one).
    pub(crate) fn signal_closed(&mut self, now: Instant, key: Key, reason: LeaveReason) {
        self.remove_participant(now, key, reason, false);
    }

    fn remote_keys(&self) -> Vec<Key> {
        self.participants
            .iter()
            .filter(|(_, participant)| matches!(participant.body, Body::Remote(_)))
            .map(|(key, _)| *key)
            .collect()
    }

    // ---------------------------------------------------------------------------------------
    // Signalling

    /// One message from a remote participant's signal connection. Ping and pong are answered by
    /// the connection itself.
    pub(crate) fn handle_signal(&mut self, now: Instant, key: Key, message: proto::signal_request::Message) {
        use proto::signal_request::Message as M;
        if !self.participants.contains_key(&key) {
            return;
        }
        match message {
            M::Offer(offer) => self.handle_publisher_offer(now, key, offer),
            M::Answer(answer) => self.handle_subscriber_answer(now, key, answer),
            M::Trickle(trickle) => self.handle_trickle(key, trickle),
            M::AddTrack(request) => self.handle_add_track(now, key, request),
            M::Mute(mute) => self.handle_mute(now, key, mute),
            M::Subscription(subscription) => self.handle_subscription(now, key, subscription),
            M::UpdateMetadata(update) => self.handle_update_metadata(now, key, update),
            M::Leave(_) => self.remove_participant(now, key, LeaveReason::ClientInitiated, false),
            // Video, layers, permissions, sync state, simulation, data tracks and blobs are not
            // supported by an audio-only room; clients do not wait for answers to them.
            _ => {}
        }
        self.flush(now);
    }

    fn handle_publisher_offer(&mut self, now: Instant, key: Key, offer: proto::SessionDescription) {
        let parsed = match SdpOffer::from_sdp_string(&offer.sdp) {
            Ok(parsed) => parsed,
            Err(error) => {
                tracing::info!(room = %self.name, %error, "publisher offer is not valid SDP");
                self.remove_participant(now, key, LeaveReason::StateMismatch, true);
                return;
            }
        };
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        match remote.publisher.sdp_api().accept_offer(parsed) {
            Ok(answer) => {
                self.outputs.push_back(CoreOutput::Signal {
                    to: key,
                    message: proto::signal_response::Message::Answer(proto::SessionDescription {
                        r#type: "answer".to_owned(),
                        sdp: answer.to_sdp_string(),
                        id: offer.id,
                        mid_to_track_id: HashMap::new(),
                    }),
                });
                self.mark_dirty(key, PcRole::Publisher);
            }
            Err(error) => {
                tracing::info!(room = %self.name, %error, "publisher offer rejected");
                self.remove_participant(now, key, LeaveReason::StateMismatch, true);
            }
        }
    }

    fn handle_subscriber_answer(&mut self, now: Instant, key: Key, answer: proto::SessionDescription) {
        let parsed = match SdpAnswer::from_sdp_string(&answer.sdp) {
            Ok(parsed) => parsed,
            Err(error) => {
                tracing::info!(room = %self.name, %error, "subscriber answer is not valid SDP");
                self.remove_participant(now, key, LeaveReason::StateMismatch, true);
                return;
            }
        };
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        let Some((offer_id, pending)) = remote.pending_offer.take() else {
            tracing::debug!(room = %self.name, "subscriber answer without an outstanding offer");
            return;
        };
        if answer.id != 0 && answer.id != offer_id {
            // An answer to an older offer; keep waiting for the current one.
            remote.pending_offer = Some((offer_id, pending));
            return;
        }
        if let Err(error) = remote.subscriber.sdp_api().accept_answer(pending, parsed) {
            tracing::info!(room = %self.name, %error, "subscriber answer rejected");
            self.remove_participant(now, key, LeaveReason::StateMismatch, true);
            return;
        }
        remote.downstream_pt = opus_pt(&mut remote.subscriber, &remote.downstream);
        // Publishers learn their track reached a subscriber.
        let subscribed: Vec<String> = remote.downstream.keys().cloned().collect();
        let again = std::mem::take(&mut remote.renegotiate);
        self.mark_dirty(key, PcRole::Subscriber);
        for track_sid in subscribed {
            if let Some(owner) = self.track_owner(&track_sid) {
                self.mark_track_subscribed(owner, &track_sid);
            }
        }
        if again {
            self.renegotiate(now, key);
        }
    }

    fn handle_trickle(&mut self, key: Key, trickle: proto::TrickleRequest) {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        // ICE-lite learns the client's address from its checks; trickled candidates only help
        // when they parse (mDNS `.local` names do not).
        let Ok(init) = serde_json::from_str::<serde_json::Value>(&trickle.candidate_init) else { return };
        let Some(text) = init.get("candidate").and_then(|c| c.as_str()).filter(|c| !c.is_empty()) else { return };
        let Ok(candidate) = Candidate::from_sdp_string(text) else { return };
        let (rtc, role) = if trickle.target == proto::SignalTarget::Subscriber as i32 {
            (&mut remote.subscriber, PcRole::Subscriber)
        } else {
            (&mut remote.publisher, PcRole::Publisher)
        };
        rtc.add_remote_candidate(candidate);
        self.mark_dirty(key, role);
    }

    fn handle_add_track(&mut self, now: Instant, key: Key, request: proto::AddTrackRequest) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let audio = request.r#type == proto::TrackType::Audio as i32;
        if !participant.permissions.can_publish || !audio || participant.tracks.len() >= MAX_TRACKS_PER_PARTICIPANT {
            // LiveKit answers nothing here either: the client's publish times out with its own
            // clear error ("publication of local track timed out"). The log says why.
            tracing::info!(room = %self.name, identity = %participant.identity, audio, "add_track refused");
            // The signature is the sans-IO contract; this step needs no time.
            let _ = now;
            return;
        }
        let Body::Remote(remote) = &mut participant.body else { return };
        let sid = ids::audio_track_sid();
        #[allow(deprecated)]
        let info = proto::TrackInfo {
            sid: sid.clone(),
            r#type: proto::TrackType::Audio as i32,
            name: request.name.clone(),
            muted: request.muted,
            source: request.source,
            mime_type: "audio/opus".to_owned(),
            disable_red: true,
            stream: request.stream.clone(),
            audio_features: request.audio_features.clone(),
            ..Default::default()
        };
        remote.pending_publications.push((request.cid.clone(), sid.clone()));
        participant
            .tracks
            .insert(sid, Track { info: info.clone(), bound: false, announced_subscribed: false, local: None });
        self.outputs.push_back(CoreOutput::Signal {
            to: key,
            message: proto::signal_response::Message::TrackPublished(proto::TrackPublishedResponse {
                cid: request.cid,
                track: Some(info),
            }),
        });
    }

    fn handle_mute(&mut self, now: Instant, key: Key, mute: proto::MuteTrackRequest) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let Some(track) = participant.tracks.get_mut(&mute.sid) else { return };
        if track.info.muted == mute.muted {
            return;
        }
        track.info.muted = mute.muted;
        participant.version += 1;
        self.broadcast_update(key, true);
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    fn handle_subscription(&mut self, now: Instant, key: Key, subscription: proto::UpdateSubscription) {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        let sids = subscription
            .track_sids
            .into_iter()
            .chain(subscription.participant_tracks.into_iter().flat_map(|tracks| tracks.track_sids));
        for sid in sids.take(64) {
            if subscription.subscribe {
                remote.subscriptions.insert(sid);
            } else {
                remote.subscriptions.remove(&sid);
            }
        }
        self.renegotiate(now, key);
    }

    fn handle_update_metadata(&mut self, now: Instant, key: Key, update: proto::UpdateParticipantMetadata) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let mut broadcast = false;
        let reason = if !participant.permissions.can_update_metadata {
            proto::request_response::Reason::NotAllowed
        } else {
            match participant.apply_state_update(
                (!update.name.is_empty()).then_some(update.name),
                (!update.metadata.is_empty()).then_some(update.metadata),
                update.attributes.into_iter().collect(),
            ) {
                Ok(changed) => {
                    broadcast = changed.is_some();
                    proto::request_response::Reason::Ok
                }
                Err(()) => proto::request_response::Reason::LimitExceeded,
            }
        };
        let message = match reason {
            proto::request_response::Reason::Ok => String::new(),
            proto::request_response::Reason::NotAllowed => "the token does not grant canUpdateOwnMetadata".to_owned(),
            _ => format!("attributes and metadata are limited to {MAX_PARTICIPANT_STATE_BYTES} bytes"),
        };
        self.outputs.push_back(CoreOutput::Signal {
            to: key,
            message: proto::signal_response::Message::RequestResponse(proto::RequestResponse {
                request_id: update.request_id,
                reason: reason as i32,
                message,
                request: None,
            }),
        });
        // The answer first, then the update everyone (the sender included) sees.
        if broadcast {
            self.broadcast_update(key, true);
        }
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    // ---------------------------------------------------------------------------------------
    // UDP and time

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
        let rtc = match role {
            PcRole::Publisher => &mut remote.publisher,
            PcRole::Subscriber => &mut remote.subscriber,
        };
        if let Err(error) = rtc.handle_input(Input::Receive(now, receive)) {
            tracing::debug!(room = %self.name, %error, "datagram rejected");
        }
        self.mark_dirty(key, role);
        self.flush(now);
    }

    /// Drives every connection's timers and the in-process audio pacing.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let keys: Vec<Key> = self.participants.keys().copied().collect();
        let mut dead = Vec::new();
        for key in keys {
            let Some(participant) = self.participants.get_mut(&key) else { continue };
            match &mut participant.body {
                Body::Remote(remote) => {
                    if remote.publisher_timeout <= now {
                        if let Err(error) = remote.publisher.handle_input(Input::Timeout(now)) {
                            tracing::warn!(room = %self.name, identity = %participant.identity, %error, "publisher timeout failed");
                        }
                        self.dirty.push((key, PcRole::Publisher));
                    }
                    if remote.subscriber_timeout <= now {
                        if let Err(error) = remote.subscriber.handle_input(Input::Timeout(now)) {
                            tracing::warn!(room = %self.name, identity = %participant.identity, %error, "subscriber timeout failed");
                        }
                        self.dirty.push((key, PcRole::Subscriber));
                    }
                    // In case a low-buffer event was missed, the timers also drain the backlog.
                    if !remote.reliable_backlog.is_empty() && flush_backlog(remote) {
                        self.dirty.push((key, PcRole::Subscriber));
                    }
                    if remote.subscriber_connected
                        && now.saturating_duration_since(remote.last_media_activity) > MEDIA_DEAD_AFTER
                        && !remote.subscriber.is_alive()
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
        for key in dead {
            self.remove_participant(now, key, LeaveReason::MediaFailure, true);
        }
        self.flush(now);
    }

    fn mark_dirty(&mut self, key: Key, role: PcRole) {
        if !self.dirty.contains(&(key, role)) {
            self.dirty.push((key, role));
        }
    }

    /// Drains every dirty connection until nothing is left to do.
    fn flush(&mut self, now: Instant) {
        while let Some((key, role)) = self.dirty.pop() {
            let events = self.drain(key, role);
            for event in events {
                self.handle_rtc_event(now, key, role, event);
            }
        }
    }

    /// str0m's rule, in one place: poll until `Timeout`.
    fn drain(&mut self, key: Key, role: PcRole) -> Vec<Event> {
        let mut events = Vec::new();
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return events };
        let (rtc, timeout) = match role {
            PcRole::Publisher => (&mut remote.publisher, &mut remote.publisher_timeout),
            PcRole::Subscriber => (&mut remote.subscriber, &mut remote.subscriber_timeout),
        };
        loop {
            match rtc.poll_output() {
                Ok(Output::Timeout(at)) => {
                    *timeout = at;
                    break;
                }
                Ok(Output::Transmit(transmit)) => self.outputs.push_back(CoreOutput::Transmit {
                    source: transmit.source,
                    destination: transmit.destination,
                    contents: transmit.contents.into(),
                }),
                Ok(Output::Event(event)) => events.push(event),
                Err(error) => {
                    tracing::info!(room = %self.name, %error, ?role, "peer connection failed");
                    // Far in the future: the connection is dead; removal follows from the
                    // ICE state event or the signal connection.
                    *timeout = far_future(*timeout);
                    break;
                }
            }
        }
        events
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
                if flush_backlog(remote) {
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
        }
    }

    fn channel_open(&mut self, key: Key, role: PcRole, id: ChannelId, label: &str) {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        match role {
            PcRole::Publisher => {
                // `_data_track` and unknown labels are accepted and ignored.
                let reliable = match label {
                    "_reliable" => true,
                    "_lossy" => false,
                    _ => return,
                };
                remote.publisher_channels.insert(id, reliable);
            }
            PcRole::Subscriber => {
                if Some(id) == remote.subscriber_reliable {
                    remote.reliable_open = true;
                    if let Some(mut channel) = remote.subscriber.channel(id) {
                        channel.set_buffered_amount_low_threshold(RELIABLE_LOW_THRESHOLD);
                    }
                } else if Some(id) == remote.subscriber_lossy {
                    remote.lossy_open = true;
                }
                // Flush what waited for the channels, in order.
                let waiting = std::mem::take(&mut remote.pending_packets);
                for (reliable, bytes) in waiting {
                    write_packet(remote, reliable, bytes);
                }
                self.mark_dirty(key, PcRole::Subscriber);
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Tracks and media

    fn bind_publication(&mut self, now: Instant, key: Key, mid: Mid) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let Body::Remote(remote) = &mut participant.body else { return };
        if remote.upstream.contains_key(&mid) {
            return;
        }
        let msid_track = remote.publisher.media(mid).map(|media| media.track_id().to_owned()).unwrap_or_default();
        // LiveKit matches the msid track id to the `cid` of add_track, then falls back to the
        // first pending audio publication.
        let position = remote
            .pending_publications
            .iter()
            .position(|(cid, _)| *cid == msid_track)
            .or(if remote.pending_publications.is_empty() { None } else { Some(0) });
        let Some(position) = position else {
            tracing::info!(room = %self.name, "audio m-line without a matching add_track");
            return;
        };
        let (_, track_sid) = remote.pending_publications.remove(position);
        remote.upstream.insert(mid, track_sid.clone());
        let Some(track) = participant.tracks.get_mut(&track_sid) else { return };
        track.bound = true;
        track.info.mid = mid.to_string();
        let publication =
            TrackPublication { sid: track.info.sid.clone(), name: track.info.name.clone(), muted: track.info.muted };
        participant.version += 1;
        let identity = participant.identity.clone();
        // TrackInfo reaches everyone before any offer that carries the track.
        self.broadcast_update(key, false);
        let locals = self.local_keys_except(key);
        for local in &locals {
            self.local_event(
                *local,
                RoomEvent::TrackPublished { participant_identity: identity.clone(), track: publication.clone() },
            );
        }
        if !locals.is_empty() {
            self.mark_track_subscribed(key, &track_sid);
        }
        for other in self.remote_keys() {
            if other != key {
                self.renegotiate(now, other);
            }
        }
    }

    fn local_keys_except(&self, except: Key) -> Vec<Key> {
        self.participants
            .iter()
            .filter(|(key, participant)| **key != except && matches!(participant.body, Body::Local(_)))
            .map(|(key, _)| *key)
            .collect()
    }

    fn track_owner(&self, track_sid: &str) -> Option<Key> {
        self.participants.iter().find(|(_, participant)| participant.tracks.contains_key(track_sid)).map(|(k, _)| *k)
    }

    fn mark_track_subscribed(&mut self, owner: Key, track_sid: &str) {
        let Some(participant) = self.participants.get_mut(&owner) else { return };
        let Some(track) = participant.tracks.get_mut(track_sid) else { return };
        if track.announced_subscribed {
            return;
        }
        track.announced_subscribed = true;
        if matches!(participant.body, Body::Remote(_)) {
            self.outputs.push_back(CoreOutput::Signal {
                to: owner,
                message: proto::signal_response::Message::TrackSubscribed(proto::TrackSubscribed {
                    track_sid: track_sid.to_owned(),
                }),
            });
        }
    }

    fn forward_media(
        &mut self,
        now: Instant,
        key: Key,
        mid: Mid,
        time: MediaTime,
        network_time: Instant,
        payload: Arc<[u8]>,
    ) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let Body::Remote(remote) = &mut participant.body else { return };
        remote.last_media_activity = now;
        // libwebrtc sends padding-only packets for bandwidth probing; they carry no audio.
        if payload.is_empty() {
            return;
        }
        let Some(track_sid) = remote.upstream.get(&mid).cloned() else { return };
        let identity: Arc<str> = Arc::from(participant.identity.as_str());
        let rtp = time.rebase(Frequency::FORTY_EIGHT_KHZ).numer();
        self.deliver_audio(now, key, &identity, &track_sid, rtp, network_time, payload);
    }

    /// Sends one Opus frame of `track_sid` to everyone subscribed to it.
    #[allow(clippy::too_many_arguments)]
    fn deliver_audio(
        &mut self,
        now: Instant,
        publisher: Key,
        identity: &Arc<str>,
        track_sid: &str,
        rtp: u64,
        received_at: Instant,
        payload: Arc<[u8]>,
    ) {
        let mut local_frame: Option<RemoteAudioFrame> = None;
        let keys: Vec<Key> = self.participants.keys().copied().filter(|k| *k != publisher).collect();
        for other in keys {
            let Some(target) = self.participants.get_mut(&other) else { continue };
            match &mut target.body {
                Body::Remote(remote) => {
                    let (Some(mid), Some(pt)) = (remote.downstream.get(track_sid).copied(), remote.downstream_pt)
                    else {
                        continue;
                    };
                    if let Some(writer) = remote.subscriber.writer(mid) {
                        let time = MediaTime::new(rtp, Frequency::FORTY_EIGHT_KHZ);
                        if let Err(error) = writer.write(pt, now, time, payload.clone()) {
                            tracing::debug!(%error, "downstream audio write failed");
                        }
                        self.dirty.push((other, PcRole::Subscriber));
                    }
                }
                Body::Local(_) => {
                    let frame = local_frame.get_or_insert_with(|| RemoteAudioFrame {
                        participant_identity: identity.clone(),
                        track_sid: Arc::from(track_sid),
                        rtp_timestamp: rtp,
                        received_at,
                        opus: Bytes::copy_from_slice(&payload),
                    });
                    self.outputs.push_back(CoreOutput::Local {
                        to: other,
                        output: LocalOutput::Event(RoomEvent::AudioFrame(frame.clone())),
                    });
                }
            }
        }
        self.dirty.sort_unstable_by_key(|(key, role)| (*key, *role as u8));
        self.dirty.dedup();
    }

    /// Brings a remote participant's subscriber connection in line with what it should carry:
    /// the data channels and one sendonly audio m-line per subscribed track. One offer at a time.
    fn renegotiate(&mut self, now: Instant, key: Key) {
        let wanted: Vec<(String, String)> = {
            let Some(participant) = self.participants.get(&key) else { return };
            let Body::Remote(remote) = &participant.body else { return };
            if !participant.permissions.can_subscribe {
                Vec::new()
            } else {
                self.participants
                    .iter()
                    .filter(|(other, _)| **other != key)
                    .flat_map(|(_, other)| {
                        other
                            .tracks
                            .values()
                            .filter(|track| track.bound)
                            .map(|track| (other.sid.clone(), track.info.sid.clone()))
                    })
                    .filter(|(_, track_sid)| remote.auto_subscribe || remote.subscriptions.contains(track_sid))
                    .collect()
            }
        };
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        if remote.pending_offer.is_some() {
            remote.renegotiate = true;
            return;
        }
        let first_offer = remote.next_offer_id == 1;
        let wanted_sids: HashSet<&str> = wanted.iter().map(|(_, track)| track.as_str()).collect();
        let stale: Vec<(String, Mid)> = remote
            .downstream
            .iter()
            .filter(|(track, _)| !wanted_sids.contains(track.as_str()))
            .map(|(track, mid)| (track.clone(), *mid))
            .collect();
        let added: Vec<(String, String)> =
            wanted.into_iter().filter(|(_, track)| !remote.downstream.contains_key(track)).collect();
        if !first_offer && stale.is_empty() && added.is_empty() {
            return;
        }
        let mut api = remote.subscriber.sdp_api();
        if first_offer {
            let reliable = api.add_channel_with_config(ChannelConfig {
                label: "_reliable".to_owned(),
                ordered: true,
                reliability: Reliability::Reliable,
                negotiated: None,
                protocol: String::new(),
            });
            let lossy = api.add_channel_with_config(ChannelConfig {
                label: "_lossy".to_owned(),
                ordered: false,
                reliability: Reliability::MaxRetransmits { retransmits: 0 },
                negotiated: None,
                protocol: String::new(),
            });
            remote.subscriber_reliable = Some(reliable);
            remote.subscriber_lossy = Some(lossy);
        }
        for (track, mid) in &stale {
            api.stop_media(*mid);
            remote.downstream.remove(track);
        }
        for (participant_sid, track_sid) in &added {
            // Clients recover publisher and track from the msid: "<PA_sid>|<TR_sid> <TR_sid>".
            let mid = api.add_media(
                MediaKind::Audio,
                Direction::SendOnly,
                Some(format!("{participant_sid}|{track_sid}")),
                Some(track_sid.clone()),
                None,
            );
            remote.downstream.insert(track_sid.clone(), mid);
        }
        let Some((offer, pending)) = api.apply() else { return };
        let id = remote.next_offer_id;
        remote.next_offer_id += 1;
        remote.pending_offer = Some((id, pending));
        self.outputs.push_back(CoreOutput::Signal {
            to: key,
            message: proto::signal_response::Message::Offer(proto::SessionDescription {
                r#type: "offer".to_owned(),
                sdp: offer.to_sdp_string(),
                id,
                mid_to_track_id: HashMap::new(),
            }),
        });
        self.mark_dirty(key, PcRole::Subscriber);
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    fn new_remote_peer(&mut self, now: Instant, key: Key, auto_subscribe: bool) -> RemotePeer {
        let publisher = self.new_rtc(now, key, PcRole::Publisher);
        let subscriber = self.new_rtc(now, key, PcRole::Subscriber);
        RemotePeer {
            publisher,
            subscriber,
            publisher_timeout: now,
            subscriber_timeout: now,
            publisher_channels: HashMap::new(),
            subscriber_reliable: None,
            subscriber_lossy: None,
            reliable_open: false,
            lossy_open: false,
            pending_packets: VecDeque::new(),
            reliable_backlog: VecDeque::new(),
            reliable_backlog_bytes: 0,
            pending_offer: None,
            renegotiate: false,
            next_offer_id: 1,
            downstream: HashMap::new(),
            downstream_pt: None,
            upstream: HashMap::new(),
            pending_publications: Vec::new(),
            auto_subscribe,
            subscriptions: HashSet::new(),
            subscriber_connected: false,
            last_media_activity: now,
        }
    }

    fn new_rtc(&mut self, now: Instant, key: Key, role: PcRole) -> Rtc {
        let ufrag = ids::ice_ufrag();
        let mut rtc = Rtc::builder()
            .set_ice_lite(true)
            .clear_codecs()
            .enable_opus(true, false)
            .set_dtls_cert(self.settings.dtls_cert.clone())
            .set_local_ice_credentials(IceCreds { ufrag: ufrag.clone(), pass: ids::ice_password() })
            .set_stats_interval(None)
            .build(now);
        for address in &self.settings.candidates {
            match Candidate::host(*address, "udp") {
                Ok(candidate) => {
                    rtc.add_local_candidate(candidate);
                }
                Err(error) => tracing::warn!(%address, %error, "unusable host candidate"),
            }
        }
        self.outputs.push_back(CoreOutput::RouteAdded { ufrag, key, role });
        rtc
    }

    // ---------------------------------------------------------------------------------------
    // Data

    fn handle_client_packet(&mut self, now: Instant, key: Key, reliable: bool, bytes: &[u8]) {
        let Some(sender) = self.participants.get_mut(&key) else { return };
        if bytes.len() > MAX_DATA_PACKET_BYTES || !sender.permissions.can_publish_data {
            return;
        }
        if !sender.data_budget.admit(now, bytes.len()) {
            if sender.data_budget.dropped.is_power_of_two() {
                tracing::info!(room = %self.name, identity = %sender.identity, dropped = sender.data_budget.dropped,
                    "data packets over budget dropped");
            }
            return;
        }
        let Ok(mut packet) = proto::DataPacket::decode(bytes) else { return };
        if reliable && packet.sequence > 0 {
            if packet.sequence <= sender.last_reliable_sequence {
                return;
            }
            sender.last_reliable_sequence = packet.sequence;
        }
        // Transcriptions from non-agents and metrics are not forwarded (as in LiveKit).
        match &packet.value {
            None | Some(proto::data_packet::Value::Metrics(_)) => return,
            Some(proto::data_packet::Value::Transcription(_)) if sender.kind != ParticipantKind::Agent => return,
            _ => {}
        }
        // Sender fields are filled in by the room, never trusted.
        packet.participant_sid = sender.sid.clone();
        packet.participant_identity = if sender.permissions.hidden { String::new() } else { sender.identity.clone() };
        #[allow(deprecated)]
        {
            packet.kind =
                if reliable { proto::data_packet::Kind::Reliable } else { proto::data_packet::Kind::Lossy } as i32;
            if let Some(proto::data_packet::Value::User(user)) = &mut packet.value {
                user.participant_sid = packet.participant_sid.clone();
                user.participant_identity = packet.participant_identity.clone();
                if packet.destination_identities.is_empty() && !user.destination_identities.is_empty() {
                    packet.destination_identities = user.destination_identities.clone();
                }
            }
        }
        self.route_packet(now, key, reliable, packet);
    }

    /// Delivers a packet (sender fields already set) to its destinations, or everyone else.
    fn route_packet(&mut self, now: Instant, from: Key, reliable: bool, packet: proto::DataPacket) {
        let encoded: Arc<[u8]> = Arc::from(packet.encode_to_vec());
        let destinations: HashSet<&str> = packet.destination_identities.iter().map(String::as_str).collect();
        let targets: Vec<Key> = self
            .participants
            .iter()
            .filter(|(key, participant)| {
                **key != from && (destinations.is_empty() || destinations.contains(participant.identity.as_str()))
            })
            .map(|(key, _)| *key)
            .collect();
        for target in targets {
            let Some(participant) = self.participants.get_mut(&target) else { continue };
            match &mut participant.body {
                Body::Remote(remote) => {
                    let open = if reliable { remote.reliable_open } else { remote.lossy_open };
                    if open {
                        write_packet(remote, reliable, encoded.clone());
                        self.mark_dirty(target, PcRole::Subscriber);
                    } else if remote.pending_packets.len() < MAX_PENDING_PACKETS {
                        remote.pending_packets.push_back((reliable, encoded.clone()));
                    }
                }
                Body::Local(_) => {
                    let output = match &packet.value {
                        Some(proto::data_packet::Value::User(user)) => {
                            LocalOutput::Event(RoomEvent::Data(DataMessage {
                                from_identity: packet.participant_identity.clone(),
                                from_sid: packet.participant_sid.clone(),
                                topic: user.topic.clone(),
                                payload: Bytes::copy_from_slice(&user.payload),
                                reliable,
                            }))
                        }
                        Some(
                            value @ (proto::data_packet::Value::RpcRequest(_)
                            | proto::data_packet::Value::RpcAck(_)
                            | proto::data_packet::Value::RpcResponse(_)),
                        ) => LocalOutput::Rpc {
                            from_identity: packet.participant_identity.clone(),
                            packet: value.clone(),
                        },
                        _ => continue,
                    };
                    self.outputs.push_back(CoreOutput::Local { to: target, output });
                }
            }
        }
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    // ---------------------------------------------------------------------------------------
    // In-process participants

    /// A command from an in-process participant.
    pub(crate) fn handle_local(&mut self, now: Instant, key: Key, command: LocalCommand) -> LocalReply {
        if !self.participants.contains_key(&key) {
            return LocalReply::Failed(LocalError::NotInRoom);
        }
        let reply = match command {
            LocalCommand::PublishAudio { name } => self.publish_local_audio(now, key, name),
            LocalCommand::UnpublishTrack { track_sid } => self.unpublish_local(now, key, &track_sid),
            LocalCommand::PushAudio { track_sid, pcm } => self.push_local_audio(now, key, &track_sid, &pcm),
            LocalCommand::PushOpus { track_sid, opus, media_time } => {
                self.push_local_opus(now, key, &track_sid, opus, media_time)
            }
            LocalCommand::ClearAudio { track_sid } => match self.local_track(key, &track_sid) {
                Some(local) => LocalReply::Cleared { discarded_samples: local.queue.clear() },
                None => LocalReply::Failed(LocalError::UnknownTrack(track_sid)),
            },
            LocalCommand::SendData { payload, topic, reliable, destinations } => {
                if payload.len() > MAX_DATA_PACKET_BYTES - 1024 {
                    return LocalReply::Failed(LocalError::PacketTooLarge(payload.len()));
                }
                #[allow(deprecated)]
                let value = proto::data_packet::Value::User(proto::UserPacket {
                    payload: payload.to_vec(),
                    topic,
                    destination_identities: destinations.clone(),
                    ..Default::default()
                });
                self.send_local_packet(now, key, reliable, destinations, value);
                LocalReply::Done
            }
            LocalCommand::SendRpc { destination, value } => {
                self.send_local_packet(now, key, true, vec![destination], value);
                LocalReply::Done
            }
            LocalCommand::SetAttributes { attributes } => self.update_local_state(key, None, attributes),
            LocalCommand::SetMetadata { metadata } => self.update_local_state(key, Some(metadata), BTreeMap::new()),
            LocalCommand::RemoveParticipant { identity } => match self.by_identity.get(&identity).copied() {
                Some(target) => {
                    self.remove_participant(now, target, LeaveReason::ParticipantRemoved, true);
                    LocalReply::Removed(true)
                }
                None => LocalReply::Removed(false),
            },
            LocalCommand::Leave => {
                self.remove_participant(now, key, LeaveReason::ClientInitiated, false);
                LocalReply::Done
            }
        };
        self.flush(now);
        reply
    }

    fn local_track(&mut self, key: Key, track_sid: &str) -> Option<&mut LocalTrack> {
        self.participants.get_mut(&key)?.tracks.get_mut(track_sid)?.local.as_mut()
    }

    fn publish_local_audio(&mut self, now: Instant, key: Key, name: String) -> LocalReply {
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        if participant.tracks.len() >= MAX_TRACKS_PER_PARTICIPANT {
            return LocalReply::Failed(LocalError::TooManyTracks);
        }
        let encoder = match OpusEncoder::new_voice() {
            Ok(encoder) => encoder,
            Err(error) => return LocalReply::Failed(LocalError::Encoder(error.to_string())),
        };
        let sid = ids::audio_track_sid();
        let played_samples = Arc::new(AtomicU64::new(0));
        #[allow(deprecated)]
        let info = proto::TrackInfo {
            sid: sid.clone(),
            r#type: proto::TrackType::Audio as i32,
            name: name.clone(),
            source: proto::TrackSource::Microphone as i32,
            mime_type: "audio/opus".to_owned(),
            disable_red: true,
            ..Default::default()
        };
        participant.tracks.insert(
            sid.clone(),
            Track {
                info,
                bound: true,
                announced_subscribed: false,
                local: Some(LocalTrack {
                    queue: AudioOutQueue::new(OutQueueConfig::default()),
                    encoder,
                    played_samples: played_samples.clone(),
                    rtp_base: 0,
                    last_rtp: 0,
                    last_opus: None,
                }),
            },
        );
        participant.version += 1;
        let identity = participant.identity.clone();
        self.broadcast_update(key, false);
        let publication = TrackPublication { sid: sid.clone(), name, muted: false };
        for local in self.local_keys_except(key) {
            self.local_event(
                local,
                RoomEvent::TrackPublished { participant_identity: identity.clone(), track: publication.clone() },
            );
        }
        for other in self.remote_keys() {
            self.renegotiate(now, other);
        }
        LocalReply::TrackPublished { track_sid: sid, played_samples }
    }

    fn unpublish_local(&mut self, now: Instant, key: Key, track_sid: &str) -> LocalReply {
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        if participant.tracks.remove(track_sid).is_none() {
            return LocalReply::Failed(LocalError::UnknownTrack(track_sid.to_owned()));
        }
        participant.version += 1;
        let identity = participant.identity.clone();
        self.broadcast_update(key, false);
        for local in self.local_keys_except(key) {
            self.local_event(
                local,
                RoomEvent::TrackUnpublished { participant_identity: identity.clone(), track_sid: track_sid.to_owned() },
            );
        }
        for other in self.remote_keys() {
            self.renegotiate(now, other);
        }
        LocalReply::Done
    }

    fn push_local_audio(&mut self, now: Instant, key: Key, track_sid: &str, pcm: &[i16]) -> LocalReply {
        let Some(local) = self.local_track(key, track_sid) else {
            return LocalReply::Failed(LocalError::UnknownTrack(track_sid.to_owned()));
        };
        if let Err(error) = local.queue.push_pcm(pcm) {
            return LocalReply::Failed(LocalError::AudioQueueFull(error.to_string()));
        }
        // The first frame of a talkspurt is due at once.
        self.send_local_audio(now, key, track_sid);
        LocalReply::Done
    }

    /// Sends one pre-encoded 20 ms Opus frame at once: the caller paces (a relay of frames that
    /// arrive paced, such as an echo or a forwarded stream, or a player with its own clock). RTP
    /// time advances by one frame, or by the time since the previous frame when more passed, so
    /// receivers see real time. That time is the frame's `media_time` when the caller keeps a
    /// media clock (a frame sent a few milliseconds late then still follows its predecessor by
    /// exactly one frame, instead of opening a false gap that receivers fill with concealment),
    /// else the time it arrived.
    fn push_local_opus(
        &mut self,
        now: Instant,
        key: Key,
        track_sid: &str,
        opus: Bytes,
        media_time: Option<Instant>,
    ) -> LocalReply {
        if opus.is_empty() || opus.len() > 1275 {
            // 1275 bytes is the largest Opus frame (RFC 6716 §3.4).
            return LocalReply::Failed(LocalError::Encoder(format!("not an Opus frame: {} bytes", opus.len())));
        }
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        let identity: Arc<str> = Arc::from(participant.identity.as_str());
        let Some(local) = participant.tracks.get_mut(track_sid).and_then(|t| t.local.as_mut()) else {
            return LocalReply::Failed(LocalError::UnknownTrack(track_sid.to_owned()));
        };
        const FRAME: u64 = svc_audio::FRAME_SAMPLES as u64;
        let at = media_time.unwrap_or(now);
        let rtp = match local.last_opus {
            None => 0,
            Some((last, rtp)) => {
                let elapsed_frames = (at.saturating_duration_since(last).as_micros() as u64 + 10_000) / 20_000;
                rtp + FRAME * elapsed_frames.max(1)
            }
        };
        local.last_opus = Some((at, rtp));
        local.played_samples.fetch_add(FRAME, Ordering::Relaxed);
        self.deliver_audio(now, key, &identity, track_sid, rtp, now, Arc::from(opus.as_ref()));
        LocalReply::Done
    }

    /// Sends every frame of an in-process track that is due.
    fn send_local_audio(&mut self, now: Instant, key: Key, track_sid: &str) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let identity: Arc<str> = Arc::from(participant.identity.as_str());
        let Some(local) = participant.tracks.get_mut(track_sid).and_then(|t| t.local.as_mut()) else { return };
        let mut frames = Vec::new();
        while let Some(frame) = local.queue.poll_frame(now) {
            let encoded = match local.encoder.encode_frame(&frame.pcm) {
                Ok(encoded) => encoded,
                Err(error) => {
                    tracing::warn!(%error, "opus encode failed");
                    continue;
                }
            };
            // Extend the 32-bit RTP clock so str0m sees a monotonic 64-bit time.
            if frame.rtp_timestamp < local.last_rtp {
                local.rtp_base += 1 << 32;
            }
            local.last_rtp = frame.rtp_timestamp;
            frames.push((local.rtp_base + u64::from(frame.rtp_timestamp), encoded));
        }
        local.played_samples.store(local.queue.played_samples(), Ordering::Relaxed);
        for (rtp, encoded) in frames {
            self.deliver_audio(now, key, &identity, track_sid, rtp, now, Arc::from(encoded));
        }
    }

    fn send_local_packet(
        &mut self,
        now: Instant,
        key: Key,
        reliable: bool,
        destinations: Vec<String>,
        value: proto::data_packet::Value,
    ) {
        let Some(sender) = self.participants.get(&key) else { return };
        #[allow(deprecated)]
        let packet = proto::DataPacket {
            kind: if reliable { proto::data_packet::Kind::Reliable } else { proto::data_packet::Kind::Lossy } as i32,
            participant_identity: sender.identity.clone(),
            destination_identities: destinations,
            // Unsequenced: receivers dedupe only packets with a sequence.
            sequence: 0,
            participant_sid: sender.sid.clone(),
            value: Some(value),
        };
        self.route_packet(now, key, reliable, packet);
    }

    fn update_local_state(
        &mut self,
        key: Key,
        metadata: Option<String>,
        attributes: BTreeMap<String, String>,
    ) -> LocalReply {
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        match participant.apply_state_update(None, metadata, attributes) {
            Ok(Some(_)) => {
                self.broadcast_update(key, false);
                LocalReply::Done
            }
            Ok(None) => LocalReply::Done,
            Err(()) => LocalReply::Failed(LocalError::StateTooLarge),
        }
    }

    fn local_event(&mut self, to: Key, event: RoomEvent) {
        self.outputs.push_back(CoreOutput::Local { to, output: LocalOutput::Event(event) });
    }

    // ---------------------------------------------------------------------------------------
    // Participant info

    fn join_response(&self, key: Key) -> proto::JoinResponse {
        let participant = self.participants.get(&key).map(Participant_::to_proto);
        let others = self
            .participants
            .iter()
            .filter(|(other, p)| **other != key && !p.permissions.hidden)
            .map(|(_, p)| p.to_proto())
            .collect();
        proto::JoinResponse {
            room: Some(self.room_info()),
            participant,
            other_participants: others,
            server_version: SERVER_VERSION.to_owned(),
            ice_servers: Vec::new(),
            subscriber_primary: true,
            alternative_url: String::new(),
            client_configuration: Some(proto::ClientConfiguration {
                resume_connection: proto::ClientConfigSetting::Disabled as i32,
                ..Default::default()
            }),
            server_region: String::new(),
            ping_timeout: self.settings.ping_timeout,
            ping_interval: self.settings.ping_interval,
            server_info: Some(proto::ServerInfo {
                edition: proto::server_info::Edition::Standard as i32,
                version: SERVER_VERSION.to_owned(),
                protocol: SERVER_PROTOCOL,
                region: String::new(),
                node_id: self.settings.node_id.clone(),
                debug_info: String::new(),
                agent_protocol: 0,
            }),
            sif_trailer: Vec::new(),
            enabled_publish_codecs: Vec::new(),
            fast_publish: true,
        }
    }

    fn room_info(&self) -> proto::Room {
        proto::Room {
            sid: self.sid.clone(),
            name: self.name.clone(),
            creation_time: self.created_at_ms / 1000,
            creation_time_ms: self.created_at_ms,
            num_participants: u32::try_from(self.participants.len()).unwrap_or(u32::MAX),
            num_publishers: u32::try_from(self.participants.values().filter(|p| !p.tracks.is_empty()).count())
                .unwrap_or(u32::MAX),
            ..Default::default()
        }
    }

    /// Sends the participant's current info to everyone (and to itself when asked: clients
    /// resolve `setAttributes` by seeing their own update).
    fn broadcast_update(&mut self, key: Key, include_self: bool) {
        let Some(participant) = self.participants.get(&key) else { return };
        if participant.permissions.hidden {
            return;
        }
        let info = participant.to_proto();
        let snapshot = participant.snapshot();
        let targets: Vec<(Key, bool)> = self
            .participants
            .iter()
            .filter(|(other, _)| include_self || **other != key)
            .map(|(other, p)| (*other, matches!(p.body, Body::Local(_))))
            .collect();
        for (target, local) in targets {
            if local {
                if target != key {
                    self.local_event(
                        target,
                        RoomEvent::ParticipantUpdated { participant: snapshot.clone(), changed_attributes: Vec::new() },
                    );
                }
            } else {
                self.outputs.push_back(CoreOutput::Signal {
                    to: target,
                    message: proto::signal_response::Message::Update(proto::ParticipantUpdate {
                        participants: vec![info.clone()],
                    }),
                });
            }
        }
    }

    /// In-process participants learn of a new participant as a join (updates follow).
    fn announce_joined_to_locals(&mut self, key: Key) {
        let Some(participant) = self.participants.get(&key) else { return };
        if participant.permissions.hidden {
            return;
        }
        let snapshot = participant.snapshot();
        for local in self.local_keys_except(key) {
            self.local_event(local, RoomEvent::ParticipantJoined(snapshot.clone()));
        }
    }
}

impl Participant_ {
    fn to_proto(&self) -> proto::ParticipantInfo {
        proto::ParticipantInfo {
            sid: self.sid.clone(),
            identity: self.identity.clone(),
            state: self.state as i32,
            tracks: self.tracks.values().filter(|track| track.bound).map(|track| track.info.clone()).collect(),
            metadata: self.metadata.clone(),
            joined_at: self.joined_at_ms / 1000,
            joined_at_ms: self.joined_at_ms,
            name: self.name.clone(),
            version: self.version,
            permission: Some(self.permissions.to_proto(self.kind)),
            is_publisher: self.tracks.values().any(|track| track.bound),
            kind: self.kind.to_proto() as i32,
            attributes: self.attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            // The agent speaks RPC v1 only; clients then use v1 packets toward it.
            client_protocol: self.client_protocol,
            ..Default::default()
        }
    }

    fn snapshot(&self) -> Participant {
        Participant {
            sid: self.sid.clone(),
            identity: self.identity.clone(),
            name: self.name.clone(),
            kind: self.kind,
            metadata: self.metadata.clone(),
            attributes: self.attributes.clone(),
            tracks: self
                .tracks
                .values()
                .filter(|track| track.bound)
                .map(|track| TrackPublication {
                    sid: track.info.sid.clone(),
                    name: track.info.name.clone(),
                    muted: track.info.muted,
                })
                .collect(),
            active: self.state == proto::participant_info::State::Active,
        }
    }

    /// Applies a name/metadata/attribute change (empty attribute value deletes). Returns the
    /// changed attribute keys, `None` when nothing changed, `Err` when over the size limit.
    fn apply_state_update(
        &mut self,
        name: Option<String>,
        metadata: Option<String>,
        attributes: BTreeMap<String, String>,
    ) -> Result<Option<Vec<String>>, ()> {
        let mut next = self.attributes.clone();
        let mut changed = Vec::new();
        for (key, value) in attributes {
            let previous = if value.is_empty() { next.remove(&key) } else { next.insert(key.clone(), value.clone()) };
            if previous.as_deref() != Some(value.as_str()) && !(value.is_empty() && previous.is_none()) {
                changed.push(key);
            }
        }
        let metadata_next = metadata.unwrap_or_else(|| self.metadata.clone());
        let size: usize = next.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() + metadata_next.len();
        if size > MAX_PARTICIPANT_STATE_BYTES {
            return Err(());
        }
        let name_changed = name.as_ref().is_some_and(|name| *name != self.name);
        let metadata_changed = metadata_next != self.metadata;
        if changed.is_empty() && !name_changed && !metadata_changed {
            return Ok(None);
        }
        self.attributes = next;
        self.metadata = metadata_next;
        if let Some(name) = name {
            self.name = name;
        }
        self.version += 1;
        Ok(Some(changed))
    }
}

/// Writes a packet to a subscriber's data channel. A reliable packet the SCTP send buffer cannot
/// take now (`Ok(false)`: str0m buffers 128 KiB across channels, and a burst of chunked messages
/// fills it) waits in the subscriber's backlog, in order, and goes out as SCTP acknowledges
/// ([`flush_backlog`] on `ChannelBufferedAmountLow`); a lossy one is dropped. The backlog is
/// bounded: a client that cannot keep up with [`MAX_RELIABLE_BACKLOG_BYTES`] loses data rather
/// than growing the server's memory.
fn write_packet(remote: &mut RemotePeer, reliable: bool, bytes: Arc<[u8]>) {
    if reliable && !remote.reliable_backlog.is_empty() {
        push_backlog(remote, bytes);
        return;
    }
    let id = if reliable { remote.subscriber_reliable } else { remote.subscriber_lossy };
    if let Some(mut channel) = id.and_then(|id| remote.subscriber.channel(id)) {
        match channel.write(true, &bytes) {
            Ok(true) => {}
            Ok(false) if reliable => push_backlog(remote, bytes),
            Ok(false) => tracing::debug!("lossy data channel buffer full; packet dropped"),
            Err(error) => tracing::debug!(%error, "data channel write failed"),
        }
    }
}

fn push_backlog(remote: &mut RemotePeer, bytes: Arc<[u8]>) {
    if remote.reliable_backlog_bytes + bytes.len() > MAX_RELIABLE_BACKLOG_BYTES {
        tracing::warn!(
            backlog = remote.reliable_backlog_bytes,
            "subscriber cannot keep up with reliable data; packet dropped"
        );
        return;
    }
    remote.reliable_backlog_bytes += bytes.len();
    remote.reliable_backlog.push_back(bytes);
}

/// Writes waiting reliable packets while the SCTP buffer takes them; returns whether any went.
fn flush_backlog(remote: &mut RemotePeer) -> bool {
    let Some(id) = remote.subscriber_reliable else { return false };
    let mut wrote = false;
    while let Some(front) = remote.reliable_backlog.front() {
        let Some(mut channel) = remote.subscriber.channel(id) else { break };
        match channel.write(true, front) {
            Ok(true) => {
                remote.reliable_backlog_bytes -= front.len();
                remote.reliable_backlog.pop_front();
                wrote = true;
            }
            Ok(false) => break,
            Err(error) => {
                tracing::debug!(%error, "data channel write failed; backlog dropped");
                remote.reliable_backlog.clear();
                remote.reliable_backlog_bytes = 0;
                break;
            }
        }
    }
    wrote
}

fn opus_pt(rtc: &mut Rtc, downstream: &HashMap<String, Mid>) -> Option<Pt> {
    let mid = downstream.values().next().copied()?;
    let writer = rtc.writer(mid)?;

    writer.payload_params().next().map(|params| params.pt())
}

/// A leave with LiveKit's action for it: reconnect when the client may come back, else disconnect.
pub(crate) fn leave_request(reason: LeaveReason, can_reconnect: bool) -> proto::LeaveRequest {
    proto::LeaveRequest {
        can_reconnect,
        reason: reason.to_proto() as i32,
        action: if can_reconnect {
            proto::leave_request::Action::Reconnect
        } else {
            proto::leave_request::Action::Disconnect
        } as i32,
        regions: None,
    }
}

fn far_future(from: Instant) -> Instant {
    from + Duration::from_secs(3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_flood_is_cut_at_the_budget_and_the_budget_refills() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(start);
        let admitted = (0..1000).filter(|_| bucket.admit(start, 100)).count();
        assert_eq!(admitted, DATA_BURST_PACKETS as usize, "the burst, then nothing");
        assert_eq!(bucket.dropped, 1000 - DATA_BURST_PACKETS as u64);
        let later = start + Duration::from_secs(1);
        let refilled = (0..1000).filter(|_| bucket.admit(later, 100)).count();
        assert_eq!(refilled, DATA_PACKETS_PER_SECOND as usize, "one second of rate");
        let mut bytes = TokenBucket::new(start);
        assert!(bytes.admit(start, MAX_DATA_PACKET_BYTES));
        let big = (0..100).filter(|_| bytes.admit(start, MAX_DATA_PACKET_BYTES)).count();
        assert!(big < 40, "the byte budget binds before the packet budget: {big}");
    }

    fn participant() -> Participant_ {
        Participant_ {
            sid: "PA_x".into(),
            identity: "x".into(),
            name: "X".into(),
            metadata: String::new(),
            attributes: BTreeMap::new(),
            kind: ParticipantKind::Standard,
            permissions: Permissions::ALL,
            client_protocol: 0,
            joined_at_ms: 0,
            version: 1,
            state: proto::participant_info::State::Joined,
            tracks: BTreeMap::new(),
            last_reliable_sequence: 0,
            data_budget: TokenBucket::new(Instant::now()),
            body: Body::Local(LocalPeer),
        }
    }

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn attribute_updates_merge_delete_report_changes_and_bump_the_version() {
        let mut p = participant();
        let changed = p.apply_state_update(None, None, attrs(&[("a", "1"), ("b", "2")])).expect("fits");
        assert_eq!(changed, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(p.version, 2);
        assert_eq!(p.apply_state_update(None, None, attrs(&[("a", "1")])).expect("fits"), None, "no change");
        assert_eq!(p.version, 2, "no change, no new version");
        let changed = p.apply_state_update(None, None, attrs(&[("a", ""), ("zz", "")])).expect("fits");
        assert_eq!(changed, Some(vec!["a".to_owned()]), "an empty value deletes; deleting nothing is no change");
        assert_eq!(p.attributes, attrs(&[("b", "2")]));
        assert_eq!(p.version, 3);
        let changed = p.apply_state_update(Some("Y".into()), Some("meta".into()), BTreeMap::new()).expect("fits");
        assert_eq!(changed, Some(vec![]));
        assert_eq!((p.name.as_str(), p.metadata.as_str(), p.version), ("Y", "meta", 4));
    }

    #[test]
    fn attributes_beyond_the_limit_are_refused_whole() {
        let mut p = participant();
        let huge = "v".repeat(MAX_PARTICIPANT_STATE_BYTES);
        assert!(p.apply_state_update(None, None, attrs(&[("k", &huge)])).is_err());
        assert!(p.attributes.is_empty());
        assert_eq!(p.version, 1);
    }
}
