//! `POST /support/requests`: a caller reports a problem, optionally about one of its sessions.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use svc_domain::Scope;
use svc_domain::requests::SupportRequestParams;
use svc_store::NewSupportRequest;
use svc_wire::rest::{SupportRequestCreate, SupportRequestRecord};

use crate::app::{App, now_us, us_to_seconds};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};

/// Files a support request. A named `session_id` must be in the caller's project (else 404).
#[utoipa::path(
    post,
    path = "/support/requests",
    tag = "support",
    security(("bearer" = [])),
    request_body = SupportRequestCreate,
    responses(
        (status = 201, body = SupportRequestRecord),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "Missing support:write"),
        (status = 404, body = svc_wire::ErrorEnvelope, description = "session_id not in this project"),
        (status = 422, body = svc_wire::ErrorEnvelope),
    )
)]
pub(crate) async fn create_support_request(
    State(app): State<App>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<SupportRequestRecord>)> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::SupportWrite])?;
    let params =
        SupportRequestParams::parse(&super::json_body(&headers, body, false)?).map_err(ApiError::Validation)?;
    if let Some(session_id) = &params.session_id
        && app.store.session_in_project(&caller.project_id, session_id).await?.is_none()
    {
        return Err(ApiError::not_found("No such session in this project"));
    }
    let now = now_us();
    let credential = caller.credential.id();
    let id = app
        .store
        .insert_support_request(
            &NewSupportRequest {
                workspace_id: &caller.workspace.id,
                project_id: &caller.project_id,
                session_id: params.session_id.as_deref(),
                credential: &credential,
                subject: params.subject.as_deref(),
                message: &params.message,
                contact_email: params.contact_email.as_deref(),
                diagnostics: params.diagnostics.as_ref(),
            },
            now,
        )
        .await?;
    tracing::info!(support_request.id = %id, workspace.slug = %caller.workspace.slug, "support request filed");
    Ok((
        StatusCode::CREATED,
        Json(SupportRequestRecord {
            id,
            status: "open".to_owned(),
            created_at: us_to_seconds(now),
            session_id: params.session_id,
        }),
    ))
}
