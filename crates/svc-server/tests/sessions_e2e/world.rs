//! The harness of the end-to-end sessions: `svc serve` with a scripted fake provider, the
//! official PyPI `livekit` client (tests/e2e/session_client.py) or the browser, and the helpers
//! that judge what they heard and what svc stored.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_audio::analysis::aligned_correlation;
use svc_audio::resample::Resampler;
use svc_testkit::{FAKE_API_KEY, FakeUpstream, Flavor, Reply};

use crate::support::{Server, clip, kill_group, svc};

/// Real-time media tests share two cores with the build: one at a time.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
pub(crate) const SETUP_HINT: &str = "run scripts/interop-setup.sh (scripts/test.sh does) to install the test harness";
/// What the microphone says (48 kHz espeak speech, made by the setup script).
pub(crate) const MIC_WAV: &str = "target/interop/audio/caller.wav";

pub(crate) fn repo() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    repo.canonicalize().unwrap_or(repo)
}

pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// One test's world: the fake provider, `svc serve` pointed at it, and an API key.
pub(crate) struct World {
    pub(crate) test: &'static str,
    pub(crate) dir: PathBuf,
    pub(crate) fake: FakeUpstream,
    pub(crate) server: Server,
    pub(crate) base_url: String,
    pub(crate) key: String,
    pub(crate) data_dir: tempfile::TempDir,
    pub(crate) listen: String,
    pub(crate) server_env: Vec<(String, String)>,
    pub(crate) server_args: Vec<String>,
    pub(crate) _guard: tokio::sync::MutexGuard<'static, ()>,
}

/// `svc serve` over `data_dir` on `listen`, with the fake provider's environment and `args`.
pub(crate) fn start_server(
    log: &Path,
    data_dir: &Path,
    listen: &str,
    env: &[(String, String)],
    args: &[String],
) -> Server {
    let env = env.to_vec();
    let args = args.to_vec();
    Server::start_in(log.to_owned(), data_dir, listen, move |command| {
        command.envs(env).args(args);
    })
}

impl World {
    pub(crate) async fn start(test: &'static str, flavor: Flavor, extra: &[&str]) -> World {
        World::start_on(test, flavor, extra, None).await
    }

    /// [`World::start`] on the database at `database_url` (Postgres) instead of SQLite in the
    /// data directory.
    pub(crate) async fn start_on(
        test: &'static str,
        flavor: Flavor,
        extra: &[&str],
        database_url: Option<&str>,
    ) -> World {
        let guard = ONE_AT_A_TIME.lock().await;
        let repo = repo();
        for path in ["target/interop/venv/bin/python", MIC_WAV] {
            assert!(repo.join(path).exists(), "{path} is missing: {SETUP_HINT}");
        }
        let dir = repo.join("target/e2e").join(test);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("run directory");
        let fake = FakeUpstream::start(flavor).await;
        let data_dir = tempfile::tempdir().expect("tempdir");
        let listen = format!("127.0.0.1:{}", free_port());
        let public = format!("http://{listen}");
        let database: Vec<(String, String)> =
            database_url.map(|url| ("SVC_DATABASE_URL".to_owned(), url.to_owned())).into_iter().collect();
        let admin = |args: &[&str]| {
            let output = svc(data_dir.path())
                .envs(database.iter().cloned())
                .args(["--public-url", &public])
                .args(args)
                .output()
                .expect("run svc");
            assert!(output.status.success(), "svc {args:?}: {}", String::from_utf8_lossy(&output.stderr));
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        };
        admin(&["workspace", "create", "--slug", "e2e", "--name", "E2E"]);
        let key = admin(&[
            "key",
            "create",
            "--workspace",
            "e2e",
            "--scope",
            "realtime:start",
            "--scope",
            "realtime:read",
            "--scope",
            "realtime:logs",
            "--scope",
            "realtime:delete",
            "--scope",
            "realtime:dial",
        ]);
        let mut server_env = database.clone();
        server_env.extend([
            ("OPENAI_API_KEY".to_owned(), FAKE_API_KEY.to_owned()),
            ("OPENAI_BASE_URL".to_owned(), fake.openai_base_url()),
            ("XAI_API_KEY".to_owned(), FAKE_API_KEY.to_owned()),
            ("XAI_BASE_URL".to_owned(), fake.openai_base_url()),
            ("GEMINI_API_KEY".to_owned(), FAKE_API_KEY.to_owned()),
            ("GOOGLE_GEMINI_BASE_URL".to_owned(), fake.gemini_base_url()),
        ]);
        let mut args: Vec<String> = vec!["--public-url".into(), public, "--server-tools".into()];
        args.push("end_call,speaker_log,examine_image".into());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let server = start_server(&dir.join("svc.log"), data_dir.path(), &listen, &server_env, &args);
        World {
            test,
            dir,
            fake,
            server,
            base_url: format!("http://{listen}"),
            key,
            data_dir,
            listen,
            server_env,
            server_args: args,
            _guard: guard,
        }
    }

