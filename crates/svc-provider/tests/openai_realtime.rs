//! OpenAI Realtime (provider_b, provider_b_mini) through the real codec and driver against the
//! protocol-faithful fake.

mod common;

use std::time::Duration;

use common::{Harness, WAIT, model, user_frames};
use serde_json::{Value, json};
use svc_domain::model::{Eagerness, ProviderBBlock, ProviderBMiniBlock, ProviderBlock, TurnDetection};
use svc_domain::session_config::InterruptionSensitivity;
use svc_provider_core::{
    Policy, ProviderEvent, ProviderInput, ResponseStatus, Role, Scheduling, SessionSetup, ToolBehavior, ToolDecl,
    TranscriptTurn,
};
use svc_testkit::speech::{correlation, speech};
use svc_testkit::{Action, FakeUpstream, FakeUsage, Flavor, Reply};

fn provider_b(block: ProviderBBlock) -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderB(block)), "You are a courteous shop assistant.")
}

fn lookup_tool() -> ToolDecl {
    ToolDecl {
        name: "lookup_order".to_owned(),
        description: "Look up an order".to_owned(),
        parameters: json!({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}),
    }
}

#[tokio::test]
async fn session_update_maps_every_knob_exactly() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut setup = provider_b(ProviderBBlock {
        model_id: Some("gpt-realtime-2".to_owned()),
        turn_detection: Some(TurnDetection::ServerVad),
        eagerness: None,
        silence_duration_ms: Some(650),
        prefix_padding_ms: Some(250),
    });
    setup.voice = Some("cedar".to_owned());
    setup.speaking_style = Some("Warm and brief.".to_owned());
    setup.interruption_sensitivity = InterruptionSensitivity::High;
    setup.tools = vec![lookup_tool()];
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    let connection = &fake.connections()[0];
    assert_eq!(connection.target, "/v1/realtime?model=gpt-realtime-2");
    assert!(connection.headers.contains(&("authorization".to_owned(), "Bearer test-key".to_owned())));
    assert!(!connection.headers.iter().any(|(name, _)| name == "openai-beta"), "GA takes no beta header");
    let update = fake.frames("session.update").remove(0).message;
    assert_eq!(
        update,
        json!({"type": "session.update", "session": {
            "type": "realtime",
            "model": "gpt-realtime-2",
            "instructions": "You are a courteous shop assistant.\n\nSpeaking style: Warm and brief.",
            "output_modalities": ["audio"],
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": {"model": "gpt-4o-mini-transcribe"},
                    "turn_detection": {"type": "server_vad", "threshold": 0.35, "prefix_padding_ms": 250,
                        "silence_duration_ms": 650, "create_response": true, "interrupt_response": true},
                },
                "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "cedar"},
            },
            "tools": [{"type": "function", "name": "lookup_order", "description": "Look up an order",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}],
            "tool_choice": "auto",
        }})
    );
}

#[test]
fn semantic_vad_mini_and_text_only_map_exactly() {
    use svc_provider::realtime::{Dialect, session_update};
    let setup = provider_b(ProviderBBlock {
        turn_detection: Some(TurnDetection::SemanticVad),
        eagerness: Some(Eagerness::Low),
        ..ProviderBBlock::default()
    });
    let update = session_update(&setup, Dialect::OpenAi, "p");
    assert_eq!(
        update["session"]["audio"]["input"]["turn_detection"],
        json!({"type": "semantic_vad", "eagerness": "low", "create_response": true, "interrupt_response": true})
    );
    assert_eq!(update["session"]["model"], "gpt-realtime-2.1", "catalog default model");
    assert!(update["session"]["audio"]["output"].get("voice").is_none(), "no voice chosen: the upstream picks");
    let mut mini = SessionSetup::new(model(ProviderBlock::ProviderBMini(ProviderBMiniBlock::default())), "p");
    mini.text_only = true;
    let update = session_update(&mini, Dialect::OpenAi, "p");
    assert_eq!(update["session"]["model"], "gpt-realtime-2.1-mini");
    assert_eq!(update["session"]["output_modalities"], json!(["text"]));
    assert!(update["session"]["audio"].get("output").is_none());
    assert_eq!(update["session"]["audio"]["input"]["turn_detection"]["type"], "semantic_vad");
    assert_eq!(update["session"]["audio"]["input"]["turn_detection"]["eagerness"], "auto");
    assert!(update["session"].get("tools").is_none());
}

