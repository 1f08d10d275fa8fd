//! The conversation with scripted model outcomes: every behaviour in microseconds, no models.

use svc_llm::ChatRole;

use super::*;

fn config() -> CoreConfig {
    CoreConfig {
        system_prompt: "Be brief.".to_owned(),
        tools: Vec::new(),
        greeting: None,
        history: Vec::new(),
        text_only: false,
        detector: TurnDetectorConfig { max_hold_ms: 0, ..TurnDetectorConfig::default() },
        params: GenerateParams::default(),
        partial_every_ms: 1000,
        // The classic path (transcribe and reply once the turn has ended); drafts have their own
        // tests below.
        preempt_after_ms: 0,
    }
}

fn preempting() -> CoreConfig {
    CoreConfig { preempt_after_ms: DEFAULT_PREEMPT_AFTER_MS, ..config() }
}

/// Speech for `text` alone, in 20 ms chunks.
fn voice_into(core: &mut LocalCore, text: &str) {
    for chunk in svc_testkit::speech::speech(text, RATE_HZ).chunks(320) {
        core.handle_input(ProviderInput::NativeAudio(chunk.to_vec()));
    }
}

/// `ms` of silence in 20 ms chunks.
fn silence_into(core: &mut LocalCore, ms: u32) {
    for _ in 0..ms / 20 {
        core.handle_input(ProviderInput::NativeAudio(vec![0; 320]));
    }
}

/// Feeds silence until a transcription that is not a partial one is asked for; gives the jobs so
/// far and the silence it took.
fn silence_until_job(core: &mut LocalCore, most_ms: u32) -> (Vec<Job>, u32) {
    let mut sent = Vec::new();
    for step in 1..=most_ms / 20 {
        silence_into(core, 20);
        sent.extend(jobs(core));
        if sent.iter().any(|job| matches!(job, Job::Transcribe { partial: false, .. })) {
            return (sent, step * 20);
        }
    }
    panic!("no transcription within {most_ms} ms of silence: {sent:?}")
}

fn started(cfg: CoreConfig) -> LocalCore {
    let mut core = LocalCore::new(cfg);
    core.start();
    assert_eq!(core.poll_event(), Some(ProviderEvent::Ready { upstream_session_id: None }));
    core
}

fn jobs(core: &mut LocalCore) -> Vec<Job> {
    std::iter::from_fn(|| core.poll_job()).collect()
}

fn events(core: &mut LocalCore) -> Vec<ProviderEvent> {
    std::iter::from_fn(|| core.poll_event()).collect()
}

/// Speech for `text` then a second of silence, at the pipeline's rate, in 20 ms chunks.
fn speak_into(core: &mut LocalCore, text: &str) {
    let mut pcm = svc_testkit::speech::speech(text, RATE_HZ);
    pcm.extend(std::iter::repeat_n(0i16, RATE_HZ as usize));
    for chunk in pcm.chunks(320) {
        core.handle_input(ProviderInput::NativeAudio(chunk.to_vec()));
    }
}

fn generation(text: &str) -> Generation {
    Generation {
        text: text.to_owned(),
        tool_calls: Vec::new(),
        prompt_tokens: 40,
        output_tokens: 12,
        dropped_messages: 0,
        finish: Finish::Stop,
    }
}

fn final_transcription(jobs: &[Job]) -> u64 {
    jobs.iter()
        .find_map(|job| match job {
            Job::Transcribe { id, partial: false, .. } => Some(*id),
            _ => None,
        })
        .expect("a final transcription")
}

fn generate_id(jobs: &[Job]) -> u64 {
    jobs.iter()
        .find_map(|job| match job {
            Job::Generate { id, .. } => Some(*id),
            _ => None,
        })
        .expect("a generation")
}

