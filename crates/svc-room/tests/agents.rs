//! LiveKit's agent dispatch with LiveKit's own agent framework: two LiveKit Agents workers (PyPI
//! `livekit-agents`, tests/interop/py/agents_worker.py) register at the room's `/agent`, the
//! official server SDK (PyPI `livekit-api`, tests/interop/py/agent_dispatch.py) dispatches them
//! into four rooms, and each job's agent joins its room; a third worker that registers and never
//! answers is passed over. And what the `/agent` endpoint refuses.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use livekit_protocol as proto;
use prost::Message as _;
use serde_json::{Value, json};
use svc_room::{LocalJoinOptions, ParticipantKind, RoomEvent, RoomGrant, RoomServerConfig};
use svc_testkit::agents_worker::{AgentsWorker, WorkerOptions};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

mod support;

const KEY: &str = "agents-key";
const SECRET: &str = "agents-secret-0123456789abcdefghijkl";

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to `/agent` with `bearer` (if any): the socket, or the HTTP status it was refused with.
async fn connect_worker(url: &str, bearer: Option<&str>) -> Result<Socket, u16> {
    let mut request = format!("{url}/agent").into_client_request().expect("request");
    if let Some(bearer) = bearer {
        request.headers_mut().insert("authorization", format!("Bearer {bearer}").parse().expect("header"));
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(error) => panic!("connect: {error}"),
    }
}

fn worker_message(message: proto::worker_message::Message) -> Message {
    Message::Binary(proto::WorkerMessage { message: Some(message) }.encode_to_vec().into())
}

/// A worker that registers for `agent_name`, says it is idle, and never answers an offer.
async fn silent_worker(started: &support::TestRoom, agent_name: &str) -> (Socket, String) {
    let bearer = support::grant_token(&started.credentials, RoomGrant { agent: true, ..RoomGrant::default() });
    let mut socket = connect_worker(&started.url(), Some(&bearer)).await.expect("the worker connects");
    let register = proto::RegisterWorkerRequest {
        r#type: proto::JobType::JtRoom as i32,
        agent_name: agent_name.to_owned(),
        ..Default::default()
    };
    socket.send(worker_message(proto::worker_message::Message::Register(register))).await.expect("send");
    let Some(Ok(Message::Binary(bytes))) = socket.next().await else { panic!("no registration answer") };
    let answer = proto::ServerMessage::decode(bytes.as_ref()).expect("a server message");
    let Some(proto::server_message::Message::Register(registered)) = answer.message else { panic!("{answer:?}") };
    assert!(registered.worker_id.starts_with("AW_"), "{registered:?}");
    assert!(registered.server_info.is_some_and(|info| info.agent_protocol >= 1));
    let idle = proto::UpdateWorkerStatus {
        status: Some(proto::WorkerStatus::WsAvailable as i32),
        load: 0.0,
        ..Default::default()
    };
    socket.send(worker_message(proto::worker_message::Message::UpdateWorker(idle))).await.expect("send");
    (socket, registered.worker_id)
}