    /// Kills `svc serve` with SIGKILL (a crash: nothing is cleaned up) and starts it again on the
    /// same data directory and port.
    pub(crate) fn crash_and_restart(&mut self) {
        self.server.kill_now();
        let log = self.dir.join("svc.restarted.log");
        self.server = start_server(&log, self.data_dir.path(), &self.listen, &self.server_env, &self.server_args);
    }

    /// Sends `svc serve` SIGTERM (an orderly shutdown, as a deploy or `systemctl stop` does) and
    /// returns when it was sent.
    pub(crate) fn terminate(&self) -> Instant {
        let asked = Instant::now();
        let signalled = Command::new("kill").args(["-TERM", &self.server.child.id().to_string()]).status();
        assert!(signalled.is_ok_and(|status| status.success()), "SIGTERM sent");
        asked
    }

    /// Waits for `svc serve`, sent SIGTERM at `asked`, to exit on its own, and starts it again on
    /// the same data directory and port. Returns how long the shutdown took.
    pub(crate) fn restart_after_exit(&mut self, asked: Instant) -> Duration {
        let exited = loop {
            if let Ok(Some(status)) = self.server.child.try_wait() {
                break status;
            }
            assert!(asked.elapsed() < Duration::from_secs(30), "svc did not stop within 30 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        let took = asked.elapsed();
        assert!(exited.success(), "svc exited {exited} after SIGTERM");
        let log = self.dir.join("svc.restarted.log");
        self.server = start_server(&log, self.data_dir.path(), &self.listen, &self.server_env, &self.server_args);
        took
    }

    /// Runs an admin command (`svc workspace …`) on the world's database.
    pub(crate) fn admin(&self, args: &[&str]) -> String {
        let database = self.server_env.iter().filter(|(name, _)| name == "SVC_DATABASE_URL").cloned();
        let output = svc(self.data_dir.path())
            .envs(database)
            .args(["--public-url", &self.base_url])
            .args(args)
            .output()
            .expect("run svc");
        assert!(output.status.success(), "svc {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// POST under `/api/v1/external` with the world's key.
    pub(crate) fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, bytes) =
            http(&self.server.listen, "POST", &format!("/api/v1/external{path}"), &self.key, Some(body));
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// Starts the client on `scenario` with the session config `config`.
    pub(crate) fn client(&self, scenario: &str, config: Value) -> ClientRun {
        self.client_with(scenario, scenario, config, &[])
    }

    /// [`World::client`] with a run name (several runs of one scenario) and extra arguments.
    pub(crate) fn client_with(&self, name: &str, scenario: &str, config: Value, extra: &[&str]) -> ClientRun {
        let repo = repo();
        let out = self.dir.join(format!("{name}.json"));
        let stderr = self.dir.join(format!("{name}.client.log"));
        let mut command = Command::new(repo.join("target/interop/venv/bin/python"));
        command
            .arg(repo.join("tests/e2e/session_client.py"))
            .args(["--base-url", &self.base_url, "--api-key", &self.key, "--scenario", scenario])
            .args(["--config", &config.to_string()])
            .arg("--mic")
            .arg(repo.join(MIC_WAV))
            .args(extra)
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .process_group(0);
        let mut child = command.spawn().expect("spawn the python client");
        let stdout = child.stdout.take().expect("stdout");
        let (marks, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(mark) = line.strip_prefix("@mark ") {
                    let _ = marks.send(mark.to_owned());
                }
            }
        });
        ClientRun { child, out, stderr, marks: received, started: Instant::now() }
    }

    /// Starts the browser client (livekit-client in Chromium, tests/interop/web/session.js) on
    /// the `conversation` scenario with the session config `config`.
    pub(crate) fn browser_client(&self, config: Value) -> ClientRun {
        let repo = repo();
        assert!(repo.join("tests/interop/web/dist/session.js").exists(), "the browser bundle is missing: {SETUP_HINT}");
        let out = self.dir.join("browser.json");
        let stderr = self.dir.join("browser.client.log");
        let mut command = Command::new("node");
        command
            .arg(repo.join("tests/interop/web/drive.mjs"))
            .args(["--session", "--base-url", &self.base_url, "--api-key", &self.key, "--timeout", "60"])
            .args(["--config", &config.to_string()])
            .arg("--python")
            .arg(repo.join("target/interop/venv/bin/python"))
            .arg("--publish-wav")
            .arg(repo.join(MIC_WAV))
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .process_group(0);
        let child = command.spawn().expect("spawn the browser driver");
        let (_, marks) = std::sync::mpsc::channel();
        ClientRun { child, out, stderr, marks, started: Instant::now() }
    }

    /// GET under `/api/v1/external` with the world's key.
    pub(crate) fn get(&self, path: &str) -> (u16, Vec<u8>) {
        http_get(&self.server.listen, &format!("/api/v1/external{path}"), &self.key)
    }

    /// GET of a path outside the API (`/healthz`).
    pub(crate) fn get_raw(&self, path: &str) -> (u16, Vec<u8>) {
        http_get(&self.server.listen, path, &self.key)
    }

    pub(crate) fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("json")
    }

