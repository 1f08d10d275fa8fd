//! The session core in virtual time: no sockets, no clock, no provider; every test scripts the
//! provider's events and the room's inputs and reads what the core decided.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_domain::model::ModelCatalog;
use svc_domain::session_config::parse_start;
use svc_domain::settings::RecordingConsents;
use svc_domain::start::{CatalogLookup, StartContext, resolve_start};
use svc_domain::tools::{ServerTool, ServerToolAvailability};
use svc_provider_core::{ProviderError, ProviderEvent, ProviderInput, ResponseStatus};
use svc_wire::events::{ENVELOPE_THRESHOLD_BYTES, chunk_message};

use super::*;

mod tools;

const MS: Duration = Duration::from_millis(1);
/// How long [`Harness::live`] spends on the listener's priming silence.
const PRIMED: Duration = Duration::from_millis(20 * PRIMING_FRAMES as u64);

fn resolved(agent: Value, session: Value) -> Arc<ResolvedSession> {
    let tools = ServerToolAvailability::new([ServerTool::EndCall, ServerTool::SpeakerLog, ServerTool::ExamineImage]);
    resolved_with(agent, session, &tools)
}

/// [`resolved`] on a deployment whose server tools are `tools`.
fn resolved_with(agent: Value, session: Value, tools: &ServerToolAvailability) -> Arc<ResolvedSession> {
    let body = json!({"sdk": {"name": "test", "version": "1.0.0"}, "agent": agent, "session": session});
    let request = parse_start(&body, None).expect("valid start");
    let context = StartContext {
        catalog: ModelCatalog::embedded(),
        server_tools: tools,
        caller_has_resources_read: false,
        consents: RecordingConsents { audio: true, transcript: true, video: false },
        avatar_enabled: false,
        server_max_session_seconds: None,
    };
    Arc::new(resolve_start(request, CatalogLookup::NotApplicable, &context).expect("resolves"))
}

/// An OpenAI-family session (server VAD upstream: no svc_vad gate in the way).
fn openai(extra: Value) -> Arc<ResolvedSession> {
    let mut agent = json!({"type": "inline", "model": "provider_b"});
    if let (Some(agent), Some(extra)) = (agent.as_object_mut(), extra.as_object()) {
        agent.extend(extra.clone());
    }
    resolved(agent, json!({}))
}

struct Harness {
    core: SessionCore,
    now: Instant,
    events: Vec<Value>,
    targeted: Vec<(String, Value)>,
    inputs: Vec<ProviderInput>,
    frames: usize,
    silence_frames: usize,
    attributes: BTreeMap<String, String>,
    persisted: Vec<Persist>,
    binds: Vec<Option<String>>,
    jobs: Vec<ToolJob>,
    aborted: Vec<String>,
    finished: Option<Finish>,
}

impl Harness {
    fn new(session: Arc<ResolvedSession>) -> Harness {
        let now = Instant::now();
        let input_rate_hz = svc_provider::input_rate_hz(&session.model).expect("a known family");
        let cfg = CoreConfig {
            session_id: "sess-1".into(),
            agent_identity: "agent".into(),
            started_at_us: 1_000_000_000_000,
            session,
            input_rate_hz,
            timing: Timing::default(),
        };
        let mut harness = Harness {
            core: SessionCore::new(cfg, now),
            now,
            events: Vec::new(),
            targeted: Vec::new(),
            inputs: Vec::new(),
            frames: 0,
            silence_frames: 0,
            attributes: BTreeMap::new(),
            persisted: Vec::new(),
            binds: Vec::new(),
            jobs: Vec::new(),
            aborted: Vec::new(),
            finished: None,
        };
        harness.collect();
        harness
    }

    /// Ready provider and one active user who publishes audio.
    fn live(session: Arc<ResolvedSession>) -> Harness {
        let mut h = Harness::new(session);
        h.provider(ProviderEvent::Ready { upstream_session_id: Some("up".into()) });
        h.join("alice");
        // The new listener's priming silence plays first.
        h.advance(FRAME * PRIMING_FRAMES as u32);
        h.take_events();
        h.inputs.clear();
        h.frames = 0;
        h
    }

    fn collect(&mut self) {
        while let Some(output) = self.core.poll_output() {
            match output {
                Output::Data { json, to: None } => self.events.push(serde_json::from_str(&json).expect("json")),
                Output::Data { json, to: Some(to) } => {
                    self.targeted.push((to, serde_json::from_str(&json).expect("json")));
                }
                Output::Attributes(attributes) => self.attributes.extend(attributes),
                Output::Provider(input) => self.inputs.push(input),
                Output::Audio { silence: false, .. } => self.frames += 1,
                Output::Audio { silence: true, .. } => self.silence_frames += 1,
                Output::BindInput(identity) => self.binds.push(identity),
                Output::Persist(persist) => self.persisted.push(persist),
                Output::RunTool(job) => self.jobs.push(job),
                Output::AbortTool { call_id } => self.aborted.push(call_id),
                Output::Finished(finish) => {
                    assert!(self.finished.is_none(), "finished twice");
                    self.finished = Some(finish);
                }
            }
        }
    }

    /// Moves virtual time forward, firing every timeout on the way in order.
    fn advance(&mut self, by: Duration) {
        let until = self.now + by;
        while let Some(at) = self.core.poll_timeout().filter(|at| *at <= until) {
            self.now = at.max(self.now);
            self.core.handle_timeout(self.now);
            self.collect();
        }
        self.now = until;
        self.core.handle_timeout(self.now);
        self.collect();
    }

    fn provider(&mut self, event: ProviderEvent) {
        self.core.handle_provider_event(self.now, event);
        self.collect();
    }

    fn join(&mut self, identity: &str) {
        let peer = Peer { identity: identity.into(), is_agent: false, active: true, publishes_audio: true };
        self.core.handle_peer(self.now, peer);
        self.collect();
    }

