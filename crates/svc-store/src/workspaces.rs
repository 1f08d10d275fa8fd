//! Workspaces, their settings, phone number lists, and projects.

use sqlx::Row;
use sqlx::any::AnyRow;
use svc_domain::WorkspaceSettings;
use uuid::Uuid;

use crate::{Store, StoreError, StoreResult, flag, parse_json, to_json};

/// A workspace as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceRow {
    /// Id (UUID).
    pub id: String,
    /// Unique slug.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Normalized host its credentials are bound to.
    pub host: String,
    /// Settings document.
    pub settings: WorkspaceSettings,
    /// Creation time.
    pub created_us: i64,
}

/// A project: the scope of session history.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectRow {
    /// Id (UUID).
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// `default` or `end_user`.
    pub kind: String,
    /// The end user of an `end_user` project.
    pub external_user_id: Option<String>,
    /// Display name.
    pub name: String,
    /// Creation time.
    pub created_us: i64,
}

/// One number of a workspace's caller-number pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerNumber {
    /// E.164 number.
    pub number: String,
    /// Whether the number is ACTIVE (usable as `caller_number`).
    pub active: bool,
}

const WORKSPACE_COLUMNS: &str = "id, slug, name, host, settings, created_us";
const PROJECT_COLUMNS: &str = "id, workspace_id, kind, external_user_id, name, created_us";

fn workspace_from_row(row: &AnyRow) -> StoreResult<WorkspaceRow> {
    let settings: String = row.try_get("settings")?;
    Ok(WorkspaceRow {
        id: row.try_get("id")?,
        slug: row.try_get("slug")?,
        name: row.try_get("name")?,
        host: row.try_get("host")?,
        settings: parse_json("workspaces.settings", &settings)?,
        created_us: row.try_get("created_us")?,
    })
}

fn project_from_row(row: &AnyRow) -> StoreResult<ProjectRow> {
    Ok(ProjectRow {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        kind: row.try_get("kind")?,
        external_user_id: row.try_get("external_user_id")?,
        name: row.try_get("name")?,
        created_us: row.try_get("created_us")?,
    })
}

