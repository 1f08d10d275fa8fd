//! The route × scope matrix, for API keys and for minted end-user tokens.

use axum::body::Body;
use serde_json::json;
use svc_domain::Scope;
use svc_store::NewSession;

use crate::common::{Reply, TestApp};

crate::on_both_backends!(
    api_keys_need_exactly_the_scopes_of_each_route,
    minted_tokens_get_what_their_scopes_allow,
    user_tokens_and_api_keys_stay_on_their_own_routes
);

/// What a route accepts: all of these scopes, or (for usage) any one of them.
enum Needs {
    Nothing,
    All(&'static [Scope]),
    Any(&'static [Scope]),
}

const SESSION: &str = "11111111-2222-4333-8444-555555555555";

fn routes() -> Vec<(&'static str, String, Needs)> {
    use Needs::*;
    vec![
        ("GET", "/realtime/verify".into(), Nothing),
        ("POST", "/auth/token".into(), All(&[Scope::UserTokensMint])),
        ("DELETE", "/auth/token/unknown".into(), All(&[Scope::UserTokensMint])),
        ("GET", "/sessions".into(), All(&[Scope::RealtimeRead])),
        ("GET", "/sessions/capabilities".into(), All(&[Scope::RealtimeRead])),
        ("GET", format!("/sessions/{SESSION}"), All(&[Scope::RealtimeRead])),
        ("GET", format!("/sessions/{SESSION}/transcript"), All(&[Scope::RealtimeRead])),
        ("GET", format!("/sessions/{SESSION}/usage"), Any(&[Scope::RealtimeStart, Scope::RealtimeRead])),
        ("GET", format!("/sessions/{SESSION}/timeline"), All(&[Scope::RealtimeLogs])),
        ("GET", format!("/sessions/{SESSION}/recording"), All(&[Scope::RealtimeRead])),
        ("DELETE", format!("/sessions/{SESSION}"), All(&[Scope::RealtimeDelete])),
        ("POST", "/support/requests".into(), All(&[Scope::SupportWrite])),
        ("GET", "/projects/default".into(), All(&[Scope::RealtimeRead])),
        ("POST", "/realtime/session/prepare-room".into(), All(&[Scope::RealtimeStart])),
    ]
}

async fn call(t: &TestApp, method: &str, path: &str, token: &str) -> Reply {
    let body = match (method, path) {
        ("POST", "/auth/token") => json!({"external_user_id": "matrix-user"}),
        ("POST", "/support/requests") => json!({"message": "matrix"}),
        _ => json!({}),
    };
    t.send(
        TestApp::request(method, path, Some(token))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request"),
    )
    .await
}

fn allowed(needs: &Needs, held: &[Scope]) -> bool {
    let expanded = svc_domain::ScopeSet::new(held.iter().copied());
    match needs {
        Needs::Nothing => true,
        Needs::All(required) => required.iter().all(|s| expanded.contains(*s)),
        Needs::Any(any) => any.iter().any(|s| expanded.contains(*s)),
    }
}

async fn seed_session(t: &TestApp, workspace_id: &str, project_id: &str) {
    let now = svc_server::app::now_us();
    t.app
        .store
        .insert_session(&NewSession {
            id: SESSION,
            workspace_id,
            project_id,
            source: "live",
            status: "active",
            usage_status: "pending",
            started_us: now,
            ended_us: None,
            provider: Some("provider_a"),
            model: None,
            title: None,
            room_name: None,
            config: None,
            now_us: now,
        })
        .await
        .expect("seed");
}

async fn api_keys_need_exactly_the_scopes_of_each_route(t: TestApp) {
    let ws = t.workspace("acme").await;
    let project = t.app.store.default_project(&ws.id).await.expect("project");
    let mut holders = Vec::new();
    for scope in Scope::ALL {
        holders.push((vec![scope], t.api_key(&ws, &[scope]).await));
    }
    for (method, path, needs) in routes() {
        // Re-seed: a DELETE with the right scope removes the session.
        if t.app.store.session_in_project(&project.id, SESSION).await.expect("read").is_none() {
            seed_session(&t, &ws.id, &project.id).await;
        }
        for (held, key) in &holders {
            let reply = call(&t, method, &path, key).await;
            if allowed(&needs, held) {
                assert!(!matches!(reply.status.as_u16(), 401 | 403), "{method} {path} with {held:?}: {}", reply.status);
            } else {
                let error = reply.expect_error(403);
                let expected = match &needs {
                    Needs::All(required) => {
                        format!(
                            "API key missing required scopes: {}",
                            required.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                        )
                    }
                    Needs::Any(any) => {
                        format!(
                            "API key missing required scopes: {}",
                            any.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" or ")
                        )
                    }
                    Needs::Nothing => unreachable!("always allowed"),
                };
                assert_eq!(error["message"], expected, "{method} {path} with {held:?}");
            }
        }
    }
    // A key holding every scope but the one a route needs is still refused.
    let all_but_logs: Vec<Scope> =
        Scope::ALL.into_iter().filter(|s| !matches!(s, Scope::RealtimeLogs | Scope::RealtimeUse)).collect();
    let key = t.api_key(&ws, &all_but_logs).await;
    t.get(&format!("/sessions/{SESSION}/timeline"), Some(&key)).await.expect_error(403);
}

async fn minted_tokens_get_what_their_scopes_allow(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let cases = [
        (vec![Scope::RealtimeStart], t.minted(&key, "plain", &[]).await),
        (
            vec![
                Scope::RealtimeStart,
                Scope::RealtimeRead,
                Scope::RealtimeDelete,
                Scope::ConnectorsRead,
                Scope::ConnectorsWrite,
            ],
            t.minted(&key, "extras", &["realtime:read", "realtime:delete", "connectors:read", "connectors:write"])
                .await,
        ),
    ];
    for (held, minted) in &cases {
        let jwt = minted["jwt"].as_str().expect("jwt");
        for (method, path, needs) in routes() {
            let reply = call(&t, method, &path, jwt).await;
            if allowed(&needs, held) {
                assert!(
                    !matches!(reply.status.as_u16(), 401 | 403),
                    "{method} {path} with minted {held:?}: {}",
                    reply.status
                );
            } else {
                reply.expect_error(403);
            }
        }
    }
}

async fn user_tokens_and_api_keys_stay_on_their_own_routes(t: TestApp) {
    let ws = t.workspace("acme").await;
    let all_scopes = t.api_key(&ws, &Scope::ALL).await;
    let user = t.user(&ws, "ann@acme.test", &["admin"], &["recordings"]).await;
    let user_token = t.user_token(&user).await;
    for (method, path) in [("GET", "/whoami"), ("GET", "/agents"), ("POST", "/agents"), ("POST", "/sessions/import")] {
        let error = call(&t, method, path, &all_scopes).await.expect_error(403);
        assert!(error["message"].as_str().expect("message").contains("user access token"), "{path}: {error}");
    }
    for (method, path, _) in routes() {
        if path == "/realtime/verify" {
            continue;
        }
        call(&t, method, &path, &user_token).await.expect_error(403);
    }
}