fn speak_ids(jobs: &[Job]) -> Vec<(u64, String)> {
    jobs.iter()
        .filter_map(|job| match job {
            Job::Speak { id, text } => Some((*id, text.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_spoken_turn_is_transcribed_answered_and_spoken_sentence_by_sentence() {
    let mut core = started(config());
    speak_into(&mut core, "What is the capital of France?");
    let sent = jobs(&mut core);
    let partials = sent.iter().filter(|job| matches!(job, Job::Transcribe { partial: true, .. })).count();
    assert!(partials >= 1, "a partial transcription while the user speaks: {sent:?}");
    let stt = final_transcription(&sent);
    let seen = events(&mut core);
    assert_eq!(seen.first(), Some(&ProviderEvent::UserSpeechStarted));
    assert!(seen.contains(&ProviderEvent::UserSpeechStopped));

    core.handle_outcome(Outcome::Transcribed { id: stt, result: Ok("What is the capital of France?".to_owned()) });
    let seen = events(&mut core);
    assert!(
        matches!(&seen[0], ProviderEvent::UserTranscript { text, is_final: true, .. } if text == "What is the capital of France?")
    );
    assert!(seen.contains(&ProviderEvent::ResponseStarted));
    let sent = jobs(&mut core);
    let Some(Job::Generate { id: llm, messages, .. }) =
        sent.into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("a generation")
    };
    assert_eq!(messages[0].role, ChatRole::System);
    assert_eq!(messages.last().map(|m| m.content.as_str()), Some("What is the capital of France?"));

    // The first sentence is spoken before the reply is complete.
    core.handle_outcome(Outcome::Text { id: llm, text: "The capital of France is Paris.".to_owned() });
    core.handle_outcome(Outcome::Text { id: llm, text: " It is a lovely city".to_owned() });
    let first = speak_ids(&jobs(&mut core));
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].1, "The capital of France is Paris.");
    core.handle_outcome(Outcome::Generated {
        id: llm,
        result: Ok(generation("The capital of France is Paris. It is a lovely city")),
    });
    let second = speak_ids(&jobs(&mut core));
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].1, "It is a lovely city");
    core.handle_outcome(Outcome::Spoken { id: first[0].0, result: Ok(vec![1; 24_000]) });
    core.handle_outcome(Outcome::Spoken { id: second[0].0, result: Ok(vec![1; 12_000]) });
    let seen = events(&mut core);
    let transcript: Vec<_> = seen
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::AssistantTranscript { text, is_final } => Some((text.as_str(), *is_final)),
            _ => None,
        })
        .collect();
    assert_eq!(
        transcript,
        [
            ("The capital of France is Paris.", false),
            (" It is a lovely city", false),
            ("The capital of France is Paris. It is a lovely city", true)
        ]
    );
    let audio = seen.iter().filter(|event| matches!(event, ProviderEvent::AssistantAudio { .. })).count();
    assert_eq!(audio, 2);
    assert_eq!(seen.last(), Some(&ProviderEvent::ResponseDone { status: ResponseStatus::Completed }));
    let usage = seen.iter().rev().find_map(|event| match event {
        ProviderEvent::Usage(usage) => Some(usage.clone()),
        _ => None,
    });
    let usage = usage.expect("usage");
    assert_eq!(usage.input_text_tokens, 40);
    assert_eq!(usage.output_text_tokens, 12);
    assert!(usage.input_audio_tokens > 0);
    assert_eq!(usage.output_audio_tokens, 15, "1.5 s of reply speech, all of it counted");
}

