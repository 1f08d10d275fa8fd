//! The HTTP surface: every route under `/api/v1/external`, plus `/healthz` and `/metrics`.
//!
//! Routes are registered through `utoipa-axum`, so the OpenAPI document is generated from the
//! same table that routes requests and cannot drift from it. Handlers are named `verb_resource`
//! and state their authority requirement in their first lines.

mod agents;
mod credentials;
mod dial;
mod import;
mod projects;
mod schemas;
mod sessions;
mod start;
mod support;

use axum::Router;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use serde_json::Value;
use svc_wire::LocSegment;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::error::{ApiError, ApiResult};

/// Prefix of every public route.
pub const API_PREFIX: &str = "/api/v1/external";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "svc external API",
        description = "Realtime voice agent service: sessions, credentials, history. See docs/API-DESIGN.md.",
        version = "1"
    ),
    modifiers(&BearerAuth),
    components(schemas(svc_wire::ErrorEnvelope, svc_wire::error::AuthErrorBody, svc_wire::ErrorCode))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`svc_sk_…`), a minted end-user JWT, or a user access token, per route.",
                    ))
                    .build(),
            ),
        );
    }
}

/// Documents the errors every operation of a kind can answer, so that no operation's own
/// annotation can forget one: 401 (`{detail}`), 403 and 503 (database unavailable) on every
/// authenticated operation, 413 and 422 on every operation with a body, 422 on every operation
/// with query parameters.
/// An operation's own description of a status wins; this adds only what is missing.
struct StandardErrors;

impl Modify for StandardErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
        let response = |description: &str, schema: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/json",
                        ContentBuilder::new().schema(Some(Ref::from_schema_name(schema))).build(),
                    )
                    .build(),
            )
        };
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
            for operation in operations.into_iter().flatten() {
                let responses = &mut operation.responses.responses;
                if operation.security.as_ref().is_some_and(|security| !security.is_empty()) {
                    responses.entry("401".into()).or_insert_with(|| {
                        response("Missing, malformed, expired or revoked credential", "AuthErrorBody")
                    });
                    responses.entry("403".into()).or_insert_with(|| {
                        response("The credential may not use this operation (scope or kind)", "ErrorEnvelope")
                    });
                    // Every authenticated operation reads the database.
                    responses.entry("503".into()).or_insert_with(|| {
                        response("The database is unavailable; retry with backoff", "ErrorEnvelope")
                    });
                }
                if operation.request_body.is_some() {
                    responses
                        .entry("413".into())
                        .or_insert_with(|| response("The body is larger than the operation accepts", "ErrorEnvelope"));
                    responses.entry("422".into()).or_insert_with(|| {
                        response("The body breaks a rule; `errors` locates each problem", "ErrorEnvelope")
                    });
                }
                let has_query = operation
                    .parameters
                    .iter()
                    .flatten()
                    .any(|parameter| matches!(parameter.parameter_in, utoipa::openapi::path::ParameterIn::Query));
                if has_query {
                    responses.entry("422".into()).or_insert_with(|| {
                        response("A query parameter breaks a rule; `errors` locates each problem", "ErrorEnvelope")
                    });
                }
            }
        }
    }
}

/// OpenAPI links from the operations that create resources to those that use them, so generated
/// clients and stateful fuzzers can follow them: a session start or import to the session routes,
/// a token mint to its revocation, an agent creation to the agent routes.
struct ResourceLinks;

