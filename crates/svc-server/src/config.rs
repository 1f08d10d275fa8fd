//! The one typed configuration of `svc`: command-line flags, each with an `SVC_*` environment
//! twin, over an optional TOML file, over embedded defaults. Validated before any port is bound;
//! [`ConfigError`] makes `main` exit with code 64 (`EX_USAGE`).
//!
//! Precedence, highest first: flag, environment variable, TOML file (`--config` / `SVC_CONFIG`),
//! default. The admin CLI reads the same configuration, so with the same flags or environment it
//! opens the same database as `svc serve`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Deserialize;
use svc_domain::Host;
use url::Url;

mod livekit;
pub use livekit::{DEFAULT_WORKER_CAPACITY, LiveKitServer, LiveKitSip, WorkerMode};

/// Configuration sources as given (every field optional so layers can be merged).
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigArgs {
    /// TOML file with any of these settings (keys spelled like the flags, with underscores).
    #[arg(long, global = true, env = "SVC_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Address the HTTP API listens on [default: 127.0.0.1:8080].
    #[arg(long, global = true, env = "SVC_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Directory for the SQLite database, secrets and recordings [default: ./svc-data].
    #[arg(long, global = true, env = "SVC_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Where session recordings are written and read [default: <data-dir>/recordings]. Nodes
    /// sharing a database should share it too (a network filesystem): any node then serves a
    /// recording, and a session taken over from a dead node continues its recording.
    #[arg(long, global = true, env = "SVC_RECORDINGS_DIR", value_name = "DIR")]
    pub recordings_dir: Option<PathBuf>,
    /// `postgres://…` to use Postgres instead of SQLite in the data directory.
    #[arg(long, global = true, env = "SVC_DATABASE_URL", value_name = "URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// URL clients use to reach this server [default: http://<listen>]; its host is the default
    /// host new workspaces are bound to.
    #[arg(long, global = true, env = "SVC_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// HS256 key for the JWTs svc issues (at least 32 bytes). When absent, a random key is
    /// generated on first start and kept in the database.
    #[arg(long, global = true, env = "SVC_JWT_SECRET", value_name = "SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
    /// Log output format.
    #[arg(long, global = true, env = "SVC_LOG_FORMAT", value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Log filter in `tracing` syntax [default: info].
    #[arg(long, global = true, env = "SVC_LOG", value_name = "FILTER")]
    pub log: Option<String>,
    /// Seconds `svc serve` waits for in-flight requests after SIGINT/SIGTERM [default: 10].
    #[arg(long, global = true, env = "SVC_SHUTDOWN_GRACE_SECONDS", value_name = "SECONDS")]
    pub shutdown_grace_seconds: Option<u64>,
    /// Seconds live sessions may run on after SIGINT/SIGTERM (new ones are refused meanwhile);
    /// those still running then end with `server_shutdown` [default: 20].
    #[arg(long, global = true, env = "SVC_DRAIN_SECONDS", value_name = "SECONDS")]
    pub drain_seconds: Option<u64>,
    /// Provider alias whose availability `verify` reports as `realtime_voice_available`
    /// [default: provider_a].
    #[arg(long, global = true, env = "SVC_DEFAULT_PROVIDER", value_name = "ALIAS")]
    pub default_provider: Option<String>,
    /// URL clients join media rooms at [default: the public URL with ws(s):// and path /room].
    #[arg(long, global = true, env = "SVC_ROOM_URL", value_name = "URL")]
    pub room_url: Option<String>,
    /// API key of the media room (the `iss` of room join tokens) [default: svc].
    #[arg(long, global = true, env = "SVC_ROOM_API_KEY", value_name = "KEY")]
    pub room_api_key: Option<String>,
    /// Secret of the media room's API key (at least 32 bytes). When absent, one is generated on
    /// first start and kept in the database.
    #[arg(long, global = true, env = "SVC_ROOM_API_SECRET", value_name = "SECRET", hide_env_values = true)]
    pub room_api_secret: Option<String>,
    /// A LiveKit server (LiveKit Cloud, a self-hosted cluster) that holds the sessions' rooms
    /// instead of the embedded room: the URL clients join (`wss://…`). Needs --livekit-api-key
    /// and --livekit-api-secret [default: none, the embedded room].
    #[arg(long, global = true, env = "SVC_LIVEKIT_URL", value_name = "URL")]
    pub livekit_url: Option<String>,
    /// API key of --livekit-url's server (rooms are created and tokens signed with it).
    #[arg(long, global = true, env = "SVC_LIVEKIT_API_KEY", value_name = "KEY")]
    pub livekit_api_key: Option<String>,
    /// Secret of --livekit-api-key.
    #[arg(long, global = true, env = "SVC_LIVEKIT_API_SECRET", value_name = "SECRET", hide_env_values = true)]
    pub livekit_api_secret: Option<String>,
    /// With --livekit-url: work as that server's agent worker under this agent name (the same
    /// on every node). Starts on any node are dispatched by LiveKit to the least loaded worker
    /// [default: none, each node runs the sessions it starts].
    #[arg(long, global = true, env = "SVC_LIVEKIT_AGENT_NAME", value_name = "NAME")]
    pub livekit_agent_name: Option<String>,
    /// With --livekit-agent-name: sessions this node runs before it reports itself full
    /// [default: 100].
    #[arg(long, global = true, env = "SVC_WORKER_CAPACITY", value_name = "N")]
    pub worker_capacity: Option<usize>,
    /// With --livekit-url: phone dial-out through that server's SIP service, over its outbound
    /// trunk with this id (`ST_…`); --sip-caller-number is the number dials present by default
    /// [default: none, the dial route answers 403 `phone_calls_disabled`].
    #[arg(long, global = true, env = "SVC_LIVEKIT_SIP_TRUNK_ID", value_name = "ID")]
    pub livekit_sip_trunk_id: Option<String>,
    /// UDP port of the embedded media room (all WebRTC traffic) [default: 7882; 0 = any free port].
    #[arg(long, global = true, env = "SVC_ROOM_UDP_PORT", value_name = "PORT")]
    pub room_udp_port: Option<u16>,
    /// Comma-separated IP addresses the embedded room binds and advertises as ICE candidates;
    /// `LOCAL=PUBLIC` binds LOCAL and advertises PUBLIC, for a 1:1 NAT (a cloud VM's private and
    /// public address) [default: 127.0.0.1 plus the address of the default-route interface].
    #[arg(long, global = true, env = "SVC_ROOM_NODE_IP", value_name = "IP[=PUBLIC],…")]
    pub room_node_ip: Option<String>,
    /// Comma-separated http(s) URLs the embedded room POSTs LiveKit's webhook events to, signed
    /// with the room's API key as LiveKit signs them [default: none].
    #[arg(long, global = true, env = "SVC_ROOM_WEBHOOK_URLS", value_name = "URL,…")]
    pub room_webhook_urls: Option<String>,
    /// Server cap on a session's length in seconds, or `none` [default: 14400].
    #[arg(long, global = true, env = "SVC_MAX_SESSION_SECONDS", value_name = "SECONDS|none")]
    pub max_session_seconds: Option<String>,
    /// TOML model catalog replacing the embedded one.
    #[arg(long, global = true, env = "SVC_MODEL_CATALOG", value_name = "FILE")]
    pub model_catalog: Option<PathBuf>,
    /// Comma-separated server tool kinds this deployment runs [default: end_call,speaker_log and
    /// the kinds whose backend is configured below].
    #[arg(long, global = true, env = "SVC_SERVER_TOOLS", value_name = "KINDS")]
    pub server_tools: Option<String>,
    /// The search API `web_search` runs on: a SearXNG instance (`http://127.0.0.1:8888`), or the
    /// Brave or Tavily endpoint (their public one when only a key is given).
    #[arg(long, global = true, env = "SVC_WEB_SEARCH_URL", value_name = "URL")]
    pub web_search_url: Option<String>,
    /// The search API's key (Brave: `X-Subscription-Token`; Tavily: `api_key`).
    #[arg(long, global = true, env = "SVC_WEB_SEARCH_KEY", value_name = "KEY", hide_env_values = true)]
    pub web_search_key: Option<String>,
    /// Which search API --web-search-url speaks: searxng, brave or tavily [default: searxng].
    #[arg(long, global = true, env = "SVC_WEB_SEARCH_API", value_name = "API")]
    pub web_search_api: Option<String>,
    /// An OpenAI-compatible API with a vision model (e.g. http://127.0.0.1:8081/v1) that runs
    /// detect_objects, point_at_object and screen_locate on the latest frame.
    #[arg(long, global = true, env = "SVC_VISION_URL", value_name = "URL")]
    pub vision_url: Option<String>,
    /// Bearer token for --vision-url, if it wants one.
    #[arg(long, global = true, env = "SVC_VISION_KEY", value_name = "KEY", hide_env_values = true)]
    pub vision_key: Option<String>,
    /// The `model` sent to --vision-url (required with it).
    #[arg(long, global = true, env = "SVC_VISION_MODEL", value_name = "NAME")]
    pub vision_model: Option<String>,
    /// Minimum SDK versions, `name=version` pairs separated by commas (e.g. `svc-js=1.4.0`).
    #[arg(long, global = true, env = "SVC_SDK_FLOORS", value_name = "NAME=VERSION,…")]
    pub sdk_floors: Option<String>,
    /// This node's name on the sessions it runs; a node that restarts after a crash ends the
    /// sessions it left behind. Give each node sharing a Postgres database its own [default:
    /// the host name].
    #[arg(long, global = true, env = "SVC_NODE_ID", value_name = "NAME")]
    pub node_id: Option<String>,
    /// `auto`: on a loopback listen address, `svc serve` keeps a `dev` workspace with a fresh
    /// API key that the playground (served to loopback only) signs in with; `off`: never
    /// [default: auto].
    #[arg(long, global = true, env = "SVC_DEV_WORKSPACE", value_name = "auto|off")]
    pub dev_workspace: Option<DevWorkspace>,
    /// Directory of the local provider's models (`svc models install` fills it) [default:
    /// <data-dir>/models].
    #[arg(long, global = true, env = "SVC_LOCAL_MODELS", value_name = "DIR")]
    pub local_models: Option<PathBuf>,
    /// An OpenAI-compatible API (llama.cpp server, Ollama, vLLM; e.g. http://127.0.0.1:8081/v1)
    /// that writes the local provider's replies instead of the embedded SmolLM2.
    #[arg(long, global = true, env = "SVC_LOCAL_LLM_URL", value_name = "URL")]
    pub local_llm_url: Option<String>,
    /// The `model` sent to --local-llm-url [default: local].
    #[arg(long, global = true, env = "SVC_LOCAL_LLM_MODEL", value_name = "NAME")]
    pub local_llm_model: Option<String>,
    /// Bearer token for --local-llm-url, if it wants one.
    #[arg(long, global = true, env = "SVC_LOCAL_LLM_KEY", value_name = "KEY", hide_env_values = true)]
    pub local_llm_key: Option<String>,
    /// Most local-provider sessions at once; further starts get 503 [default: 2].
    #[arg(long, global = true, env = "SVC_LOCAL_CAPACITY", value_name = "N")]
    pub local_capacity: Option<usize>,
    /// Inference threads of each local-provider session (a pool of its own) [default: the
    /// cores divided among --local-capacity, at least 1].
    #[arg(long, global = true, env = "SVC_LOCAL_THREADS", value_name = "N")]
    pub local_threads: Option<usize>,
    /// The SIP trunk phone dial-out calls through (`sip:trunk.example.com:5060`); without it the
    /// dial route answers 403 `phone_calls_disabled`.
    #[arg(long, global = true, env = "SVC_SIP_TRUNK", value_name = "URI")]
    pub sip_trunk: Option<String>,
    /// Digest user name for the trunk's challenges.
    #[arg(long, global = true, env = "SVC_SIP_USERNAME", value_name = "NAME")]
    pub sip_username: Option<String>,
    /// Digest password for the trunk's challenges.
    #[arg(long, global = true, env = "SVC_SIP_PASSWORD", value_name = "SECRET", hide_env_values = true)]
    pub sip_password: Option<String>,
    /// The caller number (E.164) a dial without `caller_number` presents; required with
    /// --sip-trunk and with --livekit-sip-trunk-id.
    #[arg(long, global = true, env = "SVC_SIP_CALLER_NUMBER", value_name = "E164")]
    pub sip_caller_number: Option<String>,
    /// Where the SIP socket binds [default: 0.0.0.0:5060].
    #[arg(long, global = true, env = "SVC_SIP_BIND", value_name = "ADDR")]
    pub sip_bind: Option<String>,
    /// The SIP address put in Via and Contact (a public address behind NAT) [default: the bound one].
    #[arg(long, global = true, env = "SVC_SIP_ADVERTISED", value_name = "ADDR")]
    pub sip_advertised: Option<String>,
    /// The media address put in the SDP offer [default: the SIP bind address's IP].
    #[arg(long, global = true, env = "SVC_SIP_MEDIA_IP", value_name = "IP")]
    pub sip_media_ip: Option<String>,
    /// RTP ports for calls, `LOW-HIGH` (each call takes an even port and the next) [default: 20000-29999].
    #[arg(long, global = true, env = "SVC_SIP_RTP_PORTS", value_name = "LOW-HIGH")]
    pub sip_rtp_ports: Option<String>,
}

