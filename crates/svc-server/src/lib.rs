//! The `svc` server: HTTP API, authentication, admin CLI, and the wiring between crates.
//!
//! Architecture invariant: this is the only crate that knows HTTP, and nothing depends on it.
//! Tests and `main` start the server the same way: [`run`] on a bound listener with a shutdown
//! future, so a test server on port 0 is the production server.

pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod dispatch;
pub mod error;
pub mod metrics;
pub mod provider_cli;
pub mod routes;
pub mod telemetry;

use std::future::Future;

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
    let router = routes::router(app);
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}
