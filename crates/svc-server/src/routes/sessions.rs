//! Session history routes. Every lookup is scoped to the caller's project in the store query
//! itself, so an id from another project is indistinguishable from an unknown one (404).

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use svc_domain::Scope;
use svc_domain::limits::{LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, LIST_LIMIT_MIN};
use svc_store::{SessionFilter, SessionRow};
use svc_wire::LocSegment;
use svc_wire::rest::{
    Capabilities, SessionRecord, SessionStatus, Timeline, TimelineEvent, TranscriptRole, TranscriptTurn, UsageStatus,
    UsageSummary,
};
use utoipa::IntoParams;

use crate::app::{App, seconds_to_us, us_to_seconds};
use crate::auth::{Caller, Principal};
use crate::error::{ApiError, ApiResult};

/// Query of `GET /sessions` (documented; parsed by hand to report every problem with its `loc`).
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, reason = "documents the query for OpenAPI; parsed by parse_list_query")]
pub(crate) struct ListSessionsQuery {
    /// Page size, 1 to 100, default 20.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// Epoch seconds (finite, ≥ 0): only sessions that started strictly before. Pass the oldest
    /// `started_at` held to page backwards.
    #[param(minimum = 0)]
    before_started_at: Option<f64>,
}

/// Lists the project's sessions, newest first.
#[utoipa::path(
    get,
    path = "/sessions",
    tag = "sessions",
    security(("bearer" = [])),
    params(ListSessionsQuery),
    responses(
        (status = 200, body = Vec<SessionRecord>),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope),
        (status = 422, body = svc_wire::ErrorEnvelope),
    )
)]
pub(crate) async fn list_sessions(
    State(app): State<App>,
    principal: Principal,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<SessionRecord>>> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeRead])?;
    let (limit, before_us) = parse_list_query(query.as_deref().unwrap_or(""))?;
    let rows = app.store.list_sessions(SessionFilter { project_id: &caller.project_id, before_us, limit }).await?;
    rows.iter().map(session_record).collect::<ApiResult<Vec<_>>>().map(Json)
}

fn parse_list_query(query: &str) -> ApiResult<(u32, Option<i64>)> {
    let mut issues = svc_domain::parse::Issues::default();
    let loc = |name: &str| vec![LocSegment::Key("query".into()), LocSegment::Key(name.into())];
    let mut limit = LIST_LIMIT_DEFAULT;
    let mut before_us = None;
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "limit" => match value.parse::<u32>() {
                Ok(n) if (LIST_LIMIT_MIN..=LIST_LIMIT_MAX).contains(&n) => limit = n,
                Ok(_) => issues.push(
                    &loc("limit"),
                    "range",
                    format!("Input should be between {LIST_LIMIT_MIN} and {LIST_LIMIT_MAX}"),
                ),
                Err(_) => issues.push(&loc("limit"), "int_parsing", "Input should be a valid integer"),
            },
            "before_started_at" => match value.parse::<f64>() {
                Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => before_us = Some(seconds_to_us(seconds)),
                _ => issues.push(
                    &loc("before_started_at"),
                    "float_parsing",
                    "Input should be a finite number of epoch seconds",
                ),
            },
            _ => {}
        }
    }
    issues.finish(|| (limit, before_us)).map_err(ApiError::Validation)
}

/// Which model providers the workspace may select.
#[utoipa::path(
    get,
    path = "/sessions/capabilities",
    tag = "sessions",
    security(("bearer" = [])),
    responses((status = 200, body = Capabilities), (status = 401, body = svc_wire::error::AuthErrorBody), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn get_capabilities(State(app): State<App>, principal: Principal) -> ApiResult<Json<Capabilities>> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeRead])?;
    let entitled = |alias: &str| {
        caller.workspace.settings.entitled_providers.as_ref().is_none_or(|allowed| allowed.iter().any(|p| p == alias))
    };
    let openai_provider_available = app.config.provider_keys.openai && entitled("provider_b");
    Ok(Json(Capabilities { openai_provider_available }))
}

/// One session record.
#[utoipa::path(
    get,
    path = "/sessions/{session_id}",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 200, body = SessionRecord), (status = 404, body = svc_wire::ErrorEnvelope), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn get_session(
    State(app): State<App>,
    principal: Principal,
    Path(session_id): Path<String>,
) -> ApiResult<Json<SessionRecord>> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeRead])?;
    let row = find_session(&app, &caller, &session_id).await?;
    session_record(&row).map(Json)
}

