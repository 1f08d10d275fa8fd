//! `session-load`: N voice sessions end to end, measured from both ends.
//!
//! Three parties; svc runs in its own process, so its CPU and memory are svc's alone:
//!
//! - **svc**: the real `svc` binary (`--svc`, by default the one built beside this benchmark),
//!   set up with its own CLI (`svc workspace create`, `svc key create`) and run as `svc serve`
//!   with the embedded media room on 127.0.0.1 and a temporary SQLite database — the one server
//!   assembly production runs. Every session is started with
//!   `POST /api/v1/external/realtime/session/start` (model `provider_b`, OpenAI Realtime), so the
//!   agent joins its room and bridges it to the provider.
//! - **`fake-provider`** (this process, its own runtime): OpenAI Realtime over WebSocket
//!   ([`fake`]), which svc reaches as `OPENAI_BASE_URL`; it answers each of the user's turns with 2.4 s of 24 kHz speech streamed
//!   at real time.
//! - **`svc-client`** (this process, its own runtime): per session one [`RoomClient`] (str0m: real ICE/DTLS/SRTP over UDP) that
//!   joins with the start's credentials, publishes a microphone and loops a 6 s cycle of real
//!   Opus 20 ms frames: 3 s of voice, 3 s of silence (silence frames as a browser sends them
//!   with DTX off). The agent answers in the silent half: user and agent each talk about half
//!   the time. Sessions' cycles are spread evenly over the 6 s and over each 20 ms.
//!
//! Measured over a steady-state window after a warm-up, per N, on one clock:
//!
//! - **→ (client packet → provider frame)**: the client's send of frame k of a talk spurt → the
//!   fake reading the `input_audio_buffer.append` that carries it (the fake finds each spurt's
//!   first frame by its loudness and counts samples from there).
//! - **← (provider frame → client packet)**: the fake's send of delta j of a response → the
//!   client's socket read of the j-th non-silent packet of the agent's track after the silence
//!   that precedes the response; and, per response, delta 0 → the first packet (the delay svc
//!   adds at the start of a reply).
//! - **CPU** of svc's process (and of its thread groups) and of this process's runtimes, and
//!   svc's **RSS** per session.
//!
//! With `--rooms livekit` (or `worker`) the sessions' rooms are on another `svc serve` playing the
//! LiveKit server ([`server`]): svc's agents join it as clients, as on a LiveKit deployment, and
//! that server's CPU is measured apart; `--rooms embedded,livekit` measures both in one run.
//!
//! A baseline phase (N = 1 by default) runs first against the same svc. The report is Markdown on
//! stdout; progress goes to stderr.
//!
//! With `--soak-minutes M` it runs the soak instead ([`soak`]): N sessions with churn and seeded
//! faults for M minutes, reporting svc's resources over time and what was lost.

mod fake;
mod server;
mod soak;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use svc_audio::opus::EncoderConfig;
use svc_audio::{FRAME_SAMPLES, OpusEncoder};
use svc_bench::lock;
use svc_bench::measure::{Cpu, Histogram, Memory, Summary};
use svc_bench::svc_process::{self, Started, SvcProcess};

use crate::server::{RoomMode, Server};
use svc_room::client::{ClientEvent, ClientOptions, ClientStats, RoomClient};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// Frames of the client's cycle (6 s) and of its talk spurt (the first 3 s).
pub(crate) const CYCLE_FRAMES: usize = 300;
const SPEECH_FRAMES: usize = 150;

