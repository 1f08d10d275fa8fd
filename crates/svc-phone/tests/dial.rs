//! End to end against a real phone: baresip (see `baresip/mod.rs`) answers a call placed by
//! `PhoneService`, which joins it to an embedded room where an in-process "agent" talks and
//! listens. Ignored by default: it needs `apt-get install -y baresip`. Run with
//! `cargo test -p svc-phone --test dial -- --ignored`.

mod baresip;
mod heard;
mod room;

use std::time::Duration;

use baresip::Baresip;
use heard::assert_heard;
use svc_audio::analysis::speech_like_signal;
use svc_phone::{DialProgress, DialRequest, EndedBy, PhoneConfig, PhoneService};
use svc_room::ParticipantKind;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const RATE: usize = 48_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs baresip (apt-get install -y baresip)"]
async fn baresip_and_the_agent_hear_each_other_then_the_phone_hangs_up() {
    // The phone says A (3 s, after 1 s of silence) and then stays silent for 6 s while it
    // listens; its file then runs out and baresip hangs up.
    let whole = speech_like_signal(8 * RATE);
    let phone_says: Vec<i16> = whole[5 * RATE..8 * RATE].to_vec();
    let agent_says: Vec<i16> = whole[..3 * RATE].to_vec();
    let mut file = vec![0i16; RATE];
    file.extend_from_slice(&phone_says);
    file.extend(std::iter::repeat_n(0, 6 * RATE));
    let peer = Baresip::start("+15550199", &file).expect("baresip is installed (apt-get install -y baresip)");

    let (room, agent) = room::with_agent("session-room").await;
    let voice = agent.publish_audio("agent-voice").await.expect("agent publishes");

    let shutdown = CancellationToken::new();
    let mut config = PhoneConfig::new(format!("sip:{}", peer.addr), "+15550100", "127.0.0.1:0".parse().expect("addr"));
    config.rtp_ports = 31_000..=31_099;
    config.ring_timeout = Duration::from_secs(10);
    let phone = PhoneService::start(config, room.clone(), shutdown.clone()).await.expect("phone service");

    // The agent listens to the SIP participant until it leaves.
    let identity = svc_phone::participant_identity("dial-1");
    let listener = tokio::spawn(room::watch_participant(agent, identity.clone(), Duration::from_secs(40)));

    let request = DialRequest {
        room_name: "session-room".into(),
        session_id: "sess-1".into(),
        dial_id: "dial-1".into(),
        phone_number: peer.number.clone(),
        caller_number: None,
        participant: Default::default(),
    };
    let mut call = phone.dial(request).await.expect("dial");
    assert_eq!(call.identity, "sip-dial-1");
    let mut progress = Vec::new();
    loop {
        let event = timeout(Duration::from_secs(10), call.progress.recv()).await;
        let event = event.unwrap_or_else(|_| panic!("no answer; so far {progress:?}\n{}", peer.log())).expect("event");
        match event {
            DialProgress::Answered => break,
            DialProgress::Failed { .. } => panic!("failed: {event:?}\n{}", peer.log()),
            other => progress.push(other),
        }
    }

    // The agent talks right away, paced by the room.
    for chunk in agent_says.chunks(RATE / 5) {
        voice.push_pcm(chunk.to_vec()).await.expect("queued");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    // baresip's file runs out about 10 s after the answer and it hangs up.
    let ended = loop {
        match timeout(Duration::from_secs(20), call.progress.recv()).await {
            Ok(Some(DialProgress::Ended { by, reason, answered_for })) => break Some((by, reason, answered_for)),
            Ok(Some(other)) => progress.push(other),
            Ok(None) => break None,
            Err(_) => {
                // The phone did not hang up: do it from our side so the rest still runs.
                call.hangup();
                eprintln!("baresip did not hang up; hanging up from svc\n{}", peer.log());
            }
        }
    };
    let (by, reason, answered_for) = ended.expect("an Ended event");
    let sip_call_id = call.call_id.0.clone();
    let view = timeout(Duration::from_secs(10), listener).await.expect("the participant leaves").expect("listener");
    call.finished().await;

    eprintln!("ended by {by:?} ({reason}) after {answered_for:?}; statuses {:?}", view.statuses);
    assert_eq!(by, EndedBy::Phone, "{}", peer.log());
    assert_eq!(reason, "hangup");
    assert!(answered_for > Duration::from_secs(8) && answered_for < Duration::from_secs(20), "{answered_for:?}");
    assert!(view.left, "the SIP participant left the room");
    assert_eq!(view.kind, Some(ParticipantKind::Sip));
    assert_eq!(view.statuses.first().map(String::as_str), Some("dialing"));
    assert!(view.statuses.contains(&"active".to_owned()), "{:?}", view.statuses);
    assert_eq!(view.statuses.last().map(String::as_str), Some("hangup"), "{:?}", view.statuses);
    assert_eq!(view.attributes.get("sip.phoneNumber").map(String::as_str), Some("+15550199"));
    assert_eq!(view.attributes.get("sip.trunkPhoneNumber").map(String::as_str), Some("+15550100"));
    assert_eq!(view.attributes.get("sip.callID").map(String::as_str), Some("dial-1"));
    assert_eq!(view.attributes.get("sip.callIDFull").map(String::as_str), Some(sip_call_id.as_str()));

    assert_heard("phone → agent", &phone_says, &view.heard, RATE);

    // Agent → phone (baresip's recording is complete once its call has ended).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rate, heard) = peer.heard();
    // G.711 is 8 kHz: compare at the rate baresip recorded.
    let reference = if rate == 8_000 {
        let mut down = Vec::new();
        svc_audio::resample::Resampler::room_to_telephone().process(&agent_says, &mut down);
        down
    } else {
        agent_says.clone()
    };
    assert_heard("agent → phone", &reference, &heard, rate as usize);

    shutdown.cancel();
    timeout(Duration::from_secs(10), phone.closed()).await.expect("the service stops");
    room.shutdown().await;
}
