//! The TypeScript SDK (`sdk/js`) and the playground `svc serve` embeds, in headless Chromium,
//! against the real `svc serve` on a loopback address (so it keeps the `dev` workspace) and the
//! scripted fake provider. The browser side is `sdk/js/test/browser/drive.mjs`; this file starts
//! the world, scripts the fake, and judges what the browser reports, what the provider received
//! and what svc stored.
//!
//! Ignored by default (they need Chromium and `sdk/js`'s npm packages, which `scripts/test.sh`
//! installs); one at a time, like every real-time media test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Server, kill_group};
use svc_testkit::{FAKE_API_KEY, FakeUpstream, Flavor, Reply};

mod support;

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const SETUP_HINT: &str = "run scripts/test.sh (it installs Chromium, the test speech and sdk/js's packages)";

fn repo() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    repo.canonicalize().unwrap_or(repo)
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

struct World {
    dir: PathBuf,
    fake: FakeUpstream,
    server: Server,
    base_url: String,
    _data_dir: tempfile::TempDir,
    _guard: tokio::sync::MutexGuard<'static, ()>,
}

impl World {
    async fn start(test: &str) -> World {
        let guard = ONE_AT_A_TIME.lock().await;
        let repo = repo();
        for path in
            ["sdk/js/node_modules/playwright-core", "sdk/js/node_modules/esbuild", "target/interop/audio/caller.wav"]
        {
            assert!(repo.join(path).exists(), "{path} is missing: {SETUP_HINT}");
        }
        let dir = repo.join("target/e2e").join(test);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("run directory");
        let fake = FakeUpstream::start(Flavor::OpenAi).await;
        let data_dir = tempfile::tempdir().expect("tempdir");
        let listen = format!("127.0.0.1:{}", free_port());
        let base_url = format!("http://{listen}");
        let env = [
            ("OPENAI_API_KEY", FAKE_API_KEY.to_owned()),
            ("OPENAI_BASE_URL", fake.openai_base_url()),
            ("GEMINI_API_KEY", FAKE_API_KEY.to_owned()),
            ("GOOGLE_GEMINI_BASE_URL", fake.gemini_base_url()),
        ];
        let public = base_url.clone();
        let server = Server::start_in(dir.join("svc.log"), data_dir.path(), &listen, move |command| {
            command.envs(env).args(["--public-url", &public]);
        });
        World { dir, fake, server, base_url, _data_dir: data_dir, _guard: guard }
    }

    /// Runs the browser driver on `scenario` and returns its report.
    async fn drive(&self, scenario: &str, args: &[&str]) -> Value {
        let repo = repo();
        let out = self.dir.join(format!("{scenario}.json"));
        let log = self.dir.join(format!("{scenario}.browser.log"));
        let mut command = Command::new("node");
        command
            .current_dir(repo.join("sdk/js"))
            .arg("test/browser/drive.mjs")
            .args(["--scenario", scenario, "--timeout", "100", "--out"])
            .arg(&out)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .process_group(0);
        let mut child = command.spawn().expect("spawn the browser driver");
        let started = Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if started.elapsed() > Duration::from_secs(120) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        kill_group(&mut child);
        let report: Value = std::fs::read(&out)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_else(|| json!({"ok": false, "failure": "no report"}));
        let browser_log = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = browser_log.lines().rev().take(40).collect();
        assert!(
            report["ok"] == true,
            "{scenario}: {}\nobservations: {}\nbrowser log (last lines):\n{}\nsvc log:\n{}",
            report["failure"],
            support::clip(&report["observations"].to_string(), 6000),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            self.server.log_tail(40)
        );
        report
    }

    /// GET with an optional Bearer key and extra headers; (status, headers, body).
    fn get(&self, path: &str, key: Option<&str>, headers: &[(&str, &str)]) -> (u16, String, Value) {
        let listen = self.base_url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(listen).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: {listen}\r\n"));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(key) = key {
            request.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).expect("write");
        let mut response = Vec::new();
        stream.read_to_end(&mut response).expect("read");
        let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("headers") + 4;
        let head = String::from_utf8_lossy(&response[..split]).to_string();
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status");
        let body = serde_json::from_slice(&response[split..]).unwrap_or(Value::Null);
        (status, head, body)
    }

    fn dev_key(&self) -> String {
        let (status, _, body) = self.get("/playground/credential", None, &[]);
        assert_eq!(status, 200, "{body}");
        body["api_key"].as_str().expect("api_key").to_owned()
    }

    fn get_json(&self, path: &str, key: &str) -> Value {
        let (status, _, body) = self.get(&format!("/api/v1/external{path}"), Some(key), &[]);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
}

