//! `POST /realtime/session/start`: one case per row of the spec's rejection table and per rule,
//! then the success path, the concurrency gate under load, reservations and dispatch.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use svc_domain::Scope;
use svc_server::config::{Config, ProviderKeys, SdkFloor};
use svc_server::dispatch::{DispatchError, DispatchFuture, DispatchRequest, SessionDispatcher};
use svc_store::Backend;
use svc_wire::rest::AgentConfig;

use crate::common::TestApp;

crate::on_both_backends_with!(
    app;
    rejections_follow_the_spec_table,
    workspace_gates_answer_with_their_extras,
    a_start_inserts_mints_and_dispatches,
    session_params_resolve_to_effective_values,
    catalog_agents_resolve_workspace_first_then_builtin,
    minted_tokens_start_in_their_own_project,
    a_reserved_room_is_used_by_the_next_start,
    a_failed_dispatch_is_503_and_ends_the_session,
    on_a_livekit_server_the_start_creates_the_room_there,
    the_concurrency_gate_admits_exactly_the_limit_over_http,
    local_starts_past_capacity_are_refused_before_any_session_exists,
);

#[derive(Debug, Default)]
struct Recorder {
    sessions: Mutex<Vec<DispatchRequest>>,
    fail: bool,
}

impl SessionDispatcher for Recorder {
    fn dispatch(&self, request: DispatchRequest) -> DispatchFuture<'_> {
        Box::pin(async move {
            if self.fail {
                return Err(DispatchError("runtime is down".into()));
            }
            self.sessions.lock().expect("lock").push(request);
            Ok(())
        })
    }
}

fn all_providers(config: &mut Config) {
    config.provider_keys = ProviderKeys { openai: true, gemini: true, xai: true };
}

async fn app(backend: Backend) -> (TestApp, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let t = TestApp::with(
        backend,
        |config| {
            all_providers(config);
            config.sdk_floors = vec![SdkFloor { name: "svc-js".into(), min_version: (1, 4, 0) }];
        },
        recorder.clone(),
    )
    .await;
    (t, recorder)
}

fn start_body(agent: Value) -> Value {
    json!({"type": "session-config", "sdk": {"name": "test-client", "version": "1.0.0"}, "agent": agent})
}

fn inline(extra: Value) -> Value {
    let mut agent = json!({"type": "inline", "instructions": "Be brief."});
    if let (Some(agent), Some(extra)) = (agent.as_object_mut(), extra.as_object()) {
        agent.extend(extra.clone());
    }
    start_body(agent)
}

struct Case {
    name: &'static str,
    body: Value,
    status: u16,
    kind: &'static str,
    code: Option<&'static str>,
    loc: Option<Value>,
}

fn case(
    name: &'static str,
    body: Value,
    status: u16,
    kind: &'static str,
    code: Option<&'static str>,
    loc: Option<Value>,
) -> Case {
    Case { name, body, status, kind, code, loc }
}

