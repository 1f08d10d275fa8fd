//! What the providers' messages may look like, fed straight into the codecs (no sockets): fields
//! combined in one message, a turn's end right behind an interruption, unknown fields and
//! message types, and what svc sends for a typed turn.

mod common;

use std::time::{Duration, Instant};

use common::{drain, model, request};
use serde_json::{Value, json};
use svc_domain::model::{ProviderABlock, ProviderBBlock, ProviderBlock, TurnDetection};
use svc_provider::codec::{Codec, Transmit, encode_pcm, heard_text};
use svc_provider::gemini::GeminiCodec;
use svc_provider::realtime::{Dialect, RealtimeCodec};
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup};
use svc_wire::rest::UsageTokens;

const REPLY: &str = "One two three four five six seven eight nine ten.";

fn gemini(turn_detection: Option<TurnDetection>) -> GeminiCodec {
    let block = ProviderABlock { turn_detection, ..ProviderABlock::default() };
    let mut codec = GeminiCodec::new(SessionSetup::new(model(ProviderBlock::ProviderA(block)), "p"), request());
    let t0 = Instant::now();
    codec.handle_connected(t0);
    codec.handle_upstream_message(t0, br#"{"setupComplete":{"sessionId":"s"}}"#);
    drain(&mut codec);
    codec
}

fn send(codec: &mut dyn Codec, message: &Value) -> Vec<ProviderEvent> {
    codec.handle_upstream_message(Instant::now(), message.to_string().as_bytes());
    drain(codec).1
}

fn texts(transmits: &[Transmit]) -> Vec<Value> {
    transmits
        .iter()
        .filter_map(|t| match t {
            Transmit::Text(text) => serde_json::from_str(text).ok(),
            _ => None,
        })
        .collect()
}

/// One second of 24 kHz model audio with the reply's transcript, as Gemini streams a turn.
fn gemini_reply(codec: &mut GeminiCodec) -> Vec<ProviderEvent> {
    let audio = encode_pcm(&vec![1000; 24_000]);
    send(
        codec,
        &json!({"serverContent": {
            "modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": audio}}]},
            "outputTranscription": {"text": REPLY},
        }}),
    )
}

fn usage_metadata(prompt: u64, response: u64) -> Value {
    json!({
        "promptTokenCount": prompt, "responseTokenCount": response, "totalTokenCount": prompt + response,
        "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": prompt}],
        "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": response}],
    })
}

fn last_usage(events: &[ProviderEvent]) -> Option<UsageTokens> {
    events.iter().rev().find_map(|e| match e {
        ProviderEvent::Usage(tokens) => Some(tokens.clone()),
        _ => None,
    })
}

