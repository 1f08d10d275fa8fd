//! A [`SessionActor`] between a fake room and a fake provider session, in tokio's paused time,
//! storing into a real SQLite database (shared by the tests that include this file with `#[path]`).
//!
//! Time is driven by hand: [`Shell::advance`] moves the paused clock in small steps and lets every
//! task run between them. Auto-advance stays off for the whole test (a blocking task is held open,
//! which tokio counts as work): with it on, the clock would jump to the next timer whenever the
//! runtime waits for SQLite (whose connections run on threads of their own), and the store's pool
//! would time out in virtual time while the database answers in real time.

#[path = "sessions.rs"]
mod sessions;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use svc_audio::opus::EncoderConfig;
use svc_audio::{OpusDecoder, OpusEncoder};
use svc_domain::session_config::NoiseCancellation;
use svc_domain::start::ResolvedSession;
use svc_provider_core::session::{EVENT_CAPACITY, INPUT_CAPACITY, ProviderSession};
use svc_provider_core::{ProviderEvent, ProviderInput};
use svc_session::actor::{SessionActor, SessionCommand, ToolJobs};
use svc_session::core::{CoreConfig, Finish, SessionCore, Timing};
use svc_session::external_room::SessionOwner;
use svc_session::input::InputAudio;
use svc_session::persist::Persister;
use svc_session::room::{AgentRoom, AgentRoomEvent, CloseReason, PeerAudio, PeerSnapshot, ToolResultCall};
use svc_store::testing::TestDatabase;
use svc_store::{SessionRow, StoredTurn, TimelineRow};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The session's id.
pub const SESSION: &str = "0b4f2c1e-5a7d-4e2b-9c61-3f8a7d2e1c01";
/// The agent's identity in the room.
pub const AGENT: &str = "agent-shell";
/// The node the actor runs on.
pub const NODE: &str = "node-shell";
/// Wall-clock time of the session's start, epoch µs (stored timestamps count from it).
pub const STARTED_US: i64 = 1_800_000_000_000_000;
/// How far [`Shell::advance`] moves the clock at a time.
pub const STEP: Duration = Duration::from_millis(5);
/// The provider's output rate (provider_b speaks at 24 kHz).
pub const PROVIDER_RATE_HZ: u32 = 24_000;

/// What the actor did to the room.
#[derive(Debug, Clone)]
pub enum RoomOut {
    /// `send_data`, parsed.
    Data { json: Value, to: Option<String> },
    /// `set_attributes`.
    Attributes(BTreeMap<String, String>),
    /// `answer_tool_result`.
    ToolAnswer { call: ToolResultCall, answer: Result<String, String> },
    /// `try_push_audio`: an Opus frame of the agent's voice, due at the given time.
    Audio { opus: Bytes, due: Instant },
    /// `close`.
    Closed(CloseReason),
}

/// The room as the actor sees it: events come from the test, everything the actor does goes back
/// to it.
pub struct FakeRoom {
    events: mpsc::UnboundedReceiver<AgentRoomEvent>,
    out: mpsc::UnboundedSender<RoomOut>,
}

impl AgentRoom for FakeRoom {
    async fn next_event(&mut self) -> AgentRoomEvent {
        // The test holding no sender any more is a room that went away.
        self.events.recv().await.unwrap_or(AgentRoomEvent::Gone)
    }

    fn send_data(&mut self, json: String, to: Option<String>) {
        let json = serde_json::from_str(&json).expect("the actor sends JSON");
        let _ = self.out.send(RoomOut::Data { json, to });
    }

    fn set_attributes(&mut self, attributes: BTreeMap<String, String>) {
        let _ = self.out.send(RoomOut::Attributes(attributes));
    }

    fn answer_tool_result(&mut self, call: &ToolResultCall, answer: Result<String, String>) {
        let _ = self.out.send(RoomOut::ToolAnswer { call: call.clone(), answer });
    }

    fn try_push_audio(&self, opus: Bytes, due: Instant) -> Result<(), svc_room::RoomError> {
        let _ = self.out.send(RoomOut::Audio { opus, due });
        Ok(())
    }

    async fn close(&self, reason: CloseReason) {
        let _ = self.out.send(RoomOut::Closed(reason));
    }
}

