//! The dispatcher's rules, without sockets or clocks: the choice by load, offers declined or
//! unanswered, jobs that wait for a worker, assignment tokens, deletion and automatic dispatch.

use std::time::{Duration, Instant};

use livekit_protocol as proto;
use proto::server_message::Message as ServerMessage;
use proto::worker_message::Message as WorkerMessage;

use super::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn dispatcher() -> Dispatcher {
    Dispatcher::new(Ids::seeded(3), TIMEOUT)
}

fn register(dispatcher: &mut Dispatcher, now: Instant, agent_name: &str) -> String {
    let request = proto::RegisterWorkerRequest {
        r#type: proto::JobType::JtRoom as i32,
        agent_name: agent_name.to_owned(),
        ..Default::default()
    };
    dispatcher.register(now, &request).expect("registers")
}

fn room(name: &str) -> proto::Room {
    proto::Room { name: name.to_owned(), sid: format!("RM_{name}"), ..Default::default() }
}

fn create(dispatcher: &mut Dispatcher, now: Instant, room_name: &str, agent_name: &str) -> proto::AgentDispatch {
    let request = proto::CreateAgentDispatchRequest {
        agent_name: agent_name.to_owned(),
        room: room_name.to_owned(),
        metadata: "job metadata".to_owned(),
        ..Default::default()
    };
    dispatcher.create_dispatch(now, room(room_name), request).expect("room for a dispatch")
}

/// Every output so far, drained.
fn outputs(dispatcher: &mut Dispatcher) -> Vec<DispatchOutput> {
    std::iter::from_fn(|| dispatcher.poll_output()).collect()
}

/// The availability requests among `outputs`: (worker, job id).
fn offers(outputs: &[DispatchOutput]) -> Vec<(String, String)> {
    outputs
        .iter()
        .filter_map(|output| match output {
            DispatchOutput::Send { worker, message: ServerMessage::Availability(request) } => {
                Some((worker.clone(), request.job.as_ref().map(|job| job.id.clone()).unwrap_or_default()))
            }
            _ => None,
        })
        .collect()
}

fn answer(available: bool, job_id: &str, identity: &str) -> WorkerMessage {
    WorkerMessage::Availability(proto::AvailabilityResponse {
        job_id: job_id.to_owned(),
        available,
        participant_identity: identity.to_owned(),
        participant_name: "Helper".to_owned(),
        ..Default::default()
    })
}

fn load(value: f32, available: bool) -> WorkerMessage {
    let status = if available { proto::WorkerStatus::WsAvailable } else { proto::WorkerStatus::WsFull };
    WorkerMessage::UpdateWorker(proto::UpdateWorkerStatus {
        status: Some(status as i32),
        load: value,
        ..Default::default()
    })
}

#[test]
fn a_job_goes_to_the_least_loaded_available_worker_and_a_burst_spreads() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    let busy = register(&mut dispatcher, now, "helper");
    let idle = register(&mut dispatcher, now, "helper");
    let full = register(&mut dispatcher, now, "helper");
    let other = register(&mut dispatcher, now, "someone-else");
    dispatcher.handle_message(now, &busy, load(0.6, true));
    dispatcher.handle_message(now, &idle, load(0.1, true));
    dispatcher.handle_message(now, &full, load(0.0, false));
    dispatcher.handle_message(now, &other, load(0.0, true));

    create(&mut dispatcher, now, "room-a", "helper");
    let first = offers(&outputs(&mut dispatcher));
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].0, idle, "the least loaded of the available workers for the name");
    // The idle worker already has an offer since its last report, the busy one is loaded: with
    // equal loads the offers alternate.
    dispatcher.handle_message(now, &busy, load(0.1, true));
    create(&mut dispatcher, now, "room-b", "helper");
    let second = offers(&outputs(&mut dispatcher));
    assert_eq!(second[0].0, busy, "a burst spreads before the next load report");
}

#[test]
fn a_burst_spreads_over_workers_whose_loads_differ_by_noise() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    let quiet = register(&mut dispatcher, now, "helper");
    let noisy = register(&mut dispatcher, now, "helper");
    dispatcher.handle_message(now, &quiet, load(0.0, true));
    // A little CPU and no job: a job is expected to add the default share.
    dispatcher.handle_message(now, &noisy, load(0.02, true));
    let mut taken = std::collections::BTreeMap::<String, usize>::new();
    for room in ["room-a", "room-b", "room-c", "room-d"] {
        create(&mut dispatcher, now, room, "helper");
        for (worker, _) in offers(&outputs(&mut dispatcher)) {
            *taken.entry(worker).or_default() += 1;
        }
    }
    assert_eq!(taken.get(&quiet), Some(&2), "{taken:?}");
    assert_eq!(taken.get(&noisy), Some(&2), "{taken:?}");
}

