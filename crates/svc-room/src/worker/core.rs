//! The worker's side of LiveKit's agent protocol as a sans-IO state machine: registration,
//! offers and their answers, assignments and terminations, the load reports and the pings. One
//! connection at a time: [`WorkerCore::connected`] starts it over (a new registration, the
//! status reported again), and what the server asked on a connection that broke is forgotten
//! (the server passed it to another worker when the connection went).
//!
//! Every input carries the time; outputs are polled ([`WorkerCore::poll_output`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use livekit_protocol as proto;
use proto::server_message::Message as ServerMessage;
use proto::worker_message::Message as WorkerMessage;

/// How often the worker pings the server (LiveKit Agents: every 30 s; svc pings sooner so a
/// dead server is noticed within [`SILENCE_LIMIT`]).
pub(crate) const PING_EVERY: Duration = Duration::from_secs(5);
/// A server silent this long (no answer to the pings) is taken for gone: the connection is
/// dropped and made again.
pub(crate) const SILENCE_LIMIT: Duration = Duration::from_secs(15);
/// The status is reported again this often even when nothing changed.
pub(crate) const STATUS_REFRESH: Duration = Duration::from_secs(10);
/// A load change smaller than this is not worth a report of its own.
const LOAD_STEP: f32 = 0.05;

/// What the worker can take now: what it reports to the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerStatus {
    /// Takes jobs (`false`: full, or draining).
    pub available: bool,
    /// 0 (idle) to 1 (full): the server offers jobs to the least loaded worker first.
    pub load: f32,
    /// Jobs running.
    pub jobs: u32,
}

impl Default for WorkerStatus {
    fn default() -> Self {
        WorkerStatus { available: true, load: 0.0, jobs: 0 }
    }
}

impl WorkerStatus {
    fn differs_from(&self, reported: &WorkerStatus) -> bool {
        self.available != reported.available
            || self.jobs != reported.jobs
            || (self.load - reported.load).abs() >= LOAD_STEP
    }
}

/// The worker's answer to an offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferAnswer {
    /// Takes the job: its agent joins as `identity` with `name` and `attributes`.
    Accept {
        /// The agent's identity in the room.
        identity: String,
        /// Its display name.
        name: String,
        /// Its first attributes.
        attributes: HashMap<String, String>,
    },
    /// Cannot take it now: the server asks another worker.
    Decline,
    /// The job should not run anywhere (what it was for is gone): the server ends it.
    Terminate,
}

/// What the server tells the worker.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    /// Registered (again, after a reconnection) under `worker_id`.
    Registered {
        /// The server's id of this worker (`AW_…`).
        worker_id: String,
    },
    /// The connection broke; the worker connects again.
    Disconnected {
        /// Why.
        reason: String,
    },
    /// Can the worker take `job`? Answer with [`super::AgentWorker::answer`] within the
    /// server's bound (LiveKit's: 10 s).
    Offer {
        /// The job.
        job: Box<proto::Job>,
        /// Offered again after its first worker died.
        resuming: bool,
    },
    /// The job is the worker's: its agent joins the room at `url` with `token`.
    Assigned {
        /// The job.
        job: Box<proto::Job>,
        /// The LiveKit URL to join (the worker's own when the server named none).
        url: String,
        /// The agent's join token, signed by the server for the identity the worker chose.
        token: String,
    },
    /// The server ended the job (its dispatch deleted, its room closed).
    Terminated {
        /// The job's id.
        job_id: String,
    },
}

/// What the shell must do.
// Outputs live for microseconds in one queue; boxing each message would cost an allocation for
// no memory saved (as the dispatcher's outputs).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CoreOutput {
    /// Send this message to the server.
    Send(WorkerMessage),
    /// Hand this event to the worker's owner.
    Event(WorkerEvent),
    /// The connection is dead: drop it and connect again.
    Broken(String),
}

/// The worker's protocol state.
pub(crate) struct WorkerCore {
    agent_name: String,
    version: String,
    /// The URL jobs join when an assignment names none.
    url: String,
    /// Connected, and since when the server was last heard.
    connection: Option<Connection>,
    wanted: WorkerStatus,
    outputs: VecDeque<CoreOutput>,
}

struct Connection {
    registered: bool,
    last_heard: Instant,
    next_ping: Instant,
    /// What the server was last told, and when.
    reported: Option<(WorkerStatus, Instant)>,
    /// Offers not answered yet.
    offers: HashSet<String>,
}

impl WorkerCore {
    pub(crate) fn new(agent_name: &str, version: &str, url: &str) -> WorkerCore {
        WorkerCore {
            agent_name: agent_name.to_owned(),
            version: version.to_owned(),
            url: url.to_owned(),
            connection: None,
            wanted: WorkerStatus::default(),
            outputs: VecDeque::new(),
        }
    }

    pub(crate) fn poll_output(&mut self) -> Option<CoreOutput> {
        self.outputs.pop_front()
    }

