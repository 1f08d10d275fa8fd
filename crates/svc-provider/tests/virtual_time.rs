//! Timing behaviour of the sans-IO codecs in virtual time: no sockets, no sleeping — the test owns
//! the clock and drives `handle_*` / `poll_*` directly.

mod common;

use std::time::{Duration, Instant};

use common::{connects, drain, model, request};
use serde_json::json;
use svc_domain::model::{ProviderABlock, ProviderBBlock, ProviderBLiveBlock, ProviderBlock};
use svc_provider::codec::{Codec, ConnectFailure, Transmit};
use svc_provider::gemini::GeminiCodec;
use svc_provider::gpt_live::{Backend, GptLiveCodec};
use svc_provider::realtime::{Dialect, RealtimeCodec};
use svc_provider::unread::ReadReceipt;
use svc_provider_core::{ProviderError, ProviderEvent, ProviderInput, SessionSetup, ToolDecl};

fn openai_ready(t0: Instant) -> RealtimeCodec {
    let setup = SessionSetup::new(model(ProviderBlock::ProviderB(ProviderBBlock::default())), "p");
    let mut codec = RealtimeCodec::new(setup, Dialect::OpenAi, request());
    codec.handle_connected(t0);
    codec.handle_upstream_message(t0, br#"{"type":"session.created","session":{"id":"s1"}}"#);
    codec.handle_upstream_message(t0, br#"{"type":"session.updated","session":{"id":"s1"}}"#);
    drain(&mut codec);
    codec
}

fn gpt_live_ready(t0: Instant) -> GptLiveCodec {
    let setup = SessionSetup::new(model(ProviderBlock::ProviderBLive(ProviderBLiveBlock::default())), "p");
    let mut codec = GptLiveCodec::new(
        setup,
        request(),
        Backend { url: "http://x/v1/responses".to_owned(), headers: Vec::new(), model: "m".to_owned() },
    );
    codec.handle_connected(t0);
    codec.handle_upstream_message(t0, br#"{"type":"session.started","session":{"id":"l1"}}"#);
    drain(&mut codec);
    codec
}

#[test]
fn openai_rotation_waits_for_a_quiet_moment() {
    let t0 = Instant::now();
    let mut codec = openai_ready(t0);
    let due = t0 + Duration::from_secs(55 * 60);
    assert_eq!(codec.poll_timeout(), Some(due), "the timer is the cap minus the margin");
    // A response is running when the rotation falls due: no rotation yet.
    codec
        .handle_upstream_message(due - Duration::from_secs(1), br#"{"type":"response.created","response":{"id":"r"}}"#);
    codec.handle_timeout(due);
    let (transmits, events) = drain(&mut codec);
    assert_eq!(connects(&transmits), 0);
    assert!(!events.iter().any(|e| matches!(e, ProviderEvent::Reconnecting { .. })));
    // It ends; the last audio left 200 ms ago: still not quiet for 1 s.
    let audio = format!(
        r#"{{"type":"response.output_audio.delta","item_id":"i","delta":"{}"}}"#,
        svc_provider::codec::encode_pcm(&[0; 480])
    );
    codec.handle_upstream_message(due + Duration::from_secs(4), audio.as_bytes());
    codec.handle_upstream_message(
        due + Duration::from_millis(4200),
        br#"{"type":"response.done","response":{"status":"completed"}}"#,
    );
    let (transmits, _) = drain(&mut codec);
    assert_eq!(connects(&transmits), 0);
    let quiet_at = codec.poll_timeout().expect("timer");
    assert_eq!(quiet_at, due + Duration::from_secs(5), "one quiet second after the last audio");
    codec.handle_timeout(quiet_at);
    let (transmits, events) = drain(&mut codec);
    assert_eq!(connects(&transmits), 1);
    assert!(events.contains(&ProviderEvent::Reconnecting { seconds_remaining: None }));
}

#[test]
fn openai_rotation_forced_after_the_quiet_wait() {
    let t0 = Instant::now();
    let mut codec = openai_ready(t0);
    let due = t0 + Duration::from_secs(55 * 60);
    codec.handle_upstream_message(due, br#"{"type":"input_audio_buffer.speech_started","item_id":"u1"}"#);
    codec.handle_timeout(due);
    assert_eq!(connects(&drain(&mut codec).0), 0, "the user is speaking");
    let hard = codec.poll_timeout().expect("timer");
    assert_eq!(hard, due + Duration::from_secs(4 * 60));
    codec.handle_timeout(hard);
    assert_eq!(connects(&drain(&mut codec).0), 1, "rotated before the cap regardless");
}

#[test]
fn reconnects_back_off_within_a_budget_then_fail() {
    let t0 = Instant::now();
    let mut codec = openai_ready(t0);
    codec.handle_upstream_closed(t0, Some(1006), "reset");
    let (_, events) = drain(&mut codec);
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::Reconnecting { .. })));
    let mut delays = Vec::new();
    let mut now = t0;
    while let Some(at) = codec.poll_timeout() {
        delays.push(at - now);
        now = at;
        codec.handle_timeout(now);
        let (transmits, _) = drain(&mut codec);
        assert_eq!(connects(&transmits), 1, "one attempt per timer");
        codec.handle_connect_failed(now, ConnectFailure { status: Some(503), message: "unavailable".to_owned() });
        let (_, events) = drain(&mut codec);
        if let Some(ProviderEvent::Error(error)) = events.iter().find(|e| matches!(e, ProviderEvent::Error(_))) {
            assert!(error.fatal);
            assert_eq!(error.code, "reconnect_failed");
            assert!(events.iter().any(|e| matches!(e, ProviderEvent::Closed { .. })));
            break;
        }
    }
    let ms: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
    assert_eq!(&ms[..5], &[500, 1000, 2000, 4000, 4000]);
    assert!(now - t0 >= Duration::from_secs(30) && now - t0 < Duration::from_secs(35), "{:?}", now - t0);
    assert!(codec.is_closed());
    // A refused key on reconnect is fatal at once.
    let mut codec = openai_ready(t0);
    codec.handle_upstream_closed(t0, Some(1006), "reset");
    codec.handle_timeout(t0 + Duration::from_millis(500));
    codec.handle_connect_failed(
        t0 + Duration::from_millis(600),
        ConnectFailure { status: Some(401), message: "HTTP 401".to_owned() },
    );
    let (_, events) = drain(&mut codec);
    assert!(
        events.iter().any(|e| matches!(e, ProviderEvent::Error(error) if error.fatal && error.code == "unauthorized"))
    );
}

#[test]
fn gemini_go_away_waits_for_the_post_tool_handle() {
    let t0 = Instant::now();
    let mut setup = SessionSetup::new(model(ProviderBlock::ProviderA(ProviderABlock::default())), "p");
    setup.tools = vec![ToolDecl {
        name: "lookup".to_owned(),
        description: "d".to_owned(),
        parameters: json!({"type": "object"}),
    }];
    let mut codec = GeminiCodec::new(setup, request());
    codec.handle_connected(t0);
    codec.handle_upstream_message(t0, br#"{"setupComplete":{}}"#);
    codec.handle_upstream_message(t0, br#"{"sessionResumptionUpdate":{"newHandle":"h1","resumable":true}}"#);
    codec.handle_upstream_message(t0, br#"{"toolCall":{"functionCalls":[{"id":"c1","name":"lookup","args":{}}]}}"#);
    codec.handle_upstream_message(t0, br#"{"sessionResumptionUpdate":{"newHandle":"","resumable":false}}"#);
    drain(&mut codec);
    codec.handle_upstream_message(t0 + Duration::from_secs(1), br#"{"goAway":{"timeLeft":"20s"}}"#);
    let (transmits, events) = drain(&mut codec);
    assert_eq!(connects(&transmits), 0, "a tool call is open: a handle from before it would lose it");
    assert!(events.contains(&ProviderEvent::Reconnecting { seconds_remaining: Some(20.0) }));
    assert_eq!(codec.poll_timeout(), Some(t0 + Duration::from_secs(20)), "deadline: time left minus a second");
    codec.handle_input(
        t0 + Duration::from_secs(2),
        ProviderInput::ToolResult { call_id: "c1".to_owned(), output: json!(1), is_error: false, scheduling: None },
    );
    assert_eq!(connects(&drain(&mut codec).0), 0, "still waiting for a resumable handle");
    codec.handle_upstream_message(
        t0 + Duration::from_secs(3),
        br#"{"sessionResumptionUpdate":{"newHandle":"h2","resumable":true}}"#,
    );
    let (transmits, _) = drain(&mut codec);
    assert_eq!(connects(&transmits), 1);
    assert_eq!(codec.resumption_handle(), Some("h2"));
    codec.handle_connected(t0 + Duration::from_secs(4));
    let (transmits, _) = drain(&mut codec);
    let Some(Transmit::Text(setup)) = transmits.first() else { panic!("setup first: {transmits:?}") };
    assert!(setup.contains(r#""handle":"h2""#), "{setup}");
    // Without a handle update the deadline forces the resume with the latest handle.
    let mut codec =
        GeminiCodec::new(SessionSetup::new(model(ProviderBlock::ProviderA(ProviderABlock::default())), "p"), request());
    codec.handle_connected(t0);
    codec.handle_upstream_message(t0, br#"{"setupComplete":{}}"#);
    codec.handle_upstream_message(t0, br#"{"sessionResumptionUpdate":{"newHandle":"h1","resumable":false}}"#);
    drain(&mut codec);
    codec.handle_upstream_message(t0, br#"{"goAway":{"timeLeft":"5s"}}"#);
    assert_eq!(connects(&drain(&mut codec).0), 0);
    codec.handle_timeout(t0 + Duration::from_secs(4));
    assert_eq!(connects(&drain(&mut codec).0), 1);
}

#[test]
fn gpt_live_user_turn_ends_on_silence_in_virtual_time() {
    let t0 = Instant::now();
    let mut codec = gpt_live_ready(t0);
    codec.handle_upstream_message(
        t0 + Duration::from_millis(100),
        br#"{"type":"session.input_transcript.delta","delta":"hi ","start_ms":0,"end_ms":300}"#,
    );
    codec.handle_upstream_message(
        t0 + Duration::from_millis(400),
        br#"{"type":"session.input_transcript.delta","delta":"there","start_ms":400,"end_ms":700}"#,
    );
    // A fragment 1.2 s later on the model's clock starts a new turn.
    codec.handle_upstream_message(
        t0 + Duration::from_millis(500),
        br#"{"type":"session.input_transcript.delta","delta":"again","start_ms":1900,"end_ms":2100}"#,
    );
    let (_, events) = drain(&mut codec);
    let finals: Vec<&ProviderEvent> =
        events.iter().filter(|e| matches!(e, ProviderEvent::UserTranscript { is_final: true, .. })).collect();
    assert_eq!(
        finals,
        vec![&ProviderEvent::UserTranscript { text: "hi there".to_owned(), is_final: true, speech_started_ms: 100 }]
    );
    // No further fragment: the turn ends 0.8 s after the last one.
    let end = codec.poll_timeout().expect("turn timer");
    assert_eq!(end, t0 + Duration::from_millis(1300));
    codec.handle_timeout(end);
    let (_, events) = drain(&mut codec);
    assert!(events.contains(&ProviderEvent::UserTranscript {
        text: "again".to_owned(),
        is_final: true,
        speech_started_ms: 500
    }));
    assert!(events.contains(&ProviderEvent::UserSpeechStopped));
}

#[test]
fn commands_given_during_a_reconnect_are_sent_once_it_is_back() {
    let t0 = Instant::now();
    let mut codec = openai_ready(t0);
    codec.handle_upstream_closed(t0, Some(1006), "reset");
    drain(&mut codec);
    codec.handle_input(t0 + Duration::from_millis(100), ProviderInput::Text("still there?".to_owned()));
    codec.handle_input(t0 + Duration::from_millis(100), ProviderInput::Context("VIP caller".to_owned()));
    let (transmits, _) = drain(&mut codec);
    assert!(transmits.iter().all(|t| !matches!(t, Transmit::Text(_))), "nothing goes out while the link is down");
    codec.handle_timeout(t0 + Duration::from_millis(500));
    codec.handle_connected(t0 + Duration::from_millis(600));
    codec.handle_upstream_message(
        t0 + Duration::from_millis(600),
        br#"{"type":"session.created","session":{"id":"s2"}}"#,
    );
    codec.handle_upstream_message(
        t0 + Duration::from_millis(700),
        br#"{"type":"session.updated","session":{"id":"s2"}}"#,
    );
    let (transmits, events) = drain(&mut codec);
    assert!(events.contains(&ProviderEvent::Reconnected { resumed: false }));
    let texts: Vec<String> = transmits
        .into_iter()
        .filter_map(|t| match t {
            Transmit::Text(text) => Some(text),
            _ => None,
        })
        .collect();
    let position =
        |needle: &str| texts.iter().position(|t| t.contains(needle)).unwrap_or_else(|| panic!("{needle} in {texts:?}"));
    assert!(position("session.update") < position("\"text\":\"still there?\""));
    assert!(position("\"text\":\"still there?\"") < position("VIP caller"));
    assert!(position("VIP caller") < position("response.create"), "the turn's response after its item");
    assert_eq!(texts.iter().filter(|t| t.contains("response.create")).count(), 1);
}

#[test]
fn a_turn_typed_while_the_user_speaks_is_answered_when_they_stop() {
    let t0 = Instant::now();
    let mut codec = openai_ready(t0);
    codec.handle_upstream_message(t0, br#"{"type":"input_audio_buffer.speech_started","item_id":"u1"}"#);
    codec.handle_input(t0, ProviderInput::Text("typed".to_owned()));
    let (transmits, _) = drain(&mut codec);
    assert!(
        !transmits.iter().any(|t| matches!(t, Transmit::Text(text) if text.contains("response.create"))),
        "held back"
    );
    codec.handle_upstream_message(
        t0 + Duration::from_millis(500),
        br#"{"type":"input_audio_buffer.speech_stopped","item_id":"u1"}"#,
    );
    let (transmits, _) = drain(&mut codec);
    assert!(transmits.iter().any(|t| matches!(t, Transmit::Text(text) if text.contains("response.create"))));
}

#[test]
fn an_event_without_its_item_id_fails_the_turn_once_and_is_not_filed_under_an_empty_id() {
    let t0 = Instant::now();
    let mut codec = openai_ready(t0);
    codec.handle_upstream_message(t0, br#"{"type":"response.created","response":{"id":"r1"}}"#);
    drain(&mut codec);
    // Two deltas without an item_id: one non-fatal error for the turn, no audio, no transcript.
    let pcm = "AAAAAAAAAAAAAAAAAAAAAA==";
    for _ in 0..2 {
        codec.handle_upstream_message(
            t0,
            format!(r#"{{"type":"response.output_audio.delta","delta":"{pcm}"}}"#).as_bytes(),
        );
        codec.handle_upstream_message(t0, br#"{"type":"response.output_audio_transcript.delta","delta":"lost"}"#);
    }
    let (_, events) = drain(&mut codec);
    let errors: Vec<&ProviderError> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::Error(error) => Some(error),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{events:?}");
    assert_eq!((errors[0].fatal, errors[0].code.as_str()), (false, "missing_item_id"));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::AssistantAudio { .. } | ProviderEvent::AssistantTranscript { .. }))
    );
    // The same turn's well-formed events still play.
    codec.handle_upstream_message(
        t0,
        format!(r#"{{"type":"response.output_audio.delta","item_id":"a1","delta":"{pcm}"}}"#).as_bytes(),
    );
    let (_, events) = drain(&mut codec);
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::AssistantAudio { .. })), "{events:?}");
}

/// A voiced 100 ms at 24 kHz (a 440 Hz tone) as a base64 audio delta's payload.
fn voiced_delta() -> String {
    let tone: Vec<i16> =
        (0..2_400).map(|n| ((n as f64 * 440.0 / 24_000.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16).collect();
    svc_provider::codec::encode_pcm(&tone)
}

#[test]
fn openai_rotation_waiting_on_a_speaking_user_sleeps_until_it_must_act() {
    let t0 = Instant::now();
    let mut codec = openai_ready(t0);
    let due = t0 + Duration::from_secs(55 * 60);
    // The agent spoke long before the rotation fell due (its quiet gap is long over) ...
    let at = |s: u64| t0 + Duration::from_secs(s);
    codec.handle_upstream_message(at(9), br#"{"type":"response.created","response":{"id":"r"}}"#);
    let audio = format!(r#"{{"type":"response.output_audio.delta","item_id":"i","delta":"{}"}}"#, voiced_delta());
    codec.handle_upstream_message(at(10), audio.as_bytes());
    codec.handle_upstream_message(at(11), br#"{"type":"response.done","response":{"status":"completed"}}"#);
    // ... and the user is speaking when it does.
    codec.handle_upstream_message(
        due - Duration::from_secs(1),
        br#"{"type":"input_audio_buffer.speech_started","item_id":"u1"}"#,
    );
    codec.handle_timeout(due);
    assert_eq!(connects(&drain(&mut codec).0), 0, "the user is speaking");
    // The next wake-up is the hard deadline, not the quiet gap that ended an hour ago (a timer in
    // the past would wake the driver again at once, for as long as the user speaks).
    let next = codec.poll_timeout().expect("timer");
    assert_eq!(next, due + Duration::from_secs(4 * 60), "{:?} after the check", next.checked_duration_since(due));
    // The user stops: that event rotates at once, no timer needed.
    codec.handle_upstream_message(
        due + Duration::from_secs(3),
        br#"{"type":"input_audio_buffer.speech_stopped","item_id":"u1"}"#,
    );
    assert_eq!(connects(&drain(&mut codec).0), 1);
}

#[test]
fn gpt_live_rotation_waiting_on_speech_sleeps_until_it_must_act() {
    let t0 = Instant::now();
    let mut codec = gpt_live_ready(t0);
    let due = codec.poll_timeout().expect("the rotation timer");
    // The agent is speaking when the rotation falls due.
    let audio = format!(r#"{{"type":"session.output_audio.delta","delta":"{}"}}"#, voiced_delta());
    codec.handle_upstream_message(due - Duration::from_secs(1), audio.as_bytes());
    codec.handle_timeout(due);
    assert_eq!(connects(&drain(&mut codec).0), 0, "the agent is speaking");
    let next = codec.poll_timeout().expect("timer");
    assert!(next > due, "a timer at or before the last check wakes the driver again at once: {next:?} vs {due:?}");
    assert_eq!(next, due + Duration::from_secs(4 * 60));
    codec.handle_timeout(next);
    assert_eq!(connects(&drain(&mut codec).0), 1, "rotated regardless at the hard deadline");
}

/// The user audio in the frames of `transmits`, in order: base64 PCM at `pointer` in each.
fn audio_sent(transmits: &[Transmit], pointer: &str) -> Vec<i16> {
    transmits
        .iter()
        .filter_map(|t| match t {
            Transmit::Text(text) => serde_json::from_str::<serde_json::Value>(text).ok(),
            _ => None,
        })
        .filter_map(|frame| frame.pointer(pointer).and_then(|data| data.as_str()).map(str::to_owned))
        .flat_map(|data| svc_provider::codec::decode_pcm(&data).unwrap_or_default())
        .collect()
}

#[test]
fn gpt_live_replays_on_the_next_session_the_audio_a_dropped_link_never_confirmed_reading() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut codec = gpt_live_ready(t0);
    let frame = |value: i16| ProviderInput::NativeAudio(vec![value; 480]);
    // Read: a pong came for the ping sent after it.
    codec.handle_input(at(20), frame(1));
    codec.handle_read_receipt(at(25), ReadReceipt::PingSent);
    codec.handle_input(at(40), frame(2));
    codec.handle_read_receipt(at(45), ReadReceipt::PongReceived);
    // Not confirmed: sent after the confirmed ping, and after one that never got its pong.
    codec.handle_read_receipt(at(50), ReadReceipt::PingSent);
    codec.handle_input(at(60), frame(3));
    codec.handle_upstream_message(
        at(70),
        br#"{"type":"session.input_transcript.delta","delta":"my order","start_ms":0,"end_ms":60}"#,
    );
    drain(&mut codec);

    // The link drops mid-utterance (the partial transcript becomes a final turn as it goes).
    codec.handle_upstream_closed(at(100), Some(1006), "stalled");
    codec.handle_input(at(120), frame(4));
    codec.handle_timeout(at(600));
    codec.handle_connected(at(650));
    codec.handle_upstream_message(at(700), br#"{"type":"session.started","session":{"id":"l2"}}"#);
    let (transmits, events) = drain(&mut codec);
    assert!(events.contains(&ProviderEvent::Reconnected { resumed: false }), "{events:?}");
    let expected: Vec<i16> = [vec![2; 480], vec![3; 480], vec![4; 480]].concat();
    assert_eq!(audio_sent(&transmits, "/audio"), expected, "the unconfirmed audio, then the outage's");
}

#[test]
fn gemini_replays_the_unconfirmed_audio_once_whether_it_resumes_or_starts_afresh() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    for handle in [true, false] {
        let mut codec = GeminiCodec::new(
            SessionSetup::new(model(ProviderBlock::ProviderA(ProviderABlock::default())), "p"),
            request(),
        );
        codec.handle_connected(t0);
        codec.handle_upstream_message(t0, br#"{"setupComplete":{}}"#);
        if handle {
            codec.handle_upstream_message(t0, br#"{"sessionResumptionUpdate":{"newHandle":"h1","resumable":true}}"#);
        }
        drain(&mut codec);
        // Sent after the handle, and never confirmed read.
        codec.handle_read_receipt(at(10), ReadReceipt::PingSent);
        codec.handle_input(at(20), ProviderInput::NativeAudio(vec![7; 320]));
        drain(&mut codec);
        codec.handle_upstream_closed(at(100), Some(1006), "stalled");
        codec.handle_timeout(at(600));
        codec.handle_connected(at(650));
        codec.handle_upstream_message(at(700), br#"{"setupComplete":{}}"#);
        let (transmits, events) = drain(&mut codec);
        assert!(events.contains(&ProviderEvent::Reconnected { resumed: handle }), "{events:?}");
        // Resumed, the messages since the handle carry it; afresh, the unconfirmed audio does.
        assert_eq!(audio_sent(&transmits, "/realtimeInput/audio/data"), vec![7; 320], "handle: {handle}");
    }
}

#[test]
fn audio_replayed_onto_a_link_that_drops_again_before_reading_it_is_replayed_once_more() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut codec = openai_ready(t0);
    // The link drops and the next one becomes ready: what it was sent on becoming ready.
    let drop_and_reconnect = |codec: &mut RealtimeCodec, ms: u64| {
        codec.handle_upstream_closed(at(ms), Some(1006), "stalled");
        codec.handle_timeout(at(ms + 2_000));
        codec.handle_connected(at(ms + 2_050));
        codec.handle_upstream_message(at(ms + 2_100), br#"{"type":"session.created","session":{"id":"s2"}}"#);
        codec.handle_upstream_message(at(ms + 2_100), br#"{"type":"session.updated","session":{"id":"s2"}}"#);
        let (transmits, events) = drain(codec);
        assert!(events.contains(&ProviderEvent::Reconnected { resumed: false }), "{events:?}");
        audio_sent(&transmits, "/audio")
    };
    codec.handle_read_receipt(at(5), ReadReceipt::PingSent);
    codec.handle_input(at(20), ProviderInput::NativeAudio(vec![5; 480]));
    drain(&mut codec);
    assert_eq!(drop_and_reconnect(&mut codec, 100), vec![5; 480], "the first link never confirmed it");

    // The second link drops before a pong: the replayed audio was no more read than before.
    codec.handle_read_receipt(at(2_200), ReadReceipt::PingSent);
    codec.handle_input(at(2_220), ProviderInput::NativeAudio(vec![6; 480]));
    drain(&mut codec);
    let expected: Vec<i16> = [vec![5; 480], vec![6; 480]].concat();
    assert_eq!(drop_and_reconnect(&mut codec, 2_300), expected, "replayed, then what followed it");

    // The third link confirms reading it all: a third drop replays nothing.
    codec.handle_read_receipt(at(4_500), ReadReceipt::PingSent);
    codec.handle_read_receipt(at(4_510), ReadReceipt::PongReceived);
    assert_eq!(drop_and_reconnect(&mut codec, 4_600), Vec::<i16>::new(), "read audio is not replayed");
}
