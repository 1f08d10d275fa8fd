//! GPT-Live (provider_b_live) against the openai SDK oracle (`tests/conformance/live_server.py`):
//! every command svc sends is validated by `openai.types.live`'s models (strict: `session.start`
//! refuses unknown fields as the service does), every server event is built by them, and the
//! nested Responses stream of `responses` delegation by `openai.types.responses`.

use std::time::Duration;

use serde_json::{Value, json};
use svc_domain::model::{
    Delegation, ProviderBLiveBlock, ProviderBlock, ReasoningEffort, ServiceTier, ToolChoice, Verbosity,
};
use svc_provider::codec::heard_text;
use svc_provider_core::{
    AppendChannel, ProviderEvent, ProviderInput, ResponseStatus, Role, SessionSetup, TranscriptTurn,
};
use svc_wire::rest::UsageTokens;

use crate::fake::{Adapter, PyFake, model};
use crate::openai::{
    self, RATE_HZ, assert_closed_by_svc, assert_no_errors, assistant_finals, facts, in_every_mode, last_usage,
    lookup_tool, ready, user_finals, user_tone,
};

const FAMILY: &str = "live";
const INSTRUCTIONS: &str = "You are a courteous shop assistant.";

fn live(block: ProviderBLiveBlock) -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderBLive(block)), INSTRUCTIONS)
}

fn client_delegation() -> SessionSetup {
    live(ProviderBLiveBlock { delegation: Some(Delegation::Client), ..ProviderBLiveBlock::default() })
}

/// What the model spoke (`LiveServer.speak`): transcript and samples, in order.
fn spoken(report: &Value) -> Vec<Value> {
    facts(report).get("spoken").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn text_of(value: &Value) -> String {
    value.as_str().unwrap_or("?").trim().to_owned()
}

/// An awaited event: what it is called in a failure, and how it is recognised.
type Awaited<'a> = (&'a str, fn(&ProviderEvent) -> bool);

