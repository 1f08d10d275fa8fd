//! `room-load`: the embedded media room under load, measured from both ends.
//!
//! For each N it opens N rooms. In each, one [`RoomClient`] (str0m, real WebRTC over UDP on
//! 127.0.0.1) streams real Opus 20 ms frames, paced at 50 frames/s, and an in-process
//! participant (the session runtime's seat) echoes them back: it decodes every received frame
//! and pushes the PCM into its published track, which the room encodes, paces and sends to the
//! client. That is one full-duplex voice session's media work, minus the provider.
//!
//! Measured over a steady-state window after a warm-up, per N:
//!
//! - **CPU**: the process's user + system time (`/proc/self/stat`) as % of one core, and its
//!   split between the room server's runtime threads (`room-server`: UDP, room actors, the
//!   in-process echo with its Opus decode, the room's Opus encode) and the clients' runtime
//!   threads (`room-client`), from each thread's `schedstat`.
//! - **Memory**: `VmRSS` at the end of the window and `VmHWM`.
//! - **One-way latency**, all on one clock: client `send_opus` → the server's socket read
//!   (`received_at`) and → the in-process participant reading the frame; in-process
//!   `push_pcm` → the client's socket read (and → the client application reading it), matched
//!   in order per room (the pacer releases frames in push order).
//!
//! Clients and server share the machine's cores in one process, so every figure includes the
//! client side's cost; the `room-server` column isolates the server's share. A baseline phase
//! (by default N = 1) runs first in the same process, and the report gives every phase's CPU per
//! room and p99 relative to it. The report is Markdown on stdout; progress goes to stderr.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Parser;
use svc_audio::analysis::speech_like_signal;
use svc_audio::{FRAME_SAMPLES, OpusEncoder};
use svc_room::client::{ClientEvent, ClientOptions, ClientStats, RoomClient};
use svc_room::{
    LocalAudioTrack, LocalJoinOptions, LocalParticipant, ParticipantKind, RemoteAudioDecoder, RoomCredentials,
    RoomEvent, RoomServer, RoomServerConfig,
};
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinSet;

use svc_bench::lock;
use svc_bench::measure::{self, Cpu, Histogram, Memory, Summary};

const KEY: &str = "bench";
const SECRET: &str = "room-load-benchmark-secret-0123456789";
/// Frames of the looped source signal (10 s).
const SOURCE_FRAMES: usize = 500;
/// Client send instants remembered per room, by frame number (1.28 s of frames).
const SENT_RING: usize = 64;

/// Load the embedded room with N rooms of (str0m client ⇄ in-process echo).
#[derive(Debug, Parser)]
#[command(name = "room-load")]
struct Args {
    /// Room counts to measure, in order (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "50,100,200")]
    rooms: Vec<usize>,
    /// Rooms of the baseline phase, measured first in the same run (0: none).
    #[arg(long, default_value_t = 1)]
    baseline_rooms: usize,
    /// Measured seconds per phase.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Unmeasured seconds of streaming before each measurement.
    #[arg(long, default_value_t = 5.0)]
    warmup: f64,
    /// Clients connecting at once while a phase opens its rooms.
    #[arg(long, default_value_t = 16)]
    connect_concurrency: usize,
    /// Worker threads of the room server's runtime (and, separately, of the clients' runtime).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Tasks a runtime worker runs between two polls of the IO and timer drivers (tokio's
    /// `event_interval`, 61 by default). Lower: sockets and timers are looked at sooner when
    /// every worker is busy.
    #[arg(long, default_value_t = 61)]
    event_interval: u32,
    /// What the in-process participant does with the client's audio.
    #[arg(long, value_enum, default_value_t = EchoMode::Pcm)]
    echo: EchoMode,
    /// Quick check: rooms 1,4, 2 s measured, 1 s warm-up.
    #[arg(long)]
    smoke: bool,
}