#[tokio::test]
async fn full_turn_streams_user_audio_and_speaks_the_reply_with_usage() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let reply = "Sure, your order ships on Friday.";
    fake.queue([Reply::Speak(reply.to_owned())]);
    let mut h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    let frames = user_frames("where is my order", 24_000);
    // Audio sent before the session is ready is buffered, not lost.
    for frame in &frames[..10] {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
    }
    h.ready().await;
    for frame in &frames[10..] {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
    }
    h.send(ProviderInput::Text("Where is my order?".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    let usage = h.seen.iter().find(|e| matches!(e, ProviderEvent::Usage(_))).cloned().expect("usage before done");
    // The user turn went in as an item, then exactly one response.create.
    let item = fake.frames("conversation.item.create").remove(0).message;
    assert_eq!(
        item["item"],
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is my order?"}]})
    );
    assert_eq!(fake.frames("response.create").len(), 1);
    // User audio arrived complete, at 24 kHz, shaped like the source.
    let expected = frames.concat();
    let got = fake.audio()[0].clone();
    assert_eq!(got.len(), expected.len());
    assert!(correlation(&got, &expected) > 0.999);
    // Assistant audio is the fake's speech, sample for sample; transcript fragments add up.
    let audio = h.audio_samples();
    assert_eq!(audio.len(), speech(reply, 24_000).len());
    assert!(correlation(&audio, &speech(reply, 24_000)) > 0.999);
    assert_eq!(h.assistant_fragments(), reply);
    assert!(h.seen.contains(&ProviderEvent::AssistantTranscript { text: reply.to_owned(), is_final: true }));
    assert!(h.seen.contains(&ProviderEvent::ResponseStarted));
    assert!(h.seen.contains(&ProviderEvent::ResponseDone { status: ResponseStatus::Completed }));
    // Usage mapped onto the nine fields (fake default: text 120, audio 30, cached 64, out text 12, out audio 48).
    let ProviderEvent::Usage(tokens) = usage else { unreachable!() };
    assert_eq!(
        (tokens.input_tokens, tokens.output_tokens, tokens.total_tokens),
        (150, 60, 210),
        "input = text + audio, output = text + audio"
    );
    assert_eq!((tokens.input_text_tokens, tokens.input_audio_tokens, tokens.input_image_tokens), (120, 30, 0));
    assert_eq!((tokens.input_cached_tokens, tokens.output_text_tokens, tokens.output_audio_tokens), (64, 12, 48));
    assert!(h.errors().is_empty(), "{:?}", h.errors());
}

#[tokio::test]
async fn usage_sums_over_responses_and_text_only_routes_to_model_text() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_usage(FakeUsage { input_text: 10, input_audio: 0, input_cached: 5, output_text: 7, output_audio: 0 });
    fake.queue([Reply::Speak("One.".to_owned()), Reply::Speak("Two.".to_owned())]);
    let mut setup = provider_b(ProviderBBlock::default());
    setup.text_only = true;
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("first".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::Usage(_))).await;
    h.send(ProviderInput::Text("second".to_owned())).await;
    let ProviderEvent::Usage(tokens) = h.wait(|e| matches!(e, ProviderEvent::Usage(_))).await else { unreachable!() };
    assert_eq!(
        (tokens.input_tokens, tokens.input_cached_tokens, tokens.output_tokens, tokens.total_tokens),
        (20, 10, 14, 34)
    );
    assert!(h.audio_samples().is_empty(), "text-only sessions play no audio");
    assert!(h.seen.contains(&ProviderEvent::ModelText { text: "One.".to_owned(), is_final: true, thought: false }));
}

