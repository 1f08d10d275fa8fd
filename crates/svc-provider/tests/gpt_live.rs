//! OpenAI GPT-Live (provider_b_live) through the real codec and driver against the fake,
//! including all three delegation modes (`svc` calls the fake's Responses API over HTTP).

mod common;

use std::time::Duration;

use common::{Harness, WAIT, model, user_frames};
use serde_json::json;
use svc_domain::model::{
    Delegation, ProviderBLiveBlock, ProviderBlock, ReasoningEffort, ServiceTier, ToolChoice, Verbosity,
};
use svc_provider_core::{AppendChannel, ProviderEvent, ProviderInput, SessionSetup, ToolDecl};
use svc_testkit::speech::{correlation, speech};
use svc_testkit::{Action, FakeUpstream, Flavor, Reply};

fn live(block: ProviderBLiveBlock) -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderBLive(block)), "You are a friendly concierge.")
}

#[tokio::test]
async fn session_start_maps_every_knob_exactly() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut setup = live(ProviderBLiveBlock {
        model_id: Some("gpt-live-1.1".to_owned()),
        responses_model: Some("gpt-5.6-terra".to_owned()),
        responses_instructions: Some("Answer precisely.".to_owned()),
        reasoning_effort: Some(ReasoningEffort::High),
        verbosity: Some(Verbosity::Low),
        tool_choice: Some(ToolChoice::Required),
        parallel_tool_calls: Some(false),
        max_output_tokens: Some(2048),
        service_tier: Some(ServiceTier::Priority),
        delegation: None,
    });
    setup.voice = Some("cedar".to_owned());
    setup.tools = vec![ToolDecl {
        name: "lookup_order".to_owned(),
        description: "Look up".to_owned(),
        parameters: json!({"type": "object", "properties": {}}),
    }];
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    assert_eq!(fake.connections()[0].target, "/v1/live/sessions", "the model is never in the URL");
    let start = fake.frames("session.start").remove(0).message;
    assert_eq!(start["event_id"], "svc_start_1");
    assert_eq!(
        start["session"],
        json!({
            "model": "gpt-live-1.1",
            "instructions": "You are a friendly concierge.",
            "audio": {"format": {"type": "audio/pcm", "rate": 24000}, "output": {"voice": "cedar"}},
            "delegation": {"type": "responses", "responses": {
                "model": "gpt-5.6-terra",
                "instructions": "Answer precisely.",
                "reasoning": {"effort": "high"},
                "text": {"verbosity": "low"},
                "tool_choice": "required",
                "parallel_tool_calls": false,
                "max_output_tokens": 2048,
                "service_tier": "priority",
                "tools": [{"type": "function", "name": "lookup_order", "description": "Look up", "parameters": {"type": "object", "properties": {}}}],
            }},
        })
    );
    // Defaults: the catalog's backend model, the agent's instructions for the backend.
    let default = svc_provider::gpt_live::session_start(&live(ProviderBLiveBlock::default()), &[], "e");
    assert_eq!(
        default["session"]["delegation"],
        json!({"type": "responses", "responses": {
        "model": "gpt-5.6-luna", "instructions": "You are a friendly concierge."}})
    );
    // No voice chosen: the upstream picks (the spec's default), so none is sent.
    assert_eq!(default["session"]["audio"], json!({"format": {"type": "audio/pcm", "rate": 24000}}));
    // Instructions beyond the live model's cap are cut for it, at a sentence end; the backend
    // still gets them whole.
    let long = "Always be precise about dates. ".repeat(3_000);
    let mut big = live(ProviderBLiveBlock::default());
    big.instructions = long.clone();
    let start = svc_provider::gpt_live::session_start(&big, &[], "e");
    let cut = start["session"]["instructions"].as_str().expect("instructions");
    assert!(cut.len() < long.len() && long.starts_with(cut) && cut.ends_with('.'));
    assert!(svc_provider::codec::estimate_tokens(cut) <= svc_provider::gpt_live::INSTRUCTIONS_MAX_TOKENS);
    assert_eq!(start["session"]["delegation"]["responses"]["instructions"], long.as_str());
    for mode in [Delegation::Client, Delegation::Svc] {
        let setup = live(ProviderBLiveBlock { delegation: Some(mode), ..ProviderBLiveBlock::default() });
        let start = svc_provider::gpt_live::session_start(&setup, &[], "e");
        assert_eq!(start["session"]["delegation"], json!({"type": "client"}), "{mode}");
    }
}

