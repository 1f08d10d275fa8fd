//! Sessions end to end: the real `svc serve` with its session runtime, a scripted fake provider
//! (a real server speaking the upstream's wire protocol, `svc-testkit`), and the official PyPI
//! `livekit` client driven by tests/e2e/session_client.py, which starts the session over REST,
//! joins the room and speaks the data-channel protocol.
//!
//! Each test runs one scenario of the client and then checks three things: what the client saw
//! (its result JSON), what the provider received (the fake records every frame and the user audio
//! per connection), and what svc stored (REST history: transcript, timeline, usage, recording).
//! Audio is judged by correlation with what was actually sent: the microphone WAV against the
//! audio the fake received, and the fake's synthesized reply against what the client recorded.
//!
//! Ignored by default (they need the harness `scripts/interop-setup.sh` installs); run by
//! `scripts/test.sh`. One at a time: they are real-time media on two cores.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_testkit::speech::word_error_rate as wer;
use svc_testkit::{Action, Flavor, Reply};

#[path = "../support/mod.rs"]
mod support;

#[path = "../../../svc-phone/tests/baresip/mod.rs"]
mod baresip;

mod external;
mod faults;
mod workers;
mod world;
use world::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_conversation_from_ready_to_stored_history() {
    let world = World::start("conversation", Flavor::OpenAi, &[]).await;
    let ([greeting, spoken_reply, typed_reply], config) = queue_conversation(&world);
    let run = world.client("conversation", config);
    let result = run.finish(&world, Duration::from_secs(90)).await;
    let observations = &result["observations"];
    let id = session_id(&result);

    // Readiness: the frame and the attribute carry the same payload.
    let ready =
        json!({"type": "ready", "session_id": id, "agent": null, "rejected_tools": [], "max_session_seconds": 14400});
    assert_eq!(observations["ready_frame"], ready);
    assert_eq!(observations["ready_attribute"], ready);
    let states: Vec<&str> =
        observations["agent_states"].as_array().into_iter().flatten().filter_map(|s| s[1].as_str()).collect();
    for state in ["listening", "thinking", "speaking"] {
        assert!(states.contains(&state), "lk.agent.state went through {state}: {states:?}");
    }
    // The greeting came first, as the first assistant turn.
    let finals = assistant_finals(&result);
    assert_eq!(finals, [greeting, spoken_reply, typed_reply]);
    // The typed turn: the user's text, then the answer with markers in the spec's order and
    // fragments that add up to the final.
    let typed: Vec<&Value> = observations["typed_turn"].as_array().expect("typed turn").iter().collect();
    assert_eq!(
        typed[0],
        &json!({"type": "transcript", "role": "USER", "text": "What time is it?", "is_final": true, "_t": typed[0]["_t"]})
    );
    let fragments: String = typed
        .iter()
        .filter(|e| e["type"] == "transcript" && e["role"] == "ASSISTANT" && e["is_final"] == false)
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(fragments, typed_reply, "the fragments of the heard audio add up to the final");
    let tts_started = typed.iter().position(|e| e["type"] == "bot-tts-started").expect("bot-tts-started");
    assert_eq!(typed[tts_started + 1]["type"], "bot-started-speaking", "tts marker immediately before");
    let tts_stopped = typed.iter().position(|e| e["type"] == "bot-tts-stopped").expect("bot-tts-stopped");
    assert_eq!(typed[tts_stopped + 1]["type"], "bot-stopped-speaking", "tts marker immediately before");

    // The microphone reached the provider; the provider's voice reached the client.
    let heard_by_fake = correlation(&mic_pcm(), 48_000, &fake_audio(&world.fake, 0), 24_000);
    assert!(heard_by_fake >= 0.9, "the microphone at the provider: correlation {heard_by_fake:.3}");
    let agent = agent_recording(&result);
    let spoken = svc_testkit::speech::speech(spoken_reply, 24_000);
    let heard_by_client = correlation(&spoken, 24_000, &agent, 48_000);
    assert!(heard_by_client >= 0.9, "the provider's voice at the client: correlation {heard_by_client:.3}");

    // What the provider received: the typed turn, never the out-of-bounds note or the unknown type.
    let received = world.fake.received();
    assert!(received.iter().any(|r| r.message.pointer("/item/content/0/text") == Some(&json!("What time is it?"))));
    assert!(
        !received.iter().any(|r| r.message.to_string().contains(&"x".repeat(5000))),
        "send-context over 4096 chars never goes upstream"
    );

    // What svc stored.
    let session = world.get_json(&format!("/sessions/{id}"));
    assert_eq!(session["status"], "completed");
    let transcript = world.get_json(&format!("/sessions/{id}/transcript"));
    let turns: Vec<(String, String)> = transcript
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| (t["role"].as_str().unwrap_or("").to_owned(), t["text"].as_str().unwrap_or("").to_owned()))
        .collect();
    assert_eq!(turns.first(), Some(&("assistant".to_owned(), greeting.to_owned())));
    assert!(turns.contains(&("user".to_owned(), "What time is it?".to_owned())), "{turns:?}");
    assert!(turns.contains(&("assistant".to_owned(), typed_reply.to_owned())), "{turns:?}");
    let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
    let kinds: Vec<&str> =
        timeline["events"].as_array().into_iter().flatten().filter_map(|e| e["type"].as_str()).collect();
    for kind in [
        "session.started",
        "agent.joined",
        "provider.ready",
        "participant.joined",
        "client.connect_timings",
        "session.ended",
    ] {
        assert!(kinds.contains(&kind), "timeline has {kind}: {kinds:?}");
    }
    let timings = timeline["events"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["type"] == "client.connect_timings")
        .expect("timings");
    assert_eq!(timings["data"]["mic_ms"], 12);
    let usage = world.final_usage(&id).await;
    assert_eq!(usage["usage_status"], "recorded", "{usage}");
    let media = world.assert_no_input_dropped(&id).await;
    assert_eq!(media["output_frames_dropped"], 0, "{media}");
    assert_eq!(usage["turn_count"], 3);
    assert!(usage["agent_speaking_seconds"].as_f64().unwrap_or(0.0) > 1.0, "{usage}");
    assert!(usage["user_speaking_seconds"].as_f64().unwrap_or(0.0) > 1.0, "{usage}");
    assert!(usage["tokens"]["total_tokens"].as_i64().unwrap_or(0) > 0, "{usage}");
    let (status, wav) = world.get(&format!("/sessions/{id}/recording"));
    assert_eq!(status, 200);
    let recording = svc_audio::wav::read_wav(&wav).expect("the recording is a WAV");
    assert_eq!((recording.channels, recording.sample_rate), (2, 24_000));
    let user_lane: Vec<i16> = recording.samples.iter().step_by(2).copied().collect();
    let agent_lane: Vec<i16> = recording.samples.iter().skip(1).step_by(2).copied().collect();
    let user_in_recording = correlation(&mic_pcm(), 48_000, &user_lane, 24_000);
    let agent_in_recording = correlation(&spoken, 24_000, &agent_lane, 24_000);
    assert!(user_in_recording >= 0.9, "the user's side of the recording: {user_in_recording:.3}");
    assert!(agent_in_recording >= 0.9, "the agent's side of the recording: {agent_in_recording:.3}");
    eprintln!(
        "conversation: ready {} ms after join; mic→provider {heard_by_fake:.3}, provider→client {heard_by_client:.3}, recording {user_in_recording:.3}/{agent_in_recording:.3}",
        observations["ready_ms_after_join"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_client_tool_round_trip_and_a_background_job() {
    let world = World::start("tools", Flavor::OpenAi, &[]).await;
    client_tool_round_trip(&world).await;
}

/// A client tool answered through `svc.tool_result` (and refusals of bad answers), then a
/// background job's result, in `world`'s session.
pub(crate) async fn client_tool_round_trip(world: &World) {
    world.fake.queue([
        Reply::ToolCall { name: "lookup_order".into(), arguments: json!({"order_id": "42"}) },
        Reply::Speak("Your order ships on Friday.".into()),
        Reply::Speak("Good news, your refund is done.".into()),
    ]);
    let tool = json!({"kind": "client", "name": "lookup_order", "description": "Look up an order by id.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}});
    let config = json!({"agent": {"type": "inline", "model": "provider_b", "tools": [tool]}});
    let result = world.client("tools", config).finish(world, Duration::from_secs(60)).await;
    let observations = &result["observations"];
    let invocation = &observations["invocation"];
    assert_eq!(invocation["name"], "lookup_order");
    assert_eq!(invocation["args"], json!({"order_id": "42"}));
    assert_eq!((invocation["origin"].as_str(), invocation["executable"].as_bool()), (Some("realtime"), Some(true)));
    assert_eq!(observations["rpc_first"], json!({"ok": true, "payload": {"accepted": true}}));
    for refused in ["rpc_duplicate", "rpc_unknown", "rpc_malformed"] {
        assert_eq!(observations[refused]["ok"], false, "{refused}: {}", observations[refused]);
        assert_eq!(observations[refused]["code"], 1500, "{refused}");
    }
    assert!(observations["rpc_duplicate"]["message"].as_str().unwrap_or("").contains("already answered"));
    // Upstream: one output for the call, then the job's result as a note the model answered.
    let outputs = world.fake.frames("conversation.item.create");
    let call_outputs: Vec<&Value> =
        outputs.iter().map(|r| &r.message["item"]).filter(|item| item["type"] == "function_call_output").collect();
    assert_eq!(call_outputs.len(), 1, "answered exactly once");
    assert!(call_outputs[0]["output"].as_str().unwrap_or("").contains("shipped"));
    assert!(
        outputs.iter().any(|r| r.message.to_string().contains("The refund of 20 euros was issued.")),
        "the background job's summary reached the model"
    );
    let id = session_id(&result);
    let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
    let kinds: Vec<&str> =
        timeline["events"].as_array().into_iter().flatten().filter_map(|e| e["type"].as_str()).collect();
    for kind in ["tool.invocation", "tool.result", "tool.job_result"] {
        assert!(kinds.contains(&kind), "timeline has {kind}: {kinds:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn fifty_kilobyte_messages_cross_in_chunks_both_ways() {
    let world = World::start("chunking", Flavor::OpenAi, &[]).await;
    let text = "0123456789".repeat(5_000);
    world.fake.queue([
        Reply::ToolCall { name: "show_text".into(), arguments: json!({"text": text}) },
        Reply::Speak("Done.".into()),
    ]);
    let tool = json!({"kind": "client", "name": "show_text", "description": "Show a text on screen."});
    let config = json!({"agent": {"type": "inline", "model": "provider_b", "tools": [tool]}});
    let result = world.client("chunking", config).finish(&world, Duration::from_secs(60)).await;
    assert_eq!(result["observations"]["invocation_text_len"], 50_000, "server to client");
    assert!(result["observations"]["chunks_received"].as_u64().unwrap_or(0) >= 7);
    let long_text = world
        .fake
        .received()
        .iter()
        .filter_map(|r| r.message.pointer("/item/content/0/text").and_then(Value::as_str).map(str::len))
        .max()
        .unwrap_or(0);
    assert!(long_text > 50_000, "client to server: the longest user text upstream has {long_text} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn the_duration_cap_warns_then_ends_the_session() {
    let world = World::start("cap", Flavor::OpenAi, &["--max-session-seconds", "12"]).await;
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let result = world.client("cap", config).finish(&world, Duration::from_secs(60)).await;
    let observations = &result["observations"];
    assert_eq!(observations["ready_attribute"]["max_session_seconds"], 12, "the server's cap is the effective one");
    let soon = &observations["ending_soon"];
    assert_eq!(soon["reason"], "max_session_duration");
    let remaining = soon["seconds_remaining"].as_f64().unwrap_or(0.0);
    assert!((5.5..=6.5).contains(&remaining), "warned {remaining} s ahead of a 12 s cap");
    assert_eq!(observations["ended"]["reason"], "max_session_duration");
    let between = observations["ended"]["_t"].as_f64().unwrap_or(0.0) - soon["_t"].as_f64().unwrap_or(0.0);
    assert!((5.0..=7.5).contains(&between), "ended {between:.1} s after the warning");
    let id = session_id(&result);
    let session = world.get_json(&format!("/sessions/{id}"));
    assert_eq!(session["status"], "completed");
    let usage = world.final_usage(&id).await;
    assert_eq!(usage["usage_status"], "unavailable", "nobody spoke: {usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn silence_hooks_speak_then_end_the_call() {
    let world = World::start("hooks", Flavor::OpenAi, &[]).await;
    world.fake.queue([Reply::Speak("Are you still there?".into()), Reply::Speak("Goodbye for now.".into())]);
    let hooks = json!([
        {"trigger": "user.speech.timeout", "timeout_seconds": 2, "action": {"type": "say", "text": "Are you still there?"}, "max_count": 1},
        {"trigger": "user.speech.timeout", "timeout_seconds": 4, "action": {"type": "end_call", "farewell": "Goodbye for now."}},
    ]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b", "hooks": hooks}});
    let result = world.client("hooks", config).finish(&world, Duration::from_secs(60)).await;
    let observations = &result["observations"];
    let timeouts = observations["timeouts"].as_array().expect("timeouts");
    assert_eq!(timeouts.len(), 2, "{timeouts:?}");
    assert_eq!(timeouts[0]["action"], json!({"type": "say", "text": "Are you still there?"}));
    assert_eq!((timeouts[0]["trigger_count"].as_u64(), timeouts[0]["max_count"].as_u64()), (Some(1), Some(1)));
    assert!(timeouts[0]["silence_ms"].as_u64().unwrap_or(0) >= 2000);
    assert_eq!(timeouts[1]["action"]["type"], "end_call");
    assert_eq!(observations["ended"]["reason"], "silence_timeout");
    let finals = assistant_finals(&result);
    assert_eq!(finals, ["Are you still there?", "Goodbye for now."], "the farewell is heard before the end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn barge_in_stops_the_agent_and_keeps_only_what_was_heard() {
    let world = World::start("barge-in", Flavor::OpenAi, &[]).await;
    let story = "Once upon a time there was a little robot who lived in a quiet town by the sea and every morning it \
                 walked along the beach to count the waves that rolled in from far away";
    world.fake.queue([Reply::Speak(story.into()), Reply::Speak("Sorry, go ahead.".into())]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let result = world.client("barge_in", config).finish(&world, Duration::from_secs(60)).await;
    let observations = &result["observations"];
    let stopped_ms = observations["stopped_after_talk_ms"].as_i64().unwrap_or(i64::MAX);
    assert!(stopped_ms < 1500, "the agent stopped {stopped_ms} ms after the user started talking");
    let heard = observations["heard"].as_str().unwrap_or_default();
    assert!(!heard.is_empty() && heard.len() < story.len() / 2, "heard {heard:?} of a {}-char story", story.len());
    assert!(
        story.starts_with(heard.trim_end_matches(['.', ' '])),
        "the heard text is the story's beginning: {heard:?}"
    );
    let truncate = world.fake.frames("conversation.item.truncate");
    assert_eq!(truncate.len(), 1, "the provider's item was truncated at what was heard");
    let end_ms = truncate[0].message["audio_end_ms"].as_u64().unwrap_or(0);
    assert!((1_000..6_000).contains(&end_ms), "truncated at {end_ms} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn an_upstream_rotation_says_reconnecting_and_loses_no_user_audio() {
    let world = World::start("rotation", Flavor::OpenAi, &[]).await;
    world.fake.queue([Reply::Speak("Still here after the switch.".into())]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b"}});
    let run = world.client("rotation", config);
    run.mark("ready", Duration::from_secs(20)).await;
    // The user is mid-sentence when the upstream session expires.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    world.fake.act(Action::Expire).await;
    let result = run.finish(&world, Duration::from_secs(60)).await;
    assert!(result["observations"]["reconnecting"]["type"] == "reconnecting");
    assert_eq!(world.fake.connections().len(), 2, "a second upstream session");
    let mut upstream = fake_audio(&world.fake, 0);
    upstream.extend(fake_audio(&world.fake, 1));
    let kept = correlation(&mic_pcm(), 48_000, &upstream, 24_000);
    assert!(kept >= 0.9, "the user's sentence across both upstream sessions: correlation {kept:.3}");
    assert!(!events(&result, "svc.reconnected").is_empty());
    world.assert_no_input_dropped(&session_id(&result)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_browser_on_livekit_client_holds_a_conversation() {
    let world = World::start("browser", Flavor::OpenAi, &[]).await;
    let greeting = "Hello from the agent.";
    let spoken_reply = "I heard every word you said.";
    world.fake.queue([
        Reply::Speak(greeting.into()),
        Reply::Speak(spoken_reply.into()),
        Reply::Speak("It is noon.".into()),
    ]);
    let config = json!({"agent": {"type": "inline", "model": "provider_b", "greeting": greeting}});
    let result = world.browser_client(config).finish(&world, Duration::from_secs(90)).await;
    let observations = &result["observations"];
    let id = observations["session_id"].as_str().expect("session id").to_owned();
    let ready =
        json!({"type": "ready", "session_id": id, "agent": null, "rejected_tools": [], "max_session_seconds": 14400});
    assert_eq!(observations["ready_frame"], ready);
    assert_eq!(observations["ready_attribute"], ready);
    let finals = assistant_finals(&result);
    assert_eq!(finals, [greeting, spoken_reply, "It is noon."]);
    let heard_by_fake = correlation(&mic_pcm(), 48_000, &fake_audio(&world.fake, 0), 24_000);
    assert!(heard_by_fake >= 0.9, "the browser's microphone at the provider: {heard_by_fake:.3}");
    let spoken = svc_testkit::speech::speech(spoken_reply, 24_000);
    let heard_by_client = correlation(&spoken, 24_000, &agent_recording(&result), 48_000);
    assert!(heard_by_client >= 0.9, "the provider's voice in the browser: {heard_by_client:.3}");
    assert_eq!(world.get_json(&format!("/sessions/{id}"))["status"], "completed");
    world.assert_no_input_dropped(&id).await;
    eprintln!("browser: mic→provider {heard_by_fake:.3}, provider→browser {heard_by_client:.3}");
}

/// One spoken turn with a provider family: the microphone reaches it, its voice reaches the client.
async fn spoken_turn(test: &'static str, flavor: Flavor, model: &str, input_rate: u32, nudge: Option<Action>) {
    let world = World::start(test, flavor, &[]).await;
    let reply = "Nice to hear from you today.";
    world.fake.queue([Reply::Speak(reply.into())]);
    let config = json!({"agent": {"type": "inline", "model": model}});
    let run = world.client("spoken_turn", config);
    if let Some(action) = nudge {
        run.mark("spoken", Duration::from_secs(30)).await;
        world.fake.act(action).await;
    }
    let result = run.finish(&world, Duration::from_secs(60)).await;
    let upstream = fake_audio(&world.fake, 0);
    // Kept beside the run's logs: what the provider heard, to compare with the microphone.
    let heard = std::fs::File::create(world.dir.join("provider.heard.wav")).expect("heard file");
    svc_audio::wav::write_wav(heard, input_rate, 1, &upstream).expect("heard");
    let heard_by_fake = correlation(&mic_pcm(), 48_000, &upstream, input_rate);
    assert!(heard_by_fake >= 0.9, "{test}: the microphone at the provider: {heard_by_fake:.3}");
    let spoken = svc_testkit::speech::speech(reply, 24_000);
    let reference = world.dir.join("reply.reference.wav");
    let file = std::fs::File::create(&reference).expect("reference file");
    svc_audio::wav::write_wav(file, 24_000, 1, &spoken).expect("reference");
    let heard_by_client = correlation(&spoken, 24_000, &agent_recording(&result), 48_000);
    assert!(
        heard_by_client >= 0.9,
        "{test}: the provider's voice at the client: {heard_by_client:.3} (reference {})",
        reference.display()
    );
    let finals = assistant_finals(&result);
    assert_eq!(finals, [reply]);
    world.assert_no_input_dropped(&session_id(&result)).await;
    eprintln!("{test}: mic→provider {heard_by_fake:.3}, provider→client {heard_by_client:.3}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn xai_holds_a_spoken_turn() {
    spoken_turn("xai", Flavor::Xai, "provider_c", 24_000, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn gpt_live_holds_a_spoken_turn() {
    // The model owns turn-taking: the fake takes its turn when told to, after the user spoke.
    let turn = Action::UserTurn { transcript: "Hello there ".into(), late_transcript: false, respond: true };
    spoken_turn("gpt-live", Flavor::OpenAi, "provider_b_live", 24_000, Some(turn)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_resumed_session_remembers_the_conversation_and_never_greets_again() {
    let world = World::start("resume", Flavor::OpenAi, &[]).await;
    world.fake.queue([
        Reply::Speak("Welcome!".into()),
        Reply::Speak("Nice to meet you, Ada.".into()),
        Reply::Speak("Your name is Ada.".into()),
    ]);
    let agent = json!({"type": "inline", "model": "provider_b", "greeting": "Welcome!"});
    let first = world
        .client_with("first", "typed_turn", json!({"agent": agent}), &["--text", "My name is Ada."])
        .finish(&world, Duration::from_secs(60))
        .await;
    let first_id = session_id(&first);
    let resumed = json!({"agent": agent, "session": {"experimental": {"resume_session_id": first_id}}});
    let second = world
        .client_with("second", "typed_turn", resumed, &["--text", "What is my name?"])
        .finish(&world, Duration::from_secs(60))
        .await;
    assert_eq!(second["observations"]["spoke_first"], json!([]), "no greeting on resume");
    let finals = assistant_finals(&second);
    assert_eq!(finals, ["Your name is Ada."]);
    // The new upstream session was seeded with the first one's transcript.
    let seeded = world.fake.received().iter().filter(|r| r.connection == 1).any(|r| {
        r.message.to_string().contains("My name is Ada.") && r.message.to_string().contains("Nice to meet you, Ada.")
    });
    assert!(seeded, "the second upstream session got the first conversation");
    let timeline = world.get_json(&format!("/sessions/{}/timeline", session_id(&second)));
    let joined = timeline["events"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["type"] == "agent.joined")
        .expect("agent.joined");
    assert_eq!(joined["data"]["resumed_from"], json!(first_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh, which installs baresip); run by scripts/test.sh"]
async fn a_phone_dialled_into_a_session_talks_with_the_agent_and_hangs_up() {
    let (phone, speech) = answering_phone();
    let trunk = format!("sip:{}", phone.addr);
    let args = ["--sip-trunk", &trunk, "--sip-caller-number", "+15550100", "--sip-bind", "127.0.0.1:0"];
    let world = World::start("phone", Flavor::OpenAi, &[&args[..], &["--sip-rtp-ports", "31000-31199"]].concat()).await;
    world.admin(&["workspace", "set", "e2e", "--phone-calls", "true", "--dial-minute-limit", "100"]);
    // The same trunk answers LiveKit's SIP API on the room (PyPI `livekit-api`; its calls are
    // tested in crates/svc-phone/tests/livekit_sip.rs).
    let trunks = support::sdk_report(
        std::process::Command::new(repo().join("target/interop/venv/bin/python"))
            .arg(repo().join("tests/interop/py/sip_dial.py"))
            .args(["--url", &format!("{}/room", world.base_url), "--key", support::ROOM_API_KEY])
            .args(["--secret", support::ROOM_API_SECRET, "--room", "-", "--number", "-", "--list-only"]),
        &world.server.log_tail(40),
    );
    assert_eq!(trunks["trunks"][0]["address"], phone.addr.to_string(), "{trunks}");
    assert_eq!(trunks["trunks"][0]["numbers"], json!(["+15550100"]), "{trunks}");
    let reply = "Thank you for calling, I heard you.";
    world.fake.queue([Reply::Speak(reply.into())]);

    let body = json!({"sdk": {"name": "e2e", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}});
    let (status, started) = world.post("/realtime/session/start", &body);
    assert_eq!(status, 200, "{started}");
    let id = started["session_id"].as_str().expect("id").to_owned();
    let (status, dialled) = world.post(&format!("/realtime/session/{id}/dial"), &json!({"phone_number": "+15550199"}));
    assert_eq!(status, 202, "{dialled}");
    let dial_id = dialled["dial_id"].as_str().expect("dial_id").to_owned();
    let (status, again) = world.post(&format!("/realtime/session/{id}/dial"), &json!({"phone_number": "+15550199"}));
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("session_already_dialed")));

    let (heard_by_fake, heard_by_phone) = phone_call_heard_both_ways(&world, &id, &phone, &speech, reply).await;

    let timeline = world.get_json(&format!("/sessions/{id}/timeline"));
    let entries: Vec<&Value> = timeline["events"].as_array().into_iter().flatten().collect();
    let kinds: Vec<&str> =
        entries.iter().filter_map(|e| e["type"].as_str()).filter(|k| k.starts_with("dial.")).collect();
    assert_eq!(kinds.first(), Some(&"dial.placed"), "{kinds:?}");
    assert!(kinds.contains(&"dial.answered"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"dial.ended"), "{kinds:?}");
    let ended = entries.iter().find(|e| e["type"] == "dial.ended").expect("dial.ended");
    assert_eq!(ended["data"]["dial_id"], dial_id.as_str());
    assert_eq!(ended["data"]["ended_by"], "phone", "{ended}");
    let answered_for = ended["data"]["duration_seconds"].as_f64().unwrap_or(0.0);
    assert!((5.0..20.0).contains(&answered_for), "answered for {answered_for} s");
    let session_end = entries.iter().find(|e| e["type"] == "session.ended").expect("session.ended");
    assert_eq!(session_end["data"]["reason"], "participant_left", "{session_end}");
    world.assert_no_input_dropped(&id).await;

    // The call's minutes are metered against the workspace.
    let store = svc_store::Store::connect(&format!("sqlite://{}", world.data_dir.path().join("svc.db").display()))
        .await
        .expect("open the store");
    // Stored by the dial's watcher as the call ends, beside the session's own end.
    let deadline = Instant::now() + Duration::from_secs(5);
    let metered = loop {
        let dial = store.dial_of_session(&id).await.expect("read").expect("the dial");
        if dial.outcome.is_some() || Instant::now() > deadline {
            break dial;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(metered.outcome.as_deref(), Some("completed"), "{metered:?}");
    assert_eq!(metered.billed_seconds, answered_for.ceil() as i64, "{metered:?}");
    eprintln!("phone: phone→provider {heard_by_fake:.3}, provider→phone {heard_by_phone:.3}, {answered_for:.1} s");
}

/// The phone: baresip on loopback as the trunk, answering at once. It says the microphone
/// sentence (returned) after a second, stays quiet while the agent answers, and hangs up when its
/// file ends.
pub(crate) fn answering_phone() -> (baresip::Baresip, Vec<i16>) {
    let speech = mic_pcm();
    let mut say = vec![0i16; 48_000];
    say.extend_from_slice(&speech);
    say.extend(std::iter::repeat_n(0i16, 7 * 48_000));
    let phone = baresip::Baresip::start("+15550199", &say).expect("baresip is installed (scripts/interop-setup.sh)");
    (phone, speech)
}

/// Waits for the phone's hangup to end session `id` as a user's leave does (`completed`), then
/// checks the call both ways: the phone's `speech` at the provider, the agent's `reply` at the
/// phone (G.711). Returns the two correlations.
pub(crate) async fn phone_call_heard_both_ways(
    world: &World,
    id: &str,
    phone: &baresip::Baresip,
    speech: &[i16],
    reply: &str,
) -> (f64, f64) {
    let deadline = Instant::now() + Duration::from_secs(40);
    let session = loop {
        let session = world.get_json(&format!("/sessions/{id}"));
        if session["status"] != "active" {
            break session;
        }
        assert!(Instant::now() < deadline, "the session did not end after the phone hung up\n{}", phone.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(session["status"], "completed", "{session}");
    let heard_by_fake = correlation(speech, 48_000, &fake_audio(&world.fake, 0), 24_000);
    assert!(heard_by_fake >= 0.8, "the phone's voice at the provider: {heard_by_fake:.3}");
    let (rate, heard) = phone.heard();
    assert!(rate > 0 && !heard.is_empty(), "baresip recorded nothing\n{}", phone.log());
    assert_eq!(rate, 8_000, "G.711 at the phone");
    let mut heard_48k = Vec::new();
    svc_audio::resample::Resampler::telephone_to_room().process(&heard, &mut heard_48k);
    let heard_by_phone = correlation(&svc_testkit::speech::speech(reply, 24_000), 24_000, &heard_48k, 48_000);
    assert!(heard_by_phone >= 0.8, "the agent's voice at the phone: {heard_by_phone:.3}");
    (heard_by_fake, heard_by_phone)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn deleting_a_live_session_ends_it_before_its_rows_go() {
    let world = World::start("delete-live", Flavor::OpenAi, &[]).await;
    let body = json!({"sdk": {"name": "e2e", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b"}});
    let (status, started) = world.post("/realtime/session/start", &body);
    assert_eq!(status, 200, "{started}");
    let id = started["session_id"].as_str().expect("id").to_owned();
    assert_eq!(world.get_json(&format!("/sessions/{id}"))["status"], "active");
    // Let it run: heartbeat and timeline writes under way.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let (status, body) =
        http(&world.server.listen, "DELETE", &format!("/api/v1/external/sessions/{id}"), &world.key, None);
    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&body));
    assert_eq!(world.get(&format!("/sessions/{id}")).0, 404);
    // Whatever the session would still write has had time to fail.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let log = std::fs::read_to_string(world.dir.join("svc.log")).expect("svc log");
    let lines: Vec<&str> = log.lines().filter(|line| line.contains(&id)).collect();
    let ended = lines.iter().position(|line| line.contains("session ended") && line.contains("session_deleted"));
    let deleted = lines.iter().position(|line| line.contains("deleted session"));
    assert!(
        matches!((ended, deleted), (Some(ended), Some(deleted)) if ended < deleted),
        "the session ends (reason session_deleted) before its rows are deleted:\n{}",
        lines.join("\n")
    );
    let failures: Vec<&&str> =
        lines.iter().filter(|line| line.contains("failed") || line.contains("could not be stored")).collect();
    assert!(failures.is_empty(), "nothing of the session is written after its deletion: {failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn gemini_holds_a_spoken_turn_with_svc_vad() {
    // provider_a's default turn detection is svc's own: the fake answers at activityEnd.
    spoken_turn("gemini", Flavor::OpenAi, "provider_a", 16_000, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn noise_cancellation_keeps_the_user_s_speech() {
    let world = World::start("voice-focus", Flavor::OpenAi, &[]).await;
    world.fake.queue([Reply::Speak("Understood.".into())]);
    let config =
        json!({"agent": {"type": "inline", "model": "provider_b", "audio": {"noise_cancellation": "voice_focus"}}});
    let result = world.client("spoken_turn", config).finish(&world, Duration::from_secs(60)).await;
    let kept = correlation(&mic_pcm(), 48_000, &fake_audio(&world.fake, 0), 24_000);
    assert!(kept >= 0.85, "the user's speech through voice_focus: correlation {kept:.3}");
    assert!(!events(&result, "turn-complete").is_empty());
    eprintln!("voice_focus: mic→provider {kept:.3}");
}

/// What the user asks the local agent.
const LOCAL_QUESTION: &str = "Please tell me a short story about a friendly dog.";

/// The local provider's models, as `scripts/test.sh` installs them.
fn local_models() -> PathBuf {
    let dir = std::env::var_os("SVC_LOCAL_MODELS").map_or_else(|| repo().join("target/local-models"), PathBuf::from);
    assert!(
        dir.join("whisper-base/model.safetensors").is_file(),
        "the local models are missing in {}: run `svc models install` (scripts/test.sh does)",
        dir.display()
    );
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness and the local models; run by scripts/test.sh"]
async fn a_local_agent_hears_the_user_and_answers_aloud() {
    let models = local_models();
    let models_arg = models.display().to_string();
    let world = World::start("local", Flavor::OpenAi, &["--local-models", &models_arg]).await;
    // A short reply (the knob), so that it is spoken within the scenario's wait.
    let config = json!({"agent": {"type": "inline", "model": {"provider": "provider_local", "max_output_tokens": 40},
        "instructions": "You are a friendly assistant who likes animals."}});
    // The user's question, spoken by espeak-ng at 48 kHz (Whisper base hears the shared fox
    // sentence as "the quick round fox jump", 14 % WER even from the file itself).
    let (pcm, rate) =
        svc_local::tts::speak_native(LOCAL_QUESTION, &svc_local::tts::Voice::named("en-us")).expect("espeak-ng speaks");
    let mic = world.dir.join("question.wav");
    let file = std::fs::File::create(&mic).expect("mic file");
    let mut question = svc_audio::resample::resample_clip(&pcm, rate, 48_000).expect("espeak-ng's rate converts");
    question.splice(0..0, std::iter::repeat_n(0i16, 9_600));
    svc_audio::wav::write_wav(file, 48_000, 1, &question).expect("mic");
    let mic_arg = mic.display().to_string();
    let result = world
        .client_with("spoken_turn", "spoken_turn", config, &["--mic", &mic_arg])
        .finish(&world, Duration::from_secs(90))
        .await;
    let heard: Vec<&str> = events(&result, "transcript")
        .into_iter()
        .filter(|e| e["role"] == "USER" && e["is_final"] == true)
        .filter_map(|e| e["text"].as_str())
        .collect();
    let heard = heard.join(" ");
    let user_wer = wer(LOCAL_QUESTION, &heard);
    assert!(user_wer <= 0.10, "the user transcript {heard:?} (WER {user_wer:.2})");
    let replies = assistant_finals(&result);
    let reply = replies.first().copied().expect("the agent answered").to_owned();
    assert!(!reply.trim().is_empty());
    // What the client heard is the reply: Whisper reads the recording back.
    let recording = agent_recording(&result);
    let recording_16k = resample(&recording, 48_000, 16_000);
    let samples: Vec<f32> = recording_16k.iter().map(|&s| f32::from(s) / 32_768.0).collect();
    let whisper = svc_stt::WhisperModel::load(&models.join("whisper-base")).expect("whisper loads");
    let read_back = whisper.transcribe(&samples).expect("transcribes").text;
    let reply_wer = wer(&reply, &read_back);
    assert!(reply_wer <= 0.25, "the client heard {read_back:?} for the reply {reply:?} (WER {reply_wer:.2})");
    let id = session_id(&result);
    assert_eq!(world.get_json(&format!("/sessions/{id}"))["status"], "completed");
    let usage = world.final_usage(&id).await;
    eprintln!(
        "local: heard {heard:?} (WER {user_wer:.2}); replied {reply:?}; client heard {read_back:?}; usage {usage}"
    );
}