/// The stored transcript turns, in order.
#[utoipa::path(
    get,
    path = "/sessions/{session_id}/transcript",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 200, body = Vec<TranscriptTurn>), (status = 404, body = svc_wire::ErrorEnvelope), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn get_transcript(
    State(app): State<App>,
    principal: Principal,
    Path(session_id): Path<String>,
) -> ApiResult<Json<Vec<TranscriptTurn>>> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeRead])?;
    let row = find_session(&app, &caller, &session_id).await?;
    let turns = app.store.transcript(&row.id).await?;
    turns
        .into_iter()
        .map(|turn| {
            let role = match turn.role.as_str() {
                "user" => TranscriptRole::User,
                "assistant" => TranscriptRole::Assistant,
                other => return Err(ApiError::Internal(anyhow::anyhow!("stored transcript role `{other}`"))),
            };
            Ok(TranscriptTurn { ts: us_to_seconds(turn.ts_us), role, text: turn.text })
        })
        .collect::<ApiResult<Vec<_>>>()
        .map(Json)
}

/// The usage summary. Readable with `realtime:start` (the run's own caller) or `realtime:read`.
#[utoipa::path(
    get,
    path = "/sessions/{session_id}/usage",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 200, body = UsageSummary), (status = 404, body = svc_wire::ErrorEnvelope), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn get_usage(
    State(app): State<App>,
    principal: Principal,
    Path(session_id): Path<String>,
) -> ApiResult<Json<UsageSummary>> {
    let caller = principal.realtime()?;
    caller.require_any(&[Scope::RealtimeStart, Scope::RealtimeRead])?;
    let row = find_session(&app, &caller, &session_id).await?;
    let usage_status = usage_status(&row.usage_status)?;
    let recorded = usage_status == UsageStatus::Recorded;
    let ms_to_seconds = |ms: Option<i64>| ms.map(|ms| ms as f64 / 1000.0);
    Ok(Json(UsageSummary {
        status: session_status(&row.status)?,
        usage_status,
        duration_seconds: row.ended_us.map(|ended| us_to_seconds(ended - row.started_us).max(0.0)),
        turn_count: if recorded { row.turn_count } else { None },
        user_speaking_seconds: if recorded { ms_to_seconds(row.user_speaking_ms) } else { None },
        agent_speaking_seconds: if recorded { ms_to_seconds(row.agent_speaking_ms) } else { None },
        provider: row.provider.clone(),
        model: if recorded { row.model.clone() } else { None },
        tokens: if recorded { row.tokens.clone() } else { None },
    }))
}

/// The session's timeline: every recorded event, ordered by `seq`.
#[utoipa::path(
    get,
    path = "/sessions/{session_id}/timeline",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 200, body = Timeline), (status = 404, body = svc_wire::ErrorEnvelope), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn get_timeline(
    State(app): State<App>,
    principal: Principal,
    Path(session_id): Path<String>,
) -> ApiResult<Json<Timeline>> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeLogs])?;
    let row = find_session(&app, &caller, &session_id).await?;
    let events = app
        .store
        .timeline(&row.id)
        .await?
        .into_iter()
        .map(|event| TimelineEvent {
            seq: event.seq,
            ts: us_to_seconds(event.ts_us),
            kind: event.kind,
            data: event.data,
        })
        .collect();
    Ok(Json(Timeline { session_id: row.id, events }))
}

/// The session's audio recording, streamed as `audio/wav`.
#[utoipa::path(
    get,
    path = "/sessions/{session_id}/recording",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "Session id")),
    responses(
        (status = 200, content_type = "audio/wav", description = "The WAV file"),
        (status = 404, body = svc_wire::ErrorEnvelope, description = "Unknown session, or no recording stored"),
        (status = 403, body = svc_wire::ErrorEnvelope),
    )
)]
pub(crate) async fn get_recording(
    State(app): State<App>,
    principal: Principal,
    Path(session_id): Path<String>,
) -> ApiResult<Response> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeRead])?;
    let row = find_session(&app, &caller, &session_id).await?;
    let artifact = app
        .store
        .artifact(&row.id, "audio")
        .await?
        .ok_or_else(|| ApiError::not_found("No recording is stored for this session"))?;
    let path = app.config.artifact_path(&artifact.path);
    let file = tokio::fs::File::open(&path).await.map_err(|error| {
        ApiError::Internal(anyhow::anyhow!("recording {} of session {} is missing: {error}", path.display(), row.id))
    })?;
    let length = file.metadata().await.map_err(|error| ApiError::Internal(error.into()))?.len();
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(file));
    Ok((
        [
            (header::CONTENT_TYPE, artifact.content_type),
            (header::CONTENT_LENGTH, length.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}.wav\"", row.id)),
        ],
        body,
    )
        .into_response())
}

