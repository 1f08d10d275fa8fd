//! The in-process participant against the official Python LiveKit SDK: the session runtime's
//! view of a room, checked by a client nobody here wrote.
//!
//! The Rust side plays the responder of the interop protocol (tests/interop/README.md): it
//! publishes `responder.wav` through [`LocalAudioTrack::push_pcm`], decodes the caller's audio
//! with [`RemoteAudioDecoder`] and correlates it with `caller.wav`, exchanges data packets,
//! answers and performs RPC, sets an attribute, and sees the caller leave. The Python peer
//! (tests/interop/py/lk_peer.py) checks the same from its side and writes its verdict.
//!
//! Ignored by default: it needs the harness `scripts/interop-setup.sh` installs (scripts/test.sh
//! runs it, then the ignored tests).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use svc_audio::analysis::best_correlation;
use svc_audio::wav::read_wav_file;
use svc_room::{LocalJoinOptions, ParticipantKind, RemoteAudioDecoder, RoomEvent, RpcError, rpc_codes};

mod support;

const SECRET: &str = "interop-agent-secret-0123456789abcdef";
const ROOM: &str = "interop-agent";
const AGENT: &str = "agent";
const CALLER: &str = "py-caller";

fn harness() -> PathBuf {
    let interop = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop");
    for needed in ["venv/bin/python", "audio/caller.wav", "audio/responder.wav"] {
        assert!(
            interop.join(needed).exists(),
            "{} is missing: run scripts/interop-setup.sh (scripts/test.sh does)",
            interop.join(needed).display()
        );
    }
    interop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn in_process_agent_and_python_client_exchange_audio_data_rpc_and_attributes() {
    let interop = harness();
    let repo = interop.join("../..");
    let started = support::start_room("devkey", SECRET, Duration::from_secs(300)).await;
    let (room, http, credentials) = (started.room, started.http, started.credentials);

    let caller_wav = read_wav_file(interop.join("audio/caller.wav")).expect("caller.wav");
    let responder_wav = read_wav_file(interop.join("audio/responder.wav")).expect("responder.wav");
    assert_eq!((caller_wav.sample_rate, responder_wav.sample_rate), (48_000, 48_000));

    let mut agent = room
        .join_local(
            ROOM,
            LocalJoinOptions {
                identity: AGENT.into(),
                name: "In-process agent".into(),
                kind: ParticipantKind::Agent,
                metadata: String::new(),
                attributes: BTreeMap::new(),
            },
        )
        .await
        .expect("agent joins");
    let voice = agent.publish_audio("agent-voice").await.expect("publish");
    agent.register_rpc_method("interop.echo");

    let expires =
        i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()).expect("s") + 600;
    let token = credentials.participant_token(ROOM, CALLER, Some(CALLER), expires).expect("token");
    let run_dir = interop.join("runs/in_process_agent");
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let result_path = run_dir.join("caller.json");
    let _ = std::fs::remove_file(&result_path);
    let python = tokio::process::Command::new(interop.join("venv/bin/python"))
        .arg(repo.join("tests/interop/py/lk_peer.py"))
        .args(["--url", &format!("ws://{http}/room"), "--token", &token, "--peer", AGENT, "--role", "caller"])
        .arg("--publish-wav")
        .arg(interop.join("audio/caller.wav"))
        .arg("--expect-wav")
        .arg(interop.join("audio/responder.wav"))
        .arg("--out")
        .arg(&result_path)
        .args(["--single-pc", "0", "--timeout", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the python peer");

    // The agent's half of the protocol (tests/interop/README.md, "The protocol").
    agent.set_attributes([("interop.ready".to_owned(), "1".to_owned())].into()).await.expect("ready");
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    let mut decoder = RemoteAudioDecoder::new().expect("decoder");
    let mut heard: Vec<i16> = Vec::new();
    let mut pushed_samples: u64 = 0;
    let mut caller_ready = false;
    let mut role_sent = false;
    let mut caller_role: Option<String> = None;
    let mut exercised = false;
    let mut data_seqs: Vec<u64> = Vec::new();
    let mut caller_done = false;
    let mut audio: Option<svc_audio::analysis::Correlation> = None;
    let mut last_judged_len = 0usize;
    let mut done_sent = false;
    let mut caller_left = false;
    // The judge looks at the last (sentence + 1.5 s) of what was heard, as compare.py does.
    let window = caller_wav.samples.len() + 72_000;
    while !caller_left {
        let event = match tokio::time::timeout_at(deadline, agent.next_event()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("the agent was removed from the room"),
            Err(_) => panic!(
                "agent timed out after {:.1} s: ready {caller_ready}, role {caller_role:?}, exercised {exercised}, \
                 data {data_seqs:?}, heard {:.1} s (best {audio:?}), done {caller_done}",
                started.elapsed().as_secs_f64(),
                heard.len() as f64 / 48_000.0
            ),
        };
        match event {
            RoomEvent::ParticipantJoined(participant) | RoomEvent::ParticipantUpdated { participant, .. }
                if participant.identity == CALLER =>
            {
                caller_ready |= participant.attributes.get("interop.ready").is_some_and(|v| v == "1");
                if let Some(role) = participant.attributes.get("interop.role") {
                    caller_role = Some(role.clone());
                }
            }
            RoomEvent::Data(message) if message.from_identity == CALLER => match message.topic.as_deref() {
                Some("interop.data") if message.reliable => {
                    let value: serde_json::Value = serde_json::from_slice(&message.payload).expect("json payload");
                    assert_eq!(value["from"], CALLER, "the payload names its sender");
                    data_seqs.push(value["seq"].as_u64().expect("seq"));
                }
                Some("interop.control") if message.payload.as_ref() == b"interop.done" => caller_done = true,
                _ => {}
            },
            RoomEvent::AudioFrame(frame) if frame.participant_identity.as_ref() == CALLER => {
                decoder.decode(&frame, &mut heard).expect("decode");
            }
            RoomEvent::ParticipantLeft { identity, .. } if identity == CALLER => caller_left = true,
            RoomEvent::RpcRequest(call) => agent
                .respond_rpc(&call.caller_identity, &call.request_id, Ok(format!("echo:{}", call.payload)))
                .expect("echo answered"),
            _ => {}
        }
        // Publish the sentence in a loop: keep about a second queued ahead of playout.
        if pushed_samples.saturating_sub(voice.played_samples()) < 48_000 {
            voice.push_pcm(responder_wav.samples.clone()).await.expect("push audio");
            pushed_samples += responder_wav.samples.len() as u64;
        }
        if caller_ready && !role_sent {
            let attributes = [("interop.ready", "1"), ("interop.role", "responder")];
            agent
                .set_attributes(attributes.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
                .await
                .expect("role");
            role_sent = true;
        }
        if caller_role.as_deref() == Some("caller") && !exercised {
            exercised = true;
            for seq in 1..=3 {
                let payload = format!("{{\"from\": \"{AGENT}\", \"seq\": {seq}}}");
                agent.send_data(payload, Some("interop.data"), true, &[]).await.expect("data");
            }
            let payload = format!("{{\"from\": \"{AGENT}\", \"seq\": 4}}");
            agent.send_data(payload, Some("interop.data"), false, &[]).await.expect("lossy data");
            let answer = agent
                .perform_rpc(CALLER, "interop.echo", "hello from agent", Duration::from_secs(10))
                .await
                .expect("echo rpc");
            assert_eq!(answer, "echo:hello from agent");
            let missing = agent.perform_rpc(CALLER, "interop.missing", "?", Duration::from_secs(10)).await;
            assert!(
                matches!(missing, Err(RpcError { code: rpc_codes::UNSUPPORTED_METHOD, .. })),
                "unregistered method: {missing:?}"
            );
        }
        // Judge the audio once a window's worth has arrived, then every further second.
        if audio.is_none_or(|c| c.coefficient < 0.9) && heard.len() >= window && heard.len() >= last_judged_len + 48_000
        {
            last_judged_len = heard.len();
            audio = Some(best_correlation(&caller_wav.samples, &heard[heard.len() - window..], window));
        }
        let all_seen = audio.is_some_and(|c| c.coefficient >= 0.9) && data_seqs.len() >= 3 && exercised;
        if all_seen && !done_sent {
            agent.send_data(&b"interop.done"[..], Some("interop.control"), true, &[]).await.expect("done");
            done_sent = true;
        }
    }
    let output = tokio::time::timeout(Duration::from_secs(20), python.wait_with_output())
        .await
        .expect("python peer exits")
        .expect("python output");
    let result = std::fs::read_to_string(&result_path).unwrap_or_default();
    assert!(
        output.status.success(),
        "python caller failed ({}):\n{result}\nstdout:\n{}\nstderr tail:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr).lines().rev().take(30).collect::<Vec<_>>().join("\n")
    );

    let correlation = audio.expect("heard the caller");
    assert!(correlation.coefficient >= 0.9, "caller audio correlation {correlation:?}");
    data_seqs.sort_unstable();
    assert_eq!(data_seqs, vec![1, 2, 3], "reliable packets arrive once each");
    assert_eq!(caller_role.as_deref(), Some("caller"));
    assert!(done_sent, "the agent saw everything it expects before the caller left");
    eprintln!(
        "in-process agent: caller audio correlation {:.3} (lag {} samples), caller done {caller_done}, {:.1} s",
        correlation.coefficient,
        correlation.lag_samples,
        started.elapsed().as_secs_f64()
    );
    agent.leave().await.expect("leave");
    room.shutdown().await;
}
