//! The session's writer across a database restart: Postgres reached through a fault proxy that
//! drops every connection and refuses new ones for a while (what a restart looks like from svc),
//! while the session goes on writing. Everything written before, during and after lands once, in
//! order, and the end is stored.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use svc_session::core::Persist;
use svc_session::persist::{FinalRecord, Persister};
use svc_store::testing::TestDatabase;
use svc_store::{Backend, NewSession, Store};
use svc_testkit::fault_proxy::FaultProxy;

const T0: i64 = 1_750_000_000_000_000;

fn turn(text: &str) -> Persist {
    Persist::Turn { ts_us: T0, role: "user", text: text.to_owned() }
}

fn event(kind: &'static str) -> Persist {
    Persist::Timeline { ts_us: T0, kind, data: json!({}) }
}

async fn texts(store: &Store) -> Vec<String> {
    store.transcript("s-1").await.expect("transcript").into_iter().map(|turn| turn.text).collect()
}

/// A session row on a fresh Postgres database, and a store that reaches it through a proxy.
async fn through_a_proxy() -> (TestDatabase, String, FaultProxy, Store) {
    let db = TestDatabase::new(Backend::Postgres).await;
    let ws = db.store.create_workspace("acme", "Acme", "localhost", T0).await.expect("workspace");
    let project = db.store.default_project(&ws.id).await.expect("project");
    db.store
        .insert_session(&NewSession {
            id: "s-1",
            workspace_id: &ws.id,
            project_id: &project.id,
            source: "live",
            status: "active",
            usage_status: "pending",
            started_us: T0,
            ended_us: None,
            provider: Some("provider_b"),
            model: None,
            title: None,
            room_name: Some("room"),
            config: None,
            now_us: T0,
        })
        .await
        .expect("session");
    let mut url = url::Url::parse(&db.url).expect("url");
    let postgres: SocketAddr =
        format!("{}:{}", url.host_str().expect("host"), url.port().unwrap_or(5432)).parse().expect("address");
    let proxy = FaultProxy::start(postgres).await;
    url.set_port(Some(proxy.addr().port())).expect("port");
    let store = Store::connect(url.as_str()).await.expect("through the proxy");
    (db, project.id, proxy, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_while_postgres_restarts_land_once_and_in_order() {
    let (db, project, proxy, store) = through_a_proxy().await;
    let mut persister = Persister::start(store, "s-1");
    persister.push(turn("before"), T0);
    persister.push(event("before"), T0);
    persister.flush();
    let deadline = Instant::now() + Duration::from_secs(5);
    while texts(&db.store).await.is_empty() {
        assert!(Instant::now() < deadline, "the first batch never landed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Postgres restarts: every connection dropped, new ones refused for two seconds, while the
    // session goes on (a flush with every input, as the actor does).
    proxy.refuse_new(true);
    proxy.sever();
    for (n, text) in ["during one", "during two", "during three"].into_iter().enumerate() {
        persister.push(turn(text), T0);
        persister.push(event("during"), T0);
        persister.flush();
        tokio::time::sleep(Duration::from_millis(300 + 200 * n as u64)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.refuse_new(false);
    persister.push(turn("after"), T0);
    persister.flush();
    let finishing = Instant::now();
    persister.finish(FinalRecord { status: "completed", ended_us: T0 + 1_000_000, usage: None, recording: None }).await;
    assert!(finishing.elapsed() < Duration::from_secs(10), "the end waited {:?}", finishing.elapsed());

    assert_eq!(texts(&db.store).await, ["before", "during one", "during two", "during three", "after"]);
    let timeline = db.store.timeline("s-1").await.expect("timeline");
    let kinds: Vec<&str> = timeline.iter().map(|event| event.kind.as_str()).collect();
    assert_eq!(kinds, ["before", "during", "during", "during"]);
    assert!(timeline.iter().enumerate().all(|(n, event)| event.seq == n as i64), "gap-free");
    let session = db.store.session_in_project(&project, "s-1").await.expect("read").expect("present");
    assert_eq!(session.status, "completed");
    assert!(proxy.accepted() >= 2, "the writer reconnected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_pushed_while_the_writer_is_busy_lands_without_another_input() {
    // A slow database (its answers trickle): the writer is busy with the first record while the
    // session adds more, then the session falls quiet (a session nobody talks in). Everything
    // lands anyway: the writer takes what came in while it was busy.
    let (db, _, proxy, store) = through_a_proxy().await;
    let mut persister = Persister::start(store, "s-1");
    proxy.throttle(Some(200));
    for text in ["one", "two", "three", "four"] {
        persister.push(turn(text), T0);
        persister.flush();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy.throttle(None);
    let deadline = Instant::now() + Duration::from_secs(10);
    while texts(&db.store).await.len() < 4 {
        assert!(Instant::now() < deadline, "stranded: {:?}", texts(&db.store).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(texts(&db.store).await, ["one", "two", "three", "four"]);
    persister.finish(FinalRecord { status: "completed", ended_us: T0 + 1, usage: None, recording: None }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_of_the_session_stores_its_batches_too() {
    // A session taken over by another node: its writer starts again while the first one's
    // batches are stored. Each batch lands once; none of the second is taken for a retry.
    let (db, _, _proxy, store) = through_a_proxy().await;
    let mut first = Persister::start(store.clone(), "s-1");
    first.push(turn("before"), T0);
    first.flush();
    let deadline = Instant::now() + Duration::from_secs(10);
    while texts(&db.store).await.is_empty() {
        assert!(Instant::now() < deadline, "the first writer stored nothing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(first);
    let mut second = Persister::start(store, "s-1");
    second.push(turn("after"), T0 + 1);
    second.push(event("session.taken_over"), T0 + 1);
    second.finish(FinalRecord { status: "completed", ended_us: T0 + 2, usage: None, recording: None }).await;
    assert_eq!(texts(&db.store).await, ["before", "after"]);
    let timeline = db.store.timeline("s-1").await.expect("timeline");
    assert_eq!(timeline.iter().filter(|row| row.kind == "session.taken_over").count(), 1);
}
