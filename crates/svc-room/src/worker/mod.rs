//! [`AgentWorker`]: svc as a LiveKit agent worker — the worker's side of LiveKit's agent protocol
//! (research/livekit.md §6), as LiveKit Agents speaks it, against LiveKit Cloud, a self-hosted
//! LiveKit, or svc's own room server (`crate::agents`).
//!
//! The worker keeps a WebSocket to `<url>/agent` (binary protobuf, `WorkerMessage` out,
//! `ServerMessage` in), authorised by a token with the `agent` grant signed with the server's
//! API key. It registers for one `agent_name` (explicit dispatch: a room gets that agent when its
//! creation or an `AgentDispatch` names it), reports what it can take ([`WorkerStatus`]: load
//! and whether it is full) and hands the server's questions to its owner as [`WorkerEvent`]s: an
//! offer to answer ([`AgentWorker::answer`]), a job assigned with its room's URL and a join token,
//! a job terminated. The owner runs the jobs (svc's session runtime) and says when each ended.
//!
//! A connection that breaks, or a server that stops answering pings, is made again with growing
//! pauses for as long as the worker runs; each connection registers anew. Jobs already running
//! keep running: their agents are in their rooms, not on this connection.
//!
//! # Shape
//!
//! The protocol lives in `WorkerCore` (`core.rs`), sans-IO; one task (`shell.rs`) owns it and the
//! socket; [`AgentWorker`] is the handle, talking to it over a bounded channel.

mod core;
mod shell;

pub use self::core::{OfferAnswer, WorkerEvent, WorkerStatus};

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::token::RoomCredentials;
use shell::{Command, Shell};

/// Commands queued from the handle to the worker's task.
const COMMAND_QUEUE: usize = 256;
/// Events queued for the owner.
const EVENT_QUEUE: usize = 256;

/// Where and as what a worker registers.
#[derive(Clone)]
pub struct WorkerOptions {
    /// The LiveKit URL (`ws(s)://` or `http(s)://`); the worker connects to `<url>/agent`, and
    /// jobs whose assignment names no URL join it.
    pub url: String,
    /// The server's API key and secret (the worker's token is signed with them).
    pub credentials: RoomCredentials,
    /// The agent name dispatches ask for.
    pub agent_name: String,
    /// The worker's version, reported at registration.
    pub version: String,
    /// TLS trust for `wss://` (`None`: the webpki roots).
    pub tls: Option<Arc<svc_http::TlsClientConfig>>,
}

impl std::fmt::Debug for WorkerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerOptions")
            .field("url", &self.url)
            .field("agent_name", &self.agent_name)
            .finish_non_exhaustive()
    }
}

/// The handle of a running worker. Cheap to clone; the worker stops with its shutdown token or
/// once every handle and its event receiver are gone.
#[derive(Clone, Debug)]
pub struct AgentWorker {
    commands: mpsc::Sender<Command>,
}

impl AgentWorker {
    /// Starts the worker on `tasks`: it connects, registers and reconnects on its own until
    /// `shutdown`. Its events come on the receiver, which must be read.
    ///
    /// # Errors
    ///
    /// The URL is not a LiveKit URL.
    pub fn start(
        options: WorkerOptions,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Result<(AgentWorker, mpsc::Receiver<WorkerEvent>), String> {
        if shell::agent_url(&options.url).is_none() {
            return Err(format!("not a LiveKit URL (ws://, wss://, http:// or https:// and a host): {}", options.url));
        }
        let (commands, receiver) = mpsc::channel(COMMAND_QUEUE);
        let (events, events_out) = mpsc::channel(EVENT_QUEUE);
        let core = self::core::WorkerCore::new(&options.agent_name, &options.version, &options.url);
        tasks.spawn(Shell { options, core, commands: receiver, events, shutdown }.run());
        Ok((AgentWorker { commands }, events_out))
    }

    /// Answers the offer of job `job_id` (ignored when that offer is no longer pending).
    pub fn answer(&self, job_id: &str, answer: OfferAnswer) {
        self.post(Command::Answer { job_id: job_id.to_owned(), answer });
    }

    /// Reports what the worker can take now (sent when it changed enough, and refreshed).
    pub fn set_status(&self, status: WorkerStatus) {
        self.post(Command::Status(status));
    }

    /// Says that job `job_id` ended (`error`: it failed).
    pub fn job_ended(&self, job_id: &str, error: Option<String>) {
        self.post(Command::JobEnded { job_id: job_id.to_owned(), error });
    }

    fn post(&self, command: Command) {
        if let Err(error) = self.commands.try_send(command) {
            // Full: the task is 256 commands behind, a stall a status refresh recovers from;
            // closed: the worker stopped.
            tracing::warn!(%error, "agent worker command dropped");
        }
    }
}
