//! Storing a session as it runs: one writer task per session owns every write (transcript turns,
//! timeline events, the resumption handle, heartbeats, and at the end the status, usage and the
//! recording's artifact), so the session's audio never waits on the database and writes of one
//! session land in order (their `seq` numbers are allocated by the store per append).
//!
//! The actor hands records to a [`Persister`], which batches them and passes a batch to the task
//! whenever the task is free; a slow database makes batches larger, never the actor slower.
//!
//! A database that goes away (a restart, a failover, a cut network) costs nothing while it comes
//! back within [`RETRY_FOR`]: the task retries the batch in hand with backoff, the session runs
//! on, and what it writes meanwhile waits in the actor's pending batch (at most
//! [`MAX_PENDING_TURNS`] turns and [`MAX_PENDING_EVENTS`] timeline events; beyond, the oldest
//! are dropped and counted). Batches are numbered and stored once
//! ([`Store::append_session_batch`]), so a retry of a batch whose commit landed but whose answer
//! was lost stores nothing twice.

use std::future::Future;
use std::time::{Duration, Instant};

use svc_store::{ArtifactRecord, NewTimelineEvent, NewTurn, Store, StoreError, StoreResult, UsageRecord};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::core::Persist;

/// How long a write is retried while the database is unreachable before it is given up (the
/// session's end then falls to the reaper, which ends it as `error`).
pub const RETRY_FOR: Duration = Duration::from_secs(60);
/// The first pause between attempts; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(4);
/// Transcript turns waiting for the writer at most (a long outage of a talkative session).
pub const MAX_PENDING_TURNS: usize = 2_000;
/// Timeline events waiting for the writer at most.
pub const MAX_PENDING_EVENTS: usize = 10_000;

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
    /// Turns and events dropped from `pending` over its bounds.
    dropped: (usize, usize),
}

impl Persister {
    /// Starts the writer task of `session_id`.
    pub fn start(store: Store, session_id: &str) -> Persister {
        // One batch in flight and one queued: the actor merges everything else into `pending`.
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(run(store, session_id.to_owned(), rx));
        Persister {
            session_id: session_id.to_owned(),
            tx,
            pending: Batch::default(),
            task: Some(task),
            dropped: (0, 0),
        }
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
        self.bound();
    }

    /// Keeps what waits within its bounds: the oldest go first, counted.
    fn bound(&mut self) {
        let turns = self.pending.turns.len().saturating_sub(MAX_PENDING_TURNS);
        let events = self.pending.timeline.len().saturating_sub(MAX_PENDING_EVENTS);
        if turns + events == 0 {
            return;
        }
        self.pending.turns.drain(..turns);
        self.pending.timeline.drain(..events);
        if self.dropped == (0, 0) {
            tracing::error!(session.id = %self.session_id, "the database has been away too long: the oldest unstored records are dropped");
        }
        self.dropped.0 += turns;
        self.dropped.1 += events;
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
        if self.dropped != (0, 0) {
            let (turns, events) = self.dropped;
            tracing::error!(session.id = %self.session_id, turns, events, "records dropped while the database was away");
        }
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
    // The number of the next batch, which makes its retries recognizable.
    let mut number = 0;
    while let Some(write) = rx.recv().await {
        match write {
            Write::Batch(batch) => write_batch(&store, &session_id, &mut number, batch).await,
            Write::Finish(batch, record, done) => {
                write_batch(&store, &session_id, &mut number, batch).await;
                finish(&store, &session_id, *record).await;
                // The caller gave up waiting; nothing to tell it.
                let _ = done.send(());
                return;
            }
        }
    }
}

async fn write_batch(store: &Store, session_id: &str, number: &mut i64, batch: Batch) {
    if !batch.turns.is_empty() || !batch.timeline.is_empty() {
        let this = *number;
        *number += 1;
        let stored = retrying(session_id, "storing transcript turns and timeline events", || {
            store.append_session_batch(session_id, this, &batch.turns, &batch.timeline)
        })
        .await;
        if stored.is_none() {
            tracing::error!(session.id = %session_id, turns = batch.turns.len(), events = batch.timeline.len(),
                "transcript turns and timeline events lost");
        }
    }
    if let Some((handle, at)) = batch.handle {
        // The latest handle (or its removal), idempotent: a retry writes the same.
        retrying(session_id, "storing the resumption handle", || {
            store.set_resumption_handle(session_id, handle.as_deref(), at)
        })
        .await;
    }
    if let Some(now) = batch.heartbeat
        && let Err(error) = store.touch_session(session_id, now).await
    {
        // Not retried: the next batch carries a newer one.
        tracing::warn!(session.id = %session_id, %error, "session heartbeat failed");
    }
}

async fn finish(store: &Store, session_id: &str, record: FinalRecord) {
    if let Some(artifact) = &record.recording {
        retrying(session_id, "storing the recording's record", || {
            store.upsert_artifact(session_id, artifact, record.ended_us)
        })
        .await;
    }
    let ended = retrying(session_id, "storing the end of the session", || {
        store.finish_session(session_id, record.status, record.ended_us, record.usage.as_ref())
    })
    .await;
    if ended.is_none() {
        tracing::error!(session.id = %session_id, "the end of the session could not be stored; the reaper will end it");
    }
}

/// Runs `attempt` until it succeeds, retrying while the database is unreachable
/// ([`StoreError::Unavailable`]) for up to [`RETRY_FOR`] with backoff; any other error, or the
/// time running out, gives `None` (logged).
async fn retrying<T, F, Fut>(session_id: &str, what: &str, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let started = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    let mut failures = 0_u32;
    loop {
        match attempt().await {
            Ok(value) => {
                if failures > 0 {
                    tracing::info!(session.id = %session_id, what, failures,
                        waited_ms = started.elapsed().as_millis() as u64, "stored once the database was back");
                }
                return Some(value);
            }
            Err(error @ StoreError::Unavailable(_)) if started.elapsed() + backoff < RETRY_FOR => {
                if failures == 0 {
                    tracing::warn!(session.id = %session_id, %error, what, "the database is unavailable; retrying");
                }
                failures += 1;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(error) => {
                tracing::warn!(session.id = %session_id, %error, what, failures, "write failed");
                return None;
            }
        }
    }
}
