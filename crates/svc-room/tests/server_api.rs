//! LiveKit's server API (`RoomService` over Twirp) against the official server SDK, PyPI
//! `livekit-api`, while the official client SDK (PyPI `livekit`) is in the room: the script
//! (tests/interop/py/server_api.py) makes the calls and reports what each answered.
//!
//! Ignored by default: it needs the harness `scripts/interop-setup.sh` installs (scripts/test.sh
//! runs it, then the ignored tests).

use std::time::Duration;

use serde_json::{Value, json};

mod support;

const KEY: &str = "sdk-key";
const SECRET: &str = "server-api-secret-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn the_server_sdk_creates_lists_inspects_and_deletes_rooms() {
    let started = support::start_room(KEY, SECRET, Duration::from_secs(300)).await;
    // A room svc's runtime opened on its own is listed beside the SDK's.
    let _agent = join_agent(&started.room).await;

    let script = started.sdk_script("server_api.py", KEY, SECRET);
    let report = support::run_report(script, Duration::from_secs(60)).await;

    let created = &report["created"];
    assert_eq!(created["name"], "sdk-room");
    assert!(created["sid"].as_str().is_some_and(|sid| sid.starts_with("RM_")), "{created}");
    assert_eq!(created["metadata"], "from the sdk");
    assert_eq!(created["empty_timeout"], 120);
    assert_eq!(created["departure_timeout"], 30);
    assert_eq!(created["max_participants"], 7);
    assert!(created["creation_time"].as_i64().is_some_and(|t| t > 1_700_000_000), "{created}");
    // CreateRoom on an open room answers it unchanged.
    assert_eq!(report["created_again"], json!({"sid": created["sid"], "metadata": "from the sdk"}));

    assert_eq!(report["listed"], json!([["sdk-room", 1], ["session-room", 1]]));
    assert_eq!(report["listed_by_name"], json!(["sdk-room"]));
    // ParticipantInfo.State.ACTIVE = 2 once the client's media is up; JOINED = 1 before.
    let participants = report["participants"].as_array().expect("participants");
    assert_eq!(participants.len(), 1, "{participants:?}");
    assert_eq!(participants[0][0], "py-user");
    assert_eq!(participants[0][1], "Python user");
    assert_eq!(report["participant"]["identity"], "py-user");
    assert!(report["participant"]["sid"].as_str().is_some_and(|sid| sid.starts_with("PA_")));

    // What the administrator changed, the answers say and the client saw.
    assert_eq!(report["updated"], json!({"metadata": "vip", "attributes": {"tier": "gold"}, "name": "Renamed"}));
    assert_eq!(report["muted_track"], json!({"sid": true, "muted": true}));
    assert_eq!(report["room_metadata"], "room meta 2");
    let saw = &report["client_saw"];
    assert_eq!(saw["metadata"], "vip", "{saw}");
    assert_eq!(saw["attributes"], json!({"tier": "gold"}), "{saw}");
    assert_eq!(saw["data"], json!({"data": "hello from the server", "topic": "server.topic", "from": null}), "{saw}");
    assert_eq!(saw["room_metadata"], "room meta 2", "{saw}");
    assert_eq!(saw["muted"], true, "the publisher was asked to mute: {saw}");
    assert_eq!(report["subscribed_by_server"], true, "UpdateSubscriptions subscribed a client that did not");
    assert_eq!(report["second_removed"], true);

    let errors = &report["errors"];
    assert_eq!(errors["unknown_track"], json!({"code": "not_found", "status": 404}));
    assert_eq!(errors["remove_twice"], json!({"code": "not_found", "status": 404}));
    assert_eq!(errors["unknown_identity"], json!({"code": "not_found", "status": 404}));
    assert_eq!(errors["unknown_room"], json!({"code": "not_found", "status": 404}));
    assert_eq!(errors["delete_unknown_room"], json!({"code": "not_found", "status": 404}));
    assert_eq!(errors["empty_name"], json!({"code": "invalid_argument", "status": 400}));
    assert_eq!(errors["wrong_secret"], json!({"code": "unauthenticated", "status": 401}));

    assert!(
        report["full_room"].as_str().is_some_and(|error| error.contains("room has exceeded its max participants")),
        "a second client in a room for one is refused with the reason: {}",
        report["full_room"]
    );
    assert_eq!(report["tiny_room"], json!(["tiny-first"]));
    assert_eq!(report["client_disconnected"], true, "DeleteRoom disconnects everyone");
    assert_eq!(report["after_delete"], json!(["session-room"]));
    started.room.shutdown().await;
}

