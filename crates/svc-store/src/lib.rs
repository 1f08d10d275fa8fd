//! svc persistence: one repository API over SQLite (the default) and Postgres (the scale path).
//!
//! The store speaks to both backends through sqlx's `Any` driver with SQL written once in the
//! portable subset both understand (`$n` placeholders, `TEXT`/`BIGINT`, partial indexes,
//! `ON CONFLICT DO NOTHING`). Each backend has its own migration folder so a future change that
//! needs backend-specific DDL has a place to go; the two are kept in lock-step.
//!
//! Invariants:
//! - The store never reads the clock: callers pass `now_us` (integer microseconds since the epoch),
//!   which keeps ordering testable and lets the server use one timestamp per request.
//! - Every row read is decoded into a typed record; a row that fails to decode is a
//!   [`StoreError::Corrupt`], never a panic.
//! - Project scoping is part of every history query's `WHERE`, never a filter applied afterwards.

mod agents;
mod credentials;
mod dials;
mod rooms;
mod sessions;
mod support;
#[cfg(feature = "testing")]
pub mod testing;
mod workspaces;

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor, Row};

pub use agents::StoredAgent;
pub use credentials::{ApiKeyRecord, NewToken, TokenKind, TokenRecord, UserRecord};
pub use dials::{DialOutcome, DialRecord, NewDial};
pub use rooms::{RoomReservation, new_room_name};
pub use sessions::{
    Admission, ArtifactRecord, NewSession, NewTimelineEvent, NewTurn, SessionFilter, SessionRow, StoredTurn,
    TimelineRow, UsageRecord,
};
pub use support::NewSupportRequest;
pub use workspaces::{CallerNumber, ProjectRow, WorkspaceRow};

/// Which database the store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite file in WAL mode (the default, one machine).
    Sqlite,
    /// Postgres (the scale path, many API nodes).
    Postgres,
}

/// A failure of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A uniqueness rule was violated (duplicate slug, handle, email, …).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The named row does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A stored value could not be decoded; the row is left as it is.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The database URL is not one the store supports.
    #[error("unsupported database url: {0}")]
    UnsupportedUrl(String),
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database could not be reached (refused or dropped connections, no connection within
    /// the pool's acquire timeout, a server shutting down): the request may succeed later.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// The database reported an error.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict(db.message().to_owned()),
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => StoreError::Corrupt(error.to_string()),
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable(error),
            // SQLSTATE class 08 (connection exception) and 57P01–57P03 (the server is shutting
            // down or not accepting connections yet).
            sqlx::Error::Database(db)
                if db.code().is_some_and(|code| code.starts_with("08") || code.starts_with("57P0")) =>
            {
                StoreError::Unavailable(error)
            }
            _ => StoreError::Database(error),
        }
    }
}

/// How long a query waits for a connection before the store reports [`StoreError::Unavailable`]:
/// with the database down, every request fails within this bound instead of hanging, and the
/// pool reconnects by itself once the database is back.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Result alias of the store.
pub type StoreResult<T> = Result<T, StoreError>;

/// The store: connection pools plus the repositories (methods on this type, grouped by module).
///
/// Reads go to `pool`; writes go to `writer`. On SQLite the writer is a single connection, so
/// concurrent writes queue in-process (fair, no sleeping) instead of contending for SQLite's one
/// write lock through its busy handler, whose back-off sleeps turn contention into long tails;
/// readers keep running in parallel under WAL. On Postgres both are the same pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    writer: AnyPool,
    backend: Backend,
}

