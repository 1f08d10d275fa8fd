//! The room's behaviours, in virtual time: join, publish, subscribe, renegotiation, data routing,
//! attributes, leave reasons, the empty-room timeout and a slow subscriber. Each runs the real
//! room core and real client cores (real ICE, DTLS, SCTP, SRTP) over the simulated network.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use livekit_protocol as proto;

use super::{Delivery, JoinOptions, Sim};
use crate::client::{ClientError, ClientEvent};
use crate::core::{Key, LocalCommand, LocalError, LocalReply, MAX_RELIABLE_BACKLOG_BYTES, Permissions};
use crate::model::{LeaveReason, ParticipantKind, RoomEvent};

const EMPTY_TIMEOUT: Duration = Duration::from_secs(300);
/// Opus "silence" (a TOC byte and two bytes of frame): the room forwards payloads as they are.
const FRAME: [u8; 3] = [0xF8, 0xFF, 0xFE];

fn sim() -> Sim {
    Sim::new(7, EMPTY_TIMEOUT)
}

fn state(info: &proto::ParticipantInfo) -> proto::participant_info::State {
    proto::participant_info::State::try_from(info.state).expect("a known state")
}

fn reason(info: &proto::ParticipantInfo) -> proto::DisconnectReason {
    proto::DisconnectReason::try_from(info.disconnect_reason).expect("a known reason")
}

fn metadata_request(request_id: u32, attributes: &[(&str, &str)]) -> proto::signal_request::Message {
    proto::signal_request::Message::UpdateMetadata(proto::UpdateParticipantMetadata {
        metadata: String::new(),
        name: String::new(),
        attributes: attributes.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        request_id,
    })
}

/// Sends `count` frames, one per 20 ms of virtual time, with RTP timestamps 960 apart.
fn stream_audio(sim: &mut Sim, key: Key, count: u64) {
    for k in 0..count {
        sim.send_audio(key, 960 * k, &FRAME);
        sim.run_for(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Join

#[test]
fn clients_join_connect_within_a_few_round_trips_and_see_each_other() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let bob = sim.join_ready("bob", JoinOptions::default());
    // ICE, DTLS and SCTP over a 1 ms path: tens of milliseconds, not the wall clock.
    assert!(sim.elapsed() < Duration::from_millis(500), "{:?}", sim.elapsed());

    let bob_info = sim.client(bob).info.clone().expect("a join response");
    assert_eq!(bob_info.room_name, "test");
    assert!(bob_info.room_sid.starts_with("RM_") && bob_info.participant_sid.starts_with("PA_"));
    assert_eq!(bob_info.other_participants.iter().map(|p| p.identity.as_str()).collect::<Vec<_>>(), ["alice"]);
    // Alice learns of Bob, and of Bob becoming active once his subscriber connection is up.
    sim.run_until(Duration::from_secs(1), |sim| {
        sim.client(alice).latest_info("bob").is_some_and(|info| state(&info) == proto::participant_info::State::Active)
    });
    let joined = sim.client(alice).latest_info("bob").expect("bob's info");
    assert!(joined.version >= 2, "the update after the join has a newer version");
}

#[test]
fn the_same_seed_gives_the_same_ids() {
    let ids = |seed| {
        let mut sim = Sim::new(seed, EMPTY_TIMEOUT);
        let key = sim.join("alice", JoinOptions::default());
        sim.run_until(Duration::from_secs(1), |sim| sim.client(key).info.is_some());
        let info = sim.client(key).info.clone().expect("joined");
        (info.room_sid, info.participant_sid)
    };
    assert_eq!(ids(11), ids(11));
    assert_ne!(ids(11), ids(12));
}

// ---------------------------------------------------------------------------------------------
// Publish, subscribe, renegotiation

#[test]
fn published_audio_reaches_every_subscriber_unchanged_and_the_publisher_learns_it_was_subscribed() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let bob = sim.join_ready("bob", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    let track = sim.publish_ready(alice);
    assert!(track.starts_with("TR_AM"), "{track}");

    sim.run_until(Duration::from_secs(2), |sim| sim.client(bob).has_subscribed_track());
    stream_audio(&mut sim, alice, 50);
    sim.run_for(Duration::from_millis(100));

    let heard = sim.client(bob).audio();
    assert!(heard.len() >= 48, "bob heard {} of 50 frames", heard.len());
    assert!(heard.iter().all(|(who, sid, _, opus)| who == "alice" && *sid == track && opus == &FRAME));
    assert!(heard.windows(2).all(|pair| pair[1].2 == pair[0].2 + 960), "RTP timestamps advance by 960");

    let agent_frames = sim
        .local_events(agent)
        .into_iter()
        .filter(|e| matches!(e, RoomEvent::AudioFrame(frame) if &*frame.track_sid == track.as_str()))
        .count();
    assert!(agent_frames >= 48, "the in-process agent got {agent_frames} of 50 frames");
    assert!(
        sim.client(alice)
            .events
            .iter()
            .any(|e| matches!(e, ClientEvent::OwnTrackSubscribed { track_sid } if *track_sid == track))
    );
    // Bob publishes nothing, so Alice's subscriber connection carries no audio.
    assert!(sim.client(alice).audio().is_empty());
}

#[test]
fn a_late_joiner_gets_the_track_by_offer_and_a_leaving_publisher_is_renegotiated_away() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let track = sim.publish_ready(alice);
    let carol = sim.join_ready("carol", JoinOptions::default());
    sim.run_until(Duration::from_secs(2), |sim| {
        sim.client(carol).events.iter().any(
            |e| matches!(e, ClientEvent::TrackSubscribed { track_sid, participant_identity, .. } if *track_sid == track && participant_identity == "alice"),
        )
    });
    let offers_before = sim.client(carol).offers();

    sim.leave(alice);
    sim.run_for(Duration::from_millis(50));
    let gone = sim.client(carol).latest_info("alice").expect("alice's last update");
    assert_eq!(state(&gone), proto::participant_info::State::Disconnected);
    assert_eq!(reason(&gone), proto::DisconnectReason::ClientInitiated);
    assert_eq!(sim.client(carol).offers(), offers_before + 1, "the track's m-line is taken away by a new offer");
    assert_eq!(sim.client(alice).closed, Some(None), "a leave closes without an error");
}

#[test]
fn without_auto_subscribe_a_client_receives_exactly_what_it_subscribes_to() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let track = sim.publish_ready(alice);
    let bob = sim.join_ready("bob", JoinOptions { auto_subscribe: false, ..JoinOptions::default() });
    stream_audio(&mut sim, alice, 10);
    assert!(sim.client(bob).audio().is_empty(), "nothing before a subscription");

    let subscription = |subscribe| {
        proto::signal_request::Message::Subscription(proto::UpdateSubscription {
            track_sids: vec![track.clone()],
            subscribe,
            participant_tracks: Vec::new(),
        })
    };
    sim.signal(bob, subscription(true));
    sim.run_until(Duration::from_secs(2), |sim| sim.client(bob).has_subscribed_track());
    stream_audio(&mut sim, alice, 20);
    let subscribed = sim.client(bob).audio().len();
    assert!(subscribed >= 18, "{subscribed} of 20 frames while subscribed");

    sim.signal(bob, subscription(false));
    sim.run_for(Duration::from_millis(100));
    let at_unsubscribe = sim.client(bob).audio().len();
    stream_audio(&mut sim, alice, 20);
    assert_eq!(sim.client(bob).audio().len(), at_unsubscribe, "no audio after unsubscribing");
}

