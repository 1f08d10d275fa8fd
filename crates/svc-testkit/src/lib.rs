//! Test doubles that are real servers.
//!
//! [`FakeUpstream`] is one HTTP server on 127.0.0.1:0 that speaks every upstream protocol svc
//! uses, as documented in `shared/research/providers.md` (event names, fields and ordering):
//!
//! | path | protocol |
//! |---|---|
//! | `GET /v1/realtime?model=…` (WebSocket) | OpenAI Realtime GA, or xAI Grok voice ([`Flavor::Xai`]) |
//! | `GET /v1/live/sessions` (WebSocket) | OpenAI GPT-Live |
//! | `POST /v1/responses` (server-sent events) | OpenAI Responses API (GPT-Live `svc` delegation backend) |
//! | `GET /ws/google.ai.generativelanguage.{v}.GenerativeService.BidiGenerateContent` (WebSocket) | Gemini Live |
//!
//! It answers like the real service (setup acknowledgements, response lifecycles with real PCM
//! speech from [`speech`], transcripts, usage), records every client frame, and is scripted by
//! tests: queue [`Reply`]s (speech or a tool call) and inject [`Action`]s (a user turn, go-away,
//! close, errors, a stall) into the live connection.
//!
//! # Wire mode
//!
//! By default ([`WireMode::Plain`]) every message goes out as the fake built it: one compact JSON
//! text frame, one tidy shape per message. A real service is less tidy, and a client written
//! against the tidy shapes can depend on them without knowing. [`WireMode::Randomized`] varies,
//! from a seed, everything a client must not depend on:
//! - framing: each message in a text or a binary frame (the real Gemini Live service sends
//!   binary);
//! - key order: every object's keys shuffled (the JSON text is written by the fake; the
//!   workspace's `serde_json` sorts keys), compact or indented;
//! - unknown content: an unknown field in some messages, now and then an unknown message between
//!   two (Gemini: an unknown top-level key; OpenAI Realtime, xAI, GPT-Live: an unknown `type`);
//! - Gemini: consecutive messages combined where the Live protocol allows it (`usageMetadata`
//!   beside `serverContent`, even beside `turnComplete`; audio, transcript,
//!   `generationComplete` and `turnComplete` in one `serverContent`; `interrupted` with
//!   `turnComplete`), never two of the same field in one message and never out of order; only
//!   messages that arise together are combined, so nothing waits for a partner. In this mode a
//!   Gemini turn also takes more of the shapes the protocol allows: an interrupted turn ends with
//!   `turnComplete`, the last audio chunk may come with the turn's end, and the early partial
//!   usage snapshot comes at a random point of the turn.
//!
//! Each connection draws from its own generator (the seed and the connection's number), so a
//! seed replays the same wire decisions for the same sequence of messages. Set the mode with
//! [`FakeUpstream::set_wire_mode`] (connections opened afterwards use it) or, so that existing
//! tests run in it unchanged, with the environment variable [`WIRE_SEED_ENV`]
//! (`SVC_FAKE_WIRE_SEED=<n>`), read when a [`FakeUpstream`] starts. What the fake records of
//! the client's frames is the same in both modes.
//!
//! The adapter tests over 20 seeds, by hand: each seed with the tests that failed on it (replay
//! one with `SVC_FAKE_WIRE_SEED=<seed> cargo test -p svc-provider --test <binary> <test>`):
//!
//! ```sh
//! for seed in $(seq 1 20); do echo "seed $seed: $(SVC_FAKE_WIRE_SEED=$seed cargo test -p svc-provider --no-fail-fast --test gemini --test openai_realtime --test xai --test gpt_live 2>&1 | grep -E '^test .* FAILED$' | tr '\n' ' ')"; done
//! ```

pub mod agents_worker;
pub mod fault_proxy;
mod gemini;
mod live;
mod realtime;
pub mod speech;
pub mod tls;
pub mod udp_link;
mod wire;

pub use wire::{WIRE_SEED_ENV, WireMode};

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// Which realtime dialect `/v1/realtime` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAI Realtime GA.
    OpenAi,
    /// xAI Grok voice.
    Xai,
}

/// What the fake says when the client asks for a response.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Speak this text (PCM speech + transcript).
    Speak(String),
    /// Call a tool; the reply after the tool output is the next queued one.
    ToolCall {
        /// Tool name.
        name: String,
        /// Arguments.
        arguments: Value,
    },
}