#[test]
fn a_declined_or_unanswered_offer_goes_to_the_next_worker_and_a_job_waits_for_one() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    let first = register(&mut dispatcher, now, "helper");
    let second = register(&mut dispatcher, now, "helper");
    create(&mut dispatcher, now, "room-a", "helper");
    let offered = offers(&outputs(&mut dispatcher));
    let (worker, job) = offered[0].clone();
    dispatcher.handle_message(now, &worker, answer(false, &job, ""));
    let next = offers(&outputs(&mut dispatcher));
    let other = if worker == first { second } else { first };
    assert_eq!(next, [(other.clone(), job.clone())], "declined: the other worker is asked");

    // It never answers: after the timeout nobody is left, so the job waits for a new worker.
    assert_eq!(dispatcher.poll_timeout(), Some(now + TIMEOUT));
    dispatcher.handle_timeout(now + TIMEOUT);
    assert!(offers(&outputs(&mut dispatcher)).is_empty());
    assert_eq!(dispatcher.poll_timeout(), None);
    // A late answer from the worker that timed out is not an assignment.
    dispatcher.handle_message(now + TIMEOUT, &other, answer(true, &job, ""));
    assert!(outputs(&mut dispatcher).is_empty());
    let late = register(&mut dispatcher, now + TIMEOUT, "helper");
    assert_eq!(offers(&outputs(&mut dispatcher)), [(late, job)]);
}

#[test]
fn an_accepted_offer_is_assigned_with_the_identity_the_worker_chose_and_the_agent_name() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    let request = proto::RegisterWorkerRequest {
        r#type: proto::JobType::JtRoom as i32,
        agent_name: "helper".to_owned(),
        allowed_permissions: Some(proto::ParticipantPermission {
            can_publish: true,
            can_subscribe: true,
            can_publish_data: true,
            hidden: false,
            ..Default::default()
        }),
        ..Default::default()
    };
    let worker = dispatcher.register(now, &request).expect("registers");
    let dispatch = create(&mut dispatcher, now, "room-a", "helper");
    assert!(dispatch.id.starts_with("AD_") && worker.starts_with("AW_"));
    let (_, job) = offers(&outputs(&mut dispatcher))[0].clone();
    assert!(job.starts_with("AJ_"));
    dispatcher.handle_message(now, &worker, answer(true, &job, "agent-helper-1"));
    let assigned = outputs(&mut dispatcher);
    let [DispatchOutput::Assign { worker: to, job: assigned_job, grant }] = assigned.as_slice() else {
        panic!("one assignment: {assigned:?}");
    };
    assert_eq!(to, &worker);
    assert_eq!(assigned_job.dispatch_id, dispatch.id);
    assert_eq!(assigned_job.metadata, "job metadata");
    assert_eq!(assigned_job.room.as_ref().map(|room| room.name.as_str()), Some("room-a"));
    assert_eq!(
        (grant.room.as_str(), grant.identity.as_str(), grant.name.as_str()),
        ("room-a", "agent-helper-1", "Helper")
    );
    assert_eq!(grant.attributes.get(AGENT_NAME_ATTRIBUTE).map(String::as_str), Some("helper"));
    assert!(grant.permissions.can_publish && !grant.permissions.can_update_metadata);

    // Listed with its running job; the worker's report of its end is kept there.
    let listed = dispatcher.list("room-a", "");
    let jobs = &listed[0].state.as_ref().expect("state").jobs;
    assert_eq!(jobs[0].state.as_ref().map(|state| state.status), Some(proto::JobStatus::JsRunning as i32));
    let done = proto::UpdateJobStatus { job_id: job, status: proto::JobStatus::JsSuccess as i32, error: String::new() };
    dispatcher.handle_message(now, &worker, WorkerMessage::UpdateJob(done));
    let jobs = dispatcher.list("room-a", &dispatch.id)[0].state.clone().expect("state").jobs;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].state.as_ref().map(|state| state.status), Some(proto::JobStatus::JsSuccess as i32));
}