#[test]
fn an_in_process_track_is_encoded_paced_and_reaches_clients() {
    let mut sim = sim();
    let bob = sim.join_ready("bob", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    let LocalReply::TrackPublished { track_sid, counters } =
        sim.local(agent, LocalCommand::PublishAudio { name: "voice".to_owned() })
    else {
        panic!("the agent's track is published");
    };
    sim.run_until(Duration::from_secs(2), |sim| sim.client(bob).has_subscribed_track());
    // One second of a 440 Hz tone, pushed at once: the room paces it out at 20 ms per frame.
    let pcm: Vec<i16> = (0..48_000)
        .map(|n| (8000.0 * (2.0 * std::f32::consts::PI * 440.0 * n as f32 / 48_000.0).sin()) as i16)
        .collect();
    assert!(matches!(
        sim.local(agent, LocalCommand::PushAudio { track_sid: track_sid.clone(), pcm }),
        LocalReply::Done
    ));
    sim.run_for(Duration::from_millis(500));
    let halfway = sim.client(bob).audio().len();
    sim.run_for(Duration::from_millis(700));
    let all = sim.client(bob).audio();
    assert!((20..=30).contains(&halfway), "paced: {halfway} frames after half a second");
    assert!(all.len() >= 49, "{} frames of 50", all.len());
    assert!(all.iter().all(|(who, sid, _, _)| who == "agent" && *sid == track_sid));
    assert_eq!(counters.played_samples.load(std::sync::atomic::Ordering::Relaxed), 48_000);
}

#[test]
fn a_pushed_opus_frame_leaves_within_the_push_without_a_turn_of_the_rooms_timer() {
    let mut sim = sim();
    let bob = sim.join_ready("bob", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    let LocalReply::TrackPublished { track_sid, .. } =
        sim.local(agent, LocalCommand::PublishAudio { name: "voice".to_owned() })
    else {
        panic!("the agent's track is published");
    };
    sim.run_until(Duration::from_secs(2), |sim| sim.client(bob).has_subscribed_track());
    sim.run_for(Duration::from_millis(200));
    let datagrams =
        |sim: &Sim| sim.wire.iter().filter(|(_, delivery)| matches!(delivery, Delivery::Datagram { .. })).count();
    let (heard, on_the_wire) = (sim.client(bob).audio().len(), datagrams(&sim));

    // A frame of Opus silence, due now.
    let opus = Bytes::from_static(&[0xf8, 0xff, 0xfe]);
    let push = LocalCommand::PushOpus { track_sid: track_sid.as_str().into(), opus, media_time: Some(sim.now) };
    assert!(matches!(sim.local(agent, push), LocalReply::Done));

    // Its packet is on the wire when the push returns, and the room wants no wake-up for it
    // (str0m packetizes a written frame only when given the time: the drain gives it).
    assert!(datagrams(&sim) > on_the_wire, "the frame's packet left with the push");
    let now = sim.now;
    assert!(sim.room.poll_timeout().is_none_or(|at| at > now), "no timeout due for the frame");
    sim.run_for(sim.latency + Duration::from_millis(1));
    assert_eq!(sim.client(bob).audio().len(), heard + 1, "bob heard the frame");
}

// ---------------------------------------------------------------------------------------------
// Data

#[test]
fn data_goes_to_everyone_else_or_only_to_its_destinations_with_the_sender_set_by_the_room() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let bob = sim.join_ready("bob", JoinOptions::default());
    let carol = sim.join_ready("carol", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);

    sim.send_data(alice, b"to all", Some("chat"), true, &[]).expect("sent");
    sim.send_data(alice, b"to carol", None, true, &["carol"]).expect("sent");
    sim.send_data(alice, b"lossy", None, false, &["bob"]).expect("sent");
    sim.run_for(Duration::from_millis(50));

    let packet = |payload: &[u8], topic: Option<&str>, reliable| {
        ("alice".to_owned(), topic.map(str::to_owned), payload.to_vec(), reliable)
    };
    assert_eq!(sim.client(bob).data(), [packet(b"to all", Some("chat"), true), packet(b"lossy", None, false)]);
    assert_eq!(sim.client(carol).data(), [packet(b"to all", Some("chat"), true), packet(b"to carol", None, true)]);
    assert!(sim.client(alice).data().is_empty(), "nobody hears their own data");
    let agent_data: Vec<_> = sim
        .local_events(agent)
        .into_iter()
        .filter_map(|e| match e {
            RoomEvent::Data(data) => Some((data.from_identity.clone(), data.payload.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(agent_data, [("alice".to_owned(), Bytes::from_static(b"to all"))]);

    // The agent speaks on the data channel too; its destinations are honoured the same way.
    let reply = sim.local(
        agent,
        LocalCommand::SendData {
            payload: Bytes::from_static(b"hello bob"),
            topic: Some("lk.chat".to_owned()),
            reliable: true,
            destinations: vec!["bob".to_owned()],
        },
    );
    assert!(matches!(reply, LocalReply::Done));
    sim.run_for(Duration::from_millis(50));
    assert_eq!(
        sim.client(bob).data().last(),
        Some(&("agent".to_owned(), Some("lk.chat".to_owned()), b"hello bob".to_vec(), true))
    );
    assert_eq!(sim.client(carol).data().len(), 2, "carol was not a destination");
}

#[test]
fn data_without_the_grant_is_dropped_and_oversized_data_is_refused_at_the_source() {
    let mut sim = sim();
    let quiet = Permissions { can_publish_data: false, ..Permissions::ALL };
    let mute = sim.join_ready("mute", JoinOptions { permissions: quiet, ..JoinOptions::default() });
    let bob = sim.join_ready("bob", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    sim.send_data(mute, b"not allowed", None, true, &[]).expect("the client sends; the room drops");
    sim.run_for(Duration::from_millis(50));
    assert!(sim.client(bob).data().is_empty());

    let reply = sim.local(
        agent,
        LocalCommand::SendData {
            payload: Bytes::from(vec![0u8; 70_000]),
            topic: None,
            reliable: true,
            destinations: Vec::new(),
        },
    );
    assert!(matches!(reply, LocalReply::Failed(LocalError::PacketTooLarge(_))), "{reply:?}");
    assert!(matches!(sim.send_data(bob, &[0u8; 70_000], None, true, &[]), Err(ClientError::PacketTooLarge(70_000))));
}

#[test]
fn a_slow_subscriber_gets_a_bounded_backlog_in_order_and_does_not_hold_up_the_others() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let fast = sim.join_ready("fast", JoinOptions::default());
    let slow = sim.join_ready("slow", JoinOptions::default());
    sim.client_mut(slow).hold_inbound = true;

    // 1.8 MB of reliable data in 40 KB packets, each numbered (inside Alice's data budget of a
    // 2 MiB burst; past the slow one's 1 MiB backlog); Alice's own SCTP buffer paces her.
    let packets = 45u32;
    let mut sent = 0;
    while sent < packets {
        let mut payload = sent.to_be_bytes().to_vec();
        payload.resize(40_000, 0xAB);
        match sim.send_data(alice, &payload, None, true, &[]) {
            Ok(()) => sent += 1,
            Err(ClientError::BufferFull) => {}
            Err(error) => panic!("send failed: {error}"),
        }
        sim.run_for(Duration::from_millis(5));
        assert!(
            sim.room.reliable_backlog_bytes(slow) <= MAX_RELIABLE_BACKLOG_BYTES,
            "the room's backlog for the slow subscriber stays bounded"
        );
    }
    sim.run_until(Duration::from_secs(10), |sim| sim.client(fast).data().len() == packets as usize);
    let numbers = |sim: &Sim, key| -> Vec<u32> {
        sim.client(key)
            .data()
            .iter()
            .map(|(_, _, payload, _)| u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]))
            .collect()
    };
    assert_eq!(numbers(&sim, fast), (0..packets).collect::<Vec<_>>(), "the fast subscriber got everything, in order");
    assert!(sim.client(slow).data().is_empty());

    sim.release(slow);
    sim.run_for(Duration::from_secs(10));
    let got = numbers(&sim, slow);
    assert!(!got.is_empty() && got.len() < packets as usize, "the slow one lost the overflow: {} packets", got.len());
    assert!(got.windows(2).all(|pair| pair[0] < pair[1]), "what it got is in order, without duplicates: {got:?}");
    assert_eq!(got[0], 0, "the oldest data is kept, the overflow dropped");
}

// ---------------------------------------------------------------------------------------------
// Attributes

#[test]
fn attribute_updates_are_answered_reach_everyone_with_a_newer_version_and_need_the_grant() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let no_grant = Permissions { can_update_metadata: false, ..Permissions::ALL };
    let bob = sim.join_ready("bob", JoinOptions { permissions: no_grant, ..JoinOptions::default() });
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    sim.run_for(Duration::from_millis(50));
    let version = sim.client(bob).latest_info("alice").map(|info| info.version).expect("bob knows alice");

    sim.signal(alice, metadata_request(7, &[("mood", "happy")]));
    sim.run_for(Duration::from_millis(20));
    let answers = sim.client(alice).request_responses();
    assert_eq!(answers.len(), 1);
    assert_eq!((answers[0].request_id, answers[0].reason), (7, proto::request_response::Reason::Ok as i32));
    let seen = sim.client(bob).latest_info("alice").expect("an update");
    assert_eq!(seen.attributes.get("mood").map(String::as_str), Some("happy"));
    assert!(seen.version > version);
    assert_eq!(
        sim.client(alice).latest_info("alice").and_then(|info| info.attributes.get("mood").cloned()).as_deref(),
        Some("happy"),
        "the sender sees its own update (clients resolve setAttributes by it)"
    );
    let changed = sim.local_events(agent).into_iter().find_map(|e| match e {
        RoomEvent::ParticipantUpdated { participant, .. } if participant.identity == "alice" => {
            participant.attributes.get("mood").cloned()
        }
        _ => None,
    });
    assert_eq!(changed.as_deref(), Some("happy"));

    // An empty value deletes; an unchanged value is answered but not broadcast.
    sim.signal(alice, metadata_request(8, &[("mood", "")]));
    sim.run_for(Duration::from_millis(20));
    assert!(sim.client(bob).latest_info("alice").expect("update").attributes.is_empty());
    let updates = sim.client(bob).signals.len();
    sim.signal(alice, metadata_request(9, &[("mood", "")]));
    sim.run_for(Duration::from_millis(20));
    assert_eq!(sim.client(bob).signals.len(), updates, "no change, no update");

    // Without the grant: refused, nobody hears of it.
    sim.signal(bob, metadata_request(10, &[("mood", "sneaky")]));
    // Over the size limit: refused whole.
    sim.signal(alice, metadata_request(11, &[("big", &"x".repeat(70_000))]));
    sim.run_for(Duration::from_millis(20));
    let refused = sim.client(bob).request_responses();
    assert_eq!(refused.last().map(|r| r.reason), Some(proto::request_response::Reason::NotAllowed as i32));
    let too_big = sim.client(alice).request_responses();
    assert_eq!(too_big.last().map(|r| r.reason), Some(proto::request_response::Reason::LimitExceeded as i32));
    assert!(sim.client(alice).latest_info("bob").is_none_or(|info| info.attributes.is_empty()));

    // The agent's attributes reach the clients.
    let attributes = BTreeMap::from([("lk.agent.state".to_owned(), "listening".to_owned())]);
    assert!(matches!(sim.local(agent, LocalCommand::SetAttributes { attributes }), LocalReply::Done));
    sim.run_for(Duration::from_millis(20));
    let agent_info = sim.client(alice).latest_info("agent").expect("the agent's update");
    assert_eq!(agent_info.attributes.get("lk.agent.state").map(String::as_str), Some("listening"));
    assert_eq!(agent_info.kind, proto::participant_info::Kind::Agent as i32);
}

// ---------------------------------------------------------------------------------------------
// Leaving

#[test]
fn a_second_join_with_the_same_identity_replaces_the_first_with_the_reason() {
    let mut sim = sim();
    let first = sim.join_ready("alice", JoinOptions::default());
    let bob = sim.join_ready("bob", JoinOptions::default());
    let second = sim.join_ready("alice", JoinOptions::default());
    assert_eq!(sim.client(first).left(), Some(proto::DisconnectReason::DuplicateIdentity));
    assert_eq!(sim.client(first).closed, Some(None), "a leave after being connected is an orderly end");
    let first_sid = sim.client(first).info.clone().expect("joined").participant_sid;
    let gone = sim.client(bob).events.iter().find_map(|e| match e {
        ClientEvent::ParticipantUpdate(info)
            if info.sid == first_sid && state(info) == proto::participant_info::State::Disconnected =>
        {
            Some(reason(info))
        }
        _ => None,
    });
    assert_eq!(gone, Some(proto::DisconnectReason::DuplicateIdentity));
    assert!(sim.client(second).closed.is_none(), "the new one stays");
}

#[test]
fn removal_room_close_and_a_broken_offer_each_name_their_reason() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let bob = sim.join_ready("bob", JoinOptions::default());
    let carol = sim.join_ready("carol", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);

    assert!(matches!(
        sim.local(agent, LocalCommand::RemoveParticipant { identity: "bob".to_owned() }),
        LocalReply::Removed(true)
    ));
    assert!(matches!(
        sim.local(agent, LocalCommand::RemoveParticipant { identity: "nobody".to_owned() }),
        LocalReply::Removed(false)
    ));
    sim.run_for(Duration::from_millis(20));
    assert_eq!(sim.client(bob).left(), Some(proto::DisconnectReason::ParticipantRemoved));

    sim.signal(
        carol,
        proto::signal_request::Message::Offer(proto::SessionDescription {
            r#type: "offer".to_owned(),
            sdp: "this is not SDP".to_owned(),
            id: 99,
            mid_to_track_id: Default::default(),
        }),
    );
    sim.run_for(Duration::from_millis(20));
    assert_eq!(sim.client(carol).left(), Some(proto::DisconnectReason::StateMismatch));
    let agent_saw: Vec<(String, LeaveReason)> = sim
        .local_events(agent)
        .into_iter()
        .filter_map(|e| match e {
            RoomEvent::ParticipantLeft { identity, reason, .. } => Some((identity.clone(), *reason)),
            _ => None,
        })
        .collect();
    assert_eq!(
        agent_saw,
        [("bob".to_owned(), LeaveReason::ParticipantRemoved), ("carol".to_owned(), LeaveReason::StateMismatch)]
    );

    sim.close_room(LeaveReason::RoomDeleted);
    sim.run_for(Duration::from_millis(20));
    assert_eq!(sim.client(alice).left(), Some(proto::DisconnectReason::RoomDeleted));
    assert!(
        sim.local_events(agent)
            .iter()
            .any(|e| matches!(e, RoomEvent::Disconnected { reason: LeaveReason::RoomDeleted }))
    );
    assert!(sim.room.is_empty());
}

#[test]
fn a_client_whose_path_dies_is_removed_for_media_failure_within_the_timeouts() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let bob = sim.join_ready("bob", JoinOptions::default());
    let cut_at = sim.elapsed();
    sim.client_mut(alice).unplugged = true;
    sim.run_until(Duration::from_secs(60), |sim| {
        sim.client(bob)
            .latest_info("alice")
            .is_some_and(|info| state(&info) == proto::participant_info::State::Disconnected)
    });
    let gone = sim.client(bob).latest_info("alice").expect("alice's last update");
    assert_eq!(reason(&gone), proto::DisconnectReason::MediaFailure);
    let took = sim.elapsed() - cut_at;
    assert!(took > Duration::from_secs(2) && took <= Duration::from_secs(31), "removed after {took:?}");
}