#[tokio::test]
async fn barge_in_truncates_at_heard_audio_clamped_to_received() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_speedup(1);
    fake.queue([Reply::Speak("This is a long answer that the user will not let me finish at all today.".to_owned())]);
    let mut h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    h.ready().await;
    // No audio yet: nothing to truncate, so nothing is sent.
    h.send(ProviderInput::BargeIn { played_ms: 100 }).await;
    h.send(ProviderInput::Text("Tell me everything.".to_owned())).await;
    // Let about 400 ms of audio arrive, then the user talks over it.
    while h.audio_samples().len() < 24 * 400 {
        h.wait(|e| matches!(e, ProviderEvent::AssistantAudio { .. })).await;
    }
    fake.act(Action::UserTurn { transcript: "Stop.".to_owned(), late_transcript: false, respond: false }).await;
    h.wait(|e| matches!(e, ProviderEvent::Interrupted)).await;
    h.send(ProviderInput::BargeIn { played_ms: 250 }).await;
    let truncate = fake.wait_for(WAIT, |r| r.message["type"] == "conversation.item.truncate").await.message;
    assert_eq!(truncate["audio_end_ms"], 250);
    assert_eq!(truncate["content_index"], 0);
    assert!(truncate["item_id"].as_str().is_some_and(|id| id.starts_with("item_asst")));
    h.drain_for(Duration::from_millis(300)).await;
    assert_eq!(fake.frames("conversation.item.truncate").len(), 1, "truncated once, none without audio");
    assert!(fake.frames("response.cancel").is_empty(), "server VAD already cancelled the response");
    // The final transcript is what was heard, a prefix of the reply.
    let finals: Vec<&String> = h
        .seen
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::AssistantTranscript { text, is_final: true } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(finals.len(), 1);
    assert!("This is a long answer".starts_with(finals[0].as_str()) || finals[0].starts_with("This"), "{finals:?}");
    assert!(finals[0].len() < 40, "only the heard part: {finals:?}");
    assert!(h.errors().is_empty(), "the fake accepted the truncation: {:?}", h.errors());
}

#[tokio::test]
async fn runtime_barge_in_cancels_and_clamps_to_audio_received() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_speedup(1);
    fake.queue([Reply::Speak("A fairly long reply that keeps going for quite a while longer.".to_owned())]);
    let mut h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("go".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantAudio { .. })).await;
    // Claims far more playback than was ever received: clamped, so the upstream accepts it.
    h.send(ProviderInput::BargeIn { played_ms: 60_000 }).await;
    fake.wait_for(WAIT, |r| r.message["type"] == "response.cancel").await;
    let truncate = fake.wait_for(WAIT, |r| r.message["type"] == "conversation.item.truncate").await.message;
    let end = truncate["audio_end_ms"].as_u64().expect("ms");
    assert!(end > 0 && end < 2_000, "clamped to received audio: {end}");
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { status: ResponseStatus::Cancelled })).await;
    h.drain_for(Duration::from_millis(200)).await;
    assert!(h.errors().is_empty(), "{:?}", h.errors());
}

#[tokio::test]
async fn blocking_tool_round_trip_answers_once_then_one_response() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([
        Reply::ToolCall { name: "lookup_order".to_owned(), arguments: json!({"order_id": "42"}) },
        Reply::Speak("It ships Friday.".to_owned()),
    ]);
    let mut setup = provider_b(ProviderBBlock::default());
    setup.tools = vec![lookup_tool()];
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("Where is order 42?".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, name, arguments } =
        h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await
    else {
        unreachable!()
    };
    assert_eq!((name.as_str(), arguments), ("lookup_order", json!({"order_id": "42"})));
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    let result = ProviderInput::ToolResult {
        call_id: call_id.clone(),
        output: json!({"status": "shipped"}),
        is_error: false,
        scheduling: None,
    };
    h.send(result.clone()).await;
    h.send(result).await; // A second answer is dropped, never sent.
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { is_final: true, .. })).await;
    let outputs: Vec<Value> = fake
        .frames("conversation.item.create")
        .into_iter()
        .map(|r| r.message["item"].clone())
        .filter(|item| item["type"] == "function_call_output")
        .collect();
    assert_eq!(
        outputs,
        vec![json!({"type": "function_call_output", "call_id": call_id, "output": "{\"status\":\"shipped\"}"})]
    );
    assert_eq!(fake.frames("response.create").len(), 2, "the turn, then one follow-up");
    assert_eq!(h.errors().iter().map(|e| e.code.as_str()).collect::<Vec<_>>(), vec!["unknown_tool_call"]);
}

