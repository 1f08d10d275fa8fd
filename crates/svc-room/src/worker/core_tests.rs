use std::collections::HashMap;
use std::time::Instant;

use livekit_protocol as proto;
use proto::server_message::Message as ServerMessage;
use proto::worker_message::Message as WorkerMessage;

use super::{
    CoreOutput, OfferAnswer, PING_EVERY, SILENCE_LIMIT, STATUS_REFRESH, WorkerCore, WorkerEvent, WorkerStatus,
};

const URL: &str = "wss://media.example.com";

fn drain(core: &mut WorkerCore) -> Vec<CoreOutput> {
    std::iter::from_fn(|| core.poll_output()).collect()
}

fn registered(now: Instant) -> WorkerCore {
    let mut core = WorkerCore::new("svc", "1.0.0", URL);
    core.connected(now);
    let registered = proto::RegisterWorkerResponse { worker_id: "AW_1".to_owned(), ..Default::default() };
    core.handle_message(now, ServerMessage::Register(registered));
    drain(&mut core);
    core
}

fn offer(job_id: &str) -> ServerMessage {
    let job = proto::Job { id: job_id.to_owned(), metadata: "session-1".to_owned(), ..Default::default() };
    ServerMessage::Availability(proto::AvailabilityRequest { job: Some(job), resuming: false })
}