/// Frames an in-process participant has received from this track.
fn local_frames(sim: &Sim, key: Key, track: &str) -> usize {
    sim.local_events(key)
        .into_iter()
        .filter(|e| matches!(e, RoomEvent::AudioFrame(frame) if &*frame.track_sid == track))
        .count()
}

#[test]
fn a_client_whose_address_changes_keeps_hearing_and_being_heard_after_its_next_check() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    let mic = sim.publish_ready(alice);
    let LocalReply::TrackPublished { track_sid: voice, .. } =
        sim.local(agent, LocalCommand::PublishAudio { name: "voice".to_owned() })
    else {
        panic!("the agent's track is published");
    };
    sim.run_until(Duration::from_secs(2), |sim| sim.client(alice).has_subscribed_track());
    // The agent talks for 8 s and Alice for as long, each at 50 frames a second.
    let pcm: Vec<i16> = (0..48_000 * 8).map(|n| ((n % 96) as i16 - 48) * 200).collect();
    assert!(matches!(sim.local(agent, LocalCommand::PushAudio { track_sid: voice, pcm }), LocalReply::Done));
    stream_audio(&mut sim, alice, 100);
    let (heard_before, agent_before) = (sim.client(alice).audio().len(), local_frames(&sim, agent, &mic));
    assert!(heard_before >= 95 && agent_before >= 95, "{heard_before} and {agent_before} frames of 100");

    // Her NAT maps her to a new address mid-conversation (ICE is not restarted). Both ways
    // are lost until her next nominating check (str0m's client sends one every 3 s at most,
    // libwebrtc every 2.5 s): the demultiplexer learns addresses from checks, as LiveKit's does,
    // and the room then sends to where that check came from. str0m's own rule would keep
    // sending to the old pair until it had been silent for 15 s.
    sim.rebind(alice);
    stream_audio(&mut sim, alice, 150);
    let (switched, agent_switched) = (sim.client(alice).audio().len(), local_frames(&sim, agent, &mic));
    assert!(switched > heard_before && agent_switched > agent_before, "both ways again within 3 s");
    stream_audio(&mut sim, alice, 100);
    let heard = sim.client(alice).audio().len() - switched;
    let agent_heard = local_frames(&sim, agent, &mic) - agent_switched;
    assert!(heard >= 98, "alice heard {heard} of the agent's next 100 frames");
    assert!(agent_heard >= 98, "the agent heard {agent_heard} of alice's next 100 frames");
}