async fn rejections_follow_the_spec_table(t: (TestApp, Arc<Recorder>)) {
    let (t, recorder) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let broken = AgentConfig { model: Some(json!(42)), ..AgentConfig::default() };
    t.app.store.create_agent(&ws.id, "broken", None, &broken, 1).await.expect("agent");
    let long_greeting = AgentConfig { greeting: Some("Hi {{who}}".into()), ..AgentConfig::default() };
    t.app.store.create_agent(&ws.id, "greeter", None, &long_greeting, 1).await.expect("agent");
    let too_many_hooks: Vec<Value> = (0..17)
        .map(|_| json!({"trigger": "user.speech.timeout", "timeout_seconds": 10, "action": {"type": "end_call"}}))
        .collect();
    let cases = vec![
        case(
            "legacy flat shape",
            json!({"sdk": {"name": "x", "version": "1"}, "instructions": "hi"}),
            422,
            "validation_error",
            None,
            Some(json!(["body", "instructions"])),
        ),
        case(
            "missing sdk",
            json!({"agent": {"type": "inline"}}),
            422,
            "validation_error",
            None,
            Some(json!(["body", "sdk"])),
        ),
        case(
            "unknown field on a catalog block",
            start_body(json!({"type": "catalog", "name": "svc-receptionist", "instructions": "x"})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "instructions"])),
        ),
        case(
            "unknown tool kind",
            inline(json!({"tools": [{"kind": "teleport"}]})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "tools", 0, "kind"])),
        ),
        case(
            "provider block as model and model_options",
            inline(json!({"model": {"provider": "provider_b"}, "model_options": {"provider": "provider_b"}})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "model_options"])),
        ),
        case(
            "greeting over 4000 inline",
            inline(json!({"greeting": "g".repeat(4001)})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "greeting"])),
        ),
        case(
            "speaking style over 8192",
            inline(json!({"voice": {"speaking_style": "s".repeat(8193)}})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "voice", "speaking_style"])),
        ),
        case(
            "17 hooks",
            inline(json!({"hooks": too_many_hooks})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "hooks"])),
        ),
        case(
            "max_session_seconds below 60",
            json!({"sdk": {"name": "x", "version": "1"}, "session": {"max_session_seconds": 59}}),
            422,
            "validation_error",
            None,
            Some(json!(["body", "session", "max_session_seconds"])),
        ),
        case(
            "svc_vad bound",
            inline(json!({"model": {"provider": "provider_a", "svc_vad": {"pause_ms": 5001}}})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "model", "svc_vad", "pause_ms"])),
        ),
        case(
            "provider_c speed bound",
            inline(json!({"model": {"provider": "provider_c", "speed": 1.6}})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "model", "speed"])),
        ),
        case(
            "provider_b_live max_output_tokens bound",
            inline(json!({"model": {"provider": "provider_b_live", "max_output_tokens": 15}})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "model", "max_output_tokens"])),
        ),
        case(
            "resume id of no session",
            json!({"sdk": {"name": "x", "version": "1"}, "session": {"experimental": {"resume_session_id": uuid::Uuid::new_v4().to_string()}}}),
            404,
            "api_error",
            None,
            None,
        ),
        case(
            "bad client tool name",
            inline(
                json!({"tools": [{"kind": "client", "name": "Bad", "description": "d", "parameters": {"type": "object"}}]}),
            ),
            422,
            "api_error",
            Some("invalid_tool_config"),
            None,
        ),
        case(
            "retired server kind",
            inline(json!({"tools": [{"kind": "server"}]})),
            422,
            "api_error",
            Some("invalid_tool_config"),
            None,
        ),
        case(
            "reserved catalog kind",
            inline(json!({"tools": [{"kind": "catalog", "name": "x"}]})),
            422,
            "api_error",
            Some("invalid_tool_config"),
            None,
        ),
        case(
            "a client tool named like the state tool of an agent with a state",
            inline(
                json!({"state": {"stage": "intro"}, "tools": [{"kind": "client", "name": "set_state", "description": "d"}]}),
            ),
            422,
            "api_error",
            Some("invalid_tool_config"),
            None,
        ),
        case(
            "a state that is not an object",
            inline(json!({"state": "intro"})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "state"])),
        ),
        case(
            "a state over 16 KiB",
            inline(json!({"state": {"notes": "x".repeat(16 * 1024)}})),
            422,
            "validation_error",
            None,
            Some(json!(["body", "agent", "state"])),
        ),
        case(
            "unknown agent",
            start_body(json!({"type": "catalog", "name": "nobody-here"})),
            422,
            "api_error",
            Some("unknown_agent"),
            None,
        ),
        case(
            "unknown svc- agent",
            start_body(json!({"type": "catalog", "name": "svc-does-not-exist"})),
            422,
            "api_error",
            Some("unknown_agent"),
            None,
        ),
        case(
            "stored config that does not load",
            start_body(json!({"type": "catalog", "name": "broken"})),
            422,
            "api_error",
            Some("agent_config_unavailable"),
            None,
        ),
        case(
            "greeting too long after substitution",
            start_body(json!({"type": "catalog", "name": "greeter", "inputs": {"who": "w".repeat(4000)}})),
            422,
            "api_error",
            Some("greeting_too_long"),
            None,
        ),
        case(
            "unknown model id",
            inline(json!({"model": "gpt-9000"})),
            422,
            "api_error",
            Some("model_unavailable"),
            None,
        ),
        case(
            "model_id of another provider",
            inline(json!({"model": {"provider": "provider_b", "model_id": "gemini-3.8-live"}})),
            422,
            "api_error",
            Some("model_unavailable"),
            None,
        ),
        case(
            "model_options provider mismatch",
            inline(json!({"model": "provider_a", "model_options": {"provider": "provider_b"}})),
            422,
            "api_error",
            Some("model_unavailable"),
            None,
        ),
        case(
            "instructions over 131072",
            inline(json!({"instructions": "i".repeat(131_073)})),
            422,
            "api_error",
            Some("instructions_too_long"),
            None,
        ),
        case(
            "tools with client delegation",
            inline(
                json!({"model": {"provider": "provider_b_live", "delegation": "client"}, "tools": [{"kind": "end_call"}]}),
            ),
            422,
            "api_error",
            Some("delegation_tools_unsupported"),
            None,
        ),
        case(
            "svc delegation without resources:read",
            inline(json!({"model": {"provider": "provider_b_live", "delegation": "svc"}})),
            403,
            "api_error",
            Some("svc_delegation_scope_required"),
            None,
        ),
        case(
            "server_vad knob under svc_vad",
            inline(json!({"model": {"provider": "provider_a", "silence_duration_ms": 500}})),
            422,
            "api_error",
            Some("turn_detection_knob_mismatch"),
            None,
        ),
        case(
            "svc_vad object under server_vad",
            inline(
                json!({"model": {"provider": "provider_a", "turn_detection": "server_vad", "svc_vad": {"pause_ms": 100}}}),
            ),
            422,
            "api_error",
            Some("turn_detection_knob_mismatch"),
            None,
        ),
        case(
            "eagerness under server_vad",
            inline(json!({"model": {"provider": "provider_b", "turn_detection": "server_vad", "eagerness": "high"}})),
            422,
            "api_error",
            Some("turn_detection_knob_mismatch"),
            None,
        ),
        case(
            "semantic_vad on provider_a",
            inline(json!({"model": {"provider": "provider_a", "turn_detection": "semantic_vad"}})),
            422,
            "api_error",
            Some("turn_detection_unsupported"),
            None,
        ),
        case(
            "svc_vad on provider_b",
            inline(json!({"model": {"provider": "provider_b", "turn_detection": "svc_vad"}})),
            422,
            "api_error",
            Some("turn_detection_unsupported"),
            None,
        ),
        case(
            "semantic_vad on provider_c",
            inline(json!({"model": {"provider": "provider_c", "turn_detection": "semantic_vad"}})),
            422,
            "api_error",
            Some("turn_detection_unsupported"),
            None,
        ),
        case(
            "thinking_level on a model that takes none",
            inline(
                json!({"model": {"provider": "provider_a", "model_id": "gemini-3.8-live", "thinking_level": "low"}}),
            ),
            422,
            "api_error",
            Some("thinking_level_unsupported"),
            None,
        ),
        case(
            "text-only on a speech-to-speech-only model",
            inline(json!({"model": "provider_b_live", "audio": {"output": false}})),
            400,
            "api_error",
            None,
            None,
        ),
        case(
            "SDK below the floor",
            json!({"sdk": {"name": "svc-js", "version": "1.3.9"}}),
            400,
            "api_error",
            Some("sdk_unsupported"),
            None,
        ),
    ];
    for case in cases {
        let reply = t.post("/realtime/session/start", Some(&key), case.body.clone()).await;
        let error = reply.expect_error(case.status);
        assert_eq!(error["type"], case.kind, "{}: {error}", case.name);
        assert_eq!(error.get("code").and_then(Value::as_str), case.code, "{}: {error}", case.name);
        if let Some(loc) = &case.loc {
            let locs: Vec<&Value> = error["errors"].as_array().expect("errors").iter().map(|e| &e["loc"]).collect();
            assert!(locs.contains(&loc), "{}: expected loc {loc} in {locs:?}", case.name);
        }
    }
    assert!(recorder.sessions.lock().expect("lock").is_empty(), "no rejected start was dispatched");
    assert_eq!(t.app.store.count_live_sessions(&ws.id).await.expect("count"), 0, "no rejected start left a session");

    // Every problem is collected, and tool problems are all listed, joined by "; ".
    let error = t
        .post(
            "/realtime/session/start",
            Some(&key),
            json!({"agent": {"type": "inline", "greeting": 5, "voice": "x"}, "session": {"store_audio": "yes"}}),
        )
        .await
        .expect_error(422);
    assert_eq!(error["errors"].as_array().expect("errors").len(), 4, "{error}");
    let error = t
        .post(
            "/realtime/session/start",
            Some(&key),
            inline(json!({"tools": [
                {"kind": "client", "name": "lookup", "description": "d", "parameters": {"type": "object"}},
                {"kind": "client", "name": "lookup", "description": "d", "parameters": {"type": "object"}},
                {"kind": "client", "name": "svc_secret", "description": "d", "parameters": {"type": "object", "additionalProperties": false}}
            ]})),
        )
        .await
        .expect_error(422);
    let message = error["message"].as_str().expect("message");
    assert!(message.matches("; ").count() >= 2, "every tool problem is listed: {message}");
    // Authentication and scope come first.
    t.post("/realtime/session/start", None, inline(json!({}))).await.expect_unauthorized();
    let reader = t.api_key(&ws, &[Scope::RealtimeRead]).await;
    let error = t.post("/realtime/session/start", Some(&reader), inline(json!({}))).await.expect_error(403);
    assert_eq!(error["message"], "API key missing required scopes: realtime:start");
    // The SDK floor message names the minimum and the upgrade command.
    let error = t
        .post("/realtime/session/start", Some(&key), json!({"sdk": {"name": "svc-js", "version": "0.9"}}))
        .await
        .expect_error(400);
    let message = error["message"].as_str().expect("message");
    assert!(message.contains("1.4.0") && message.contains("npm install"), "{message}");
    t.post("/realtime/session/start", Some(&key), json!({"sdk": {"name": "svc-js", "version": "1.4.0"}}))
        .await
        .expect(200);
}

