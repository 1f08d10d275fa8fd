//! xAI Grok voice (provider_c) through the real codec and driver against the fake.

mod common;

use std::time::Duration;

use common::{Harness, WAIT, model, user_frames};
use serde_json::json;
use svc_domain::model::{ProviderBlock, ProviderCBlock, ProviderCReasoningEffort};
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup, ToolDecl};
use svc_testkit::speech::correlation;
use svc_testkit::{Action, FakeUpstream, Flavor, Reply};

fn provider_c(block: ProviderCBlock) -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderC(block)), "You are Grok, a helpful voice.")
}

#[tokio::test]
async fn session_update_maps_every_knob_exactly() {
    let fake = FakeUpstream::start(Flavor::Xai).await;
    let mut setup = provider_c(ProviderCBlock {
        model_id: None,
        turn_detection: None,
        silence_duration_ms: Some(700),
        prefix_padding_ms: Some(200),
        reasoning_effort: Some(ProviderCReasoningEffort::None),
        speed: Some(1.25),
        idle_timeout_ms: Some(8000),
    });
    setup.voice = Some("ara".to_owned());
    setup.tools = vec![ToolDecl {
        name: "end_call".to_owned(),
        description: "End the call.".to_owned(),
        parameters: json!({"type": "object", "properties": {}}),
    }];
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    assert_eq!(fake.connections()[0].target, "/v1/realtime?model=grok-voice-3.0");
    let update = fake.frames("session.update").remove(0).message;
    assert_eq!(
        update,
        json!({"type": "session.update", "session": {
            "instructions": "You are Grok, a helpful voice.",
            "voice": "ara",
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 700, "prefix_padding_ms": 200, "idle_timeout_ms": 8000},
            "reasoning": {"effort": "none"},
            "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": 24000}, "transcription": {"model": "grok-transcribe"}},
                "output": {"format": {"type": "audio/pcm", "rate": 24000}, "speed": 1.25},
            },
            "tools": [{"type": "function", "name": "end_call", "description": "End the call.", "parameters": {"type": "object", "properties": {}}}],
        }})
    );
    // Defaults: reasoning high, turn detection always sent.
    let update = svc_provider::realtime::session_update(
        &provider_c(ProviderCBlock::default()),
        svc_provider::realtime::Dialect::Xai,
        "p",
    );
    assert_eq!(update["session"]["reasoning"], json!({"effort": "high"}));
    assert_eq!(update["session"]["turn_detection"], json!({"type": "server_vad"}));
    assert!(update["session"].get("voice").is_none(), "no voice chosen: the upstream picks");
}

