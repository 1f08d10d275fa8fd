//! Fake OpenAI GPT-Live session (`/v1/live/sessions`, providers.md §4).
//!
//! Strict like the real one: `session.start` must come first and unknown session fields are
//! refused; appends over 500 tokens (estimated at four characters each) are refused; under
//! `responses` delegation a `response.create` while a function call lacks its output fails with
//! `function_call_outputs_required`. Output audio is a continuous stream: speech, then silent
//! (all-zero) frames.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::wire::{Family, Out, spawn_writer};
use crate::{Action, Reply, Shared, b64_pcm, pace, pcm_b64, speech_chunks};

const RATE: u32 = 24_000;
const CHUNK_MS: u32 = 40;
/// Silence streamed after each utterance.
const TRAILING_SILENCE_MS: u32 = 1200;
/// Fields `session.start` accepts.
const SESSION_FIELDS: [&str; 6] = ["model", "instructions", "audio", "input", "delegation", "tools"];

#[derive(Default)]
struct State {
    started: bool,
    delegation_type: String,
    seq: u64,
    /// The model's clock (ms) for transcript timestamps.
    clock_ms: u64,
    open_calls: BTreeSet<String>,
    outputs: usize,
    /// Client delegations open.
    delegations: BTreeSet<String>,
    /// The backend answer waiting for tool outputs.
    pending_answer: Option<String>,
    stalled: bool,
}

struct Conn {
    shared: Arc<Shared>,
    index: usize,
    out: mpsc::Sender<Out>,
    state: Mutex<State>,
}

impl Conn {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn next(&self, prefix: &str) -> String {
        let mut state = self.state();
        state.seq += 1;
        format!("{prefix}_{}_{}", self.index, state.seq)
    }

    async fn send(&self, frame: Value) {
        let _ = self.out.send(Out::Frame(frame)).await;
    }

    async fn error(&self, code: &str, message: &str, client_event_id: &Value) {
        self.send(json!({"type": "error", "error": {"type": "invalid_request_error", "code": code,
            "message": message, "client_event_id": client_event_id}}))
            .await;
    }

    fn responses_usage(&self) -> Value {
        let u = self.shared.usage();
        let input = u.input_text + u.input_audio;
        let output = u.output_text + u.output_audio;
        json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": u.input_cached},
            "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input + output})
    }
}

pub(crate) async fn serve(socket: WebSocket, shared: Arc<Shared>, index: usize, mut control: mpsc::Receiver<Action>) {
    let (sink, mut stream) = socket.split();
    let (out_tx, writer) = spawn_writer(sink, 8192, shared.wire(Family::Typed, index));
    let conn = Arc::new(Conn {
        shared: shared.clone(),
        index,
        out: out_tx,
        state: Mutex::new(State { stalled: shared.lock().stall_new, ..State::default() }),
    });
    loop {
        tokio::select! {
            message = stream.next() => {
                let text = match message {
                    Some(Ok(Message::Text(text))) => text,
                    // Pings are answered by the WebSocket layer, as the real service answers them.
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    _ => break,
                };
                let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                if !on_client(&conn, frame).await {
                    break;
                }
            }
            action = control.recv() => {
                let Some(action) = action else { break };
                if on_action(&conn, action).await {
                    break;
                }
            }
        }
    }
    drop(conn);
    let _ = writer.await;
}

