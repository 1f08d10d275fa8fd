//! The room in virtual time: [`RoomCore`] and any number of the client's sans-IO `ClientCore`s
//! connected over an in-memory network, with a virtual clock and seeded ids.
//!
//! Everything real in the room runs here: str0m's ICE, DTLS, SRTP and SCTP, the signalling, the
//! Opus encoder of in-process tracks. What is simulated is only what the IO shells do: the
//! network (a queue of datagrams and signal messages, delivered after [`Sim::latency`] and
//! [`Sim::signal_latency`]),
//! the UDP demultiplexer (STUN routed by ufrag, then by learned address, as `udp.rs` does), the
//! signal edge's ping answers, and time (advanced straight to the next deadline, so a 30 s
//! timeout takes microseconds). A failing test replays with the same room ids.
//!
//! A test drives it with [`Sim::join`], [`Sim::join_local`], the client and local commands, and
//! [`Sim::run_for`] / [`Sim::run_until`], then reads what each participant received.
#![cfg(test)]

mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use livekit_protocol as proto;

use crate::client::core::{ClientCore, ClientOutput, DataRequest, Role};
use crate::client::{ClientError, ClientEvent, JoinInfo};
use crate::core::{
    CoreOutput, JoinRequest, Key, LocalCommand, LocalOutput, LocalReply, MediaSettings, PcRole, Permissions, RoomCore,
};
use crate::ids::Ids;
use crate::model::{LeaveReason, ParticipantKind};
use crate::stun::stun_local_ufrag;

/// The room's one host candidate.
const ROOM_ADDRESS: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 7882);
/// Steps one [`Sim::run_until`] may take before it decides time has stopped moving.
const MAX_STEPS: usize = 2_000_000;

/// Something in flight.
// Test-only and short-lived; boxing the signal messages would only add noise.
#[allow(clippy::large_enum_variant)]
enum Delivery {
    /// A datagram on the wire.
    Datagram { source: SocketAddr, destination: SocketAddr, contents: Vec<u8> },
    /// A signal request from a client to the room.
    ToRoom { key: Key, message: proto::signal_request::Message },
    /// A signal response from the room to a client.
    ToClient { key: Key, message: proto::signal_response::Message },
    /// The room closed the client's signal connection (after what was queued before it).
    CloseToClient { key: Key },
    /// The client's signal connection ended; the room learns it.
    ClosedToRoom { key: Key },
}

/// One remote (WebRTC) participant, as its IO shell would hold it.
pub(crate) struct SimClient {
    pub(crate) identity: String,
    /// `None` until the join response arrived.
    pub(crate) core: Option<ClientCore>,
    publisher_address: SocketAddr,
    subscriber_address: SocketAddr,
    /// What the join response said.
    pub(crate) info: Option<JoinInfo>,
    /// Every signal response the room sent it, in order (the join response included).
    pub(crate) signals: Vec<proto::signal_response::Message>,
    /// Everything the client handed to its application, in order.
    pub(crate) events: Vec<ClientEvent>,
    /// Connected: both connections up, data channels open.
    pub(crate) ready: bool,
    /// The outcome of the last publish.
    pub(crate) published: Option<Result<String, ClientError>>,
    /// Closed, with the error if something broke.
    pub(crate) closed: Option<Option<ClientError>>,
    /// Datagrams to this client are held on the wire while set (a subscriber that stopped
    /// reading, or a path that went dark) and delivered when cleared, unless dropped.
    pub(crate) hold_inbound: bool,
    /// The client is cut off and frozen while set: datagrams to and from it are lost and its
    /// timers do not run (a host that hung, or a path that died without anyone noticing).
    pub(crate) unplugged: bool,
    /// The address its NAT currently maps it to, once [`Sim::rebind`] gave it one: its datagrams
    /// leave from there and only datagrams to there reach it.
    public_ip: Option<IpAddr>,
    /// The client's next this many RTP packets (media, not RTCP) are lost on the wire.
    pub(crate) lose_rtp: u32,
    held: VecDeque<Delivery>,
}

impl SimClient {
    /// Subscriber offers the room sent (the first one and every renegotiation).
    pub(crate) fn offers(&self) -> usize {
        self.signals.iter().filter(|m| matches!(m, proto::signal_response::Message::Offer(_))).count()
    }

    /// The answers to its metadata/attribute requests.
    pub(crate) fn request_responses(&self) -> Vec<proto::RequestResponse> {
        self.signals
            .iter()
            .filter_map(|m| match m {
                proto::signal_response::Message::RequestResponse(response) => Some(response.clone()),
                _ => None,
            })
            .collect()
    }

