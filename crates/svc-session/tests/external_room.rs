//! The agent in a room on another LiveKit server ([`ExternalRoom`]): the embedded room, served on
//! loopback, plays that server, and the agent joins it over the network as a client (signalling,
//! ICE, DTLS, SCTP and SRTP all real). What the session asks of a room ([`AgentRoom`]) must
//! behave as it does in the embedded room: peers, audio both ways, data, attributes, the
//! `svc.tool_result` RPC, and leaving. Then the runtime runs a whole session in such a room.

#[path = "support/live_room.rs"]
mod live_room;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::Value;
use svc_audio::analysis::speech_like_signal;
use svc_audio::{FRAME_SAMPLES, OpusEncoder};
use svc_room::{
    LocalJoinOptions, LocalParticipant, ParticipantKind, RoomCredentials, RoomEvent, RoomServer, RoomServerConfig,
    rpc_codes,
};
use svc_session::external_room::{ExternalRoom, ExternalRooms};
use svc_session::room::{AgentRoom, AgentRoomEvent, CloseReason, TOOL_RESULT_METHOD};
use svc_session::{Runtime, RuntimeConfig, SessionRequest, SessionRooms};
use svc_testkit::{FakeUpstream, Flavor};

const KEY: &str = "devkey";
const SECRET: &str = "secret_secret_secret_secret_secret_";
const ROOM: &str = "external-room";
/// Every wait is bounded by this.
const WAIT: Duration = Duration::from_secs(10);

/// The embedded room served at `ws://…/room`, as `svc serve` in its room-only role mounts it.
async fn start_server() -> (RoomServer, String, RoomCredentials) {
    let credentials = RoomCredentials::new(KEY, SECRET);
    let config = RoomServerConfig {
        udp_port: 0,
        node_ips: vec!["127.0.0.1".parse().expect("ip")],
        empty_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let room = RoomServer::start(config, credentials.clone()).await.expect("room server");
    let url = serve(&room).await;
    (room, url, credentials)
}

/// Serves `room`'s signalling and server API over HTTP on loopback; returns its LiveKit URL.
async fn serve(room: &RoomServer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}/room", listener.local_addr().expect("addr"));
    let router = axum::Router::new().nest("/room", room.router());
    tokio::spawn(async move {
        // The listener lives as long as the test; an error ends the test's room anyway.
        let _ = axum::serve(listener, router).await;
    });
    url
}

/// The user, in-process, in `room` of `server`.
async fn join_user(server: &RoomServer, room: &str) -> LocalParticipant {
    let options = LocalJoinOptions {
        identity: "user".into(),
        name: "User".into(),
        kind: ParticipantKind::Standard,
        metadata: String::new(),
        attributes: BTreeMap::new(),
    };
    server.join_local(room, options).await.expect("the user joins")
}

/// Epoch seconds ten minutes from now (a token's expiry).
fn in_ten_minutes() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() + 600).expect("seconds")
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Reads the agent's events until `pick` returns `Some`.
async fn agent_wait<T>(agent: &mut ExternalRoom, what: &str, mut pick: impl FnMut(AgentRoomEvent) -> Option<T>) -> T {
    within(what, async {
        loop {
            let event = agent.next_event().await;
            if matches!(event, AgentRoomEvent::Gone) {
                panic!("the agent left the room while waiting for {what}");
            }
            if let Some(found) = pick(event) {
                return found;
            }
        }
    })
    .await
}

/// Reads the user's events until `pick` returns `Some`.
async fn user_wait<T>(user: &mut LocalParticipant, what: &str, mut pick: impl FnMut(RoomEvent) -> Option<T>) -> T {
    within(what, async {
        loop {
            let event = user.next_event().await.unwrap_or_else(|| panic!("the user left while waiting for {what}"));
            if let Some(found) = pick(event) {
                return found;
            }
        }
    })
    .await
}

