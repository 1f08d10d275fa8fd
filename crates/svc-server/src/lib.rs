//! The `svc` server: HTTP API, authentication, admin CLI, and the wiring between crates.
//!
//! Architecture invariant: this is the only crate that knows HTTP, and nothing depends on it.
//! Tests and `main` start the server the same way: [`run`] on a bound listener with a shutdown
//! future, so a test server on port 0 is the production server.

pub mod app;
pub mod auth;
pub mod candle_threads;
pub mod cli;
pub mod config;
pub mod dispatch;
pub mod error;
pub mod heap;
pub mod metrics;
pub mod playground;
pub mod provider_cli;
pub mod routes;
mod serve;
pub mod telemetry;
pub mod tool_config;

use std::future::Future;

use axum::serve::ListenerExt as _;
use tokio::net::TcpListener;

pub use app::{App, AppState};
pub use config::Config;

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting connections and
/// waits for in-flight requests to finish (the caller bounds that wait with its grace period).
pub async fn run(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run_with_room(listener, app, None, shutdown).await
}

/// [`run`], with the embedded media room's signalling and LiveKit server API mounted at the path
/// of the room URL, and the server API also at the origin's `/twirp` (where the Node server SDK
/// posts).
pub async fn run_with_room(
    listener: TcpListener,
    app: App,
    room: Option<svc_room::RoomServer>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let room_path = room_mount_path(&app.config.room.url);
    let mut router = routes::router(app);
    if let Some(room) = room {
        router = router.nest(&room_path, room.router()).merge(room.server_api_router());
    }
    // Nagle off, as LiveKit's own server (Go's default) has it: signalling answers and small REST
    // replies written back to back must not wait for the peer's delayed acknowledgement.
    let listener = listener.tap_io(|tcp| {
        // Best effort: an option the OS may refuse.
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

/// Where the room's `/rtc` routes live: the room URL's path (clients append `rtc` to it), or
/// `/room` when the URL has none.
pub fn room_mount_path(room_url: &url::Url) -> String {
    let path = room_url.path().trim_end_matches('/');
    if path.is_empty() { "/room".to_owned() } else { path.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::room_mount_path;

    #[test]
    fn the_room_mounts_at_the_room_url_path() {
        let mount = |url: &str| room_mount_path(&url::Url::parse(url).expect("url"));
        assert_eq!(mount("ws://h:8080/room"), "/room");
        assert_eq!(mount("wss://h/voice/room/"), "/voice/room");
        assert_eq!(mount("ws://h:8080"), "/room", "clients append /rtc to the path; none means /room");
    }
}
