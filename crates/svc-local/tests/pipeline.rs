//! The local provider end to end on the real models, through the same `ProviderSession` the
//! runtime drives: speech made at test time with espeak-ng goes in; the user transcript, the
//! reply, its speech (transcribed back with Whisper) and the events come out. The reply-endpoint
//! path runs against a fake OpenAI-compatible server.
//!
//! The models come from `$SVC_LOCAL_MODELS` (default `<workspace>/target/local-models`, where
//! `scripts/test.sh` installs them with `svc models install`), so these tests are ignored in a
//! plain `cargo test` and fail with the command to run when the models are missing.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use svc_domain::model::{ModelCatalog, ModelChoice, resolve_model};
use svc_local::{Brain, LocalConfig, LocalEngines, ModelsDir};
use svc_provider_core::session::ProviderSession;
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup, ToolDecl};
use svc_testkit::speech::word_error_rate as wer;
use tokio_util::sync::CancellationToken;

fn models() -> ModelsDir {
    let root = std::env::var_os("SVC_LOCAL_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/local-models")));
    let models = ModelsDir::new(root);
    if let Err(missing) = models.check() {
        panic!("{missing} (or set SVC_LOCAL_MODELS)");
    }
    models
}

fn setup(instructions: &str) -> SessionSetup {
    let model = resolve_model(ModelCatalog::embedded(), Some(&ModelChoice::Name("provider_local".to_owned())), None)
        .expect("the catalog offers provider_local");
    SessionSetup::new(model, instructions)
}

/// espeak-ng's voice for `text` at 16 kHz, the pipeline's input rate.
fn speech_16k(text: &str) -> Vec<i16> {
    let voice = svc_local::tts::Voice { name: "en-us".to_owned(), words_per_minute: 150 };
    let (pcm, rate) = svc_local::tts::speak_native(text, &voice).expect("espeak-ng speaks");
    svc_audio::resample::resample_clip(&pcm, rate, 16_000).expect("espeak-ng's rate converts")
}

async fn send_speech(session: &ProviderSession, pcm: &[i16]) {
    let mut all = pcm.to_vec();
    all.extend(std::iter::repeat_n(0i16, 24_000)); // 1.5 s of silence ends the turn
    for chunk in all.chunks(320) {
        session.input.send(ProviderInput::NativeAudio(chunk.to_vec())).await.expect("the session takes audio");
    }
}

/// Events until `done` says stop (or the deadline).
async fn collect_until(
    session: &mut ProviderSession,
    deadline: Duration,
    mut done: impl FnMut(&ProviderEvent) -> bool,
) -> Vec<ProviderEvent> {
    let mut seen = Vec::new();
    let until = tokio::time::Instant::now() + deadline;
    while let Ok(Some(event)) = tokio::time::timeout_at(until, session.events.recv()).await {
        let stop = done(&event);
        seen.push(event);
        if stop {
            break;
        }
    }
    seen
}

fn final_user(events: &[ProviderEvent]) -> Option<String> {
    events.iter().find_map(|event| match event {
        ProviderEvent::UserTranscript { text, is_final: true, .. } => Some(text.clone()),
        _ => None,
    })
}

fn final_assistant(events: &[ProviderEvent]) -> Option<String> {
    events.iter().rev().find_map(|event| match event {
        ProviderEvent::AssistantTranscript { text, is_final: true } => Some(text.clone()),
        _ => None,
    })
}

fn assistant_audio(events: &[ProviderEvent]) -> Vec<i16> {
    events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::AssistantAudio { pcm, sample_rate } => {
                assert_eq!(*sample_rate, svc_local::tts::RATE_HZ);
                Some(pcm.clone())
            }
            _ => None,
        })
        .flatten()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local models (svc models install) and espeak-ng; run by scripts/test.sh"]
async fn a_spoken_question_is_transcribed_answered_and_spoken() {
    let engines = LocalEngines::new(LocalConfig { models: models(), brain: Brain::Embedded, capacity: 1, threads: 0 });
    let mut session =
        svc_local::start(&setup("You are a helpful geography teacher."), &engines, CancellationToken::new())
            .expect("a slot");
    let ready =
        collect_until(&mut session, Duration::from_secs(120), |e| matches!(e, ProviderEvent::Ready { .. })).await;
    assert!(matches!(ready.last(), Some(ProviderEvent::Ready { .. })), "{ready:?}");
    // A second session is over capacity.
    let refused = svc_local::start(&setup("x"), &engines, CancellationToken::new());
    assert!(matches!(refused, Err(svc_local::Unavailable::AtCapacity(1))));

    // Whisper base in its fast (fitted-window) mode hears espeak-ng's "capital of France" as
    // "capital on France" (svc-stt's tests); this question it hears exactly.
    let question = "What is the weather going to be like this weekend?";
    let spoken = speech_16k(question);
    let sent_at = Instant::now();
    send_speech(&session, &spoken).await;
    let events =
        collect_until(&mut session, Duration::from_secs(120), |e| matches!(e, ProviderEvent::ResponseDone { .. }))
            .await;
    let elapsed = sent_at.elapsed();

    let heard = final_user(&events).expect("a final user transcript");
    let user_wer = wer(question, &heard);
    eprintln!("user said {question:?}, Whisper heard {heard:?} (WER {user_wer:.2})");
    assert!(user_wer <= 0.10, "the user transcript {heard:?} (WER {user_wer:.2})");
    assert!(events.contains(&ProviderEvent::UserSpeechStarted));
    assert!(events.contains(&ProviderEvent::ResponseStarted));
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::ResponseDone { status: svc_provider_core::ResponseStatus::Completed })
    );

    let reply = final_assistant(&events).expect("a final assistant transcript");
    assert!(!reply.trim().is_empty());
    let audio = assistant_audio(&events);
    let audio_seconds = audio.len() as f64 / f64::from(svc_local::tts::RATE_HZ);
    assert!(audio_seconds > 0.5, "the reply is spoken: {audio_seconds:.2} s");
    // What was spoken is the reply: Whisper reads espeak-ng's speech back.
    let whisper = engines.whisper().expect("whisper");
    let back = svc_audio::resample::resample_clip(&audio, svc_local::tts::RATE_HZ, 16_000).expect("24 kHz converts");
    let samples: Vec<f32> = back.iter().map(|&s| f32::from(s) / 32_768.0).collect();
    let read_back = whisper.transcribe(&samples).expect("transcribes").text;
    let reply_wer = wer(&reply, &read_back);
    eprintln!(
        "reply {reply:?} ({audio_seconds:.1} s of speech), read back {read_back:?} (WER {reply_wer:.2}); {elapsed:?} from the first sample to the end"
    );
    assert!(reply_wer <= 0.25, "the spoken reply read back as {read_back:?} against {reply:?} (WER {reply_wer:.2})");
    assert!(events.iter().any(
        |e| matches!(e, ProviderEvent::Usage(usage) if usage.output_text_tokens > 0 && usage.input_audio_tokens > 0)
    ));

    session.input.send(ProviderInput::Close).await.expect("open");
    let end = collect_until(&mut session, Duration::from_secs(10), |e| matches!(e, ProviderEvent::Closed { .. })).await;
    assert!(matches!(end.last(), Some(ProviderEvent::Closed { .. })));
    drop(session);
    // The slot is free again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(engines.active(), 0);
}

