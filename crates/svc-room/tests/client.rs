//! The str0m-based [`RoomClient`] against the embedded room server, over real sockets on
//! 127.0.0.1: the IO shells of both (UDP, WebSocket, the handle, the in-process participant's
//! channel) carrying real audio end to end. Audio is checked by decoding it and correlating it
//! with what was sent, not by counting packets; every wait is bounded and names what it waited
//! for. Routing, renegotiation, data and leave rules are tested in virtual time in `src/sim`.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use livekit_protocol as proto;
use svc_audio::analysis::{best_correlation, speech_like_signal};
use svc_audio::{FRAME_SAMPLES, OpusEncoder, TrackDecoder};
use svc_room::client::{ClientError, ClientEvent, ClientOptions, RoomClient};
use svc_room::{
    InboundDrops, LeaveReason, LocalJoinOptions, LocalParticipant, ParticipantKind, RoomCredentials, RoomEvent,
    RoomServer,
};

mod support;

const KEY: &str = "devkey";
const SECRET: &str = "secret_secret_secret_secret_secret_";
/// Every single wait in these tests is bounded by this (or less).
const WAIT: Duration = Duration::from_secs(10);
/// Reference audio: 2 s of the speech-like test signal.
const REFERENCE_SAMPLES: usize = 96_000;
/// Correlation a good audio path reaches (the Python SDK test gets ~0.96).
const MIN_CORRELATION: f64 = 0.9;

struct Harness {
    room: RoomServer,
    url: String,
    credentials: RoomCredentials,
}

async fn start() -> Harness {
    let started = support::start_room(KEY, SECRET, Duration::from_secs(2)).await;
    Harness { url: started.url(), room: started.room, credentials: started.credentials }
}

impl Harness {
    async fn client(&self, room: &str, identity: &str) -> RoomClient {
        let expires = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs())
            .expect("seconds")
            + 600;
        let token = self.credentials.participant_token(room, identity, Some(identity), expires).expect("mint");
        RoomClient::connect(&self.url, &token, ClientOptions { connect_timeout: WAIT, ..Default::default() })
            .await
            .unwrap_or_else(|error| panic!("client {identity:?} could not connect: {error}"))
    }

    async fn agent(&self, room: &str) -> LocalParticipant {
        let options = LocalJoinOptions {
            identity: "agent".into(),
            name: "Agent".into(),
            kind: ParticipantKind::Agent,
            metadata: String::new(),
            attributes: Default::default(),
        };
        self.room.join_local(room, options).await.expect("in-process join")
    }
}

/// Awaits `future` for at most `limit`, failing the test with `what` otherwise.
async fn within<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// Reads client events until `pick` returns `Some`, failing with `what` on timeout or close.
async fn client_wait<T>(client: &mut RoomClient, what: &str, mut pick: impl FnMut(&ClientEvent) -> Option<T>) -> T {
    within(WAIT, what, async {
        loop {
            match client.next_event().await {
                Some(event) => {
                    if let Some(found) = pick(&event) {
                        return found;
                    }
                }
                None => panic!("client closed while waiting for {what}"),
            }
        }
    })
    .await
}

/// Reads in-process events until `pick` returns `Some`.
async fn agent_wait<T>(agent: &mut LocalParticipant, what: &str, mut pick: impl FnMut(&RoomEvent) -> Option<T>) -> T {
    within(WAIT, what, async {
        loop {
            match agent.next_event().await {
                Some(event) => {
                    if let Some(found) = pick(&event) {
                        return found;
                    }
                }
                None => panic!("in-process participant closed while waiting for {what}"),
            }
        }
    })
    .await
}

fn encode_all(encoder: &mut OpusEncoder, pcm: &[i16]) -> Vec<Vec<u8>> {
    pcm.chunks_exact(FRAME_SAMPLES).map(|frame| encoder.encode_frame(frame).expect("encode")).collect()
}

/// Decodes frames (sorted by RTP timestamp) into PCM.
fn decode_all(mut frames: Vec<(u64, Vec<u8>)>) -> Vec<i16> {
    frames.sort_by_key(|(rtp, _)| *rtp);
    let mut decoder = TrackDecoder::new().expect("decoder");
    let mut pcm = Vec::new();
    for (rtp, opus) in frames {
        decoder.push(rtp, &opus, &mut pcm).expect("decode");
    }
    pcm
}

