//! The in-process participant's posts (commands nobody waits for) and its RPC, which the room's
//! actor keeps without a task per participant or per call: two in-process participants in one
//! room of a real `RoomServer`. Every wait is bounded.

use std::time::{Duration, Instant};

use bytes::Bytes;
use svc_room::{
    LocalError, LocalJoinOptions, LocalParticipant, OutboundMedia, ParticipantKind, RoomEvent, RoomServer, RpcError,
    rpc_codes,
};

mod support;

const WAIT: Duration = Duration::from_secs(10);

async fn join(room: &RoomServer, identity: &str) -> LocalParticipant {
    let options = LocalJoinOptions {
        identity: identity.into(),
        name: identity.into(),
        kind: ParticipantKind::Standard,
        metadata: String::new(),
        attributes: Default::default(),
    };
    room.join_local("r", options).await.expect("in-process join")
}

/// The next event `participant` sees that `pick` takes.
async fn next_matching<T>(participant: &mut LocalParticipant, mut pick: impl FnMut(RoomEvent) -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, participant.next_event()).await {
            Ok(Some(event)) => {
                if let Some(found) = pick(event) {
                    return found;
                }
            }
            Ok(None) => panic!("{} left the room", participant.identity()),
            Err(_) => panic!("{} waited {WAIT:?} in vain", participant.identity()),
        }
    }
}

#[tokio::test]
async fn rpc_between_in_process_participants_is_answered_through_events() {
    let started = support::start_room("devkey", "secret_secret_secret_secret_secret_", Duration::from_secs(2)).await;
    let mut callee = join(&started.room, "callee").await;
    callee.register_rpc_method("echo");
    let caller = join(&started.room, "caller").await;
    next_matching(&mut callee, |event| {
        matches!(event, RoomEvent::ParticipantJoined(p) if p.identity == "caller").then_some(())
    })
    .await;

    let call = caller.perform_rpc("callee", "echo", "hello", Duration::from_secs(5));
    let answer = async {
        let invocation = next_matching(&mut callee, |event| match event {
            RoomEvent::RpcRequest(invocation) => Some(invocation),
            _ => None,
        })
        .await;
        assert_eq!((invocation.caller_identity.as_str(), invocation.method.as_str()), ("caller", "echo"));
        assert!(invocation.response_timeout >= Duration::from_secs(1));
        callee
            .respond_rpc(
                &invocation.caller_identity,
                &invocation.request_id,
                Ok(format!("echo:{}", invocation.payload)),
            )
            .expect("answer posted");
    };
    let (result, ()) = tokio::join!(call, answer);
    assert_eq!(result.expect("answered"), "echo:hello");

    // The room refuses what the callee did not register, and calls to nobody, at once.
    let missing = caller.perform_rpc("callee", "nope", "?", Duration::from_secs(5)).await;
    assert!(matches!(missing, Err(RpcError { code: rpc_codes::UNSUPPORTED_METHOD, .. })), "{missing:?}");
    let nobody = caller.perform_rpc("ghost", "echo", "?", Duration::from_secs(5)).await;
    assert!(matches!(nobody, Err(RpcError { code: rpc_codes::RECIPIENT_NOT_FOUND, .. })), "{nobody:?}");

    // An application error travels back as one.
    let call = caller.perform_rpc("callee", "echo", "fail", Duration::from_secs(5));
    let answer = async {
        let invocation = next_matching(&mut callee, |event| match event {
            RoomEvent::RpcRequest(invocation) => Some(invocation),
            _ => None,
        })
        .await;
        let refusal = RpcError::new(rpc_codes::APPLICATION_ERROR, "no");
        callee.respond_rpc(&invocation.caller_identity, &invocation.request_id, Err(refusal)).expect("posted");
    };
    let (result, ()) = tokio::join!(call, answer);
    assert!(matches!(result, Err(RpcError { code: rpc_codes::APPLICATION_ERROR, ref message, .. }) if message == "no"));

    // A callee that leaves fails the call in flight rather than at its timeout.
    let started_at = Instant::now();
    let call = caller.perform_rpc("callee", "echo", "bye", Duration::from_secs(8));
    let leave = async {
        next_matching(&mut callee, |event| matches!(event, RoomEvent::RpcRequest(_)).then_some(())).await;
        callee.leave().await.expect("leaves");
    };
    let (result, ()) = tokio::join!(call, leave);
    assert!(matches!(result, Err(RpcError { code: rpc_codes::RECIPIENT_DISCONNECTED, .. })), "{result:?}");
    assert!(started_at.elapsed() < Duration::from_secs(5), "the leave ended the call");
}

