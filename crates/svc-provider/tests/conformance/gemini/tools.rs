//! Tool calls: blocking, non-blocking with scheduling, and cancelled.

use serde_json::{Value, json};
use svc_domain::model::ProviderABlock;
use svc_provider_core::{Policy, ProviderEvent, ProviderInput, Scheduling, ToolBehavior};

use super::{Run, count, has, in_every_mode, is_assistant_final, native_frames, provider_a, text, tool};
use crate::fake::{Mode, PyFake};

/// A spoken user turn under svc_vad.
async fn user_turn(run: &Run) {
    run.send(ProviderInput::ActivityStart).await;
    run.send_all(native_frames(1, 10)).await;
    run.send(ProviderInput::ActivityEnd).await;
}

/// The `ToolCall` events, as the fake's `tool_calls` facts spell them.
fn calls(events: &[ProviderEvent]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::ToolCall { call_id, name, arguments } => {
                Some(json!({"id": call_id, "name": name, "args": arguments}))
            }
            _ => None,
        })
        .collect()
}

fn call_id(events: &[ProviderEvent], index: usize) -> String {
    calls(events).get(index).map(|call| text(&call["id"])).unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn a_blocking_call_is_answered_once_with_its_id_and_name() {
    // 3.1 takes no `behavior` (sync calls only); 3.8 is told BLOCKING (its default is NON_BLOCKING).
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let fake = blocking(fake, "gemini-3.1-flash-live-preview", Value::Null).await;
        blocking(fake, "gemini-3.8-live", json!("BLOCKING")).await.stop().await;
    })
    .await;
}