/// A provider session whose adapter task passes every input to the test and stops after `Close`
/// (as an adapter does once it has answered open calls and closed its socket).
fn fake_provider() -> (ProviderSession, mpsc::Sender<ProviderEvent>, mpsc::UnboundedReceiver<ProviderInput>) {
    let (input, mut inputs) = mpsc::channel(INPUT_CAPACITY);
    let (events_tx, events) = mpsc::channel(EVENT_CAPACITY);
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let (_, resumption_handle) = tokio::sync::watch::channel(None);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            loop {
                let input = tokio::select! {
                    () = shutdown.cancelled() => break,
                    input = inputs.recv() => input,
                };
                let Some(input) = input else { break };
                let close = input == ProviderInput::Close;
                let _ = seen_tx.send(input);
                if close {
                    break;
                }
            }
        }
    });
    (ProviderSession { input, events, resumption_handle, shutdown, task }, events_tx, seen)
}

/// A live session on provider_b (24 kHz in and out, the upstream's own turn detection) with the
/// client tool `lookup_order` and the server tool `end_call`, its transcript stored; `extra` is
/// merged into the agent.
pub fn session(extra: Value) -> Arc<ResolvedSession> {
    let mut agent = json!({"type": "inline", "model": "provider_b", "instructions": "Be brief.",
        "tools": [{"kind": "client", "name": "lookup_order", "description": "Finds an order."}, {"kind": "end_call"}]});
    if let (Some(agent), Some(extra)) = (agent.as_object_mut(), extra.as_object()) {
        agent.extend(extra.clone());
    }
    sessions::resolved(&json!({"sdk": {"name": "test", "version": "1.0.0"}, "agent": agent}))
}

/// Keeps tokio from auto-advancing the paused clock while it is held (a running blocking task
/// counts as work); dropping it lets the task end.
struct AutoAdvanceOff(Option<std::sync::mpsc::Sender<()>>);

impl AutoAdvanceOff {
    fn hold() -> AutoAdvanceOff {
        let (release, released) = std::sync::mpsc::channel::<()>();
        drop(tokio::task::spawn_blocking(move || {
            let _ = released.recv();
        }));
        AutoAdvanceOff(Some(release))
    }
}

impl Drop for AutoAdvanceOff {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

/// The clock the actor reads (tokio's, so paused in these tests).
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// One running actor and everything around it.
pub struct Shell {
    /// The database the session stores into.
    pub db: TestDatabase,
    project: String,
    room_events: Option<mpsc::UnboundedSender<AgentRoomEvent>>,
    room_out: mpsc::UnboundedReceiver<RoomOut>,
    /// Sends events as the adapter would.
    pub provider_events: mpsc::Sender<ProviderEvent>,
    provider_inputs: mpsc::UnboundedReceiver<ProviderInput>,
    /// The runtime's side of the command queue.
    pub commands: mpsc::Sender<SessionCommand>,
    /// The server's shutdown.
    pub shutdown: CancellationToken,
    actor: Option<JoinHandle<Finish>>,
    /// When the session started (tokio's clock).
    pub started: Instant,
    /// Everything the actor did to the room so far, in order.
    pub room: Vec<RoomOut>,
    /// Everything the provider was sent so far, in order.
    pub inputs: Vec<ProviderInput>,
    _auto_advance_off: AutoAdvanceOff,
}

impl Shell {
    /// A session `id` stored in a fresh SQLite database, its actor running with the session
    /// `session` and timing `timing`.
    pub async fn start(session: Arc<ResolvedSession>, timing: Timing) -> Shell {
        let auto_advance_off = AutoAdvanceOff::hold();
        let (db, project) = sessions::store_with_live_session(SESSION, "room-shell", STARTED_US).await;
        let (room_tx, room_rx) = mpsc::unbounded_channel();
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (provider, provider_events, provider_inputs) = fake_provider();
        let (commands, command_rx) = mpsc::channel(8);
        let shutdown = CancellationToken::new();
        let started = now();
        let input_rate_hz = svc_provider::input_rate_hz(&session.model).expect("a known family");
        let core = SessionCore::new(
            CoreConfig {
                session_id: SESSION.to_owned(),
                agent_identity: AGENT.to_owned(),
                started_at_us: STARTED_US,
                session,
                input_rate_hz,
                timing,
            },
            started,
        );
        let actor = SessionActor {
            core,
            room: FakeRoom { events: room_rx, out: out_tx },
            provider,
            persister: Persister::start(db.store.clone(), SESSION),
            input: InputAudio::new(input_rate_hz, NoiseCancellation::Off),
            recording: None,
            shutdown: shutdown.clone(),
            commands: command_rx,
            clock_origin: (started, STARTED_US),
            dial_hangup: None,
            room_dials: Default::default(),
            owner: Some(SessionOwner {
                store: db.store.clone(),
                session_id: SESSION.to_owned(),
                node_id: NODE.to_owned(),
            }),
            media: Default::default(),
            media_totals: Arc::default(),
            tool_backends: Arc::default(),
            tool_jobs: ToolJobs::default(),
        };
        let mut shell = Shell {
            db,
            project,
            room_events: Some(room_tx),
            room_out: out_rx,
            provider_events,
            provider_inputs,
            commands,
            shutdown,
            actor: Some(tokio::spawn(actor.run())),
            started,
            room: Vec::new(),
            inputs: Vec::new(),
            _auto_advance_off: auto_advance_off,
        };
        shell.settle().await;
        shell
    }

