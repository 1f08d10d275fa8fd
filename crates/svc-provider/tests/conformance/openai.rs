//! OpenAI Realtime (provider_b, provider_b_mini) against the openai SDK oracle
//! (`tests/conformance/realtime_server.py`): every client event svc sends is validated by
//! `openai.types.realtime`, every server event is built by it. The helpers shared with xAI's
//! tests (same protocol family, same codec) live here too.

use std::time::Duration;

use serde_json::{Value, json};
use svc_domain::model::{ProviderBBlock, ProviderBMiniBlock, ProviderBlock, TurnDetection};
use svc_domain::session_config::InterruptionSensitivity;
use svc_provider::codec::heard_text;
use svc_provider_core::{ProviderError, ProviderEvent, ProviderInput, ResponseStatus, SessionSetup, ToolDecl};
use svc_wire::rest::UsageTokens;

use crate::fake::{self, Adapter, Mode, PyFake, model};

const FAMILY: &str = "openai";
/// Reply audio rate of the OpenAI-compatible realtime protocols.
pub(crate) const RATE_HZ: u64 = 24_000;

fn provider_b(block: ProviderBBlock) -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderB(block)), "You are a courteous shop assistant.")
}

fn server_vad() -> SessionSetup {
    provider_b(ProviderBBlock { turn_detection: Some(TurnDetection::ServerVad), ..ProviderBBlock::default() })
}

fn mini() -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderBMini(ProviderBMiniBlock::default())), "Be brief.")
}

pub(crate) fn lookup_tool() -> ToolDecl {
    ToolDecl {
        name: "lookup_order".to_owned(),
        description: "Look up an order".to_owned(),
        parameters: json!({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}),
    }
}

// ---- helpers shared with xai.rs ---------------------------------------------------------------

/// The facts a scenario recorded (`Conn.fact` in wire.py).
pub(crate) fn facts(report: &Value) -> &Value {
    report.get("facts").unwrap_or(&Value::Null)
}

/// svc closed the connection itself, with 1000.
pub(crate) fn assert_closed_by_svc(mode: Mode, report: &Value) {
    let code = report.pointer("/client_close/code").and_then(Value::as_u64);
    assert_eq!(code, Some(1000), "{mode}: svc's close frame: {:?}", report.get("client_close"));
}

/// The adapter reported no error at all.
pub(crate) fn assert_no_errors(mode: Mode, adapter: &Adapter) {
    let errors: Vec<ProviderError> = adapter.errors();
    assert!(errors.is_empty(), "{mode}: the adapter reported errors: {errors:#?}");
}

/// The last cumulative usage the adapter reported.
pub(crate) fn last_usage(events: &[ProviderEvent]) -> Option<UsageTokens> {
    events.iter().rev().find_map(|event| match event {
        ProviderEvent::Usage(tokens) => Some(tokens.clone()),
        _ => None,
    })
}

