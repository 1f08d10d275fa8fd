//! The sans-IO codec contract every provider implements, and the pieces all codecs share.
//!
//! A codec is a plain state machine: the IO shell ([`crate::driver`]) feeds it what happened
//! (`handle_*`, each with the current time) and drains what to do (`poll_*`). It never touches a
//! socket, a timer or the clock, so behaviour tests run it in virtual time, and exactly one task
//! owns it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use svc_http::{HttpEvent, HttpRequest};
use svc_provider_core::{ProviderError, ProviderEvent, ProviderInput, Role, SessionSetup, TranscriptTurn};

use crate::unread::{ReadReceipt, UnreadAudio};
use crate::usage::UsageMeter;

/// Where and how to open the upstream WebSocket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// `ws://` or `wss://` URL.
    pub url: String,
    /// Extra request headers (authentication).
    pub headers: Vec<(String, String)>,
}

/// What the IO shell must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// Send one text frame on the open socket.
    Text(String),
    /// Close the current socket (if any) and open a new one.
    Connect(ConnectRequest),
    /// Close the socket; the session is over.
    Close,
    /// Perform an HTTP request (GPT-Live `svc` delegation calls the Responses API) and report
    /// its progress with [`Codec::handle_http`].
    Http(HttpRequest),
}

/// Why opening the socket failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectFailure {
    /// HTTP status of a refused upgrade (401, 403, 429, …).
    pub status: Option<u16>,
    /// What happened.
    pub message: String,
}

/// A provider's sans-IO protocol state machine.
pub trait Codec: Send + 'static {
    /// Input from the runtime.
    fn handle_input(&mut self, now: Instant, input: ProviderInput);
    /// The socket requested by the last [`Transmit::Connect`] is open.
    fn handle_connected(&mut self, now: Instant);
    /// The socket requested by the last [`Transmit::Connect`] could not be opened.
    fn handle_connect_failed(&mut self, now: Instant, failure: ConnectFailure);
    /// A message arrived: the payload of a text or a binary frame (both carry JSON; Gemini
    /// sends binary frames).
    fn handle_upstream_message(&mut self, now: Instant, frame: &[u8]);
    /// The socket closed (close frame, error or EOF); `code` is the close code when one came.
    fn handle_upstream_closed(&mut self, now: Instant, code: Option<u16>, reason: &str);
    /// The deadline of [`Codec::poll_timeout`] passed.
    fn handle_timeout(&mut self, now: Instant);
    /// What the driver's pings tell about the upstream's reading of the link
    /// ([`crate::unread`]).
    fn handle_read_receipt(&mut self, now: Instant, receipt: ReadReceipt);
    /// Progress of an [`HttpRequest`].
    fn handle_http(&mut self, now: Instant, id: u64, event: HttpEvent) {
        // A codec without HTTP requests ignores their progress.
        let _ = (now, id, event);
    }
    /// Next thing to do on the wire.
    fn poll_transmit(&mut self) -> Option<Transmit>;
    /// Next event for the runtime.
    fn poll_event(&mut self) -> Option<ProviderEvent>;
    /// When [`Codec::handle_timeout`] wants to be called.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The latest native resumption handle (Gemini), for `has_resumption_handle`.
    fn resumption_handle(&self) -> Option<&str>;
    /// The session is over and every transmit has been drained.
    fn is_closed(&self) -> bool;
}

/// PCM16 little-endian, base64 — the audio encoding of every provider.
pub fn encode_pcm(samples: &[i16]) -> String {
    let mut text = String::with_capacity(base64_len(samples.len() * 2));
    push_pcm_base64(samples, &mut text);
    text
}

/// Samples converted per step of [`push_pcm_base64`]: a multiple of 3 samples (6 bytes, 8
/// base64 characters), so no step but the last one pads and the steps' text joins into the
/// base64 of the whole.
const BASE64_STEP_SAMPLES: usize = 3 * 128;