fn finals(events: &[ProviderEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::AssistantTranscript { text, is_final: true } => Some(text.clone()),
            ProviderEvent::AssistantTruncated { heard } => Some(heard.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn gemini_usage_beside_turn_complete_is_counted_each_turn() {
    // How google-genai's own tests shape it: usage and the turn's end in one message.
    let mut codec = gemini(None);
    let mut total = 0;
    for turn in 1..=7u64 {
        codec.handle_input(Instant::now(), ProviderInput::Text(format!("question {turn}")));
        gemini_reply(&mut codec);
        let (prompt, response) = (400 * turn, 50 + turn);
        total += prompt + response;
        let events = send(
            &mut codec,
            &json!({"usageMetadata": usage_metadata(prompt, response), "serverContent": {"turnComplete": true}}),
        );
        let usage = last_usage(&events).unwrap_or_else(|| panic!("turn {turn}: no usage in {events:?}"));
        assert_eq!(usage.total_tokens, i64::try_from(total).expect("small"), "turn {turn}");
    }
}

#[test]
fn gemini_usage_before_or_after_the_turns_end_counts_once() {
    let mut codec = gemini(None);
    // Two snapshots within the turn: the latest stands for the turn, committed at its end.
    gemini_reply(&mut codec);
    send(&mut codec, &json!({"usageMetadata": usage_metadata(100, 10)}));
    send(&mut codec, &json!({"usageMetadata": usage_metadata(120, 20)}));
    let events = send(&mut codec, &json!({"serverContent": {"turnComplete": true}}));
    assert_eq!(last_usage(&events).map(|u| u.total_tokens), Some(140));
    // Usage right after a turn that completed without any: it is that turn's.
    gemini_reply(&mut codec);
    assert_eq!(last_usage(&send(&mut codec, &json!({"serverContent": {"turnComplete": true}}))), None);
    let events = send(&mut codec, &json!({"usageMetadata": usage_metadata(300, 30)}));
    assert_eq!(last_usage(&events).map(|u| u.total_tokens), Some(470));
}

#[test]
fn gemini_interruption_then_turn_complete_finalizes_only_what_was_heard() {
    for combined in [false, true] {
        let mut codec = gemini(Some(TurnDetection::ServerVad));
        gemini_reply(&mut codec);
        let mut events = if combined {
            send(&mut codec, &json!({"serverContent": {"interrupted": true, "turnComplete": true}}))
        } else {
            let mut events = send(&mut codec, &json!({"serverContent": {"interrupted": true}}));
            events.extend(send(&mut codec, &json!({"serverContent": {"turnComplete": true}})));
            events
        };
        assert!(events.contains(&ProviderEvent::Interrupted));
        assert_eq!(finals(&events), Vec::<String>::new(), "combined={combined}: no final before the barge-in");
        // The runtime answers Interrupted with what it played: 400 ms of the 1 s received.
        codec.handle_input(Instant::now(), ProviderInput::BargeIn { played_ms: 400 });
        events.extend(drain(&mut codec).1);
        assert_eq!(finals(&events), vec![heard_text(REPLY, 400, 1000)], "combined={combined}");
    }
}

#[test]
fn gemini_typed_turn_under_svc_vad_is_one_activity() {
    let mut codec = gemini(None);
    codec.handle_input(Instant::now(), ProviderInput::Text("What time is it?".to_owned()));
    let sent = texts(&drain(&mut codec).0);
    assert_eq!(
        sent,
        vec![
            json!({"realtimeInput": {"activityStart": {}}}),
            json!({"realtimeInput": {"text": "What time is it?"}}),
            json!({"realtimeInput": {"activityEnd": {}}}),
        ]
    );
    // Inside the user's own activity the text joins it; under server VAD it is activity itself.
    codec.handle_input(Instant::now(), ProviderInput::ActivityStart);
    drain(&mut codec);
    codec.handle_input(Instant::now(), ProviderInput::Text("and the date".to_owned()));
    assert_eq!(texts(&drain(&mut codec).0), vec![json!({"realtimeInput": {"text": "and the date"}})]);
    let mut codec = gemini(Some(TurnDetection::ServerVad));
    codec.handle_input(Instant::now(), ProviderInput::Text("hi".to_owned()));
    assert_eq!(texts(&drain(&mut codec).0), vec![json!({"realtimeInput": {"text": "hi"}})]);
}

#[test]
fn gemini_setup_never_asks_for_transparent_resumption() {
    let setup = SessionSetup::new(model(ProviderBlock::ProviderA(ProviderABlock::default())), "p");
    let mut codec = GeminiCodec::new(setup, request());
    codec.handle_connected(Instant::now());
    let sent = texts(&drain(&mut codec).0);
    assert_eq!(sent[0]["setup"]["sessionResumption"], json!({}), "the Developer API refuses `transparent`");
}

#[test]
fn gemini_ignores_unknown_fields_and_messages_and_reports_error_messages() {
    let mut codec = gemini(None);
    let events = send(
        &mut codec,
        &json!({"serverContent": {"outputTranscription": {"text": "Hi", "futureField": 1}, "futureContent": {}}}),
    );
    assert_eq!(
        events,
        vec![
            ProviderEvent::ResponseStarted,
            ProviderEvent::AssistantTranscript { text: "Hi".to_owned(), is_final: false }
        ]
    );
    for message in
        [json!({"someFutureMessage": {"x": 1}}), json!({"voiceActivity": {"voiceActivityType": "ACTIVITY_START"}})]
    {
        assert_eq!(send(&mut codec, &message), Vec::new(), "{message}");
    }
    let events = send(&mut codec, &json!({"error": {"code": 400, "message": "Request contains an invalid argument."}}));
    assert!(
        matches!(&events[..], [ProviderEvent::Error(e)] if !e.fatal && e.message.contains("invalid argument")),
        "{events:?}"
    );
}

fn openai_ready(turn_detection: Option<TurnDetection>) -> RealtimeCodec {
    let block = ProviderBBlock { turn_detection, ..ProviderBBlock::default() };
    let setup = SessionSetup::new(model(ProviderBlock::ProviderB(block)), "p");
    let mut codec = RealtimeCodec::new(setup, Dialect::OpenAi, request());
    let t0 = Instant::now();
    codec.handle_connected(t0);
    codec.handle_upstream_message(t0, br#"{"type":"session.created","session":{"id":"s1"}}"#);
    codec.handle_upstream_message(t0, br#"{"type":"session.updated","session":{"id":"s1"}}"#);
    drain(&mut codec);
    codec
}

#[test]
fn openai_speech_started_then_transcript_done_finalizes_only_what_was_heard() {
    let mut codec = openai_ready(Some(TurnDetection::ServerVad));
    let mut events = send(&mut codec, &json!({"type": "response.created", "response": {"id": "r1"}}));
    events.extend(send(
        &mut codec,
        &json!({"type": "response.output_audio.delta", "item_id": "a1", "delta": encode_pcm(&vec![1000; 24_000])}),
    ));
    events.extend(send(
        &mut codec,
        &json!({"type": "response.output_audio_transcript.delta", "item_id": "a1", "delta": REPLY}),
    ));
    events.extend(send(&mut codec, &json!({"type": "input_audio_buffer.speech_started", "item_id": "u1"})));
    assert!(events.contains(&ProviderEvent::Interrupted));
    // The cancelled response's end, right behind the interruption (one burst from the server).
    events.extend(send(
        &mut codec,
        &json!({"type": "response.output_audio_transcript.done", "item_id": "a1", "transcript": REPLY}),
    ));
    events.extend(send(&mut codec, &json!({"type": "response.done", "response": {"id": "r1", "status": "cancelled"}})));
    assert_eq!(finals(&events), Vec::<String>::new(), "no final before the barge-in");
    codec.handle_input(Instant::now() + Duration::from_millis(5), ProviderInput::BargeIn { played_ms: 300 });
    let (transmits, more) = drain(&mut codec);
    events.extend(more);
    assert_eq!(finals(&events), vec![heard_text(REPLY, 300, 1000)]);
    let truncate = texts(&transmits).into_iter().find(|t| t["type"] == "conversation.item.truncate").expect("truncate");
    assert_eq!(truncate["audio_end_ms"], 300);
}

#[test]
fn openai_ignores_unknown_event_types_and_fields() {
    let mut codec = openai_ready(None);
    for message in [
        json!({"type": "response.future_thing", "event_id": "e1"}),
        json!({"type": "rate_limits.updated", "rate_limits": []}),
        json!({"type": "session.updated", "session": {"id": "s1", "future": true}, "extra": 1}),
    ] {
        let events = send(&mut codec, &message);
        assert!(
            events.iter().all(|e| !matches!(e, ProviderEvent::Error(_) | ProviderEvent::Closed { .. })),
            "{message}: {events:?}"
        );
    }
}

#[test]
fn input_given_before_the_link_is_ready_keeps_its_order() {
    // svc_vad: the user starts, speaks and stops before setupComplete (at start, or during a
    // reconnect): the activity must still hold its audio.
    let setup = SessionSetup::new(model(ProviderBlock::ProviderA(ProviderABlock::default())), "p");
    let mut codec = GeminiCodec::new(setup, request());
    let t0 = Instant::now();
    codec.handle_connected(t0);
    drain(&mut codec);
    codec.handle_input(t0, ProviderInput::ActivityStart);
    for _ in 0..10 {
        codec.handle_input(t0, ProviderInput::NativeAudio(vec![800; 320]));
    }
    codec.handle_input(t0, ProviderInput::ActivityEnd);
    codec.handle_input(t0, ProviderInput::Text("and one more thing".to_owned()));
    codec.handle_upstream_message(t0, br#"{"setupComplete":{}}"#);
    let kinds: Vec<String> = texts(&drain(&mut codec).0)
        .iter()
        .map(|message| {
            let input = &message["realtimeInput"];
            ["activityStart", "audio", "activityEnd", "text"]
                .iter()
                .find(|key| input.get(**key).is_some())
                .map_or_else(|| message.to_string(), |key| (*key).to_owned())
        })
        .collect();
    let mut expected = vec!["activityStart".to_owned()];
    expected.extend(std::iter::repeat_n("audio".to_owned(), 2)); // 200 ms at 16 kHz, in 100 ms frames
    expected.extend(["activityEnd", "activityStart", "text", "activityEnd"].map(str::to_owned));
    assert_eq!(kinds, expected);
}

#[test]
fn a_fresh_upstream_session_is_seeded_once_with_what_came_before_the_drop() {
    let mut codec = gemini(None);
    let t0 = Instant::now();
    codec.handle_input(t0, ProviderInput::Text("Where is my order?".to_owned()));
    gemini_reply(&mut codec);
    send(&mut codec, &json!({"serverContent": {"turnComplete": true}}));
    for drop in 1..=2 {
        // The socket drops with no handle yet: a fresh session follows, twice.
        let down = t0 + Duration::from_secs(10 * drop);
        codec.handle_upstream_closed(down, Some(1011), "internal");
        codec.handle_input(down + Duration::from_millis(100), ProviderInput::Text(format!("hello again {drop}")));
        drain(&mut codec);
        let retry = codec.poll_timeout().expect("a retry is scheduled");
        codec.handle_timeout(retry);
        codec.handle_connected(retry);
        codec.handle_upstream_message(retry, br#"{"setupComplete":{}}"#);
        let sent = texts(&drain(&mut codec).0);
        let seeds: Vec<&Value> = sent.iter().filter(|m| m.get("clientContent").is_some()).collect();
        assert_eq!(seeds.len(), 1, "drop {drop}: one seed per fresh session: {sent:?}");
        let seeded: Vec<&str> = seeds[0]["clientContent"]["turns"]
            .as_array()
            .expect("turns")
            .iter()
            .filter_map(|t| t["parts"][0]["text"].as_str())
            .collect();
        assert_eq!(seeded[0], "Where is my order?", "drop {drop}");
        assert!(
            !seeded.contains(&format!("hello again {drop}").as_str()),
            "drop {drop}: the held turn is sent, not seeded"
        );
        let typed = sent.iter().filter(|m| m["realtimeInput"]["text"] == format!("hello again {drop}")).count();
        assert_eq!(typed, 1, "drop {drop}: {sent:?}");
    }
}

#[test]
fn xai_usage_at_the_top_level_is_not_hidden_by_an_unknown_field_in_response_usage() {
    let block = svc_domain::model::ProviderCBlock::default();
    let setup = SessionSetup::new(model(ProviderBlock::ProviderC(block)), "p");
    let mut codec = RealtimeCodec::new(setup, Dialect::Xai, request());
    let t0 = Instant::now();
    codec.handle_connected(t0);
    codec.handle_upstream_message(t0, br#"{"type":"session.created","session":{"id":"s1","model":"grok-voice-3.0"}}"#);
    codec.handle_upstream_message(t0, br#"{"type":"session.updated","session":{"id":"s1"}}"#);
    drain(&mut codec);
    send(&mut codec, &json!({"type": "response.created", "response": {"id": "r1"}}));
    let events = send(
        &mut codec,
        &json!({"type": "response.done", "response": {"id": "r1", "status": "completed", "usage": {"future_field": null}},
            "usage": {"input_tokens": 150, "output_tokens": 60, "total_tokens": 210}}),
    );
    assert_eq!(last_usage(&events).map(|u| u.total_tokens), Some(210), "{events:?}");
}

#[test]
fn activity_end_ends_the_users_turn_on_every_provider_that_lets_the_client() {
    // OpenAI (and xAI, the same codec): commit what was appended and ask for the answer, unless
    // the server's detector already committed it.
    let mut codec = openai_ready(Some(TurnDetection::ServerVad));
    send(&mut codec, &json!({"type": "input_audio_buffer.speech_started", "item_id": "u1"}));
    for _ in 0..10 {
        codec.handle_input(Instant::now(), ProviderInput::NativeAudio(vec![500; 480]));
    }
    drain(&mut codec);
    codec.handle_input(Instant::now(), ProviderInput::ActivityEnd);
    let (transmits, events) = drain(&mut codec);
    let kinds: Vec<Value> = texts(&transmits).iter().map(|m| m["type"].clone()).collect();
    assert_eq!(kinds, vec![json!("input_audio_buffer.commit"), json!("response.create")]);
    assert!(events.contains(&ProviderEvent::UserSpeechStopped), "{events:?}");
    // Already committed by the server: nothing to do.
    for _ in 0..10 {
        codec.handle_input(Instant::now(), ProviderInput::NativeAudio(vec![500; 480]));
    }
    send(&mut codec, &json!({"type": "input_audio_buffer.committed", "item_id": "u2"}));
    drain(&mut codec);
    codec.handle_input(Instant::now(), ProviderInput::ActivityEnd);
    assert_eq!(texts(&drain(&mut codec).0), Vec::<Value>::new());

    // Gemini under server VAD: flush the service's detector.
    let mut codec = gemini(Some(TurnDetection::ServerVad));
    codec.handle_input(Instant::now(), ProviderInput::NativeAudio(vec![500; 320]));
    drain(&mut codec);
    codec.handle_input(Instant::now(), ProviderInput::ActivityEnd);
    assert_eq!(texts(&drain(&mut codec).0), vec![json!({"realtimeInput": {"audioStreamEnd": true}})]);
}

#[test]
fn gemini_server_vad_reports_the_users_speech_from_the_service() {
    // With voiceActivity (the service's detector) …
    let mut codec = gemini(Some(TurnDetection::ServerVad));
    let events = send(&mut codec, &json!({"voiceActivity": {"type": "ACTIVITY_START"}}));
    assert_eq!(events, vec![ProviderEvent::UserSpeechStarted]);
    let events = send(&mut codec, &json!({"serverContent": {"inputTranscription": {"text": "Hi"}}}));
    assert!(!events.contains(&ProviderEvent::UserSpeechStarted));
    assert_eq!(
        send(&mut codec, &json!({"voiceActivity": {"type": "ACTIVITY_END"}})),
        vec![ProviderEvent::UserSpeechStopped]
    );
    // … and without it, from the transcription and the model's answer.
    let mut codec = gemini(Some(TurnDetection::ServerVad));
    let events = send(&mut codec, &json!({"serverContent": {"inputTranscription": {"text": "Hi"}}}));
    assert_eq!(events.first(), Some(&ProviderEvent::UserSpeechStarted));
    let events = gemini_reply(&mut codec);
    assert_eq!(events.first(), Some(&ProviderEvent::UserSpeechStopped));
    // svc_vad's markers come from svc's own detector only.
    let mut codec = gemini(None);
    let events = send(&mut codec, &json!({"serverContent": {"inputTranscription": {"text": "Hi"}}}));
    assert!(!events.contains(&ProviderEvent::UserSpeechStarted));
}

#[test]
fn interruption_sensitivity_reaches_semantic_vad_and_gpt_live() {
    use svc_domain::model::{Eagerness, ProviderBLiveBlock};
    use svc_domain::session_config::InterruptionSensitivity;
    let semantic = |eagerness: Option<Eagerness>, sensitivity| {
        let block =
            ProviderBBlock { turn_detection: Some(TurnDetection::SemanticVad), eagerness, ..ProviderBBlock::default() };
        let mut setup = SessionSetup::new(model(ProviderBlock::ProviderB(block)), "p");
        setup.interruption_sensitivity = sensitivity;
        let update = svc_provider::realtime::session_update(&setup, Dialect::OpenAi, "p");
        update["session"]["audio"]["input"]["turn_detection"]["eagerness"].clone()
    };
    assert_eq!(semantic(None, InterruptionSensitivity::Default), json!("auto"));
    assert_eq!(semantic(None, InterruptionSensitivity::Low), json!("low"));
    assert_eq!(semantic(None, InterruptionSensitivity::High), json!("high"));
    assert_eq!(
        semantic(Some(Eagerness::Medium), InterruptionSensitivity::High),
        json!("medium"),
        "an explicit eagerness wins"
    );

    let live = |sensitivity| {
        let mut setup =
            SessionSetup::new(model(ProviderBlock::ProviderBLive(ProviderBLiveBlock::default())), "Be kind.");
        setup.interruption_sensitivity = sensitivity;
        svc_provider::gpt_live::session_start(&setup, &[], "e1")["session"]["instructions"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(live(InterruptionSensitivity::Default), "Be kind.");
    assert!(live(InterruptionSensitivity::Low).contains("do not stop for short sounds"));
    assert!(live(InterruptionSensitivity::High).contains("Stop speaking as soon as the caller starts to talk"));
}