    /// Lets every task run until none has anything left to do (the clock stays where it is).
    pub async fn settle(&mut self) {
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
        while let Ok(out) = self.room_out.try_recv() {
            self.room.push(out);
        }
        while let Ok(input) = self.provider_inputs.try_recv() {
            self.inputs.push(input);
        }
    }

    /// Moves the clock `by` forward in steps of [`STEP`], letting every task run after each.
    pub async fn advance(&mut self, by: Duration) {
        let end = tokio::time::Instant::now() + by;
        while tokio::time::Instant::now() < end {
            let step = STEP.min(end - tokio::time::Instant::now());
            tokio::time::advance(step).await;
            self.settle().await;
        }
    }

    /// Advances the clock until `done` holds, at most `within`; panics naming `what` otherwise.
    pub async fn wait_until(&mut self, within: Duration, what: &str, done: impl Fn(&Shell) -> bool) {
        self.settle().await;
        let end = tokio::time::Instant::now() + within;
        while !done(self) {
            assert!(tokio::time::Instant::now() < end, "{what}: not within {within:?}");
            tokio::time::advance(STEP).await;
            self.settle().await;
        }
    }

    /// Time since the session started.
    pub fn elapsed(&self) -> Duration {
        now() - self.started
    }

    /// A room event.
    pub async fn room_event(&mut self, event: AgentRoomEvent) {
        self.room_events.as_ref().expect("the room is open").send(event).expect("the actor reads the room");
        self.settle().await;
    }

    /// `identity` joins with its microphone published and media connected.
    pub async fn join(&mut self, identity: &str) {
        let peer = PeerSnapshot { identity: identity.to_owned(), is_agent: false, active: true, publishes_audio: true };
        self.room_event(AgentRoomEvent::Peer(peer)).await;
    }

    /// A data packet from `from`.
    pub async fn data(&mut self, from: &str, json: Value) {
        let payload = Bytes::from(json.to_string());
        self.room_event(AgentRoomEvent::Data { from: from.to_owned(), payload }).await;
    }

    /// An adapter event.
    pub async fn provider(&mut self, event: ProviderEvent) {
        self.provider_events.send(event).await.expect("the actor reads the provider");
        self.settle().await;
    }

    /// Data messages of type `kind` sent so far, in order, with their recipients.
    pub fn data_of(&self, kind: &str) -> Vec<(&Value, Option<&str>)> {
        self.room
            .iter()
            .filter_map(|out| match out {
                RoomOut::Data { json, to } if json["type"] == kind => Some((json, to.as_deref())),
                _ => None,
            })
            .collect()
    }

    /// The types of the data messages sent so far, in order.
    pub fn data_types(&self) -> Vec<String> {
        self.room
            .iter()
            .filter_map(|out| match out {
                RoomOut::Data { json, .. } => json["type"].as_str().map(str::to_owned),
                _ => None,
            })
            .collect()
    }

