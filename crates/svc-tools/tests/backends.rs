//! The tool backends against local fakes of the APIs they speak (SearXNG, Brave, Tavily, an
//! OpenAI-compatible vision model), each a real HTTP server on 127.0.0.1 that checks what svc
//! sends the way the API would, and answers in the API's documented shape.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};
use svc_domain::tools::ServerTool;
use svc_tools::{Frame, SearchApi, ToolBackends, ToolError, VisionBackend, WebSearchBackend};
use url::Url;

/// What a fake received.
type Seen = Arc<Mutex<Vec<Value>>>;

async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    format!("http://{address}")
}

fn search(api: SearchApi, url: &str, key: Option<&str>) -> ToolBackends {
    ToolBackends {
        web_search: Some(WebSearchBackend { api, url: Url::parse(url).expect("url"), key: key.map(str::to_owned) }),
        vision: None,
    }
}

#[tokio::test]
async fn searxng_results_reach_the_tool_result() {
    let seen: Seen = Arc::default();
    async fn searx(State(seen): State<Seen>, Query(query): Query<Vec<(String, String)>>) -> impl IntoResponse {
        seen.lock().expect("lock").push(json!(query));
        if !query.contains(&("format".to_owned(), "json".to_owned())) {
            return (StatusCode::FORBIDDEN, Json(json!({}))).into_response();
        }
        Json(json!({"query": "x", "number_of_results": 2, "results": [
            {"title": "Tokio - An asynchronous Rust runtime", "url": "https://tokio.rs/", "content": "Build reliable network applications.", "engine": "ddg"},
            {"title": "No link", "content": "dropped"}
        ]}))
        .into_response()
    }
    let base = serve(axum::Router::new().route("/search", get(searx)).with_state(seen.clone())).await;
    let backends = search(SearchApi::Searxng, &base, None);
    let output = backends.run(ServerTool::WebSearch, &json!({"query": "tokio runtime"}), None).await.expect("runs");
    assert_eq!(
        output.result,
        json!({"query": "tokio runtime", "results": [{"title": "Tokio - An asynchronous Rust runtime",
            "url": "https://tokio.rs/", "snippet": "Build reliable network applications."}]})
    );
    assert_eq!(output.summary, "1 results");
    assert_eq!(seen.lock().expect("lock")[0], json!([["q", "tokio runtime"], ["format", "json"]]));
}

#[tokio::test]
async fn brave_gets_its_token_and_tavily_its_key() {
    async fn brave(headers: HeaderMap, Query(query): Query<Vec<(String, String)>>) -> impl IntoResponse {
        if headers.get("x-subscription-token").and_then(|v| v.to_str().ok()) != Some("brave-key") {
            return (StatusCode::UNAUTHORIZED, Json(json!({"type": "ErrorResponse"}))).into_response();
        }
        assert_eq!(query[0], ("q".to_owned(), "weather".to_owned()));
        Json(json!({"type": "search", "web": {"type": "search", "results": [
            {"title": "Forecast", "url": "https://weather.example/", "description": "Sunny <strong>today</strong>"}]}}))
        .into_response()
    }
    async fn tavily(Json(body): Json<Value>) -> impl IntoResponse {
        if body["api_key"] != "tvly-key" {
            return (StatusCode::UNAUTHORIZED, Json(json!({"detail": {"error": "Unauthorized"}}))).into_response();
        }
        Json(json!({"query": body["query"], "results": [
            {"title": "T", "url": "https://t.example/a", "content": "c", "score": 0.9}], "response_time": 0.5}))
        .into_response()
    }
    let base = serve(axum::Router::new().route("/res/v1/web/search", get(brave)).route("/search", post(tavily))).await;
    let brave_url = format!("{base}/res/v1/web/search");
    let output = search(SearchApi::Brave, &brave_url, Some("brave-key"))
        .run(ServerTool::WebSearch, &json!({"query": "weather"}), None)
        .await
        .expect("brave");
    assert_eq!(output.result["results"][0]["snippet"], "Sunny today");
    let refused = search(SearchApi::Brave, &brave_url, Some("wrong"))
        .run(ServerTool::WebSearch, &json!({"query": "weather"}), None)
        .await;
    assert_eq!(refused, Err(ToolError::Upstream { status: 401 }));
    assert_eq!(refused.expect_err("refused").to_result()["status"], 401);
    let output = search(SearchApi::Tavily, &format!("{base}/search"), Some("tvly-key"))
        .run(ServerTool::WebSearch, &json!({"query": "q"}), None)
        .await
        .expect("tavily");
    assert_eq!(output.result["results"], json!([{"title": "T", "url": "https://t.example/a", "snippet": "c"}]));
}

