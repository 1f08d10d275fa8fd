//! The room side of svc-phone's tests: an embedded room server on loopback with an in-process
//! "agent" in `room`, where the phone's participant will join, and what that agent sees of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use svc_room::{
    LocalJoinOptions, LocalParticipant, ParticipantKind, RemoteAudioDecoder, RoomCredentials, RoomEvent, RoomServer,
    RoomServerConfig,
};

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

/// What the agent saw of the phone's participant.
#[derive(Default, Debug)]
pub struct AgentView {
    /// Its audio, decoded (48 kHz).
    pub heard: Vec<i16>,
    /// `sip.callStatus` values, in order, without repeats.
    pub statuses: Vec<String>,
    /// Its kind.
    pub kind: Option<ParticipantKind>,
    /// Its latest attributes.
    pub attributes: BTreeMap<String, String>,
    /// Whether it left.
    pub left: bool,
}

/// Follows `identity` from `agent`'s seat until it leaves or `limit` passes.
pub async fn watch_participant(mut agent: LocalParticipant, identity: String, limit: Duration) -> AgentView {
    let mut view = AgentView::default();
    let mut decoder = RemoteAudioDecoder::new().expect("decoder");
    let deadline = tokio::time::Instant::now() + limit;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, agent.next_event()).await {
        match event {
            RoomEvent::ParticipantJoined(p) | RoomEvent::ParticipantUpdated { participant: p, .. }
                if p.identity == identity =>
            {
                view.kind = Some(p.kind);
                if let Some(status) = p.attributes.get("sip.callStatus")
                    && view.statuses.last() != Some(status)
                {
                    view.statuses.push(status.clone());
                }
                view.attributes = p.attributes.clone();
            }
            RoomEvent::AudioFrame(frame) if *frame.participant_identity == *identity => {
                decoder.decode(&frame, &mut view.heard).expect("decodes");
            }
            RoomEvent::ParticipantLeft { identity: who, .. } if who == identity => {
                view.left = true;
                break;
            }
            _ => {}
        }
    }
    view
}
