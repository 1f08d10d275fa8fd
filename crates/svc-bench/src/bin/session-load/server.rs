//! The servers a run measures: svc in its own process, set up by its own CLI, and, when the
//! sessions' rooms are not svc's own, the LiveKit-role `svc serve` they are on.

use std::time::Duration;

use svc_bench::svc_process::{self, SvcConfig, SvcProcess};

/// Where the sessions' rooms are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RoomMode {
    /// svc's embedded room.
    Embedded,
    /// A LiveKit server (another `svc serve`) the agents join as clients (`--livekit-url`).
    Livekit,
    /// As `Livekit`, the sessions dispatched to svc as that server's agent worker.
    Worker,
}

impl RoomMode {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            RoomMode::Embedded => "the embedded room",
            RoomMode::Livekit => {
                "rooms on a LiveKit server (`--livekit-url`: another `svc serve`, its CPU measured apart), the agents its clients"
            }
            RoomMode::Worker => {
                "worker mode (`--livekit-agent-name`) on a LiveKit server (another `svc serve`, its CPU measured apart)"
            }
        }
    }
}

/// svc in its own process, set up by its own CLI: a workspace without a session cap and a key
/// that may start sessions, then `svc serve` with the fake as OpenAI's endpoint.
pub(crate) struct Server {
    pub(crate) process: SvcProcess,
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) key: String,
    /// The LiveKit-role `svc serve` the sessions' rooms are on, when not svc's own.
    pub(crate) room: Option<SvcProcess>,
}

impl Server {
    /// `database` is svc's (SQLite in `dir` when `None`); `extra` environment variables come
    /// after (and so override) the defaults.
    pub(crate) fn start(
        binary: &std::path::Path,
        dir: &std::path::Path,
        fake: std::net::SocketAddr,
        database: Option<&str>,
        mode: RoomMode,
        extra: &[(&str, String)],
    ) -> anyhow::Result<Server> {
        let room = match mode {
            RoomMode::Embedded => None,
            RoomMode::Livekit | RoomMode::Worker => {
                Some(svc_process::start_livekit_role(binary, &dir.join("livekit"))?)
            }
        };
        let mut livekit: Vec<(String, String)> = room.as_ref().map(svc_process::livekit_env).unwrap_or_default();
        if mode == RoomMode::Worker {
            livekit.extend(
                [("SVC_LIVEKIT_AGENT_NAME", "bench"), ("SVC_WORKER_CAPACITY", "10000")]
                    .map(|(name, value)| (name.to_owned(), value.to_owned())),
            );
        }
        let env = [
            ("OPENAI_API_KEY", "sk-bench".to_owned()),
            ("OPENAI_BASE_URL", format!("http://{fake}/v1")),
            ("SVC_DEV_WORKSPACE", "off".to_owned()),
            ("SVC_ROOM_UDP_PORT", "0".to_owned()),
            ("SVC_ROOM_NODE_IP", "127.0.0.1".to_owned()),
        ];
        let config = SvcConfig {
            binary: binary.to_owned(),
            data_dir: dir.to_owned(),
            env: env
                .iter()
                .chain(database.map(|url| ("SVC_DATABASE_URL", url.to_owned())).iter())
                .map(|(name, value)| ((*name).to_owned(), value.clone()))
                .chain(livekit)
                .chain(extra.iter().map(|(name, value)| ((*name).to_owned(), value.clone())))
                .collect(),
        };
        let key = config.workspace_with_key("session-load")?;
        let process = SvcProcess::start(&config)?;
        let addr = process.addr;
        if mode == RoomMode::Worker {
            // The worker registers within moments of the start; a start before that would wait.
            std::thread::sleep(Duration::from_secs(1));
        }
        Ok(Server { process, addr, key, room })
    }

    /// Stops svc, then the LiveKit-role server.
    pub(crate) fn stop(self) -> anyhow::Result<()> {
        let status = self.process.stop(Duration::from_secs(30))?;
        if !status.success() {
            eprintln!("session-load: svc serve exited with {status}");
        }
        if let Some(room) = self.room {
            room.stop(Duration::from_secs(30))?;
        }
        Ok(())
    }
}