/// Appends `samples` as base64 PCM16 LE to `out`, through a buffer on the stack: an audio frame
/// goes straight into its outgoing text instead of through a byte vector and a base64 string
/// of its own (two allocations and a copy per 20 ms frame).
pub fn push_pcm_base64(samples: &[i16], out: &mut String) {
    let mut bytes = [0u8; BASE64_STEP_SAMPLES * 2];
    for step in samples.chunks(BASE64_STEP_SAMPLES) {
        for (pair, sample) in bytes.chunks_exact_mut(2).zip(step) {
            pair.copy_from_slice(&sample.to_le_bytes());
        }
        B64.encode_string(&bytes[..step.len() * 2], out);
    }
}

/// Length of the padded base64 of `bytes` bytes.
fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3) * 4
}

/// A client frame that carries user audio: `before`, the audio as base64 PCM16 LE, `after` (the
/// JSON around the audio string, written by hand: the hot path builds no JSON value).
pub fn audio_frame(before: &str, pcm: &[i16], after: &str) -> String {
    let mut frame = String::with_capacity(before.len() + base64_len(pcm.len() * 2) + after.len());
    frame.push_str(before);
    push_pcm_base64(pcm, &mut frame);
    frame.push_str(after);
    frame
}

/// Standard and URL-safe base64, padded or not: what a protobuf JSON parser accepts for `bytes`
/// (Gemini's wire is protobuf JSON; pydantic, and so google-genai's types, write URL-safe).
const B64_STANDARD_ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
const B64_URL_SAFE_ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Base64 as a protobuf JSON parser reads `bytes`: standard or URL-safe, padded or not.
pub fn decode_base64(data: &str) -> Option<Vec<u8>> {
    B64_STANDARD_ANY_PADDING.decode(data.as_bytes()).or_else(|_| B64_URL_SAFE_ANY_PADDING.decode(data.as_bytes())).ok()
}

/// Inverse of [`encode_pcm`], also reading URL-safe and unpadded base64 ([`decode_base64`]);
/// `None` for invalid base64 (an odd trailing byte is dropped).
pub fn decode_pcm(data: &str) -> Option<Vec<i16>> {
    let bytes = decode_base64(data)?;
    Some(bytes.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]])).collect())
}

/// JSON string literal of `text` (quotes included), for hand-built hot-path frames.
pub fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// Most client commands kept while the upstream reconnects.
pub const PENDING_FRAMES_MAX: usize = 256;

/// Something held for a ready link ([`Core::send_when_ready`], [`Core::buffer_audio`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// A client command, as sent.
    Frame(String),
    /// User audio at the provider rate (the codec frames it).
    Audio(Vec<i16>),
}

/// Where the upstream link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// A socket is being opened.
    Connecting,
    /// Socket open, setup sent, waiting for the upstream to confirm.
    Configuring,
    /// Takes input.
    Ready,
    /// Waiting to retry a failed connection.
    Backoff,
    /// Over.
    Closed,
}

/// State every codec shares: output queues, the clock origin, the user audio's reconnect buffer,
/// usage, the transcript (for reseeding) and the reconnect policy.
#[derive(Debug)]
pub struct Core {
    out: VecDeque<Transmit>,
    events: VecDeque<ProviderEvent>,
    origin: Option<Instant>,
    /// Client commands and user audio (at the provider rate) waiting for a ready link, in the
    /// order they were given: an activity signal must not overtake the audio before it.
    held: VecDeque<Held>,
    /// Commands in `held` (bounded by [`PENDING_FRAMES_MAX`]).
    held_frames: usize,
    /// Audio samples in `held` (bounded by `held_audio_max`: stale audio confuses detectors).
    held_audio: usize,
    held_audio_max: usize,
    /// User audio the ready link was given and has not shown it read, replayed if it drops.
    unread: UnreadAudio,
    /// Session usage across upstream sessions.
    pub usage: UsageMeter,
    /// Finished turns, ordered by when they started (ms since origin).
    history: Vec<(u64, TranscriptTurn)>,
    /// Link state.
    pub link: Link,
    /// The first upstream session is ready (later ones are reconnects).
    pub was_ready: bool,
    /// When the current reconnect episode started (budget) and how many attempts failed.
    reconnect_started: Option<Instant>,
    /// Failed attempts in the current episode.
    pub failed_attempts: u32,
    /// When to retry.
    pub retry_at: Option<Instant>,
    /// Budget for one reconnect episode.
    pub reconnect_budget: Duration,
    closing: bool,
    /// The greeting was given (or not needed): it is given once per svc session.
    greeted: bool,
    /// The provider's audio rate (held audio is replayed in 100 ms chunks of it).
    rate_hz: u32,
    /// Message types (or top-level fields) the upstream sent that svc does not know, each
    /// logged once (bounded by [`UNKNOWN_KINDS_MAX`]).
    unknown_kinds: Vec<String>,
}

