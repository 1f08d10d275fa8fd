//! Gemini Live (provider_a) through the real codec and driver against the fake.

mod common;

use std::time::Duration;

use common::{Harness, WAIT, model, user_frames};
use serde_json::json;
use svc_domain::model::{EndOfSpeechSensitivity, ProviderABlock, ProviderBlock, ThinkingLevel, TurnDetection};
use svc_domain::session_config::InterruptionSensitivity;
use svc_provider_core::{Policy, ProviderEvent, ProviderInput, Scheduling, SessionSetup, ToolBehavior, ToolDecl};
use svc_testkit::speech::{correlation, speech};
use svc_testkit::{Action, FakeUpstream, Flavor, Reply};

fn provider_a(block: ProviderABlock) -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderA(block)), "You are a travel agent.")
}

fn tool(name: &str) -> ToolDecl {
    ToolDecl {
        name: name.to_owned(),
        description: format!("{name} tool"),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }
}

#[tokio::test]
async fn setup_maps_every_knob_exactly() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut setup = provider_a(ProviderABlock {
        model_id: Some("gemini-3.8-live-extended-thinking".to_owned()),
        temperature: Some(0.7),
        max_output_tokens: Some(1024),
        thinking_level: Some(ThinkingLevel::Low),
        include_thoughts: Some(true),
        turn_detection: Some(TurnDetection::ServerVad),
        end_of_speech_sensitivity: Some(EndOfSpeechSensitivity::Low),
        silence_duration_ms: Some(600),
        prefix_padding_ms: Some(40),
        svc_vad: None,
    });
    setup.voice = Some("Kore".to_owned());
    setup.speaking_style = Some("Cheerful.".to_owned());
    setup.interruption_sensitivity = InterruptionSensitivity::Low;
    setup.tools = vec![tool("search_flights"), tool("book_hotel")];
    setup
        .tool_policy
        .overrides
        .insert("book_hotel".to_owned(), Policy { behavior: ToolBehavior::NonBlocking, scheduling: None });
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    let connection = &fake.connections()[0];
    assert_eq!(connection.target, "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent");
    assert!(connection.headers.contains(&("x-goog-api-key".to_owned(), "test-key".to_owned())));
    let setup = fake.frames("setup").remove(0).message;
    assert_eq!(
        setup,
        json!({"setup": {
            "model": "models/gemini-3.8-live-extended-thinking",
            "generationConfig": {
                "responseModalities": ["AUDIO"],
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}},
                "temperature": 0.7,
                "maxOutputTokens": 1024,
                "thinkingConfig": {"thinkingLevel": "LOW", "includeThoughts": true},
            },
            "systemInstruction": {"parts": [{"text": "You are a travel agent.\n\nSpeaking style: Cheerful."}]},
            "realtimeInputConfig": {"automaticActivityDetection": {
                "disabled": false, "startOfSpeechSensitivity": "START_SENSITIVITY_LOW",
                "endOfSpeechSensitivity": "END_SENSITIVITY_LOW", "prefixPaddingMs": 40, "silenceDurationMs": 600}},
            "inputAudioTranscription": {},
            "outputAudioTranscription": {},
            "sessionResumption": {},
            "contextWindowCompression": {"triggerTokens": 100000, "slidingWindow": {"targetTokens": 60000}},
            "tools": [{"functionDeclarations": [
                {"name": "search_flights", "description": "search_flights tool",
                 "parametersJsonSchema": {"type": "object", "properties": {"q": {"type": "string"}}}, "behavior": "BLOCKING"},
                {"name": "book_hotel", "description": "book_hotel tool",
                 "parametersJsonSchema": {"type": "object", "properties": {"q": {"type": "string"}}}, "behavior": "NON_BLOCKING"},
            ]}],
        }})
    );
    // The default detector is svc_vad: Gemini's own is off; the sync-only model takes no behavior.
    let mut legacy = provider_a(ProviderABlock {
        model_id: Some("gemini-3.1-flash-live-preview".to_owned()),
        ..ProviderABlock::default()
    });
    legacy.tools = vec![tool("search_flights")];
    let message = svc_provider::gemini::setup_message(&legacy, Some("h1"));
    assert_eq!(message["setup"]["realtimeInputConfig"], json!({"automaticActivityDetection": {"disabled": true}}));
    assert_eq!(message["setup"]["sessionResumption"], json!({"handle": "h1"}));
    assert!(message["setup"]["tools"][0]["functionDeclarations"][0].get("behavior").is_none());
    assert!(message["setup"]["generationConfig"].get("thinkingConfig").is_none());
    // No voice chosen: the upstream picks (the spec's default), so none is sent.
    assert!(message["setup"]["generationConfig"].get("speechConfig").is_none(), "{message}");
}