    fn data(&mut self, from: &str, message: Value) -> Result<(), Dropped> {
        let result = self.core.handle_data(self.now, from, message.to_string().as_bytes());
        self.collect();
        result
    }

    fn take_events(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.events)
    }

    fn types(events: &[Value]) -> Vec<String> {
        events.iter().map(|e| e["type"].as_str().unwrap_or("?").to_owned()).collect()
    }

    fn take_types(&mut self) -> Vec<String> {
        let events = self.take_events();
        Self::types(&events)
    }

    fn take_inputs(&mut self) -> Vec<ProviderInput> {
        std::mem::take(&mut self.inputs)
    }

    fn timeline_kinds(&self) -> Vec<&'static str> {
        self.persisted
            .iter()
            .filter_map(|p| match p {
                Persist::Timeline { kind, .. } => Some(*kind),
                _ => None,
            })
            .collect()
    }

    fn turns(&self) -> Vec<(&'static str, String)> {
        self.persisted
            .iter()
            .filter_map(|p| match p {
                Persist::Turn { role, text, .. } => Some((*role, text.clone())),
                _ => None,
            })
            .collect()
    }

    /// A spoken response of `ms` milliseconds at 24 kHz, with its transcript in two fragments.
    fn speak(&mut self, text: &str, ms: usize) {
        self.provider(ProviderEvent::ResponseStarted);
        let (first, second) = text.split_at(text.len() / 2);
        self.provider(ProviderEvent::AssistantTranscript { text: first.into(), is_final: false });
        self.provider(ProviderEvent::AssistantAudio { pcm: vec![3000; 24 * ms / 2], sample_rate: 24_000 });
        self.provider(ProviderEvent::AssistantTranscript { text: second.into(), is_final: false });
        self.provider(ProviderEvent::AssistantAudio { pcm: vec![3000; 24 * ms / 2], sample_rate: 24_000 });
        self.provider(ProviderEvent::AssistantTranscript { text: text.into(), is_final: true });
        self.provider(ProviderEvent::ResponseDone { status: ResponseStatus::Completed });
    }
}

#[test]
fn readiness_is_a_frame_an_attribute_and_a_frame_for_each_later_joiner() {
    let mut h = Harness::new(openai(json!({})));
    assert_eq!(h.attributes.get(AGENT_STATE_ATTRIBUTE).map(String::as_str), Some("initializing"));
    h.provider(ProviderEvent::Ready { upstream_session_id: None });
    let ready = json!({"type": "ready", "session_id": "sess-1", "agent": null, "rejected_tools": [],
        "max_session_seconds": null});
    assert_eq!(h.take_events(), vec![ready.clone()]);
    let attribute: Value = serde_json::from_str(&h.attributes[READY_ATTRIBUTE]).expect("json");
    assert_eq!(attribute, ready);
    assert_eq!(h.attributes[AGENT_STATE_ATTRIBUTE], "listening");
    h.join("late");
    assert_eq!(h.targeted, vec![("late".to_owned(), ready)]);
    assert_eq!(h.binds, vec![Some("late".to_owned())], "the first publisher is the input");
}

#[test]
fn an_oversized_ready_attribute_degrades_to_the_id_and_the_cap() {
    let mut session =
        (*resolved(json!({"type": "inline", "model": "provider_b"}), json!({"max_session_seconds": 600}))).clone();
    session.rejected_tools = (0..200)
        .map(|i| svc_domain::tools::RejectedTool {
            name: format!("web_search_{i}"),
            reason: "not_configured: x".into(),
        })
        .collect();
    let mut h = Harness::new(Arc::new(session));
    h.provider(ProviderEvent::Ready { upstream_session_id: None });
    let attribute: Value = serde_json::from_str(&h.attributes[READY_ATTRIBUTE]).expect("json");
    assert_eq!(attribute, json!({"type": "ready", "session_id": "sess-1", "max_session_seconds": 600}));
    let frame = h.take_events();
    assert_eq!(frame.len(), 1);
    assert_eq!(frame[0]["rejected_tools"].as_array().map(Vec::len), Some(200), "the frame carries everything");
}

#[test]
fn a_spoken_turn_has_its_markers_in_order_and_the_transcript_follows_the_audio_heard() {
    let mut h = Harness::live(openai(json!({})));
    h.provider(ProviderEvent::UserSpeechStarted);
    h.advance(800 * MS);
    h.provider(ProviderEvent::UserSpeechStopped);
    h.provider(ProviderEvent::UserTranscript { text: "What time".into(), is_final: false, speech_started_ms: 5 });
    h.provider(ProviderEvent::UserTranscript { text: "What time is it?".into(), is_final: true, speech_started_ms: 5 });
    assert_eq!(h.attributes[AGENT_STATE_ATTRIBUTE], "thinking");
    h.speak("It is noon. Anything else?", 1000);
    assert_eq!(h.attributes[AGENT_STATE_ATTRIBUTE], "speaking");
    let first = h.take_events();
    assert_eq!(
        Harness::types(&first),
        [
            "user-started-speaking",
            "user-stopped-speaking",
            "transcript",
            "transcript",
            "turn-complete",
            "bot-llm-started",
            "bot-tts-started",
            "bot-started-speaking",
            "transcript",
            "bot-llm-stopped",
        ],
        "generation ended before playback did"
    );
    assert_eq!(first[3], json!({"type": "transcript", "role": "USER", "text": "What time is it?", "is_final": true}));
    assert_eq!(
        first[8],
        json!({"type": "transcript", "role": "ASSISTANT", "text": "It is noon. A", "is_final": false})
    );
    assert_eq!(h.frames, 1, "one frame is out, the rest is paced");
    // The second fragment arrived with the second half of the audio: it is heard at 500 ms.
    h.advance(460 * MS);
    assert!(h.take_types().is_empty());
    h.advance(60 * MS);
    let second = h.take_events();
    assert_eq!(
        second,
        vec![json!({"type": "transcript", "role": "ASSISTANT", "text": "nything else?", "is_final": false})]
    );
    h.advance(500 * MS);
    assert_eq!(h.frames, 50, "one second of audio in 20 ms frames");
    let end = h.take_events();
    assert_eq!(Harness::types(&end), ["bot-tts-stopped", "bot-stopped-speaking", "transcript", "turn-complete"]);
    assert_eq!(end[2]["text"], "It is noon. Anything else?");
    assert_eq!(end[3]["role"], "ASSISTANT");
    assert_eq!(h.attributes[AGENT_STATE_ATTRIBUTE], "listening");
    assert_eq!(
        h.turns(),
        vec![("user", "What time is it?".to_owned()), ("assistant", "It is noon. Anything else?".to_owned())]
    );
    assert!(h.timeline_kinds().contains(&"turn.latency"));
    let usage = h.core.usage_totals(h.now);
    assert_eq!((usage.turn_count, usage.user_speaking_ms, usage.agent_speaking_ms), (1, 800, 1000));
}

