//! The HTTP test harness: a real router over a fresh database, driven in-process.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use std::sync::Arc;
use svc_domain::{Scope, ScopeSet};

use svc_server::auth::issue;
use svc_server::config::{Config, Database};
use svc_server::dispatch::{NoRuntime, SessionDispatcher};
use svc_server::{App, AppState};
use svc_store::testing::TestDatabase;
use svc_store::{Backend, UserRecord, WorkspaceRow};
use tower::ServiceExt;

/// Runs each named `async fn(TestApp)` on SQLite and on Postgres.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $name() {
                super::$name($crate::common::TestApp::new(svc_store::Backend::Sqlite).await).await;
            })*
        }
        mod postgres {
            $(#[tokio::test] async fn $name() {
                super::$name($crate::common::TestApp::new(svc_store::Backend::Postgres).await).await;
            })*
        }
    };
}

/// Like `on_both_backends!`, but each test receives what `$make(backend)` returns.
#[macro_export]
macro_rules! on_both_backends_with {
    ($make:ident; $($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $name() { super::$name(super::$make(svc_store::Backend::Sqlite).await).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $name() { super::$name(super::$make(svc_store::Backend::Postgres).await).await; })*
        }
    };
}

pub struct TestApp {
    pub app: App,
    router: Router,
    _db: TestDatabase,
    pub dir: tempfile::TempDir,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts the status and returns the JSON body.
    #[track_caller]
    pub fn expect(&self, status: u16) -> Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", String::from_utf8_lossy(&self.body));
        if self.body.is_empty() { Value::Null } else { self.json() }
    }

    /// Asserts an envelope error with this status and returns its `error` object.
    #[track_caller]
    pub fn expect_error(&self, status: u16) -> Value {
        let body = self.expect(status);
        let error = body["error"].clone();
        assert!(error["type"].is_string() && error["message"].is_string(), "not an envelope: {body}");
        error
    }

    /// Asserts the auth layer's 401 `{detail}` and returns the detail.
    #[track_caller]
    pub fn expect_unauthorized(&self) -> String {
        let body = self.expect(401);
        let object = body.as_object().expect("object");
        assert_eq!(object.len(), 1, "401 bodies carry only `detail`: {body}");
        body["detail"].as_str().expect("detail").to_owned()
    }
}

impl TestApp {
    pub async fn new(backend: Backend) -> TestApp {
        Self::with(backend, |_| {}, Arc::new(NoRuntime)).await
    }

    /// A test app whose configuration `configure` adjusts, with `dispatcher` running sessions.
    pub async fn with(
        backend: Backend,
        configure: impl FnOnce(&mut Config),
        dispatcher: Arc<dyn SessionDispatcher>,
    ) -> TestApp {
        let db = TestDatabase::new(backend).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let database = Database::parse(&db.url).expect("test database url");
        let mut config = Config::for_tests(dir.path(), database);
        configure(&mut config);
        config.prepare_data_dir().expect("data dir");
        let app = AppState::with_dispatcher(config, db.store.clone(), dispatcher).await.expect("app state");
        let router = svc_server::routes::router(app.clone());
        TestApp { app, router, _db: db, dir }
    }

    pub async fn workspace(&self, slug: &str) -> WorkspaceRow {
        self.workspace_on(slug, "localhost").await
    }

    pub async fn workspace_on(&self, slug: &str, host: &str) -> WorkspaceRow {
        self.app
            .store
            .create_workspace(slug, &format!("{slug} inc"), host, svc_server::app::now_us())
            .await
            .expect("workspace")
    }

    pub async fn api_key(&self, workspace: &WorkspaceRow, scopes: &[Scope]) -> String {
        issue::create_api_key(&self.app.store, &workspace.id, ScopeSet::new(scopes.iter().copied()), None)
            .await
            .expect("api key")
            .1
    }

    pub async fn user(
        &self,
        workspace: &WorkspaceRow,
        email: &str,
        roles: &[&str],
        capabilities: &[&str],
    ) -> UserRecord {
        let roles: Vec<String> = roles.iter().map(|r| r.to_string()).collect();
        let capabilities: Vec<String> = capabilities.iter().map(|c| c.to_string()).collect();
        self.app
            .store
            .create_user(&workspace.id, email, &roles, &capabilities, svc_server::app::now_us())
            .await
            .expect("user")
    }

    pub async fn user_token(&self, user: &UserRecord) -> String {
        issue::issue_user_token(&self.app, user, None, 3600).await.expect("user token").token
    }

    /// Mints an end-user token through the API, as a client would.
    pub async fn minted(&self, minting_key: &str, external_user_id: &str, scopes: &[&str]) -> Value {
        self.post(
            "/auth/token",
            Some(minting_key),
            serde_json::json!({"external_user_id": external_user_id, "scopes": scopes}),
        )
        .await
        .expect(200)
    }

    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.expect("infallible router");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.expect("body").to_bytes().to_vec();
        Reply { status, headers, body }
    }

    pub fn request(method: &str, path: &str, auth: Option<&str>) -> axum::http::request::Builder {
        let uri = if path.starts_with('/') && !path.starts_with("/api/") && path != "/healthz" && path != "/metrics" {
            format!("/api/v1/external{path}")
        } else {
            path.to_owned()
        };
        let mut builder = Request::builder().method(method).uri(uri).header("host", "localhost:8080");
        if let Some(token) = auth {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        builder
    }

    pub async fn get(&self, path: &str, auth: Option<&str>) -> Reply {
        self.send(Self::request("GET", path, auth).body(Body::empty()).expect("request")).await
    }

    pub async fn delete(&self, path: &str, auth: Option<&str>) -> Reply {
        self.send(Self::request("DELETE", path, auth).body(Body::empty()).expect("request")).await
    }

    pub async fn post(&self, path: &str, auth: Option<&str>, body: Value) -> Reply {
        self.send_json("POST", path, auth, body).await
    }

    pub async fn send_json(&self, method: &str, path: &str, auth: Option<&str>, body: Value) -> Reply {
        self.send(
            Self::request(method, path, auth)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .expect("request"),
        )
        .await
    }
}
