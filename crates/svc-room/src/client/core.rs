//! The client's protocol as a sans-IO state machine: signalling, both peer connections, our
//! track, the data channels and pings. No sockets, no clock, no randomness: every input carries
//! `now`, ids come from the caller, outputs are polled. The IO shell ([`super::shell`]) runs it
//! over real sockets; the room's virtual-time tests run it against the room core in memory.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use livekit_protocol as proto;
use prost::Message as _;
use str0m::change::{SdpAnswer, SdpOffer, SdpPendingOffer};
use str0m::channel::{ChannelConfig, ChannelId, Reliability};
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive, Transmit};
use str0m::{Candidate, Event, IceConnectionState, Input, Rtc, RtcError};

use crate::rtc::{self, Dirty, DrainRtc, PeerConnection};

use super::handle::{ClientAudioFrame, ClientData, ClientError, ClientEvent, ClientStats, JoinInfo};
use crate::RpcError;

/// Largest data packet we send (the room forwards up to 64 KiB).
pub(crate) const MAX_DATA_PAYLOAD: usize = 60_000;
/// The msid stream id of our published audio.
const STREAM_ID: &str = "svc-client-stream";

/// Which of our two peer connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// We offer; our microphone and our outgoing data.
    Publisher,
    /// The server offers; subscribed audio and incoming data.
    Subscriber,
}

/// A user data packet to send.
pub(crate) struct DataRequest {
    pub(crate) payload: Vec<u8>,
    pub(crate) topic: Option<String>,
    pub(crate) reliable: bool,
    pub(crate) destinations: Vec<String>,
}

impl DataRequest {
    pub(crate) fn new(payload: Vec<u8>, topic: Option<&str>, reliable: bool, destinations: &[String]) -> DataRequest {
        DataRequest { payload, topic: topic.map(str::to_owned), reliable, destinations: destinations.to_vec() }
    }
}

/// What the IO shell must do.
pub(crate) enum ClientOutput {
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
pub(crate) struct ClientCore {
    identity: String,
    publisher: PeerConnection,
    subscriber: PeerConnection,
    outputs: VecDeque<ClientOutput>,
    dirty: Dirty<Role>,

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
    /// RPC methods this client answers; requests for others are refused at once, as LiveKit's
    /// SDKs refuse a method nobody registered.
    rpc_methods: Vec<String>,
    /// Ids of our attribute updates (the server answers a refusal with a `RequestResponse`).
    metadata_requests: u32,

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
    pub(crate) stats: ClientStats,
}

impl ClientCore {
    pub(crate) fn new(
        now: Instant,
        join: proto::JoinResponse,
        publisher_addr: SocketAddr,
        subscriber_addr: SocketAddr,
        rpc_methods: Vec<String>,
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
            publisher: PeerConnection::new(new_rtc(now, publisher_addr)?, now),
            subscriber: PeerConnection::new(new_rtc(now, subscriber_addr)?, now),
            outputs: VecDeque::new(),
            dirty: Dirty::default(),
            publisher_pending: None,
            publisher_renegotiate: false,
            publisher_next_offer_id: 1,
            publisher_reliable: None,
            publisher_lossy: None,
            publisher_reliable_open: false,
            publisher_lossy_open: false,
            track: None,
            data_sequence: 0,
            rpc_methods,
            metadata_requests: 0,
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
        // seen a timeout; an offer handled first would otherwise leave it idle for good. Both
        // connections are due at once (`PeerConnection::new`).
        core.drive_timers(now);
        // Fast publish: negotiate the publisher PC (data channels) right away.
        core.renegotiate_publisher();
        core.flush(now);
        Ok((core, info))
    }

    pub(crate) fn poll_output(&mut self) -> Option<ClientOutput> {
        self.outputs.pop_front()
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let soonest = self.publisher.timeout.min(self.subscriber.timeout).min(self.next_ping);
        Some(soonest.min(self.last_signal + self.ping_timeout))
    }

    fn close(&mut self, error: Option<ClientError>) {
        if !self.closed {
            self.closed = true;
            self.outputs.push_back(ClientOutput::Close(error));
        }
    }

    pub(crate) fn disconnect(&mut self) {
        self.publisher.rtc.disconnect();
        self.subscriber.rtc.disconnect();
    }

