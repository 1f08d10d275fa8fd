//! The playground: a page at `/` to talk to an agent in the browser, and, on a loopback server,
//! the local development credential it signs in with.
//!
//! The page's assets (`crates/svc-server/playground/`, built from `sdk/js` by
//! `scripts/build-playground.sh`) are compiled into the binary, so `cargo run` needs no npm.
//!
//! The development credential: when `svc serve` listens on a loopback address (and
//! `--dev-workspace` is not `off`), it keeps a workspace `dev` and, at every start, revokes the
//! playground key of the previous run and creates a new one, whose secret lives only in this
//! process. `GET /playground/credential` hands it out, and only to a request that names a loopback
//! host in its `Host` header (a DNS-rebinding page's requests name the attacker's host) and, when
//! the browser sends an `Origin`, comes from this server's own origin. Anyone who can open a TCP
//! connection to a loopback port on this machine can read it: the same trust every local
//! development server extends.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use svc_domain::scope::{Scope, ScopeSet};
use svc_store::{Store, StoreError};

use crate::app::{App, now_us};
use crate::config::{Config, provider_aliases};

/// Slug of the development workspace.
pub const DEV_WORKSPACE_SLUG: &str = "dev";
/// Label of the playground's key in it.
pub const PLAYGROUND_KEY_LABEL: &str = "playground";

/// Scopes of the playground key: everything the page does (start, history, timeline, delete,
/// minting a token for another tab, support requests). No dial: the page has no phone.
const PLAYGROUND_SCOPES: [Scope; 6] = [
    Scope::RealtimeStart,
    Scope::RealtimeRead,
    Scope::RealtimeLogs,
    Scope::RealtimeDelete,
    Scope::UserTokensMint,
    Scope::SupportWrite,
];

/// The development credential of this run.
#[derive(Clone)]
pub struct DevCredential {
    /// The workspace's slug (`dev`).
    pub workspace: String,
    /// The key's id (for `svc key revoke`).
    pub key_id: String,
    /// The key itself; never logged.
    pub key: String,
}

impl std::fmt::Debug for DevCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevCredential").field("workspace", &self.workspace).field("key_id", &self.key_id).finish()
    }
}

/// Creates the `dev` workspace on first start (bound to the public URL's host, re-bound if that
/// changed), revokes earlier playground keys, and creates this run's.
pub async fn provision_dev_credential(store: &Store, config: &Config) -> anyhow::Result<DevCredential> {
    let host = config.default_host.as_str();
    let workspace = match store.workspace_by_slug(DEV_WORKSPACE_SLUG).await {
        Ok(row) => {
            if row.host != host {
                store.update_workspace(&row.id, &row.settings, Some(host)).await?;
                tracing::info!(from = %row.host, to = %host, "dev workspace re-bound to the public URL's host");
            }
            row
        }
        Err(StoreError::NotFound(_)) => {
            match store.create_workspace(DEV_WORKSPACE_SLUG, "Local development", host, now_us()).await {
                Ok(row) => row,
                // Another node of a shared database created it in between.
                Err(StoreError::Conflict(_)) => store.workspace_by_slug(DEV_WORKSPACE_SLUG).await?,
                Err(error) => return Err(error.into()),
            }
        }
        Err(error) => return Err(error.into()),
    };
    for key in store.list_api_keys(&workspace.id).await? {
        if key.revoked_us.is_none() && key.label.as_deref() == Some(PLAYGROUND_KEY_LABEL) {
            store.revoke_api_key(&workspace.id, &key.id, now_us()).await?;
        }
    }
    let (record, key) = crate::auth::issue::create_api_key(
        store,
        &workspace.id,
        ScopeSet::new(PLAYGROUND_SCOPES),
        Some(PLAYGROUND_KEY_LABEL.to_owned()),
    )
    .await?;
    Ok(DevCredential { workspace: workspace.slug, key_id: record.id, key })
}

/// The page's files, compiled in.
const INDEX_HTML: &[u8] = include_bytes!("../playground/index.html");
const PLAYGROUND_JS: &[u8] = include_bytes!("../playground/playground.js");
const PLAYGROUND_CSS: &[u8] = include_bytes!("../playground/playground.css");
const FAVICON_SVG: &[u8] = include_bytes!("../playground/favicon.svg");

/// The page may talk to its own origin and to media rooms anywhere (the room URL may name another
/// host); it runs only its own script.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data: blob:; media-src 'self' blob: mediastream:; connect-src 'self' ws: wss: http: https:; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// `/`, its assets under `/playground/` (and `/favicon.ico`), and the development credential.
pub fn router() -> Router<App> {
    Router::new()
        .route("/", get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }))
        .route("/playground/", get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }))
        .route("/playground/playground.js", get(|| async { asset(PLAYGROUND_JS, "text/javascript; charset=utf-8") }))
        .route("/playground/playground.css", get(|| async { asset(PLAYGROUND_CSS, "text/css; charset=utf-8") }))
        .route("/playground/favicon.svg", get(|| async { asset(FAVICON_SVG, "image/svg+xml") }))
        // Browsers ask for `/favicon.ico` whatever the page links to (a JSON document opened in a
        // tab, for one): the same icon, so no request of theirs ends in a 404.
        .route("/favicon.ico", get(|| async { asset(FAVICON_SVG, "image/svg+xml") }))
        .route("/playground/credential", get(get_dev_credential))
        .route("/playground/local-models", get(get_local_models).post(install_local_models))
}