/// Token usage the fake reports per response / turn (OpenAI shape; other protocols map it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeUsage {
    /// Input text tokens.
    pub input_text: u64,
    /// Input audio tokens.
    pub input_audio: u64,
    /// Cached input tokens.
    pub input_cached: u64,
    /// Output text tokens.
    pub output_text: u64,
    /// Output audio tokens.
    pub output_audio: u64,
}

impl Default for FakeUsage {
    fn default() -> Self {
        FakeUsage { input_text: 120, input_audio: 30, input_cached: 64, output_text: 12, output_audio: 48 }
    }
}

/// Something the test makes the fake do on the current connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send this JSON frame as is.
    Send(Value),
    /// The user speaks (server VAD events, then a transcript). With `late_transcript`, the
    /// transcript arrives only after the reply the turn triggers has finished.
    UserTurn {
        /// What the user said.
        transcript: String,
        /// Transcript after the reply.
        late_transcript: bool,
        /// Start a reply (server VAD `create_response`).
        respond: bool,
    },
    /// Speak now, unprompted.
    Speak(String),
    /// Gemini: `goAway` with this much time left, then close when it runs out.
    GoAway(Duration),
    /// Close the socket with this code and reason.
    Close(u16, String),
    /// Send a protocol error (OpenAI/xAI/GPT-Live `error`; Gemini: close 1011).
    Error {
        /// Error code.
        code: String,
        /// Message.
        message: String,
    },
    /// Stop answering anything (the socket stays open).
    Stall,
    /// OpenAI/xAI: the session hit its cap (`session_expired`, then close 1001).
    /// GPT-Live: `session.closed {reason: "expired"}`.
    Expire,
    /// GPT-Live: open a delegation (`session.delegation.created`); under `responses` delegation
    /// the fake then runs the backend itself (a tool call first when `tool` is set).
    Delegate {
        /// Target: `client` or `responses`.
        target: String,
        /// Backend tool call (responses target).
        tool: Option<(String, Value)>,
        /// What the backend answers.
        answer: String,
    },
}

/// One frame the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Connection number (0 = first socket).
    pub connection: usize,
    /// The frame.
    pub message: Value,
}

/// One accepted connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    /// Path and query.
    pub target: String,
    /// Request headers, lower-case names.
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, Default)]
struct Inner {
    received: Vec<Received>,
    connections: Vec<Connection>,
    /// Decoded user audio per connection, as the session kept it.
    audio: Vec<Vec<i16>>,
    replies: VecDeque<Reply>,
    control: Option<mpsc::Sender<Action>>,
    /// The earlier connections' control senders, kept so that a new connection does not end
    /// the others (a connection ends when its control sender is dropped): many sessions share
    /// one fake, as many share one provider.
    earlier_controls: Vec<mpsc::Sender<Action>>,
    responses_requests: Vec<(Vec<(String, String)>, Value)>,
    usage: FakeUsage,
    /// Gemini handles issued (valid for resumption), each with the session audio it holds.
    handles: Vec<(String, Vec<i16>)>,
    /// Gemini: per connection, the session audio it started from and the audio it received.
    gemini_current: std::collections::BTreeMap<usize, (Vec<i16>, Vec<i16>)>,
    /// Refuse upgrades with this HTTP status.
    refuse_with: Option<u16>,
    /// New connections answer nothing after their greeting (as [`Action::Stall`] from the start).
    pub(crate) stall_new: bool,
    /// Realtime: echo this model in `session.created` instead of the requested one.
    echo_model: Option<String>,
    /// Pace of speech: real time divided by this.
    speedup: u32,
    /// GPT-Live / Responses answer text.
    responses_answer: String,
    /// Gemini: report `lastConsumedClientMessageIndex` every this many client messages.
    gemini_ack_every: u64,
    gemini_turn_complete_delay: Duration,
    /// How new connections put their messages on the wire.
    wire_mode: WireMode,
}

pub(crate) struct Shared {
    inner: Mutex<Inner>,
    changed: Notify,
    flavor: Flavor,
    api_key: String,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn record(&self, connection: usize, message: Value) {
        self.lock().received.push(Received { connection, message });
        self.changed.notify_waiters();
    }

    pub(crate) fn push_audio(&self, connection: usize, pcm: &[i16]) {
        let mut inner = self.lock();
        if inner.audio.len() <= connection {
            inner.audio.resize(connection + 1, Vec::new());
        }
        inner.audio[connection].extend_from_slice(pcm);
    }