/// The in-process participant's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EchoMode {
    /// Full duplex: decode every frame and push the PCM into its own published track (the room
    /// encodes and paces it): a voice session's media work.
    Pcm,
    /// Receive only (no decode, nothing published): the room's forwarding and the clients.
    Receive,
    /// Full duplex without codecs: each received Opus frame goes straight back through its own
    /// published track (`push_opus`): the room forwarding both ways.
    Opus,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.smoke {
        args.rooms = vec![4];
        args.seconds = 2.0;
        args.warmup = 1.0;
    }
    if args.rooms.is_empty()
        || args.rooms.contains(&0)
        || !args.seconds.is_finite()
        || args.seconds <= 0.0
        || args.warmup < 0.0
    {
        eprintln!("room-load: --rooms needs positive counts, --seconds > 0, --warmup ≥ 0");
        return ExitCode::FAILURE;
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("room-load: FAILED: see above");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("room-load: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime(name: &str, threads: usize, event_interval: u32) -> anyhow::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .event_interval(event_interval.max(1))
        .thread_name(name)
        .enable_all()
        .build()
        .with_context(|| format!("building the {name} runtime"))
}

fn run(args: &Args) -> anyhow::Result<bool> {
    let server_runtime = runtime("room-server", args.threads, args.event_interval)?;
    let client_runtime = runtime("room-client", args.threads, args.event_interval)?;
    let server = server_runtime.handle().clone();
    let frames = Arc::new(source_frames()?);
    let initial = Memory::now();
    let harness = server.block_on(Harness::start())?;
    eprintln!(
        "room-load: pid {}, room server on {}, UDP {:?}",
        std::process::id(),
        harness.url,
        harness.room.udp_addrs()
    );

    let mut phases = Vec::new();
    let baseline = (args.baseline_rooms > 0).then_some(args.baseline_rooms);
    for (rooms, is_baseline) in baseline.into_iter().map(|n| (n, true)).chain(args.rooms.iter().map(|n| (*n, false))) {
        let phase = client_runtime.block_on(run_phase(args, &harness, &server, rooms, frames.clone()))?;
        eprintln!("room-load: {}", phase.one_line());
        phases.push((phase, is_baseline));
    }
    server.block_on(harness.room.shutdown());
    drop(client_runtime);
    drop(server_runtime);

    println!("{}", report(args, initial, &phases));
    Ok(phases.iter().all(|(phase, _)| phase.healthy()))
}

/// 10 s of the speech-like test signal, Opus-encoded once with the room's own settings.
fn source_frames() -> anyhow::Result<Vec<Arc<[u8]>>> {
    let mut encoder = OpusEncoder::new_voice().context("opus encoder")?;
    speech_like_signal(SOURCE_FRAMES * FRAME_SAMPLES)
        .chunks_exact(FRAME_SAMPLES)
        .map(|frame| encoder.encode_frame(frame).map(Arc::from).context("opus encode"))
        .collect()
}

struct Harness {
    room: RoomServer,
    url: String,
    credentials: RoomCredentials,
}

impl Harness {
    /// The room server and its HTTP listener, as `svc serve` mounts them (`/room`), on 127.0.0.1.
    async fn start() -> anyhow::Result<Harness> {
        let credentials = RoomCredentials::new(KEY, SECRET);
        let config = RoomServerConfig {
            udp_port: 0,
            node_ips: vec!["127.0.0.1".parse().context("ip")?],
            empty_timeout: Duration::from_secs(1),
            ..Default::default()
        };
        let room = RoomServer::start(config, credentials.clone()).await.context("starting the room server")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding HTTP")?;
        let url = format!("ws://{}/room", listener.local_addr().context("HTTP address")?);
        let router = axum::Router::new().nest("/room", room.router());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Harness { room, url, credentials })
    }

    fn token(&self, room: &str, identity: &str) -> anyhow::Result<String> {
        let expires = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs())? + 3600;
        Ok(self.credentials.participant_token(room, identity, Some(identity), expires)?)
    }
}

/// What every room of a phase records into.
struct Probes {
    /// Only frames sent (or pushed) while this is set count.
    measuring: AtomicBool,
    /// Client `send_opus` → the server's socket read.
    to_server_socket: Histogram,
    /// Client `send_opus` → the in-process participant reads the frame.
    to_in_process: Histogram,
    /// In-process `push_pcm` → the client's socket read (includes the pacer's hold).
    to_client_socket: Histogram,
    /// The frame's release by the room's pacer (the push, or its 20 ms slot if later) → the
    /// client's socket read.
    released_to_client_socket: Histogram,
    /// Frames the room sent during the push itself (the pacer was idle: a talkspurt start).
    frames_unpaced: AtomicU64,
    /// In-process `push_pcm` → the client application reads the frame.
    to_client_app: Histogram,
    /// In-process `push_pcm` → its reply (the room actor took the PCM: its queueing delay).
    push_reply: Histogram,
    /// How late a task of the server's runtime wakes from a 5 ms sleep (scheduling lag).
    server_wake_lag: Histogram,
    /// The same on the clients' runtime.
    client_wake_lag: Histogram,
    frames_sent: AtomicU64,
    send_errors: AtomicU64,
    frames_at_echo: AtomicU64,
    frames_unmatched_at_echo: AtomicU64,
    frames_pushed: AtomicU64,
    push_errors: AtomicU64,
    frames_at_client: AtomicU64,
}

