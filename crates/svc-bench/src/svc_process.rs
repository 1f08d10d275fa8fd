//! svc as its own process: the real `svc` binary, assembled by `svc serve` exactly as an operator
//! runs it, so a benchmark measures the server production runs (not a copy of its wiring) and
//! the server's CPU and memory are its own (`/proc/<pid>`), apart from the load generator's.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::load::Target;
use crate::lock;

/// Where clients' backends start sessions.
const START_PATH: &str = "/api/v1/external/realtime/session/start";

/// Log lines kept for an error message.
const LOG_TAIL: usize = 40;

/// The `svc` binary to run: `explicit`, or the one built beside the running benchmark
/// (`target/release/svc` next to `target/release/session-load`).
pub fn binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => std::env::current_exe().context("locating this benchmark")?.with_file_name("svc"),
    };
    if !path.is_file() {
        bail!(
            "no svc binary at {} (build it with `cargo build --release -p svc-server --bin svc`, or pass --svc PATH)",
            path.display()
        );
    }
    Ok(path)
}

/// The API key and secret of the LiveKit-role `svc serve` a benchmark starts
/// ([`start_livekit_role`]): its room server's, and its agent nodes' `--livekit-api-*`.
pub const LIVEKIT_KEY: &str = "bench-livekit";
/// See [`LIVEKIT_KEY`].
pub const LIVEKIT_SECRET: &str = "bench-livekit-secret-0123456789abcdef";