async fn on_client(conn: &Arc<Conn>, frame: Value) -> bool {
    let kind = frame.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
    let event_id = frame.get("event_id").cloned().unwrap_or(Value::Null);
    if kind == "session.input_audio.append" {
        let pcm = pcm_b64(frame.get("audio").and_then(Value::as_str).unwrap_or(""));
        conn.shared.push_audio(conn.index, &pcm);
        return true;
    }
    conn.shared.record(conn.index, frame.clone());
    if conn.state().stalled {
        return true;
    }
    if !conn.state().started {
        if kind != "session.start" {
            conn.error("session_not_started", "send session.start first", &event_id).await;
            return true;
        }
        let session = frame.get("session").cloned().unwrap_or(json!({}));
        if let Some(unknown) =
            session.as_object().and_then(|o| o.keys().find(|k| !SESSION_FIELDS.contains(&k.as_str())))
        {
            conn.error("unknown_parameter", &format!("Unknown parameter: 'session.{unknown}'."), &event_id).await;
            return true;
        }
        {
            let mut state = conn.state();
            state.started = true;
            state.delegation_type =
                session.pointer("/delegation/type").and_then(Value::as_str).unwrap_or("").to_owned();
        }
        let mut echoed = session.clone();
        echoed["id"] = json!(format!("live_{}", conn.index));
        echoed["expires_at"] = json!(4_102_444_800u64);
        conn.send(json!({"type": "session.started", "session": echoed})).await;
        return true;
    }
    match kind.as_str() {
        "session.commentary.append" | "session.thinking.append" | "session.instructions.append" => {
            let content = frame.get("content").and_then(Value::as_str).unwrap_or("").to_owned();
            let delegation = frame.get("delegation_id").and_then(Value::as_str).map(str::to_owned);
            if content.chars().count().div_ceil(4) > 500 {
                conn.error("append_too_long", "Each append is limited to 500 tokens.", &event_id).await;
                return true;
            }
            if let Some(id) = &delegation
                && !conn.state().delegations.contains(id)
            {
                conn.error("invalid_delegation", "No open client delegation with this id.", &event_id).await;
                return true;
            }
            let acked = kind.replace(".append", ".appended");
            let start = conn.state().clock_ms;
            conn.send(json!({"type": acked, "client_event_id": event_id, "start_ms": start, "end_ms": start + 10}))
                .await;
            if kind == "session.commentary.append" {
                // Delegation results are said (paraphrased — here verbatim); other commentary
                // prompts the next scripted reply.
                let text = match delegation {
                    Some(_) => content,
                    None => match conn.shared.next_reply() {
                        Reply::Speak(text) => text,
                        Reply::ToolCall { .. } => String::new(),
                    },
                };
                speak(conn, text).await;
            }
        }
        "response.item.create" => {
            let call_id = frame.pointer("/item/call_id").and_then(Value::as_str).unwrap_or("").to_owned();
            let known = conn.state().open_calls.remove(&call_id);
            if known {
                conn.state().outputs += 1;
            } else {
                conn.error("unknown_call_id", "No open function call with this call_id.", &event_id).await;
            }
        }
        "response.create" => {
            if !conn.state().open_calls.is_empty() {
                conn.error(
                    "function_call_outputs_required",
                    "Every open function call needs an output first.",
                    &event_id,
                )
                .await;
                return true;
            }
            let answer = conn.state().pending_answer.take();
            if let Some(answer) = answer {
                backend_answer(conn, "dlg_pending", &answer).await;
            }
        }
        "session.close" => {
            conn.send(json!({"type": "session.closed", "reason": "close_requested", "usage": {"seconds": 1.0}})).await;
            let _ = conn.out.send(Out::Close(1000, "closed".to_owned())).await;
            return false;
        }
        _ => {}
    }
    true
}