/// What the fake endpoint received.
type Requests = Arc<Mutex<Vec<Value>>>;

async fn fake_endpoint(requests: Requests) -> std::net::SocketAddr {
    async fn chat(
        axum::extract::State(requests): axum::extract::State<Requests>,
        Json(body): Json<Value>,
    ) -> impl IntoResponse {
        let first = {
            let mut seen = requests.lock().expect("lock");
            seen.push(body.clone());
            seen.len() == 1
        };
        let chunk = |delta: Value, finish: Value| {
            format!(
                "data: {}\n\n",
                json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            )
        };
        let mut stream = String::new();
        if first && body["tools"].is_array() {
            stream.push_str(&chunk(json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_7", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"id\":"}}]}), Value::Null));
            stream.push_str(&chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": " 42}"}}]}),
                json!("tool_calls"),
            ));
        } else {
            stream.push_str(&chunk(json!({"role": "assistant", "content": "Your order has shipped. "}), Value::Null));
            stream.push_str(&chunk(json!({"content": "It arrives on Friday."}), json!("stop")));
        }
        stream.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 31, "completion_tokens": 9}})
        ));
        stream.push_str("data: [DONE]\n\n");
        ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], stream)
    }
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(chat)).with_state(requests);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local models (svc models install) and espeak-ng; run by scripts/test.sh"]
async fn replies_and_tool_calls_come_from_an_openai_compatible_endpoint() {
    let requests: Requests = Arc::default();
    let addr = fake_endpoint(requests.clone()).await;
    let brain = Brain::Endpoint {
        url: url::Url::parse(&format!("http://{addr}/v1/chat/completions")).expect("url"),
        model: "llama-3.1-8b".to_owned(),
        api_key: Some("sk-local".to_owned()),
    };
    let engines = LocalEngines::new(LocalConfig { models: models(), brain, capacity: 2, threads: 0 });
    let mut config = setup("You are the order desk.");
    config.tools = vec![ToolDecl {
        name: "lookup_order".to_owned(),
        description: "Find an order by id".to_owned(),
        parameters: json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
    }];
    let mut session = svc_local::start(&config, &engines, CancellationToken::new()).expect("a slot");
    collect_until(&mut session, Duration::from_secs(120), |e| matches!(e, ProviderEvent::Ready { .. })).await;
    session.input.send(ProviderInput::Text("Where is order 42?".to_owned())).await.expect("open");
    let events =
        collect_until(&mut session, Duration::from_secs(30), |e| matches!(e, ProviderEvent::ToolCall { .. })).await;
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::ToolCall {
            call_id: "call_7".to_owned(),
            name: "lookup_order".to_owned(),
            arguments: json!({"id": 42})
        })
    );
    session
        .input
        .send(ProviderInput::ToolResult {
            call_id: "call_7".to_owned(),
            output: json!({"output": {"status": "shipped"}}),
            is_error: false,
            scheduling: None,
        })
        .await
        .expect("open");
    let events =
        collect_until(&mut session, Duration::from_secs(30), |e| matches!(e, ProviderEvent::ResponseDone { .. })).await;
    assert_eq!(final_assistant(&events).as_deref(), Some("Your order has shipped. It arrives on Friday."));
    assert!(!assistant_audio(&events).is_empty() || !svc_local::tts::available());

    let seen = requests.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0]["model"], "llama-3.1-8b");
    assert_eq!(seen[0]["stream"], true);
    assert!(seen[0]["messages"][0]["content"].as_str().is_some_and(|s| s.starts_with("You are the order desk.")));
    assert_eq!(seen[0]["messages"][1], json!({"role": "user", "content": "Where is order 42?"}));
    assert_eq!(seen[0]["tools"][0]["function"]["name"], "lookup_order");
    let tool_message = &seen[1]["messages"][3];
    assert_eq!(tool_message["role"], "tool");
    assert_eq!(tool_message["tool_call_id"], "call_7");
    assert!(tool_message["content"].as_str().is_some_and(|s| s.contains("shipped")));
}
