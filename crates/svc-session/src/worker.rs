//! Worker mode: this node as a LiveKit agent worker. The session start (on any node) creates the
//! room on the LiveKit server with a dispatch of svc's agent (`agent_name`, the session id as its
//! metadata); LiveKit offers the job to the least loaded worker registered under that name; the
//! node that takes it reads the session from the shared store and runs it, its agent joining
//! with the token LiveKit signed.
//!
//! [`JobWorker`] drives `svc-room`'s [`AgentWorker`] for the [`Runtime`]:
//!
//! - **offers** are answered from the node's state: declined while it drains, is out of file
//!   descriptors, or is full (its sessions, with those accepted and not started yet, against the
//!   configured capacity, or its CPU past [`CPU_FULL`]); ended for a session that is gone or
//!   ended, or whose room is not the job's; otherwise taken, the session read and kept for the
//!   assignment, the agent's identity `agent-<session id>` as in the embedded room;
//! - **assignments** start the session (`Runtime::start_assigned`); a session that cannot start
//!   ends as `error` (as a start the node could not dispatch), and the job is reported failed;
//! - **a session another node ran** (LiveKit dispatches its job again when that node's worker
//!   and agent are gone) is taken over from the store as a resumption of itself, never greeting
//!   again;
//! - **terminations** end the session (`room_closed`);
//! - **the status** is reported every [`STATUS_EVERY`] and on every change: the load is the
//!   share of the capacity taken, so LiveKit spreads sessions by count; the CPU only says when
//!   a node that runs sessions is full (a CPU share in the load, or in the availability of a
//!   node without sessions, made a node that was loading its local models at start look busy
//!   for seconds, and a burst of starts all went to the other node).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use svc_domain::start::ResolvedSession;
use svc_room::proto;
use svc_room::worker::{AgentWorker, OfferAnswer, WorkerEvent, WorkerOptions, WorkerStatus};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::AGENT_STATE_ATTRIBUTE;
use crate::runtime::{Runtime, SessionRequest, SessionRooms, epoch_us};

/// A node whose process uses this share of its cores is full, whatever its session count.
pub const CPU_FULL: f32 = 0.9;
/// How often the load is measured and reported.
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How long an accepted offer waits for its assignment before its slot is freed (LiveKit's
/// answer bound is 10 s; the assignment follows the answer at once).
const ASSIGNMENT_WAIT: Duration = Duration::from_secs(30);
/// How long reading a session for an offer may take (the server's answer bound is 10 s).
const READ_BOUND: Duration = Duration::from_secs(3);
/// The `session-ended` reason of a session whose job the LiveKit server ended.
const JOB_TERMINATED: &str = "room_closed";

/// How this node works as an agent worker.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The agent name the sessions' dispatches ask for (the same on every node).
    pub agent_name: String,
    /// Sessions this node runs at most.
    pub capacity: usize,
    /// svc's version, reported at registration.
    pub version: String,
}

/// The worker of a node. Stops with [`JobWorker::stop`] (after the runtime's sessions ended).
#[derive(Debug)]
pub struct JobWorker {
    tasks: TaskTracker,
    shutdown: CancellationToken,
}

impl JobWorker {
    /// Registers this node's runtime with its LiveKit server as a worker for `settings`.
    ///
    /// # Errors
    ///
    /// The runtime's rooms are not on a LiveKit server (worker mode needs one), or its URL is
    /// not one.
    pub fn start(runtime: &Runtime, settings: WorkerSettings) -> Result<JobWorker, String> {
        let SessionRooms::External(rooms) = &runtime.config().rooms else {
            return Err("worker mode needs the sessions' rooms on a LiveKit server (--livekit-url)".to_owned());
        };
        let options = WorkerOptions {
            url: rooms.url().to_owned(),
            credentials: rooms.credentials().clone(),
            agent_name: settings.agent_name.clone(),
            version: settings.version.clone(),
            tls: None,
        };
        let tasks = TaskTracker::new();
        let shutdown = CancellationToken::new();
        let (worker, events) = AgentWorker::start(options, &tasks, shutdown.clone())?;
        let jobs = Jobs {
            runtime: runtime.clone(),
            worker,
            capacity: settings.capacity.max(1),
            cpu: CpuMeter::new(),
            accepted: HashMap::new(),
            running: Arc::default(),
            starting: Arc::default(),
            tasks: tasks.clone(),
        };
        tasks.spawn(jobs.run(events, shutdown.clone()));
        tracing::info!(agent_name = %settings.agent_name, capacity = settings.capacity, url = %rooms.url(),
            "agent worker: sessions come from the LiveKit server's dispatch");
        Ok(JobWorker { tasks, shutdown })
    }

