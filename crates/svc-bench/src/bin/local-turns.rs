//! `local-turns`: the local provider's reply latency as a user meets it, from the end of the
//! user's speech to the first reply audio heard, over whole English conversations.
//!
//! The path is the one a client takes. svc runs as its own process (the real `svc` binary, `svc
//! serve` with the embedded room, `--local-models`, `--local-capacity` = the largest session
//! count measured, `--local-threads` when given); per session the benchmark starts a session with
//! `POST …/session/start` (model `provider_local`), joins the room with str0m's [`RoomClient`]
//! (ICE/DTLS/SRTP over UDP), waits for `ready`, and talks: each turn is one question spoken by
//! espeak-ng (two voices, `en-us` and `en-gb`, at 150–175 words per minute), resampled to 48 kHz,
//! Opus-encoded and sent in 20 ms frames at real time; between questions the microphone stays
//! open and sends digital silence, as a browser does with DTX off. The agent's track is decoded
//! and read sample by sample. Per turn, on the client's clock, from the send of the frame that
//! holds the last sample of voice:
//!
//! - **end of turn**: until `user-stopped-speaking` arrives (the detector's silence,
//!   `silence_duration_ms`);
//! - **heard**: until the final user transcript arrives;
//! - **`bot-started-speaking`**: until that event arrives (svc released the reply's first frame
//!   to the room), which splits the reply's time inside svc from the room's output path;
//! - **total**: until the first audible 20 ms of the agent's reply arrives (peak above −40 dBFS),
//!   what the user waits for.
//!
//! A turn ends at `turn-complete` once the reply was heard; after half a second of silence the
//! next question follows. Beside latency, per session count: the word error rate of the final
//! user transcripts against the questions, the words per reply, the share of replies in English
//! (at least 15 % of a reply's words among the most common English function words: crude, but
//! French or Spanish replies score near 0), and the total latency per turn index (p50 / p95 over
//! the sessions and `--repeats`), so that growth over a conversation shows. `--hog` spins one
//! core in this process beside the sessions (other work on the machine).
//!
//! Usage: `cargo build --release -p svc-server --bin svc -p svc-bench --bin local-turns`, then
//! `target/release/local-turns [--turns 12] [--sessions 1,2] [--repeats 1] [--hog] [--threads N]`
//! with the models installed (`svc models install`; `SVC_LOCAL_MODELS` or
//! `./target/local-models`). The report is Markdown on stdout; progress goes to stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::{Value, json};
use svc_audio::{FRAME_SAMPLES, OpusDecoder, OpusEncoder};
use svc_bench::svc_process::{self, Started, SvcConfig, SvcProcess};
use svc_local::ModelsDir;
use svc_local::tts::{self, Voice};
use svc_room::client::{ClientEvent, ClientEvents, ClientOptions, RoomClient};

/// Everyday English requests, none naming another country or language (the small model
/// answered a question about France in French for the rest of the conversation). Session `i`
/// of repeat `r` starts at question `5 i + 12 r`, so two repeats of 12 turns speak all 24.
const QUESTIONS: [&str; 24] = [
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
    "Should I take an umbrella with me today?",
    "What is a quick exercise I can do at my desk?",
    "How do I keep my house plants alive?",
    "Can you suggest a name for my new puppy?",
    "What is the best way to learn to play the guitar?",
    "How much water should I drink every day?",
    "Tell me a short joke about computers.",
    "What can I do on a rainy afternoon?",
    "How do I write a polite email to my landlord?",
    "What is a healthy snack for the afternoon?",
    "How can I save a little money each month?",
    "What should I pack for a weekend at the beach?",
];

/// (voice, words per minute) of turn `i`: two voices at varied speeds.
const VOICES: [(&str, u32); 4] = [("en-us", 150), ("en-gb", 165), ("en-us", 175), ("en-gb", 150)];

/// A decoded 20 ms frame of the agent whose peak is above this (−40 dBFS) is heard.
const AUDIBLE_PEAK: i16 = 328;

/// Common English function words, for the crude "is this reply English" check.
const ENGLISH_WORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "is",
    "are",
    "was",
    "were",
    "be",
    "to",
    "of",
    "in",
    "on",
    "at",
    "for",
    "with",
    "it",
    "its",
    "this",
    "that",
    "you",
    "your",
    "i",
    "we",
    "they",
    "he",
    "she",
    "my",
    "me",
    "can",
    "do",
    "does",
    "have",
    "has",
    "not",
    "so",
    "if",
    "as",
    "by",
    "from",
    "what",
    "how",
    "why",
    "when",
    "there",
    "here",
    "some",
    "one",
    "good",
    "great",
    "will",
    "would",
    "should",
    "could",
    "just",
    "like",
    "about",
    "more",
    "time",
    "yes",
    "no",
    "sure",
    "try",
    "make",
    "get",
    "up",
    "out",
    "all",
    "you're",
    "here's",
    "it's",
    "i'm",
    "don't",
    "let's",
    "that's",
    "there's",
    "something",
    "might",
    "any",
    "which",
    "these",
    "those",
    "then",
    "than",
    "also",
    "very",
];

