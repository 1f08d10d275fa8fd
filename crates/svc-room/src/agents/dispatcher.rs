//! Agent dispatch as a sans-IO state machine: the registered workers, each room's dispatches and
//! their jobs, and the offers waiting on a worker's answer. LiveKit's rules: a job goes to a
//! worker registered for the dispatch's `agent_name` (the empty name is automatic dispatch: one
//! job for every room); the server asks first (`AvailabilityRequest`) and assigns only on a yes,
//! with a join token for the identity the worker chose; a worker that says no, or says nothing
//! for [`ANSWER_TIMEOUT`], is passed over for the next. The choice among workers is by load: the
//! least loaded of those that report themselves available (a worker marks itself full past its
//! own threshold), counting the jobs offered since its last report at its own load per job, so a
//! burst spreads before new loads arrive. A job no worker can take waits for one to register or free up. A job
//! whose worker died is offered again (`resuming`) once its agent has left the room as well.
//!
//! The shell (`super::service`) feeds it worker messages, API calls, room openings and closings
//! and time, and carries out [`DispatchOutput`]s: messages to workers, and assignments, whose
//! token it signs.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use livekit_protocol as proto;
use proto::server_message::Message as ServerMessage;
use proto::worker_message::Message as WorkerMessage;

use crate::ids::Ids;

/// How long a worker has to answer an availability request (LiveKit's `AssignJobTimeout`).
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Dispatches one room may hold (each keeps its jobs' history while the room is open): the
/// server API cannot grow a room's bookkeeping without bound.
pub(crate) const MAX_DISPATCHES_PER_ROOM: usize = 100;

/// The attribute LiveKit gives an agent's participant: the worker's `agent_name`.
pub(crate) const AGENT_NAME_ATTRIBUTE: &str = "lk.agent_name";

/// What the shell must do.
// Outputs live for microseconds in one queue; boxing each message would cost an allocation for
// no memory saved.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DispatchOutput {
    /// Send a message to a worker.
    Send { worker: String, message: ServerMessage },
    /// Assign `job` to `worker`: sign a join token for `grant` and send a `JobAssignment`.
    Assign { worker: String, job: Box<proto::Job>, grant: AgentGrant },
}

/// Who a job's agent joins as: what the worker answered, with its registered permissions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentGrant {
    pub room: String,
    pub identity: String,
    pub name: String,
    pub metadata: String,
    pub attributes: BTreeMap<String, String>,
    pub permissions: proto::ParticipantPermission,
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RegisterError {
    #[error("unknown job type {0}")]
    UnknownJobType(i32),
}

struct Worker {
    agent_name: String,
    job_type: proto::JobType,
    permissions: proto::ParticipantPermission,
    available: bool,
    load: f32,
    /// Jobs it said it runs with its last load.
    jobs: u32,
    /// Jobs offered since the worker's last load report.
    offered_since_report: u32,
}

/// The load a job adds to a worker that has not said what one costs it (it runs none yet).
const DEFAULT_JOB_LOAD: f32 = 0.05;

impl Worker {
    /// The load it reported, and what the jobs offered since are expected to add (at its own
    /// load per job): a burst of jobs spreads over the workers before their next reports, and
    /// a worker whose load is mostly measurement noise does not take every job of one.
    fn expected_load(&self) -> f32 {
        let per_job = if self.jobs > 0 && self.load > 0.0 { self.load / self.jobs as f32 } else { DEFAULT_JOB_LOAD };
        self.load + per_job * self.offered_since_report as f32
    }
}

struct Offer {
    worker: String,
    deadline: Instant,
}

struct Job {
    proto: proto::Job,
    /// Workers that said no or never answered.
    passed_over: HashSet<String>,
    /// Waiting on this worker's answer.
    offer: Option<Offer>,
    /// Assigned to this worker.
    worker: Option<String>,
    /// The assigned worker's connection is gone.
    worker_lost: bool,
    /// The job's agent has left its room.
    agent_left: bool,
    /// Offered again after its worker died: offers say `resuming`.
    resuming: bool,
}