/// `GET /playground/local-models`: whether provider_local's models are installed, and how an
/// installation the page started is going. Loopback only, like the credential.
async fn get_local_models(State(app): State<App>, request: Request) -> Response {
    if app.dev_credential.get().is_none() || !local_request(request.headers()) {
        return crate::error::ApiError::not_found("Not here").into_response();
    }
    local_models_status(&app)
}

/// `POST /playground/local-models`: installs provider_local's models in the background (the
/// playground's "install" button: the README's run command leads to a local agent with no other
/// command). Loopback pages only; answers the status at once.
async fn install_local_models(State(app): State<App>, request: Request) -> Response {
    if app.dev_credential.get().is_none() || !local_request(request.headers()) {
        return crate::error::ApiError::not_found("Not here").into_response();
    }
    app.config.local.begin_install();
    let mut response = local_models_status(&app);
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

fn local_models_status(app: &App) -> Response {
    let installed = app.config.local.installed();
    let mut response = axum::Json(json!({
        "installed": installed.is_ok(),
        "missing": installed.err().map(|missing| missing.to_string()),
        "install": app.config.local.install_status(),
        // The agent speaks with the espeak-ng program; without it, it answers in the transcript.
        "speech": svc_local::tts::available(),
    }))
    .into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn asset(body: &'static [u8], content_type: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Built into the binary: a new binary is a new page, so always revalidate.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// Whether a `Host` header (or an origin's authority) names this machine: `localhost`, a
/// `*.localhost` name, or a loopback IP, with any port.
pub fn is_loopback_host(raw: &str) -> bool {
    let Ok(host) = svc_domain::Host::parse(raw) else { return false };
    let name = host.as_str();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    let literal = name.trim_start_matches('[').trim_end_matches(']');
    literal.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether the request may read the development credential (see the module docs).
fn local_request(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|value| value.to_str().ok()) else { return false };
    if !is_loopback_host(host) {
        return false;
    }
    match headers.get(header::ORIGIN).map(|value| value.to_str()) {
        None => true,
        Some(Ok(origin)) => url::Url::parse(origin)
            .ok()
            .and_then(|url| url.host_str().map(|h| (h.to_owned(), url.port_or_known_default())))
            .is_some_and(|(origin_host, origin_port)| {
                let host_port = host.rsplit_once(':').and_then(|(_, port)| port.parse::<u16>().ok()).or(Some(80));
                is_loopback_host(&origin_host) && origin_port == host_port
            }),
        Some(Err(_)) => false,
    }
}

/// `GET /playground/credential`: the development key, to loopback only; 404 otherwise, as if
/// the route did not exist.
async fn get_dev_credential(State(app): State<App>, request: Request) -> Response {
    let not_here = || {
        crate::error::ApiError::not_found(
            "No development credential here: svc serves one only on a loopback listen address, to loopback pages",
        )
        .into_response()
    };
    let Some(credential) = app.dev_credential.get() else { return not_here() };
    if !local_request(request.headers()) {
        return not_here();
    }
    let providers: Vec<_> = provider_aliases()
        .into_iter()
        .map(|alias| {
            let family = svc_domain::model::Provider::from_wire(alias)
                .and_then(|provider| app.config.model_catalog.alias(provider))
                .map(|entry| entry.family.clone());
            let key_variable = family
                .as_deref()
                .and_then(svc_provider::endpoint::Family::from_catalog)
                .map(svc_provider::endpoint::ProviderEnv::key_variable);
            // What a person must do to make the provider available here.
            let setup = match (family.as_deref(), key_variable) {
                (Some(svc_local::FAMILY), _) => Some(format!("run `{}`", svc_local::models::INSTALL_COMMAND)),
                (_, Some(variable)) => Some(format!("set {variable}")),
                _ => None,
            };
            json!({"alias": alias, "configured": app.config.voice_available(alias), "key_variable": key_variable,
                "setup": setup})
        })
        .collect();
    let mut response = axum::Json(json!({
        "api_key": credential.key,
        "key_id": credential.key_id,
        "workspace": credential.workspace,
        "public_url": app.config.public_url.as_str().trim_end_matches('/'),
        "default_provider": app.config.default_provider,
        "providers": providers,
    }))
    .into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised() {
        for host in ["localhost", "localhost:8080", "127.0.0.1:8080", "127.1.2.3", "[::1]:8080", "app.localhost"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["evil.example", "10.0.0.1:8080", "localhost.evil.example", "[::2]", "", "0.0.0.0"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn only_same_origin_loopback_requests_get_the_credential() {
        let headers = |host: &str, origin: Option<&str>| {
            let mut map = HeaderMap::new();
            map.insert(header::HOST, HeaderValue::from_str(host).expect("header"));
            if let Some(origin) = origin {
                map.insert(header::ORIGIN, HeaderValue::from_str(origin).expect("header"));
            }
            map
        };
        assert!(local_request(&headers("127.0.0.1:8080", None)));
        assert!(local_request(&headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"))));
        assert!(local_request(&headers("localhost:8080", Some("http://localhost:8080"))));
        // DNS rebinding: the browser names the attacker's host.
        assert!(!local_request(&headers("evil.example:8080", None)));
        // Another local port's page (a different origin) is not ours.
        assert!(!local_request(&headers("127.0.0.1:8080", Some("http://127.0.0.1:3000"))));
        assert!(!local_request(&headers("127.0.0.1:8080", Some("https://evil.example"))));
        assert!(!local_request(&HeaderMap::new()));
    }
}
