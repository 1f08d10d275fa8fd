//! `--livekit-url` and its key: the LiveKit server that holds the sessions' rooms instead of the
//! embedded room, worker mode on it (`--livekit-agent-name`) and dial-out through its SIP service
//! (`--livekit-sip-trunk-id`).

use url::Url;

use super::{ConfigError, invalid};

/// A LiveKit server svc runs its sessions' rooms on (`--livekit-url` and its key).
#[derive(Clone, PartialEq, Eq)]
pub struct LiveKitServer {
    /// The URL clients and the agents join.
    pub url: Url,
    /// API key.
    pub api_key: String,
    /// Its secret.
    pub api_secret: String,
    /// Worker mode (`--livekit-agent-name`): the sessions come from the server's dispatch.
    pub worker: Option<WorkerMode>,
    /// Phone dial-out through the server's SIP service (`--livekit-sip-trunk-id`).
    pub sip: Option<LiveKitSip>,
}

/// The LiveKit server's outbound SIP trunk that dials go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveKitSip {
    /// The trunk's id on the server (`ST_…`).
    pub trunk_id: String,
    /// The number a dial that names none presents (`--sip-caller-number`).
    pub caller_number: String,
}

impl LiveKitSip {
    pub(super) fn resolve(
        trunk_id: Option<String>,
        caller_number: Option<&str>,
    ) -> Result<Option<LiveKitSip>, ConfigError> {
        let Some(trunk_id) = trunk_id.map(|id| id.trim().to_owned()) else { return Ok(None) };
        if trunk_id.is_empty() || trunk_id.len() > 128 || trunk_id.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid("--livekit-sip-trunk-id", "1 to 128 characters without spaces"));
        }
        let caller_number = caller_number.ok_or_else(|| {
            invalid(
                "--sip-caller-number",
                "required with --livekit-sip-trunk-id (the caller id of dials that name none)",
            )
        })?;
        if !svc_domain::settings::is_e164(caller_number) {
            return Err(invalid(
                "--sip-caller-number",
                format!("`{caller_number}` is not E.164 (+ then 8 to 15 digits)"),
            ));
        }
        Ok(Some(LiveKitSip { trunk_id, caller_number: caller_number.to_owned() }))
    }
}

/// This node as the LiveKit server's agent worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerMode {
    /// The agent name every node registers and every start dispatches.
    pub agent_name: String,
    /// Sessions this node runs at most.
    pub capacity: usize,
}

/// Sessions a worker node runs by default: what one 2-core node holds with room to spare
/// (docs/benchmarks.md, `session-load`).
pub const DEFAULT_WORKER_CAPACITY: usize = 100;

impl WorkerMode {
    pub(super) fn resolve(
        agent_name: Option<String>,
        capacity: Option<usize>,
    ) -> Result<Option<WorkerMode>, ConfigError> {
        let Some(agent_name) = agent_name else {
            if capacity.is_some() {
                return Err(invalid("--worker-capacity", "only applies with --livekit-agent-name"));
            }
            return Ok(None);
        };
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if agent_name.is_empty() || agent_name.len() > 64 || !agent_name.chars().all(valid) {
            return Err(invalid("--livekit-agent-name", "1 to 64 of A-Z, a-z, 0-9, '-', '_' and '.'"));
        }
        let capacity = capacity.unwrap_or(DEFAULT_WORKER_CAPACITY);
        if !(1..=10_000).contains(&capacity) {
            return Err(invalid("--worker-capacity", "must be 1 to 10000"));
        }
        Ok(Some(WorkerMode { agent_name, capacity }))
    }
}

impl std::fmt::Debug for LiveKitServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveKitServer")
            .field("url", &self.url.as_str())
            .field("api_key", &self.api_key)
            .finish_non_exhaustive()
    }
}

impl LiveKitServer {
    /// The three settings together, or none of them.
    pub(super) fn resolve(
        url: Option<String>,
        api_key: Option<String>,
        api_secret: Option<String>,
    ) -> Result<Option<LiveKitServer>, ConfigError> {
        let (url, api_key, api_secret) = match (url, api_key, api_secret) {
            (None, None, None) => return Ok(None),
            (Some(url), Some(key), Some(secret)) => (url, key, secret),
            _ => {
                return Err(invalid(
                    "--livekit-url",
                    "--livekit-url, --livekit-api-key and --livekit-api-secret go together",
                ));
            }
        };
        let parsed = Url::parse(&url).map_err(|error| invalid("--livekit-url", format!("`{url}`: {error}")))?;
        if !matches!(parsed.scheme(), "ws" | "wss" | "http" | "https") || parsed.host_str().is_none() {
            return Err(invalid("--livekit-url", "a ws://, wss://, http:// or https:// URL with a host"));
        }
        if api_key.is_empty() || api_key.chars().any(char::is_whitespace) {
            return Err(invalid("--livekit-api-key", "the key must be non-empty and without spaces"));
        }
        if api_secret.is_empty() {
            return Err(invalid("--livekit-api-secret", "the secret must be non-empty"));
        }
        Ok(Some(LiveKitServer { url: parsed, api_key, api_secret, worker: None, sip: None }))
    }
}