impl Store {
    /// Opens (creating if needed) the database at `url` and runs its migrations.
    ///
    /// `sqlite://PATH` opens a file in WAL mode with a busy timeout, so the admin CLI can write
    /// while `svc serve` runs; `postgres://…` opens a pool on a Postgres server.
    pub async fn connect(url: &str) -> StoreResult<Store> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(redact_url(url)));
        };
        let options = AnyConnectOptions::from_str(url).map_err(StoreError::Database)?;
        let (pool, writer) = match backend {
            Backend::Sqlite => {
                let sqlite_pool = |connections: u32| {
                    AnyPoolOptions::new().acquire_timeout(ACQUIRE_TIMEOUT).max_connections(connections).after_connect(
                        |conn, _meta| {
                            Box::pin(async move {
                                conn.execute(
                                    "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 10000; \
                                     PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;",
                                )
                                .await?;
                                Ok(())
                            })
                        },
                    )
                };
                // The writer connects first so WAL mode is set before any reader opens the file.
                let writer = sqlite_pool(1).connect_with(options.clone()).await?;
                let readers = sqlite_pool(4).connect_with(options).await?;
                (readers, writer)
            }
            Backend::Postgres => {
                let pool = AnyPoolOptions::new()
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .max_connections(16)
                    .connect_with(options)
                    .await?;
                (pool.clone(), pool)
            }
        };
        let store = Store { pool, writer, backend };
        store.migrate().await?;
        Ok(store)
    }

    /// The URL of a SQLite database file at `path`, created if missing.
    pub fn sqlite_url(path: &std::path::Path) -> String {
        format!("sqlite://{}?mode=rwc", path.display())
    }

    async fn migrate(&self) -> StoreResult<()> {
        match self.backend {
            Backend::Sqlite => sqlx::migrate!("migrations/sqlite").run(&self.writer).await?,
            Backend::Postgres => sqlx::migrate!("migrations/postgres").run(&self.writer).await?,
        }
        Ok(())
    }

    /// Which backend this store runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Checks that the database answers (for health checks).
    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Checks the database file's structure (SQLite's `PRAGMA integrity_check`; Postgres keeps its
    /// own). A database a crash left behind must pass this before it is trusted.
    pub async fn check_integrity(&self) -> StoreResult<()> {
        if self.backend != Backend::Sqlite {
            return Ok(());
        }
        let rows = sqlx::query("PRAGMA integrity_check").fetch_all(&self.writer).await?;
        let verdicts: Vec<String> = rows.iter().filter_map(|row| row.try_get::<String, _>(0).ok()).collect();
        if verdicts == ["ok"] { Ok(()) } else { Err(StoreError::Corrupt(verdicts.join("; "))) }
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
        self.writer.close().await;
    }

    /// Returns the secret named `name`, storing `candidate` first if none exists yet.
    ///
    /// Race-safe across processes: the first writer wins and everyone reads its value back.
    pub async fn get_or_insert_secret(&self, name: &str, candidate: &str, now_us: i64) -> StoreResult<String> {
        sqlx::query("INSERT INTO server_secrets (name, value, created_us) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(name)
            .bind(candidate)
            .bind(now_us)
            .execute(&self.pool)
            .await?;
        let value: String = sqlx::query_scalar("SELECT value FROM server_secrets WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(value)
    }
}

/// Removes a password from a database URL before it reaches an error message or a log.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.split_once(':') {
                Some((user, _password)) => format!("{}{}:***{}", &url[..scheme_end + 3], user, &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Decodes a `0`/`1` column.
fn flag(value: i64) -> bool {
    value != 0
}

/// Parses a stored JSON column into `T`, mapping failure to [`StoreError::Corrupt`].
fn parse_json<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|error| StoreError::Corrupt(format!("{column}: {error}")))
}

/// Serializes a value for a JSON column.
fn to_json<T: serde::Serialize>(value: &T) -> String {
    // Serializing plain data structs into a String cannot fail (no maps with non-string keys).
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn redacts_passwords_only() {
        assert_eq!(redact_url("postgres://u:secret@db:5432/x"), "postgres://u:***@db:5432/x");
        assert_eq!(redact_url("postgres://u@db/x"), "postgres://u@db/x");
        assert_eq!(redact_url("sqlite://./svc.db"), "sqlite://./svc.db");
    }
}
