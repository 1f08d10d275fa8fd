//! The soak (`session-load --soak-minutes M`): hours of a server's life in minutes, with faults.
//!
//! The first of `--sessions` (N) sessions talk at all times, each the same conversation as the
//! load phases' (3 s of voice, 3 s of silence, the agent answering in the silence). Each ends
//! after a random 60–180 s, by its user leaving, and its slot starts a new one a moment later,
//! so sessions start and end continuously. Every `--fault-every` seconds on average (seeded) one
//! fault strikes:
//!
//! - a session's provider connection closes (with a close frame), or drops (without one), or
//!   stalls (no bytes for 12 s, longer than svc's stall bound), so svc must reconnect it;
//! - the media path of every client loses 20 % of its datagrams both ways for 1 s, or 5 % for
//!   10 s with 20–80 ms of delay (packets reorder) and 1 % duplicates (svc-testkit's `UdpLink`
//!   between the clients and the room, which advertises the link's address);
//! - with `--restart-postgres CMD` (svc on Postgres), the database restarts: every connection
//!   dropped, new ones refused for a moment, while the sessions talk.
//!
//! Every 30 s it samples svc's RSS, descriptors, threads, tokio tasks, open rooms and live
//! sessions. After each session ends it reads the session's timeline and transcript from svc's
//! API: why it ended, and whether every reply the provider finished is stored. The targets (the
//! issue's): RSS and descriptors flat after the warm-up (< 5 % growth over the last two thirds of
//! the run, the last 20 minutes of 30), no lost turns, no session ended other than by its user.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use svc_bench::lock;
use svc_bench::measure::Memory;
use svc_bench::svc_process;
use svc_testkit::udp_link::{Impairment, UdpLink};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::fake::{self, ProviderFault};
use crate::{Args, Probes, Server, SessionContext};

/// How long a session lives, in seconds, drawn uniformly.
const LIFETIME_SECONDS: (u64, u64) = (60, 180);
/// How often svc's resources are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(30);
/// A stalled provider connection says nothing for this long (svc detects a stall within 10 s).
const STALL: Duration = Duration::from_secs(12);
/// After Postgres restarted, starts may still be refused this long (svc's pool reconnecting).
const OUTAGE_GRACE: Duration = Duration::from_secs(5);
/// The reason a session ends when its user leaves: the only end that is the session's choice.
const USER_LEFT: &str = "participant_left";

/// xorshift64: the soak's seeded choices.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `low..high` (`low` when the range is empty).
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next().checked_rem(high.saturating_sub(low)).unwrap_or(0)
    }
}

/// One of svc's resources at one moment.
struct Sample {
    at: Duration,
    rss_mib: f64,
    /// The heap svc's allocator holds live (NaN unless svc counts its allocations): RSS growing
    /// while this stays flat is memory the allocator keeps, not a leak.
    heap_mib: f64,
    descriptors: usize,
    threads: usize,
    tokio_tasks: f64,
    rooms: f64,
    live: f64,
}

/// What happened over the run.
#[derive(Default)]
struct Tally {
    started: u64,
    start_failures: u64,
    /// Starts refused while the database restarted (a 503 is the promised answer then).
    start_refused_in_outage: u64,
    last_start_failure: Option<String>,
    /// Ended by their user leaving.
    ended_by_user: u64,
    /// Ended for any other reason, by reason.
    ended_otherwise: BTreeMap<String, u64>,
    /// Replies the provider finished, and the assistant turns svc stored, over checked sessions.
    replies_finished: u64,
    turns_stored: u64,
    /// Sessions that stored fewer turns than the provider finished, and the shortfall.
    sessions_short: u64,
    turns_lost: u64,
    /// Sessions whose end could not be read back.
    unchecked: u64,
    reconnects: u64,
    faults: BTreeMap<&'static str, u64>,
}

/// A session that ended, to be checked against what svc stored.
struct Ended {
    session_id: String,
    replies_finished: u64,
}