impl Probes {
    fn new() -> Probes {
        Probes {
            measuring: AtomicBool::new(false),
            to_server_socket: Histogram::new(),
            to_in_process: Histogram::new(),
            to_client_socket: Histogram::new(),
            released_to_client_socket: Histogram::new(),
            frames_unpaced: AtomicU64::new(0),
            to_client_app: Histogram::new(),
            push_reply: Histogram::new(),
            server_wake_lag: Histogram::new(),
            client_wake_lag: Histogram::new(),
            frames_sent: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            frames_at_echo: AtomicU64::new(0),
            frames_unmatched_at_echo: AtomicU64::new(0),
            frames_pushed: AtomicU64::new(0),
            push_errors: AtomicU64::new(0),
            frames_at_client: AtomicU64::new(0),
        }
    }

    fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }
}

/// One push of the echo, waiting to be matched with its arrival at the client.
struct Push {
    at: Instant,
    measured: bool,
    /// Set after the push returned: the room sent the frame during the push (no pacing wait).
    unpaced: AtomicBool,
}

/// Per-room state shared by the room's client tasks and its echo.
struct RoomProbe {
    /// (RTP timestamp, send instant) by frame number modulo the ring size.
    sent: Mutex<[(u64, Option<Instant>); SENT_RING]>,
    /// Pushes not yet seen at the client, in order.
    pushes: Mutex<VecDeque<Arc<Push>>>,
}

struct Room {
    client: RoomClient,
    echo: tokio::task::JoinHandle<Option<LocalParticipant>>,
    sender: tokio::task::JoinHandle<()>,
}

struct Phase {
    rooms: usize,
    mode: EchoMode,
    setup: Duration,
    window: Duration,
    cpu_process: f64,
    cpu_server: f64,
    cpu_client: f64,
    cpu_others: f64,
    memory: Memory,
    to_server_socket: Summary,
    to_in_process: Summary,
    to_client_socket: Summary,
    released_to_client_socket: Summary,
    frames_unpaced: u64,
    to_client_app: Summary,
    push_reply: Summary,
    server_wake_lag: Summary,
    client_wake_lag: Summary,
    frames_sent: u64,
    send_errors: u64,
    frames_at_echo: u64,
    frames_unmatched_at_echo: u64,
    frames_pushed: u64,
    push_errors: u64,
    frames_at_client: u64,
    client_stats: ClientStats,
}

impl Phase {
    fn one_line(&self) -> String {
        let ms = |value: Option<f64>| value.map_or("–".to_owned(), |v| format!("{v:.2}"));
        format!(
            "N={}: CPU {:.0}% (server {:.0}%, clients {:.0}%; other processes {:.0}%), RSS {:.0} MiB; client→in-process p50 {} p99 {} ms; in-process→client p50 {} p99 {} ms; frames sent {} at echo {} pushed {} at client {}",
            self.rooms,
            self.cpu_process,
            self.cpu_server,
            self.cpu_client,
            self.cpu_others,
            self.memory.rss_mib,
            ms(self.to_in_process.p50_ms),
            ms(self.to_in_process.p99_ms),
            ms(self.released_to_client_socket.p50_ms),
            ms(self.released_to_client_socket.p99_ms),
            self.frames_sent,
            self.frames_at_echo,
            self.frames_pushed,
            self.frames_at_client,
        )
    }

    /// Media flowed (both ways when the echo publishes): at least 90 % of the frames over the
    /// whole phase.
    fn healthy(&self) -> bool {
        let forward =
            self.frames_sent > 0 && self.frames_at_echo * 10 >= self.frames_sent * 9 && self.to_in_process.count > 0;
        let back = self.mode == EchoMode::Receive
            || (self.frames_pushed > 0
                && self.frames_at_client * 10 >= self.frames_pushed * 9
                && self.released_to_client_socket.count > 0);
        forward && back
    }
}

