//! `svc-bench`: throughput and latency of `POST /realtime/session/start`, served by the real
//! server in-process, against `GET /realtime/verify` (authentication and the workspace and
//! project lookups, no writes) measured the same way in the same run as the baseline.
//!
//! The server runs on a multi-thread Tokio runtime exactly as `svc serve` runs it
//! (`svc_server::run` on a listener bound to 127.0.0.1:0); the load generator runs on its own
//! thread with a current-thread runtime. The report is Markdown on stdout, progress goes to
//! stderr, and the exit code is non-zero if anything but a well-formed 200 came back.

mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use sqlx::Connection;
use svc_domain::{Scope, ScopeSet};
use svc_server::AppState;
use svc_server::config::{Config, Database, ProviderKeys};
use svc_store::Store;

use crate::report::RunInfo;
use svc_bench::load::{Outcome, Plan, Target};

/// Postgres server on which `--postgres` creates its database unless `--database-url` names one.
const DEFAULT_POSTGRES_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const START_PATH: &str = "/api/v1/external/realtime/session/start";
const VERIFY_PATH: &str = "/api/v1/external/realtime/verify";
const START_BODY: &str = r#"{"sdk":{"name":"svc-bench","version":"1.0.0"},"agent":{"type":"inline","instructions":"You are a concise assistant.","tools":[{"kind":"end_call"},{"kind":"client","name":"lookup_order","description":"Find an order","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}]}}"#;

/// Benchmark session start against the credential check, in one process.
#[derive(Debug, Parser)]
#[command(name = "svc-bench", version)]
struct Args {
    /// Concurrent keep-alive client connections, each with one request in flight.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    connections: u16,
    /// Measured seconds per endpoint.
    #[arg(long, default_value_t = 10.0, value_parser = positive_seconds)]
    seconds: f64,
    /// Unmeasured warm-up seconds per endpoint, before the measured phase.
    #[arg(long, default_value_t = 2.0, value_parser = non_negative_seconds)]
    warmup: f64,
    /// Quick check that everything works: 1 s measured, no warm-up, 2 connections.
    #[arg(long, conflicts_with_all = ["connections", "seconds", "warmup"])]
    smoke: bool,
    /// Database to use as is (`postgres://…` or `sqlite://PATH`; the bench's workspace and sessions
    /// stay in it). Default: a SQLite file in a temporary directory. With `--postgres`: the server
    /// on which the fresh database is created.
    #[arg(long)]
    database_url: Option<String>,
    /// Create a fresh Postgres database with a unique name (on `--database-url`'s server, default
    /// postgres://postgres@127.0.0.1:5432/postgres) and drop it at the end.
    #[arg(long)]
    postgres: bool,
}

impl Args {
    fn plan(&self) -> Plan {
        if self.smoke {
            Plan { connections: 2, warmup: Duration::ZERO, measure: Duration::from_secs(1) }
        } else {
            Plan {
                connections: usize::from(self.connections),
                warmup: Duration::from_secs_f64(self.warmup),
                measure: Duration::from_secs_f64(self.seconds),
            }
        }
    }
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 && value < 86_400.0 => Ok(value),
        _ => Err("expected a number of seconds greater than 0".to_owned()),
    }
}