/// Whether `svc serve` provisions the local development workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DevWorkspace {
    /// On when the listen address is loopback.
    #[default]
    Auto,
    /// Never.
    Off,
}

/// Log output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Where the store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// SQLite file at this path.
    Sqlite(PathBuf),
    /// Postgres at this URL.
    Postgres(String),
}

impl Database {
    /// Parses a `postgres://…` or `sqlite://PATH` URL.
    pub fn parse(url: &str) -> Result<Database, String> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Url::parse(url).map_err(|error| error.to_string())?;
            Ok(Database::Postgres(url.to_owned()))
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.trim_start_matches("//");
            let path = path.split('?').next().unwrap_or(path);
            if path.is_empty() || path == ":memory:" {
                return Err("an SQLite URL must name a file".to_owned());
            }
            Ok(Database::Sqlite(PathBuf::from(path)))
        } else {
            Err(format!("`{}` is neither postgres:// nor sqlite://", svc_store::redact_url(url)))
        }
    }

    /// The sqlx URL.
    pub fn url(&self) -> String {
        match self {
            Database::Sqlite(path) => svc_store::Store::sqlite_url(path),
            Database::Postgres(url) => url.clone(),
        }
    }
}

/// Which upstream API families have credentials, read from the ecosystem's own variables
/// (`OPENAI_API_KEY`, `GEMINI_API_KEY` or `GOOGLE_API_KEY`, `XAI_API_KEY`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderKeys {
    /// OpenAI (provider_b, provider_b_mini, provider_b_live).
    pub openai: bool,
    /// Google Gemini (provider_a).
    pub gemini: bool,
    /// xAI (provider_c).
    pub xai: bool,
}