    /// The latest value of the agent's attribute `key`.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.room.iter().rev().find_map(|out| match out {
            RoomOut::Attributes(attributes) => attributes.get(key).map(String::as_str),
            _ => None,
        })
    }

    /// The agent's frames so far: when each was due, its PCM (decoded in order, at 48 kHz) and
    /// whether it is the silence the track carries between responses.
    pub fn agent_frames(&self) -> Vec<AgentFrame> {
        let silence = silence_packet();
        let mut decoder = OpusDecoder::with_rate(48_000).expect("decoder");
        self.room
            .iter()
            .filter_map(|out| match out {
                RoomOut::Audio { opus, due } => {
                    let mut pcm = Vec::new();
                    decoder.decode(opus, &mut pcm).expect("the agent's frames are Opus");
                    Some(AgentFrame { due: *due, pcm, silence: *opus == silence })
                }
                _ => None,
            })
            .collect()
    }

    /// How many of the agent's frames so far carry speech (are not the silence packet).
    pub fn agent_speech_frames(&self) -> usize {
        self.agent_frames().iter().filter(|frame| !frame.silence).count()
    }

    /// The user audio the provider got so far, frame by frame.
    pub fn provider_audio(&self) -> Vec<&Vec<i16>> {
        self.inputs
            .iter()
            .filter_map(|input| match input {
                ProviderInput::NativeAudio(pcm) => Some(pcm),
                _ => None,
            })
            .collect()
    }

    /// The inputs the provider got so far other than audio.
    pub fn provider_commands(&self) -> Vec<&ProviderInput> {
        self.inputs.iter().filter(|input| !matches!(input, ProviderInput::NativeAudio(_))).collect()
    }

    /// Whether the actor has finished (its end stored, the room closed).
    pub fn finished(&self) -> bool {
        self.actor.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// The actor's end, once it has finished. The clock stays where it is: the actor's last
    /// steps (the provider's close, the room's, the end stored) take no virtual time, and the
    /// database answers in real time, which this waits for (up to 10 s).
    pub async fn finish(&mut self) -> Finish {
        let actor = self.actor.take().expect("the actor runs");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !actor.is_finished() {
            assert!(std::time::Instant::now() < deadline, "the actor did not finish");
            tokio::task::yield_now().await;
        }
        let finish = actor.await.expect("the actor did not panic");
        self.settle().await;
        finish
    }

    /// The stored session, turns and timeline.
    pub async fn stored(&self) -> (SessionRow, Vec<StoredTurn>, Vec<TimelineRow>) {
        let store = &self.db.store;
        let row = store.session_in_project(&self.project, SESSION).await.expect("read").expect("the session's row");
        let turns = store.transcript(SESSION).await.expect("transcript");
        let timeline = store.timeline(SESSION).await.expect("timeline");
        (row, turns, timeline)
    }

    /// Drops the room's event sender: the agent is out of the room (`Gone`).
    pub fn drop_room(&mut self) {
        self.room_events = None;
    }
}

/// One of the agent's frames as the room got it.
#[derive(Debug)]
pub struct AgentFrame {
    /// Its place on the media clock.
    pub due: Instant,
    /// Decoded.
    pub pcm: Vec<i16>,
    /// The silence packet (between responses, or priming a new listener).
    pub silence: bool,
}

/// The packet the playback sends as silence: 20 ms of zeros from a fresh 48 kHz speech encoder.
fn silence_packet() -> Bytes {
    let mut encoder = OpusEncoder::with_rate(EncoderConfig::VOICE, 48_000).expect("encoder");
    Bytes::from(encoder.encode_frame(&[0; 960]).expect("encode"))
}

/// One 20 ms Opus frame of the user's voice (a 300 Hz tone) at `n` frames into the talkspurt.
pub fn user_frame(encoder: &mut OpusEncoder, identity: &str, n: u64) -> AgentRoomEvent {
    let pcm: Vec<i16> = (0..960)
        .map(|i| {
            let t = (n * 960 + i) as f64 / 48_000.0;
            ((t * 300.0 * std::f64::consts::TAU).sin() * 10_000.0) as i16
        })
        .collect();
    let opus = encoder.encode_frame(&pcm).expect("encode");
    AgentRoomEvent::Audio(PeerAudio {
        identity: Arc::from(identity),
        track: Arc::from(format!("TR_{identity}")),
        rtp_timestamp: 10_000 + n * 960,
        received_at: now(),
        opus: Bytes::from(opus),
    })
}

/// The user's encoder (48 kHz, speech settings).
pub fn user_encoder() -> OpusEncoder {
    OpusEncoder::with_rate(EncoderConfig::VOICE, 48_000).expect("encoder")
}

/// `duration` of the agent's voice (a 440 Hz tone) at the provider's rate.
pub fn agent_speech(duration: Duration) -> ProviderEvent {
    let samples = (PROVIDER_RATE_HZ as f64 * duration.as_secs_f64()) as usize;
    let pcm = (0..samples)
        .map(|i| ((i as f64 * 440.0 * std::f64::consts::TAU / f64::from(PROVIDER_RATE_HZ)).sin() * 12_000.0) as i16)
        .collect();
    ProviderEvent::AssistantAudio { pcm, sample_rate: PROVIDER_RATE_HZ }
}

/// The loudest sample.
pub fn peak(pcm: &[i16]) -> u16 {
    pcm.iter().map(|sample| sample.unsigned_abs()).max().unwrap_or(0)
}