#[tokio::test]
async fn background_tool_is_answered_at_once_and_its_result_scheduled() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([
        Reply::ToolCall { name: "lookup_order".to_owned(), arguments: json!({"order_id": "7"}) },
        Reply::Speak("Checking that for you.".to_owned()),
        Reply::Speak("Order 7 is delivered.".to_owned()),
    ]);
    let mut setup = provider_b(ProviderBBlock::default());
    setup.tools = vec![lookup_tool()];
    setup.tool_policy.default = Policy { behavior: ToolBehavior::NonBlocking, scheduling: Some(Scheduling::WhenIdle) };
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("Where is order 7?".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, .. } = h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await else {
        unreachable!()
    };
    // The model keeps talking while the tool runs: "started" output and a response at once.
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Checking that for you.")).await;
    let started = fake.wait_for(WAIT, |r| r.message["item"]["type"] == "function_call_output").await.message;
    assert_eq!(started["item"]["call_id"], call_id.as_str());
    assert!(started["item"]["output"].as_str().is_some_and(|o| o.contains("started")));
    h.send(ProviderInput::ToolResult {
        call_id: call_id.clone(),
        output: json!({"status": "delivered"}),
        is_error: false,
        scheduling: None,
    })
    .await;
    h.wait(
        |e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Order 7 is delivered."),
    )
    .await;
    let system = fake
        .frames("conversation.item.create")
        .into_iter()
        .map(|r| r.message["item"].clone())
        .find(|item| item["role"] == "system")
        .expect("result injected as context");
    assert!(system["content"][0]["text"].as_str().is_some_and(|t| t.contains("delivered") && t.contains(&call_id)));
    let outputs = fake
        .frames("conversation.item.create")
        .iter()
        .filter(|r| r.message["item"]["type"] == "function_call_output")
        .count();
    assert_eq!(outputs, 1, "answered upstream exactly once");
    assert_eq!(fake.frames("response.create").len(), 3);

    // A silent result is absorbed without a response.
    fake.queue([
        Reply::ToolCall { name: "lookup_order".to_owned(), arguments: json!({"order_id": "8"}) },
        Reply::Speak("Okay.".to_owned()),
    ]);
    h.send(ProviderInput::Text("And order 8?".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, .. } = h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await else {
        unreachable!()
    };
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Okay.")).await;
    let creates = fake.frames("response.create").len();
    h.send(ProviderInput::ToolResult {
        call_id,
        output: json!("fine"),
        is_error: false,
        scheduling: Some(Scheduling::Silent),
    })
    .await;
    h.drain_for(Duration::from_millis(300)).await;
    assert_eq!(fake.frames("response.create").len(), creates, "silent: no response");
}

