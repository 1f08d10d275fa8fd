//! The properties of the session core under arbitrary input from clients, shared by the CI
//! robustness test (`tests/robustness.rs`) and the cargo-fuzz target
//! `fuzz/fuzz_targets/data_channel.rs` (both include this file with `#[path]`).
//!
//! An input is a byte string read as a program of operations on one live session, in virtual time:
//! raw data packets from one of three participants, well-framed `envelope-chunk`s carrying
//! arbitrary fragments (so reassembly is reached, not only the JSON parser), known messages with
//! fields replaced by arbitrary text, `svc.tool_result` RPC payloads, time passing, participants
//! coming and going, user audio, and provider events (tool calls, responses, audio). After every
//! operation:
//!
//! - nothing panicked;
//! - every output fits the media room: a data packet is at most 64 KiB (the room's limit) and is
//!   UTF-8 JSON with a `type`;
//! - the chunk reassembler holds at most its byte budget;
//! - one operation produced a bounded number of outputs (no runaway loop).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_domain::model::ModelCatalog;
use svc_domain::session_config::parse_start;
use svc_domain::settings::RecordingConsents;
use svc_domain::start::{CatalogLookup, ResolvedSession, StartContext, resolve_start};
use svc_domain::tools::{ServerTool, ServerToolAvailability};
use svc_provider_core::{ProviderEvent, ResponseStatus};
use svc_session::core::envelope::MAX_BUFFERED_BYTES;
use svc_session::core::{CoreConfig, Output, Peer, SessionCore, Timing};

/// The room drops data packets larger than this.
const MAX_DATA_PACKET_BYTES: usize = 64 * 1024;
/// Outputs one operation may produce.
const MAX_OUTPUTS_PER_OP: usize = 20_000;
const SENDERS: [&str; 3] = ["alice", "bob", "agent-intruder"];

/// A session with a client tool, a server tool, hooks and a cap, so that every path is reachable.
pub fn session() -> Arc<ResolvedSession> {
    let body = json!({
        "sdk": {"name": "fuzz", "version": "1.0.0"},
        "agent": {"type": "inline", "model": "provider_b", "greeting": "Hi",
            "tools": [{"kind": "client", "name": "lookup_order", "description": "d"}, {"kind": "end_call"}, {"kind": "examine_image"}],
            "hooks": [{"trigger": "user.speech.timeout", "timeout_seconds": 3, "action": {"type": "say", "text": "Hello?"}}]},
        "session": {"max_session_seconds": 600}
    });
    let request = parse_start(&body, None).expect("a valid start");
    let tools = ServerToolAvailability::new([ServerTool::EndCall, ServerTool::ExamineImage]);
    let context = StartContext {
        catalog: ModelCatalog::embedded(),
        server_tools: &tools,
        caller_has_resources_read: false,
        consents: RecordingConsents { audio: true, transcript: true, video: false },
        avatar_enabled: false,
        server_max_session_seconds: None,
    };
    Arc::new(resolve_start(request, CatalogLookup::NotApplicable, &context).expect("resolves"))
}

/// Reads bytes in order; past the end everything is zero.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn byte(&mut self) -> u8 {
        let byte = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        byte
    }

    fn u16(&mut self) -> u16 {
        u16::from(self.byte()) << 8 | u16::from(self.byte())
    }

    /// A length: usually short (so a program holds many operations), now and then up to `max`.
    fn len(&mut self, max: usize) -> usize {
        match self.byte() {
            250.. => usize::from(self.u16()) * 4 % max,
            200.. => usize::from(self.byte()) * 16 % max,
            _ => usize::from(self.byte() % 64) % max,
        }
    }

    fn take(&mut self, len: usize) -> &[u8] {
        let start = self.at.min(self.bytes.len());
        let end = (start + len).min(self.bytes.len());
        self.at = start + len;
        &self.bytes[start..end]
    }
}