async fn workspace_gates_answer_with_their_extras(t: (TestApp, Arc<Recorder>)) {
    let (t, _) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    // Below the SDK floor: the minimum as an extra, and an upgrade command for the package sdk/js
    // really publishes (read from its package.json, so the two cannot drift apart).
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/js/package.json");
    let package: Value = serde_json::from_slice(&std::fs::read(manifest).expect("package.json")).expect("json");
    let package = package["name"].as_str().expect("name");
    let old_sdk = json!({"sdk": {"name": package, "version": "1.3.9"}});
    let error = t.post("/realtime/session/start", Some(&key), old_sdk).await.expect_error(400);
    assert_eq!((error["code"].clone(), error["min_version"].clone()), (json!("sdk_unsupported"), json!("1.4.0")));
    let message = error["message"].as_str().expect("message");
    assert!(message.ends_with(&format!("Upgrade with: npm install {package}@1.4.0")), "{message}");
    let body = inline(json!({}));
    let set = |change: fn(&mut svc_domain::WorkspaceSettings)| {
        let (store, id) = (t.app.store.clone(), ws.id.clone());
        async move {
            let mut settings = store.workspace_by_id(&id).await.expect("ws").settings;
            change(&mut settings);
            store.update_workspace(&id, &settings, None).await.expect("update");
        }
    };
    set(|s| s.free_minutes_granted = Some(0)).await;
    let error = t.post("/realtime/session/start", Some(&key), body.clone()).await.expect_error(402);
    assert_eq!(
        (error["code"].clone(), error["granted_minutes"].clone(), error["used_minutes"].clone()),
        (json!("free_minutes_exhausted"), json!(0), json!(0))
    );
    set(|s| {
        s.free_minutes_granted = None;
        s.credit_balance_cents = Some(0);
    })
    .await;
    let error = t.post("/realtime/session/start", Some(&key), body.clone()).await.expect_error(402);
    assert_eq!(error["code"], "insufficient_credits");
    assert_eq!((error["balance_cents"].clone(), error["top_up_path"].clone()), (json!(0), json!("/billing/credits")));
    set(|s| {
        s.credit_balance_cents = Some(500);
        s.monthly_quota_minutes = Some(0);
    })
    .await;
    let error = t.post("/realtime/session/start", Some(&key), body.clone()).await.expect_error(429);
    assert_eq!(error["code"], "quota_exceeded");
    assert_eq!(
        (error["meter"].clone(), error["included"].clone(), error["used"].clone()),
        (json!("voice_minutes"), json!(0), json!(0))
    );
    assert!(error["reset_at"].as_f64().expect("reset_at") > 1.7e9);
    set(|s| {
        s.monthly_quota_minutes = None;
        s.entitled_providers = Some(vec!["provider_b".into()]);
        s.plan = "starter".into();
    })
    .await;
    let error = t.post("/realtime/session/start", Some(&key), body.clone()).await.expect_error(403);
    assert_eq!(error["code"], "provider_not_entitled");
    assert_eq!(
        (
            error["provider"].clone(),
            error["allowed_providers"].clone(),
            error["plan"].clone(),
            error["upgrade_path"].clone()
        ),
        (json!("provider_a"), json!(["provider_b"]), json!("starter"), json!("/billing/plans"))
    );
    t.post("/realtime/session/start", Some(&key), inline(json!({"model": "provider_b"}))).await.expect(200);
    set(|s| {
        s.entitled_providers = None;
        s.max_concurrent_sessions = Some(1);
    })
    .await;
    let error = t.post("/realtime/session/start", Some(&key), body.clone()).await.expect_error(429);
    assert_eq!(
        (error["code"].clone(), error["limit"].clone(), error["active"].clone()),
        (json!("concurrent_session_limit"), json!(1), json!(1))
    );

    // No voice stack for the resolved provider: 503 without a code.
    let bare = TestApp::new(Backend::Sqlite).await;
    let ws = bare.workspace("acme").await;
    let key = bare.api_key(&ws, &[Scope::RealtimeStart]).await;
    let error = bare.post("/realtime/session/start", Some(&key), inline(json!({}))).await.expect_error(503);
    assert!(error.get("code").is_none());
    // provider_local without its models: 503 with the command that installs them.
    let error = bare
        .post("/realtime/session/start", Some(&key), inline(json!({"model": "provider_local"})))
        .await
        .expect_error(503);
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("run `svc models install`"), "{error}");
}

