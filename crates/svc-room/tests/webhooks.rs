//! The room's webhooks, as LiveKit's users receive them: the official server SDKs' own
//! `WebhookReceiver`s (PyPI `livekit-api`, npm `livekit-server-sdk`) verify every webhook the room
//! sent while the PyPI server SDK and client drove it (tests/interop/py/server_api.py); and
//! receivers that fail, refuse, hang or are down cost retries and counted drops, never a stall.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use svc_room::WebhookConfig;
use tokio::sync::Notify;

mod support;

const KEY: &str = "hook-key";
const SECRET: &str = "webhook-secret-0123456789abcdefghij";

/// One webhook as it arrived.
#[derive(Debug, Clone)]
struct Hook {
    auth: String,
    content_type: String,
    body: String,
}

impl Hook {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a webhook body is JSON")
    }
}

/// A webhook receiver on 127.0.0.1: `/ok` takes everything; `/flaky` answers 503 to its first two
/// requests; `/refusing` answers 400 to its first; `/gate` holds every request until the gate
/// opens. What each took, in order.
#[derive(Default)]
struct Receiver {
    taken: Mutex<Vec<(String, Hook)>>,
    calls: Mutex<std::collections::HashMap<String, usize>>,
    gate_open: std::sync::atomic::AtomicBool,
    gate: Notify,
}

