//! The caller's project, and room reservations ahead of a session start.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use svc_domain::Scope;
use svc_domain::parse::{Fields, Issues, body as body_loc};
use svc_wire::rest::{PreparedRoom, ProjectRecord};

use crate::app::{App, now_us, us_to_seconds};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};

/// How long a reservation waits for its start.
pub(crate) const RESERVATION_TTL_SECONDS: i64 = 120;
/// Open reservations one credential may hold; more would let a client hoard rooms.
pub(crate) const MAX_OPEN_RESERVATIONS: i64 = 10;

/// The project the credential acts on: the workspace's default project for an API key, the end
/// user's own project for a minted token.
#[utoipa::path(
    get,
    path = "/projects/default",
    tag = "projects",
    security(("bearer" = [])),
    responses((status = 200, body = ProjectRecord), (status = 401, body = svc_wire::error::AuthErrorBody), (status = 403, body = svc_wire::ErrorEnvelope))
)]
pub(crate) async fn get_default_project(
    State(app): State<App>,
    principal: Principal,
) -> ApiResult<Json<ProjectRecord>> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeRead])?;
    let project = app.store.project_by_id(&caller.project_id).await?;
    Ok(Json(ProjectRecord {
        id: project.id,
        name: project.name,
        kind: project.kind,
        external_user_id: project.external_user_id,
        created_at: us_to_seconds(project.created_us),
    }))
}

/// Reserves a room for the credential's next session start, which consumes the oldest open
/// reservation. The body is empty or `{}`.
#[utoipa::path(
    post,
    path = "/realtime/session/prepare-room",
    tag = "sessions",
    security(("bearer" = [])),
    responses(
        (status = 201, body = PreparedRoom),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "Missing realtime:start"),
        (status = 429, body = svc_wire::ErrorEnvelope, description = "Too many open reservations"),
    )
)]
pub(crate) async fn prepare_room(
    State(app): State<App>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<PreparedRoom>)> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::RealtimeStart])?;
    let value = super::json_body(&headers, body, true)?;
    let mut issues = Issues::default();
    if let Some(fields) = Fields::of(&value, &body_loc(), &mut issues) {
        fields.deny_unknown(&mut issues);
    }
    issues.finish(|| ()).map_err(ApiError::Validation)?;
    let now = now_us();
    let credential = caller.credential.id();
    if app.store.count_open_reservations(&credential, now).await? >= MAX_OPEN_RESERVATIONS {
        return Err(ApiError::status(
            StatusCode::TOO_MANY_REQUESTS,
            format!("This credential already holds {MAX_OPEN_RESERVATIONS} open room reservations"),
        ));
    }
    let expires_us = now + RESERVATION_TTL_SECONDS * 1_000_000;
    let reservation = app
        .store
        .reserve_room(
            &caller.workspace.id,
            &caller.project_id,
            &credential,
            &svc_store::new_room_name(),
            now,
            expires_us,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(PreparedRoom {
            reservation_id: reservation.id,
            room_name: reservation.room_name,
            expires_at: us_to_seconds(reservation.expires_us),
        }),
    ))
}