impl Modify for ResourceLinks {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::link::LinkBuilder;
        const SESSION_ROUTES: [&str; 6] =
            ["get_session", "get_transcript", "get_usage", "get_timeline", "get_recording", "delete_session"];
        let sources: [(&str, &str, &[&str], &str, &str); 4] = [
            ("start_session", "200", &SESSION_ROUTES, "session_id", "$response.body#/session_id"),
            ("import_session", "201", &SESSION_ROUTES, "session_id", "$response.body#/id"),
            ("mint_token", "200", &["revoke_token"], "token_id", "$response.body#/token_id"),
            ("create_agent", "201", &["get_agent", "update_agent", "delete_agent"], "name", "$response.body#/name"),
        ];
        for item in openapi.paths.paths.values_mut() {
            for operation in
                [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten()
            {
                let Some(id) = operation.operation_id.clone() else { continue };
                for (source, status, targets, parameter, value) in &sources {
                    if id != *source {
                        continue;
                    }
                    let Some(RefOr::T(response)) = operation.responses.responses.get_mut(*status) else { continue };
                    for target in *targets {
                        let link = LinkBuilder::new().operation_id(*target).parameter(*parameter, *value).build();
                        response.links.insert((*target).to_owned(), RefOr::T(link));
                    }
                }
            }
        }
    }
}

/// The API routes with their OpenAPI document.
fn api() -> OpenApiRouter<App> {
    let external = OpenApiRouter::new()
        .routes(routes!(credentials::verify_credential))
        .routes(routes!(credentials::mint_token))
        .routes(routes!(credentials::revoke_token))
        .routes(routes!(credentials::whoami))
        .routes(routes!(sessions::list_sessions))
        .routes(routes!(sessions::get_capabilities))
        .routes(routes!(sessions::get_session, sessions::delete_session))
        .routes(routes!(sessions::get_transcript))
        .routes(routes!(sessions::get_usage))
        .routes(routes!(sessions::get_timeline))
        .routes(routes!(sessions::get_recording))
        .routes(routes!(support::create_support_request))
        .routes(routes!(agents::list_agents, agents::create_agent))
        .routes(routes!(agents::get_agent, agents::update_agent, agents::delete_agent))
        .routes(routes!(projects::get_default_project))
        .routes(routes!(projects::prepare_room))
        .routes(routes!(start::start_session))
        .routes(routes!(dial::dial_session))
        .layer(DefaultBodyLimit::max(svc_domain::limits::JSON_BODY_MAX_BYTES));
    // Import streams its body under its own, larger limit.
    let import = OpenApiRouter::new().routes(routes!(import::import_session)).layer(DefaultBodyLimit::disable());
    OpenApiRouter::with_openapi(ApiDoc::openapi()).nest(API_PREFIX, external.merge(import))
}

/// Browsers may call the API from any origin: a web app talks to svc directly with a minted
/// end-user token. Credentials are Bearer headers, never cookies, so a page from another origin
/// gets nothing it did not bring (`*`, no `Access-Control-Allow-Credentials`). Only the API
/// prefix answers cross-origin; the playground and its development credential do not.
///
/// A middleware around the whole router rather than a layer on the API routes: the
/// method-not-allowed fallback replaces a route layer's fallback, and a preflight `OPTIONS` is
/// exactly what reaches it.
async fn api_cors(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    const ALLOW_METHODS: &str = "GET, POST, PUT, PATCH, DELETE";
    const ALLOW_HEADERS: &str = "authorization, content-type, x-svc-sdk, x-request-id";
    let cross_origin = request.uri().path().starts_with(API_PREFIX) && request.headers().contains_key(header::ORIGIN);
    if !cross_origin {
        return next.run(request).await;
    }
    let preflight =
        request.method() == Method::OPTIONS && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOW_METHODS));
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOW_HEADERS));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        response
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("x-request-id"));
    response
}

/// The API's routes and its OpenAPI document, completed with the standard errors (after the
/// routes are in: `#[openapi(modifiers)]` run before there are any paths).
fn api_parts() -> (axum::Router<App>, utoipa::openapi::OpenApi) {
    let (router, mut document) = api().split_for_parts();
    StandardErrors.modify(&mut document);
    schemas::RuleSchemas.modify(&mut document);
    ResourceLinks.modify(&mut document);
    (router, document)
}

/// The OpenAPI document of the API, as served.
pub fn openapi() -> Value {
    render(&api_parts().1)
}

