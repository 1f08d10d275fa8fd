//! The runner's side of `tests/conformance/fake.py`: start it, point an adapter at one of its
//! scenarios, and read back what it saw.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use svc_domain::model::{ModelCatalog, ModelChoice, ProviderBlock, ResolvedModel, resolve_model};
use svc_provider::endpoint::ProviderEnv;
use svc_provider_core::session::ProviderSession;
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio_util::sync::CancellationToken;

/// How long any one wait may take.
pub const WAIT: Duration = Duration::from_secs(15);
const SETUP_HINT: &str = "run scripts/conformance-setup.sh first (scripts/test.sh does)";

/// One way of framing and packing the fake's server messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// `text`, `binary` or `random` (per frame).
    pub framing: &'static str,
    /// `single`, `combined` or `random` (where the protocol allows combining messages).
    pub packing: &'static str,
    /// Seed of the random choices.
    pub seed: u64,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "framing={} packing={} seed={}", self.framing, self.packing, self.seed)
    }
}

/// Every scenario runs in each of these: all binary one message per frame (what Gemini sends),
/// all text with combined messages, and a seeded random mix of both (`SVC_CONFORMANCE_SEED`
/// replays one; the default changes with nothing, so a run is reproducible).
pub fn modes() -> Vec<Mode> {
    let seed = std::env::var("SVC_CONFORMANCE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    vec![
        Mode { framing: "binary", packing: "single", seed: 0 },
        Mode { framing: "text", packing: "combined", seed: 0 },
        Mode { framing: "random", packing: "random", seed },
    ]
}

fn repo() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    repo.canonicalize().unwrap_or(repo)
}

/// A running fake.
pub struct PyFake {
    pub mode: Mode,
    port: u16,
    child: Child,
    /// Held open for the fake's lifetime: it exits when stdin closes.
    _stdin: ChildStdin,
    reports: Arc<Mutex<Vec<Value>>>,
    stderr: Arc<Mutex<String>>,
}

impl PyFake {
    /// Starts the fake in `mode` and waits for its port.
    pub async fn start(mode: Mode) -> PyFake {
        let repo = repo();
        let python = repo.join("target/conformance/venv/bin/python");
        let script = repo.join("tests/conformance/fake.py");
        assert!(python.exists(), "{} is missing: {SETUP_HINT}", python.display());
        let mut child = Command::new(&python)
            .arg(&script)
            .args(["--framing", mode.framing, "--packing", mode.packing, "--seed", &mode.seed.to_string()])
            .current_dir(repo.join("tests/conformance"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", script.display()));
        let stdin = child.stdin.take().expect("piped stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut stderr_lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let stderr_sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr_lines.next_line().await {
                let mut text = stderr_sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                text.push_str(&line);
                text.push('\n');
            }
        });
        let first = tokio::time::timeout(WAIT, lines.next_line()).await;
        let port = match first {
            Ok(Ok(Some(line))) => serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|value| value.get("port").and_then(Value::as_u64))
                .and_then(|port| u16::try_from(port).ok())
                .unwrap_or_else(|| panic!("fake.py did not print its port: {line}")),
            _ => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                panic!("fake.py did not start: {}", stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            }
        };
        let reports = Arc::new(Mutex::new(Vec::new()));
        let sink = reports.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut value) = serde_json::from_str::<Value>(&line)
                    && let Some(report) = value.get_mut("report")
                {
                    sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(report.take());
                }
            }
        });
        PyFake { mode, port, child, _stdin: stdin, reports, stderr }
    }

    /// `http://127.0.0.1:<port>/<family>/<scenario>`: the base every family's path goes under.
    pub fn base(&self, family: &str, scenario: &str) -> String {
        format!("http://127.0.0.1:{}/{family}/{scenario}", self.port)
    }

    /// Provider environment pointing `family` (`gemini`, `openai`, `xai`, `live`) at `scenario`.
    pub fn env(&self, family: &str, scenario: &str) -> ProviderEnv {
        let base = self.base(family, scenario);
        let mut vars: HashMap<&str, String> = HashMap::new();
        match family {
            "gemini" => {
                vars.insert("GEMINI_API_KEY", "conformance-key".to_owned());
                vars.insert("GOOGLE_GEMINI_BASE_URL", base);
            }
            "xai" => {
                vars.insert("XAI_API_KEY", "conformance-key".to_owned());
                vars.insert("XAI_BASE_URL", format!("{base}/v1"));
            }
            _ => {
                vars.insert("OPENAI_API_KEY", "conformance-key".to_owned());
                vars.insert("OPENAI_BASE_URL", format!("{base}/v1"));
            }
        }
        ProviderEnv::from_lookup(|name| vars.get(name).cloned()).expect("valid env")
    }

    /// Waits until `count` connections have ended and returns their reports.
    pub async fn reports(&self, count: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let reports = self.reports.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            if reports.len() >= count {
                return reports;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: {} of {count} connection reports after {WAIT:?}; fake stderr:\n{}",
                self.mode,
                reports.len(),
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The reports of the connections that ended so far, without waiting (a failing test prints
    /// what the oracle found before it panics).
    pub fn reports_so_far(&self) -> Vec<Value> {
        self.reports.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Every violation in `reports`, one line each (empty when svc conformed).
    pub fn violations(reports: &[Value]) -> Vec<String> {
        reports
            .iter()
            .flat_map(|report| {
                let scenario = report.get("scenario").and_then(Value::as_str).unwrap_or("?").to_owned();
                report
                    .get("violations")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |v| format!("[{scenario}] {}", v.as_str().unwrap_or("?")))
            })
            .collect()
    }

    /// Waits for `count` reports and fails the test on any violation, printing them.
    pub async fn assert_conforms(&self, count: usize) -> Vec<Value> {
        let reports = self.reports(count).await;
        let violations = PyFake::violations(&reports);
        assert!(violations.is_empty(), "{}: the SDK oracle found:\n{}", self.mode, violations.join("\n"));
        reports
    }

    /// What the fake printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Stops the fake now.
    pub async fn stop(mut self) {
        // Already gone is as good as stopped.
        let _ = self.child.kill().await;
    }
}

/// Events for a failure message: audio as its sample count (a second of PCM would bury the rest).
pub fn brief(events: &[ProviderEvent]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            ProviderEvent::AssistantAudio { pcm, sample_rate } => {
                format!("AssistantAudio({} samples at {sample_rate} Hz)", pcm.len())
            }
            other => format!("{other:?}"),
        })
        .collect()
}

