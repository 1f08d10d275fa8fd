//! The local provider's conversation, sans-IO: user audio and runtime commands go in
//! ([`LocalCore::handle_input`]), the outcomes of model work come back
//! ([`LocalCore::handle_outcome`]); out come the [`Job`]s the shell must run and the
//! [`ProviderEvent`]s for the runtime. No clock, no threads, no models: time is the count of user
//! samples received, so every behaviour is testable with scripted outcomes in microseconds.
//!
//! A turn: the detector (svc_vad's earshot detector with the session's silence) opens a user turn
//! → partial transcriptions of the audio so far stream user transcript fragments → the turn ends
//! on silence → a final transcription → the reply model streams text → each complete sentence is
//! spoken as soon as it exists → assistant transcript fragments go out with each sentence's audio
//! → the final transcript and `ResponseDone`. User speech during a reply cancels the generation
//! and the speech not yet made (barge-in); the runtime then reports how much was played, and the
//! transcript and the conversation keep only what was heard.
//!
//! Preemptive generation: 200 ms into the turn's trailing silence a [`Draft`] transcribes the turn
//! so far and starts the reply, holding every outcome back. When the silence reaches the
//! detector's pause the draft is adopted: its transcription is the final one and what it wrote is
//! replayed into the response, so the user waits only for what is left. Voice before that
//! discards it (its generation is cancelled) and the turn goes on.

use std::collections::VecDeque;

use serde_json::Value;
use svc_audio::vad::{TurnDetector, TurnDetectorConfig, VadOutput};
use svc_llm::{ChatMessage, ChatRole, Finish, GenerateParams, Generation, ToolCall, ToolDef};
use svc_provider_core::{ProviderError, ProviderEvent, ProviderInput, ResponseStatus, Role, TranscriptTurn};
use svc_wire::rest::UsageTokens;

use crate::sentences::{SentenceSplitter, VoiceBudget};

mod jobs;

pub use jobs::{Job, Outcome};

/// The pipeline's input rate (Whisper's).
pub const RATE_HZ: u32 = svc_stt::RATE_HZ;
/// Rate of the speech the shell returns.
pub const SPEECH_RATE_HZ: u32 = crate::tts::RATE_HZ;
/// Sentences a spoken reply has at most: a voice agent answers briefly, and the user can ask on.
pub const MAX_REPLY_SENTENCES: usize = 2;
/// Messages of conversation the prompt holds at most (see `history_start`): the question and
/// the two exchanges before it at most. With sixteen, SmolLM2-135M answered new questions with
/// copies of its earlier replies ("I'm sorry but unfortunately we don't have any plans available
/// right now" to three different questions in a 12-turn `local-turns` run); with six it did not.
const HISTORY_MAX: usize = 6;
/// How far the start of the prompt's conversation moves at a time (half of [`HISTORY_MAX`], so
/// the prompt holds three to six messages).
const HISTORY_STEP: usize = 3;
/// Longest run of tool rounds in one reply: a model that keeps calling tools is stopped.
const MAX_TOOL_ROUNDS: u32 = 3;
/// Audio tokens per second of audio in usage: one per 100 ms, OpenAI Realtime's rate for user audio.
const AUDIO_TOKENS_PER_SECOND: f64 = 10.0;
/// The longest user turn kept for transcription (the detector ends turns at a minute).
const MAX_TURN_SAMPLES: usize = 61 * RATE_HZ as usize;
/// Silence after which the reply is prepared before the turn ends (preemptive generation), by
/// default: late enough that a breath inside a sentence rarely starts one, early enough that
/// Whisper (~0.25 s) and most of the first sentence (~0.4 s) are done when a 600 ms turn ends.
pub const DEFAULT_PREEMPT_AFTER_MS: u32 = 200;

/// How a session's pipeline behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreConfig {
    /// The system prompt (persona and speaking style).
    pub system_prompt: String,
    /// Tools the model may call.
    pub tools: Vec<ToolDef>,
    /// Spoken first.
    pub greeting: Option<String>,
    /// Earlier conversation (resume by transcript).
    pub history: Vec<TranscriptTurn>,
    /// Replies as model text, nothing spoken.
    pub text_only: bool,
    /// The user-turn detector.
    pub detector: TurnDetectorConfig,
    /// Sampling of replies (the seed advances per reply).
    pub params: GenerateParams,
    /// A partial transcription every this much turn audio, in milliseconds (0: none).
    pub partial_every_ms: u32,
    /// Preemptive generation: after this much silence in an open turn, transcribe it and start
    /// the reply, held back until the turn really ends (and thrown away if the user speaks on).
    /// 0, or not less than the detector's pause, turns it off.
    pub preempt_after_ms: u32,
}

