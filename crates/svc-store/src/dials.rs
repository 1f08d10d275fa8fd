//! Phone dial-outs: one per session, and the workspace's dial-minute meter.

use sqlx::Row;

use crate::{Store, StoreResult};

/// A dial to record as it is placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDial<'a> {
    /// The `dial_id` the route answers with.
    pub id: &'a str,
    /// The workspace billed for it.
    pub workspace_id: &'a str,
    /// The session it joins.
    pub session_id: &'a str,
    /// The callee, E.164.
    pub phone_number: &'a str,
    /// The caller id presented, when one was asked for.
    pub caller_number: Option<&'a str>,
    /// When it was placed.
    pub created_us: i64,
}

/// How a dial ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialOutcome<'a> {
    /// When the callee answered, if they did.
    pub answered_us: Option<i64>,
    /// When the call ended (or failed).
    pub ended_us: i64,
    /// A slug: `completed`, or why it failed (`busy`, `no_answer`, …).
    pub outcome: &'a str,
    /// Seconds billed: the answered time, rounded up to whole seconds.
    pub billed_seconds: i64,
}

/// One stored dial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialRecord {
    /// The `dial_id`.
    pub id: String,
    /// The session it joined.
    pub session_id: String,
    /// The callee.
    pub phone_number: String,
    /// The caller id asked for.
    pub caller_number: Option<String>,
    /// When it was placed.
    pub created_us: i64,
    /// When it was answered.
    pub answered_us: Option<i64>,
    /// When it ended.
    pub ended_us: Option<i64>,
    /// How it ended, once it has.
    pub outcome: Option<String>,
    /// Seconds billed.
    pub billed_seconds: i64,
}

impl Store {
    /// Records a dial unless its session already has one: true if recorded. Atomic on both
    /// backends (the unique session_id decides between two racing dials).
    pub async fn insert_dial(&self, dial: &NewDial<'_>) -> StoreResult<bool> {
        let done = sqlx::query(
            "INSERT INTO dials (id, workspace_id, session_id, phone_number, caller_number, created_us) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_id) DO NOTHING",
        )
        .bind(dial.id)
        .bind(dial.workspace_id)
        .bind(dial.session_id)
        .bind(dial.phone_number)
        .bind(dial.caller_number)
        .bind(dial.created_us)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Forgets a dial that was never placed (the runtime refused it), so the session may dial again.
    pub async fn remove_unplaced_dial(&self, id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM dials WHERE id = $1 AND answered_us IS NULL AND ended_us IS NULL")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Stores how a dial ended.
    pub async fn finish_dial(&self, id: &str, outcome: &DialOutcome<'_>) -> StoreResult<()> {
        sqlx::query(
            "UPDATE dials SET answered_us = $2, ended_us = $3, outcome = $4, billed_seconds = $5 WHERE id = $1",
        )
        .bind(id)
        .bind(outcome.answered_us)
        .bind(outcome.ended_us)
        .bind(outcome.outcome)
        .bind(outcome.billed_seconds)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The dial of a session, if it has one.
    pub async fn dial_of_session(&self, session_id: &str) -> StoreResult<Option<DialRecord>> {
        let row = sqlx::query(
            "SELECT id, session_id, phone_number, caller_number, created_us, answered_us, ended_us, outcome, \
             billed_seconds FROM dials WHERE session_id = $1",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(DialRecord {
            id: row.try_get("id")?,
            session_id: row.try_get("session_id")?,
            phone_number: row.try_get("phone_number")?,
            caller_number: row.try_get("caller_number")?,
            created_us: row.try_get("created_us")?,
            answered_us: row.try_get("answered_us")?,
            ended_us: row.try_get("ended_us")?,
            outcome: row.try_get("outcome")?,
            billed_seconds: row.try_get("billed_seconds")?,
        }))
    }

    /// Seconds of dial-out the workspace was billed for dials placed since `since_us`.
    pub async fn dial_seconds_since(&self, workspace_id: &str, since_us: i64) -> StoreResult<i64> {
        let total: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(SUM(billed_seconds) AS BIGINT) FROM dials WHERE workspace_id = $1 AND created_us >= $2",
        )
        .bind(workspace_id)
        .bind(since_us)
        .fetch_one(&self.pool)
        .await?;
        Ok(total.unwrap_or(0))
    }
}
