//! Shared state of the HTTP server: the store, the configuration, signing keys, metrics.

use std::sync::Arc;

use anyhow::Context;
use svc_store::Store;

use crate::auth::jwt::{self, JwtKeys};
use crate::config::Config;
use crate::dispatch::{NoRuntime, SessionDispatcher};
use crate::metrics::Metrics;

/// Name of the persisted JWT signing secret in the store.
const JWT_SECRET_NAME: &str = "jwt_hs256_v1";
/// Name of the persisted media-room API secret in the store.
const ROOM_SECRET_NAME: &str = "room_api_secret_v1";

/// State every handler sees.
#[derive(Debug)]
pub struct AppState {
    /// The store.
    pub store: Store,
    /// Validated configuration.
    pub config: Config,
    /// JWT keys.
    pub jwt: JwtKeys,
    /// Metrics.
    pub metrics: Metrics,
    /// Media-room token signing.
    pub room: svc_room::RoomCredentials,
    /// The LiveKit server that holds the sessions' rooms (`--livekit-url`), when not the
    /// embedded room.
    pub livekit: Option<svc_session::external_room::ExternalRooms>,
    /// Server tools this deployment runs.
    pub server_tools: svc_domain::tools::ServerToolAvailability,
    /// Where started sessions go.
    pub dispatcher: Arc<dyn SessionDispatcher>,
    /// The playground's local development key, when `svc serve` provisioned one
    /// (`--dev-workspace`, loopback listen addresses only).
    pub dev_credential: std::sync::OnceLock<crate::playground::DevCredential>,
}

/// Cheap handle on the state.
pub type App = Arc<AppState>;

impl AppState {
    /// Opens the store (running migrations) and loads or creates the JWT signing key.
    pub async fn open(config: Config) -> anyhow::Result<App> {
        let store = Self::connect_store(&config).await?;
        Self::with_store(config, store).await
    }

    /// Builds the state over an open store, with no session runtime.
    pub async fn with_store(config: Config, store: Store) -> anyhow::Result<App> {
        Self::with_dispatcher(config, store, Arc::new(NoRuntime)).await
    }

    /// Builds the state over an open store with a session dispatcher.
    pub async fn with_dispatcher(
        config: Config,
        store: Store,
        dispatcher: Arc<dyn SessionDispatcher>,
    ) -> anyhow::Result<App> {
        let secret = match &config.jwt_secret {
            Some(secret) => secret.clone(),
            // Kept in the database, not the data directory, so every API node of a Postgres
            // deployment signs and verifies with the same key.
            None => store
                .get_or_insert_secret(JWT_SECRET_NAME, &jwt::random_secret(), now_us())
                .await
                .context("loading the JWT signing key")?,
        };
        let room = Self::room_credentials(&config, &store).await?;
        let livekit = config.livekit.as_ref().map(external_rooms).transpose()?;
        let server_tools = svc_domain::tools::ServerToolAvailability::new(
            config.server_tools.iter().filter_map(|kind| svc_domain::tools::ServerTool::from_wire(kind)),
        );
        Ok(Arc::new(AppState {
            jwt: JwtKeys::new(secret.as_bytes()),
            store,
            config,
            metrics: Metrics::new(),
            room,
            livekit,
            server_tools,
            dispatcher,
            dev_credential: std::sync::OnceLock::new(),
        }))
    }
}

/// The sessions' rooms on `server` (the agents join them as its clients).
pub fn external_rooms(
    server: &crate::config::LiveKitServer,
) -> anyhow::Result<svc_session::external_room::ExternalRooms> {
    let credentials = svc_room::RoomCredentials::new(server.api_key.clone(), server.api_secret.as_bytes());
    let rooms =
        svc_session::external_room::ExternalRooms::new(server.url.as_str(), credentials).context("--livekit-url")?;
    Ok(match &server.sip {
        Some(sip) => rooms.with_sip_trunk(svc_session::external_room::SipTrunk {
            trunk_id: sip.trunk_id.clone(),
            caller_number: sip.caller_number.clone(),
        }),
        None => rooms,
    })
}

impl AppState {
    /// Where a session's room is: the URL clients join and the key their tokens are signed with
    /// (the LiveKit server's with `--livekit-url`, else the embedded room's).
    pub fn session_room(&self) -> (&str, &svc_room::RoomCredentials) {
        match &self.livekit {
            Some(external) => (external.url(), external.credentials()),
            None => (self.config.room.url.as_str(), &self.room),
        }
    }
    /// The media room's token key: configured, or generated on first start and kept in the
    /// database (so every node of a deployment signs room tokens alike).
    pub async fn room_credentials(config: &Config, store: &Store) -> anyhow::Result<svc_room::RoomCredentials> {
        let room_secret = match &config.room.api_secret {
            Some(secret) => secret.clone(),
            None => store
                .get_or_insert_secret(ROOM_SECRET_NAME, &jwt::random_secret(), now_us())
                .await
                .context("loading the media-room API secret")?,
        };
        Ok(svc_room::RoomCredentials::new(config.room.api_key.clone(), room_secret.as_bytes()))
    }

    /// Opens the store the configuration names, running migrations.
    pub async fn connect_store(config: &Config) -> anyhow::Result<Store> {
        Store::connect(&config.database.url())
            .await
            .with_context(|| format!("opening the database at {}", svc_store::redact_url(&config.database.url())))
    }
}

/// Now, in microseconds since the epoch.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX))
}

/// Microseconds to float epoch seconds.
pub fn us_to_seconds(us: i64) -> f64 {
    us as f64 / 1_000_000.0
}

/// Float epoch seconds to microseconds (rounded, so a value read back from JSON maps to the same
/// stored instant).
pub fn seconds_to_us(seconds: f64) -> i64 {
    (seconds * 1_000_000.0).round() as i64
}
