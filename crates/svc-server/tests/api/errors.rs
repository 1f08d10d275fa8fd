//! The envelope on every failure path, operations endpoints, and the OpenAPI snapshot.

use axum::body::Body;
use serde_json::json;
use svc_domain::Scope;

use crate::common::TestApp;

crate::on_both_backends!(
    unknown_routes_and_methods_answer_in_the_envelope,
    bad_bodies_are_validation_errors_without_echo,
    authentication_comes_before_body_validation,
    operations_endpoints,
);

async fn unknown_routes_and_methods_answer_in_the_envelope(t: TestApp) {
    let error = t.get("/api/v1/external/nope", None).await.expect_error(404);
    assert_eq!(error["type"], "api_error");
    assert!(error.get("code").is_none(), "untyped errors carry no code");
    t.get("/totally/elsewhere", None).await.expect_error(404);
    let reply = t.send(TestApp::request("PUT", "/realtime/verify", None).body(Body::empty()).expect("request")).await;
    assert_eq!(reply.expect_error(405)["type"], "api_error");
}

async fn bad_bodies_are_validation_errors_without_echo(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint, Scope::SupportWrite]).await;
    let raw = |body: &'static str, content_type: Option<&'static str>| {
        let mut builder = TestApp::request("POST", "/auth/token", Some(&key));
        if let Some(content_type) = content_type {
            builder = builder.header("content-type", content_type);
        }
        builder.body(Body::from(body)).expect("request")
    };
    let error = t.send(raw("{\"external_user_id\": \"secret-xyz\",", Some("application/json"))).await.expect_error(422);
    assert_eq!(error["errors"][0]["type"], "json_invalid");
    assert_eq!(error["errors"][0]["loc"], json!(["body"]));
    assert!(!error.to_string().contains("secret-xyz"));
    let error = t.send(raw("{\"external_user_id\": \"u\"}", Some("text/plain"))).await.expect_error(422);
    assert_eq!(error["errors"][0]["loc"], json!(["header", "content-type"]));
    t.send(raw("{\"external_user_id\": \"u\"}", None)).await.expect_error(422);
    t.send(raw("", Some("application/json"))).await.expect_error(422);
    t.send(raw("[1,2]", Some("application/json"))).await.expect_error(422);
    t.send(raw("{\"external_user_id\": \"u\"}", Some("application/json; charset=utf-8"))).await.expect(200);
    // Wrong types are reported without the offending value.
    let error = t
        .post("/auth/token", Some(&key), json!({"external_user_id": {"nested": "secret-abc"}}))
        .await
        .expect_error(422);
    assert_eq!(error["errors"][0]["type"], "string_type");
    assert!(!error.to_string().contains("secret-abc"));
    // Oversized JSON bodies are refused with 413 in the envelope.
    let huge = format!("{{\"message\": \"{}\"}}", "a".repeat(svc_domain::limits::JSON_BODY_MAX_BYTES + 10));
    let request = TestApp::request("POST", "/support/requests", Some(&key))
        .header("content-type", "application/json")
        .body(Body::from(huge))
        .expect("request");
    t.send(request).await.expect_error(413);
}

async fn authentication_comes_before_body_validation(t: TestApp) {
    // A malformed body from an unauthenticated caller gets 401, not 422: nothing about the
    // body's rules leaks to someone without a credential.
    let request = TestApp::request("POST", "/auth/token", None)
        .header("content-type", "application/json")
        .body(Body::from("{not json"))
        .expect("request");
    t.send(request).await.expect_unauthorized();
    let ws = t.workspace("acme").await;
    let reader = t.api_key(&ws, &[Scope::RealtimeRead]).await;
    t.post("/auth/token", Some(&reader), json!({"bad": true})).await.expect_error(403);
}

