//! The room side of svc-phone's tests: an embedded room server on loopback with an in-process
//! "agent" in `room`, where the phone's participant will join.

use std::collections::BTreeMap;
use std::time::Duration;

use svc_room::{LocalJoinOptions, LocalParticipant, ParticipantKind, RoomCredentials, RoomServer, RoomServerConfig};

/// A room server with the agent joined to `room`.
pub async fn with_agent(room: &str) -> (RoomServer, LocalParticipant) {
    let room_config = RoomServerConfig {
        udp_port: 0,
        node_ips: vec!["127.0.0.1".parse().expect("ip")],
        empty_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let server = RoomServer::start(room_config, RoomCredentials::new("key", "secret-secret-secret-secret-secret"))
        .await
        .expect("room server");
    let options = LocalJoinOptions {
        identity: "agent".into(),
        name: "agent".into(),
        kind: ParticipantKind::Agent,
        metadata: String::new(),
        attributes: BTreeMap::new(),
    };
    let agent = server.join_local(room, options).await.expect("agent joins");
    (server, agent)
}