#[test]
fn a_client_that_stops_hearing_the_server_gives_up_at_the_ping_timeout() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let joined_at = sim.elapsed();
    // Signal messages stop (pongs included) while media flows: after ping_timeout (15 s since
    // the last message she heard, which came just before she was ready) she closes.
    sim.signal_latency = Duration::from_secs(3600);
    sim.run_until(Duration::from_secs(30), |sim| sim.client(alice).closed.is_some());
    assert_eq!(
        sim.client(alice).closed,
        Some(Some(ClientError::Timeout("the server (ping timeout)"))),
        "closed by the ping timeout"
    );
    let took = sim.elapsed() - joined_at;
    assert!(took >= Duration::from_secs(14) && took <= Duration::from_secs(15), "{took:?}");
}

// ---------------------------------------------------------------------------------------------
// The empty room

#[test]
fn an_empty_room_expires_after_its_timeout_and_a_join_in_between_restarts_the_clock() {
    let mut sim = sim();
    sim.run_for(EMPTY_TIMEOUT - Duration::from_secs(1));
    assert!(!sim.expired, "not before the timeout");
    let alice = sim.join_ready("alice", JoinOptions::default());
    sim.run_for(Duration::from_secs(10));
    assert!(!sim.expired, "an occupied room does not expire");
    sim.leave(alice);
    sim.run_for(Duration::from_millis(10));
    assert!(sim.room.is_empty());
    let emptied = sim.elapsed();
    sim.run_until(EMPTY_TIMEOUT + Duration::from_secs(1), |sim| sim.expired);
    let after = sim.elapsed() - emptied;
    assert!(after >= EMPTY_TIMEOUT - Duration::from_millis(20) && after <= EMPTY_TIMEOUT, "expired after {after:?}");
}

