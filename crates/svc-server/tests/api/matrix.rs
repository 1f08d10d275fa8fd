//! Every route against every kind of credential, each cell's exact status and error code.
//!
//! Rows are the 22 operations of the API with a valid request each; columns are credentials:
//! none, garbage, an API key with each scope alone, revoked, foreign-host and foreign-workspace
//! keys, minted end-user tokens (plain, with extra scopes, expired, revoked), and user access and
//! acts-as tokens (and an expired one). The expected table is written out below; the same table is
//! in docs/API-DESIGN.md ("Route × credential matrix"), regenerated with `SVC_UPDATE_SNAPSHOTS=1`.

use axum::body::Body;
use serde_json::{Value, json};
use svc_domain::Scope;
use svc_server::auth::jwt::Claims;
use svc_store::{NewSession, TokenKind, WorkspaceRow};

use crate::common::TestApp;

crate::on_both_backends_with!(app; every_route_answers_every_credential_as_the_table_says);

const SESSION: &str = "11111111-2222-4333-8444-555555555555";
const AGENT: &str = "matrix-agent";

async fn app(backend: svc_store::Backend) -> TestApp {
    TestApp::with(
        backend,
        |config| config.provider_keys = svc_server::config::ProviderKeys { openai: true, gemini: true, xai: true },
        std::sync::Arc::new(svc_server::dispatch::NoRuntime),
    )
    .await
}

struct Column {
    name: &'static str,
    token: Option<String>,
}

async fn columns(t: &TestApp, ws: &WorkspaceRow) -> Vec<Column> {
    let mut columns =
        vec![Column { name: "none", token: None }, Column { name: "garbage", token: Some("not-a-credential".into()) }];
    let scoped = [
        ("key:start", Scope::RealtimeStart),
        ("key:read", Scope::RealtimeRead),
        ("key:logs", Scope::RealtimeLogs),
        ("key:delete", Scope::RealtimeDelete),
        ("key:dial", Scope::RealtimeDial),
        ("key:support", Scope::SupportWrite),
        ("key:mint", Scope::UserTokensMint),
        ("key:use", Scope::RealtimeUse),
        ("key:chat:read", Scope::ChatRead),
    ];
    for (name, scope) in scoped {
        columns.push(Column { name, token: Some(t.api_key(ws, &[scope]).await) });
    }
    let every = Scope::ALL;
    let revoked = t.api_key(ws, &every).await;
    let keys = t.app.store.list_api_keys(&ws.id).await.expect("keys");
    let revoked_id = &keys.last().expect("the key just made").id;
    t.app.store.revoke_api_key(&ws.id, revoked_id, svc_server::app::now_us()).await.expect("revoke");
    columns.push(Column { name: "key:revoked", token: Some(revoked) });
    let elsewhere = t.workspace_on("elsewhere", "voice.example.com").await;
    columns.push(Column { name: "key:foreign-host", token: Some(t.api_key(&elsewhere, &every).await) });
    let other = t.workspace("other").await;
    columns.push(Column { name: "key:foreign-ws", token: Some(t.api_key(&other, &every).await) });

    let mint = t.api_key(ws, &[Scope::UserTokensMint]).await;
    let plain = t.minted(&mint, "matrix-plain", &[]).await["jwt"].as_str().expect("jwt").to_owned();
    columns.push(Column { name: "minted", token: Some(plain.clone()) });
    let extras = t.minted(&mint, "matrix-extras", &["realtime:read", "realtime:delete"]).await;
    columns.push(Column { name: "minted:read+delete", token: extras["jwt"].as_str().map(str::to_owned) });
    columns.push(Column { name: "minted:expired", token: Some(expire(t, &plain)) });
    let doomed = t.minted(&mint, "matrix-revoked", &[]).await;
    t.app
        .store
        .revoke_token(&ws.id, doomed["token_id"].as_str().expect("id"), TokenKind::EndUser, svc_server::app::now_us())
        .await
        .expect("revoke");
    columns.push(Column { name: "minted:revoked", token: doomed["jwt"].as_str().map(str::to_owned) });

    let admin = t.user(ws, "admin@matrix.test", &["admin"], &["recordings"]).await;
    let user_token = t.user_token(&admin).await;
    columns.push(Column { name: "user", token: Some(user_token.clone()) });
    let member = t.user(ws, "member@matrix.test", &[], &[]).await;
    columns.push(Column { name: "user:member", token: Some(t.user_token(&member).await) });
    let acts_as =
        svc_server::auth::issue::issue_user_token(&t.app, &member, Some(&admin), 600).await.expect("acts-as").token;
    columns.push(Column { name: "acts-as", token: Some(acts_as) });
    columns.push(Column { name: "user:expired", token: Some(expire(t, &user_token)) });
    columns
}

