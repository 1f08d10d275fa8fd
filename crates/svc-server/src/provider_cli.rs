//! `svc provider check`: a live smoke test of one upstream provider through the production
//! adapter (see [`svc_provider::check`]). Keys and base URLs come from the ecosystem's variables
//! (`OPENAI_API_KEY`, `GEMINI_API_KEY`/`GOOGLE_API_KEY`, `XAI_API_KEY`, and the base-URL
//! overrides of [`svc_provider::endpoint`]); no database is opened.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::json;
use svc_domain::model::ResolvedModel;
use svc_domain::model::{ModelChoice, Provider, ProviderBlock, resolve_model};
use svc_provider::check::{CheckInput, CheckReport};
use svc_provider::endpoint::ProviderEnv;
use svc_provider::recording::Recorder;
use svc_provider::replay::Recording;

use crate::config::Config;

/// `svc provider …`.
#[derive(Debug, Subcommand)]
pub enum ProviderCommand {
    /// Connect to a provider, send one turn, and report the reply (exit 0 on success).
    Check(CheckArgs),
    /// Feed a recording (`check --record`) back into the adapter, offline, and print what it
    /// reports (exit 0 unless the adapter reports a fatal error).
    Replay(ReplayArgs),
}

/// `svc provider replay` options.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A recording written by `svc provider check --record`.
    file: PathBuf,
}

/// `svc provider check` options.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Provider alias: provider_a, provider_b, provider_b_mini, provider_b_live, provider_c.
    #[arg(long)]
    provider: String,
    /// Model id (default: the alias's default in the model catalog).
    #[arg(long)]
    model: Option<String>,
    /// Text turn to send.
    #[arg(long, conflicts_with = "wav")]
    text: Option<String>,
    /// WAV file (PCM16, 16/24/48 kHz) to send as user audio instead of text.
    #[arg(long)]
    wav: Option<PathBuf>,
    /// Seconds to wait for the reply.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Write the raw upstream exchange to this file (JSON Lines; audio summarized, no keys),
    /// whatever the verdict: send it with a bug report, replay it with `svc provider replay`.
    #[arg(long)]
    record: Option<PathBuf>,
}

/// Default text turn.
pub const DEFAULT_TEXT: &str = "Say hello.";

/// Runs a provider command; the error is the one-line reason.
pub async fn run(config: &Config, command: ProviderCommand, json_output: bool) -> anyhow::Result<()> {
    match command {
        ProviderCommand::Check(args) => check(config, args, json_output).await,
        ProviderCommand::Replay(args) => replay(config, &args, json_output),
    }
}

/// The catalog's model for `provider` (an alias) and an optional model id.
fn resolve(config: &Config, provider: &str, model_id: Option<String>) -> anyhow::Result<ResolvedModel> {
    let alias = Provider::from_wire(provider).ok_or_else(|| {
        anyhow!("unknown provider `{provider}` (use {})", crate::config::provider_aliases().join(", "))
    })?;
    let block = ProviderBlock::defaults(alias, model_id);
    resolve_model(&config.model_catalog, Some(&ModelChoice::Block(block)), None)
        .map_err(|error| anyhow!("{}", error.message()))
}

async fn check(config: &Config, args: CheckArgs, json_output: bool) -> anyhow::Result<()> {
    let model = resolve(config, &args.provider, args.model.clone())?;
    let env = ProviderEnv::from_env()?;
    let input = match &args.wav {
        Some(path) => {
            let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            CheckInput::Audio(
                svc_provider::check::read_wav(&bytes).map_err(|error| anyhow!("{}: {error}", path.display()))?,
            )
        }
        None => CheckInput::Text(args.text.clone().unwrap_or_else(|| DEFAULT_TEXT.to_owned())),
    };
    let recorder = args.record.as_ref().map(|_| Recorder::new(model.alias.as_str(), &model.model_id, &model.family));
    let setup = svc_provider::check::setup_for(model);
    let timeout = Duration::from_secs(args.timeout.max(1));
    let result = svc_provider::check::run_recorded(setup, &env, input, timeout, recorder.clone()).await;
    if let (Some(path), Some(recorder)) = (&args.record, &recorder) {
        std::fs::write(path, recorder.lines()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let report = result?;
    if report.transcript.is_empty() && report.audio_seconds == 0.0 {
        bail!("protocol error: the reply had neither audio nor text");
    }
    print_report(&report, json_output);
    Ok(())
}

fn print_report(report: &CheckReport, json_output: bool) {
    if json_output {
        let value = json!({
            "ok": true,
            "provider": report.provider,
            "model": report.model,
            "transcript": report.transcript,
            "audio_seconds": report.audio_seconds,
            "usage": report.usage,
            "timings": {"connect_ms": report.connect_ms, "first_audio_ms": report.first_audio_ms, "total_ms": report.total_ms},
        });
        println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        return;
    }
    println!("provider:    {} ({})", report.provider, report.model);
    println!("transcript:  {}", report.transcript);
    println!("audio:       {:.2} s", report.audio_seconds);
    match &report.usage {
        Some(u) => println!(
            "usage:       input {} (text {}, audio {}, cached {}), output {} (text {}, audio {}), total {}",
            u.input_tokens,
            u.input_text_tokens,
            u.input_audio_tokens,
            u.input_cached_tokens,
            u.output_tokens,
            u.output_text_tokens,
            u.output_audio_tokens,
            u.total_tokens
        ),
        None => println!("usage:       not reported"),
    }
    let first = report.first_audio_ms.map_or_else(|| "-".to_owned(), |ms| format!("{ms} ms"));
    println!("timings:     connect {} ms, first audio {first}, total {} ms", report.connect_ms, report.total_ms);
}

/// `svc provider replay FILE`: the recording's upstream side and inputs into the adapter, in
/// virtual time; prints every event the adapter reports.
fn replay(config: &Config, args: &ReplayArgs, json_output: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    let recording = Recording::parse(&text)?;
    let provider = recording.field("provider").ok_or_else(|| anyhow!("the recording names no provider"))?;
    let model = resolve(config, provider, recording.field("model").map(str::to_owned))?;
    // The codec needs credentials to build its connect request; nothing connects here.
    let env = ProviderEnv::from_lookup(|name| name.ends_with("_API_KEY").then(|| "replay".to_owned()))?;
    let mut codec = svc_provider::codec_for(svc_provider::check::setup_for(model), &env)?;
    let outcome = svc_provider::replay::replay(codec.as_mut(), &recording, std::time::Instant::now());
    let fatal = outcome.events.iter().find_map(|event| match event {
        svc_provider_core::ProviderEvent::Error(error) if error.fatal => {
            Some(format!("{}: {}", error.code, error.message))
        }
        _ => None,
    });
    if json_output {
        let events: Vec<String> = outcome.events.iter().map(|event| format!("{event:?}")).collect();
        let value = json!({"events": events, "frames_sent": outcome.sent.len(), "lines_skipped": outcome.skipped,
            "recorded_report": recording.report()});
        println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
    } else {
        for event in &outcome.events {
            println!("{event:?}");
        }
        println!(
            "-- {} events, {} frames sent, {} lines not replayed",
            outcome.events.len(),
            outcome.sent.len(),
            outcome.skipped
        );
        if let Some(report) = recording.report() {
            println!("-- recorded verdict: {report}");
        }
    }
    match fatal {
        Some(error) => bail!("the adapter reported a fatal error: {error}"),
        None => Ok(()),
    }
}