#[tokio::test]
async fn greeting_cumulative_transcripts_usage_and_model_echo() {
    let fake = FakeUpstream::start(Flavor::Xai).await;
    fake.echo_model("grok-voice-latest");
    fake.queue([Reply::Speak("Sure thing.".to_owned())]);
    let mut setup = provider_c(ProviderCBlock::default());
    setup.greeting = Some("Hi, this is Grok.".to_owned());
    let mut h = Harness::start(setup, &fake).await;
    // The silent model fallback is reported (not fatal).
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert_eq!((error.code.as_str(), error.fatal), ("model_mismatch", false));
    h.ready().await;
    // The greeting is spoken verbatim through a force_message item, without response.create.
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Hi, this is Grok."))
        .await;
    let item = fake.frames("conversation.item.create").remove(0).message;
    assert_eq!(
        item["item"],
        json!({"type": "force_message", "role": "assistant",
        "content": [{"type": "output_text", "text": "Hi, this is Grok."}], "interruptible": true})
    );
    assert!(fake.frames("response.create").is_empty());
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    // Usage comes at the top level on xAI: mapped from there.
    let ProviderEvent::Usage(tokens) =
        h.seen.iter().find(|e| matches!(e, ProviderEvent::Usage(_))).cloned().expect("usage")
    else {
        unreachable!()
    };
    assert_eq!((tokens.input_tokens, tokens.output_tokens, tokens.total_tokens), (150, 60, 210));
    assert_eq!(tokens.input_audio_tokens + tokens.input_text_tokens + tokens.output_audio_tokens, 0);
    // Cumulative `updated` transcripts become append fragments of whole words, then the final.
    fake.act(Action::UserTurn { transcript: "what time is it".to_owned(), late_transcript: false, respond: true })
        .await;
    h.wait(|e| matches!(e, ProviderEvent::UserTranscript { is_final: true, .. })).await;
    let fragments: String = h
        .seen
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::UserTranscript { text, is_final: false, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    // The word still being heard may be corrected, so it waits for the final.
    assert_eq!(fragments, "what time is ");
    let finals: Vec<&str> = h
        .seen
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::UserTranscript { text, is_final: true, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(finals, vec!["what time is it"]);
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Sure thing.")).await;
}

#[tokio::test]
async fn rotation_reseeds_through_instructions_and_keeps_audio() {
    let fake = FakeUpstream::start(Flavor::Xai).await;
    fake.queue([Reply::Speak("Noted.".to_owned())]);
    let mut setup = provider_c(ProviderCBlock::default());
    setup.limits.rotate_after = Duration::from_millis(500);
    setup.limits.quiet_gap = Duration::from_millis(50);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("My name is Ada.".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    let mut frames = user_frames("still talking while the session turns over", 24_000);
    // The microphone keeps streaming: silence after the words ends the turn for server VAD.
    frames.extend(std::iter::repeat_n(vec![0i16; 480], 40));
    for frame in &frames {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { resumed: false })).await;
    let update = fake.wait_for(WAIT, |r| r.connection == 1 && r.message["type"] == "session.update").await.message;
    let instructions = update["session"]["instructions"].as_str().expect("instructions");
    assert!(instructions.starts_with("You are Grok, a helpful voice."));
    assert!(
        instructions.contains("User: My name is Ada.") && instructions.contains("Assistant: Noted."),
        "{instructions}"
    );
    // xAI bills items: no reseed items on the new session.
    h.drain_for(Duration::from_millis(100)).await;
    assert!(!fake.received().iter().any(|r| r.connection >= 1 && r.message["type"] == "conversation.item.create"));
    let total: Vec<i16> = fake.audio().concat();
    let expected = frames.concat();
    assert_eq!(total.len(), expected.len());
    assert!(correlation(&total, &expected) > 0.999);
}

#[tokio::test]
async fn barge_in_tools_and_errors() {
    use svc_provider_core::{Policy, Scheduling, ToolBehavior};
    let fake = FakeUpstream::start(Flavor::Xai).await;
    fake.set_speedup(1);
    fake.queue([Reply::Speak("Here is a rather long answer that will be cut off by the caller soon.".to_owned())]);
    let mut setup = provider_c(ProviderCBlock::default());
    setup.tools = vec![
        ToolDecl {
            name: "lookup_order".to_owned(),
            description: "Find".to_owned(),
            parameters: json!({"type": "object", "properties": {}}),
        },
        ToolDecl {
            name: "send_email".to_owned(),
            description: "Mail".to_owned(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ];
    setup.tool_policy.overrides.insert(
        "send_email".to_owned(),
        Policy { behavior: ToolBehavior::NonBlocking, scheduling: Some(Scheduling::WhenIdle) },
    );
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    // Barge-in: truncated at the played position (clamped), heard text final.
    h.send(ProviderInput::Text("talk".to_owned())).await;
    while h.audio_samples().len() < 24 * 300 {
        h.wait(|e| matches!(e, ProviderEvent::AssistantAudio { .. })).await;
    }
    fake.act(Action::UserTurn { transcript: "wait".to_owned(), late_transcript: false, respond: false }).await;
    h.wait(|e| matches!(e, ProviderEvent::Interrupted)).await;
    h.send(ProviderInput::BargeIn { played_ms: 120 }).await;
    let truncate = fake.wait_for(WAIT, |r| r.message["type"] == "conversation.item.truncate").await.message;
    assert_eq!(truncate["audio_end_ms"], 120);
    fake.set_speedup(8);

    // Blocking tool, then a background one answered at once.
    fake.queue([
        Reply::ToolCall { name: "lookup_order".to_owned(), arguments: json!({"id": 1}) },
        Reply::Speak("Found it.".to_owned()),
        Reply::ToolCall { name: "send_email".to_owned(), arguments: json!({}) },
        Reply::Speak("Sending now.".to_owned()),
        Reply::Speak("The email went out.".to_owned()),
    ]);
    h.send(ProviderInput::Text("find order 1".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, .. } = h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await else {
        unreachable!()
    };
    h.send(ProviderInput::ToolResult { call_id, output: json!({"ok": true}), is_error: false, scheduling: None }).await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Found it.")).await;
    h.send(ProviderInput::Text("email me".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, name, .. } = h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await
    else {
        unreachable!()
    };
    assert_eq!(name, "send_email");
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Sending now."))
        .await;
    h.send(ProviderInput::ToolResult { call_id, output: json!("sent"), is_error: false, scheduling: None }).await;
    h.wait(
        |e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "The email went out."),
    )
    .await;
    let outputs = fake
        .frames("conversation.item.create")
        .iter()
        .filter(|r| r.message["item"]["type"] == "function_call_output")
        .count();
    assert_eq!(outputs, 2, "each call answered upstream exactly once");

    // Per-turn error, then a fatal one.
    fake.act(Action::Error { code: "invalid_value".to_owned(), message: "bad".to_owned() }).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(!error.fatal);
    fake.act(Action::Error { code: "invalid_api_key".to_owned(), message: "revoked".to_owned() }).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(error.fatal);
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;
}
