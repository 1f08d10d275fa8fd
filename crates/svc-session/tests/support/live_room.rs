//! What a runtime test against the real room needs first, shared by the tests that include this
//! file with `#[path]`: a store holding the live session's row, the embedded room server on
//! loopback, and the provider settings that point OpenAI's family at a fake.

#[path = "sessions.rs"]
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use svc_domain::start::ResolvedSession;

use svc_room::{RoomCredentials, RoomServer, RoomServerConfig};
use svc_store::testing::TestDatabase;
use svc_testkit::{FAKE_API_KEY, FakeUpstream};

/// A SQLite store with the workspace `acme` and the live session `session` in room `room`
/// (provider_b), and a room server on 127.0.0.1.
pub async fn store_and_room(session: &str, room: &str) -> (TestDatabase, RoomServer) {
    let (database, _) = sessions::store_with_live_session(session, room, 1_800_000_000_000_000).await;
    let room_config = RoomServerConfig {
        udp_port: 0,
        node_ips: vec!["127.0.0.1".parse().expect("ip")],
        empty_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let room = RoomServer::start(room_config, RoomCredentials::new("key", "secret-secret-secret-secret-secret"))
        .await
        .expect("room server");
    (database, room)
}

/// Provider settings that send OpenAI's family to `fake`.
pub fn provider_env(fake: &FakeUpstream) -> svc_provider::endpoint::ProviderEnv {
    let fake_url = fake.openai_base_url();
    svc_provider::endpoint::ProviderEnv::from_lookup(|name| match name {
        "OPENAI_API_KEY" => Some(FAKE_API_KEY.to_owned()),
        "OPENAI_BASE_URL" => Some(fake_url.clone()),
        _ => None,
    })
    .expect("provider settings")
}

/// The resolved config of a plain provider_b session (its transcript stored, `end_call` on
/// offer), as the start route hands it to the runtime.
// Not every test that includes this file starts a plain session.
#[allow(dead_code)]
pub fn session_config() -> Arc<ResolvedSession> {
    sessions::resolved(
        &json!({"sdk": {"name": "test", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}}),
    )
}