async fn a_start_inserts_mints_and_dispatches(t: (TestApp, Arc<Recorder>)) {
    let (t, recorder) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart, Scope::RealtimeRead]).await;
    let started = t
        .post(
            "/realtime/session/start",
            Some(&key),
            inline(json!({"tools": [{"kind": "end_call"}, {"kind": "web_search"}, {"kind": "client", "name": "lookup_order", "description": "Find an order", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}]})),
        )
        .await
        .expect(200);
    assert_eq!(started["livekit_url"], "ws://localhost:8080/room");
    let session_id = started["session_id"].as_str().expect("id");
    assert!(svc_domain::requests::is_uuid(session_id));
    let claims = t.app.room.verify(started["token"].as_str().expect("token")).expect("a valid LiveKit token");
    assert_eq!(claims.video.room, started["room_name"].as_str().expect("room"));
    assert!(
        claims.video.room_join && claims.video.can_publish == Some(true) && claims.video.can_publish_data == Some(true)
    );
    for phase in [
        "version_check_ms",
        "project_check_ms",
        "provider_resolve_ms",
        "db_insert_ms",
        "mint_tokens_ms",
        "dispatch_ms",
        "total_ms",
        "resolve_ms",
    ] {
        assert!(started["timings"][phase].as_f64().is_some_and(|ms| ms >= 0.0), "{phase}");
    }
    let total = started["timings"]["total_ms"].as_f64().expect("total");
    assert!(total >= started["timings"]["db_insert_ms"].as_f64().expect("insert"), "total covers the phases");

    assert_eq!(t.get("/realtime/verify", Some(&key)).await.expect(200)["realtime_voice_available"], true);
    assert_eq!(t.get("/sessions/capabilities", Some(&key)).await.expect(200)["openai_provider_available"], true);
    let record = t.get(&format!("/sessions/{session_id}"), Some(&key)).await.expect(200);
    assert_eq!((record["status"].clone(), record["provider"].clone()), (json!("active"), json!("provider_a")));
    let dispatched = recorder.sessions.lock().expect("lock").clone();
    assert_eq!(dispatched.len(), 1);
    assert_eq!(dispatched[0].session_id, session_id);
    let resolved = &dispatched[0].session;
    assert_eq!(resolved.rejected_tools.len(), 1, "web_search is not configured here");
    assert_eq!(resolved.rejected_tools[0].name, "web_search");
    assert_eq!(resolved.agent.tools.len(), 2);
    assert_eq!(resolved.ready_agent(), Value::Null, "inline agents report null");
    let timeline = t.app.store.timeline(session_id).await.expect("timeline");
    assert_eq!(timeline[0].kind, "session.started");
    assert_eq!(timeline[0].data["room_name"], started["room_name"]);
    assert_eq!(timeline[0].data["rejected_tools"][0]["name"], "web_search");
    let stored = t.app.store.session_config(session_id).await.expect("config").expect("stored");
    assert_eq!(stored["agent"]["instructions"], "Be brief.");
    assert_eq!(stored["model"]["alias"], "provider_a");
}

