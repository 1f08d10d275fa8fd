//! Whatever an upstream sends, a codec never panics: malformed, truncated, type-confused and
//! out-of-order frames become per-turn errors or are ignored, in every link state.

mod common;

use std::time::{Duration, Instant};

use common::model;
use svc_domain::model::{
    Delegation, ProviderABlock, ProviderBBlock, ProviderBLiveBlock, ProviderBlock, ProviderCBlock,
};
use svc_http::HttpEvent;
use svc_provider::codec::{Codec, ConnectRequest, Transmit};
use svc_provider::gemini::GeminiCodec;
use svc_provider::gpt_live::{Backend, GptLiveCodec};
use svc_provider::realtime::{Dialect, RealtimeCodec};
use svc_provider_core::{ProviderInput, SessionSetup};

fn codecs() -> Vec<(&'static str, Box<dyn Codec>)> {
    let request = || ConnectRequest { url: "ws://x/".to_owned(), headers: Vec::new() };
    let backend = || Backend { url: "http://x/v1/responses".to_owned(), headers: Vec::new(), model: "m".to_owned() };
    // Short session caps, so that rotations (due, waiting for quiet, forced) happen among the
    // hostile frames too.
    let setup = |block| {
        let mut setup = SessionSetup::new(model(block), "p");
        setup.limits.rotate_after = Duration::from_secs(2);
        setup.limits.quiet_wait_max = Duration::from_secs(3);
        setup
    };
    vec![
        (
            "openai",
            Box::new(RealtimeCodec::new(
                setup(ProviderBlock::ProviderB(ProviderBBlock::default())),
                Dialect::OpenAi,
                request(),
            )),
        ),
        (
            "xai",
            Box::new(RealtimeCodec::new(
                setup(ProviderBlock::ProviderC(ProviderCBlock::default())),
                Dialect::Xai,
                request(),
            )),
        ),
        ("gemini", Box::new(GeminiCodec::new(setup(ProviderBlock::ProviderA(ProviderABlock::default())), request()))),
        (
            "gpt_live",
            Box::new(GptLiveCodec::new(
                setup(ProviderBlock::ProviderBLive(ProviderBLiveBlock {
                    delegation: Some(Delegation::Svc),
                    ..Default::default()
                })),
                request(),
                backend(),
            )),
        ),
    ]
}

/// Valid frames of every protocol, used as seeds for mutation.
const SEEDS: &[&str] = &[
    r#"{"type":"session.created","session":{"id":"s","model":"m"}}"#,
    r#"{"type":"session.updated","session":{"id":"s"}}"#,
    r#"{"type":"response.created","response":{"id":"r"}}"#,
    r#"{"type":"response.output_item.added","item":{"id":"i","type":"message"}}"#,
    r#"{"type":"response.output_audio.delta","item_id":"i","delta":"AAABAAIA"}"#,
    r#"{"type":"response.output_audio_transcript.delta","item_id":"i","delta":"hi"}"#,
    r#"{"type":"response.function_call_arguments.done","call_id":"c","name":"n","arguments":"{\"a\":1}"}"#,
    r#"{"type":"response.done","response":{"status":"completed","usage":{"input_tokens":5}}}"#,
    r#"{"type":"input_audio_buffer.speech_started","item_id":"u"}"#,
    r#"{"type":"conversation.item.input_audio_transcription.completed","item_id":"u","transcript":"yo"}"#,
    r#"{"type":"conversation.item.input_audio_transcription.updated","item_id":"u","transcript":"y"}"#,
    r#"{"type":"error","error":{"code":"session_expired","event_id":"e"}}"#,
    r#"{"setupComplete":{}}"#,
    r#"{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"AAAA"}},{"text":"t","thought":true}]},"outputTranscription":{"text":"a"},"inputTranscription":{"text":"b"},"turnComplete":true,"interrupted":true}}"#,
    r#"{"toolCall":{"functionCalls":[{"id":"f","name":"n","args":{}}]}}"#,
    r#"{"toolCallCancellation":{"ids":["f"]}}"#,
    r#"{"usageMetadata":{"promptTokenCount":3}}"#,
    r#"{"sessionResumptionUpdate":{"newHandle":"h","resumable":true,"lastConsumedClientMessageIndex":"2"}}"#,
    r#"{"goAway":{"timeLeft":"1.5s"}}"#,
    r#"{"type":"session.started","session":{"id":"l"}}"#,
    r#"{"type":"session.output_audio.delta","delta":"AAAA"}"#,
    r#"{"type":"session.input_transcript.delta","delta":"x","start_ms":5,"end_ms":1}"#,
    r#"{"type":"session.delegation.created","delegation":{"id":"d","target":"client"}}"#,
    r#"{"type":"response.event","delegation_id":"d","event":{"type":"response.output_item.done","item":{"type":"function_call","call_id":"c2","arguments":"x"}}}"#,
    r#"{"type":"session.closed","reason":"expired"}"#,
];

