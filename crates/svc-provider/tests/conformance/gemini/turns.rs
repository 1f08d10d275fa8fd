//! Conversation turns: typed and spoken user turns, usage across turns, and barge-in.

use serde_json::Value;
use svc_domain::model::ProviderABlock;
use svc_provider::codec::heard_text;
use svc_provider_core::{ProviderEvent, ProviderInput, ResponseStatus};
use svc_wire::rest::UsageTokens;

use super::{
    OUTPUT_RATE_HZ, Run, add_usage, assistant_finals, audio_samples, count, expected_usage, has, in_every_mode,
    is_assistant_final, native_bytes, native_frames, provider_a, server_vad, text,
};
use crate::fake::{Mode, PyFake};

/// The two ways the SDK documents a typed turn that the model answers while automatic activity
/// detection is off: realtime text inside activityStart … activityEnd, or a clientContent user
/// turn with turnComplete.
const TYPED_TURN_KINDS: [&str; 2] = ["activity", "client_content"];

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn typed_turn_under_svc_vad_is_answered_with_audio_transcript_and_usage() {
    in_every_mode(typed_turn).await;
}

async fn typed_turn(mode: Mode) {
    let mut run = Run::start(mode, "typed_turn", provider_a(ProviderABlock::default())).await;
    let typed = "What time is it in Lisbon?";
    // Sent before the session is ready: svc holds it until setupComplete.
    run.send(ProviderInput::Text(typed.to_owned())).await;
    run.until("the answered turn", |seen| has(seen, is_assistant_final)).await;
    let done = run.finish(1).await;
    let turn = &done.turns(0)[0];
    let session_id = done.facts(0)["session_id"].as_str().map(str::to_owned);
    assert_eq!(done.seen.first(), Some(&ProviderEvent::Ready { upstream_session_id: session_id }), "{mode}");
    let turns = done.user_turns(0);
    assert_eq!(turns.len(), 1, "{mode}: user turns the service saw: {turns:?}");
    assert!(TYPED_TURN_KINDS.contains(&turns[0].0.as_str()) && turns[0].1 == typed, "{mode}: {turns:?}");
    assert_eq!(audio_samples(&done.seen), turn["audio_samples"].as_u64().unwrap_or(0), "{mode}: reply audio");
    assert_eq!(done.assistant_finals(), [text(&turn["transcript"])], "{mode}");
    assert_eq!(done.usages().last(), Some(&expected_usage(&turn["usage"])), "{mode}: usage");
    assert_eq!(done.count(|e| matches!(e, ProviderEvent::ResponseDone { status: ResponseStatus::Completed })), 1);
    assert_eq!(done.errors(), [], "{mode}");
    // ProviderInput::Close ends the session: svc's close frame says 1000, and the adapter is over.
    done.assert_closed_normally(0);
    assert_eq!(done.reports[0]["closed_by_fake"], Value::Null, "{mode}");
    assert!(matches!(done.seen.last(), Some(ProviderEvent::Closed { .. })), "{mode}");
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn typed_turns_under_svc_vad_are_answered_only_in_the_documented_form() {
    in_every_mode(typed_turns).await;
}

async fn typed_turns(mode: Mode) {
    let mut setup = provider_a(ProviderABlock::default());
    let greeting = "Welcome to the travel desk!";
    setup.greeting = Some(greeting.to_owned());
    let mut run = Run::start(mode, "typed_turns", setup).await;
    run.ready().await;
    run.until("the greeting", |seen| has(seen, is_assistant_final)).await;
    let (first, second) = ("Is the museum open today?", "And tomorrow?");
    run.send(ProviderInput::Text(first.to_owned())).await;
    run.until("the answer to the first typed turn", |seen| count(seen, is_assistant_final) >= 2).await;
    // A background note: a model-role clientContent without turnComplete opens no turn.
    run.send(ProviderInput::Context("The user is a premium member.".to_owned())).await;
    run.send(ProviderInput::Text(second.to_owned())).await;
    run.until("the answer to the second typed turn", |seen| count(seen, is_assistant_final) >= 3).await;
    let done = run.finish(1).await;
    let turns = done.user_turns(0);
    assert_eq!(turns.len(), 3, "{mode}: user turns the service saw: {turns:?}");
    assert!(turns[0].0 == "client_content" && turns[0].1.contains(greeting), "{mode}: greeting {:?}", turns[0]);
    for ((kind, said), typed) in turns[1..].iter().zip([first, second]) {
        assert!(TYPED_TURN_KINDS.contains(&kind.as_str()) && said == typed, "{mode}: {kind} {said:?}");
    }
    let contents: Vec<Value> = done.facts(0)["client_content"].as_array().cloned().unwrap_or_default();
    let note = serde_json::json!({"roles": ["model"], "turn_complete": false});
    assert!(contents.contains(&note), "{mode}: the note as the service saw it: {contents:?}");
    let sent: Vec<String> = done.turns(0).iter().map(|turn| text(&turn["transcript"])).collect();
    assert_eq!(done.assistant_finals(), sent, "{mode}");
    assert_eq!(done.count(|e| matches!(e, ProviderEvent::ResponseDone { .. })), 3, "{mode}");
    assert_eq!(done.errors(), [], "{mode}");
    done.assert_closed_normally(0);
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn a_spoken_turn_under_svc_vad_gives_the_user_transcript_also_when_spoken_before_ready() {
    in_every_mode(|mode| async move {
        let fake = spoken_turn(PyFake::start(mode).await, false, false).await;
        spoken_turn(fake, false, true).await.stop().await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn a_spoken_turn_under_server_vad_gives_the_user_transcript_also_when_spoken_before_ready() {
    in_every_mode(|mode| async move {
        let fake = spoken_turn(PyFake::start(mode).await, true, false).await;
        spoken_turn(fake, true, true).await.stop().await;
    })
    .await;
}

/// User audio as the runtime sends it to Gemini (16 kHz, its input rate): 500 ms, in 20 ms
/// frames.
fn user_audio() -> Vec<ProviderInput> {
    (0..25)
        .map(|frame| {
            let pcm = (0..320)
                .map(|n| {
                    let t = (frame * 320 + n) as f64 / 16_000.0;
                    (5000.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16
                })
                .collect();
            ProviderInput::NativeAudio(pcm)
        })
        .collect()
}

/// A spoken turn. `before_ready`: the user speaks while the upstream connects; svc holds the
/// turn until the session is ready and must send it as it came: the activity signals around
/// their audio (svc_vad), the audio before the microphone's audioStreamEnd (server_vad).
async fn spoken_turn(fake: PyFake, automatic_detection: bool, before_ready: bool) -> PyFake {
    let case = format!("{} (spoken before Ready: {before_ready})", fake.mode);
    let block = if automatic_detection { server_vad() } else { ProviderABlock::default() };
    let mut run = Run::on(fake, "audio_turn", provider_a(block));
    if !before_ready {
        run.ready().await;
    }
    if automatic_detection {
        run.send_all(user_audio()).await;
        // The microphone goes quiet: svc flushes the server's detector (audioStreamEnd).
        run.send(ProviderInput::Mute(true)).await;
    } else {
        run.send(ProviderInput::ActivityStart).await;
        run.send_all(user_audio()).await;
        run.send(ProviderInput::ActivityEnd).await;
    }
    run.until(&format!("the user's final transcript and the answer, spoken before Ready: {before_ready}"), |seen| {
        has(seen, |e| matches!(e, ProviderEvent::UserTranscript { is_final: true, .. }))
            && has(seen, is_assistant_final)
    })
    .await;
    let (done, fake) = run.finish_keeping_the_fake(1).await;
    let turn = &done.turns(0)[0];
    assert_eq!(done.facts(0)["automatic_detection"], automatic_detection, "{case}");
    assert_eq!(done.user_finals(), [text(&turn["input_transcript"])], "{case}");
    assert_eq!(done.assistant_finals(), [text(&turn["transcript"])], "{case}");
    assert_eq!(audio_samples(&done.seen), turn["audio_samples"].as_u64().unwrap_or(0), "{case}");
    assert_eq!(done.usages().last(), Some(&expected_usage(&turn["usage"])), "{case}");
    // 500 ms at 16 kHz, less at most the resampler's delay (a few ms).
    let received = done.facts(0)["audio_bytes"].as_u64().unwrap_or(0);
    assert!((15_000..=16_000).contains(&received), "{case}: {received} bytes of user audio arrived");
    let kinds: Vec<String> = done.user_turns(0).into_iter().map(|(kind, _)| kind).collect();
    assert_eq!(kinds, [if automatic_detection { "audio" } else { "activity" }], "{case}");
    if !automatic_detection {
        let started = done.seen.iter().position(|e| *e == ProviderEvent::UserSpeechStarted);
        let stopped = done.seen.iter().position(|e| *e == ProviderEvent::UserSpeechStopped);
        assert!(started.is_some() && started < stopped, "{case}: speech started/stopped");
    }
    assert_eq!(done.errors(), [], "{case}");
    done.assert_closed_normally(0);
    fake
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn session_usage_is_the_sum_of_every_turns_usage_metadata() {
    in_every_mode(several_turns).await;
}

async fn several_turns(mode: Mode) {
    let mut run = Run::start(mode, "several_turns", provider_a(ProviderABlock::default())).await;
    run.ready().await;
    for turn in 1..=7 {
        run.send(ProviderInput::ActivityStart).await;
        run.send_all(native_frames(turn, 10)).await;
        run.send(ProviderInput::ActivityEnd).await;
        run.until(&format!("the end of turn {turn}"), |seen| count(seen, is_assistant_final) >= turn).await;
    }
    let done = run.finish(1).await;
    let turns = done.turns(0);
    assert_eq!(turns.len(), 7, "{mode}");
    let sent: Vec<String> = turns.iter().map(|turn| text(&turn["transcript"])).collect();
    assert_eq!(done.assistant_finals(), sent, "{mode}");
    // Each turn's usage is committed once: the cumulative reports pass through every running
    // sum, in order, and end at the total.
    let mut running = UsageTokens::default();
    let sums: Vec<UsageTokens> = turns
        .iter()
        .map(|turn| {
            running = add_usage(&running, &expected_usage(&turn["usage"]));
            running.clone()
        })
        .collect();
    let reported = done.usages();
    assert_eq!(reported.last(), sums.last(), "{mode}: session usage (reported {reported:?})");
    let mut rest = reported.iter();
    for sum in &sums {
        assert!(rest.any(|usage| usage == sum), "{mode}: no usage report of the running sum {sum:?}: {reported:?}");
    }
    // NEED_MORE_INPUT is no error; a safety stop is one, not fatal.
    let errors = done.errors();
    assert_eq!(errors.len(), 1, "{mode}: {errors:?}");
    assert!(!errors[0].fatal && errors[0].code == "generated_audio_safety", "{mode}: {errors:?}");
    assert_eq!(done.count(|e| matches!(e, ProviderEvent::ResponseDone { status: ResponseStatus::Completed })), 7);
    done.assert_closed_normally(0);
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn server_vad_barge_in_keeps_only_the_heard_transcript() {
    in_every_mode(barge_in).await;
}

async fn barge_in(mode: Mode) {
    const TURNS: usize = 10;
    let mut run = Run::start(mode, "barge_in", provider_a(server_vad())).await;
    run.ready().await;
    let mut played = Vec::new();
    for turn in 1..=TURNS {
        let start = run.adapter.seen.len();
        // The user speaks (200 ms): the service's detector takes it as a turn and answers.
        run.send_all(native_frames(turn, 10)).await;
        run.until(&format!("the interruption of turn {turn}"), |seen| {
            count(seen, |e| *e == ProviderEvent::Interrupted) >= turn
        })
        .await;
        // As the runtime: flush playback after a share of what arrived, and say how much played.
        let received_ms = audio_samples(&run.adapter.seen[start..]) * 1000 / OUTPUT_RATE_HZ;
        let played_ms = received_ms * (turn as u64 % 3 + 1) / 4;
        played.push(played_ms);
        run.send(ProviderInput::BargeIn { played_ms }).await;
        run.until(&format!("the final transcript of turn {turn}"), |seen| count(seen, is_assistant_final) >= turn)
            .await;
    }
    // Truncations that follow a turn's final belong to it: let them arrive before closing.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let done = run.finish(1).await;
    let turns = done.turns(0);
    assert_eq!(turns.len(), TURNS, "{mode}");
    let starts: Vec<usize> =
        done.seen.iter().enumerate().filter(|(_, e)| **e == ProviderEvent::ResponseStarted).map(|(at, _)| at).collect();
    assert_eq!(starts.len(), TURNS, "{mode}: one response a turn");
    for (index, turn) in turns.iter().enumerate() {
        let end = starts.get(index + 1).copied().unwrap_or(done.seen.len());
        let events = &done.seen[starts[index]..end];
        let samples = turn["audio_samples"].as_u64().unwrap_or(0);
        assert_eq!(audio_samples(events), samples, "{mode}: turn {index}: audio");
        let whole = text(&turn["transcript"]);
        let received_ms = samples * 1000 / OUTPUT_RATE_HZ;
        let heard = heard_text(&whole, played[index].min(received_ms), received_ms);
        assert_ne!(heard, whole, "{mode}: turn {index}: the test must cut the reply short");
        // The turn's final transcript is what was heard, never the whole text; a later
        // truncation, if svc sends one, says the same.
        assert_eq!(
            assistant_finals(events),
            std::slice::from_ref(&heard),
            "{mode}: turn {index} (whole text {whole:?})"
        );
        for event in events {
            if let ProviderEvent::AssistantTruncated { heard: truncated } = event {
                assert_eq!(truncated, &heard, "{mode}: turn {index}");
            }
        }
    }
    assert_eq!(done.count(|e| matches!(e, ProviderEvent::ResponseDone { status: ResponseStatus::Cancelled })), TURNS);
    assert_eq!(done.errors(), [], "{mode}");
    assert_eq!(done.facts(0)["audio_bytes"].as_u64(), Some(native_bytes(10) * TURNS as u64), "{mode}: user audio");
    done.assert_closed_normally(0);
}