/// The test speech with four seconds of silence in front, so the user speaks after the greeting.
fn late_speech(dir: &Path) -> PathBuf {
    let wav = svc_audio::wav::read_wav_file(repo().join("target/interop/audio/caller.wav")).expect("caller.wav");
    let mut samples = vec![0_i16; wav.sample_rate as usize * 4 * usize::from(wav.channels)];
    samples.extend_from_slice(&wav.samples);
    let path = dir.join("late-speech.wav");
    svc_audio::wav::write_wav_file(&path, wav.sample_rate, wav.channels, &samples).expect("write the WAV");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and sdk/js's packages; run by scripts/test.sh"]
async fn a_person_talks_to_an_agent_in_the_playground() {
    let world = World::start("playground").await;
    let greeting = "Hello from the agent.";
    let spoken_reply = "I heard every word you said.";
    let tool_reply = "Your order ships on Friday.";
    world.fake.queue([
        Reply::Speak(greeting.into()),
        Reply::Speak(spoken_reply.into()),
        Reply::ToolCall { name: "lookup_order".into(), arguments: json!({"order_id": "42"}) },
        Reply::Speak(tool_reply.into()),
    ]);
    let mic = late_speech(&world.dir);
    let shot = world.dir.join("playground.png");
    let url = format!("{}/", world.base_url);
    let report = world
        .drive(
            "playground",
            &["--url", &url, "--mic", mic.to_str().expect("path"), "--screenshot", shot.to_str().expect("path")],
        )
        .await;
    let page = &report["observations"]["page"];
    eprintln!("playground: figures {}", page["figures"]);

    // Signed in with the dev workspace's key, and every provider offered (the fake configures all).
    assert!(report["observations"]["credential_source"].as_str().unwrap_or("").contains("\"dev\" workspace"));
    let assistant: Vec<&str> = page["transcript"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|turn| turn["role"] == "ASSISTANT" && turn["final"] == "true")
        .filter_map(|turn| turn["text"].as_str())
        .collect();
    assert_eq!(assistant, [greeting, spoken_reply, tool_reply], "the page's transcript: {}", page["transcript"]);
    let user: Vec<&Value> =
        page["transcript"].as_array().into_iter().flatten().filter(|t| t["role"] == "USER").collect();
    assert!(user.iter().any(|t| t["text"] == "Where is my order 42?"), "the typed turn: {user:?}");
    assert!(user.len() >= 2, "the spoken turn and the typed one: {user:?}");
    assert!(
        page["transcript"].as_array().into_iter().flatten().all(|t| t["final"] == "true"),
        "fragments were replaced by finals"
    );

    // The event log shows frames both ways, the tool answered by the page.
    let log = page["log"].as_array().expect("log").iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n");
    // Nothing goes out before readiness (spec): the first message sent is `bind-input`, after it.
    let ready_at = log.find("\"type\":\"sdk.ready\"").expect("readiness latched");
    let first_sent = log.find("→ {").expect("messages were sent");
    assert!(ready_at < first_sent, "a message went out before readiness:\n{log}");
    assert!(log[first_sent..].starts_with("→ {\"type\":\"bind-input\"}"), "bind-input comes first");
    for needle in [
        "← {\"type\":\"ready\"",
        "→ {\"type\":\"bind-input\"}",
        "→ {\"type\":\"connect-timings\"",
        "\"type\":\"tool-invocation\"",
        "\"type\":\"sdk.tool-answered\",\"request_id\"",
        "→ {\"type\":\"mute\",\"muted\":true}",
        "→ {\"type\":\"send-text\"",
        "→ {\"type\":\"end\"}",
    ] {
        assert!(log.contains(needle), "the event log has {needle}");
    }
    let outputs = world.fake.frames("conversation.item.create");
    let answered = outputs
        .iter()
        .map(|r| &r.message["item"])
        .find(|item| item["type"] == "function_call_output")
        .expect("the page's tool result reached the model");
    assert_eq!(
        serde_json::from_str::<Value>(answered["output"].as_str().unwrap_or("")).ok(),
        Some(json!({"status": "shipped", "eta": "Friday"}))
    );

    // The figures people compare: connect timings and per-turn latency, measured in the page.
    let figures = &page["figures"];
    assert!(figures["connect"].as_str().unwrap_or("").contains("ready"), "{figures}");
    assert!(figures["turns"].as_str().unwrap_or("").contains("median"), "{figures}");
    assert!(page["state"].as_str().unwrap_or("").contains("client_ended"), "{}", page["state"]);
    assert!(figures["usage"].as_str().unwrap_or("").starts_with("recorded"), "final usage: {figures}");

    // History: the session, its stored transcript and its recording, read back in the page.
    let id = figures["session"].as_str().expect("session id");
    assert_eq!(page["history"][0], id, "the newest session heads the history");
    // Right after End, the page shows the session as it is stored: ended, its id, marked as the
    // one just held; the agent no longer listens; an end by the user is no failure.
    let after_end = &report["observations"]["after_end"];
    let newest = after_end["history"][0].as_str().unwrap_or("");
    assert!(!newest.contains("live") && newest.contains("completed"), "history right after End: {newest}");
    assert!(newest.contains(id) && newest.contains("this session"), "{newest}");
    assert_eq!(page["history_current"][0], "true");
    assert_eq!(after_end["agent"], "agent: idle");
    assert_eq!((page["state_failed"].clone(), page["banner"].clone()), (json!("false"), json!("")));
    // A page that works logs no error: no 404 for the icon, no refused `/rtc/v1` probe (which
    // would also put the room token into the console).
    assert_eq!(report["observations"]["console_errors"], json!([]), "console errors");
    let stored: Vec<&str> =
        page["detail_transcript"].as_array().into_iter().flatten().filter_map(|t| t["text"].as_str()).collect();
    assert!(
        stored.contains(&spoken_reply) && stored.contains(&"Where is my order 42?"),
        "stored transcript: {stored:?}"
    );
    assert_eq!(page["detail_recording"], true, "the recording plays in the page");
    assert!(page["detail_timeline"].as_u64().unwrap_or(0) > 5);
    // The microphone reached the provider: over a second of loud audio (speech) at 24 kHz.
    let heard = world.fake.audio().first().map_or(0, |pcm| pcm.iter().filter(|s| s.unsigned_abs() > 1000).count());
    assert!(heard > 24_000, "the page's microphone audio went upstream: {heard} loud samples");
    assert!(shot.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and sdk/js's packages; run by scripts/test.sh"]
async fn the_sdk_speaks_the_whole_protocol_from_another_origin() {
    let world = World::start("sdk").await;
    let note = "x".repeat(20_000);
    world.fake.queue([
        Reply::Speak("Hello from the agent.".into()),
        Reply::ToolCall { name: "get_time".into(), arguments: json!({}) },
        Reply::Speak("It is noon.".into()),
        Reply::ToolCall { name: "lookup_order".into(), arguments: json!({"order_id": "42", "note": note}) },
        Reply::Speak("I am checking.".into()),
        Reply::Speak("Order 42 has shipped.".into()),
    ]);
    let key = world.dev_key();
    let mic = repo().join("target/interop/audio/caller.wav");
    let report = world
        .drive("sdk", &["--base-url", &world.base_url, "--api-key", &key, "--mic", mic.to_str().expect("path")])
        .await;
    let sdk = &report["observations"]["sdk"];
    eprintln!(
        "sdk: connect timings {}, ping {} ms, turn latencies {}",
        sdk["connect_timings"], sdk["ping_rtt_ms"], sdk["turn_latencies"]
    );
    assert_eq!(sdk["error"], Value::Null, "{sdk}");

    // Readiness latched, once, with the whole payload; lifecycle walked the spec's states.
    let id = sdk["session_id"].as_str().expect("session id");
    assert_eq!(sdk["readiness"]["event"]["session_id"], id);
    assert_eq!(sdk["readiness"]["complete"], true);
    assert_eq!(
        sdk["state_after_start"],
        json!({"kind": "connected", "transport": "ready", "reason": null, "detail": null})
    );
    let kinds: Vec<&str> =
        sdk["states"].as_array().expect("states").iter().filter_map(|s| s["kind"].as_str()).collect();
    let mut walked = kinds.clone();
    walked.dedup();
    assert_eq!(walked, ["connecting", "connected", "disconnected"], "{kinds:?}");
    assert_eq!(sdk["final_state"]["reason"], "client_ended");
    let transports: Vec<&str> =
        sdk["states"].as_array().expect("states").iter().filter_map(|s| s["transport"].as_str()).collect();
    // Listen-only: no microphone permission to ask for.
    assert_eq!(transports, ["connecting", "connected", "ready", "disconnecting", "disconnected"]);
    assert!(
        sdk["agent_states"].as_array().expect("agent states").iter().any(|s| s == "speaking"),
        "{}",
        sdk["agent_states"]
    );

    // Conversation: four assistant turns; the tools answered (a background job for lookup_order,
    // whose 20 KB arguments came in chunks).
    assert_eq!(
        sdk["assistant_finals"],
        json!(["Hello from the agent.", "It is noon.", "I am checking.", "Order 42 has shipped."])
    );
    assert_eq!(sdk["tool_args"], json!([{}, {"order_id": "42", "note_length": 20_000}]));
    assert!(
        sdk["tool_answers"].as_array().expect("answers").iter().all(|a| a["ok"] == true),
        "{}",
        sdk["tool_answers"]
    );
    let outputs = world.fake.frames("conversation.item.create");
    let call_outputs: Vec<Value> = outputs
        .iter()
        .map(|r| &r.message["item"])
        .filter(|item| item["type"] == "function_call_output")
        .filter_map(|item| serde_json::from_str(item["output"].as_str().unwrap_or("")).ok())
        .collect();
    assert_eq!(call_outputs[0], json!({"time": "noon"}));
    assert_eq!(call_outputs[1]["status"], "started");
    let upstream = world.fake.received().iter().map(|r| r.message.to_string()).collect::<Vec<_>>().join("\n");
    assert!(upstream.contains("Order 42 has shipped."), "the job's summary reached the model");
    assert!(upstream.contains("The user prefers short answers."), "send-context reached the model");
    let longest_text = world
        .fake
        .received()
        .iter()
        .filter_map(|r| r.message.pointer("/item/content/0/text").and_then(Value::as_str).map(str::len))
        .max()
        .unwrap_or(0);
    assert_eq!(longest_text, 50_000, "the 50 KB send-text crossed in envelope chunks");

    // What the client sent, the keepalive, and the bounded stream.
    let sent: Vec<&str> = sdk["sent_types"].as_array().expect("sent").iter().filter_map(Value::as_str).collect();
    for kind in ["connect-timings", "send-text", "tool_job_result", "send-context", "mute", "end"] {
        assert!(sent.contains(&kind), "sent {kind}: {sent:?}");
    }
    assert!(!sent.contains(&"bind-input"), "a listen-only client never binds");
    assert!(sdk["ping_rtt_ms"].as_f64().is_some(), "the keepalive got a pong");
    assert_eq!(sdk["streamed"], sdk["emitted"], "the stream saw every event");
    assert_eq!(sdk["dropped"], 0);
    assert_eq!(sdk["unknown"], json!([]));

    // What svc stored: the SDK's identity, the connect timings, a completed session.
    let timeline = world.get_json(&format!("/sessions/{id}/timeline"), &key);
    let events = timeline["events"].as_array().expect("events");
    let timings = events.iter().find(|e| e["type"] == "client.connect_timings").expect("connect timings stored");
    for field in ["request_ms", "room_ms", "ready_ms", "server"] {
        assert!(!timings["data"][field].is_null(), "connect-timings.{field}: {timings}");
    }
    assert_eq!(world.get_json(&format!("/sessions/{id}"), &key)["status"], "completed");
    let log = world.server.log_tail(400);
    assert!(!log.contains("sdk_unsupported"), "the SDK's stamp was accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and sdk/js's packages; run by scripts/test.sh"]
async fn the_sdk_sends_nothing_before_the_agent_is_ready() {
    let world = World::start("sdk-unready").await;
    // The upstream takes the connection and never answers: the agent never gets ready.
    world.fake.stall_new_connections(true);
    let key = world.dev_key();
    let mic = repo().join("target/interop/audio/caller.wav");
    let report = world
        .drive("sdk-unready", &["--base-url", &world.base_url, "--api-key", &key, "--mic", mic.to_str().expect("path")])
        .await;
    let sdk = &report["observations"]["sdk"];
    assert_eq!(sdk["microphone_opened"], true, "the microphone was there to bind: {sdk}");
    assert!(sdk["error"].as_str().unwrap_or("").starts_with("no ready within"), "{sdk}");
    assert_eq!(sdk["final_state"]["reason"], "handshake_failed");
    // The spec: after joining, the client waits for readiness before its first send.
    assert_eq!(sdk["sent_types"], json!([]), "{sdk}");
    let id = sdk["session_id"].as_str().expect("the session started");
    let timeline = world.get_json(&format!("/sessions/{id}/timeline"), &key);
    let events = timeline["events"].as_array().expect("events");
    assert!(events.iter().any(|e| e["type"] == "participant.joined"), "{timeline}");
    // The agent followed the first publisher on its own; no `bind-input` made it sticky.
    let bound: Vec<&Value> = events.iter().filter(|e| e["type"] == "input.bound").collect();
    assert!(!bound.is_empty() && bound.iter().all(|e| e["data"]["sticky"] == false), "{bound:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the test harness; run by scripts/test.sh"]
async fn the_development_credential_is_for_loopback_pages_only() {
    let world = World::start("dev-credential").await;
    let key = world.dev_key();
    // It is a real key of the `dev` workspace, with the playground's scopes.
    let verified = world.get_json("/realtime/verify", &key);
    assert_eq!(verified["workspace"]["slug"], "dev");
    assert_eq!(verified["can_start_sessions"], true);
    // Not to a DNS-rebinding page (another host name), not to another local origin.
    let (status, _, _) = world.get("/playground/credential", None, &[("Host", "rebind.example:80")]);
    assert_eq!(status, 404);
    let (status, _, _) = world.get("/playground/credential", None, &[("Origin", "http://127.0.0.1:1")]);
    assert_eq!(status, 404);
    // provider_local's install status, for the page's install button: loopback pages only.
    let (status, _, models) = world.get("/playground/local-models", None, &[]);
    assert_eq!(status, 200);
    assert_eq!((models["installed"].clone(), models["install"]["state"].clone()), (json!(false), json!("idle")));
    assert!(models["missing"].as_str().is_some_and(|m| m.contains("svc models install")), "{models}");
    let (status, _, _) = world.get("/playground/local-models", None, &[("Origin", "http://127.0.0.1:1")]);
    assert_eq!(status, 404);
    // Its icon, where browsers look for one.
    for path in ["/favicon.ico", "/playground/favicon.svg"] {
        let (status, head, _) = world.get(path, None, &[]);
        assert_eq!(status, 200, "{path}");
        assert!(head.to_ascii_lowercase().contains("content-type: image/svg+xml"), "{head}");
    }
    // The page itself, with its security headers.
    let (status, head, _) = world.get("/", None, &[]);
    assert_eq!(status, 200);
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("content-security-policy: default-src 'self'") && head.contains("x-frame-options: deny"),
        "{head}"
    );
    // The API answers browsers from any origin, without credentials mode.
    let (status, head, _) =
        world.get("/api/v1/external/realtime/verify", Some(&key), &[("Origin", "https://app.example")]);
    assert_eq!(status, 200);
    assert!(head.to_ascii_lowercase().contains("access-control-allow-origin: *"), "{head}");
    // The log says so, with the playground's URL.
    let log = world.server.log_tail(200);
    assert!(log.contains("dev workspace: the playground signs in"), "{log}");
    assert!(log.contains(&format!("playground: {}/", world.base_url)), "{log}");
}