    /// Unregisters (the connection closes) and waits for the worker's tasks.
    pub async fn stop(&self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// An offer taken, waiting for its assignment.
struct Accepted {
    request: SessionRequest,
    at: Instant,
}

struct Jobs {
    runtime: Runtime,
    worker: AgentWorker,
    capacity: usize,
    cpu: CpuMeter,
    /// Offers taken, by job id.
    accepted: HashMap<String, Accepted>,
    /// Jobs running here: job id → session id.
    running: Arc<Mutex<HashMap<String, String>>>,
    /// Jobs assigned whose session is starting (joining, connecting): not yet among the
    /// runtime's live sessions, no longer among the accepted offers, and still load.
    starting: Arc<AtomicUsize>,
    tasks: TaskTracker,
}

impl Jobs {
    async fn run(mut self, mut events: mpsc::Receiver<WorkerEvent>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(STATUS_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (ended, mut ended_rx) = mpsc::unbounded_channel::<()>();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                event = events.recv() => match event {
                    Some(event) => self.handle(event, &ended).await,
                    None => break,
                },
                Some(()) = ended_rx.recv() => {}
                _ = tick.tick() => {
                    let now = Instant::now();
                    self.accepted.retain(|job, accepted| {
                        let waiting = now.duration_since(accepted.at) < ASSIGNMENT_WAIT;
                        if !waiting {
                            tracing::warn!(job, "an accepted job was never assigned; its slot is free again");
                        }
                        waiting
                    });
                    self.cpu.sample();
                }
            }
            self.worker.set_status(self.status());
        }
    }

    fn status(&self) -> WorkerStatus {
        let taken = self.runtime.live_sessions() + self.accepted.len() + self.starting.load(Ordering::Relaxed);
        let sessions = taken as f32 / self.capacity as f32;
        let cpu = self.cpu.share();
        // The CPU makes a node full only when its sessions spend it (the capacity set too high
        // for the machine): the work of a node without one (loading its local models at
        // start) passes, and it takes sessions meanwhile.
        let cpu_full = self.runtime.live_sessions() > 0 && cpu >= CPU_FULL;
        let available = taken < self.capacity && !cpu_full && self.runtime.can_start().is_ok();
        // The sessions accepted and not started yet count as jobs: the load includes them.
        let jobs = u32::try_from(taken).unwrap_or(u32::MAX);
        WorkerStatus { available, load: sessions.min(1.0), jobs }
    }

    async fn handle(&mut self, event: WorkerEvent, ended: &mpsc::UnboundedSender<()>) {
        match event {
            WorkerEvent::Registered { worker_id } => tracing::info!(%worker_id, "agent worker registered"),
            WorkerEvent::Disconnected { reason } => tracing::warn!(%reason, "agent worker disconnected"),
            WorkerEvent::Offer { job, resuming } => {
                let answer = self.answer(&job, resuming).await;
                self.worker.answer(&job.id, answer);
            }
            WorkerEvent::Assigned { job, url, token } => self.assigned(&job, url, token, ended.clone()),
            WorkerEvent::Terminated { job_id } => {
                let session = self.running.lock().unwrap_or_else(PoisonError::into_inner).get(&job_id).cloned();
                if let Some(session_id) = session {
                    let runtime = self.runtime.clone();
                    self.tasks.spawn(async move {
                        if let Err(error) = runtime.end_session(&session_id, JOB_TERMINATED).await {
                            tracing::debug!(session.id = %session_id, %error, "terminated job's session did not end here");
                        }
                    });
                }
            }
        }
    }

    /// Whether this node takes `job`, and as whom its agent joins.
    async fn answer(&mut self, job: &proto::Job, resuming: bool) -> OfferAnswer {
        let status = self.status();
        if !status.available {
            tracing::info!(job = %job.id, load = status.load, jobs = status.jobs, cpu = self.cpu.share(),
                "agent job offer declined: this node is full or draining");
            return OfferAnswer::Decline;
        }
        let session_id = job.metadata.as_str();
        let room_name = job.room.as_ref().map_or("", |room| room.name.as_str());
        let store = &self.runtime.config().store;
        let read = async {
            Ok::<_, svc_store::StoreError>((store.session(session_id).await?, store.session_config(session_id).await?))
        };
        let (row, config) = match tokio::time::timeout(READ_BOUND, read).await {
            Ok(Ok(read)) => read,
            Ok(Err(error)) => {
                tracing::warn!(job = %job.id, %error, "cannot read the job's session; declined");
                return OfferAnswer::Decline;
            }
            Err(_) => {
                tracing::warn!(job = %job.id, "the job's session took too long to read; declined");
                return OfferAnswer::Decline;
            }
        };
        let Some(row) = row.filter(|row| row.status == "active") else {
            tracing::info!(job = %job.id, session.id = %session_id, "the job's session is not live; its job ends");
            return OfferAnswer::Terminate;
        };
        if row.room_name.as_deref() != Some(room_name) {
            tracing::warn!(job = %job.id, session.id = %session_id, room = room_name, "the job's room is not its session's; its job ends");
            return OfferAnswer::Terminate;
        }
        let mut session: ResolvedSession = match config.map(serde_json::from_value).transpose() {
            Ok(Some(session)) => session,
            Ok(None) | Err(_) => {
                tracing::error!(job = %job.id, session.id = %session_id, "the job's session has no readable configuration; its job ends");
                return OfferAnswer::Terminate;
            }
        };
        // A session a node ran before (it died, or lost the server, and LiveKit dispatched the
        // job again) is taken over as a resumed conversation of itself: no greeting, the
        // provider's resumption handle or else the stored transcript carried over, and the
        // timeline's second `agent.joined` names it in `resumed_from`.
        if let Some(previous) = &row.node_id {
            tracing::info!(job = %job.id, session.id = %session_id, previous_node = %previous, resuming,
                "taking over a session another node ran");
            session.resume_session_id = Some(session_id.to_owned());
        }
        let name = session.agent.name.clone().unwrap_or_else(|| "Agent".to_owned());
        let request = SessionRequest {
            session_id: session_id.to_owned(),
            room_name: room_name.to_owned(),
            session: Arc::new(session),
            local_slot: None,
        };
        self.accepted.insert(job.id.clone(), Accepted { request, at: Instant::now() });
        tracing::info!(job = %job.id, session.id = %session_id, load = status.load, "agent job offer accepted");
        OfferAnswer::Accept {
            identity: crate::runtime::agent_identity(session_id),
            name,
            attributes: HashMap::from([(AGENT_STATE_ATTRIBUTE.to_owned(), "initializing".to_owned())]),
        }
    }

    /// Runs an assigned job's session on its own task until it ends.
    fn assigned(&mut self, job: &proto::Job, url: String, token: String, ended: mpsc::UnboundedSender<()>) {
        let Some(Accepted { request, .. }) = self.accepted.remove(&job.id) else {
            tracing::warn!(job = %job.id, "assigned a job this node did not accept (or accepted too long ago)");
            self.worker.job_ended(&job.id, Some("not accepted by this worker".to_owned()));
            return;
        };
        let (runtime, worker, running) = (self.runtime.clone(), self.worker.clone(), self.running.clone());
        let job_id = job.id.clone();
        let starting = self.starting.clone();
        starting.fetch_add(1, Ordering::Relaxed);
        self.tasks.spawn(async move {
            let session_id = request.session_id.clone();
            let started = runtime.start_assigned(request, &url, &token).await;
            // Started: a live session now (or none, when it failed).
            starting.fetch_sub(1, Ordering::Relaxed);
            match started {
                Ok(()) => {
                    running.lock().unwrap_or_else(PoisonError::into_inner).insert(job_id.clone(), session_id.clone());
                    // The status changes with the session's start (and again with its end).
                    let _ = ended.send(());
                    if let Some(finished) = runtime.session_finished(&session_id) {
                        finished.cancelled().await;
                    }
                    running.lock().unwrap_or_else(PoisonError::into_inner).remove(&job_id);
                    worker.job_ended(&job_id, None);
                }
                Err(error) => {
                    tracing::error!(session.id = %session_id, job = %job_id, %error, "the assigned session could not start");
                    let store = &runtime.config().store;
                    if let Err(error) = store.finish_session(&session_id, "error", epoch_us(), None).await {
                        tracing::warn!(session.id = %session_id, %error, "could not store the unstarted session's end");
                    }
                    worker.job_ended(&job_id, Some(error.to_string()));
                }
            }
            // As above: the loop may be gone at shutdown, which is fine.
            let _ = ended.send(());
        });
    }
}

/// The process's CPU use as a share of the machine's cores, between two samples.
struct CpuMeter {
    cores: f32,
    last: Option<(Instant, f64)>,
    share: f32,
}

impl CpuMeter {
    fn new() -> CpuMeter {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) as f32;
        CpuMeter { cores, last: process_cpu_seconds().map(|seconds| (Instant::now(), seconds)), share: 0.0 }
    }

    fn sample(&mut self) {
        let (Some(seconds), now) = (process_cpu_seconds(), Instant::now()) else { return };
        if let Some((at, before)) = self.last {
            let wall = now.duration_since(at).as_secs_f64();
            if wall > 0.0 {
                self.share = ((seconds - before) / wall) as f32 / self.cores;
            }
        }
        self.last = Some((now, seconds));
    }

    fn share(&self) -> f32 {
        self.share
    }
}

/// User and system CPU seconds of this process (`/proc/self/stat`, in the kernel's 100 Hz
/// ticks); `None` where there is no procfs.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `utime` and `stime` are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
