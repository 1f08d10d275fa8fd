//! `POST /realtime/session/{session_id}/dial`: a phone call into a live session.
//!
//! The gates run in the order a client can act on them: the credential (API keys only, scope
//! `realtime:dial`), the body, the session (in the caller's project, still live), the workspace
//! (dial-out enabled and a trunk on this server, the caller number in its pool, the callee not on
//! its do-not-call list, dial minutes left this month), then the one dial per session. The call
//! rings after the answer (202); its progress reaches the session's data channel and timeline.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use svc_domain::Scope;
use svc_domain::requests::DialParams;
use svc_store::NewDial;
use svc_wire::ErrorCode;
use svc_wire::rest::{DialAccepted, DialRequest};

use crate::app::{App, now_us};
use crate::auth::{Principal, RealtimeCredential};
use crate::dispatch::{DialRefusal, PhoneDial};
use crate::error::{ApiError, ApiResult};

/// Places an outbound phone call into a live session; it rings asynchronously.
#[utoipa::path(
    post,
    path = "/realtime/session/{session_id}/dial",
    tag = "sessions",
    security(("bearer" = [])),
    request_body = DialRequest,
    params(("session_id" = String, Path, description = "A live session of the caller's project")),
    responses(
        (status = 202, body = DialAccepted, description = "The call is placed and rings; its progress arrives on the session's data channel"),
        (status = 400, body = svc_wire::ErrorEnvelope, description = "`caller_number_not_available`: not an ACTIVE number of the workspace's pool"),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "`dial_requires_api_key` (a minted token), missing realtime:dial, `phone_calls_disabled` (the workspace's setting, or no phone trunk on this server), `minute_limit_exceeded`, `do_not_call`"),
        (status = 404, body = svc_wire::ErrorEnvelope, description = "`session_not_found`: no such session in the caller's project"),
        (status = 409, body = svc_wire::ErrorEnvelope, description = "`session_not_live` (ended, or not running), `session_already_dialed`"),
        (status = 422, body = svc_wire::ErrorEnvelope),
        (status = 503, body = svc_wire::ErrorEnvelope, description = "`consent_check_unavailable`: the do-not-call check could not run; retry"),
    )
)]
pub(crate) async fn dial_session(
    State(app): State<App>,
    principal: Principal,
    Path(session_id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<DialAccepted>)> {
    let caller = principal.realtime()?;
    if matches!(caller.credential, RealtimeCredential::EndUser { .. }) {
        return Err(ApiError::code(ErrorCode::DialRequiresApiKey, "Dial-out takes an API key, not a minted token"));
    }
    caller.require(&[Scope::RealtimeDial])?;
    let params = DialParams::parse(&super::json_body(&headers, body, false)?).map_err(ApiError::Validation)?;

    let session = app
        .store
        .session_in_project(&caller.project_id, &session_id)
        .await?
        .ok_or_else(|| ApiError::code(ErrorCode::SessionNotFound, "No such session in this project"))?;
    if session.ended_us.is_some() {
        return Err(ApiError::code(ErrorCode::SessionNotLive, "The session has ended"));
    }

    let workspace = &caller.workspace;
    let settings = &workspace.settings;
    if !settings.phone_calls_enabled {
        return Err(ApiError::code(ErrorCode::PhoneCallsDisabled, "Phone calls are disabled for this workspace"));
    }
    let Some(trunk_caller_number) = app.dispatcher.trunk_caller_number() else {
        return Err(no_trunk());
    };
    if let Some(number) = &params.caller_number {
        let pool = app.store.caller_numbers(&workspace.id).await?;
        if !pool.iter().any(|entry| &entry.number == number && entry.active) {
            return Err(ApiError::code(
                ErrorCode::CallerNumberNotAvailable,
                "caller_number is not an active number of this workspace's pool",
            ));
        }
    }
    // The consent check: a database that cannot answer is not permission to call.
    let do_not_call = app.store.do_not_call(&workspace.id).await.map_err(|error| {
        tracing::warn!(%error, "the do-not-call check could not run");
        ApiError::code(ErrorCode::ConsentCheckUnavailable, "The do-not-call check could not run; retry")
    })?;
    if do_not_call.contains(&params.phone_number) {
        return Err(ApiError::code(ErrorCode::DoNotCall, "The number is on this workspace's do-not-call list"));
    }
    let now = now_us();
    if let Some(limit) = settings.dial_minute_limit {
        let (month_start, _) = super::start::utc_month_bounds(now);
        let used_seconds = app.store.dial_seconds_since(&workspace.id, month_start).await?;
        if u64::try_from(used_seconds).unwrap_or(0) >= limit.saturating_mul(60) {
            return Err(ApiError::code(
                ErrorCode::MinuteLimitExceeded,
                format!("The workspace has used its {limit} dial minutes this month"),
            ));
        }
    }

    // The dial's row and its timeline keep the number actually presented, the trunk's default
    // included, not what the request left out.
    let caller_number = params.caller_number.unwrap_or(trunk_caller_number);
    let dial_id = uuid::Uuid::new_v4().to_string();
    let dial = NewDial {
        id: &dial_id,
        workspace_id: &workspace.id,
        session_id: &session_id,
        phone_number: &params.phone_number,
        caller_number: Some(&caller_number),
        created_us: now,
    };
    if !app.store.insert_dial(&dial).await? {
        return Err(ApiError::code(ErrorCode::SessionAlreadyDialed, "The session already has a dial-out"));
    }
    let request = PhoneDial {
        dial_id: dial_id.clone(),
        session_id: session_id.clone(),
        phone_number: params.phone_number,
        caller_number,
        room_name: session.room_name.clone(),
    };
    if let Err(refusal) = app.dispatcher.dial(request).await {
        // Never placed: the session keeps its one dial.
        if let Err(error) = app.store.remove_unplaced_dial(&dial_id).await {
            tracing::warn!(dial.id = %dial_id, %error, "could not forget a dial that was not placed");
        }
        return Err(match refusal {
            DialRefusal::NoTrunk => no_trunk(),
            DialRefusal::NotRunning => ApiError::code(ErrorCode::SessionNotLive, "The session is not running"),
            DialRefusal::Failed(message) => {
                tracing::warn!(dial.id = %dial_id, %message, "the runtime could not place a dial");
                ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The call could not be placed; retry with backoff")
            }
        });
    }
    tracing::info!(session.id = %session_id, dial.id = %dial_id, "dial placed");
    Ok((StatusCode::ACCEPTED, Json(DialAccepted { dial_id })))
}

/// 403 `phone_calls_disabled` for a server without `--sip-trunk` (the workspace may allow calls).
fn no_trunk() -> ApiError {
    ApiError::code(ErrorCode::PhoneCallsDisabled, "This server has no phone trunk configured, so it cannot place calls")
}
