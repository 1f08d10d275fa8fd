//! The IO shell of a local session: a Tokio task that owns the [`LocalCore`], feeds it the
//! runtime's input, runs the jobs it asks for, and hands its events to the runtime — the same
//! [`ProviderSession`] every upstream adapter gives, so the runtime cannot tell the difference.
//!
//! Jobs run in two lanes, each one job at a time in order: the brain lane (transcriptions and
//! generations, on blocking threads; an endpoint generation is an HTTP stream instead) and the
//! speech lane. A generation checks its cancel mark at every token, so a barge-in stops it
//! within one token. After every input and outcome the core is drained in one place
//! ([`Shell::drain`]); the task ends when the core closes, the runtime drops its handle, or the
//! shutdown token fires, and in-flight work stops with it.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use svc_http::{HttpEvent, HttpRequest};
use svc_llm::openai::{StreamEvent, StreamParser};
use svc_llm::{Finish, GenerateParams, Generation};
use svc_provider_core::session::{EVENT_CAPACITY, INPUT_CAPACITY, ProviderSession};
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::core::{Job, LocalCore, Outcome};
use crate::engines::{Brain, LocalEngines, Permit};
use crate::timing::{Stage, TurnTiming};
use crate::tts::{self, Voice};

/// Outcomes waiting for the shell (a token each while generating).
const OUTCOME_CAPACITY: usize = 256;

/// Starts a local session for `setup` on `engines`, holding `permit` until it ends.
pub fn spawn(
    core: LocalCore,
    voice: Voice,
    engines: Arc<LocalEngines>,
    permit: Permit,
    shutdown: CancellationToken,
) -> ProviderSession {
    let (input_tx, input_rx) = mpsc::channel(INPUT_CAPACITY);
    let (event_tx, event_rx) = mpsc::channel(EVENT_CAPACITY);
    // The local pipeline has no upstream session to resume: the handle stays `None`.
    let (_handle_tx, handle_rx) = watch::channel(None);
    let (outcome_tx, outcome_rx) = mpsc::channel(OUTCOME_CAPACITY);
    let shell = Shell {
        core,
        voice,
        engines,
        input_rx,
        event_tx,
        outcome_tx,
        outcome_rx,
        brain: Lane::default(),
        speech: Lane::default(),
        cancelled_through: Arc::new(AtomicU64::new(0)),
        speech_dropped_before: Arc::new(AtomicU64::new(0)),
        shutdown: shutdown.clone(),
        permit,
        timing: TurnTiming::default(),
        whole_turn_transcription: None,
    };
    let task = tokio::spawn(shell.run());
    ProviderSession { input: input_tx, events: event_rx, resumption_handle: handle_rx, shutdown, task }
}

/// The core's configuration for `setup` (what [`spawn`] runs).
pub fn voice_for(setup: &SessionSetup) -> Voice {
    // The local voice is espeak-ng's: without the agent's choice, the catalog's default.
    Voice::named(setup.voice.as_deref().unwrap_or(&setup.model.default_voice))
}

#[derive(Default)]
struct Lane {
    queue: VecDeque<Job>,
    busy: bool,
}

struct Shell {
    core: LocalCore,
    voice: Voice,
    engines: Arc<LocalEngines>,
    input_rx: mpsc::Receiver<ProviderInput>,
    event_tx: mpsc::Sender<ProviderEvent>,
    outcome_tx: mpsc::Sender<(LaneKind, Option<Outcome>)>,
    outcome_rx: mpsc::Receiver<(LaneKind, Option<Outcome>)>,
    brain: Lane,
    speech: Lane,
    /// Generations with an id up to this are cancelled.
    cancelled_through: Arc<AtomicU64>,
    /// Speech jobs with an id below this are dropped.
    speech_dropped_before: Arc<AtomicU64>,
    shutdown: CancellationToken,
    /// The session's slot: held until the session ends; its threads run the models.
    permit: Permit,
    /// When the current turn's stages happened (for the `svc_local::timing` log).
    timing: TurnTiming,
    /// The whole-turn transcription running, if any (partials are not a stage of the reply).
    whole_turn_transcription: Option<u64>,
}

/// Which lane an outcome frees. `None` as the outcome: the job ended and said nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LaneKind {
    Brain,
    Speech,
    /// A piece of text in the middle of a generation: the lane stays busy.
    Stream,
}