// ---------------------------------------------------------------------------------------------
// The server API (RoomService) acting on the room

#[test]
fn the_server_api_sends_data_as_nobody_takes_a_grant_away_and_removes_a_participant() {
    use crate::core::{AdminAnswer, AdminCommand, AdminError};
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let bob = sim.join_ready("bob", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);

    // Data from the server: no sender, only to the destinations named.
    #[allow(deprecated)]
    let packet = proto::DataPacket {
        kind: proto::data_packet::Kind::Reliable as i32,
        participant_identity: "spoofed".to_owned(),
        destination_identities: vec!["bob".to_owned(), "agent".to_owned()],
        value: Some(proto::data_packet::Value::User(proto::UserPacket {
            payload: b"from the server".to_vec(),
            topic: Some("ops".to_owned()),
            ..Default::default()
        })),
        ..Default::default()
    };
    assert_eq!(sim.admin(AdminCommand::SendData { packet, reliable: true }), Ok(AdminAnswer::Done));
    sim.run_for(Duration::from_millis(50));
    assert_eq!(sim.client(bob).data(), [(String::new(), Some("ops".to_owned()), b"from the server".to_vec(), true)]);
    assert!(sim.client(alice).data().is_empty(), "alice was not a destination");
    let agent_heard = sim.local_events(agent).into_iter().any(
        |e| matches!(e, RoomEvent::Data(d) if d.from_identity.is_empty() && d.payload.as_ref() == b"from the server"),
    );
    assert!(agent_heard, "the in-process agent gets it too");

    // Taking canPublishData away: alice's next packet reaches nobody; everyone sees the grant.
    let mut permission = sim.client(bob).latest_info("alice").and_then(|info| info.permission).expect("a permission");
    permission.can_publish_data = false;
    let answer = sim.admin(AdminCommand::UpdateParticipant {
        identity: "alice".to_owned(),
        name: String::new(),
        metadata: String::new(),
        attributes: BTreeMap::new(),
        permission: Some(permission),
    });
    let Ok(AdminAnswer::Participant(info)) = answer else { panic!("{answer:?}") };
    assert!(!info.permission.expect("permission").can_publish_data);
    sim.run_for(Duration::from_millis(50));
    let seen = sim.client(bob).latest_info("alice").and_then(|info| info.permission).expect("bob sees alice");
    assert!(!seen.can_publish_data, "the update reached the others");
    sim.send_data(alice, b"still here?", None, true, &[]).expect("the client sends");
    sim.run_for(Duration::from_millis(50));
    assert_eq!(sim.client(bob).data().len(), 1, "dropped at the room");

    // Too much metadata is refused whole; an unknown identity is not found.
    let huge = "m".repeat(crate::core::MAX_PARTICIPANT_STATE_BYTES + 1);
    let update = |identity: &str, metadata: String| AdminCommand::UpdateParticipant {
        identity: identity.to_owned(),
        name: String::new(),
        metadata,
        attributes: BTreeMap::new(),
        permission: None,
    };
    assert_eq!(sim.admin(update("alice", huge)), Err(AdminError::TooLarge));
    assert_eq!(sim.admin(update("nobody", "m".to_owned())), Err(AdminError::NoParticipant("nobody".to_owned())));

    // Removed: alice is told why and leaves; bob sees her go.
    assert_eq!(sim.admin(AdminCommand::RemoveParticipant { identity: "alice".to_owned() }), Ok(AdminAnswer::Done));
    sim.run_for(Duration::from_millis(50));
    assert_eq!(sim.client(alice).left(), Some(proto::DisconnectReason::ParticipantRemoved));
    assert_eq!(
        sim.admin(AdminCommand::RemoveParticipant { identity: "alice".to_owned() }),
        Err(AdminError::NoParticipant("alice".to_owned()))
    );
}