#[tokio::test]
async fn svc_vad_turn_with_audio_transcripts_and_latest_usage() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let reply = "Paris is lovely in spring.";
    fake.queue([Reply::Speak(reply.to_owned())]);
    let mut h = Harness::start(provider_a(ProviderABlock::default()), &fake).await;
    h.ready().await;
    let frames = user_frames("recommend a city", 16_000);
    h.send(ProviderInput::ActivityStart).await;
    for frame in &frames {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
    }
    h.send(ProviderInput::ActivityEnd).await;
    fake.act(Action::UserTurn { transcript: "recommend a city".to_owned(), late_transcript: false, respond: false })
        .await;
    h.wait(|e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { is_final: true, .. })).await;
    let ProviderEvent::Usage(tokens) = h.wait(|e| matches!(e, ProviderEvent::Usage(_))).await else { unreachable!() };
    assert_eq!(
        (tokens.input_tokens, tokens.output_tokens, tokens.total_tokens),
        (150, 60, 210),
        "latest snapshot only"
    );
    assert_eq!((tokens.input_text_tokens, tokens.input_audio_tokens, tokens.input_cached_tokens), (120, 30, 64));
    assert_eq!((tokens.output_text_tokens, tokens.output_audio_tokens), (12, 48));
    assert_eq!(fake.frames("realtimeInput").len(), 2, "activityStart and activityEnd (audio is counted apart)");
    let expected = frames.concat();
    let got = fake.audio()[0].clone();
    assert_eq!(got.len(), expected.len(), "user audio at 16 kHz, complete");
    assert!(correlation(&got, &expected) > 0.999);
    assert_eq!(h.audio_samples().len(), speech(reply, 24_000).len());
    assert_eq!(h.assistant_fragments(), reply);
    assert!(h.seen.contains(&ProviderEvent::UserSpeechStarted) && h.seen.contains(&ProviderEvent::UserSpeechStopped));
    let user_final = h.seen.iter().find_map(|e| match e {
        ProviderEvent::UserTranscript { text, is_final: true, .. } => Some(text.clone()),
        _ => None,
    });
    assert_eq!(user_final.as_deref(), Some("recommend a city"));
}

#[tokio::test]
async fn barge_in_by_activity_start_cuts_the_heard_transcript() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_speedup(1);
    fake.queue([Reply::Speak("Let me tell you a very long story about the mountains and the sea.".to_owned())]);
    let mut h = Harness::start(provider_a(ProviderABlock::default()), &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("tell me a story".to_owned())).await;
    while h.audio_samples().len() < 24 * 500 {
        h.wait(|e| matches!(e, ProviderEvent::AssistantAudio { .. })).await;
    }
    h.send(ProviderInput::ActivityStart).await;
    h.wait(|e| matches!(e, ProviderEvent::Interrupted)).await;
    h.send(ProviderInput::BargeIn { played_ms: 300 }).await;
    let heard = h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { is_final: true, .. })).await;
    let ProviderEvent::AssistantTranscript { text, .. } = heard else { unreachable!() };
    assert!(text.len() < 20 && "Let me tell you a very long story".starts_with(&text), "heard: {text:?}");
}