/// Deletes the session with its transcript, timeline, usage and recording files.
#[utoipa::path(
    delete,
    path = "/sessions/{session_id}",
    tag = "sessions",
    security(("bearer" = [])),
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 204, description = "Removed"), (status = 404, body = svc_wire::ErrorEnvelope), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn delete_session(
    State(app): State<App>,
    principal: Principal,
    Path(session_id): Path<String>,
) -> ApiResult<StatusCode> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeDelete])?;
    // A live session is ended first (`session-ended` with reason `session_deleted`), so that
    // nothing it still writes lands after its rows are gone.
    let row = find_session(&app, &caller, &session_id).await?;
    if row.ended_us.is_none() {
        match app.dispatcher.end(&session_id, SESSION_DELETED).await {
            Ok(true) => {}
            // Another node runs it: on a LiveKit server, it is asked there.
            Ok(false) => end_on_its_node(&app, &row, SESSION_DELETED).await,
            Err(error) => {
                tracing::warn!(session.id = %session_id, %error, "deleting a live session that would not end")
            }
        }
    }
    let artifacts = app
        .store
        .delete_session(&caller.project_id, &session_id)
        .await?
        .ok_or_else(|| ApiError::not_found("No such session in this project"))?;
    for artifact in artifacts {
        let path = app.config.artifact_path(&artifact.path);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            // The rows are gone; a file that cannot be removed is logged for the operator.
            Err(error) => {
                tracing::error!(path = %path.display(), error = %error, "could not remove a deleted session's file")
            }
        }
    }
    tracing::info!(session.id = %session_id, "deleted session");
    Ok(StatusCode::NO_CONTENT)
}

/// The `session-ended` reason of a live session whose record is deleted.
pub const SESSION_DELETED: &str = "session_deleted";

/// Ends a live session another node runs, when the sessions' rooms are on a LiveKit server: the
/// end request goes to its agent through that server (`svc_session::control`), and this waits
/// (up to [`svc_session::runtime::END_WAIT`]) for the end to be stored. A session whose room is
/// gone, or that does not end in time, is left to its node and the reaper.
async fn end_on_its_node(app: &App, row: &SessionRow, reason: &str) {
    let (Some(livekit), Some(room)) = (&app.livekit, &row.room_name) else { return };
    if let Err(error) = livekit.request_end(room, &row.id, reason).await {
        tracing::warn!(session.id = %row.id, %error, "could not ask the session's node to end it");
        return;
    }
    let deadline = std::time::Instant::now() + svc_session::runtime::END_WAIT;
    while std::time::Instant::now() < deadline {
        match app.store.session(&row.id).await {
            Ok(Some(stored)) if stored.ended_us.is_none() => {}
            Ok(_) => return,
            Err(error) => tracing::debug!(session.id = %row.id, %error, "reading the session's end"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tracing::warn!(session.id = %row.id, "the session's node did not store its end in time; deleting it anyway");
}

async fn find_session(app: &App, caller: &Caller, session_id: &str) -> ApiResult<SessionRow> {
    app.store
        .session_in_project(&caller.project_id, session_id)
        .await?
        .ok_or_else(|| ApiError::not_found("No such session in this project"))
}

pub(crate) fn session_record(row: &SessionRow) -> ApiResult<SessionRecord> {
    Ok(SessionRecord {
        id: row.id.clone(),
        started_at: us_to_seconds(row.started_us),
        ended_at: row.ended_us.map(us_to_seconds),
        status: session_status(&row.status)?,
        provider: row.provider.clone(),
        has_resumption_handle: row.has_resumption_handle,
    })
}

fn session_status(text: &str) -> ApiResult<SessionStatus> {
    match text {
        "active" => Ok(SessionStatus::Active),
        "completed" => Ok(SessionStatus::Completed),
        "error" => Ok(SessionStatus::Error),
        other => Err(ApiError::Internal(anyhow::anyhow!("stored session status `{other}`"))),
    }
}

fn usage_status(text: &str) -> ApiResult<UsageStatus> {
    match text {
        "pending" => Ok(UsageStatus::Pending),
        "recorded" => Ok(UsageStatus::Recorded),
        "unavailable" => Ok(UsageStatus::Unavailable),
        other => Err(ApiError::Internal(anyhow::anyhow!("stored usage status `{other}`"))),
    }
}