/// Values that break type assumptions.
const CONFUSIONS: &[&str] = &["null", "[]", "{}", "-1", "1e400", "\"\"", "true", "18446744073709551616", "\"\\u0000\""];

/// A tiny deterministic generator (no dependency, reproducible failures).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutations(rng: &mut Lcg) -> Vec<String> {
    let mut frames = Vec::new();
    for seed in SEEDS {
        frames.push((*seed).to_owned());
        // Truncations.
        for cut in [1, seed.len() / 3, seed.len() / 2, seed.len() - 1] {
            frames.push(seed[..cut.min(seed.len())].to_owned());
        }
        // Every JSON value replaced, one at a time, by a confusing one.
        let value: serde_json::Value = serde_json::from_str(seed).unwrap_or_default();
        let mut paths = Vec::new();
        collect_paths(&value, String::new(), &mut paths);
        for path in paths {
            let mut changed = value.clone();
            if let Some(slot) = changed.pointer_mut(&path) {
                *slot = serde_json::from_str(CONFUSIONS[rng.below(CONFUSIONS.len())]).unwrap_or_default();
            }
            frames.push(changed.to_string());
        }
        // Random byte flips.
        let mut bytes = seed.as_bytes().to_vec();
        for _ in 0..3 {
            let at = rng.below(bytes.len());
            bytes[at] = rng.below(256) as u8;
        }
        frames.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    frames
}

fn collect_paths(value: &serde_json::Value, prefix: String, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                let path = format!("{prefix}/{key}");
                out.push(path.clone());
                collect_paths(child, path, out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let path = format!("{prefix}/{i}");
                out.push(path.clone());
                collect_paths(child, path, out);
            }
        }
        _ => {}
    }
}

fn pump(codec: &mut dyn Codec) {
    while codec.poll_transmit().is_some() {}
    while codec.poll_event().is_some() {}
    let _ = codec.poll_timeout();
    let _ = codec.resumption_handle();
}

#[test]
fn hostile_frames_never_panic_in_any_state() {
    for seed in 0..25 {
        run_with_seed(seed);
    }
}

fn run_with_seed(seed: u64) {
    let mut rng = Lcg(0x5eed + seed);
    let frames = mutations(&mut rng);
    assert!(frames.len() > SEEDS.len() * 6, "{}", frames.len());
    for (name, mut codec) in codecs() {
        let mut now = Instant::now();
        // Before the socket opens, while configuring, and when ready (seeds drive the handshake).
        for frame in &frames {
            now += Duration::from_millis(7);
            codec.handle_upstream_message(now, frame.as_bytes());
            pump(codec.as_mut());
            if rng.below(40) == 0 {
                codec.handle_connected(now);
            }
            if rng.below(60) == 0 {
                let at = now + Duration::from_secs(rng.below(100) as u64);
                codec.handle_timeout(at);
                // A deadline at or before the time just handled would wake the driver again at
                // once, and again: a spin.
                if let Some(next) = codec.poll_timeout() {
                    assert!(next > at, "{name} (seed {seed}): a timer {:?} in the past after a timeout", at - next);
                }
            }
            if rng.below(80) == 0 {
                codec.handle_http(now, 1, HttpEvent::Data(frame.clone()));
                codec.handle_http(now, 1, HttpEvent::Done);
            }
            if rng.below(30) == 0 {
                codec.handle_input(now, ProviderInput::BargeIn { played_ms: rng.next() });
                codec.handle_input(now, ProviderInput::NativeAudio(vec![1; rng.below(2000)]));
            }
            pump(codec.as_mut());
        }
        codec.handle_upstream_closed(now, Some(1011), "RESOURCE_EXHAUSTED");
        codec.handle_input(now, ProviderInput::Close);
        let mut closes = 0;
        while let Some(transmit) = codec.poll_transmit() {
            closes += usize::from(transmit == Transmit::Close);
        }
        assert!(closes <= 1, "{name} (seed {seed}): at most one close");
        while codec.poll_event().is_some() {}
        assert!(codec.is_closed(), "{name} (seed {seed}) ends closed");
    }
}