/// Starts `binary` as the LiveKit server of a benchmark (`svc serve` in its room-only role on
/// loopback, keyed with [`LIVEKIT_KEY`]), with its data in `data_dir` (created).
pub fn start_livekit_role(binary: &Path, data_dir: &Path) -> anyhow::Result<SvcProcess> {
    std::fs::create_dir_all(data_dir).context("the LiveKit server's data directory")?;
    let config = SvcConfig {
        binary: binary.to_owned(),
        data_dir: data_dir.to_owned(),
        env: [
            ("SVC_ROOM_API_KEY", LIVEKIT_KEY),
            ("SVC_ROOM_API_SECRET", LIVEKIT_SECRET),
            ("SVC_ROOM_UDP_PORT", "0"),
            ("SVC_ROOM_NODE_IP", "127.0.0.1"),
            ("SVC_DEV_WORKSPACE", "off"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .to_vec(),
    };
    SvcProcess::start(&config).context("starting the LiveKit-role svc")
}

/// The environment that puts a svc's sessions' rooms on `livekit` (from [`start_livekit_role`]):
/// `--livekit-url` and its key.
pub fn livekit_env(livekit: &SvcProcess) -> Vec<(String, String)> {
    [
        ("SVC_LIVEKIT_URL", format!("ws://{}/room", livekit.addr)),
        ("SVC_LIVEKIT_API_KEY", LIVEKIT_KEY.to_owned()),
        ("SVC_LIVEKIT_API_SECRET", LIVEKIT_SECRET.to_owned()),
    ]
    .map(|(name, value)| (name.to_owned(), value))
    .to_vec()
}

/// How one `svc` is configured: its binary, its data directory (SQLite database included) and the
/// environment every command of it gets, as an operator's shell would set it.
#[derive(Debug, Clone)]
pub struct SvcConfig {
    /// The binary.
    pub binary: PathBuf,
    /// `SVC_DATA_DIR`.
    pub data_dir: PathBuf,
    /// Further environment (`OPENAI_BASE_URL`, `SVC_*`); nothing else of the caller's leaks in.
    pub env: Vec<(String, String)>,
}

impl SvcConfig {
    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
        command.env("SVC_DATA_DIR", &self.data_dir);
        // Stopped after the load: the sessions still live end at once, without a drain.
        command.env("SVC_DRAIN_SECONDS", "0");
        command.envs(self.env.iter().map(|(name, value)| (name, value)));
        command
    }

    /// Runs an admin command (`svc workspace create …`) to its end and returns what it printed.
    pub fn admin(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.command().args(args).output().with_context(|| format!("running svc {}", args.join(" ")))?;
        if !output.status.success() {
            bail!(
                "svc {} failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Creates a workspace `slug` without a session cap and a key of it that may start sessions
    /// and read them back (transcripts, timelines), as an operator does with the CLI; returns the
    /// key.
    pub fn workspace_with_key(&self, slug: &str) -> anyhow::Result<String> {
        self.admin(&["workspace", "create", "--slug", slug, "--name", slug, "--host", "localhost"])?;
        self.admin(&["workspace", "set", slug, "--max-concurrent-sessions", "unlimited"])?;
        let scopes = ["--scope", "realtime:start", "--scope", "realtime:read", "--scope", "realtime:logs"];
        self.admin(&[&["key", "create", "--workspace", slug][..], &scopes].concat())
    }
}

/// What a session start answered: the room's URL, the user's token, the session's id.
#[derive(Debug, Clone)]
pub struct Started {
    /// `livekit_url`.
    pub url: String,
    /// `token`.
    pub token: String,
    /// `session_id`.
    pub session_id: String,
}

/// Starts a session as a client's backend does (`POST …/session/start` with `key`).
pub async fn start_session(addr: SocketAddr, key: &str, body: &serde_json::Value) -> anyhow::Result<Started> {
    let body = body.to_string();
    let start = Target::new("start", "POST", START_PATH, key, Some(&body));
    let (status, answer) = crate::load::probe(addr, &start).await?;
    if status != 200 {
        bail!("session start answered {status}: {answer}");
    }
    let answer: serde_json::Value = serde_json::from_str(&answer).context("start response")?;
    let field = |name: &str| answer.get(name).and_then(serde_json::Value::as_str).map(str::to_owned);
    match (field("livekit_url"), field("token"), field("session_id")) {
        (Some(url), Some(token), Some(session_id)) => Ok(Started { url, token, session_id }),
        _ => bail!("start response without livekit_url, token or session_id: {answer}"),
    }
}

/// `GET path` with `key`, answered 200 with JSON.
pub async fn get_json(addr: SocketAddr, key: &str, path: &str) -> anyhow::Result<serde_json::Value> {
    let get = Target::new("get", "GET", path, key, None);
    let (status, answer) = crate::load::probe(addr, &get).await?;
    if status != 200 {
        bail!("GET {path} answered {status}: {answer}");
    }
    serde_json::from_str(&answer).with_context(|| format!("GET {path}: not JSON"))
}

/// svc's `/metrics` (Prometheus text).
pub async fn metrics(addr: SocketAddr) -> anyhow::Result<String> {
    let metrics = Target::new("metrics", "GET", "/metrics", "", None);
    let (status, body) = crate::load::probe(addr, &metrics).await?;
    if status != 200 {
        bail!("GET /metrics answered {status}");
    }
    Ok(body)
}

/// The value of the unlabelled metric `name` in a `/metrics` text.
pub fn metric_value(metrics: &str, name: &str) -> anyhow::Result<f64> {
    let prefix = format!("{name} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|value| value.trim().parse().ok())
        .with_context(|| format!("no {name} in /metrics"))
}

/// svc's heap as its counting allocator saw it, when the binary is `svc-counting` (`None` for
/// `svc`).
#[derive(Debug, Clone, Copy)]
pub struct Heap {
    /// Allocations and reallocations since svc started.
    pub allocations: f64,
    /// Bytes allocated and not freed.
    pub live_bytes: f64,
}

impl Heap {
    /// Reads the heap from a `/metrics` text.
    pub fn from_metrics(metrics: &str) -> Option<Heap> {
        Some(Heap {
            allocations: metric_value(metrics, "svc_heap_allocations_total").ok()?,
            live_bytes: metric_value(metrics, "svc_heap_live_bytes").ok()?,
        })
    }
}

/// A running `svc serve`.
pub struct SvcProcess {
    child: Child,
    /// Where its HTTP API (and the room's signalling) listens.
    pub addr: SocketAddr,
    log: Arc<Mutex<VecDeque<String>>>,
}

impl SvcProcess {
    /// Starts `svc serve` on a free port of 127.0.0.1 and waits until it announces where it
    /// listens, which it does once the store, the room and the runtime are up.
    pub fn start(config: &SvcConfig) -> anyhow::Result<SvcProcess> {
        // A port chosen here rather than `:0`: svc derives its public and room URLs (the
        // `livekit_url` clients get) from the listen address before binding it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|probe| probe.local_addr())
            .context("finding a free port")?
            .port();
        let mut child = config
            .command()
            .env("SVC_LISTEN", format!("127.0.0.1:{port}"))
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} serve", config.binary.display()))?;
        let stderr = child.stderr.take().context("svc serve's stderr")?;
        let log = Arc::new(Mutex::new(VecDeque::with_capacity(LOG_TAIL)));
        let (announce, announced) = std::sync::mpsc::channel::<String>();
        let lines = log.clone();
        // Reads the log for the whole run: a pipe nobody reads would stall the server once full.
        std::thread::Builder::new()
            .name("svc-log".to_owned())
            .spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Some(rest) = line.split("listen=").nth(1) {
                        // The receiver is gone once the address was read; later lines only log.
                        let _ =
                            announce.send(rest.split_whitespace().next().unwrap_or("").trim_matches('"').to_owned());
                    }
                    let mut tail = lock(&lines);
                    if tail.len() == LOG_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            })
            .context("starting the log reader")?;
        let mut process = SvcProcess { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)), log };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(listen) = announced.recv_timeout(Duration::from_millis(100)) {
                process.addr = listen.parse().with_context(|| format!("svc serve announced `listen={listen}`"))?;
                return Ok(process);
            }
            if let Some(status) = process.child.try_wait()? {
                std::thread::sleep(Duration::from_millis(200)); // the reader's last lines
                bail!("svc serve exited ({status}) before it listened; its log:\n{}", process.log_tail());
            }
            if Instant::now() > deadline {
                bail!("svc serve did not listen within 60 s; its log:\n{}", process.log_tail());
            }
        }
    }

    /// Sessions svc counts as live (its `/metrics` gauge, read from its store).
    pub async fn live_sessions(&self) -> anyhow::Result<u64> {
        // A gauge of a count: a whole number.
        Ok(metric_value(&metrics(self.addr).await?, "svc_live_sessions")? as u64)
    }

    /// Its heap, when the binary counts allocations.
    pub async fn heap(&self) -> anyhow::Result<Option<Heap>> {
        Ok(Heap::from_metrics(&metrics(self.addr).await?))
    }

    /// Its process id (for `/proc/<pid>`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines it logged.
    pub fn log_tail(&self) -> String {
        lock(&self.log).iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Stops it as an operator does (SIGTERM: sessions end, rooms close, HTTP drains) and waits up
    /// to `grace` for its exit; then kills it.
    pub fn stop(mut self, grace: Duration) -> anyhow::Result<ExitStatus> {
        self.terminate();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child.kill().context("killing svc serve")?;
        bail!("svc serve did not stop within {} s of SIGTERM; its log:\n{}", grace.as_secs(), self.log_tail())
    }

    fn terminate(&self) {
        // `kill` the command: the workspace forbids the unsafe a signal call would need. A failure
        // leaves the process to `Drop`'s SIGKILL.
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).stderr(Stdio::null()).status();
    }
}

impl Drop for SvcProcess {
    fn drop(&mut self) {
        // After `stop` this finds the process gone; on an early error it must not outlive the bench.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