    pub(crate) fn next_reply(&self) -> Reply {
        self.lock().replies.pop_front().unwrap_or_else(|| Reply::Speak("Hello! How can I help you today?".to_owned()))
    }

    pub(crate) fn usage(&self) -> FakeUsage {
        self.lock().usage
    }

    pub(crate) fn speedup(&self) -> u32 {
        self.lock().speedup.max(1)
    }

    /// The wire of connection `index`, in the mode set now.
    pub(crate) fn wire(&self, family: wire::Family, index: usize) -> wire::Wire {
        wire::Wire::new(self.lock().wire_mode, family, index)
    }

    /// The generator connection `index` draws its message shapes from: `None` on the plain wire,
    /// where every message keeps its one tidy shape.
    pub(crate) fn shape_rng(&self, index: usize) -> Option<wire::Rng> {
        match self.lock().wire_mode {
            WireMode::Plain => None,
            WireMode::Randomized { seed } => Some(wire::Rng::new(seed, index, wire::Stream::Shape)),
        }
    }

    fn open_connection(&self, target: String, headers: &HeaderMap, control: mpsc::Sender<Action>) -> usize {
        let headers = headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or("").to_owned()))
            .collect();
        let mut inner = self.lock();
        inner.connections.push(Connection { target, headers });
        if let Some(earlier) = inner.control.replace(control) {
            inner.earlier_controls.push(earlier);
        }
        let index = inner.connections.len() - 1;
        if inner.audio.len() <= index {
            inner.audio.resize(index + 1, Vec::new());
        }
        drop(inner);
        self.changed.notify_waiters();
        index
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let bearer = format!("Bearer {}", self.api_key);
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(bearer.as_str())
            || headers.get("x-goog-api-key").and_then(|v| v.to_str().ok()) == Some(self.api_key.as_str())
    }
}

/// A running fake upstream.
pub struct FakeUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for FakeUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeUpstream").field("addr", &self.addr).finish()
    }
}

/// The API key every fake accepts.
pub const FAKE_API_KEY: &str = "test-key";