#[tokio::test]
async fn tools_blocking_background_and_cancelled() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([
        Reply::ToolCall { name: "search_flights".to_owned(), arguments: json!({"q": "LIS"}) },
        Reply::Speak("Found three flights.".to_owned()),
    ]);
    let mut setup = provider_a(ProviderABlock::default());
    setup.tools = vec![tool("search_flights"), tool("book_hotel")];
    setup.tool_policy.overrides.insert(
        "book_hotel".to_owned(),
        Policy { behavior: ToolBehavior::NonBlocking, scheduling: Some(Scheduling::Silent) },
    );
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("flights to Lisbon".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, name, arguments } =
        h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await
    else {
        unreachable!()
    };
    assert_eq!((name.as_str(), arguments), ("search_flights", json!({"q": "LIS"})));
    h.send(ProviderInput::ToolResult {
        call_id: call_id.clone(),
        output: json!(["TP1", "TP2", "TP3"]),
        is_error: false,
        scheduling: None,
    })
    .await;
    h.wait(
        |e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Found three flights."),
    )
    .await;
    let response = fake.frames("toolResponse").remove(0).message;
    assert_eq!(
        response,
        json!({"toolResponse": {"functionResponses": [
        {"id": call_id, "name": "search_flights", "response": {"output": ["TP1", "TP2", "TP3"]}}]}})
    );

    // Non-blocking: the result carries the policy's scheduling.
    fake.queue([Reply::ToolCall { name: "book_hotel".to_owned(), arguments: json!({"q": "x"}) }]);
    h.send(ProviderInput::Text("book it".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, .. } = h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await else {
        unreachable!()
    };
    h.send(ProviderInput::ToolResult { call_id, output: json!("booked"), is_error: false, scheduling: None }).await;
    let response = fake
        .wait_for(WAIT, |r| r.message["toolResponse"]["functionResponses"][0]["name"] == "book_hotel")
        .await
        .message;
    assert_eq!(response["toolResponse"]["functionResponses"][0]["scheduling"], "SILENT");

    // A cancelled call is never answered.
    fake.queue([Reply::ToolCall { name: "search_flights".to_owned(), arguments: json!({}) }]);
    h.send(ProviderInput::Text("search again".to_owned())).await;
    let ProviderEvent::ToolCall { call_id, .. } = h.wait(|e| matches!(e, ProviderEvent::ToolCall { .. })).await else {
        unreachable!()
    };
    fake.act(Action::Send(json!({"toolCallCancellation": {"ids": [call_id]}}))).await;
    h.wait(|e| matches!(e, ProviderEvent::ToolCallsCancelled { call_ids } if call_ids == &vec![call_id.clone()])).await;
    h.send(ProviderInput::ToolResult {
        call_id: call_id.clone(),
        output: json!("late"),
        is_error: false,
        scheduling: None,
    })
    .await;
    h.drain_for(Duration::from_millis(200)).await;
    assert!(
        fake.frames("toolResponse")
            .iter()
            .all(|r| r.message["toolResponse"]["functionResponses"][0]["id"] != call_id.as_str())
    );
}

#[tokio::test]
async fn go_away_resumes_with_the_handle_and_loses_no_user_audio() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.set_gemini_ack_every(7);
    let mut h = Harness::start(provider_a(ProviderABlock::default()), &fake).await;
    h.ready().await;
    let frames = user_frames(
        "a long stretch of user speech that keeps flowing across the upstream reconnect without a gap",
        16_000,
    );
    let (before, after) = frames.split_at(frames.len() / 2);
    // Each handle holds what the fake got before it: sent in steps of its handle period (and
    // the last step short of it), nothing is in flight when a handle is taken — the
    // Developer API has no `transparent` acknowledgements, so what is in flight then can be
    // lost (docs/API-DESIGN.md, Known quirks). Since the last handle, 3 frames are unreplayed.
    for step in before.chunks(7) {
        for frame in step {
            h.send(ProviderInput::NativeAudio(frame.clone())).await;
        }
        if step.len() == 7 {
            h.wait(|e| matches!(e, ProviderEvent::ResumptionHandle(Some(_)))).await;
        }
    }
    fake.act(Action::GoAway(Duration::from_secs(3))).await;
    let ProviderEvent::Reconnecting { seconds_remaining } =
        h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await
    else {
        unreachable!()
    };
    assert_eq!(seconds_remaining, Some(3.0));
    for frame in after {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
    }
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { resumed: true })).await;
    h.drain_for(Duration::from_millis(300)).await;
    let resumed_setup = fake.wait_for(WAIT, |r| r.connection == 1 && r.message.get("setup").is_some()).await.message;
    let handle =
        resumed_setup["setup"]["sessionResumption"]["handle"].as_str().expect("resumed with a handle").to_owned();
    assert!(handle.starts_with("handle_0_"));
    assert_eq!(h.session.resumption_handle.borrow().as_deref().map(|h| h.starts_with("handle_")), Some(true));
    // The session holds every sample exactly once: what the old connection got after its last
    // handle was replayed on the new one, and what came during the reconnect was buffered.
    let expected = frames.concat();
    let session_audio = fake.gemini_session_audio();
    assert_eq!(session_audio.len(), expected.len(), "no sample lost or duplicated across the resume");
    assert!(correlation(&session_audio, &expected) > 0.999);
}

