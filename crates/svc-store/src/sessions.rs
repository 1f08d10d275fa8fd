//! Sessions and what hangs off them: transcript turns, timeline events, usage, artifacts.
//!
//! Every read is project-scoped in SQL: a session of another project is simply not found.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};
use svc_wire::rest::UsageTokens;

use crate::{Store, StoreResult, flag, parse_json, to_json};

/// Rows per multi-row INSERT: well under both backends' bind-parameter limits.
const INSERT_BATCH_ROWS: usize = 500;

/// A session to insert.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    /// Session id (UUID).
    pub id: &'a str,
    /// Workspace.
    pub workspace_id: &'a str,
    /// Project whose history holds it.
    pub project_id: &'a str,
    /// `live` or `import`.
    pub source: &'a str,
    /// `active`, `completed` or `error`.
    pub status: &'a str,
    /// `pending`, `recorded` or `unavailable`.
    pub usage_status: &'a str,
    /// Start time.
    pub started_us: i64,
    /// End time, if ended.
    pub ended_us: Option<i64>,
    /// Provider alias.
    pub provider: Option<&'a str>,
    /// Model id.
    pub model: Option<&'a str>,
    /// Title (imports).
    pub title: Option<&'a str>,
    /// Media room name (live sessions).
    pub room_name: Option<&'a str>,
    /// Resolved configuration, as JSON.
    pub config: Option<&'a serde_json::Value>,
    /// Insertion time.
    pub now_us: i64,
}

/// A session as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// Session id.
    pub id: String,
    /// Workspace.
    pub workspace_id: String,
    /// Project.
    pub project_id: String,
    /// `live` or `import`.
    pub source: String,
    /// Status slug.
    pub status: String,
    /// Usage status slug.
    pub usage_status: String,
    /// Start time.
    pub started_us: i64,
    /// End time.
    pub ended_us: Option<i64>,
    /// Provider alias.
    pub provider: Option<String>,
    /// Model id.
    pub model: Option<String>,
    /// Title.
    pub title: Option<String>,
    /// Media room name.
    pub room_name: Option<String>,
    /// Whether a native resumption handle is held.
    pub has_resumption_handle: bool,
    /// Model-response turns (once recorded).
    pub turn_count: Option<i64>,
    /// User talk time (once recorded).
    pub user_speaking_ms: Option<i64>,
    /// Agent talk time (once recorded).
    pub agent_speaking_ms: Option<i64>,
    /// Token counters (once recorded, if the provider reports any).
    pub tokens: Option<UsageTokens>,
    /// The node that runs (or ran) it, once one took it.
    pub node_id: Option<String>,
}

/// Final usage numbers of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRecord {
    /// Model-response turns.
    pub turn_count: i64,
    /// User talk time.
    pub user_speaking_ms: i64,
    /// Agent talk time.
    pub agent_speaking_ms: i64,
    /// Token counters; `None` when the provider reports none.
    pub tokens: Option<UsageTokens>,
}

/// A transcript turn to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTurn {
    /// Time of the turn.
    pub ts_us: i64,
    /// `user` or `assistant`.
    pub role: &'static str,
    /// Text.
    pub text: String,
}

/// A stored transcript turn.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTurn {
    /// Position in the transcript.
    pub seq: i64,
    /// Time of the turn.
    pub ts_us: i64,
    /// `user` or `assistant`.
    pub role: String,
    /// Text.
    pub text: String,
}

/// A timeline event to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTimelineEvent {
    /// Time of the event.
    pub ts_us: i64,
    /// Type slug.
    pub kind: String,
    /// Details.
    pub data: serde_json::Value,
}

/// A stored timeline event.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    /// Position, gap-free from 0.
    pub seq: i64,
    /// Time.
    pub ts_us: i64,
    /// Type slug.
    pub kind: String,
    /// Details.
    pub data: serde_json::Value,
}