#[tokio::test]
async fn full_duplex_turn_from_transcript_timing_and_energy() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let reply = "Your table is booked for eight.";
    fake.queue([Reply::Speak(reply.to_owned())]);
    let mut setup = live(ProviderBLiveBlock::default());
    setup.limits.turn_gap = Duration::from_millis(300);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    let frames = user_frames("book a table", 24_000);
    for frame in &frames {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
    }
    fake.act(Action::UserTurn {
        transcript: "Book a table for eight.".to_owned(),
        late_transcript: false,
        respond: true,
    })
    .await;
    let ProviderEvent::UserTranscript { text, .. } =
        h.wait(|e| matches!(e, ProviderEvent::UserTranscript { is_final: true, .. })).await
    else {
        unreachable!()
    };
    assert_eq!(text, "Book a table for eight.");
    let ProviderEvent::AssistantTranscript { text, .. } =
        h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { is_final: true, .. })).await
    else {
        unreachable!()
    };
    assert_eq!(text, reply);
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    let started = h.seen.iter().position(|e| matches!(e, ProviderEvent::ResponseStarted)).expect("energy gate opened");
    let first_audio = h.seen.iter().position(|e| matches!(e, ProviderEvent::AssistantAudio { .. })).expect("audio");
    assert!(started <= first_audio);
    let audio = h.audio_samples();
    let voiced = speech(reply, 24_000);
    assert!(audio.len() > voiced.len(), "the stream includes trailing silence");
    assert!(correlation(&audio[..voiced.len()], &voiced) > 0.999);
    let expected = frames.concat();
    assert_eq!(fake.audio()[0].len(), expected.len());
}

#[tokio::test]
async fn responses_delegation_tool_round_trip_waits_for_every_output() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut h = Harness::start(live(ProviderBLiveBlock::default()), &fake).await;
    h.ready().await;
    fake.act(Action::Delegate {
        target: "responses".to_owned(),
        tool: Some(("lookup_order".to_owned(), json!({"order_id": "9"}))),
        answer: "Order nine ships tomorrow.".to_owned(),
    })
    .await;
    let ProviderEvent::ToolCall { call_id, name, arguments } =
        h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await
    else {
        unreachable!()
    };
    assert_eq!((name.as_str(), arguments), ("lookup_order", json!({"order_id": "9"})));
    h.send(ProviderInput::ToolResult {
        call_id: call_id.clone(),
        output: json!({"eta": "tomorrow"}),
        is_error: false,
        scheduling: None,
    })
    .await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Order nine ships tomorrow.")).await;
    let output = fake.frames("response.item.create").remove(0).message;
    assert_eq!(
        output["item"],
        json!({"type": "function_call_output", "call_id": call_id, "output": "{\"eta\":\"tomorrow\"}"})
    );
    assert_eq!(fake.frames("response.create").len(), 1, "exactly one continuation, after the output");
    assert!(h.errors().is_empty(), "no function_call_outputs_required: {:?}", h.errors());
    // Backend usage (two backend responses) on the nine fields.
    let ProviderEvent::Usage(tokens) =
        h.seen.iter().rev().find(|e| matches!(e, ProviderEvent::Usage(_))).cloned().expect("usage")
    else {
        unreachable!()
    };
    assert_eq!((tokens.input_tokens, tokens.input_text_tokens, tokens.input_cached_tokens), (300, 300, 128));
    assert_eq!((tokens.output_tokens, tokens.output_text_tokens, tokens.total_tokens), (120, 120, 420));
    assert_eq!(tokens.input_audio_tokens + tokens.output_audio_tokens, 0);
}