/// The in-process agent, opening the room `session-room` (a room svc's runtime opens on its own).
async fn join_agent(room: &svc_room::RoomServer) -> svc_room::LocalParticipant {
    let options = svc_room::LocalJoinOptions {
        identity: "agent".into(),
        name: "Agent".into(),
        kind: svc_room::ParticipantKind::Agent,
        metadata: String::new(),
        attributes: std::collections::BTreeMap::new(),
    };
    room.join_local("session-room", options).await.expect("the agent joins")
}

/// A request that announces 2 MiB and sends one byte past the 1 MiB limit, all of which the
/// server reads before it answers (so it closes cleanly, without unread bytes that would reset
/// the connection mid-write).
async fn over_the_limit(http: std::net::SocketAddr, path: &str, token: &str) -> (u16, Vec<u8>) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: room\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n",
        2 * 1024 * 1024
    );
    support::exchange(http, &head, &vec![b' '; 1024 * 1024 + 1]).await
}

fn twirp_error(body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body).expect("a Twirp error is JSON");
    assert!(value["msg"].as_str().is_some_and(|msg| !msg.is_empty()), "{value}");
    value["code"].as_str().expect("code").to_owned()
}

#[tokio::test]
async fn bad_requests_get_twirp_errors_and_json_bodies_work() {
    use svc_room::RoomGrant;
    let started = support::start_room(KEY, SECRET, Duration::from_secs(300)).await;
    let (http, credentials) = (started.http, &started.credentials);
    let rooms = "/room/twirp/livekit.RoomService/ListRooms";
    let lister = support::grant_token(credentials, RoomGrant { room_list: true, ..RoomGrant::default() });

    // JSON in, JSON out (protojson field names).
    let create = support::grant_token(credentials, RoomGrant { room_create: true, ..RoomGrant::default() });
    let (status, body) = support::post(
        http,
        "/room/twirp/livekit.RoomService/CreateRoom",
        "application/json",
        Some(&create),
        br#"{"name":"json-room","emptyTimeout":30}"#,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let room: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!((room["name"].as_str(), room["emptyTimeout"].as_u64()), (Some("json-room"), Some(30)), "{room}");
    let (status, body) = support::post(http, rooms, "application/json", Some(&lister), b"").await;
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(listed["rooms"][0]["name"], "json-room", "{listed}");

    // Authentication and grants.
    let (status, body) = support::post(http, rooms, "application/json", None, b"{}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (401, "unauthenticated"));
    let joiner = support::grant_token(
        credentials,
        RoomGrant { room_join: true, room: "json-room".into(), ..RoomGrant::default() },
    );
    let (status, body) = support::post(http, rooms, "application/json", Some(&joiner), b"{}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (403, "permission_denied"));
    let other_admin =
        support::grant_token(credentials, RoomGrant { room_admin: true, room: "other".into(), ..RoomGrant::default() });
    let (status, body) = support::post(
        http,
        "/room/twirp/livekit.RoomService/ListParticipants",
        "application/json",
        Some(&other_admin),
        br#"{"room":"json-room"}"#,
    )
    .await;
    assert_eq!((status, twirp_error(&body).as_str()), (403, "permission_denied"));

    // Bodies and routes.
    let (status, body) = support::post(http, rooms, "application/protobuf", Some(&lister), &[0xff, 0xff, 0xff]).await;
    assert_eq!((status, twirp_error(&body).as_str()), (400, "malformed"));
    let (status, body) = support::post(http, rooms, "application/json", Some(&lister), b"{\"names\": 3}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (400, "malformed"));
    let (status, body) = support::post(http, rooms, "text/plain", Some(&lister), b"{}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (404, "bad_route"));
    let (status, body) =
        support::post(http, "/room/twirp/livekit.RoomService/Teleport", "application/json", Some(&lister), b"{}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (501, "unimplemented"));
    let (status, body) =
        support::post(http, "/room/twirp/livekit.Nothing/ListRooms", "application/json", Some(&lister), b"{}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (404, "bad_route"));
    // Over the 1 MiB body limit: refused before it is decoded, as a Twirp error.
    let (status, body) = over_the_limit(http, rooms, &lister).await;
    assert_eq!((status, twirp_error(&body).as_str()), (400, "invalid_argument"));
    started.room.shutdown().await;
}

#[tokio::test]
async fn sip_without_dial_out_lists_no_trunk_and_refuses_calls_and_its_grants_are_checked() {
    use svc_room::{RoomGrant, RoomToken, SipGrant};
    let started = support::start_room(KEY, SECRET, Duration::from_secs(300)).await;
    let (http, credentials) = (started.http, &started.credentials);
    let sip_token = |sip: SipGrant| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
        let claims = RoomToken {
            iss: KEY.into(),
            sub: String::new(),
            nbf: None,
            exp: i64::try_from(now + 600).expect("seconds"),
            name: None,
            kind: None,
            metadata: None,
            attributes: Default::default(),
            video: RoomGrant::default(),
            room_config: None,
            sip,
        };
        credentials.mint(claims).expect("mint")
    };
    let admin = sip_token(SipGrant { admin: true, call: false });
    let caller = sip_token(SipGrant { admin: false, call: true });
    let sip = |method: &str| format!("/room/twirp/livekit.SIP/{method}");
    let dial = br#"{"sipTrunkId":"ST_x","sipCallTo":"+15550199","roomName":"r"}"#;

    // No `--sip-trunk`: nothing to list, no call to place.
    for method in ["ListSIPOutboundTrunk", "ListSIPInboundTrunk", "ListSIPDispatchRule"] {
        let (status, body) = support::post(http, &sip(method), "application/json", Some(&admin), b"{}").await;
        assert_eq!(status, 200, "{method}: {}", String::from_utf8_lossy(&body));
        let listed: Value = serde_json::from_slice(&body).expect("JSON");
        assert!(listed.get("items").is_none_or(|items| items == &json!([])), "{method}: {listed}");
    }
    let (status, body) =
        support::post(http, &sip("GetSIPOutboundTrunk"), "application/json", Some(&admin), br#"{"sipTrunkId":"ST_x"}"#)
            .await;
    assert_eq!((status, twirp_error(&body).as_str()), (404, "not_found"));
    let (status, body) =
        support::post(http, &sip("CreateSIPParticipant"), "application/json", Some(&caller), dial).await;
    assert_eq!((status, twirp_error(&body).as_str()), (412, "failed_precondition"));

    // The grants, as LiveKit checks them: `sip.call` to call, `sip.admin` for the rest.
    let (status, body) =
        support::post(http, &sip("CreateSIPParticipant"), "application/json", Some(&admin), dial).await;
    assert_eq!((status, twirp_error(&body).as_str()), (403, "permission_denied"));
    let (status, body) =
        support::post(http, &sip("ListSIPOutboundTrunk"), "application/json", Some(&caller), b"{}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (403, "permission_denied"));
    let (status, body) =
        support::post(http, &sip("CreateSIPOutboundTrunk"), "application/json", Some(&admin), b"{}").await;
    assert_eq!((status, twirp_error(&body).as_str()), (501, "unimplemented"));
    started.room.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn the_node_server_sdk_manages_rooms_and_the_agent_sees_its_changes() {
    let web = support::repo().join("tests/interop/web");
    assert!(
        web.join("node_modules/livekit-server-sdk").exists(),
        "tests/interop/web/node_modules is missing: run scripts/interop-setup.sh"
    );
    let started = support::start_room(KEY, SECRET, Duration::from_secs(300)).await;
    let mut agent = join_agent(&started.room).await;
    let mut script = tokio::process::Command::new("node");
    script.arg(web.join("server_api.mjs")).args([&started.url(), KEY, SECRET]).current_dir(&web);
    let report = support::run_report(script, Duration::from_secs(60)).await;

    assert_eq!(
        report["created"],
        json!({"name": "node-room", "metadata": "from node", "emptyTimeout": 60, "sid": true})
    );
    assert_eq!(report["listed"], json!([["node-room", 0], ["session-room", 1]]));
    // ParticipantInfo.Kind.AGENT = 4.
    assert_eq!(report["participants"], json!([["agent", 4]]));
    assert_eq!(report["updated"], json!({"metadata": "node meta", "attributes": {"from.node": "yes"}}));
    assert_eq!(report["roomMetadata"], "node room meta");
    assert_eq!(report["errors"]["unknownIdentity"], json!({"code": "not_found", "status": 404}));
    assert_eq!(report["errors"]["deleteUnknownRoom"], json!({"code": "not_found", "status": 404}));
    assert_eq!(report["errors"]["wrongSecret"], json!({"code": "unauthenticated", "status": 401}));
    assert_eq!(report["afterDelete"], json!(["session-room"]));

    // The agent got the server's data packet (no sender) and sees its own new attributes.
    let mut data = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while data.is_none() {
        match tokio::time::timeout_at(deadline, agent.next_event()).await {
            Ok(Some(svc_room::RoomEvent::Data(message))) => data = Some(message),
            Ok(Some(_)) => {}
            other => panic!("no data packet: {other:?}"),
        }
    }
    let data = data.expect("data");
    assert_eq!((data.from_identity.as_str(), data.topic.as_deref()), ("", Some("node.topic")));
    assert_eq!(data.payload.as_ref(), b"node says hi");
    started.room.shutdown().await;
}

/// LiveKit's server-side `PerformRpc` (not in the official server SDKs yet, so posted as their
/// Twirp JSON): the server calls a PyPI client's method and gets its answer; a method nobody
/// registered, an identity that is not there and a room that is not open get their errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn the_server_calls_a_clients_rpc_method() {
    use tokio::io::AsyncBufReadExt;
    let started = support::start_room(KEY, SECRET, Duration::from_secs(300)).await;
    let mut callee = started
        .sdk_script("rpc_callee.py", KEY, SECRET)
        .args(["--room", "rpc-room", "--identity", "callee"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the client starts");
    let mut lines = tokio::io::BufReader::new(callee.stdout.take().expect("stdout")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await;
    assert!(matches!(&ready, Ok(Ok(Some(line))) if line == "ready"), "{ready:?}");

    let call = |method: &'static str, identity: &'static str, room: &'static str| {
        let body =
            json!({"room": room, "destinationIdentity": identity, "method": method, "payload": "from the server",
            "responseTimeoutMs": 5000})
            .to_string();
        let grant = svc_room::RoomGrant { room_admin: true, room: room.into(), ..svc_room::RoomGrant::default() };
        let admin = support::grant_token(&started.credentials, grant);
        async move {
            let path = "/room/twirp/livekit.RoomService/PerformRpc";
            support::post(started.http, path, "application/json", Some(&admin), body.as_bytes()).await
        }
    };
    let (status, body) = call("nobody-registered-this", "callee", "rpc-room").await;
    assert_eq!((status, twirp_error(&body).as_str()), (412, "failed_precondition"));
    let (status, body) = call("greet", "nobody", "rpc-room").await;
    assert_eq!((status, twirp_error(&body).as_str()), (404, "not_found"));
    let (status, body) = call("greet", "callee", "no-such-room").await;
    assert_eq!((status, twirp_error(&body).as_str()), (404, "not_found"));
    let (status, body) = call("greet", "callee", "rpc-room").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(answer["payload"], "hello from the server");

    let seen = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await;
    let Ok(Ok(Some(seen))) = seen else { panic!("the client reports the call: {seen:?}") };
    let seen: Value = serde_json::from_str(&seen).expect("JSON");
    assert_eq!(seen, json!({"caller": "", "payload": "from the server"}), "the server calls as nobody");
    started.room.shutdown().await;
}

/// svc's own client of the server API ([`svc_room::server_api::ServerApi`], what svc uses on a
/// LiveKit server it does not run) against the same routes, through the room URL's path.
#[tokio::test]
async fn svcs_own_client_creates_lists_and_deletes_rooms_and_removes_participants() {
    use svc_room::server_api::{ServerApi, ServerApiError};
    let started = support::start_room(KEY, SECRET, Duration::from_secs(300)).await;
    let api = ServerApi::new(&started.url(), svc_room::RoomCredentials::new(KEY, SECRET)).expect("the room URL");
    let request = svc_room::proto::CreateRoomRequest {
        name: "api-room".to_owned(),
        empty_timeout: 60,
        metadata: "from svc".to_owned(),
        ..Default::default()
    };
    let created = api.create_room(request).await.expect("created");
    assert!(created.sid.starts_with("RM_") && created.metadata == "from svc", "{created:?}");
    let listed = api.list_rooms(vec!["api-room".to_owned()]).await.expect("listed");
    assert_eq!(listed.iter().map(|room| room.name.as_str()).collect::<Vec<_>>(), ["api-room"]);

    let _agent = support::join_local(&started.room, "api-room", "agent-1").await;
    api.remove_participant("api-room", "agent-1").await.expect("removed");
    let missing = api.remove_participant("api-room", "nobody").await.expect_err("no such participant");
    assert_eq!(missing.code(), Some("not_found"), "{missing}");

    api.delete_room("api-room").await.expect("deleted");
    assert!(started.room.describe_room("api-room").await.is_none(), "the room closed");

    // Another key's signature is refused, as LiveKit refuses it.
    let stranger =
        ServerApi::new(&started.url(), svc_room::RoomCredentials::new(KEY, "another-secret-0123456789abcdef"))
            .expect("the room URL");
    let refused = stranger.list_rooms(Vec::new()).await.expect_err("a bad signature");
    assert_eq!(refused.code(), Some("unauthenticated"), "{refused}");
    // Nothing listening: unreachable, not a hang.
    let nowhere = ServerApi::new("ws://127.0.0.1:9/room", svc_room::RoomCredentials::new(KEY, SECRET)).expect("url");
    assert!(matches!(nowhere.list_rooms(Vec::new()).await, Err(ServerApiError::Unreachable(_))));
}