/// The document as JSON. utoipa 5.5 serializes a link's `operationId` and `operationRef` in
/// snake case, which no OpenAPI tool reads; they are renamed here.
fn render(document: &utoipa::openapi::OpenApi) -> Value {
    let mut value = serde_json::to_value(document).unwrap_or_default();
    let responses = value["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
        .filter_map(|operation| operation.get_mut("responses").and_then(Value::as_object_mut))
        .flat_map(|responses| responses.values_mut());
    for response in responses {
        let links = response.get_mut("links").and_then(Value::as_object_mut).into_iter().flat_map(|l| l.values_mut());
        for link in links.filter_map(Value::as_object_mut) {
            for (snake, camel) in [("operation_id", "operationId"), ("operation_ref", "operationRef")] {
                if let Some(found) = link.remove(snake) {
                    link.insert(camel.to_owned(), found);
                }
            }
        }
    }
    value
}

/// The whole application router.
pub fn router(app: App) -> Router {
    let (api_router, document) = api_parts();
    // Rendered once; each request shares the bytes.
    let document_json = Bytes::from(serde_json::to_vec_pretty(&render(&document)).unwrap_or_default());
    api_router
        .route(
            &format!("{API_PREFIX}/openapi.json"),
            get(move || async move { ([(header::CONTENT_TYPE, "application/json")], document_json) }),
        )
        .merge(crate::playground::router())
        .route("/healthz", get(healthz))
        .route("/metrics", get(render_metrics))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::metrics::track))
        .layer(axum::middleware::from_fn(api_cors))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            let request_id = request
                .headers()
                .get("x-request-id")
                .and_then(|value| value.to_str().ok())
                .unwrap_or("-");
            tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request.id = %request_id)
        }))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(app)
}

async fn healthz(State(app): State<App>) -> Response {
    if app.dispatcher.draining() {
        // Load balancers stop sending new sessions here; the live ones run on.
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({"status": "draining"})))
            .into_response();
    }
    match app.store.ping().await {
        Ok(()) => (StatusCode::OK, axum::Json(serde_json::json!({"status": "ok"}))).into_response(),
        Err(error) => {
            tracing::warn!(error = %error, "health check: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({"status": "unavailable"}))).into_response()
        }
    }
}

async fn render_metrics(State(app): State<App>) -> Response {
    match app.store.count_all_live_sessions().await {
        Ok(count) => app.metrics.set_live_sessions(count),
        Err(error) => tracing::warn!(error = %error, "metrics: could not count live sessions"),
    }
    if let Some(totals) = app.dispatcher.media_totals() {
        app.metrics.set_media_totals(&totals);
    }
    let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    app.metrics.set_process_gauges(app.dispatcher.open_rooms(), tasks);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], app.metrics.render())
        .into_response()
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("No route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::status(StatusCode::METHOD_NOT_ALLOWED, format!("Method {method} is not allowed on {}", uri.path()))
}

/// Parses a JSON request body (after authentication, so a bad body never masks a 401 or 403).
///
/// Wrong content types, oversized bodies and malformed JSON are all `validation_error`s (the
/// oversized one with status 413), located at `["body"]` and never echoing the payload.
pub(crate) fn json_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    empty_is_object: bool,
) -> ApiResult<Value> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::status(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Request body exceeds {} bytes", svc_domain::limits::JSON_BODY_MAX_BYTES),
            )
        } else {
            ApiError::bad_request("Request body could not be read")
        }
    })?;
    if body.is_empty() && empty_is_object {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
    let mime = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if !(mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))) {
        return Err(ApiError::invalid(
            vec![LocSegment::Key("header".into()), LocSegment::Key("content-type".into())],
            "content_type",
            "Expected a request with Content-Type: application/json",
        ));
    }
    serde_json::from_slice(&body).map_err(|error| {
        let category = match error.classify() {
            serde_json::error::Category::Eof => "unexpected end of input",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data | serde_json::error::Category::Io => "invalid data",
        };
        ApiError::invalid(
            vec![LocSegment::Key("body".into())],
            "json_invalid",
            format!("Invalid JSON: {category} at line {} column {}", error.line(), error.column()),
        )
    })
}
