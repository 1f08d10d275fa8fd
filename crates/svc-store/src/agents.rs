//! Workspace catalog agents: the stored configurations a catalog start runs verbatim.

use sqlx::Row;
use sqlx::any::AnyRow;
use svc_wire::rest::AgentConfig;
use uuid::Uuid;

use crate::{Store, StoreError, StoreResult};

/// A stored agent. `config` is kept as the JSON text it was stored as: decoding it is the
/// session start's job, and a document that no longer decodes must surface as
/// `agent_config_unavailable` there, not as a listing failure here.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAgent {
    /// Agent id.
    pub id: String,
    /// Workspace.
    pub workspace_id: String,
    /// Handle, unique in the workspace.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Configuration JSON text.
    pub config_json: String,
    /// Creation time.
    pub created_us: i64,
    /// Last update time.
    pub updated_us: i64,
}

impl StoredAgent {
    /// Decodes the stored configuration.
    pub fn config(&self) -> StoreResult<AgentConfig> {
        serde_json::from_str(&self.config_json)
            .map_err(|error| StoreError::Corrupt(format!("agent `{}` config: {error}", self.name)))
    }
}

const AGENT_COLUMNS: &str = "id, workspace_id, name, description, config, created_us, updated_us";

fn agent_from_row(row: &AnyRow) -> StoreResult<StoredAgent> {
    Ok(StoredAgent {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        config_json: row.try_get("config")?,
        created_us: row.try_get("created_us")?,
        updated_us: row.try_get("updated_us")?,
    })
}

impl Store {
    /// Creates an agent; a taken handle is a [`StoreError::Conflict`].
    pub async fn create_agent(
        &self,
        workspace_id: &str,
        name: &str,
        description: Option<&str>,
        config: &AgentConfig,
        now_us: i64,
    ) -> StoreResult<StoredAgent> {
        let agent = StoredAgent {
            id: Uuid::new_v4().to_string(),
            workspace_id: workspace_id.to_owned(),
            name: name.to_owned(),
            description: description.map(str::to_owned),
            config_json: crate::to_json(config),
            created_us: now_us,
            updated_us: now_us,
        };
        sqlx::query(&format!("INSERT INTO agents ({AGENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
            .bind(&agent.id)
            .bind(&agent.workspace_id)
            .bind(&agent.name)
            .bind(&agent.description)
            .bind(&agent.config_json)
            .bind(now_us)
            .bind(now_us)
            .execute(&self.writer)
            .await
            .map_err(|error| match StoreError::from(error) {
                StoreError::Conflict(_) => StoreError::Conflict(format!("agent `{name}` already exists")),
                other => other,
            })?;
        Ok(agent)
    }

    /// The agent `name` of the workspace.
    pub async fn agent_by_name(&self, workspace_id: &str, name: &str) -> StoreResult<Option<StoredAgent>> {
        let row = sqlx::query(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = $1 AND name = $2"))
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(agent_from_row).transpose()
    }

    /// The workspace's agents, by name.
    pub async fn list_agents(&self, workspace_id: &str) -> StoreResult<Vec<StoredAgent>> {
        let rows = sqlx::query(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = $1 ORDER BY name"))
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(agent_from_row).collect()
    }

    /// Replaces an agent's description and configuration. False if there is no such agent.
    pub async fn update_agent(
        &self,
        workspace_id: &str,
        name: &str,
        description: Option<&str>,
        config: &AgentConfig,
        now_us: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE agents SET description = $1, config = $2, updated_us = $3 WHERE workspace_id = $4 AND name = $5",
        )
        .bind(description)
        .bind(crate::to_json(config))
        .bind(now_us)
        .bind(workspace_id)
        .bind(name)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes an agent. False if there was none.
    pub async fn delete_agent(&self, workspace_id: &str, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM agents WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