/// A stored file belonging to a session (a recording).
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactRecord {
    /// `audio` (WAV recording), …
    pub kind: String,
    /// Path on disk, relative to the data directory.
    pub path: String,
    /// MIME type.
    pub content_type: String,
    /// Size in bytes.
    pub bytes: i64,
}

/// Outcome of [`Store::insert_session_within_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The session was inserted.
    Admitted,
    /// The workspace already had `active` live sessions; nothing was inserted.
    LimitReached {
        /// Live sessions at the time of the check.
        active: i64,
    },
}

/// Which page of a project's sessions to list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionFilter<'a> {
    /// The project.
    pub project_id: &'a str,
    /// Only sessions that started strictly before this time.
    pub before_us: Option<i64>,
    /// Page size.
    pub limit: u32,
}

const SESSION_COLUMNS: &str = "id, workspace_id, project_id, source, status, usage_status, started_us, ended_us, \
    provider, model, title, room_name, has_resumption_handle, turn_count, user_speaking_ms, agent_speaking_ms, tokens, node_id";

fn session_from_row(row: &AnyRow) -> StoreResult<SessionRow> {
    let tokens: Option<String> = row.try_get("tokens")?;
    Ok(SessionRow {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        project_id: row.try_get("project_id")?,
        source: row.try_get("source")?,
        status: row.try_get("status")?,
        usage_status: row.try_get("usage_status")?,
        started_us: row.try_get("started_us")?,
        ended_us: row.try_get("ended_us")?,
        provider: row.try_get("provider")?,
        model: row.try_get("model")?,
        title: row.try_get("title")?,
        room_name: row.try_get("room_name")?,
        has_resumption_handle: flag(row.try_get("has_resumption_handle")?),
        turn_count: row.try_get("turn_count")?,
        user_speaking_ms: row.try_get("user_speaking_ms")?,
        agent_speaking_ms: row.try_get("agent_speaking_ms")?,
        tokens: tokens.map(|text| parse_json("sessions.tokens", &text)).transpose()?,
        node_id: row.try_get("node_id")?,
    })
}