/// The same token, signed by the server, an hour past its expiry.
fn expire(t: &TestApp, jwt: &str) -> String {
    use base64::Engine as _;
    let payload = jwt.split('.').nth(1).expect("payload");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("base64");
    let mut claims: Claims = serde_json::from_slice(&bytes).expect("claims");
    claims.exp = svc_server::app::now_us() / 1_000_000 - 3600;
    t.app.jwt.sign(&claims).expect("sign")
}

/// One operation: method, path, body.
fn rows(token_id: &str, cell: usize) -> Vec<(&'static str, String, Option<Value>)> {
    let now = svc_server::app::now_us() as f64 / 1e6;
    vec![
        ("GET", "/realtime/verify".into(), None),
        (
            "POST",
            "/realtime/session/start".into(),
            Some(
                json!({"sdk": {"name": "matrix", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}}),
            ),
        ),
        ("POST", "/realtime/session/prepare-room".into(), Some(json!({}))),
        ("POST", format!("/realtime/session/{SESSION}/dial"), Some(json!({"phone_number": "+14155550123"}))),
        ("POST", "/auth/token".into(), Some(json!({"external_user_id": "matrix-minted"}))),
        ("DELETE", format!("/auth/token/{token_id}"), None),
        ("GET", "/sessions".into(), None),
        ("GET", "/sessions/capabilities".into(), None),
        ("GET", format!("/sessions/{SESSION}"), None),
        ("GET", format!("/sessions/{SESSION}/transcript"), None),
        ("GET", format!("/sessions/{SESSION}/usage"), None),
        ("GET", format!("/sessions/{SESSION}/timeline"), None),
        ("GET", format!("/sessions/{SESSION}/recording"), None),
        ("DELETE", format!("/sessions/{SESSION}"), None),
        ("POST", "/sessions/import".into(), Some(json!({"started_at": now, "transcript": []}))),
        ("POST", "/support/requests".into(), Some(json!({"message": "matrix"}))),
        ("GET", "/projects/default".into(), None),
        ("GET", "/whoami".into(), None),
        ("GET", "/agents".into(), None),
        ("POST", "/agents".into(), Some(json!({"name": format!("matrix-new-{cell}")}))),
        ("GET", format!("/agents/{AGENT}"), None),
        ("PATCH", format!("/agents/{AGENT}"), Some(json!({"description": "matrix"}))),
        ("DELETE", format!("/agents/{AGENT}"), None),
    ]
}

/// Puts back what a permitted DELETE removed, so every cell sees the same world.
async fn reset(t: &TestApp, ws: &WorkspaceRow, project_id: &str) {
    if t.app.store.session_in_project(project_id, SESSION).await.expect("read").is_none() {
        let now = svc_server::app::now_us();
        t.app
            .store
            .insert_session(&NewSession {
                id: SESSION,
                workspace_id: &ws.id,
                project_id,
                source: "live",
                status: "completed",
                usage_status: "unavailable",
                started_us: now - 60_000_000,
                ended_us: Some(now),
                provider: Some("provider_b"),
                model: None,
                title: None,
                room_name: None,
                config: None,
                now_us: now,
            })
            .await
            .expect("seed session");
    }
    if t.app.store.agent_by_name(&ws.id, AGENT).await.expect("read").is_none() {
        t.app
            .store
            .create_agent(&ws.id, AGENT, None, &svc_wire::rest::AgentConfig::default(), svc_server::app::now_us())
            .await
            .expect("seed agent");
    }
}