/// Run N voice sessions end to end (client ⇄ svc ⇄ fake provider) and measure them.
#[derive(Debug, Parser)]
#[command(name = "session-load")]
struct Args {
    /// Session counts to measure, in order (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "50,100,200")]
    sessions: Vec<usize>,
    /// Sessions of the baseline phase, measured first in the same run (0: none).
    #[arg(long, default_value_t = 1)]
    baseline_sessions: usize,
    /// Measured seconds per phase.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Unmeasured seconds of conversation before each measurement (at least one 6 s cycle).
    #[arg(long, default_value_t = 8.0)]
    warmup: f64,
    /// Where the sessions' rooms are, each measured in turn in this run: `embedded` (svc's own
    /// room), `livekit` (`--livekit-url`: on another `svc serve` as the LiveKit server, the
    /// agents joining it as clients) or `worker` (as `livekit`, in worker mode).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "embedded")]
    rooms: Vec<RoomMode>,
    /// Sessions starting at once while a phase opens them.
    #[arg(long, default_value_t = 16)]
    connect_concurrency: usize,
    /// The `svc` binary to measure [default: `svc` beside this benchmark].
    #[arg(long, value_name = "PATH")]
    svc: Option<std::path::PathBuf>,
    /// Worker threads of the clients' runtime.
    #[arg(long, default_value_t = 2)]
    client_threads: usize,
    /// Worker threads of the fake provider's runtime.
    #[arg(long, default_value_t = 1)]
    fake_threads: usize,
    /// Quick check: sessions 1 then 4, 6 s measured, 7 s warm-up.
    #[arg(long)]
    smoke: bool,
    /// Run the soak for this many minutes instead: the first of `--sessions` sessions talk at
    /// all times, each ending after a random 60–180 s and replaced, with faults injected.
    #[arg(long, value_name = "MINUTES")]
    soak_minutes: Option<f64>,
    /// The soak's random seed (lifetimes, fault kinds, their times and targets).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// svc's database [default: SQLite in the run's temporary directory]. A `postgres://` URL
    /// runs svc on Postgres; give it an empty database (the run creates its workspace there).
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Mean seconds between the soak's faults.
    #[arg(long, default_value_t = 20.0)]
    fault_every: f64,
    /// A shell command that restarts svc's Postgres (`pg_ctlcluster 15 main restart` on this
    /// project's machines); with it, the soak's faults include Postgres restarting under load.
    #[arg(long, value_name = "COMMAND", requires = "database_url")]
    restart_postgres: Option<String>,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.smoke {
        args.sessions = vec![4];
        args.seconds = 6.0;
        args.warmup = 7.0;
    }
    if args.sessions.is_empty()
        || args.sessions.contains(&0)
        || !args.seconds.is_finite()
        || args.seconds <= 0.0
        || !args.warmup.is_finite()
        || args.warmup < 0.0
    {
        eprintln!("session-load: --sessions needs positive counts, --seconds > 0, --warmup ≥ 0");
        return ExitCode::FAILURE;
    }
    if let Some(minutes) = args.soak_minutes {
        return match soak::run(&args, minutes) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => {
                eprintln!("session-load: soak FAILED its targets: see the report");
                ExitCode::FAILURE
            }
            Err(error) => {
                eprintln!("session-load: soak: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("session-load: FAILED: see above");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("session-load: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime(name: &str, threads: usize) -> anyhow::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name(name)
        .enable_all()
        .build()
        .with_context(|| format!("building the {name} runtime"))
}

fn run(args: &Args) -> anyhow::Result<bool> {
    let svc_binary = svc_process::binary(args.svc.as_deref())?;
    let fake_runtime = runtime("fake-provider", args.fake_threads)?;
    let client_runtime = runtime("svc-client", args.client_threads)?;
    let registry = Arc::new(fake::Registry::default());
    let cycle = Arc::new(client_cycle()?);

    let fake_listener =
        fake_runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).context("binding the fake provider")?;
    let fake_addr = fake_listener.local_addr()?;
    fake_runtime.spawn(fake::serve(fake_listener, registry.clone()));
    let mut healthy = true;
    let mut reports = Vec::new();
    for (mode_number, &mode) in args.rooms.iter().enumerate() {
        let dir = tempfile::Builder::new().prefix("session-load-").tempdir().context("temporary directory")?;
        let server = Server::start(&svc_binary, dir.path(), fake_addr, args.database_url.as_deref(), mode, &[])?;
        let initial = Memory::of(server.process.pid());
        eprintln!(
            "session-load: {mode:?}: svc ({}) pid {} on {}; clients and fake provider (on {fake_addr}) pid {}",
            svc_binary.display(),
            server.process.pid(),
            server.addr,
            std::process::id()
        );

        let mut phases = Vec::new();
        let baseline = (args.baseline_sessions > 0).then_some(args.baseline_sessions);
        let plan = baseline.into_iter().map(|n| (n, true)).chain(args.sessions.iter().map(|n| (*n, false)));
        for (number, (sessions, is_baseline)) in plan.enumerate() {
            let number = mode_number * 100 + number;
            let context = PhaseContext { args, number, sessions, server: &server, registry: &registry, cycle: &cycle };
            let phase = client_runtime.block_on(run_phase(context))?;
            eprintln!("session-load: {}", phase.one_line());
            phases.push((phase, is_baseline));
        }
        server.stop()?;
        healthy &= phases.iter().all(|(phase, _)| phase.healthy());
        reports.push(report(args, mode, initial, &phases));
    }
    drop(client_runtime);
    drop(fake_runtime);
    println!("{}", reports.join("\n"));
    Ok(healthy)
}

/// A voiced test signal with no pauses (so every 20 ms of a talk spurt is clearly loud): a
/// harmonic series whose pitch glides between about 100 and 180 Hz, under a slow swell between
/// 60 and 100 % of full level, about −16 dBFS RMS. `seed` shifts its phase.
pub(crate) fn voice(rate_hz: u32, samples: usize, seed: u32) -> Vec<i16> {
    use std::f64::consts::PI;
    let rate = f64::from(rate_hz);
    let offset = f64::from(seed) * 0.37;
    let mut phase = 0.0_f64;
    (0..samples)
        .map(|n| {
            let t = n as f64 / rate + offset;
            let pitch = 140.0 + 35.0 * (2.0 * PI * 0.6 * t).sin() + 8.0 * (2.0 * PI * 4.7 * t).sin();
            phase += 2.0 * PI * pitch / rate;
            let harmonics = ((3_400.0_f64).min(rate / 2.0 - 200.0) / pitch) as usize;
            let value: f64 = (1..=harmonics).map(|k| (k as f64 * phase).sin() / k as f64).sum();
            let swell = 0.8 + 0.2 * (2.0 * PI * 3.0 * t).sin();
            (value * swell * 5_000.0).clamp(-32_768.0, 32_767.0) as i16
        })
        .collect()
}

/// The client's 6 s cycle, Opus-encoded once at 48 kHz with the room's voice settings: 3 s of
/// voice, then 3 s of digital silence.
fn client_cycle() -> anyhow::Result<Vec<Arc<[u8]>>> {
    let mut encoder = OpusEncoder::new_voice().context("opus encoder")?;
    let mut pcm = voice(48_000, SPEECH_FRAMES * FRAME_SAMPLES, 1);
    pcm.resize(CYCLE_FRAMES * FRAME_SAMPLES, 0);
    pcm.chunks_exact(FRAME_SAMPLES)
        .map(|frame| encoder.encode_frame(frame).map(Arc::from).context("opus encode"))
        .collect()
}

/// The agent's silence packet, made as the session runtime makes it (one Opus frame of digital
/// silence at 48 kHz with the voice settings): a packet equal to it is filler, not speech.
fn silence_packet() -> anyhow::Result<Arc<[u8]>> {
    let mut encoder = OpusEncoder::with_rate(EncoderConfig::VOICE, 48_000).context("opus encoder")?;
    Ok(Arc::from(encoder.encode_frame(&[0; FRAME_SAMPLES]).context("opus encode")?))
}

/// What every session of a phase records into.
pub(crate) struct Probes {
    /// Only frames sent while this is set count.
    measuring: AtomicBool,
    /// Client send → the fake reads the append carrying the frame.
    pub(crate) up: Histogram,
    /// The fake sends a delta → the client reads the matching packet from its socket.
    down: Histogram,
    /// A response's first delta → its first packet at the client.
    first_audio: Histogram,
    frames_sent: AtomicU64,
    send_errors: AtomicU64,
    pub(crate) appends_at_fake: AtomicU64,
    pub(crate) appends_matched: AtomicU64,
    pub(crate) appends_unmatched: AtomicU64,
    pub(crate) deltas_sent: AtomicU64,
    speech_packets: AtomicU64,
    silence_packets: AtomicU64,
    packets_unmatched: AtomicU64,
    responses_heard: AtomicU64,
}

impl Probes {
    fn new() -> Probes {
        Probes {
            measuring: AtomicBool::new(false),
            up: Histogram::new(),
            down: Histogram::new(),
            first_audio: Histogram::new(),
            frames_sent: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            appends_at_fake: AtomicU64::new(0),
            appends_matched: AtomicU64::new(0),
            appends_unmatched: AtomicU64::new(0),
            deltas_sent: AtomicU64::new(0),
            speech_packets: AtomicU64::new(0),
            silence_packets: AtomicU64::new(0),
            packets_unmatched: AtomicU64::new(0),
            responses_heard: AtomicU64::new(0),
        }
    }

    pub(crate) fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// Audio frames svc has carried so far: the user's the clients sent and the agent's packets
    /// (speech and silence) they received.
    fn media_frames(&self) -> u64 {
        [&self.frames_sent, &self.speech_packets, &self.silence_packets]
            .iter()
            .map(|counter| counter.load(Ordering::Relaxed))
            .sum()
    }
}

/// One session's instants, shared by its client and its provider connection.
pub(crate) struct SessionProbe {
    /// When the client sent each frame of its current cycle (set only while measuring).
    pub(crate) up_sent: Mutex<Vec<Option<Instant>>>,
    /// When the fake sent each delta of its current response.
    pub(crate) down_sent: Mutex<DownLog>,
    /// The phase's histograms and counters.
    pub(crate) probes: Arc<Probes>,
    /// A fault for the session's provider connection to carry out (the soak's), and its signal.
    pub(crate) fault: Mutex<Option<fake::ProviderFault>>,
    pub(crate) fault_raised: tokio::sync::Notify,
    /// Responses the fake finished (`response.done` sent) for the session, over all its
    /// connections: turns svc must have stored.
    pub(crate) responses_done: AtomicU64,
}

/// The deltas of the response the fake is sending (or sent last).
#[derive(Default)]
pub(crate) struct DownLog {
    /// Its number on the connection (1, 2, …).
    pub(crate) response: u64,
    /// Send instant of each delta so far.
    pub(crate) sent: Vec<Instant>,
}

struct PhaseContext<'a> {
    args: &'a Args,
    number: usize,
    sessions: usize,
    server: &'a Server,
    registry: &'a Arc<fake::Registry>,
    cycle: &'a Arc<Vec<Arc<[u8]>>>,
}

struct Phase {
    sessions: usize,
    setup: Duration,
    window: Duration,
    /// svc's process, all of it.
    cpu_svc: f64,
    /// The LiveKit-role server's process (rooms not svc's own).
    cpu_room: Option<f64>,
    /// svc's busiest thread groups (tokio workers, the room's, the store's) with their CPU.
    svc_threads: Vec<(String, f64)>,
    /// This process: the fake provider and the clients.
    cpu_bench: f64,
    cpu_fake: f64,
    cpu_client: f64,
    /// Everything else on the machine.
    cpu_others: f64,
    /// svc's memory.
    memory: Memory,
    up: Summary,
    down: Summary,
    first_audio: Summary,
    frames_sent: u64,
    send_errors: u64,
    appends_at_fake: u64,
    appends_matched: u64,
    appends_unmatched: u64,
    deltas_sent: u64,
    speech_packets: u64,
    silence_packets: u64,
    packets_unmatched: u64,
    responses_heard: u64,
    client_stats: ClientStats,
    sessions_ended: bool,
    /// svc's allocations in the measured window, when its binary counts them.
    heap: Option<HeapUse>,
}

/// svc's heap over a measured window (the `svc-counting` binary).
struct HeapUse {
    /// svc's allocations divided by the audio frames it carried: the user's frames the clients
    /// sent and the agent's packets they received. Everything svc allocated counts (timers,
    /// HTTP scrapes), so this is an upper bound on the per-frame path's allocations.
    allocations_per_frame: f64,
    allocations_per_second: f64,
    live_mib: f64,
}

impl Phase {
    fn one_line(&self) -> String {
        let ms = |value: Option<f64>| value.map_or("–".to_owned(), |v| format!("{v:.2}"));
        format!(
            "N={}: svc CPU {:.1}% ({:.2}% per session), svc RSS {:.0} MiB; fake-provider {:.0}%, svc-client {:.0}%, other processes {:.0}%; → p50 {} p99 {} ms; ← p50 {} p99 {} ms; first audio p50 {} p99 {} ms; frames sent {} appends {} deltas {} speech packets {} responses heard {}",
            self.sessions,
            self.cpu_svc,
            self.cpu_svc / self.sessions as f64,
            self.memory.rss_mib,
            self.cpu_fake,
            self.cpu_client,
            self.cpu_others,
            ms(self.up.p50_ms),
            ms(self.up.p99_ms),
            ms(self.down.p50_ms),
            ms(self.down.p99_ms),
            ms(self.first_audio.p50_ms),
            ms(self.first_audio.p99_ms),
            self.frames_sent,
            self.appends_at_fake,
            self.deltas_sent,
            self.speech_packets,
            self.responses_heard,
        )
    }