/// Final assistant transcripts, in order.
pub(crate) fn assistant_finals(events: &[ProviderEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::AssistantTranscript { text, is_final: true } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Final user transcripts, in order.
pub(crate) fn user_finals(events: &[ProviderEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::UserTranscript { text, is_final: true, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// The responses the fake played (`Played.fact` in realtime_server.py).
pub(crate) fn played(report: &Value) -> Vec<Value> {
    facts(report).get("responses").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn count(value: &Value, pointer: &str) -> i64 {
    value.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// What the fake's `response.done` usages add up to, mapped field by field as providers.md §3.7
/// (OpenAI) and §5.4 (xAI: the three totals only) say.
pub(crate) fn expected_usage(responses: &[Value], xai: bool) -> UsageTokens {
    let mut total = UsageTokens::default();
    for usage in responses.iter().filter_map(|response| response.get("usage")) {
        total.input_tokens += count(usage, "/input_tokens");
        total.output_tokens += count(usage, "/output_tokens");
        total.total_tokens += count(usage, "/total_tokens");
        if !xai {
            total.input_text_tokens += count(usage, "/input_token_details/text_tokens");
            total.input_audio_tokens += count(usage, "/input_token_details/audio_tokens");
            total.input_image_tokens += count(usage, "/input_token_details/image_tokens");
            total.input_cached_tokens += count(usage, "/input_token_details/cached_tokens");
            total.output_text_tokens += count(usage, "/output_token_details/text_tokens");
            total.output_audio_tokens += count(usage, "/output_token_details/audio_tokens");
        }
    }
    total
}

/// User audio as the runtime sends it to these adapters (24 kHz mono, their input rate, in
/// 20 ms frames) of a `hz` tone lasting `ms`.
pub(crate) fn user_tone(ms: u32, hz: f64) -> Vec<Vec<i16>> {
    let samples_per_frame = 480;
    let frames = ms as usize / 20;
    (0..frames)
        .map(|frame| {
            (0..samples_per_frame)
                .map(|n| {
                    let t = (frame * samples_per_frame + n) as f64 / 24_000.0;
                    (8000.0 * (2.0 * std::f64::consts::PI * hz * t).sin()) as i16
                })
                .collect()
        })
        .collect()
}

/// Runs `scenario` in every mode at once, each against its own fake: the modes' waits overlap.
pub(crate) async fn in_every_mode<F, Fut>(scenario: F)
where
    F: Fn(Mode) -> Fut,
    Fut: Future<Output = ()>,
{
    futures_util::future::join_all(fake::modes().into_iter().map(scenario)).await;
}

/// Starts the adapter on `scenario` and waits until it is ready.
pub(crate) async fn ready(fake: &PyFake, family: &str, scenario: &str, setup: SessionSetup) -> Adapter {
    let mut adapter = Adapter::start(setup, &fake.env(family, scenario), fake.mode);
    adapter.ready().await;
    adapter
}

/// A typed turn: what the adapter reports matches what the fake played, exactly.
pub(crate) async fn typed_turn(family: &str, setup: SessionSetup, xai: bool) {
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "typed_turn", setup.clone()).await;
        adapter.send(ProviderInput::Text("Where is my order 42?".to_owned())).await;
        adapter.wait("the reply's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        let samples = adapter.audio_samples();
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        let responses = played(report);
        assert_eq!(responses.len(), 1, "{mode}: {responses:?}");
        let user_items = facts(report)["user_items"].clone();
        assert_eq!(
            user_items,
            json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is my order 42?"}]}]),
            "{mode}"
        );
        assert_eq!(samples as u64, responses[0]["samples"].as_u64().unwrap_or(0), "{mode}: reply audio samples");
        assert_eq!(assistant_finals(&events), [responses[0]["transcript"].as_str().unwrap_or("?")], "{mode}");
        assert!(
            events.contains(&ProviderEvent::ResponseDone { status: ResponseStatus::Completed }),
            "{mode}: {events:#?}"
        );
        assert_eq!(last_usage(&events), Some(expected_usage(&responses, xai)), "{mode}: usage");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

/// A typed turn in a text-only session (`audio.output = false`), answered in text: model-text
/// fragments, then the whole text (xAI's deltas come under both of its event names).
pub(crate) async fn text_reply(family: &str, mut setup: SessionSetup, xai: bool) {
    setup.text_only = true;
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "text_reply", setup.clone()).await;
        adapter.send(ProviderInput::Text("Where is my order 42?".to_owned())).await;
        adapter.wait("the reply's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        let text = played(report)[0]["transcript"].as_str().unwrap_or("?").to_owned();
        let fragments: String = events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ModelText { text, is_final: false, thought: false } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(fragments, text, "{mode}: every text delta, whatever its event name");
        let finals: Vec<&ProviderEvent> =
            events.iter().filter(|e| matches!(e, ProviderEvent::ModelText { is_final: true, .. })).collect();
        assert_eq!(
            finals,
            [&ProviderEvent::ModelText { text: text.clone(), is_final: true, thought: false }],
            "{mode}"
        );
        assert_eq!(adapter_audio(&events), 0, "{mode}");
        if !xai {
            let session = &facts(report)["session_update"]["session"];
            assert_eq!(session["output_modalities"], json!(["text"]), "{mode}");
            assert!(session["audio"].get("output").is_none(), "{mode}: no audio output configured: {session}");
        }
        assert_eq!(last_usage(&events), Some(expected_usage(&played(report), xai)), "{mode}: usage");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

/// Samples of assistant audio among `events`.
pub(crate) fn adapter_audio(events: &[ProviderEvent]) -> usize {
    events
        .iter()
        .map(|e| match e {
            ProviderEvent::AssistantAudio { pcm, .. } => pcm.len(),
            _ => 0,
        })
        .sum()
}

/// A spoken user turn under server VAD: speech markers, the input transcription, the server's
/// response; and the audio svc appended is PCM16 at 24 kHz (the tone reads as itself).
pub(crate) async fn audio_turn(family: &str, setup: SessionSetup, xai: bool) {
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "audio_turn", setup.clone()).await;
        for frame in user_tone(1200, 1000.0) {
            adapter.send(ProviderInput::NativeAudio(frame)).await;
        }
        adapter.wait("the reply's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        let facts = facts(report);
        let started = events.iter().position(|e| *e == ProviderEvent::UserSpeechStarted);
        let stopped = events.iter().position(|e| *e == ProviderEvent::UserSpeechStopped);
        assert!(started.is_some() && started < stopped, "{mode}: speech markers in order: {events:#?}");
        let transcript = facts["user_transcripts"][0].as_str().unwrap_or("?");
        assert_eq!(user_finals(&events), [transcript], "{mode}: the user's final transcript");
        let fragments: String = events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::UserTranscript { text, is_final: false, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(transcript.starts_with(&fragments), "{mode}: fragments {fragments:?} of {transcript:?}");
        if !xai {
            assert_eq!(fragments, transcript, "{mode}: OpenAI's deltas add up to the transcript");
        }
        let responses = played(report);
        assert_eq!(assistant_finals(&events), [responses[0]["transcript"].as_str().unwrap_or("?")], "{mode}");
        assert_eq!(last_usage(&events), Some(expected_usage(&responses, xai)), "{mode}: usage");
        // 1.2 s of room audio at 48 kHz is 28,800 samples at 24 kHz, less the resampler's delay.
        let samples = facts["input_samples"].as_u64().unwrap_or(0);
        assert!((27_800..=28_800).contains(&samples), "{mode}: {samples} input samples appended");
        let hz = facts["input_tone_hz"].as_f64().unwrap_or(0.0);
        assert!((hz - 1000.0).abs() < 30.0, "{mode}: the 1 kHz tone reads as {hz} Hz at 24 kHz");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

/// The client ends a spoken turn (`activity-end`) while the server's detector still hears
/// speech: svc commits the buffer (≥ 100 ms of it, as the service requires) and asks for the
/// answer, which comes; the user's speech is reported stopped.
pub(crate) async fn activity_end(family: &str, setup: SessionSetup) {
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "activity_end", setup.clone()).await;
        for frame in user_tone(600, 1000.0) {
            adapter.send(ProviderInput::NativeAudio(frame)).await;
        }
        adapter.wait("speech started", |e| *e == ProviderEvent::UserSpeechStarted).await;
        adapter.send(ProviderInput::ActivityEnd).await;
        adapter.wait("the reply's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        assert_closed_by_svc(mode, report);
        let started = events.iter().position(|e| *e == ProviderEvent::UserSpeechStarted);
        let stopped = events.iter().position(|e| *e == ProviderEvent::UserSpeechStopped);
        assert!(started.is_some() && started < stopped, "{mode}: speech markers in order: {:?}", fake::brief(&events));
        let transcript = facts(report)["user_transcripts"][0].as_str().unwrap_or("?");
        assert_eq!(user_finals(&events), [transcript], "{mode}: the user's final transcript");
        let responses = played(report);
        assert_eq!(assistant_finals(&events), [responses[0]["transcript"].as_str().unwrap_or("?")], "{mode}");
        let commits = fake::client_messages(report).iter().filter(|m| m["type"] == "input_audio_buffer.commit").count();
        assert_eq!(commits, 1, "{mode}: one commit");
    })
    .await;
}

/// Server-VAD barge-in ten times back to back. The test is the runtime: on `Interrupted` it
/// answers `BargeIn` with a share of the audio received. The cancelled response's transcript
/// `done` and `response.done` arrive at once after `speech_started`; the final transcript of
/// each must still be what was heard, and every truncate must validate.
pub(crate) async fn barge_in(family: &str, setup: SessionSetup, xai: bool) {
    const BARGE_INS: u64 = 10;
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "barge_in", setup.clone()).await;
        adapter.send(ProviderInput::Text("Tell me about my order.".to_owned())).await;
        let (mut interrupts, mut received, mut text) = (0u64, 0u64, String::new());
        let mut heard = Vec::new();
        let mut played_ms = Vec::new();
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
                    played_ms.push(played);
                }
                ProviderEvent::ResponseDone { status: ResponseStatus::Completed } if interrupts == BARGE_INS => break,
                _ => {}
            }
        }
        // Late events of the last turn (none expected) are kept too.
        adapter.drain_for(Duration::from_millis(100)).await;
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        let responses = played(report);
        assert_eq!(responses.len() as u64, BARGE_INS + 1, "{mode}");
        let truncations: Vec<u64> = facts(report)["truncations"]
            .as_array()
            .map(|all| all.iter().filter_map(|t| t["audio_end_ms"].as_u64()).collect())
            .unwrap_or_default();
        assert_eq!(truncations, played_ms, "{mode}: one truncate per barge-in, at the played position");
        let mut expected = heard;
        expected.push(responses[BARGE_INS as usize]["transcript"].as_str().unwrap_or("?").to_owned());
        let finals = assistant_finals(&events);
        let truncated: Vec<&ProviderEvent> =
            events.iter().filter(|e| matches!(e, ProviderEvent::AssistantTruncated { .. })).collect();
        assert_eq!(
            finals, expected,
            "{mode}: each cut response's final transcript must be the heard share (later corrections: {truncated:#?})"
        );
        assert_eq!(user_finals(&events).len() as u64, BARGE_INS, "{mode}: one user turn per barge-in");
        assert_eq!(last_usage(&events), Some(expected_usage(&responses, xai)), "{mode}: cancelled responses bill too");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

/// The model calls a tool; the result goes back as one `function_call_output` and one
/// `response.create`, and the answer is spoken.
pub(crate) async fn tool_call(family: &str, mut setup: SessionSetup, xai: bool) {
    setup.tools = vec![lookup_tool()];
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "tool_call", setup.clone()).await;
        adapter.send(ProviderInput::Text("Where is order 42?".to_owned())).await;
        let call = adapter.wait("the tool call", |e| matches!(e, ProviderEvent::ToolCall { .. })).await;
        let ProviderEvent::ToolCall { call_id, name, arguments } = call else { unreachable!("matched above") };
        assert_eq!((name.as_str(), &arguments), ("lookup_order", &json!({"order_id": "42", "verbose": false})));
        let output = json!({"status": "shipped"});
        adapter
            .send(ProviderInput::ToolResult { call_id: call_id.clone(), output, is_error: false, scheduling: None })
            .await;
        // Until the spoken answer ends (its final transcript, then the end of its response; the
        // call's own response may end after the result went in), no call may be announced again:
        // the runtime answers each exactly once, so a second announcement stalls the turn.
        for what in ["the spoken answer", "the answer's end"] {
            let event = adapter
                .wait(what, |e| match e {
                    ProviderEvent::AssistantTranscript { is_final: true, .. } => what == "the spoken answer",
                    ProviderEvent::ResponseDone { .. } => what == "the answer's end",
                    ProviderEvent::ToolCall { .. } => true,
                    _ => false,
                })
                .await;
            assert!(
                !matches!(event, ProviderEvent::ToolCall { .. }),
                "{mode}: call {call_id} announced again after it was answered: {event:?}; seen: {:#?}",
                fake::brief(&adapter.seen)
            );
        }
        assert_no_errors(mode, &adapter);
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let report = &reports[0];
        let responses = played(report);
        assert_eq!(responses[0]["call"]["call_id"].as_str(), Some(call_id.as_str()), "{mode}");
        assert_eq!(
            facts(report)["tool_output_item"],
            json!({"type": "function_call_output", "call_id": call_id, "output": "{\"status\":\"shipped\"}"}),
            "{mode}"
        );
        assert_eq!(assistant_finals(&events), [responses[1]["transcript"].as_str().unwrap_or("?")], "{mode}");
        assert_eq!(last_usage(&events), Some(expected_usage(&responses, xai)), "{mode}: usage");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

/// An `invalid_request_error` refusing one command fails that turn only; the next is answered.
pub(crate) async fn per_turn_error(family: &str, setup: SessionSetup) {
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "per_turn_error", setup.clone()).await;
        adapter.send(ProviderInput::Text("First question.".to_owned())).await;
        let error = adapter.wait("the error", |e| matches!(e, ProviderEvent::Error(_))).await;
        adapter.send(ProviderInput::Text("Second question.".to_owned())).await;
        adapter.wait("the second answer's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let sent = facts(&reports[0])["error"].clone();
        assert_eq!(
            error,
            ProviderEvent::Error(ProviderError {
                fatal: false,
                code: sent[1].as_str().unwrap_or("?").to_owned(),
                message: sent[2].as_str().unwrap_or("?").to_owned(),
            }),
            "{mode}"
        );
        let errors = events.iter().filter(|e| matches!(e, ProviderEvent::Error(_))).count();
        assert_eq!(errors, 1, "{mode}: {events:#?}");
        assert_eq!(assistant_finals(&events).len(), 1, "{mode}: the second turn is answered");
        assert_closed_by_svc(mode, &reports[0]);
        fake.stop().await;
    })
    .await;
}

/// A billing error ends the session: one fatal error, `Closed`, and svc closes with 1000.
pub(crate) async fn fatal_error(family: &str, setup: SessionSetup) {
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "fatal_error", setup.clone()).await;
        adapter.wait("the session's end", |e| matches!(e, ProviderEvent::Closed { .. })).await;
        let events = adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let errors: Vec<&ProviderEvent> = events.iter().filter(|e| matches!(e, ProviderEvent::Error(_))).collect();
        assert_eq!(
            errors,
            [&ProviderEvent::Error(ProviderError {
                fatal: true,
                code: "insufficient_quota".to_owned(),
                message: "You exceeded your current quota.".to_owned(),
            })],
            "{mode}"
        );
        assert_closed_by_svc(mode, &reports[0]);
        fake.stop().await;
    })
    .await;
}

/// The service closes the socket (1001): svc answers the close frame, reconnects, and closes the
/// new connection itself with 1000 at the end.
pub(crate) async fn server_close(family: &str, setup: SessionSetup) {
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "server_close", setup.clone()).await;
        adapter.wait("reconnecting", |e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
        adapter.wait("reconnected", |e| matches!(e, ProviderEvent::Reconnected { .. })).await;
        assert_no_errors(mode, &adapter);
        adapter.close().await;
        let reports = fake.assert_conforms(2).await;
        let first = reports.iter().find(|r| r["closed_by_fake"].is_array()).expect("the connection the fake closed");
        assert_eq!(first["closed_by_fake"][0].as_u64(), Some(1001), "{mode}");
        assert_eq!(first["client_answered_close"], json!(true), "{mode}: svc must answer the close frame");
        let second = reports.iter().find(|r| r["closed_by_fake"].is_null()).expect("the second connection");
        assert_closed_by_svc(mode, second);
        fake.stop().await;
    })
    .await;
}

