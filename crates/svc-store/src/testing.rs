//! Throw-away databases for tests: a fresh SQLite file, or a fresh Postgres database that is
//! dropped again when the guard is dropped. Postgres comes from `SVC_TEST_POSTGRES_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`, trust auth).

use sqlx::Connection;
use uuid::Uuid;

use crate::{Backend, Store};

/// Default admin URL of the test Postgres server.
pub const DEFAULT_TEST_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A store on a throw-away database; the database goes away with the guard.
#[derive(Debug)]
pub struct TestDatabase {
    /// The store.
    pub store: Store,
    /// The URL it was opened with (for tests that open a second store, like the CLI does).
    pub url: String,
    cleanup: Cleanup,
}

#[derive(Debug)]
enum Cleanup {
    Sqlite(#[allow(dead_code, reason = "held for its Drop")] tempfile::TempDir),
    Postgres { admin_url: String, database: String },
}

impl TestDatabase {
    /// A fresh database on `backend`. Panics if it cannot be made: a test without its database
    /// cannot run, and must fail loudly rather than skip.
    pub async fn new(backend: Backend) -> TestDatabase {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = Store::sqlite_url(&dir.path().join("svc.db"));
                let store = Store::connect(&url).await.expect("open sqlite");
                TestDatabase { store, url, cleanup: Cleanup::Sqlite(dir) }
            }
            Backend::Postgres => {
                let admin_url = admin_url();
                let database = format!("svc_test_{}", Uuid::new_v4().simple());
                let mut admin = sqlx::PgConnection::connect(&admin_url)
                    .await
                    .unwrap_or_else(|error| panic!("Postgres at {admin_url} is required for tests: {error}"));
                sqlx::query(&format!("CREATE DATABASE {database}"))
                    .execute(&mut admin)
                    .await
                    .expect("create test database");
                admin.close().await.ok();
                let url = replace_database(&admin_url, &database);
                let store = Store::connect(&url).await.expect("open postgres");
                TestDatabase { store, url, cleanup: Cleanup::Postgres { admin_url, database } }
            }
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Cleanup::Postgres { admin_url, database } = &self.cleanup {
            let (admin_url, database) = (admin_url.clone(), database.clone());
            // Drop runs inside a test's runtime, which cannot be blocked on; a plain thread with
            // its own small runtime can.
            let dropper = std::thread::spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                runtime.block_on(async {
                    if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                        // Test cleanup: a database left behind is harmless.
                        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
                            .execute(&mut admin)
                            .await;
                    }
                });
            });
            // Test cleanup: a database left behind is harmless.
            let _ = dropper.join();
        }
    }
}

fn admin_url() -> String {
    std::env::var("SVC_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_TEST_POSTGRES_URL.to_owned())
}

fn replace_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(prefix, _)| prefix);
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

impl Store {
    /// Runs `sql` as it is, through the writer: for tests that break the database on purpose (a
    /// dropped table stands in for a query that fails). Only with the `testing` feature.
    pub async fn execute_for_tests(&self, sql: &str) -> crate::StoreResult<()> {
        sqlx::query(sql).execute(&self.writer).await?;
        Ok(())
    }
}