/// The dispatcher.
pub(crate) struct Dispatcher {
    ids: Ids,
    workers: BTreeMap<String, Worker>,
    /// Each open room's info, and its dispatches in creation order.
    rooms: HashMap<String, (proto::Room, Vec<proto::AgentDispatch>)>,
    jobs: BTreeMap<String, Job>,
    outputs: VecDeque<DispatchOutput>,
    answer_timeout: Duration,
}

impl Dispatcher {
    pub(crate) fn new(ids: Ids, answer_timeout: Duration) -> Dispatcher {
        Dispatcher {
            ids,
            workers: BTreeMap::new(),
            rooms: HashMap::new(),
            jobs: BTreeMap::new(),
            outputs: VecDeque::new(),
            answer_timeout,
        }
    }

    pub(crate) fn poll_output(&mut self) -> Option<DispatchOutput> {
        self.outputs.pop_front()
    }

    /// When the earliest unanswered offer runs out.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.jobs.values().filter_map(|job| job.offer.as_ref().map(|offer| offer.deadline)).min()
    }

    /// A worker registers; its id (`AW_…`), which the shell answers with.
    pub(crate) fn register(
        &mut self,
        now: Instant,
        request: &proto::RegisterWorkerRequest,
    ) -> Result<String, RegisterError> {
        let job_type =
            proto::JobType::try_from(request.r#type).map_err(|_| RegisterError::UnknownJobType(request.r#type))?;
        let permissions = request.allowed_permissions.clone().unwrap_or(proto::ParticipantPermission {
            can_subscribe: true,
            can_publish: true,
            can_publish_data: true,
            can_update_metadata: true,
            ..Default::default()
        });
        let id = self.ids.prefixed("AW_");
        let worker = Worker {
            agent_name: request.agent_name.clone(),
            job_type,
            permissions,
            available: true,
            load: 0.0,
            jobs: 0,
            offered_since_report: 0,
        };
        self.workers.insert(id.clone(), worker);
        self.offer_waiting_jobs(now);
        Ok(id)
    }

    /// A registered worker's message.
    pub(crate) fn handle_message(&mut self, now: Instant, worker: &str, message: WorkerMessage) {
        match message {
            WorkerMessage::Availability(answer) => self.handle_answer(now, worker, answer),
            WorkerMessage::UpdateWorker(update) => {
                let Some(entry) = self.workers.get_mut(worker) else { return };
                if let Some(status) = update.status {
                    entry.available = status == proto::WorkerStatus::WsAvailable as i32;
                }
                entry.load = update.load;
                entry.jobs = update.job_count;
                entry.offered_since_report = 0;
                if entry.available {
                    self.offer_waiting_jobs(now);
                }
            }
            WorkerMessage::UpdateJob(update) => self.handle_job_update(worker, &update),
            // Pings are the connection's (the shell answers them with its clock); a second
            // registration, simulated and migrated jobs are not offered by this server.
            WorkerMessage::Ping(_)
            | WorkerMessage::Register(_)
            | WorkerMessage::SimulateJob(_)
            | WorkerMessage::MigrateJob(_) => {
                tracing::debug!(worker, "worker message not handled");
            }
        }
    }

    /// A worker's connection ended: what it was asked goes to another; a job it ran is
    /// dispatched again once its agent has left the room too (a worker that only lost its
    /// connection keeps its agent in the room, and a second agent would join beside it).
    pub(crate) fn worker_gone(&mut self, now: Instant, worker: &str) {
        self.workers.remove(worker);
        for job in self.jobs.values_mut() {
            if job.offer.as_ref().is_some_and(|offer| offer.worker == worker) {
                job.offer = None;
                job.passed_over.insert(worker.to_owned());
            }
            if job.worker.as_deref() == Some(worker) {
                job.worker_lost = true;
                job.passed_over.insert(worker.to_owned());
            }
        }
        self.redispatch_orphans();
        self.offer_waiting_jobs(now);
    }

    /// An agent participant left `room`: if a job's worker is gone too, the job is dispatched
    /// again (LiveKit's recovery from a dead worker).
    pub(crate) fn agent_left(&mut self, now: Instant, room: &str, identity: &str) {
        for job in self.jobs.values_mut() {
            let state = job.proto.state.as_ref();
            if job.worker.is_some()
                && job.room_name() == room
                && state.is_some_and(|s| s.participant_identity == identity)
            {
                job.agent_left = true;
            }
        }
        self.redispatch_orphans();
        self.offer_waiting_jobs(now);
    }

    /// Jobs whose worker and agent are both gone wait for an offer again.
    fn redispatch_orphans(&mut self) {
        for job in self.jobs.values_mut().filter(|job| job.worker_lost && job.agent_left) {
            tracing::info!(job = %job.proto.id, room = job.room_name(), "agent worker died: dispatching its job again");
            job.worker = None;
            job.worker_lost = false;
            job.agent_left = false;
            job.resuming = true;
            if let Some(state) = job.proto.state.as_mut() {
                state.status = proto::JobStatus::JsPending as i32;
                state.participant_identity.clear();
                state.worker_id.clear();
            }
        }
    }

    /// A room opened: the dispatches it was created with, and automatic dispatch.
    pub(crate) fn room_opened(&mut self, now: Instant, room: proto::Room, agents: &[proto::RoomAgentDispatch]) {
        self.rooms.entry(room.name.clone()).or_insert_with(|| (room.clone(), Vec::new()));
        // Automatic dispatch, when there are workers without an agent name: one job for the room.
        if self.workers.values().any(|worker| worker.agent_name.is_empty()) {
            self.dispatch(now, &room.name, String::new(), String::new(), HashMap::new());
        }
        for agent in agents {
            self.dispatch(now, &room.name, agent.agent_name.clone(), agent.metadata.clone(), agent.attributes.clone());
        }
    }

    /// A room closed: its dispatches and jobs are over (its agents left with everyone else).
    pub(crate) fn room_closed(&mut self, room: &str) {
        self.rooms.remove(room);
        let ids: Vec<String> =
            self.jobs.iter().filter(|(_, job)| job.room_name() == room).map(|(id, _)| id.clone()).collect();
        for id in ids {
            self.jobs.remove(&id);
        }
    }

    /// `AgentDispatchService.CreateDispatch` in an open room (`room` is its info); `None` when
    /// the room holds [`MAX_DISPATCHES_PER_ROOM`] already.
    pub(crate) fn create_dispatch(
        &mut self,
        now: Instant,
        room: proto::Room,
        request: proto::CreateAgentDispatchRequest,
    ) -> Option<proto::AgentDispatch> {
        let (_, dispatches) = self.rooms.entry(room.name.clone()).or_insert_with(|| (room.clone(), Vec::new()));
        if dispatches.len() >= MAX_DISPATCHES_PER_ROOM {
            return None;
        }
        self.dispatch(now, &room.name, request.agent_name, request.metadata, request.attributes)
    }

    /// `AgentDispatchService.DeleteDispatch`: the dispatch goes, its running jobs are terminated.
    pub(crate) fn delete_dispatch(&mut self, room: &str, dispatch_id: &str) -> Option<proto::AgentDispatch> {
        let dispatches = &mut self.rooms.get_mut(room)?.1;
        let position = dispatches.iter().position(|dispatch| dispatch.id == dispatch_id)?;
        let removed = dispatches.remove(position);
        let ids: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, job)| job.proto.dispatch_id == dispatch_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(job) = self.jobs.remove(&id) else { continue };
            if let Some(worker) = job.worker {
                let termination = ServerMessage::Termination(proto::JobTermination { job_id: id });
                self.outputs.push_back(DispatchOutput::Send { worker, message: termination });
            }
        }
        Some(removed)
    }

    /// `AgentDispatchService.ListDispatch`: a room's dispatches (or the one named), with their
    /// jobs' states.
    pub(crate) fn list(&self, room: &str, dispatch_id: &str) -> Vec<proto::AgentDispatch> {
        let Some((_, dispatches)) = self.rooms.get(room) else { return Vec::new() };
        dispatches
            .iter()
            .filter(|dispatch| dispatch_id.is_empty() || dispatch.id == dispatch_id)
            .map(|dispatch| {
                let mut dispatch = dispatch.clone();
                let running = self.jobs.values().filter(|job| job.proto.dispatch_id == dispatch.id);
                if let Some(state) = dispatch.state.as_mut() {
                    // The ended jobs are kept there; the running ones are added.
                    state.jobs.extend(running.map(|job| job.proto.clone()));
                }
                dispatch
            })
            .collect()
    }

    /// Offers past their deadline: the worker is passed over, the job offered to the next.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let mut expired = false;
        for job in self.jobs.values_mut() {
            if let Some(offer) = job.offer.take_if(|offer| offer.deadline <= now) {
                tracing::info!(job = %job.proto.id, worker = %offer.worker, "agent worker did not answer in time");
                job.passed_over.insert(offer.worker);
                expired = true;
            }
        }
        if expired {
            self.offer_waiting_jobs(now);
        }
    }

    /// Creates a dispatch and its job in the open `room` and offers the job.
    fn dispatch(
        &mut self,
        now: Instant,
        room: &str,
        agent_name: String,
        metadata: String,
        attributes: HashMap<String, String>,
    ) -> Option<proto::AgentDispatch> {
        let (room_info, dispatches) = self.rooms.get_mut(room)?;
        let dispatch = proto::AgentDispatch {
            id: self.ids.prefixed("AD_"),
            agent_name: agent_name.clone(),
            room: room.to_owned(),
            metadata: metadata.clone(),
            attributes: attributes.clone(),
            state: Some(proto::AgentDispatchState { created_at: 0, ..Default::default() }),
            ..Default::default()
        };
        let job = proto::Job {
            id: self.ids.prefixed("AJ_"),
            dispatch_id: dispatch.id.clone(),
            r#type: proto::JobType::JtRoom as i32,
            room: Some(room_info.clone()),
            metadata,
            agent_name,
            attributes,
            state: Some(proto::JobState { status: proto::JobStatus::JsPending as i32, ..Default::default() }),
            ..Default::default()
        };
        dispatches.push(dispatch.clone());
        let job = Job {
            proto: job,
            passed_over: HashSet::new(),
            offer: None,
            worker: None,
            worker_lost: false,
            agent_left: false,
            resuming: false,
        };
        self.jobs.insert(job.proto.id.clone(), job);
        self.offer_waiting_jobs(now);
        Some(dispatch)
    }

    /// Offers every job that waits (no offer out, not assigned) to its best worker, if any.
    fn offer_waiting_jobs(&mut self, now: Instant) {
        let waiting: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, job)| job.offer.is_none() && job.worker.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in waiting {
            let Some(job) = self.jobs.get(&id) else { continue };
            let Some(worker) = self.choose_worker(&job.proto.agent_name, &job.passed_over) else { continue };
            let Some(job) = self.jobs.get_mut(&id) else { continue };
            job.offer = Some(Offer { worker: worker.clone(), deadline: now + self.answer_timeout });
            if let Some(entry) = self.workers.get_mut(&worker) {
                tracing::info!(job = %id, worker, load = entry.load, jobs = entry.jobs,
                    expected_load = entry.expected_load(), "agent job offered");
                entry.offered_since_report += 1;
            }
            let request = proto::AvailabilityRequest { job: Some(job.proto.clone()), resuming: job.resuming };
            self.outputs.push_back(DispatchOutput::Send { worker, message: ServerMessage::Availability(request) });
        }
    }

    /// The least loaded available worker for `agent_name` not yet passed over.
    fn choose_worker(&self, agent_name: &str, passed_over: &HashSet<String>) -> Option<String> {
        self.workers
            .iter()
            .filter(|(id, worker)| {
                worker.agent_name == agent_name
                    && worker.job_type == proto::JobType::JtRoom
                    && worker.available
                    && !passed_over.contains(*id)
            })
            .min_by(|(_, a), (_, b)| {
                (a.expected_load().total_cmp(&b.expected_load()))
                    .then(a.offered_since_report.cmp(&b.offered_since_report))
            })
            .map(|(id, _)| id.clone())
    }

    fn handle_answer(&mut self, now: Instant, worker: &str, answer: proto::AvailabilityResponse) {
        let Some(job) = self.jobs.get_mut(&answer.job_id) else { return };
        if job.offer.as_ref().is_none_or(|offer| offer.worker != worker) {
            tracing::debug!(job = %answer.job_id, worker, "availability answer for an offer not made");
            return;
        }
        job.offer = None;
        if answer.terminate {
            self.end_job(&answer.job_id, proto::JobStatus::JsSuccess, "");
            return;
        }
        if !answer.available {
            job.passed_over.insert(worker.to_owned());
            self.offer_waiting_jobs(now);
            return;
        }
        let Some(entry) = self.workers.get(worker) else { return };
        let identity = if answer.participant_identity.is_empty() {
            format!("agent-{}", answer.job_id)
        } else {
            answer.participant_identity
        };
        let mut attributes: BTreeMap<String, String> = answer.participant_attributes.into_iter().collect();
        attributes.insert(AGENT_NAME_ATTRIBUTE.to_owned(), entry.agent_name.clone());
        let grant = AgentGrant {
            room: job.room_name().to_owned(),
            identity: identity.clone(),
            name: answer.participant_name,
            metadata: answer.participant_metadata,
            attributes,
            permissions: entry.permissions.clone(),
        };
        job.worker = Some(worker.to_owned());
        if let Some(state) = job.proto.state.as_mut() {
            state.status = proto::JobStatus::JsRunning as i32;
            state.participant_identity = identity;
            state.worker_id = worker.to_owned();
        }
        let assigned = Box::new(job.proto.clone());
        self.outputs.push_back(DispatchOutput::Assign { worker: worker.to_owned(), job: assigned, grant });
    }

    fn handle_job_update(&mut self, worker: &str, update: &proto::UpdateJobStatus) {
        let Some(job) = self.jobs.get_mut(&update.job_id) else { return };
        if job.worker.as_deref() != Some(worker) {
            return;
        }
        let Ok(status) = proto::JobStatus::try_from(update.status) else { return };
        if matches!(status, proto::JobStatus::JsSuccess | proto::JobStatus::JsFailed) {
            self.end_job(&update.job_id, status, &update.error);
        } else if let Some(state) = job.proto.state.as_mut() {
            state.status = status as i32;
        }
    }

    /// A job is over: it leaves the running jobs and is kept, with how it ended, in its
    /// dispatch's state (the dispatch stays until deleted or its room closes, as LiveKit keeps
    /// it).
    fn end_job(&mut self, id: &str, status: proto::JobStatus, error: &str) {
        let Some(mut job) = self.jobs.remove(id) else { return };
        tracing::info!(job = id, ?status, error, room = job.room_name(), "agent job ended");
        if let Some(state) = job.proto.state.as_mut() {
            state.status = status as i32;
            error.clone_into(&mut state.error);
        }
        let Some((_, dispatches)) = self.rooms.get_mut(job.room_name()) else { return };
        let dispatch = dispatches.iter_mut().find(|dispatch| dispatch.id == job.proto.dispatch_id);
        if let Some(state) = dispatch.and_then(|dispatch| dispatch.state.as_mut()) {
            state.jobs.push(job.proto);
        }
    }
}

impl Job {
    fn room_name(&self) -> &str {
        self.proto.room.as_ref().map_or("", |room| room.name.as_str())
    }
}

#[cfg(test)]
#[path = "dispatcher_tests.rs"]
mod tests;
