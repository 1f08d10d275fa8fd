//! The benchmark's provider: the part of OpenAI Realtime GA (`/v1/realtime`, WebSocket) that a
//! bridged voice conversation uses, cheap enough that hundreds of connections cost little next
//! to the server under test, and instrumented.
//!
//! Per connection it answers the handshake (`session.created`, `session.updated`), reads the
//! user's audio (`input_audio_buffer.append`), finds where each of the client's talk spurts
//! starts (the first loud frame after at least [`ONSET_QUIET_FRAMES`] quiet ones) and ends
//! ([`TURN_END_QUIET_FRAMES`] quiet frames), and answers each finished spurt with one response:
//! [`RESPONSE_FRAMES`] 20 ms deltas of 24 kHz speech sent at real time (what a realtime model
//! streams once it has caught up with itself), with transcript deltas and a `response.done`
//! with usage, like the real service. It never sends server-VAD events, so no response is cut.
//!
//! The session a connection belongs to is named in its instructions (`bench-session:<tag>`),
//! which the adapter sends in `session.update`; the fake then records, on that session's
//! [`SessionProbe`], when each append arrived relative to the client's send of the same frame
//! (up latency), and when it sent each delta (for the client to score down latency).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use axum::serve::ListenerExt as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;

use svc_bench::lock;

use crate::{CYCLE_FRAMES, SessionProbe};

/// The provider's audio rate (OpenAI Realtime: 24 kHz PCM16).
pub(crate) const PROVIDER_RATE_HZ: u32 = 24_000;
/// Samples of one 20 ms frame at the provider's rate.
pub(crate) const PROVIDER_FRAME: usize = 480;
/// Frames of one agent response (2.4 s).
pub(crate) const RESPONSE_FRAMES: usize = 120;
/// An append louder than this (RMS of 16-bit samples) is speech; the client's talk spurts are
/// about 25 dB above it, decoded silence far below.
const LOUD_RMS: f64 = 1_000.0;
/// Quiet frames that must precede a talk spurt's first frame (so a spurt's start is not
/// mistaken inside it).
const ONSET_QUIET_FRAMES: usize = 10;
/// Quiet frames after which the user's turn is over and the agent answers (300 ms).
const TURN_END_QUIET_FRAMES: usize = 15;

/// What the soak (`--soak-minutes`) has a session's provider connection do to svc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderFault {
    /// Ends the connection with a close frame (a provider restarting politely).
    Close,
    /// Drops the connection without a close frame (a crashed provider, a dead load balancer).
    Abort,
    /// Sends and reads nothing for this long, then drops the connection.
    Stall(Duration),
}

/// Sessions by tag, for connections to find their probe.
#[derive(Default)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<String, Arc<SessionProbe>>>,
}

impl Registry {
    pub(crate) fn insert(&self, tag: String, probe: Arc<SessionProbe>) {
        lock(&self.sessions).insert(tag, probe);
    }

    pub(crate) fn remove(&self, tag: &str) {
        lock(&self.sessions).remove(tag);
    }

    fn get(&self, tag: &str) -> Option<Arc<SessionProbe>> {
        lock(&self.sessions).get(tag).cloned()
    }

    /// The `pick`-th session (modulo how many there are), with its tag.
    pub(crate) fn pick(&self, pick: usize) -> Option<(String, Arc<SessionProbe>)> {
        let sessions = lock(&self.sessions);
        let mut tags: Vec<&String> = sessions.keys().collect();
        tags.sort();
        let tag = tags.get(pick.checked_rem(tags.len())?)?;
        sessions.get(*tag).map(|probe| ((*tag).clone(), probe.clone()))
    }
}

#[derive(Clone)]
struct Shared {
    registry: Arc<Registry>,
    /// The response's deltas, base64 PCM16, made once.
    speech: Arc<Vec<String>>,
}