/// Most distinct unknown message kinds remembered per session (later ones are not logged).
pub const UNKNOWN_KINDS_MAX: usize = 32;

impl Core {
    /// A core for a provider whose audio is at `provider_rate_hz`, buffering up to `buffer_ms` of
    /// the user's while the link is not ready.
    pub fn new(provider_rate_hz: u32, buffer_ms: u32, reconnect_budget: Duration) -> Core {
        // The outage's hold and the unconfirmed audio share one bound: both end up in the hold.
        let audio_max = (provider_rate_hz as usize) * (buffer_ms as usize) / 1000;
        Core {
            out: VecDeque::new(),
            events: VecDeque::new(),
            origin: None,
            held: VecDeque::new(),
            held_frames: 0,
            held_audio: 0,
            held_audio_max: audio_max,
            unread: UnreadAudio::new(audio_max),
            usage: UsageMeter::new(),
            history: Vec::new(),
            link: Link::Connecting,
            was_ready: false,
            reconnect_started: None,
            failed_attempts: 0,
            retry_at: None,
            reconnect_budget,
            closing: false,
            greeted: false,
            rate_hz: provider_rate_hz,
            unknown_kinds: Vec::new(),
        }
    }

    /// The core of a codec starting `setup`: audio at `provider_rate_hz`, the setup's reconnect
    /// limits, its history (a resumed conversation's transcript) recorded for reseeding, and the
    /// first connection asked for.
    pub fn start(provider_rate_hz: u32, setup: &SessionSetup, connect: &ConnectRequest) -> Core {
        let mut core = Core::new(provider_rate_hz, setup.limits.reconnect_audio_ms, setup.limits.reconnect_budget);
        for turn in &setup.history {
            core.record_turn(0, turn.role, &turn.text);
        }
        core.transmit(Transmit::Connect(connect.clone()));
        core
    }

    /// The greeting to give now that the first upstream session is ready, once: none for a
    /// conversation that continues (resumed from a transcript or a handle), none if the setup
    /// has none.
    pub fn greeting_once(&mut self, setup: &SessionSetup) -> Option<String> {
        if std::mem::replace(&mut self.greeted, true) || !setup.history.is_empty() || setup.resumption_handle.is_some()
        {
            return None;
        }
        setup.greeting.clone()
    }

    /// An upstream message of a kind svc does not know (a newer protocol revision): ignored,
    /// logged once per kind and session, never an error.
    pub fn note_unknown(&mut self, kind: &str) {
        if self.unknown_kinds.len() >= UNKNOWN_KINDS_MAX || self.unknown_kinds.iter().any(|known| known == kind) {
            return;
        }
        self.unknown_kinds.push(kind.to_owned());
        let kind: String = kind.chars().take(80).collect();
        tracing::info!(kind = %kind, "ignoring an upstream message kind svc does not know");
    }

