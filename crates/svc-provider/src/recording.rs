//! The replay format: the raw upstream exchange of one adapter, as JSON Lines.
//!
//! `svc provider check --record FILE` writes one, so a user with a real key can send a recording
//! that reproduces a problem, and [`crate::replay`] feeds it back into a codec in virtual time.
//! The conformance harness's recordings ship as test fixtures.
//!
//! ```text
//! {"format":"svc-provider-recording","version":1,"provider":"provider_a","model":"gemini-3.8-live","family":"gemini"}
//! {"t_ms":0,"event":"connect","url":"wss://…/BidiGenerateContent"}       headers (keys) never recorded
//! {"t_ms":41,"event":"connected"}
//! {"t_ms":41,"dir":"out","frame":"text","json":{"setup":{…}}}              what svc sent
//! {"t_ms":97,"dir":"in","frame":"binary","json":{"setupComplete":{}}}     what the upstream sent
//! {"t_ms":98,"input":{"kind":"text","text":"Say hello."}}                 what the runtime asked
//! {"t_ms":812,"dir":"in","frame":"close","code":1000,"reason":""}
//! {"t_ms":812,"event":"report",…}                                         the check's verdict
//! ```
//!
//! Audio and images are summarized, not kept: a base64 string of more than
//! [`SUMMARY_MIN_CHARS`] characters becomes `"<base64 bytes=N rms=R>"` (R: the RMS of the bytes
//! read as PCM16), input audio becomes its sample count and RMS. [`expand`] turns a summary back
//! into that many bytes of a tone at that level, which is what a replay needs (lengths and
//! timing), not what was said. A frame that is not JSON keeps its first bytes as `raw`.
//! `t_ms` counts from the first line. Nothing here does IO: the caller writes [`Recorder::lines`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};
use svc_provider_core::{AppendChannel, ProviderInput, Scheduling};

use crate::codec::{ConnectFailure, Transmit, decode_base64};

/// The first line's `format`.
pub const FORMAT: &str = "svc-provider-recording";
/// The format's version.
pub const VERSION: u64 = 1;
/// Base64 strings at least this long are summarized (audio, images; never a sentence: text has
/// spaces, base64 has none).
pub const SUMMARY_MIN_CHARS: usize = 256;
/// Most lines one recording keeps (about 45 minutes of 20 ms audio both ways); later lines are
/// dropped and the last line says how many.
pub const MAX_LINES: usize = 200_000;
/// Bytes of a non-JSON frame kept.
const RAW_BYTES_KEPT: usize = 200;

/// Collects one adapter's exchange; cheap to clone (the driver and the caller share it).
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    origin: Option<Instant>,
    lines: Vec<Value>,
    dropped: u64,
}

impl Recorder {
    /// A recording of `provider`'s `model` (family as in the catalog).
    pub fn new(provider: &str, model: &str, family: &str) -> Recorder {
        let header =
            json!({"format": FORMAT, "version": VERSION, "provider": provider, "model": model, "family": family});
        Recorder { inner: Arc::new(Mutex::new(Inner { origin: None, lines: vec![header], dropped: 0 })) }
    }