async fn run_phase(
    args: &Args,
    harness: &Harness,
    server: &Handle,
    rooms: usize,
    frames: Arc<Vec<Arc<[u8]>>>,
) -> anyhow::Result<Phase> {
    let probes = Arc::new(Probes::new());
    let stop = Arc::new(AtomicBool::new(false));
    let (stop_echoes, echoes_stopped) = tokio::sync::watch::channel(false);
    let phase_id = uuid::Uuid::new_v4().simple().to_string();
    let setup_started = Instant::now();
    eprintln!("room-load: opening {rooms} rooms…");

    // Open the rooms, a few at a time.
    let mut opening = JoinSet::new();
    let mut opened: Vec<(usize, Room)> = Vec::with_capacity(rooms);
    let stream_start = Instant::now() + Duration::from_millis(200);
    for index in 0..rooms {
        if opening.len() >= args.connect_concurrency.max(1)
            && let Some(result) = opening.join_next().await
        {
            opened.push(result.context("room setup task")??);
        }
        let name = format!("load-{phase_id}-{index}");
        let token = harness.token(&name, "client")?;
        let context = RoomContext {
            index,
            rooms,
            name,
            token,
            url: harness.url.clone(),
            room: harness.room.clone(),
            server: server.clone(),
            probes: probes.clone(),
            stop: stop.clone(),
            echo_stop: echoes_stopped.clone(),
            frames: frames.clone(),
            stream_start,
            mode: args.echo,
        };
        opening.spawn(async move { context.open().await.map(|room| (index, room)) });
    }
    while let Some(result) = opening.join_next().await {
        opened.push(result.context("room setup task")??);
    }
    let setup = setup_started.elapsed();
    let wake_probes = [
        server.spawn(wake_lag(probes.clone(), stop.clone(), true)),
        tokio::spawn(wake_lag(probes.clone(), stop.clone(), false)),
    ];
    eprintln!("room-load: {rooms} rooms open in {:.1} s; warming up {} s", setup.as_secs_f64(), args.warmup);

    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let cpu_before = Cpu::now();
    let window_start = Instant::now();
    probes.measuring.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    probes.measuring.store(false, Ordering::SeqCst);
    let cpu_after = Cpu::now();
    let window = window_start.elapsed();
    let memory = Memory::now();

    // Let the last measured frames arrive, then stop and close everything.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    let _ = stop_echoes.send(true);
    let mut client_stats = ClientStats::default();
    let mut leaving = JoinSet::new();
    for (_, room) in opened {
        let _ = room.sender.await;
        if let Ok(stats) = room.client.stats().await {
            client_stats.audio_frames_sent += stats.audio_frames_sent;
            client_stats.audio_frames_unsent += stats.audio_frames_unsent;
            client_stats.audio_frames_received += stats.audio_frames_received;
            client_stats.audio_frames_dropped += stats.audio_frames_dropped;
            client_stats.events_dropped += stats.events_dropped;
        }
        leaving.spawn(async move {
            room.client.leave().await;
            if let Ok(Some(participant)) = room.echo.await {
                let _ = participant.leave().await;
            }
        });
    }
    while leaving.join_next().await.is_some() {}
    for probe in wake_probes {
        let _ = probe.await;
    }
    // Rooms close after their empty timeout (1 s).
    tokio::time::sleep(Duration::from_secs(2)).await;

    let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    Ok(Phase {
        rooms,
        mode: args.echo,
        setup,
        window,
        cpu_process: cpu_after.process_percent_since(&cpu_before, window),
        cpu_server: cpu_after.group_percent_since(&cpu_before, "room-server", window),
        cpu_client: cpu_after.group_percent_since(&cpu_before, "room-client", window),
        cpu_others: cpu_after.others_percent_since(&cpu_before, window),
        memory,
        to_server_socket: probes.to_server_socket.summary(),
        to_in_process: probes.to_in_process.summary(),
        to_client_socket: probes.to_client_socket.summary(),
        released_to_client_socket: probes.released_to_client_socket.summary(),
        frames_unpaced: count(&probes.frames_unpaced),
        to_client_app: probes.to_client_app.summary(),
        push_reply: probes.push_reply.summary(),
        server_wake_lag: probes.server_wake_lag.summary(),
        client_wake_lag: probes.client_wake_lag.summary(),
        frames_sent: count(&probes.frames_sent),
        send_errors: count(&probes.send_errors),
        frames_at_echo: count(&probes.frames_at_echo),
        frames_unmatched_at_echo: count(&probes.frames_unmatched_at_echo),
        frames_pushed: count(&probes.frames_pushed),
        push_errors: count(&probes.push_errors),
        frames_at_client: count(&probes.frames_at_client),
        client_stats,
    })
}