#[tokio::test]
async fn client_delegation_emits_created_and_splits_long_appends() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut setup = live(ProviderBLiveBlock { delegation: Some(Delegation::Client), ..ProviderBLiveBlock::default() });
    setup.limits.turn_gap = Duration::from_millis(5_000);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    fake.act(Action::UserTurn {
        transcript: "Do I have meetings tomorrow?".to_owned(),
        late_transcript: false,
        respond: false,
    })
    .await;
    h.wait(|e| matches!(e, ProviderEvent::UserTranscript { is_final: false, text, .. } if text == "tomorrow?")).await;
    fake.act(Action::Delegate { target: "client".to_owned(), tool: None, answer: String::new() }).await;
    let ProviderEvent::DelegationCreated { delegation_id, transcript } =
        h.wait(|e| matches!(e, ProviderEvent::DelegationCreated { .. })).await
    else {
        unreachable!()
    };
    assert_eq!(transcript, "Do I have meetings tomorrow?");
    h.send(ProviderInput::DelegationAppend {
        delegation_id: Some(delegation_id.clone()),
        channel: AppendChannel::Thinking,
        content: "Checking your calendar.".to_owned(),
    })
    .await;
    let long = "You have a standup at ten and a design review at two. ".repeat(70);
    assert!(long.len() > 3_500);
    h.send(ProviderInput::DelegationAppend {
        delegation_id: Some(delegation_id.clone()),
        channel: AppendChannel::Commentary,
        content: long.clone(),
    })
    .await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { is_final: false, .. })).await;
    let thinking = fake.frames("session.thinking.append");
    assert_eq!(thinking[0].message["delegation_id"], delegation_id.as_str());
    let commentary = fake.frames("session.commentary.append");
    assert!(commentary.len() >= 2, "split into several appends");
    let rejoined: Vec<String> =
        commentary.iter().map(|r| r.message["content"].as_str().expect("content").to_owned()).collect();
    assert_eq!(rejoined.join(" ").split_whitespace().collect::<Vec<_>>(), long.split_whitespace().collect::<Vec<_>>());
    assert!(commentary.iter().all(|r| r.message["delegation_id"] == delegation_id.as_str()));
    h.drain_for(Duration::from_millis(200)).await;
    assert!(h.errors().is_empty(), "every piece under the upstream cap: {:?}", h.errors());
}

#[tokio::test]
async fn svc_delegation_runs_the_backend_over_http_and_appends_the_answer() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_responses_answer("Two meetings: standup at ten, review at two.");
    let mut setup = live(ProviderBLiveBlock {
        delegation: Some(Delegation::Svc),
        reasoning_effort: Some(ReasoningEffort::Low),
        ..ProviderBLiveBlock::default()
    });
    setup.limits.turn_gap = Duration::from_millis(5_000);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    fake.act(Action::UserTurn {
        transcript: "What is on my calendar?".to_owned(),
        late_transcript: false,
        respond: false,
    })
    .await;
    h.wait(|e| matches!(e, ProviderEvent::UserTranscript { text, .. } if text == "calendar?")).await;
    fake.act(Action::Delegate { target: "client".to_owned(), tool: None, answer: String::new() }).await;
    let ProviderEvent::DelegationCreated { delegation_id, .. } =
        h.wait(|e| matches!(e, ProviderEvent::DelegationCreated { .. })).await
    else {
        unreachable!()
    };
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { is_final: true, text } if text == "Two meetings: standup at ten, review at two.")).await;
    let (headers, body) = fake.responses_requests().remove(0);
    assert!(headers.contains(&("authorization".to_owned(), "Bearer test-key".to_owned())));
    assert_eq!(body["model"], "gpt-5.6-luna");
    assert_eq!(body["stream"], true);
    assert_eq!(body["reasoning"], json!({"effort": "low"}));
    assert_eq!(body["instructions"], "You are a friendly concierge.");
    assert_eq!(
        body["input"].as_array().and_then(|a| a.last()).cloned(),
        Some(json!({"role": "user", "content": "What is on my calendar?"}))
    );
    let commentary = fake.wait_for(WAIT, |r| r.message["type"] == "session.commentary.append").await.message;
    assert_eq!(commentary["delegation_id"], delegation_id.as_str());
    assert!(
        h.seen.iter().any(|e| matches!(e, ProviderEvent::Usage(t) if t.input_tokens == 150 && t.output_tokens == 60))
    );
}