    fn push(&self, now: Instant, line: Map<String, Value>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let origin = *inner.origin.get_or_insert(now);
        let ms = u64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX);
        if inner.lines.len() >= MAX_LINES {
            inner.dropped += 1;
            return;
        }
        // `t_ms` first, for the reader's eye (where the map keeps insertion order).
        let mut ordered = Map::new();
        ordered.insert("t_ms".to_owned(), json!(ms));
        for (key, value) in line {
            if key != "t_ms" {
                ordered.insert(key, value);
            }
        }
        inner.lines.push(Value::Object(ordered));
    }

    fn event(&self, now: Instant, fields: Value) {
        if let Value::Object(map) = fields {
            self.push(now, map);
        }
    }

    /// The codec asked for a transmit (a frame out, a new socket, a close).
    pub fn transmit(&self, now: Instant, transmit: &Transmit) {
        match transmit {
            Transmit::Text(text) => self.frame(now, "out", "text", text.as_bytes()),
            Transmit::Connect(request) => {
                self.event(now, json!({"event": "connect", "url": redact_url(&request.url)}));
            }
            Transmit::Close => self.event(now, json!({"event": "close"})),
            Transmit::Http(request) => self.event(now, json!({"event": "http", "url": redact_url(&request.url)})),
        }
    }

    /// A message arrived (`frame`: `text` or `binary`).
    pub fn received(&self, now: Instant, frame: &str, payload: &[u8]) {
        self.frame(now, "in", frame, payload);
    }

    fn frame(&self, now: Instant, dir: &str, frame: &str, payload: &[u8]) {
        let line = match serde_json::from_slice::<Value>(payload) {
            Ok(message) => json!({"dir": dir, "frame": frame, "json": summarize(message)}),
            Err(_) => {
                let kept = &payload[..payload.len().min(RAW_BYTES_KEPT)];
                json!({"dir": dir, "frame": frame, "raw": String::from_utf8_lossy(kept), "bytes": payload.len()})
            }
        };
        self.event(now, line);
    }

    /// The socket opened.
    pub fn connected(&self, now: Instant) {
        self.event(now, json!({"event": "connected"}));
    }

    /// Opening the socket failed.
    pub fn connect_failed(&self, now: Instant, failure: &ConnectFailure) {
        self.event(now, json!({"event": "connect_failed", "status": failure.status, "message": failure.message}));
    }

    /// The socket closed: a close frame (`code` as sent) or an error / end of stream.
    pub fn closed(&self, now: Instant, code: Option<u16>, reason: &str, close_frame: bool) {
        let line = if close_frame {
            json!({"dir": "in", "frame": "close", "code": code, "reason": reason})
        } else {
            json!({"event": "closed", "code": code, "reason": reason})
        };
        self.event(now, line);
    }

    /// The runtime's input to the adapter.
    pub fn input(&self, now: Instant, input: &ProviderInput) {
        self.event(now, json!({"input": describe_input(input)}));
    }

    /// Any other line (the check's verdict: `{"event": "report", …}`).
    pub fn note(&self, now: Instant, fields: Value) {
        self.event(now, fields);
    }

    /// The recording as JSON Lines (one object per line, each ending in `\n`).
    pub fn lines(&self) -> String {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut text = String::new();
        for line in &inner.lines {
            text.push_str(&line.to_string());
            text.push('\n');
        }
        if inner.dropped > 0 {
            text.push_str(&json!({"event": "truncated", "dropped_lines": inner.dropped}).to_string());
            text.push('\n');
        }
        text
    }
}

/// The URL without its query's values (a key may travel as `?key=`).
fn redact_url(url: &str) -> String {
    match url.split_once('?') {
        Some((path, query)) => {
            let names: Vec<String> =
                query.split('&').map(|pair| format!("{}=…", pair.split('=').next().unwrap_or(""))).collect();
            format!("{path}?{}", names.join("&"))
        }
        None => url.to_owned(),
    }
}

/// `message` with every long base64 string replaced by its summary.
pub fn summarize(message: Value) -> Value {
    match message {
        Value::String(text) if text.len() >= SUMMARY_MIN_CHARS => match decode_base64(&text) {
            Some(bytes) => Value::String(format!("<base64 bytes={} rms={}>", bytes.len(), rms_of_bytes(&bytes))),
            None => Value::String(text),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(summarize).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, summarize(v))).collect()),
        other => other,
    }
}

/// `message` with every summary turned back into base64 of that many bytes (a tone at that
/// RMS, PCM16 little-endian).
pub fn expand(message: Value) -> Value {
    match message {
        Value::String(text) => match parse_summary(&text) {
            Some((bytes, rms)) => Value::String(B64.encode(tone_bytes(bytes, rms))),
            None => Value::String(text),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(expand).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, expand(v))).collect()),
        other => other,
    }
}

fn parse_summary(text: &str) -> Option<(usize, u32)> {
    let inner = text.strip_prefix("<base64 bytes=")?.strip_suffix('>')?;
    let (bytes, rms) = inner.split_once(" rms=")?;
    Some((bytes.parse().ok()?, rms.parse().ok()?))
}

fn rms_of_bytes(bytes: &[u8]) -> u32 {
    let samples: Vec<i16> = bytes.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]])).collect();
    rms(&samples)
}

fn rms(samples: &[i16]) -> u32 {
    if samples.is_empty() {
        return 0;
    }
    let sum: f64 = samples.iter().map(|s| f64::from(*s) * f64::from(*s)).sum();
    (sum / samples.len() as f64).sqrt().round() as u32
}

