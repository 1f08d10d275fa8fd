//! Credential routes: verify, end-user token mint and revoke, and `whoami`.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use svc_domain::Scope;
use svc_domain::requests::MintTokenParams;
use svc_store::TokenKind;
use svc_wire::rest::{CredentialInfo, CredentialKind, MintTokenRequest, MintedToken, UserInfo, Whoami, WorkspaceRef};

use crate::app::{App, now_us};
use crate::auth::{Principal, RealtimeCredential};
use crate::error::{ApiError, ApiResult};

/// Describes the presented realtime credential. No scope required; an under-scoped credential
/// gets 200 with `can_start_sessions: false`.
#[utoipa::path(
    get,
    path = "/realtime/verify",
    tag = "credentials",
    security(("bearer" = [])),
    responses(
        (status = 200, body = CredentialInfo),
        (status = 401, body = svc_wire::error::AuthErrorBody, description = "Missing, invalid, expired or revoked credential, or wrong host"),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "A user access or acts-as-user token"),
    )
)]
pub(crate) async fn verify_credential(State(app): State<App>, principal: Principal) -> ApiResult<Json<CredentialInfo>> {
    let caller = match principal {
        Principal::Realtime(caller) => caller,
        Principal::User(user) if user.kind == TokenKind::ActsAsUser => {
            return Err(ApiError::forbidden("Acts-as-user tokens are not realtime credentials"));
        }
        Principal::User(_) => return Err(ApiError::forbidden("User access tokens are not realtime credentials")),
    };
    let scopes = caller.scopes.clone().unwrap_or_default();
    let (credential, workspace) = match &caller.credential {
        RealtimeCredential::ApiKey { .. } => (
            CredentialKind::ApiKey,
            Some(WorkspaceRef { name: caller.workspace.name.clone(), slug: caller.workspace.slug.clone() }),
        ),
        RealtimeCredential::EndUser { .. } => (CredentialKind::UserToken, None),
    };
    Ok(Json(CredentialInfo {
        credential,
        workspace,
        scopes: scopes.wire_strings().into_iter().map(str::to_owned).collect(),
        can_start_sessions: scopes.contains(Scope::RealtimeStart),
        realtime_voice_available: app.config.voice_available(&app.config.default_provider),
        external_user_id: caller.external_user_id().map(str::to_owned),
    }))
}

/// Mints an end-user JWT. Idempotent per (workspace, external_user_id): every mint for the pair
/// returns the same `token_id` until it is revoked, with a fresh `jwt` and `expires_at`.
#[utoipa::path(
    post,
    path = "/auth/token",
    tag = "credentials",
    security(("bearer" = [])),
    request_body = MintTokenRequest,
    responses(
        (status = 200, body = MintedToken),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "Missing user_tokens:mint"),
        (status = 422, body = svc_wire::ErrorEnvelope),
    )
)]
pub(crate) async fn mint_token(
    State(app): State<App>,
    principal: Principal,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<MintedToken>> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::UserTokensMint])?;
    let params = MintTokenParams::parse(&super::json_body(&headers, body, false)?).map_err(ApiError::Validation)?;
    let minted = crate::auth::issue::mint_end_user_token(&app, &caller.workspace.id, &params)
        .await
        .map_err(ApiError::Internal)?;
    tracing::info!(token.id = %minted.token_id, workspace.slug = %caller.workspace.slug, ttl_seconds = params.ttl_seconds, "minted end-user token");
    Ok(Json(minted))
}

/// Revokes a minted token's grant: every JWT minted under that `token_id` stops working.
/// Revoking an already revoked grant of the workspace succeeds again (idempotent).
#[utoipa::path(
    delete,
    path = "/auth/token/{token_id}",
    tag = "credentials",
    security(("bearer" = [])),
    params(("token_id" = String, Path, description = "The `token_id` a mint returned")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope),
        (status = 404, body = svc_wire::ErrorEnvelope, description = "No such token in this workspace"),
    )
)]
pub(crate) async fn revoke_token(
    State(app): State<App>,
    principal: Principal,
    Path(token_id): Path<String>,
) -> ApiResult<StatusCode> {
    let caller = principal.realtime()?;
    caller.require(&[Scope::UserTokensMint])?;
    let grant = app.store.token_by_id(&token_id).await?;
    match grant {
        Some(grant) if grant.workspace_id == caller.workspace.id && grant.kind == TokenKind::EndUser => {
            if grant.revoked_us.is_none() {
                app.store.revoke_token(&caller.workspace.id, &token_id, TokenKind::EndUser, now_us()).await?;
                tracing::info!(token.id = %token_id, "revoked end-user token");
            }
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(ApiError::not_found("No such token in this workspace")),
    }
}

/// Describes the presented user access token: the introspection counterpart of verify.
#[utoipa::path(
    get,
    path = "/whoami",
    tag = "users",
    security(("bearer" = [])),
    responses(
        (status = 200, body = Whoami),
        (status = 401, body = svc_wire::error::AuthErrorBody),
        (status = 403, body = svc_wire::ErrorEnvelope, description = "Not a user access token"),
    )
)]
pub(crate) async fn whoami(principal: Principal) -> ApiResult<Json<Whoami>> {
    let caller = principal.user()?;
    let info = |user: &svc_store::UserRecord| UserInfo {
        id: user.id.clone(),
        email: user.email.clone(),
        roles: user.roles.clone(),
        capabilities: user.capabilities.clone(),
    };
    Ok(Json(Whoami {
        credential: match caller.kind {
            TokenKind::ActsAsUser => "acts_as_user_token",
            _ => "user_access_token",
        }
        .to_owned(),
        user: info(&caller.user),
        acting_user: caller.actor.as_ref().map(info),
        workspace: WorkspaceRef { name: caller.workspace.name.clone(), slug: caller.workspace.slug.clone() },
        expires_at: caller.expires_at,
    }))
}