/// What every slot shares.
struct Shared {
    sessions: usize,
    addr: std::net::SocketAddr,
    key: String,
    registry: Arc<fake::Registry>,
    probes: Arc<Probes>,
    cycle: Arc<Vec<Arc<[u8]>>>,
    silence: Arc<[u8]>,
    seed: u64,
    /// How to restart svc's Postgres, when that fault is on.
    restart_postgres: Option<String>,
    /// Set while Postgres restarts and for a moment after (svc's pool reconnecting).
    database_outage: AtomicBool,
    deadline: Instant,
    tally: Mutex<Tally>,
}

pub(crate) fn run(args: &Args, minutes: f64) -> anyhow::Result<bool> {
    if !minutes.is_finite() || minutes <= 0.0 || !args.fault_every.is_finite() || args.fault_every <= 0.0 {
        anyhow::bail!("--soak-minutes and --fault-every must be positive");
    }
    let sessions = args.sessions[0];
    let svc_binary = svc_process::binary(args.svc.as_deref())?;
    let fake_runtime = crate::runtime("fake-provider", args.fake_threads)?;
    let client_runtime = crate::runtime("svc-client", args.client_threads)?;
    let registry = Arc::new(fake::Registry::default());
    let fake_listener =
        fake_runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).context("binding the fake provider")?;
    let fake_addr = fake_listener.local_addr()?;
    fake_runtime.spawn(fake::serve(fake_listener, registry.clone()));
    // The room binds 127.0.0.1 and advertises 127.0.0.2, where the link listens (a 1:1 NAT), so
    // every client's media crosses the link; the port is fixed so that both know it.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").and_then(|probe| probe.local_addr())?.port();
    let dir = tempfile::Builder::new().prefix("soak-").tempdir().context("temporary directory")?;
    let env = [("SVC_ROOM_UDP_PORT", port.to_string()), ("SVC_ROOM_NODE_IP", "127.0.0.1=127.0.0.2".to_owned())];
    let server = Server::start(
        &svc_binary,
        dir.path(),
        fake_addr,
        args.database_url.as_deref(),
        crate::server::RoomMode::Embedded,
        &env,
    )?;
    eprintln!(
        "soak: svc pid {} on {}; {sessions} sessions for {minutes} min, a fault every ~{} s, seed {}",
        server.process.pid(),
        server.addr,
        args.fault_every,
        args.seed
    );
    let started = Instant::now();
    let shared = Arc::new(Shared {
        sessions,
        addr: server.addr,
        key: server.key.clone(),
        registry,
        probes: Arc::new(Probes::new()),
        cycle: Arc::new(crate::client_cycle()?),
        silence: crate::silence_packet()?,
        seed: args.seed,
        restart_postgres: args.restart_postgres.clone(),
        database_outage: AtomicBool::new(false),
        deadline: started + Duration::from_secs_f64(minutes * 60.0),
        tally: Mutex::new(Tally::default()),
    });
    let samples = client_runtime.block_on(soak(&shared, &server, port, args.fault_every))?;
    let stopped = server.process.stop(Duration::from_secs(30));
    drop(client_runtime);
    drop(fake_runtime);
    if let Ok(status) = stopped
        && !status.success()
    {
        eprintln!("soak: svc serve exited with {status}");
    }
    let (report, healthy) = report(args, minutes, &samples, &lock(&shared.tally));
    println!("{report}");
    Ok(healthy)
}

