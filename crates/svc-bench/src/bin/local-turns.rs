//! `local-turns`: the local provider's reply latency, from the end of the user's speech to the
//! first reply audio, over many spoken turns at 1 and more concurrent sessions.
//!
//! Each session is the real pipeline (`svc_local::start`: svc_vad's detector, Whisper base,
//! SmolLM2-135M, espeak-ng) fed like the runtime feeds it: 16 kHz audio in 20 ms frames at real
//! time. A turn is one question spoken by espeak-ng, then silence until the reply is done. Per
//! turn, on one clock, from the last sample of speech sent:
//!
//! - **end of turn**: until `UserSpeechStopped` (the detector's silence, `silence_duration_ms`);
//! - **STT**: then until the final user transcript;
//! - **LLM first sentence**: then until the first sentence was written (first reply audio minus
//!   its synthesis time, which is measured again for that sentence alone);
//! - **TTS first audio**: that synthesis time;
//! - **total**: the last sample of speech → the first `AssistantAudio`.
//!
//! With `preemptive_generation` (on by default; `--preemptive false` turns it off) STT and the
//! reply start during the end-of-turn silence, so the STT and LLM columns show only what is left
//! of them once the turn has ended; with it off they are each stage's whole time.
//!
//! Usage: `cargo run --release -p svc-bench --bin local-turns -- [--turns 20] [--sessions 1,2,3]`
//! with the models installed (`svc models install`; `SVC_LOCAL_MODELS` or
//! `./target/local-models`). The report is Markdown on stdout; progress goes to stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use svc_domain::model::{ModelCatalog, resolve_model};
use svc_local::tts::{self, Voice};
use svc_local::{Brain, LocalConfig, LocalEngines, ModelsDir};
use svc_provider::api::{ProviderEvent, ProviderInput, SessionSetup};
use tokio_util::sync::CancellationToken;

/// Questions a user might ask; each session cycles through them from its own offset.
const QUESTIONS: [&str; 12] = [
    "What is the capital of France?",
    "Can you recommend a good book?",
    "How is the weather today?",
    "What time does the store open?",
    "Tell me a fun fact about the ocean.",
    "How do I make a cup of tea?",
    "What is your favorite color?",
    "Where should I go on holiday?",
    "How many legs does a spider have?",
    "What should I cook for dinner tonight?",
    "Why is the sky blue?",
    "Can you help me plan my day?",
];

#[derive(Debug, Parser)]
struct Args {
    /// Turns per session.
    #[arg(long, default_value_t = 20)]
    turns: usize,
    /// Concurrent sessions to measure, comma-separated.
    #[arg(long, default_value = "1,2,3", value_delimiter = ',')]
    sessions: Vec<usize>,
    /// The end-of-turn silence (`silence_duration_ms`).
    #[arg(long, default_value_t = 600)]
    silence_ms: u32,
    /// `preemptive_generation`: prepare the reply during the end-of-turn silence.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    preemptive: bool,
}

/// One measured turn, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Turn {
    end_of_turn: f64,
    stt: f64,
    llm: f64,
    tts: f64,
    total: f64,
}

fn models() -> ModelsDir {
    ModelsDir::new(
        std::env::var_os("SVC_LOCAL_MODELS").map_or_else(|| PathBuf::from("target/local-models"), PathBuf::from),
    )
}

fn setup(silence_ms: u32, preemptive: bool) -> anyhow::Result<SessionSetup> {
    let block = serde_json::json!({
        "provider": "provider_local",
        "silence_duration_ms": silence_ms,
        "preemptive_generation": preemptive,
    });
    let mut issues = svc_domain::parse::Issues::default();
    let choice = svc_domain::model::parse_model(&block, &svc_domain::parse::body(), &mut issues)
        .context("a provider_local block")?;
    let model = resolve_model(ModelCatalog::embedded(), Some(&choice), None).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(SessionSetup::new(model, "You are a friendly and helpful assistant."))
}

/// espeak-ng's voice at 16 kHz, without its leading and trailing silence (so that the clock
/// starts at the end of the voice itself).
fn speech(text: &str) -> anyhow::Result<Vec<i16>> {
    let voice = Voice { name: "en-us".to_owned(), words_per_minute: 165 };
    let (pcm, rate) = tts::speak_native(text, &voice)?;
    let pcm = tts::resample(&pcm, rate, 16_000);
    let voiced = |sample: &i16| sample.unsigned_abs() > 300;
    let first = pcm.iter().position(voiced).unwrap_or(0);
    let last = pcm.iter().rposition(voiced).map_or(pcm.len(), |at| at + 1);
    Ok(pcm[first..last].to_vec())
}