async fn blocking(fake: PyFake, model_id: &str, declared: Value) -> PyFake {
    let mode = fake.mode;
    let mut setup = provider_a(ProviderABlock { model_id: Some(model_id.to_owned()), ..ProviderABlock::default() });
    setup.tools = vec![tool("lookup_order", "Find an order by its id.")];
    let mut run = Run::on(fake, "tool_blocking", setup);
    run.ready().await;
    user_turn(&run).await;
    run.until("the tool call", |seen| has(seen, |e| matches!(e, ProviderEvent::ToolCall { .. }))).await;
    let id = call_id(&run.adapter.seen, 0);
    let output = json!({"status": "shipped", "carrier": "DHL"});
    run.send(ProviderInput::ToolResult { call_id: id, output: output.clone(), is_error: false, scheduling: None })
        .await;
    run.until("the answer after the tool", |seen| has(seen, is_assistant_final)).await;
    let (done, fake) = run.finish_keeping_the_fake(1).await;
    let facts = done.facts(0);
    assert_eq!(facts["declared_behaviors"], json!({"lookup_order": declared}), "{mode} {model_id}");
    assert_eq!(Value::Array(calls(&done.seen)), facts["tool_calls"], "{mode} {model_id}");
    let response = json!([{"id": "call-1", "name": "lookup_order", "response": {"output": output}}]);
    assert_eq!(facts["tool_responses"], response, "{mode} {model_id}");
    assert_eq!(done.assistant_finals(), [text(&done.turns(0)[0]["transcript"])], "{mode} {model_id}");
    assert_eq!(done.errors(), [], "{mode} {model_id}");
    done.assert_closed_normally(0);
    fake
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn non_blocking_calls_are_declared_and_answered_with_their_scheduling() {
    in_every_mode(non_blocking).await;
}

async fn non_blocking(mode: Mode) {
    // gemini-3.8-live takes background (NON_BLOCKING) calls.
    let mut setup = provider_a(ProviderABlock::default());
    assert!(setup.model.background_tools, "the catalog's default Gemini model takes background tools");
    setup.tools = vec![tool("start_job", "Start a background job."), tool("lookup_order", "Find an order.")];
    setup
        .tool_policy
        .overrides
        .insert("start_job".to_owned(), Policy { behavior: ToolBehavior::NonBlocking, scheduling: None });
    let mut run = Run::start(mode, "tool_non_blocking", setup).await;
    run.ready().await;
    user_turn(&run).await;
    // The model keeps talking after a NON_BLOCKING call: its reply ends before the result.
    run.until("the call and the reply that goes on", |seen| {
        has(seen, |e| matches!(e, ProviderEvent::ToolCall { .. })) && has(seen, is_assistant_final)
    })
    .await;
    let first = call_id(&run.adapter.seen, 0);
    let report = json!({"report": "ready"});
    let silent = Some(Scheduling::Silent);
    run.send(ProviderInput::ToolResult { call_id: first, output: report.clone(), is_error: false, scheduling: silent })
        .await;
    run.until("the second call", |seen| count(seen, |e| matches!(e, ProviderEvent::ToolCall { .. })) >= 2).await;
    let second = call_id(&run.adapter.seen, 1);
    // No scheduling given: svc uses the policy's default, WHEN_IDLE (also the service's default).
    let invoice = json!({"invoice": 42});
    run.send(ProviderInput::ToolResult { call_id: second, output: invoice.clone(), is_error: false, scheduling: None })
        .await;
    run.until("the closing reply", |seen| count(seen, is_assistant_final) >= 2).await;
    let done = run.finish(1).await;
    let facts = done.facts(0);
    let declared = json!({"start_job": "NON_BLOCKING", "lookup_order": "BLOCKING"});
    assert_eq!(facts["declared_behaviors"], declared, "{mode}");
    assert_eq!(Value::Array(calls(&done.seen)), facts["tool_calls"], "{mode}");
    let responses = json!([
        {"id": "job-1", "name": "start_job", "response": {"output": report}, "scheduling": "SILENT"},
        {"id": "job-2", "name": "start_job", "response": {"output": invoice}, "scheduling": "WHEN_IDLE"},
    ]);
    assert_eq!(facts["tool_responses"], responses, "{mode}");
    let sent: Vec<String> = done.turns(0).iter().map(|turn| text(&turn["transcript"])).collect();
    assert_eq!(done.assistant_finals(), sent, "{mode}");
    assert_eq!(done.errors(), [], "{mode}");
    done.assert_closed_normally(0);
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn a_cancelled_call_gets_no_response() {
    in_every_mode(cancelled).await;
}

async fn cancelled(mode: Mode) {
    let mut setup = provider_a(ProviderABlock::default());
    setup.tools = vec![tool("lookup_order", "Find an order by its id.")];
    let mut run = Run::start(mode, "tool_cancelled", setup).await;
    run.ready().await;
    user_turn(&run).await;
    run.until("the call and its cancellation", |seen| {
        has(seen, |e| matches!(e, ProviderEvent::ToolCall { .. }))
            && has(seen, |e| matches!(e, ProviderEvent::ToolCallsCancelled { .. }))
    })
    .await;
    let cancelled_id = call_id(&run.adapter.seen, 0);
    // The runtime's result comes in late: svc must drop it.
    let late = ProviderInput::ToolResult {
        call_id: cancelled_id.clone(),
        output: json!("late"),
        is_error: false,
        scheduling: None,
    };
    run.send(late).await;
    user_turn(&run).await;
    run.until("the next call", |seen| count(seen, |e| matches!(e, ProviderEvent::ToolCall { .. })) >= 2).await;
    let next = call_id(&run.adapter.seen, 1);
    let output = json!({"status": "packed"});
    run.send(ProviderInput::ToolResult {
        call_id: next.clone(),
        output: output.clone(),
        is_error: false,
        scheduling: None,
    })
    .await;
    run.until("the answer", |seen| has(seen, is_assistant_final)).await;
    let done = run.finish(1).await;
    let facts = done.facts(0);
    assert_eq!(Value::Array(calls(&done.seen)), facts["tool_calls"], "{mode}");
    let cancellations: Vec<&ProviderEvent> =
        done.seen.iter().filter(|e| matches!(e, ProviderEvent::ToolCallsCancelled { .. })).collect();
    assert_eq!(cancellations, [&ProviderEvent::ToolCallsCancelled { call_ids: vec![cancelled_id] }], "{mode}");
    assert_eq!(facts["declared_behaviors"], json!({"lookup_order": "BLOCKING"}), "{mode}");
    let responses = json!([{"id": next, "name": "lookup_order", "response": {"output": output}}]);
    assert_eq!(facts["tool_responses"], responses, "{mode}");
    // The late result is dropped with a non-fatal error, never sent.
    let errors = done.errors();
    assert!(errors.len() == 1 && !errors[0].fatal && errors[0].code == "unknown_tool_call", "{mode}: {errors:?}");
    done.assert_closed_normally(0);
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn the_session_configs_tool_response_policy_reaches_the_wire() {
    in_every_mode(policy_from_the_session_config).await;
}

/// The same conversation as [`non_blocking`], but the policy comes from a session start's
/// `agent.tool_response_policy` through resolution (`SessionSetup::from_resolved`): the session
/// default and the per-tool overrides are the declarations' `behavior`, and the policy's
/// scheduling is the response's when the result names none.
async fn policy_from_the_session_config(mode: Mode) {
    use svc_domain::session_config::parse_start;
    use svc_domain::start::{CatalogLookup, StartContext, resolve_start};
    use svc_domain::tools::ServerToolAvailability;
    let parameters = json!({"type": "object", "properties": {"order_id": {"type": "string"}}});
    let body = json!({"sdk": {"name": "conformance", "version": "1.0.0"}, "agent": {"type": "inline",
        "model": "provider_a", "instructions": "You are a travel agent.",
        "tools": [
            {"kind": "client", "name": "start_job", "description": "Start a background job.", "parameters": parameters},
            {"kind": "client", "name": "lookup_order", "description": "Find an order.", "parameters": parameters}],
        "tool_response_policy": {"default": {"behavior": "blocking"},
            "overrides": {"start_job": {"behavior": "non_blocking", "scheduling": "silent"}}}}});
    let tools = ServerToolAvailability::default();
    let context = StartContext {
        catalog: svc_domain::model::ModelCatalog::embedded(),
        server_tools: &tools,
        caller_has_resources_read: false,
        consents: svc_domain::settings::RecordingConsents::default(),
        avatar_enabled: false,
        server_max_session_seconds: None,
    };
    let request = parse_start(&body, None).expect("a valid start");
    let resolved = resolve_start(request, CatalogLookup::NotApplicable, &context).expect("resolves");
    let setup = svc_provider_core::SessionSetup::from_resolved(&resolved);
    assert!(setup.model.background_tools, "the catalog's default Gemini model takes background tools");
    let mut run = Run::start(mode, "tool_non_blocking", setup).await;
    run.ready().await;
    user_turn(&run).await;
    run.until("the call and the reply that goes on", |seen| {
        has(seen, |e| matches!(e, ProviderEvent::ToolCall { .. })) && has(seen, is_assistant_final)
    })
    .await;
    // No scheduling on the result: the policy's (`silent`) goes on the wire.
    let first = call_id(&run.adapter.seen, 0);
    let report = json!({"report": "ready"});
    run.send(ProviderInput::ToolResult { call_id: first, output: report.clone(), is_error: false, scheduling: None })
        .await;
    run.until("the second call", |seen| count(seen, |e| matches!(e, ProviderEvent::ToolCall { .. })) >= 2).await;
    let second = call_id(&run.adapter.seen, 1);
    let invoice = json!({"invoice": 42});
    let when_idle = Some(Scheduling::WhenIdle);
    run.send(ProviderInput::ToolResult {
        call_id: second,
        output: invoice.clone(),
        is_error: false,
        scheduling: when_idle,
    })
    .await;
    run.until("the closing reply", |seen| count(seen, is_assistant_final) >= 2).await;
    let done = run.finish(1).await;
    let facts = done.facts(0);
    let declared = json!({"start_job": "NON_BLOCKING", "lookup_order": "BLOCKING"});
    assert_eq!(facts["declared_behaviors"], declared, "{mode}");
    let responses = json!([
        {"id": "job-1", "name": "start_job", "response": {"output": report}, "scheduling": "SILENT"},
        {"id": "job-2", "name": "start_job", "response": {"output": invoice}, "scheduling": "WHEN_IDLE"},
    ]);
    assert_eq!(facts["tool_responses"], responses, "{mode}");
    assert_eq!(done.errors(), [], "{mode}");
    done.assert_closed_normally(0);
}