    /// Polls the usage route until the numbers are final.
    pub(crate) async fn final_usage(&self, session_id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let usage = self.get_json(&format!("/sessions/{session_id}/usage"));
            if usage["usage_status"] != "pending" || Instant::now() > deadline {
                return usage;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The session's `session.ended` timeline entry says no user audio was dropped on its way to
    /// the provider (a failure names the queue that dropped it); returns the entry's `media`.
    pub(crate) async fn assert_no_input_dropped(&self, session_id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        let ended = loop {
            let timeline = self.get_json(&format!("/sessions/{session_id}/timeline"));
            let ended = timeline["events"].as_array().into_iter().flatten().find(|e| e["type"] == "session.ended");
            match ended {
                Some(ended) => break ended.clone(),
                None if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
                None => panic!("session {session_id} has no session.ended entry: {timeline}"),
            }
        };
        let media = ended["data"]["media"].clone();
        let dropped = &media["input_frames_dropped"];
        for queue in ["room_queue", "agent_queue", "provider_queue"] {
            assert_eq!(dropped[queue], 0, "user audio dropped at the {queue}: {media}");
        }
        media
    }

    pub(crate) fn failure_report(&self, result: &Value, run: &ClientRun) -> String {
        let types: Vec<String> = result["events"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| format!("{}@{}", e["type"].as_str().unwrap_or("?"), e["_t"]))
            .collect();
        let log = std::fs::read_to_string(&run.stderr).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        format!(
            "{}: client failure: {} {}\nevents: {}\nobservations: {}\nclient log (last lines):\n{}\nsvc log:\n{}\nall in {}",
            self.test,
            result["failure"],
            result["failures"],
            clip(&types.join(" "), 4000),
            clip(&result["observations"].to_string(), 3000),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            self.server.log_tail(60),
            self.dir.display()
        )
    }
}

pub(crate) struct ClientRun {
    pub(crate) child: Child,
    pub(crate) out: PathBuf,
    pub(crate) stderr: PathBuf,
    pub(crate) marks: std::sync::mpsc::Receiver<String>,
    pub(crate) started: Instant,
}

impl ClientRun {
    pub(crate) async fn mark(&self, name: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            match self.marks.try_recv() {
                Ok(mark) if mark == name => return,
                Ok(_) => {}
                Err(std::sync::mpsc::TryRecvError::Disconnected) => panic!("the client exited before `{name}`"),
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    assert!(Instant::now() < deadline, "the client did not reach `{name}` in {timeout:?}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    /// Waits for the client (killing it past `timeout`) and returns its result.
    pub(crate) async fn finish(mut self, world: &World, timeout: Duration) -> Value {
        while self.child.try_wait().ok().flatten().is_none() {
            if self.started.elapsed() > timeout {
                kill_group(&mut self.child);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = kill_group(&mut self.child);
        let result: Value = std::fs::read(&self.out)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_else(|| json!({"ok": false, "failure": "no result JSON", "events": [], "observations": {}}));
        assert!(result["ok"] == true, "{}", world.failure_report(&result, &self));
        result
    }
}

/// Waits up to 10 s for `room` to be gone from the LiveKit server that `api` calls.
pub(crate) async fn until_room_gone(api: &svc_room::server_api::ServerApi, room: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !api.list_rooms(vec![room.to_owned()]).await.expect("ListRooms").is_empty() {
        assert!(Instant::now() < deadline, "room {room} is still open on the LiveKit server");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) fn http_get(listen: &str, path: &str, key: &str) -> (u16, Vec<u8>) {
    http(listen, "GET", path, key, None)
}

pub(crate) fn http(listen: &str, method: &str, path: &str, key: &str, body: Option<&Value>) -> (u16, Vec<u8>) {
    http_on(TcpStream::connect(listen).expect("connect"), listen, method, path, key, body)
}

/// [`http`] over a connection opened earlier (one the server accepted before it ran out of file
/// descriptors, say).
pub(crate) fn http_on(
    mut stream: TcpStream,
    listen: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, Vec<u8>) {
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {listen}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read");
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("headers") + 4;
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status");
    let mut body = response[split..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    (status, body)
}

pub(crate) fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&body[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[end + 4 + size..];
    }
    out
}

pub(crate) fn read_wav(path: &Path) -> (Vec<i16>, u32, u16) {
    let wav = svc_audio::wav::read_wav_file(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    (wav.samples, wav.sample_rate, wav.channels)
}

pub(crate) fn resample(pcm: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to {
        return pcm.to_vec();
    }
    let mut resampler = Resampler::new(from, to).expect("resampler");
    let mut out = Vec::new();
    resampler.process(pcm, &mut out);
    resampler.flush(&mut out);
    out
}

/// How well `received` (at `received_rate`) contains `reference` (at `reference_rate`), all of
/// it, in order, tolerating the timing moves of a live path: [`aligned_correlation`] over 100 ms
/// windows at 16 kHz, each within 200 ms of the global delay, free to move 40 ms from one window
/// to the next.
///
/// Why each tolerance, from what the clients did:
/// - libwebrtc's capture in the PyPI client now and then sends 10 ms more or less than the file
///   holds, which moves everything after it by 10 ms; one global alignment then scores ~0.6
///   although every word arrived (seen: +10 ms at 1.75 s of the microphone, the rest intact at
///   0.95).
/// - Under load the client's jitter buffer stretches and shrinks its playout a few milliseconds at
///   a time, and over a reply the moves add up (seen: a full reply scored 0.89 against windows
///   tied to the global delay, on a machine busy with a release build).
/// - Its catch-ups drop a pitch period (8 ms) at a time: a complete reply scored 0.886 with
///   250 ms windows, 0.955 with 100 ms ones (stop 42's full run, analysed from its recordings).
/// - Under 20–80 ms of network jitter it conceals a late packet and plays the rest up to 80 ms
///   later: a step. Following the delay window by window within 40 ms loses it at such a step
///   and scores the rest of the reply as missing: a 50 ms step put into a clean recording took
///   it from 0.95 to 0.51 (0.95 now). CI once scored a jittery reply 0.587 that way, with svc's
///   counters clean and the link losing what it loses in passing runs (0.92–0.95).
pub(crate) fn correlation(reference: &[i16], reference_rate: u32, received: &[i16], received_rate: u32) -> f64 {
    const WINDOW: usize = 1_600; // 100 ms at 16 kHz
    const SLACK: usize = 640; // 40 ms
    const MAX_DRIFT: usize = 3_200; // 200 ms
    let reference = resample(reference, reference_rate, 16_000);
    let received = resample(received, received_rate, 16_000);
    aligned_correlation(&reference, &received, WINDOW, SLACK, MAX_DRIFT)
}

pub(crate) fn mic_pcm() -> Vec<i16> {
    let (pcm, rate, channels) = read_wav(&repo().join(MIC_WAV));
    assert_eq!((rate, channels), (48_000, 1));
    pcm
}

pub(crate) fn events<'a>(result: &'a Value, kind: &str) -> Vec<&'a Value> {
    result["events"].as_array().into_iter().flatten().filter(|e| e["type"] == kind).collect()
}

/// The text of each final assistant transcript the client saw, in order.
pub(crate) fn assistant_finals(result: &Value) -> Vec<&str> {
    events(result, "transcript")
        .into_iter()
        .filter(|e| e["role"] == "ASSISTANT" && e["is_final"] == true)
        .filter_map(|e| e["text"].as_str())
        .collect()
}

pub(crate) fn session_id(result: &Value) -> String {
    result["observations"]["session_id"].as_str().expect("session id").to_owned()
}

pub(crate) fn agent_recording(result: &Value) -> Vec<i16> {
    let path = result["observations"]["agent_recording"].as_str().expect("the client recorded the agent");
    read_wav(Path::new(path)).0
}

/// The user's audio the fake kept on connection `index`, at 24 kHz (OpenAI/xAI/GPT-Live rate).
pub(crate) fn fake_audio(fake: &FakeUpstream, index: usize) -> Vec<i16> {
    fake.audio().get(index).cloned().unwrap_or_default()
}

/// The `conversation` scenario's replies (the greeting, the spoken turn's, the typed turn's),
/// queued on the fake, and the session config that greets with the first.
pub(crate) fn queue_conversation(world: &World) -> ([&'static str; 3], Value) {
    let replies = ["Hello there, I am your assistant.", "I heard every word you said.", "It is twelve o clock."];
    world.fake.queue(replies.map(|reply| Reply::Speak(reply.into())));
    let config = json!({"agent": {"type": "inline", "model": "provider_b", "instructions": "Be brief.", "greeting": replies[0]}});
    (replies, config)
}