// ---------------------------------------------------------------------------------------------
// Webhooks

/// `(event, participant identity, track sid)` of each webhook event so far.
fn webhook_story(sim: &Sim) -> Vec<(String, String, String)> {
    sim.webhooks
        .iter()
        .map(|event| {
            let identity = event.participant.as_ref().map(|p| p.identity.clone()).unwrap_or_default();
            let track = event.track.as_ref().map(|t| t.sid.clone()).unwrap_or_default();
            (event.event.clone(), identity, track)
        })
        .collect()
}

#[test]
fn webhook_events_follow_the_room_in_livekits_order_and_shape() {
    use crate::core::{AdminAnswer, AdminCommand, events};
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let alice_track = sim.publish_ready(alice);
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    let LocalReply::TrackPublished { track_sid: agent_track, .. } =
        sim.local(agent, LocalCommand::PublishAudio { name: "voice".to_owned() })
    else {
        panic!("the agent publishes");
    };
    // Removed before its media came up: it never joined as LiveKit counts it.
    sim.join("bob", JoinOptions::default());
    assert_eq!(sim.admin(AdminCommand::RemoveParticipant { identity: "bob".to_owned() }), Ok(AdminAnswer::Done));
    sim.leave(alice);
    sim.run_for(Duration::from_millis(50));
    sim.close_room(LeaveReason::RoomDeleted);
    // A room ends once, however many ways it is told to.
    sim.close_room(LeaveReason::ServerShutdown);

    let story = |event: &str, identity: &str, track: &str| (event.to_owned(), identity.to_owned(), track.to_owned());
    assert_eq!(
        webhook_story(&sim),
        [
            story(events::ROOM_STARTED, "", ""),
            story(events::PARTICIPANT_JOINED, "alice", ""),
            story(events::TRACK_PUBLISHED, "alice", &alice_track),
            story(events::PARTICIPANT_JOINED, "agent", ""),
            story(events::TRACK_PUBLISHED, "agent", &agent_track),
            story(events::PARTICIPANT_CONNECTION_ABORTED, "bob", ""),
            story(events::TRACK_UNPUBLISHED, "alice", &alice_track),
            story(events::PARTICIPANT_LEFT, "alice", ""),
            story(events::TRACK_UNPUBLISHED, "agent", &agent_track),
            story(events::PARTICIPANT_LEFT, "agent", ""),
            story(events::ROOM_FINISHED, "", ""),
        ]
    );
    for event in &sim.webhooks {
        let room = event.room.as_ref().expect("every event names its room");
        assert_eq!(room.name, "test");
        assert!(room.sid.starts_with("RM_"), "{room:?}");
        // The actor stamps these as it hands the event over.
        assert!(event.id.is_empty() && event.created_at == 0);
    }
    let joined = &sim.webhooks[1];
    let alice_info = joined.participant.as_ref().expect("alice");
    assert_eq!(state(alice_info), proto::participant_info::State::Active);
    assert!(alice_info.sid.starts_with("PA_") && alice_info.permission.is_some());
    // Track events carry the participant's sid and identity and the room's sid and name only.
    let published = &sim.webhooks[2];
    assert_eq!(
        published.participant.as_ref().map(|p| (p.sid.as_str(), p.name.as_str())),
        Some((alice_info.sid.as_str(), ""))
    );
    assert_eq!(published.room.as_ref().map(|room| room.creation_time), Some(0));
    assert_eq!(published.track.as_ref().map(|t| t.mime_type.as_str()), Some("audio/opus"));
    let left = sim.webhooks[7].participant.as_ref().expect("alice");
    assert_eq!(state(left), proto::participant_info::State::Disconnected);
    assert_eq!(reason(left), proto::DisconnectReason::ClientInitiated);
    let finished = sim.webhooks.last().expect("room_finished");
    assert_eq!(finished.room_end_reason, proto::RoomEndReason::RoomEndApiDelete as i32);
    assert_eq!(finished.room.as_ref().map(|room| room.num_participants), Some(0));
}