    /// We leave: a leave request, then close.
    pub(crate) fn leave(&mut self) {
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

    pub(crate) fn signal_closed(&mut self, error: Option<String>) {
        let error = error.unwrap_or_else(|| "the server closed the signal connection".to_owned());
        self.close(Some(ClientError::Connect(error)));
    }

    // ---------------------------------------------------------------------------------------
    // Signalling

    pub(crate) fn handle_signal(&mut self, now: Instant, now_ms: i64, message: proto::signal_response::Message) {
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
            M::RequestResponse(response) if response.reason != proto::request_response::Reason::Ok as i32 => {
                let reason = proto::request_response::Reason::try_from(response.reason)
                    .map_or_else(|_| response.reason.to_string(), |reason| reason.as_str_name().to_owned());
                let error = ClientError::Rejected(format!("{reason}: {}", response.message));
                self.outputs
                    .push_back(ClientOutput::Event(ClientEvent::CommandFailed { command: "set_attributes", error }));
            }
            // Pong, room and speaker updates, quality, stream state, accepted requests: nothing
            // an audio client acts on (attribute updates are the only requests it sends).
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
            // A track subscribed before its publisher was known carries no identity until now.
            for (sid, identity, _) in self.downstream.values_mut() {
                if identity.is_empty() && **sid == *info.sid {
                    *identity = Arc::from(info.identity.as_str());
                }
            }
            self.participants.insert(info.sid.clone(), info.clone());
        }
        self.outputs.push_back(ClientOutput::Event(ClientEvent::ParticipantUpdate(info)));
    }