fn non_negative_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && (0.0..86_400.0).contains(&value) => Ok(value),
        _ => Err("expected a number of seconds, 0 or more".to_owned()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned());
    svc_server::telemetry::init(svc_server::config::LogFormat::Pretty, &filter);
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("svc-server")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("svc-bench: cannot build the server runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(&args, workers)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("svc-bench: FAILED: see the failures above");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("svc-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Where the store lives, and what to undo at the end.
struct Storage {
    /// Data directory of the server (and the SQLite file when there is no URL).
    dir: tempfile::TempDir,
    database: Database,
    description: String,
    /// A database this run created: (admin URL, name), dropped at the end.
    created: Option<(String, String)>,
}

impl Storage {
    async fn prepare(args: &Args) -> anyhow::Result<Storage> {
        let dir = tempfile::Builder::new().prefix("svc-bench-").tempdir().context("creating a temporary directory")?;
        if args.postgres {
            let admin_url = args.database_url.clone().unwrap_or_else(|| DEFAULT_POSTGRES_ADMIN_URL.to_owned());
            if !admin_url.starts_with("postgres://") && !admin_url.starts_with("postgresql://") {
                bail!("--postgres needs a postgres:// --database-url");
            }
            let name = format!("svc_bench_{}", uuid::Uuid::new_v4().simple());
            let mut admin = sqlx::PgConnection::connect(&admin_url)
                .await
                .with_context(|| format!("connecting to Postgres at {}", svc_store::redact_url(&admin_url)))?;
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut admin)
                .await
                .with_context(|| format!("creating database {name}"))?;
            admin.close().await.ok();
            let url = replace_database(&admin_url, &name);
            eprintln!("svc-bench: created Postgres database {name}");
            return Ok(Storage {
                dir,
                database: Database::Postgres(url),
                description: "Postgres (fresh database)".to_owned(),
                created: Some((admin_url, name)),
            });
        }
        if let Some(url) = &args.database_url {
            let database = Database::parse(url).map_err(|error| anyhow::anyhow!("--database-url: {error}"))?;
            let description = match &database {
                Database::Postgres(_) => "Postgres (existing database)".to_owned(),
                Database::Sqlite(_) => "SQLite (existing file, WAL)".to_owned(),
            };
            return Ok(Storage { dir, database, description, created: None });
        }
        let path: PathBuf = dir.path().join("svc.db");
        Ok(Storage {
            dir,
            database: Database::Sqlite(path),
            description: "SQLite (temporary file, WAL)".to_owned(),
            created: None,
        })
    }

    /// Drops the database this run created, if any.
    async fn cleanup(self) -> anyhow::Result<()> {
        if let Some((admin_url, name)) = &self.created {
            let mut admin = sqlx::PgConnection::connect(admin_url).await.context("reconnecting to Postgres")?;
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut admin)
                .await
                .with_context(|| format!("dropping database {name}"))?;
            admin.close().await.ok();
            eprintln!("svc-bench: dropped Postgres database {name}");
        }
        Ok(())
    }
}

/// `url` with its database name replaced by `database` (query string kept).
fn replace_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(base, query)| (base, Some(query)));
    let base = base.rsplit_once('/').map_or(base, |(prefix, _)| prefix);
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

/// The whole run; `Ok(false)` when it completed but something failed.
async fn bench(args: &Args, workers: usize) -> anyhow::Result<bool> {
    let storage = Storage::prepare(args).await?;
    let result = measure(args, workers, &storage).await;
    let cleanup = storage.cleanup().await;
    let clean = result?;
    cleanup?;
    Ok(clean)
}

