//! Fake Gemini Live `BidiGenerateContent` session (providers.md §2).
//!
//! Resumption is modelled faithfully enough to catch lost audio: the fake issues handles, and
//! with `sessionResumption.transparent` it acknowledges client messages by index
//! (`lastConsumedClientMessageIndex`, first message after `setup` = 0) every few messages. When
//! a connection ends, only the acknowledged part of its audio stays in the session; whatever
//! came after the last acknowledgement is lost unless the client replays it.

use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::wire::{Family, Out, Rng, spawn_writer};
use crate::{Action, Reply, Shared, b64_pcm, pace, pcm_b64, speech_chunks};

const RATE: u32 = 24_000;
const CHUNK_MS: u32 = 40;

#[derive(Default)]
struct State {
    setup_done: bool,
    transparent: bool,
    manual_vad: bool,
    next_index: u64,
    /// Audio per client message index.
    audio: Vec<(u64, Vec<i16>)>,
    consumed: Option<u64>,
    speaking: Option<CancellationToken>,
    tool_pending: bool,
    stalled: bool,
    handle_seq: u64,
    /// Session audio this connection started from (a resumed handle's state).
    base: Vec<i16>,
    /// Randomized wire: where this connection's turns take the shapes the protocol allows.
    shape: Option<Rng>,
}

/// How one spoken turn goes out on the randomized wire.
struct TurnShape {
    /// The early partial usage snapshot goes with this chunk (the chunk count: with the end).
    partial_usage_at: usize,
    /// The last chunk goes out with the turn's end, unpaced (one message may then carry the
    /// last audio, its transcript, `generationComplete` and `turnComplete`).
    last_chunk_with_end: bool,
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

    async fn send(&self, frame: Value) {
        let _ = self.out.send(Out::Frame(frame)).await;
    }

    /// Messages that arise together: the randomized wire may combine them.
    async fn send_batch(&self, frames: Vec<Value>) {
        let _ = self.out.send(Out::Batch(frames)).await;
    }

    /// The shape of a turn of `chunks` audio chunks; `None` on the plain wire.
    fn turn_shape(&self, chunks: usize) -> Option<TurnShape> {
        let mut state = self.state();
        let rng = state.shape.as_mut()?;
        Some(TurnShape { partial_usage_at: rng.below(chunks + 1), last_chunk_with_end: rng.one_in(2) })
    }

    /// The turn's final usage snapshot (an early partial one, [`partial_usage`], precedes it:
    /// only the latest counts).
    fn last_usage(&self) -> Value {
        let u = self.shared.usage();
        let prompt = u.input_text + u.input_audio;
        let response = u.output_text + u.output_audio;
        json!({"usageMetadata": {
            "promptTokenCount": prompt, "responseTokenCount": response, "totalTokenCount": prompt + response,
            "cachedContentTokenCount": u.input_cached,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": u.input_text}, {"modality": "AUDIO", "tokenCount": u.input_audio}],
            "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": u.output_audio}, {"modality": "TEXT", "tokenCount": u.output_text}],
        }})
    }

    async fn resumption_update(&self) {
        let (resumable, consumed, transparent, handle) = {
            let mut state = self.state();
            let resumable = !state.tool_pending && state.speaking.is_none();
            state.handle_seq += 1;
            let handle = format!("handle_{}_{}", self.index, state.handle_seq);
            let consumed = state.next_index.checked_sub(1);
            if state.transparent {
                state.consumed = consumed;
            }
            (resumable, consumed, state.transparent, handle)
        };
        let mut update =
            json!({"newHandle": if resumable { handle.clone() } else { String::new() }, "resumable": resumable});
        if transparent && let Some(index) = consumed {
            update["lastConsumedClientMessageIndex"] = json!(index.to_string());
        }
        if resumable {
            // The handle's state: this connection's base plus its audio up to the index.
            let snapshot: Vec<i16> = {
                let state = self.state();
                let mut audio = state.base.clone();
                for (i, pcm) in &state.audio {
                    if consumed.is_some_and(|c| *i <= c) || !transparent {
                        audio.extend_from_slice(pcm);
                    }
                }
                audio
            };
            self.shared.lock().handles.push((handle, snapshot));
        }
        self.send(json!({"sessionResumptionUpdate": update})).await;
    }
}