impl ProviderKeys {
    /// Reads the variables from the process environment (keys and base-URL overrides, see
    /// [`svc_provider::endpoint`]).
    ///
    /// # Errors
    ///
    /// A base-URL override that is not a URL.
    pub fn from_env() -> Result<Self, svc_provider::endpoint::EndpointError> {
        svc_provider::endpoint::ProviderEnv::from_env().map(|env| ProviderKeys::from_provider_env(&env))
    }

    /// Which families `env` configures.
    pub fn from_provider_env(env: &svc_provider::endpoint::ProviderEnv) -> Self {
        ProviderKeys { openai: env.openai.is_some(), gemini: env.gemini.is_some(), xai: env.xai.is_some() }
    }

    /// Whether the upstream API family (the model catalog's `family`: `gemini`, `openai`,
    /// `openai_live`, `xai`) has credentials.
    pub fn has_family(&self, family: &str) -> bool {
        use svc_provider::endpoint::{Account, Family};
        // Which account a family uses is svc-provider's family table; only the accounts are here.
        Family::from_catalog(family).is_some_and(|family| match family.spec().account {
            Account::Gemini => self.gemini,
            Account::OpenAi => self.openai,
            Account::Xai => self.xai,
        })
    }
}

/// Provider aliases of the contract, in the order of svc-domain's provider table
/// (`svc_domain::model::PROVIDERS`, the one list of them: a provider is added there).
pub fn provider_aliases() -> Vec<&'static str> {
    svc_domain::model::Provider::ALL.iter().map(|provider| provider.as_str()).collect()
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// HTTP listen address.
    pub listen: SocketAddr,
    /// Data directory (exists after validation).
    pub data_dir: PathBuf,
    /// Where recordings are (`--recordings-dir`).
    pub recordings: PathBuf,
    /// Store location.
    pub database: Database,
    /// Public base URL.
    pub public_url: Url,
    /// Host new workspaces are bound to by default (the public URL's host).
    pub default_host: Host,
    /// Configured JWT key, if any.
    pub jwt_secret: Option<String>,
    /// Log format.
    pub log_format: LogFormat,
    /// Log filter.
    pub log_filter: String,
    /// Shutdown grace period.
    pub shutdown_grace: Duration,
    /// How long live sessions may run on after the first SIGINT/SIGTERM.
    pub drain: Duration,
    /// Default provider alias.
    pub default_provider: String,
    /// Provider credentials present.
    pub provider_keys: ProviderKeys,
    /// Media room settings.
    pub room: RoomConfig,
    /// The LiveKit server that holds the sessions' rooms, when not the embedded room.
    pub livekit: Option<LiveKitServer>,
    /// Server cap on session length; `None` means no cap.
    pub max_session_seconds: Option<u32>,
    /// The model catalog.
    pub model_catalog: svc_domain::model::ModelCatalog,
    /// Server tool kinds this deployment runs.
    pub server_tools: Vec<String>,
    /// The backends of the tools that need one (search, vision).
    pub tool_backends: std::sync::Arc<svc_tools::ToolBackends>,
    /// Minimum SDK versions by SDK name.
    pub sdk_floors: Vec<SdkFloor>,
    /// This node's name on the sessions it runs.
    pub node_id: String,
    /// Whether `svc serve` keeps the `dev` workspace and hands its key to the playground: `auto`
    /// on a loopback listen address, never on any other.
    pub dev_workspace: bool,
    /// The local provider's models and capacity, shared by the start gate and the runtime.
    pub local: std::sync::Arc<svc_local::LocalEngines>,
    /// Phone dial-out over a SIP trunk, when one is configured.
    pub phone: Option<svc_phone::PhoneConfig>,
}