#[test]
fn user_speech_during_a_reply_cancels_it_and_keeps_only_what_was_heard() {
    let mut core = started(config());
    core.handle_input(ProviderInput::Text("Tell me a story.".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Text { id: llm, text: "Once upon a time there was a fox. ".to_owned() });
    core.handle_outcome(Outcome::Text { id: llm, text: "The fox lived in a deep wood. And".to_owned() });
    let sent = jobs(&mut core);
    let spoken = speak_ids(&sent);
    assert_eq!(spoken.len(), 2);
    // Two sentences are all a spoken reply has: the rest of the generation is not wanted.
    assert!(sent.contains(&Job::Cancel { id: llm }), "{sent:?}");
    core.handle_outcome(Outcome::Spoken { id: spoken[0].0, result: Ok(vec![1; 24_000]) });
    events(&mut core);

    speak_into(&mut core, "Wait, stop please.");
    let seen = events(&mut core);
    assert!(seen.contains(&ProviderEvent::Interrupted), "{seen:?}");
    assert!(seen.contains(&ProviderEvent::ResponseDone { status: ResponseStatus::Cancelled }));
    // No final yet: all that was said is not what was heard, which only the runtime knows.
    assert!(
        !seen.iter().any(|event| matches!(event, ProviderEvent::AssistantTranscript { is_final: true, .. })),
        "{seen:?}"
    );
    let sent = jobs(&mut core);
    assert!(sent.iter().any(|job| matches!(job, Job::DropSpeech { before } if *before > spoken[1].0)));
    let stt = final_transcription(&sent);

    // The runtime played half a second of the one-second sentence.
    core.handle_input(ProviderInput::BargeIn { played_ms: 500 });
    let seen = events(&mut core);
    assert_eq!(seen, [ProviderEvent::AssistantTruncated { heard: "Once upon a time".to_owned() }]);
    // Late outcomes of the cancelled reply change nothing.
    core.handle_outcome(Outcome::Spoken { id: spoken[1].0, result: Ok(vec![1; 100]) });
    core.handle_outcome(Outcome::Generated { id: llm, result: Ok(generation("…")) });
    assert!(events(&mut core).is_empty());
    // The conversation remembers what was heard.
    core.handle_outcome(Outcome::Transcribed { id: stt, result: Ok("Wait, stop please.".to_owned()) });
    let Some(Job::Generate { messages, .. }) =
        jobs(&mut core).into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("a reply to the interruption")
    };
    let contents: Vec<&str> = messages.iter().skip(1).map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["Tell me a story.", "Once upon a time", "Wait, stop please."]);
}

#[test]
fn a_reply_cut_before_its_first_word_is_heard_leaves_no_transcript_and_no_message() {
    let mut core = started(config());
    core.handle_input(ProviderInput::Text("Tell me a story.".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Text { id: llm, text: "Once upon a time there was a fox. ".to_owned() });
    let spoken = speak_ids(&jobs(&mut core));
    core.handle_outcome(Outcome::Spoken { id: spoken[0].0, result: Ok(vec![1; 24_000]) });
    events(&mut core);
    speak_into(&mut core, "Wait, stop please.");
    events(&mut core);
    let stt = final_transcription(&jobs(&mut core));
    // 0.1 s of an eight-word, one-second sentence: not one whole word.
    core.handle_input(ProviderInput::BargeIn { played_ms: 100 });
    assert_eq!(events(&mut core), [ProviderEvent::AssistantTruncated { heard: String::new() }]);
    core.handle_outcome(Outcome::Transcribed { id: stt, result: Ok("Wait, stop please.".to_owned()) });
    let Some(Job::Generate { messages, .. }) =
        jobs(&mut core).into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("a reply to the interruption")
    };
    let contents: Vec<&str> = messages.iter().skip(1).map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["Tell me a story.", "Wait, stop please."], "the unheard reply is not in the prompt");
}

