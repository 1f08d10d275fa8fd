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