#[tokio::test]
async fn close_codes_are_classified_and_drops_reconnect() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::Speak("Back again.".to_owned())]);
    let mut h = Harness::start(provider_a(ProviderABlock::default()), &fake).await;
    h.ready().await;
    // An internal error drops the socket: the adapter reconnects (fresh: no handle yet).
    fake.act(Action::Close(1011, "Internal error encountered.".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { .. })).await;
    h.send(ProviderInput::Text("hello?".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantTranscript { text, is_final: true } if text == "Back again.")).await;
    // A safety stop ends one turn, not the session.
    fake.act(Action::Send(
        json!({"serverContent": {"turnComplete": true, "turnCompleteReason": "PROHIBITED_CONTENT"}}),
    ))
    .await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(!error.fatal);
    // Quota is fatal, not retried.
    fake.act(Action::Error { code: String::new(), message: "RESOURCE_EXHAUSTED: quota exceeded".to_owned() }).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert!(error.fatal);
    assert_eq!(error.code, "quota_exceeded");
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;
    assert_eq!(fake.connections().len(), 2);

    // An unknown model (1008) at setup is fatal.
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let mut h = Harness::start(provider_a(ProviderABlock::default()), &fake).await;
    h.ready().await;
    fake.act(Action::Close(1008, "models/x is not found".to_owned())).await;
    let ProviderEvent::Error(error) = h.wait(|e| matches!(e, ProviderEvent::Error(_))).await else { unreachable!() };
    assert_eq!((error.code.as_str(), error.fatal), ("model_unavailable", true));
}

#[tokio::test]
async fn a_prior_sessions_handle_resumes_natively_or_falls_back_to_the_transcript() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::Speak("Noted, Ada.".to_owned())]);
    let mut h = Harness::start(provider_a(ProviderABlock::default()), &fake).await;
    h.ready().await;
    h.send(ProviderInput::Text("My name is Ada.".to_owned())).await;
    let ProviderEvent::ResumptionHandle(Some(handle)) =
        h.wait(|e| matches!(e, ProviderEvent::ResumptionHandle(Some(_)))).await
    else {
        unreachable!()
    };
    h.send(ProviderInput::Close).await;
    h.wait(|e| matches!(e, ProviderEvent::Closed { .. })).await;

    // A later svc session resumes with it: handle in the setup, no greeting.
    let mut setup = provider_a(ProviderABlock::default());
    setup.resumption_handle = Some(handle.clone());
    setup.greeting = Some("Hello again!".to_owned());
    let mut h = Harness::start(setup, &fake).await;
    h.ready().await;
    let resumed = fake.wait_for(WAIT, |r| r.connection == 1 && r.message.get("setup").is_some()).await.message;
    assert_eq!(resumed["setup"]["sessionResumption"]["handle"], handle.as_str());
    h.drain_for(Duration::from_millis(200)).await;
    assert!(!fake.received().iter().any(|r| r.connection == 1 && r.message.to_string().contains("Hello again!")));

    // A stale handle is refused: a fresh session seeded from the transcript instead.
    let mut setup = provider_a(ProviderABlock::default());
    setup.resumption_handle = Some("handle_expired".to_owned());
    setup.history = vec![svc_provider_core::TranscriptTurn {
        role: svc_provider_core::Role::User,
        text: "My name is Ada.".to_owned(),
    }];
    let mut h = Harness::start(setup, &fake).await;
    h.wait(|e| matches!(e, ProviderEvent::ResumptionHandle(None))).await;
    h.ready().await;
    let seed =
        fake.wait_for(WAIT, |r| r.message["clientContent"]["turnComplete"] == false && r.connection >= 3).await.message;
    assert_eq!(seed["clientContent"]["turns"][0], json!({"role": "user", "parts": [{"text": "My name is Ada."}]}));
}
