//! xAI Grok voice (provider_c) against its oracle: the openai SDK's realtime models where xAI
//! shares OpenAI's shapes, and `tests/conformance/xai_models.py` (`extra="forbid"`, each field
//! citing docs.x.ai) for xAI's documented differences: `voice` and `turn_detection` at the top of
//! `session`, `reasoning.effort`, `audio.output.speed`, `idle_timeout_ms`, cumulative
//! `input_audio_transcription.updated`, `force_message` greetings, `ping`. The scenarios are
//! OpenAI's (openai.rs), played in xAI's dialect.

use serde_json::json;
use svc_domain::model::{ProviderBlock, ProviderCBlock, ProviderCReasoningEffort};
use svc_domain::session_config::InterruptionSensitivity;
use svc_provider_core::{ProviderEvent, SessionSetup};

use crate::fake::{PyFake, model};
use crate::openai::{
    self, assert_closed_by_svc, assert_no_errors, assistant_finals, facts, in_every_mode, lookup_tool, ready,
};

const FAMILY: &str = "xai";

fn provider_c(block: ProviderCBlock) -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderC(block)), "You are a courteous shop assistant.")
}

fn default_c() -> SessionSetup {
    provider_c(ProviderCBlock::default())
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_session_config_and_force_message_greeting() {
    let mut setup = provider_c(ProviderCBlock {
        model_id: None,
        turn_detection: None,
        silence_duration_ms: Some(500),
        prefix_padding_ms: Some(300),
        reasoning_effort: Some(ProviderCReasoningEffort::None),
        speed: Some(1.2),
        idle_timeout_ms: Some(8000),
    });
    setup.voice = Some("rex".to_owned());
    setup.interruption_sensitivity = InterruptionSensitivity::Low;
    setup.tools = vec![lookup_tool()];
    setup.greeting = Some("Welcome to the shop!".to_owned());
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, FAMILY, "config", setup.clone()).await;
        adapter.wait("the greeting's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        assert!(report["path"].as_str().unwrap_or("").ends_with("/v1/realtime?model=grok-voice-3.0"), "{mode}");
        assert_eq!(
            facts(report)["session_update"],
            json!({"type": "session.update", "session": {
                "instructions": "You are a courteous shop assistant.",
                "voice": "rex",
                "turn_detection": {"type": "server_vad", "threshold": 0.7, "silence_duration_ms": 500,
                    "prefix_padding_ms": 300, "idle_timeout_ms": 8000},
                "reasoning": {"effort": "none"},
                "audio": {
                    "input": {"format": {"type": "audio/pcm", "rate": 24000}, "transcription": {"model": "grok-transcribe"}},
                    "output": {"format": {"type": "audio/pcm", "rate": 24000}, "speed": 1.2},
                },
                "tools": [{"type": "function", "name": "lookup_order", "description": "Look up an order",
                    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}],
            }}),
            "{mode}"
        );
        assert_eq!(
            facts(report)["greeting_item"],
            json!({"type": "force_message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Welcome to the shop!"}], "interruptible": true}),
            "{mode}"
        );
        assert_eq!(assistant_finals(&events), ["Welcome to the shop!"], "{mode}: the forced line is the transcript");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_typed_turn() {
    openai::typed_turn(FAMILY, default_c(), true).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_text_only_reply_under_both_delta_names() {
    openai::text_reply(FAMILY, default_c(), true).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_audio_turn_with_cumulative_transcripts() {
    openai::audio_turn(FAMILY, default_c(), true).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_activity_end_commits_the_turn() {
    openai::activity_end(FAMILY, default_c()).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_barge_in_ten_times() {
    openai::barge_in(FAMILY, default_c(), true).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_tool_call_round_trip() {
    openai::tool_call(FAMILY, default_c(), true).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_per_turn_error_keeps_the_session() {
    openai::per_turn_error(FAMILY, default_c()).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_c_server_close_is_answered() {
    openai::server_close(FAMILY, default_c()).await;
}