#[test]
fn a_barge_in_stops_playback_at_once_and_the_final_is_what_was_heard() {
    let mut h = Harness::live(openai(json!({})));
    // Still generating when the user cuts in.
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::AssistantTranscript { text: "One two three four five six.".into(), is_final: false });
    h.provider(ProviderEvent::AssistantAudio { pcm: vec![3000; 24 * 3000], sample_rate: 24_000 });
    h.provider(ProviderEvent::AssistantTranscript { text: "One two three four five six.".into(), is_final: true });
    h.advance(1000 * MS);
    let frames_before = h.frames;
    h.take_events();
    h.provider(ProviderEvent::UserSpeechStarted);
    h.provider(ProviderEvent::Interrupted);
    let barge = h.take_inputs();
    assert_eq!(barge, vec![ProviderInput::BargeIn { played_ms: 1020 }]);
    assert_eq!(h.take_types(), ["user-started-speaking", "bot-tts-stopped", "bot-stopped-speaking"]);
    // The adapter answers with what was heard.
    h.provider(ProviderEvent::AssistantTruncated { heard: "One two".into() });
    let end = h.take_events();
    assert_eq!(Harness::types(&end), ["transcript", "turn-complete"]);
    assert_eq!(end[0]["text"], "One two");
    h.advance(2000 * MS);
    assert_eq!(h.frames, frames_before, "nothing more of the cut response is played");
    // Late audio of the cut response is dropped; the next response plays.
    h.provider(ProviderEvent::AssistantAudio { pcm: vec![1; 4800], sample_rate: 24_000 });
    h.advance(500 * MS);
    assert_eq!(h.frames, frames_before);
    h.provider(ProviderEvent::ResponseDone { status: ResponseStatus::Cancelled });
    assert_eq!(h.turns().last(), Some(&("assistant", "One two".to_owned())));
    h.speak("Sure.", 200);
    h.advance(500 * MS);
    assert_eq!(h.frames, frames_before + 10);
}

#[test]
fn a_reply_cut_before_its_first_word_and_an_empty_reply_are_not_turns() {
    let mut h = Harness::live(openai(json!({})));
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::AssistantTranscript { text: "One two three four five six.".into(), is_final: false });
    h.provider(ProviderEvent::AssistantAudio { pcm: vec![3000; 24 * 3000], sample_rate: 24_000 });
    h.advance(200 * MS);
    h.take_events();
    h.provider(ProviderEvent::UserSpeechStarted);
    h.provider(ProviderEvent::Interrupted);
    assert!(matches!(h.take_inputs()[..], [ProviderInput::BargeIn { played_ms }] if played_ms > 0));
    h.take_events();
    // The adapter says how much was heard: not one word.
    h.provider(ProviderEvent::ResponseDone { status: ResponseStatus::Cancelled });
    h.provider(ProviderEvent::AssistantTruncated { heard: String::new() });
    h.advance(3000 * MS);
    let seen = h.take_types();
    assert!(!seen.iter().any(|kind| kind == "transcript" || kind == "turn-complete"), "{seen:?}");
    // A completed reply that said nothing.
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::AssistantTranscript { text: String::new(), is_final: true });
    h.provider(ProviderEvent::ResponseDone { status: ResponseStatus::Completed });
    h.advance(3000 * MS);
    let seen = h.take_types();
    assert!(!seen.iter().any(|kind| kind == "transcript" || kind == "turn-complete"), "{seen:?}");
    assert_eq!(h.core.usage_totals(h.now).turn_count, 0);
    assert!(h.turns().is_empty());
}

#[test]
fn a_barge_in_without_an_answer_from_the_adapter_finalizes_the_fragments_heard() {
    let mut h = Harness::live(openai(json!({})));
    h.speak("Alpha beta gamma delta", 2000);
    h.advance(800 * MS);
    h.take_events();
    h.provider(ProviderEvent::Interrupted);
    h.take_events();
    h.advance(2 * FINAL_TRANSCRIPT_GRACE);
    let end = h.take_events();
    assert_eq!(Harness::types(&end), ["transcript", "turn-complete"]);
    assert_eq!(end[0]["text"], "Alpha beta", "only the fragment whose audio was played");
}

