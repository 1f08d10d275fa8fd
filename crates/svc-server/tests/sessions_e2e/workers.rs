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
    let db = svc_store::testing::TestDatabase::new(svc_store::Backend::Postgres).await;
    let livekit_listen = format!("127.0.0.1:{}", free_port());
    let livekit_url = format!("ws://{livekit_listen}/room");
    let worker = |node: &str| {
        let capacity = CAPACITY.to_string();
        [
            ("--livekit-url", livekit_url.as_str()),
            ("--livekit-api-key", LIVEKIT_KEY),
            ("--livekit-api-secret", LIVEKIT_SECRET),
            ("--livekit-agent-name", AGENT_NAME),
            ("--node-id", node),
            ("--worker-capacity", capacity.as_str()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value.to_owned()])
        .collect::<Vec<String>>()
    };
    let first = worker("node-a");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let world = World::start_on(test, Flavor::OpenAi, &first, Some(&db.url)).await;
    let livekit_dir = tempfile::tempdir().expect("tempdir");
    let livekit = support::Server::start_in(world.dir.join("livekit.log"), livekit_dir.path(), &livekit_listen, |_| {});
    let mut dirs = vec![livekit_dir];
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
}