/// Where clients join media rooms, and the key room tokens are signed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomConfig {
    /// `livekit_url` handed to clients.
    pub url: Url,
    /// API key (`iss`).
    pub api_key: String,
    /// Configured secret; generated and stored when absent.
    pub api_secret: Option<String>,
    /// UDP port of the embedded room.
    pub udp_port: u16,
    /// Addresses the embedded room binds and advertises (empty: detected).
    pub node_ips: Vec<std::net::IpAddr>,
    /// Bound addresses advertised at another (public) address.
    pub public_ips: Vec<(std::net::IpAddr, std::net::IpAddr)>,
    /// Where the embedded room sends its webhook events.
    pub webhook_urls: Vec<Url>,
}

/// LiveKit's default single-port UDP.
pub const DEFAULT_ROOM_UDP_PORT: u16 = 7882;

/// The oldest version of an SDK the server accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkFloor {
    /// SDK name as clients send it in `sdk.name`.
    pub name: String,
    /// Minimum version (`major.minor.patch`).
    pub min_version: (u64, u64, u64),
}

/// The server's default cap on session length (the contract's upper bound).
pub const DEFAULT_MAX_SESSION_SECONDS: u32 = 14_400;

/// Server tools enabled when `--server-tools` is not given: the ones svc runs without any
/// external backend.
pub const DEFAULT_SERVER_TOOLS: [&str; 2] = ["end_call", "speaker_log"];