#[test]
fn a_room_that_stays_empty_finishes_for_its_idle_timeout() {
    use crate::core::events;
    let mut sim = Sim::new(7, Duration::from_secs(2));
    let alice = sim.join_ready("alice", JoinOptions::default());
    sim.leave(alice);
    sim.run_for(Duration::from_secs(3));
    assert!(sim.expired);
    let finished = sim.webhooks.last().expect("room_finished");
    assert_eq!(finished.event, events::ROOM_FINISHED);
    assert_eq!(finished.room_end_reason, proto::RoomEndReason::RoomEndIdleTimeout as i32);
    assert_eq!(sim.webhooks.iter().filter(|event| event.event == events::ROOM_FINISHED).count(), 1);
}

#[test]
fn max_participants_counts_everyone_but_agents_and_a_rejoin_takes_no_new_place() {
    use crate::core::{JoinRequest, RoomOptions};
    let mut sim = sim();
    sim.room.apply_options(&RoomOptions { max_participants: 2, ..RoomOptions::default() });
    let request = |identity: &str, kind: ParticipantKind| JoinRequest {
        identity: identity.to_owned(),
        name: String::new(),
        metadata: String::new(),
        attributes: BTreeMap::new(),
        kind,
        permissions: Permissions::ALL,
        auto_subscribe: true,
        client_protocol: 1,
    };
    sim.join_local("agent", ParticipantKind::Agent);
    sim.join_ready("alice", JoinOptions::default());
    assert!(!sim.room.is_full_for(&request("bob", ParticipantKind::Standard)), "the agent takes no place");
    sim.join_ready("bob", JoinOptions::default());
    assert!(sim.room.is_full_for(&request("carol", ParticipantKind::Standard)));
    assert!(sim.room.is_full_for(&request("phone", ParticipantKind::Sip)), "a phone counts");
    assert!(!sim.room.is_full_for(&request("alice", ParticipantKind::Standard)), "a rejoin replaces");
    assert!(!sim.room.is_full_for(&request("helper", ParticipantKind::Agent)), "agents are never refused");
}