#[derive(Debug, Parser)]
#[command(name = "local-turns")]
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
    /// svc's `--local-threads` (0: svc's default).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// The end-of-turn silence (`silence_duration_ms`).
    #[arg(long, default_value_t = 600)]
    silence_ms: u32,
    /// `preemptive_generation`: prepare the reply during the end-of-turn silence.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    preemptive: bool,
    /// The `svc` binary [default: `svc` beside this benchmark].
    #[arg(long, value_name = "PATH")]
    svc: Option<PathBuf>,
}

/// One measured turn, in milliseconds from the end of the question's voice, and what was heard
/// and said.
#[derive(Debug, Clone)]
struct Turn {
    index: usize,
    end_of_turn: f64,
    heard_at: f64,
    /// `bot-started-speaking`: svc released the reply's first frame to the room.
    speaking: f64,
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
        .map(|word| word.chars().filter(|c| c.is_alphabetic() || *c == '\'').flat_map(char::to_lowercase).collect())
        .filter(|word: &String| !word.is_empty())
        .collect();
    if words.is_empty() {
        return true;
    }
    let common = words.iter().filter(|word| ENGLISH_WORDS.contains(&word.as_str())).count();
    common * 100 >= words.len() * 15
}

fn models() -> PathBuf {
    let dir = std::env::var_os("SVC_LOCAL_MODELS").map_or_else(|| PathBuf::from("target/local-models"), PathBuf::from);
    std::path::absolute(&dir).unwrap_or(dir)
}

/// espeak-ng's voice at 48 kHz without its leading and trailing silence (so that the clock
/// starts at the end of the voice itself), as Opus frames; the last frame holds the last sample
/// of voice.
fn question_frames(text: &str, (name, words_per_minute): (&str, u32)) -> anyhow::Result<Vec<Arc<[u8]>>> {
    let voice = Voice { name: name.to_owned(), words_per_minute };
    let (pcm, rate) = tts::speak_native(text, &voice)?;
    let pcm = svc_audio::resample::resample_clip(&pcm, rate, 48_000)?;
    let voiced = |sample: &i16| sample.unsigned_abs() > 300;
    let first = pcm.iter().position(voiced).unwrap_or(0);
    let last = pcm.iter().rposition(voiced).map_or(pcm.len(), |at| at + 1);
    let mut voice = pcm[first..last].to_vec();
    voice.resize(voice.len().div_ceil(FRAME_SAMPLES) * FRAME_SAMPLES, 0);
    let mut encoder = OpusEncoder::new_voice().context("opus encoder")?;
    voice.chunks_exact(FRAME_SAMPLES).map(|frame| encoder.encode_frame(frame).map(Arc::from).context("opus")).collect()
}

/// One session's conversation through the room.
struct Conversation {
    index: usize,
    repeat: usize,
    turns: usize,
    addr: std::net::SocketAddr,
    key: String,
    silence_ms: u32,
    preemptive: bool,
}

/// The client's side of a session: its microphone (a frame every 20 ms, voice or silence), the
/// agent's decoded track and the data channel's events.
struct Client {
    client: RoomClient,
    events: ClientEvents,
    agent_track: String,
    decoder: OpusDecoder,
    pcm: Vec<i16>,
    silence: Arc<[u8]>,
    ticker: tokio::time::Interval,
    rtp: u64,
}

/// What happened on the client since the last look.
enum Heard {
    Tick,
    Audible(Instant),
    Message(Value, Instant),
    Nothing,
}

impl Client {
    /// Sends the next microphone frame: `frame`, or silence.
    fn send(&mut self, frame: Option<&Arc<[u8]>>) -> anyhow::Result<()> {
        let packet = frame.cloned().unwrap_or_else(|| self.silence.clone());
        self.client.send_opus(self.rtp, packet).context("sending a microphone frame")?;
        self.rtp += FRAME_SAMPLES as u64;
        Ok(())
    }