    /// Milliseconds since the first time this core saw the clock.
    pub fn ms(&mut self, now: Instant) -> u64 {
        let origin = *self.origin.get_or_insert(now);
        u64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// Queues a frame.
    pub fn send(&mut self, text: String) {
        self.out.push_back(Transmit::Text(text));
    }

    /// Queues a JSON frame.
    pub fn send_json(&mut self, value: &serde_json::Value) {
        self.out.push_back(Transmit::Text(value.to_string()));
    }

    /// Sends a client command now if the link is ready, else keeps it (bounded) until
    /// [`Core::flush_pending`]: text turns, notes and tool outputs survive a reconnect.
    pub fn send_when_ready(&mut self, frame: String) {
        if self.link == Link::Ready {
            self.out.push_back(Transmit::Text(frame));
            return;
        }
        self.held.push_back(Held::Frame(frame));
        self.held_frames += 1;
        if self.held_frames > PENDING_FRAMES_MAX {
            if let Some(oldest) = self.held.iter().position(|held| matches!(held, Held::Frame(_))) {
                self.held.remove(oldest);
                self.held_frames -= 1;
            }
            self.emit(ProviderEvent::Error(ProviderError {
                fatal: false,
                code: "input_dropped".to_owned(),
                message: "too many commands while the upstream reconnects; the oldest was dropped".to_owned(),
            }));
        }
    }

    /// Everything held while the link was down, in order, as frames to send: commands as they
    /// were given, audio framed by `audio_frame` in chunks of at most 100 ms. On a ready link the
    /// audio counts as sent on it, unread until a pong says otherwise: a link that drops again
    /// before reading it replays it once more ([`crate::unread`]).
    pub fn take_held_frames(&mut self, audio_frame: impl Fn(&[i16]) -> String) -> Vec<String> {
        let chunk = (self.rate_hz as usize / 10).max(1);
        let mut out = Vec::with_capacity(self.held.len());
        for held in self.held.drain(..) {
            match held {
                Held::Frame(frame) => out.push(frame),
                Held::Audio(pcm) => {
                    if self.link == Link::Ready {
                        self.unread.sent(&pcm);
                    }
                    out.extend(pcm.chunks(chunk).map(&audio_frame));
                }
            }
        }
        self.held_frames = 0;
        self.held_audio = 0;
        out
    }

    /// Queues any transmit.
    pub fn transmit(&mut self, transmit: Transmit) {
        self.out.push_back(transmit);
    }

    /// Queues an event.
    pub fn emit(&mut self, event: ProviderEvent) {
        if matches!(event, ProviderEvent::ResponseStarted | ProviderEvent::UserTranscript { is_final: true, .. }) {
            self.unread.taken();
        }
        self.events.push_back(event);
    }

    /// Queues a classified error (fatal errors also close the session).
    pub fn error(&mut self, fatal: bool, code: impl Into<String>, message: impl Into<String>) {
        self.emit(ProviderEvent::Error(ProviderError { fatal, code: code.into(), message: message.into() }));
        if fatal {
            self.shut(format!("fatal upstream error: {}", self.last_error_code()));
        }
    }

    fn last_error_code(&self) -> String {
        match self.events.back() {
            Some(ProviderEvent::Error(error)) => error.code.clone(),
            _ => String::new(),
        }
    }

    /// Ends the session: closes the socket and emits `Closed` once.
    pub fn shut(&mut self, reason: impl Into<String>) {
        if self.link == Link::Closed {
            return;
        }
        self.link = Link::Closed;
        self.retry_at = None;
        self.out.push_back(Transmit::Close);
        self.emit(ProviderEvent::Closed { reason: reason.into() });
    }

    /// Whether the session is over.
    pub fn is_closed(&self) -> bool {
        self.link == Link::Closed && self.out.is_empty()
    }

    /// Marks that `Close` was asked for (socket closes after the goodbye frames).
    pub fn set_closing(&mut self) {
        self.closing = true;
    }

    /// Whether the runtime asked to close.
    pub fn closing(&self) -> bool {
        self.closing
    }

    /// Next transmit.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<ProviderEvent> {
        self.events.pop_front()
    }

