//! Storing a session as it runs: one writer task per session owns every write (transcript turns,
//! timeline events, the resumption handle, heartbeats, and at the end the status, usage and the
//! recording's artifact), so the session's audio never waits on the database and writes of one
//! session land in order (their `seq` numbers are allocated by the store per append).
//!
//! The actor hands records to a [`Persister`], which batches them and passes a batch to the task
//! whenever the task is free; a slow database makes batches larger, never the actor slower.

use std::time::Duration;

use svc_store::{ArtifactRecord, NewTimelineEvent, NewTurn, Store, UsageRecord};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::core::Persist;

/// Attempts at the final write before giving up (the reaper then ends the session as `error`).
const FINISH_ATTEMPTS: u32 = 5;

#[derive(Debug, Default)]
struct Batch {
    turns: Vec<NewTurn>,
    timeline: Vec<NewTimelineEvent>,
    /// `Some(handle)`: the latest handle (or its removal) to record.
    handle: Option<(Option<String>, i64)>,
    heartbeat: Option<i64>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.turns.is_empty() && self.timeline.is_empty() && self.handle.is_none() && self.heartbeat.is_none()
    }
}

/// How the session ended, as stored.
#[derive(Debug, Clone)]
pub struct FinalRecord {
    /// `completed` or `error`.
    pub status: &'static str,
    /// End time.
    pub ended_us: i64,
    /// Usage (`None`: usage `unavailable`).
    pub usage: Option<UsageRecord>,
    /// The recording, when one was written.
    pub recording: Option<ArtifactRecord>,
}

enum Write {
    Batch(Batch),
    Finish(Batch, Box<FinalRecord>, oneshot::Sender<()>),
}

/// The actor's side of the writer task.
#[derive(Debug)]
pub struct Persister {
    session_id: String,
    tx: mpsc::Sender<Write>,
    pending: Batch,
    task: Option<JoinHandle<()>>,
}

impl Persister {
    /// Starts the writer task of `session_id`.
    pub fn start(store: Store, session_id: &str) -> Persister {
        // One batch in flight and one queued: the actor merges everything else into `pending`.
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(run(store, session_id.to_owned(), rx));
        Persister { session_id: session_id.to_owned(), tx, pending: Batch::default(), task: Some(task) }
    }

    /// Queues a record of the core.
    pub fn push(&mut self, record: Persist, now_us: i64) {
        match record {
            Persist::Turn { ts_us, role, text } => self.pending.turns.push(NewTurn { ts_us, role, text }),
            Persist::Timeline { ts_us, kind, data } => {
                self.pending.timeline.push(NewTimelineEvent { ts_us, kind: kind.to_owned(), data });
            }
            Persist::ResumptionHandle(handle) => self.pending.handle = Some((handle, now_us)),
        }
    }

    /// Refreshes the session's heartbeat with the next batch.
    pub fn heartbeat(&mut self, now_us: i64) {
        self.pending.heartbeat = Some(now_us);
    }

    /// Hands what is pending to the task if it can take it now.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.pending);
        if let Err(
            mpsc::error::TrySendError::Full(Write::Batch(batch))
            | mpsc::error::TrySendError::Closed(Write::Batch(batch)),
        ) = self.tx.try_send(Write::Batch(batch))
        {
            // Busy: merge back and try again after the next input.
            self.pending.merge_front(batch);
        }
    }

    /// Writes everything pending and the end of the session, then stops the task.
    pub async fn finish(mut self, record: FinalRecord) {
        let batch = std::mem::take(&mut self.pending);
        let (done, written) = oneshot::channel();
        if self.tx.send(Write::Finish(batch, Box::new(record), done)).await.is_ok() {
            // The writer reports its own failures; only its end matters here.
            let _ = written.await;
        } else {
            tracing::error!(session.id = %self.session_id, "the session's writer task is gone; its end was not stored");
        }
        if let Some(task) = self.task.take() {
            // The writer reports its own failures; only its end matters here.
            let _ = task.await;
        }
    }
}

impl Batch {
    /// Puts `earlier` (a batch that could not be sent) before what accumulated since.
    fn merge_front(&mut self, mut earlier: Batch) {
        earlier.turns.append(&mut self.turns);
        earlier.timeline.append(&mut self.timeline);
        self.turns = earlier.turns;
        self.timeline = earlier.timeline;
        if self.handle.is_none() {
            self.handle = earlier.handle;
        }
        self.heartbeat = self.heartbeat.max(earlier.heartbeat);
    }
}

async fn run(store: Store, session_id: String, mut rx: mpsc::Receiver<Write>) {
    while let Some(write) = rx.recv().await {
        match write {
            Write::Batch(batch) => write_batch(&store, &session_id, batch).await,
            Write::Finish(batch, record, done) => {
                write_batch(&store, &session_id, batch).await;
                finish(&store, &session_id, *record).await;
                // The caller gave up waiting; nothing to tell it.
                let _ = done.send(());
                return;
            }
        }
    }
}

async fn write_batch(store: &Store, session_id: &str, batch: Batch) {
    if !batch.turns.is_empty()
        && let Err(error) = store.append_turns(session_id, &batch.turns).await
    {
        tracing::warn!(session.id = %session_id, %error, turns = batch.turns.len(), "storing transcript turns failed");
    }
    if !batch.timeline.is_empty()
        && let Err(error) = store.append_timeline(session_id, &batch.timeline).await
    {
        tracing::warn!(session.id = %session_id, %error, events = batch.timeline.len(), "storing timeline events failed");
    }
    if let Some((handle, at)) = batch.handle
        && let Err(error) = store.set_resumption_handle(session_id, handle.as_deref(), at).await
    {
        tracing::warn!(session.id = %session_id, %error, "storing the resumption handle failed");
    }
    if let Some(now) = batch.heartbeat
        && let Err(error) = store.touch_session(session_id, now).await
    {
        tracing::warn!(session.id = %session_id, %error, "session heartbeat failed");
    }
}

async fn finish(store: &Store, session_id: &str, record: FinalRecord) {
    if let Some(artifact) = &record.recording
        && let Err(error) = store.upsert_artifact(session_id, artifact, record.ended_us).await
    {
        tracing::warn!(session.id = %session_id, %error, "storing the recording's record failed");
    }
    for attempt in 1..=FINISH_ATTEMPTS {
        match store.finish_session(session_id, record.status, record.ended_us, record.usage.as_ref()).await {
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(session.id = %session_id, %error, attempt, "storing the end of the session failed");
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
        }
    }
    tracing::error!(session.id = %session_id, "the end of the session could not be stored; the reaper will end it");
}