#[test]
fn deleting_a_dispatch_terminates_its_job_and_a_closed_room_forgets_its_dispatches() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    let worker = register(&mut dispatcher, now, "helper");
    let dispatch = create(&mut dispatcher, now, "room-a", "helper");
    let (_, job) = offers(&outputs(&mut dispatcher))[0].clone();
    dispatcher.handle_message(now, &worker, answer(true, &job, ""));
    outputs(&mut dispatcher);
    assert_eq!(dispatcher.delete_dispatch("room-a", "AD_nope"), None);
    assert_eq!(dispatcher.delete_dispatch("room-a", &dispatch.id).map(|d| d.id), Some(dispatch.id.clone()));
    let termination = ServerMessage::Termination(proto::JobTermination { job_id: job });
    assert_eq!(outputs(&mut dispatcher), [DispatchOutput::Send { worker: worker.clone(), message: termination }]);
    assert!(dispatcher.list("room-a", "").is_empty());

    create(&mut dispatcher, now, "room-b", "helper");
    outputs(&mut dispatcher);
    dispatcher.room_closed("room-b");
    assert!(dispatcher.list("room-b", "").is_empty());
    assert_eq!(dispatcher.poll_timeout(), None, "its pending offer is gone too");
}

#[test]
fn a_room_holds_a_bounded_number_of_dispatches() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    for _ in 0..MAX_DISPATCHES_PER_ROOM {
        create(&mut dispatcher, now, "busy", "helper");
    }
    let request = proto::CreateAgentDispatchRequest { agent_name: "helper".to_owned(), ..Default::default() };
    assert_eq!(dispatcher.create_dispatch(now, room("busy"), request.clone()), None);
    assert!(dispatcher.create_dispatch(now, room("quiet"), request).is_some(), "another room is not affected");
}

#[test]
fn workers_without_an_agent_name_get_every_room_and_a_lost_worker_hands_its_offer_on() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    dispatcher.room_opened(now, room("before-any-worker"), &[]);
    assert!(dispatcher.list("before-any-worker", "").is_empty(), "no automatic worker, no dispatch");
    let first = register(&mut dispatcher, now, "");
    let second = register(&mut dispatcher, now, "");
    let named = register(&mut dispatcher, now, "helper");
    let agents = [proto::RoomAgentDispatch { agent_name: "helper".to_owned(), ..Default::default() }];
    dispatcher.room_opened(now, room("room-a"), &agents);
    let offered = offers(&outputs(&mut dispatcher));
    assert_eq!(offered.len(), 2, "one automatic job and the room's named agent: {offered:?}");
    assert!(offered.iter().any(|(worker, _)| *worker == named));
    let (automatic, job) = offered.iter().find(|(worker, _)| *worker != named).cloned().expect("automatic");
    dispatcher.worker_gone(now, &automatic);
    let other = if automatic == first { second } else { first };
    assert_eq!(offers(&outputs(&mut dispatcher)), [(other, job)]);
}

#[test]
fn a_dead_workers_job_is_offered_again_once_its_agent_has_left_too() {
    let now = Instant::now();
    let mut dispatcher = dispatcher();
    let first = register(&mut dispatcher, now, "helper");
    create(&mut dispatcher, now, "room-a", "helper");
    let (_, job) = offers(&outputs(&mut dispatcher))[0].clone();
    dispatcher.handle_message(now, &first, answer(true, &job, "agent-one"));
    outputs(&mut dispatcher);
    let second = register(&mut dispatcher, now, "helper");

    // Its agent leaves while the worker lives: the worker reports the job's end, nothing else.
    dispatcher.agent_left(now, "room-a", "agent-one");
    assert!(outputs(&mut dispatcher).is_empty());
    // The worker's connection drops with its agent gone: the job goes to the other worker.
    dispatcher.worker_gone(now, &first);
    let again = outputs(&mut dispatcher);
    let resumed = again.iter().find_map(|output| match output {
        DispatchOutput::Send { worker, message: ServerMessage::Availability(request) } => Some((worker, request)),
        _ => None,
    });
    let (to, request) = resumed.expect("offered again");
    assert_eq!((to, request.resuming), (&second, true));
    assert_eq!(request.job.as_ref().map(|job| job.id.as_str()), Some(job.as_str()));

    // The other order: a worker gone whose agent is still in the room keeps the job until the
    // agent leaves (a worker that only lost its connection must not get a second agent in).
    dispatcher.handle_message(now, &second, answer(true, &job, "agent-two"));
    outputs(&mut dispatcher);
    let third = register(&mut dispatcher, now, "helper");
    dispatcher.worker_gone(now, &second);
    assert!(offers(&outputs(&mut dispatcher)).is_empty(), "its agent is still in the room");
    dispatcher.agent_left(now, "room-a", "agent-two");
    assert_eq!(offers(&outputs(&mut dispatcher)), [(third, job)]);
}