pub(crate) async fn serve(socket: WebSocket, shared: Arc<Shared>, index: usize, mut control: mpsc::Receiver<Action>) {
    let (sink, mut stream) = socket.split();
    let (out_tx, writer) = spawn_writer(sink, 4096, shared.wire(Family::Gemini, index));
    // Two statements: the lock's guard would otherwise live through the second call.
    let stalled = shared.lock().stall_new;
    let shape = shared.shape_rng(index);
    let conn = Arc::new(Conn {
        shared: shared.clone(),
        index,
        out: out_tx,
        state: Mutex::new(State { stalled, shape, ..State::default() }),
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
    // The connection is over; the session lives on in its handles.
    if let Some(cancel) = &conn.state().speaking {
        cancel.cancel();
    }
    drop(conn);
    let _ = writer.await;
}

/// `false` ends the connection.
async fn on_client(conn: &Arc<Conn>, frame: Value) -> bool {
    if !conn.state().setup_done {
        let Some(setup) = frame.get("setup") else {
            let _ = conn.out.send(Out::Close(1007, "the first message must be setup".to_owned())).await;
            return false;
        };
        conn.shared.record(conn.index, frame.clone());
        if let Some(handle) = setup.pointer("/sessionResumption/handle").and_then(Value::as_str) {
            let state = conn.shared.lock().handles.iter().find(|(h, _)| h == handle).map(|(_, audio)| audio.clone());
            let Some(base) = state else {
                let _ = conn.out.send(Out::Close(1008, "invalid resumption handle".to_owned())).await;
                return false;
            };
            conn.state().base = base;
        }
        {
            let mut state = conn.state();
            state.setup_done = true;
            state.transparent = setup.pointer("/sessionResumption/transparent").and_then(Value::as_bool) == Some(true);
            state.manual_vad =
                setup.pointer("/realtimeInputConfig/automaticActivityDetection/disabled").and_then(Value::as_bool)
                    == Some(true);
        }
        conn.send(json!({"setupComplete": {"sessionId": format!("gem_{}", conn.index)}})).await;
        return true;
    }
    let index = {
        let mut state = conn.state();
        let index = state.next_index;
        state.next_index += 1;
        index
    };
    let audio = frame.pointer("/realtimeInput/audio/data").and_then(Value::as_str);
    if let Some(data) = audio {
        let pcm = pcm_b64(data);
        conn.shared.push_audio(conn.index, &pcm);
        let base = {
            let mut state = conn.state();
            state.audio.push((index, pcm));
            state.base.clone()
        };
        let all: Vec<i16> = conn.state().audio.iter().flat_map(|(_, p)| p.iter().copied()).collect();
        conn.shared.lock().gemini_current.insert(conn.index, (base, all));
    } else {
        conn.shared.record(conn.index, frame.clone());
    }
    if conn.state().stalled {
        return true;
    }
    let ack_every = conn.shared.lock().gemini_ack_every;
    if ack_every > 0 && (index + 1) % ack_every == 0 {
        conn.resumption_update().await;
    }
    let input = frame.get("realtimeInput");
    let manual_vad = conn.state().manual_vad;
    // With automatic activity detection on, typed realtime text is activity of its own; with
    // it off, text is part of the activity its signals delimit, and the turn is taken at
    // `activityEnd` (google-genai `LiveClientRealtimeInput`: "end of turn … derived from user
    // activity"); text outside an activity is not a turn.
    if (input.and_then(|i| i.get("text")).is_some() && !manual_vad)
        || frame.pointer("/clientContent/turnComplete").and_then(Value::as_bool) == Some(true)
    {
        let reply = conn.shared.next_reply();
        start_turn(conn, reply);
    } else if input.and_then(|i| i.get("activityStart")).is_some() {
        interrupt(conn).await;
    } else if input.and_then(|i| i.get("activityEnd")).is_some() {
        let reply = conn.shared.next_reply();
        start_turn(conn, reply);
    } else if frame.get("toolResponse").is_some() {
        let blocking = frame.pointer("/toolResponse/functionResponses/0/scheduling").is_none();
        let was_pending = std::mem::replace(&mut conn.state().tool_pending, false);
        let scheduling =
            frame.pointer("/toolResponse/functionResponses/0/scheduling").and_then(Value::as_str).unwrap_or("");
        if (was_pending && blocking) || scheduling == "WHEN_IDLE" || scheduling == "INTERRUPT" {
            if scheduling == "INTERRUPT" {
                interrupt(conn).await;
            }
            let reply = conn.shared.next_reply();
            start_turn(conn, reply);
        }
    }
    true
}

async fn interrupt(conn: &Arc<Conn>) {
    let speaking = conn.state().speaking.take();
    if let Some(cancel) = speaking {
        cancel.cancel();
        let interrupted = json!({"serverContent": {"interrupted": true}});
        if conn.state().shape.is_some() {
            // The real service ends an interrupted turn with turnComplete (no generationComplete):
            // "interrupted > turn_complete", ready together, so the wire may combine them.
            conn.send_batch(vec![interrupted, json!({"serverContent": {"turnComplete": true}})]).await;
        } else {
            conn.send(interrupted).await;
        }
    }
}

/// Returns `true` when the connection should end.
async fn on_action(conn: &Arc<Conn>, action: Action) -> bool {
    match action {
        Action::Send(frame) => conn.send(frame).await,
        Action::Speak(text) => start_turn(conn, Reply::Speak(text)),
        Action::UserTurn { transcript, respond, .. } => {
            interrupt(conn).await;
            for word in transcript.split_inclusive(' ') {
                conn.send(json!({"serverContent": {"inputTranscription": {"text": word}}})).await;
            }
            if respond {
                let reply = conn.shared.next_reply();
                start_turn(conn, reply);
            }
        }
        Action::GoAway(left) => {
            conn.send(json!({"goAway": {"timeLeft": format!("{}s", left.as_secs_f64())}})).await;
            let out = conn.out.clone();
            tokio::spawn(async move {
                tokio::time::sleep(left).await;
                let _ = out.send(Out::Close(1000, "session time limit".to_owned())).await;
            });
        }
        Action::Close(code, reason) => {
            let _ = conn.out.send(Out::Close(code, reason)).await;
            return true;
        }
        Action::Error { message, .. } => {
            let _ = conn.out.send(Out::Close(1011, message)).await;
            return true;
        }
        Action::Stall => conn.state().stalled = true,
        Action::Expire | Action::Delegate { .. } => {}
    }
    false
}

/// An early, partial usage snapshot of a turn.
fn partial_usage() -> Value {
    json!({"usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 1}})
}

fn start_turn(conn: &Arc<Conn>, reply: Reply) {
    let cancel = CancellationToken::new();
    conn.state().speaking = Some(cancel.clone());
    let conn = conn.clone();
    tokio::spawn(async move {
        match reply {
            Reply::Speak(text) => {
                let chunks = speech_chunks(&text, RATE, CHUNK_MS);
                let count = chunks.len();
                let shape = conn.turn_shape(count);
                // Randomized wire: what goes out with the turn's end (the last chunk, unpaced).
                let mut end = Vec::new();
                for (i, (pcm, words)) in chunks.into_iter().enumerate() {
                    if cancel.is_cancelled() {
                        return;
                    }
                    let audio = json!({"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": b64_pcm(&pcm)}});
                    match &shape {
                        // Alternate between one field per message and several in one (both happen).
                        None if i % 2 == 0 || words.is_empty() => {
                            conn.send(json!({"serverContent": {"modelTurn": {"parts": [audio]}}})).await;
                            if !words.is_empty() {
                                conn.send(json!({"serverContent": {"outputTranscription": {"text": words}}})).await;
                            }
                        }
                        None => {
                            conn.send(json!({"serverContent": {"modelTurn": {"parts": [audio]}, "outputTranscription": {"text": words}}}))
                                .await;
                        }
                        Some(shape) => {
                            let mut batch = vec![json!({"serverContent": {"modelTurn": {"parts": [audio]}}})];
                            if !words.is_empty() {
                                batch.push(json!({"serverContent": {"outputTranscription": {"text": words}}}));
                            }
                            if shape.partial_usage_at == i {
                                batch.push(partial_usage());
                            }
                            if i + 1 == count && shape.last_chunk_with_end {
                                end = batch;
                                break;
                            }
                            conn.send_batch(batch).await;
                        }
                    }
                    tokio::select! {
                        () = pace(&conn.shared, CHUNK_MS) => {}
                        () = cancel.cancelled() => return,
                    }
                }
                let generation_complete = json!({"serverContent": {"generationComplete": true}});
                let turn_complete = json!({"serverContent": {"turnComplete": true}});
                let delay = conn.shared.lock().gemini_turn_complete_delay;
                match shape {
                    None => {
                        conn.send(generation_complete).await;
                        if !delay.is_zero() {
                            tokio::select! {
                                () = tokio::time::sleep(delay) => {}
                                () = cancel.cancelled() => return,
                            }
                        }
                        // An early partial snapshot, then the turn's final one: only the latest counts.
                        conn.send(partial_usage()).await;
                        conn.send(conn.last_usage()).await;
                        conn.state().speaking = None;
                        conn.send(turn_complete).await;
                    }
                    Some(shape) => {
                        end.push(generation_complete);
                        if !delay.is_zero() {
                            // What follows the wait for playback is ready only after it.
                            conn.send_batch(std::mem::take(&mut end)).await;
                            tokio::select! {
                                () = tokio::time::sleep(delay) => {}
                                () = cancel.cancelled() => return,
                            }
                        }
                        if shape.partial_usage_at >= count {
                            end.push(partial_usage());
                        }
                        end.extend([conn.last_usage(), turn_complete]);
                        conn.state().speaking = None;
                        conn.send_batch(end).await;
                    }
                }
                conn.resumption_update().await;
            }
            Reply::ToolCall { name, arguments } => {
                let id = format!("fc_{}_{}", conn.index, conn.state().handle_seq);
                {
                    let mut state = conn.state();
                    state.tool_pending = true;
                    state.speaking = None;
                }
                conn.send(json!({"toolCall": {"functionCalls": [{"id": id, "name": name, "args": arguments}]}})).await;
                conn.resumption_update().await;
            }
        }
    });
}