impl Store {
    /// Inserts a session.
    pub async fn insert_session(&self, session: &NewSession<'_>) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        insert_session_in(&mut tx, session).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Inserts a finished session with its transcript, timeline and artifact in one transaction:
    /// either all of it is stored or none of it.
    pub async fn insert_imported_session(
        &self,
        session: &NewSession<'_>,
        turns: &[NewTurn],
        events: &[NewTimelineEvent],
        artifact: Option<&ArtifactRecord>,
    ) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        insert_session_in(&mut tx, session).await?;
        insert_turns_in(&mut tx, session.id, 0, turns).await?;
        insert_events_in(&mut tx, session.id, 0, events).await?;
        if let Some(artifact) = artifact {
            upsert_artifact_in(&mut tx, session.id, artifact, session.now_us).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The session `id` if it is in `project_id`.
    pub async fn session_in_project(&self, project_id: &str, id: &str) -> StoreResult<Option<SessionRow>> {
        let row = sqlx::query(&format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE project_id = $1 AND id = $2"))
            .bind(project_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(session_from_row).transpose()
    }

    /// The session `id`, whatever its project (for the node that runs it).
    pub async fn session(&self, id: &str) -> StoreResult<Option<SessionRow>> {
        let row = sqlx::query(&format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(session_from_row).transpose()
    }

    /// One page of a project's sessions, newest first (`started_us` descending, then id).
    ///
    /// Paging is by `before_us` alone, strictly-before, so a page never ends in the middle of a
    /// group of sessions that share a start time: such a trailing group is left for the next
    /// page. Only when one group is larger than a whole page is the page returned over-long
    /// (every member of the group), so that no session is ever skipped.
    pub async fn list_sessions(&self, filter: SessionFilter<'_>) -> StoreResult<Vec<SessionRow>> {
        let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
        let rows = self.session_page(filter.project_id, filter.before_us, limit.saturating_add(1)).await?;
        if rows.len() <= limit {
            return Ok(rows);
        }
        let boundary = rows[limit].started_us;
        if rows[limit - 1].started_us != boundary {
            let mut rows = rows;
            rows.truncate(limit);
            return Ok(rows);
        }
        let kept: Vec<SessionRow> = rows.into_iter().take(limit).filter(|row| row.started_us != boundary).collect();
        if !kept.is_empty() {
            return Ok(kept);
        }
        // The whole page is one tie group: return all of it.
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE project_id = $1 AND started_us = $2 ORDER BY id DESC"
        );
        let rows = sqlx::query(&sql).bind(filter.project_id).bind(boundary).fetch_all(&self.pool).await?;
        rows.iter().map(session_from_row).collect()
    }

    async fn session_page(
        &self,
        project_id: &str,
        before_us: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<SessionRow>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE project_id = $1 AND started_us < $2 \
             ORDER BY started_us DESC, id DESC LIMIT {limit}"
        );
        let rows = sqlx::query(&sql).bind(project_id).bind(before_us.unwrap_or(i64::MAX)).fetch_all(&self.pool).await?;
        rows.iter().map(session_from_row).collect()
    }

    /// Inserts a live session only if the workspace has fewer than `limit` live sessions.
    ///
    /// Atomic under concurrency on both backends: SQLite runs the count and the insert as one
    /// statement (SQLite serializes writers), Postgres takes a row lock on the workspace first, so
    /// N simultaneous starts against a limit of L admit exactly L.
    ///
    /// `events` open the session's timeline in the same transaction.
    pub async fn insert_session_within_limit(
        &self,
        session: &NewSession<'_>,
        limit: Option<u32>,
        events: &[NewTimelineEvent],
    ) -> StoreResult<Admission> {
        let mut tx = self.writer.begin().await?;
        let inserted = match (self.backend, limit) {
            (_, None) => {
                insert_session_in(&mut tx, session).await?;
                true
            }
            (crate::Backend::Postgres, Some(limit)) => {
                sqlx::query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE")
                    .bind(session.workspace_id)
                    .execute(&mut *tx)
                    .await?;
                let active = count_live_in(&mut tx, session.workspace_id).await?;
                if active < i64::from(limit) {
                    insert_session_in(&mut tx, session).await?;
                    true
                } else {
                    false
                }
            }
            (crate::Backend::Sqlite, Some(limit)) => {
                let statement = sqlx::query(
                    "INSERT INTO sessions (id, workspace_id, project_id, source, status, usage_status, started_us, \
                     ended_us, provider, model, title, room_name, config, created_us, heartbeat_us) \
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14 \
                     WHERE (SELECT COUNT(*) FROM sessions WHERE workspace_id = $2 AND status = 'active') < $15",
                );
                let done = bind_new_session(statement, session).bind(i64::from(limit)).execute(&mut *tx).await?;
                done.rows_affected() == 1
            }
        };
        let outcome = if inserted {
            insert_events_in(&mut tx, session.id, 0, events).await?;
            Admission::Admitted
        } else {
            Admission::LimitReached { active: count_live_in(&mut tx, session.workspace_id).await? }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// Seconds of voice used by a workspace's ended live sessions that started at or after
    /// `since_us` (all time when `None`). Imports do not count.
    pub async fn voice_seconds_used(&self, workspace_id: &str, since_us: Option<i64>) -> StoreResult<f64> {
        let total_us: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(SUM(ended_us - started_us) AS BIGINT) FROM sessions \
             WHERE workspace_id = $1 AND source = 'live' AND ended_us IS NOT NULL AND started_us >= $2",
        )
        .bind(workspace_id)
        .bind(since_us.unwrap_or(i64::MIN))
        .fetch_one(&self.pool)
        .await?;
        Ok(total_us.unwrap_or(0).max(0) as f64 / 1_000_000.0)
    }

    /// The stored resolved configuration of a session, as JSON.
    pub async fn session_config(&self, id: &str) -> StoreResult<Option<serde_json::Value>> {
        let text: Option<Option<String>> =
            sqlx::query_scalar("SELECT config FROM sessions WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        text.flatten().map(|text| parse_json("sessions.config", &text)).transpose()
    }

    /// Number of live sessions of a workspace.
    pub async fn count_live_sessions(&self, workspace_id: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE workspace_id = $1 AND status = 'active'")
            .bind(workspace_id)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Refreshes a live session's heartbeat and, given `usage`, its usage so far: what a node
    /// that takes the session over carries on from (the API shows usage once it is recorded at
    /// the end, not before). False if the session is no longer live.
    pub async fn touch_session(&self, id: &str, now_us: i64, usage: Option<&UsageRecord>) -> StoreResult<bool> {
        let done = match usage {
            None => {
                sqlx::query("UPDATE sessions SET heartbeat_us = $1 WHERE id = $2 AND status = 'active'")
                    .bind(now_us)
                    .bind(id)
                    .execute(&self.writer)
                    .await?
            }
            Some(usage) => {
                sqlx::query(
                    "UPDATE sessions SET heartbeat_us = $1, turn_count = $2, user_speaking_ms = $3, \
                     agent_speaking_ms = $4, tokens = $5 WHERE id = $6 AND status = 'active'",
                )
                .bind(now_us)
                .bind(usage.turn_count)
                .bind(usage.user_speaking_ms)
                .bind(usage.agent_speaking_ms)
                .bind(usage.tokens.as_ref().map(to_json))
                .bind(id)
                .execute(&self.writer)
                .await?
            }
        };
        Ok(done.rows_affected() > 0)
    }

    /// Ends every live session whose last heartbeat (or start, if it never had one) is older
    /// than `stale_before_us`, as `error` with usage `unavailable`. Returns their ids.
    pub async fn reap_stale_sessions(&self, stale_before_us: i64, now_us: i64) -> StoreResult<Vec<String>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM sessions WHERE status = 'active' AND COALESCE(heartbeat_us, started_us) < $1",
        )
        .bind(stale_before_us)
        .fetch_all(&self.pool)
        .await?;
        // Re-checked per row: a heartbeat that lands meanwhile keeps its session alive.
        let still_stale = format!("COALESCE(heartbeat_us, started_us) < {stale_before_us}");
        self.end_as_error(ids, &still_stale, "heartbeat_lost", now_us).await
    }

    /// Ends the live sessions a previous run of this node left behind (it was killed while they
    /// ran), as `error` with usage `unavailable`: those of `node_id`, or every live session when
    /// `node_id` is `None` (a SQLite database has exactly one serving node). Returns their ids.
    pub async fn end_orphaned_sessions(&self, node_id: Option<&str>, now_us: i64) -> StoreResult<Vec<String>> {
        let ids: Vec<String> = match node_id {
            Some(node) => {
                sqlx::query_scalar("SELECT id FROM sessions WHERE status = 'active' AND node_id = $1")
                    .bind(node)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => sqlx::query_scalar("SELECT id FROM sessions WHERE status = 'active'").fetch_all(&self.pool).await?,
        };
        self.end_as_error(ids, "1 = 1", "server_restarted", now_us).await
    }

    async fn end_as_error(
        &self,
        ids: Vec<String>,
        still_applies: &str,
        reason: &str,
        now_us: i64,
    ) -> StoreResult<Vec<String>> {
        let mut ended = Vec::with_capacity(ids.len());
        for id in ids {
            let mut tx = self.writer.begin().await?;
            let done = sqlx::query(&format!(
                "UPDATE sessions SET status = 'error', ended_us = $1, usage_status = 'unavailable' \
                 WHERE id = $2 AND status = 'active' AND {still_applies}"
            ))
            .bind(now_us)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() > 0 {
                let next: i64 =
                    sqlx::query_scalar("SELECT COALESCE(MAX(seq) + 1, 0) FROM timeline_events WHERE session_id = $1")
                        .bind(&id)
                        .fetch_one(&mut *tx)
                        .await?;
                let event = NewTimelineEvent {
                    ts_us: now_us,
                    kind: "session.ended".to_owned(),
                    data: serde_json::json!({"reason": reason, "status": "error"}),
                };
                insert_events_in(&mut tx, &id, next, std::slice::from_ref(&event)).await?;
                tx.commit().await?;
                ended.push(id);
            }
        }
        Ok(ended)
    }

    /// Marks a live session as run by `node_id` and refreshes its heartbeat. False if it is no
    /// longer live.
    pub async fn claim_session(&self, id: &str, node_id: &str, now_us: i64) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE sessions SET node_id = $1, heartbeat_us = $2 WHERE id = $3 AND status = 'active'")
                .bind(node_id)
                .bind(now_us)
                .bind(id)
                .execute(&self.writer)
                .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Records the provider's latest resumption handle (or its absence).
    pub async fn set_resumption_handle(&self, id: &str, handle: Option<&str>, now_us: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE sessions SET resumption_handle = $1, resumption_handle_us = $2, has_resumption_handle = $3 \
             WHERE id = $4",
        )
        .bind(handle)
        .bind(handle.map(|_| now_us))
        .bind(i64::from(handle.is_some()))
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The session's last resumption handle and when it was issued.
    pub async fn resumption_handle(&self, id: &str) -> StoreResult<Option<(String, i64)>> {
        let row = sqlx::query("SELECT resumption_handle, resumption_handle_us FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let handle: Option<String> = row.try_get("resumption_handle")?;
        let at: Option<i64> = row.try_get("resumption_handle_us")?;
        Ok(handle.zip(at))
    }

    /// Number of live sessions across all workspaces (for metrics).
    pub async fn count_all_live_sessions(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE status = 'active'").fetch_one(&self.pool).await?)
    }

    /// Ends a live session with its final status and, if known, its usage.
    pub async fn finish_session(
        &self,
        id: &str,
        status: &str,
        ended_us: i64,
        usage: Option<&UsageRecord>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE sessions SET status = $1, ended_us = $2, usage_status = $3, turn_count = $4, \
             user_speaking_ms = $5, agent_speaking_ms = $6, tokens = $7 WHERE id = $8 AND status = 'active'",
        )
        .bind(status)
        .bind(ended_us)
        .bind(if usage.is_some() { "recorded" } else { "unavailable" })
        .bind(usage.map(|u| u.turn_count))
        .bind(usage.map(|u| u.user_speaking_ms))
        .bind(usage.map(|u| u.agent_speaking_ms))
        .bind(usage.and_then(|u| u.tokens.as_ref()).map(to_json))
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Appends transcript turns after those already stored.
    pub async fn append_turns(&self, session_id: &str, turns: &[NewTurn]) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        append_turns_in(&mut tx, session_id, turns).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Stores batch number `batch` of a running session's writer — transcript turns and timeline
    /// events, each appended after those already stored — exactly once: a batch whose number is
    /// already stored (a retry after the answer to its commit was lost) stores nothing and
    /// answers `false`. One transaction, so a batch lands whole or not at all.
    pub async fn append_session_batch(
        &self,
        session_id: &str,
        batch: i64,
        turns: &[NewTurn],
        events: &[NewTimelineEvent],
    ) -> StoreResult<bool> {
        let mut tx = self.writer.begin().await?;
        let marked =
            sqlx::query("INSERT INTO session_writes (session_id, batch) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(session_id)
                .bind(batch)
                .execute(&mut *tx)
                .await?;
        if marked.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        if !turns.is_empty() {
            append_turns_in(&mut tx, session_id, turns).await?;
        }
        if !events.is_empty() {
            append_events_in(&mut tx, session_id, events).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// A session's transcript in order.
    pub async fn transcript(&self, session_id: &str) -> StoreResult<Vec<StoredTurn>> {
        let rows =
            sqlx::query("SELECT seq, ts_us, role, text FROM transcript_turns WHERE session_id = $1 ORDER BY seq")
                .bind(session_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|row| {
                Ok(StoredTurn {
                    seq: row.try_get("seq")?,
                    ts_us: row.try_get("ts_us")?,
                    role: row.try_get("role")?,
                    text: row.try_get("text")?,
                })
            })
            .collect()
    }

    /// Appends timeline events after those already stored.
    pub async fn append_timeline(&self, session_id: &str, events: &[NewTimelineEvent]) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        append_events_in(&mut tx, session_id, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A session's timeline in order.
    pub async fn timeline(&self, session_id: &str) -> StoreResult<Vec<TimelineRow>> {
        let rows = sqlx::query("SELECT seq, ts_us, kind, data FROM timeline_events WHERE session_id = $1 ORDER BY seq")
            .bind(session_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let data: String = row.try_get("data")?;
                Ok(TimelineRow {
                    seq: row.try_get("seq")?,
                    ts_us: row.try_get("ts_us")?,
                    kind: row.try_get("kind")?,
                    data: parse_json("timeline_events.data", &data)?,
                })
            })
            .collect()
    }

    /// Records (or replaces) a session artifact.
    pub async fn upsert_artifact(&self, session_id: &str, artifact: &ArtifactRecord, now_us: i64) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        upsert_artifact_in(&mut tx, session_id, artifact, now_us).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A session's artifact of `kind`.
    pub async fn artifact(&self, session_id: &str, kind: &str) -> StoreResult<Option<ArtifactRecord>> {
        let row = sqlx::query(
            "SELECT kind, path, content_type, bytes FROM session_artifacts WHERE session_id = $1 AND kind = $2",
        )
        .bind(session_id)
        .bind(kind)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(artifact_from_row).transpose()
    }

    /// Deletes a session of the project with everything that hangs off it. Returns the artifacts
    /// it had (so the caller can remove their files), or `None` if there was no such session.
    pub async fn delete_session(&self, project_id: &str, id: &str) -> StoreResult<Option<Vec<ArtifactRecord>>> {
        let mut tx = self.writer.begin().await?;
        let rows = sqlx::query(
            "SELECT a.kind, a.path, a.content_type, a.bytes FROM session_artifacts a \
             JOIN sessions s ON s.id = a.session_id WHERE s.project_id = $1 AND s.id = $2",
        )
        .bind(project_id)
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        let artifacts = rows.iter().map(artifact_from_row).collect::<StoreResult<Vec<_>>>()?;
        // Children first, so the delete does not depend on SQLite's per-connection foreign-key pragma.
        for table in ["transcript_turns", "timeline_events", "session_artifacts", "session_writes"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE session_id IN (SELECT id FROM sessions WHERE project_id = $1 AND id = $2)"
            ))
            .bind(project_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        let done = sqlx::query("DELETE FROM sessions WHERE project_id = $1 AND id = $2")
            .bind(project_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((done.rows_affected() > 0).then_some(artifacts))
    }
}

async fn count_live_in(tx: &mut Transaction<'_, Any>, workspace_id: &str) -> StoreResult<i64> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE workspace_id = $1 AND status = 'active'")
        .bind(workspace_id)
        .fetch_one(&mut **tx)
        .await?)
}

fn artifact_from_row(row: &AnyRow) -> StoreResult<ArtifactRecord> {
    Ok(ArtifactRecord {
        kind: row.try_get("kind")?,
        path: row.try_get("path")?,
        content_type: row.try_get("content_type")?,
        bytes: row.try_get("bytes")?,
    })
}

async fn insert_session_in(tx: &mut Transaction<'_, Any>, session: &NewSession<'_>) -> StoreResult<()> {
    bind_new_session(
        sqlx::query(
            "INSERT INTO sessions (id, workspace_id, project_id, source, status, usage_status, started_us, ended_us, \
         provider, model, title, room_name, config, created_us, heartbeat_us) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)",
        ),
        session,
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Appends `turns` after the session's stored ones, in the transaction.
async fn append_turns_in(tx: &mut Transaction<'_, Any>, session_id: &str, turns: &[NewTurn]) -> StoreResult<()> {
    let next: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq) + 1, 0) FROM transcript_turns WHERE session_id = $1")
        .bind(session_id)
        .fetch_one(&mut **tx)
        .await?;
    insert_turns_in(tx, session_id, next, turns).await
}

/// Appends `events` after the session's stored ones, in the transaction.
async fn append_events_in(
    tx: &mut Transaction<'_, Any>,
    session_id: &str,
    events: &[NewTimelineEvent],
) -> StoreResult<()> {
    let next: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq) + 1, 0) FROM timeline_events WHERE session_id = $1")
        .bind(session_id)
        .fetch_one(&mut **tx)
        .await?;
    insert_events_in(tx, session_id, next, events).await
}

async fn insert_turns_in(
    tx: &mut Transaction<'_, Any>,
    session_id: &str,
    first_seq: i64,
    turns: &[NewTurn],
) -> StoreResult<()> {
    let mut seq = first_seq;
    for batch in turns.chunks(INSERT_BATCH_ROWS) {
        let sql = multi_row_insert("transcript_turns (session_id, seq, ts_us, role, text)", 5, batch.len());
        let mut query = sqlx::query(&sql);
        for turn in batch {
            query = query.bind(session_id).bind(seq).bind(turn.ts_us).bind(turn.role).bind(&turn.text);
            seq += 1;
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

async fn insert_events_in(
    tx: &mut Transaction<'_, Any>,
    session_id: &str,
    first_seq: i64,
    events: &[NewTimelineEvent],
) -> StoreResult<()> {
    let mut seq = first_seq;
    for batch in events.chunks(INSERT_BATCH_ROWS) {
        let sql = multi_row_insert("timeline_events (session_id, seq, ts_us, kind, data)", 5, batch.len());
        let mut query = sqlx::query(&sql);
        for event in batch {
            query = query.bind(session_id).bind(seq).bind(event.ts_us).bind(&event.kind).bind(to_json(&event.data));
            seq += 1;
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

async fn upsert_artifact_in(
    tx: &mut Transaction<'_, Any>,
    session_id: &str,
    artifact: &ArtifactRecord,
    now_us: i64,
) -> StoreResult<()> {
    sqlx::query("DELETE FROM session_artifacts WHERE session_id = $1 AND kind = $2")
        .bind(session_id)
        .bind(&artifact.kind)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO session_artifacts (session_id, kind, path, content_type, bytes, created_us) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(session_id)
    .bind(&artifact.kind)
    .bind(&artifact.path)
    .bind(&artifact.content_type)
    .bind(artifact.bytes)
    .bind(now_us)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Binds the fourteen columns of a new session, in the order both inserts list them
/// (`$14` is used twice: creation time and first heartbeat).
fn bind_new_session<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    session: &NewSession<'q>,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(session.id)
        .bind(session.workspace_id)
        .bind(session.project_id)
        .bind(session.source)
        .bind(session.status)
        .bind(session.usage_status)
        .bind(session.started_us)
        .bind(session.ended_us)
        .bind(session.provider)
        .bind(session.model)
        .bind(session.title)
        .bind(session.room_name)
        .bind(session.config.map(to_json))
        .bind(session.now_us)
}

/// `INSERT INTO {target} VALUES ($1, …), (…), …` for `rows` rows of `columns` columns.
fn multi_row_insert(target: &str, columns: usize, rows: usize) -> String {
    let mut sql = format!("INSERT INTO {target} VALUES ");
    let mut n = 1;
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..columns {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push('$');
            sql.push_str(&n.to_string());
            n += 1;
        }
        sql.push(')');
    }
    sql
}