/// Everything one room's tasks need.
struct RoomContext {
    index: usize,
    rooms: usize,
    name: String,
    token: String,
    url: String,
    room: RoomServer,
    server: Handle,
    probes: Arc<Probes>,
    stop: Arc<AtomicBool>,
    echo_stop: tokio::sync::watch::Receiver<bool>,
    frames: Arc<Vec<Arc<[u8]>>>,
    stream_start: Instant,
    mode: EchoMode,
}

impl RoomContext {
    /// Joins the echo (on the server runtime), connects the client (on this one), and starts
    /// the client's sender and reader and the echo loop.
    async fn open(self) -> anyhow::Result<Room> {
        let probe =
            Arc::new(RoomProbe { sent: Mutex::new([(0, None); SENT_RING]), pushes: Mutex::new(VecDeque::new()) });
        let (room, name, mode) = (self.room.clone(), self.name.clone(), self.mode);
        let (participant, track) = self
            .server
            .spawn(async move {
                let options = LocalJoinOptions {
                    identity: "echo".into(),
                    name: "Echo".into(),
                    kind: ParticipantKind::Agent,
                    metadata: String::new(),
                    attributes: Default::default(),
                };
                let participant = room.join_local(&name, options).await?;
                let track = match mode {
                    EchoMode::Pcm | EchoMode::Opus => Some(participant.publish_audio("echo").await?),
                    EchoMode::Receive => None,
                };
                anyhow::Ok((participant, track))
            })
            .await
            .context("echo join task")??;
        let options = ClientOptions { connect_timeout: Duration::from_secs(30), ..Default::default() };
        let mut client = RoomClient::connect(&self.url, &self.token, options)
            .await
            .with_context(|| format!("client of room {} connecting", self.index))?;
        client
            .publish_audio("microphone")
            .await
            .with_context(|| format!("client of room {} publishing", self.index))?;
        // The echo's track was in the room before the client joined: it is in the first offer.
        let wait = if self.mode != EchoMode::Receive { Duration::from_secs(10) } else { Duration::ZERO };
        let subscribed = tokio::time::timeout(wait, async {
            while let Some(event) = client.next_event().await {
                if let ClientEvent::TrackSubscribed { track_sid, .. } = event {
                    return Some(track_sid);
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let echo_track = match (self.mode, subscribed) {
            (EchoMode::Pcm | EchoMode::Opus, Some(track)) => track,
            (EchoMode::Pcm | EchoMode::Opus, None) => {
                anyhow::bail!("client of room {} never subscribed to the echo", self.index)
            }
            (EchoMode::Receive, _) => String::new(),
        };

        let echo = self.server.spawn(echo(
            participant,
            track,
            self.mode == EchoMode::Opus,
            probe.clone(),
            self.probes.clone(),
            self.echo_stop.clone(),
        ));
        let sender = tokio::spawn(send_frames(
            client.audio_sender(),
            self.frames.clone(),
            probe.clone(),
            self.probes.clone(),
            self.stop.clone(),
            // Clients' frames are spread evenly over each 20 ms, as independent talkers are.
            self.stream_start.max(Instant::now())
                + Duration::from_micros((20_000 * self.index / self.rooms.max(1)) as u64),
            1_000_000 * self.index as u64,
        ));
        let reader = ClientReader { echo_track, probe, probes: self.probes.clone() };
        let client = reader.spawn(client);
        Ok(Room { client, echo, sender })
    }
}

/// The scheduling lag of the runtime it runs on, while measuring (see [`measure::wake_lag`]).
async fn wake_lag(probes: Arc<Probes>, stop: Arc<AtomicBool>, server: bool) {
    measure::wake_lag(stop, |lag| {
        if probes.measuring() {
            let histogram = if server { &probes.server_wake_lag } else { &probes.client_wake_lag };
            histogram.record(lag);
        }
    })
    .await;
}

/// Sends one frame every 20 ms from `start` until `stop`, remembering each send instant.
async fn send_frames(
    audio: svc_room::client::AudioSender,
    frames: Arc<Vec<Arc<[u8]>>>,
    probe: Arc<RoomProbe>,
    probes: Arc<Probes>,
    stop: Arc<AtomicBool>,
    start: Instant,
    rtp_base: u64,
) {
    let mut ticker = tokio::time::interval_at(start.into(), Duration::from_millis(20));
    let mut number: usize = 0;
    while !stop.load(Ordering::Relaxed) {
        ticker.tick().await;
        let rtp = rtp_base + (number * FRAME_SAMPLES) as u64;
        let now = Instant::now();
        lock(&probe.sent)[ring_slot(rtp)] = (rtp, probes.measuring().then_some(now));
        match audio.send_opus(rtp, frames[number % frames.len()].clone()) {
            Ok(()) => {
                probes.frames_sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                probes.send_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        number += 1;
    }
}

/// The in-process participant: decode every frame from the client and push it back as PCM
/// (without a track: only receive).
async fn echo(
    mut participant: LocalParticipant,
    track: Option<LocalAudioTrack>,
    relay_opus: bool,
    probe: Arc<RoomProbe>,
    probes: Arc<Probes>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Option<LocalParticipant> {
    let Ok(mut decoder) = RemoteAudioDecoder::new() else { return Some(participant) };
    let mut pcm = Vec::with_capacity(4 * FRAME_SAMPLES);
    let mut pushed: u64 = 0;
    loop {
        let event = tokio::select! {
            event = participant.next_event() => event,
            _ = stop.changed() => return Some(participant),
        };
        let RoomEvent::AudioFrame(frame) = event? else { continue };
        let read_at = Instant::now();
        probes.frames_at_echo.fetch_add(1, Ordering::Relaxed);
        let sent = lock(&probe.sent)[ring_slot(frame.rtp_timestamp)];
        match sent {
            (rtp, Some(sent_at)) if rtp == frame.rtp_timestamp => {
                probes.to_server_socket.record(frame.received_at.saturating_duration_since(sent_at));
                probes.to_in_process.record(read_at.saturating_duration_since(sent_at));
            }
            (rtp, _) if rtp != frame.rtp_timestamp => {
                probes.frames_unmatched_at_echo.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        let Some(track) = &track else { continue };
        if relay_opus {
            // `push_opus` sends at once: every frame is released at its push.
            let push =
                Arc::new(Push { at: Instant::now(), measured: probes.measuring(), unpaced: AtomicBool::new(true) });
            probes.frames_unpaced.fetch_add(1, Ordering::Relaxed);
            lock(&probe.pushes).push_back(push.clone());
            if track.push_opus(frame.opus.clone()).await.is_err() {
                probes.push_errors.fetch_add(1, Ordering::Relaxed);
                lock(&probe.pushes).pop_back();
                continue;
            }
            probes.frames_pushed.fetch_add(1, Ordering::Relaxed);
            if push.measured {
                probes.push_reply.record(push.at.elapsed());
            }
            continue;
        }
        if decoder.decode(&frame, &mut pcm).is_err() {
            continue;
        }
        // One push per 20 ms frame, so pushes and the frames the room sends match one to one.
        let whole = pcm.len() - pcm.len() % FRAME_SAMPLES;
        for chunk in pcm[..whole].chunks_exact(FRAME_SAMPLES) {
            let push =
                Arc::new(Push { at: Instant::now(), measured: probes.measuring(), unpaced: AtomicBool::new(false) });
            // Queued before the push: the frame can reach the client before the push returns.
            lock(&probe.pushes).push_back(push.clone());
            if track.push_pcm(chunk.to_vec()).await.is_err() {
                probes.push_errors.fetch_add(1, Ordering::Relaxed);
                lock(&probe.pushes).pop_back();
                continue;
            }
            pushed += 1;
            probes.frames_pushed.fetch_add(1, Ordering::Relaxed);
            if push.measured {
                probes.push_reply.record(push.at.elapsed());
            }
            if track.played_samples() >= pushed * FRAME_SAMPLES as u64 {
                push.unpaced.store(true, Ordering::Relaxed);
                probes.frames_unpaced.fetch_add(1, Ordering::Relaxed);
            }
        }
        pcm.drain(..whole);
    }
}

struct ClientReader {
    echo_track: String,
    probe: Arc<RoomProbe>,
    probes: Arc<Probes>,
}

impl ClientReader {
    /// Reads the client's events on a task of its own; the returned handle keeps the commands.
    fn spawn(self, client: RoomClient) -> RoomClient {
        let (client, mut events) = client.split_events();
        tokio::spawn(async move {
            // Each arrival is scored when the next one comes (20 ms later): by then the echo
            // has long recorded whether its push went out at once.
            let mut pending: Option<Arrival> = None;
            let mut anchor: Option<(Instant, u64)> = None;
            while let Some(event) = events.next().await {
                match event {
                    ClientEvent::AudioFrame(frame) if *frame.track_sid == *self.echo_track => {
                        let read_at = Instant::now();
                        self.probes.frames_at_client.fetch_add(1, Ordering::Relaxed);
                        let Some(push) = lock(&self.probe.pushes).pop_front() else { continue };
                        let arrival = Arrival {
                            push,
                            received_at: frame.received_at,
                            read_at,
                            rtp_timestamp: frame.rtp_timestamp,
                        };
                        if let Some(previous) = pending.replace(arrival) {
                            self.score(previous, &mut anchor);
                        }
                    }
                    ClientEvent::Closed { .. } => break,
                    _ => {}
                }
            }
            if let Some(last) = pending {
                self.score(last, &mut anchor);
            }
        });
        client
    }

    /// Records one arrival. The room's pacer sends a talkspurt's first frame at the push and
    /// frame k of it 20 ms × k later, with RTP timestamps 960 × k apart; so a frame's slot is
    /// the talkspurt start plus its RTP distance from the start's frame.
    fn score(&self, arrival: Arrival, anchor: &mut Option<(Instant, u64)>) {
        if arrival.push.unpaced.load(Ordering::Relaxed) {
            *anchor = Some((arrival.push.at, arrival.rtp_timestamp));
        }
        if !arrival.push.measured {
            return;
        }
        self.probes.to_client_socket.record(arrival.received_at.saturating_duration_since(arrival.push.at));
        self.probes.to_client_app.record(arrival.read_at.saturating_duration_since(arrival.push.at));
        if let Some((start, start_rtp)) = *anchor
            && arrival.rtp_timestamp >= start_rtp
        {
            let offset = Duration::from_nanos((arrival.rtp_timestamp - start_rtp) * 1_000_000_000 / 48_000);
            let released = (start + offset).max(arrival.push.at);
            self.probes.released_to_client_socket.record(arrival.received_at.saturating_duration_since(released));
        }
    }
}

/// A frame of the echo's track at the client, with the push it came from.
struct Arrival {
    push: Arc<Push>,
    received_at: Instant,
    read_at: Instant,
    rtp_timestamp: u64,
}

/// The slot of the client's send ring that holds the frame with this RTP timestamp.
fn ring_slot(rtp_timestamp: u64) -> usize {
    (rtp_timestamp / FRAME_SAMPLES as u64 % SENT_RING as u64) as usize
}

fn report(args: &Args, initial: Memory, phases: &[(Phase, bool)]) -> String {
    let ms = |value: Option<f64>| value.map_or("–".to_owned(), |v| format!("{v:.2}"));
    let baseline = phases.iter().find(|(_, is_baseline)| *is_baseline).map(|(phase, _)| phase);
    let mut out = String::new();
    out.push_str(&svc_bench::run_header(" --bin room-load"));
    out.push_str(&format!(
        "- Setup: one process; room server + `/room` HTTP on 127.0.0.1 on a {t}-thread runtime (`room-server`, which also runs the in-process echoes), the str0m clients on another {t}-thread runtime (`room-client`); both share the machine's cores; tokio `event_interval` {i}. Echo: {e}. {w} s warm-up, {s} s measured per phase. RSS before any room: {r:.0} MiB.\n\n",
        e = match args.echo {
            EchoMode::Pcm => "`pcm` (the in-process participant decodes every frame and pushes the PCM into its track; the room encodes and paces it)",
            EchoMode::Receive => "`receive` (the in-process participant only receives; nothing is decoded, encoded or sent back)",
            EchoMode::Opus => "`opus` (the in-process participant sends every received Opus frame straight back with `push_opus`: forwarding both ways, no codec work)",
        },
        t = args.threads,
        i = args.event_interval,
        w = args.warmup,
        s = args.seconds,
        r = initial.rss_mib,
    ));
    out.push_str("| rooms | CPU (% of a core) | room-server | room-client | CPU per room | marginal CPU per room (server) | RSS MiB | RSS per room (MiB) | client → in-process p50 / p99 / max (ms) | in-process → client p50 / p99 / max (ms) | p99 vs baseline (→ / ←) |\n");
    out.push_str("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (phase, is_baseline) in phases {
        let per_room = phase.cpu_process / phase.rooms as f64;
        let ratio =
            |value: f64, base: f64| if base > 0.0 { format!("{:.2}×", value / base) } else { "–".to_owned() };
        // What each room beyond the baseline's added: the fixed cost of the process and its
        // idle runtimes is in the baseline.
        let (cpu_ratio, p99_ratio) = match baseline {
            Some(base) if !is_baseline && phase.rooms > base.rooms => (
                format!(
                    "{:.2} ({:.2})",
                    (phase.cpu_process - base.cpu_process) / (phase.rooms - base.rooms) as f64,
                    (phase.cpu_server - base.cpu_server) / (phase.rooms - base.rooms) as f64
                ),
                format!(
                    "{} / {}",
                    ratio(phase.to_in_process.p99_ms.unwrap_or(0.0), base.to_in_process.p99_ms.unwrap_or(0.0)),
                    ratio(
                        phase.released_to_client_socket.p99_ms.unwrap_or(0.0),
                        base.released_to_client_socket.p99_ms.unwrap_or(0.0)
                    )
                ),
            ),
            _ => ("(baseline)".to_owned(), "(baseline)".to_owned()),
        };
        out.push_str(&format!(
            "| {}{} | {:.0} | {:.0} | {:.0} | {:.2} | {} | {:.0} | {:.2} | {} / {} / {} | {} / {} / {} | {} |\n",
            phase.rooms,
            if *is_baseline { " (baseline)" } else { "" },
            phase.cpu_process,
            phase.cpu_server,
            phase.cpu_client,
            per_room,
            cpu_ratio,
            phase.memory.rss_mib,
            (phase.memory.rss_mib - initial.rss_mib) / phase.rooms as f64,
            ms(phase.to_in_process.p50_ms),
            ms(phase.to_in_process.p99_ms),
            ms(phase.to_in_process.max_ms),
            ms(phase.released_to_client_socket.p50_ms),
            ms(phase.released_to_client_socket.p99_ms),
            ms(phase.released_to_client_socket.max_ms),
            p99_ratio,
        ));
    }
    out.push_str("\nLatency detail (ms, p50 / p99 / max; samples):\n\n");
    out.push_str("| rooms | client → server socket | client → in-process | in-process release → client socket | in-process push → client socket (with the pacer's hold) | push → client app | push → push reply (room actor queueing) | wake-up lag, room-server runtime | wake-up lag, room-client runtime |\n");
    out.push_str("|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (phase, _) in phases {
        let cell = |summary: &Summary| {
            format!("{} / {} / {}; {}", ms(summary.p50_ms), ms(summary.p99_ms), ms(summary.max_ms), summary.count)
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            phase.rooms,
            cell(&phase.to_server_socket),
            cell(&phase.to_in_process),
            cell(&phase.released_to_client_socket),
            cell(&phase.to_client_socket),
            cell(&phase.to_client_app),
            cell(&phase.push_reply),
            cell(&phase.server_wake_lag),
            cell(&phase.client_wake_lag),
        ));
    }
    out.push_str("\nFrame accounting over each whole phase (warm-up included):\n\n");
    out.push_str("| rooms | other processes' CPU (% of a core) | setup (s) | window (s) | sent by clients | send errors | unsent (client) | at echo | unmatched at echo | pushed | push errors | sent at push | at clients | dropped at client | peak RSS MiB |\n");
    out.push_str("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (phase, _) in phases {
        out.push_str(&format!(
            "| {} | {:.0} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |\n",
            phase.rooms,
            phase.cpu_others,
            phase.setup.as_secs_f64(),
            phase.window.as_secs_f64(),
            phase.frames_sent,
            phase.send_errors,
            phase.client_stats.audio_frames_unsent,
            phase.frames_at_echo,
            phase.frames_unmatched_at_echo,
            phase.frames_pushed,
            phase.push_errors,
            phase.frames_unpaced,
            phase.frames_at_client,
            phase.client_stats.audio_frames_dropped,
            phase.memory.peak_mib,
        ));
    }
    if phases.iter().any(|(phase, _)| !phase.healthy()) {
        out.push_str("\n**Unhealthy run**: fewer than 90 % of the frames made it through in some phase.\n");
    }
    out
}
