//! The in-process participant's posts (commands nobody waits for): in-process participants in
//! one room of a real `RoomServer`. Every wait is bounded.

use std::time::{Duration, Instant};

use bytes::Bytes;
use svc_room::{LocalJoinOptions, LocalParticipant, OutboundMedia, ParticipantKind, RoomEvent, RoomServer};

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
