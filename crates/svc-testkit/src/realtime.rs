//! Fake OpenAI Realtime GA / xAI Grok voice session (providers.md §3, §5).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::wire::{Family, Out, spawn_writer};
use crate::{Action, Flavor, Reply, Shared, b64_pcm, pace, pcm_b64, speech_chunks};

const RATE: u32 = 24_000;
const CHUNK_MS: u32 = 40;

#[derive(Default)]
struct State {
    seq: u64,
    /// The response in flight: id and its cancel token.
    active: Option<(String, CancellationToken)>,
    /// Assistant item → milliseconds of audio sent.
    item_audio_ms: HashMap<String, u64>,
    stalled: bool,
    /// Server VAD creates responses on its own.
    auto_response: bool,
    /// Energy VAD over appended audio: in speech, and silence heard since (ms).
    in_speech: bool,
    silence_ms: u64,
    heard_ms: u64,
}

struct Conn {
    shared: Arc<Shared>,
    index: usize,
    flavor: Flavor,
    out: mpsc::Sender<Out>,
    state: Arc<Mutex<State>>,
}

impl Conn {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn id(&self, prefix: &str) -> String {
        let mut state = self.state();
        state.seq += 1;
        format!("{prefix}_{}_{}", self.index, state.seq)
    }

    async fn send(&self, mut frame: Value) {
        if frame.get("event_id").is_none() {
            frame["event_id"] = json!(self.id("event"));
        }
        let _ = self.out.send(Out::Frame(frame)).await;
    }

    fn usage_json(&self) -> Value {
        let u = self.shared.usage();
        let input = u.input_text + u.input_audio;
        let output = u.output_text + u.output_audio;
        match self.flavor {
            Flavor::OpenAi => json!({
                "total_tokens": input + output, "input_tokens": input, "output_tokens": output,
                "input_token_details": {"text_tokens": u.input_text, "audio_tokens": u.input_audio,
                    "image_tokens": 0, "cached_tokens": u.input_cached},
                "output_token_details": {"text_tokens": u.output_text, "audio_tokens": u.output_audio},
            }),
            Flavor::Xai => json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output}),
        }
    }
}

pub(crate) async fn serve(
    socket: WebSocket,
    shared: Arc<Shared>,
    index: usize,
    model: String,
    mut control: mpsc::Receiver<Action>,
) {
    let (sink, mut stream) = socket.split();
    let (out_tx, writer) = spawn_writer(sink, 4096, shared.wire(Family::Typed, index));
    let flavor = shared.flavor;
    let conn = Arc::new(Conn {
        shared: shared.clone(),
        index,
        flavor,
        out: out_tx,
        state: Arc::new(Mutex::new(State {
            auto_response: true,
            stalled: shared.lock().stall_new,
            ..State::default()
        })),
    });
    let echoed = shared.lock().echo_model.clone().unwrap_or(model);
    let mut session = json!({"id": format!("sess_{index}"), "object": "realtime.session", "model": echoed});
    if flavor == Flavor::OpenAi {
        session["type"] = json!("realtime");
    }
    conn.send(json!({"type": "session.created", "session": session})).await;
    loop {
        tokio::select! {
            message = stream.next() => {
                let Some(Ok(message)) = message else { break };
                let Message::Text(text) = message else {
                    if matches!(message, Message::Close(_)) { break; }
                    continue;
                };
                let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                let audio = frame.get("type").and_then(Value::as_str) == Some("input_audio_buffer.append");
                if !audio {
                    shared.record(index, frame.clone());
                }
                if conn.state().stalled {
                    continue;
                }
                on_client(&conn, frame).await;
            }
            action = control.recv() => {
                let Some(action) = action else { break };
                if on_action(&conn, action).await {
                    break;
                }
            }
        }
    }
    if let Some((_, cancel)) = conn.state().active.take() {
        cancel.cancel();
    }
    drop(conn);
    let _ = writer.await;
}