/// Parses `major.minor.patch` (missing parts are 0; a pre-release or build suffix is ignored).
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.trim().trim_start_matches('v').split(['-', '+']).next()?;
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    parts.next().is_none().then_some((major, minor, patch))
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TOML file could not be read.
    #[error("cannot read config file {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML file is not valid.
    #[error("invalid config file {path}: {message}")]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A setting has an invalid value.
    #[error("invalid {setting}: {message}")]
    Invalid {
        /// The setting's flag name.
        setting: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Live sessions run on this long after a SIGTERM: with a few seconds for the ends to be stored,
/// it fits Kubernetes' default 30 s termination grace period.
pub const DEFAULT_DRAIN_SECONDS: u64 = 20;

fn invalid(setting: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { setting, message: message.into() }
}

impl ConfigArgs {
    /// Merges in the TOML file (if any) under these values and validates the result.
    pub fn resolve(&self) -> Result<Config, ConfigError> {
        let file = match &self.config {
            Some(path) => load_file(path)?,
            None => ConfigArgs::default(),
        };
        let merged = ConfigArgs {
            config: self.config.clone(),
            listen: self.listen.clone().or(file.listen),
            data_dir: self.data_dir.clone().or(file.data_dir),
            recordings_dir: self.recordings_dir.clone().or(file.recordings_dir),
            database_url: self.database_url.clone().or(file.database_url),
            public_url: self.public_url.clone().or(file.public_url),
            jwt_secret: self.jwt_secret.clone().or(file.jwt_secret),
            log_format: self.log_format.or(file.log_format),
            log: self.log.clone().or(file.log),
            shutdown_grace_seconds: self.shutdown_grace_seconds.or(file.shutdown_grace_seconds),
            drain_seconds: self.drain_seconds.or(file.drain_seconds),
            default_provider: self.default_provider.clone().or(file.default_provider),
            room_url: self.room_url.clone().or(file.room_url),
            room_api_key: self.room_api_key.clone().or(file.room_api_key),
            room_api_secret: self.room_api_secret.clone().or(file.room_api_secret),
            room_udp_port: self.room_udp_port.or(file.room_udp_port),
            livekit_url: self.livekit_url.clone().or(file.livekit_url),
            livekit_api_key: self.livekit_api_key.clone().or(file.livekit_api_key),
            livekit_api_secret: self.livekit_api_secret.clone().or(file.livekit_api_secret),
            livekit_agent_name: self.livekit_agent_name.clone().or(file.livekit_agent_name),
            worker_capacity: self.worker_capacity.or(file.worker_capacity),
            livekit_sip_trunk_id: self.livekit_sip_trunk_id.clone().or(file.livekit_sip_trunk_id),
            room_node_ip: self.room_node_ip.clone().or(file.room_node_ip),
            room_webhook_urls: self.room_webhook_urls.clone().or(file.room_webhook_urls),
            max_session_seconds: self.max_session_seconds.clone().or(file.max_session_seconds),
            model_catalog: self.model_catalog.clone().or(file.model_catalog),
            server_tools: self.server_tools.clone().or(file.server_tools),
            web_search_url: self.web_search_url.clone().or(file.web_search_url),
            web_search_key: self.web_search_key.clone().or(file.web_search_key),
            web_search_api: self.web_search_api.clone().or(file.web_search_api),
            vision_url: self.vision_url.clone().or(file.vision_url),
            vision_key: self.vision_key.clone().or(file.vision_key),
            vision_model: self.vision_model.clone().or(file.vision_model),
            sdk_floors: self.sdk_floors.clone().or(file.sdk_floors),
            node_id: self.node_id.clone().or(file.node_id),
            dev_workspace: self.dev_workspace.or(file.dev_workspace),
            local_models: self.local_models.clone().or(file.local_models),
            local_llm_url: self.local_llm_url.clone().or(file.local_llm_url),
            local_llm_model: self.local_llm_model.clone().or(file.local_llm_model),
            local_llm_key: self.local_llm_key.clone().or(file.local_llm_key),
            local_capacity: self.local_capacity.or(file.local_capacity),
            local_threads: self.local_threads.or(file.local_threads),
            sip_trunk: self.sip_trunk.clone().or(file.sip_trunk),
            sip_username: self.sip_username.clone().or(file.sip_username),
            sip_password: self.sip_password.clone().or(file.sip_password),
            sip_caller_number: self.sip_caller_number.clone().or(file.sip_caller_number),
            sip_bind: self.sip_bind.clone().or(file.sip_bind),
            sip_advertised: self.sip_advertised.clone().or(file.sip_advertised),
            sip_media_ip: self.sip_media_ip.clone().or(file.sip_media_ip),
            sip_rtp_ports: self.sip_rtp_ports.clone().or(file.sip_rtp_ports),
        };
        let keys = ProviderKeys::from_env().map_err(|error| invalid("provider base URL", error.to_string()))?;
        merged.validate(keys)
    }

    fn validate(self, provider_keys: ProviderKeys) -> Result<Config, ConfigError> {
        let phone = phone_config(&self)?;
        let listen_text = self.listen.unwrap_or_else(|| "127.0.0.1:8080".to_owned());
        let listen: SocketAddr = listen_text
            .parse()
            .map_err(|_| invalid("--listen", format!("`{listen_text}` is not an address like 127.0.0.1:8080")))?;
        let data_dir = self.data_dir.unwrap_or_else(|| PathBuf::from("./svc-data"));
        let database = match self.database_url.filter(|url| !url.trim().is_empty()) {
            None => Database::Sqlite(data_dir.join("svc.db")),
            Some(url) => Database::parse(&url).map_err(|message| invalid("--database-url", message))?,
        };
        let public_url_text = self.public_url.unwrap_or_else(|| {
            let host = if listen.ip().is_unspecified() { "localhost".to_owned() } else { listen.ip().to_string() };
            let host = if listen.is_ipv6() && host != "localhost" { format!("[{host}]") } else { host };
            format!("http://{host}:{}", listen.port())
        });
        let public_url = Url::parse(&public_url_text)
            .map_err(|error| invalid("--public-url", format!("`{public_url_text}`: {error}")))?;
        if !matches!(public_url.scheme(), "http" | "https") {
            return Err(invalid("--public-url", "the scheme must be http or https"));
        }
        let default_host = public_url
            .host_str()
            .ok_or_else(|| invalid("--public-url", "the URL has no host"))
            .and_then(|host| Host::parse(host).map_err(|error| invalid("--public-url", error.to_string())))?;
        if self.jwt_secret.as_ref().is_some_and(|secret| secret.len() < 32) {
            return Err(invalid("--jwt-secret", "the key must be at least 32 bytes"));
        }
        let log_filter = self.log.unwrap_or_else(|| "info".to_owned());
        tracing_subscriber::EnvFilter::try_new(&log_filter).map_err(|error| invalid("--log", error.to_string()))?;
        let default_provider = self.default_provider.unwrap_or_else(|| "provider_a".to_owned());
        if !provider_aliases().contains(&default_provider.as_str()) {
            return Err(invalid("--default-provider", format!("must be one of {}", provider_aliases().join(", "))));
        }
        let room_url_text = self.room_url.unwrap_or_else(|| {
            let scheme = if public_url.scheme() == "https" { "wss" } else { "ws" };
            let authority = &public_url[url::Position::BeforeHost..url::Position::AfterPort];
            format!("{scheme}://{authority}/room")
        });
        let room_url =
            Url::parse(&room_url_text).map_err(|error| invalid("--room-url", format!("`{room_url_text}`: {error}")))?;
        if !matches!(room_url.scheme(), "ws" | "wss" | "http" | "https") {
            return Err(invalid("--room-url", "the scheme must be ws, wss, http or https"));
        }
        let room_api_key = self.room_api_key.unwrap_or_else(|| "svc".to_owned());
        if room_api_key.is_empty() || room_api_key.chars().any(char::is_whitespace) {
            return Err(invalid("--room-api-key", "the key must be non-empty and without spaces"));
        }
        if self.room_api_secret.as_ref().is_some_and(|secret| secret.len() < 32) {
            return Err(invalid("--room-api-secret", "the secret must be at least 32 bytes"));
        }
        let mut livekit = LiveKitServer::resolve(self.livekit_url, self.livekit_api_key, self.livekit_api_secret)?;
        let worker = WorkerMode::resolve(self.livekit_agent_name, self.worker_capacity)?;
        match (&mut livekit, worker) {
            (Some(livekit), worker) => livekit.worker = worker,
            (None, Some(_)) => return Err(invalid("--livekit-agent-name", "worker mode needs --livekit-url")),
            (None, None) => {}
        }
        if livekit.is_some() && phone.is_some() {
            // svc's phone bridge joins the embedded room, which --livekit-url turns off.
            return Err(invalid(
                "--sip-trunk",
                "with --livekit-url, phones are dialled by that server's SIP service: --livekit-sip-trunk-id",
            ));
        }
        let sip = LiveKitSip::resolve(self.livekit_sip_trunk_id, self.sip_caller_number.as_deref())?;
        match (&mut livekit, sip) {
            (Some(livekit), sip) => livekit.sip = sip,
            (None, Some(_)) => return Err(invalid("--livekit-sip-trunk-id", "needs --livekit-url")),
            (None, None) => {}
        }
        let (mut room_node_ips, mut room_public_ips) = (Vec::new(), Vec::new());
        for entry in self.room_node_ip.as_deref().unwrap_or("").split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (bound, public) = match entry.split_once('=') {
                Some((bound, public)) => (bound.trim(), Some(public.trim())),
                None => (entry, None),
            };
            let ip = |text: &str| -> Result<std::net::IpAddr, ConfigError> {
                let ip: std::net::IpAddr =
                    text.parse().map_err(|_| invalid("--room-node-ip", format!("`{text}` is not an IP address")))?;
                if ip.is_unspecified() || ip.is_multicast() {
                    return Err(invalid("--room-node-ip", format!("`{text}` cannot be an ICE host candidate")));
                }
                Ok(ip)
            };
            let bound = ip(bound)?;
            room_node_ips.push(bound);
            if let Some(public) = public {
                room_public_ips.push((bound, ip(public)?));
            }
        }
        let mut room_webhook_urls = Vec::new();
        for text in self.room_webhook_urls.as_deref().unwrap_or("").split(',').map(str::trim).filter(|t| !t.is_empty())
        {
            let url = Url::parse(text).map_err(|error| invalid("--room-webhook-urls", format!("`{text}`: {error}")))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(invalid("--room-webhook-urls", format!("`{text}` is not an http(s) URL with a host")));
            }
            room_webhook_urls.push(url);
        }
        let max_session_seconds = match self.max_session_seconds.as_deref().map(str::trim) {
            None => Some(DEFAULT_MAX_SESSION_SECONDS),
            Some("none" | "0") => None,
            Some(text) => match text.parse::<u32>() {
                Ok(seconds) if (MIN_SERVER_CAP_SECONDS..=MAX_SERVER_CAP_SECONDS).contains(&seconds) => Some(seconds),
                _ => return Err(invalid("--max-session-seconds", "must be 10 to 86400, or `none`")),
            },
        };
        let node_id = match self.node_id.as_deref().map(str::trim) {
            Some("") => return Err(invalid("--node-id", "must not be empty")),
            Some(name) if name.len() > 200 => return Err(invalid("--node-id", "must be at most 200 bytes")),
            Some(name) => name.to_owned(),
            None => default_node_id(),
        };
        let model_catalog = match &self.model_catalog {
            None => svc_domain::model::ModelCatalog::embedded().clone(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|error| invalid("--model-catalog", format!("cannot read {}: {error}", path.display())))?;
                svc_domain::model::ModelCatalog::from_toml_str(&text)
                    .map_err(|error| invalid("--model-catalog", format!("{}: {error}", path.display())))?
            }
        };
        let (server_tools, tool_backends) = crate::tool_config::resolve(crate::tool_config::ToolArgs {
            server_tools: self.server_tools,
            web_search_url: self.web_search_url,
            web_search_key: self.web_search_key,
            web_search_api: self.web_search_api,
            vision_url: self.vision_url,
            vision_key: self.vision_key,
            vision_model: self.vision_model,
        })?;
        let mut sdk_floors = Vec::new();
        for pair in self.sdk_floors.as_deref().unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, version) =
                pair.split_once('=').ok_or_else(|| invalid("--sdk-floors", format!("`{pair}` is not name=version")))?;
            let min_version = parse_version(version)
                .ok_or_else(|| invalid("--sdk-floors", format!("`{version}` is not a version like 1.2.3")))?;
            sdk_floors.push(SdkFloor { name: name.trim().to_owned(), min_version });
        }
        let local = local_config(
            &data_dir,
            self.local_models,
            self.local_llm_url,
            self.local_llm_model,
            self.local_llm_key,
            self.local_capacity,
            self.local_threads,
        )?;
        Ok(Config {
            phone,
            livekit,
            local: svc_local::LocalEngines::new(local),
            room: RoomConfig {
                url: room_url,
                api_key: room_api_key,
                api_secret: self.room_api_secret,
                udp_port: self.room_udp_port.unwrap_or(DEFAULT_ROOM_UDP_PORT),
                node_ips: room_node_ips,
                public_ips: room_public_ips,
                webhook_urls: room_webhook_urls,
            },
            max_session_seconds,
            model_catalog,
            server_tools,
            tool_backends: std::sync::Arc::new(tool_backends),
            sdk_floors,
            node_id,
            dev_workspace: self.dev_workspace.unwrap_or_default() == DevWorkspace::Auto && listen.ip().is_loopback(),
            listen,
            recordings: self.recordings_dir.unwrap_or_else(|| data_dir.join("recordings")),
            data_dir,
            database,
            public_url,
            default_host,
            jwt_secret: self.jwt_secret,
            log_format: self.log_format.unwrap_or_default(),
            log_filter,
            shutdown_grace: Duration::from_secs(self.shutdown_grace_seconds.unwrap_or(10)),
            drain: Duration::from_secs(self.drain_seconds.unwrap_or(DEFAULT_DRAIN_SECONDS)),
            default_provider,
            provider_keys,
        })
    }
}