impl Store {
    /// Creates a workspace with default settings and its default project, atomically.
    pub async fn create_workspace(&self, slug: &str, name: &str, host: &str, now_us: i64) -> StoreResult<WorkspaceRow> {
        let row = WorkspaceRow {
            id: Uuid::new_v4().to_string(),
            slug: slug.to_owned(),
            name: name.to_owned(),
            host: host.to_owned(),
            settings: WorkspaceSettings::default(),
            created_us: now_us,
        };
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT INTO workspaces (id, slug, name, host, settings, created_us) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&row.id)
        .bind(&row.slug)
        .bind(&row.name)
        .bind(&row.host)
        .bind(to_json(&row.settings))
        .bind(now_us)
        .execute(&mut *tx)
        .await
        .map_err(|error| match StoreError::from(error) {
            StoreError::Conflict(_) => StoreError::Conflict(format!("workspace slug `{slug}` is taken")),
            other => other,
        })?;
        sqlx::query(
            "INSERT INTO projects (id, workspace_id, kind, external_user_id, name, created_us) VALUES ($1, $2, 'default', NULL, $3, $4)",
        )
        .bind(Uuid::new_v4().to_string())
        .bind(&row.id)
        .bind(format!("{name} (default)"))
        .bind(now_us)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// The workspace with `slug`.
    pub async fn workspace_by_slug(&self, slug: &str) -> StoreResult<WorkspaceRow> {
        let row = sqlx::query(&format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE slug = $1"))
            .bind(slug)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("workspace `{slug}`")))?;
        workspace_from_row(&row)
    }

    /// The workspace with `id`.
    pub async fn workspace_by_id(&self, id: &str) -> StoreResult<WorkspaceRow> {
        let row = sqlx::query(&format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("workspace {id}")))?;
        workspace_from_row(&row)
    }

    /// Every workspace, by slug.
    pub async fn list_workspaces(&self) -> StoreResult<Vec<WorkspaceRow>> {
        let rows = sqlx::query(&format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces ORDER BY slug"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(workspace_from_row).collect()
    }

    /// Replaces a workspace's settings document and, if given, its host.
    pub async fn update_workspace(
        &self,
        id: &str,
        settings: &WorkspaceSettings,
        host: Option<&str>,
    ) -> StoreResult<()> {
        let done = sqlx::query("UPDATE workspaces SET settings = $1, host = COALESCE($2, host) WHERE id = $3")
            .bind(to_json(settings))
            .bind(host)
            .bind(id)
            .execute(&self.writer)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("workspace {id}")));
        }
        Ok(())
    }

    /// Adds or updates a caller number.
    pub async fn upsert_caller_number(&self, workspace_id: &str, number: &str, active: bool) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM caller_numbers WHERE workspace_id = $1 AND number = $2")
            .bind(workspace_id)
            .bind(number)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO caller_numbers (workspace_id, number, active) VALUES ($1, $2, $3)")
            .bind(workspace_id)
            .bind(number)
            .bind(i64::from(active))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes a caller number; true if it was there.
    pub async fn remove_caller_number(&self, workspace_id: &str, number: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM caller_numbers WHERE workspace_id = $1 AND number = $2")
            .bind(workspace_id)
            .bind(number)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The workspace's caller-number pool, by number.
    pub async fn caller_numbers(&self, workspace_id: &str) -> StoreResult<Vec<CallerNumber>> {
        let rows = sqlx::query("SELECT number, active FROM caller_numbers WHERE workspace_id = $1 ORDER BY number")
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| Ok(CallerNumber { number: row.try_get("number")?, active: flag(row.try_get("active")?) }))
            .collect()
    }

    /// Adds a number to the do-not-call list (idempotent).
    pub async fn add_do_not_call(&self, workspace_id: &str, number: &str) -> StoreResult<()> {
        sqlx::query("INSERT INTO do_not_call (workspace_id, number) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(workspace_id)
            .bind(number)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Removes a number from the do-not-call list; true if it was there.
    pub async fn remove_do_not_call(&self, workspace_id: &str, number: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM do_not_call WHERE workspace_id = $1 AND number = $2")
            .bind(workspace_id)
            .bind(number)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The do-not-call list, by number.
    pub async fn do_not_call(&self, workspace_id: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar("SELECT number FROM do_not_call WHERE workspace_id = $1 ORDER BY number")
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await?)
    }

    /// The workspace's default project (created with the workspace).
    pub async fn default_project(&self, workspace_id: &str) -> StoreResult<ProjectRow> {
        let row = sqlx::query(&format!(
            "SELECT {PROJECT_COLUMNS} FROM projects WHERE workspace_id = $1 AND kind = 'default'"
        ))
        .bind(workspace_id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("default project of workspace {workspace_id}")))?;
        project_from_row(&row)
    }

    /// The project provisioned for an end user, created on first use. Race-safe: concurrent
    /// callers for the same end user all get the one project.
    pub async fn end_user_project(
        &self,
        workspace_id: &str,
        external_user_id: &str,
        now_us: i64,
    ) -> StoreResult<ProjectRow> {
        let select = format!(
            "SELECT {PROJECT_COLUMNS} FROM projects WHERE workspace_id = $1 AND kind = 'end_user' AND external_user_id = $2"
        );
        if let Some(row) =
            sqlx::query(&select).bind(workspace_id).bind(external_user_id).fetch_optional(&self.pool).await?
        {
            return project_from_row(&row);
        }
        sqlx::query(
            "INSERT INTO projects (id, workspace_id, kind, external_user_id, name, created_us) \
             VALUES ($1, $2, 'end_user', $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(Uuid::new_v4().to_string())
        .bind(workspace_id)
        .bind(external_user_id)
        .bind(format!("end user {external_user_id}"))
        .bind(now_us)
        .execute(&self.writer)
        .await?;
        let row = sqlx::query(&select).bind(workspace_id).bind(external_user_id).fetch_one(&self.pool).await?;
        project_from_row(&row)
    }

    /// The project with `id`.
    pub async fn project_by_id(&self, id: &str) -> StoreResult<ProjectRow> {
        let row = sqlx::query(&format!("SELECT {PROJECT_COLUMNS} FROM projects WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("project {id}")))?;
        project_from_row(&row)
    }
}
