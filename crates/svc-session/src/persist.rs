//! Storing a session as it runs: one writer task per session owns every write (transcript turns,
//! timeline events, the resumption handle, heartbeats, and at the end the status, usage and the
//! recording's artifact), so the session's audio never waits on the database and writes of one
//! session land in order (their `seq` numbers are allocated by the store per append).
//!
//! The actor hands records to a [`Persister`], which adds them to a batch it shares with the task
//! and wakes it; the task takes the whole batch whenever it is free, so a slow database makes
//! batches larger, never the actor slower, and nothing waits for the actor's next input.
//!
//! A database that goes away (a restart, a failover, a cut network) costs nothing while it comes
//! back within [`RETRY_FOR`]: the task retries the batch in hand with backoff, the session runs
//! on, and what it writes meanwhile waits in the actor's pending batch (at most
//! [`MAX_PENDING_TURNS`] turns and [`MAX_PENDING_EVENTS`] timeline events; beyond, the oldest
//! are dropped and counted). Batches are numbered and stored once
//! ([`Store::append_session_batch`]), so a retry of a batch whose commit landed but whose answer
//! was lost stores nothing twice; the numbers of one writer follow its start time, so a second
//! writer of the session (another node that took it over) never reuses one.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use svc_store::{ArtifactRecord, NewTimelineEvent, NewTurn, Store, StoreError, StoreResult, UsageRecord};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::core::Persist;
use crate::phone_call::DialRecord;
use crate::runtime::epoch_us;

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
    /// The latest heartbeat, with the usage so far when the actor gave it.
    heartbeat: Option<(i64, Option<UsageRecord>)>,
    /// Outcomes of the session's phone calls followed in its room (`crate::phone_call`).
    dials: Vec<DialRecord>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.turns.is_empty()
            && self.timeline.is_empty()
            && self.handle.is_none()
            && self.heartbeat.is_none()
            && self.dials.is_empty()
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

/// What the actor hands the writer: the records not yet taken, and at the end the final record.
#[derive(Default)]
struct Handoff {
    pending: Batch,
    finish: Option<(FinalRecord, oneshot::Sender<()>)>,
    /// Turns and events dropped from `pending` over its bounds.
    dropped: (usize, usize),
}

/// The actor's side of the writer task. The two share the pending batch: the actor adds to it
/// (under a lock held for a push), the writer takes all of it whenever it is free and woken, so
/// nothing waits for the actor's next input to be handed over.
pub struct Persister {
    session_id: String,
    handoff: Arc<Mutex<Handoff>>,
    wake: Arc<Notify>,
    /// Records were added since the writer was last woken.
    dirty: bool,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Persister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persister").field("session_id", &self.session_id).finish_non_exhaustive()
    }
}

impl Persister {
    /// Starts the writer task of `session_id`.
    pub fn start(store: Store, session_id: &str) -> Persister {
        let handoff = Arc::new(Mutex::new(Handoff::default()));
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(run(store, session_id.to_owned(), handoff.clone(), wake.clone()));
        Persister { session_id: session_id.to_owned(), handoff, wake, dirty: false, task: Some(task) }
    }