async fn run_session(
    engines: Arc<LocalEngines>,
    index: usize,
    turns: usize,
    silence_ms: u32,
    preemptive: bool,
) -> anyhow::Result<Vec<Turn>> {
    let mut session = svc_local::start(&setup(silence_ms, preemptive)?, &engines, CancellationToken::new())?;
    loop {
        match session.events.recv().await {
            Some(ProviderEvent::Ready { .. }) => break,
            Some(_) => {}
            None => bail!("the session closed before it was ready"),
        }
    }
    // Spread the sessions' speech over the first seconds.
    tokio::time::sleep(Duration::from_millis(700 * index as u64)).await;
    let mut measured = Vec::new();
    let mut output_tokens = 0;
    let mut frames = tokio::time::interval(Duration::from_millis(20));
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    for turn in 0..turns {
        let question = QUESTIONS[(index * 5 + turn) % QUESTIONS.len()];
        let pcm = speech(question)?;
        for chunk in pcm.chunks(320) {
            frames.tick().await;
            session.input.send(ProviderInput::NativeAudio(chunk.to_vec())).await?;
        }
        let speech_end = Instant::now();
        let (mut stopped, mut transcribed, mut first_audio, mut first_sentence) = (None, None, None, None);
        let tokens_before = output_tokens;
        let mut reply = String::new();
        // Silence until the reply is done, fed at real time like a muted-but-open microphone.
        let silence = vec![0i16; 320];
        let deadline = speech_end + Duration::from_secs(60);
        loop {
            tokio::select! {
                _ = frames.tick() => {
                    if Instant::now() > deadline { bail!("no reply within a minute"); }
                    session.input.send(ProviderInput::NativeAudio(silence.clone())).await?;
                }
                event = session.events.recv() => match event {
                    Some(ProviderEvent::UserSpeechStopped) => stopped = stopped.or(Some(Instant::now())),
                    Some(ProviderEvent::UserTranscript { is_final: true, .. }) => transcribed = Some(Instant::now()),
                    Some(ProviderEvent::AssistantTranscript { text, is_final: false }) if first_sentence.is_none() => {
                        first_sentence = Some(text);
                    }
                    Some(ProviderEvent::AssistantAudio { .. }) => first_audio = first_audio.or(Some(Instant::now())),
                    Some(ProviderEvent::Usage(usage)) => output_tokens = usage.output_text_tokens,
                    Some(ProviderEvent::AssistantTranscript { text, is_final: true }) => reply = text,
                    Some(ProviderEvent::ResponseDone { .. }) if first_audio.is_some() => break,
                    Some(ProviderEvent::Closed { reason }) | Some(ProviderEvent::Error(svc_provider::api::ProviderError { message: reason, fatal: true, .. })) => bail!("the session ended: {reason}"),
                    None => bail!("the session ended"),
                    Some(_) => {}
                }
            }
        }
        let (Some(stopped), Some(transcribed), Some(first_audio), Some(sentence)) =
            (stopped, transcribed, first_audio, first_sentence)
        else {
            bail!("turn {turn}: an event is missing");
        };
        let synth = Instant::now();
        tts::speak(&sentence, &Voice::named("en-us"))?;
        let tts_ms = synth.elapsed().as_secs_f64() * 1000.0;
        let ms = |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64() * 1000.0;
        let llm_and_tts = ms(transcribed, first_audio);
        measured.push(Turn {
            end_of_turn: ms(speech_end, stopped),
            stt: ms(stopped, transcribed),
            llm: (llm_and_tts - tts_ms).max(0.0),
            tts: tts_ms,
            total: ms(speech_end, first_audio),
        });
        eprintln!(
            "session {index} turn {turn}: {:.0} ms ({question:?} → {reply:?}, {} tokens)",
            ms(speech_end, first_audio),
            output_tokens - tokens_before
        );
        // A pause before the next question.
        for _ in 0..25 {
            frames.tick().await;
            session.input.send(ProviderInput::NativeAudio(silence.clone())).await?;
        }
    }
    session.input.send(ProviderInput::Close).await?;
    Ok(measured)
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(rank).copied().unwrap_or(f64::NAN)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let models = models();
    models.check()?;
    if !tts::available() {
        bail!("espeak-ng is not installed");
    }
    let max = args.sessions.iter().copied().max().unwrap_or(1);
    let engines = LocalEngines::new(LocalConfig { models, brain: Brain::Embedded, capacity: max });
    let loading = engines.clone();
    let started = Instant::now();
    tokio::task::spawn_blocking(move || loading.warm()).await?.map_err(anyhow::Error::msg)?;
    eprintln!("models loaded in {:.2} s", started.elapsed().as_secs_f64());
    println!(
        "| sessions | turns | end of turn p50 | STT p50 / p95 | LLM first sentence p50 / p95 | TTS first audio p50 / p95 | total p50 / p95 | processing (total − end of turn) p50 / p95 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &n in &args.sessions {
        let mut tasks = Vec::new();
        for index in 0..n {
            tasks.push(tokio::spawn(run_session(engines.clone(), index, args.turns, args.silence_ms, args.preemptive)));
        }
        let mut turns = Vec::new();
        for task in tasks {
            turns.extend(task.await??);
        }
        let column = |f: fn(&Turn) -> f64| turns.iter().map(f).collect::<Vec<f64>>();
        let (mut eot, mut stt, mut llm, mut tts_ms, mut total) =
            (column(|t| t.end_of_turn), column(|t| t.stt), column(|t| t.llm), column(|t| t.tts), column(|t| t.total));
        let mut processing: Vec<f64> = turns.iter().map(|t| t.total - t.end_of_turn).collect();
        println!(
            "| {n} | {} | {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms |",
            turns.len(),
            percentile(&mut eot, 0.5),
            percentile(&mut stt, 0.5),
            percentile(&mut stt, 0.95),
            percentile(&mut llm, 0.5),
            percentile(&mut llm, 0.95),
            percentile(&mut tts_ms, 0.5),
            percentile(&mut tts_ms, 0.95),
            percentile(&mut total, 0.5),
            percentile(&mut total, 0.95),
            percentile(&mut processing, 0.5),
            percentile(&mut processing, 0.95),
        );
    }
    Ok(())
}