async fn session_params_resolve_to_effective_values(t: (TestApp, Arc<Recorder>)) {
    let (t, recorder) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let mut body = inline(json!({}));
    body["session"] = json!({"max_session_seconds": 600, "store_recording": false, "store_transcript": true, "store_video": true,
                             "experimental": {"avatar": {"provider": "avatar_vendor", "avatar_id": "a1"}}});
    t.post("/realtime/session/start", Some(&key), body).await.expect(200);
    body = inline(json!({"audio": {"noise_cancellation": true}}));
    t.post("/realtime/session/start", Some(&key), body).await.expect(200);
    let sessions = recorder.sessions.lock().expect("lock").clone();
    let first = &sessions[0].session;
    assert_eq!(first.max_session_seconds, Some(600));
    assert_eq!(
        (first.store.audio, first.store.transcript, first.store.video),
        (false, true, false),
        "video has no consent"
    );
    assert_eq!(first.avatar, None);
    assert_eq!(first.warnings, vec!["avatar_disabled".to_owned()]);
    let second = &sessions[1].session;
    assert_eq!(second.max_session_seconds, Some(14_400), "the server cap applies when none is requested");
    assert_eq!(serde_json::to_value(second.agent.audio).expect("json")["noise_cancellation"], "voice_focus");
    // An agent's state runs with it; a catalog start whose tools bring a client tool of the
    // state tool's name keeps the client's tool and runs without the state.
    t.post("/realtime/session/start", Some(&key), inline(json!({"state": {"stage": "intro"}}))).await.expect(200);
    let stateful = AgentConfig { state: Some(json!({"stage": "intro"})), ..AgentConfig::default() };
    t.app.store.create_agent(&ws.id, "stateful", None, &stateful, 1).await.expect("agent");
    let shadowing = start_body(json!({"type": "catalog", "name": "stateful",
        "tools": [{"kind": "client", "name": "set_state", "description": "The client's own."}]}));
    t.post("/realtime/session/start", Some(&key), shadowing).await.expect(200);
    let sessions = recorder.sessions.lock().expect("lock").clone();
    assert_eq!(sessions[2].session.agent.state.as_ref().map(|s| s["stage"].clone()), Some(json!("intro")));
    assert_eq!(sessions[3].session.agent.state, None);
    assert_eq!(sessions[3].session.warnings, vec!["state_tool_shadowed".to_owned()]);
    // A `say` hook may carry neither `text` nor `prompt` (spec: both optional).
    let bare_say = json!([{"trigger": "user.speech.timeout", "timeout_seconds": 20, "action": {"type": "say"}}]);
    t.post("/realtime/session/start", Some(&key), inline(json!({"hooks": bare_say}))).await.expect(200);
    let sessions = recorder.sessions.lock().expect("lock").clone();
    let hook = serde_json::to_value(&sessions[4].session.agent.hooks[0]).expect("json");
    assert_eq!(hook["action"], json!({"type": "say"}));
    // Null is absent, for `type` as for every optional field; whole floats are integers.
    let mut body = inline(json!({}));
    body["type"] = Value::Null;
    body["session"] = json!({"max_session_seconds": 600.0});
    t.post("/realtime/session/start", Some(&key), body).await.expect(200);
    let sessions = recorder.sessions.lock().expect("lock").clone();
    assert_eq!(sessions[5].session.max_session_seconds, Some(600));
}