async fn soak(shared: &Arc<Shared>, server: &Server, port: u16, fault_every: f64) -> anyhow::Result<Vec<Sample>> {
    let public = std::net::SocketAddr::from(([127, 0, 0, 2], port));
    let link = Arc::new(
        UdpLink::start(public, std::net::SocketAddr::from(([127, 0, 0, 1], port)), shared.seed)
            .await
            .context("the media link binds 127.0.0.2")?,
    );
    let (ended, ended_queue) = mpsc::unbounded_channel();
    let checker = tokio::spawn(check_ended(shared.clone(), ended_queue));
    let faults = tokio::spawn(inject_faults(shared.clone(), link.clone(), fault_every));
    let mut slots = JoinSet::new();
    for slot in 0..shared.sessions {
        slots.spawn(run_slot(shared.clone(), slot, ended.clone()));
        // Sessions open a few at a time, as callers arrive.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = Instant::now();
    let pid = server.process.pid();
    let mut samples = Vec::new();
    let mut next = Instant::now();
    loop {
        tokio::time::sleep_until(next.into()).await;
        if Instant::now() >= shared.deadline {
            break;
        }
        next += SAMPLE_EVERY;
        let sample = sample(server.addr, pid, started.elapsed()).await;
        eprintln!(
            "soak: {:>5.0} s: RSS {:.1} MiB (heap {:.1}), {} fds, {} threads, {} tasks, {} rooms, {} live; appends {} deltas {}; {}",
            sample.at.as_secs_f64(),
            sample.rss_mib,
            sample.heap_mib,
            sample.descriptors,
            sample.threads,
            sample.tokio_tasks,
            sample.rooms,
            sample.live,
            shared.probes.appends_at_fake.load(Ordering::Relaxed),
            shared.probes.deltas_sent.load(Ordering::Relaxed),
            one_line(&lock(&shared.tally)),
        );
        samples.push(sample);
    }
    while slots.join_next().await.is_some() {}
    faults.abort();
    // The queue closes with the last sender: the checker ends once the last ends are read back.
    drop(ended);
    let _ = checker.await;
    // Everything has ended: what is left now is what a leak left.
    tokio::time::sleep(Duration::from_secs(5)).await;
    samples.push(sample(server.addr, pid, started.elapsed()).await);
    Ok(samples)
}

async fn sample(addr: std::net::SocketAddr, pid: u32, at: Duration) -> Sample {
    let proc = std::path::Path::new("/proc").join(pid.to_string());
    let threads = std::fs::read_to_string(proc.join("status"))
        .ok()
        .and_then(|status| status.lines().find_map(|line| line.strip_prefix("Threads:"))?.trim().parse().ok())
        .unwrap_or(0);
    // One scrape for the gauges; a failed one shows as NaN.
    let metrics = svc_process::metrics(addr).await.unwrap_or_default();
    let metric = |name: &str| svc_process::metric_value(&metrics, name).unwrap_or(f64::NAN);
    Sample {
        at,
        rss_mib: Memory::of(pid).rss_mib,
        heap_mib: svc_process::Heap::from_metrics(&metrics)
            .map_or(f64::NAN, |heap| heap.live_bytes / (1024.0 * 1024.0)),
        descriptors: std::fs::read_dir(proc.join("fd")).map_or(0, Iterator::count),
        threads,
        tokio_tasks: metric("svc_tokio_alive_tasks"),
        rooms: metric("svc_rooms_open"),
        live: metric("svc_live_sessions"),
    }
}

/// One slot: a session after another until the deadline.
async fn run_slot(shared: Arc<Shared>, slot: usize, ended: mpsc::UnboundedSender<Ended>) {
    let mut rng = Rng::new(shared.seed ^ (slot as u64 + 1));
    for generation in 0.. {
        if Instant::now() >= shared.deadline {
            break;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let context = SessionContext {
            index: slot,
            sessions: shared.sessions,
            tag: format!("s{slot}-{generation}"),
            addr: shared.addr,
            key: shared.key.clone(),
            registry: shared.registry.clone(),
            probes: shared.probes.clone(),
            stop: stop.clone(),
            cycle: shared.cycle.clone(),
            silence: shared.silence.clone(),
            stream_start: Instant::now(),
        };
        let session = match context.open().await {
            Ok(session) => session,
            Err(error) => {
                {
                    let mut tally = lock(&shared.tally);
                    if shared.database_outage.load(Ordering::SeqCst) {
                        tally.start_refused_in_outage += 1;
                    } else {
                        tally.start_failures += 1;
                    }
                    tally.last_start_failure = Some(format!("{error:#}"));
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        lock(&shared.tally).started += 1;
        let lifetime = Duration::from_secs(rng.range(LIFETIME_SECONDS.0, LIFETIME_SECONDS.1));
        tokio::time::sleep_until((Instant::now() + lifetime).min(shared.deadline).into()).await;
        stop.store(true, Ordering::SeqCst);
        let _ = session.sender.await;
        let replies_finished = session.probe.responses_done.load(Ordering::Relaxed);
        shared.registry.remove(&session.tag);
        session.client.leave().await;
        let _ = ended.send(Ended { session_id: session.session_id, replies_finished });
        tokio::time::sleep(Duration::from_millis(rng.range(100, 2_000))).await;
    }
}

/// Strikes a fault every `every` seconds on average until the deadline.
async fn inject_faults(shared: Arc<Shared>, link: Arc<UdpLink>, every: f64) {
    let mut rng = Rng::new(shared.seed ^ 0xFA17);
    loop {
        let wait = every * (0.5 + rng.range(0, 1_000) as f64 / 1_000.0);
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        if Instant::now() >= shared.deadline {
            return;
        }
        let kinds = if shared.restart_postgres.is_some() { 6 } else { 5 };
        let name = match rng.range(0, kinds) {
            kind @ 0..=2 => {
                let fault = [ProviderFault::Close, ProviderFault::Abort, ProviderFault::Stall(STALL)][kind as usize];
                let Some((tag, probe)) = shared.registry.pick(rng.next() as usize) else { continue };
                *lock(&probe.fault) = Some(fault);
                probe.fault_raised.notify_one();
                eprintln!("soak: fault: provider {fault:?} on {tag}");
                ["provider closes", "provider drops (no close frame)", "provider stalls 12 s"][kind as usize]
            }
            3 => {
                link.set_both(Impairment { loss: 0.2, ..Impairment::default() });
                tokio::time::sleep(Duration::from_secs(1)).await;
                link.set_both(Impairment::default());
                "media: 20 % loss for 1 s"
            }
            5 => {
                let command = shared.restart_postgres.as_deref().unwrap_or("false");
                shared.database_outage.store(true, Ordering::SeqCst);
                eprintln!("soak: fault: Postgres restarts");
                match tokio::process::Command::new("sh").arg("-c").arg(command).status().await {
                    Ok(status) if status.success() => {}
                    Ok(status) => eprintln!("soak: restarting Postgres: {status}"),
                    Err(error) => eprintln!("soak: restarting Postgres: {error}"),
                }
                tokio::time::sleep(OUTAGE_GRACE).await;
                shared.database_outage.store(false, Ordering::SeqCst);
                "Postgres restarts"
            }
            _ => {
                link.set_both(Impairment {
                    loss: 0.05,
                    delay: Duration::from_millis(20),
                    jitter: Duration::from_millis(60),
                    duplicate: 0.01,
                });
                tokio::time::sleep(Duration::from_secs(10)).await;
                link.set_both(Impairment::default());
                "media: 5 % loss, 20–80 ms delay, 1 % duplicates for 10 s"
            }
        };
        *lock(&shared.tally).faults.entry(name).or_default() += 1;
    }
}

/// Reads back each ended session: why it ended, how often its provider reconnected, and its
/// stored turns against the replies the provider finished.
async fn check_ended(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Ended>) {
    // Each session is checked once its end is stored (a moment after its user left).
    let mut checks = JoinSet::new();
    while let Some(ended) = queue.recv().await {
        checks.spawn(check_one(shared.clone(), ended));
        while checks.try_join_next().is_some() {}
    }
    while checks.join_next().await.is_some() {}
}

async fn check_one(shared: Arc<Shared>, ended: Ended) {
    let timeline_path = format!("/api/v1/external/sessions/{}/timeline", ended.session_id);
    let transcript_path = format!("/api/v1/external/sessions/{}/transcript", ended.session_id);
    let give_up = Instant::now() + Duration::from_secs(60);
    let reason = loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let timeline = svc_process::get_json(shared.addr, &shared.key, &timeline_path).await.ok();
        let events = timeline.as_ref().and_then(|timeline| timeline["events"].as_array().cloned()).unwrap_or_default();
        let end = events.iter().find(|event| event["type"] == "session.ended");
        if let Some(end) = end {
            let reconnects = events.iter().filter(|event| event["type"] == "provider.reconnected").count();
            lock(&shared.tally).reconnects += reconnects as u64;
            let reason = end["data"]["reason"].as_str().or_else(|| end["reason"].as_str()).unwrap_or("unknown");
            break Some(reason.to_owned());
        }
        if Instant::now() > give_up {
            break None;
        }
    };
    // Read again while the API cannot answer (the database restarting).
    let stored = loop {
        match svc_process::get_json(shared.addr, &shared.key, &transcript_path).await {
            Ok(turns) => break Some(turns.as_array().map_or(0, |turns| assistant_turns(turns))),
            Err(_) if reason.is_some() && Instant::now() < give_up => tokio::time::sleep(Duration::from_secs(2)).await,
            Err(_) => break None,
        }
    };
    let mut tally = lock(&shared.tally);
    let (Some(reason), Some(stored)) = (reason, stored) else {
        tally.unchecked += 1;
        return;
    };
    if reason == USER_LEFT {
        tally.ended_by_user += 1;
    } else {
        eprintln!("soak: session {} ended with {reason}", ended.session_id);
        *tally.ended_otherwise.entry(reason).or_default() += 1;
    }
    tally.replies_finished += ended.replies_finished;
    tally.turns_stored += stored;
    if stored < ended.replies_finished {
        eprintln!("soak: session {} stored {stored} of {} replies", ended.session_id, ended.replies_finished);
        tally.sessions_short += 1;
        tally.turns_lost += ended.replies_finished - stored;
    }
}

fn assistant_turns(turns: &[serde_json::Value]) -> u64 {
    turns.iter().filter(|turn| turn["role"] == "assistant").count() as u64
}

fn one_line(tally: &Tally) -> String {
    format!(
        "{} started ({} failed, {} refused while the database restarted), {} ended by their user, {} otherwise, {} replies finished / {} stored, {} lost, {} reconnects, {} faults",
        tally.started,
        tally.start_failures,
        tally.start_refused_in_outage,
        tally.ended_by_user,
        tally.ended_otherwise.values().sum::<u64>(),
        tally.replies_finished,
        tally.turns_stored,
        tally.turns_lost,
        tally.reconnects,
        tally.faults.values().sum::<u64>(),
    )
}

/// Growth of `value` over the samples from `from` on: (last − first) / first.
fn growth(samples: &[Sample], from: Duration, value: impl Fn(&Sample) -> f64) -> Option<f64> {
    let window: Vec<f64> = samples.iter().filter(|sample| sample.at >= from).map(value).collect();
    let (first, last) = (*window.first()?, *window.last()?);
    (first > 0.0).then(|| (last - first) / first)
}

fn report(args: &Args, minutes: f64, samples: &[Sample], tally: &Tally) -> (String, bool) {
    let mut out = svc_bench::run_header(" --bin session-load");
    let sessions = args.sessions[0];
    out.push_str(&format!(
        "- Soak: {sessions} sessions talking at all times for {minutes} min, each ending after {}–{} s by its user leaving and replaced; a fault every ~{} s (seed {}); svc in its own process on {}, the clients' media through a `UdpLink`.\n\n",
        LIFETIME_SECONDS.0,
        LIFETIME_SECONDS.1,
        args.fault_every,
        args.seed,
        if args.database_url.as_deref().is_some_and(|url| url.starts_with("postgres")) { "Postgres" } else { "SQLite" }
    ));
    out.push_str("| at (min) | svc RSS (MiB) | live heap (MiB) | descriptors | threads | tokio tasks | rooms open | live sessions |\n");
    out.push_str("|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    // Every sample of a short run; every other minute of a long one, and the last two.
    let stride = if samples.len() > 40 { 4 } else { 1 };
    for (index, sample) in samples.iter().enumerate() {
        if index % stride != 0 && index + 2 < samples.len() {
            continue;
        }
        out.push_str(&format!(
            "| {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {} |\n",
            sample.at.as_secs_f64() / 60.0,
            sample.rss_mib,
            sample.heap_mib,
            sample.descriptors,
            sample.threads,
            sample.tokio_tasks,
            sample.rooms,
            sample.live
        ));
    }
    // The last sample is taken after every session ended; growth is judged while they talk.
    let talking = &samples[..samples.len().saturating_sub(1)];
    let after = samples.last().map_or("–".to_owned(), |last| {
        format!(
            "{:.1} MiB (live heap {:.1} MiB), {} descriptors, {} tasks, {} rooms",
            last.rss_mib, last.heap_mib, last.descriptors, last.tokio_tasks, last.rooms
        )
    });
    let from = Duration::from_secs_f64(minutes * 60.0 / 3.0);
    let rss = growth(talking, from, |sample| sample.rss_mib);
    let fds = growth(talking, from, |sample| sample.descriptors as f64);
    let heap = growth(talking, from, |sample| sample.heap_mib).filter(|growth| growth.is_finite());
    let percent = |value: Option<f64>| value.map_or("–".to_owned(), |value| format!("{:+.1} %", value * 100.0));
    let ended_otherwise: u64 = tally.ended_otherwise.values().sum();
    out.push_str(&format!(
        "\n- Growth over the last two thirds of the run: RSS {}, descriptors {} (target < 5 % each); live heap {}. After every session ended: {after}.\n",
        percent(rss),
        percent(fds),
        percent(heap)
    ));
    out.push_str(&format!("- {}.\n", one_line(tally)));
    out.push_str(&format!(
        "- Sessions whose end could not be read back: {}; sessions that stored fewer turns than the provider finished: {}.\n",
        tally.unchecked, tally.sessions_short
    ));
    if let Some(failure) = &tally.last_start_failure {
        out.push_str(&format!("- Last start failure: {failure}\n"));
    }
    for (reason, count) in &tally.ended_otherwise {
        out.push_str(&format!("- Ended `{reason}`: {count}\n"));
    }
    for (fault, count) in &tally.faults {
        out.push_str(&format!("- Fault `{fault}`: {count}\n"));
    }
    let flat = |value: Option<f64>| value.is_some_and(|value| value < 0.05);
    let healthy = flat(rss)
        && flat(fds)
        && tally.turns_lost == 0
        && ended_otherwise == 0
        && tally.start_failures == 0
        && tally.unchecked == 0
        && tally.started > 0;
    out.push_str(if healthy {
        "\nEvery target held.\n"
    } else {
        "\n**A target was missed** (growth ≥ 5 %, a lost turn, a session ended by svc, a failed start or an unchecked end).\n"
    });
    (out, healthy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: u64, rss_mib: f64) -> Sample {
        Sample {
            at: Duration::from_secs(minutes * 60),
            rss_mib,
            heap_mib: f64::NAN,
            descriptors: 100,
            threads: 4,
            tokio_tasks: 10.0,
            rooms: 1.0,
            live: 1.0,
        }
    }

    #[test]
    fn growth_is_judged_from_the_window_on() {
        let samples = [at(0, 10.0), at(10, 50.0), at(20, 51.0), at(30, 52.0)];
        let rss = growth(&samples, Duration::from_secs(600), |sample| sample.rss_mib).expect("a window");
        assert!((rss - 0.04).abs() < 1e-9, "{rss}");
        assert_eq!(growth(&samples, Duration::from_secs(3600), |sample| sample.rss_mib), None);
    }

    #[test]
    fn the_seeded_choices_repeat_and_stay_in_range() {
        let (mut one, mut two) = (Rng::new(7), Rng::new(7));
        for _ in 0..1_000 {
            let value = one.range(60, 180);
            assert_eq!(value, two.range(60, 180));
            assert!((60..180).contains(&value));
        }
        assert_eq!(Rng::new(7).range(5, 5), 5);
    }
}