#[test]
fn a_reply_playing_when_the_user_leaves_is_stored_as_far_as_it_was_heard() {
    let mut h = Harness::live(openai(json!({})));
    h.speak("Alpha beta gamma delta", 2000);
    h.advance(800 * MS);
    h.take_events();
    h.core.handle_peer_left(h.now, "alice", true);
    h.collect();
    assert_eq!(h.finished.as_ref().map(|f| f.reason.as_str()), Some("participant_left"));
    assert_eq!(h.turns(), vec![("assistant", "Alpha beta".to_owned())], "only the words played");
    assert_eq!(h.finished.as_ref().map(|f| f.usage.turn_count), Some(1));
    let end = h.take_events();
    assert_eq!(
        Harness::types(&end),
        ["bot-tts-stopped", "bot-stopped-speaking", "transcript", "turn-complete", "session-ended"]
    );

    // One that had played to its end, its final transcript still on the way, is stored whole.
    let mut h = Harness::live(openai(json!({})));
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::AssistantTranscript { text: "Alpha beta".into(), is_final: false });
    h.provider(ProviderEvent::AssistantAudio { pcm: vec![3000; 24 * 400], sample_rate: 24_000 });
    h.provider(ProviderEvent::ResponseDone { status: ResponseStatus::Completed });
    h.advance(800 * MS);
    h.core.handle_peer_left(h.now, "alice", true);
    h.collect();
    assert_eq!(h.turns(), vec![("assistant", "Alpha beta".to_owned())]);

    // One not yet heard at all leaves no turn, and neither does audio without words.
    let mut h = Harness::live(openai(json!({})));
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::AssistantTranscript { text: "Alpha".into(), is_final: false });
    h.core.handle_peer_left(h.now, "alice", true);
    h.collect();
    assert!(h.turns().is_empty());
    let mut h = Harness::live(openai(json!({})));
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::AssistantAudio { pcm: vec![3000; 24 * 400], sample_rate: 24_000 });
    h.advance(800 * MS);
    h.take_events();
    h.core.handle_peer_left(h.now, "alice", true);
    h.collect();
    assert!(h.turns().is_empty());
    let end = h.take_types();
    assert!(!end.iter().any(|kind| kind == "transcript" || kind == "turn-complete"), "{end:?}");
}

#[test]
fn a_client_tool_is_answered_exactly_once() {
    let tool = json!({"kind": "client", "name": "lookup_order", "description": "Find an order",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}});
    let mut h = Harness::live(openai(json!({"tools": [tool]})));
    h.provider(ProviderEvent::ToolCall {
        call_id: "call_1".into(),
        name: "lookup_order".into(),
        arguments: json!({"id": "7"}),
    });
    let invocation = h.take_events();
    assert_eq!(
        invocation,
        vec![
            json!({"type": "tool-invocation", "request_id": "req_1", "tool_call_id": "call_1", "name": "lookup_order",
            "args": {"id": "7"}, "origin": "realtime", "executable": true})
        ]
    );
    // The provider repeating the call changes nothing.
    h.provider(ProviderEvent::ToolCall { call_id: "call_1".into(), name: "lookup_order".into(), arguments: json!({}) });
    assert!(h.take_events().is_empty());
    let answer = json!({"request_id": "req_1", "tool_call_id": "call_1", "result": {"status": "shipped"}}).to_string();
    assert_eq!(h.core.handle_tool_result(h.now, "alice", &answer), Ok(r#"{"accepted":true}"#.to_owned()));
    h.collect();
    assert_eq!(
        h.take_inputs(),
        vec![ProviderInput::ToolResult {
            call_id: "call_1".into(),
            output: json!({"status": "shipped"}),
            is_error: false,
            scheduling: None
        }]
    );
    assert_eq!(h.core.handle_tool_result(h.now, "alice", &answer), Err(AnswerRefusal::Duplicate));
    assert_eq!(h.core.handle_tool_result(h.now, "alice", "{}"), Err(AnswerRefusal::Malformed));
    // An unanswered call is answered upstream with an error at the timeout, once.
    h.provider(ProviderEvent::ToolCall { call_id: "call_2".into(), name: "lookup_order".into(), arguments: json!({}) });
    h.advance(CLIENT_TOOL_TIMEOUT + MS);
    let inputs = h.take_inputs();
    assert!(
        matches!(&inputs[..], [ProviderInput::ToolResult { call_id, is_error: true, .. }] if call_id == "call_2"),
        "{inputs:?}"
    );
    let late = json!({"request_id": "req_2", "tool_call_id": "call_2", "result": 1}).to_string();
    assert_eq!(h.core.handle_tool_result(h.now, "alice", &late), Err(AnswerRefusal::Late));
    h.advance(CLIENT_TOOL_TIMEOUT * 2);
    assert!(h.take_inputs().is_empty(), "no second error");
    // A call for a tool the session does not have is refused upstream at once.
    h.provider(ProviderEvent::ToolCall { call_id: "call_3".into(), name: "rm_rf".into(), arguments: json!({}) });
    assert!(matches!(&h.take_inputs()[..], [ProviderInput::ToolResult { is_error: true, .. }]));
}

#[test]
fn end_call_lets_the_goodbye_finish_then_every_leg_drops() {
    let mut h = Harness::live(openai(json!({"tools": [{"kind": "end_call"}]})));
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::ToolCall { call_id: "c".into(), name: "end_call".into(), arguments: json!({}) });
    h.provider(ProviderEvent::ResponseDone { status: ResponseStatus::Completed });
    let events = h.take_types();
    assert_eq!(events, ["bot-llm-started", "tool-call", "tool-dispatch-started", "tool-result", "bot-llm-stopped"]);
    assert!(h.finished.is_none(), "the goodbye has not been said yet");
    h.speak("Goodbye!", 600);
    h.advance(300 * MS);
    assert!(h.finished.is_none(), "still speaking");
    h.advance(400 * MS);
    let finish = h.finished.clone().expect("finished");
    assert_eq!((finish.status, finish.reason.as_str()), (EndStatus::Completed, "end_call"));
    let events = h.take_events();
    assert_eq!(events.last(), Some(&json!({"type": "session-ended", "reason": "end_call"})));
    assert!(h.take_inputs().contains(&ProviderInput::Close));
}

