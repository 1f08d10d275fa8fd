//! `svc-bench-adapter`: CPU cost of the provider adapters per 20 ms audio frame, both directions,
//! through the real codecs with no IO (sans-IO cores driven directly):
//!
//! - **in** (room → upstream): one 20 ms frame of user audio at the provider's input rate (as the
//!   runtime decodes it: 16 kHz for Gemini, 24 kHz for the others) through
//!   `handle_input(NativeAudio)` and `poll_transmit` — PCM16 LE, base64, JSON frame.
//! - **out** (upstream → room): one upstream frame carrying 20 ms of 24 kHz audio through
//!   `handle_upstream_message` and `poll_event` — JSON parse, base64 decode, PCM event.
//!
//! Baselines measured in the same run: PCM16 LE + base64 encoding of the frame alone (in) and
//! base64 decoding alone (out), i.e. the irreducible work, so the ratio is the price of
//! everything else. Markdown on stdout.

use std::hint::black_box;
use std::time::Instant;

use base64::Engine as _;
use clap::Parser;
use svc_domain::model::{
    ModelCatalog, ModelChoice, ProviderABlock, ProviderBBlock, ProviderBLiveBlock, ProviderBlock, ProviderCBlock,
    resolve_model,
};
use svc_provider::codec::{Codec, ConnectRequest, encode_pcm};
use svc_provider::gemini::GeminiCodec;
use svc_provider::gpt_live::{Backend, GptLiveCodec};
use svc_provider::realtime::{Dialect, RealtimeCodec};
use svc_provider_core::{ProviderInput, SessionSetup};

/// Adapter cost per 20 ms frame.
#[derive(Debug, Parser)]
#[command(name = "svc-bench-adapter", version)]
struct Args {
    /// Frames per measured batch.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Measured batches per case.
    #[arg(long, default_value_t = 50)]
    batches: usize,
}

fn setup(block: ProviderBlock) -> SessionSetup {
    let model = resolve_model(ModelCatalog::embedded(), Some(&ModelChoice::Block(block)), None)
        .unwrap_or_else(|error| panic!("model: {error:?}"));
    SessionSetup::new(model, "You are a benchmark.")
}

fn request() -> ConnectRequest {
    ConnectRequest { url: "ws://127.0.0.1:1/".to_owned(), headers: Vec::new() }
}