#[tokio::test]
async fn expiry_rotates_with_history_and_errors_are_classified() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::Speak("Hello there.".to_owned())]);
    let mut setup = live(ProviderBLiveBlock::default());
    setup.greeting = Some("Welcome!".to_owned());
    setup.limits.turn_gap = Duration::from_millis(200);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    // The greeting goes out as commentary right after the start.
    let greeting = fake.wait_for(WAIT, |r| r.message["type"] == "session.commentary.append").await.message;
    assert!(greeting["content"].as_str().is_some_and(|c| c.contains("Welcome!")));
    assert_eq!(greeting["delegation_id"], serde_json::Value::Null);
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    h.send(ProviderInput::Mute(true)).await;
    fake.act(Action::Expire).await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { resumed: false })).await;
    let restart = fake.wait_for(WAIT, |r| r.connection == 1 && r.message["type"] == "session.start").await.message;
    assert_eq!(
        restart["session"]["input"],
        json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello there."}]}])
    );
    fake.wait_for(WAIT, |r| r.connection == 1 && r.message["type"] == "session.input_audio.mute").await;
    assert_eq!(fake.frames("session.commentary.append").len(), 1, "no second greeting");

    fake.act(Action::Error { code: "rate_limit_exceeded".to_owned(), message: "slow down".to_owned() }).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(!error.fatal, "a command error keeps the session");
    fake.act(Action::Error { code: "insufficient_quota".to_owned(), message: "no credit".to_owned() }).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(error.fatal);
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;
}

#[tokio::test]
async fn user_talking_over_the_model_cuts_the_heard_transcript() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_speedup(1);
    fake.queue([Reply::Speak("I could go on about the history of this restaurant for a very long time.".to_owned())]);
    let mut setup = live(ProviderBLiveBlock::default());
    setup.limits.turn_gap = Duration::from_millis(300);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("tell me about it".to_owned())).await;
    while h.audio_samples().len() < 24 * 400 {
        h.wait(|e| matches!(e, ProviderEvent::AssistantAudio { .. })).await;
    }
    fake.act(Action::UserTurn { transcript: "Okay thanks.".to_owned(), late_transcript: false, respond: false }).await;
    h.wait(|e| matches!(e, ProviderEvent::Interrupted)).await;
    h.send(ProviderInput::BargeIn { played_ms: 250 }).await;
    let ProviderEvent::AssistantTranscript { text, .. } =
        h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { is_final: true, .. })).await
    else {
        unreachable!()
    };
    assert!(text.len() < 25 && "I could go on about the history".starts_with(&text), "heard: {text:?}");
    // The model owns its turn-taking: nothing is cancelled or truncated upstream.
    assert!(fake.frames("response.cancel").is_empty() && fake.frames("conversation.item.truncate").is_empty());
}

#[tokio::test]
async fn a_failed_backend_response_drops_its_calls() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut h = Harness::start(live(ProviderBLiveBlock::default()), &fake).await;
    h.ready().await;
    fake.act(Action::Send(
        json!({"type": "response.event", "delegation_id": "dlg_x", "event": {"type": "response.created"}}),
    ))
    .await;
    fake.act(Action::Send(json!({"type": "response.event", "delegation_id": "dlg_x", "event": {
        "type": "response.output_item.done",
        "item": {"type": "function_call", "status": "completed", "call_id": "call_x", "name": "lookup", "arguments": "{}"}}})))
    .await;
    h.wait(|e| matches!(e, ProviderEvent::ToolCall { call_id, .. } if call_id == "call_x")).await;
    fake.act(Action::Send(
        json!({"type": "response.event", "delegation_id": "dlg_x", "event": {"type": "response.failed"}}),
    ))
    .await;
    h.wait(|e| matches!(e, ProviderEvent::ToolCallsCancelled { call_ids } if call_ids == &vec!["call_x".to_owned()]))
        .await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert_eq!((error.code.as_str(), error.fatal), ("backend_failed", false));
    // The voice model is told, and an output for the dropped call is never sent.
    let note = fake.wait_for(WAIT, |r| r.message["type"] == "session.thinking.append").await.message;
    assert!(note["content"].as_str().is_some_and(|c| c.contains("failed")));
    h.send(ProviderInput::ToolResult {
        call_id: "call_x".to_owned(),
        output: json!(1),
        is_error: false,
        scheduling: None,
    })
    .await;
    h.drain_for(Duration::from_millis(200)).await;
    assert!(fake.frames("response.item.create").is_empty());
    assert!(fake.frames("response.create").is_empty());
}