async fn catalog_agents_resolve_workspace_first_then_builtin(t: (TestApp, Arc<Recorder>)) {
    let (t, recorder) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let body =
        start_body(json!({"type": "catalog", "name": "svc-receptionist", "inputs": {"business_name": "Rosa's Bakery"},
                                 "voice": {"name": "Kore"}}));
    t.post("/realtime/session/start", Some(&key), body.clone()).await.expect(200);
    let own = AgentConfig {
        instructions: Some("Our own receptionist for {{business_name}}.".into()),
        tools: Some(vec![json!({"kind": "end_call"})]),
        ..AgentConfig::default()
    };
    t.app.store.create_agent(&ws.id, "svc-receptionist", None, &own, 1).await.expect("agent");
    t.post("/realtime/session/start", Some(&key), body).await.expect(200);
    let sent_tools =
        json!([{"kind": "end_call"}, {"kind": "client", "name": "take_message", "description": "Notes it."}]);
    let with_tools = start_body(json!({"type": "catalog", "name": "svc-receptionist", "tools": sent_tools}));
    t.post("/realtime/session/start", Some(&key), with_tools).await.expect(200);
    let sessions = recorder.sessions.lock().expect("lock").clone();
    let builtin = &sessions[0].session;
    assert!(builtin.agent.instructions.contains("receptionist of Rosa's Bakery"), "inputs are substituted");
    assert_eq!(
        builtin.agent.greeting.as_deref(),
        Some("Hello, you've reached Rosa's Bakery. How can I help you today?")
    );
    assert_eq!(builtin.agent.voice.name.as_deref(), Some("Kore"));
    // A catalog start runs exactly the tools it carries: absent means none (spec), whatever the
    // stored agent lists.
    assert_eq!(builtin.ready_agent(), json!({"name": "svc-receptionist", "tools": []}));
    assert_eq!(
        sessions[1].session.agent.instructions, "Our own receptionist for Rosa's Bakery.",
        "the workspace agent wins"
    );
    assert_eq!(sessions[1].session.ready_agent(), json!({"name": "svc-receptionist", "tools": []}));
    assert_eq!(
        sessions[2].session.ready_agent(),
        json!({"name": "svc-receptionist", "tools": ["take_message", "end_call"]}),
        "the start's tools, verbatim"
    );
    // Another workspace's agent is unknown here.
    let other = t.workspace("beta").await;
    t.app.store.create_agent(&other.id, "private-agent", None, &AgentConfig::default(), 1).await.expect("agent");
    let error = t
        .post("/realtime/session/start", Some(&key), start_body(json!({"type": "catalog", "name": "private-agent"})))
        .await
        .expect_error(422);
    assert_eq!(error["code"], "unknown_agent");
}

async fn minted_tokens_start_in_their_own_project(t: (TestApp, Arc<Recorder>)) {
    let (t, _) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint, Scope::RealtimeRead, Scope::ResourcesRead]).await;
    let minted = t.minted(&key, "alice", &["realtime:read"]).await;
    let jwt = minted["jwt"].as_str();
    let request = TestApp::request("POST", "/realtime/session/start", jwt)
        .header("content-type", "application/json")
        .header("x-svc-sdk", "svc-js/2.0.0")
        .body(axum::body::Body::from(json!({"agent": {"type": "inline"}}).to_string()))
        .expect("request");
    let started = t.send(request).await.expect(200);
    let claims = t.app.room.verify(started["token"].as_str().expect("token")).expect("token");
    assert_eq!(claims.sub, "alice", "the participant identity is the end user");
    let id = started["session_id"].as_str().expect("id");
    t.get(&format!("/sessions/{id}"), jwt).await.expect(200);
    t.get(&format!("/sessions/{id}"), Some(&key)).await.expect_error(404);
    // Minted tokens never qualify for svc delegation, whatever the minting key holds.
    let error = t
        .post(
            "/realtime/session/start",
            jwt,
            inline(json!({"model": {"provider": "provider_b_live", "delegation": "svc"}})),
        )
        .await
        .expect_error(403);
    assert_eq!(error["code"], "svc_delegation_scope_required");
    let starter = t.api_key(&ws, &[Scope::RealtimeStart, Scope::ResourcesRead]).await;
    t.post(
        "/realtime/session/start",
        Some(&starter),
        inline(json!({"model": {"provider": "provider_b_live", "delegation": "svc"}})),
    )
    .await
    .expect(200);
}

async fn a_reserved_room_is_used_by_the_next_start(t: (TestApp, Arc<Recorder>)) {
    let (t, _) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let other_key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let prepared = t.post("/realtime/session/prepare-room", Some(&key), json!({})).await.expect(201);
    let theirs = t.post("/realtime/session/start", Some(&other_key), inline(json!({}))).await.expect(200);
    assert_ne!(theirs["room_name"], prepared["room_name"], "a reservation belongs to its credential");
    let mine = t.post("/realtime/session/start", Some(&key), inline(json!({}))).await.expect(200);
    assert_eq!(mine["room_name"], prepared["room_name"]);
    let next = t.post("/realtime/session/start", Some(&key), inline(json!({}))).await.expect(200);
    assert_ne!(next["room_name"], prepared["room_name"], "a reservation is consumed once");
}