async fn on_client(conn: &Arc<Conn>, frame: Value) {
    let kind = frame.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
    let event_id = frame.get("event_id").cloned().unwrap_or(Value::Null);
    match kind.as_str() {
        "session.update" => {
            let mut session = frame.get("session").cloned().unwrap_or(json!({}));
            let auto = session.pointer("/audio/input/turn_detection/create_response").and_then(Value::as_bool);
            conn.state().auto_response = auto.unwrap_or(true);
            session["id"] = json!(format!("sess_{}", conn.index));
            conn.send(json!({"type": "session.updated", "session": session})).await;
        }
        "input_audio_buffer.append" => {
            let pcm = pcm_b64(frame.get("audio").and_then(Value::as_str).unwrap_or(""));
            conn.shared.push_audio(conn.index, &pcm);
            server_vad(conn, &pcm).await;
        }
        "conversation.item.create" => {
            let mut item = frame.get("item").cloned().unwrap_or(json!({}));
            let item_id = conn.id("item");
            item["id"] = json!(item_id);
            conn.send(json!({"type": "conversation.item.added", "item": item.clone()})).await;
            conn.send(json!({"type": "conversation.item.done", "item": item.clone()})).await;
            if conn.flavor == Flavor::Xai && item.get("type").and_then(Value::as_str) == Some("force_message") {
                let text = item.pointer("/content/0/text").and_then(Value::as_str).unwrap_or("").to_owned();
                start_response(conn, Reply::Speak(text), None);
            }
        }
        "response.create" => {
            if conn.state().active.is_some() {
                conn.send(json!({"type": "error", "error": {
                    "type": "invalid_request_error", "code": "conversation_already_has_active_response",
                    "message": "Conversation already has an active response in progress.", "event_id": event_id}}))
                    .await;
                return;
            }
            let reply = conn.shared.next_reply();
            start_response(conn, reply, None);
        }
        "response.cancel" => {
            let active = conn.state().active.clone();
            match active {
                Some((_, cancel)) => cancel.cancel(),
                None => {
                    conn.send(json!({"type": "error", "error": {"type": "invalid_request_error",
                        "code": "response_cancel_not_active", "message": "Cancellation failed: no active response found",
                        "event_id": event_id}}))
                        .await;
                }
            }
        }
        "conversation.item.truncate" => {
            let item_id = frame.get("item_id").and_then(Value::as_str).unwrap_or("").to_owned();
            let end = frame.get("audio_end_ms").and_then(Value::as_u64).unwrap_or(0);
            let have = conn.state().item_audio_ms.get(&item_id).copied();
            let error = match have {
                None | Some(0) => Some("Only model output audio messages can be truncated".to_owned()),
                Some(ms) if end > ms => Some(format!("Audio content of {ms}ms is already shorter than {end}ms")),
                Some(_) => None,
            };
            match error {
                Some(message) => {
                    conn.send(json!({"type": "error", "error": {"type": "invalid_request_error",
                        "code": "invalid_value", "message": message, "event_id": event_id}}))
                        .await;
                }
                None => {
                    conn.send(json!({"type": "conversation.item.truncated", "item_id": item_id,
                        "content_index": 0, "audio_end_ms": end}))
                        .await;
                }
            }
        }
        _ => {}
    }
}

