//! Faults under live sessions: a killed server, a SIGTERM's drain, a recordings disk that fills
//! up or cannot be written (docs/reliability.md has the table these rows belong to).

use std::process::Command;

use super::*;

/// A session start's body (`provider_b`, the fake's).
fn start_body() -> Value {
    json!({"sdk": {"name": "e2e", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}})
}

/// Starts a session over the API alone (nobody joins its room) and returns its id.
fn start_unjoined(world: &World) -> String {
    let (status, started) = world.post("/realtime/session/start", &start_body());
    assert_eq!(status, 200, "{started}");
    started["session_id"].as_str().expect("id").to_owned()
}

/// Waits up to 10 s for session `id`'s provider to be ready.
async fn until_provider_ready(world: &World, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while timeline_entry(world, id, "provider.ready").is_none() {
        assert!(Instant::now() < deadline, "session {id}: the provider never got ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_killed_server_ends_the_sessions_it_left_on_its_next_start() {
    let world = World::start("crash", Flavor::OpenAi, &[]).await;
    killed_server_ends_the_sessions_it_left(world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_killed_server_on_postgres_ends_the_sessions_it_left_on_its_next_start() {
    // On Postgres a node ends only its own orphans (by node id: the restart keeps it).
    let db = svc_store::testing::TestDatabase::new(svc_store::Backend::Postgres).await;
    let world = World::start_on("crash-postgres", Flavor::OpenAi, &[], Some(&db.url)).await;
    killed_server_ends_the_sessions_it_left(world).await;
}

/// Three live sessions, `svc serve` killed with SIGKILL and started again: each is ended as
/// `error` (`server_restarted`, usage `unavailable`), and new sessions start.
async fn killed_server_ends_the_sessions_it_left(mut world: World) {
    let ids: Vec<String> = (0..3).map(|_| start_unjoined(&world)).collect();
    for id in &ids {
        assert_eq!(world.get_json(&format!("/sessions/{id}"))["status"], "active");
    }
    world.crash_and_restart();
    for id in &ids {
        let session = world.get_json(&format!("/sessions/{id}"));
        assert_eq!(session["status"], "error", "{session}");
        assert!(session["ended_at"].is_number());
        let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
        let ended =
            timeline["events"].as_array().into_iter().flatten().find(|e| e["type"] == "session.ended").expect("ended");
        assert_eq!(ended["data"]["reason"], "server_restarted");
        assert_eq!(world.get_json(&format!("/sessions/{id}/usage"))["usage_status"], "unavailable");
    }
    // The restarted server runs new sessions.
    let (status, _) = world.post("/realtime/session/start", &start_body());
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn sigterm_drains_the_live_sessions_then_ends_them_with_a_reason_and_keeps_all_they_stored() {
    let world = World::start("sigterm", Flavor::OpenAi, &["--drain-seconds", "5"]).await;
    sigterm_drains_the_live_sessions(world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn sigterm_on_postgres_drains_the_live_sessions_and_keeps_all_they_stored() {
    let db = svc_store::testing::TestDatabase::new(svc_store::Backend::Postgres).await;
    let world = World::start_on("sigterm-postgres", Flavor::OpenAi, &["--drain-seconds", "5"], Some(&db.url)).await;
    sigterm_drains_the_live_sessions(world).await;
}

/// A talking session and a quiet one; SIGTERM with a 5 s drain (the world's `--drain-seconds`):
/// starts and `/healthz` answer 503 at once, the client is warned and holds a turn meanwhile,
/// both end with `server_shutdown`, and everything they did is stored once.
async fn sigterm_drains_the_live_sessions(mut world: World) {
    const DRAIN: Duration = Duration::from_secs(5);
    let reply = "Noted, your order is on its way.";
    let second = "Of course, anything else?";
    world.fake.queue([Reply::Speak(reply.into()), Reply::Speak(second.into())]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let run = world.client_with("shutdown", "shutdown", config.clone(), &["--text", "Please note my order."]);
    run.mark("talked", Duration::from_secs(40)).await;
    // A second live session, with nobody in its room; its provider session up too, so both
    // have usage to store.
    let quiet = start_unjoined(&world);
    until_provider_ready(&world, &quiet).await;

    let asked = world.terminate();
    // The drain: the load balancer's health check and new starts are told at once (503), before
    // anything is stored; the live sessions run on (the client holds a second turn meanwhile).
    let deadline = Instant::now() + Duration::from_secs(2);
    let health = loop {
        let (status, body) = world.get_raw("/healthz");
        if status == 503 {
            break body;
        }
        assert!(Instant::now() < deadline, "/healthz still {status} after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(serde_json::from_slice::<Value>(&health).ok(), Some(json!({"status": "draining"})));
    let (status, refused) = world.post("/realtime/session/start", &start_body());
    assert_eq!(status, 503, "a start while draining: {refused}");
    assert!(asked.elapsed() < DRAIN, "the refusals came within the drain");
    let took = world.restart_after_exit(asked);
    assert!(took >= DRAIN - Duration::from_millis(500), "the sessions ran on until the drain was over: {took:?}");
    let result = run.finish(&world, Duration::from_secs(60)).await;
    let talked = session_id(&result);
    // The client was warned, held a turn meanwhile, and was told why, before its room closed.
    let observed = &result["observations"];
    assert_eq!(observed["ending_soon"]["reason"], "server_shutdown", "{observed}");
    let remaining = observed["ending_soon"]["seconds_remaining"].as_f64().unwrap_or(-1.0);
    assert!(remaining > 0.0 && remaining <= DRAIN.as_secs_f64(), "{observed}");
    assert_eq!(observed["ended"]["reason"], "server_shutdown", "{observed}");

    // Usage: what the talked session did, written before the server went (not given up on the
    // next start); a session where nothing happened has none to record, by design.
    for (id, usage_status) in [(&talked, "recorded"), (&quiet, "unavailable")] {
        let session = world.get_json(&format!("/sessions/{id}"));
        assert_eq!(session["status"], "completed", "{session}");
        let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
        let events = timeline["events"].as_array().cloned().unwrap_or_default();
        let ended = events.iter().find(|e| e["type"] == "session.ended").expect("ended");
        assert_eq!(ended["data"]["reason"], "server_shutdown", "{ended}");
        let soon = events.iter().find(|e| e["type"] == "session.ending_soon").expect("warned");
        assert_eq!(soon["data"]["reason"], "server_shutdown", "{soon}");
        let usage = world.final_usage(id).await;
        assert_eq!(usage["usage_status"], usage_status, "{usage}");
    }
    let turns = stored_turns(&world, &talked);
    assert_eq!(
        turns,
        [
            "user: Please note my order.".to_owned(),
            format!("assistant: {reply}"),
            "user: One more thing, please.".to_owned(),
            format!("assistant: {second}"),
        ],
        "every turn stored once, the one held while draining too"
    );
    let (status, wav) = world.get(&format!("/sessions/{talked}/recording"));
    assert_eq!(status, 200);
    let recording = svc_audio::wav::read_wav(&wav).expect("the recording is a complete WAV");
    let agent_lane: Vec<i16> = recording.samples.iter().skip(1).step_by(2).copied().collect();
    let spoken = svc_testkit::speech::speech(reply, 24_000);
    let agent_in_recording = correlation(&spoken, 24_000, &agent_lane, 24_000);
    assert!(agent_in_recording >= 0.9, "the reply in the recording: {agent_in_recording:.3}");
    eprintln!(
        "sigterm: svc drained for {DRAIN:?} and stopped {took:?} after SIGTERM with two live sessions; recording {agent_in_recording:.3}"
    );
}

/// A tmpfs mounted over a directory for as long as it lives (a disk that fills up for real:
/// `ENOSPC` from the kernel, not a simulated error). Mounting needs root with `CAP_SYS_ADMIN`,
/// which the test machine and CI have.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &std::path::Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(at).expect("mount point");
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            output.status.success(),
            "mounting a {size} tmpfs at {} (needs root with CAP_SYS_ADMIN): {}",
            at.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        SmallDisk(at.to_owned())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily, so a file svc still holds open cannot keep the test's directory mounted.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Session `id`'s stored transcript, a `role: text` line per turn.
fn stored_turns(world: &World, id: &str) -> Vec<String> {
    let transcript = world.get_json(&format!("/sessions/{id}/transcript"));
    let turns = transcript.as_array().cloned().unwrap_or_default();
    turns
        .iter()
        .map(|t| format!("{}: {}", t["role"].as_str().unwrap_or(""), t["text"].as_str().unwrap_or("")))
        .collect()
}

/// The timeline entry of `kind` of session `id`, if any.
fn timeline_entry(world: &World, id: &str, kind: &str) -> Option<Value> {
    let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
    timeline["events"].as_array().into_iter().flatten().find(|e| e["type"] == kind).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_full_or_unwritable_recordings_disk_fails_the_recording_visibly_and_the_session_goes_on() {
    let world = World::start("recordings-disk", Flavor::OpenAi, &[]).await;
    let recordings = world.data_dir.path().join("recordings");
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}}); // recorded by default

    // A disk that fills up one second into the recording (24 kHz stereo is 96 KB a second).
    let disk = SmallDisk::mount(&recordings, "64k");
    world.fake.queue([Reply::Speak("Understood.".into())]);
    let result = world.client("spoken_turn", config.clone()).finish(&world, Duration::from_secs(60)).await;
    let full = session_id(&result);
    assert!(!events(&result, "turn-complete").is_empty(), "the conversation went on: {}", result["observations"]);
    let failed = timeline_entry(&world, &full, "recording.failed").expect("the timeline says the recording failed");
    let error = failed["data"]["error"].as_str().unwrap_or("");
    assert!(error.starts_with("writing the recording") && error.contains("No space left"), "{failed}");
    let ended = timeline_entry(&world, &full, "session.ended").expect("ended");
    assert_eq!(ended["data"]["media"]["recording_failed"], true, "{ended}");
    let (status, _) = world.get(&format!("/sessions/{full}/recording"));
    assert_eq!(status, 404, "no half recording is served");
    let transcript = world.get_json(&format!("/sessions/{full}/transcript"));
    assert!(transcript.as_array().is_some_and(|turns| turns.len() >= 2), "both turns stored: {transcript}");
    let left: Vec<_> = std::fs::read_dir(&recordings).expect("recordings").flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "the partial recording was removed, freeing the disk: {left:?}");
    drop(disk);

    // A recordings path that cannot be a directory: the session starts and talks without one.
    std::fs::remove_dir(&recordings).expect("the mount point goes");
    std::fs::write(&recordings, b"not a directory").expect("a file in the way");
    world.fake.queue([Reply::Speak("Understood.".into())]);
    let result =
        world.client_with("unwritable", "spoken_turn", config, &[]).finish(&world, Duration::from_secs(60)).await;
    let unwritable = session_id(&result);
    assert!(!events(&result, "turn-complete").is_empty(), "the conversation went on: {}", result["observations"]);
    let failed = timeline_entry(&world, &unwritable, "recording.failed").expect("the timeline says so");
    assert!(failed["data"]["error"].as_str().is_some_and(|e| e.starts_with("creating the recording")), "{failed}");

    // Both count in /metrics once their sessions have ended.
    let (status, metrics) = world.get_raw("/metrics");
    assert_eq!(status, 200);
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(metrics.lines().any(|line| line == "svc_session_recordings_failed_total 2"), "{metrics}");
    eprintln!("recordings disk: full → {error}; unwritable → {}", failed["data"]["error"]);
}

/// The soft and hard `RLIMIT_NOFILE` of process `pid` (util-linux's `prlimit`).
fn nofile_limit(pid: u32) -> (String, String) {
    let output = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), "--nofile", "--output", "SOFT,HARD", "--noheadings", "--raw"])
        .output()
        .expect("run prlimit");
    assert!(output.status.success(), "prlimit: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let mut limits = text.split_whitespace().map(str::to_owned);
    (limits.next().expect("soft"), limits.next().expect("hard"))
}

fn set_nofile_limit(pid: u32, soft: &str, hard: &str) {
    let status = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:{hard}")])
        .status()
        .expect("run prlimit");
    assert!(status.success(), "prlimit --nofile={soft}:{hard}");
}

/// The lowest descriptor number process `pid` has free: the kernel hands out the lowest, so a
/// limit there makes every new descriptor fail with `EMFILE`.
fn lowest_free_fd(pid: u32) -> u64 {
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|fd| !open.contains(fd)).expect("a free number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn out_of_file_descriptors_starts_get_503_live_sessions_talk_on_and_it_recovers_without_a_restart() {
    let world = World::start("fd-limit", Flavor::OpenAi, &[]).await;
    world.fake.queue([Reply::Speak("Still here, and listening.".into())]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let cue = world.dir.join("fd-limit.cue");
    let cue_arg = cue.to_string_lossy().into_owned();
    let run =
        world.client_with("live", "turn_on_cue", config, &["--text", "Are you still there?", "--cue-file", &cue_arg]);
    run.mark("ready", Duration::from_secs(40)).await;

    // A connection svc accepts while it still can: a request on a new one could not even be
    // accepted once every descriptor is taken (the kernel queues it; svc retries its accept).
    let held = std::net::TcpStream::connect(&world.server.listen).expect("connect");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = world.server.child.id();
    let (soft, hard) = nofile_limit(pid);
    let exhausted = lowest_free_fd(pid);
    set_nofile_limit(pid, &exhausted.to_string(), &hard);

    // A start needs a descriptor (the provider's socket, the recording): a prompt 503, nothing hangs.
    let body = start_body();
    let asked = Instant::now();
    let (status, refused) =
        http_on(held, &world.server.listen, "POST", "/api/v1/external/realtime/session/start", &world.key, Some(&body));
    let refused_in = asked.elapsed();
    let refused = String::from_utf8_lossy(&refused);
    assert_eq!(status, 503, "a start without descriptors: {refused}");
    assert!(refused.contains("out of file descriptors"), "{refused}");

    // The live session talks on: a typed turn, answered aloud, while svc has no descriptor left.
    std::fs::write(&cue, b"go").expect("cue");
    let result = run.finish(&world, Duration::from_secs(60)).await;
    assert!(!events(&result, "turn-complete").is_empty(), "{}", result["observations"]);
    assert_eq!(result["observations"]["ended"]["reason"], "client_ended", "{}", result["observations"]);

    // Descriptors again: the next start works, without a restart.
    set_nofile_limit(pid, &soft, &hard);
    let deadline = Instant::now() + Duration::from_secs(10);
    let started = loop {
        let (status, started) = world.post("/realtime/session/start", &body);
        if status == 200 {
            break started;
        }
        assert!(Instant::now() < deadline, "no start after the limit was raised: {status} {started}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(started["session_id"].is_string(), "{started}");
    assert!(world.server.child.id() == pid, "the same process");
    eprintln!(
        "fd limit: start refused in {refused_in:?} at {exhausted} descriptors; live session talked on; recovered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_second_sigterm_cuts_the_drain_short() {
    let mut world = World::start("sigterm-twice", Flavor::OpenAi, &["--drain-seconds", "120"]).await;
    let id = start_unjoined(&world);
    until_provider_ready(&world, &id).await;
    let asked = world.terminate();
    let deadline = Instant::now() + Duration::from_secs(2);
    while world.get_raw("/healthz").0 != 503 {
        assert!(Instant::now() < deadline, "no drain after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    world.terminate();
    let took = world.restart_after_exit(asked);
    assert!(took < Duration::from_secs(10), "a second SIGTERM ends a 120 s drain at once: {took:?}");
    let ended = timeline_entry(&world, &id, "session.ended").expect("ended and stored");
    assert_eq!(ended["data"]["reason"], "server_shutdown", "{ended}");
    assert_eq!(world.get_json(&format!("/sessions/{id}"))["status"], "completed");
    eprintln!("sigterm twice: stopped {took:?} after the first signal, with a 120 s drain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn postgres_restarting_under_live_sessions_loses_and_repeats_no_write() {
    // Postgres is shared by every test here, so it is not restarted: svc reaches it through a
    // proxy that drops every connection and refuses new ones, which is what a restart (or a
    // failover) looks like from svc.
    let db = svc_store::testing::TestDatabase::new(svc_store::Backend::Postgres).await;
    let mut url = url::Url::parse(&db.url).expect("url");
    let postgres: std::net::SocketAddr =
        format!("{}:{}", url.host_str().expect("host"), url.port().unwrap_or(5432)).parse().expect("address");
    let proxy = svc_testkit::fault_proxy::FaultProxy::start(postgres).await;
    url.set_port(Some(proxy.addr().port())).expect("port");
    let world = World::start_on("postgres-restart", Flavor::OpenAi, &[], Some(url.as_str())).await;
    let reply = "Noted, your order is safe with me.";
    world.fake.queue([Reply::Speak(reply.into())]);

    // Twenty live sessions with nobody in their rooms, and one with a client who talks.
    let quiet: Vec<String> = (0..20).map(|_| start_unjoined(&world)).collect();
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let cue = world.dir.join("postgres-restart.cue");
    let cue_arg = cue.to_string_lossy().into_owned();
    let question = "Please remember my order.";
    let run = world.client_with("talker", "turn_on_cue", config, &["--text", question, "--cue-file", &cue_arg]);
    run.mark("ready", Duration::from_secs(40)).await;

    // The restart: the client's turn and its end happen while the database is away.
    proxy.refuse_new(true);
    proxy.sever();
    let down = Instant::now();
    std::fs::write(&cue, b"go").expect("cue");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, _) = world.get_raw("/healthz");
    assert_eq!(status, 503, "the health check sees the database away");
    let (status, refused) = world.post("/realtime/session/start", &start_body());
    assert_eq!(status, 503, "a start needs the database: {refused}");
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(down.elapsed())).await;
    proxy.refuse_new(false);
    let outage = down.elapsed();
    let result = run.finish(&world, Duration::from_secs(60)).await;
    assert!(!events(&result, "turn-complete").is_empty(), "the session talked on: {}", result["observations"]);
    assert_eq!(result["observations"]["ended"]["reason"], "client_ended", "{}", result["observations"]);

    // What the talker said and heard during the outage is stored once, and its end too.
    let talker = session_id(&result);
    let deadline = Instant::now() + Duration::from_secs(20);
    while world.get_json(&format!("/sessions/{talker}"))["status"] == "active" {
        assert!(Instant::now() < deadline, "the end written during the outage never landed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let session = world.get_json(&format!("/sessions/{talker}"));
    assert_eq!(session["status"], "completed", "{session}");
    let turns = stored_turns(&world, &talker);
    assert_eq!(turns, [format!("user: {question}"), format!("assistant: {reply}")], "each turn stored once");
    let timeline = world.get_json(&format!("/sessions/{talker}/timeline"));
    let events = timeline["events"].as_array().expect("events");
    assert!(events.iter().enumerate().all(|(n, e)| e["seq"] == n), "gap-free: {timeline}");
    for kind in ["session.started", "agent.joined", "provider.ready", "session.ended"] {
        let count = events.iter().filter(|e| e["type"] == kind).count();
        assert_eq!(count, 1, "{kind} stored once: {timeline}");
    }
    // The twenty ran on through the outage and wrote nothing twice.
    for id in &quiet {
        let session = world.get_json(&format!("/sessions/{id}"));
        assert_eq!(session["status"], "active", "{session}");
        let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
        let ready = timeline["events"].as_array().into_iter().flatten().filter(|e| e["type"] == "provider.ready");
        assert_eq!(ready.count(), 1, "{timeline}");
    }
    eprintln!("postgres restart: {outage:?} away under 21 live sessions; the talker's turn and end stored once");
}

/// How one spoken turn fared on an impaired media path.
struct ImpairedTurn {
    /// The microphone at the provider (correlation).
    mic_at_provider: f64,
    /// The provider's voice at the client (correlation).
    voice_at_client: f64,
    /// Datagrams client → room and room → client: (received, lost).
    up: (u64, u64),
    down: (u64, u64),
    /// What the room and session counted (the `session.ended` entry's `media`).
    media: Value,
}

/// What the link does once the user starts speaking.
#[derive(Default)]
struct Plan {
    /// Applied both ways.
    impair: svc_testkit::udp_link::Impairment,
    /// Cleared again after this long (else at the end of the turn).
    clear_after: Option<Duration>,
    /// The path changes after this long.
    change_path_after: Option<Duration>,
}

/// One spoken turn through `link`, with `plan` carried out from the moment the user starts
/// speaking.
async fn impaired_turn(world: &World, link: &svc_testkit::udp_link::UdpLink, name: &str, plan: Plan) -> ImpairedTurn {
    let reply = "Nice to hear from you today.";
    world.fake.queue([Reply::Speak(reply.into())]);
    let connection = world.fake.connections().len();
    let before = link.counts();
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let run = world.client_with(name, "spoken_turn", config, &[]);
    run.mark("speaking", Duration::from_secs(30)).await;
    link.set_both(plan.impair);
    if let Some(after) = plan.change_path_after {
        tokio::time::sleep(after).await;
        link.change_path();
    }
    if let Some(after) = plan.clear_after {
        tokio::time::sleep(after).await;
        link.set_both(svc_testkit::udp_link::Impairment::default());
    }
    let result = run.finish(world, Duration::from_secs(60)).await;
    link.set_both(svc_testkit::udp_link::Impairment::default());
    let after = link.counts();
    let mic_at_provider = correlation(&mic_pcm(), 48_000, &fake_audio(&world.fake, connection), 24_000);
    let spoken = svc_testkit::speech::speech(reply, 24_000);
    let voice_at_client = correlation(&spoken, 24_000, &agent_recording(&result), 48_000);
    let id = session_id(&result);
    let media = world.assert_no_input_dropped(&id).await;
    ImpairedTurn {
        mic_at_provider,
        voice_at_client,
        up: (after.0.received - before.0.received, after.0.lost - before.0.lost),
        down: (after.1.received - before.1.received, after.1.lost - before.1.lost),
        media,
    }
}

/// A world whose room binds 127.0.0.1 and advertises 127.0.0.2 (a 1:1 NAT), where a UDP link
/// seeded with `seed` listens: the PyPI client's media crosses it both ways, its signalling does
/// not.
async fn world_behind_a_link(test: &'static str, seed: u64) -> (World, svc_testkit::udp_link::UdpLink) {
    let world = World::start(test, Flavor::OpenAi, &["--room-node-ip", "127.0.0.1=127.0.0.2"]).await;
    let advertised: std::net::SocketAddr =
        world.server.room_udp.as_deref().expect("the room's UDP address").parse().expect("address");
    assert_eq!(advertised.ip().to_string(), "127.0.0.2", "the room advertises the public address");
    let bound = std::net::SocketAddr::new([127, 0, 0, 1].into(), advertised.port());
    let link = svc_testkit::udp_link::UdpLink::start(advertised, bound, seed)
        .await
        .expect("the link binds the public address");
    (world, link)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_lossy_jittery_or_moved_media_path_keeps_the_conversation_intelligible() {
    use svc_testkit::udp_link::Impairment;
    let (world, link) = world_behind_a_link("media-path", 25).await;

    let clean = impaired_turn(&world, &link, "clean", Plan::default()).await;
    let jittery =
        Impairment { loss: 0.05, delay: Duration::from_millis(20), jitter: Duration::from_millis(60), duplicate: 0.01 };
    let random = impaired_turn(&world, &link, "random-loss", Plan { impair: jittery, ..Plan::default() }).await;
    let burst = Plan {
        impair: Impairment { loss: 0.2, ..Impairment::default() },
        clear_after: Some(Duration::from_secs(1)),
        ..Plan::default()
    };
    let burst = impaired_turn(&world, &link, "burst-loss", burst).await;
    let change = Plan { change_path_after: Some(Duration::from_millis(1500)), ..Plan::default() };
    let moved = impaired_turn(&world, &link, "path-change", change).await;
    for (name, turn) in [
        ("clean", &clean),
        ("5 % loss, 20–80 ms delay, 1 % duplicates", &random),
        ("20 % loss for 1 s", &burst),
        ("the path changes mid-speech", &moved),
    ] {
        eprintln!(
            "media path, {name}: mic→provider {:.3}, provider→client {:.3}; up {}/{} lost, down {}/{} lost; media {}",
            turn.mic_at_provider, turn.voice_at_client, turn.up.1, turn.up.0, turn.down.1, turn.down.0, turn.media
        );
    }
    assert!(clean.mic_at_provider >= 0.9 && clean.voice_at_client >= 0.9, "the clean path is clean");
    assert!(random.up.1 > 0 && random.down.1 > 0, "the random path lost datagrams both ways");
    // What the network lost of the user's voice the session filled in (FEC or concealment) and
    // says so; the packets the jitter reordered the room put back in order (none dropped late).
    let network = &random.media["input_network"];
    assert!(network["concealed_ms"].as_u64().unwrap_or(0) > 0, "{}", random.media);
    assert_eq!(network["dropped_late"], 0, "{}", random.media);
    // And /metrics sums what the ended sessions concealed.
    let (status, metrics) = world.get_raw("/metrics");
    assert_eq!(status, 200);
    let metrics = String::from_utf8_lossy(&metrics);
    let concealed = metrics.lines().find_map(|line| line.strip_prefix("svc_session_input_concealed_ms_total "));
    assert!(concealed.and_then(|ms| ms.parse::<u64>().ok()).is_some_and(|ms| ms > 0), "{metrics}");
    assert!(burst.up.1 > 0 && burst.down.1 > 0, "the burst lost datagrams both ways");
    for (name, turn) in [("random", &random), ("burst", &burst)] {
        assert!(turn.mic_at_provider >= 0.8, "{name}: the microphone at the provider {:.3}", turn.mic_at_provider);
        assert!(turn.voice_at_client >= 0.8, "{name}: the voice at the client {:.3}", turn.voice_at_client);
    }
    // A path change (the client's address as the room sees it moves: a NAT rebinding): both
    // ways are lost until the client's next check from the new address (libwebrtc sends one
    // every 2.5 s), then the room follows it, and the agent's reply, which comes after the
    // user's speech, reaches the client in full.
    assert!(moved.mic_at_provider >= 0.5, "moved: the microphone at the provider {:.3}", moved.mic_at_provider);
    assert!(moved.voice_at_client >= 0.8, "moved: the voice at the client {:.3}", moved.voice_at_client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_client_whose_network_changes_reconnects_by_itself_and_the_same_session_answers() {
    use svc_testkit::fault_proxy::FaultProxy;
    // The client's signalling crosses a TCP proxy and its media a UDP link: a network change
    // (Wi-Fi to cellular) cuts the one and moves the other at once.
    let (world, link) = world_behind_a_link("network-change", 31).await;
    let signal = FaultProxy::start(world.listen.parse().expect("svc's address")).await;
    world.fake.queue([Reply::Speak("Nice to hear from you.".into()), Reply::Speak("And you are back.".into())]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let via = signal.addr().to_string();
    let run = world.client_with("network-change", "network_change", config, &["--signal-via", &via]);
    run.mark("talked", Duration::from_secs(60)).await;
    let changed = Instant::now();
    signal.sever();
    link.change_path();
    let result = run.finish(&world, Duration::from_secs(90)).await;
    let observations = &result["observations"];
    let id = session_id(&result);
    eprintln!(
        "network change: the SDK's reconnects {} (reconnected {} ms after the turn; test clock {:?}); ended {}",
        observations["reconnects"],
        observations["reconnected_after_ms"],
        changed.elapsed(),
        observations["ended"]
    );
    assert_eq!(observations["answered_after_reconnect"], true, "the same session answered after the change");
    assert_eq!(observations["ended"]["reason"], "client_ended", "{}", observations["ended"]);
    assert!(signal.accepted() >= 2, "the SDK came back through the proxy");
    // Both answers stored once, on the one session.
    let stored = stored_turns(&world, &id);
    let answers = stored.iter().filter(|turn| turn.starts_with("assistant:")).count();
    assert_eq!(answers, 2, "{stored:?}");
    world.assert_no_input_dropped(&id).await;
}