/// The values of the frames a connection got, from the fake's runs of one value.
fn frames_received(report: &Value) -> Vec<i64> {
    report["facts"]["input_runs"]
        .as_array()
        .map(|runs| runs.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

/// The connection fails mid-speech with no close frame (`drop_mid_speech`): every frame of the
/// user's audio reaches the service, in order, across the two connections, and what the first
/// confirmed reading (a pong) is not sent again.
pub(crate) async fn drop_mid_speech(family: &str, setup: SessionSetup) {
    const FRAMES: i16 = 150;
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, family, "drop_mid_speech", setup.clone()).await;
        // 3 s of 20 ms frames at real time, frame k all of value k.
        let mut ticks = tokio::time::interval(Duration::from_millis(20));
        for value in 1..=FRAMES {
            ticks.tick().await;
            adapter.send(ProviderInput::NativeAudio(vec![value; (RATE_HZ / 50) as usize])).await;
        }
        adapter.wait("reconnected", |e| matches!(e, ProviderEvent::Reconnected { .. })).await;
        adapter.drain_for(Duration::from_millis(300)).await;
        assert_no_errors(mode, &adapter);
        adapter.close().await;
        let reports = fake.assert_conforms(2).await;
        let first = reports.iter().find(|r| r["closed_by_fake"] == json!([1006, "cut"])).expect("the cut connection");
        let second = reports.iter().find(|r| r["closed_by_fake"].is_null()).expect("the second connection");
        let (read, replayed) = (frames_received(first), frames_received(second));
        let last_read = *read.last().expect("the first connection got audio");
        assert_eq!(read, (1..=last_read).collect::<Vec<_>>(), "{mode}: the first connection's audio, in order");
        let resumed_at = *replayed.first().expect("the second connection got audio");
        assert_eq!(
            replayed,
            (resumed_at..=i64::from(FRAMES)).collect::<Vec<_>>(),
            "{mode}: the second connection gets everything from where it resumes, in order"
        );
        assert!(resumed_at <= last_read + 1, "{mode}: frames {} to {} were lost", last_read + 1, resumed_at - 1);
        assert!(resumed_at > 1, "{mode}: the audio a pong confirmed was sent again (from frame {resumed_at})");
        fake.stop().await;
    })
    .await;
}