/// The client messages (`dir: "in"`) of a report, as JSON.
pub fn client_messages(report: &Value) -> Vec<Value> {
    frames(report, "in")
}

/// The server messages (`dir: "out"`) of a report, as JSON.
pub fn server_messages(report: &Value) -> Vec<Value> {
    frames(report, "out")
}

fn frames(report: &Value, direction: &str) -> Vec<Value> {
    report
        .get("frames")
        .and_then(Value::as_array)
        .map(|frames| {
            frames
                .iter()
                .filter(|frame| frame.get("dir").and_then(Value::as_str) == Some(direction))
                .filter_map(|frame| frame.get("json").cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// The catalog's model for `block`.
pub fn model(block: ProviderBlock) -> ResolvedModel {
    resolve_model(ModelCatalog::embedded(), Some(&ModelChoice::Block(block)), None).expect("model resolves")
}

/// An adapter (real codec, real driver) for `setup` against `env`, with every event it emits kept.
pub struct Adapter {
    pub session: ProviderSession,
    pub seen: Vec<ProviderEvent>,
    mode: Mode,
}

impl Adapter {
    pub fn start(setup: SessionSetup, env: &ProviderEnv, mode: Mode) -> Adapter {
        let session = svc_provider::start(setup, env, CancellationToken::new()).expect("adapter starts");
        Adapter { session, seen: Vec::new(), mode }
    }

    pub async fn send(&self, input: ProviderInput) {
        self.session.input.send(input).await.expect("adapter alive");
    }

    /// The next event matching `predicate` (every event is kept in `seen`).
    pub async fn wait(&mut self, what: &str, predicate: impl Fn(&ProviderEvent) -> bool) -> ProviderEvent {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let event = match tokio::time::timeout_at(deadline, self.session.events.recv()).await {
                Ok(Some(event)) => event,
                Ok(None) => panic!("{}: the adapter ended before {what}; seen: {:#?}", self.mode, brief(&self.seen)),
                Err(_) => panic!("{}: no {what} within {WAIT:?}; seen: {:#?}", self.mode, brief(&self.seen)),
            };
            self.seen.push(event.clone());
            if predicate(&event) {
                return event;
            }
        }
    }

    pub async fn ready(&mut self) {
        self.wait("Ready", |e| matches!(e, ProviderEvent::Ready { .. })).await;
    }

    /// Collects events for `duration`.
    pub async fn drain_for(&mut self, duration: Duration) {
        let deadline = tokio::time::Instant::now() + duration;
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.session.events.recv()).await {
            self.seen.push(event);
        }
    }

    /// Closes the session the way the runtime does and waits for the adapter to end.
    pub async fn close(mut self) -> Vec<ProviderEvent> {
        // Already closing is fine: the wait below sees it end.
        let _ = self.session.input.send(ProviderInput::Close).await;
        let deadline = tokio::time::Instant::now() + WAIT;
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.session.events.recv()).await {
            self.seen.push(event);
        }
        // The task has closed its socket once the event stream ended.
        let _ = tokio::time::timeout(WAIT, self.session.task).await;
        self.seen
    }

    /// Samples of assistant audio received.
    pub fn audio_samples(&self) -> usize {
        self.seen
            .iter()
            .map(|e| match e {
                ProviderEvent::AssistantAudio { pcm, .. } => pcm.len(),
                _ => 0,
            })
            .sum()
    }

    /// Non-fatal and fatal errors the adapter reported.
    pub fn errors(&self) -> Vec<svc_provider_core::ProviderError> {
        self.seen
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::Error(error) => Some(error.clone()),
                _ => None,
            })
            .collect()
    }
}