#[tokio::test]
async fn sequencer_never_overlaps_responses() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_speedup(2);
    fake.queue([
        Reply::Speak("First answer, a little long.".to_owned()),
        Reply::Speak("Second.".to_owned()),
        Reply::Speak("Third.".to_owned()),
    ]);
    let mut h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("one".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseStarted)).await;
    // Two more turns while the first response is active: held back, then merged into one.
    h.send(ProviderInput::Text("two".to_owned())).await;
    h.send(ProviderInput::Text("three".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Second.")).await;
    h.drain_for(Duration::from_millis(300)).await;
    assert_eq!(fake.frames("response.create").len(), 2);
    assert!(h.errors().is_empty(), "no conversation_already_has_active_response: {:?}", h.errors());

    // The server's own VAD response races ours: the refused create is re-sent after it ends.
    fake.queue([Reply::Speak("Auto reply.".to_owned()), Reply::Speak("Queued reply.".to_owned())]);
    fake.act(Action::UserTurn { transcript: "hello".to_owned(), late_transcript: false, respond: true }).await;
    fake.act(Action::Send(json!({"type": "error", "error": {"type": "invalid_request_error",
        "code": "conversation_already_has_active_response", "message": "busy", "event_id": "svc_response_x"}})))
        .await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Auto reply.")).await;
    assert!(h.errors().is_empty(), "the race is absorbed, not surfaced: {:?}", h.errors());
}

#[tokio::test]
async fn late_user_transcript_keeps_speech_start_order() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::Speak("Here you go.".to_owned())]);
    let mut setup = provider_b(ProviderBBlock::default());
    setup.limits.rotate_after = Duration::from_millis(600);
    setup.limits.quiet_gap = Duration::from_millis(50);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    fake.act(Action::UserTurn { transcript: "Can I get a refund?".to_owned(), late_transcript: true, respond: true })
        .await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    // The transcript of the user's turn arrives only after the reply.
    let ProviderEvent::UserTranscript { speech_started_ms, .. } =
        h.wait(|e| matches!(e, ProviderEvent::UserTranscript { is_final: true, .. })).await
    else {
        unreachable!()
    };
    let started_index =
        h.seen.iter().position(|e| matches!(e, ProviderEvent::UserSpeechStarted)).expect("speech start");
    let response_index = h.seen.iter().position(|e| matches!(e, ProviderEvent::ResponseStarted)).expect("response");
    assert!(started_index < response_index);
    assert!(speech_started_ms < 600);
    // Rotation reseeds in speech-start order: the user's question before the answer.
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { .. })).await;
    let seed = fake.wait_for(WAIT, |r| r.connection == 1 && r.message["item"]["role"] == "system").await.message;
    let text = seed["item"]["content"][0]["text"].as_str().expect("text").to_owned();
    let user = text.find("User: Can I get a refund?").expect("user turn reseeded");
    let assistant = text.find("Assistant: Here you go.").expect("assistant turn reseeded");
    assert!(user < assistant, "{text}");
}

#[tokio::test]
async fn rotation_before_the_cap_loses_no_user_audio_and_never_regreets() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut setup = provider_b(ProviderBBlock::default());
    setup.greeting = Some("Welcome to the shop!".to_owned());
    setup.limits.rotate_after = Duration::from_millis(400);
    setup.limits.quiet_gap = Duration::from_millis(50);
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    let mut frames = user_frames("one two three four five six seven eight nine ten eleven twelve", 24_000);
    // The microphone keeps streaming: silence after the words ends the turn for server VAD.
    frames.extend(std::iter::repeat_n(vec![0i16; 480], 40));
    for frame in &frames {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { resumed: false })).await;
    h.drain_for(Duration::from_millis(200)).await;
    assert!(h.seen.iter().any(|e| matches!(e, ProviderEvent::Reconnecting { .. })));
    assert!(fake.connections().len() >= 2);
    let audio = fake.audio();
    let total: Vec<i16> = audio.iter().flatten().copied().collect();
    let expected = frames.concat();
    assert_eq!(total.len(), expected.len(), "every sample arrived exactly once across the two sessions");
    assert!(correlation(&total, &expected) > 0.999);
    assert!(audio[1..].iter().any(|a| !a.is_empty()), "audio continued on a new session");
    // The greeting was a response.create with instructions on the first session only.
    let greetings = fake.frames("response.create").into_iter().filter(|r| r.message.get("response").is_some()).count();
    assert_eq!(greetings, 1);
    fake.wait_for(WAIT, |r| r.connection == 1 && r.message["type"] == "session.update").await;
}