impl Shell {
    async fn run(mut self) {
        let engines = self.engines.clone();
        let loaded = tokio::task::spawn_blocking(move || engines.warm()).await;
        match loaded {
            Ok(Ok(())) => {
                self.core.start();
                self.warm_up();
            }
            Ok(Err(message)) => self.core.fail("local_models_unavailable", message),
            Err(error) => self.core.fail("local_models_unavailable", error.to_string()),
        }
        loop {
            if !self.drain().await {
                break;
            }
            tokio::select! {
                input = self.input_rx.recv() => match input {
                    Some(input) => self.core.handle_input(input),
                    // The runtime dropped its handle: the session is over.
                    None => self.core.handle_input(ProviderInput::Close),
                },
                Some((lane, outcome)) = self.outcome_rx.recv() => {
                    match lane {
                        LaneKind::Brain => self.brain.busy = false,
                        LaneKind::Speech => self.speech.busy = false,
                        LaneKind::Stream => {}
                    }
                    if let Some(outcome) = outcome {
                        self.note_outcome(&outcome);
                        self.core.handle_outcome(outcome);
                    }
                }
                () = self.shutdown.cancelled() => self.core.handle_input(ProviderInput::Close),
            }
        }
        // In-flight generations stop at their next token; transcriptions finish on their own.
        self.cancelled_through.store(u64::MAX, Ordering::Release);
        self.speech_dropped_before.store(u64::MAX, Ordering::Release);
    }

    /// Reads the system prompt into the embedded model's prefix cache on the brain lane, so the
    /// first reply reads only the user's words (about 0.1 s instead of about 0.9 s).
    fn warm_up(&mut self) {
        let (messages, tools) = self.core.prompt();
        self.brain.queue.push_back(Job::ReadAhead { messages, tools });
    }

    /// Reads `messages` into the embedded model's prefix cache (nothing to do for an endpoint).
    fn read_ahead(&mut self, messages: Vec<svc_llm::ChatMessage>, tools: Vec<svc_llm::ToolDef>) {
        if self.engines.config().brain != Brain::Embedded {
            self.brain.busy = false;
            return;
        }
        let engines = self.engines.clone();
        let permit = self.permit.clone();
        let tx = self.outcome_tx.clone();
        tokio::task::spawn_blocking(move || {
            let read = permit.install(|| {
                engines.smollm().and_then(|model| model.warm_up(&messages, &tools).map_err(|e| e.to_string()))
            });
            if let Err(error) = read {
                tracing::warn!(%error, "provider_local: could not read the conversation ahead");
            }
            // The session ended meanwhile.
            let _ = tx.blocking_send((LaneKind::Brain, None));
        });
    }

    /// Runs what the core asked for and forwards its events. `false` once it is closed and its
    /// last event went out (or nobody listens).
    async fn drain(&mut self) -> bool {
        while let Some(job) = self.core.poll_job() {
            match job {
                Job::Cancel { id } => {
                    self.cancelled_through.fetch_max(id, Ordering::AcqRel);
                }
                Job::DropSpeech { before } => {
                    self.speech_dropped_before.fetch_max(before, Ordering::AcqRel);
                    self.speech.queue.retain(|job| !matches!(job, Job::Speak { id, .. } if *id < before));
                }
                job @ Job::Transcribe { partial: false, .. } => {
                    // The turn is over: partials still waiting would only delay its transcript.
                    self.brain.queue.retain(|queued| {
                        !matches!(queued, Job::Transcribe { partial: true, .. } | Job::ReadAhead { .. })
                    });
                    self.brain.queue.push_back(job);
                }
                job @ (Job::Transcribe { .. } | Job::Generate { .. }) => {
                    // Reading ahead only saves time while nothing else waits for the lane.
                    self.brain.queue.retain(|queued| !matches!(queued, Job::ReadAhead { .. }));
                    self.brain.queue.push_back(job);
                }
                job @ Job::ReadAhead { .. } => {
                    // Only the newest conversation is worth reading.
                    self.brain.queue.retain(|queued| !matches!(queued, Job::ReadAhead { .. }));
                    self.brain.queue.push_back(job);
                }
                job @ Job::Speak { .. } => self.speech.queue.push_back(job),
            }
        }
        self.run_lanes();
        while let Some(event) = self.core.poll_event() {
            self.note_event(&event);
            let last = matches!(event, ProviderEvent::Closed { .. });
            if self.event_tx.send(event).await.is_err() {
                return false;
            }
            if last {
                return false;
            }
        }
        !self.core.is_closed()
    }