#[test]
fn silence_hooks_say_then_end_the_call() {
    let hooks = json!([
        {"trigger": "user.speech.timeout", "timeout_seconds": 5, "action": {"type": "say", "text": "Still there?"}, "max_count": 1},
        {"trigger": "user.speech.timeout", "timeout_seconds": 12, "action": {"type": "end_call"}},
    ]);
    let mut h = Harness::live(openai(json!({"hooks": hooks})));
    h.advance(5 * Duration::from_secs(1) - PRIMED - MS);
    assert!(h.take_events().is_empty());
    h.advance(MS);
    let fired = h.take_events();
    assert_eq!(
        fired,
        vec![json!({"type": "user-speech-timeout", "session_id": "sess-1", "silence_ms": 5000, "trigger_count": 1,
            "max_count": 1, "action": {"type": "say", "text": "Still there?"}})]
    );
    assert_eq!(h.take_inputs(), vec![ProviderInput::Greeting("Still there?".into())]);
    h.speak("Still there?", 400);
    h.advance(Duration::from_secs(1));
    h.take_events();
    // The clock re-armed after the say; the end_call hook fires 12 s after it.
    h.advance(Duration::from_secs(11));
    assert!(h.finished.is_none());
    h.advance(Duration::from_secs(1));
    assert_eq!(h.finished.as_ref().map(|f| f.reason.as_str()), Some("silence_timeout"));
    let types = h.take_types();
    assert_eq!(types, ["user-speech-timeout", "session-ended"]);
}

#[test]
fn a_bare_say_hook_has_the_model_check_in() {
    let hooks = json!([{"trigger": "user.speech.timeout", "timeout_seconds": 4, "action": {"type": "say"}}]);
    let mut h = Harness::live(openai(json!({"hooks": hooks})));
    h.advance(4 * Duration::from_secs(1) - PRIMED);
    let fired = h.take_events();
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["action"], json!({"type": "say"}));
    assert_eq!(
        h.take_inputs(),
        vec![ProviderInput::Note {
            text: format!("The user has been silent for 4 seconds. {}", super::ending::CHECK_IN_PROMPT),
            respond: true,
        }]
    );
}

#[test]
fn user_speech_keeps_hooks_quiet() {
    let hooks = json!([{"trigger": "user.speech.timeout", "timeout_seconds": 3, "action": {"type": "end_call"}}]);
    let mut h = Harness::live(openai(json!({"hooks": hooks})));
    h.advance(2 * Duration::from_secs(1));
    h.provider(ProviderEvent::UserSpeechStarted);
    h.advance(10 * Duration::from_secs(1));
    assert!(h.finished.is_none(), "the user is talking");
}

#[test]
fn the_duration_cap_warns_then_ends() {
    let session = resolved(json!({"type": "inline", "model": "provider_b"}), json!({"max_session_seconds": 60}));
    let mut h = Harness::live(session);
    h.advance(Duration::from_secs(30) - PRIMED - MS);
    assert!(h.take_events().is_empty());
    h.advance(MS);
    assert_eq!(
        h.take_events(),
        vec![json!({"type": "session-ending-soon", "seconds_remaining": 30.0, "reason": "max_session_duration"})]
    );
    h.advance(Duration::from_secs(30));
    assert_eq!(h.take_events(), vec![json!({"type": "session-ended", "reason": "max_session_duration"})]);
    assert_eq!(
        h.finished.as_ref().map(|f| (f.status, f.reason.as_str())),
        Some((EndStatus::Completed, "max_session_duration"))
    );
    assert_eq!(h.core.poll_timeout(), None);
}

#[test]
fn a_drain_warns_then_ends_with_server_shutdown_unless_the_cap_comes_first() {
    // A short drain: warned at once, ended when it runs out.
    let mut h = Harness::live(openai(json!({})));
    let ends_at = h.now + Duration::from_secs(20);
    h.core.handle_drain(h.now, ends_at);
    h.collect();
    assert_eq!(
        h.take_events(),
        vec![json!({"type": "session-ending-soon", "seconds_remaining": 20.0, "reason": "server_shutdown"})]
    );
    // A later drain changes nothing; the session runs until the first one's end.
    h.core.handle_drain(h.now, ends_at + Duration::from_secs(60));
    h.advance(Duration::from_secs(20) - MS);
    assert!(h.take_events().is_empty() && h.finished.is_none());
    h.advance(MS);
    assert_eq!(h.take_events(), vec![json!({"type": "session-ended", "reason": "server_shutdown"})]);
    assert_eq!(
        h.finished.as_ref().map(|f| (f.status, f.reason.as_str())),
        Some((EndStatus::Completed, "server_shutdown"))
    );
    assert!(h.timeline_kinds().contains(&"session.ending_soon"));

    // A long drain warns the cap's lead before its end.
    let mut h = Harness::live(openai(json!({})));
    h.core.handle_drain(h.now, h.now + Duration::from_secs(120));
    h.collect();
    assert!(h.take_events().is_empty());
    h.advance(Duration::from_secs(90));
    assert_eq!(
        h.take_events(),
        vec![json!({"type": "session-ending-soon", "seconds_remaining": 30.0, "reason": "server_shutdown"})]
    );

    // The duration cap ends the session before the drain would: only the cap speaks.
    let session = resolved(json!({"type": "inline", "model": "provider_b"}), json!({"max_session_seconds": 60}));
    let mut h = Harness::live(session);
    h.core.handle_drain(h.now, h.now + Duration::from_secs(100));
    h.collect();
    h.advance(Duration::from_secs(60));
    assert_eq!(h.finished.as_ref().map(|f| f.reason.as_str()), Some("max_session_duration"));
    let reasons: Vec<Value> = h.take_events().iter().map(|event| event["reason"].clone()).collect();
    assert_eq!(reasons, vec![json!("max_session_duration"), json!("max_session_duration")]);
}