#[test]
fn a_room_waits_its_empty_timeout_for_a_first_join_and_its_departure_timeout_after_the_last_leave() {
    use crate::core::RoomOptions;
    let options = RoomOptions {
        empty_timeout: Some(Duration::from_secs(5)),
        departure_timeout: Some(Duration::from_secs(1)),
        ..RoomOptions::default()
    };
    let mut never_joined = sim();
    never_joined.room.apply_options(&options);
    never_joined.run_for(Duration::from_secs(4));
    assert!(!never_joined.expired, "nobody came yet: the empty timeout holds");
    never_joined.run_for(Duration::from_secs(2));
    assert!(never_joined.expired);

    let mut left = sim();
    left.room.apply_options(&options);
    let alice = left.join_ready("alice", JoinOptions::default());
    left.leave(alice);
    left.run_for(Duration::from_millis(100));
    assert!(!left.expired);
    left.run_for(Duration::from_millis(1200));
    assert!(left.expired, "everyone left: the departure timeout");
    assert_eq!(left.room.describe().room.departure_timeout, 1);
}

/// What an agent says last before its room closes (a session's `session-ended`).
fn last_words() -> LocalCommand {
    LocalCommand::SendData {
        payload: Bytes::from_static(b"session-ended"),
        topic: None,
        reliable: true,
        destinations: Vec::new(),
    }
}

#[test]
fn a_closing_room_waits_for_its_last_reliable_words_to_be_delivered() {
    let linger = Duration::from_secs(3);
    // A path that holds the agent's last message (the client has not acknowledged it): the room
    // stays until it is through, then closes at once.
    let mut room = sim();
    let alice = room.join_ready("alice", JoinOptions::default());
    let agent = room.join_local("agent", ParticipantKind::Agent);
    room.run_for(Duration::from_millis(50));
    room.client_mut(alice).hold_inbound = true;
    assert!(matches!(room.local(agent, last_words()), LocalReply::Done));
    room.close_room_after_delivery(LeaveReason::RoomDeleted, linger);
    room.run_for(Duration::from_secs(1));
    assert!(!room.expired && room.client(alice).left().is_none(), "the room waits for the acknowledgement");
    room.release(alice);
    room.run_until(Duration::from_millis(500), |sim| sim.expired);
    room.run_for(Duration::from_millis(20));
    assert_eq!(room.client(alice).data().last().map(|d| d.2.clone()), Some(b"session-ended".to_vec()));
    assert_eq!(room.client(alice).left(), Some(proto::DisconnectReason::RoomDeleted));

    // A client that never acknowledges: the room closes when the linger is over.
    let mut room = sim();
    let bob = room.join_ready("bob", JoinOptions::default());
    let agent = room.join_local("agent", ParticipantKind::Agent);
    room.run_for(Duration::from_millis(50));
    room.client_mut(bob).unplugged = true;
    assert!(matches!(room.local(agent, last_words()), LocalReply::Done));
    let closing = room.elapsed();
    room.close_room_after_delivery(LeaveReason::RoomDeleted, linger);
    room.run_until(Duration::from_secs(4), |sim| sim.expired);
    assert!(room.elapsed() - closing >= linger - Duration::from_millis(1), "closed at the linger's end");

    // Nothing in flight: the room closes at once.
    let mut room = sim();
    let carol = room.join_ready("carol", JoinOptions::default());
    room.run_for(Duration::from_millis(200));
    room.close_room_after_delivery(LeaveReason::RoomDeleted, linger);
    assert!(room.expired, "closed at once");
    room.run_for(Duration::from_millis(20));
    assert_eq!(room.client(carol).left(), Some(proto::DisconnectReason::RoomDeleted));
}

#[test]
fn a_lost_packet_of_a_users_voice_delays_the_rest_by_the_reorder_wait_only() {
    let mut sim = sim();
    let alice = sim.join_ready("alice", JoinOptions::default());
    let agent = sim.join_local("agent", ParticipantKind::Agent);
    let mic = sim.publish_ready(alice);
    stream_audio(&mut sim, alice, 50);
    let before = local_frames(&sim, agent, &mic);
    assert!(before >= 48, "{before} frames of 50 before the loss");

    // Frame 50 is lost on the wire; 51 onwards arrive on time, one every 20 ms.
    sim.client_mut(alice).lose_rtp = 1;
    sim.send_audio(alice, 960 * 50, &FRAME);
    sim.run_for(Duration::from_millis(20));
    assert_eq!(sim.client(alice).lose_rtp, 0, "frame 50 was lost");
    let mut waited = None;
    for k in 51..100u64 {
        sim.send_audio(alice, 960 * k, &FRAME);
        sim.run_for(Duration::from_millis(20));
        if waited.is_none() && local_frames(&sim, agent, &mic) > before {
            waited = Some(Duration::from_millis(20 * (k - 50)));
        }
    }
    // str0m's default held them until 15 packets had queued (300 ms behind the hole).
    let waited = waited.expect("the frames after the hole were delivered");
    eprintln!("the frame after a lost one reached the agent {waited:?} after it was sent (a frame's steps)");
    assert!(
        waited <= crate::AUDIO_REORDER_WAIT + Duration::from_millis(40),
        "the frames behind the hole waited {waited:?}"
    );
    let after = local_frames(&sim, agent, &mic) - before;
    assert!(after >= 47, "{after} of the 49 frames after the hole arrived");
}