async fn operations_endpoints(t: TestApp) {
    let health = t.get("/healthz", None).await;
    assert_eq!(health.expect(200), json!({"status": "ok"}));
    let reply = t.get("/realtime/verify", None).await;
    let request_id = reply.headers.get("x-request-id").expect("request id").to_str().expect("ascii");
    assert_eq!(request_id.len(), 36, "a UUID per request");
    let echoed = t
        .send(
            TestApp::request("GET", "/healthz", None)
                .header("x-request-id", "client-chosen-id")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(echoed.headers["x-request-id"], "client-chosen-id");
    let metrics = t.get("/metrics", None).await;
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8(metrics.body).expect("utf-8");
    assert!(
        text.contains(
            "svc_http_requests_total{route=\"/api/v1/external/realtime/verify\",method=\"GET\",status=\"401\"} 1"
        ),
        "{text}"
    );
    assert!(text.contains("svc_http_request_duration_seconds_bucket"), "{text}");
    assert!(text.contains("svc_live_sessions 0"), "{text}");
    // What a leak would grow: this test server has no room, and its runtime runs some tasks.
    assert!(text.contains("svc_rooms_open 0"), "{text}");
    let tasks = text.lines().find_map(|line| line.strip_prefix("svc_tokio_alive_tasks ")).expect("the task gauge");
    assert!(tasks.parse::<u64>().is_ok_and(|tasks| tasks > 0), "{text}");
    assert!(text.contains("route=\"unmatched\"") || !text.contains("/nope"), "raw paths never become labels");
    let served = t.get("/api/v1/external/openapi.json", None).await;
    assert_eq!(served.headers["content-type"], "application/json");
    assert_eq!(served.json(), serde_json::to_value(svc_server::routes::openapi()).expect("document"));
}

/// The committed OpenAPI document is what the code generates; run with `SVC_UPDATE_SNAPSHOTS=1`
/// to accept a deliberate change.
#[test]
fn openapi_document_matches_the_snapshot() {
    let generated = serde_json::to_string_pretty(&svc_server::routes::openapi()).expect("serialize") + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    if std::env::var_os("SVC_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &generated).expect("write snapshot");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/openapi.json is stale: run `SVC_UPDATE_SNAPSHOTS=1 cargo test -p svc-server openapi`"
    );
    let document: serde_json::Value = serde_json::from_str(&generated).expect("json");
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().expect("paths");
    for path in [
        "/api/v1/external/realtime/verify",
        "/api/v1/external/auth/token",
        "/api/v1/external/auth/token/{token_id}",
        "/api/v1/external/sessions",
        "/api/v1/external/sessions/capabilities",
        "/api/v1/external/sessions/import",
        "/api/v1/external/sessions/{session_id}",
        "/api/v1/external/sessions/{session_id}/transcript",
        "/api/v1/external/sessions/{session_id}/usage",
        "/api/v1/external/sessions/{session_id}/timeline",
        "/api/v1/external/sessions/{session_id}/recording",
        "/api/v1/external/support/requests",
        "/api/v1/external/whoami",
        "/api/v1/external/agents",
        "/api/v1/external/agents/{name}",
        "/api/v1/external/projects/default",
        "/api/v1/external/realtime/session/prepare-room",
    ] {
        assert!(paths.contains_key(path), "{path} is documented");
    }
}

/// What the published schema says about the request bodies is what the server enforces, so a
/// client generated from it (or a contract fuzzer) meets no refusal the document does not state.
#[test]
fn the_published_schema_states_the_servers_rules() {
    let document = serde_json::to_value(svc_server::routes::openapi()).expect("document");
    let schemas = &document["components"]["schemas"];
    // `model_options` is deprecated and absent from the published schema (spec, Versioning 6);
    // the server still accepts it (tests/api/start.rs).
    let inline_agent = schemas["InlineAgentDoc"]["properties"].as_object().expect("properties");
    assert!(inline_agent.contains_key("model") && !inline_agent.contains_key("model_options"));
    assert!(!document.to_string().contains("\"model_options\":"), "no schema has the property");
    // An agent always has a configuration: PATCH may leave it out, never null it.
    assert_eq!(
        schemas["AgentUpdate"]["properties"]["config"],
        json!({"$ref": "#/components/schemas/AgentConfig", "description": schemas["AgentUpdate"]["properties"]["config"]["description"]})
    );
    // Import: the shortest WAV in unpadded base64, the standard alphabet, at most 100,000 turns;
    // the rules across fields are in the descriptions.
    let import = &schemas["ImportSessionRequest"]["properties"];
    assert_eq!(import["audio_wav_base64"]["minLength"], 59);
    assert_eq!(import["audio_wav_base64"]["pattern"], "^[A-Za-z0-9+/]*={0,2}$");
    assert_eq!(import["transcript"]["maxItems"], 100_000);
    assert!(import["ended_at"]["description"].as_str().unwrap_or("").contains("not before `started_at`"));
    // A `say` hook action needs only its type (spec: `{type: say, text?, prompt?}`).
    let actions = schemas["HookActionDoc"]["oneOf"].as_array().expect("actions");
    let say = actions.iter().find(|a| a["properties"]["type"]["enum"] == json!(["say"])).expect("say");
    assert_eq!(say["required"], json!(["type"]));
}
