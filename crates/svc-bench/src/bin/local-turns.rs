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
//! Beside latency, per configuration: the word error rate of the user transcripts (the questions
//! are spoken by espeak-ng in two voices, `en-us` and `en-gb`, at 150–175 words per minute), the
//! words per reply, the share of replies in English (a reply counts as English when at least 15 %
//! of its words are among the most common English function words — a crude check, but French or
//! Spanish replies score near 0), and the total latency per turn index (p50 / p95 over the
//! sessions and `--repeats`), so that growth over a conversation shows. `--hog` runs a thread
//! that spins on one core beside the sessions (other work on the machine).
//!
//! The sessions run the pipeline in-process (`svc_local::start`, as the runtime does), not through
//! the room: the room adds Opus coding and pacing, a few milliseconds (see the room benchmarks).
//!
//! Usage: `cargo run --release -p svc-bench --bin local-turns -- [--turns 12] [--sessions 1,2]
//! [--repeats 1] [--hog] [--threads N]` with the models installed (`svc models install`;
//! `SVC_LOCAL_MODELS` or `./target/local-models`). The report is Markdown on stdout; progress
//! goes to stderr.

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

/// Everyday English requests, none naming another country or language (the small model
/// answered a question about France in French for the rest of the conversation); each session
/// cycles through them from its own offset.
const QUESTIONS: [&str; 12] = [
    "Can you recommend a good book for the weekend?",
    "How do I make a cup of tea?",
    "What should I cook for dinner tonight?",
    "Can you help me plan my day?",
    "How many minutes are left until sunset?",
    "Tell me a fun fact about the ocean.",
    "What is a good way to fall asleep faster?",
    "Can you remind me to buy milk on the way home?",
    "How long should I boil an egg?",
    "What is your favorite season of the year?",
    "Why is the sky blue?",
    "Give me one tip for a job interview.",
];

/// (voice, words per minute) of turn `i`: two voices at varied speeds.
const VOICES: [(&str, u32); 4] = [("en-us", 150), ("en-gb", 165), ("en-us", 175), ("en-gb", 150)];

/// Common English function words, for the crude "is this reply English" check.
const ENGLISH_WORDS: &[&str] = &[
    "the", "a", "an", "and", "or", "but", "is", "are", "was", "were", "be", "to", "of", "in", "on", "at", "for",
    "with", "it", "its", "this", "that", "you", "your", "i", "we", "they", "he", "she", "my", "me", "can", "do",
    "does", "have", "has", "not", "so", "if", "as", "by", "from", "what", "how", "why", "when", "there", "here",
    "some", "one", "good", "great", "will", "would", "should", "could", "just", "like", "about", "more", "time", "yes",
    "no", "sure", "try", "make", "get", "up", "out", "all",
];

#[derive(Debug, Parser)]
struct Args {
    /// Turns per session.
    #[arg(long, default_value_t = 12)]
    turns: usize,
    /// Concurrent sessions to measure, comma-separated.
    #[arg(long, default_value = "1,2", value_delimiter = ',')]
    sessions: Vec<usize>,
    /// Conversations per session count (more samples per turn index).
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// A thread spinning on one core beside the sessions.
    #[arg(long)]
    hog: bool,
    /// Inference threads per session (`--local-threads`; 0: svc's default).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// The end-of-turn silence (`silence_duration_ms`).
    #[arg(long, default_value_t = 600)]
    silence_ms: u32,
    /// `preemptive_generation`: prepare the reply during the end-of-turn silence.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    preemptive: bool,
}

/// One measured turn, in milliseconds, and what was heard and said.
#[derive(Debug, Clone)]
struct Turn {
    index: usize,
    end_of_turn: f64,
    stt: f64,
    llm: f64,
    tts: f64,
    total: f64,
    question: String,
    heard: String,
    reply: String,
}

/// Word error rate of `hypothesis` against `reference` (word-level Levenshtein over the
/// reference's words; lower case, punctuation ignored).
fn word_error_rate(reference: &str, hypothesis: &str) -> (usize, usize) {
    let words = |text: &str| -> Vec<String> {
        text.split_whitespace()
            .map(|word| {
                word.chars().filter(|c| c.is_alphanumeric() || *c == '\'').flat_map(char::to_lowercase).collect()
            })
            .filter(|word: &String| !word.is_empty())
            .collect()
    };
    let (r, h) = (words(reference), words(hypothesis));
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut row = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            row[j + 1] = (prev[j] + usize::from(rw != hw)).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    (prev[h.len()], r.len())
}

