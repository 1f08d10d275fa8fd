//! API keys, workspace users, and issued JWT grants (minted end-user tokens and user access
//! tokens). Secrets are never stored: API keys as SHA-256 digests, JWTs not at all (only the
//! grant a JWT's `jti` names, so it can be revoked).

use sqlx::Row;
use sqlx::any::AnyRow;
use svc_domain::ScopeSet;
use uuid::Uuid;

use crate::{Store, StoreError, StoreResult, WorkspaceRow};

/// An API key as stored (the secret itself is not).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyRecord {
    /// Key id (UUID), shown in listings and used to revoke.
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Non-secret lookup part of the key, indexed.
    pub lookup: String,
    /// Hex SHA-256 of the whole key.
    pub secret_hash: String,
    /// Scopes, fixed for life.
    pub scopes: ScopeSet,
    /// Optional label.
    pub label: Option<String>,
    /// Creation time.
    pub created_us: i64,
    /// Revocation time.
    pub revoked_us: Option<i64>,
}

/// A workspace user (the holder of user access tokens).
#[derive(Debug, Clone, PartialEq)]
pub struct UserRecord {
    /// User id (UUID).
    pub id: String,
    /// Workspace.
    pub workspace_id: String,
    /// Email, unique in the workspace.
    pub email: String,
    /// Roles.
    pub roles: Vec<String>,
    /// Capabilities.
    pub capabilities: Vec<String>,
    /// Creation time.
    pub created_us: i64,
}

/// What a JWT grant is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A minted end-user token (`POST /auth/token`).
    EndUser,
    /// A workspace user's access token (`/whoami`, `/agents`, `/sessions/import`).
    UserAccess,
    /// A token with which one user acts as another; never a realtime credential.
    ActsAsUser,
}

impl TokenKind {
    /// Storage and claim spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            TokenKind::EndUser => "end_user",
            TokenKind::UserAccess => "user_access",
            TokenKind::ActsAsUser => "acts_as_user",
        }
    }

    /// Parses the storage spelling.
    pub fn parse(text: &str) -> Option<TokenKind> {
        [TokenKind::EndUser, TokenKind::UserAccess, TokenKind::ActsAsUser]
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

/// A JWT grant as stored. Several JWTs may name one grant (see `end_user_grant`).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenRecord {
    /// Grant id: the JWT's `jti` and the revocation handle.
    pub id: String,
    /// Kind.
    pub kind: TokenKind,
    /// Workspace.
    pub workspace_id: String,
    /// The end-user project (end-user grants).
    pub project_id: Option<String>,
    /// The end user (end-user grants).
    pub external_user_id: Option<String>,
    /// The user authenticated (user grants).
    pub user_id: Option<String>,
    /// The acting user (acts-as-user grants).
    pub actor_user_id: Option<String>,
    /// Creation time.
    pub created_us: i64,
    /// Revocation time.
    pub revoked_us: Option<i64>,
}

/// A user grant to insert.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    /// Kind (not `EndUser`: those go through `end_user_grant`).
    pub kind: TokenKind,
    /// Workspace.
    pub workspace_id: &'a str,
    /// The user authenticated.
    pub user_id: &'a str,
    /// The acting user, for acts-as-user.
    pub actor_user_id: Option<&'a str>,
}

const KEY_COLUMNS: &str = "id, workspace_id, lookup, secret_hash, scopes, label, created_us, revoked_us";
const USER_COLUMNS: &str = "id, workspace_id, email, roles, capabilities, created_us";
const TOKEN_COLUMNS: &str =
    "id, kind, workspace_id, project_id, external_user_id, user_id, actor_user_id, created_us, revoked_us";