async fn a_failed_dispatch_is_503_and_ends_the_session(t: (TestApp, Arc<Recorder>)) {
    let (_, _) = t;
    let failing = Arc::new(Recorder { fail: true, ..Recorder::default() });
    let t = TestApp::with(Backend::Sqlite, all_providers, failing).await;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart, Scope::RealtimeRead]).await;
    let error = t.post("/realtime/session/start", Some(&key), inline(json!({}))).await.expect_error(503);
    assert!(error.get("code").is_none());
    let listed = t.get("/sessions", Some(&key)).await.expect(200);
    assert_eq!(listed[0]["status"], "error");
    assert_eq!(t.app.store.count_live_sessions(&ws.id).await.expect("count"), 0);
}

/// With `--livekit-url`: the start creates the room on that server and answers its URL and a
/// token signed with its key; a server that does not answer is a 503 and the session's end.
async fn on_a_livekit_server_the_start_creates_the_room_there(t: (TestApp, Arc<Recorder>)) {
    let (t, _) = t;
    let backend = t.app.store.backend();
    const KEY: &str = "lk-key";
    const SECRET: &str = "lk-secret-0123456789abcdef0123456789";
    let credentials = svc_room::RoomCredentials::new(KEY, SECRET);
    let config = svc_room::RoomServerConfig {
        udp_port: 0,
        node_ips: vec!["127.0.0.1".parse().expect("ip")],
        ..Default::default()
    };
    let livekit = svc_room::RoomServer::start(config, credentials.clone()).await.expect("the LiveKit server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}/room", listener.local_addr().expect("addr"));
    let router = axum::Router::new().nest("/room", livekit.router());
    tokio::spawn(async move {
        // Lives as long as the test.
        let _ = axum::serve(listener, router).await;
    });
    let on_as = |url: String, worker: Option<svc_server::config::WorkerMode>| {
        move |config: &mut Config| {
            all_providers(config);
            config.livekit = Some(svc_server::config::LiveKitServer {
                url: url::Url::parse(&url).expect("url"),
                api_key: KEY.to_owned(),
                api_secret: SECRET.to_owned(),
                worker,
                sip: None,
            });
        }
    };
    let on = |url: String| on_as(url, None);

    let recorder = Arc::new(Recorder::default());
    let t = TestApp::with(backend, on(url.clone()), recorder.clone()).await;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart, Scope::RealtimeRead]).await;
    let started = t.post("/realtime/session/start", Some(&key), inline(json!({}))).await.expect(200);
    assert_eq!(started["livekit_url"], url);
    let room = started["room_name"].as_str().expect("room");
    let claims = credentials.verify(started["token"].as_str().expect("token")).expect("signed with its key");
    assert_eq!(claims.video.room, room);
    assert!(livekit.describe_room(room).await.is_some(), "the room is open on the LiveKit server");
    assert_eq!(recorder.sessions.lock().expect("lock").len(), 1);

    // Nothing listens there: 503, and the session is not left live.
    let t = TestApp::with(backend, on("ws://127.0.0.1:9/room".to_owned()), recorder.clone()).await;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart, Scope::RealtimeRead]).await;
    let error = t.post("/realtime/session/start", Some(&key), inline(json!({}))).await.expect_error(503);
    assert_eq!(error["message"], "The media server is unavailable; retry with backoff");
    let listed = t.get("/sessions", Some(&key)).await.expect(200);
    assert_eq!(listed[0]["status"], "error");
    assert_eq!(recorder.sessions.lock().expect("lock").len(), 1, "nothing dispatched");

    // Worker mode: the room is created with a dispatch of svc's agent whose metadata is the
    // session id, which a worker registered under that name is offered; nothing runs here.
    let (tasks, stop) = (tokio_util::task::TaskTracker::new(), tokio_util::sync::CancellationToken::new());
    let options = svc_room::worker::WorkerOptions {
        url: url.clone(),
        credentials: credentials.clone(),
        agent_name: "svc-agent".to_owned(),
        version: "test".to_owned(),
        tls: None,
    };
    let (worker, mut events) = svc_room::worker::AgentWorker::start(options, &tasks, stop.clone()).expect("worker");
    let registered = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv()).await.expect("in time");
    assert!(matches!(registered, Some(svc_room::worker::WorkerEvent::Registered { .. })), "{registered:?}");
    let mode = svc_server::config::WorkerMode { agent_name: "svc-agent".to_owned(), capacity: 10 };
    let t = TestApp::with(backend, on_as(url.clone(), Some(mode)), recorder.clone()).await;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart, Scope::RealtimeRead]).await;
    let started = t.post("/realtime/session/start", Some(&key), inline(json!({}))).await.expect(200);
    let offered = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match events.recv().await.expect("the worker runs") {
                svc_room::worker::WorkerEvent::Offer { job, .. } => return job,
                _ => continue,
            }
        }
    })
    .await
    .expect("the job is offered");
    assert_eq!(offered.metadata, started["session_id"].as_str().expect("id"));
    assert_eq!(offered.agent_name, "svc-agent");
    assert_eq!(offered.room.map(|room| room.name), started["room_name"].as_str().map(str::to_owned));
    assert_eq!(recorder.sessions.lock().expect("lock").len(), 1, "nothing runs on the node that started it");
    worker.answer(&offered.id, svc_room::worker::OfferAnswer::Terminate);
    stop.cancel();
    tasks.close();
    tasks.wait().await;
    livekit.shutdown().await;
}