#[tokio::test]
async fn the_agent_holds_a_room_on_another_server_as_it_holds_the_embedded_one() {
    let (server, url, credentials) = start_server().await;
    let mut user = join_user(&server, ROOM).await;
    let expires = in_ten_minutes();
    let attributes: BTreeMap<String, String> = [("svc.session_id".to_owned(), "s1".to_owned())].into();
    let token = credentials.agent_token(ROOM, "svc-agent", Some("Agent"), attributes, expires).expect("mint");
    let mut agent = within("the agent's join", ExternalRoom::join(&url, &token))
        .await
        .expect("the agent joins the room on the other server");
    assert_eq!(agent.identity(), "svc-agent");
    // Who was there first is reported as the embedded room reports it: as joining.
    agent_wait(&mut agent, "the user already in the room", |event| match event {
        AgentRoomEvent::Peer(peer) if peer.identity == "user" => {
            assert!(!peer.is_agent && !peer.publishes_audio, "{peer:?}");
            Some(())
        }
        _ => None,
    })
    .await;

    // The user sees an agent with its token's attributes and its voice track.
    user_wait(&mut user, "the agent with its voice", |event| match event {
        RoomEvent::ParticipantJoined(p) | RoomEvent::ParticipantUpdated { participant: p, .. }
            if p.identity == "svc-agent" && p.kind == ParticipantKind::Agent && !p.tracks.is_empty() =>
        {
            assert_eq!(p.attributes.get("svc.session_id").map(String::as_str), Some("s1"));
            Some(())
        }
        _ => None,
    })
    .await;

    // The user's microphone reaches the agent as the user's frames.
    let track = user.publish_audio("microphone").await.expect("the user publishes");
    track.push_pcm(speech_like_signal(48_000)).await.expect("queued");
    let mut frames = 0;
    agent_wait(&mut agent, "the user's audio", |event| match event {
        AgentRoomEvent::Audio(audio) => {
            assert_eq!(&*audio.identity, "user");
            frames += 1;
            (frames == 25).then_some(())
        }
        _ => None,
    })
    .await;

    // The agent's voice reaches the user, on the RTP clock of the frames' media time.
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let speech = speech_like_signal(FRAME_SAMPLES * 50);
    let start = Instant::now();
    for (k, frame) in speech.chunks_exact(FRAME_SAMPLES).enumerate() {
        let due = start + Duration::from_millis(20 * k as u64);
        tokio::time::sleep_until(due.into()).await;
        let opus = Bytes::from(encoder.encode_frame(frame).expect("encodes"));
        agent.try_push_audio(opus, due).expect("the client takes the frame");
    }
    let mut timestamps = Vec::new();
    user_wait(&mut user, "the agent's voice", |event| match event {
        RoomEvent::AudioFrame(frame) if &*frame.participant_identity == "svc-agent" => {
            timestamps.push(frame.rtp_timestamp);
            (timestamps.len() == 40).then_some(())
        }
        _ => None,
    })
    .await;
    assert!(
        timestamps.windows(2).all(|pair| pair[1] - pair[0] == 960),
        "20 ms apart on the 48 kHz clock: {timestamps:?}"
    );
    assert_eq!(agent.outbound_media().dropped, 0);

    // Data and attributes go out without waiting.
    agent.send_data(r#"{"type":"svc.ready"}"#.to_owned(), None);
    let data = user_wait(&mut user, "the agent's data", |event| match event {
        RoomEvent::Data(data) if data.from_identity == "svc-agent" => Some(data),
        _ => None,
    })
    .await;
    assert_eq!(
        (data.topic.as_deref(), &data.payload[..]),
        (Some(svc_session::DATA_TOPIC), &br#"{"type":"svc.ready"}"#[..])
    );
    agent.set_attributes([("svc.state".to_owned(), "ready".to_owned())].into());
    user_wait(&mut user, "the agent's attributes", |event| match event {
        RoomEvent::ParticipantUpdated { participant, .. }
            if participant.identity == "svc-agent"
                && participant.attributes.get("svc.state").map(String::as_str) == Some("ready") =>
        {
            Some(())
        }
        _ => None,
    })
    .await;

    // The user answers a client tool through `svc.tool_result`; the agent's verdict goes back.
    let caller = tokio::spawn(async move {
        let answer = user.perform_rpc("svc-agent", TOOL_RESULT_METHOD, r#"{"call_id":"c1"}"#, WAIT).await;
        let refused = user.perform_rpc("svc-agent", "svc.other", "", WAIT).await;
        (user, answer, refused)
    });
    let call = agent_wait(&mut agent, "the tool result", |event| match event {
        AgentRoomEvent::ToolResult(call) => Some(call),
        _ => None,
    })
    .await;
    assert_eq!((call.caller.as_str(), call.payload.as_str()), ("user", r#"{"call_id":"c1"}"#));
    agent.answer_tool_result(&call, Ok("accepted".to_owned()));
    let (user, answer, refused) = within("the rpc answers", caller).await.expect("the caller");
    assert_eq!(answer, Ok("accepted".to_owned()));
    assert_eq!(refused.map_err(|error| error.code), Err(rpc_codes::UNSUPPORTED_METHOD));

    // The user leaves on its own: the agent hears it as deliberate.
    user.leave().await.expect("the user leaves");
    agent_wait(&mut agent, "the user's departure", |event| match event {
        AgentRoomEvent::PeerLeft { identity, deliberate } if identity == "user" => {
            assert!(deliberate, "the user left on its own");
            Some(())
        }
        _ => None,
    })
    .await;

    // Closing leaves the room: the agent is gone from it.
    agent.close(CloseReason::SessionEnded).await;
    within("the agent's departure", async {
        loop {
            if matches!(agent.next_event().await, AgentRoomEvent::Gone) {
                return;
            }
        }
    })
    .await;
    // The server handles the leave on its own time.
    within("the server to see the agent leave", async {
        while server
            .describe_room(ROOM)
            .await
            .is_some_and(|room| room.participants.iter().any(|p| p.identity == "svc-agent"))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// The next data message `user` hears of type `kind`.
async fn heard(user: &mut LocalParticipant, kind: &str) -> Value {
    user_wait(user, kind, |event| match event {
        RoomEvent::Data(data) => {
            let message: Value = serde_json::from_slice(&data.payload).unwrap_or(Value::Null);
            (message["type"] == kind).then_some(message)
        }
        _ => None,
    })
    .await
}

#[tokio::test]
async fn the_runtime_runs_a_session_in_a_room_on_another_server_and_deletes_the_room_at_its_end() {
    const SESSION: &str = "0b4f9c2e-6a1d-4e3b-9f8a-2c5d7e1f3a60";
    const SESSION_ROOM: &str = "room-external-runtime";
    let (database, server) = live_room::store_and_room(SESSION, SESSION_ROOM).await;
    let url = serve(&server).await;
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let data_dir = tempfile::tempdir().expect("data dir");
    let external = ExternalRooms::new(&url, server.credentials().clone()).expect("a LiveKit URL");
    // The runtime has no room of its own: it reaches the user's room only as a client of
    // `server`.
    let runtime = Runtime::new(RuntimeConfig {
        store: database.store.clone(),
        rooms: SessionRooms::External(external),
        provider_env: live_room::provider_env(&fake),
        local: None,
        recordings_dir: data_dir.path().join("recordings"),
        node_id: "external".into(),
        timing: svc_session::core::Timing::default(),
        phone: None,
        tool_backends: Default::default(),
    });
    let mut user = join_user(&server, SESSION_ROOM).await;
    let request = SessionRequest {
        session_id: SESSION.into(),
        room_name: SESSION_ROOM.into(),
        session: live_room::session_config(),
        local_slot: None,
    };
    within("the start", runtime.start_session(request)).await.expect("the session runs");
    let ready = heard(&mut user, "ready").await;
    assert_eq!(ready["session_id"], SESSION);
    let room = server.describe_room(SESSION_ROOM).await.expect("open");
    let agent = room.participants.iter().find(|p| p.identity == format!("agent-{SESSION}")).expect("the agent");
    assert_eq!(agent.kind, svc_room::proto::participant_info::Kind::Agent as i32);

    let ending = tokio::spawn({
        let runtime = runtime.clone();
        async move { runtime.end_session(SESSION, "session_deleted").await }
    });
    let ended = heard(&mut user, "session-ended").await;
    assert_eq!(ended["reason"], "session_deleted");
    assert_eq!(within("end_session", ending).await.expect("the task"), Ok(()));
    // Closing the session deleted the room on its server: the user is out too.
    within("the room's deletion", async {
        while server.describe_room(SESSION_ROOM).await.is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let timeline = database.store.timeline(SESSION).await.expect("timeline");
    let last = timeline.last().expect("events");
    assert_eq!((last.kind.as_str(), last.data["reason"].as_str()), ("session.ended", Some("session_deleted")));
    assert_eq!(runtime.open_rooms(), 0, "no room in this process");
    runtime.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_broken_connection_to_the_server_is_rejoined_with_the_agents_attributes() {
    let (server, url, credentials) = start_server().await;
    let upstream: std::net::SocketAddr =
        url.trim_start_matches("ws://").split('/').next().expect("authority").parse().expect("address");
    let proxy = svc_testkit::fault_proxy::FaultProxy::start(upstream).await;
    let through_proxy = format!("ws://{}/room", proxy.addr());
    let mut user = join_user(&server, ROOM).await;
    let expires = in_ten_minutes();
    let token = credentials.agent_token(ROOM, "svc-agent", None, BTreeMap::new(), expires).expect("mint");
    let mut agent = within("the join", ExternalRoom::join(&through_proxy, &token)).await.expect("joins");
    agent.set_attributes([("lk.agent.state".to_owned(), "listening".to_owned())].into());
    agent_wait(&mut agent, "the user, present at the join", |event| match event {
        AgentRoomEvent::Peer(peer) if peer.identity == "user" => Some(()),
        _ => None,
    })
    .await;
    let agent_state = |p: &svc_room::Participant| p.attributes.get("lk.agent.state").cloned();
    user_wait(&mut user, "the agent's attributes", |event| match event {
        RoomEvent::ParticipantUpdated { participant: p, .. } if p.identity == "svc-agent" => agent_state(&p),
        _ => None,
    })
    .await;

    // The signalling connection dies without a word. The session's loop, reading the agent's
    // events, meets the break and the rejoin through the same address, then the user again (as
    // present at the rejoin).
    proxy.sever();
    agent_wait(&mut agent, "the user, reported again after the rejoin", |event| match event {
        AgentRoomEvent::Peer(peer) if peer.identity == "user" => Some(()),
        _ => None,
    })
    .await;
    assert!(proxy.accepted() >= 2, "a second signalling connection");
    // The user sees the agent leave and come back with the attributes it had set; its data gets
    // through.
    user_wait(&mut user, "the first connection's agent leaving", |event| match event {
        RoomEvent::ParticipantLeft { identity, .. } if identity == "svc-agent" => Some(()),
        _ => None,
    })
    .await;
    user_wait(&mut user, "the rejoined agent with its attributes", |event| match event {
        RoomEvent::ParticipantJoined(p) | RoomEvent::ParticipantUpdated { participant: p, .. }
            if p.identity == "svc-agent" && agent_state(&p).as_deref() == Some("listening") =>
        {
            Some(())
        }
        _ => None,
    })
    .await;
    agent.send_data(r#"{"type":"after-rejoin"}"#.to_owned(), None);
    user_wait(&mut user, "data after the rejoin", |event| match event {
        RoomEvent::Data(data) if data.from_identity == "svc-agent" => Some(()),
        _ => None,
    })
    .await;
    agent.close(CloseReason::SessionEnded).await;
}