    /// User audio in (at the provider's rate, [`ProviderInput::NativeAudio`]), the part every
    /// codec shares: while the link is ready, returned for the codec to frame and send (`None`
    /// when empty); otherwise kept, bounded, for the ready link ([`Core::take_held_frames`]).
    pub fn user_audio<'a>(&mut self, pcm: &'a [i16]) -> Option<&'a [i16]> {
        if self.link != Link::Ready {
            self.buffer_audio(pcm);
            return None;
        }
        if pcm.is_empty() {
            return None;
        }
        self.unread.sent(pcm);
        Some(pcm)
    }

    /// A receipt from the driver's pings, about the ready link.
    pub fn read_receipt(&mut self, receipt: ReadReceipt) {
        if self.link == Link::Ready {
            self.unread.receipt(receipt);
        }
    }

    /// The ready link dropped: the user audio it was given and never shown to have read goes
    /// first into what the next upstream session gets ([`crate::unread`]). Codecs call this
    /// before anything else on a drop (a drop that ends a user turn must not discard it first).
    pub fn keep_unread_audio(&mut self) {
        if self.link != Link::Ready {
            return;
        }
        let pcm = self.unread.take();
        if pcm.is_empty() {
            return;
        }
        self.held_audio += pcm.len();
        self.held.push_front(Held::Audio(pcm));
        self.trim_held_audio();
    }

    /// The ready link dropped and the next session resumes it with what the codec replays
    /// itself (Gemini's messages since its handle): the unread audio is among them.
    pub fn forget_unread_audio(&mut self) {
        self.unread.take();
    }

    /// Keeps user audio (at the provider's rate) for when the link is ready, after what was held
    /// before it, dropping the oldest audio beyond the bound.
    pub fn buffer_audio(&mut self, pcm: &[i16]) {
        match self.held.back_mut() {
            Some(Held::Audio(last)) => last.extend_from_slice(pcm),
            _ => self.held.push_back(Held::Audio(pcm.to_vec())),
        }
        self.held_audio += pcm.len();
        self.trim_held_audio();
    }

    /// Drops the oldest held audio beyond the bound.
    fn trim_held_audio(&mut self) {
        while self.held_audio > self.held_audio_max {
            let Some(at) = self.held.iter().position(|held| matches!(held, Held::Audio(_))) else { break };
            let excess = self.held_audio - self.held_audio_max;
            if let Some(Held::Audio(oldest)) = self.held.get_mut(at) {
                let cut = excess.min(oldest.len());
                oldest.drain(..cut);
                self.held_audio -= cut;
                if oldest.is_empty() {
                    self.held.remove(at);
                }
            }
        }
    }

    /// Records a finished turn that started at `started_ms`, keeping the history ordered by start.
    pub fn record_turn(&mut self, started_ms: u64, role: Role, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        // At equal start times the user's turn comes first: it prompted the response.
        let at = match role {
            Role::User => self
                .history
                .partition_point(|(ms, turn)| *ms < started_ms || (*ms == started_ms && turn.role == Role::User)),
            Role::Assistant => self.history.partition_point(|(ms, _)| *ms <= started_ms),
        };
        self.history.insert(at, (started_ms, TranscriptTurn { role, text: text.to_owned() }));
    }

    /// Replaces the turn of `role` that started at `started_ms` (a truncated assistant item), or
    /// records it.
    pub fn replace_turn(&mut self, started_ms: u64, role: Role, text: &str) {
        if let Some(at) = self.history.iter().position(|(ms, turn)| *ms == started_ms && turn.role == role) {
            self.history.remove(at);
        }
        self.record_turn(started_ms, role, text);
    }

    /// The transcript so far, in speech-start order.
    pub fn history(&self) -> impl Iterator<Item = &TranscriptTurn> {
        self.history.iter().map(|(_, turn)| turn)
    }

    /// The transcript rendered for reseeding a fresh upstream session.
    pub fn history_text(&self) -> String {
        let mut text = String::new();
        for turn in self.history() {
            let who = match turn.role {
                Role::User => "User",
                Role::Assistant => "Assistant",
            };
            text.push_str(who);
            text.push_str(": ");
            text.push_str(&turn.text);
            text.push('\n');
        }
        text
    }

    /// Emits the cumulative usage.
    pub fn emit_usage(&mut self) {
        let totals = self.usage.totals();
        self.emit(ProviderEvent::Usage(totals));
    }

    /// The shared answer to a failed connect: a refused key is fatal, so is any failure before
    /// the session was ever ready; later failures retry within the reconnect budget.
    pub fn connect_failed(&mut self, now: Instant, failure: ConnectFailure) {
        match failure.status {
            Some(401 | 403) => {
                self.error(true, "unauthorized", format!("upstream refused the key: {}", failure.message))
            }
            _ if !self.was_ready => self.error(true, "connect_failed", failure.message),
            _ => self.schedule_retry(now, &failure.message),
        }
    }

    /// Parses an upstream frame's payload as JSON; a frame that is not JSON is a per-turn error.
    pub fn parse_frame(&mut self, now: Instant, frame: &[u8]) -> Option<serde_json::Value> {
        self.ms(now);
        let parsed = serde_json::from_slice(frame).ok();
        if parsed.is_none() {
            self.error(false, "bad_frame", "upstream sent a frame that is not JSON");
        }
        parsed
    }

    /// A connection attempt failed or the link dropped: schedule a retry with backoff
    /// (0.5 s doubling to 4 s) within the reconnect budget, or fail the session.
    pub fn schedule_retry(&mut self, now: Instant, why: &str) {
        let started = *self.reconnect_started.get_or_insert(now);
        self.failed_attempts += 1;
        if now.saturating_duration_since(started) >= self.reconnect_budget {
            self.error(true, "reconnect_failed", format!("upstream did not come back: {why}"));
            return;
        }
        let shift = self.failed_attempts.saturating_sub(1).min(3);
        let delay = Duration::from_millis(500u64 << shift);
        self.link = Link::Backoff;
        self.retry_at = Some(now + delay);
    }

    /// The final of an assistant turn: its transcript, or, in a text-only session, its text.
    pub fn emit_assistant_final(&mut self, text_only: bool, text: &str) {
        self.emit(if text_only {
            ProviderEvent::ModelText { text: text.to_owned(), is_final: true, thought: false }
        } else {
            ProviderEvent::AssistantTranscript { text: text.to_owned(), is_final: true }
        });
    }

    /// A barge-in cut the assistant turn that started at `started_ms` down to `heard`: the
    /// runtime learns it (the final itself if it had not gone out yet, else
    /// `AssistantTruncated`), and the history keeps only what was heard.
    pub fn report_cut(&mut self, started_ms: u64, heard: &str, final_emitted: bool, text_only: bool) {
        if final_emitted {
            self.emit(ProviderEvent::AssistantTruncated { heard: heard.to_owned() });
        } else {
            self.emit_assistant_final(text_only, heard);
        }
        self.replace_turn(started_ms, Role::Assistant, heard);
    }

    /// The link is ready: ends a reconnect episode.
    pub fn mark_ready(&mut self) {
        self.link = Link::Ready;
        self.unread.reset();
        self.reconnect_started = None;
        self.failed_attempts = 0;
        self.retry_at = None;
    }
}

