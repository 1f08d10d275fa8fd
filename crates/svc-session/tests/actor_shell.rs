//! The session actor, the IO shell around the core, in tokio's paused time: a fake room and a fake
//! provider session on either side, a real SQLite store behind it. Each test drives one scenario
//! (start, a turn, barge-in, a tool call, the end) through the actor's own loop, timers and
//! teardown, and checks what reached the room, the provider and the database.

#[path = "support/shell.rs"]
mod shell;

use std::time::Duration;

use serde_json::json;
use shell::{SESSION, Shell, session};
use svc_provider_core::{ProviderEvent, ProviderInput};
use svc_session::core::playback::IDLE_SILENCE_EVERY;
use svc_session::core::{EndStatus, Timing};
use svc_session::room::CloseReason;

const USER: &str = "alice";

/// Started, the user in the room, the provider ready, and the 500 ms of silence that prime a new
/// listener's jitter buffer played.
async fn ready_shell() -> Shell {
    let mut shell = Shell::start(session(json!({})), Timing::default()).await;
    shell.join(USER).await;
    shell.provider(ProviderEvent::Ready { upstream_session_id: Some("upstream-1".into()) }).await;
    assert_eq!(shell.data_of("ready").len(), 1, "ready: {:?}", shell.data_types());
    shell.advance(Duration::from_millis(600)).await;
    assert!(shell.agent_frames().len() >= 25, "the priming silence went out");
    assert_eq!(shell.agent_speech_frames(), 0);
    shell
}

#[tokio::test(start_paused = true)]
async fn start_the_agent_shows_initializing_until_the_provider_is_ready_then_every_client_gets_ready() {
    let mut shell = Shell::start(session(json!({})), Timing::default()).await;
    assert_eq!(shell.attribute("lk.agent.state"), Some("initializing"));
    shell.join(USER).await;
    assert!(shell.data_of("ready").is_empty(), "no ready before the provider is");
    assert!(shell.attribute("svc.ready").is_none());

    shell.provider(ProviderEvent::Ready { upstream_session_id: Some("upstream-1".into()) }).await;
    let ready = shell.data_of("ready");
    assert_eq!(ready.len(), 1, "one ready, to everyone: {:?}", shell.data_types());
    let (message, to) = ready[0];
    assert_eq!(to, None);
    assert_eq!(message["session_id"], SESSION);
    let attribute: serde_json::Value =
        serde_json::from_str(shell.attribute("svc.ready").expect("the ready attribute")).expect("JSON");
    assert_eq!(attribute["type"], "ready");
    assert_eq!(attribute["session_id"], SESSION);
    assert_eq!(shell.attribute("lk.agent.state"), Some("listening"));

    // A late joiner gets its own ready.
    shell.join("bob").await;
    let ready = shell.data_of("ready");
    assert_eq!(ready.len(), 2);
    assert_eq!(ready[1].1, Some("bob"));
    // The first publisher is the input: nothing went to the provider but the ready handshake.
    assert!(shell.inputs.is_empty(), "nothing sent upstream yet: {:?}", shell.inputs);
    assert!(!shell.finished());
}

