//! Worker mode (issue 24), in the topology of a deployment: three `svc serve` nodes on one
//! Postgres database register as agent workers of a LiveKit server (another `svc serve` plays it,
//! as in `external.rs`) under one agent name. A start on any node creates the room there with a
//! dispatch of that agent; the LiveKit server offers the job to the least loaded worker, which
//! reads the session from the shared store and runs it. The official client talks with whichever
//! node took it, and goes on talking when that node is killed: LiveKit dispatches the job again,
//! another node takes the session over.

use svc_room::server_api::ServerApi;

use super::*;

const LIVEKIT_KEY: &str = support::ROOM_API_KEY;
const LIVEKIT_SECRET: &str = support::ROOM_API_SECRET;
/// The agent name every node registers and every start dispatches.
const AGENT_NAME: &str = "svc-e2e";
/// Sessions a node takes: each counts for more than the CPU the test's other processes cost it.
const CAPACITY: usize = 12;

/// The LiveKit server and three worker nodes on one database: `node-a` is the world's (whose
/// API the client uses), `node-b` and `node-c` are started beside it.
struct Fleet {
    world: World,
    db: svc_store::testing::TestDatabase,
    livekit_url: String,
    /// `node-b` and `node-c`: their listen addresses and processes.
    others: Vec<(String, support::Server)>,
    _livekit: support::Server,
    _dirs: Vec<tempfile::TempDir>,
}

async fn fleet(test: &'static str) -> Fleet {
    fleet_with_trunk(test, None).await
}

/// The number svc's dials present.
const CALLER_NUMBER: &str = "+15550100";

/// A fleet whose LiveKit server dials out through the SIP trunk `trunk` (`sip:host:port`), and
/// whose nodes dial through it (`--livekit-sip-trunk-id`).
async fn fleet_with_trunk(test: &'static str, trunk: Option<&str>) -> Fleet {
    let db = svc_store::testing::TestDatabase::new(svc_store::Backend::Postgres).await;
    let livekit_listen = format!("127.0.0.1:{}", free_port());
    let livekit_url = format!("ws://{livekit_listen}/room");
    let trunk_id = trunk.map(svc_phone::room_api::trunk_id);
    // The recordings directory every node shares (a network filesystem in a deployment).
    let recordings = tempfile::tempdir().expect("tempdir");
    let recordings_dir = recordings.path().display().to_string();
    let worker = |node: &str| {
        let capacity = CAPACITY.to_string();
        let mut flags = vec![
            ("--recordings-dir", recordings_dir.as_str()),
            ("--livekit-url", livekit_url.as_str()),
            ("--livekit-api-key", LIVEKIT_KEY),
            ("--livekit-api-secret", LIVEKIT_SECRET),
            ("--livekit-agent-name", AGENT_NAME),
            ("--node-id", node),
            ("--worker-capacity", capacity.as_str()),
        ];
        if let Some(trunk_id) = &trunk_id {
            flags.extend([("--livekit-sip-trunk-id", trunk_id.as_str()), ("--sip-caller-number", CALLER_NUMBER)]);
        }
        flags.into_iter().flat_map(|(flag, value)| [flag.to_owned(), value.to_owned()]).collect::<Vec<String>>()
    };
    let first = worker("node-a");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let world = World::start_on(test, Flavor::OpenAi, &first, Some(&db.url)).await;
    let livekit_dir = tempfile::tempdir().expect("tempdir");
    let livekit =
        support::Server::start_in(world.dir.join("livekit.log"), livekit_dir.path(), &livekit_listen, |svc| {
            if let Some(trunk) = trunk {
                svc.args(["--sip-trunk", trunk, "--sip-caller-number", CALLER_NUMBER, "--sip-bind", "127.0.0.1:0"]);
                svc.args(["--sip-rtp-ports", "31200-31399"]);
            }
        });
    let mut dirs = vec![livekit_dir, recordings];
    let mut others = Vec::new();
    for node in ["node-b", "node-c"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let listen = format!("127.0.0.1:{}", free_port());
        let mut args = vec!["--public-url".to_owned(), format!("http://{listen}")];
        args.extend(["--server-tools".to_owned(), "end_call,speaker_log,examine_image".to_owned()]);
        args.extend(worker(node));
        let log = world.dir.join(format!("{node}.log"));
        others.push((listen.clone(), start_server(&log, dir.path(), &listen, &world.server_env, &args)));
        dirs.push(dir);
    }
    Fleet { world, db, livekit_url, others, _livekit: livekit, _dirs: dirs }
}