/// `count` samples of a 440 Hz tone at 48 kHz whose RMS is `level`.
pub fn tone(count: usize, level: u32) -> Vec<i16> {
    let amplitude = (f64::from(level) * std::f64::consts::SQRT_2).min(f64::from(i16::MAX));
    (0..count)
        .map(|i| (amplitude * (i as f64 * 2.0 * std::f64::consts::PI * 440.0 / 48_000.0).sin()).round() as i16)
        .collect()
}

fn tone_bytes(bytes: usize, level: u32) -> Vec<u8> {
    let mut out: Vec<u8> = tone(bytes / 2, level).iter().flat_map(|s| s.to_le_bytes()).collect();
    out.resize(bytes, 0);
    out
}

fn scheduling_name(scheduling: Scheduling) -> &'static str {
    scheduling.gemini()
}

fn channel_name(channel: AppendChannel) -> &'static str {
    match channel {
        AppendChannel::Thinking => "thinking",
        AppendChannel::Commentary => "commentary",
        AppendChannel::Instructions => "instructions",
    }
}

/// One input as a recording line's `input` object.
pub fn describe_input(input: &ProviderInput) -> Value {
    match input {
        ProviderInput::NativeAudio(pcm) => json!({"kind": "native_audio", "samples": pcm.len(), "rms": rms(pcm)}),
        ProviderInput::Text(text) => json!({"kind": "text", "text": text}),
        ProviderInput::Context(text) => json!({"kind": "context", "text": text}),
        ProviderInput::Note { text, respond } => json!({"kind": "note", "text": text, "respond": respond}),
        ProviderInput::Image { mime, data } => json!({"kind": "image", "mime": mime, "bytes": data.len()}),
        ProviderInput::ActivityStart => json!({"kind": "activity_start"}),
        ProviderInput::ActivityEnd => json!({"kind": "activity_end"}),
        ProviderInput::ToolResult { call_id, output, is_error, scheduling } => json!({
            "kind": "tool_result", "call_id": call_id, "output": output, "is_error": is_error,
            "scheduling": scheduling.map(scheduling_name),
        }),
        ProviderInput::DelegationAppend { delegation_id, channel, content } => json!({
            "kind": "delegation_append", "delegation_id": delegation_id, "channel": channel_name(*channel),
            "content": content,
        }),
        ProviderInput::BargeIn { played_ms } => json!({"kind": "barge_in", "played_ms": played_ms}),
        ProviderInput::Greeting(text) => json!({"kind": "greeting", "text": text}),
        ProviderInput::Mute(muted) => json!({"kind": "mute", "muted": muted}),
        ProviderInput::Close => json!({"kind": "close"}),
    }
}