    /// Waits for the next tick of the microphone or the next event that matters.
    async fn next(&mut self) -> anyhow::Result<Heard> {
        tokio::select! {
            _ = self.ticker.tick() => Ok(Heard::Tick),
            event = self.events.next() => match event {
                Some(ClientEvent::AudioFrame(frame)) if *frame.track_sid == *self.agent_track => {
                    self.pcm.clear();
                    // A packet that does not decode is not heard; the next one is.
                    let _ = self.decoder.decode(&frame.opus, &mut self.pcm);
                    let peak = self.pcm.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0);
                    Ok(if peak > AUDIBLE_PEAK.unsigned_abs() { Heard::Audible(frame.received_at) } else { Heard::Nothing })
                }
                Some(ClientEvent::Data(data)) => Ok(serde_json::from_slice(&data.payload)
                    .map_or(Heard::Nothing, |message| Heard::Message(message, Instant::now()))),
                Some(ClientEvent::Closed { error }) => bail!("the room closed: {error:?}"),
                Some(ClientEvent::Left { reason, .. }) => bail!("the room sent us away: {reason:?}"),
                Some(_) => Ok(Heard::Nothing),
                None => bail!("the room client ended"),
            },
        }
    }
}

impl Conversation {
    async fn run(self) -> anyhow::Result<Vec<Turn>> {
        let body = json!({
            "sdk": {"name": "local-turns", "version": "1.0.0"},
            "agent": {"type": "inline", "instructions": "You are a friendly and helpful assistant.",
                "model": {"provider": "provider_local", "silence_duration_ms": self.silence_ms,
                    "preemptive_generation": self.preemptive}},
        });
        let Started { url, token, session_id } = svc_process::start_session(self.addr, &self.key, &body).await?;
        let options = ClientOptions { connect_timeout: Duration::from_secs(30), ..Default::default() };
        let mut client = RoomClient::connect(&url, &token, options).await.context("joining the room")?;
        client.publish_audio("microphone").await.context("publishing the microphone")?;
        let mut agent_track = None;
        let mut ready = false;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while agent_track.is_none() || !ready {
            match tokio::time::timeout_at(deadline, client.next_event()).await {
                Ok(Some(ClientEvent::TrackSubscribed { track_sid, .. })) => agent_track = Some(track_sid),
                Ok(Some(ClientEvent::Data(data))) => {
                    let message: Value = serde_json::from_slice(&data.payload).unwrap_or_default();
                    ready |= message["type"] == "ready";
                }
                Ok(Some(ClientEvent::Closed { error })) => bail!("session {session_id}: the room closed: {error:?}"),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => bail!("session {session_id}: no agent track and ready within 60 s"),
            }
        }
        let mut encoder = OpusEncoder::new_voice().context("opus encoder")?;
        let silence: Arc<[u8]> = Arc::from(encoder.encode_frame(&[0; FRAME_SAMPLES]).context("opus")?);
        let (client, events) = client.split_events();
        let mut ticker = tokio::time::interval(Duration::from_millis(20));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut mic = Client {
            client,
            events,
            agent_track: agent_track.unwrap_or_default(),
            decoder: OpusDecoder::new().context("opus decoder")?,
            pcm: Vec::with_capacity(FRAME_SAMPLES),
            silence,
            ticker,
            rtp: 1_000_000 * self.index as u64,
        };
        // Spread the sessions' speech over the first seconds (silence meanwhile).
        for _ in 0..(35 * self.index + 25) {
            while !matches!(mic.next().await?, Heard::Tick) {}
            mic.send(None)?;
        }
        let mut measured = Vec::with_capacity(self.turns);
        for turn in 0..self.turns {
            let question = QUESTIONS[(self.index * 5 + self.repeat * 12 + turn) % QUESTIONS.len()];
            let frames = question_frames(question, VOICES[(self.index + turn) % VOICES.len()])?;
            let measured_turn = self.turn(&mut mic, turn, question, &frames).await;
            let measured_turn = measured_turn.with_context(|| format!("session {session_id}, turn {}", turn + 1))?;
            eprintln!(
                "session {} turn {}: {:.0} ms ({question:?} heard {:?} → {:?})",
                self.index,
                turn + 1,
                measured_turn.total,
                measured_turn.heard,
                measured_turn.reply
            );
            measured.push(measured_turn);
        }
        mic.client.leave().await;
        Ok(measured)
    }

