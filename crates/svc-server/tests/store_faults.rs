//! Faults of the store: Postgres going away under a running server, and `svc serve` killed with
//! SIGKILL in the middle of a burst of session starts on SQLite.
//!
//! Postgres is shared by every test on this machine, so it is not stopped: the server reaches it
//! through a TCP proxy the test cuts (every connection reset, new ones refused) and restores,
//! which is what a stopped or unreachable Postgres looks like from svc.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::{Server, svc};
use svc_domain::{Scope, ScopeSet};
use svc_server::AppState;
use svc_server::config::{Config, Database};
use svc_store::testing::TestDatabase;
use svc_store::{Backend, Store};
use svc_testkit::{FAKE_API_KEY, FakeUpstream, Flavor};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tower::ServiceExt;

mod support;

/// A TCP forwarder to `target` that can be cut and restored on the same address.
struct Proxy {
    addr: SocketAddr,
    target: SocketAddr,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let proxy = Proxy { addr: listener.local_addr().expect("addr"), target, tasks: Arc::default() };
        proxy.serve(listener);
        proxy
    }

    fn serve(&self, listener: TcpListener) {
        let (target, tasks) = (self.target, Arc::clone(&self.tasks));
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let connection = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tasks.lock().expect("tasks").push(connection);
            }
        });
        self.tasks.lock().expect("tasks").push(accept);
    }

    /// Postgres is gone: open connections drop, new ones are refused.
    fn cut(&self) {
        for task in self.tasks.lock().expect("tasks").drain(..) {
            task.abort();
        }
    }

    /// Postgres is back, on the same address.
    async fn restore(&self) {
        let listener = TcpListener::bind(self.addr).await.expect("rebind the proxy");
        self.serve(listener);
    }
}

async fn get(router: &axum::Router, path: &str, key: &str) -> (u16, Value) {
    let request = Request::get(path)
        .header("authorization", format!("Bearer {key}"))
        .header("host", "localhost")
        .body(Body::empty())
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_going_away_is_a_prompt_503_and_its_return_needs_no_restart() {
    let db = TestDatabase::new(Backend::Postgres).await;
    let url = url::Url::parse(&db.url).expect("url");
    let target: SocketAddr =
        format!("{}:{}", url.host_str().expect("host"), url.port().unwrap_or(5432)).parse().expect("Postgres address");
    let proxy = Proxy::start(target).await;
    let mut proxied = url.clone();
    proxied.set_port(Some(proxy.addr.port())).expect("port");
    let store = Store::connect(proxied.as_str()).await.expect("connect through the proxy");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::for_tests(dir.path(), Database::parse(proxied.as_str()).expect("url"));
    let app = AppState::with_store(config, store).await.expect("app");
    let router = svc_server::routes::router(app.clone());
    let ws = app.store.create_workspace("acme", "Acme", "localhost", svc_server::app::now_us()).await.expect("ws");
    let key = svc_server::auth::issue::create_api_key(&app.store, &ws.id, ScopeSet::new([Scope::RealtimeRead]), None)
        .await
        .expect("key")
        .1;
    assert_eq!(get(&router, "/api/v1/external/sessions", &key).await.0, 200);

    proxy.cut();
    // Every request fails fast with a typed 503, concurrent ones too; none hangs.
    let started = Instant::now();
    let requests: Vec<_> = (0..8)
        .map(|_| {
            let (router, key) = (router.clone(), key.clone());
            tokio::spawn(async move { get(&router, "/api/v1/external/sessions", &key).await })
        })
        .collect();
    for request in requests {
        let (status, body) = tokio::time::timeout(Duration::from_secs(20), request)
            .await
            .expect("a request hung with the database down")
            .expect("task");
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["type"], "api_error");
        assert_eq!(body["error"]["message"], "The database is unavailable; retry with backoff");
    }
    let waited = started.elapsed();
    assert!(
        waited <= svc_store::ACQUIRE_TIMEOUT + Duration::from_secs(3),
        "with the database down, requests took {waited:?}"
    );
    let (health, _) = get(&router, "/healthz", &key).await;
    assert_eq!(health, 503);

    proxy.restore().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = get(&router, "/api/v1/external/sessions", &key).await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no recovery after Postgres came back: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(get(&router, "/healthz", &key).await.0, 200);
    eprintln!("postgres outage: 8 concurrent requests answered 503 in {waited:?}");
}