fn key_from_row(row: &AnyRow) -> StoreResult<ApiKeyRecord> {
    let scopes: String = row.try_get("scopes")?;
    Ok(ApiKeyRecord {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        lookup: row.try_get("lookup")?,
        secret_hash: row.try_get("secret_hash")?,
        scopes: ScopeSet::parse_list(&scopes)
            .map_err(|error| StoreError::Corrupt(format!("api_keys.scopes: {error}")))?,
        label: row.try_get("label")?,
        created_us: row.try_get("created_us")?,
        revoked_us: row.try_get("revoked_us")?,
    })
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

fn user_from_row(row: &AnyRow) -> StoreResult<UserRecord> {
    let roles: String = row.try_get("roles")?;
    let capabilities: String = row.try_get("capabilities")?;
    Ok(UserRecord {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        email: row.try_get("email")?,
        roles: words(&roles),
        capabilities: words(&capabilities),
        created_us: row.try_get("created_us")?,
    })
}

fn token_from_row(row: &AnyRow) -> StoreResult<TokenRecord> {
    let kind: String = row.try_get("kind")?;
    Ok(TokenRecord {
        id: row.try_get("id")?,
        kind: TokenKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("tokens.kind `{kind}`")))?,
        workspace_id: row.try_get("workspace_id")?,
        project_id: row.try_get("project_id")?,
        external_user_id: row.try_get("external_user_id")?,
        user_id: row.try_get("user_id")?,
        actor_user_id: row.try_get("actor_user_id")?,
        created_us: row.try_get("created_us")?,
        revoked_us: row.try_get("revoked_us")?,
    })
}