/// Starts a LiveKit Agents worker for `agent_name` in `started`'s room server (see
/// `svc_testkit::agents_worker`); with `voice`, its jobs are voice agents on that OpenAI Realtime
/// base URL.
async fn livekit_agents_worker(
    started: &support::TestRoom,
    label: &str,
    agent_name: &str,
    voice: Option<&str>,
) -> AgentsWorker {
    let url = started.url();
    let options = WorkerOptions { url: &url, key: KEY, secret: SECRET, agent_name, label, voice_base_url: voice };
    AgentsWorker::start(&support::repo(), options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn livekit_agents_workers_take_dispatched_jobs_by_load_and_a_silent_worker_is_passed_over() {
    let config = RoomServerConfig { agent_answer_timeout: Duration::from_secs(1), ..Default::default() };
    let started = support::start(KEY, SECRET, config).await;
    let (_silent, silent_id) = silent_worker(&started, "helper").await;
    let _a = livekit_agents_worker(&started, "a", "helper", None).await;
    let _b = livekit_agents_worker(&started, "b", "helper", None).await;

    let rooms = ["dispatch-1", "dispatch-2", "dispatch-3", "dispatch-4"];
    let mut observers = Vec::new();
    for room in rooms {
        let options = LocalJoinOptions {
            identity: format!("observer-{room}"),
            name: "Observer".into(),
            kind: ParticipantKind::Standard,
            metadata: String::new(),
            attributes: std::collections::BTreeMap::new(),
        };
        observers.push(started.room.join_local(room, options).await.expect("the observer joins"));
    }
    let mut script = started.sdk_script("agent_dispatch.py", KEY, SECRET);
    script.args(["--agent-name", "helper", "--rooms", &rooms.join(",")]);
    let report = support::run_report(script, Duration::from_secs(90)).await;

    let mut by_worker = std::collections::BTreeMap::<String, usize>::new();
    for (index, room) in rooms.iter().enumerate() {
        let created = &report["created"][room];
        assert!(created["id"].as_str().is_some_and(|id| id.starts_with("AD_")), "{created}");
        assert_eq!((created["agent_name"].as_str(), created["room"].as_str()), (Some("helper"), Some(*room)));
        let jobs = report["listed"][room].as_array().expect("jobs");
        assert_eq!(jobs.len(), 1, "{room}: {jobs:?}");
        // JobStatus.JS_RUNNING = 1, taken by a LiveKit Agents worker under the identity it chose.
        assert_eq!(jobs[0]["status"], 1, "{room}: {jobs:?}");
        assert_ne!(jobs[0]["worker"], silent_id.as_str(), "the silent worker never gets a job");
        assert_eq!(jobs[0]["metadata"], format!("job {index}"));
        let identity = jobs[0]["identity"].as_str().expect("identity");
        let label = identity.strip_prefix("agent-").and_then(|rest| rest.split('-').next()).expect("agent-<label>-…");
        *by_worker.entry(label.to_owned()).or_default() += 1;
    }
    assert_eq!(by_worker.keys().collect::<Vec<_>>(), ["a", "b"], "both workers took jobs: {by_worker:?}");

    // Each room's observer saw its agent join as LiveKit makes it (kind AGENT, `lk.agent_name`)
    // and heard from it.
    for (index, observer) in observers.iter_mut().enumerate() {
        let (mut joined, mut hello) = (None, None);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while joined.is_none() || hello.is_none() {
            match tokio::time::timeout_at(deadline, observer.next_event()).await {
                Ok(Some(RoomEvent::ParticipantJoined(participant))) => joined = Some(participant),
                Ok(Some(RoomEvent::Data(data))) if data.topic.as_deref() == Some("agent.hello") => {
                    hello = Some(serde_json::from_slice::<Value>(&data.payload).expect("JSON"));
                }
                Ok(Some(_)) => {}
                other => panic!("room {}: the agent never showed: {other:?}", rooms[index]),
            }
        }
        let joined = joined.expect("joined");
        assert_eq!(joined.kind, ParticipantKind::Agent);
        assert_eq!(joined.attributes.get("lk.agent_name").map(String::as_str), Some("helper"));
        let hello = hello.expect("hello");
        assert_eq!(hello["metadata"], format!("job {index}"));
        assert_eq!(hello["dispatch"], report["created"][rooms[index]]["id"]);
    }

    // A token's roomConfig dispatched the agent into the room its join opened.
    let via_token = &report["room_config"];
    assert!(via_token["agent"].as_str().is_some_and(|identity| identity.starts_with("agent-")), "{via_token}");
    assert_eq!(via_token["metadata"], json!(["from the token"]));
    assert_eq!(report["got"]["agent_name"], "helper");
    assert_eq!(report["deleted"], report["created"]["dispatch-4"]["id"]);
    assert_eq!(report["after_delete"], json!([]));
    assert_eq!(report["errors"]["delete_unknown"], json!({"code": "not_found", "status": 404}));
    assert_eq!(report["errors"]["wrong_secret"], json!({"code": "unauthenticated", "status": 401}));
    // The deleted dispatch's job was terminated: its agent leaves the room.
    let last = observers.last_mut().expect("observer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match tokio::time::timeout_at(deadline, last.next_event()).await {
            Ok(Some(RoomEvent::ParticipantLeft { identity, .. })) if identity.starts_with("agent-") => break,
            Ok(Some(_)) => {}
            other => panic!("the terminated agent never left: {other:?}"),
        }
    }
    started.room.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_livekit_agents_voice_agent_on_the_openai_realtime_plugin_holds_a_spoken_turn() {
    let fake = svc_testkit::FakeUpstream::start(svc_testkit::Flavor::OpenAi).await;
    let started = support::start(KEY, SECRET, RoomServerConfig::default()).await;
    let _worker = livekit_agents_worker(&started, "v", "voice", Some(&fake.openai_base_url())).await;

    let mut script = started.sdk_script("agent_voice_user.py", KEY, SECRET);
    let speech = support::repo().join("target/interop/audio/caller.wav");
    script.args(["--agent-name", "voice", "--room", "voice-room", "--speech"]).arg(speech);
    let report = support::run_report(script, Duration::from_secs(120)).await;

    let identity = report["agent"]["identity"].as_str().expect("the agent joined");
    assert!(identity.starts_with("agent-v-AJ_"), "{identity}");
    assert_eq!(report["agent"]["attributes"]["lk.agent_name"], "voice");
    // The upstream heard the user: the plugin streamed the room's audio into the fake (24 kHz),
    // about as much as was spoken.
    let upstream: usize = fake.audio().iter().map(Vec::len).sum();
    let spoke = report["spoke_seconds"].as_f64().expect("spoke");
    assert!(upstream as f64 / 24_000.0 > spoke * 0.8, "{upstream} samples upstream for {spoke:.1} s spoken");
    // And the user heard the model: its voice after the user stopped, its words as the agent's
    // transcript.
    assert!(report["voiced_after_speech_seconds"].as_f64().is_some_and(|seconds| seconds > 1.0), "{report}");
    let said: Vec<&str> = report["transcript"]
        .as_array()
        .expect("transcript")
        .iter()
        .filter(|entry| entry["from"] == identity)
        .filter_map(|entry| entry["text"].as_str())
        .collect();
    assert!(said.iter().any(|text| text.contains("How can I help you today")), "{said:?}");
    started.room.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn the_job_of_a_livekit_agents_worker_that_dies_is_taken_by_another() {
    let started = support::start(KEY, SECRET, RoomServerConfig::default()).await;
    let first = livekit_agents_worker(&started, "first", "helper", None).await;
    let options = LocalJoinOptions {
        identity: "observer".into(),
        name: "Observer".into(),
        kind: ParticipantKind::Standard,
        metadata: String::new(),
        attributes: std::collections::BTreeMap::new(),
    };
    let mut observer = started.room.join_local("orphan-room", options).await.expect("the observer joins");
    let admin = support::grant_token(
        &started.credentials,
        RoomGrant { room_admin: true, room: "orphan-room".into(), ..RoomGrant::default() },
    );
    let (status, body) = support::post(
        started.http,
        "/room/twirp/livekit.AgentDispatchService/CreateDispatch",
        "application/json",
        Some(&admin),
        br#"{"room":"orphan-room","agentName":"helper"}"#,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));

    // Waits for the observer to see `wanted` about an agent; the agent's identity.
    async fn next_agent(observer: &mut svc_room::LocalParticipant, joined: bool) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match tokio::time::timeout_at(deadline, observer.next_event()).await {
                Ok(Some(RoomEvent::ParticipantJoined(participant)))
                    if joined && participant.kind == ParticipantKind::Agent =>
                {
                    return participant.identity;
                }
                Ok(Some(RoomEvent::ParticipantLeft { identity, .. })) if !joined && identity.starts_with("agent-") => {
                    return identity;
                }
                Ok(Some(_)) => {}
                other => panic!("no agent {}: {other:?}", if joined { "joined" } else { "left" }),
            }
        }
    }
    let original = next_agent(&mut observer, true).await;
    assert!(original.starts_with("agent-first-"), "{original}");
    let _second = livekit_agents_worker(&started, "second", "helper", None).await;
    // The first worker dies with its job: its agent drops out, and the job goes to the other.
    drop(first);
    assert_eq!(next_agent(&mut observer, false).await, original);
    let replacement = next_agent(&mut observer, true).await;
    assert!(replacement.starts_with("agent-second-"), "{replacement}");
    started.room.shutdown().await;
}

#[tokio::test]
async fn the_agent_endpoint_wants_the_agent_grant_and_a_registration_first() {
    let started = support::start(KEY, SECRET, RoomServerConfig::default()).await;
    assert_eq!(connect_worker(&started.url(), None).await.err(), Some(401));
    let joiner = support::grant_token(
        &started.credentials,
        RoomGrant { room_join: true, room: "r".into(), ..RoomGrant::default() },
    );
    assert_eq!(connect_worker(&started.url(), Some(&joiner)).await.err(), Some(403));
    let foreign = svc_room::RoomCredentials::new(KEY, "another-secret-0123456789abcdefghijkl");
    let forged = support::grant_token(&foreign, RoomGrant { agent: true, ..RoomGrant::default() });
    assert_eq!(connect_worker(&started.url(), Some(&forged)).await.err(), Some(401));

    // A status update before registering: the connection is closed with a reason.
    let bearer = support::grant_token(&started.credentials, RoomGrant { agent: true, ..RoomGrant::default() });
    let mut socket = connect_worker(&started.url(), Some(&bearer)).await.expect("connects");
    let update = proto::UpdateWorkerStatus::default();
    socket.send(worker_message(proto::worker_message::Message::UpdateWorker(update))).await.expect("send");
    match socket.next().await {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(u16::from(frame.code), 1008, "{frame:?}"),
        other => panic!("expected a close: {other:?}"),
    }
    // Registered, it answers pings with pongs.
    let (mut worker, _) = silent_worker(&started, "pinger").await;
    let ping = proto::WorkerPing { timestamp: 1234 };
    worker.send(worker_message(proto::worker_message::Message::Ping(ping))).await.expect("send");
    let Some(Ok(Message::Binary(bytes))) = worker.next().await else { panic!("no pong") };
    let pong = proto::ServerMessage::decode(bytes.as_ref()).expect("decodes");
    let Some(proto::server_message::Message::Pong(pong)) = pong.message else { panic!("{pong:?}") };
    assert_eq!(pong.last_timestamp, 1234);
    started.room.shutdown().await;
}