    /// User data packets received, as (sender identity, topic, payload, reliable).
    pub(crate) fn data(&self) -> Vec<(String, Option<String>, Vec<u8>, bool)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                ClientEvent::Data(data) => {
                    Some((data.from_identity.clone(), data.topic.clone(), data.payload.clone(), data.reliable))
                }
                _ => None,
            })
            .collect()
    }

    /// Audio frames received, as (publisher identity, track sid, RTP timestamp, payload).
    pub(crate) fn audio(&self) -> Vec<(String, String, u64, Vec<u8>)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                ClientEvent::AudioFrame(frame) => Some((
                    frame.participant_identity.to_string(),
                    frame.track_sid.to_string(),
                    frame.rtp_timestamp,
                    frame.opus.to_vec(),
                )),
                _ => None,
            })
            .collect()
    }

    /// A remote track reached this client's subscriber connection.
    pub(crate) fn has_subscribed_track(&self) -> bool {
        self.events.iter().any(|event| matches!(event, ClientEvent::TrackSubscribed { .. }))
    }

    /// The newest info this client has of `identity` (from updates, else the join response).
    pub(crate) fn latest_info(&self, identity: &str) -> Option<proto::ParticipantInfo> {
        let updated = self.events.iter().rev().find_map(|event| match event {
            ClientEvent::ParticipantUpdate(info) if info.identity == identity => Some(info.clone()),
            _ => None,
        });
        updated.or_else(|| {
            let joined = self.info.as_ref()?;
            joined.other_participants.iter().find(|info| info.identity == identity).cloned()
        })
    }

    /// The leave the room sent, if any.
    pub(crate) fn left(&self) -> Option<proto::DisconnectReason> {
        self.events.iter().find_map(|event| match event {
            ClientEvent::Left { reason, .. } => Some(*reason),
            _ => None,
        })
    }
}

/// The room, its participants and the network between them.
pub(crate) struct Sim {
    pub(crate) now: Instant,
    start: Instant,
    /// Wall-clock milliseconds at `start` (for join times and pings).
    epoch_ms: i64,
    pub(crate) room: RoomCore,
    pub(crate) clients: BTreeMap<Key, SimClient>,
    /// What each in-process participant received.
    pub(crate) locals: BTreeMap<Key, Vec<LocalOutput>>,
    /// One-way delay of every datagram.
    pub(crate) latency: Duration,
    /// One-way delay of every signal message (a WebSocket over the same path, usually).
    pub(crate) signal_latency: Duration,
    wire: VecDeque<(Instant, Delivery)>,
    by_ufrag: HashMap<String, (Key, PcRole)>,
    by_address: HashMap<(SocketAddr, SocketAddr), (Key, PcRole)>,
    /// Client socket → (client, connection).
    client_sockets: HashMap<SocketAddr, (Key, Role)>,
    next_host: u32,
    /// The room said it expired (empty for its timeout).
    pub(crate) expired: bool,
    /// The webhook events the room emitted, in order.
    pub(crate) webhooks: Vec<livekit_protocol::WebhookEvent>,
}

/// How a simulated client joins.
#[derive(Clone)]
pub(crate) struct JoinOptions {
    pub(crate) permissions: Permissions,
    pub(crate) auto_subscribe: bool,
    pub(crate) kind: ParticipantKind,
    pub(crate) attributes: BTreeMap<String, String>,
}

impl Default for JoinOptions {
    fn default() -> JoinOptions {
        JoinOptions {
            permissions: Permissions::ALL,
            auto_subscribe: true,
            kind: ParticipantKind::Standard,
            attributes: BTreeMap::new(),
        }
    }
}

impl Sim {
    /// An empty room named `test` with the given empty-room timeout; ids from `seed`.
    pub(crate) fn new(seed: u64, empty_timeout: Duration) -> Sim {
        let crypto = str0m::crypto::from_feature_flags();
        let dtls_cert = crypto.dtls_provider.generate_certificate().expect("a DTLS certificate");
        let settings = Arc::new(MediaSettings {
            candidates: vec![ROOM_ADDRESS],
            dtls_cert,
            ping_interval: 5,
            ping_timeout: 15,
            node_id: "ND_sim".to_owned(),
            webhooks: true,
        });
        let start = Instant::now();
        let epoch_ms = 1_800_000_000_000;
        Sim {
            now: start,
            start,
            epoch_ms,
            room: {
                let mut room =
                    RoomCore::new(start, "test".to_owned(), epoch_ms, settings, Ids::seeded(seed), empty_timeout);
                room.opened();
                room
            },
            clients: BTreeMap::new(),
            locals: BTreeMap::new(),
            latency: Duration::from_millis(1),
            signal_latency: Duration::from_millis(1),
            wire: VecDeque::new(),
            by_ufrag: HashMap::new(),
            by_address: HashMap::new(),
            client_sockets: HashMap::new(),
            next_host: 1,
            expired: false,
            webhooks: Vec::new(),
        }
    }

