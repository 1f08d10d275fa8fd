//! The signal server's IO shell through real HTTP and WebSocket connections: what official
//! clients require of the join on the wire, the validate endpoints, how bad frames are answered
//! (a text reason or a leave, never a disturbed room), and that the actor carries out what the
//! core decides (leaves, closes, the end of an expired room). The room's behaviours themselves
//! (joins, leave reasons, attributes, routing, timeouts) are tested in virtual time in `src/sim`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use livekit_protocol as proto;
use prost::Message as _;
use svc_room::{
    LeaveReason, LocalJoinOptions, ParticipantKind, RoomCredentials, RoomEvent, RoomGrant, RoomServer, RoomToken,
    SipGrant,
};
use tokio_tungstenite::tungstenite::Message;

mod support;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const KEY: &str = "devkey";
const SECRET: &str = "secret_secret_secret_secret_secret_";

struct Harness {
    room: RoomServer,
    http: SocketAddr,
    credentials: RoomCredentials,
}

async fn start() -> Harness {
    let started = support::start_room(KEY, SECRET, Duration::from_secs(2)).await;
    Harness { room: started.room, http: started.http, credentials: started.credentials }
}

fn now() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()).expect("secs")
}

impl Harness {
    fn token(&self, room: &str, identity: &str) -> String {
        self.credentials.participant_token(room, identity, Some(identity), now() + 600).expect("mint")
    }

    fn token_with(&self, room: &str, identity: &str, edit: impl FnOnce(&mut RoomToken)) -> String {
        let mut claims = RoomToken {
            iss: KEY.into(),
            sub: identity.into(),
            nbf: None,
            exp: now() + 600,
            name: None,
            kind: None,
            metadata: None,
            attributes: BTreeMap::new(),
            video: RoomGrant { room_join: true, room: room.into(), ..Default::default() },
            room_config: None,
            sip: SipGrant::default(),
        };
        edit(&mut claims);
        self.credentials.mint(claims).expect("mint")
    }

    async fn connect(&self, token: &str, extra: &str) -> Socket {
        let url = format!("ws://{}/room/rtc?access_token={token}&protocol=16&auto_subscribe=1{extra}", self.http);
        let (socket, _) = tokio::time::timeout(Duration::from_secs(5), tokio_tungstenite::connect_async(url))
            .await
            .expect("connect in time")
            .expect("upgrade");
        socket
    }

    async fn connect_refused(&self, token: &str) -> u16 {
        let url = format!("ws://{}/room/rtc?access_token={token}", self.http);
        match tokio_tungstenite::connect_async(url).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
            other => panic!("expected an HTTP refusal, got {:?}", other.map(|_| "an upgrade")),
        }
    }

    /// A plain HTTP GET: (status, headers lowercased, body).
    fn get(&self, path: &str) -> (u16, String, String) {
        let mut stream = TcpStream::connect(self.http).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
        let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).expect("status");
        (status, head.to_ascii_lowercase(), body.to_owned())
    }
}

async fn next(socket: &mut Socket) -> proto::signal_response::Message {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("a frame within 5 s")
            .expect("stream open")
            .expect("frame");
        match frame {
            Message::Binary(bytes) => {
                return proto::SignalResponse::decode(bytes.as_ref()).expect("protobuf").message.expect("message");
            }
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// Reads until a message matches, skipping others (updates, offers) in between.
async fn next_matching<T>(
    socket: &mut Socket,
    mut pick: impl FnMut(proto::signal_response::Message) -> Option<T>,
) -> T {
    for _ in 0..50 {
        if let Some(found) = pick(next(socket).await) {
            return found;
        }
    }
    panic!("no matching message among 50");
}

async fn expect_leave(socket: &mut Socket) -> proto::LeaveRequest {
    next_matching(socket, |message| match message {
        proto::signal_response::Message::Leave(leave) => Some(leave),
        _ => None,
    })
    .await
}

/// Waits for the update saying `identity` left.
async fn expect_gone(socket: &mut Socket, identity: &str) -> proto::ParticipantInfo {
    next_matching(socket, |message| match message {
        proto::signal_response::Message::Update(update) => update
            .participants
            .into_iter()
            .find(|p| p.identity == identity && p.state == proto::participant_info::State::Disconnected as i32),
        _ => None,
    })
    .await
}

async fn expect_closed(socket: &mut Socket) {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), socket.next()).await.expect("closed in time") {
            None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
            Some(Ok(_)) => continue,
        }
    }
}