    fn run_lanes(&mut self) {
        if !self.brain.busy
            && let Some(job) = self.brain.queue.pop_front()
        {
            self.brain.busy = true;
            self.run_brain(job);
        }
        if !self.speech.busy
            && let Some(job) = self.speech.queue.pop_front()
        {
            self.speech.busy = true;
            self.run_speech(job);
        }
    }

    /// Notes the stage an outcome ends.
    fn note_outcome(&mut self, outcome: &Outcome) {
        let stage = match outcome {
            Outcome::Transcribed { id, .. } if self.whole_turn_transcription == Some(*id) => Stage::Transcribed,
            Outcome::Transcribed { .. } | Outcome::Generated { .. } => return,
            Outcome::Text { .. } => Stage::Text,
            Outcome::Spoken { .. } => Stage::Spoken,
        };
        self.timing.note(stage, std::time::Instant::now());
    }

    /// Notes the stage an event marks; the reply's first audio writes the turn's timing line.
    fn note_event(&mut self, event: &ProviderEvent) {
        let now = std::time::Instant::now();
        match event {
            ProviderEvent::UserSpeechStarted => self.timing.note(Stage::SpeechStarted, now),
            ProviderEvent::UserSpeechStopped => self.timing.note(Stage::SpeechStopped, now),
            ProviderEvent::AssistantAudio { .. } => {
                if let Some(line) = self.timing.first_audio(now) {
                    tracing::debug!(target: "svc_local::timing", "turn (ms from the end of speech): {line}");
                }
            }
            _ => {}
        }
    }

    fn run_brain(&mut self, job: Job) {
        let now = std::time::Instant::now();
        match &job {
            Job::Transcribe { id, partial: false, .. } => {
                self.whole_turn_transcription = Some(*id);
                self.timing.note(Stage::TranscribeStarted, now);
            }
            Job::Generate { .. } => self.timing.note(Stage::GenerateStarted, now),
            _ => {}
        }
        let tx = self.outcome_tx.clone();
        let engines = self.engines.clone();
        let permit = self.permit.clone();
        match job {
            Job::Transcribe { id, pcm, .. } => {
                tokio::task::spawn_blocking(move || {
                    let result = permit.install(|| {
                        engines.whisper().and_then(|whisper| {
                            let samples: Vec<f32> = pcm.iter().map(|&s| f32::from(s) / 32_768.0).collect();
                            whisper
                                .transcribe(&samples)
                                .map(|transcript| transcript.text)
                                .map_err(|error| error.to_string())
                        })
                    });
                    // The session ended meanwhile: nobody waits for this transcript.
                    let _ = tx.blocking_send((LaneKind::Brain, Some(Outcome::Transcribed { id, result })));
                });
            }
            Job::Generate { id, messages, tools, params } => {
                let cancelled = self.cancelled_through.clone();
                match &self.engines.config().brain {
                    Brain::Embedded => {
                        tokio::task::spawn_blocking(move || {
                            let result = permit.install(|| {
                                generate_embedded(&engines, id, &messages, &tools, &params, &cancelled, &tx)
                            });
                            // The session ended meanwhile.
                            let _ = tx.blocking_send((LaneKind::Brain, Some(Outcome::Generated { id, result })));
                        });
                    }
                    Brain::Endpoint { url, model, api_key } => {
                        let body = svc_llm::openai::request_body(model, &messages, &tools, &params);
                        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
                        if let Some(key) = api_key {
                            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
                        }
                        let request = HttpRequest { id, url: url.to_string(), headers, body: body.to_string() };
                        tokio::spawn(generate_endpoint(request, id, cancelled, tx, self.shutdown.clone()));
                    }
                }
            }
            Job::ReadAhead { messages, tools } => self.read_ahead(messages, tools),
            // Only transcriptions, generations and reading ahead reach the brain lane.
            Job::Cancel { .. } | Job::DropSpeech { .. } | Job::Speak { .. } => self.brain.busy = false,
        }
    }

