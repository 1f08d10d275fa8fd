//! `start-ready`: how long a user waits from the session start to the agent's `ready`, in each
//! of svc's room modes, against one fake provider in one run:
//!
//! - **embedded**: `svc serve` with its own room (the default);
//! - **external**: `--livekit-url`: the sessions' rooms on a LiveKit server (another `svc serve`
//!   plays it), the node that answered the start joining its agent over the network;
//! - **worker**: as external, with `--livekit-agent-name`: the start creates the room with a
//!   dispatch, and the LiveKit server offers the job to the worker (one node here), which reads
//!   the session from its store and joins.
//!
//! Per mode, `--sessions` sessions one after another, as a user does: `POST …/session/start`,
//! then the user (svc-room's `RoomClient`, real ICE/DTLS) joins with the answer and waits for
//! the first `ready` data message, then ends the session (`{"type":"end"}`) and leaves. Reported:
//! p50, p95 and max of the start's answer, of the join, and of start → `ready`. The provider is
//! svc-testkit's OpenAI Realtime fake on loopback, so the times are svc's and the room's, not an
//! upstream's. The report is Markdown on stdout; progress goes to stderr.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use svc_bench::svc_process::{self, SvcConfig, SvcProcess};
use svc_room::client::{ClientEvent, ClientOptions, RoomClient};
use svc_testkit::{FAKE_API_KEY, FakeUpstream, Flavor};

/// How long one session may take to say `ready`.
const READY_WITHIN: Duration = Duration::from_secs(30);

#[derive(Parser, Debug)]
#[command(about = "Start → ready in the embedded room, on a LiveKit server, and in worker mode")]
struct Args {
    /// Sessions per mode.
    #[arg(long, default_value_t = 30)]
    sessions: usize,
    /// The svc binary (default: the one built beside this benchmark).
    #[arg(long)]
    svc: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Embedded,
    External,
    Worker,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Embedded => "embedded room",
            Mode::External => "LiveKit server (`--livekit-url`)",
            Mode::Worker => "worker mode (`--livekit-agent-name`)",
        }
    }
}

/// One session's times.
struct Times {
    start: Duration,
    join: Duration,
    ready: Duration,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let binary = svc_process::binary(args.svc.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(run(args, binary))
}

async fn run(args: Args, binary: std::path::PathBuf) -> anyhow::Result<()> {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let provider = vec![
        ("OPENAI_API_KEY".to_owned(), FAKE_API_KEY.to_owned()),
        ("OPENAI_BASE_URL".to_owned(), fake.openai_base_url()),
    ];
    let mut report = Vec::new();
    for mode in [Mode::Embedded, Mode::External, Mode::Worker] {
        eprintln!("start-ready: {} …", mode.name());
        let times = measure(mode, &binary, &provider, args.sessions).await.with_context(|| mode.name())?;
        report.push((mode, times));
    }
    println!(
        "| mode | sessions | start answered p50 / p95 / max (ms) | joined p50 / p95 / max | start → `ready` p50 / p95 / max |"
    );
    println!("|---|---|---|---|---|");
    for (mode, times) in &report {
        let column = |pick: fn(&Times) -> Duration| {
            let mut values: Vec<Duration> = times.iter().map(pick).collect();
            values.sort();
            let at = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
            format!("{:.0} / {:.0} / {:.0}", ms(at(0.5)), ms(at(0.95)), ms(at(1.0)))
        };
        println!(
            "| {} | {} | {} | {} | {} |",
            mode.name(),
            times.len(),
            column(|t| t.start),
            column(|t| t.join),
            column(|t| t.ready)
        );
    }
    Ok(())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Starts the mode's servers and runs `sessions` sessions one after another.
async fn measure(
    mode: Mode,
    binary: &std::path::Path,
    provider: &[(String, String)],
    sessions: usize,
) -> anyhow::Result<Vec<Times>> {
    let dirs = (tempfile::tempdir()?, tempfile::tempdir()?);
    let livekit = match mode {
        Mode::Embedded => None,
        Mode::External | Mode::Worker => Some(svc_process::start_livekit_role(binary, dirs.1.path())?),
    };
    let mut env = provider.to_vec();
    env.push(("SVC_ROOM_UDP_PORT".to_owned(), "0".to_owned()));
    env.extend(livekit.as_ref().map(svc_process::livekit_env).unwrap_or_default());
    if matches!(mode, Mode::Worker) {
        env.push(("SVC_LIVEKIT_AGENT_NAME".to_owned(), "bench".to_owned()));
    }
    let config = SvcConfig { binary: binary.to_owned(), data_dir: dirs.0.path().to_owned(), env };
    let key = config.workspace_with_key("bench")?;
    let svc = SvcProcess::start(&config)?;
    // The worker registers within moments of the server's start; a start before that would
    // wait in the dispatcher and count the registration against the first session.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let body = serde_json::json!({"sdk": {"name": "start-ready", "version": "1.0.0"},
        "agent": {"type": "inline", "model": "provider_b"}});
    let mut times = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        times.push(one_session(&svc, &key, &body).await?);
    }
    svc.stop(Duration::from_secs(10))?;
    if let Some(livekit) = livekit {
        livekit.stop(Duration::from_secs(10))?;
    }
    Ok(times)
}

async fn one_session(svc: &SvcProcess, key: &str, body: &serde_json::Value) -> anyhow::Result<Times> {
    let began = Instant::now();
    let started = svc_process::start_session(svc.addr, key, body).await?;
    let start = began.elapsed();
    let mut client = RoomClient::connect(&started.url, &started.token, ClientOptions::default())
        .await
        .with_context(|| format!("joining {}", started.url))?;
    let join = began.elapsed();
    let ready = tokio::time::timeout(READY_WITHIN, async {
        while let Some(event) = client.next_event().await {
            if let ClientEvent::Data(data) = event
                && serde_json::from_slice::<serde_json::Value>(&data.payload)
                    .is_ok_and(|message| message["type"] == "ready")
            {
                return Some(began.elapsed());
            }
        }
        None
    })
    .await;
    let ready = match ready {
        Ok(Some(ready)) => ready,
        Ok(None) => bail!("session {}: the room closed before `ready`", started.session_id),
        Err(_) => bail!("session {}: no `ready` within {READY_WITHIN:?}", started.session_id),
    };
    client
        .send_data(br#"{"type":"end"}"#.to_vec(), Some("svc"), true, &[])
        .await
        .with_context(|| format!("ending session {}", started.session_id))?;
    client.leave().await;
    Ok(Times { start, join, ready })
}