impl FakeUpstream {
    /// Starts a fake on 127.0.0.1:0 accepting [`FAKE_API_KEY`], in the wire mode
    /// [`WIRE_SEED_ENV`] selects (plain when unset).
    ///
    /// # Panics
    ///
    /// When the port cannot be bound (test setup failure), or [`WIRE_SEED_ENV`] is not a number.
    pub async fn start(flavor: Flavor) -> FakeUpstream {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                speedup: 8,
                responses_answer: "Your order ships on Friday.".to_owned(),
                gemini_ack_every: 5,
                gemini_turn_complete_delay: Duration::ZERO,
                wire_mode: WireMode::from_env(),
                ..Inner::default()
            }),
            changed: Notify::new(),
            flavor,
            api_key: FAKE_API_KEY.to_owned(),
        });
        let router = Router::new()
            .route("/v1/realtime", get(realtime_upgrade))
            .route("/v1/live/sessions", get(live_upgrade))
            .route("/v1/responses", post(responses))
            .route("/ws/{service}", get(gemini_upgrade))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake upstream");
        let addr = listener.local_addr().expect("local addr");
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
        });
        FakeUpstream { addr, shared, shutdown }
    }

    /// Where it listens (for a [`fault_proxy::FaultProxy`] in front of it).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL in the OpenAI SDK form (`http://127.0.0.1:PORT/v1`), for `OPENAI_BASE_URL` / `XAI_BASE_URL`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for `GOOGLE_GEMINI_BASE_URL`.
    pub fn gemini_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues replies, spoken in order as the client asks for responses.
    pub fn queue(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().replies.extend(replies);
    }

    /// Usage reported per response from now on.
    pub fn set_usage(&self, usage: FakeUsage) {
        self.shared.lock().usage = usage;
    }

    /// Speech pace: real time divided by `speedup` (default 8).
    pub fn set_speedup(&self, speedup: u32) {
        self.shared.lock().speedup = speedup.max(1);
    }

    /// Refuse the next WebSocket upgrades with this HTTP status (`None` to accept again).
    pub fn refuse_with(&self, status: Option<u16>) {
        self.shared.lock().refuse_with = status;
    }

    /// New connections stall from the start (the greeting goes out, then nothing is answered):
    /// an upstream that never answers, with no race against a connection's first frames.
    pub fn stall_new_connections(&self, stall: bool) {
        self.shared.lock().stall_new = stall;
    }

    /// Realtime: report this model in `session.created` (xAI's silent fallback).
    pub fn echo_model(&self, model: &str) {
        self.shared.lock().echo_model = Some(model.to_owned());
    }

    /// What the Responses backend answers.
    pub fn set_responses_answer(&self, answer: &str) {
        self.shared.lock().responses_answer = answer.to_owned();
    }

    /// How connections opened from now on put their messages on the wire (see the crate docs).
    pub fn set_wire_mode(&self, mode: WireMode) {
        self.shared.lock().wire_mode = mode;
    }

    /// The wire mode new connections get.
    pub fn wire_mode(&self) -> WireMode {
        self.shared.lock().wire_mode
    }

    /// Gemini: send a resumption update (a new handle) every `n` client messages (0 = never).
    pub fn set_gemini_ack_every(&self, n: u64) {
        self.shared.lock().gemini_ack_every = n;
    }

    /// Gemini: hold `turnComplete` (and the turn's usage) this long after `generationComplete`,
    /// as the service does until it thinks the client played the turn's audio.
    pub fn set_gemini_turn_complete_delay(&self, delay: Duration) {
        self.shared.lock().gemini_turn_complete_delay = delay;
    }

    /// Makes the current connection do `action`.
    ///
    /// # Panics
    ///
    /// When no connection is open.
    pub async fn act(&self, action: Action) {
        let control = self.shared.lock().control.clone().expect("no open connection to act on");
        control.send(action).await.expect("connection task gone");
    }

    /// Every frame received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().received.clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> Vec<Connection> {
        self.shared.lock().connections.clone()
    }

    /// User audio the upstream session kept, per connection (decoded PCM at the protocol rate).
    pub fn audio(&self) -> Vec<Vec<i16>> {
        self.shared.lock().audio.clone()
    }

    /// Gemini: all user audio the session holds on its latest connection: the state of the handle
    /// it resumed from (only what earlier connections had acknowledged) plus what it received.
    pub fn gemini_session_audio(&self) -> Vec<i16> {
        let inner = self.shared.lock();
        match inner.gemini_current.iter().next_back() {
            Some((_, (base, audio))) => [base.as_slice(), audio.as_slice()].concat(),
            None => Vec::new(),
        }
    }

    /// Requests made to the Responses API: headers and JSON body.
    pub fn responses_requests(&self) -> Vec<(Vec<(String, String)>, Value)> {
        self.shared.lock().responses_requests.clone()
    }

    /// Waits until a received frame matches `predicate`; returns the first match.
    ///
    /// # Panics
    ///
    /// After `timeout` without a match, listing the frame types seen.
    pub async fn wait_for(&self, timeout: Duration, predicate: impl Fn(&Received) -> bool) -> Received {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            if let Some(found) = self.shared.lock().received.iter().find(|r| predicate(r)).cloned() {
                return found;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let seen: Vec<String> = self.received().iter().map(|r| frame_type(&r.message)).collect();
                panic!("fake upstream: no matching frame within {timeout:?}; seen: {seen:?}");
            }
        }
    }

    /// Waits until `n` connections were accepted.
    ///
    /// # Panics
    ///
    /// After `timeout`.
    pub async fn wait_for_connections(&self, n: usize, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            if self.shared.lock().connections.len() >= n {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("fake upstream: fewer than {n} connections within {timeout:?}");
            }
        }
    }

    /// Frames of type `kind` received (`type` field, or the top-level key for Gemini).
    pub fn frames(&self, kind: &str) -> Vec<Received> {
        self.received().into_iter().filter(|r| frame_type(&r.message) == kind).collect()
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The `type` of a frame, or its first key (Gemini frames are keyed by kind).
pub fn frame_type(message: &Value) -> String {
    match message.get("type").and_then(Value::as_str) {
        Some(kind) => kind.to_owned(),
        None => message.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default(),
    }
}

fn refused(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    if let Some(status) = shared.lock().refuse_with {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Some((status, "refused by the fake").into_response());
    }
    if !shared.authorized(headers) {
        return Some((StatusCode::UNAUTHORIZED, "{\"error\":{\"code\":\"invalid_api_key\"}}").into_response());
    }
    None
}

async fn realtime_upgrade(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    if let Some(response) = refused(&shared, &headers) {
        return response;
    }
    let (control_tx, control_rx) = mpsc::channel(64);
    let target = format!("/v1/realtime?{}", query.unwrap_or_default());
    let index = shared.open_connection(target.clone(), &headers, control_tx);
    let model = target.split("model=").nth(1).unwrap_or("").to_owned();
    upgrade.on_upgrade(move |socket| realtime::serve(socket, shared, index, model, control_rx))
}

async fn live_upgrade(State(shared): State<Arc<Shared>>, headers: HeaderMap, upgrade: WebSocketUpgrade) -> Response {
    if let Some(response) = refused(&shared, &headers) {
        return response;
    }
    let (control_tx, control_rx) = mpsc::channel(64);
    let index = shared.open_connection("/v1/live/sessions".to_owned(), &headers, control_tx);
    upgrade.on_upgrade(move |socket| live::serve(socket, shared, index, control_rx))
}

async fn gemini_upgrade(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(service): axum::extract::Path<String>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    if let Some(response) = refused(&shared, &headers) {
        return response;
    }
    if !service.ends_with(".GenerativeService.BidiGenerateContent") {
        return (StatusCode::NOT_FOUND, "unknown service").into_response();
    }
    let (control_tx, control_rx) = mpsc::channel(64);
    let index = shared.open_connection(format!("/ws/{service}"), &headers, control_tx);
    upgrade.on_upgrade(move |socket| gemini::serve(socket, shared, index, control_rx))
}

async fn responses(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: String) -> Response {
    if !shared.authorized(&headers) {
        return (StatusCode::UNAUTHORIZED, "{\"error\":{\"code\":\"invalid_api_key\"}}").into_response();
    }
    let Ok(request) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "{\"error\":{\"message\":\"invalid JSON\"}}").into_response();
    };
    let header_list =
        headers.iter().map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned())).collect();
    let (answer, usage) = {
        let mut inner = shared.lock();
        inner.responses_requests.push((header_list, request.clone()));
        (inner.responses_answer.clone(), inner.usage)
    };
    shared.changed.notify_waiters();
    let model = request.get("model").cloned().unwrap_or(Value::Null);
    let mut sse = String::new();
    let mut event = |value: Value| {
        let kind = value["type"].as_str().unwrap_or("").to_owned();
        sse.push_str(&format!("event: {kind}\ndata: {value}\n\n"));
    };
    event(
        serde_json::json!({"type": "response.created", "response": {"id": "resp_fake_1", "model": model, "status": "in_progress"}}),
    );
    for word in answer.split_inclusive(' ') {
        event(serde_json::json!({"type": "response.output_text.delta", "item_id": "msg_fake_1", "delta": word}));
    }
    event(serde_json::json!({"type": "response.output_text.done", "item_id": "msg_fake_1", "text": answer}));
    let input = usage.input_text + usage.input_audio;
    let output = usage.output_text + usage.output_audio;
    event(serde_json::json!({"type": "response.completed", "response": {
        "id": "resp_fake_1", "status": "completed",
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}],
        "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": usage.input_cached},
                  "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": input + output}}}));
    ([("content-type", "text/event-stream")], sse).into_response()
}