impl Store {
    /// Stores a new API key.
    pub async fn insert_api_key(&self, key: &ApiKeyRecord) -> StoreResult<()> {
        sqlx::query(&format!("INSERT INTO api_keys ({KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
            .bind(&key.id)
            .bind(&key.workspace_id)
            .bind(&key.lookup)
            .bind(&key.secret_hash)
            .bind(key.scopes.to_list())
            .bind(&key.label)
            .bind(key.created_us)
            .bind(key.revoked_us)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The key whose lookup part is `lookup`, revoked or not.
    pub async fn api_key_by_lookup(&self, lookup: &str) -> StoreResult<Option<ApiKeyRecord>> {
        let row = sqlx::query(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE lookup = $1"))
            .bind(lookup)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(key_from_row).transpose()
    }

    /// The key whose lookup part is `lookup`, with its workspace and that workspace's default
    /// project id: everything authentication needs, in one round trip.
    pub async fn api_key_for_auth(&self, lookup: &str) -> StoreResult<Option<(ApiKeyRecord, WorkspaceRow, String)>> {
        let row = sqlx::query(
            "SELECT k.id, k.workspace_id, k.lookup, k.secret_hash, k.scopes, k.label, k.created_us, k.revoked_us, \
             w.slug AS w_slug, w.name AS w_name, w.host AS w_host, w.settings AS w_settings, w.created_us AS w_created_us, \
             p.id AS project_id \
             FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id \
             JOIN projects p ON p.workspace_id = w.id AND p.kind = 'default' WHERE k.lookup = $1",
        )
        .bind(lookup)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let key = key_from_row(&row)?;
        let settings: String = row.try_get("w_settings")?;
        let workspace = WorkspaceRow {
            id: key.workspace_id.clone(),
            slug: row.try_get("w_slug")?,
            name: row.try_get("w_name")?,
            host: row.try_get("w_host")?,
            settings: crate::parse_json("workspaces.settings", &settings)?,
            created_us: row.try_get("w_created_us")?,
        };
        Ok(Some((key, workspace, row.try_get("project_id")?)))
    }

    /// A workspace's keys, oldest first.
    pub async fn list_api_keys(&self, workspace_id: &str) -> StoreResult<Vec<ApiKeyRecord>> {
        let rows =
            sqlx::query(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE workspace_id = $1 ORDER BY created_us, id"))
                .bind(workspace_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(key_from_row).collect()
    }

    /// Revokes a key of the workspace. Returns false if no such live key exists.
    pub async fn revoke_api_key(&self, workspace_id: &str, key_id: &str, now_us: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_us = $1 WHERE workspace_id = $2 AND id = $3 AND revoked_us IS NULL",
        )
        .bind(now_us)
        .bind(workspace_id)
        .bind(key_id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Creates a workspace user.
    pub async fn create_user(
        &self,
        workspace_id: &str,
        email: &str,
        roles: &[String],
        capabilities: &[String],
        now_us: i64,
    ) -> StoreResult<UserRecord> {
        let user = UserRecord {
            id: Uuid::new_v4().to_string(),
            workspace_id: workspace_id.to_owned(),
            email: email.to_owned(),
            roles: roles.to_vec(),
            capabilities: capabilities.to_vec(),
            created_us: now_us,
        };
        sqlx::query(&format!("INSERT INTO users ({USER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"))
            .bind(&user.id)
            .bind(&user.workspace_id)
            .bind(&user.email)
            .bind(user.roles.join(" "))
            .bind(user.capabilities.join(" "))
            .bind(now_us)
            .execute(&self.writer)
            .await
            .map_err(|error| match StoreError::from(error) {
                StoreError::Conflict(_) => StoreError::Conflict(format!("user `{email}` already exists")),
                other => other,
            })?;
        Ok(user)
    }

    /// The user with `email` in the workspace.
    pub async fn user_by_email(&self, workspace_id: &str, email: &str) -> StoreResult<UserRecord> {
        let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE workspace_id = $1 AND email = $2"))
            .bind(workspace_id)
            .bind(email)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("user `{email}`")))?;
        user_from_row(&row)
    }

    /// The user with `id`.
    pub async fn user_by_id(&self, id: &str) -> StoreResult<UserRecord> {
        let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("user {id}")))?;
        user_from_row(&row)
    }

    /// A workspace's users, by email.
    pub async fn list_users(&self, workspace_id: &str) -> StoreResult<Vec<UserRecord>> {
        let rows = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE workspace_id = $1 ORDER BY email"))
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(user_from_row).collect()
    }

    /// The live grant of an end user, created if there is none.
    ///
    /// This is what makes minting idempotent per (workspace, external_user_id): every mint for the
    /// pair names the same grant (`token_id`) until it is revoked. A partial unique index allows
    /// one live grant per pair, so concurrent first mints converge on one row.
    pub async fn end_user_grant(
        &self,
        workspace_id: &str,
        external_user_id: &str,
        project_id: &str,
        now_us: i64,
    ) -> StoreResult<TokenRecord> {
        let select = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE workspace_id = $1 AND external_user_id = $2 \
             AND kind = 'end_user' AND revoked_us IS NULL"
        );
        for _ in 0..3 {
            if let Some(row) =
                sqlx::query(&select).bind(workspace_id).bind(external_user_id).fetch_optional(&self.pool).await?
            {
                return token_from_row(&row);
            }
            sqlx::query(
                "INSERT INTO tokens (id, kind, workspace_id, project_id, external_user_id, created_us) \
                 VALUES ($1, 'end_user', $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            )
            .bind(Uuid::new_v4().to_string())
            .bind(workspace_id)
            .bind(project_id)
            .bind(external_user_id)
            .bind(now_us)
            .execute(&self.writer)
            .await?;
        }
        // Only reachable if the grant is revoked between our insert and our read three times over.
        Err(StoreError::Conflict(format!("end-user grant for `{external_user_id}` kept being revoked")))
    }

    /// Stores a user grant.
    pub async fn insert_user_token(&self, token: &NewToken<'_>, now_us: i64) -> StoreResult<TokenRecord> {
        let id = Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO tokens (id, kind, workspace_id, user_id, actor_user_id, created_us) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(token.kind.as_str())
        .bind(token.workspace_id)
        .bind(token.user_id)
        .bind(token.actor_user_id)
        .bind(now_us)
        .execute(&self.writer)
        .await?;
        self.token_by_id(&id).await?.ok_or_else(|| StoreError::NotFound(format!("token {id}")))
    }

    /// The grant with `id`.
    pub async fn token_by_id(&self, id: &str) -> StoreResult<Option<TokenRecord>> {
        let row = sqlx::query(&format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(token_from_row).transpose()
    }

    /// Revokes a grant of the workspace of the given kind. False if there is no such live grant.
    pub async fn revoke_token(&self, workspace_id: &str, id: &str, kind: TokenKind, now_us: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tokens SET revoked_us = $1 WHERE workspace_id = $2 AND id = $3 AND kind = $4 AND revoked_us IS NULL",
        )
        .bind(now_us)
        .bind(workspace_id)
        .bind(id)
        .bind(kind.as_str())
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