impl Fleet {
    /// The node that took session `id`, once one has (within 20 s).
    async fn node_of(&self, id: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let row = self.db.store.session(id).await.expect("read").expect("stored");
            if let Some(node) = row.node_id {
                return node;
            }
            assert!(Instant::now() < deadline, "no node took session {id}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The listen address of each node, `node-a` first.
    fn listens(&self) -> Vec<(&'static str, &str)> {
        let mut listens = vec![("node-a", self.world.server.listen.as_str())];
        listens.extend(["node-b", "node-c"].into_iter().zip(self.others.iter().map(|(listen, _)| listen.as_str())));
        listens
    }

    /// Kills node `node` with SIGKILL.
    fn kill(&mut self, node: &str) {
        match node {
            "node-a" => self.world.server.kill_now(),
            "node-b" => self.others[0].1.kill_now(),
            _ => self.others[1].1.kill_now(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh) and Postgres; run by scripts/test.sh"]
async fn sessions_started_on_any_node_run_on_the_workers_livekit_picks() {
    let fleet = fleet("workers").await;
    let world = &fleet.world;

    // A conversation: started through node A, run by whichever worker LiveKit picked.
    let ([greeting, spoken_reply, typed_reply], config) = queue_conversation(world);
    let result = world.client("conversation", config).finish(world, Duration::from_secs(90)).await;
    let id = session_id(&result);
    assert_eq!(result["observations"]["livekit_url"], fleet.livekit_url.as_str());
    assert_eq!(assistant_finals(&result), [greeting, spoken_reply, typed_reply]);
    let heard_by_fake = correlation(&mic_pcm(), 48_000, &fake_audio(&world.fake, 0), 24_000);
    assert!(heard_by_fake >= 0.9, "the microphone at the provider: correlation {heard_by_fake:.3}");
    let node = fleet.node_of(&id).await;
    assert!(["node-a", "node-b", "node-c"].contains(&node.as_str()), "{node}");
    assert_eq!(world.get_json(&format!("/sessions/{id}"))["status"], "completed");
    let usage = world.final_usage(&id).await;
    assert_eq!(usage["turn_count"], 3, "{usage}");
    world.assert_no_input_dropped(&id).await;
    let room = result["observations"]["room_name"].as_str().expect("room name").to_owned();
    let api =
        ServerApi::new(&fleet.livekit_url, svc_room::RoomCredentials::new(LIVEKIT_KEY, LIVEKIT_SECRET)).expect("url");
    until_room_gone(&api, &room).await;

    // Thirty starts, ten through each node's API: LiveKit spreads them over the workers by
    // their load.
    let body = json!({"sdk": {"name": "e2e", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}});
    let listens = fleet.listens();
    let mut ids = Vec::new();
    for k in 0..30 {
        let (_, listen) = listens[k % 3];
        let (status, bytes) = http(listen, "POST", "/api/v1/external/realtime/session/start", &world.key, Some(&body));
        let started: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert_eq!(status, 200, "{started}");
        ids.push(started["session_id"].as_str().expect("id").to_owned());
    }
    let mut per_node = std::collections::BTreeMap::<String, Vec<String>>::new();
    for id in &ids {
        per_node.entry(fleet.node_of(id).await).or_default().push(id.clone());
    }
    let counts: Vec<usize> = per_node.values().map(Vec::len).collect();
    println!("workers: 30 sessions spread as {counts:?}");
    assert!(per_node.len() == 3 && counts.iter().all(|&count| (7..=CAPACITY).contains(&count)), "spread: {counts:?}");

    // DELETE through the node that does not run the session: the running node ends it
    // (`session_deleted`, its end stored first), its room goes, then its record.
    for (node, through) in [("node-a", 1), ("node-b", 2), ("node-c", 0)] {
        let (_, deleted_through) = listens[through];
        let log = world.dir.join(if node == "node-a" { "svc.log".to_owned() } else { format!("{node}.log") });
        let id = &per_node[node][0];
        let room = fleet.db.store.session(id).await.expect("read").and_then(|row| row.room_name).expect("room");
        let (status, _) = http(deleted_through, "DELETE", &format!("/api/v1/external/sessions/{id}"), &world.key, None);
        assert_eq!(status, 204, "DELETE of {id} (run by {node}) through another node");
        assert!(fleet.db.store.session(id).await.expect("read").is_none(), "the record is gone");
        let ended = std::fs::read_to_string(&log).expect("log");
        assert!(
            ended.lines().any(|line| line.contains("session ended")
                && line.contains(id.as_str())
                && line.contains("session_deleted")),
            "{node} ended {id} as deleted"
        );
        until_room_gone(&api, &room).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh) and Postgres; run by scripts/test.sh"]
async fn a_killed_nodes_session_continues_on_another_node() {
    let mut fleet = fleet("takeover").await;
    fleet.world.fake.queue([
        Reply::Speak("Welcome!".into()),
        Reply::Speak("Nice to meet you, Ada.".into()),
        Reply::Speak("Your name is Ada.".into()),
    ]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b", "greeting": "Welcome!"}});
    let run = fleet.world.client_with("takeover", "takeover", config, &["--text", "My name is Ada."]);
    run.mark("talked", Duration::from_secs(40)).await;
    let sessions = fleet.world.get_json("/sessions");
    let id = sessions[0]["id"].as_str().expect("the session").to_owned();
    let ran_on = fleet.node_of(&id).await;

    // The node that runs it dies: no shutdown, no goodbye.
    let killed = Instant::now();
    fleet.kill(&ran_on);
    run.mark("ready-again", Duration::from_secs(40)).await;
    let recovery = killed.elapsed();
    println!("takeover: from SIGKILL of {ran_on} to `ready` again: {} ms", recovery.as_millis());
    let result = run.finish(&fleet.world, Duration::from_secs(90)).await;
    assert_eq!(result["observations"]["types_between"], json!(["reconnecting", "ready"]), "what the client heard");

    // The other node runs it now, as a resumption of itself: no greeting again, the model got
    // the first turn, and the second is answered from it.
    let now_on = fleet.node_of(&id).await;
    assert_ne!(now_on, ran_on, "another node took the session over");
    let finals = assistant_finals(&result);
    assert_eq!(finals.last().copied(), Some("Your name is Ada."), "{finals:?}");
    assert_eq!(finals.iter().filter(|&&text| text == "Welcome!").count(), 1, "greeted once: {finals:?}");
    let seeded = fleet.world.fake.received().iter().filter(|r| r.connection == 1).any(|r| {
        r.message.to_string().contains("My name is Ada.") && r.message.to_string().contains("Nice to meet you, Ada.")
    });
    assert!(seeded, "the new upstream session got the conversation so far");

    // Stored once each, under one session that completed.
    let store = &fleet.db.store;
    let turns: Vec<(String, String)> =
        store.transcript(&id).await.expect("transcript").into_iter().map(|turn| (turn.role, turn.text)).collect();
    let texts: Vec<&str> = turns.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(
        texts,
        ["Welcome!", "My name is Ada.", "Nice to meet you, Ada.", "What is my name?", "Your name is Ada."]
    );
    let timeline = store.timeline(&id).await.expect("timeline");
    let joined: Vec<&serde_json::Value> =
        timeline.iter().filter(|row| row.kind == "agent.joined").map(|row| &row.data).collect();
    assert_eq!(joined.len(), 2, "two agents, one per node");
    assert_eq!(joined[1]["resumed_from"], json!(id));
    let row = store.session(&id).await.expect("read").expect("stored");
    assert_eq!(row.status, "completed");
    // The usage covers both nodes' parts: the three replies, two of them before the kill.
    assert_eq!((row.usage_status.as_str(), row.turn_count), ("recorded", Some(3)), "{row:?}");
    assert!(recovery < Duration::from_secs(20), "recovery took {recovery:?}");

    // One recording of the whole conversation, in the directory the nodes share: the second
    // node continued the part the first one left, so the agent's voice from before the kill and
    // after it are both in it, served by any node. (What the first node had not handed to the
    // file when it died, the last half second or so, is lost: its reply just before the kill
    // may be cut.)
    let (_, alive) = fleet.listens().into_iter().find(|(node, _)| *node == now_on).expect("the running node");
    let (status, wav) = http_get(alive, &format!("/api/v1/external/sessions/{id}/recording"), &fleet.world.key);
    assert_eq!(status, 200);
    let recording = svc_audio::wav::read_wav(&wav).expect("the recording is a WAV");
    let agent_lane: Vec<i16> = recording.samples.iter().skip(1).step_by(2).copied().collect();
    let rate = recording.sample_rate;
    for (reply, node) in [("Welcome!", &ran_on), ("Your name is Ada.", &now_on)] {
        let heard = correlation(&svc_testkit::speech::speech(reply, 24_000), 24_000, &agent_lane, rate);
        assert!(heard >= 0.8, "{reply:?} (said through {node}) in the recording: {heard:.3}");
    }
    let lasted = (row.ended_us.expect("ended") - row.started_us) as f64 / 1e6;
    let recorded = agent_lane.len() as f64 / f64::from(rate);
    assert!((recorded - lasted).abs() < 2.0, "a {recorded:.1} s recording of a {lasted:.1} s session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh, which installs baresip) and Postgres; run by scripts/test.sh"]
async fn a_phone_dialled_through_another_node_talks_with_the_session() {
    // The phone (baresip) is the LiveKit server's trunk.
    let (phone, speech) = answering_phone();
    let trunk = format!("sip:{}", phone.addr);
    let fleet = fleet_with_trunk("workers-phone", Some(&trunk)).await;
    let world = &fleet.world;
    world.admin(&["workspace", "set", "e2e", "--phone-calls", "true", "--dial-minute-limit", "100"]);
    // The nodes name the trunk by the id the LiveKit server lists (its SIP API, PyPI
    // `livekit-api`).
    let livekit_http = fleet.livekit_url.replacen("ws://", "http://", 1);
    let trunks = support::sdk_report(
        std::process::Command::new(repo().join("target/interop/venv/bin/python"))
            .arg(repo().join("tests/interop/py/sip_dial.py"))
            .args(["--url", &livekit_http, "--key", LIVEKIT_KEY, "--secret", LIVEKIT_SECRET])
            .args(["--room", "-", "--number", "-", "--list-only"]),
        &world.server.log_tail(40),
    );
    assert_eq!(trunks["trunks"][0]["id"], svc_phone::room_api::trunk_id(&trunk).as_str(), "{trunks}");
    let reply = "Thank you for calling, I heard you.";
    world.fake.queue([Reply::Speak(reply.into())]);

    // Started through node A, run by whichever node LiveKit picked, dialled through another.
    let body = json!({"sdk": {"name": "e2e", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}});
    let (status, started) = world.post("/realtime/session/start", &body);
    assert_eq!(status, 200, "{started}");
    let id = started["session_id"].as_str().expect("id").to_owned();
    let runs_on = fleet.node_of(&id).await;
    let (through, listen) = fleet.listens().into_iter().find(|(node, _)| *node != runs_on).expect("another node");
    let dial = |number: &str| {
        let (status, bytes) = http(
            listen,
            "POST",
            &format!("/api/v1/external/realtime/session/{id}/dial"),
            &world.key,
            Some(&json!({"phone_number": number})),
        );
        (status, serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null))
    };
    let (status, dialled) = dial("+15550199");
    assert_eq!(status, 202, "dialled through {through}, run by {runs_on}: {dialled}");
    let dial_id = dialled["dial_id"].as_str().expect("dial_id").to_owned();
    let (status, again) = dial("+15550199");
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("session_already_dialed")));

    // The phone hangs up when its file ends; the session follows as when a user leaves.
    phone_call_heard_both_ways(world, &id, &phone, &speech, reply).await;

    // The session's node followed the call from its participant: the steps, how it ended, and
    // its minutes, as for a call svc's own phone service places.
    let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
    let entries: Vec<&Value> = timeline["events"].as_array().into_iter().flatten().collect();
    let kinds: Vec<&str> =
        entries.iter().filter_map(|e| e["type"].as_str()).filter(|k| k.starts_with("dial.")).collect();
    assert_eq!(kinds, ["dial.placed", "dial.ringing", "dial.answered", "dial.ended"], "{kinds:?}");
    let placed = entries.iter().find(|e| e["type"] == "dial.placed").expect("dial.placed");
    assert_eq!(placed["data"]["dial_id"], dial_id.as_str());
    assert_eq!(
        (placed["data"]["phone_number"].as_str(), placed["data"]["caller_number"].as_str()),
        (Some("+15550199"), Some(CALLER_NUMBER))
    );
    let ended = entries.iter().find(|e| e["type"] == "dial.ended").expect("dial.ended");
    assert_eq!(ended["data"]["ended_by"], "phone", "{ended}");
    let answered_for = ended["data"]["duration_seconds"].as_f64().unwrap_or(0.0);
    assert!((5.0..20.0).contains(&answered_for), "answered for {answered_for} s");
    let session_end = entries.iter().find(|e| e["type"] == "session.ended").expect("session.ended");
    assert_eq!(session_end["data"]["reason"], "participant_left", "{session_end}");
    let metered = fleet.db.store.dial_of_session(&id).await.expect("read").expect("the dial");
    assert_eq!(metered.outcome.as_deref(), Some("completed"), "{metered:?}");
    assert_eq!(metered.billed_seconds, answered_for.ceil() as i64, "{metered:?}");
}