/// A sentence whose audio went out.
#[derive(Debug, Clone, PartialEq)]
struct Said {
    text: String,
    samples: usize,
}

/// The reply being made.
#[derive(Debug)]
struct Response {
    /// The generation in flight, if any.
    generation: Option<u64>,
    splitter: SentenceSplitter,
    budget: VoiceBudget,
    /// Everything generated (text-only: the reply).
    generated: String,
    /// Speech jobs sent and not yet back, in order.
    speaking: VecDeque<(u64, String)>,
    said: Vec<Said>,
    /// Tool calls waiting for their results: (call id, result).
    awaiting: Vec<(String, Option<String>)>,
    tool_rounds: u32,
}

impl Response {
    /// A reply with nothing said yet: `generation` in flight (none for a greeting), `generated`
    /// its text so far.
    fn new(generation: Option<u64>, generated: String) -> Response {
        Response {
            generation,
            splitter: SentenceSplitter::default(),
            budget: VoiceBudget::new(MAX_REPLY_SENTENCES),
            generated,
            speaking: VecDeque::new(),
            said: Vec::new(),
            awaiting: Vec::new(),
            tool_rounds: 0,
        }
    }
}

/// The last finished reply, kept until the next one: a barge-in may still cut what it played.
#[derive(Debug)]
struct Finished {
    said: Vec<Said>,
    /// Index of its message in the history.
    message: Option<usize>,
    transcript: String,
    /// The user spoke over it: its final transcript waits for the runtime's `BargeIn`, which
    /// says how much of it was played (sent at once, it would be everything that was said).
    final_held: bool,
}

/// The open user turn.
#[derive(Debug)]
struct Turn {
    started_ms: u64,
    audio: Vec<i16>,
    /// Samples of the turn at the last partial transcription.
    partial_at: usize,
    partial_in_flight: Option<u64>,
    partial_text: String,
    /// The reply prepared during the turn's trailing silence.
    draft: Option<Draft>,
}

/// A reply prepared before its turn ended (preemptive generation): the turn's audio so far is
/// transcribed and the reply generated, but nothing is said or sent until the turn ends. Then
/// its transcription is the turn's final one, and its generation becomes the response, with what
/// it wrote so far replayed. Valid only while no voice follows the audio it heard: the user
/// speaking on discards it.
#[derive(Debug)]
struct Draft {
    /// Its transcription job (the turn's final transcription if the draft is adopted).
    transcription: u64,
    /// The transcript, once back.
    transcript: Option<String>,
    /// Its generation, once started.
    generation: Option<u64>,
    /// The generation's outcomes, held until the turn ends.
    held: Vec<Outcome>,
    /// The transcription failed: the turn's end transcribes again (and no other draft is made
    /// for this silence, so a failing model is not asked every 20 ms).
    failed: bool,
}

/// The conversation. See the module docs.
pub struct LocalCore {
    cfg: CoreConfig,
    detector: TurnDetector,
    vad_out: Vec<VadOutput>,
    samples_in: u64,
    muted: bool,
    turn: Option<Turn>,
    /// Final transcriptions in flight: (job, speech start).
    finals: VecDeque<(u64, u64)>,
    /// The draft of a turn that has ended, until its transcript decides its fate.
    adopted: Option<Draft>,
    history: Vec<ChatMessage>,
    notes: Vec<String>,
    response: Option<Response>,
    last: Option<Finished>,
    /// A generation stopped because its reply had all its sentences: its outcome only adds usage.
    cut_generation: Option<u64>,
    next_id: u64,
    replies: u64,
    usage: UsageTokens,
    tts_failed: bool,
    jobs: VecDeque<Job>,
    events: VecDeque<ProviderEvent>,
    closed: bool,
}

impl std::fmt::Debug for LocalCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCore")
            .field("samples_in", &self.samples_in)
            .field("turn_open", &self.turn.is_some())
            .field("responding", &self.response.is_some())
            .finish_non_exhaustive()
    }
}

impl LocalCore {
    /// A conversation with `cfg`; nothing happens until [`LocalCore::start`].
    pub fn new(cfg: CoreConfig) -> LocalCore {
        let history = cfg
            .history
            .iter()
            .map(|turn| match turn.role {
                Role::User => ChatMessage::user(turn.text.clone()),
                Role::Assistant => ChatMessage::assistant(turn.text.clone()),
            })
            .collect();
        LocalCore {
            detector: TurnDetector::new(cfg.detector),
            cfg,
            vad_out: Vec::new(),
            samples_in: 0,
            muted: false,
            turn: None,
            finals: VecDeque::new(),
            adopted: None,
            history,
            notes: Vec::new(),
            response: None,
            last: None,
            cut_generation: None,
            next_id: 1,
            replies: 0,
            usage: UsageTokens::default(),
            tts_failed: false,
            jobs: VecDeque::new(),
            events: VecDeque::new(),
            closed: false,
        }
    }