#[test]
fn a_connection_registers_for_the_agent_name_and_reports_the_status_once_registered() {
    let now = Instant::now();
    let mut core = WorkerCore::new("svc", "1.0.0", URL);
    core.set_status(now, WorkerStatus { available: true, load: 0.25, jobs: 2 });
    assert!(drain(&mut core).is_empty(), "nothing is sent before a connection");
    core.connected(now);
    let outputs = drain(&mut core);
    let [CoreOutput::Send(WorkerMessage::Register(register))] = outputs.as_slice() else { panic!("{outputs:?}") };
    assert_eq!(register.agent_name, "svc");
    assert_eq!(register.r#type, proto::JobType::JtRoom as i32);
    let answer = proto::RegisterWorkerResponse { worker_id: "AW_1".to_owned(), ..Default::default() };
    core.handle_message(now, ServerMessage::Register(answer));
    let outputs = drain(&mut core);
    assert_eq!(outputs[0], CoreOutput::Event(WorkerEvent::Registered { worker_id: "AW_1".to_owned() }));
    let CoreOutput::Send(WorkerMessage::UpdateWorker(update)) = &outputs[1] else { panic!("{outputs:?}") };
    assert_eq!(update.status, Some(proto::WorkerStatus::WsAvailable as i32));
    assert_eq!((update.load, update.job_count), (0.25, 2));
}

#[test]
fn an_offer_is_answered_once_with_the_identity_the_owner_chose() {
    let now = Instant::now();
    let mut core = registered(now);
    core.handle_message(now, offer("AJ_1"));
    let outputs = drain(&mut core);
    let [CoreOutput::Event(WorkerEvent::Offer { job, resuming: false })] = outputs.as_slice() else {
        panic!("{outputs:?}")
    };
    assert_eq!(job.metadata, "session-1");
    let attributes = HashMap::from([("lk.agent.state".to_owned(), "initializing".to_owned())]);
    let accept = OfferAnswer::Accept { identity: "agent-1".to_owned(), name: "Ada".to_owned(), attributes };
    core.answer("AJ_1", accept.clone());
    let outputs = drain(&mut core);
    let [CoreOutput::Send(WorkerMessage::Availability(answer))] = outputs.as_slice() else { panic!("{outputs:?}") };
    assert!(answer.available && !answer.terminate);
    assert_eq!((answer.participant_identity.as_str(), answer.participant_name.as_str()), ("agent-1", "Ada"));
    core.answer("AJ_1", accept);
    core.answer("AJ_unknown", OfferAnswer::Decline);
    assert!(drain(&mut core).is_empty(), "an offer is answered once, and only an offer made");
}

#[test]
fn declining_and_terminating_say_so() {
    let now = Instant::now();
    let mut core = registered(now);
    core.handle_message(now, offer("AJ_1"));
    core.handle_message(now, offer("AJ_2"));
    drain(&mut core);
    core.answer("AJ_1", OfferAnswer::Decline);
    core.answer("AJ_2", OfferAnswer::Terminate);
    let outputs = drain(&mut core);
    let [CoreOutput::Send(WorkerMessage::Availability(no)), CoreOutput::Send(WorkerMessage::Availability(end))] =
        outputs.as_slice()
    else {
        panic!("{outputs:?}")
    };
    assert!(!no.available && !no.terminate);
    assert!(!end.available && end.terminate);
}

#[test]
fn offers_made_on_a_broken_connection_are_not_answered_on_the_next() {
    let now = Instant::now();
    let mut core = registered(now);
    core.handle_message(now, offer("AJ_1"));
    core.disconnected("reset");
    core.connected(now);
    drain(&mut core);
    core.answer("AJ_1", OfferAnswer::Decline);
    assert!(drain(&mut core).is_empty());
}

#[test]
fn an_assignment_without_a_url_joins_the_workers_own() {
    let now = Instant::now();
    let mut core = registered(now);
    let job = proto::Job { id: "AJ_1".to_owned(), ..Default::default() };
    let assignment = proto::JobAssignment { job: Some(job.clone()), url: None, token: "t".to_owned() };
    core.handle_message(now, ServerMessage::Assignment(assignment));
    let elsewhere = proto::JobAssignment { job: Some(job), url: Some("wss://other".to_owned()), token: "u".to_owned() };
    core.handle_message(now, ServerMessage::Assignment(elsewhere));
    let urls: Vec<String> = drain(&mut core)
        .into_iter()
        .map(|output| match output {
            CoreOutput::Event(WorkerEvent::Assigned { url, .. }) => url,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(urls, [URL, "wss://other"]);
}

#[test]
fn the_status_is_reported_when_it_changes_enough_and_refreshed_when_it_does_not() {
    let now = Instant::now();
    let mut core = registered(now);
    core.set_status(now, WorkerStatus { available: true, load: 0.01, jobs: 0 });
    assert!(drain(&mut core).is_empty(), "a load change under the step is not reported");
    core.set_status(now, WorkerStatus { available: true, load: 0.01, jobs: 1 });
    assert_eq!(drain(&mut core).len(), 1, "a job more is");
    core.set_status(now, WorkerStatus { available: false, load: 0.01, jobs: 1 });
    let outputs = drain(&mut core);
    let [CoreOutput::Send(WorkerMessage::UpdateWorker(full))] = outputs.as_slice() else { panic!("{outputs:?}") };
    assert_eq!(full.status, Some(proto::WorkerStatus::WsFull as i32));
    let later = now + STATUS_REFRESH;
    core.handle_message(later, ServerMessage::Pong(proto::WorkerPong::default()));
    core.handle_timeout(later, 0);
    let refreshed = drain(&mut core);
    assert!(refreshed.iter().any(|output| matches!(output, CoreOutput::Send(WorkerMessage::UpdateWorker(_)))));
}

#[test]
fn a_server_going_away_is_left_for_another() {
    let now = Instant::now();
    let mut core = registered(now);
    let go_away = proto::agent_http::GoAway { reason: "draining".to_owned() };
    core.handle_message(now, ServerMessage::GoAway(go_away));
    assert!(matches!(drain(&mut core).as_slice(), [CoreOutput::Broken(reason)] if reason.contains("draining")));
}

#[test]
fn pings_go_out_on_time_and_a_silent_server_breaks_the_connection() {
    let now = Instant::now();
    let mut core = registered(now);
    assert_eq!(core.poll_timeout(), Some(now + PING_EVERY));
    core.handle_timeout(now + PING_EVERY, 42);
    let outputs = drain(&mut core);
    assert_eq!(outputs, [CoreOutput::Send(WorkerMessage::Ping(proto::WorkerPing { timestamp: 42 }))]);
    core.handle_timeout(now + SILENCE_LIMIT, 43);
    assert!(matches!(drain(&mut core).as_slice(), [CoreOutput::Broken(_)]));
}

#[test]
fn job_ends_are_reported_as_success_or_failure() {
    let now = Instant::now();
    let mut core = registered(now);
    core.job_ended("AJ_1", None);
    core.job_ended("AJ_2", Some("the provider refused".to_owned()));
    let statuses: Vec<(i32, String)> = drain(&mut core)
        .into_iter()
        .map(|output| match output {
            CoreOutput::Send(WorkerMessage::UpdateJob(update)) => (update.status, update.error),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (proto::JobStatus::JsSuccess as i32, String::new()),
            (proto::JobStatus::JsFailed as i32, "the provider refused".to_owned())
        ]
    );
}
