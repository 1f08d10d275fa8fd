//! Server tools at session start: the workspace's `disabled_server_tools` gates a configured tool
//! off (`ready.rejected_tools` reason `gated_off`), an unconfigured one stays `not_configured`,
//! and the tool-response policy is validated (422 `invalid_tool_config`) and kept for the
//! provider.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use svc_domain::Scope;
use svc_domain::tools::ServerTool;
use svc_server::config::ProviderKeys;
use svc_server::dispatch::{DispatchFuture, DispatchRequest, SessionDispatcher};
use svc_store::Backend;

use crate::common::TestApp;

crate::on_both_backends_with!(
    app;
    a_workspace_gates_a_configured_tool_off,
    the_tool_response_policy_is_validated_and_kept,
);

#[derive(Debug, Default)]
struct Recorder {
    sessions: Mutex<Vec<DispatchRequest>>,
}

impl SessionDispatcher for Recorder {
    fn dispatch(&self, request: DispatchRequest) -> DispatchFuture<'_> {
        Box::pin(async move {
            self.sessions.lock().expect("lock").push(request);
            Ok(())
        })
    }
}

/// A deployment with a search backend (so `web_search` runs) and no vision model.
async fn app(backend: Backend) -> (TestApp, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let t = TestApp::with(
        backend,
        |config| {
            config.provider_keys = ProviderKeys { openai: true, gemini: true, xai: true };
            config.server_tools.push("web_search".to_owned());
        },
        recorder.clone(),
    )
    .await;
    (t, recorder)
}

fn start(tools: Value, policy: Option<Value>) -> Value {
    let mut agent = json!({"type": "inline", "model": "provider_a", "tools": tools});
    if let Some(policy) = policy {
        agent["tool_response_policy"] = policy;
    }
    json!({"sdk": {"name": "svc-js", "version": "2.0.0"}, "agent": agent})
}

async fn a_workspace_gates_a_configured_tool_off(t: (TestApp, Arc<Recorder>)) {
    let (t, recorder) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let tools = json!([{"kind": "web_search"}, {"kind": "detect_objects"}, {"kind": "end_call"}]);
    t.post("/realtime/session/start", Some(&key), start(tools.clone(), None)).await.expect(200);
    let rejected = |index: usize| {
        let sessions = recorder.sessions.lock().expect("lock");
        let session = &sessions[index].session;
        let names: Vec<String> = session.agent.tools.iter().map(|tool| tool.name().to_owned()).collect();
        (names, serde_json::to_value(&session.rejected_tools).expect("json"))
    };
    let (running, refused) = rejected(0);
    assert_eq!(running, ["web_search", "end_call"], "web_search runs: the deployment has a search backend");
    assert_eq!(refused[0]["name"], "detect_objects");
    assert!(refused[0]["reason"].as_str().is_some_and(|r| r.starts_with("not_configured:")), "{refused}");

    let mut settings = ws.settings.clone();
    settings.disabled_server_tools = vec![ServerTool::WebSearch];
    t.app.store.update_workspace(&ws.id, &settings, None).await.expect("gate web_search off");
    let stored = t.app.store.workspace_by_id(&ws.id).await.expect("read back");
    assert_eq!(stored.settings.disabled_server_tools, [ServerTool::WebSearch], "the setting is stored");
    let started = t.post("/realtime/session/start", Some(&key), start(tools, None)).await.expect(200);
    let (running, refused) = rejected(1);
    assert_eq!(running, ["end_call"]);
    assert_eq!(
        refused,
        json!([
            {"name": "web_search", "reason": "gated_off: web_search is gated off for this workspace"},
            {"name": "detect_objects", "reason": "not_configured: this deployment has no backend for detect_objects"},
        ])
    );
    let id = started["session_id"].as_str().expect("id");
    let timeline = t.app.store.timeline(id).await.expect("timeline");
    assert_eq!(timeline[0].data["rejected_tools"][0]["reason"], refused[0]["reason"], "the start's timeline says so");
}

async fn the_tool_response_policy_is_validated_and_kept(t: (TestApp, Arc<Recorder>)) {
    let (t, recorder) = t;
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let tools =
        json!([{"kind": "client", "name": "lookup_order", "description": "Find an order."}, {"kind": "web_search"}]);
    for (policy, problem) in [
        (json!({"default": {"behavior": "eventually"}}), "`behavior` must be `blocking` or `non_blocking`"),
        (json!({"default": {"behavior": "blocking", "scheduling": "silent"}}), "applies only to `non_blocking`"),
        (json!({"overrides": {"cancel_order": {"behavior": "blocking"}}}), "names no tool of this agent"),
        (
            json!({"overrides": {"web_search": {"behavior": "non_blocking", "scheduling": "later"}}}),
            "`scheduling` must be",
        ),
        (json!({"per_tool": {}}), "field `per_tool` is not allowed"),
        (json!("non_blocking"), "must be an object"),
    ] {
        let error = t
            .post("/realtime/session/start", Some(&key), start(tools.clone(), Some(policy.clone())))
            .await
            .expect_error(422);
        assert_eq!(error["code"], "invalid_tool_config", "{policy}");
        assert!(error["message"].as_str().is_some_and(|m| m.contains(problem)), "{policy}: {error}");
    }
    assert!(recorder.sessions.lock().expect("lock").is_empty(), "no session was created");
    let policy = json!({"default": {"behavior": "non_blocking", "scheduling": "when_idle"},
        "overrides": {"lookup_order": {"behavior": "blocking"}, "web_search": {"behavior": "non_blocking", "scheduling": "silent"}}});
    let started = t.post("/realtime/session/start", Some(&key), start(tools, Some(policy.clone()))).await.expect(200);
    let id = started["session_id"].as_str().expect("id");
    let stored = t.app.store.session_config(id).await.expect("config").expect("stored");
    assert_eq!(stored["agent"]["tool_response_policy"], policy, "kept for the provider adapter");
    let sessions = recorder.sessions.lock().expect("lock");
    let setup = svc_provider_core::SessionSetup::from_resolved(&sessions[0].session);
    let silent = svc_provider_core::Policy {
        behavior: svc_provider_core::ToolBehavior::NonBlocking,
        scheduling: Some(svc_provider_core::Scheduling::Silent),
    };
    assert_eq!(setup.tool_policy.of("web_search"), silent, "the adapter gets the policy");
}