fn post_start(listen: &str, key: &str) -> Option<u16> {
    let body =
        json!({"sdk": {"name": "faults", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}})
            .to_string();
    let mut stream = TcpStream::connect(listen).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(
        stream,
        "POST /api/v1/external/realtime/session/start HTTP/1.1\r\nHost: {listen}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_during_a_burst_of_starts_leaves_a_clean_database_and_no_live_session() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let data = tempfile::tempdir().expect("tempdir");
    let listen = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr").to_string()
    };
    let public = format!("http://{listen}");
    let admin = |args: &[&str]| {
        let output = svc(data.path()).args(["--public-url", &public]).args(args).output().expect("svc");
        assert!(output.status.success(), "svc {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    admin(&["workspace", "create", "--slug", "burst", "--name", "Burst"]);
    admin(&["workspace", "set", "burst", "--max-concurrent-sessions", "1000"]);
    let key =
        admin(&["key", "create", "--workspace", "burst", "--scope", "realtime:start", "--scope", "realtime:read"]);
    let env = vec![
        ("OPENAI_API_KEY".to_owned(), FAKE_API_KEY.to_owned()),
        ("OPENAI_BASE_URL".to_owned(), fake.openai_base_url()),
    ];
    let start = |log: &str| {
        let (env, public) = (env.clone(), public.clone());
        Server::start_in(std::env::temp_dir().join(log), data.path(), &listen, move |command| {
            command.envs(env).args(["--public-url", &public]);
        })
    };
    let mut server = start("svc-burst.log");

    // Sixty starts from eight threads; the server dies with SIGKILL after the tenth answer.
    let answered = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (listen, key, answered) = (listen.clone(), key.clone(), Arc::clone(&answered));
            std::thread::spawn(move || {
                for _ in 0..8 {
                    let status = post_start(&listen, &key);
                    answered.lock().expect("answers").push(status);
                    if status.is_none() {
                        break;
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while answered.lock().expect("answers").iter().filter(|s| **s == Some(200)).count() < 10 {
        assert!(Instant::now() < deadline, "the burst did not get going: {:?}", answered.lock().expect("answers"));
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill_now();
    for worker in workers {
        let _ = worker.join();
    }
    let started = answered.lock().expect("answers").iter().filter(|s| **s == Some(200)).count();

    // The database a crash left opens cleanly and passes SQLite's integrity check.
    let url = Store::sqlite_url(&data.path().join("svc.db"));
    let store = Store::connect(&url).await.expect("the database opens after the crash");
    store.check_integrity().await.expect("integrity check");
    assert!(store.count_all_live_sessions().await.expect("count") >= 1, "the crash left live sessions");
    store.close().await;

    // The next start of the server ends every session the killed one left live.
    let restarted = start("svc-burst-restarted.log");
    let store = Store::connect(&url).await.expect("open");
    assert_eq!(store.count_all_live_sessions().await.expect("count"), 0, "orphans ended on restart");
    store.check_integrity().await.expect("integrity check after restart");
    store.close().await;
    let (status, body) = {
        let mut stream = TcpStream::connect(&restarted.listen).expect("connect");
        write!(
            stream,
            "GET /api/v1/external/sessions?limit=100 HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n",
            restarted.listen
        )
        .expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        let (head, body) = response.split_once("\r\n\r\n").expect("response");
        (head.split_whitespace().nth(1).map(str::to_owned), body.to_owned())
    };
    assert_eq!(status.as_deref(), Some("200"), "{body}");
    let sessions: Vec<Value> = serde_json::from_str(body.trim()).unwrap_or_default();
    assert!(sessions.len() >= started, "every answered start is in the history: {} < {started}", sessions.len());
    assert!(sessions.iter().all(|s| s["status"] != "active"), "{sessions:?}");
    assert!(sessions.iter().any(|s| s["status"] == "error"), "the orphans ended as errors");
    eprintln!("sigkill burst: {started} starts answered before the kill, {} sessions stored", sessions.len());
}