#[tokio::test]
async fn session_expired_rotates_and_the_conversation_continues() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::Speak("Hi.".to_owned()), Reply::Speak("Still here.".to_owned())]);
    let mut h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("hello".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    fake.act(Action::Expire).await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { .. })).await;
    h.send(ProviderInput::Text("are you there?".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Still here.")).await;
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    let seed = fake.wait_for(WAIT, |r| r.connection == 1 && r.message["item"]["role"] == "system").await;
    assert!(seed.message.to_string().contains("User: hello"));
}

#[tokio::test]
async fn errors_are_classified_fatal_or_per_turn() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::Speak("Fine.".to_owned())]);
    let mut h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    h.ready().await;
    fake.act(Action::Error { code: "invalid_value".to_owned(), message: "bad item".to_owned() }).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(!error.fatal);
    assert_eq!(error.code, "invalid_value");
    // The session goes on.
    h.send(ProviderInput::Text("still ok?".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    fake.act(Action::Error { code: "insufficient_quota".to_owned(), message: "no credit".to_owned() }).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(error.fatal);
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;

    // A refused key fails at connect, fatally and clearly.
    let mut h = Harness::start_with_key(provider_b(ProviderBBlock::default()), &fake, "wrong-key").await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(error.fatal);
    assert_eq!(error.code, "unauthorized");
    assert!(error.message.contains("401"), "{}", error.message);
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;
}

#[tokio::test]
async fn close_answers_open_tool_calls_and_ends_the_stream() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::ToolCall { name: "lookup_order".to_owned(), arguments: json!({}) }]);
    let mut setup = provider_b(ProviderBBlock::default());
    setup.tools = vec![lookup_tool()];
    setup.history = vec![TranscriptTurn { role: Role::User, text: "earlier question".to_owned() }];
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("look it up".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, .. } = h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await else {
        unreachable!()
    };
    h.send(ProviderInput::Close).await;
    h.wait(|e| matches!(e, ProviderEvent::ToolCallsCancelled { call_ids } if call_ids == &vec![call_id.clone()])).await;
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;
    let output = fake.wait_for(WAIT, |r| r.message["item"]["type"] == "function_call_output").await.message;
    assert_eq!(output["item"]["call_id"], call_id.as_str());
    assert!(h.session.events.recv().await.is_none(), "the stream ends after Closed");
    // History given at start seeds the first session too.
    let seed = fake.wait_for(WAIT, |r| r.message["item"]["role"] == "system").await;
    assert!(seed.message.to_string().contains("User: earlier question"));
}

#[tokio::test]
async fn shutdown_and_a_dropped_runtime_both_end_the_adapter() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    h.ready().await;
    h.session.shutdown.cancel();
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;
    let task = h.session.task;
    tokio::time::timeout(WAIT, task).await.expect("the task ends").expect("no panic");

    // The runtime going away (its sender dropped) closes the session too.
    let h = Harness::start(provider_b(ProviderBBlock::default()), &fake).await;
    let svc_provider_core::session::ProviderSession { input, mut events, task, .. } = h.session;
    drop(input);
    let mut closed = false;
    while let Ok(Some(event)) = tokio::time::timeout(WAIT, events.recv()).await {
        closed |= matches!(event, ProviderEvent::Closed { .. });
    }
    assert!(closed);
    tokio::time::timeout(WAIT, task).await.expect("the task ends").expect("no panic");

    // So does the runtime no longer reading events: the open call is still answered upstream.
    fake.queue([Reply::ToolCall { name: "lookup_order".to_owned(), arguments: json!({}) }]);
    let mut setup = provider_b(ProviderBBlock::default());
    setup.tools = vec![lookup_tool()];
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("look".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await;
    let svc_provider_core::session::ProviderSession { input, events, task, .. } = h.session;
    drop(events);
    let _ = input.send(ProviderInput::NativeAudio(vec![0; 480])).await;
    tokio::time::timeout(WAIT, task).await.expect("the task ends").expect("no panic");
    let output = fake.wait_for(WAIT, |r| r.message["item"]["type"] == "function_call_output").await;
    assert!(output.message["item"]["output"].as_str().is_some_and(|o| o.contains("ended")));
}