/// Where a barge-in cuts an assistant turn of `samples` received at `rate_hz` whose transcript is
/// `transcript`, playback having stopped at `played_ms`: `(end_ms, received_ms, heard)`, the
/// cut clamped to the audio received (a client cannot have heard more).
pub fn cut_point(transcript: &str, samples: u64, rate_hz: u32, played_ms: u64) -> (u64, u64, String) {
    let received_ms = samples * 1000 / u64::from(rate_hz.max(1));
    let end_ms = played_ms.min(received_ms);
    (end_ms, received_ms, heard_text(transcript, end_ms, received_ms))
}

/// Cuts `text` to the share of it that `played_ms` of `total_ms` audio carried (§1.2): the
/// transcript of what the user actually heard, ending on a word boundary.
pub fn heard_text(text: &str, played_ms: u64, total_ms: u64) -> String {
    if total_ms == 0 || played_ms >= total_ms {
        return text.to_owned();
    }
    let chars = text.chars().count();
    let keep = usize::try_from((chars as u128 * u128::from(played_ms) / u128::from(total_ms)) as u64).unwrap_or(chars);
    let cut: String = text.chars().take(keep).collect();
    // Do not end mid-word: a half word was not heard as a word.
    match text.chars().nth(keep) {
        Some(next) if !next.is_whitespace() => match cut.rfind(char::is_whitespace) {
            Some(space) => cut[..space].trim_end().to_owned(),
            None => String::new(),
        },
        _ => cut.trim_end().to_owned(),
    }
}

/// Estimated tokens of `text` for append splitting: ~4 ASCII characters per token, one token per
/// other character (CJK is about one token per character) — errs on the side of smaller chunks.
pub fn estimate_tokens(text: &str) -> usize {
    let (ascii, other) =
        text.chars().fold((0usize, 0usize), |(a, o), c| if c.is_ascii() { (a + 1, o) } else { (a, o + 1) });
    ascii.div_ceil(4) + other
}