// ---- provider_b / provider_b_mini ---------------------------------------------------------------

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_session_config_and_greeting() {
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
        assert!(report["path"].as_str().unwrap_or("").ends_with("/v1/realtime?model=gpt-realtime-2"), "{mode}");
        assert_eq!(
            facts(report)["session_update"],
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
            }}),
            "{mode}"
        );
        let greeting = &facts(report)["greeting_create"];
        let instructions = greeting.pointer("/response/instructions").and_then(Value::as_str).unwrap_or("");
        assert!(instructions.contains("Welcome to the shop!"), "{mode}: {greeting}");
        assert_eq!(assistant_finals(&events), [played(report)[0]["transcript"].as_str().unwrap_or("?")], "{mode}");
        assert_closed_by_svc(mode, report);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_mini_session_config() {
    let mut setup = mini();
    setup.greeting = Some("Hello!".to_owned());
    let setup = &setup;
    in_every_mode(|mode| async move {
        let fake = PyFake::start(mode).await;
        let mut adapter = ready(&fake, FAMILY, "config", setup.clone()).await;
        adapter.wait("the greeting's end", |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
        assert_no_errors(mode, &adapter);
        adapter.close().await;
        let reports = fake.assert_conforms(1).await;
        let session = &facts(&reports[0])["session_update"]["session"];
        assert_eq!(session["model"], json!("gpt-realtime-2.1-mini"), "{mode}");
        assert_eq!(
            session["audio"]["input"]["turn_detection"],
            json!({"type": "semantic_vad", "eagerness": "auto", "create_response": true, "interrupt_response": true}),
            "{mode}"
        );
        assert_closed_by_svc(mode, &reports[0]);
        fake.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_typed_turn() {
    typed_turn(FAMILY, provider_b(ProviderBBlock::default()), false).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_mini_typed_turn() {
    typed_turn(FAMILY, mini(), false).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_text_only_reply() {
    text_reply(FAMILY, provider_b(ProviderBBlock::default()), false).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_audio_turn_under_server_vad() {
    audio_turn(FAMILY, server_vad(), false).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_activity_end_commits_the_turn() {
    activity_end(FAMILY, server_vad()).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_barge_in_ten_times() {
    barge_in(FAMILY, server_vad(), false).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_tool_call_round_trip() {
    tool_call(FAMILY, provider_b(ProviderBBlock::default()), false).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_per_turn_error_keeps_the_session() {
    per_turn_error(FAMILY, provider_b(ProviderBBlock::default())).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_fatal_error_ends_the_session() {
    fatal_error(FAMILY, provider_b(ProviderBBlock::default())).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_server_close_is_answered() {
    server_close(FAMILY, provider_b(ProviderBBlock::default())).await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn provider_b_drop_mid_speech_loses_no_audio() {
    drop_mid_speech(FAMILY, provider_b(ProviderBBlock::default())).await;
}