/// A codec past its handshake, ready for audio.
fn ready_codec(name: &str, now: Instant) -> Box<dyn Codec> {
    let mut codec: Box<dyn Codec> = match name {
        "openai" => Box::new(RealtimeCodec::new(
            setup(ProviderBlock::ProviderB(ProviderBBlock::default())),
            Dialect::OpenAi,
            request(),
        )),
        "xai" => Box::new(RealtimeCodec::new(
            setup(ProviderBlock::ProviderC(ProviderCBlock::default())),
            Dialect::Xai,
            request(),
        )),
        "gemini" => Box::new(GeminiCodec::new(setup(ProviderBlock::ProviderA(ProviderABlock::default())), request())),
        _ => Box::new(GptLiveCodec::new(
            setup(ProviderBlock::ProviderBLive(ProviderBLiveBlock::default())),
            request(),
            Backend { url: "http://127.0.0.1:1/v1/responses".to_owned(), headers: Vec::new(), model: "m".to_owned() },
        )),
    };
    codec.handle_connected(now);
    let handshake: &[&str] = match name {
        "openai" | "xai" => &[
            r#"{"type":"session.created","session":{"id":"s","model":"grok-voice-3.0"}}"#,
            r#"{"type":"session.updated","session":{"id":"s"}}"#,
        ],
        "gemini" => &[r#"{"setupComplete":{}}"#],
        _ => &[r#"{"type":"session.started","session":{"id":"s"}}"#],
    };
    for message in handshake {
        codec.handle_upstream_message(now, message.as_bytes());
    }
    while codec.poll_transmit().is_some() {}
    while codec.poll_event().is_some() {}
    codec
}

/// 20 ms of 24 kHz output audio in each protocol's frame.
fn output_frame(name: &str) -> String {
    let pcm: Vec<i16> = (0..480).map(|i| ((i as f64 * 0.13).sin() * 8000.0) as i16).collect();
    let data = encode_pcm(&pcm);
    match name {
        "openai" | "xai" => format!(
            r#"{{"type":"response.output_audio.delta","event_id":"event_1","response_id":"resp_1","item_id":"item_1","output_index":0,"content_index":0,"delta":"{data}"}}"#
        ),
        "gemini" => format!(
            r#"{{"serverContent":{{"modelTurn":{{"parts":[{{"inlineData":{{"mimeType":"audio/pcm;rate=24000","data":"{data}"}}}}]}}}}}}"#
        ),
        _ => format!(r#"{{"type":"session.output_audio.delta","delta":"{data}"}}"#),
    }
}

struct Stats {
    /// ns per frame, per batch, sorted.
    per_frame_ns: Vec<f64>,
}

impl Stats {
    fn p50(&self) -> f64 {
        self.per_frame_ns[self.per_frame_ns.len() / 2]
    }
    fn p99(&self) -> f64 {
        let i = ((self.per_frame_ns.len() as f64) * 0.99).ceil() as usize;
        self.per_frame_ns[i.saturating_sub(1).min(self.per_frame_ns.len() - 1)]
    }
}

fn measure(args: &Args, mut frame: impl FnMut()) -> Stats {
    for _ in 0..args.batch {
        frame(); // warm-up
    }
    let mut per_frame_ns = Vec::with_capacity(args.batches);
    for _ in 0..args.batches {
        let start = Instant::now();
        for _ in 0..args.batch {
            frame();
        }
        per_frame_ns.push(start.elapsed().as_nanos() as f64 / args.batch as f64);
    }
    per_frame_ns.sort_by(f64::total_cmp);
    Stats { per_frame_ns }
}

fn main() {
    let args = Args::parse();
    // 20 ms of user audio at each input rate.
    let frame_at =
        |rate_hz: usize| -> Vec<i16> { (0..rate_hz / 50).map(|i| ((i as f64 * 0.07).sin() * 9000.0) as i16).collect() };
    let (frame16, frame24) = (frame_at(16_000), frame_at(24_000));
    let now = Instant::now();
    println!("# Adapter cost per 20 ms frame\n");
    println!(
        "- Command: `cargo run --release -p svc-bench --bin svc-bench-adapter -- --batch {} --batches {}`",
        args.batch, args.batches
    );
    println!("- Machine: nproc {}", std::thread::available_parallelism().map_or(0, usize::from));
    println!(
        "- Each figure: median (and p99) over {} batches of {} frames, ns per frame, one thread.\n",
        args.batches, args.batch
    );

    // Baselines.
    let encode16 = measure(&args, || {
        black_box(encode_pcm(black_box(&frame16)));
    });
    let encode24 = measure(&args, || {
        black_box(encode_pcm(black_box(&frame24)));
    });
    let b64 = encode_pcm(&vec![1234i16; 480]);
    let decode = measure(&args, || {
        black_box(
            base64::engine::general_purpose::STANDARD.decode(black_box(b64.as_bytes())).map(|v| v.len()).unwrap_or(0),
        );
    });

    println!("| codec | direction | ns/frame p50 | p99 | µs/frame | baseline | baseline ns | ratio |");
    println!("|---|---|--:|--:|--:|---|--:|--:|");
    let mut worst_us: f64 = 0.0;
    for name in ["openai", "xai", "gemini", "gpt_live"] {
        let mut codec = ready_codec(name, now);
        let frame = if name == "gemini" { frame16.clone() } else { frame24.clone() };
        let input = measure(&args, || {
            codec.handle_input(now, ProviderInput::NativeAudio(frame.clone()));
            while let Some(transmit) = codec.poll_transmit() {
                black_box(transmit);
            }
        });
        let baseline = if name == "gemini" { &encode16 } else { &encode24 };
        let base_name = if name == "gemini" { "base64 encode 16 kHz" } else { "base64 encode 24 kHz" };
        println!(
            "| {name} | in (room → upstream) | {:.0} | {:.0} | {:.2} | {base_name} | {:.0} | {:.1}× |",
            input.p50(),
            input.p99(),
            input.p50() / 1000.0,
            baseline.p50(),
            input.p50() / baseline.p50()
        );
        worst_us = worst_us.max(input.p50() / 1000.0);
        let message = output_frame(name);
        let mut codec = ready_codec(name, now);
        let output = measure(&args, || {
            codec.handle_upstream_message(now, black_box(message.as_bytes()));
            while let Some(event) = codec.poll_event() {
                black_box(event);
            }
            while codec.poll_transmit().is_some() {}
        });
        println!(
            "| {name} | out (upstream → room) | {:.0} | {:.0} | {:.2} | base64 decode | {:.0} | {:.1}× |",
            output.p50(),
            output.p99(),
            output.p50() / 1000.0,
            decode.p50(),
            output.p50() / decode.p50()
        );
        worst_us = worst_us.max(output.p50() / 1000.0);
    }
    println!("\nWorst median: {worst_us:.2} µs per 20 ms frame (target ≤ 50 µs).");
}