/// Whether `reply` reads as English: at least 15 % of its words are common English words.
fn is_english(reply: &str) -> bool {
    let words: Vec<String> = reply
        .split_whitespace()
        .map(|word| word.chars().filter(|c| c.is_alphabetic()).flat_map(char::to_lowercase).collect())
        .filter(|word: &String| !word.is_empty())
        .collect();
    if words.is_empty() {
        return true;
    }
    let common = words.iter().filter(|word| ENGLISH_WORDS.contains(&word.as_str())).count();
    common * 100 >= words.len() * 15
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
fn speech(text: &str, (name, words_per_minute): (&str, u32)) -> anyhow::Result<Vec<i16>> {
    let voice = Voice { name: name.to_owned(), words_per_minute };
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
        let pcm = speech(question, VOICES[(index + turn) % VOICES.len()])?;
        for chunk in pcm.chunks(320) {
            frames.tick().await;
            session.input.send(ProviderInput::NativeAudio(chunk.to_vec())).await?;
        }
        let speech_end = Instant::now();
        let (mut stopped, mut transcribed, mut first_audio, mut first_sentence) = (None, None, None, None);
        let tokens_before = output_tokens;
        let mut reply = String::new();
        let mut heard = String::new();
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
                    Some(ProviderEvent::UserTranscript { text, is_final: true, .. }) => {
                        transcribed = Some(Instant::now());
                        heard = text;
                    }
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
            index: turn,
            question: question.to_owned(),
            heard: heard.clone(),
            reply: reply.clone(),
            end_of_turn: ms(speech_end, stopped),
            stt: ms(stopped, transcribed),
            llm: (llm_and_tts - tts_ms).max(0.0),
            tts: tts_ms,
            total: ms(speech_end, first_audio),
        });
        eprintln!(
            "session {index} turn {turn}: {:.0} ms ({question:?} heard {heard:?} → {reply:?}, {} tokens)",
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
    let engines =
        LocalEngines::new(LocalConfig { models, brain: Brain::Embedded, capacity: max, threads: args.threads });
    let loading = engines.clone();
    let started = Instant::now();
    tokio::task::spawn_blocking(move || loading.warm()).await?.map_err(anyhow::Error::msg)?;
    eprintln!(
        "models loaded in {:.2} s; {} inference thread(s) per session",
        started.elapsed().as_secs_f64(),
        engines.threads()
    );
    let hog = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(args.hog));
    if args.hog {
        let spinning = hog.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while spinning.load(std::sync::atomic::Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
            }
        });
    }
    println!(
        "| sessions | turns | total p50 / p95 | end of turn p50 | STT p50 / p95 | LLM first sentence p50 / p95 | TTS p50 | WER | words per reply (median / max) | replies in English |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut per_index = Vec::new();
    for &n in &args.sessions {
        let mut turns = Vec::new();
        for _ in 0..args.repeats.max(1) {
            let mut tasks = Vec::new();
            for index in 0..n {
                tasks.push(tokio::spawn(run_session(
                    engines.clone(),
                    index,
                    args.turns,
                    args.silence_ms,
                    args.preemptive,
                )));
            }
            for task in tasks {
                turns.extend(task.await??);
            }
        }
        let column = |f: fn(&Turn) -> f64| turns.iter().map(f).collect::<Vec<f64>>();
        let (mut eot, mut stt, mut llm, mut tts_ms, mut total) =
            (column(|t| t.end_of_turn), column(|t| t.stt), column(|t| t.llm), column(|t| t.tts), column(|t| t.total));
        let (errors, words) = turns
            .iter()
            .map(|t| word_error_rate(&t.question, &t.heard))
            .fold((0, 0), |(e, w), (te, tw)| (e + te, w + tw));
        let mut reply_words: Vec<f64> = turns.iter().map(|t| t.reply.split_whitespace().count() as f64).collect();
        let english = turns.iter().filter(|t| is_english(&t.reply)).count();
        let longest = reply_words.iter().copied().fold(0.0, f64::max);
        println!(
            "| {n} | {} | {:.0} / {:.0} ms | {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms | {:.0} ms | {:.1} % ({errors}/{words} words) | {:.0} / {:.0} | {english} of {} |",
            turns.len(),
            percentile(&mut total, 0.5),
            percentile(&mut total, 0.95),
            percentile(&mut eot, 0.5),
            percentile(&mut stt, 0.5),
            percentile(&mut stt, 0.95),
            percentile(&mut llm, 0.5),
            percentile(&mut llm, 0.95),
            percentile(&mut tts_ms, 0.5),
            100.0 * errors as f64 / words.max(1) as f64,
            percentile(&mut reply_words, 0.5),
            longest,
            turns.len(),
        );
        for turn in &turns {
            if !is_english(&turn.reply) {
                eprintln!("not English: {:?}", turn.reply);
            }
        }
        let mut row = Vec::new();
        for index in 0..args.turns {
            let mut at: Vec<f64> = turns.iter().filter(|t| t.index == index).map(|t| t.total).collect();
            row.push((percentile(&mut at.clone(), 0.5), percentile(&mut at, 0.95)));
        }
        per_index.push((n, row));
    }
    hog.store(false, std::sync::atomic::Ordering::Relaxed);
    println!();
    println!("Total latency (end of speech → first reply audio) by turn index, p50 / p95 in ms:");
    println!();
    let header: Vec<String> = (1..=args.turns).map(|i| format!("turn {i}")).collect();
    println!("| sessions | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(args.turns));
    for (n, row) in per_index {
        let cells: Vec<String> = row.iter().map(|(p50, p95)| format!("{p50:.0} / {p95:.0}")).collect();
        println!("| {n} | {} |", cells.join(" | "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_helpers_measure_what_they_say() {
        assert_eq!(word_error_rate("How do I make a cup of tea?", "how do i make a cup of tea"), (0, 8));
        assert_eq!(word_error_rate("a b c d", "a x c"), (2, 4));
        assert!(is_english("The best way is to boil it for six minutes."));
        assert!(!is_english("La capitale de la France est Paris, une ville magnifique."));
        assert!(is_english(""));
    }
}