/// Waits until every one of `whats` has been seen, in any order (GPT-Live derives turn ends
/// from timing, so a user turn's end and the reply's may come either way round).
async fn wait_all(adapter: &mut Adapter, whats: &[Awaited<'_>]) {
    let mut missing: Vec<usize> = (0..whats.len()).filter(|&i| !adapter.seen.iter().any(whats[i].1)).collect();
    while let Some(&first) = missing.first() {
        let event = adapter.wait(whats[first].0, |e| missing.iter().any(|&i| whats[i].1(e))).await;
        missing.retain(|&i| !whats[i].1(&event));
    }
}

/// The nested backend usages summed, mapped as providers.md §4.8 says: the backend is a text
/// model, so text counts are the totals and audio/image are 0.
fn backend_usage(report: &Value) -> UsageTokens {
    let mut total = UsageTokens::default();
    for usage in facts(report)["backend_usage"].as_array().into_iter().flatten() {
        let n = |pointer: &str| usage.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
        total.input_tokens += n("/input_tokens");
        total.input_text_tokens += n("/input_tokens");
        total.output_tokens += n("/output_tokens");
        total.output_text_tokens += n("/output_tokens");
        total.total_tokens += n("/total_tokens");
        total.input_cached_tokens += n("/input_tokens_details/cached_tokens");
    }
    total
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_strict_session_start() {
    let mut setup = live(ProviderBLiveBlock {
        responses_model: Some("gpt-5.6-terra".to_owned()),
        reasoning_effort: Some(ReasoningEffort::Medium),
        verbosity: Some(Verbosity::Low),
        tool_choice: Some(ToolChoice::Auto),
        parallel_tool_calls: Some(true),
        max_output_tokens: Some(2048),
        service_tier: Some(ServiceTier::Priority),
        ..ProviderBLiveBlock::default()
    });
    setup.voice = Some("cedar".to_owned());
    setup.tools = vec![lookup_tool()];
    setup.history = vec![
        TranscriptTurn { role: Role::User, text: "Where is my order?".to_owned() },
        TranscriptTurn { role: Role::Assistant, text: "Let me check.".to_owned() },
    ];
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let adapter = ready(&fake, FAMILY, "config", setup.clone()).await;
        assert_no_errors(mode, &adapter);
        adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        assert!(
            report["path"].as_str().unwrap_or("").ends_with("/v1/live/sessions"),
            "{mode}: the model is not in the URL"
        );
        assert_eq!(
            facts(report)["session_start"],
            json!({"type": "session.start", "event_id": "svc_start_1", "session": {
                "model": "gpt-live-1",
                "instructions": INSTRUCTIONS,
                "audio": {"format": {"type": "audio/pcm", "rate": 24000}, "output": {"voice": "cedar"}},
                "delegation": {"type": "responses", "responses": {
                    "model": "gpt-5.6-terra",
                    "instructions": INSTRUCTIONS,
                    "reasoning": {"effort": "medium"},
                    "text": {"verbosity": "low"},
                    "tool_choice": "auto",
                    "parallel_tool_calls": true,
                    "max_output_tokens": 2048,
                    "service_tier": "priority",
                    "tools": [{"type": "function", "name": "lookup_order", "description": "Look up an order",
                        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}],
                }},
                "input": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is my order?"}]},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
                ],
            }}),
            "{mode}"
        );
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_typed_turn() {
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, FAMILY, "typed_turn", live(ProviderBLiveBlock::default())).await;
        adapter.send(ProviderInput::Text("Where is my order 42?".to_owned())).await;
        adapter.wait("the reply's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        // The stream goes on after the energy gate ended the reply: the rest of its silence
        // follows at once, and every sample sent must reach the room.
        adapter.drain_for(Duration::from_millis(300)).await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let samples = openai::adapter_audio(&events);
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        assert_eq!(
            facts(report)["appends"],
            json!([{"type": "session.commentary.append", "delegation_id": null,
                "content": "Reply to the caller now. The caller typed: Where is my order 42?"}]),
            "{mode}"
        );
        let reply = &spoken(report)[0];
        assert_eq!(assistant_finals(&events), [text_of(&reply["transcript"])], "{mode}");
        assert_eq!(samples as u64, reply["samples"].as_u64().unwrap_or(0), "{mode}: reply audio, silence included");
        assert!(events.contains(&ProviderEvent::ResponseDone { status: ResponseStatus::Completed }), "{mode}");
        assert_eq!(last_usage(&events), None, "{mode}: the voice model reports seconds, not tokens");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_audio_turn() {
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, FAMILY, "audio_turn", live(ProviderBLiveBlock::default())).await;
        for frame in user_tone(1200, 1000.0) {
            adapter.send(ProviderInput::NativeAudio(frame)).await;
        }
        adapter.send(ProviderInput::Mute(true)).await;
        adapter.send(ProviderInput::Mute(false)).await;
        wait_all(
            &mut adapter,
            &[
                ("the user's final transcript", |e| matches!(e, ProviderEvent::UserTranscript { is_final: true, .. })),
                ("the reply's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })),
            ],
        )
        .await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        assert_eq!(user_finals(&events), [text_of(&facts(report)["user_said"][0])], "{mode}");
        assert_eq!(assistant_finals(&events), [text_of(&spoken(report)[0]["transcript"])], "{mode}");
        let samples = facts(report)["input_samples"].as_u64().unwrap_or(0);
        assert!((27_800..=28_800).contains(&samples), "{mode}: {samples} input samples appended");
        let hz = facts(report)["input_tone_hz"].as_f64().unwrap_or(0.0);
        assert!((hz - 1000.0).abs() < 30.0, "{mode}: the 1 kHz tone reads as {hz} Hz at the session's 24 kHz");
        let sent = &facts(report)["events_sent"];
        assert_eq!(
            (sent["session.input_audio.muted"].as_u64(), sent["session.input_audio.unmuted"].as_u64()),
            (Some(1), Some(1)),
            "{mode}: mute and unmute commands"
        );
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_barge_in_ten_times() {
    const BARGE_INS: u64 = 10;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, FAMILY, "barge_in", live(ProviderBLiveBlock::default())).await;
        adapter.send(ProviderInput::Text("Tell me about my order.".to_owned())).await;
        let (mut interrupts, mut received, mut text) = (0u64, 0u64, String::new());
        let mut heard = Vec::new();
        loop {
            match adapter.wait("the next event of the barge-ins", |_| true).await {
                ProviderEvent::ResponseStarted => (received, text) = (0, String::new()),
                ProviderEvent::AssistantAudio { pcm, .. } => received += pcm.len() as u64,
                ProviderEvent::AssistantTranscript { text: fragment, is_final: false } => text.push_str(&fragment),
                ProviderEvent::Interrupted => {
                    interrupts += 1;
                    let received_ms = received * 1000 / RATE_HZ;
                    let played = received_ms * (25 + 5 * interrupts) / 100;
                    adapter.send(ProviderInput::BargeIn { played_ms: played }).await;
                    heard.push(heard_text(&text, played, received_ms));
                }
                ProviderEvent::ResponseDone { status: ResponseStatus::Completed } if interrupts == BARGE_INS => break,
                _ => {}
            }
        }
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        let replies = spoken(report);
        let mut expected = heard;
        expected.push(text_of(&replies[replies.len() - 1]["transcript"]));
        let truncated: Vec<&ProviderEvent> =
            events.iter().filter(|e| matches!(e, ProviderEvent::AssistantTruncated { .. })).collect();
        assert_eq!(
            assistant_finals(&events),
            expected,
            "{mode}: each cut reply's final transcript must be the heard share (later corrections: {truncated:#?})"
        );
        let cancelled =
            events.iter().filter(|e| **e == ProviderEvent::ResponseDone { status: ResponseStatus::Cancelled });
        assert_eq!(cancelled.count() as u64, BARGE_INS, "{mode}: every cut reply ends cancelled");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_responses_delegation_tool_call() {
    let mut setup = live(ProviderBLiveBlock::default());
    setup.tools = vec![lookup_tool()];
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, FAMILY, "tool_call", setup.clone()).await;
        adapter.send(ProviderInput::Text("Where is order 42?".to_owned())).await;
        let call = adapter.wait("the backend's tool call", |e| matches!(e, ProviderEvent::ToolCall { .. })).await;
        let ProviderEvent::ToolCall { call_id, name, arguments } = call else { unreachable!("matched above") };
        assert_eq!((name.as_str(), &arguments), ("lookup_order", &json!({"order_id": "42"})), "{mode}");
        let output = json!({"status": "shipped"});
        adapter
            .send(ProviderInput::ToolResult { call_id: call_id.clone(), output, is_error: false, scheduling: None })
            .await;
        adapter.wait("the spoken answer's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        assert_eq!(
            facts(report)["tool_outputs"],
            json!([{"type": "function_call_output", "call_id": call_id, "output": "{\"status\":\"shipped\"}"}]),
            "{mode}"
        );
        let backend_text: String = events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ModelText { text, is_final: false, thought: false } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(backend_text, "Order 42 shipped on Friday.", "{mode}: the backend's text");
        assert_eq!(last_usage(&events), Some(backend_usage(report)), "{mode}: the backend's tokens");
        assert_eq!(assistant_finals(&events), ["Your order shipped on Friday."], "{mode}");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_client_delegation() {
    let summary = "This is sentence number one of the calendar summary for tomorrow. ".repeat(62);
    assert!(summary.len() <= 4096, "a delegation-append holds at most 4,096 characters");
    let summary = &summary;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, FAMILY, "client_delegation", client_delegation()).await;
        adapter.send(ProviderInput::Text("Do I have meetings tomorrow?".to_owned())).await;
        let created = adapter.wait("the delegation", |e| matches!(e, ProviderEvent::DelegationCreated { .. })).await;
        let ProviderEvent::DelegationCreated { delegation_id, transcript } = created else { unreachable!("matched") };
        assert_eq!(transcript, "Do I have meetings tomorrow?", "{mode}: the prompting turn");
        let appends = [
            (Some(delegation_id.clone()), AppendChannel::Thinking, "Checking your calendar.".to_owned()),
            (Some(delegation_id.clone()), AppendChannel::Commentary, summary.clone()),
            (None, AppendChannel::Instructions, "Keep answers short.".to_owned()),
        ];
        for (id, channel, content) in appends {
            adapter.send(ProviderInput::DelegationAppend { delegation_id: id, channel, content }).await;
        }
        adapter.wait("the spoken answer's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        assert_no_errors(mode, &adapter);
        adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        assert_eq!(facts(report)["delegation_id"].as_str(), Some(delegation_id.as_str()), "{mode}");
        assert_eq!(facts(report)["session_start"]["session"]["delegation"], json!({"type": "client"}), "{mode}");
        let appends = facts(report)["appends"].as_array().cloned().unwrap_or_default();
        let kinds: Vec<(&str, Option<&str>)> =
            appends.iter().map(|a| (a["type"].as_str().unwrap_or("?"), a["delegation_id"].as_str())).collect();
        let pieces = kinds.len() - 3;
        assert!(pieces > 1, "{mode}: {} characters need several appends under the 500-token cap", summary.len());
        let mut expected =
            vec![("session.commentary.append", None), ("session.thinking.append", Some(delegation_id.as_str()))];
        expected.extend(std::iter::repeat_n(("session.commentary.append", Some(delegation_id.as_str())), pieces));
        expected.push(("session.instructions.append", None));
        assert_eq!(kinds, expected, "{mode}");
        let rejoined: Vec<&str> = appends[2..2 + pieces]
            .iter()
            .flat_map(|a| a["content"].as_str().unwrap_or("").split_whitespace())
            .collect();
        assert_eq!(rejoined, summary.split_whitespace().collect::<Vec<_>>(), "{mode}: the pieces rejoin to the text");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_per_turn_error_keeps_the_session() {
    openai::per_turn_error(FAMILY, live(ProviderBLiveBlock::default())).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_fatal_error_ends_the_session() {
    openai::fatal_error(FAMILY, live(ProviderBLiveBlock::default())).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_live_server_close_is_answered() {
    openai::server_close(FAMILY, live(ProviderBLiveBlock::default())).await;
}