    fn handoff(&self) -> std::sync::MutexGuard<'_, Handoff> {
        lock(&self.handoff)
    }

    /// Queues a record of the core.
    pub fn push(&mut self, record: Persist, now_us: i64) {
        let mut handoff = self.handoff();
        let pending = &mut handoff.pending;
        match record {
            Persist::Turn { ts_us, role, text } => pending.turns.push(NewTurn { ts_us, role, text }),
            Persist::Timeline { ts_us, kind, data } => {
                pending.timeline.push(NewTimelineEvent { ts_us, kind: kind.to_owned(), data });
            }
            Persist::ResumptionHandle(handle) => pending.handle = Some((handle, now_us)),
        }
        // Within the bounds: the oldest go first, counted.
        let turns = pending.turns.len().saturating_sub(MAX_PENDING_TURNS);
        let events = pending.timeline.len().saturating_sub(MAX_PENDING_EVENTS);
        if turns + events > 0 {
            pending.turns.drain(..turns);
            pending.timeline.drain(..events);
            if handoff.dropped == (0, 0) {
                tracing::error!(session.id = %self.session_id, "the database has been away too long: the oldest unstored records are dropped");
            }
            handoff.dropped.0 += turns;
            handoff.dropped.1 += events;
        }
        drop(handoff);
        self.dirty = true;
    }

    /// Refreshes the session's heartbeat with the next batch, and with `usage` its usage so far
    /// (what a node that takes the session over carries on from).
    pub fn heartbeat(&mut self, now_us: i64, usage: Option<UsageRecord>) {
        self.handoff().pending.heartbeat = Some((now_us, usage));
        self.dirty = true;
    }

    /// Stores the outcome of a phone call with its dial (what its minutes are metered from).
    pub fn dial_outcome(&mut self, record: DialRecord) {
        self.handoff().pending.dials.push(record);
        self.dirty = true;
    }

    /// Wakes the writer for what was added (cheap when nothing was: called after every input).
    pub fn flush(&mut self) {
        if std::mem::take(&mut self.dirty) {
            self.wake.notify_one();
        }
    }

    /// Stops the writer without writing what is pending or any end: the session is another
    /// node's now (`SessionActor::leave_to`).
    pub fn abandon(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// Writes everything pending and the end of the session, then stops the task.
    pub async fn finish(mut self, record: FinalRecord) {
        let (done, written) = oneshot::channel();
        let dropped = {
            let mut handoff = self.handoff();
            handoff.finish = Some((record, done));
            handoff.dropped
        };
        if dropped != (0, 0) {
            tracing::error!(session.id = %self.session_id, turns = dropped.0, events = dropped.1,
                "records dropped while the database was away");
        }
        self.wake.notify_one();
        if written.await.is_err() {
            tracing::error!(session.id = %self.session_id, "the session's writer task is gone; its end was not stored");
        }
        if let Some(task) = self.task.take() {
            // The writer reports its own failures; only its end matters here.
            let _ = task.await;
        }
    }
}

fn lock(handoff: &Mutex<Handoff>) -> std::sync::MutexGuard<'_, Handoff> {
    handoff.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn run(store: Store, session_id: String, handoff: Arc<Mutex<Handoff>>, wake: Arc<Notify>) {
    // The number of the next batch, which makes its retries recognizable. It starts at the
    // writer's start in microseconds, not 0: a session taken over by another node (worker mode)
    // has a second writer, whose batches must not pass for retries of the first one's.
    let mut number = epoch_us();
    loop {
        wake.notified().await;
        // Everything added until now, and again after each write: what came in while it ran.
        loop {
            let (batch, finish) = {
                let mut handoff = lock(&handoff);
                (std::mem::take(&mut handoff.pending), handoff.finish.take())
            };
            let empty = batch.is_empty();
            if !empty {
                write_batch(&store, &session_id, &mut number, batch).await;
            }
            if let Some((record, done)) = finish {
                // `batch` held everything: it was taken with the end, after which the actor
                // (its `Persister` consumed by `finish`) adds nothing.
                self::finish(&store, &session_id, record).await;
                // The caller gave up waiting; nothing to tell it.
                let _ = done.send(());
                return;
            }
            if empty {
                break;
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
    for dial in &batch.dials {
        let outcome = svc_store::DialOutcome {
            answered_us: dial.answered_us,
            ended_us: dial.ended_us,
            outcome: &dial.outcome,
            billed_seconds: dial.billed_seconds,
        };
        // Idempotent (the dial's row is set, not added to): a retry writes the same.
        let stored =
            retrying(session_id, "storing a phone call's outcome", || store.finish_dial(&dial.dial_id, &outcome)).await;
        if stored.is_none() {
            tracing::error!(session.id = %session_id, dial.id = %dial.dial_id, "a phone call's outcome was lost");
        }
    }
    if let Some((now, usage)) = batch.heartbeat
        && let Err(error) = store.touch_session(session_id, now, usage.as_ref()).await
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