/// The input a recording line's `input` object describes (audio as a tone of that length and
/// level); `None` for an object this version does not know (and for the 48 kHz `audio` lines of
/// recordings made when adapters still resampled room audio).
pub fn input_from(description: &Value) -> Option<ProviderInput> {
    let text = |key: &str| description.get(key).and_then(Value::as_str).map(str::to_owned);
    let samples = || {
        let count = usize::try_from(description.get("samples")?.as_u64()?).ok()?;
        let level = u32::try_from(description.get("rms").and_then(Value::as_u64).unwrap_or(0)).unwrap_or(0);
        Some(tone(count, level))
    };
    Some(match description.get("kind")?.as_str()? {
        "native_audio" => ProviderInput::NativeAudio(samples()?),
        "text" => ProviderInput::Text(text("text")?),
        "context" => ProviderInput::Context(text("text")?),
        "note" => ProviderInput::Note {
            text: text("text")?,
            respond: description.get("respond").and_then(Value::as_bool).unwrap_or(false),
        },
        "image" => ProviderInput::Image {
            mime: text("mime")?,
            data: vec![0; usize::try_from(description.get("bytes")?.as_u64()?).ok()?],
        },
        "activity_start" => ProviderInput::ActivityStart,
        "activity_end" => ProviderInput::ActivityEnd,
        "tool_result" => ProviderInput::ToolResult {
            call_id: text("call_id")?,
            output: description.get("output").cloned().unwrap_or(Value::Null),
            is_error: description.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            scheduling: match description.get("scheduling").and_then(Value::as_str) {
                Some("WHEN_IDLE") => Some(Scheduling::WhenIdle),
                Some("SILENT") => Some(Scheduling::Silent),
                Some("INTERRUPT") => Some(Scheduling::Interrupt),
                _ => None,
            },
        },
        "delegation_append" => ProviderInput::DelegationAppend {
            delegation_id: text("delegation_id"),
            channel: match description.get("channel")?.as_str()? {
                "thinking" => AppendChannel::Thinking,
                "commentary" => AppendChannel::Commentary,
                _ => AppendChannel::Instructions,
            },
            content: text("content")?,
        },
        "barge_in" => ProviderInput::BargeIn { played_ms: description.get("played_ms")?.as_u64()? },
        "greeting" => ProviderInput::Greeting(text("text")?),
        "mute" => ProviderInput::Mute(description.get("muted")?.as_bool()?),
        "close" => ProviderInput::Close,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_is_summarized_and_expands_to_the_same_length_and_level() {
        let pcm: Vec<u8> = tone(4800, 3000).iter().flat_map(|s| s.to_le_bytes()).collect();
        let message = json!({"serverContent": {"modelTurn": {"parts": [{"inlineData": {
            "mimeType": "audio/pcm;rate=24000", "data": B64.encode(&pcm)}}]}}});
        let summary = summarize(message);
        let data = summary.pointer("/serverContent/modelTurn/parts/0/inlineData/data").and_then(Value::as_str);
        assert_eq!(data, Some("<base64 bytes=9600 rms=3000>"));
        let expanded = expand(summary);
        let back = expanded.pointer("/serverContent/modelTurn/parts/0/inlineData/data").and_then(Value::as_str);
        let bytes = B64.decode(back.expect("data")).expect("base64");
        assert_eq!(bytes.len(), 9600);
        assert!(rms_of_bytes(&bytes).abs_diff(3000) <= 30, "{}", rms_of_bytes(&bytes));
        // Sentences are never mistaken for base64.
        let text = "word ".repeat(100);
        assert_eq!(summarize(json!({"text": text.as_str()})), json!({"text": text}));
    }

    #[test]
    fn every_input_round_trips_through_its_description() {
        let inputs = [
            ProviderInput::Text("hi".to_owned()),
            ProviderInput::Context("c".to_owned()),
            ProviderInput::Note { text: "n".to_owned(), respond: true },
            ProviderInput::ActivityStart,
            ProviderInput::ActivityEnd,
            ProviderInput::ToolResult {
                call_id: "c1".to_owned(),
                output: json!({"a": 1}),
                is_error: false,
                scheduling: Some(Scheduling::Silent),
            },
            ProviderInput::DelegationAppend {
                delegation_id: Some("d".to_owned()),
                channel: AppendChannel::Commentary,
                content: "x".to_owned(),
            },
            ProviderInput::BargeIn { played_ms: 420 },
            ProviderInput::Greeting("g".to_owned()),
            ProviderInput::Mute(true),
            ProviderInput::Close,
        ];
        for input in inputs {
            assert_eq!(input_from(&describe_input(&input)).as_ref(), Some(&input));
        }
        let audio = input_from(&describe_input(&ProviderInput::NativeAudio(tone(960, 1200)))).expect("audio");
        assert!(matches!(audio, ProviderInput::NativeAudio(pcm) if pcm.len() == 960 && rms(&pcm).abs_diff(1200) <= 12));
        // Recordings made before audio went to adapters only at their own rate carry 48 kHz
        // `audio` lines: a replay skips them rather than play them at the wrong rate.
        assert_eq!(input_from(&json!({"kind": "audio", "samples": 960, "rms": 10})), None);
    }

    #[test]
    fn lines_start_with_the_header_and_never_carry_the_key() {
        let recorder = Recorder::new("provider_c", "grok-voice-3.0", "xai");
        let t0 = Instant::now();
        recorder.transmit(
            t0,
            &Transmit::Connect(crate::codec::ConnectRequest {
                url: "wss://api.x.ai/v1/realtime?model=grok&key=secret".to_owned(),
                headers: vec![("Authorization".to_owned(), "Bearer secret".to_owned())],
            }),
        );
        recorder.received(t0 + std::time::Duration::from_millis(7), "binary", b"not json");
        let text = recorder.lines();
        assert!(!text.contains("secret"), "{text}");
        let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
        assert_eq!(lines[0]["format"], FORMAT);
        assert_eq!(lines[2], json!({"t_ms": 7, "dir": "in", "frame": "binary", "raw": "not json", "bytes": 8}));
    }
}