async fn the_concurrency_gate_admits_exactly_the_limit_over_http(t: (TestApp, Arc<Recorder>)) {
    let (t, recorder) = t;
    let ws = t.workspace("acme").await;
    let mut settings = ws.settings.clone();
    settings.max_concurrent_sessions = Some(10);
    t.app.store.update_workspace(&ws.id, &settings, None).await.expect("update");
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let t = Arc::new(t);
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (t, key) = (t.clone(), key.clone());
        tasks.push(tokio::spawn(async move { t.post("/realtime/session/start", Some(&key), inline(json!({}))).await }));
    }
    let (mut admitted, mut limited) = (0, 0);
    for task in tasks {
        let reply = task.await.expect("join");
        match reply.status.as_u16() {
            200 => admitted += 1,
            429 => {
                assert_eq!(reply.json()["error"]["code"], "concurrent_session_limit");
                limited += 1;
            }
            other => panic!("unexpected {other}: {}", String::from_utf8_lossy(&reply.body)),
        }
    }
    assert_eq!((admitted, limited), (10, 40));
    assert_eq!(recorder.sessions.lock().expect("lock").len(), 10);
}

/// A server whose local provider holds two sessions, with its model files in place. The start
/// gate only checks the files' presence (nothing is loaded until a session runs, and the
/// recorder runs none), so empty files stand in for the models here.
async fn local_app(backend: Backend, capacity: usize) -> (TestApp, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let t = TestApp::with(
        backend,
        |config| {
            let dir = svc_local::ModelsDir::new(config.data_dir.join("local-models"));
            for file in dir.required_files() {
                std::fs::create_dir_all(file.parent().expect("a parent")).expect("model dir");
                std::fs::write(&file, b"").expect("model file");
            }
            config.local = svc_local::LocalEngines::new(svc_local::LocalConfig {
                models: dir,
                brain: svc_local::Brain::Embedded,
                capacity,
                threads: 0,
            });
        },
        recorder.clone(),
    )
    .await;
    (t, recorder)
}

async fn local_starts_past_capacity_are_refused_before_any_session_exists(t: (TestApp, Arc<Recorder>)) {
    let (first, _) = t;
    let backend = first.app.store.backend();
    drop(first);
    let (t, recorder) = local_app(backend, 2).await;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart, Scope::RealtimeRead]).await;
    let body = inline(json!({"model": "provider_local"}));
    let t = Arc::new(t);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (t, key, body) = (t.clone(), key.clone(), body.clone());
        tasks.push(tokio::spawn(async move { t.post("/realtime/session/start", Some(&key), body).await }));
    }
    let (mut admitted, mut refused) = (Vec::new(), 0);
    for task in tasks {
        let reply = task.await.expect("join");
        match reply.status.as_u16() {
            200 => admitted.push(reply.json()["session_id"].as_str().expect("id").to_owned()),
            503 => {
                let error = reply.expect_error(503);
                // The spec's 503 has no code: the message names the reason.
                assert!(error.get("code").is_none(), "{error}");
                let message = error["message"].as_str().unwrap_or_default();
                assert!(message.contains("at capacity (2 concurrent sessions"), "{message}");
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", String::from_utf8_lossy(&reply.body)),
        }
    }
    assert_eq!((admitted.len(), refused), (2, 6));
    // Never more live local sessions than slots, each admitted one holding its slot.
    assert_eq!(t.app.config.local.active(), 2);
    let dispatched: Vec<_> = recorder.sessions.lock().expect("lock").iter().map(|r| r.local_slot.is_some()).collect();
    assert_eq!(dispatched, vec![true, true]);
    // A refused start leaves nothing in history: only the two admitted sessions exist, live.
    let listed = t.get("/sessions", Some(&key)).await.expect(200);
    let listed = listed.as_array().expect("a list");
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|s| s["status"] == "active"), "{listed:?}");
    assert_eq!(t.app.store.count_live_sessions(&ws.id).await.expect("count"), 2);

    // The session ends (its runtime drops the request and with it the slot): a start succeeds.
    let ended = recorder.sessions.lock().expect("lock").remove(0);
    t.app.store.finish_session(&ended.session_id, "completed", 1, None).await.expect("finish");
    drop(ended);
    assert_eq!(t.app.config.local.active(), 1);
    t.post("/realtime/session/start", Some(&key), body.clone()).await.expect(200);
    t.post("/realtime/session/start", Some(&key), body).await.expect_error(503);
    assert_eq!(t.app.config.local.active(), 2);
}