/// Runs `bytes` as a program against one session; panics with `property violated: …` when a
/// property fails.
pub fn exercise(bytes: &[u8]) -> usize {
    let t0 = Instant::now();
    let mut now = t0;
    let cfg = CoreConfig {
        session_id: "fuzz".into(),
        agent_identity: "agent".into(),
        started_at_us: 1_000_000,
        session: session(),
        input_rate_hz: 24_000,
        timing: Timing::default(),
    };
    let mut core = SessionCore::new(cfg, now);
    core.handle_provider_event(now, ProviderEvent::Ready { upstream_session_id: None });
    core.handle_peer(now, Peer { identity: "alice".into(), is_agent: false, active: true, publishes_audio: true });
    check(&mut core, "setup");
    let mut reader = Reader { bytes, at: 0 };
    let mut steps = 0;
    while !reader.done() && steps < 4096 {
        steps += 1;
        let sender = SENDERS[usize::from(reader.byte()) % SENDERS.len()];
        match reader.byte() % 9 {
            0 => {
                let len = reader.len(70_000);
                let payload = reader.take(len).to_vec();
                let _ = core.handle_data(now, sender, &payload);
            }
            1 => {
                let id = format!("e{}", reader.byte() % 6);
                let total = u32::from(reader.byte() % 8) + u32::from(reader.byte() == 0) * 300;
                let seq = u32::from(reader.byte()) % (total + 2);
                let len = reader.len(9_000);
                let fragment = reader.take(len).to_vec();
                let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &fragment);
                let chunk =
                    json!({"type": "envelope-chunk", "envelope_id": id, "seq": seq, "total": total, "data": data});
                let _ = core.handle_data(now, sender, chunk.to_string().as_bytes());
            }
            2 => {
                // Mostly seconds; now and then minutes (the cap, timeouts).
                let step =
                    if reader.byte() > 250 { u64::from(reader.u16()) * 10 } else { u64::from(reader.byte()) * 20 };
                now += Duration::from_millis(step);
                core.handle_timeout(now);
            }
            3 => {
                let len = reader.len(20_000);
                let payload = String::from_utf8_lossy(reader.take(len)).into_owned();
                let templated = json!({"request_id": format!("req_{}", reader.byte() % 4), "tool_call_id": payload, "result": payload});
                let _ = core.handle_tool_result(now, sender, &payload);
                let _ = core.handle_tool_result(now, sender, &templated.to_string());
            }
            4 => {
                let len = reader.len(12_000);
                let text = String::from_utf8_lossy(reader.take(len)).into_owned();
                let message = template(reader.byte(), text);
                let _ = core.handle_data(now, sender, message.to_string().as_bytes());
            }
            5 => {
                let event = provider_event(&mut reader);
                core.handle_provider_event(now, event);
            }
            6 => {
                let identity = SENDERS[usize::from(reader.byte()) % SENDERS.len()];
                match reader.byte() % 3 {
                    0 => core.handle_peer(
                        now,
                        Peer {
                            identity: identity.into(),
                            is_agent: false,
                            active: reader.byte().is_multiple_of(2),
                            publishes_audio: true,
                        },
                    ),
                    // The last participant leaving ends the session: rarer, so programs go on.
                    1 if identity != "alice" || reader.byte().is_multiple_of(16) => {
                        core.handle_peer_left(now, identity, reader.byte().is_multiple_of(2));
                    }
                    1 => {}
                    _ => core.handle_peer(
                        now,
                        Peer { identity: identity.into(), is_agent: true, active: true, publishes_audio: true },
                    ),
                }
            }
            7 => {
                let len = reader.len(4_000);
                let pcm: Vec<i16> = reader
                    .take(len * 2)
                    .chunks(2)
                    .map(|p| i16::from_le_bytes([p[0], *p.get(1).unwrap_or(&0)]))
                    .collect();
                core.handle_user_audio(now, pcm);
            }
            _ => {
                now += Duration::from_millis(u64::from(reader.byte()));
                core.handle_timeout(now);
            }
        }
        check(&mut core, "operation");
        if core.is_finished() {
            break;
        }
    }
    steps
}

fn template(selector: u8, text: String) -> Value {
    match selector % 12 {
        0 => json!({"type": "send-text", "content": text}),
        1 => json!({"type": "send-context", "content": text}),
        2 => json!({"type": "send-image", "mime_type": "image/jpeg", "data": text, "stream_id": "cam"}),
        3 => {
            json!({"type": "tool_job_result", "job_id": text, "tool_name": "lookup_order", "status": "completed", "summary": text})
        }
        4 => json!({"type": "delegation-append", "channel": "thinking", "content": text, "delegation_id": text}),
        5 => json!({"type": "connect-timings", "mic_ms": 1, "server": {"x": text}}),
        6 => json!({"type": "mute", "muted": text.len().is_multiple_of(2)}),
        7 => json!({"type": "bind-input"}),
        8 => json!({"type": "activity-end"}),
        9 => json!({"type": "ping", "extra": text}),
        10 => json!({"type": text, "content": text}),
        _ => json!({"type": "envelope-chunk", "envelope_id": text, "seq": 0, "total": 1, "data": text}),
    }
}

fn provider_event(reader: &mut Reader<'_>) -> ProviderEvent {
    match reader.byte() % 10 {
        0 => ProviderEvent::ResponseStarted,
        1 => ProviderEvent::ResponseDone { status: ResponseStatus::Completed },
        2 => ProviderEvent::AssistantAudio { pcm: vec![1000; usize::from(reader.u16()) % 48_000], sample_rate: 24_000 },
        3 => ProviderEvent::AssistantTranscript {
            text: "words ".repeat(usize::from(reader.byte())),
            is_final: reader.byte().is_multiple_of(2),
        },
        4 => ProviderEvent::Interrupted,
        5 => {
            let name = ["lookup_order", "end_call", "examine_image", "nope"][usize::from(reader.byte()) % 4];
            let size = usize::from(reader.u16()) % 60_000;
            ProviderEvent::ToolCall {
                call_id: format!("call_{}", reader.byte() % 8),
                name: name.into(),
                arguments: json!({"blob": "x".repeat(size)}),
            }
        }
        6 => ProviderEvent::UserSpeechStarted,
        7 => ProviderEvent::UserSpeechStopped,
        8 => ProviderEvent::AssistantTruncated { heard: "heard".into() },
        _ => {
            ProviderEvent::ModelText { text: "text".into(), is_final: reader.byte().is_multiple_of(2), thought: false }
        }
    }
}

fn check(core: &mut SessionCore, when: &str) {
    let mut outputs = 0;
    while let Some(output) = core.poll_output() {
        outputs += 1;
        assert!(
            outputs <= MAX_OUTPUTS_PER_OP,
            "property violated: more than {MAX_OUTPUTS_PER_OP} outputs after one {when}"
        );
        if let Output::Data { json, .. } = output {
            assert!(
                json.len() <= MAX_DATA_PACKET_BYTES,
                "property violated: a {}-byte data packet (the room forwards at most {MAX_DATA_PACKET_BYTES})",
                json.len()
            );
            let value: Value =
                serde_json::from_str(&json).unwrap_or_else(|_| panic!("property violated: output is not JSON"));
            assert!(value.get("type").and_then(Value::as_str).is_some(), "property violated: output without a type");
        }
    }
    assert!(
        core.buffered_envelope_bytes() <= MAX_BUFFERED_BYTES,
        "property violated: {} bytes buffered in envelopes",
        core.buffered_envelope_bytes()
    );
}