/// Asserts that `received` carries all of `reference`, recognisably.
fn assert_carries(path: &str, reference: &[i16], received: &[i16]) {
    let correlation = best_correlation(reference, received, 3 * 48_000);
    eprintln!("{path}: correlation {:.3} at a lag of {} samples", correlation.coefficient, correlation.lag_samples);
    assert!(
        correlation.coefficient >= MIN_CORRELATION,
        "{path}: received audio correlates {:.3} with what was sent (need ≥ {MIN_CORRELATION}); {correlation:?}, {} samples received",
        correlation.coefficient,
        received.len()
    );
    assert!(
        correlation.overlap_samples * 100 >= reference.len() * 95,
        "{path}: only {} of {} reference samples arrived",
        correlation.overlap_samples,
        reference.len()
    );
}

/// Frames collected until `expected` frames arrived and the stream then stayed quiet for
/// 300 ms (or `WAIT` ran out, which the caller's correlation check then reports).
struct Collected {
    frames: Vec<(u64, Vec<u8>)>,
}

const QUIET: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_flows_between_clients_and_the_in_process_participant_both_ways() {
    let harness = start().await;
    let mut agent = harness.agent("audio").await;
    let mut alice = harness.client("audio", "alice").await;
    let mut bob = harness.client("audio", "bob").await;
    assert_eq!(alice.info().identity, "alice");
    assert!(alice.info().room_sid.starts_with("RM_"), "{:?}", alice.info());
    assert!(
        bob.info().other_participants.iter().any(|p| p.identity == "alice")
            && bob.info().other_participants.iter().any(|p| p.identity == "agent"),
        "bob's join response lists alice and the agent: {:?}",
        bob.info().other_participants.iter().map(|p| &p.identity).collect::<Vec<_>>()
    );

    // Alice publishes; bob and the agent subscribe.
    let alice_track = within(WAIT, "alice's publication", alice.publish_audio("microphone")).await.expect("publish");
    assert!(alice_track.starts_with("TR_"), "{alice_track}");
    let subscribed = client_wait(&mut bob, "bob's subscription to alice's track", |event| match event {
        ClientEvent::TrackSubscribed { participant_identity, track_sid, .. } => {
            Some((participant_identity.clone(), track_sid.clone()))
        }
        _ => None,
    })
    .await;
    assert_eq!(subscribed, ("alice".to_owned(), alice_track.clone()));
    agent_wait(&mut agent, "the agent to see alice's track", |event| match event {
        RoomEvent::TrackPublished { participant_identity, track } if participant_identity == "alice" => {
            assert_eq!(track.sid, alice_track);
            Some(())
        }
        _ => None,
    })
    .await;

    // Bob and the agent collect alice's frames on their own tasks while she sends.
    let bob_primed = Arc::new(AtomicBool::new(false));
    let agent_primed = Arc::new(AtomicBool::new(false));
    let bob_collector = {
        let primed = bob_primed.clone();
        let track = alice_track.clone();
        tokio::spawn(async move {
            let mut frames = Vec::new();
            let mut last = Instant::now();
            let deadline = Instant::now() + 3 * WAIT;
            while Instant::now() < deadline {
                match tokio::time::timeout(QUIET, bob.next_event()).await {
                    Ok(Some(ClientEvent::AudioFrame(frame))) if *frame.track_sid == *track => {
                        assert_eq!(&*frame.participant_identity, "alice");
                        primed.store(true, Ordering::SeqCst);
                        frames.push((frame.rtp_timestamp, frame.opus.to_vec()));
                        last = Instant::now();
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("bob closed while receiving alice's audio"),
                    Err(_) if frames.len() > REFERENCE_SAMPLES / FRAME_SAMPLES && last.elapsed() >= QUIET => break,
                    Err(_) => {}
                }
            }
            (Collected { frames }, bob)
        })
    };
    let agent_collector = {
        let primed = agent_primed.clone();
        tokio::spawn(async move {
            let mut frames = Vec::new();
            let mut last = Instant::now();
            let deadline = Instant::now() + 3 * WAIT;
            while Instant::now() < deadline {
                match tokio::time::timeout(QUIET, agent.next_event()).await {
                    Ok(Some(RoomEvent::AudioFrame(frame))) => {
                        assert_eq!(&*frame.participant_identity, "alice");
                        primed.store(true, Ordering::SeqCst);
                        frames.push((frame.rtp_timestamp, frame.opus.to_vec()));
                        last = Instant::now();
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("the agent closed while receiving alice's audio"),
                    Err(_) if frames.len() > REFERENCE_SAMPLES / FRAME_SAMPLES && last.elapsed() >= QUIET => break,
                    Err(_) => {}
                }
            }
            (Collected { frames }, agent)
        })
    };

    // Silence until both receive (the subscriber paths are negotiated by then), then the
    // reference, one 20 ms frame every 20 ms, with RTP timestamps from an arbitrary base.
    let reference = speech_like_signal(REFERENCE_SAMPLES);
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let silence = encoder.encode_frame(&[0i16; FRAME_SAMPLES]).expect("encode");
    let packets = encode_all(&mut encoder, &reference);
    let audio = alice.audio_sender();
    let base = 7_000_000u64;
    let mut rtp = base;
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    let priming_deadline = Instant::now() + WAIT;
    while !(bob_primed.load(Ordering::SeqCst) && agent_primed.load(Ordering::SeqCst)) {
        assert!(
            Instant::now() < priming_deadline,
            "no audio from alice reached {} within {WAIT:?}",
            if bob_primed.load(Ordering::SeqCst) { "the agent" } else { "bob" }
        );
        ticker.tick().await;
        audio.send_opus(rtp, silence.clone()).expect("send silence");
        rtp += FRAME_SAMPLES as u64;
    }
    let mut sent = HashSet::new();
    for packet in &packets {
        ticker.tick().await;
        audio.send_opus(rtp, packet.clone()).expect("send");
        sent.insert(rtp);
        rtp += FRAME_SAMPLES as u64;
    }
    let (bob_frames, bob) = within(4 * WAIT, "bob's collector", bob_collector).await.expect("bob's collector");
    let (agent_frames, mut agent) =
        within(4 * WAIT, "the agent's collector", agent_collector).await.expect("agent's collector");

    // RTP timestamps survive the room unchanged (the load benchmark matches frames by them).
    let agent_rtps: HashSet<u64> = agent_frames.frames.iter().map(|(rtp, _)| *rtp).collect();
    let arrived = sent.intersection(&agent_rtps).count();
    assert!(
        arrived * 100 >= sent.len() * 95,
        "the agent got {arrived} of {} reference frames with their sent RTP timestamps; first received {:?}",
        sent.len(),
        agent_frames.frames.first().map(|(rtp, _)| rtp)
    );
    assert_carries("alice → room → bob (str0m client)", &reference, &decode_all(bob_frames.frames));
    assert_carries("alice → room → agent (in-process)", &reference, &decode_all(agent_frames.frames));

    // The agent publishes PCM; alice receives it.
    let agent_track = within(WAIT, "the agent's publication", agent.publish_audio("assistant")).await.expect("publish");
    let subscribed = client_wait(&mut alice, "alice's subscription to the agent's track", |event| match event {
        ClientEvent::TrackSubscribed { participant_identity, track_sid, .. } => {
            Some((participant_identity.clone(), track_sid.clone()))
        }
        _ => None,
    })
    .await;
    assert_eq!(subscribed, ("agent".to_owned(), agent_track.sid().to_owned()));
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    let mut frames = Vec::new();
    let priming_deadline = Instant::now() + WAIT;
    while frames.is_empty() {
        assert!(Instant::now() < priming_deadline, "no audio from the agent reached alice within {WAIT:?}");
        ticker.tick().await;
        agent_track.push_pcm(vec![0; FRAME_SAMPLES]).await.expect("push silence");
        while let Some(event) = alice.try_next_event() {
            if let ClientEvent::AudioFrame(frame) = event {
                frames.push((frame.rtp_timestamp, frame.opus.to_vec()));
            }
        }
    }
    let reference = speech_like_signal(REFERENCE_SAMPLES + 48_000)[48_000..].to_vec();
    agent_track.push_pcm(reference.clone()).await.expect("push the reference");
    within(3 * WAIT, "the agent's audio at alice", async {
        let mut last = Instant::now();
        loop {
            match tokio::time::timeout(QUIET, alice.next_event()).await {
                Ok(Some(ClientEvent::AudioFrame(frame))) => {
                    assert_eq!(&*frame.track_sid, agent_track.sid());
                    frames.push((frame.rtp_timestamp, frame.opus.to_vec()));
                    last = Instant::now();
                }
                Ok(Some(_)) => {}
                Ok(None) => panic!("alice closed while receiving the agent's audio"),
                Err(_) if frames.len() > REFERENCE_SAMPLES / FRAME_SAMPLES && last.elapsed() >= QUIET => return,
                Err(_) => {}
            }
        }
    })
    .await;
    assert_carries("agent (in-process) → room → alice (str0m client)", &reference, &decode_all(frames));

    let stats = alice.stats().await.expect("stats");
    assert_eq!(stats.audio_frames_dropped, 0, "{stats:?}");
    assert!(stats.audio_frames_sent as usize >= packets.len(), "{stats:?}");

    // Bob leaves; the others see him go.
    bob.leave().await;
    agent_wait(&mut agent, "the agent to see bob leave", |event| match event {
        RoomEvent::ParticipantLeft { identity, reason, .. } if identity == "bob" => {
            assert_eq!(*reason, LeaveReason::ClientInitiated);
            Some(())
        }
        _ => None,
    })
    .await;
    client_wait(&mut alice, "alice to see bob disconnected", |event| match event {
        ClientEvent::ParticipantUpdate(info)
            if info.identity == "bob" && info.state == proto::participant_info::State::Disconnected as i32 =>
        {
            Some(())
        }
        _ => None,
    })
    .await;
    alice.leave().await;
    harness.room.shutdown().await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_is_refused_with_the_servers_reason() {
    let harness = start().await;
    let error =
        RoomClient::connect(&harness.url, "not-a-jwt", ClientOptions { connect_timeout: WAIT, ..Default::default() })
            .await
            .expect_err("a bad token must not connect");
    match error {
        ClientError::Connect(message) => assert!(message.contains("401"), "{message}"),
        other => panic!("expected a refused WebSocket upgrade, got {other:?}"),
    }
    harness.room.shutdown().await;
}

#[tokio::test]
async fn pre_encoded_frames_relayed_with_push_opus_arrive_unchanged_on_the_rtp_clock() {
    let harness = start().await;
    let agent = harness.agent("relay").await;
    let track = agent.publish_audio("relay").await.expect("publish");
    let mut alice = harness.client("relay", "alice").await;
    client_wait(&mut alice, "alice's subscription to the agent's track", |event| match event {
        ClientEvent::TrackSubscribed { track_sid, .. } if *track_sid == track.sid() => Some(()),
        _ => None,
    })
    .await;
    // The media path may still be connecting; wait until a frame gets through.
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let frames = encode_all(&mut encoder, &speech_like_signal(60 * FRAME_SAMPLES));
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    let mut received: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut sent = 0usize;
    within(3 * WAIT, "the relayed frames at alice", async {
        while received.len() < 40 {
            tokio::select! {
                _ = ticker.tick(), if sent < frames.len() => {
                    track.push_opus(frames[sent].clone().into()).await.expect("push_opus");
                    sent += 1;
                }
                event = alice.next_event() => match event {
                    Some(ClientEvent::AudioFrame(frame)) => received.push((frame.rtp_timestamp, frame.opus.to_vec())),
                    Some(_) => {}
                    None => panic!("alice closed"),
                },
            }
        }
    })
    .await;
    assert_eq!(track.played_samples(), (sent * FRAME_SAMPLES) as u64);
    // Frames arrive byte for byte, in order, whole 20 ms steps apart on the RTP clock.
    let first = frames.iter().position(|frame| *frame == received[0].1).expect("first frame is one we sent");
    for (offset, (rtp, bytes)) in received.iter().enumerate() {
        assert_eq!(*bytes, frames[first + offset], "frame {offset} changed on the way");
        if offset > 0 {
            // One frame per step, or more when the sender stalled (RTP follows the wall clock).
            let step = rtp - received[offset - 1].0;
            assert!(
                step >= FRAME_SAMPLES as u64 && step.is_multiple_of(FRAME_SAMPLES as u64),
                "RTP step {step} at {offset}"
            );
        }
    }
    assert!(track.push_opus(bytes::Bytes::new()).await.is_err(), "an empty frame is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_an_in_process_participant_does_not_read_is_dropped_and_counted() {
    let harness = start().await;
    let mut agent = harness.agent("backlog").await;
    let alice = harness.client("backlog", "alice").await;
    within(WAIT, "alice's publication", alice.publish_audio("microphone")).await.expect("publish");
    let mut encoder = OpusEncoder::new_voice().expect("encoder");
    let packet = encoder.encode_frame(&speech_like_signal(FRAME_SAMPLES)).expect("encode");
    let audio = alice.audio_sender();
    let mut rtp = 0u64;
    // Media flows once ICE and DTLS are up: one frame every 20 ms until the agent hears one.
    let mut priming = 0u64;
    within(WAIT, "alice's first frame at the agent", async {
        loop {
            audio.send_opus(rtp, packet.clone()).expect("send");
            rtp += FRAME_SAMPLES as u64;
            priming += 1;
            if let Ok(Some(RoomEvent::AudioFrame(_))) =
                tokio::time::timeout(Duration::from_millis(20), agent.next_event()).await
            {
                break;
            }
        }
    })
    .await;
    assert_eq!(agent.inbound_drops(), InboundDrops::default(), "a participant that reads loses nothing");

    // The agent stops reading while alice sends more than its queues hold (2 × 2048 frames), at
    // two frames a millisecond: far faster than real time, yet slow enough that her own connection
    // takes every frame.
    let mut sent = 0u64;
    for n in 0..6_000u64 {
        if audio.send_opus(rtp, packet.clone()).is_ok() {
            sent += 1;
        }
        rtp += FRAME_SAMPLES as u64;
        if n % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let deadline = Instant::now() + WAIT;
    while agent.inbound_drops().participant_queue == 0 {
        assert!(Instant::now() < deadline, "no drop counted after {sent} frames: {:?}", agent.inbound_drops());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What the queues held is still there to read; what they could not hold was counted.
    let mut read = 0u64;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(300), agent.next_event()).await {
        if matches!(event, RoomEvent::AudioFrame(_)) {
            read += 1;
        }
    }
    let drops = agent.inbound_drops();
    assert!(read >= 2_000, "what the participant's queue held was delivered: {read}");
    assert!(
        read + drops.participant_queue <= sent + priming,
        "read {read} + dropped {drops:?} ≤ sent {sent} + {priming}"
    );
    alice.leave().await;
    harness.room.shutdown().await;
}

#[tokio::test]
async fn rpc_requests_attributes_and_posted_data_go_the_livekit_way() {
    let harness = start().await;
    let agent = harness.agent("rpc-room").await;
    let expires =
        i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()).expect("seconds") + 600;
    let token = harness.credentials.participant_token("rpc-room", "worker", None, expires).expect("mint");
    let options = ClientOptions { connect_timeout: WAIT, rpc_methods: vec!["greet".to_owned()], ..Default::default() };
    let worker = RoomClient::connect(&harness.url, &token, options).await.expect("the worker connects");
    let (worker, mut events) = worker.split_events();

    // A registered method reaches the application, acknowledged, and its answer goes back.
    let caller = tokio::spawn(async move {
        let answer = agent.perform_rpc("worker", "greet", "hello", Duration::from_secs(5)).await;
        let refused = agent.perform_rpc("worker", "unknown", "", Duration::from_secs(5)).await;
        (agent, answer, refused)
    });
    let invocation = within(WAIT, "the rpc request", async {
        loop {
            match events.next().await {
                Some(ClientEvent::RpcRequest(invocation)) => return invocation,
                Some(_) => {}
                None => panic!("the worker closed"),
            }
        }
    })
    .await;
    assert_eq!((invocation.method.as_str(), invocation.payload.as_str()), ("greet", "hello"));
    assert_eq!(invocation.caller_identity, "agent");
    worker.try_respond_rpc("agent", &invocation.request_id, Ok("hi".to_owned())).expect("queued");
    let (mut agent, answer, refused) = within(WAIT, "the rpc answers", caller).await.expect("caller task");
    assert_eq!(answer, Ok("hi".to_owned()));
    // A method the worker does not answer is refused at once, as LiveKit's SDKs refuse it.
    assert_eq!(refused.map_err(|error| error.code), Err(svc_room::rpc_codes::UNSUPPORTED_METHOD));

    // Attributes merge into the worker's; data posted without waiting arrives.
    let attributes = [("svc.ready".to_owned(), "1".to_owned())].into_iter().collect();
    worker.try_set_attributes(attributes).expect("queued");
    agent_wait(&mut agent, "the worker's attributes", |event| match event {
        RoomEvent::ParticipantUpdated { participant, .. }
            if participant.identity == "worker"
                && participant.attributes.get("svc.ready").map(String::as_str) == Some("1") =>
        {
            Some(())
        }
        _ => None,
    })
    .await;
    worker.try_send_data(b"posted".to_vec(), Some("svc"), true, &["agent".to_owned()]).expect("queued");
    let payload = agent_wait(&mut agent, "the posted data", |event| match event {
        RoomEvent::Data(data) if data.from_identity == "worker" => Some(data.payload.clone()),
        _ => None,
    })
    .await;
    assert_eq!(&payload[..], b"posted");

    // A payload over the limit fails after the hand-over, as an event.
    worker.try_send_data(vec![0u8; 70_000], None, true, &[]).expect("queued");
    let failure = within(WAIT, "the failure event", async {
        loop {
            match events.next().await {
                Some(ClientEvent::CommandFailed { command, error }) => return (command, error),
                Some(_) => {}
                None => panic!("the worker closed"),
            }
        }
    })
    .await;
    assert!(matches!(failure, ("send_data", ClientError::PacketTooLarge(70_000))), "{failure:?}");
    worker.leave().await;
}

/// A TLS proxy on 127.0.0.1 for `localhost` (self-signed) in front of `backend`: the room as a
/// LiveKit deployment serves it, behind `wss://`. Returns its port and a client configuration that
/// trusts it.
async fn tls_proxy(backend: std::net::SocketAddr) -> (u16, Arc<svc_http::TlsClientConfig>) {
    let tls = svc_testkit::tls::LocalhostTls::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let acceptor = tls.acceptor.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(backend).await else { return };
                // Either side closing ends the proxied connection.
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
            });
        }
    });
    (port, tls.client)
}