/// Speech chunks of `chunk_ms` for `text` at `rate_hz`, with the transcript split across them.
pub(crate) fn speech_chunks(text: &str, rate_hz: u32, chunk_ms: u32) -> Vec<(Vec<i16>, String)> {
    let pcm = speech::speech(text, rate_hz);
    let per_chunk = (rate_hz * chunk_ms / 1000) as usize;
    let chunks: Vec<Vec<i16>> = pcm.chunks(per_chunk.max(1)).map(<[i16]>::to_vec).collect();
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let n = chunks.len().max(1);
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| {
            let from = i * words.len() / n;
            let to = (i + 1) * words.len() / n;
            (chunk, words[from..to].concat())
        })
        .collect()
}

/// PCM16 LE base64.
pub(crate) fn b64_pcm(pcm: &[i16]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Inverse of [`b64_pcm`].
pub(crate) fn pcm_b64(data: &str) -> Vec<i16> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map(|bytes| bytes.chunks_exact(2).map(|p| i16::from_le_bytes([p[0], p[1]])).collect())
        .unwrap_or_default()
}

/// Sleep for one chunk at the fake's pace.
pub(crate) async fn pace(shared: &Shared, chunk_ms: u32) {
    let speedup = shared.speedup();
    tokio::time::sleep(Duration::from_millis(u64::from(chunk_ms / speedup).max(1))).await;
}