/// Splits `text` into pieces of at most `max_tokens` estimated tokens, at sentence ends where
/// possible, then at spaces, then anywhere.
pub fn split_for_append(text: &str, max_tokens: usize) -> Vec<String> {
    let max_tokens = max_tokens.max(1);
    if estimate_tokens(text) <= max_tokens {
        return vec![text.to_owned()];
    }
    let mut pieces = Vec::new();
    let mut current = String::new();
    for sentence in split_keep(text, |c| matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '\n')) {
        for part in fit(&sentence, max_tokens) {
            if estimate_tokens(&current) + estimate_tokens(&part) > max_tokens && !current.is_empty() {
                pieces.push(std::mem::take(&mut current).trim().to_owned());
            }
            current.push_str(&part);
        }
    }
    if !current.trim().is_empty() {
        pieces.push(current.trim().to_owned());
    }
    pieces.retain(|piece| !piece.is_empty());
    pieces
}

/// Splits after every char matching `end`, keeping it.
fn split_keep(text: &str, end: impl Fn(char) -> bool) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if end(c) {
            parts.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Breaks one over-long sentence at spaces, then characters.
fn fit(sentence: &str, max_tokens: usize) -> Vec<String> {
    if estimate_tokens(sentence) <= max_tokens {
        return vec![sentence.to_owned()];
    }
    let mut parts = Vec::new();
    let mut current = String::new();
    for word in split_keep(sentence, char::is_whitespace) {
        if estimate_tokens(&word) > max_tokens {
            for c in word.chars() {
                if estimate_tokens(&current) + estimate_tokens(c.encode_utf8(&mut [0; 4])) > max_tokens {
                    parts.push(std::mem::take(&mut current));
                }
                current.push(c);
            }
            continue;
        }
        if estimate_tokens(&current) + estimate_tokens(&word) > max_tokens && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        current.push_str(&word);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcm_round_trips_through_base64() {
        let samples = [0i16, 1, -1, i16::MAX, i16::MIN, 1234];
        assert_eq!(decode_pcm(&encode_pcm(&samples)).as_deref(), Some(&samples[..]));
        assert_eq!(decode_pcm("not base64!"), None);
        // URL-safe and unpadded, as protobuf JSON parsers accept (and pydantic writes).
        let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        assert!(url_safe.contains('-') || url_safe.contains('_'), "{url_safe}");
        assert_eq!(decode_pcm(&url_safe).as_deref(), Some(&samples[..]));
    }

    #[test]
    fn audio_goes_into_the_frame_as_the_base64_of_the_whole() {
        // Lengths around the step (384 samples) and not multiples of 3: padding only at the end.
        for len in [0, 1, 2, 3, 383, 384, 385, 480, 769, 960, 1000] {
            let samples: Vec<i16> = (0..len).map(|n| (n as i16).wrapping_mul(977) ^ -3).collect();
            let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
            let expected = B64.encode(&bytes);
            assert_eq!(encode_pcm(&samples), expected, "{len} samples");
            let frame = audio_frame("{\"audio\":\"", &samples, "\"}");
            assert_eq!(frame, format!("{{\"audio\":\"{expected}\"}}"));
            assert_eq!(frame.capacity(), frame.len(), "sized once, {len} samples");
        }
    }

    #[test]
    fn heard_text_cuts_at_played_share_on_word_boundary() {
        let text = "Your order ships on Friday morning.";
        assert_eq!(heard_text(text, 1000, 1000), text);
        assert_eq!(heard_text(text, 0, 1000), "");
        // 50% of 35 chars = 17 -> "Your order ships " is 17 chars; next char 'o' -> cut to last space.
        assert_eq!(heard_text(text, 500, 1000), "Your order ships");
        assert_eq!(heard_text(text, 5000, 1000), text);
    }

    #[test]
    fn appends_split_under_the_cap_at_sentences() {
        let sentence = "This is a sentence of about ten tokens long. ";
        let text = sentence.repeat(100);
        let pieces = split_for_append(&text, 100);
        assert!(pieces.len() > 1);
        for piece in &pieces {
            assert!(estimate_tokens(piece) <= 100, "{}", estimate_tokens(piece));
            assert!(piece.ends_with('.'), "split mid-sentence: {piece:?}");
        }
        let joined: String = pieces.join(" ");
        assert_eq!(joined.split_whitespace().count(), text.split_whitespace().count());
        let cjk = "漢".repeat(1200);
        let pieces = split_for_append(&cjk, 480);
        assert_eq!(pieces.len(), 3);
        assert!(pieces.iter().all(|piece| estimate_tokens(piece) <= 480));
        assert_eq!(split_for_append("short", 480), vec!["short".to_owned()]);
    }
}
