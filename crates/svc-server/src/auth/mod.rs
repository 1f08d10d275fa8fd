//! Authentication and authorization: who is calling, on which workspace and project, with which
//! scopes.
//!
//! Every request with a credential resolves to one [`Principal`]: a realtime [`Caller`] (an API
//! key or a minted end-user token) or a [`UserCaller`] (a workspace user's access token, possibly
//! acting as another user). Handlers then state what they need: `caller.require(&[Scope::X])`,
//! `principal.user()`, so each route's rule reads at its top. Failures of the credential itself
//! are 401 `{detail}`; failures of authority are 403 in the envelope.

pub mod api_key;
pub mod issue;
pub mod jwt;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use svc_domain::{Host, Scope, ScopeSet};
use svc_store::{StoreError, TokenKind, UserRecord, WorkspaceRow};

use crate::app::App;
use crate::error::{ApiError, ApiResult};

/// An authenticated request.
#[derive(Debug, Clone)]
pub enum Principal {
    /// An API key or minted end-user token.
    Realtime(Caller),
    /// A workspace user's access token.
    User(UserCaller),
}

/// The realtime credential behind a [`Caller`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RealtimeCredential {
    /// A workspace API key.
    ApiKey {
        /// Key id.
        key_id: String,
    },
    /// A minted end-user JWT.
    EndUser {
        /// Grant id (`token_id`).
        token_id: String,
        /// The end user.
        external_user_id: String,
    },
}

impl RealtimeCredential {
    /// A stable identifier of the credential (`api_key:<id>`, `end_user:<token_id>`).
    pub fn id(&self) -> String {
        match self {
            RealtimeCredential::ApiKey { key_id } => format!("api_key:{key_id}"),
            RealtimeCredential::EndUser { token_id, .. } => format!("end_user:{token_id}"),
        }
    }
}

/// A caller with a realtime credential.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The credential.
    pub credential: RealtimeCredential,
    /// Its workspace.
    pub workspace: WorkspaceRow,
    /// The project its history lives in.
    pub project_id: String,
    /// Its scopes; `None` when they could not be resolved (every scope check then fails closed).
    pub scopes: Option<ScopeSet>,
}

impl Caller {
    /// Fails unless the caller holds every scope in `required`.
    pub fn require(&self, required: &[Scope]) -> ApiResult<()> {
        let scopes = self.scopes.as_ref().ok_or_else(ApiError::missing_scope_information)?;
        let missing = scopes.missing(required);
        if missing.is_empty() { Ok(()) } else { Err(ApiError::missing_scopes(&missing)) }
    }

    /// Fails unless the caller holds at least one scope of `any_of`.
    pub fn require_any(&self, any_of: &[Scope]) -> ApiResult<()> {
        let scopes = self.scopes.as_ref().ok_or_else(ApiError::missing_scope_information)?;
        if any_of.iter().any(|scope| scopes.contains(*scope)) {
            return Ok(());
        }
        let list: Vec<&str> = any_of.iter().map(|scope| scope.as_str()).collect();
        Err(ApiError::forbidden(format!("API key missing required scopes: {}", list.join(" or "))))
    }

    /// The end user of a minted token.
    pub fn external_user_id(&self) -> Option<&str> {
        match &self.credential {
            RealtimeCredential::EndUser { external_user_id, .. } => Some(external_user_id),
            RealtimeCredential::ApiKey { .. } => None,
        }
    }
}

/// A caller with a workspace user's access token.
#[derive(Debug, Clone)]
pub struct UserCaller {
    /// Grant id.
    pub token_id: String,
    /// `UserAccess` or `ActsAsUser`.
    pub kind: TokenKind,
    /// The workspace.
    pub workspace: WorkspaceRow,
    /// The user whose authority the request carries.
    pub user: UserRecord,
    /// The user acting as `user`, for acts-as-user tokens.
    pub actor: Option<UserRecord>,
    /// Token expiry, epoch seconds.
    pub expires_at: i64,
}

impl UserCaller {
    /// Whether the user has `role` (or is `admin`, which holds every role).
    pub fn has_role(&self, role: &str) -> bool {
        self.user.roles.iter().any(|held| held == role || held == "admin")
    }

    /// Whether the user has `capability`.
    pub fn has_capability(&self, capability: &str) -> bool {
        self.user.capabilities.iter().any(|held| held == capability)
    }
}

impl Principal {
    /// The realtime caller, or 403 for a user token.
    pub fn realtime(self) -> ApiResult<Caller> {
        match self {
            Principal::Realtime(caller) => Ok(caller),
            Principal::User(_) => Err(ApiError::forbidden(
                "This endpoint takes an API key or a minted end-user token, not a user access token",
            )),
        }
    }

    /// The user caller, or 403 for a realtime credential.
    pub fn user(self) -> ApiResult<UserCaller> {
        match self {
            Principal::User(user) => Ok(user),
            Principal::Realtime(_) => {
                Err(ApiError::forbidden("This endpoint takes a user access token, not an API key or end-user token"))
            }
        }
    }
}

impl FromRequestParts<App> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Self::Rejection> {
        authenticate(parts, app).await
    }
}