#[test]
fn long_messages_are_chunked_both_ways() {
    let tool = json!({"kind": "client", "name": "show_text", "description": "d"});
    let mut h = Harness::live(openai(json!({"tools": [tool]})));
    let big = "x".repeat(50_000);
    h.provider(ProviderEvent::ToolCall {
        call_id: "c".into(),
        name: "show_text".into(),
        arguments: json!({"text": big}),
    });
    let chunks = h.take_events();
    assert!(chunks.len() > 1 && chunks.iter().all(|c| c["type"] == "server-envelope-chunk"), "{}", chunks.len());
    let mut bytes = Vec::new();
    for chunk in &chunks {
        bytes.extend(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, chunk["data"].as_str().expect("data"))
                .expect("b64"),
        );
    }
    let inner: Value = serde_json::from_slice(&bytes).expect("inner json");
    assert_eq!(inner["type"], "tool-invocation");
    assert_eq!(inner["args"]["text"].as_str().map(str::len), Some(50_000));
    // Inbound: a 50 KB send-text in envelope chunks.
    let message = json!({"type": "send-text", "content": "y".repeat(50_000)}).to_string();
    assert!(message.len() > ENVELOPE_THRESHOLD_BYTES);
    let parts = chunk_message(&message, "c-1", ClientMessage::EnvelopeChunk).expect("chunked");
    for part in parts {
        h.data("alice", serde_json::to_value(&part).expect("json")).expect("accepted");
    }
    let inputs = h.take_inputs();
    assert!(inputs.iter().any(|i| matches!(i, ProviderInput::Text(t) if t.len() == 50_000)), "{}", inputs.len());
}

#[test]
fn client_messages_reach_the_provider_within_their_bounds() {
    let mut h = Harness::live(openai(json!({})));
    h.data("alice", json!({"type": "send-context", "content": "The user is a premium customer."})).expect("ok");
    assert_eq!(h.take_inputs(), vec![ProviderInput::Context("The user is a premium customer.".into())]);
    assert!(h.data("alice", json!({"type": "send-context", "content": "x".repeat(4097)})).is_err());
    assert!(h.data("alice", json!({"type": "whatever", "content": 1})).is_err());
    assert!(h.data("alice", json!({"type": "mute"})).is_err());
    assert!(h.take_inputs().is_empty(), "dropped at the boundary, never sent upstream");
    h.data("alice", json!({"type": "ping"})).expect("ok");
    assert_eq!(h.targeted.pop(), Some(("alice".to_owned(), json!({"type": "pong"}))));
    h.data("alice", json!({"type": "mute", "muted": true})).expect("ok");
    assert_eq!(h.take_inputs(), vec![ProviderInput::Mute(true)]);
    h.core.handle_user_audio(h.now, vec![1; 480]);
    h.collect();
    assert!(h.take_inputs().is_empty(), "muted audio is not sent");
    h.data("alice", json!({"type": "mute", "muted": false})).expect("ok");
    h.core.handle_user_audio(h.now, vec![1; 480]);
    h.collect();
    assert_eq!(h.take_inputs(), vec![ProviderInput::Mute(false), ProviderInput::NativeAudio(vec![1; 480])]);
    h.data("alice", json!({"type": "connect-timings", "mic_ms": 10, "room_ms": 200})).expect("ok");
    h.data("alice", json!({"type": "connect-timings", "mic_ms": 11, "room_ms": 201})).expect("ok");
    assert_eq!(h.timeline_kinds().iter().filter(|k| **k == "client.connect_timings").count(), 1, "one report");
    h.data("alice", json!({"type": "send-text", "content": "Hello"})).expect("ok");
    assert_eq!(h.take_types(), ["transcript", "turn-complete"]);
    assert_eq!(h.take_inputs(), vec![ProviderInput::Text("Hello".into())]);
}

#[test]
fn bind_input_is_sticky_and_before_it_the_first_publisher_is_bound() {
    let mut h = Harness::live(openai(json!({})));
    h.join("bob");
    assert_eq!(h.binds, vec![Some("alice".to_owned())]);
    h.data("bob", json!({"type": "bind-input"})).expect("ok");
    assert_eq!(h.binds.last(), Some(&Some("bob".to_owned())));
    assert_eq!(h.core.bound_input(), Some("bob"));
    h.core.handle_peer_left(h.now, "bob", false);
    h.collect();
    assert_eq!(h.core.bound_input(), Some("bob"), "sticky: bob may come back");
    h.join("bob");
    assert_eq!(h.core.bound_input(), Some("bob"));
}

#[test]
fn the_session_ends_on_end_on_leaving_and_on_a_fatal_upstream_error() {
    let mut h = Harness::live(openai(json!({})));
    h.data("alice", json!({"type": "end"})).expect("ok");
    assert_eq!(h.finished.as_ref().map(|f| f.reason.as_str()), Some("client_ended"));

    let mut h = Harness::live(openai(json!({})));
    h.core.handle_peer_left(h.now, "alice", true);
    h.collect();
    assert_eq!(h.finished.as_ref().map(|f| f.reason.as_str()), Some("participant_left"));

    // A dropped participant gets a grace period to rejoin.
    let mut h = Harness::live(openai(json!({})));
    h.core.handle_peer_left(h.now, "alice", false);
    h.collect();
    h.advance(Duration::from_secs(5));
    h.join("alice");
    h.advance(Duration::from_secs(30));
    assert!(h.finished.is_none());
    h.core.handle_peer_left(h.now, "alice", false);
    h.collect();
    h.advance(Timing::default().rejoin_grace);
    assert_eq!(h.finished.as_ref().map(|f| f.reason.as_str()), Some("participant_left"));

    let mut h = Harness::live(openai(json!({})));
    h.provider(ProviderEvent::Error(ProviderError {
        fatal: true,
        code: "invalid_api_key".into(),
        message: "bad key".into(),
    }));
    assert_eq!(
        h.take_events(),
        vec![
            json!({"type": "error", "code": "upstream_disconnect", "message": "bad key", "fatal": true}),
            json!({"type": "session-ended", "reason": "upstream_error"}),
        ]
    );
    assert_eq!(h.finished.as_ref().map(|f| f.status), Some(EndStatus::Error));

    let mut h = Harness::new(openai(json!({})));
    h.advance(Timing::default().join_timeout.min(Timing::default().provider_ready_timeout));
    assert!(h.finished.is_some(), "nobody came or the model never answered");
}