    /// Audio flowed both ways: at least 90 % of the client's frames reached the provider, at
    /// least 90 % of the provider's deltas reached the client, and both directions were scored.
    fn healthy(&self) -> bool {
        self.frames_sent > 0
            && self.appends_at_fake * 10 >= self.frames_sent * 9
            && self.deltas_sent > 0
            && self.speech_packets * 10 >= self.deltas_sent * 9
            && self.up.count > 0
            && self.down.count > 0
            && self.sessions_ended
    }
}

async fn run_phase(context: PhaseContext<'_>) -> anyhow::Result<Phase> {
    let PhaseContext { args, number, sessions, server, registry, cycle } = context;
    // Fresh histograms and counters per phase.
    let probes = Arc::new(Probes::new());
    let stop = Arc::new(AtomicBool::new(false));
    let silence = silence_packet()?;
    let setup_started = Instant::now();
    eprintln!("session-load: starting {sessions} sessions…");
    let stream_start = Instant::now() + Duration::from_millis(200);
    let mut opening = JoinSet::new();
    let mut opened = Vec::with_capacity(sessions);
    for index in 0..sessions {
        if opening.len() >= args.connect_concurrency.max(1)
            && let Some(result) = opening.join_next().await
        {
            opened.push(result.context("session setup task")??);
        }
        let session = SessionContext {
            index,
            sessions,
            tag: format!("p{number}-{index}"),
            addr: server.addr,
            key: server.key.clone(),
            registry: registry.clone(),
            probes: probes.clone(),
            stop: stop.clone(),
            cycle: cycle.clone(),
            silence: silence.clone(),
            stream_start,
        };
        opening.spawn(session.open());
    }
    while let Some(result) = opening.join_next().await {
        opened.push(result.context("session setup task")??);
    }
    let setup = setup_started.elapsed();
    eprintln!(
        "session-load: {sessions} sessions talking after {:.1} s; warming up {} s",
        setup.as_secs_f64(),
        args.warmup
    );

    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let svc_pid = server.process.pid();
    let heap_before = server.process.heap().await?;
    let frames_before = probes.media_frames();
    let room_pid = server.room.as_ref().map(SvcProcess::pid);
    let (svc_before, bench_before, room_before) = (Cpu::of(svc_pid), Cpu::now(), room_pid.map(Cpu::of));
    let window_start = Instant::now();
    probes.measuring.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    probes.measuring.store(false, Ordering::SeqCst);
    let (svc_after, bench_after, room_after) = (Cpu::of(svc_pid), Cpu::now(), room_pid.map(Cpu::of));
    let window = window_start.elapsed();
    let frames_in_window = probes.media_frames().saturating_sub(frames_before);
    let heap = match (heap_before, server.process.heap().await?) {
        (Some(before), Some(after)) => Some(HeapUse {
            allocations_per_frame: (after.allocations - before.allocations) / frames_in_window.max(1) as f64,
            allocations_per_second: (after.allocations - before.allocations) / window.as_secs_f64(),
            live_mib: after.live_bytes / (1024.0 * 1024.0),
        }),
        _ => None,
    };
    let memory = Memory::of(svc_pid);

    // Let the last measured frames arrive, then hang up: each session ends as its user leaves.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    let mut client_stats = ClientStats::default();
    let mut leaving = JoinSet::new();
    for session in opened {
        let _ = session.sender.await;
        if let Ok(stats) = session.client.stats().await {
            client_stats.audio_frames_sent += stats.audio_frames_sent;
            client_stats.audio_frames_unsent += stats.audio_frames_unsent;
            client_stats.audio_frames_received += stats.audio_frames_received;
            client_stats.audio_frames_dropped += stats.audio_frames_dropped;
            client_stats.events_dropped += stats.events_dropped;
        }
        registry.remove(&session.tag);
        leaving.spawn(session.client.leave());
    }
    while leaving.join_next().await.is_some() {}
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut live = server.process.live_sessions().await?;
    while live > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        live = server.process.live_sessions().await?;
    }
    let sessions_ended = live == 0;
    if !sessions_ended {
        eprintln!("session-load: {live} sessions still live 60 s after their users left");
    }