fn load_file(path: &Path) -> Result<ConfigArgs, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile { path: path.to_owned(), source })?;
    toml::from_str(&text).map_err(|error| ConfigError::ParseFile { path: path.to_owned(), message: error.to_string() })
}

impl Config {
    /// Whether this server has credentials for the provider behind `alias`, per the catalog's
    /// family of that alias.
    pub fn voice_available(&self, alias: &str) -> bool {
        svc_domain::model::Provider::from_wire(alias)
            .and_then(|provider| self.model_catalog.alias(provider))
            .is_some_and(|entry| self.family_available(&entry.family))
    }

    /// Whether sessions of a catalog family can run here: a key for an upstream family, the
    /// installed models for the local one.
    pub fn family_available(&self, family: &str) -> bool {
        if family == svc_local::FAMILY {
            return self.local.installed().is_ok();
        }
        self.provider_keys.has_family(family)
    }

    /// Creates the data directory and its subdirectories; a directory that cannot be created is
    /// a configuration error, reported before any port is bound.
    pub fn prepare_data_dir(&self) -> Result<(), ConfigError> {
        for dir in [self.data_dir.clone(), self.recordings_dir(), self.spool_dir()] {
            std::fs::create_dir_all(&dir)
                .map_err(|error| invalid("--data-dir", format!("cannot create {}: {error}", dir.display())))?;
        }
        Ok(())
    }

