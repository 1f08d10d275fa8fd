//! Running the real `svc serve` (and the processes that talk to it) from integration tests:
//! shared by the interop tests and the end-to-end session tests.

#![allow(dead_code)] // Each test binary uses its own part.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Room API key the servers here sign join tokens with.
pub const ROOM_API_KEY: &str = "devkey";
/// Its secret.
pub const ROOM_API_SECRET: &str = "interop-room-secret-0123456789abcdef";

/// `svc serve` with the embedded room, on free ports, in a throwaway data directory.
pub struct Server {
    /// The process.
    pub child: Child,
    /// `host:port` it listens on.
    pub listen: String,
    /// The room's UDP address, as announced.
    pub room_udp: Option<String>,
    log: Arc<Mutex<Vec<String>>>,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// The data directory, when the server made it (removed with the server).
    _owned_dir: Option<tempfile::TempDir>,
}

impl Server {
    /// `svc serve` on free ports in a new data directory, logging to `log_file`.
    pub fn start(log_file: PathBuf) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut server = Server::start_in(log_file, dir.path(), "127.0.0.1:0", |_| {});
        server._owned_dir = Some(dir);
        server
    }

    /// `svc serve` listening on `listen` over `data_dir`; `configure` adds environment and flags
    /// (before the `serve` subcommand).
    pub fn start_in(log_file: PathBuf, data_dir: &Path, listen: &str, configure: impl FnOnce(&mut Command)) -> Server {
        let mut command = svc(data_dir);
        command.args(["--listen", listen, "--room-udp-port", "0"]);
        // In the environment, so that a test's own `--room-node-ip` (a NAT mapping) wins.
        command.env("SVC_ROOM_NODE_IP", "127.0.0.1");
        // No drain on SIGTERM unless a test asks for one (`--drain-seconds`): the servers are
        // stopped under live sessions when each test is over.
        command.env("SVC_DRAIN_SECONDS", "0");
        configure(&mut command);
        command.arg("serve");
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn svc serve");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (sender, announcements) = std::sync::mpsc::channel();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut file = std::fs::File::create(log_file).ok();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(file) = file.as_mut() {
                    let _ = std::io::Write::write_all(file, format!("{line}\n").as_bytes());
                }
                for key in ["listen=", "room_udp="] {
                    if let Some(rest) = line.split(key).nth(1) {
                        let value = rest.split_whitespace().next().unwrap_or("").trim_matches('"').to_owned();
                        let _ = sender.send((key, value));
                    }
                }
                lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line);
            }
        });
        let mut server = Server {
            child,
            listen: String::new(),
            room_udp: None,
            log,
            data_dir: data_dir.to_owned(),
            _owned_dir: None,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while server.listen.is_empty() {
            match announcements.recv_timeout(Duration::from_millis(100)) {
                Ok(("listen=", value)) => server.listen = value,
                Ok((_, value)) => server.room_udp = Some(value),
                Err(_) => {}
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200)); // let the reader catch the last lines
                panic!("svc serve exited ({status}) before announcing `listen=`; its log:\n{}", server.log_tail(60));
            }
            assert!(
                Instant::now() < deadline,
                "svc serve did not announce `listen=` within 30 s; its log:\n{}",
                server.log_tail(60)
            );
        }
        // The room's UDP address is informative only (clients learn it from the SDP).
        while server.room_udp.is_none() {
            match announcements.recv_timeout(Duration::from_secs(2)) {
                Ok(("room_udp=", value)) => server.room_udp = Some(value),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        server
    }

    /// The room URL.
    pub fn url(&self) -> String {
        format!("ws://{}/room", self.listen)
    }

    /// A join token from `svc room token`, signed with the key the server uses.
    pub fn token(&self, room: &str, identity: &str) -> String {
        let output = svc(&self.data_dir)
            .args(["room", "token", "--room", room, "--identity", identity, "--json"])
            .output()
            .expect("run svc room token");
        assert!(
            output.status.success(),
            "svc room token --room {room} --identity {identity} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let json: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!("svc room token printed no JSON ({error}): {}", String::from_utf8_lossy(&output.stdout))
        });
        json["token"].as_str().unwrap_or_else(|| panic!("no `token` in {json}")).to_owned()
    }

    /// Kills the process at once (SIGKILL: no shutdown, as a crash would).
    pub fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        log[log.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs an official-SDK script of the interop harness to its end and returns the JSON report it
/// prints last; a failed run panics with its output and `context` (the server's log tail, say).
pub fn sdk_report(script: &mut Command, context: &str) -> Value {
    let output = script.output().expect("the SDK script runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}\n{context}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON report")
}

/// The `svc` binary over `data_dir`, with the room key of these tests.
pub fn svc(data_dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_svc"));
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    if let Ok(level) = std::env::var("SVC_LOG") {
        command.env("SVC_LOG", level); // SVC_LOG=debug while working on the room
    }
    command.arg("--data-dir").arg(data_dir).args([
        "--room-api-key",
        ROOM_API_KEY,
        "--room-api-secret",
        ROOM_API_SECRET,
    ]);
    command
}

/// SIGTERM to the peer itself (it then writes what it has seen so far, and the driver closes its
/// browser), then SIGKILL to its whole process group (anything it left behind).
pub fn kill_group(child: &mut Child) -> ExitStatus {
    let signal = |name: &str, target: String| {
        let _ = Command::new("kill").args([name, "--", &target]).stderr(Stdio::null()).status();
    };
    signal("-TERM", child.id().to_string());
    let deadline = Instant::now() + Duration::from_secs(8);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            break child.kill().and_then(|()| child.wait()).expect("kill the peer");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    signal("-KILL", format!("-{}", child.id()));
    status
}

/// `text` cut to `limit` characters.
pub fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
