//! What every session test starts from, shared by the support files that include it with
//! `#[path]` (`live_room.rs`, `shell.rs`): a start body resolved as the start route resolves it,
//! and a SQLite store holding the session's live row.

use std::sync::Arc;

use serde_json::Value;
use svc_domain::model::ModelCatalog;
use svc_domain::session_config::parse_start;
use svc_domain::settings::RecordingConsents;
use svc_domain::start::{CatalogLookup, ResolvedSession, StartContext, resolve_start};
use svc_domain::tools::{ServerTool, ServerToolAvailability};
use svc_store::testing::TestDatabase;
use svc_store::{Backend, NewSession};

/// `body` (a session start's) resolved with `end_call` served and the transcript consented to.
pub fn resolved(body: &Value) -> Arc<ResolvedSession> {
    let request = parse_start(body, None).expect("a valid start");
    let tools = ServerToolAvailability::new([ServerTool::EndCall]);
    let context = StartContext {
        catalog: ModelCatalog::embedded(),
        server_tools: &tools,
        caller_has_resources_read: false,
        consents: RecordingConsents { audio: false, transcript: true, video: false },
        avatar_enabled: false,
        server_max_session_seconds: None,
    };
    Arc::new(resolve_start(request, CatalogLookup::NotApplicable, &context).expect("resolves"))
}

/// A SQLite store with the workspace `acme` and the live provider_b session `session` in room
/// `room`, started at `started_us`; the project's id.
pub async fn store_with_live_session(session: &str, room: &str, started_us: i64) -> (TestDatabase, String) {
    let database = TestDatabase::new(Backend::Sqlite).await;
    let store = &database.store;
    let workspace = store.create_workspace("acme", "Acme", "localhost", started_us).await.expect("workspace");
    let project = store.default_project(&workspace.id).await.expect("project");
    let new_session = NewSession {
        id: session,
        workspace_id: &workspace.id,
        project_id: &project.id,
        source: "live",
        status: "active",
        usage_status: "pending",
        started_us,
        ended_us: None,
        provider: Some("provider_b"),
        model: None,
        title: None,
        room_name: Some(room),
        config: None,
        now_us: started_us,
    };
    store.insert_session(&new_session).await.expect("session");
    (database, project.id)
}