async fn send(socket: &mut Socket, message: proto::signal_request::Message) {
    let bytes = proto::SignalRequest { message: Some(message) }.encode_to_vec();
    socket.send(Message::Binary(bytes.into())).await.expect("send");
}

async fn join(socket: &mut Socket) -> proto::JoinResponse {
    match next(socket).await {
        proto::signal_response::Message::Join(join) => join,
        other => panic!("the first frame must be the join response, got {other:?}"),
    }
}

async fn ping_answered(socket: &mut Socket) {
    send(socket, proto::signal_request::Message::PingReq(proto::Ping { timestamp: 4242, rtt: 0 })).await;
    let pong = next_matching(socket, |message| match message {
        proto::signal_response::Message::PongResp(pong) => Some(pong),
        _ => None,
    })
    .await;
    assert_eq!(pong.last_ping_timestamp, 4242);
    assert!(pong.timestamp > 0);
}

#[tokio::test]
async fn the_join_response_carries_what_official_clients_require() {
    let harness = start().await;
    let mut socket = harness.connect(&harness.token("r", "alice"), "").await;
    let join = join(&mut socket).await;
    let info = join.server_info.as_ref().expect("server_info");
    let version: Vec<u32> = info.version.split('.').map(|part| part.parse().expect("semver")).collect();
    assert_eq!(version.len(), 3, "semver");
    assert!(version >= vec![1, 8, 0], "RPC needs server ≥ 1.8.0, got {}", info.version);
    assert_eq!(join.server_version, info.version);
    assert!(join.ping_interval > 0 && join.ping_timeout > join.ping_interval);
    let room = join.room.as_ref().expect("room");
    assert!(room.sid.starts_with("RM_") && room.name == "r");
    let me = join.participant.as_ref().expect("participant");
    assert!(me.sid.starts_with("PA_"));
    assert_eq!(me.identity, "alice");
    assert_eq!(me.state, proto::participant_info::State::Joined as i32);
    assert!(join.subscriber_primary && join.fast_publish);
    assert_eq!(
        join.client_configuration.as_ref().map(|c| c.resume_connection),
        Some(proto::ClientConfigSetting::Disabled as i32)
    );
    // The subscriber offer follows at once: data channels, ICE-lite, our UDP candidate.
    let offer = next_matching(&mut socket, |message| match message {
        proto::signal_response::Message::Offer(offer) => Some(offer),
        _ => None,
    })
    .await;
    assert_eq!(offer.r#type, "offer");
    assert_eq!(offer.id, 1);
    assert!(offer.sdp.contains("a=ice-lite"), "{}", offer.sdp);
    assert!(offer.sdp.contains("m=application"), "data channels");
    let udp = harness.room.udp_addrs()[0];
    assert!(offer.sdp.contains(&format!("{} {} typ host", udp.ip(), udp.port())), "{}", offer.sdp);
    ping_answered(&mut socket).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_answers_success_or_a_text_reason_and_v1_is_not_found() {
    let harness = start().await;
    let good = harness.token("r", "alice");
    let (status, head, body) = harness.get(&format!("/room/rtc/validate?access_token={good}"));
    assert_eq!((status, body.as_str()), (200, "success"));
    assert!(head.contains("access-control-allow-origin: *"));

    let (status, head, body) = harness.get("/room/rtc/validate?access_token=not-a-jwt");
    assert_eq!(status, 401);
    assert!(body.starts_with("invalid token"), "{body}");
    assert!(head.contains("access-control-allow-origin: *"), "browsers read the reason cross-origin");

    let (status, _, body) = harness.get("/room/rtc/validate");
    assert_eq!(status, 401, "{body}");
    let no_join = harness.token_with("r", "alice", |claims| claims.video.room_join = false);
    let (status, _, body) = harness.get(&format!("/room/rtc/validate?access_token={no_join}"));
    assert_eq!(status, 403, "{body}");

    for path in ["/room/rtc/v1", "/room/rtc/v1/validate"] {
        let (status, head, body) = harness.get(&format!("{path}?access_token={good}"));
        assert_eq!(status, 404, "{path}: SDKs fall back to v0 on a 404");
        assert!(!body.contains("requested room does not exist"), "that body would stop the fallback");
        assert!(head.contains("access-control-allow-origin: *"));
    }
}

#[tokio::test]
async fn wrong_expired_and_foreign_tokens_are_refused_before_the_upgrade() {
    let harness = start().await;
    let expired = harness.token_with("r", "alice", |claims| claims.exp = now() - 3600);
    assert_eq!(harness.connect_refused(&expired).await, 401);
    let foreign = RoomCredentials::new(KEY, "another_secret_another_secret_another")
        .participant_token("r", "alice", None, now() + 600)
        .expect("mint");
    assert_eq!(harness.connect_refused(&foreign).await, 401);
    let no_room = harness.token_with("", "alice", |_| {});
    assert_eq!(harness.connect_refused(&no_room).await, 403);
    assert_eq!(harness.connect_refused("garbage").await, 401);
}

#[tokio::test]
async fn text_frames_get_a_leave_with_a_reason_and_a_close() {
    let harness = start().await;
    let mut socket = harness.connect(&harness.token("r", "alice"), "").await;
    join(&mut socket).await;
    socket.send(Message::Text("{\"ping\": 1}".into())).await.expect("send");
    let leave = expect_leave(&mut socket).await;
    assert_eq!(leave.reason, proto::DisconnectReason::StateMismatch as i32);
    assert_eq!(leave.action, proto::leave_request::Action::Disconnect as i32);
    expect_closed(&mut socket).await;
}

#[tokio::test]
async fn malformed_frames_are_tolerated_a_few_times_then_end_with_a_leave() {
    let harness = start().await;
    let mut socket = harness.connect(&harness.token("r", "alice"), "").await;
    join(&mut socket).await;
    for _ in 0..3 {
        socket.send(Message::Binary(vec![0xFF, 0xFF, 0xFF].into())).await.expect("send");
    }
    ping_answered(&mut socket).await;
    for _ in 0..8 {
        socket.send(Message::Binary(vec![0x0A, 0x50, 0x01].into())).await.expect("send");
    }
    let leave = expect_leave(&mut socket).await;
    assert_eq!(leave.reason, proto::DisconnectReason::StateMismatch as i32);
    expect_closed(&mut socket).await;
}

#[tokio::test]
async fn an_oversized_message_closes_only_its_own_connection() {
    let harness = start().await;
    let mut bystander = harness.connect(&harness.token("r", "bob"), "").await;
    join(&mut bystander).await;
    let mut socket = harness.connect(&harness.token("r", "alice"), "").await;
    join(&mut socket).await;
    let _ = socket.send(Message::Binary(vec![0u8; 1024 * 1024].into())).await;
    expect_closed(&mut socket).await;
    // The other participant sees alice leave and keeps working.
    let gone = expect_gone(&mut bystander, "alice").await;
    assert!(gone.sid.starts_with("PA_"));
    ping_answered(&mut bystander).await;
}

#[tokio::test]
async fn resume_is_answered_with_a_leave_asking_for_a_full_reconnect() {
    let harness = start().await;
    let mut socket = harness.connect(&harness.token("r", "alice"), "&reconnect=1&sid=PA_old").await;
    let leave = expect_leave(&mut socket).await;
    assert_eq!(leave.action, proto::leave_request::Action::Reconnect as i32);
    assert!(leave.can_reconnect);
    assert_eq!(leave.reason, proto::DisconnectReason::StateMismatch as i32);
}
#[tokio::test]
async fn the_in_process_agent_is_listed_with_its_track_and_sees_clients_come_and_go() {
    let harness = start().await;
    let mut agent = harness
        .room
        .join_local(
            "r",
            LocalJoinOptions {
                identity: "agent-1".into(),
                name: "Agent".into(),
                kind: ParticipantKind::Agent,
                metadata: String::new(),
                attributes: [("lk.agent.state".to_owned(), "listening".to_owned())].into(),
            },
        )
        .await
        .expect("join");
    let track = agent.publish_audio("agent-voice").await.expect("publish");
    assert!(track.sid().starts_with("TR_AM"));

    let mut alice = harness.connect(&harness.token("r", "alice"), "").await;
    let join = join(&mut alice).await;
    let listed = join.other_participants.iter().find(|p| p.identity == "agent-1").expect("agent listed");
    assert_eq!(listed.kind, proto::participant_info::Kind::Agent as i32);
    assert_eq!(listed.state, proto::participant_info::State::Active as i32);
    assert_eq!(listed.client_protocol, 0, "clients must speak RPC v1 to the agent");
    assert_eq!(listed.attributes["lk.agent.state"], "listening");
    assert_eq!(listed.tracks.len(), 1);
    assert_eq!(listed.tracks[0].sid, track.sid());
    assert_eq!(listed.tracks[0].mime_type, "audio/opus");
    let offer = next_matching(&mut alice, |message| match message {
        proto::signal_response::Message::Offer(offer) => Some(offer),
        _ => None,
    })
    .await;
    let msid = format!("a=msid:{}|{} {}", listed.sid, track.sid(), track.sid());
    assert!(offer.sdp.contains(&msid), "clients find the publisher through the msid:\n{}", offer.sdp);

    let joined = wait_event(&mut agent, |event| match event {
        RoomEvent::ParticipantJoined(participant) if participant.identity == "alice" => Some(participant),
        _ => None,
    })
    .await;
    assert_eq!(joined.kind, ParticipantKind::Standard);
    send(&mut alice, proto::signal_request::Message::Leave(proto::LeaveRequest::default())).await;
    let reason = wait_event(&mut agent, |event| match event {
        RoomEvent::ParticipantLeft { identity, reason, .. } if identity == "alice" => Some(reason),
        _ => None,
    })
    .await;
    assert_eq!(reason, LeaveReason::ClientInitiated);
}

#[tokio::test]
async fn closing_a_room_sends_everyone_a_leave_and_removing_one_participant_names_the_reason() {
    let harness = start().await;
    let agent = harness
        .room
        .join_local(
            "r",
            LocalJoinOptions {
                identity: "agent-1".into(),
                name: String::new(),
                kind: ParticipantKind::Agent,
                metadata: String::new(),
                attributes: BTreeMap::new(),
            },
        )
        .await
        .expect("join");
    let mut alice = harness.connect(&harness.token("r", "alice"), "").await;
    join(&mut alice).await;
    let mut bob = harness.connect(&harness.token("r", "bob"), "").await;
    join(&mut bob).await;

    assert!(agent.remove_participant("bob").await.expect("remove"));
    assert!(!agent.remove_participant("nobody").await.expect("remove"));
    let leave = expect_leave(&mut bob).await;
    assert_eq!(leave.reason, proto::DisconnectReason::ParticipantRemoved as i32);
    expect_closed(&mut bob).await;

    assert!(harness.room.close_room("r", LeaveReason::RoomDeleted).await);
    let leave = expect_leave(&mut alice).await;
    assert_eq!(leave.reason, proto::DisconnectReason::RoomDeleted as i32);
    assert!(!leave.can_reconnect);
    expect_closed(&mut alice).await;
    // The room is gone from the registry once its actor ends.
    for _ in 0..50 {
        if harness.room.room_names().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(harness.room.room_names().is_empty());
    assert_eq!(harness.room.udp_route_count(), (0, 0), "routes of closed rooms are forgotten");
}

/// The core decides when an empty room expires (tested in virtual time in `src/sim`); here the
/// actor ends on it and the registry forgets the room.
#[tokio::test]
async fn an_empty_room_s_actor_ends_when_the_core_says_it_expired() {
    let started = support::start_room(KEY, SECRET, Duration::from_millis(200)).await;
    let harness = Harness { room: started.room, http: started.http, credentials: started.credentials };
    let mut alice = harness.connect(&harness.token("r", "alice"), "").await;
    join(&mut alice).await;
    assert_eq!(harness.room.room_names(), vec!["r".to_owned()]);
    send(&mut alice, proto::signal_request::Message::Leave(proto::LeaveRequest::default())).await;
    expect_closed(&mut alice).await;
    for _ in 0..100 {
        if harness.room.room_names().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(harness.room.room_names().is_empty(), "gone within 2 s of a 200 ms empty timeout");
}

async fn wait_event<T>(
    participant: &mut svc_room::LocalParticipant,
    mut pick: impl FnMut(RoomEvent) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let event = tokio::time::timeout_at(deadline, participant.next_event())
            .await
            .expect("event in time")
            .expect("participant still in the room");
        if let Some(found) = pick(event) {
            return found;
        }
    }
}