    /// When [`Self::handle_timeout`] is due; `None` while disconnected.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let connection = self.connection.as_ref()?;
        let mut due = connection.next_ping.min(connection.last_heard + SILENCE_LIMIT);
        if let Some((_, at)) = connection.reported {
            due = due.min(at + STATUS_REFRESH);
        }
        Some(due)
    }

    /// A new connection is open: register on it.
    pub(crate) fn connected(&mut self, now: Instant) {
        self.connection = Some(Connection {
            registered: false,
            last_heard: now,
            next_ping: now + PING_EVERY,
            reported: None,
            offers: HashSet::new(),
        });
        let register = proto::RegisterWorkerRequest {
            r#type: proto::JobType::JtRoom as i32,
            agent_name: self.agent_name.clone(),
            version: self.version.clone(),
            ping_interval: u32::try_from(PING_EVERY.as_secs()).unwrap_or(u32::MAX),
            ..Default::default()
        };
        self.outputs.push_back(CoreOutput::Send(WorkerMessage::Register(register)));
    }

    /// The connection is gone.
    pub(crate) fn disconnected(&mut self, reason: &str) {
        if self.connection.take().is_some() {
            self.outputs.push_back(CoreOutput::Event(WorkerEvent::Disconnected { reason: reason.to_owned() }));
        }
    }

    /// A message from the server.
    pub(crate) fn handle_message(&mut self, now: Instant, message: ServerMessage) {
        let Some(connection) = self.connection.as_mut() else { return };
        connection.last_heard = now;
        match message {
            ServerMessage::Register(registered) => {
                connection.registered = true;
                let worker_id = registered.worker_id;
                self.outputs.push_back(CoreOutput::Event(WorkerEvent::Registered { worker_id }));
                self.report_status(now);
            }
            ServerMessage::Availability(request) => {
                let Some(job) = request.job else { return };
                connection.offers.insert(job.id.clone());
                let offer = WorkerEvent::Offer { job: Box::new(job), resuming: request.resuming };
                self.outputs.push_back(CoreOutput::Event(offer));
            }
            ServerMessage::Assignment(assignment) => {
                let Some(job) = assignment.job else { return };
                let url = assignment.url.filter(|url| !url.is_empty()).unwrap_or_else(|| self.url.clone());
                let assigned = WorkerEvent::Assigned { job: Box::new(job), url, token: assignment.token };
                self.outputs.push_back(CoreOutput::Event(assigned));
            }
            ServerMessage::Termination(termination) => {
                let terminated = WorkerEvent::Terminated { job_id: termination.job_id };
                self.outputs.push_back(CoreOutput::Event(terminated));
            }
            ServerMessage::Pong(_) => {}
            // The server is draining: register again, where the URL leads now.
            ServerMessage::GoAway(go_away) => {
                let reason = format!("the server is going away ({})", go_away.reason);
                self.outputs.push_back(CoreOutput::Broken(reason));
            }
        }
    }

    /// The owner's answer to an offer (dropped when the offer was not made on this connection).
    pub(crate) fn answer(&mut self, job_id: &str, answer: OfferAnswer) {
        let Some(connection) = self.connection.as_mut() else { return };
        if !connection.offers.remove(job_id) {
            tracing::debug!(job = job_id, "answer to an offer not pending on this connection");
            return;
        }
        let mut response = proto::AvailabilityResponse { job_id: job_id.to_owned(), ..Default::default() };
        match answer {
            OfferAnswer::Accept { identity, name, attributes } => {
                response.available = true;
                response.participant_identity = identity;
                response.participant_name = name;
                response.participant_attributes = attributes;
            }
            OfferAnswer::Decline => {}
            OfferAnswer::Terminate => response.terminate = true,
        }
        self.outputs.push_back(CoreOutput::Send(WorkerMessage::Availability(response)));
    }

    /// What the worker can take now: reported when it changed enough.
    pub(crate) fn set_status(&mut self, now: Instant, status: WorkerStatus) {
        self.wanted = status;
        let due = self
            .connection
            .as_ref()
            .is_some_and(|c| c.registered && c.reported.is_none_or(|(reported, _)| status.differs_from(&reported)));
        if due {
            self.report_status(now);
        }
    }

    /// A job the worker ran has ended (`error`: it failed).
    pub(crate) fn job_ended(&mut self, job_id: &str, error: Option<String>) {
        if !self.connection.as_ref().is_some_and(|connection| connection.registered) {
            return;
        }
        let status = if error.is_some() { proto::JobStatus::JsFailed } else { proto::JobStatus::JsSuccess };
        let update = proto::UpdateJobStatus {
            job_id: job_id.to_owned(),
            status: status as i32,
            error: error.unwrap_or_default(),
        };
        self.outputs.push_back(CoreOutput::Send(WorkerMessage::UpdateJob(update)));
    }

    /// Time passed: pings, the silence bound, the status refresh. `unix_ms` is the wall clock,
    /// which pings carry.
    pub(crate) fn handle_timeout(&mut self, now: Instant, unix_ms: i64) {
        let Some(connection) = self.connection.as_mut() else { return };
        if now >= connection.last_heard + SILENCE_LIMIT {
            let reason = format!("the server sent nothing for {} s", SILENCE_LIMIT.as_secs());
            self.outputs.push_back(CoreOutput::Broken(reason));
            return;
        }
        if now >= connection.next_ping {
            connection.next_ping = now + PING_EVERY;
            let ping = proto::WorkerPing { timestamp: unix_ms };
            self.outputs.push_back(CoreOutput::Send(WorkerMessage::Ping(ping)));
        }
        if connection.registered && connection.reported.is_some_and(|(_, at)| now >= at + STATUS_REFRESH) {
            self.report_status(now);
        }
    }

    fn report_status(&mut self, now: Instant) {
        let Some(connection) = self.connection.as_mut() else { return };
        let status = self.wanted;
        connection.reported = Some((status, now));
        let worker_status =
            if status.available { proto::WorkerStatus::WsAvailable } else { proto::WorkerStatus::WsFull };
        let update = proto::UpdateWorkerStatus {
            status: Some(worker_status as i32),
            load: status.load,
            job_count: status.jobs,
            ..Default::default()
        };
        self.outputs.push_back(CoreOutput::Send(WorkerMessage::UpdateWorker(update)));
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