#[test]
fn audio_waits_for_someone_to_hear_it() {
    let mut h = Harness::new(openai(json!({"greeting": "Hi there!"})));
    h.provider(ProviderEvent::Ready { upstream_session_id: None });
    h.speak("Hi there!", 400);
    h.advance(Duration::from_secs(2));
    assert_eq!(h.frames, 0, "nobody is in the room");
    let peer = Peer { identity: "alice".into(), is_agent: false, active: false, publishes_audio: true };
    h.core.handle_peer(h.now, peer.clone());
    h.collect();
    h.advance(Duration::from_secs(1));
    assert_eq!(h.frames, 0, "joined, but media is not connected yet");
    h.core.handle_peer(h.now, Peer { active: true, ..peer });
    h.collect();
    h.advance(Duration::from_secs(1));
    assert!(h.silence_frames >= PRIMING_FRAMES, "first the priming silence for the new listener");
    assert_eq!(h.frames, 20, "then the greeting, in full, once it can be heard");
    assert!(h.take_types().contains(&"bot-started-speaking".to_owned()));
}

#[test]
fn a_text_only_session_answers_in_model_text() {
    let mut h = Harness::live(openai(json!({"audio": {"output": false}})));
    h.data("alice", json!({"type": "send-text", "content": "Hi"})).expect("ok");
    h.take_events();
    h.provider(ProviderEvent::ResponseStarted);
    h.provider(ProviderEvent::ModelText { text: "Hel".into(), is_final: false, thought: false });
    h.provider(ProviderEvent::AssistantAudio { pcm: vec![1; 2400], sample_rate: 24_000 });
    h.provider(ProviderEvent::ModelText { text: "Hello!".into(), is_final: true, thought: false });
    h.provider(ProviderEvent::ResponseDone { status: ResponseStatus::Completed });
    assert_eq!(h.take_types(), ["bot-llm-started", "model-text", "model-text", "bot-llm-stopped", "turn-complete"]);
    assert_eq!(h.frames, 0);
    assert_eq!(h.turns().last(), Some(&("assistant", "Hello!".to_owned())));
}

#[test]
fn usage_and_reconnection_are_published() {
    let mut h = Harness::live(openai(json!({})));
    let tokens = UsageTokens {
        input_tokens: 5,
        output_tokens: 7,
        total_tokens: 12,
        input_audio_tokens: 3,
        ..Default::default()
    };
    h.provider(ProviderEvent::Usage(tokens.clone()));
    h.provider(ProviderEvent::Reconnecting { seconds_remaining: Some(12.5) });
    h.provider(ProviderEvent::Reconnected { resumed: false });
    assert_eq!(
        h.take_events(),
        vec![
            json!({"type": "svc.usage", "input_text_tokens": 0, "input_image_tokens": 0, "input_audio_tokens": 3,
                "input_cached_tokens": 0, "output_text_tokens": 0, "output_audio_tokens": 0, "total_tokens": 12}),
            json!({"type": "reconnecting", "seconds_remaining": 12.5}),
            json!({"type": "svc.reconnected", "resumed": false}),
        ]
    );
    assert_eq!(h.core.usage_totals(h.now).tokens, Some(tokens));
}

fn speech16() -> Vec<i16> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../svc-audio/tests/fixtures/near-talker-16k.wav");
    svc_audio::wav::read_wav_file(path).expect("fixture").samples
}

#[test]
fn svc_vad_sends_only_the_turn_upstream_framed_by_activity_start_and_end() {
    // provider_a runs svc_vad unless told otherwise.
    let mut h = Harness::live(resolved(json!({"type": "inline", "model": "provider_a"}), json!({})));
    let mut input = vec![0i16; 8_000];
    input.extend(speech16());
    input.extend(vec![0i16; 24_000]);
    for chunk in input.chunks(320) {
        h.core.handle_user_audio(h.now, chunk.to_vec());
        h.now += Duration::from_millis(20);
    }
    h.collect();
    let inputs = h.take_inputs();
    let kinds: Vec<&str> = inputs
        .iter()
        .map(|i| match i {
            ProviderInput::ActivityStart => "start",
            ProviderInput::ActivityEnd => "end",
            ProviderInput::NativeAudio(_) => "audio",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds.first(), Some(&"start"), "nothing goes upstream before the user speaks: {kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"));
    assert_eq!(kinds.iter().filter(|k| **k == "start").count(), 1);
    let sent: usize = inputs.iter().map(|i| if let ProviderInput::NativeAudio(pcm) = i { pcm.len() } else { 0 }).sum();
    let speech = input.len() - 8_000 - 24_000;
    assert!(sent >= speech && sent < speech + 16_000, "{sent} samples upstream for {speech} of speech");
}

#[test]
fn svc_vad_barges_in_as_soon_as_the_user_starts() {
    let mut h = Harness::live(resolved(json!({"type": "inline", "model": "provider_a"}), json!({})));
    h.speak("A long answer that keeps going and going.", 5_000);
    h.advance(Duration::from_secs(1));
    h.take_inputs();
    h.take_events();
    for chunk in speech16().chunks(320).take(25) {
        h.core.handle_user_audio(h.now, chunk.to_vec());
        h.collect();
        h.advance(Duration::from_millis(20));
    }
    let inputs = h.take_inputs();
    let barge = inputs.iter().position(|i| matches!(i, ProviderInput::BargeIn { .. })).expect("barge-in");
    let start = inputs.iter().position(|i| matches!(i, ProviderInput::ActivityStart)).expect("activity start");
    assert!(barge < start, "playback is cut before the model even hears the user");
    assert!(h.take_types().contains(&"bot-stopped-speaking".to_owned()));
}

