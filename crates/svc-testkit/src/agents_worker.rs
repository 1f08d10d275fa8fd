//! A LiveKit Agents worker for tests: the interop harness's `tests/interop/py/agents_worker.py`,
//! run in the LiveKit Agents venv `scripts/interop-setup.sh` installs (`target/interop/agents-venv`),
//! started and waited on until it has registered with the room's `/agent`. It runs in a process
//! group of its own and dropping it kills the whole group: LiveKit Agents starts a forkserver and
//! a process per job, which would otherwise outlive the test and hold its output open.

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

/// How to start a worker.
#[derive(Debug, Clone, Copy)]
pub struct WorkerOptions<'a> {
    /// The room URL (`ws://…/room`): the worker connects to its `/agent`.
    pub url: &'a str,
    /// The room's API key.
    pub key: &'a str,
    /// Its secret.
    pub secret: &'a str,
    /// The agent name it registers for (explicit dispatch).
    pub agent_name: &'a str,
    /// Its label: its agents' identities are `agent-<label>-<job id>`.
    pub label: &'a str,
    /// Run each job as a voice agent on the OpenAI realtime plugin at this base URL (a fake's).
    pub voice_base_url: Option<&'a str>,
}

/// A running worker; killed with its job processes when dropped.
#[derive(Debug)]
pub struct AgentsWorker {
    child: tokio::process::Child,
}

impl AgentsWorker {
    /// Starts the worker from the repository at `repo` and waits (up to a minute) until it has
    /// registered; its log goes to this process's stderr, prefixed with its label.
    pub async fn start(repo: &Path, options: WorkerOptions<'_>) -> AgentsWorker {
        let python = repo.join("target/interop/agents-venv/bin/python");
        assert!(python.exists(), "{} is missing: run scripts/interop-setup.sh", python.display());
        let mut child = tokio::process::Command::new(python)
            .arg(repo.join("tests/interop/py/agents_worker.py"))
            .args(["--url", options.url, "--key", options.key, "--secret", options.secret])
            .args(["--agent-name", options.agent_name, "--label", options.label])
            .args(["--voice-base-url", options.voice_base_url.unwrap_or_default()])
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("the worker starts");
        let stderr = child.stderr.take().expect("stderr");
        let worker = AgentsWorker { child };
        let label = options.label.to_owned();
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let registered = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[worker {label}] {line}");
                if line.contains("registered worker") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(registered, Ok(true), "worker {label} registers");
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[worker {label}] {line}");
            }
        });
        worker
    }
}

impl Drop for AgentsWorker {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // The group may be gone already.
            let _ = std::process::Command::new("kill").args(["-s", "KILL", "--", &format!("-{pid}")]).status();
        }
    }
}