    fn handle_subscriber_offer(&mut self, offer: proto::SessionDescription) {
        let answer = SdpOffer::from_sdp_string(&offer.sdp)
            .map_err(|error| error.to_string())
            .and_then(|parsed| self.subscriber.rtc.sdp_api().accept_offer(parsed).map_err(|error| error.to_string()));
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
            self.publisher.rtc.sdp_api().accept_answer(pending, parsed).map_err(|error| error.to_string())
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
            let pt = self.publisher.rtc.writer(mid).and_then(|writer| writer.payload_params().next().map(|p| p.pt()));
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
            self.subscriber.rtc.add_remote_candidate(candidate);
            self.mark_dirty(Role::Subscriber);
        } else {
            self.publisher.rtc.add_remote_candidate(candidate);
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
        let mut api = self.publisher.rtc.sdp_api();
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

    /// Publishes our audio track; `cid` is the client-chosen track id the server echoes back in
    /// `track_published` and binds the m-line by (unique per client).
    pub(crate) fn publish_audio(&mut self, now: Instant, name: String, cid: String) -> Result<(), ClientError> {
        if self.track.is_some() {
            return Err(ClientError::AlreadyPublished);
        }
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

    pub(crate) fn write_audio(&mut self, now: Instant, rtp_timestamp: u64, opus: Arc<[u8]>) {
        let target = self.track.as_ref().and_then(|track| Some((track.mid?, track.pt?)));
        let Some((mid, pt)) = target.filter(|_| self.publisher_connected) else {
            self.stats.audio_frames_unsent += 1;
            return;
        };
        let Some(writer) = self.publisher.rtc.writer(mid) else {
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

    pub(crate) fn send_data(&mut self, now: Instant, request: DataRequest) -> Result<(), ClientError> {
        if request.payload.len() > MAX_DATA_PAYLOAD {
            return Err(ClientError::PacketTooLarge(request.payload.len()));
        }
        // The old field still carries the destinations for servers that read it there.
        #[allow(deprecated)]
        let value = proto::data_packet::Value::User(proto::UserPacket {
            payload: request.payload,
            topic: request.topic,
            destination_identities: request.destinations.clone(),
            ..Default::default()
        });
        self.send_packet(now, request.reliable, request.destinations, value)
    }

    /// Merges `attributes` into ours (an empty value deletes a key): `UpdateParticipantMetadata`,
    /// which the server answers only to refuse ([`ClientEvent::CommandFailed`]).
    pub(crate) fn set_attributes(&mut self, now: Instant, attributes: HashMap<String, String>) {
        self.metadata_requests += 1;
        let update =
            proto::UpdateParticipantMetadata { attributes, request_id: self.metadata_requests, ..Default::default() };
        self.outputs.push_back(ClientOutput::Signal(proto::signal_request::Message::UpdateMetadata(update)));
        self.flush(now);
    }

    /// Answers the RPC request `request_id` of `caller` ([`ClientEvent::RpcRequest`]).
    pub(crate) fn respond_rpc(
        &mut self,
        now: Instant,
        caller: String,
        request_id: String,
        result: Result<String, RpcError>,
    ) -> Result<(), ClientError> {
        self.send_packet(now, true, vec![caller], crate::rpc::response(request_id, result))
    }

    fn send_packet(
        &mut self,
        now: Instant,
        reliable: bool,
        destinations: Vec<String>,
        value: proto::data_packet::Value,
    ) -> Result<(), ClientError> {
        let (channel, open) = if reliable {
            (self.publisher_reliable, self.publisher_reliable_open)
        } else {
            (self.publisher_lossy, self.publisher_lossy_open)
        };
        let Some(id) = channel.filter(|_| open) else { return Err(ClientError::ChannelNotOpen) };
        let sequence = if reliable {
            self.data_sequence += 1;
            self.data_sequence
        } else {
            0
        };
        #[allow(deprecated)]
        let packet = proto::DataPacket {
            kind: if reliable { proto::data_packet::Kind::Reliable } else { proto::data_packet::Kind::Lossy } as i32,
            // The server fills in the sender; it never trusts these.
            participant_identity: self.identity.clone(),
            destination_identities: destinations,
            sequence,
            participant_sid: String::new(),
            value: Some(value),
        };
        let bytes = packet.encode_to_vec();
        let written = match self.publisher.rtc.channel(id) {
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

    pub(crate) fn handle_receive(
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
        if let Err(error) = self.connection_of(role).rtc.handle_input(Input::Receive(now, receive)) {
            tracing::debug!(%error, ?role, "datagram rejected");
        }
        self.mark_dirty(role);
        self.flush(now);
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, now_ms: i64) {
        if self.closed {
            return;
        }
        self.drive_timers(now);
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

    /// Gives each connection that asked for it the current time.
    fn drive_timers(&mut self, now: Instant) {
        for role in [Role::Publisher, Role::Subscriber] {
            match self.connection_of(role).handle_timeout(now) {
                Ok(true) => self.mark_dirty(role),
                Ok(false) => {}
                Err(error) => tracing::debug!(%error, ?role, "timeout rejected"),
            }
        }
    }

    fn connection_of(&mut self, role: Role) -> &mut PeerConnection {
        match role {
            Role::Publisher => &mut self.publisher,
            Role::Subscriber => &mut self.subscriber,
        }
    }

    fn mark_dirty(&mut self, role: Role) {
        self.dirty.mark(role);
    }

    /// Drains every dirty connection (see [`crate::rtc`]).
    fn flush(&mut self, now: Instant) {
        rtc::flush(self, now);
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
                self.handle_packet(now, reliable, &data.data);
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
        let Some(media) = self.subscriber.rtc.media(mid) else { return };
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

    fn handle_packet(&mut self, now: Instant, reliable: bool, bytes: &[u8]) {
        let Ok(packet) = proto::DataPacket::decode(bytes) else {
            tracing::debug!("undecodable data packet ignored");
            return;
        };
        self.stats.data_packets_received += 1;
        let event = match packet.value {
            Some(proto::data_packet::Value::RpcRequest(request)) => {
                self.answer_rpc_request(now, packet.participant_identity, request);
                return;
            }
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

    /// An RPC request, handled as LiveKit's SDKs do: acknowledged at once, then handed to the
    /// application if it answers the method, else refused (unsupported method, version or size).
    fn answer_rpc_request(&mut self, now: Instant, caller: String, request: proto::RpcRequest) {
        if let Err(error) = self.send_packet(now, true, vec![caller.clone()], crate::rpc::ack(request.id.clone())) {
            tracing::debug!(%error, "rpc acknowledgement not sent; the caller's timeout answers it");
        }
        let methods = &self.rpc_methods;
        match crate::rpc::admit_request(request, caller.clone(), |method| methods.iter().any(|m| m == method)) {
            Ok(invocation) => self.outputs.push_back(ClientOutput::Event(ClientEvent::RpcRequest(invocation))),
            Err((request_id, error)) => {
                if let Err(error) =
                    self.send_packet(now, true, vec![caller], crate::rpc::response(request_id, Err(error)))
                {
                    tracing::debug!(%error, "rpc refusal not sent; the caller's timeout answers it");
                }
            }
        }
    }
}

impl DrainRtc for ClientCore {
    type Key = Role;

    fn dirty(&mut self) -> &mut Dirty<Role> {
        &mut self.dirty
    }

    fn connection(&mut self, role: Role) -> Option<&mut PeerConnection> {
        Some(self.connection_of(role))
    }

    fn transmit(&mut self, role: Role, transmit: Transmit) {
        self.outputs.push_back(ClientOutput::Transmit(role, transmit));
    }

    /// A client with a failed connection cannot go on: it closes.
    fn failed(&mut self, role: Role, error: RtcError) {
        self.close(Some(ClientError::Rtc(format!("{role:?}: {error}"))));
    }

    fn handle_event(&mut self, now: Instant, role: Role, event: Event) {
        self.handle_rtc_event(now, role, event);
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

/// A leave's reason code as the enum (unknown codes as `UnknownReason`).
pub(crate) fn disconnect_reason(value: i32) -> proto::DisconnectReason {
    proto::DisconnectReason::try_from(value).unwrap_or(proto::DisconnectReason::UnknownReason)
}