    fn run_speech(&mut self, job: Job) {
        let Job::Speak { id, text } = job else {
            self.speech.busy = false;
            return;
        };
        self.timing.note(Stage::SpeakStarted, std::time::Instant::now());
        let tx = self.outcome_tx.clone();
        let voice = self.voice.clone();
        let dropped = self.speech_dropped_before.clone();
        tokio::task::spawn_blocking(move || {
            let outcome = (id >= dropped.load(Ordering::Acquire))
                .then(|| Outcome::Spoken { id, result: tts::speak(&text, &voice).map_err(|error| error.to_string()) });
            // The session ended meanwhile.
            let _ = tx.blocking_send((LaneKind::Speech, outcome));
        });
    }
}

fn generate_embedded(
    engines: &LocalEngines,
    id: u64,
    messages: &[svc_llm::ChatMessage],
    tools: &[svc_llm::ToolDef],
    params: &GenerateParams,
    cancelled: &AtomicU64,
    tx: &mpsc::Sender<(LaneKind, Option<Outcome>)>,
) -> Result<Generation, String> {
    if cancelled.load(Ordering::Acquire) >= id {
        return Ok(cancelled_generation());
    }
    let model = engines.smollm()?;
    let mut on_text = |piece: &str| {
        if cancelled.load(Ordering::Acquire) >= id {
            return ControlFlow::Break(());
        }
        if !piece.is_empty()
            && tx.blocking_send((LaneKind::Stream, Some(Outcome::Text { id, text: piece.to_owned() }))).is_err()
        {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    };
    model.generate(messages, tools, params, &mut on_text).map_err(|error| error.to_string())
}

fn cancelled_generation() -> Generation {
    Generation {
        text: String::new(),
        tool_calls: Vec::new(),
        prompt_tokens: 0,
        output_tokens: 0,
        dropped_messages: 0,
        finish: Finish::Cancelled,
    }
}

/// One generation from an OpenAI-compatible endpoint, streamed.
async fn generate_endpoint(
    request: HttpRequest,
    id: u64,
    cancelled: Arc<AtomicU64>,
    tx: mpsc::Sender<(LaneKind, Option<Outcome>)>,
    shutdown: CancellationToken,
) {
    let (http_tx, mut http_rx) = mpsc::channel(64);
    let tls = svc_http::tls_config();
    let post = tokio::spawn(svc_http::post(request, tls, http_tx));
    let mut parser = StreamParser::new();
    let mut generation = Generation { finish: Finish::Stop, ..cancelled_generation() };
    let mut failure: Option<String> = None;
    let mut ticker = tokio::time::interval(std::time::Duration::from_millis(50));
    loop {
        let event = tokio::select! {
            event = http_rx.recv() => event,
            _ = ticker.tick() => {
                if cancelled.load(Ordering::Acquire) >= id { post.abort(); generation.finish = Finish::Cancelled; break; }
                continue;
            }
            () = shutdown.cancelled() => { post.abort(); generation.finish = Finish::Cancelled; break; }
        };
        let Some((_, event)) = event else { break };
        match event {
            HttpEvent::Status(status) if !(200..300).contains(&status) => {
                failure = Some(format!("the reply endpoint answered HTTP {status}"));
            }
            HttpEvent::Status(_) => {}
            HttpEvent::Data(data) => {
                if failure.is_some() {
                    // An error body: keep its message.
                    if let Some(message) = failure.as_mut() {
                        message.push_str(": ");
                        message.push_str(&data.chars().take(300).collect::<String>());
                    }
                    continue;
                }
                for event in parser.push_data(&data) {
                    match event {
                        StreamEvent::TextDelta(text) => {
                            generation.text.push_str(&text);
                            if tx.send((LaneKind::Stream, Some(Outcome::Text { id, text }))).await.is_err() {
                                post.abort();
                                return;
                            }
                        }
                        StreamEvent::ToolCall(call) => generation.tool_calls.push(call),
                        StreamEvent::Usage { prompt_tokens, completion_tokens } => {
                            generation.prompt_tokens = prompt_tokens;
                            generation.output_tokens = completion_tokens;
                        }
                        StreamEvent::Finish { finish, .. } => generation.finish = finish,
                        StreamEvent::Done => {}
                        StreamEvent::Error(error) => failure = Some(error.to_string()),
                    }
                }
            }
            HttpEvent::Done => break,
            HttpEvent::Failed(message) => {
                failure = Some(format!("the reply endpoint failed: {message}"));
                break;
            }
        }
    }
    let result = match failure {
        Some(message) => Err(message),
        None => Ok(generation),
    };
    // The session ended meanwhile.
    let _ = tx.send((LaneKind::Brain, Some(Outcome::Generated { id, result }))).await;
}
