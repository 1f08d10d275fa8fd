//! Logging setup: `tracing` to stderr, human-readable or JSON lines.
//!
//! Logs go to stderr so that admin commands keep stdout for their output (`svc key create`
//! prints only the secret there, for scripts).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber. Idempotent: a second call is ignored.
pub fn init(format: LogFormat, filter: &str) {
    // sqlx logs every statement at info; that is noise at our default level.
    let filter = EnvFilter::try_new(format!("{filter},sqlx=warn")).unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: log files and collectors get plain text.
        .with_ansi(std::io::stderr().is_terminal());
    // A subscriber already set (tests) keeps logging.
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
    };
}