/// Serves the fake on `listener` until the runtime it runs on stops.
pub(crate) async fn serve(listener: tokio::net::TcpListener, registry: Arc<Registry>) {
    let speech = crate::voice(PROVIDER_RATE_HZ, RESPONSE_FRAMES * PROVIDER_FRAME, 7)
        .chunks_exact(PROVIDER_FRAME)
        .map(|frame| STANDARD.encode(frame.iter().flat_map(|sample| sample.to_le_bytes()).collect::<Vec<u8>>()))
        .collect();
    let shared = Shared { registry, speech: Arc::new(speech) };
    let router = Router::new().route("/v1/realtime", get(upgrade)).with_state(shared);
    // Realtime services answer with Nagle off; with it on, a delta written right after the
    // response's opening frames waits for their acknowledgement (about 20 ms on loopback).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let _ = axum::serve(listener, router).await;
}

async fn upgrade(State(shared): State<Shared>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(1 << 20).on_upgrade(move |socket| connection(socket, shared))
}

/// The fields of a client frame the fake reads; the audio stays borrowed from the text.
#[derive(Deserialize)]
struct ClientFrame<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    audio: Option<std::borrow::Cow<'a, str>>,
    session: Option<serde_json::Value>,
}

/// Where the client's talk spurts start and end, from the loudness of what arrives.
struct TurnTracker {
    quiet_frames: usize,
    talking: bool,
    /// Samples since the current spurt's first frame (the client's cycle position).
    since_onset: Option<usize>,
}

impl TurnTracker {
    fn new() -> TurnTracker {
        TurnTracker { quiet_frames: ONSET_QUIET_FRAMES, talking: false, since_onset: None }
    }
}

/// A response being streamed.
struct Speaking {
    response_id: String,
    item_id: String,
    next_frame: usize,
    ticker: tokio::time::Interval,
}