/// Final transcripts of `role` sent so far.
fn finals(shell: &Shell, role: &str) -> Vec<String> {
    shell
        .data_of("transcript")
        .into_iter()
        .filter(|(message, _)| message["role"] == role && message["is_final"] == true)
        .map(|(message, _)| message["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The user speaks for `frames` × 20 ms, then the provider hears a turn and answers it with
/// `answer` of speech.
async fn a_turn(shell: &mut Shell, frames: u64, answer: Duration) {
    let mut encoder = shell::user_encoder();
    for n in 0..frames {
        shell.room_event(shell::user_frame(&mut encoder, USER, n)).await;
        shell.advance(Duration::from_millis(20)).await;
    }
    shell.provider(ProviderEvent::UserSpeechStarted).await;
    shell.provider(ProviderEvent::UserSpeechStopped).await;
    let transcript =
        ProviderEvent::UserTranscript { text: "Where is my order?".into(), is_final: true, speech_started_ms: 100 };
    shell.provider(transcript).await;
    shell.provider(ProviderEvent::ResponseStarted).await;
    shell.provider(shell::agent_speech(answer)).await;
    shell.provider(ProviderEvent::AssistantTranscript { text: "It has ".into(), is_final: false }).await;
    shell.provider(ProviderEvent::AssistantTranscript { text: "It has shipped.".into(), is_final: true }).await;
    shell.provider(ProviderEvent::ResponseDone { status: svc_provider_core::ResponseStatus::Completed }).await;
}

#[tokio::test(start_paused = true)]
async fn a_turn_the_users_audio_reaches_the_provider_and_the_answer_is_played_out_then_transcribed() {
    let mut shell = ready_shell().await;
    a_turn(&mut shell, 25, Duration::from_secs(1)).await;

    // The user's 25 frames reached the provider decoded at its input rate (24 kHz: 480 samples).
    let audio = shell.provider_audio();
    assert_eq!(audio.len(), 25, "one PCM frame per Opus frame");
    assert!(audio.iter().all(|pcm| pcm.len() == 480), "20 ms at 24 kHz each");
    assert!(audio[5..].iter().all(|pcm| shell::peak(pcm) > 3_000), "the tone came through");

    assert!(shell.data_of("user-started-speaking").len() == 1 && shell.data_of("user-stopped-speaking").len() == 1);
    assert_eq!(finals(&shell, "USER"), ["Where is my order?"]);
    assert_eq!(shell.attribute("lk.agent.state"), Some("speaking"));
    assert_eq!(shell.data_of("bot-started-speaking").len(), 1);

    // Half a second in: half the answer played, its final transcript still held back.
    shell.advance(Duration::from_millis(500)).await;
    let played = shell.agent_speech_frames();
    assert!((22..=28).contains(&played), "about 25 frames played after 500 ms: {played}");
    assert!(finals(&shell, "ASSISTANT").is_empty(), "the final waits until it is heard");

    shell
        .wait_until(Duration::from_secs(1), "the answer's final transcript", |s| !finals(s, "ASSISTANT").is_empty())
        .await;
    assert_eq!(finals(&shell, "ASSISTANT"), ["It has shipped."]);
    let frames = shell.agent_frames();
    let speech: Vec<_> = frames.iter().filter(|frame| !frame.silence).collect();
    assert_eq!(speech.len(), 50, "one second of speech, in 20 ms frames");
    assert!(speech[2..].iter().all(|frame| shell::peak(&frame.pcm) > 5_000), "the agent's tone is heard");
    for pair in speech.windows(2) {
        assert_eq!(pair[1].due - pair[0].due, Duration::from_millis(20), "speech frames are due 20 ms apart");
    }
    assert_eq!(shell.data_of("bot-stopped-speaking").len(), 1);
    assert_eq!(shell.data_of("turn-complete").len(), 2, "the user's turn and the agent's");
    assert_eq!(shell.attribute("lk.agent.state"), Some("listening"));
}

#[tokio::test(start_paused = true)]
async fn barge_in_the_reply_is_cut_where_the_user_spoke_and_the_provider_is_told_how_much_was_heard() {
    let mut shell = ready_shell().await;
    shell.provider(ProviderEvent::ResponseStarted).await;
    shell.provider(shell::agent_speech(Duration::from_secs(3))).await;
    shell
        .provider(ProviderEvent::AssistantTranscript { text: "Let me tell you a long story".into(), is_final: false })
        .await;
    shell.advance(Duration::from_millis(500)).await;
    let before = shell.agent_speech_frames();
    assert!((22..=28).contains(&before), "about 500 ms played: {before}");

    // The user talks over the agent.
    shell.provider(ProviderEvent::UserSpeechStarted).await;
    shell.provider(ProviderEvent::Interrupted).await;
    let barge_in = shell.provider_commands().into_iter().find_map(|input| match input {
        ProviderInput::BargeIn { played_ms } => Some(*played_ms),
        _ => None,
    });
    let played_ms = barge_in.expect("the provider is told of the barge-in");
    assert_eq!(played_ms, before as u64 * 20, "what was played, to the frame");
    assert_eq!(shell.data_of("bot-stopped-speaking").len(), 1);

    // The rest of the reply, and audio the provider still sends for it, is never played.
    shell.provider(shell::agent_speech(Duration::from_secs(1))).await;
    shell.advance(Duration::from_secs(1)).await;
    assert_eq!(shell.agent_speech_frames(), before, "nothing of the reply after the barge-in");
    // The track goes on with silence: a frame per 400 ms, the rhythm of DTX.
    let frames = shell.agent_frames();
    let last_speech = frames.iter().rposition(|frame| !frame.silence).expect("speech was played");
    let silence: Vec<_> = frames[last_speech + 1..].iter().map(|frame| frame.due).collect();
    assert!(silence.len() >= 2, "the track goes on with silence: {} frames", silence.len());
    assert!(silence.windows(2).all(|pair| pair[1] - pair[0] == IDLE_SILENCE_EVERY), "{silence:?}");

    // The provider says what was heard (within the 1.5 s it has): that is the agent's turn.
    shell.provider(ProviderEvent::AssistantTruncated { heard: "Let me tell".into() }).await;
    shell.provider(ProviderEvent::ResponseDone { status: svc_provider_core::ResponseStatus::Cancelled }).await;
    shell.advance(Duration::from_secs(2)).await;
    assert_eq!(shell.agent_speech_frames(), before, "still nothing of the reply");
    assert_eq!(finals(&shell, "ASSISTANT"), ["Let me tell"]);

    shell.data(USER, json!({"type": "end"})).await;
    let _ = shell.finish().await;
    let (_, turns, timeline) = shell.stored().await;
    let texts: Vec<(&str, &str)> = turns.iter().map(|t| (t.role.as_str(), t.text.as_str())).collect();
    assert_eq!(texts, [("assistant", "Let me tell")]);
    let barge_in =
        timeline.iter().find(|event| event.kind == "turn.barge_in").expect("the barge-in is on the timeline");
    assert_eq!(barge_in.data["played_ms"], played_ms);
    assert_eq!(barge_in.data["cause"], "provider");
}

#[tokio::test(start_paused = true)]
async fn a_client_tool_call_goes_to_the_clients_and_their_rpc_answer_goes_back_to_the_provider_once() {
    let mut shell = ready_shell().await;
    let call = ProviderEvent::ToolCall {
        call_id: "call_1".into(),
        name: "lookup_order".into(),
        arguments: json!({"order_id": "42"}),
    };
    shell.provider(call).await;
    let invocations = shell.data_of("tool-invocation");
    assert_eq!(invocations.len(), 1);
    let (invocation, to) = invocations[0];
    assert_eq!(to, None);
    assert_eq!(invocation["tool_call_id"], "call_1");
    assert_eq!(invocation["name"], "lookup_order");
    assert_eq!(invocation["args"], json!({"order_id": "42"}));
    let request_id = invocation["request_id"].as_str().expect("a request id").to_owned();

    let payload = json!({"request_id": request_id, "tool_call_id": "call_1", "result": {"status": "shipped"}});
    let rpc = |id: &str| svc_session::room::ToolResultCall {
        caller: USER.into(),
        payload: payload.to_string(),
        request_id: id.into(),
    };
    shell.room_event(svc_session::room::AgentRoomEvent::ToolResult(rpc("rpc-1"))).await;
    let results: Vec<_> = shell
        .provider_commands()
        .into_iter()
        .filter(|input| matches!(input, ProviderInput::ToolResult { .. }))
        .cloned()
        .collect();
    assert_eq!(
        results,
        [ProviderInput::ToolResult {
            call_id: "call_1".into(),
            output: json!({"status": "shipped"}),
            is_error: false,
            scheduling: None,
        }]
    );
    // The same answer again is refused over RPC and not sent twice.
    shell.room_event(svc_session::room::AgentRoomEvent::ToolResult(rpc("rpc-2"))).await;
    let answers: Vec<_> = shell
        .room
        .iter()
        .filter_map(|out| match out {
            shell::RoomOut::ToolAnswer { call, answer } => Some((call.request_id.clone(), answer.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0], ("rpc-1".to_owned(), Ok(r#"{"accepted":true}"#.to_owned())));
    assert_eq!(answers[1].0, "rpc-2");
    assert!(answers[1].1.is_err(), "a second answer is refused: {:?}", answers[1].1);
    let results = shell.provider_commands().into_iter().filter(|i| matches!(i, ProviderInput::ToolResult { .. }));
    assert_eq!(results.count(), 1, "answered upstream exactly once");
}

#[tokio::test(start_paused = true)]
async fn a_client_tool_call_nobody_answers_is_answered_upstream_as_a_timeout_after_30_s() {
    let mut shell = ready_shell().await;
    let call = ProviderEvent::ToolCall { call_id: "call_9".into(), name: "lookup_order".into(), arguments: json!({}) };
    shell.provider(call).await;
    let asked = shell.elapsed();
    let timed_out = |s: &Shell| {
        s.provider_commands().iter().any(|input| matches!(input, ProviderInput::ToolResult { is_error: true, .. }))
    };
    shell.advance(Duration::from_millis(29_900)).await;
    assert!(!timed_out(&shell), "not before 30 s");
    shell.wait_until(Duration::from_millis(200), "the timeout answer", timed_out).await;
    let waited = shell.elapsed() - asked;
    assert!(waited >= Duration::from_secs(30) && waited < Duration::from_millis(30_010), "after {waited:?}");
    let output = shell.provider_commands().into_iter().find_map(|input| match input {
        ProviderInput::ToolResult { call_id, output, .. } if call_id == "call_9" => Some(output.clone()),
        _ => None,
    });
    assert_eq!(output.expect("the timeout answer")["error"], "timeout");
}

/// The kinds of the stored timeline, in order.
fn kinds(timeline: &[svc_store::TimelineRow]) -> Vec<&str> {
    timeline.iter().map(|event| event.kind.as_str()).collect()
}

/// The order of the room's last steps: `session-ended` is sent, then the room closes.
fn ended_then_closed(shell: &Shell) -> (String, CloseReason) {
    let ended = shell
        .room
        .iter()
        .position(|out| matches!(out, shell::RoomOut::Data { json, .. } if json["type"] == "session-ended"));
    let closed = shell.room.iter().position(|out| matches!(out, shell::RoomOut::Closed(_)));
    let (Some(ended), Some(closed)) = (ended, closed) else {
        panic!("session-ended and a close: {:?}", shell.data_types())
    };
    assert!(ended < closed, "session-ended goes out before the room closes");
    let shell::RoomOut::Data { json, .. } = &shell.room[ended] else { unreachable!() };
    let shell::RoomOut::Closed(reason) = &shell.room[closed] else { unreachable!() };
    (json["reason"].as_str().unwrap_or_default().to_owned(), *reason)
}

#[tokio::test(start_paused = true)]
async fn end_the_clients_end_closes_the_provider_and_the_room_and_stores_the_turns_timeline_and_usage() {
    let mut shell = ready_shell().await;
    a_turn(&mut shell, 10, Duration::from_millis(600)).await;
    shell.wait_until(Duration::from_secs(2), "the turn's end", |s| !finals(s, "ASSISTANT").is_empty()).await;

    shell.data(USER, json!({"type": "end"})).await;
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "client_ended");
    assert_eq!(finish.status, EndStatus::Completed);
    assert_eq!(finish.usage.turn_count, 1);
    assert!((580..=620).contains(&finish.usage.agent_speaking_ms), "{:?}", finish.usage);
    assert_eq!(ended_then_closed(&shell), ("client_ended".to_owned(), CloseReason::SessionEnded));
    assert_eq!(shell.inputs.last(), Some(&ProviderInput::Close), "the provider is closed last");

    let (row, turns, timeline) = shell.stored().await;
    assert_eq!(row.status, "completed");
    assert_eq!(row.turn_count, Some(1));
    assert!(row.ended_us.is_some_and(|ended| ended > shell::STARTED_US));
    let texts: Vec<(&str, &str)> = turns.iter().map(|t| (t.role.as_str(), t.text.as_str())).collect();
    assert_eq!(texts, [("user", "Where is my order?"), ("assistant", "It has shipped.")]);
    let kinds = kinds(&timeline);
    for kind in ["agent.joined", "participant.joined", "input.bound", "provider.ready", "turn.latency", "session.ended"]
    {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    assert_eq!(kinds.last(), Some(&"session.ended"));
    let ended = &timeline.last().expect("an end").data;
    assert_eq!(ended["reason"], "client_ended");
    assert_eq!(ended["turns"], 1);
    assert_eq!(ended["media"]["output_frames_dropped"], 0, "the shell adds its media counts: {ended}");
    // Stored times follow the session's clock: the end is as far from the start as it ran.
    let ran_us = i64::try_from(shell.elapsed().as_micros()).expect("µs");
    assert_eq!(timeline.last().expect("an end").ts_us, shell::STARTED_US + ran_us);
}

#[tokio::test(start_paused = true)]
async fn end_a_command_from_the_runtime_ends_the_session_with_its_reason() {
    let mut shell = ready_shell().await;
    let end = svc_session::actor::SessionCommand::End { reason: "session_deleted".into() };
    shell.commands.send(end).await.expect("the actor takes commands");
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "session_deleted");
    assert_eq!(ended_then_closed(&shell), ("session_deleted".to_owned(), CloseReason::SessionEnded));
    let (row, turns, _) = shell.stored().await;
    assert_eq!(row.status, "completed");
    assert!(turns.is_empty());
}

#[tokio::test(start_paused = true)]
async fn end_a_session_another_node_took_over_is_left_to_it_unended() {
    // This node was cut off (its agent out of the room, not dead) and LiveKit gave the job to
    // another node, which claimed the session in the store.
    let mut shell = ready_shell().await;
    shell.db.store.claim_session(shell::SESSION, "node-other", shell::STARTED_US + 1).await.expect("claim");
    shell.drop_room();
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "room_closed");
    let closed: Vec<&CloseReason> =
        shell.room.iter().filter_map(|out| if let shell::RoomOut::Closed(r) = out { Some(r) } else { None }).collect();
    assert_eq!(closed, [&CloseReason::Superseded], "the room stays: it is the other node's session's");
    let (row, _, timeline) = shell.stored().await;
    assert_eq!((row.status.as_str(), row.ended_us, row.node_id.as_deref()), ("active", None, Some("node-other")));
    assert!(!kinds(&timeline).contains(&"session.ended"), "no end stored: {:?}", kinds(&timeline));
}

#[tokio::test(start_paused = true)]
async fn end_a_server_shutdown_ends_the_session_and_closes_the_room_as_a_shutdown() {
    let mut shell = ready_shell().await;
    shell.shutdown.cancel();
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "server_shutdown");
    assert_eq!(ended_then_closed(&shell), ("server_shutdown".to_owned(), CloseReason::ServerShutdown));
}

#[tokio::test(start_paused = true)]
async fn end_the_session_waits_10_s_for_a_dropped_participant_then_ends_as_participant_left() {
    let mut shell = ready_shell().await;
    let left = |deliberate| svc_session::room::AgentRoomEvent::PeerLeft { identity: USER.into(), deliberate };
    let ended = |s: &Shell| !s.data_of("session-ended").is_empty();

    // Dropped, and back within the grace: the session goes on.
    shell.room_event(left(false)).await;
    shell.advance(Duration::from_secs(9)).await;
    shell.join(USER).await;
    shell.advance(Duration::from_secs(20)).await;
    assert!(!ended(&shell), "a rejoin within the grace keeps the session");

    // Dropped for good: the end comes 10 s later, not before.
    shell.room_event(left(false)).await;
    let dropped = shell.elapsed();
    shell.advance(Duration::from_millis(9_990)).await;
    assert!(!ended(&shell), "still waiting at 9.99 s");
    shell.wait_until(Duration::from_millis(100), "the end after the grace", ended).await;
    let waited = shell.elapsed() - dropped;
    assert!(waited >= Duration::from_secs(10) && waited <= Duration::from_millis(10_005), "after {waited:?}");
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "participant_left");
    let (row, _, timeline) = shell.stored().await;
    assert_eq!(row.status, "completed");
    let left_events = timeline.iter().filter(|event| event.kind == "participant.left").count();
    assert_eq!(left_events, 2);
}

#[tokio::test(start_paused = true)]
async fn end_a_deliberate_leave_of_the_last_participant_ends_the_session_at_once() {
    let mut shell = ready_shell().await;
    let left = svc_session::room::AgentRoomEvent::PeerLeft { identity: USER.into(), deliberate: true };
    shell.room_event(left).await;
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "participant_left");
}

#[tokio::test(start_paused = true)]
async fn end_a_provider_that_never_becomes_ready_fails_the_session_after_20_s() {
    let mut shell = Shell::start(session(json!({})), Timing::default()).await;
    shell.join(USER).await;
    let ended = |s: &Shell| !s.data_of("session-ended").is_empty();
    shell.advance(Duration::from_millis(19_990)).await;
    assert!(!ended(&shell), "still waiting for the provider");
    shell.wait_until(Duration::from_millis(100), "the end", ended).await;
    let finish = shell.finish().await;
    assert_eq!((finish.reason.as_str(), finish.status), ("upstream_error", EndStatus::Error));
    let error = shell.data_of("error");
    assert_eq!(error.len(), 1);
    assert_eq!(error[0].0["fatal"], true);
    assert_eq!(error[0].0["code"], "upstream_disconnect");
    let (row, _, _) = shell.stored().await;
    assert_eq!(row.status, "error");
}

#[tokio::test(start_paused = true)]
async fn end_nobody_joining_within_60_s_ends_the_session_as_no_participant() {
    let mut shell = Shell::start(session(json!({})), Timing::default()).await;
    shell.provider(ProviderEvent::Ready { upstream_session_id: None }).await;
    shell.wait_until(Duration::from_secs(61), "the end", |s| !s.data_of("session-ended").is_empty()).await;
    assert!(shell.elapsed() >= Duration::from_secs(60));
    assert_eq!(shell.finish().await.reason, "no_participant");
}

#[tokio::test(start_paused = true)]
async fn end_the_agent_removed_from_the_room_ends_the_session_as_room_closed() {
    let mut shell = ready_shell().await;
    shell.drop_room();
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "room_closed");
}

#[tokio::test(start_paused = true)]
async fn end_the_end_call_tool_ends_the_session_once_the_goodbye_was_played() {
    let mut shell = ready_shell().await;
    let call = ProviderEvent::ToolCall { call_id: "call_end".into(), name: "end_call".into(), arguments: json!({}) };
    shell.provider(call).await;
    let answered = shell.provider_commands().into_iter().any(
        |input| matches!(input, ProviderInput::ToolResult { call_id, is_error: false, .. } if call_id == "call_end"),
    );
    assert!(answered, "end_call is answered at once: {:?}", shell.provider_commands());
    // The goodbye: 400 ms of speech, played out before the session ends.
    shell.provider(ProviderEvent::ResponseStarted).await;
    shell.provider(shell::agent_speech(Duration::from_millis(400))).await;
    shell.provider(ProviderEvent::AssistantTranscript { text: "Goodbye!".into(), is_final: true }).await;
    shell.provider(ProviderEvent::ResponseDone { status: svc_provider_core::ResponseStatus::Completed }).await;
    shell.advance(Duration::from_millis(200)).await;
    assert!(shell.data_of("session-ended").is_empty(), "the goodbye is still playing");
    shell.wait_until(Duration::from_secs(1), "the end", |s| !s.data_of("session-ended").is_empty()).await;
    assert!(shell.agent_speech_frames() >= 19, "the goodbye was played: {}", shell.agent_speech_frames());
    let finish = shell.finish().await;
    assert_eq!(finish.reason, "end_call");
    let (_, turns, _) = shell.stored().await;
    assert_eq!(turns.last().map(|turn| turn.text.as_str()), Some("Goodbye!"));
}