async fn on_action(conn: &Arc<Conn>, action: Action) -> bool {
    match action {
        Action::Send(frame) => conn.send(frame).await,
        Action::Speak(text) => speak(conn, text).await,
        Action::UserTurn { transcript, respond, .. } => {
            for word in transcript.split_inclusive(' ') {
                let start = conn.state().clock_ms;
                let end = start + 250;
                conn.state().clock_ms = end + 50;
                conn.send(
                    json!({"type": "session.input_transcript.delta", "delta": word, "start_ms": start, "end_ms": end}),
                )
                .await;
            }
            conn.state().clock_ms += 1000;
            if respond && let Reply::Speak(text) = conn.shared.next_reply() {
                speak(conn, text).await;
            }
        }
        Action::Delegate { target, tool, answer } => {
            let id = conn.next("dlg");
            let clock = conn.state().clock_ms;
            let mut delegation = json!({"id": id, "target": target});
            if target == "responses" {
                delegation["response_id"] = json!(conn.next("resp"));
            } else {
                conn.state().delegations.insert(id.clone());
            }
            conn.send(json!({"type": "session.delegation.created", "delegation": delegation, "offset_ms": clock}))
                .await;
            if target == "responses" {
                let event = |inner: Value| json!({"type": "response.event", "delegation_id": id, "event": inner});
                conn.send(event(
                    json!({"type": "response.created", "response": {"id": "resp_b1", "status": "in_progress"}}),
                ))
                .await;
                conn.send(event(json!({"type": "response.output_item.done", "output_index": 0,
                    "item": {"type": "reasoning", "id": "rs_1", "summary": []}})))
                    .await;
                match tool {
                    Some((name, arguments)) => {
                        let call_id = conn.next("call");
                        conn.state().open_calls.insert(call_id.clone());
                        conn.state().pending_answer = Some(answer);
                        conn.send(event(json!({"type": "response.output_item.done", "output_index": 1,
                            "item": {"type": "function_call", "status": "completed", "call_id": call_id,
                                "name": name, "arguments": arguments.to_string()}})))
                            .await;
                        conn.send(event(json!({"type": "response.completed", "response": {"id": "resp_b1",
                            "status": "completed", "usage": conn.responses_usage()}})))
                            .await;
                    }
                    None => backend_answer(conn, &id, &answer).await,
                }
            }
        }
        Action::Expire => {
            conn.send(json!({"type": "session.closed", "reason": "expired", "usage": {"seconds": 7200.0}})).await;
            let _ = conn.out.send(Out::Close(1000, "expired".to_owned())).await;
            return true;
        }
        Action::Close(code, reason) => {
            let _ = conn.out.send(Out::Close(code, reason)).await;
            return true;
        }
        Action::Error { code, message } => conn.error(&code, &message, &Value::Null).await,
        Action::Stall => conn.state().stalled = true,
        Action::GoAway(_) => {}
    }
    false
}

/// A backend (Responses) run that answers in text, then the voice model says it.
async fn backend_answer(conn: &Arc<Conn>, delegation_id: &str, answer: &str) {
    let event = |inner: Value| json!({"type": "response.event", "delegation_id": delegation_id, "event": inner});
    conn.send(event(json!({"type": "response.created", "response": {"id": "resp_b2", "status": "in_progress"}}))).await;
    for word in answer.split_inclusive(' ') {
        conn.send(event(json!({"type": "response.output_text.delta", "delta": word}))).await;
    }
    conn.send(event(json!({"type": "response.completed", "response": {"id": "resp_b2", "status": "completed",
        "usage": conn.responses_usage()}})))
        .await;
    speak(conn, answer.to_owned()).await;
}

/// Speech, transcript with model-clock timestamps, then trailing silent frames.
async fn speak(conn: &Arc<Conn>, text: String) {
    if text.is_empty() {
        return;
    }
    let conn = conn.clone();
    tokio::spawn(async move {
        for (pcm, words) in speech_chunks(&text, RATE, CHUNK_MS) {
            let start = conn.state().clock_ms;
            conn.state().clock_ms += u64::from(CHUNK_MS);
            if !words.is_empty() {
                conn.send(json!({"type": "session.output_transcript.delta", "delta": words,
                    "start_ms": start, "end_ms": start + u64::from(CHUNK_MS)}))
                    .await;
            }
            conn.send(json!({"type": "session.output_audio.delta", "delta": b64_pcm(&pcm)})).await;
            pace(&conn.shared, CHUNK_MS).await;
        }
        let silence = vec![0i16; (RATE * CHUNK_MS / 1000) as usize];
        for _ in 0..TRAILING_SILENCE_MS / CHUNK_MS {
            conn.send(json!({"type": "session.output_audio.delta", "delta": b64_pcm(&silence)})).await;
            pace(&conn.shared, CHUNK_MS).await;
        }
        let seconds = conn.state().clock_ms as f64 / 1000.0;
        conn.send(json!({"type": "session.usage.updated", "usage": {"seconds": seconds}, "context_window": {"usage_ratio": 0.01}}))
            .await;
    });
}