/// The status, then `:code` when the error envelope carries one.
fn cell(reply: &crate::common::Reply) -> String {
    let body: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().map(|code| format!(":{code}")).unwrap_or_default();
    format!("{}{code}", reply.status.as_u16())
}

fn render(rows: &[(String, Vec<String>)], columns: &[&str]) -> String {
    let mut table = format!("| operation | {} |\n|---|{}\n", columns.join(" | "), "---|".repeat(columns.len()));
    for (operation, cells) in rows {
        table.push_str(&format!("| `{operation}` | {} |\n", cells.join(" | ")));
    }
    table
}

async fn every_route_answers_every_credential_as_the_table_says(t: TestApp) {
    let ws = t.workspace("acme").await;
    let project = t.app.store.default_project(&ws.id).await.expect("project");
    let columns = columns(&t, &ws).await;
    let mint = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let mut table: Vec<(String, Vec<String>)> = Vec::new();
    let operations = rows("", 0).len();
    for row in 0..operations {
        let mut cells = Vec::new();
        let mut operation = String::new();
        for (index, column) in columns.iter().enumerate() {
            reset(&t, &ws, &project.id).await;
            // A fresh grant to revoke in each cell (revoking is idempotent, but a fresh one keeps
            // the cells independent).
            let grant = t.minted(&mint, &format!("matrix-grant-{row}-{index}"), &[]).await;
            let token_id = grant["token_id"].as_str().expect("token id").to_owned();
            let (method, path, body) = rows(&token_id, row * 100 + index).swap_remove(row);
            operation = format!(
                "{method} {}",
                path.replace(&token_id, "{token_id}").replace(SESSION, "{session_id}").replace(AGENT, "{name}")
            );
            let mut request = TestApp::request(method, &path, column.token.as_deref());
            if body.is_some() {
                request = request.header("content-type", "application/json");
            }
            let body = body.map_or_else(Body::empty, |body| Body::from(body.to_string()));
            let reply = t.send(request.body(body).expect("request")).await;
            cells.push(cell(&reply));
        }
        table.push((operation, cells));
    }
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    let rendered = render(&table, &names);

    // The other non-realtime scopes answer exactly as chat:read does.
    let chat = names.iter().position(|n| *n == "key:chat:read").expect("column");
    for scope in Scope::ALL
        .into_iter()
        .filter(|s| !s.as_str().starts_with("realtime:") && !matches!(s, Scope::SupportWrite | Scope::UserTokensMint))
    {
        let key = t.api_key(&ws, &[scope]).await;
        for (row, (operation, cells)) in table.iter().enumerate() {
            reset(&t, &ws, &project.id).await;
            let (method, path, body) = rows("unknown", 10_000 + row).swap_remove(row);
            let mut request = TestApp::request(method, &path, Some(&key));
            if body.is_some() {
                request = request.header("content-type", "application/json");
            }
            let body = body.map_or_else(Body::empty, |body| Body::from(body.to_string()));
            let reply = t.send(request.body(body).expect("request")).await;
            if !operation.contains("{token_id}") {
                assert_eq!(cell(&reply), cells[chat], "{operation} with {}", scope.as_str());
            }
        }
    }

    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/API-DESIGN.md");
    let expected_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api/matrix.expected");
    if std::env::var_os("SVC_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&expected_path, &rendered).expect("write the expected table");
        let text = std::fs::read_to_string(&docs).expect("API-DESIGN.md");
        if let (Some(start), Some(end)) = (text.find("<!-- matrix:start -->"), text.find("<!-- matrix:end -->")) {
            let updated = format!("{}<!-- matrix:start -->\n{rendered}{}", &text[..start], &text[end..]);
            std::fs::write(&docs, updated).expect("write API-DESIGN.md");
        }
    }
    // Each cell: the status, then `:code` when the error envelope carries one.
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    assert_eq!(rendered, expected, "the route × credential matrix changed:\n{rendered}");
    let text = std::fs::read_to_string(&docs).expect("API-DESIGN.md");
    assert!(text.contains(&rendered), "docs/API-DESIGN.md shows another matrix; run with SVC_UPDATE_SNAPSHOTS=1");
}