async fn measure(args: &Args, workers: usize, storage: &Storage) -> anyhow::Result<bool> {
    let plan = args.plan();
    let mut config = Config::for_tests(storage.dir.path(), storage.database.clone());
    config.provider_keys = ProviderKeys { openai: true, gemini: true, xai: true };
    let url = storage.database.url();
    let store = Store::connect(&url)
        .await
        .with_context(|| format!("opening the database at {}", svc_store::redact_url(&url)))?;

    let slug = format!("svc-bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let workspace = store.create_workspace(&slug, "svc-bench", "localhost", svc_server::app::now_us()).await?;
    let mut settings = workspace.settings.clone();
    settings.max_concurrent_sessions = None;
    store.update_workspace(&workspace.id, &settings, None).await?;
    let (_, key) =
        svc_server::auth::issue::create_api_key(&store, &workspace.id, ScopeSet::new([Scope::RealtimeStart]), None)
            .await?;

    let app = AppState::with_store(config, store.clone()).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(svc_server::run(listener, app, async {
        let _ = stopped.await;
    }));

    let verify = Arc::new(Target::new("verify", "GET", VERIFY_PATH, &key, None));
    let start = Arc::new(Target::new("start", "POST", START_PATH, &key, Some(START_BODY)));
    let live_before = store.count_all_live_sessions().await?;

    // The load generator gets its own thread and runtime, so the server's workers serve only the
    // server; its result comes back over a channel this runtime can await.
    let (done, result) = tokio::sync::oneshot::channel();
    let (client_verify, client_start) = (Arc::clone(&verify), Arc::clone(&start));
    std::thread::Builder::new()
        .name("svc-bench-client".to_owned())
        .spawn(move || {
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("building the client runtime")
                .and_then(|runtime| runtime.block_on(drive_load(addr, client_verify, client_start, plan)));
            let _ = done.send(outcome);
        })
        .context("spawning the client thread")?;
    let loaded = result.await.context("the client thread died")?;

    let live_after = store.count_all_live_sessions().await;
    let _ = stop.send(());
    match tokio::time::timeout(Duration::from_secs(10), server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(error))) => eprintln!("svc-bench: the server stopped with an error: {error}"),
        Ok(Err(error)) => eprintln!("svc-bench: the server task failed: {error}"),
        Err(_) => eprintln!("svc-bench: the server did not stop within 10 s"),
    }
    store.close().await;
    let (verify_outcome, start_outcome, probe_starts) = loaded?;

    // Every 200 from start is a live session row, and nothing else made one.
    let expected = start_outcome.ok_total + probe_starts;
    let inserted = live_after? - live_before;
    let rows_match = u64::try_from(inserted).is_ok_and(|inserted| inserted == expected);
    if !rows_match {
        eprintln!("svc-bench: {expected} successful starts but {inserted} new live sessions in the store");
    }

    let info = RunInfo {
        cpu: svc_bench::cpu_model(),
        nproc: workers,
        command: svc_bench::command_line(""),
        commit: svc_bench::git_tree(),
        database: storage.description.clone(),
        plan,
        release: !cfg!(debug_assertions),
        server_workers: workers,
    };
    print!("{}", report::markdown(&info, (&verify, &verify_outcome), (&start, &start_outcome)));
    if !rows_match {
        println!("- Store check: {expected} successful starts but {inserted} new live session rows");
    }
    let failures = verify_outcome.failures.total() + start_outcome.failures.total();
    Ok(failures == 0 && rows_match && !verify_outcome.latencies_ms.is_empty() && !start_outcome.latencies_ms.is_empty())
}

/// Probes both endpoints (failing fast with the server's answer), then loads the baseline, then
/// session start. Returns both outcomes and how many sessions the probe started.
async fn drive_load(
    addr: std::net::SocketAddr,
    verify: Arc<Target>,
    start: Arc<Target>,
    plan: Plan,
) -> anyhow::Result<(Outcome, Outcome, u64)> {
    for target in [&verify, &start] {
        let (status, body) =
            svc_bench::load::probe(addr, target).await.with_context(|| format!("probing {}", target.label))?;
        if status != 200 {
            bail!("probe of {} answered {status}: {body}", target.label);
        }
    }
    let mut outcomes = Vec::with_capacity(2);
    for target in [verify, start] {
        eprintln!(
            "svc-bench: {}: {} connections, {:.1} s warm-up, {:.1} s measured",
            target.label,
            plan.connections,
            plan.warmup.as_secs_f64(),
            plan.measure.as_secs_f64()
        );
        outcomes.push(svc_bench::load::run(addr, target, plan).await?);
    }
    let start_outcome = outcomes.pop().context("no start outcome")?;
    let verify_outcome = outcomes.pop().context("no verify outcome")?;
    Ok((verify_outcome, start_outcome, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_name() {
        assert_eq!(replace_database("postgres://u@h:5432/postgres", "x"), "postgres://u@h:5432/x");
        assert_eq!(
            replace_database("postgres://u@h/postgres?sslmode=disable", "x"),
            "postgres://u@h/x?sslmode=disable"
        );
    }

    #[test]
    fn start_body_is_json() {
        let body: serde_json::Value = serde_json::from_str(START_BODY).expect("valid JSON");
        assert_eq!(body["agent"]["tools"][1]["name"], "lookup_order");
    }

    #[test]
    fn flags() {
        let smoke = Args::try_parse_from(["svc-bench", "--smoke"]).expect("parses").plan();
        assert_eq!((smoke.connections, smoke.measure), (2, Duration::from_secs(1)));
        assert!(Args::try_parse_from(["svc-bench", "--smoke", "--seconds", "3"]).is_err());
        assert!(Args::try_parse_from(["svc-bench", "--connections", "0"]).is_err());
        assert!(Args::try_parse_from(["svc-bench", "--seconds", "0"]).is_err());
    }
}