#[test]
fn a_reply_the_runtime_never_played_gets_no_answer_to_its_barge_in() {
    let mut core = started(config());
    core.handle_input(ProviderInput::Text("Tell me a story.".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Text { id: llm, text: "Once upon a time there was a fox. ".to_owned() });
    let spoken = speak_ids(&jobs(&mut core));
    core.handle_outcome(Outcome::Spoken { id: spoken[0].0, result: Ok(vec![1; 24_000]) });
    events(&mut core);
    speak_into(&mut core, "Wait, stop please.");
    events(&mut core);
    // Nothing was audible: the runtime ended the reply itself, without a turn.
    core.handle_input(ProviderInput::BargeIn { played_ms: 0 });
    assert!(events(&mut core).is_empty());
}

#[test]
fn an_empty_reply_sends_no_final_transcript() {
    let mut core = started(config());
    core.handle_input(ProviderInput::Text("Hello?".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Generated { id: llm, result: Ok(generation("")) });
    let seen = events(&mut core);
    assert!(seen.contains(&ProviderEvent::ResponseDone { status: ResponseStatus::Completed }), "{seen:?}");
    assert!(!seen.iter().any(|event| matches!(event, ProviderEvent::AssistantTranscript { .. })), "{seen:?}");
}

#[test]
fn tool_calls_go_to_the_runtime_and_their_results_continue_the_reply() {
    let mut cfg = config();
    cfg.tools = vec![ToolDef {
        name: "lookup_order".to_owned(),
        description: "Find an order".to_owned(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    let mut core = started(cfg);
    core.handle_input(ProviderInput::Text("Where is order 42?".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    let mut called = generation("");
    called.finish = Finish::ToolCalls;
    called.tool_calls = vec![ToolCall {
        id: "call_1".to_owned(),
        name: "lookup_order".to_owned(),
        arguments: r#"{"id":42}"#.to_owned(),
    }];
    core.handle_outcome(Outcome::Generated { id: llm, result: Ok(called) });
    let seen = events(&mut core);
    assert!(seen.contains(&ProviderEvent::ToolCall {
        call_id: "call_1".to_owned(),
        name: "lookup_order".to_owned(),
        arguments: serde_json::json!({"id": 42}),
    }));
    assert!(!seen.iter().any(|event| matches!(event, ProviderEvent::ResponseDone { .. })), "waits for the result");
    core.handle_input(ProviderInput::ToolResult {
        call_id: "call_1".to_owned(),
        output: serde_json::json!({"output": "shipped"}),
        is_error: false,
        scheduling: None,
    });
    let Some(Job::Generate { messages, .. }) =
        jobs(&mut core).into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("the reply continues")
    };
    let tool = messages.last().expect("messages");
    assert_eq!(tool.role, ChatRole::Tool);
    assert_eq!(tool.tool_call_id.as_deref(), Some("call_1"));
    assert!(tool.content.contains("shipped"));
}

#[test]
fn the_greeting_is_spoken_without_the_model_and_text_only_sessions_speak_nothing() {
    let mut cfg = config();
    cfg.greeting = Some("Hello there, how can I help?".to_owned());
    let mut core = started(cfg);
    let sent = jobs(&mut core);
    assert!(!sent.iter().any(|job| matches!(job, Job::Generate { .. })));
    let spoken = speak_ids(&sent);
    assert_eq!(spoken.len(), 1);
    core.handle_outcome(Outcome::Spoken { id: spoken[0].0, result: Ok(vec![0; 2205]) });
    let seen = events(&mut core);
    assert!(seen.contains(&ProviderEvent::AssistantTranscript {
        text: "Hello there, how can I help?".to_owned(),
        is_final: true
    }));

    let mut cfg = config();
    cfg.text_only = true;
    let mut core = started(cfg);
    core.handle_input(ProviderInput::Text("Hi".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Text { id: llm, text: "Hello. Nice to meet you.".to_owned() });
    core.handle_outcome(Outcome::Generated { id: llm, result: Ok(generation("Hello. Nice to meet you.")) });
    assert!(speak_ids(&jobs(&mut core)).is_empty());
    let seen = events(&mut core);
    assert!(seen.contains(&ProviderEvent::ModelText {
        text: "Hello. Nice to meet you.".to_owned(),
        is_final: true,
        thought: false
    }));
}

#[test]
fn failures_are_reported_without_ending_the_session_and_close_ends_it() {
    let mut core = started(config());
    core.handle_input(ProviderInput::Text("Hi".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Text { id: llm, text: "Hello to you as well. ".to_owned() });
    let spoken = speak_ids(&jobs(&mut core));
    core.handle_outcome(Outcome::Spoken { id: spoken[0].0, result: Err("espeak-ng is not installed".to_owned()) });
    core.handle_outcome(Outcome::Generated { id: llm, result: Err("the reply endpoint answered HTTP 500".to_owned()) });
    let seen = events(&mut core);
    let codes: Vec<&str> = seen
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::Error(error) if !error.fatal => Some(error.code.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["local_speech_failed", "local_generation_failed"]);
    assert!(seen.contains(&ProviderEvent::ResponseDone { status: ResponseStatus::Failed }));
    assert!(!core.is_closed());
    core.handle_input(ProviderInput::Close);
    assert!(core.is_closed());
    assert_eq!(events(&mut core).last(), Some(&ProviderEvent::Closed { reason: "closed".to_owned() }));
}

#[test]
fn heard_text_covers_whole_sentences_then_a_share_of_words() {
    let said = [
        Said { text: "One two three four.".to_owned(), samples: 24_000 },
        Said { text: "Five six.".to_owned(), samples: 24_000 },
    ];
    assert_eq!(heard_text(&said, 0), "");
    assert_eq!(heard_text(&said, 500), "One two");
    assert_eq!(heard_text(&said, 1000), "One two three four.");
    assert_eq!(heard_text(&said, 5000), "One two three four. Five six.");
}

#[test]
fn a_reply_prepared_in_the_trailing_silence_is_held_until_the_turn_ends() {
    let mut core = started(preempting());
    voice_into(&mut core, "What is the capital of France?");
    jobs(&mut core);
    let (sent, after_ms) = silence_until_job(&mut core, 600);
    let draft = final_transcription(&sent);
    assert!((200..400).contains(&after_ms), "the draft starts after ~200 ms of silence, not {after_ms} ms");
    assert!(!events(&mut core).contains(&ProviderEvent::UserSpeechStopped), "the turn is still open");

    core.handle_outcome(Outcome::Transcribed { id: draft, result: Ok("What is the capital of France?".to_owned()) });
    let Some(Job::Generate { id: llm, messages, .. }) =
        jobs(&mut core).into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("the draft's reply is generated while the user may still speak on")
    };
    assert_eq!(messages.last().map(|m| m.content.as_str()), Some("What is the capital of France?"));
    core.handle_outcome(Outcome::Text { id: llm, text: "The capital of France is Paris. It".to_owned() });
    assert!(jobs(&mut core).is_empty(), "nothing is spoken before the turn ends");
    assert!(events(&mut core).is_empty(), "nothing is sent before the turn ends");

    silence_into(&mut core, 600);
    let seen = events(&mut core);
    assert_eq!(seen[0], ProviderEvent::UserSpeechStopped);
    assert!(
        matches!(&seen[1], ProviderEvent::UserTranscript { text, is_final: true, .. } if text == "What is the capital of France?"),
        "{seen:?}"
    );
    assert!(seen.contains(&ProviderEvent::ResponseStarted));
    let sent = jobs(&mut core);
    assert!(
        !sent.iter().any(|job| matches!(job, Job::Transcribe { .. } | Job::Generate { .. })),
        "the draft's work is used, not done again: {sent:?}"
    );
    let spoken = speak_ids(&sent);
    assert_eq!(spoken.len(), 1);
    assert_eq!(spoken[0].1, "The capital of France is Paris.", "what it wrote so far is spoken at once");

    // From here it is an ordinary reply.
    core.handle_outcome(Outcome::Text { id: llm, text: " is lovely.".to_owned() });
    core.handle_outcome(Outcome::Generated {
        id: llm,
        result: Ok(generation("The capital of France is Paris. It is lovely.")),
    });
    let rest = speak_ids(&jobs(&mut core));
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].1, "It is lovely.");
    core.handle_outcome(Outcome::Spoken { id: spoken[0].0, result: Ok(vec![1; 24_000]) });
    core.handle_outcome(Outcome::Spoken { id: rest[0].0, result: Ok(vec![1; 12_000]) });
    let seen = events(&mut core);
    assert!(seen.contains(&ProviderEvent::AssistantTranscript {
        text: "The capital of France is Paris. It is lovely.".to_owned(),
        is_final: true
    }));
    assert_eq!(seen.last(), Some(&ProviderEvent::ResponseDone { status: ResponseStatus::Completed }));

    // The next reply's sampling seed is the one a reply made the classic way would get.
    core.handle_input(ProviderInput::Text("And Spain?".to_owned()));
    let Some(Job::Generate { params, .. }) =
        jobs(&mut core).into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("a reply")
    };
    assert_eq!(params.seed, GenerateParams::default().seed.wrapping_add(2));
}

#[test]
fn speaking_on_after_a_pause_discards_the_prepared_reply() {
    let mut core = started(preempting());
    voice_into(&mut core, "What is the capital");
    jobs(&mut core);
    let (sent, _) = silence_until_job(&mut core, 500);
    let draft = final_transcription(&sent);
    core.handle_outcome(Outcome::Transcribed { id: draft, result: Ok("What is the capital".to_owned()) });
    let llm = generate_id(&jobs(&mut core));

    // The user was only pausing.
    voice_into(&mut core, "of France?");
    let sent = jobs(&mut core);
    assert!(sent.contains(&Job::Cancel { id: llm }), "{sent:?}");
    // Its late outcomes change nothing.
    core.handle_outcome(Outcome::Text { id: llm, text: "Capital of what?".to_owned() });
    core.handle_outcome(Outcome::Generated { id: llm, result: Ok(generation("Capital of what?")) });
    assert!(speak_ids(&jobs(&mut core)).is_empty());
    let seen = events(&mut core);
    assert!(
        !seen.iter().any(|event| matches!(
            event,
            ProviderEvent::UserSpeechStopped
                | ProviderEvent::ResponseStarted
                | ProviderEvent::UserTranscript { is_final: true, .. }
        )),
        "{seen:?}"
    );

    // The whole question gets a draft of its own, and that one answers.
    let (sent, _) = silence_until_job(&mut core, 500);
    let second = final_transcription(&sent);
    assert_ne!(second, draft);
    core.handle_outcome(Outcome::Transcribed { id: second, result: Ok("What is the capital of France?".to_owned()) });
    let Some(Job::Generate { id: llm2, messages, .. }) =
        jobs(&mut core).into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("a reply to the whole question")
    };
    assert_eq!(messages.last().map(|m| m.content.as_str()), Some("What is the capital of France?"));
    silence_into(&mut core, 600);
    core.handle_outcome(Outcome::Text { id: llm2, text: "Paris is the capital. ".to_owned() });
    assert_eq!(speak_ids(&jobs(&mut core)).len(), 1);
    let finals: Vec<_> = events(&mut core)
        .into_iter()
        .filter_map(|event| match event {
            ProviderEvent::UserTranscript { text, is_final: true, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(finals, ["What is the capital of France?"]);
}

#[test]
fn a_turn_that_ends_before_its_draft_is_transcribed_waits_for_that_transcription() {
    let mut core = started(preempting());
    voice_into(&mut core, "Tell me a joke.");
    jobs(&mut core);
    silence_into(&mut core, 1000);
    let sent = jobs(&mut core);
    let transcriptions: Vec<u64> = sent
        .iter()
        .filter_map(|job| match job {
            Job::Transcribe { id, partial: false, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(transcriptions.len(), 1, "the draft's transcription serves as the final one: {sent:?}");
    assert!(events(&mut core).contains(&ProviderEvent::UserSpeechStopped));

    core.handle_outcome(Outcome::Transcribed { id: transcriptions[0], result: Ok("Tell me a joke.".to_owned()) });
    let seen = events(&mut core);
    assert!(matches!(&seen[0], ProviderEvent::UserTranscript { is_final: true, .. }), "{seen:?}");
    assert!(seen.contains(&ProviderEvent::ResponseStarted));
    generate_id(&jobs(&mut core));
}

#[test]
fn a_failed_draft_transcription_is_not_retried_every_frame_and_the_turn_is_transcribed_again() {
    let mut core = started(preempting());
    voice_into(&mut core, "Tell me a joke.");
    jobs(&mut core);
    let (sent, _) = silence_until_job(&mut core, 500);
    let draft = final_transcription(&sent);
    core.handle_outcome(Outcome::Transcribed { id: draft, result: Err("out of memory".to_owned()) });
    silence_into(&mut core, 100);
    assert!(jobs(&mut core).is_empty(), "one draft per silence");
    silence_into(&mut core, 600);
    let again = final_transcription(&jobs(&mut core));
    assert_ne!(again, draft);
    core.handle_outcome(Outcome::Transcribed { id: again, result: Ok("Tell me a joke.".to_owned()) });
    generate_id(&jobs(&mut core));
}

#[test]
fn a_text_sent_during_the_silence_is_answered_and_the_turn_gets_a_fresh_reply() {
    let mut core = started(preempting());
    voice_into(&mut core, "Tell me a joke.");
    jobs(&mut core);
    let (sent, _) = silence_until_job(&mut core, 500);
    let draft = final_transcription(&sent);
    core.handle_outcome(Outcome::Transcribed { id: draft, result: Ok("Tell me a joke.".to_owned()) });
    let drafted = generate_id(&jobs(&mut core));
    // The shell cancels generations by "every id up to": the reply to the text is newer than
    // the draft's, so cancelling it would take the draft along.
    core.handle_input(ProviderInput::Text("Hello?".to_owned()));
    let texted = generate_id(&jobs(&mut core));
    assert!(texted > drafted);
    silence_into(&mut core, 600);
    let sent = jobs(&mut core);
    assert!(sent.contains(&Job::Cancel { id: texted }), "{sent:?}");
    let fresh = generate_id(&sent);
    assert!(fresh > texted, "the turn is answered by a new generation: {sent:?}");
}

#[test]
fn the_prompt_keeps_a_bounded_recent_history_that_starts_with_the_user() {
    let turns =
        |n: usize| -> Vec<ChatMessage> {
            (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        ChatMessage::user(format!("q{i}"))
                    } else {
                        ChatMessage::assistant(format!("a{i}"))
                    }
                })
                .collect()
        };
    assert_eq!(history_start(&turns(0), 0), 0);
    assert_eq!(history_start(&turns(6), 0), 0);
    // Past six messages the start moves in steps of three and lands on a user message.
    assert_eq!(history_start(&turns(7), 0), 4, "3 is a reply: on to the question after it");
    assert_eq!(history_start(&turns(9), 0), 6);
    assert_eq!(history_start(&turns(11), 0), 6);
    assert_eq!(history_start(&turns(12), 0), 10);
    // One message to come counts: the start is the one the prompt with it will have.
    assert_eq!(history_start(&turns(8), 1), 6);
    let mut tool_first = turns(9);
    tool_first[6] = ChatMessage::assistant("calling");
    assert_eq!(history_start(&tool_first, 0), 8);
    for n in HISTORY_MAX + 1..60 {
        let history = turns(n);
        let start = history_start(&history, 0);
        assert!(n - start <= HISTORY_MAX && n - start > 0, "{n}: {start}");
        assert_eq!(history[start].role, ChatRole::User);
    }

    // Through the core: twenty exchanges in, the prompt holds the system prompt and at most
    // six messages, the newest last.
    let mut core = started(config());
    for i in 0..20 {
        core.handle_input(ProviderInput::Text(format!("Question {i}?")));
        let llm = generate_id(&jobs(&mut core));
        core.handle_outcome(Outcome::Generated { id: llm, result: Ok(generation(&format!("Answer number {i}."))) });
        for (id, _) in speak_ids(&jobs(&mut core)) {
            core.handle_outcome(Outcome::Spoken { id, result: Ok(vec![1; 2400]) });
        }
        events(&mut core);
    }
    core.handle_input(ProviderInput::Text("Last one?".to_owned()));
    let Some(Job::Generate { messages, .. }) =
        jobs(&mut core).into_iter().find(|job| matches!(job, Job::Generate { .. }))
    else {
        panic!("a generation")
    };
    assert!(messages.len() <= 1 + HISTORY_MAX, "{}", messages.len());
    assert_eq!(messages[0].role, ChatRole::System);
    assert_eq!(messages[1].role, ChatRole::User);
    assert_eq!(messages.last().map(|m| m.content.as_str()), Some("Last one?"));
}

#[test]
fn a_spoken_reply_stops_after_two_sentences() {
    let mut core = started(config());
    core.handle_input(ProviderInput::Text("Tell me about Paris.".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Text {
        id: llm,
        text: "Paris is the capital of France. It is known for its museums. It has a tower. ".to_owned(),
    });
    let sent = jobs(&mut core);
    let spoken = speak_ids(&sent);
    assert_eq!(
        spoken.iter().map(|(_, text)| text.as_str()).collect::<Vec<_>>(),
        ["Paris is the capital of France.", "It is known for its museums."]
    );
    assert!(sent.contains(&Job::Cancel { id: llm }), "the rest of the generation is not wanted: {sent:?}");
    for (id, _) in &spoken {
        core.handle_outcome(Outcome::Spoken { id: *id, result: Ok(vec![1; 24_000]) });
    }
    let seen = events(&mut core);
    let said = "Paris is the capital of France. It is known for its museums.".to_owned();
    assert!(seen.contains(&ProviderEvent::AssistantTranscript { text: said.clone(), is_final: true }));
    assert!(seen.contains(&ProviderEvent::ResponseDone { status: ResponseStatus::Completed }));
    // The finished reply is read ahead into the model, for the next turn's prompt.
    let Some(Job::ReadAhead { messages, .. }) = jobs(&mut core).pop() else { panic!("no read-ahead") };
    assert_eq!(messages.last().map(|message| message.content.as_str()), Some(&*said));
    assert_eq!(messages.len(), 3, "system prompt, question, reply: {messages:?}");
    // The cancelled generation's outcome still counts in usage, and starts nothing.
    core.handle_outcome(Outcome::Generated { id: llm, result: Ok(generation("…")) });
    let seen = events(&mut core);
    assert!(seen.is_empty(), "{seen:?}");
    assert!(jobs(&mut core).is_empty());
}

#[test]
fn a_reply_cut_by_its_token_limit_ends_at_its_last_whole_sentence() {
    let mut core = started(config());
    core.handle_input(ProviderInput::Text("Tell me about Paris.".to_owned()));
    let llm = generate_id(&jobs(&mut core));
    core.handle_outcome(Outcome::Text { id: llm, text: "Paris is the capital of France. It is known for".to_owned() });
    let mut cut = generation("Paris is the capital of France. It is known for");
    cut.finish = Finish::Length;
    core.handle_outcome(Outcome::Generated { id: llm, result: Ok(cut) });
    let spoken = speak_ids(&jobs(&mut core));
    assert_eq!(spoken.iter().map(|(_, text)| text.as_str()).collect::<Vec<_>>(), ["Paris is the capital of France."]);
}

#[test]
fn each_reply_reads_ahead_exactly_the_next_prompts_beginning() {
    // Over twenty exchanges (the history's start moves twice), what is read ahead after a reply
    // is where the next reply's prompt begins: that reply reads only the user's new words.
    let mut core = started(config());
    let mut ahead: Option<Vec<ChatMessage>> = None;
    for i in 0..20 {
        core.handle_input(ProviderInput::Text(format!("Question {i}?")));
        let sent = jobs(&mut core);
        let Some(Job::Generate { id, messages, .. }) = sent.iter().find(|job| matches!(job, Job::Generate { .. }))
        else {
            panic!("no generation: {sent:?}")
        };
        if let Some(ahead) = ahead.take() {
            assert_eq!(messages[..ahead.len()], ahead[..], "exchange {i}");
            assert_eq!(messages.len(), ahead.len() + 1, "only the question is new");
        }
        let answer = format!("Answer number {i}.");
        core.handle_outcome(Outcome::Text { id: *id, text: answer.clone() });
        core.handle_outcome(Outcome::Generated { id: *id, result: Ok(generation(&answer)) });
        for (id, _) in speak_ids(&jobs(&mut core)) {
            core.handle_outcome(Outcome::Spoken { id, result: Ok(vec![1; 2400]) });
        }
        events(&mut core);
        ahead = jobs(&mut core).into_iter().find_map(|job| match job {
            Job::ReadAhead { messages, .. } => Some(messages),
            _ => None,
        });
        assert!(ahead.is_some(), "exchange {i} read nothing ahead");
    }
}