/// A plain energy detector standing in for server VAD: speech starts above an RMS of 300 and
/// ends after 500 ms below 100; then the turn is committed, transcribed and answered.
async fn server_vad(conn: &Arc<Conn>, pcm: &[i16]) {
    let ms = pcm.len() as u64 * 1000 / u64::from(RATE);
    let level = crate::speech::rms(pcm);
    let (started, ended) = {
        let mut state = conn.state();
        state.heard_ms += ms;
        let mut started = false;
        let mut ended = false;
        if level > 300.0 {
            state.silence_ms = 0;
            if !state.in_speech {
                state.in_speech = true;
                started = true;
            }
        } else if state.in_speech && level < 100.0 {
            state.silence_ms += ms;
            if state.silence_ms >= 500 {
                state.in_speech = false;
                ended = true;
            }
        }
        (started, ended)
    };
    if started {
        let heard = conn.state().heard_ms;
        conn.send(json!({"type": "input_audio_buffer.speech_started", "audio_start_ms": heard, "item_id": "item_vad"}))
            .await;
    }
    if ended {
        let item_id = conn.id("item_user");
        let heard = conn.state().heard_ms;
        conn.send(json!({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": heard, "item_id": item_id}))
            .await;
        conn.send(json!({"type": "input_audio_buffer.committed", "item_id": item_id, "previous_item_id": null})).await;
        for frame in user_transcript_frames(conn.flavor, &item_id, "(speech)") {
            conn.send(frame).await;
        }
        let auto = conn.state().auto_response && conn.state().active.is_none();
        if auto {
            let reply = conn.shared.next_reply();
            start_response(conn, reply, None);
        }
    }
}

/// Returns `true` when the connection should end.
async fn on_action(conn: &Arc<Conn>, action: Action) -> bool {
    match action {
        Action::Send(frame) => conn.send(frame).await,
        Action::Speak(text) => start_response(conn, Reply::Speak(text), None),
        Action::UserTurn { transcript, late_transcript, respond } => {
            let item_id = conn.id("item_user");
            conn.send(json!({"type": "input_audio_buffer.speech_started", "audio_start_ms": 1000, "item_id": item_id}))
                .await;
            // interrupt_response: the server cancels an in-progress response itself.
            let active = conn.state().active.clone();
            if let Some((_, cancel)) = active {
                cancel.cancel();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            conn.send(json!({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 2000, "item_id": item_id}))
                .await;
            conn.send(json!({"type": "input_audio_buffer.committed", "item_id": item_id, "previous_item_id": null}))
                .await;
            let transcript_frames = user_transcript_frames(conn.flavor, &item_id, &transcript);
            let auto = conn.state().auto_response;
            if late_transcript && respond && auto {
                let reply = conn.shared.next_reply();
                start_response(conn, reply, Some(transcript_frames));
            } else {
                for frame in transcript_frames {
                    conn.send(frame).await;
                }
                if respond && auto {
                    let reply = conn.shared.next_reply();
                    start_response(conn, reply, None);
                }
            }
        }
        Action::Close(code, reason) => {
            let _ = conn.out.send(Out::Close(code, reason)).await;
            return true;
        }
        Action::Error { code, message } => {
            conn.send(
                json!({"type": "error", "error": {"type": "invalid_request_error", "code": code, "message": message}}),
            )
            .await;
        }
        Action::Stall => conn.state().stalled = true,
        Action::Expire => {
            conn.send(json!({"type": "error", "error": {"type": "invalid_request_error", "code": "session_expired",
                "message": "Your session hit the maximum duration of 60 minutes."}}))
                .await;
            let _ = conn.out.send(Out::Close(1001, "session expired".to_owned())).await;
            return true;
        }
        Action::GoAway(_) | Action::Delegate { .. } => {}
    }
    false
}

fn user_transcript_frames(flavor: Flavor, item_id: &str, transcript: &str) -> Vec<Value> {
    let mut frames = Vec::new();
    let words: Vec<&str> = transcript.split_inclusive(' ').collect();
    let mut so_far = String::new();
    for word in words {
        so_far.push_str(word);
        frames.push(match flavor {
            Flavor::OpenAi => json!({"type": "conversation.item.input_audio_transcription.delta",
                "item_id": item_id, "content_index": 0, "delta": word}),
            Flavor::Xai => json!({"type": "conversation.item.input_audio_transcription.updated",
                "item_id": item_id, "transcript": so_far}),
        });
    }
    frames.push(json!({"type": "conversation.item.input_audio_transcription.completed",
        "item_id": item_id, "content_index": 0, "transcript": transcript}));
    frames
}

/// Runs one response in its own task (paced audio), honouring cancellation.
fn start_response(conn: &Arc<Conn>, reply: Reply, after: Option<Vec<Value>>) {
    let response_id = conn.id("resp");
    let cancel = CancellationToken::new();
    conn.state().active = Some((response_id.clone(), cancel.clone()));
    let conn = conn.clone();
    tokio::spawn(async move {
        let status = run_response(&conn, &response_id, reply, &cancel).await;
        let usage = conn.usage_json();
        let mut response = json!({"id": response_id, "object": "realtime.response", "status": status,
            "output": [], "usage": usage});
        if status == "cancelled" {
            response["status_details"] = json!({"type": "cancelled", "reason": "turn_detected"});
        }
        {
            let mut state = conn.state();
            if state.active.as_ref().is_some_and(|(id, _)| *id == response_id) {
                state.active = None;
            }
        }
        let mut done = json!({"type": "response.done", "response": response});
        if conn.flavor == Flavor::Xai {
            // xAI: usage at the top level, the response's left empty (§5.3).
            done["usage"] = usage;
            done["response"]["usage"] = json!({});
        }
        conn.send(done).await;
        for frame in after.unwrap_or_default() {
            conn.send(frame).await;
        }
    });
}

async fn run_response(conn: &Arc<Conn>, response_id: &str, reply: Reply, cancel: &CancellationToken) -> &'static str {
    conn.send(json!({"type": "response.created", "response": {"id": response_id, "object": "realtime.response",
        "status": "in_progress", "output": []}}))
        .await;
    match reply {
        Reply::Speak(text) => {
            let item_id = conn.id("item_asst");
            conn.send(json!({"type": "response.output_item.added", "response_id": response_id, "output_index": 0,
                "item": {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                    "status": "in_progress", "content": []}}))
                .await;
            let mut sent_samples = 0u64;
            for (pcm, words) in speech_chunks(&text, RATE, CHUNK_MS) {
                if cancel.is_cancelled() {
                    return "cancelled";
                }
                sent_samples += pcm.len() as u64;
                conn.state().item_audio_ms.insert(item_id.clone(), sent_samples * 1000 / u64::from(RATE));
                conn.send(json!({"type": "response.output_audio.delta", "response_id": response_id,
                    "item_id": item_id, "output_index": 0, "content_index": 0, "delta": b64_pcm(&pcm)}))
                    .await;
                if !words.is_empty() {
                    conn.send(json!({"type": "response.output_audio_transcript.delta", "response_id": response_id,
                        "item_id": item_id, "output_index": 0, "content_index": 0, "delta": words}))
                        .await;
                }
                tokio::select! {
                    () = pace(&conn.shared, CHUNK_MS) => {}
                    () = cancel.cancelled() => return "cancelled",
                }
            }
            conn.send(json!({"type": "response.output_audio.done", "response_id": response_id, "item_id": item_id,
                "output_index": 0, "content_index": 0}))
                .await;
            conn.send(json!({"type": "response.output_audio_transcript.done", "response_id": response_id,
                "item_id": item_id, "output_index": 0, "content_index": 0, "transcript": text}))
                .await;
            conn.send(json!({"type": "response.output_item.done", "response_id": response_id, "output_index": 0,
                "item": {"id": item_id, "type": "message", "role": "assistant", "status": "completed"}}))
                .await;
            "completed"
        }
        Reply::ToolCall { name, arguments } => {
            let item_id = conn.id("item_fc");
            let call_id = conn.id("call");
            let args = arguments.to_string();
            conn.send(json!({"type": "response.output_item.added", "response_id": response_id, "output_index": 0,
                "item": {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id,
                    "name": name, "arguments": ""}}))
                .await;
            conn.send(json!({"type": "response.function_call_arguments.delta", "response_id": response_id,
                "item_id": item_id, "output_index": 0, "call_id": call_id, "delta": args}))
                .await;
            conn.send(json!({"type": "response.function_call_arguments.done", "response_id": response_id,
                "item_id": item_id, "output_index": 0, "call_id": call_id, "name": name, "arguments": args}))
                .await;
            conn.send(json!({"type": "response.output_item.done", "response_id": response_id, "output_index": 0,
                "item": {"id": item_id, "type": "function_call", "status": "completed", "call_id": call_id,
                    "name": name, "arguments": args}}))
                .await;
            "completed"
        }
    }
}