    /// Speaks `frames` at real time, then keeps the microphone open on silence until the reply
    /// was heard and the turn completed, and half a second more.
    async fn turn(&self, mic: &mut Client, index: usize, question: &str, frames: &[Arc<[u8]>]) -> anyhow::Result<Turn> {
        let mut next = 0;
        let mut speech_end = None;
        let (mut stopped, mut transcribed, mut first_audio, mut completed) = (None, None, None, None);
        let mut speaking = None;
        let mut heard = Vec::new();
        let mut reply = String::new();
        loop {
            match mic.next().await? {
                Heard::Tick => {
                    mic.send(frames.get(next))?;
                    next += 1;
                    if next == frames.len() {
                        speech_end = Some(Instant::now());
                    }
                    let quiet = completed.is_some_and(|at: Instant| at.elapsed() >= Duration::from_millis(500));
                    if quiet {
                        break;
                    }
                    if speech_end.is_some_and(|at: Instant| at.elapsed() > Duration::from_secs(60)) {
                        bail!("no complete reply within a minute (heard {heard:?}, reply {reply:?})");
                    }
                }
                Heard::Audible(at) => {
                    if let Some(end) = speech_end
                        && at > end
                    {
                        first_audio = first_audio.or(Some(at));
                    }
                }
                Heard::Message(message, at) if speech_end.is_some() => match message["type"].as_str() {
                    Some("user-stopped-speaking") => stopped = stopped.or(Some(at)),
                    Some("bot-started-speaking") => speaking = speaking.or(Some(at)),
                    Some("transcript") if message["is_final"] == true => {
                        let text = message["text"].as_str().unwrap_or_default().to_owned();
                        if message["role"] == "USER" {
                            transcribed = Some(at);
                            heard.push(text);
                        } else if message["role"] == "ASSISTANT" {
                            reply = text;
                        }
                    }
                    Some("turn-complete") if first_audio.is_some() => completed = completed.or(Some(at)),
                    Some("session-ended" | "error") => bail!("the session ended: {message}"),
                    _ => {}
                },
                Heard::Message(..) | Heard::Nothing => {}
            }
        }
        let (Some(end), Some(first_audio)) = (speech_end, first_audio) else {
            bail!("no reply was heard");
        };
        let ms =
            |to: Option<Instant>| to.map_or(f64::NAN, |to| to.saturating_duration_since(end).as_secs_f64() * 1000.0);
        Ok(Turn {
            index,
            end_of_turn: ms(stopped),
            heard_at: ms(transcribed),
            speaking: ms(speaking),
            total: ms(Some(first_audio)),
            question: question.to_owned(),
            heard: heard.join(" "),
            reply,
        })
    }
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(rank).copied().unwrap_or(f64::NAN)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let models = models();
    ModelsDir::new(models.clone()).check()?;
    if !tts::available() {
        bail!("espeak-ng is not installed");
    }
    let binary = svc_process::binary(args.svc.as_deref())?;
    let dir = tempfile::Builder::new().prefix("local-turns-").tempdir().context("temporary directory")?;
    let max = args.sessions.iter().copied().max().unwrap_or(1);
    let mut env = vec![
        ("SVC_DEV_WORKSPACE", "off".to_owned()),
        ("SVC_ROOM_UDP_PORT", "0".to_owned()),
        ("SVC_ROOM_NODE_IP", "127.0.0.1".to_owned()),
        ("SVC_LOCAL_MODELS", models.display().to_string()),
    ];
    // svc's defaults (capacity 2, so one inference thread per session on two cores) unless the
    // run needs more slots.
    if max > svc_local::engines::DEFAULT_CAPACITY {
        env.push(("SVC_LOCAL_CAPACITY", max.to_string()));
    }
    if args.threads > 0 {
        env.push(("SVC_LOCAL_THREADS", args.threads.to_string()));
    }
    // candle's own knob, passed on when the caller set it (a comparison run).
    if let Ok(threads) = std::env::var("CANDLE_NUM_THREADS") {
        env.push(("CANDLE_NUM_THREADS", threads));
    }
    let config = SvcConfig {
        binary: binary.clone(),
        data_dir: dir.path().to_owned(),
        env: env.into_iter().map(|(name, value)| (name.to_owned(), value)).collect(),
    };
    let key = config.workspace_with_key("local-turns")?;
    let server = SvcProcess::start(&config)?;
    eprintln!("local-turns: svc ({}) pid {} on {}", binary.display(), server.pid(), server.addr);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("local-turns")
        .enable_all()
        .build()
        .context("the clients' runtime")?;
    let hog = Arc::new(AtomicBool::new(args.hog));
    if args.hog {
        let spinning = hog.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while spinning.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
            }
        });
    }
    let result = runtime.block_on(measure(&args, &server, &key));
    hog.store(false, Ordering::Relaxed);
    let stopped = server.stop(Duration::from_secs(30));
    let report = result?;
    stopped?;
    print!("{report}");
    Ok(())
}

