//! The embedded room as the integration tests run it: a `RoomServer` on loopback (UDP port 0)
//! with its signalling mounted at `/room` on an axum listener on 127.0.0.1:0.

use std::net::SocketAddr;
use std::time::Duration;

use svc_room::{
    LocalJoinOptions, LocalParticipant, ParticipantKind, RoomCredentials, RoomServer, RoomServerConfig, WebhookConfig,
};

/// A running room server and its HTTP address.
pub struct TestRoom {
    /// The room server.
    pub room: RoomServer,
    /// Where `/room/rtc` answers.
    pub http: SocketAddr,
    /// The key tokens are signed with (tests of in-process participants alone need none).
    #[allow(dead_code)]
    pub credentials: RoomCredentials,
}

impl TestRoom {
    /// The room URL clients are given (`ws://…/room`).
    #[allow(dead_code)]
    pub fn url(&self) -> String {
        format!("ws://{}/room", self.http)
    }

    /// An official-SDK script of the interop harness (`tests/interop/py/<name>`, in the harness's
    /// venv) pointed at this room: `--url`, `--key` and `--secret` given, the rest to add.
    #[allow(dead_code)]
    pub fn sdk_script(&self, name: &str, key: &str, secret: &str) -> tokio::process::Command {
        let mut script = tokio::process::Command::new(interop_python());
        script.arg(repo().join("tests/interop/py").join(name));
        script.args(["--url", &self.url(), "--key", key, "--secret", secret]);
        script
    }
}

/// The repository's root.
#[allow(dead_code)]
pub fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The interop harness's Python (PyPI `livekit`, `livekit-api`); a missing install names its fix.
#[allow(dead_code)]
pub fn interop_python() -> std::path::PathBuf {
    let python = repo().join("target/interop/venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/interop-setup.sh", python.display());
    python
}

/// Starts a room server (empty rooms close after `empty_timeout`) with the given key.
#[allow(dead_code)]
pub async fn start_room(key: &str, secret: &str, empty_timeout: Duration) -> TestRoom {
    start(key, secret, RoomServerConfig { empty_timeout, ..Default::default() }).await
}

/// Starts a room server that sends webhooks as `webhooks` says.
#[allow(dead_code)]
pub async fn start_room_with_webhooks(key: &str, secret: &str, webhooks: WebhookConfig) -> TestRoom {
    start(key, secret, RoomServerConfig { webhooks, ..Default::default() }).await
}

/// An in-process participant joins `room` (opening it if needed).
#[allow(dead_code)]
pub async fn join_local(room: &RoomServer, name: &str, identity: &str) -> LocalParticipant {
    let options = LocalJoinOptions {
        identity: identity.to_owned(),
        name: identity.to_owned(),
        kind: ParticipantKind::Agent,
        metadata: String::new(),
        attributes: std::collections::BTreeMap::new(),
    };
    room.join_local(name, options).await.expect("joins")
}

/// Starts a room server with `config` (its UDP port and addresses are the tests').
pub async fn start(key: &str, secret: &str, config: RoomServerConfig) -> TestRoom {
    let credentials = RoomCredentials::new(key, secret);
    let config = RoomServerConfig { udp_port: 0, node_ips: vec!["127.0.0.1".parse().expect("ip")], ..config };
    let room = RoomServer::start(config, credentials.clone()).await.expect("room server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let http = listener.local_addr().expect("addr");
    // As `svc serve` mounts it: the room at /room, its server API also at the origin's /twirp.
    let router = axum::Router::new().nest("/room", room.router()).merge(room.server_api_router());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    TestRoom { room, http, credentials }
}

/// A token with `grant` and no identity, valid ten minutes.
#[allow(dead_code)]
pub fn grant_token(credentials: &RoomCredentials, grant: svc_room::RoomGrant) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    credentials.grant_token(grant, i64::try_from(now + 600).expect("seconds")).expect("mint")
}

/// Runs an SDK script (within `limit`) and returns the JSON report it prints last.
#[allow(dead_code)]
pub async fn run_report(mut script: tokio::process::Command, limit: Duration) -> serde_json::Value {
    let output = tokio::time::timeout(limit, script.kill_on_drop(true).output())
        .await
        .expect("the script finishes")
        .expect("the script runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON report");
    eprintln!("{report:#}");
    report
}

/// One HTTP/1.1 request on a fresh connection; the status and the body.
#[allow(dead_code)]
pub async fn post(
    http: std::net::SocketAddr,
    path: &str,
    content_type: &str,
    token: Option<&str>,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let auth = token.map(|token| format!("Authorization: Bearer {token}\r\n")).unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: room\r\nContent-Type: {content_type}\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    );
    exchange(http, &head, body).await
}

/// Writes `head` and `body` on a fresh connection and reads the answer: its status and the body
/// its `Content-Length` announces.
#[allow(dead_code)]
pub async fn exchange(http: std::net::SocketAddr, head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(http).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut response = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        let read = stream.read(&mut buffer).await.expect("read");
        response.extend_from_slice(&buffer[..read]);
        let Some(split) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
            assert!(read > 0, "the connection closed before an answer: {}", String::from_utf8_lossy(&response));
            continue;
        };
        let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse().ok())
            .expect("a content length");
        if read == 0 || response.len() >= split + 4 + length {
            let status = String::from_utf8_lossy(&response[9..12]).parse().expect("a status");
            return (status, response[split + 4..(split + 4 + length).min(response.len())].to_vec());
        }
    }
}