    /// The models are loaded: the session is ready, and the greeting is spoken.
    pub fn start(&mut self) {
        self.events.push_back(ProviderEvent::Ready { upstream_session_id: None });
        if let Some(greeting) = self.cfg.greeting.clone().filter(|text| !text.trim().is_empty()) {
            self.say(&greeting);
        }
    }

    /// The prompt a reply would get now (system prompt and conversation) and the tools offered:
    /// what the shell reads into the model ahead of the first turn.
    pub fn prompt(&self) -> (Vec<ChatMessage>, Vec<ToolDef>) {
        (self.messages(), self.cfg.tools.clone())
    }

    /// The next job for the shell.
    pub fn poll_job(&mut self) -> Option<Job> {
        self.jobs.pop_front()
    }

    /// The next event for the runtime.
    pub fn poll_event(&mut self) -> Option<ProviderEvent> {
        self.events.pop_front()
    }

    /// Whether the conversation is over ([`ProviderInput::Close`] or a fatal error).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Milliseconds of user audio received: the pipeline's clock.
    fn now_ms(&self) -> u64 {
        self.samples_in * 1000 / u64::from(RATE_HZ)
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A command or audio from the runtime (audio at [`RATE_HZ`], the runtime decodes to it).
    pub fn handle_input(&mut self, input: ProviderInput) {
        if self.closed {
            return;
        }
        match input {
            ProviderInput::NativeAudio(pcm) => self.audio(&pcm),
            ProviderInput::Text(text) => {
                self.history.push(ChatMessage::user(text));
                self.reply();
            }
            ProviderInput::Context(text) => self.notes.push(text),
            ProviderInput::Note { text, respond } => {
                if respond {
                    self.history.push(ChatMessage::user(format!("(A note, not from the user: {text})")));
                    if self.response.is_none() {
                        self.reply();
                    }
                } else {
                    self.notes.push(text);
                }
            }
            ProviderInput::ActivityEnd => {
                self.detector.force_end(&mut self.vad_out);
                self.drain_vad();
            }
            ProviderInput::Mute(muted) => {
                if muted {
                    self.detector.force_end(&mut self.vad_out);
                    self.drain_vad();
                }
                self.muted = muted;
            }
            ProviderInput::ToolResult { call_id, output, is_error, .. } => {
                self.tool_result(&call_id, &output, is_error)
            }
            ProviderInput::BargeIn { played_ms } => self.barge_in(played_ms),
            ProviderInput::Greeting(text) => self.say(&text),
            ProviderInput::Close => {
                self.cancel_response();
                self.closed = true;
                self.events.push_back(ProviderEvent::Closed { reason: "closed".to_owned() });
            }
            // svc_vad's start (the local detector runs here), images, delegation: nothing to do.
            ProviderInput::ActivityStart | ProviderInput::Image { .. } | ProviderInput::DelegationAppend { .. } => {}
        }
    }

    /// The outcome of a job.
    pub fn handle_outcome(&mut self, outcome: Outcome) {
        if self.closed {
            return;
        }
        let Some(outcome) = self.hold(outcome) else { return };
        match outcome {
            Outcome::Transcribed { id, result } => self.transcribed(id, result),
            Outcome::Text { id, text } => self.text(id, &text),
            Outcome::Generated { id, result } => self.generated(id, result),
            Outcome::Spoken { id, result } => self.spoken(id, result),
        }
    }

    /// A fatal failure of the pipeline (models could not load): the session ends.
    pub fn fail(&mut self, code: &str, message: String) {
        self.events.push_back(ProviderEvent::Error(ProviderError { fatal: true, code: code.to_owned(), message }));
        self.closed = true;
        self.events.push_back(ProviderEvent::Closed { reason: code.to_owned() });
    }

    // -----------------------------------------------------------------------------------------
    // User turns

    fn audio(&mut self, pcm: &[i16]) {
        if self.muted {
            return;
        }
        self.samples_in += pcm.len() as u64;
        self.detector.push(pcm, &mut self.vad_out);
        self.drain_vad();
        self.maybe_draft();
    }

    fn drain_vad(&mut self) {
        let outputs = std::mem::take(&mut self.vad_out);
        for output in outputs {
            match output {
                VadOutput::Started => self.speech_started(),
                VadOutput::Audio(pcm) => {
                    if let Some(turn) = &mut self.turn {
                        let room = MAX_TURN_SAMPLES.saturating_sub(turn.audio.len());
                        turn.audio.extend_from_slice(&pcm[..pcm.len().min(room)]);
                    }
                    self.maybe_partial();
                }
                VadOutput::Ended(_) => self.speech_stopped(),
            }
        }
    }

    fn speech_started(&mut self) {
        let started_ms = self.now_ms();
        self.turn = Some(Turn {
            started_ms,
            audio: Vec::new(),
            partial_at: 0,
            partial_in_flight: None,
            partial_text: String::new(),
            draft: None,
        });
        // The previous turn's reply, prepared or not, is not wanted any more.
        if let Some(draft) = self.adopted.take() {
            self.discard(draft);
        }
        self.events.push_back(ProviderEvent::UserSpeechStarted);
        let audible = self.response.as_ref().is_some_and(|r| !r.said.is_empty() || !r.speaking.is_empty())
            || self.last.as_ref().is_some_and(|last| !last.said.is_empty());
        if audible {
            self.events.push_back(ProviderEvent::Interrupted);
            self.interrupt_response();
        } else {
            self.cancel_response();
        }
    }

    fn maybe_partial(&mut self) {
        let every = self.cfg.partial_every_ms as usize * RATE_HZ as usize / 1000;
        if every == 0 {
            return;
        }
        let Some(turn) = &self.turn else { return };
        // A draft's transcription is the newest transcript there will be, and one is coming when
        // the silence has gone on for half the wait: a partial now would only hold it up.
        let draft_near =
            self.cfg.preempt_after_ms > 0 && self.detector.trailing_silence_ms() >= self.cfg.preempt_after_ms / 2;
        if turn.partial_in_flight.is_some()
            || turn.draft.is_some()
            || draft_near
            || turn.audio.len() < turn.partial_at + every
        {
            return;
        }
        let pcm = turn.audio.clone();
        let id = self.id();
        if let Some(turn) = &mut self.turn {
            turn.partial_at = pcm.len();
            turn.partial_in_flight = Some(id);
        }
        self.jobs.push_back(Job::Transcribe { id, pcm, partial: true });
    }

    /// Starts a draft once the open turn's silence is long enough; discards it when voice
    /// follows.
    fn maybe_draft(&mut self) {
        let after = self.cfg.preempt_after_ms;
        if after == 0 || after >= self.detector.config().pause_ms {
            return;
        }
        let silence = self.detector.trailing_silence_ms();
        let Some(turn) = &mut self.turn else { return };
        if silence < after {
            if let Some(draft) = turn.draft.take() {
                self.discard(draft);
            }
            return;
        }
        if turn.draft.is_some() || turn.audio.is_empty() {
            return;
        }
        let pcm = turn.audio.clone();
        let transcription = self.id();
        if let Some(turn) = &mut self.turn {
            turn.draft =
                Some(Draft { transcription, transcript: None, generation: None, held: Vec::new(), failed: false });
        }
        self.jobs.push_back(Job::Transcribe { id: transcription, pcm, partial: false });
    }

    /// Stops a draft's generation; its transcription, if still running, comes back unheard.
    fn discard(&mut self, draft: Draft) {
        if let Some(id) = draft.generation {
            self.jobs.push_back(Job::Cancel { id });
        }
    }

    fn speech_stopped(&mut self) {
        let Some(mut turn) = self.turn.take() else { return };
        self.events.push_back(ProviderEvent::UserSpeechStopped);
        self.usage.input_audio_tokens += audio_tokens(turn.audio.len(), RATE_HZ);
        // The draft heard everything but silence: its transcription is the turn's.
        if let Some(mut draft) = turn.draft.take().filter(|draft| !draft.failed) {
            let id = draft.transcription;
            self.finals.push_back((id, turn.started_ms));
            let transcript = draft.transcript.take();
            self.adopted = Some(draft);
            if let Some(text) = transcript {
                self.transcribed(id, Ok(text));
            }
            return;
        }
        let id = self.id();
        self.finals.push_back((id, turn.started_ms));
        self.jobs.push_back(Job::Transcribe { id, pcm: turn.audio, partial: false });
    }

    /// The draft's transcript is back while its turn is still open: start its reply, unless a
    /// reply is already being made (then the turn's end starts one the usual way).
    fn draft_transcribed(&mut self, text: String) {
        if text.trim().is_empty() || self.response.is_some() {
            if let Some(draft) = self.turn.as_mut().and_then(|turn| turn.draft.as_mut()) {
                draft.transcript = Some(text);
            }
            return;
        }
        let id = self.id();
        let mut messages = self.messages_before(1);
        messages.push(ChatMessage::user(text.clone()));
        let params = self.reply_params(self.replies + 1);
        self.jobs.push_back(Job::Generate { id, messages, tools: self.cfg.tools.clone(), params });
        if let Some(draft) = self.turn.as_mut().and_then(|turn| turn.draft.as_mut()) {
            draft.transcript = Some(text);
            draft.generation = Some(id);
        }
    }

    /// Holds an outcome of a draft's generation until the draft is adopted; gives back any
    /// other outcome.
    fn hold(&mut self, outcome: Outcome) -> Option<Outcome> {
        let (Outcome::Text { id, .. } | Outcome::Generated { id, .. }) = &outcome else { return Some(outcome) };
        let open = self.turn.as_mut().and_then(|turn| turn.draft.as_mut());
        let Some(draft) = open.into_iter().chain(self.adopted.as_mut()).find(|draft| draft.generation == Some(*id))
        else {
            return Some(outcome);
        };
        draft.held.push(outcome);
        None
    }

    fn transcribed(&mut self, id: u64, result: Result<String, String>) {
        if let Some(turn) = &mut self.turn
            && let Some(draft) = &turn.draft
            && draft.transcription == id
        {
            match result {
                Ok(text) => self.draft_transcribed(text),
                Err(_) => {
                    if let Some(draft) = &mut turn.draft {
                        draft.failed = true;
                    }
                }
            }
            return;
        }
        if let Some(turn) = &mut self.turn
            && turn.partial_in_flight == Some(id)
        {
            turn.partial_in_flight = None;
            // Fragments append: only a partial that extends the previous one adds its new words.
            if let Ok(text) = result
                && let Some(added) = text.strip_prefix(turn.partial_text.as_str())
                && !added.trim().is_empty()
            {
                let fragment = added.to_owned();
                turn.partial_text = text;
                let speech_started_ms = turn.started_ms;
                self.events.push_back(ProviderEvent::UserTranscript {
                    text: fragment,
                    is_final: false,
                    speech_started_ms,
                });
            }
            return;
        }
        let Some(position) = self.finals.iter().position(|(final_id, _)| *final_id == id) else { return };
        let Some((_, speech_started_ms)) = self.finals.remove(position) else { return };
        match result {
            Ok(text) if !text.trim().is_empty() => {
                self.events.push_back(ProviderEvent::UserTranscript {
                    text: text.clone(),
                    is_final: true,
                    speech_started_ms,
                });
                self.history.push(ChatMessage::user(text));
                self.publish_usage();
                // A newer turn already open means the user is still talking: its end answers.
                if self.turn.is_none() && self.finals.is_empty() {
                    self.answer_turn(id);
                } else {
                    self.drop_adopted(id);
                }
            }
            Ok(_) => {
                self.drop_adopted(id);
                self.publish_usage();
            }
            Err(message) => {
                self.drop_adopted(id);
                self.error("local_transcription_failed", message);
            }
        }
    }

    /// Discards the adopted draft of the turn transcribed by `id`.
    fn drop_adopted(&mut self, id: u64) {
        if self.adopted.as_ref().is_some_and(|draft| draft.transcription == id)
            && let Some(draft) = self.adopted.take()
        {
            self.discard(draft);
        }
    }

    /// Replies to the turn transcribed by `id`: with its draft's generation when there is one
    /// (replaying what it wrote so far), else with a new one.
    fn answer_turn(&mut self, id: u64) {
        let draft = self.adopted.take_if(|draft| draft.transcription == id);
        // A reply begun after the draft's (a `send-text` during the silence) would be cancelled
        // by id, and the shell cancels every generation up to an id: the draft cannot survive
        // that, so the turn gets a fresh reply.
        let current = self.response.as_ref().and_then(|response| response.generation);
        match draft {
            Some(Draft { generation: Some(generation), held, .. })
                if current.is_none_or(|current| current < generation) =>
            {
                self.begin_response(generation);
                for outcome in held {
                    self.handle_outcome(outcome);
                }
            }
            other => {
                if let Some(draft) = other {
                    self.discard(draft);
                }
                self.reply();
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Replies

    fn messages(&self) -> Vec<ChatMessage> {
        self.messages_before(0)
    }

    /// The prompt's messages for a reply that will come after `upcoming` more messages (the
    /// user's next one), without them.
    fn messages_before(&self, upcoming: usize) -> Vec<ChatMessage> {
        let mut system = self.cfg.system_prompt.clone();
        if !self.notes.is_empty() {
            system.push_str("\n\nContext:");
            for note in &self.notes {
                system.push_str("\n- ");
                system.push_str(note);
            }
        }
        let mut messages = vec![ChatMessage::system(system)];
        // A reply cut before its first word was never heard: it is not part of the conversation.
        let heard = |message: &&ChatMessage| {
            !(message.role == ChatRole::Assistant && message.content.is_empty() && message.tool_calls.is_empty())
        };
        let start = history_start(&self.history, upcoming);
        messages.extend(self.history[start..].iter().filter(heard).cloned());
        messages
    }

    fn reply(&mut self) {
        let id = self.id();
        self.begin_response(id);
        let params = self.reply_params(self.replies);
        self.jobs.push_back(Job::Generate { id, messages: self.messages(), tools: self.cfg.tools.clone(), params });
    }

    /// Makes `generation` the reply in progress (the one before is cancelled).
    fn begin_response(&mut self, generation: u64) {
        self.cancel_response();
        self.replies += 1;
        self.response = Some(Response::new(Some(generation), String::new()));
        self.last = None;
        self.events.push_back(ProviderEvent::ResponseStarted);
    }

    /// Sampling for reply number `reply`: the seed advances per reply.
    fn reply_params(&self, reply: u64) -> GenerateParams {
        GenerateParams { seed: self.cfg.params.seed.wrapping_add(reply), ..self.cfg.params }
    }

    /// Speaks `text` as a response of its own (the greeting), without the model.
    fn say(&mut self, text: &str) {
        self.cancel_response();
        self.last = None;
        self.response = Some(Response::new(None, text.to_owned()));
        self.events.push_back(ProviderEvent::ResponseStarted);
        if self.cfg.text_only {
            self.events.push_back(ProviderEvent::ModelText { text: text.to_owned(), is_final: false, thought: false });
        } else {
            let mut splitter = SentenceSplitter::default();
            let mut sentences = splitter.push(text);
            sentences.extend(splitter.finish());
            self.speak(sentences);
        }
        self.maybe_finish();
    }

    fn text(&mut self, id: u64, piece: &str) {
        let Some(response) = &mut self.response else { return };
        if response.generation != Some(id) {
            return;
        }
        response.generated.push_str(piece);
        if self.cfg.text_only {
            if !piece.is_empty() {
                self.events.push_back(ProviderEvent::ModelText {
                    text: piece.to_owned(),
                    is_final: false,
                    thought: false,
                });
            }
            return;
        }
        let sentences = response.splitter.push(piece);
        let sentences = response.budget.admit(sentences);
        let full = response.budget.is_full();
        self.speak(sentences);
        if full {
            // The reply has its sentences: the rest of the generation is not wanted (its
            // outcome still comes, and counts in usage).
            if let Some(response) = &mut self.response
                && let Some(id) = response.generation.take()
            {
                self.jobs.push_back(Job::Cancel { id });
                self.cut_generation = Some(id);
            }
            self.maybe_finish();
        }
    }

    fn speak(&mut self, sentences: Vec<String>) {
        for sentence in sentences {
            let id = self.id();
            self.jobs.push_back(Job::Speak { id, text: sentence.clone() });
            if let Some(response) = &mut self.response {
                response.speaking.push_back((id, sentence));
            }
        }
    }

    fn generated(&mut self, id: u64, result: Result<Generation, String>) {
        if self.cut_generation == Some(id) {
            self.cut_generation = None;
            if let Ok(generation) = &result {
                self.usage.input_text_tokens += i64::from(generation.prompt_tokens);
                self.usage.output_text_tokens += i64::from(generation.output_tokens);
            }
            return;
        }
        let Some(response) = &mut self.response else { return };
        if response.generation != Some(id) {
            return;
        }
        response.generation = None;
        let generation = match result {
            Ok(generation) => generation,
            Err(message) => {
                self.error("local_generation_failed", message);
                self.finish(ResponseStatus::Failed);
                return;
            }
        };
        self.usage.input_text_tokens += i64::from(generation.prompt_tokens);
        self.usage.output_text_tokens += i64::from(generation.output_tokens);
        if generation.finish == Finish::ToolCalls && !generation.tool_calls.is_empty() {
            self.call_tools(generation);
            return;
        }
        if !self.cfg.text_only {
            let rest = response.splitter.finish();
            let rest = response.budget.admit_tail(rest, generation.finish == Finish::Length);
            self.speak(rest);
        }
        self.maybe_finish();
    }

    fn call_tools(&mut self, generation: Generation) {
        let Some(response) = &mut self.response else { return };
        response.tool_rounds += 1;
        self.history
            .push(ChatMessage::assistant_with_tool_calls(generation.text.clone(), generation.tool_calls.clone()));
        for ToolCall { id, name, arguments } in generation.tool_calls {
            response.awaiting.push((id.clone(), None));
            let arguments = serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
            self.events.push_back(ProviderEvent::ToolCall { call_id: id, name, arguments });
        }
        self.publish_usage();
    }

    fn tool_result(&mut self, call_id: &str, output: &Value, is_error: bool) {
        let Some(response) = &mut self.response else { return };
        let Some(slot) = response.awaiting.iter_mut().find(|(id, result)| id == call_id && result.is_none()) else {
            return;
        };
        let text = match output {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        slot.1 = Some(if is_error { format!("Error: {text}") } else { text });
        if response.awaiting.iter().any(|(_, result)| result.is_none()) {
            return;
        }
        let answered = std::mem::take(&mut response.awaiting);
        for (id, result) in answered {
            self.history.push(ChatMessage::tool_result(id, result.unwrap_or_default()));
        }
        let rounds = response.tool_rounds;
        if rounds >= MAX_TOOL_ROUNDS {
            self.maybe_finish();
            return;
        }
        let id = self.id();
        let params = GenerateParams {
            seed: self.cfg.params.seed.wrapping_add(self.replies * 31 + u64::from(rounds)),
            ..self.cfg.params
        };
        let tools = self.cfg.tools.clone();
        let messages = self.messages();
        if let Some(response) = &mut self.response {
            response.generation = Some(id);
        }
        self.jobs.push_back(Job::Generate { id, messages, tools, params });
    }

    fn spoken(&mut self, id: u64, result: Result<Vec<i16>, String>) {
        let Some(response) = &mut self.response else { return };
        let Some(position) = response.speaking.iter().position(|(job, _)| *job == id) else { return };
        let Some((_, text)) = response.speaking.remove(position) else { return };
        // The text reaches the transcript whether or not it could be spoken.
        let fragment = if response.said.is_empty() { text.clone() } else { format!(" {text}") };
        response.said.push(Said { text, samples: result.as_ref().map_or(0, Vec::len) });
        self.events.push_back(ProviderEvent::AssistantTranscript { text: fragment, is_final: false });
        match result {
            Ok(pcm) => {
                self.usage.output_audio_tokens += audio_tokens(pcm.len(), SPEECH_RATE_HZ);
                self.events.push_back(ProviderEvent::AssistantAudio { pcm, sample_rate: SPEECH_RATE_HZ });
            }
            Err(message) => {
                // Said once per session.
                if !self.tts_failed {
                    self.tts_failed = true;
                    self.error("local_speech_failed", message);
                }
            }
        }
        self.maybe_finish();
    }

    /// Ends the response once nothing of it is outstanding.
    fn maybe_finish(&mut self) {
        let Some(response) = &self.response else { return };
        if response.generation.is_some() || !response.speaking.is_empty() || !response.awaiting.is_empty() {
            return;
        }
        self.finish(ResponseStatus::Completed);
    }

    fn finish(&mut self, status: ResponseStatus) {
        self.finish_with(status, false);
    }

    /// Ends the response; with `hold_final`, its final transcript waits for the barge-in.
    fn finish_with(&mut self, status: ResponseStatus, hold_final: bool) {
        let Some(response) = self.response.take() else { return };
        let transcript = if self.cfg.text_only {
            response.generated.trim().to_owned()
        } else {
            response.said.iter().map(|said| said.text.as_str()).collect::<Vec<_>>().join(" ")
        };
        if self.cfg.text_only {
            self.events.push_back(ProviderEvent::ModelText {
                text: transcript.clone(),
                is_final: true,
                thought: false,
            });
        } else if !transcript.is_empty() && !hold_final {
            // Nothing said, no final: an empty reply is not a turn.
            self.events.push_back(ProviderEvent::AssistantTranscript { text: transcript.clone(), is_final: true });
        }
        let message = (!transcript.is_empty()).then(|| {
            self.history.push(ChatMessage::assistant(transcript.clone()));
            self.history.len() - 1
        });
        // Usage once everything of the response is counted (its last sentence's audio included).
        self.publish_usage();
        let completed = status == ResponseStatus::Completed;
        self.events.push_back(ProviderEvent::ResponseDone { status });
        if completed {
            // While the reply plays and the user answers, the model can read the conversation
            // so far: the next reply then reads only the user's words.
            self.jobs.push_back(Job::ReadAhead { messages: self.messages_before(1), tools: self.cfg.tools.clone() });
        }
        let final_held = hold_final && !self.cfg.text_only;
        self.last = Some(Finished { said: response.said, message, transcript, final_held });
    }

    /// Stops the reply in progress: generation cancelled, speech not yet made dropped, open tool
    /// calls abandoned. What was already said stays said.
    fn cancel_response(&mut self) {
        self.stop_response(false);
    }

    /// Like [`Self::cancel_response`] for the user talking over the reply: its final transcript
    /// is what the runtime says was played.
    fn interrupt_response(&mut self) {
        self.stop_response(true);
    }

    fn stop_response(&mut self, hold_final: bool) {
        let Some(response) = &mut self.response else { return };
        if let Some(id) = response.generation.take() {
            self.jobs.push_back(Job::Cancel { id });
        }
        if let Some((newest, _)) = response.speaking.back() {
            self.jobs.push_back(Job::DropSpeech { before: newest + 1 });
        }
        response.speaking.clear();
        let abandoned: Vec<String> =
            response.awaiting.drain(..).filter(|(_, result)| result.is_none()).map(|(id, _)| id).collect();
        if !abandoned.is_empty() {
            self.events.push_back(ProviderEvent::ToolCallsCancelled { call_ids: abandoned });
        }
        self.finish_with(ResponseStatus::Cancelled, hold_final);
    }

    /// The runtime cut playback after `played_ms` of the last reply's audio: keep what was heard.
    /// Its answer is the final transcript (held since the interruption) or a truncation; with
    /// nothing played (`0`: the runtime ended the reply unheard, without a turn) it answers
    /// nothing. A reply cut before its first word leaves no assistant message in the history.
    fn barge_in(&mut self, played_ms: u64) {
        let Some(last) = &mut self.last else { return };
        let held = std::mem::take(&mut last.final_held);
        let heard = heard_text(&last.said, played_ms);
        if heard == last.transcript && !held {
            return;
        }
        last.transcript.clone_from(&heard);
        if let Some(index) = last.message
            && let Some(message) = self.history.get_mut(index)
        {
            message.content.clone_from(&heard);
        }
        if played_ms > 0 {
            self.events.push_back(ProviderEvent::AssistantTruncated { heard });
        }
    }

    fn error(&mut self, code: &str, message: String) {
        self.events.push_back(ProviderEvent::Error(ProviderError { fatal: false, code: code.to_owned(), message }));
    }

    fn publish_usage(&mut self) {
        let usage = &mut self.usage;
        usage.input_tokens = usage.input_text_tokens + usage.input_audio_tokens;
        usage.output_tokens = usage.output_text_tokens + usage.output_audio_tokens;
        usage.total_tokens = usage.input_tokens + usage.output_tokens;
        self.events.push_back(ProviderEvent::Usage(self.usage.clone()));
    }
}

/// Where the prompt's conversation starts, for a prompt that will add `upcoming` messages to
/// `history` (the user's next one: a draft's prompt, or one read ahead): the whole history while
/// it is short; past [`HISTORY_MAX`] messages, the recent ones from a start that moves in steps of
/// [`HISTORY_STEP`] (so the prompt's beginning, and the model's cached reading of it, stays the
/// same for several turns), then on to the first user message (never a reply or a tool result
/// without what it answers). Keeps the prompt, and the time to the first word, from growing with
/// the conversation.
fn history_start(history: &[ChatMessage], upcoming: usize) -> usize {
    let len = history.len() + upcoming;
    if len <= HISTORY_MAX {
        return 0;
    }
    let start = ((len - HISTORY_STEP) / HISTORY_STEP * HISTORY_STEP).min(history.len());
    history[start..].iter().position(|message| message.role == ChatRole::User).map_or(start, |at| start + at)
}

fn audio_tokens(samples: usize, rate: u32) -> i64 {
    (samples as f64 / f64::from(rate) * AUDIO_TOKENS_PER_SECOND).round() as i64
}

/// The words of `said` that `played_ms` of its audio covered: whole sentences, then the share of
/// the next one's words its played part covers.
fn heard_text(said: &[Said], played_ms: u64) -> String {
    let mut left = (played_ms as f64 / 1000.0 * f64::from(SPEECH_RATE_HZ)) as usize;
    let mut heard: Vec<&str> = Vec::new();
    for sentence in said {
        if left >= sentence.samples {
            heard.push(&sentence.text);
            left -= sentence.samples;
            continue;
        }
        let words: Vec<&str> = sentence.text.split_whitespace().collect();
        let share = left as f64 / sentence.samples.max(1) as f64;
        let count = (words.len() as f64 * share).floor() as usize;
        if count > 0 {
            let end = words[..count].iter().map(|word| word.len() + 1).sum::<usize>() - 1;
            heard.push(sentence.text.get(..end).unwrap_or(&sentence.text));
        }
        break;
    }
    heard.join(" ")
}

#[cfg(test)]
mod tests;
