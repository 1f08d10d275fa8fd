//! Issuing credentials: API keys, minted end-user tokens, and user access tokens. The admin CLI,
//! the mint route and the tests all issue through these functions, so there is one definition
//! of what a credential contains.

use svc_domain::ScopeSet;
use svc_domain::requests::MintTokenParams;
use svc_store::{ApiKeyRecord, NewToken, Store, StoreResult, TokenKind, UserRecord};
use svc_wire::rest::MintedToken;

use super::api_key;
use super::jwt::{AUDIENCE, Claims, ISSUER};
use crate::app::{App, now_us};

/// Creates and stores an API key; returns the record and the secret (shown once).
pub async fn create_api_key(
    store: &Store,
    workspace_id: &str,
    scopes: ScopeSet,
    label: Option<String>,
) -> StoreResult<(ApiKeyRecord, String)> {
    let generated = api_key::generate();
    let record = ApiKeyRecord {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: workspace_id.to_owned(),
        lookup: generated.lookup,
        secret_hash: generated.hash,
        scopes,
        label,
        created_us: now_us(),
        revoked_us: None,
    };
    store.insert_api_key(&record).await?;
    Ok((record, generated.secret))
}

/// Mints an end-user JWT under the end user's one live grant (see `Store::end_user_grant`).
pub async fn mint_end_user_token(
    app: &App,
    workspace_id: &str,
    params: &MintTokenParams,
) -> anyhow::Result<MintedToken> {
    let now = now_us();
    let project = app.store.end_user_project(workspace_id, &params.external_user_id, now).await?;
    let grant = app.store.end_user_grant(workspace_id, &params.external_user_id, &project.id, now).await?;
    let issued_at = now / 1_000_000;
    let expires_at = issued_at + params.ttl_seconds;
    let claims = Claims {
        iss: ISSUER.to_owned(),
        aud: AUDIENCE.to_owned(),
        sub: params.external_user_id.clone(),
        exp: expires_at,
        iat: issued_at,
        jti: grant.id.clone(),
        kind: TokenKind::EndUser.as_str().to_owned(),
        ws: workspace_id.to_owned(),
        prj: Some(project.id),
        scope: Some(params.scopes.to_list()),
        act: None,
    };
    Ok(MintedToken { jwt: app.jwt.sign(&claims)?, expires_at, token_id: grant.id })
}

/// A user access token as issued.
#[derive(Debug, Clone)]
pub struct IssuedUserToken {
    /// The JWT.
    pub token: String,
    /// Grant id.
    pub token_id: String,
    /// Expiry, epoch seconds.
    pub expires_at: i64,
    /// `UserAccess` or `ActsAsUser`.
    pub kind: TokenKind,
}

/// Issues a user access token for `user`, or, with `actor`, an acts-as-user token with which
/// `actor` acts as `user`.
pub async fn issue_user_token(
    app: &App,
    user: &UserRecord,
    actor: Option<&UserRecord>,
    ttl_seconds: i64,
) -> anyhow::Result<IssuedUserToken> {
    let kind = if actor.is_some() { TokenKind::ActsAsUser } else { TokenKind::UserAccess };
    let grant = app
        .store
        .insert_user_token(
            &NewToken {
                kind,
                workspace_id: &user.workspace_id,
                user_id: &user.id,
                actor_user_id: actor.map(|a| a.id.as_str()),
            },
            now_us(),
        )
        .await?;
    let issued_at = now_us() / 1_000_000;
    let expires_at = issued_at + ttl_seconds;
    let claims = Claims {
        iss: ISSUER.to_owned(),
        aud: AUDIENCE.to_owned(),
        sub: user.id.clone(),
        exp: expires_at,
        iat: issued_at,
        jti: grant.id.clone(),
        kind: kind.as_str().to_owned(),
        ws: user.workspace_id.clone(),
        prj: None,
        scope: None,
        act: actor.map(|a| a.id.clone()),
    };
    Ok(IssuedUserToken { token: app.jwt.sign(&claims)?, token_id: grant.id, expires_at, kind })
}
