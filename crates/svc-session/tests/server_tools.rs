//! Server tools on their backends, end to end in one process: the runtime over the embedded
//! room, svc-testkit's fake OpenAI Realtime upstream as the model, and fakes of a SearXNG
//! instance and an OpenAI-compatible vision model on loopback. The model calls `web_search`
//! (then `detect_objects` on the frame the user sent); svc queries the fake backend in the
//! background, and the backend's answer reaches the model as the call's output, while the
//! room hears `tool-call`, `tool-dispatch-started` and `tool-result`.

#[path = "support/live_room.rs"]
mod live_room;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::routing::{get, post};
use serde_json::{Value, json};
use svc_domain::model::ModelCatalog;
use svc_domain::session_config::parse_start;
use svc_domain::settings::RecordingConsents;
use svc_domain::start::{CatalogLookup, StartContext, resolve_start};
use svc_domain::tools::{ServerTool, ServerToolAvailability};
use svc_room::{LocalJoinOptions, ParticipantKind, RoomEvent};
use svc_session::{Runtime, RuntimeConfig, SessionRequest};
use svc_testkit::{FakeUpstream, Flavor, Reply};
use svc_tools::{SearchApi, ToolBackends, VisionBackend, WebSearchBackend};
use tokio::time::timeout;
use url::Url;

const WAIT: Duration = Duration::from_secs(20);
const ROOM: &str = "room-server-tools";
const SESSION: &str = "0b7f4c2e-3d1a-4e8b-9c55-6a2f1d0e9b11";

