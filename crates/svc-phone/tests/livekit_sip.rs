//! LiveKit's SIP API on the room, backed by the phone service, driven by the official server SDK
//! (PyPI `livekit-api`, `tests/interop/py/sip_dial.py`): `CreateSIPParticipant` dials baresip
//! into a room where an in-process agent listens; a scripted trunk that answers busy gives the
//! SDK its `SipCallError`. Ignored by default: needs baresip and the interop harness
//! (`scripts/interop-setup.sh`).

mod baresip;
mod heard;
#[path = "../../svc-sip/tests/peer/mod.rs"]
mod peer;
mod room;
#[path = "../../svc-room/tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use baresip::Baresip;
use heard::assert_heard;
use rsip::{Method, SipMessage};
use svc_audio::analysis::speech_like_signal;
use svc_phone::{PhoneConfig, PhoneService};
use svc_room::ParticipantKind;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const RATE: usize = 48_000;
const KEY: &str = "sip-key";
const SECRET: &str = "sip-secret-sip-secret-sip-secret-sip-secret";
const ROOM: &str = "phone-room";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs baresip and the interop harness (scripts/interop-setup.sh)"]
async fn the_server_sdk_dials_baresip_into_a_room_and_removes_it() {
    // The phone says A (3 s, after 1 s of silence), then stays on the line, silent, longer than
    // the script keeps it: the call ends by RemoveParticipant, not by the phone.
    let phone_says: Vec<i16> = speech_like_signal(8 * RATE)[5 * RATE..8 * RATE].to_vec();
    let mut file = vec![0i16; RATE];
    file.extend_from_slice(&phone_says);
    file.extend(std::iter::repeat_n(0, 20 * RATE));
    let peer = Baresip::start("+15550199", &file).expect("baresip is installed (apt-get install -y baresip)");

    let test_room = support::start_room(KEY, SECRET, Duration::from_secs(30)).await;
    let room = test_room.room.clone();
    let agent = support::join_local(&room, ROOM, "agent").await;
    let shutdown = CancellationToken::new();
    let trunk_uri = format!("sip:{}", peer.addr);
    let mut config = PhoneConfig::new(trunk_uri.clone(), "+15550100", "127.0.0.1:0".parse().expect("addr"));
    config.rtp_ports = 31_200..=31_299;
    let phone = PhoneService::start(config, room.clone(), shutdown.clone()).await.expect("phone service");
    room.set_sip_dialer(Arc::new(phone.clone()));

    let watching = room::watch_participant(agent, "phone-caller".to_owned(), Duration::from_secs(60));
    let listener = tokio::spawn(watching);

    let mut script = test_room.sdk_script("sip_dial.py", KEY, SECRET);
    script.args(["--room", ROOM, "--number", &peer.number, "--talk", "6"]);
    let report = support::run_report(script, Duration::from_secs(90)).await;
    let view = timeout(Duration::from_secs(10), listener).await.expect("the phone leaves").expect("listener");
    eprintln!("statuses {:?}\n{}", view.statuses, peer.log());

    // The one trunk, as configured.
    let trunk_id = svc_phone::room_api::trunk_id(&trunk_uri);
    assert_eq!(
        report["trunks"],
        serde_json::json!([{"id": trunk_id, "address": peer.addr.to_string(), "numbers": ["+15550100"]}])
    );
    assert_eq!((report["inbound_trunks"].as_u64(), report["dispatch_rules"].as_u64()), (Some(0), Some(0)));
    // What svc refuses, in LiveKit's codes.
    let refused = &report["refused"];
    assert_eq!(refused["unknown_trunk"]["code"], "not_found", "{refused}");
    assert_eq!(refused["dtmf"]["code"], "unimplemented", "{refused}");
    assert_eq!(refused["not_e164"]["code"], "invalid_argument", "{refused}");
    assert_eq!(refused["create_trunk"]["code"], "unimplemented", "{refused}");
    assert_eq!(refused["wrong_secret"]["code"], "unauthenticated", "{refused}");

    // The call: answered before CreateSIPParticipant answered, the phone in the room as asked.
    let info = &report["info"];
    let call_id = info["sip_call_id"].as_str().expect("a call id");
    assert!(call_id.starts_with("SCL_"), "{info}");
    assert_eq!((info["participant_identity"].as_str(), info["room_name"].as_str()), (Some("phone-caller"), Some(ROOM)));
    let listed = &report["listed"];
    assert_eq!(info["participant_id"], listed["sid"], "{report}");
    assert!(listed["sid"].as_str().is_some_and(|sid| sid.starts_with("PA_")), "{listed}");
    assert_eq!(listed["kind"], 3, "ParticipantInfo.Kind.SIP: {listed}");
    assert_eq!((listed["name"].as_str(), listed["metadata"].as_str()), (Some("Caller"), Some(r#"{"crm": 42}"#)));
    let attributes = &listed["attributes"];
    assert_eq!(attributes["sip.callStatus"], "active", "answered before the API answered: {attributes}");
    assert_eq!(attributes["sip.callID"], call_id);
    assert_eq!(attributes["sip.trunkID"], trunk_id.as_str());
    assert_eq!(attributes["sip.phoneNumber"], peer.number.as_str());
    assert_eq!(attributes["sip.trunkPhoneNumber"], "+15550100");
    assert_eq!(attributes["crm.id"], "42");
    assert!(attributes["sip.callIDFull"].as_str().is_some_and(|id| !id.is_empty()), "{attributes}");
    // RemoveParticipant hung the phone up.
    assert!(report["after_remove"].is_null(), "{report}");
    assert!(view.left, "the phone left the room");
    assert_eq!(view.kind, Some(ParticipantKind::Sip));
    assert_eq!(view.statuses.first().map(String::as_str), Some("dialing"), "{:?}", view.statuses);
    assert!(view.statuses.contains(&"active".to_owned()), "{:?}", view.statuses);
    assert_eq!(view.attributes.get("crm.id").map(String::as_str), Some("42"));
    for _ in 0..50 {
        if phone.active_calls() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(phone.active_calls(), 0, "the call is over");
    // The agent heard the phone through the room.
    assert_heard("phone → agent", &phone_says, &view.heard, RATE);

    shutdown.cancel();
    timeout(Duration::from_secs(10), phone.closed()).await.expect("the service stops");
    room.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh)"]
async fn a_busy_phone_is_the_sdks_sip_call_error() {
    let trunk = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("bind trunk");
    let trunk_addr = trunk.local_addr().expect("trunk address");
    let test_room = support::start_room(KEY, SECRET, Duration::from_secs(30)).await;
    let room = test_room.room.clone();
    let shutdown = CancellationToken::new();
    let mut config = PhoneConfig::new(format!("sip:{trunk_addr}"), "+15550100", "127.0.0.1:0".parse().expect("addr"));
    config.rtp_ports = 31_300..=31_319;
    let phone = PhoneService::start(config, room.clone(), shutdown.clone()).await.expect("phone service");
    room.set_sip_dialer(Arc::new(phone.clone()));

    // The trunk: trying, then busy.
    let busy = tokio::spawn(async move {
        let mut buffer = vec![0u8; 65_536];
        loop {
            let (len, from) = trunk.recv_from(&mut buffer).await.expect("recv");
            let Ok(SipMessage::Request(request)) = SipMessage::try_from(&buffer[..len]) else { continue };
            if request.method != Method::Invite {
                continue;
            }
            let invite = SipMessage::Request(request);
            for (status, tag) in [(100, None), (486, Some("b"))] {
                let bytes = peer::response(&invite, status, tag, vec![], None);
                trunk.send_to(&bytes, from).await.expect("send");
            }
            return;
        }
    });
    let mut script = test_room.sdk_script("sip_dial.py", KEY, SECRET);
    script.args(["--room", ROOM, "--number", "+15550199", "--expect-failure"]);
    let report = support::run_report(script, Duration::from_secs(60)).await;
    timeout(Duration::from_secs(5), busy).await.expect("the trunk was called").expect("trunk");

    let failure = &report["failure"];
    assert_eq!(failure["type"], "SipCallError", "{failure}");
    assert_eq!(failure["code"], "resource_exhausted", "LiveKit's code for 486: {failure}");
    assert_eq!(failure["sip_status_code"], 486, "{failure}");
    assert_eq!(failure["sip_status"], "Busy Here", "{failure}");
    assert_eq!(failure["message"], "sip status 486: Busy Here", "{failure}");

    shutdown.cancel();
    timeout(Duration::from_secs(10), phone.closed()).await.expect("the service stops");
    room.shutdown().await;
}