    /// Virtual time since the start.
    pub(crate) fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    fn now_ms(&self) -> i64 {
        self.epoch_ms + i64::try_from(self.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// A remote participant joins (as the signal edge admits one with a verified token).
    pub(crate) fn join(&mut self, identity: &str, options: JoinOptions) -> Key {
        let host = self.next_host;
        self.next_host += 1;
        let ip = IpAddr::V4(Ipv4Addr::new(10, 1, (host >> 8) as u8, (host & 0xff) as u8));
        let publisher_address = SocketAddr::new(ip, 40_000);
        let subscriber_address = SocketAddr::new(ip, 40_001);
        let request = JoinRequest {
            identity: identity.to_owned(),
            name: identity.to_owned(),
            metadata: String::new(),
            attributes: options.attributes,
            kind: options.kind,
            permissions: options.permissions,
            auto_subscribe: options.auto_subscribe,
            client_protocol: 1,
        };
        let key = self.room.next_key_hint();
        self.clients.insert(
            key,
            SimClient {
                identity: identity.to_owned(),
                core: None,
                info: None,
                signals: Vec::new(),
                publisher_address,
                subscriber_address,
                events: Vec::new(),
                ready: false,
                published: None,
                closed: None,
                hold_inbound: false,
                unplugged: false,
                lose_rtp: 0,
                public_ip: None,
                held: VecDeque::new(),
            },
        );
        self.client_sockets.insert(publisher_address, (key, Role::Publisher));
        self.client_sockets.insert(subscriber_address, (key, Role::Subscriber));
        let now_ms = self.now_ms();
        let joined = self.room.join_remote(self.now, now_ms, request);
        assert_eq!(joined, key, "the room hands out the key it announced");
        self.collect();
        key
    }

    /// The client's NAT maps it to a new public address (a rebinding, or a move to another
    /// network that keeps its ICE session): what it sends comes from there, and datagrams to its
    /// old address are lost.
    pub(crate) fn rebind(&mut self, key: Key) {
        let host = self.next_host;
        self.next_host += 1;
        let public = IpAddr::V4(Ipv4Addr::new(10, 2, (host >> 8) as u8, (host & 0xff) as u8));
        let client = self.clients.get_mut(&key).expect("a joined client");
        client.public_ip = Some(public);
        let private = [(client.publisher_address, Role::Publisher), (client.subscriber_address, Role::Subscriber)];
        self.client_sockets.retain(|_, (owner, _)| *owner != key);
        for (address, role) in private {
            self.client_sockets.insert(SocketAddr::new(public, address.port()), (key, role));
        }
    }

    /// An in-process participant joins (as the session runtime's agent does).
    pub(crate) fn join_local(&mut self, identity: &str, kind: ParticipantKind) -> Key {
        let request = JoinRequest {
            identity: identity.to_owned(),
            name: identity.to_owned(),
            metadata: String::new(),
            attributes: BTreeMap::new(),
            kind,
            permissions: Permissions::ALL,
            auto_subscribe: true,
            client_protocol: 0,
        };
        let key = self.room.next_key_hint();
        self.locals.insert(key, Vec::new());
        let now_ms = self.now_ms();
        self.room.join_local(self.now, now_ms, request);
        self.collect();
        key
    }

    /// Joins and runs until the client is connected (both connections, data channels).
    pub(crate) fn join_ready(&mut self, identity: &str, options: JoinOptions) -> Key {
        let key = self.join(identity, options);
        self.run_until(Duration::from_secs(5), |sim| sim.client(key).ready);
        key
    }

    pub(crate) fn client(&self, key: Key) -> &SimClient {
        self.clients.get(&key).expect("a simulated client")
    }

    pub(crate) fn client_mut(&mut self, key: Key) -> &mut SimClient {
        self.clients.get_mut(&key).expect("a simulated client")
    }

    fn core_mut(&mut self, key: Key) -> &mut ClientCore {
        self.client_mut(key).core.as_mut().expect("the client has its join response")
    }

    /// The client publishes its microphone (`add_track`, then the renegotiation).
    pub(crate) fn publish(&mut self, key: Key) {
        let now = self.now;
        let cid = format!("cid-{key}");
        self.core_mut(key).publish_audio(now, "microphone".to_owned(), cid).expect("a first publication");
        self.collect();
    }

    /// Publishes and runs until the publication is negotiated; the track's sid.
    pub(crate) fn publish_ready(&mut self, key: Key) -> String {
        self.publish(key);
        self.run_until(Duration::from_secs(5), |sim| sim.client(key).published.is_some());
        self.client(key).published.clone().expect("published").expect("a track sid")
    }

    /// The client writes one Opus frame of its track.
    pub(crate) fn send_audio(&mut self, key: Key, rtp_timestamp: u64, opus: &[u8]) {
        let now = self.now;
        self.core_mut(key).write_audio(now, rtp_timestamp, Arc::from(opus));
        self.collect();
    }

    /// The client sends a user data packet.
    pub(crate) fn send_data(
        &mut self,
        key: Key,
        payload: &[u8],
        topic: Option<&str>,
        reliable: bool,
        destinations: &[&str],
    ) -> Result<(), ClientError> {
        let now = self.now;
        let request = DataRequest {
            payload: payload.to_vec(),
            topic: topic.map(str::to_owned),
            reliable,
            destinations: destinations.iter().map(|d| (*d).to_owned()).collect(),
        };
        let result = self.core_mut(key).send_data(now, request);
        self.collect();
        result
    }

    /// A signal request as the client's SDK would send it (for requests `ClientCore` does not
    /// make itself: metadata, subscriptions, a broken offer).
    pub(crate) fn signal(&mut self, key: Key, message: proto::signal_request::Message) {
        let now = self.now;
        self.room.handle_signal(now, key, message);
        self.collect();
    }

    /// The client leaves (a leave request, then its signal connection closes).
    pub(crate) fn leave(&mut self, key: Key) {
        self.core_mut(key).leave();
        self.collect();
    }

    /// A command of an in-process participant.
    pub(crate) fn local(&mut self, key: Key, command: LocalCommand) -> LocalReply {
        let now = self.now;
        let reply = self.room.handle_local(now, key, command);
        self.collect();
        reply
    }

    /// A server API command (`RoomService`), as the Twirp edge hands it to the room.
    pub(crate) fn admin(
        &mut self,
        command: crate::core::AdminCommand,
    ) -> Result<crate::core::AdminAnswer, crate::core::AdminError> {
        let now = self.now;
        let answer = self.room.admin(now, command);
        self.collect();
        answer
    }

    /// The room closes (deleted, or the server shuts down).
    pub(crate) fn close_room(&mut self, reason: LeaveReason) {
        let now = self.now;
        self.room.close(now, reason);
        self.collect();
    }

    /// The room closes once what it sent reliably is delivered, within `linger` (as the actor
    /// closes it).
    pub(crate) fn close_room_after_delivery(&mut self, reason: LeaveReason, linger: Duration) {
        let now = self.now;
        self.room.close_after_delivery(now, reason, linger);
        self.collect();
    }

    /// Runs for `duration` of virtual time.
    pub(crate) fn run_for(&mut self, duration: Duration) {
        let until = self.now + duration;
        self.advance(until, |_| false);
    }

    /// Runs until `done` holds, at most `limit` of virtual time; panics on the limit.
    pub(crate) fn run_until(&mut self, limit: Duration, done: impl Fn(&Sim) -> bool) {
        let until = self.now + limit;
        if !self.advance(until, &done) {
            panic!("not done within {limit:?} of virtual time (at {:?})", self.elapsed());
        }
    }

    /// Steps to the next event until `until` or `done`; whether `done` held.
    fn advance(&mut self, until: Instant, done: impl Fn(&Sim) -> bool) -> bool {
        for _ in 0..MAX_STEPS {
            if done(self) {
                return true;
            }
            let next = self.next_deadline();
            let Some(next) = next.filter(|at| *at <= until) else {
                self.now = self.now.max(until);
                return done(self);
            };
            self.now = self.now.max(next);
            self.step();
        }
        panic!("time stopped moving at {:?}: {MAX_STEPS} steps", self.elapsed());
    }

    fn next_deadline(&self) -> Option<Instant> {
        let wire = self.wire.front().map(|(at, _)| *at);
        let room = self.room.poll_timeout();
        let clients = self
            .clients
            .values()
            .filter(|client| !client.unplugged)
            .filter_map(|client| client.core.as_ref()?.poll_timeout())
            .min();
        [wire, room, clients].into_iter().flatten().min()
    }

    /// Delivers what is due and fires due timers, then collects what that caused.
    fn step(&mut self) {
        let now = self.now;
        while self.wire.front().is_some_and(|(at, _)| *at <= now) {
            let Some((_, delivery)) = self.wire.pop_front() else { break };
            self.deliver(delivery);
        }
        if self.room.poll_timeout().is_some_and(|at| at <= now) {
            self.room.handle_timeout(now);
        }
        let now_ms = self.now_ms();
        for client in self.clients.values_mut().filter(|client| !client.unplugged) {
            if let Some(core) = client.core.as_mut()
                && core.poll_timeout().is_some_and(|at| at <= now)
            {
                core.handle_timeout(now, now_ms);
            }
        }
        self.collect();
    }

    fn deliver(&mut self, delivery: Delivery) {
        let now = self.now;
        let now_ms = self.now_ms();
        match delivery {
            Delivery::Datagram { source, destination, contents } => {
                if destination == ROOM_ADDRESS {
                    if let Some((key, role)) = self.route(source, destination, &contents) {
                        self.room.handle_receive(now, key, role, source, destination, &contents);
                    }
                } else if let Some((key, role)) = self.client_sockets.get(&destination).copied()
                    && let Some(client) = self.clients.get_mut(&key)
                {
                    if client.unplugged {
                        return;
                    }
                    if client.hold_inbound {
                        client.held.push_back(Delivery::Datagram { source, destination, contents });
                        return;
                    }
                    // Through its NAT, if it has one: the client reads it at its own address.
                    let local = match role {
                        Role::Publisher => client.publisher_address,
                        Role::Subscriber => client.subscriber_address,
                    };
                    if let Some(core) = client.core.as_mut() {
                        core.handle_receive(now, role, source, local, &contents);
                    }
                }
            }
            Delivery::ToRoom { key, message } => {
                use proto::signal_request::Message as M;
                // The signal edge answers pings itself (signal.rs).
                let pong = match &message {
                    M::Ping(_) => Some(proto::signal_response::Message::Pong(now_ms)),
                    M::PingReq(ping) => Some(proto::signal_response::Message::PongResp(proto::Pong {
                        last_ping_timestamp: ping.timestamp,
                        timestamp: now_ms,
                    })),
                    _ => None,
                };
                match pong {
                    Some(pong) => self.send(Delivery::ToClient { key, message: pong }),
                    None => self.room.handle_signal(now, key, message),
                }
            }
            Delivery::ToClient { key, message } => {
                let Some(client) = self.clients.get_mut(&key) else { return };
                client.signals.push(message.clone());
                match client.core.as_mut() {
                    Some(core) => core.handle_signal(now, now_ms, message),
                    None => match message {
                        proto::signal_response::Message::Join(join) => {
                            let (core, info) = ClientCore::new(
                                now,
                                join,
                                client.publisher_address,
                                client.subscriber_address,
                                Vec::new(),
                            )
                            .expect("a valid join response");
                            client.core = Some(core);
                            client.info = Some(info);
                        }
                        other => panic!("{} got {other:?} before its join response", client.identity),
                    },
                }
            }
            Delivery::CloseToClient { key } => {
                if let Some(core) = self.clients.get_mut(&key).and_then(|client| client.core.as_mut()) {
                    core.signal_closed(None);
                }
            }
            Delivery::ClosedToRoom { key } => self.room.signal_closed(now, key, LeaveReason::SignalClosed),
        }
    }

    /// The UDP demultiplexer's rule: STUN by our ufrag (learning the address), else the address.
    fn route(&mut self, source: SocketAddr, destination: SocketAddr, contents: &[u8]) -> Option<(Key, PcRole)> {
        if let Some(ufrag) = stun_local_ufrag(contents) {
            let route = *self.by_ufrag.get(ufrag)?;
            self.by_address.insert((source, destination), route);
            return Some(route);
        }
        self.by_address.get(&(source, destination)).copied()
    }

    fn send(&mut self, delivery: Delivery) {
        let delay = match delivery {
            Delivery::Datagram { .. } => self.latency,
            _ => self.signal_latency,
        };
        let at = self.now + delay;
        // Kept in delivery order: a later send with a shorter delay overtakes (as a datagram may
        // overtake a stalled WebSocket).
        let position = self.wire.partition_point(|(queued, _)| *queued <= at);
        self.wire.insert(position, (at, delivery));
    }

    /// Carries out what the room and every client asked for (the IO shells' job).
    fn collect(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(output) = self.room.poll_output() {
                progressed = true;
                self.carry_out_room(output);
            }
            let keys: Vec<Key> = self.clients.keys().copied().collect();
            for key in keys {
                while let Some(output) =
                    self.clients.get_mut(&key).and_then(|client| client.core.as_mut()).and_then(ClientCore::poll_output)
                {
                    progressed = true;
                    self.carry_out_client(key, output);
                }
            }
            if !progressed {
                return;
            }
        }
    }

    fn carry_out_room(&mut self, output: CoreOutput) {
        match output {
            CoreOutput::Signal { to, message } => {
                self.send(Delivery::ToClient { key: to, message });
            }
            CoreOutput::CloseSignal { to } => self.send(Delivery::CloseToClient { key: to }),
            CoreOutput::Transmit { source, destination, contents } => {
                let unplugged = self
                    .client_sockets
                    .get(&destination)
                    .and_then(|(key, _)| self.clients.get(key))
                    .is_some_and(|client| client.unplugged);
                if !unplugged {
                    self.send(Delivery::Datagram { source, destination, contents });
                }
            }
            CoreOutput::Local { to, output } => self.locals.entry(to).or_default().push(output),
            CoreOutput::RouteAdded { ufrag, key, role } => {
                self.by_ufrag.insert(ufrag, (key, role));
            }
            CoreOutput::RoutesRemoved { key } => {
                self.by_ufrag.retain(|_, (owner, _)| *owner != key);
                self.by_address.retain(|_, (owner, _)| *owner != key);
            }
            CoreOutput::Expired => self.expired = true,
            CoreOutput::Webhook(event) => self.webhooks.push(*event),
            CoreOutput::AgentLeft { .. } | CoreOutput::ServerRpc { .. } => {}
        }
    }

    fn carry_out_client(&mut self, key: Key, output: ClientOutput) {
        let Some(client) = self.clients.get_mut(&key) else { return };
        match output {
            ClientOutput::Transmit(_, transmit) => {
                // RFC 7983's demultiplexing: RTP and RTCP start with 128..=191, RTCP's second
                // byte (its packet type) is 192..=223.
                let rtp = || matches!(&transmit.contents[..], [128..=191, second, ..] if !(192..=223).contains(second));
                if client.lose_rtp > 0 && rtp() {
                    client.lose_rtp -= 1;
                } else if !client.unplugged {
                    let mut source = transmit.source;
                    if let Some(public) = client.public_ip {
                        source.set_ip(public);
                    }
                    self.send(Delivery::Datagram {
                        source,
                        destination: transmit.destination,
                        contents: transmit.contents.into(),
                    });
                }
            }
            ClientOutput::Signal(message) => {
                let leave = matches!(message, proto::signal_request::Message::Leave(_));
                self.send(Delivery::ToRoom { key, message });
                if leave {
                    // The shell closes the WebSocket after the leave.
                    self.send(Delivery::ClosedToRoom { key });
                }
            }
            ClientOutput::Event(event) => client.events.push(event),
            ClientOutput::Ready => client.ready = true,
            ClientOutput::Published(result) => client.published = Some(result),
            ClientOutput::Close(error) => {
                let first = client.closed.is_none();
                client.closed = Some(error);
                if first {
                    self.send(Delivery::ClosedToRoom { key });
                }
            }
        }
    }

    /// Stops holding a client's inbound datagrams: what was held arrives now, in order.
    pub(crate) fn release(&mut self, key: Key) {
        let client = self.client_mut(key);
        client.hold_inbound = false;
        let held: Vec<Delivery> = client.held.drain(..).collect();
        for delivery in held {
            self.deliver(delivery);
        }
        self.collect();
    }

    /// Room events an in-process participant received.
    pub(crate) fn local_events(&self, key: Key) -> Vec<&crate::model::RoomEvent> {
        self.locals
            .get(&key)
            .map(|outputs| {
                outputs
                    .iter()
                    .filter_map(|output| match output {
                        LocalOutput::Event(event) => Some(event),
                        LocalOutput::Rpc { .. } => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}