async fn authenticate(parts: &Parts, app: &App) -> ApiResult<Principal> {
    let header = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| unauthorized("Authentication required: send Authorization: Bearer <API key or token>"))?;
    let header = header.to_str().map_err(|_| unauthorized("Malformed Authorization header"))?;
    let (scheme, credential) = header.split_once(' ').unwrap_or((header, ""));
    if !scheme.eq_ignore_ascii_case("bearer") || credential.trim().is_empty() {
        return Err(unauthorized("Authorization header must be `Bearer <credential>`"));
    }
    let credential = credential.trim();
    let principal = if credential.starts_with(api_key::API_KEY_PREFIX) {
        authenticate_api_key(credential, app).await?
    } else {
        authenticate_jwt(credential, app).await?
    };
    let workspace = match &principal {
        Principal::Realtime(caller) => &caller.workspace,
        Principal::User(user) => &user.workspace,
    };
    check_host(parts, workspace)?;
    Ok(principal)
}

fn unauthorized(detail: &str) -> ApiError {
    ApiError::Unauthorized(detail.to_owned())
}

async fn authenticate_api_key(presented: &str, app: &App) -> ApiResult<Principal> {
    let lookup = api_key::lookup_of(presented).ok_or_else(|| unauthorized("Invalid API key"))?;
    let (key, workspace, project_id) = match app.store.api_key_for_auth(lookup).await {
        Ok(Some(found)) => found,
        Ok(None) => return Err(unauthorized("Invalid API key")),
        // A key row whose scopes cannot be decoded: fail closed, as the spec requires.
        Err(StoreError::Corrupt(_)) => return Err(ApiError::missing_scope_information()),
        Err(error) => return Err(error.into()),
    };
    if !api_key::matches(presented, &key.secret_hash) {
        return Err(unauthorized("Invalid API key"));
    }
    if key.revoked_us.is_some() {
        return Err(unauthorized("API key has been revoked"));
    }
    Ok(Principal::Realtime(Caller {
        credential: RealtimeCredential::ApiKey { key_id: key.id },
        workspace,
        project_id,
        scopes: Some(key.scopes),
    }))
}

async fn authenticate_jwt(token: &str, app: &App) -> ApiResult<Principal> {
    let claims = app.jwt.verify(token).map_err(|error| match error {
        jwt::JwtError::Expired => unauthorized("Token has expired"),
        jwt::JwtError::Invalid => unauthorized("Invalid token"),
    })?;
    let grant = app.store.token_by_id(&claims.jti).await?.ok_or_else(|| unauthorized("Invalid token"))?;
    if grant.workspace_id != claims.ws || grant.kind.as_str() != claims.kind {
        return Err(unauthorized("Invalid token"));
    }
    if grant.revoked_us.is_some() {
        return Err(unauthorized("Token has been revoked"));
    }
    let workspace = app.store.workspace_by_id(&grant.workspace_id).await?;
    match grant.kind {
        TokenKind::EndUser => {
            let (Some(project_id), Some(external_user_id)) = (grant.project_id, grant.external_user_id) else {
                return Err(unauthorized("Invalid token"));
            };
            if claims.prj.as_deref() != Some(project_id.as_str()) || claims.sub != external_user_id {
                return Err(unauthorized("Invalid token"));
            }
            let scopes = claims.scope.as_deref().and_then(|list| ScopeSet::parse_list(list).ok());
            Ok(Principal::Realtime(Caller {
                credential: RealtimeCredential::EndUser { token_id: grant.id, external_user_id },
                workspace,
                project_id,
                scopes,
            }))
        }
        TokenKind::UserAccess | TokenKind::ActsAsUser => {
            let user_id = grant.user_id.ok_or_else(|| unauthorized("Invalid token"))?;
            if claims.sub != user_id {
                return Err(unauthorized("Invalid token"));
            }
            let user = app.store.user_by_id(&user_id).await.map_err(|_| unauthorized("Invalid token"))?;
            let actor = match grant.actor_user_id {
                Some(actor_id) => {
                    Some(app.store.user_by_id(&actor_id).await.map_err(|_| unauthorized("Invalid token"))?)
                }
                None => None,
            };
            Ok(Principal::User(UserCaller {
                token_id: grant.id,
                kind: grant.kind,
                workspace,
                user,
                actor,
                expires_at: claims.exp,
            }))
        }
    }
}

/// A credential works only on its workspace's host.
fn check_host(parts: &Parts, workspace: &WorkspaceRow) -> ApiResult<()> {
    let presented = parts
        .headers
        .get(axum::http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| parts.uri.authority().map(|authority| authority.as_str()))
        .and_then(|raw| Host::parse(raw).ok());
    match presented {
        Some(host) if host.as_str() == workspace.host => Ok(()),
        Some(host) => Err(ApiError::Unauthorized(format!(
            "This credential has no access to workspace '{}' from host '{host}'",
            workspace.slug
        ))),
        None => Err(ApiError::Unauthorized(format!(
            "This credential has no access to workspace '{}' from this host",
            workspace.slug
        ))),
    }
}