#[test]
fn a_dial_out_reports_its_progress_to_the_clients_and_the_timeline() {
    let mut h = Harness::live(openai(json!({})));
    h.take_events();
    let now = h.now;
    h.core.handle_dial_placed(now, "dial-1", "+14155550123", "+15550100000");
    let update = |status, reason: Option<&str>| DialUpdate {
        dial_id: "dial-1".into(),
        status,
        reason: reason.map(str::to_owned),
        sip_status: None,
        ended_by: None,
        duration_seconds: None,
        digit: None,
    };
    h.core.handle_dial_update(now, update(DialStatus::Ringing, None));
    h.core.handle_dial_update(now, update(DialStatus::Answered, None));
    h.core.handle_dial_update(now, DialUpdate { digit: Some('7'), ..update(DialStatus::Dtmf, None) });
    h.core.handle_dial_update(
        now,
        DialUpdate {
            ended_by: Some("phone"),
            duration_seconds: Some(12.5),
            ..update(DialStatus::Ended, Some("hangup"))
        },
    );
    h.collect();
    let events = h.take_events();
    assert_eq!(
        events,
        [
            json!({"type": "dial-progress", "dial_id": "dial-1", "status": "ringing"}),
            json!({"type": "dial-progress", "dial_id": "dial-1", "status": "answered"}),
            json!({"type": "dial-progress", "dial_id": "dial-1", "status": "dtmf", "digit": "7"}),
            json!({"type": "dial-progress", "dial_id": "dial-1", "status": "ended", "reason": "hangup",
                "ended_by": "phone", "duration_seconds": 12.5}),
        ]
    );
    let kinds: Vec<&str> = h.timeline_kinds().into_iter().filter(|kind| kind.starts_with("dial.")).collect();
    assert_eq!(kinds, ["dial.placed", "dial.ringing", "dial.answered", "dial.dtmf", "dial.ended"]);

    // After the dial's outcome nothing more is said of it.
    h.core.handle_dial_update(now, update(DialStatus::Failed, Some("busy")));
    h.collect();
    assert!(h.take_events().is_empty());
}

#[test]
fn a_dial_that_ends_after_its_session_still_reaches_the_clients_and_the_timeline() {
    let mut h = Harness::live(openai(json!({})));
    let now = h.now;
    h.core.handle_dial_placed(now, "dial-1", "+14155550123", "+15550100000");
    assert!(h.core.dial_in_progress());
    h.core.handle_end_request(now, "participant_left");
    h.collect();
    h.take_events();
    let ended = DialUpdate {
        dial_id: "dial-1".into(),
        status: DialStatus::Ended,
        reason: Some("hangup".into()),
        sip_status: None,
        ended_by: Some("phone"),
        duration_seconds: Some(3.0),
        digit: None,
    };
    // Another dial's word is not this session's.
    h.core.handle_dial_update(now, DialUpdate { dial_id: "dial-2".into(), ..ended.clone() });
    assert!(h.core.dial_in_progress());
    h.core.handle_dial_update(now, ended);
    h.collect();
    assert!(!h.core.dial_in_progress());
    // The actor hangs the call up before it closes the room, so the clients still hear it.
    assert_eq!(
        h.take_events(),
        [json!({"type": "dial-progress", "dial_id": "dial-1", "status": "ended", "reason": "hangup",
            "ended_by": "phone", "duration_seconds": 3.0})]
    );
    assert_eq!(h.timeline_kinds().last(), Some(&"dial.ended"));
}

#[test]
fn a_session_taken_over_from_another_node_says_reconnecting_then_ready() {
    let mut session = (*openai(json!({"greeting": "Welcome!"}))).clone();
    session.resume_session_id = Some("sess-1".into());
    let mut h = Harness::new(Arc::new(session));
    assert_eq!(h.events.first().map(|event| event["type"].clone()), Some(json!("reconnecting")), "{:?}", h.events);
    let taken_over = |persisted: &Persist| matches!(persisted, Persist::Timeline { kind: "session.taken_over", .. });
    assert_eq!(h.persisted.iter().filter(|p| taken_over(p)).count(), 1);
    h.provider(ProviderEvent::Ready { upstream_session_id: None });
    let types: Vec<&Value> = h.events.iter().map(|event| &event["type"]).collect();
    assert_eq!(types.iter().filter(|t| **t == "ready").count(), 1, "{types:?}");

    // A session resumed from another one is not a takeover: no `reconnecting`.
    let mut other = (*openai(json!({}))).clone();
    other.resume_session_id = Some("an-earlier-session".into());
    let h = Harness::new(Arc::new(other));
    assert!(h.events.iter().all(|event| event["type"] != "reconnecting"), "{:?}", h.events);
}

#[test]
fn the_usage_of_a_taken_over_session_counts_the_earlier_part() {
    let mut h = Harness::live(openai(json!({})));
    let tokens = |total| svc_wire::rest::UsageTokens { total_tokens: total, ..Default::default() };
    h.core.carry_usage(UsageTotals {
        turn_count: 2,
        user_speaking_ms: 1_500,
        agent_speaking_ms: 900,
        tokens: Some(tokens(40)),
    });
    h.provider(ProviderEvent::Usage(tokens(10)));
    let usage = h.core.usage_totals(h.now);
    assert_eq!((usage.turn_count, usage.user_speaking_ms, usage.agent_speaking_ms), (2, 1_500, 900));
    assert_eq!(usage.tokens.map(|tokens| tokens.total_tokens), Some(50));
}