    let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let cpu_svc = svc_after.process_percent_since(&svc_before, window);
    let cpu_room = room_before.zip(room_after).map(|(before, after)| after.process_percent_since(&before, window));
    let svc_threads =
        svc_after.groups_percent_since(&svc_before, window).into_iter().filter(|(_, cpu)| *cpu >= 0.5).collect();
    Ok(Phase {
        sessions,
        setup,
        window,
        cpu_svc,
        cpu_room,
        svc_threads,
        cpu_bench: bench_after.process_percent_since(&bench_before, window),
        cpu_fake: bench_after.group_percent_since(&bench_before, "fake-provider", window),
        cpu_client: bench_after.group_percent_since(&bench_before, "svc-client", window),
        // The machine minus this process (what `others_percent_since` leaves) minus svc (and
        // the LiveKit-role server).
        cpu_others: (bench_after.others_percent_since(&bench_before, window) - cpu_svc - cpu_room.unwrap_or(0.0))
            .max(0.0),
        memory,
        up: probes.up.summary(),
        down: probes.down.summary(),
        first_audio: probes.first_audio.summary(),
        frames_sent: count(&probes.frames_sent),
        send_errors: count(&probes.send_errors),
        appends_at_fake: count(&probes.appends_at_fake),
        appends_matched: count(&probes.appends_matched),
        appends_unmatched: count(&probes.appends_unmatched),
        deltas_sent: count(&probes.deltas_sent),
        speech_packets: count(&probes.speech_packets),
        silence_packets: count(&probes.silence_packets),
        packets_unmatched: count(&probes.packets_unmatched),
        responses_heard: count(&probes.responses_heard),
        client_stats,
        sessions_ended,
        heap,
    })
}