#[tokio::test]
async fn posts_arrive_in_order_and_their_failures_come_back_as_events() {
    let started = support::start_room("devkey", "secret_secret_secret_secret_secret_", Duration::from_secs(2)).await;
    let mut sender = join(&started.room, "sender").await;
    let mut receiver = join(&started.room, "receiver").await;
    next_matching(&mut sender, |event| {
        matches!(event, RoomEvent::ParticipantJoined(p) if p.identity == "receiver").then_some(())
    })
    .await;

    for n in 0..20 {
        sender.try_send_data(format!("{n}").into_bytes(), Some("t"), true, &[]).expect("posted");
    }
    sender.try_set_attributes([("k".to_owned(), "v".to_owned())].into()).expect("posted");
    let mut seen = Vec::new();
    while seen.len() < 20 {
        let payload = next_matching(&mut receiver, |event| match event {
            RoomEvent::Data(message) => Some(message.payload),
            _ => None,
        })
        .await;
        seen.push(String::from_utf8(payload.to_vec()).expect("utf-8"));
    }
    assert_eq!(seen, (0..20).map(|n| n.to_string()).collect::<Vec<_>>(), "in the order posted");
    next_matching(&mut receiver, |event| match event {
        RoomEvent::ParticipantUpdated { participant, .. } if participant.identity == "sender" => {
            (participant.attributes.get("k").map(String::as_str) == Some("v")).then_some(())
        }
        _ => None,
    })
    .await;

    // The room refuses a packet over its limit; the poster hears why.
    sender.try_send_data(vec![0u8; 70_000], Some("t"), true, &[]).expect("posted");
    let (command, error) = next_matching(&mut sender, |event| match event {
        RoomEvent::CommandFailed { command, error } => Some((command, error)),
        _ => None,
    })
    .await;
    assert_eq!(command, "send_data");
    assert!(matches!(error, LocalError::PacketTooLarge(70_000)), "{error:?}");
}

#[tokio::test]
async fn frames_pushed_without_waiting_reach_listeners_and_refusals_are_counted() {
    let started = support::start_room("devkey", "secret_secret_secret_secret_secret_", Duration::from_secs(2)).await;
    let agent = join(&started.room, "agent").await;
    let mut listener = join(&started.room, "listener").await;
    let track = agent.publish_audio("voice").await.expect("publish");
    let mut encoder = svc_audio::OpusEncoder::new_voice().expect("encoder");
    let frame = Bytes::from(encoder.encode_frame(&[0; svc_audio::FRAME_SAMPLES]).expect("encodes"));
    // Due a little ahead, so that only the frame meant to be late is.
    let due = Instant::now() + Duration::from_millis(100);
    for k in 0..10u32 {
        track.try_push_opus_at(frame.clone(), due + Duration::from_millis(20) * k).expect("taken");
    }
    let mut timestamps = Vec::new();
    while timestamps.len() < 10 {
        let rtp = next_matching(&mut listener, |event| match event {
            RoomEvent::AudioFrame(frame) if &*frame.participant_identity == "agent" => Some(frame.rtp_timestamp),
            _ => None,
        })
        .await;
        timestamps.push(rtp);
    }
    let steps: Vec<u64> = timestamps.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(steps.iter().all(|step| *step == 960), "RTP time follows the media clock: {steps:?}");
    // An empty frame is no Opus frame: the room drops it and counts it on the track.
    track.try_push_opus_at(Bytes::new(), Instant::now()).expect("taken by the queue");
    // A frame handed over a second after its time leaves late.
    track.try_push_opus_at(frame.clone(), Instant::now() - Duration::from_secs(1)).expect("taken");
    let deadline = Instant::now() + WAIT;
    while track.outbound() != (OutboundMedia { dropped: 1, late: 1 }) {
        assert!(Instant::now() < deadline, "counts: {:?}", track.outbound());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
