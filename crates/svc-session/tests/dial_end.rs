//! A phone call and the session it joined, in one process: the runtime over the embedded room,
//! svc-phone over a scripted trunk on loopback (svc-sip's test `peer` builds its answers) and
//! svc-testkit's fake provider. When the session ends while the call is up, the phone is hung up
//! first and the clients still in the room hear `dial-progress` say so before the room closes;
//! the timeline keeps the caller id the callee actually saw.

#[path = "../../svc-sip/tests/peer/mod.rs"]
mod peer;

#[path = "support/live_room.rs"]
mod live_room;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use peer::{contact_header, response};
use rsip::{Method, SipMessage};
use serde_json::{Value, json};
use svc_phone::{PhoneConfig, PhoneService};
use svc_room::{LocalJoinOptions, ParticipantKind, RoomEvent};
use svc_session::{DialRequest, Runtime, RuntimeConfig, SessionRequest};
use svc_testkit::{FakeUpstream, Flavor};
use tokio::net::UdpSocket;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);
const ROOM: &str = "room-dial-end";
const SESSION: &str = "5f0c1b7e-6d43-4c5e-9a55-0d6f2b9c1e01";
/// `--sip-caller-number`: what a dial that names no caller id presents.
const TRUNK_CALLER: &str = "+15550100";

async fn receive_request(trunk: &UdpSocket, method: Method) -> (SipMessage, SocketAddr) {
    let mut buffer = vec![0u8; 65_536];
    loop {
        let (len, from) = timeout(WAIT, trunk.recv_from(&mut buffer)).await.expect("a datagram in time").expect("recv");
        let message = SipMessage::try_from(&buffer[..len]).expect("parses");
        if matches!(&message, SipMessage::Request(r) if r.method == method) {
            return (message, from);
        }
    }
}

/// Answers the INVITE with a phone on loopback (PCMU); returns the phone's RTP socket.
async fn answer(trunk: &UdpSocket) -> UdpSocket {
    let (invite, ua) = receive_request(trunk, Method::Invite).await;
    let phone = UdpSocket::bind("127.0.0.1:0").await.expect("phone RTP");
    let port = phone.local_addr().expect("addr").port();
    let sdp = format!(
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
         m=audio {port} RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\na=ptime:20\r\na=sendrecv\r\n"
    );
    let ok = response(&invite, 200, Some("phone"), vec![contact_header("phone")], Some(&sdp));
    trunk.send_to(&ok, ua).await.expect("send 200");
    receive_request(trunk, Method::Ack).await;
    phone
}

/// The `dial-progress` and `session-ended` messages `user` hears until it is out of the room.
async fn heard_until_the_room_closes(user: &mut svc_room::LocalParticipant) -> Vec<Value> {
    let mut heard = Vec::new();
    loop {
        match timeout(WAIT, user.next_event()).await.expect("the room closes in time") {
            Some(RoomEvent::Data(data)) => {
                let message: Value = serde_json::from_slice(&data.payload).unwrap_or(Value::Null);
                if matches!(message["type"].as_str(), Some("dial-progress" | "session-ended")) {
                    heard.push(message);
                }
            }
            Some(RoomEvent::Disconnected { .. }) | None => return heard,
            Some(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_ends_hangs_its_phone_up_and_says_so_before_its_room_closes() {
    let (database, room) = live_room::store_and_room(SESSION, ROOM).await;
    let store = database.store.clone();
    let trunk = UdpSocket::bind("127.0.0.1:0").await.expect("trunk");
    let trunk_addr = trunk.local_addr().expect("trunk address");
    let mut phone_config =
        PhoneConfig::new(format!("sip:{trunk_addr}"), TRUNK_CALLER, "127.0.0.1:0".parse().expect("addr"));
    phone_config.rtp_ports = 32_400..=32_419;
    let phone_shutdown = CancellationToken::new();
    let phone = PhoneService::start(phone_config, room.clone(), phone_shutdown.clone()).await.expect("phone service");
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let provider_env = live_room::provider_env(&fake);
    let data_dir = tempfile::tempdir().expect("data dir");
    let runtime = Runtime::new(RuntimeConfig {
        store: store.clone(),
        rooms: svc_session::SessionRooms::Embedded(room.clone()),
        provider_env,
        local: None,
        recordings_dir: data_dir.path().join("recordings"),
        node_id: "test".into(),
        timing: svc_session::core::Timing::default(),
        phone: Some(phone.clone()),
        tool_backends: Default::default(),
    });
    let request = SessionRequest {
        session_id: SESSION.into(),
        room_name: ROOM.into(),
        session: live_room::session_config(),
        local_slot: None,
    };
    runtime.start_session(request).await.expect("the session runs");
    let user_options = LocalJoinOptions {
        identity: "user".into(),
        name: "user".into(),
        kind: ParticipantKind::Standard,
        metadata: String::new(),
        attributes: BTreeMap::new(),
    };
    let mut user = room.join_local(ROOM, user_options).await.expect("the user joins");

    // A dial that names no caller id: the trunk's is presented, and kept.
    let dial = DialRequest {
        dial_id: "dial-1".into(),
        session_id: SESSION.into(),
        phone_number: "+14155550123".into(),
        caller_number: None,
        room_name: Some(ROOM.into()),
    };
    runtime.dial(dial).await.expect("the call is placed");
    let _phone_rtp = answer(&trunk).await;
    loop {
        let Some(RoomEvent::Data(data)) = timeout(WAIT, user.next_event()).await.expect("the answer is told") else {
            continue;
        };
        let message: Value = serde_json::from_slice(&data.payload).unwrap_or(Value::Null);
        if message["type"] == "dial-progress" && message["status"] == "answered" {
            break;
        }
    }

    // The session ends (its client ended it, say): every leg drops, the phone's first.
    let ending = {
        let runtime = runtime.clone();
        tokio::spawn(async move { runtime.end_session(SESSION, "client_ended").await })
    };
    let (bye, ua) = receive_request(&trunk, Method::Bye).await;
    trunk.send_to(&response(&bye, 200, None, vec![], None), ua).await.expect("answer the BYE");
    let heard = heard_until_the_room_closes(&mut user).await;
    timeout(WAIT, ending).await.expect("the end in time").expect("task").expect("ended");
    let ended = heard.iter().find(|m| m["type"] == "dial-progress").expect("the call's end was told in the room");
    assert_eq!(
        (ended["dial_id"].clone(), ended["status"].clone(), ended["ended_by"].clone(), ended["reason"].clone()),
        (json!("dial-1"), json!("ended"), json!("svc"), json!("session_ended")),
        "{heard:?}"
    );
    assert!(ended["duration_seconds"].as_f64().is_some_and(|s| s > 0.0), "{ended}");
    assert_eq!(heard.first().map(|m| m["type"].clone()), Some(json!("session-ended")), "{heard:?}");

    let timeline = store.timeline(SESSION).await.expect("timeline");
    let placed = timeline.iter().find(|row| row.kind == "dial.placed").expect("dial.placed");
    assert_eq!(placed.data["caller_number"], TRUNK_CALLER);
    let kinds: Vec<&str> = timeline.iter().map(|row| row.kind.as_str()).collect();
    let dial_ended = kinds.iter().position(|kind| *kind == "dial.ended").expect("dial.ended");
    let session_ended = kinds.iter().position(|kind| *kind == "session.ended").expect("session.ended");
    assert!(session_ended < dial_ended, "{kinds:?}");

    runtime.shutdown().await;
    phone_shutdown.cancel();
    timeout(WAIT, phone.closed()).await.expect("the phone service stops");
    room.shutdown().await;
}