impl Receiver {
    async fn start() -> (Arc<Receiver>, String) {
        let receiver = Arc::new(Receiver::default());
        let state = receiver.clone();
        let app = axum::Router::new().route(
            "/{name}",
            axum::routing::post(
                move |axum::extract::Path(name): axum::extract::Path<String>, headers: HeaderMap, body: String| {
                    let state = state.clone();
                    async move { state.take(name, &headers, body).await }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (receiver, base)
    }

    async fn take(&self, name: String, headers: &HeaderMap, body: String) -> StatusCode {
        let call = {
            let mut calls = self.calls.lock().expect("calls");
            let count = calls.entry(name.clone()).or_default();
            *count += 1;
            *count
        };
        match name.as_str() {
            "flaky" if call <= 2 => return StatusCode::SERVICE_UNAVAILABLE,
            "refusing" if call == 1 => return StatusCode::BAD_REQUEST,
            "gate" => {
                while !self.gate_open.load(std::sync::atomic::Ordering::SeqCst) {
                    let opened = self.gate.notified();
                    if self.gate_open.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    opened.await;
                }
            }
            _ => {}
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let hook = Hook { auth: header("authorization"), content_type: header("content-type"), body };
        self.taken.lock().expect("taken").push((name, hook));
        StatusCode::OK
    }

    fn open_gate(&self) {
        self.gate_open.store(true, std::sync::atomic::Ordering::SeqCst);
        self.gate.notify_waiters();
    }

    fn taken_by(&self, name: &str) -> Vec<Hook> {
        let taken = self.taken.lock().expect("taken");
        taken.iter().filter(|(at, _)| at == name).map(|(_, hook)| hook.clone()).collect()
    }

    /// Waits until `/name` took `count` webhooks.
    async fn wait_count(&self, name: &str, count: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.taken_by(name).len() < count {
            assert!(tokio::time::Instant::now() < deadline, "/{name} took {} of {count}", self.taken_by(name).len());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until `/name` took a webhook `done` accepts; everything it took by then.
    async fn wait_for(&self, name: &str, done: impl Fn(&Value) -> bool) -> Vec<Hook> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let hooks = self.taken_by(name);
            if hooks.iter().any(|hook| done(&hook.json())) {
                return hooks;
            }
            assert!(tokio::time::Instant::now() < deadline, "/{name} never got it; it took {hooks:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn room_finished(name: &'static str) -> impl Fn(&Value) -> bool {
    move |event| event["event"] == "room_finished" && event["room"]["name"] == name
}

/// Runs a script with `hooks` as JSON lines on its standard input; the JSON it prints last.
async fn verify_with(mut script: tokio::process::Command, hooks: &[Hook]) -> Value {
    use tokio::io::AsyncWriteExt;
    let lines: String = hooks
        .iter()
        .map(|hook| json!({"auth": hook.auth, "content_type": hook.content_type, "body": hook.body}).to_string() + "\n")
        .collect();
    let mut child = script
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the verifier runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(lines.as_bytes()).await.expect("write");
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the verifier finishes")
        .expect("the verifier runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON report")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn the_server_sdks_receivers_verify_every_webhook_of_a_room_the_sdk_drove() {
    let (receiver, base) = Receiver::start().await;
    let webhooks = WebhookConfig {
        // A receiver that is down beside the one that is up: it costs its own retries only.
        urls: vec![format!("{base}/ok"), "http://127.0.0.1:9/down".to_owned()],
        first_retry: Duration::from_millis(50),
        ..WebhookConfig::default()
    };
    let started = support::start_room_with_webhooks(KEY, SECRET, webhooks).await;

    support::run_report(started.sdk_script("server_api.py", KEY, SECRET), Duration::from_secs(60)).await;
    let hooks = receiver.wait_for("ok", room_finished("sdk-room")).await;

    let mut verify = tokio::process::Command::new(support::interop_python());
    verify.arg(support::repo().join("tests/interop/py/webhook_verify.py")).args(["--key", KEY, "--secret", SECRET]);
    let python_report = verify_with(verify, &hooks).await;
    eprintln!("{python_report:#}");
    assert_eq!(python_report["refused"], json!([]), "the Python receiver accepts every webhook");
    assert_eq!(python_report["accepted"].as_array().map(Vec::len), Some(hooks.len()));
    assert_eq!(python_report["content_types"], json!(["application/webhook+json"]));
    assert_eq!(python_report["tampered"], "hash mismatch", "a changed body is refused");
    assert_eq!(python_report["wrong_secret"], "InvalidSignatureError");

    let web = support::repo().join("tests/interop/web");
    let mut verify = tokio::process::Command::new("node");
    verify.arg(web.join("webhook_verify.mjs")).args([KEY, SECRET]).current_dir(&web);
    let node_report = verify_with(verify, &hooks).await;
    assert_eq!(node_report["refused"], json!([]), "the Node receiver accepts every webhook: {node_report:#}");
    assert_eq!(node_report["accepted"].as_array().map(Vec::len), Some(hooks.len()));
    assert_eq!(node_report["tampered"], "sha256 checksum of body does not match");

    // The story of the room the SDK drove, as the receivers read it.
    let events: Vec<&Value> =
        python_report["accepted"].as_array().expect("events").iter().filter(|e| e["room"] == "sdk-room").collect();
    let story: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["identity"] != "py-second")
        .map(|e| (e["event"].as_str().unwrap_or("").to_owned(), e["identity"].as_str().unwrap_or("").to_owned()))
        .collect();
    let expected: Vec<(String, String)> = [
        ("room_started", ""),
        ("participant_joined", "py-user"),
        ("track_published", "py-user"),
        // The client the administrator subscribed (server_api.py), for its few moments.
        ("participant_joined", "py-listener"),
        ("participant_left", "py-listener"),
        ("track_unpublished", "py-user"),
        ("participant_left", "py-user"),
        ("room_finished", ""),
    ]
    .iter()
    .map(|(event, identity)| ((*event).to_owned(), (*identity).to_owned()))
    .collect();
    assert_eq!(story, expected);
    let started_event = events[0];
    assert_eq!(started_event["room_metadata"], "from the sdk");
    assert!(started_event["room_sid"].as_str().is_some_and(|sid| sid.starts_with("RM_")));
    // The second client was removed: it left, or, removed before its media was up, it aborted.
    let second: Vec<&str> =
        events.iter().filter(|e| e["identity"] == "py-second").filter_map(|e| e["event"].as_str()).collect();
    assert!(
        second == ["participant_joined", "participant_left"] || second == ["participant_connection_aborted"],
        "{second:?}"
    );
    let track = events.iter().find(|e| e["event"] == "track_published").expect("track_published");
    assert!(track["track"].as_str().is_some_and(|sid| sid.starts_with("TR_")), "{track}");
    assert_eq!(track["track_name"], "mic");
    // RoomEndReason.ROOM_END_API_DELETE = 1.
    assert_eq!(events.last().map(|e| e["room_end_reason"].clone()), Some(json!(1)));
    let ids: std::collections::HashSet<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids.len(), events.len(), "every event has its own id");
    assert!(events.iter().all(|e| e["id"].as_str().is_some_and(|id| id.starts_with("EV_"))));
    assert!(events.iter().all(|e| e["created_at"].as_i64().is_some_and(|t| t > 1_700_000_000)));

    // The receiver that is down held nothing up, and shutting down does not wait on it for long.
    tokio::time::timeout(Duration::from_secs(10), started.room.shutdown()).await.expect("shutdown is bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_receivers_cost_bounded_retries_and_counted_drops_never_a_stall() {
    let (receiver, base) = Receiver::start().await;
    let webhooks = WebhookConfig {
        urls: ["ok", "flaky", "refusing", "gate"].iter().map(|name| format!("{base}/{name}")).collect(),
        queue: 3,
        retries: 3,
        first_retry: Duration::from_millis(20),
        timeout: Duration::from_secs(10),
        drain_for: Duration::from_secs(2),
    };
    let started = support::start_room_with_webhooks(KEY, SECRET, webhooks).await;
    // Ten in-process participants come and go (room_started, ten joins and ten leaves); each
    // event reaches the receiver that is up before the next happens, whatever the others do (the
    // queues hold three: a burst would overflow even a fast receiver's).
    let mut present = Vec::new();
    for index in 0..10 {
        present.push(support::join_local(&started.room, "busy-room", &format!("agent-{index}")).await);
        receiver.wait_count("ok", 2 + index).await;
    }
    for (index, participant) in present.into_iter().enumerate() {
        participant.leave().await.expect("leaves");
        receiver.wait_count("ok", 12 + index).await;
    }
    assert_eq!(receiver.taken_by("ok").len(), 21);

    // The gate held its first request while twenty more came: three waited in its queue, the
    // other seventeen were dropped; once it opens, the next event counts them.
    receiver.open_gate();
    receiver.wait_count("gate", 4).await;
    // What the slower receivers still have queued goes out before the room ends.
    tokio::time::sleep(Duration::from_millis(500)).await;
    started.room.close_room("busy-room", svc_room::LeaveReason::RoomDeleted).await;
    let ok = receiver.wait_for("ok", room_finished("busy-room")).await;
    let gate = receiver.wait_for("gate", room_finished("busy-room")).await;
    let dropped =
        |hooks: &[Hook]| hooks.iter().map(|h| h.json()["numDropped"].as_i64().unwrap_or(0)).collect::<Vec<_>>();
    assert_eq!(dropped(&gate), [0, 17, 0, 0, 0], "in flight, the queue's three (the first counting the rest), the end");

    // Retried after its two 503s, and otherwise as fast as it answers: the first event arrived,
    // nothing twice or out of order, and what its queue could not hold during the retries counted.
    let flaky = receiver.wait_for("flaky", room_finished("busy-room")).await;
    let ids =
        |hooks: &[Hook]| hooks.iter().map(|h| h.json()["id"].as_str().unwrap_or("").to_owned()).collect::<Vec<_>>();
    let (ok_ids, flaky_ids) = (ids(&ok), ids(&flaky));
    assert_eq!(flaky_ids[0], ok_ids[0], "room_started came through on the third try");
    let mut in_order = ok_ids.iter();
    assert!(flaky_ids.iter().all(|id| in_order.any(|ok_id| ok_id == id)), "a subsequence of what /ok got");
    assert_eq!(flaky.len() as i64 + dropped(&flaky).iter().sum::<i64>(), 22, "every event arrived or was counted");
    // A 400 is not retried: the first event is lost, and the next one says so.
    let refusing = receiver.wait_for("refusing", room_finished("busy-room")).await;
    assert!(dropped(&refusing)[0] >= 1, "{:?}", dropped(&refusing));
    assert_eq!(refusing.len() as i64 + dropped(&refusing).iter().sum::<i64>(), 22);
    tokio::time::timeout(Duration::from_secs(5), started.room.shutdown()).await.expect("shutdown is bounded");
}