#[tokio::test]
async fn the_client_joins_over_wss_and_refuses_a_certificate_it_does_not_trust() {
    let harness = start().await;
    let backend: std::net::SocketAddr =
        harness.url.trim_start_matches("ws://").split('/').next().expect("authority").parse().expect("addr");
    let (port, trusted) = tls_proxy(backend).await;
    let url = format!("wss://localhost:{port}/room");
    let expires =
        i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()).expect("s") + 600;
    let token = harness.credentials.participant_token("tls-room", "tls-user", None, expires).expect("mint");
    let loopback = Some("127.0.0.1".parse().expect("ip"));

    let options = ClientOptions { connect_timeout: WAIT, udp_ip: loopback, tls: Some(trusted), ..Default::default() };
    let client = RoomClient::connect(&url, &token, options).await.expect("joins over wss");
    assert_eq!(client.info().room_name, "tls-room");
    client.leave().await;

    // The webpki roots do not know the proxy's certificate: refused at the handshake.
    let options = ClientOptions { connect_timeout: WAIT, udp_ip: loopback, ..Default::default() };
    let refused = RoomClient::connect(&url, &token, options).await.expect_err("an untrusted certificate");
    assert!(matches!(&refused, ClientError::Connect(reason) if reason.contains("certificate")), "{refused}");
}