#[tokio::test]
async fn redirects_are_not_followed_and_large_bodies_are_refused() {
    async fn moved() -> impl IntoResponse {
        (StatusCode::FOUND, [("location", "http://169.254.169.254/")], "")
    }
    async fn huge() -> impl IntoResponse {
        "x".repeat(svc_tools::http::MAX_BODY_BYTES + 1)
    }
    let base = serve(axum::Router::new().route("/moved/search", get(moved)).route("/huge/search", get(huge))).await;
    let moved = search(SearchApi::Searxng, &format!("{base}/moved"), None)
        .run(ServerTool::WebSearch, &json!({"query": "x"}), None)
        .await;
    assert_eq!(moved, Err(ToolError::Upstream { status: 302 }));
    let huge = search(SearchApi::Searxng, &format!("{base}/huge"), None)
        .run(ServerTool::WebSearch, &json!({"query": "x"}), None)
        .await;
    assert!(matches!(huge, Err(ToolError::BadResponse(_))), "{huge:?}");
    let closed = search(SearchApi::Searxng, "http://127.0.0.1:1", None)
        .run(ServerTool::WebSearch, &json!({"query": "x"}), None)
        .await;
    assert!(matches!(closed, Err(ToolError::Unreachable(_))), "{closed:?}");
    assert_eq!(closed.expect_err("unreachable").code(), "upstream_error");
    let unconfigured = ToolBackends::default().run(ServerTool::WebSearch, &json!({"query": "x"}), None).await;
    assert_eq!(unconfigured, Err(ToolError::NotConfigured));
}

#[tokio::test]
async fn vision_tools_send_the_frame_and_read_the_answer() {
    let seen: Seen = Arc::default();
    async fn chat(State(seen): State<Seen>, headers: HeaderMap, Json(body): Json<Value>) -> impl IntoResponse {
        assert_eq!(headers.get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer vkey"));
        seen.lock().expect("lock").push(body.clone());
        let image = body.pointer("/messages/1/content/1/image_url/url").and_then(Value::as_str).unwrap_or_default();
        if !image.starts_with("data:image/png;base64,") {
            return (StatusCode::BAD_REQUEST, Json(json!({"error": {"message": "no image"}}))).into_response();
        }
        let content = r#"{"objects": [{"label": "cup", "box": [0.1, 0.2, 0.3, 0.4]}]}"#;
        Json(json!({"id": "c1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}))
        .into_response()
    }
    let base = serve(axum::Router::new().route("/v1/chat/completions", post(chat)).with_state(seen.clone())).await;
    let backends = ToolBackends {
        web_search: None,
        vision: Some(VisionBackend {
            url: Url::parse(&format!("{base}/v1/chat/completions")).expect("url"),
            key: Some("vkey".into()),
            model: "llava".into(),
        }),
    };
    let frame = Frame { mime: "image/png".into(), data: b"\x89PNG".to_vec() };
    let output = backends.run(ServerTool::DetectObjects, &json!({}), Some(&frame)).await.expect("runs");
    assert_eq!(output.result, json!({"objects": [{"label": "cup", "box": [0.1, 0.2, 0.3, 0.4]}]}));
    assert_eq!(output.summary, "1 objects");
    assert_eq!(seen.lock().expect("lock")[0]["model"], "llava");
    let no_frame = backends.run(ServerTool::DetectObjects, &json!({}), None).await;
    assert_eq!(no_frame, Err(ToolError::NoVideoFrame));
    assert_eq!(no_frame.expect_err("no frame").to_result()["error"], "no_video_frame");
    assert_eq!(
        backends.served_kinds(),
        [ServerTool::DetectObjects, ServerTool::PointAtObject, ServerTool::ScreenLocate]
    );
}