async fn connection(socket: WebSocket, shared: Shared) {
    let (mut sink, mut stream) = socket.split();
    let created = json!({"type": "session.created", "session": {"id": "sess_bench", "object": "realtime.session",
        "type": "realtime", "model": "gpt-realtime"}});
    if sink.send(Message::Text(created.to_string().into())).await.is_err() {
        return;
    }
    let mut probe: Option<Arc<SessionProbe>> = None;
    let mut turns = TurnTracker::new();
    let mut speaking: Option<Speaking> = None;
    let mut responses = 0u64;
    let mut pcm = Vec::with_capacity(4 * PROVIDER_FRAME * 2);
    loop {
        let tick = async {
            match speaking.as_mut() {
                Some(speaking) => speaking.ticker.tick().await,
                None => std::future::pending().await,
            }
        };
        // Its own handle: the select's arms may replace `probe` (a `session.update`).
        let watched = probe.clone();
        let fault = async move {
            match watched {
                Some(probe) => probe.fault_raised.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = fault => {
                let Some(fault) = probe.as_deref().and_then(|probe| lock(&probe.fault).take()) else { continue };
                match fault {
                    ProviderFault::Close => {
                        let _ = sink.send(Message::Close(None)).await;
                    }
                    ProviderFault::Abort => {}
                    ProviderFault::Stall(duration) => tokio::time::sleep(duration).await,
                }
                // Dropping the socket ends the TCP connection (after a close frame, or without).
                break;
            }
            message = stream.next() => {
                let Some(Ok(Message::Text(text))) = message else {
                    if matches!(message, Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Binary(_)))) {
                        continue;
                    }
                    break;
                };
                let Ok(frame) = serde_json::from_str::<ClientFrame<'_>>(text.as_str()) else { continue };
                match frame.kind.as_ref() {
                    "session.update" => {
                        let mut session = frame.session.unwrap_or_else(|| json!({}));
                        let tag = session.get("instructions").and_then(|v| v.as_str()).and_then(session_tag);
                        probe = tag.and_then(|tag| shared.registry.get(tag));
                        session["id"] = json!("sess_bench");
                        let updated = json!({"type": "session.updated", "session": session});
                        if sink.send(Message::Text(updated.to_string().into())).await.is_err() {
                            break;
                        }
                    }
                    "input_audio_buffer.append" => {
                        let arrived = Instant::now();
                        pcm.clear();
                        let Some(audio) = frame.audio else { continue };
                        if STANDARD.decode_vec(audio.as_bytes(), &mut pcm).is_err() {
                            continue;
                        }
                        let turn_over = on_audio(probe.as_deref(), &mut turns, &pcm, arrived);
                        if turn_over && speaking.is_none() {
                            responses += 1;
                            let started = start_response(&mut sink, responses).await;
                            match started {
                                Some(started) => speaking = Some(started),
                                None => break,
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ = tick => {
                let Some(current) = speaking.as_mut() else { continue };
                let done = send_delta(&mut sink, &shared, probe.as_deref(), responses, current).await;
                match done {
                    Ok(false) => {}
                    Ok(true) => {
                        let finished = speaking.take();
                        if let Some(finished) = finished {
                            if finish_response(&mut sink, &finished).await.is_err() {
                                break;
                            }
                            if let Some(probe) = probe.as_deref() {
                                probe.responses_done.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(()) => break,
                }
            }
        }
    }
}

/// The tag in `bench-session:<tag>` of the instructions.
fn session_tag(instructions: &str) -> Option<&str> {
    let rest = &instructions[instructions.find("bench-session:")? + "bench-session:".len()..];
    rest.split_whitespace().next()
}

/// Scores one append and moves the turn tracker; true when the user's turn just ended.
fn on_audio(probe: Option<&SessionProbe>, turns: &mut TurnTracker, pcm: &[u8], arrived: Instant) -> bool {
    let samples = pcm.len() / 2;
    if let Some(probe) = probe {
        probe.probes.appends_at_fake.fetch_add(1, Ordering::Relaxed);
    }
    if samples == 0 {
        return false;
    }
    let energy: f64 = pcm
        .chunks_exact(2)
        .map(|pair| {
            let sample = f64::from(i16::from_le_bytes([pair[0], pair[1]]));
            sample * sample
        })
        .sum();
    let loud = (energy / samples as f64).sqrt() > LOUD_RMS;
    if loud && !turns.talking && turns.quiet_frames >= ONSET_QUIET_FRAMES {
        turns.talking = true;
        turns.since_onset = Some(0);
    }
    if let (Some(since), Some(probe)) = (turns.since_onset, probe) {
        // An append can carry several frames (after a reconnect's backlog): score its first.
        let index = since / PROVIDER_FRAME;
        if index < CYCLE_FRAMES && since % PROVIDER_FRAME == 0 {
            let sent = lock(&probe.up_sent)[index];
            let probes = &probe.probes;
            match sent {
                Some(sent) if sent <= arrived && probes.measuring() => {
                    probes.up.record(arrived - sent);
                    probes.appends_matched.fetch_add(1, Ordering::Relaxed);
                }
                Some(_) if probes.measuring() => {
                    probes.appends_unmatched.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
    }
    if let Some(since) = turns.since_onset.as_mut() {
        *since += samples;
    }
    if loud {
        turns.quiet_frames = 0;
        false
    } else {
        turns.quiet_frames += samples.div_ceil(PROVIDER_FRAME);
        let over = turns.talking && turns.quiet_frames >= TURN_END_QUIET_FRAMES;
        if over {
            turns.talking = false;
        }
        over
    }
}

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;

async fn start_response(sink: &mut Sink, number: u64) -> Option<Speaking> {
    let response_id = format!("resp_{number}");
    let item_id = format!("item_{number}");
    let created = json!({"type": "response.created", "response": {"id": response_id, "object": "realtime.response",
        "status": "in_progress", "output": []}});
    let added = json!({"type": "response.output_item.added", "response_id": response_id, "output_index": 0,
        "item": {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant",
            "status": "in_progress", "content": []}});
    for frame in [created, added] {
        sink.send(Message::Text(frame.to_string().into())).await.ok()?;
    }
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    // A provider that fell behind catches up in a burst, as the real ones do.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    Some(Speaking { response_id, item_id, next_frame: 0, ticker })
}

/// Sends the next delta (and every tenth frame a transcript word); true after the last one.
async fn send_delta(
    sink: &mut Sink,
    shared: &Shared,
    probe: Option<&SessionProbe>,
    response: u64,
    speaking: &mut Speaking,
) -> Result<bool, ()> {
    let index = speaking.next_frame;
    let Some(audio) = shared.speech.get(index) else { return Ok(true) };
    let delta = format!(
        r#"{{"type":"response.output_audio.delta","response_id":"{}","item_id":"{}","output_index":0,"content_index":0,"delta":"{}"}}"#,
        speaking.response_id, speaking.item_id, audio
    );
    if let Some(probe) = probe {
        let mut log = lock(&probe.down_sent);
        if index == 0 {
            log.response = response;
            log.sent.clear();
        }
        log.sent.push(Instant::now());
    }
    sink.send(Message::Text(delta.into())).await.map_err(|_| ())?;
    if let Some(probe) = probe {
        probe.probes.deltas_sent.fetch_add(1, Ordering::Relaxed);
    }
    if index.is_multiple_of(10) {
        let words = json!({"type": "response.output_audio_transcript.delta", "response_id": speaking.response_id,
            "item_id": speaking.item_id, "output_index": 0, "content_index": 0, "delta": "word "});
        sink.send(Message::Text(words.to_string().into())).await.map_err(|_| ())?;
    }
    speaking.next_frame += 1;
    Ok(speaking.next_frame >= shared.speech.len())
}

async fn finish_response(sink: &mut Sink, speaking: &Speaking) -> Result<(), ()> {
    let (response_id, item_id) = (&speaking.response_id, &speaking.item_id);
    let transcript = "word ".repeat(RESPONSE_FRAMES / 10);
    let frames = [
        json!({"type": "response.output_audio.done", "response_id": response_id, "item_id": item_id,
            "output_index": 0, "content_index": 0}),
        json!({"type": "response.output_audio_transcript.done", "response_id": response_id, "item_id": item_id,
            "output_index": 0, "content_index": 0, "transcript": transcript.trim_end()}),
        json!({"type": "response.output_item.done", "response_id": response_id, "output_index": 0,
            "item": {"id": item_id, "type": "message", "role": "assistant", "status": "completed"}}),
        json!({"type": "response.done", "response": {"id": response_id, "object": "realtime.response",
            "status": "completed", "usage": {"total_tokens": 240, "input_tokens": 120, "output_tokens": 120,
                "input_token_details": {"text_tokens": 60, "audio_tokens": 60, "cached_tokens": 0},
                "output_token_details": {"text_tokens": 12, "audio_tokens": 108}}}}),
    ];
    for frame in frames {
        sink.send(Message::Text(frame.to_string().into())).await.map_err(|_| ())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_is_read_from_the_instructions() {
        assert_eq!(session_tag("Be brief. bench-session:p1-7 thanks"), Some("p1-7"));
        assert_eq!(session_tag("bench-session:x"), Some("x"));
        assert_eq!(session_tag("nothing here"), None);
    }

    #[test]
    fn spurts_are_found_from_loudness_and_end_after_300_ms() {
        let loud: Vec<u8> =
            crate::voice(PROVIDER_RATE_HZ, PROVIDER_FRAME, 3).iter().flat_map(|sample| sample.to_le_bytes()).collect();
        let quiet = vec![0u8; PROVIDER_FRAME * 2];
        let mut turns = TurnTracker::new();
        let now = Instant::now();
        assert!(!on_audio(None, &mut turns, &loud, now));
        assert!(turns.talking);
        for _ in 0..TURN_END_QUIET_FRAMES - 1 {
            assert!(!on_audio(None, &mut turns, &quiet, now));
        }
        assert!(on_audio(None, &mut turns, &quiet, now), "the 15th quiet frame ends the turn");
        assert_eq!(turns.since_onset, Some(16 * PROVIDER_FRAME));
    }
}