async fn measure(args: &Args, server: &SvcProcess, key: &str) -> anyhow::Result<String> {
    let mut out = svc_bench::run_header(" --bin local-turns");
    out.push_str(&format!(
        "- Setup: svc in its own process (`svc serve`, embedded room, `--local-capacity {}`{}), str0m clients through the room; `silence_duration_ms` {}, `preemptive_generation` {}{}.\n\n",
        args.sessions.iter().copied().max().unwrap_or(1).max(svc_local::engines::DEFAULT_CAPACITY),
        if args.threads > 0 { format!(", `--local-threads {}`", args.threads) } else { String::new() },
        args.silence_ms,
        args.preemptive,
        if args.hog { "; a thread spinning on one core beside them (`--hog`)" } else { "" },
    ));
    out.push_str("| sessions | turns | total p50 / p95 | end of turn p50 | final user transcript p50 / p95 | `bot-started-speaking` p50 / p95 | WER | words per reply (median / max) | replies in English | turn 12 / turn 1 (p50) |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    let mut per_index = Vec::new();
    for &n in &args.sessions {
        let mut turns = Vec::new();
        for repeat in 0..args.repeats.max(1) {
            let mut tasks = Vec::new();
            for index in 0..n {
                let conversation = Conversation {
                    index,
                    repeat,
                    turns: args.turns,
                    addr: server.addr,
                    key: key.to_owned(),
                    silence_ms: args.silence_ms,
                    preemptive: args.preemptive,
                };
                tasks.push(tokio::spawn(conversation.run()));
            }
            for task in tasks {
                turns.extend(task.await??);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while server.live_sessions().await? > 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let column = |f: fn(&Turn) -> f64| turns.iter().map(f).filter(|v| v.is_finite()).collect::<Vec<f64>>();
        let (mut eot, mut heard_at, mut speaking, mut total) =
            (column(|t| t.end_of_turn), column(|t| t.heard_at), column(|t| t.speaking), column(|t| t.total));
        let (errors, words) = turns
            .iter()
            .map(|t| word_error_rate(&t.question, &t.heard))
            .fold((0, 0), |(e, w), (te, tw)| (e + te, w + tw));
        let mut reply_words: Vec<f64> = turns.iter().map(|t| t.reply.split_whitespace().count() as f64).collect();
        let english = turns.iter().filter(|t| is_english(&t.reply)).count();
        let longest = reply_words.iter().copied().fold(0.0, f64::max);
        let at_index = |index: usize| {
            let mut at: Vec<f64> = turns.iter().filter(|t| t.index == index).map(|t| t.total).collect();
            (percentile(&mut at.clone(), 0.5), percentile(&mut at, 0.95))
        };
        let growth = if args.turns >= 12 { format!("{:.2}", at_index(11).0 / at_index(0).0) } else { "–".to_owned() };
        out.push_str(&format!(
            "| {n} | {} | {:.0} / {:.0} ms | {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms | {:.1} % ({errors}/{words} words) | {:.0} / {:.0} | {english} of {} | {growth} |\n",
            turns.len(),
            percentile(&mut total, 0.5),
            percentile(&mut total, 0.95),
            percentile(&mut eot, 0.5),
            percentile(&mut heard_at, 0.5),
            percentile(&mut heard_at, 0.95),
            percentile(&mut speaking, 0.5),
            percentile(&mut speaking, 0.95),
            100.0 * errors as f64 / words.max(1) as f64,
            percentile(&mut reply_words, 0.5),
            longest,
            turns.len(),
        ));
        for turn in &turns {
            if !is_english(&turn.reply) {
                eprintln!("not English: {:?}", turn.reply);
            }
        }
        per_index.push((n, (0..args.turns).map(at_index).collect::<Vec<_>>()));
    }
    out.push_str("\nTotal latency (end of speech → first reply audio heard) by turn index, p50 / p95 in ms:\n\n");
    let header: Vec<String> = (1..=args.turns).map(|i| format!("turn {i}")).collect();
    out.push_str(&format!("| sessions | {} |\n", header.join(" | ")));
    out.push_str(&format!("|---|{}\n", "---|".repeat(args.turns)));
    for (n, row) in per_index {
        let cells: Vec<String> = row.iter().map(|(p50, p95)| format!("{p50:.0} / {p95:.0}")).collect();
        out.push_str(&format!("| {n} | {} |\n", cells.join(" | ")));
    }
    Ok(out)
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
        assert!(is_english("You're welcome! Here's something fun you might enjoy:"));
    }
}