/// Everything one session's tasks need.
struct SessionContext {
    index: usize,
    sessions: usize,
    tag: String,
    addr: std::net::SocketAddr,
    key: String,
    registry: Arc<fake::Registry>,
    probes: Arc<Probes>,
    stop: Arc<AtomicBool>,
    cycle: Arc<Vec<Arc<[u8]>>>,
    silence: Arc<[u8]>,
    stream_start: Instant,
}

struct Session {
    tag: String,
    session_id: String,
    probe: Arc<SessionProbe>,
    client: RoomClient,
    sender: tokio::task::JoinHandle<()>,
}

impl SessionContext {
    /// Starts the session over HTTP, joins its room as the user, waits for the agent's track,
    /// and starts the client's sender and reader.
    async fn open(self) -> anyhow::Result<Session> {
        let probe = Arc::new(SessionProbe {
            up_sent: Mutex::new(vec![None; CYCLE_FRAMES]),
            down_sent: Mutex::new(DownLog::default()),
            probes: self.probes.clone(),
            fault: Mutex::new(None),
            fault_raised: tokio::sync::Notify::new(),
            responses_done: AtomicU64::new(0),
        });
        self.registry.insert(self.tag.clone(), probe.clone());
        let body = serde_json::json!({
            "sdk": {"name": "session-load", "version": "1.0.0"},
            "agent": {"type": "inline", "model": "provider_b",
                "instructions": format!("You are a load test. bench-session:{}", self.tag)},
        });
        let Started { url, token, session_id } = svc_process::start_session(self.addr, &self.key, &body).await?;
        let options = ClientOptions { connect_timeout: Duration::from_secs(30), ..Default::default() };
        let mut client = RoomClient::connect(&url, &token, options)
            .await
            .with_context(|| format!("client of session {} connecting", self.index))?;
        client
            .publish_audio("microphone")
            .await
            .with_context(|| format!("client of session {} publishing", self.index))?;
        let agent_track = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(event) = client.next_event().await {
                if let ClientEvent::TrackSubscribed { track_sid, .. } = event {
                    return Some(track_sid);
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .with_context(|| format!("client of session {} never heard the agent's track", self.index))?;

        // Cycles spread over 6 s, frames over each 20 ms, as independent callers are.
        let spread = |period_us: usize| Duration::from_micros((period_us * self.index / self.sessions.max(1)) as u64);
        let start_at = self.stream_start.max(Instant::now()) + spread(CYCLE_FRAMES * 20_000) + spread(20_000);
        let sender = tokio::spawn(send_cycles(
            client.audio_sender(),
            self.cycle.clone(),
            probe.clone(),
            self.probes.clone(),
            self.stop.clone(),
            start_at,
            1_000_000 * self.index as u64,
        ));
        let (client, events) = client.split_events();
        let reader = Reader { agent_track, silence: self.silence, probe: probe.clone(), probes: self.probes };
        tokio::spawn(reader.run(events));
        Ok(Session { tag: self.tag, session_id, probe, client, sender })
    }
}

/// Sends the cycle's frames every 20 ms from `start` until `stop`, remembering each send.
async fn send_cycles(
    audio: svc_room::client::AudioSender,
    cycle: Arc<Vec<Arc<[u8]>>>,
    probe: Arc<SessionProbe>,
    probes: Arc<Probes>,
    stop: Arc<AtomicBool>,
    start: Instant,
    rtp_base: u64,
) {
    let mut ticker = tokio::time::interval_at(start.into(), Duration::from_millis(20));
    let mut number: usize = 0;
    while !stop.load(Ordering::Relaxed) {
        ticker.tick().await;
        let index = number % CYCLE_FRAMES;
        let now = Instant::now();
        lock(&probe.up_sent)[index] = probes.measuring().then_some(now);
        match audio.send_opus(rtp_base + (number * FRAME_SAMPLES) as u64, cycle[index].clone()) {
            Ok(()) => probes.frames_sent.fetch_add(1, Ordering::Relaxed),
            Err(_) => probes.send_errors.fetch_add(1, Ordering::Relaxed),
        };
        number += 1;
    }
}

/// Reads the agent's track and scores every speech packet against the delta it came from.
struct Reader {
    agent_track: String,
    silence: Arc<[u8]>,
    probe: Arc<SessionProbe>,
    probes: Arc<Probes>,
}

impl Reader {
    async fn run(self, mut events: svc_room::client::ClientEvents) {
        // Position in the current run of speech packets, and which response it is.
        let mut run: Option<(u64, usize)> = None;
        while let Some(event) = events.next().await {
            match event {
                ClientEvent::AudioFrame(frame) if *frame.track_sid == *self.agent_track => {
                    if *frame.opus == *self.silence {
                        self.probes.silence_packets.fetch_add(1, Ordering::Relaxed);
                        run = None;
                        continue;
                    }
                    self.probes.speech_packets.fetch_add(1, Ordering::Relaxed);
                    let log = lock(&self.probe.down_sent);
                    let (response, index) = match run {
                        Some((response, index)) => (response, index + 1),
                        None => {
                            self.probes.responses_heard.fetch_add(1, Ordering::Relaxed);
                            (log.response, 0)
                        }
                    };
                    run = Some((response, index));
                    let sent = (log.response == response).then(|| log.sent.get(index).copied()).flatten();
                    drop(log);
                    if !self.probes.measuring() {
                        continue;
                    }
                    match sent {
                        Some(sent) if sent <= frame.received_at => {
                            let latency = frame.received_at - sent;
                            self.probes.down.record(latency);
                            if index == 0 {
                                self.probes.first_audio.record(latency);
                            }
                        }
                        _ => {
                            self.probes.packets_unmatched.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                ClientEvent::Closed { .. } => break,
                _ => {}
            }
        }
    }
}

fn report(args: &Args, mode: RoomMode, initial: Memory, phases: &[(Phase, bool)]) -> String {
    let ms = |value: Option<f64>| value.map_or("–".to_owned(), |v| format!("{v:.2}"));
    let baseline = phases.iter().find(|(_, is_baseline)| *is_baseline).map(|(phase, _)| phase);
    let mut out = String::new();
    out.push_str(&svc_bench::run_header(" --bin session-load"));
    out.push_str(&format!("- Rooms: {}.\n", mode.describe()));
    out.push_str(&format!(
        "- Setup: svc in its own process (`svc serve`: HTTP, room or room client, session runtime, SQLite; one tokio worker per core), set up by its CLI; in the benchmark's process the fake OpenAI Realtime provider on {} thread(s) (`fake-provider`) and the str0m clients on {} (`svc-client`). Each client loops 3 s of voice and 3 s of silence; the agent answers each turn with 2.4 s of 24 kHz speech streamed at real time. {} s warm-up, {} s measured per phase. svc's RSS before any session: {:.0} MiB.\n\n",
        args.fake_threads, args.client_threads, args.warmup, args.seconds, initial.rss_mib,
    ));
    out.push_str("| sessions | svc CPU (% of a core) | LiveKit server CPU | svc CPU per session | marginal svc CPU per session vs baseline | svc RSS MiB | svc RSS per session (MiB) | fake-provider | svc-client | → client packet → provider frame p50 / p99 / max (ms) | ← provider frame → client packet p50 / p99 / max (ms) | first audio p50 / p99 (ms) | p99 vs baseline (→ / ←) |\n");
    out.push_str("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (phase, is_baseline) in phases {
        let ratio = |value: Option<f64>, base: Option<f64>| match (value, base) {
            (Some(value), Some(base)) if base > 0.0 => format!("{:.2}×", value / base),
            _ => "–".to_owned(),
        };
        let (marginal, p99_ratio) = match baseline {
            Some(base) if !is_baseline && phase.sessions > base.sessions => {
                let extra = (phase.sessions - base.sessions) as f64;
                (
                    format!("{:.2}", (phase.cpu_svc - base.cpu_svc) / extra),
                    format!(
                        "{} / {}",
                        ratio(phase.up.p99_ms, base.up.p99_ms),
                        ratio(phase.down.p99_ms, base.down.p99_ms)
                    ),
                )
            }
            _ => ("(baseline)".to_owned(), "(baseline)".to_owned()),
        };
        out.push_str(&format!(
            "| {}{} | {:.1} | {} | {:.2} | {} | {:.0} | {:.2} | {:.0} | {:.0} | {} / {} / {} | {} / {} / {} | {} / {} | {} |\n",
            phase.sessions,
            if *is_baseline { " (baseline)" } else { "" },
            phase.cpu_svc,
            phase.cpu_room.map_or("–".to_owned(), |cpu| format!("{cpu:.1}")),
            phase.cpu_svc / phase.sessions as f64,
            marginal,
            phase.memory.rss_mib,
            (phase.memory.rss_mib - initial.rss_mib) / phase.sessions as f64,
            phase.cpu_fake,
            phase.cpu_client,
            ms(phase.up.p50_ms),
            ms(phase.up.p99_ms),
            ms(phase.up.max_ms),
            ms(phase.down.p50_ms),
            ms(phase.down.p99_ms),
            ms(phase.down.max_ms),
            ms(phase.first_audio.p50_ms),
            ms(phase.first_audio.p99_ms),
            p99_ratio,
        ));
    }
    out.push_str(
        "\nAccounting over each whole phase (warm-up included; latency samples are the measured window's):\n\n",
    );
    out.push_str("| sessions | svc's thread groups (% of a core) | benchmark process CPU | other processes' CPU | setup (s) | window (s) | frames sent | send errors | appends at provider | → samples (unmatched) | deltas sent | speech packets at clients | silence packets | ← samples (unmatched) | responses heard | frames dropped at clients | svc peak RSS MiB | sessions ended |\n");
    out.push_str("|--:|--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--|\n");
    for (phase, _) in phases {
        let threads = if phase.svc_threads.is_empty() {
            "–".to_owned()
        } else {
            phase.svc_threads.iter().map(|(name, cpu)| format!("`{name}` {cpu:.1}")).collect::<Vec<_>>().join(", ")
        };
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {} | {} | {} | {} ({}) | {} | {} | {} | {} ({}) | {} | {} | {:.0} | {} |\n",
            phase.sessions,
            threads,
            phase.cpu_bench,
            phase.cpu_others,
            phase.setup.as_secs_f64(),
            phase.window.as_secs_f64(),
            phase.frames_sent,
            phase.send_errors,
            phase.appends_at_fake,
            phase.appends_matched,
            phase.appends_unmatched,
            phase.deltas_sent,
            phase.speech_packets,
            phase.silence_packets,
            phase.down.count,
            phase.packets_unmatched,
            phase.responses_heard,
            phase.client_stats.audio_frames_dropped,
            phase.memory.peak_mib,
            if phase.sessions_ended { "yes" } else { "**no**" },
        ));
    }
    if phases.iter().any(|(phase, _)| phase.heap.is_some()) {
        out.push_str("\nsvc's heap in the measured window (this svc counts its allocations: `--svc target/release/svc-counting`):\n\n");
        out.push_str("| sessions | allocations per audio frame carried | allocations per second | live heap MiB |\n|--:|--:|--:|--:|\n");
        for (phase, _) in phases {
            if let Some(heap) = &phase.heap {
                out.push_str(&format!(
                    "| {} | {:.3} | {:.0} | {:.1} |\n",
                    phase.sessions, heap.allocations_per_frame, heap.allocations_per_second, heap.live_mib
                ));
            }
        }
    }
    if phases.iter().any(|(phase, _)| !phase.healthy()) {
        out.push_str("\n**Unhealthy run**: in some phase fewer than 90 % of the frames made it through one way, a direction was never scored, or sessions did not end.\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_voice_is_loud_in_every_frame() {
        for (rate, frame) in [(48_000, FRAME_SAMPLES), (24_000, fake::PROVIDER_FRAME)] {
            let pcm = voice(rate, rate as usize * 3, 1);
            for chunk in pcm.chunks_exact(frame) {
                let rms = (chunk.iter().map(|&s| f64::from(s) * f64::from(s)).sum::<f64>() / frame as f64).sqrt();
                assert!(rms > 2_000.0, "a quiet frame at {rate} Hz: RMS {rms}");
            }
        }
    }

    #[test]
    fn the_cycle_is_voice_then_silence_and_silence_is_the_runtimes_packet() {
        let cycle = client_cycle().expect("cycle");
        assert_eq!(cycle.len(), CYCLE_FRAMES);
        let silence = silence_packet().expect("silence");
        assert!(cycle[..SPEECH_FRAMES].iter().all(|frame| frame.len() > silence.len()));
        assert!(silence.len() < 40, "digital silence is a few bytes: {}", silence.len());
    }
}