    /// Where session recordings are kept.
    pub fn recordings_dir(&self) -> PathBuf {
        self.recordings.clone()
    }

    /// The file of an artifact stored as `stored`: `recordings/<name>` is in the recordings
    /// directory (whichever it is), anything else under the data directory.
    pub fn artifact_path(&self, stored: &str) -> PathBuf {
        match stored.strip_prefix("recordings/") {
            Some(name) => self.recordings.join(name),
            None => self.data_dir.join(stored),
        }
    }

    /// Where request bodies are spooled while they stream in.
    pub fn spool_dir(&self) -> PathBuf {
        self.data_dir.join("tmp")
    }

    /// A configuration for tests: SQLite or Postgres at `database`, data in `data_dir`.
    pub fn for_tests(data_dir: &Path, database: Database) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: data_dir.to_owned(),
            recordings: data_dir.join("recordings"),
            database,
            public_url: Url::parse("http://localhost:8080").expect("a static URL"),
            default_host: Host::parse("localhost").expect("a static host"),
            jwt_secret: None,
            log_format: LogFormat::Pretty,
            log_filter: "warn".to_owned(),
            shutdown_grace: Duration::from_secs(1),
            drain: Duration::ZERO,
            default_provider: "provider_a".to_owned(),
            provider_keys: ProviderKeys::default(),
            room: RoomConfig {
                url: Url::parse("ws://localhost:8080/room").expect("a static URL"),
                api_key: "svc".to_owned(),
                api_secret: None,
                udp_port: 0,
                node_ips: vec![std::net::IpAddr::from([127, 0, 0, 1])],
                public_ips: Vec::new(),
                webhook_urls: Vec::new(),
            },
            max_session_seconds: Some(DEFAULT_MAX_SESSION_SECONDS),
            model_catalog: svc_domain::model::ModelCatalog::embedded().clone(),
            server_tools: DEFAULT_SERVER_TOOLS.iter().map(|kind| (*kind).to_owned()).collect(),
            tool_backends: std::sync::Arc::default(),
            sdk_floors: Vec::new(),
            node_id: "test-node".to_owned(),
            dev_workspace: false,
            local: svc_local::LocalEngines::new(svc_local::LocalConfig {
                models: svc_local::ModelsDir::new(data_dir.join("models")),
                brain: svc_local::Brain::Embedded,
                capacity: svc_local::engines::DEFAULT_CAPACITY,
                threads: 0,
            }),
            phone: None,
            livekit: None,
        }
    }
}