/// A SearXNG and a vision model on loopback; returns their base URL and what they were asked.
async fn fake_backends() -> (String, Arc<Mutex<Vec<Value>>>) {
    let asked: Arc<Mutex<Vec<Value>>> = Arc::default();
    async fn search(
        State(asked): State<Arc<Mutex<Vec<Value>>>>,
        Query(q): Query<BTreeMap<String, String>>,
    ) -> Json<Value> {
        asked.lock().expect("lock").push(json!({"search": q}));
        Json(json!({"query": q.get("q"), "results": [
            {"title": "Lyon weather: sunny, 24 °C", "url": "https://weather.example/lyon", "content": "Clear skies all afternoon."}
        ]}))
    }
    async fn chat(State(asked): State<Arc<Mutex<Vec<Value>>>>, Json(body): Json<Value>) -> Json<Value> {
        let image = body.pointer("/messages/1/content/1/image_url/url").cloned().unwrap_or(Value::Null);
        asked.lock().expect("lock").push(json!({"vision_image": image}));
        let content = r#"{"objects": [{"label": "teapot", "box": [0.2, 0.3, 0.6, 0.9]}]}"#;
        Json(json!({"id": "c", "object": "chat.completion", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}))
    }
    let router = axum::Router::new()
        .route("/search", get(search))
        .route("/v1/chat/completions", post(chat))
        .with_state(asked.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    (format!("http://{address}"), asked)
}

/// The next data message of one of `types` the user hears.
async fn heard(user: &mut svc_room::LocalParticipant, types: &[&str]) -> Value {
    loop {
        match timeout(WAIT, user.next_event()).await.expect("a message in time") {
            Some(RoomEvent::Data(data)) => {
                let message: Value = serde_json::from_slice(&data.payload).unwrap_or(Value::Null);
                if message["type"].as_str().is_some_and(|kind| types.contains(&kind)) {
                    return message;
                }
            }
            Some(_) => {}
            None => panic!("the room closed"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_and_detect_objects_answer_the_model_from_their_backends() {
    let (database, room) = live_room::store_and_room(SESSION, ROOM).await;
    let store = database.store.clone();
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([
        Reply::ToolCall { name: "web_search".into(), arguments: json!({"query": "weather in Lyon"}) },
        Reply::Speak("It is sunny in Lyon.".into()),
        Reply::ToolCall { name: "detect_objects".into(), arguments: json!({}) },
        Reply::Speak("I see a teapot.".into()),
    ]);
    let provider_env = live_room::provider_env(&fake);
    let (backend_url, asked) = fake_backends().await;
    let tool_backends = ToolBackends {
        web_search: Some(WebSearchBackend {
            api: SearchApi::Searxng,
            url: Url::parse(&backend_url).expect("url"),
            key: None,
        }),
        vision: Some(VisionBackend {
            url: Url::parse(&format!("{backend_url}/v1/chat/completions")).expect("url"),
            key: None,
            model: "vision-test".into(),
        }),
    };

    let body = json!({"sdk": {"name": "test", "version": "1.0.0"}, "agent": {"type": "inline", "model": "provider_b",
        "tools": [{"kind": "web_search"}, {"kind": "detect_objects"}]}});
    let available = ServerToolAvailability::new(tool_backends.served_kinds().into_iter().chain([ServerTool::EndCall]));
    let context = StartContext {
        catalog: ModelCatalog::embedded(),
        server_tools: &available,
        caller_has_resources_read: false,
        consents: RecordingConsents { audio: false, transcript: true, video: false },
        avatar_enabled: false,
        server_max_session_seconds: None,
    };
    let session = resolve_start(parse_start(&body, None).expect("valid"), CatalogLookup::NotApplicable, &context)
        .expect("resolves");
    assert!(session.rejected_tools.is_empty(), "{:?}", session.rejected_tools);

    let data_dir = tempfile::tempdir().expect("data dir");
    let runtime = Runtime::new(RuntimeConfig {
        store: store.clone(),
        rooms: svc_session::SessionRooms::Embedded(room.clone()),
        provider_env,
        local: None,
        recordings_dir: data_dir.path().join("recordings"),
        node_id: "test".into(),
        timing: svc_session::core::Timing::default(),
        phone: None,
        tool_backends: Arc::new(tool_backends),
    });
    let request = SessionRequest {
        session_id: SESSION.into(),
        room_name: ROOM.into(),
        session: Arc::new(session),
        local_slot: None,
    };
    runtime.start_session(request).await.expect("the session runs");
    let user_options = LocalJoinOptions {
        identity: "user".into(),
        name: "user".into(),
        kind: ParticipantKind::Standard,
        metadata: String::new(),
        attributes: BTreeMap::new(),
    };
    let mut user = room.join_local(ROOM, user_options).await.expect("the user joins");
    let ready = heard(&mut user, &["ready"]).await;
    assert_eq!(ready["rejected_tools"], json!([]));

    // web_search: the model asks, svc searches the fake SearXNG, the model gets its results.
    let text = json!({"type": "send-text", "content": "What is the weather in Lyon?"}).to_string();
    user.send_data(text.into_bytes(), Some("svc"), true, &[]).await.expect("send-text");
    let call = heard(&mut user, &["tool-call"]).await;
    assert_eq!(call["name"], "web_search");
    let started = heard(&mut user, &["tool-dispatch-started"]).await;
    assert_eq!(started["tool_call_id"], call["tool_call_id"]);
    let result = heard(&mut user, &["tool-result"]).await;
    assert_eq!((result["tool_call_id"].clone(), result["ok"].clone()), (call["tool_call_id"].clone(), json!(true)));
    assert_eq!(result["summary"], "1 results");
    let output = function_output(&fake, 1).await;
    assert_eq!(output["results"][0]["title"], "Lyon weather: sunny, 24 °C", "{output}");
    assert_eq!(output["results"][0]["url"], "https://weather.example/lyon");
    assert_eq!(asked.lock().expect("lock")[0]["search"]["q"], "weather in Lyon");

    // detect_objects: on the frame the user sent, through the fake vision model.
    let png = b"\x89PNG\r\n\x1a\nframe";
    let image = json!({"type": "send-image", "mime_type": "image/png", "stream_id": "camera",
        "data": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, png)});
    user.send_data(image.to_string().into_bytes(), Some("svc"), true, &[]).await.expect("send-image");
    let text = json!({"type": "send-text", "content": "What do you see?"}).to_string();
    user.send_data(text.into_bytes(), Some("svc"), true, &[]).await.expect("send-text");
    let call = heard(&mut user, &["tool-call"]).await;
    assert_eq!(call["name"], "detect_objects");
    let result = heard(&mut user, &["tool-result"]).await;
    assert_eq!(result["ok"], true, "{result}");
    let output = function_output(&fake, 2).await;
    assert_eq!(output, json!({"objects": [{"label": "teapot", "box": [0.2, 0.3, 0.6, 0.9]}]}));
    let sent_image = asked.lock().expect("lock")[1]["vision_image"].clone();
    let expected =
        format!("data:image/png;base64,{}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, png));
    assert_eq!(sent_image, json!(expected), "the frame the user sent reached the vision model");

    runtime.shutdown().await;
    let timeline = store.timeline(SESSION).await.expect("timeline");
    let server_tools: Vec<&Value> =
        timeline.iter().filter(|row| row.kind == "tool.server").map(|row| &row.data).collect();
    assert_eq!(server_tools.len(), 2, "{server_tools:?}");
    room.shutdown().await;
}

/// The output of the `n`th function call the fake upstream was answered with, parsed.
async fn function_output(fake: &FakeUpstream, n: usize) -> Value {
    let is_output = |message: &Value| {
        message["type"] == "conversation.item.create" && message["item"]["type"] == "function_call_output"
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let outputs: Vec<Value> =
            fake.received().into_iter().map(|r| r.message).filter(|message| is_output(message)).collect();
        if outputs.len() >= n {
            let text = outputs[n - 1]["item"]["output"].as_str().unwrap_or_default().to_owned();
            return serde_json::from_str(&text).unwrap_or(Value::String(text));
        }
        assert!(tokio::time::Instant::now() < deadline, "function output {n} reached the model in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
