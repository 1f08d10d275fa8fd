//! Support requests filed through `POST /support/requests`.

use uuid::Uuid;

use crate::{Store, StoreResult};

/// A support request to store.
#[derive(Debug, Clone)]
pub struct NewSupportRequest<'a> {
    /// Workspace.
    pub workspace_id: &'a str,
    /// Project of the filing credential.
    pub project_id: &'a str,
    /// Session it concerns (already checked to be in the project).
    pub session_id: Option<&'a str>,
    /// Which credential filed it (`api_key:<id>` or `user_token:<id>`).
    pub credential: &'a str,
    /// Subject.
    pub subject: Option<&'a str>,
    /// Message.
    pub message: &'a str,
    /// Contact address.
    pub contact_email: Option<&'a str>,
    /// Client diagnostics.
    pub diagnostics: Option<&'a serde_json::Value>,
}

impl Store {
    /// Stores a support request with status `open`; returns its id.
    pub async fn insert_support_request(&self, request: &NewSupportRequest<'_>, now_us: i64) -> StoreResult<String> {
        let id = Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO support_requests (id, workspace_id, project_id, session_id, credential, subject, message, \
             contact_email, diagnostics, status, created_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'open', $10)",
        )
        .bind(&id)
        .bind(request.workspace_id)
        .bind(request.project_id)
        .bind(request.session_id)
        .bind(request.credential)
        .bind(request.subject)
        .bind(request.message)
        .bind(request.contact_email)
        .bind(request.diagnostics.map(crate::to_json))
        .bind(now_us)
        .execute(&self.writer)
        .await?;
        Ok(id)
    }

    /// Number of support requests of a workspace (for operators and tests).
    pub async fn count_support_requests(&self, workspace_id: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM support_requests WHERE workspace_id = $1")
            .bind(workspace_id)
            .fetch_one(&self.pool)
            .await?)
    }
}