/// Phone dial-out from the `--sip-*` flags: nothing without `--sip-trunk`.
fn phone_config(args: &ConfigArgs) -> Result<Option<svc_phone::PhoneConfig>, ConfigError> {
    let Some(trunk) = args.sip_trunk.as_deref().map(str::trim).filter(|trunk| !trunk.is_empty()) else {
        return Ok(None);
    };
    if !trunk.starts_with("sip:") {
        return Err(invalid("--sip-trunk", format!("`{trunk}` is not a sip: URI")));
    }
    let caller = args.sip_caller_number.as_deref().ok_or_else(|| {
        invalid("--sip-caller-number", "required with --sip-trunk (the caller id of dials that name none)")
    })?;
    if !svc_domain::settings::is_e164(caller) {
        return Err(invalid("--sip-caller-number", format!("`{caller}` is not E.164 (+ then 8 to 15 digits)")));
    }
    let address = |flag: &'static str, text: &str| {
        text.parse::<SocketAddr>().map_err(|_| invalid(flag, format!("`{text}` is not an address like 0.0.0.0:5060")))
    };
    let bind = address("--sip-bind", args.sip_bind.as_deref().unwrap_or("0.0.0.0:5060"))?;
    let mut config = svc_phone::PhoneConfig::new(trunk, caller, bind);
    if let Some(advertised) = &args.sip_advertised {
        config.sip_advertised = Some(address("--sip-advertised", advertised)?);
    }
    if let Some(ip) = &args.sip_media_ip {
        config.media_ip = ip.parse().map_err(|_| invalid("--sip-media-ip", format!("`{ip}` is not an IP address")))?;
    }
    if let Some(ports) = &args.sip_rtp_ports {
        let range = ports
            .split_once('-')
            .and_then(|(low, high)| Some((low.trim().parse::<u16>().ok()?, high.trim().parse::<u16>().ok()?)))
            .filter(|(low, high)| low < high)
            .ok_or_else(|| invalid("--sip-rtp-ports", format!("`{ports}` is not LOW-HIGH with LOW < HIGH")))?;
        config.rtp_ports = range.0..=range.1;
    }
    match (&args.sip_username, &args.sip_password) {
        (Some(username), Some(password)) => {
            config.credentials = Some(svc_sip::Credentials { username: username.clone(), password: password.clone() });
        }
        (None, None) => {}
        _ => return Err(invalid("--sip-username", "give both --sip-username and --sip-password, or neither")),
    }
    Ok(Some(config))
}

/// The local provider's settings from the flags.
fn local_config(
    data_dir: &Path,
    models: Option<PathBuf>,
    llm_url: Option<String>,
    llm_model: Option<String>,
    llm_key: Option<String>,
    capacity: Option<usize>,
    threads: Option<usize>,
) -> Result<svc_local::LocalConfig, ConfigError> {
    let models = svc_local::ModelsDir::new(models.unwrap_or_else(|| data_dir.join("models")));
    let brain = match llm_url.as_deref().map(str::trim).filter(|url| !url.is_empty()) {
        None => svc_local::Brain::Embedded,
        Some(text) => {
            let base = Url::parse(text.trim_end_matches('/'))
                .map_err(|error| invalid("--local-llm-url", format!("`{text}`: {error}")))?;
            if !matches!(base.scheme(), "http" | "https") {
                return Err(invalid("--local-llm-url", "the scheme must be http or https"));
            }
            // The base of an OpenAI-compatible API, or its chat-completions address itself.
            let url = if base.path().ends_with("/chat/completions") {
                base
            } else {
                Url::parse(&format!("{}/chat/completions", base.as_str().trim_end_matches('/')))
                    .map_err(|error| invalid("--local-llm-url", error.to_string()))?
            };
            let model = llm_model.map(|model| model.trim().to_owned()).unwrap_or_else(|| "local".to_owned());
            if model.is_empty() {
                return Err(invalid("--local-llm-model", "must not be empty"));
            }
            svc_local::Brain::Endpoint { url, model, api_key: llm_key.filter(|key| !key.is_empty()) }
        }
    };
    let capacity = capacity.unwrap_or(svc_local::engines::DEFAULT_CAPACITY);
    if !(1..=64).contains(&capacity) {
        return Err(invalid("--local-capacity", "must be 1 to 64"));
    }
    let threads = match threads {
        None => 0,
        Some(threads @ 1..=256) => threads,
        Some(_) => return Err(invalid("--local-threads", "must be 1 to 256")),
    };
    Ok(svc_local::LocalConfig { models, brain, capacity, threads })
}

/// Shortest server cap on a session: shorter than any request may ask (60 s), because an operator
/// may want very short demo sessions (and tests a cap they can wait for).
pub const MIN_SERVER_CAP_SECONDS: u32 = 10;
/// Longest server cap on a session (a day); `none` lifts the cap altogether.
pub const MAX_SERVER_CAP_SECONDS: u32 = 86_400;

/// The host name, which stays the same across restarts of a node.
fn default_node_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "svc".to_owned())
}

#[cfg(test)]
mod tests;
