//! Handing a started session to whatever runs it.
//!
//! Session start inserts the session and mints room credentials, then dispatches. `svc serve`
//! dispatches to the session runtime ([`RuntimeDispatcher`] over [`svc_session::Runtime`]): the
//! agent joins the room and the session runs until it ends. [`NoRuntime`] accepts every session
//! and runs nothing (the HTTP tests use it). The reaper ends live sessions whose heartbeat went
//! stale, whatever the reason (a runtime that died, a session never run), so they never hold a
//! concurrency slot for long.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use svc_domain::start::ResolvedSession;
use tokio_util::sync::CancellationToken;

/// A session ready to run.
#[derive(Debug, Clone)]
pub struct DispatchRequest {
    /// Session id.
    pub session_id: String,
    /// Workspace id.
    pub workspace_id: String,
    /// The room the user was given credentials for.
    pub room_name: String,
    /// The resolved configuration.
    pub session: Arc<ResolvedSession>,
    /// The local provider's slot the start route took (`provider_local` only); it goes with the
    /// session and frees when the session ends (or when a failed dispatch drops it).
    pub local_slot: Option<svc_local::Permit>,
}

/// The runtime could not take the session.
#[derive(Debug, Clone, thiserror::Error)]
#[error("dispatch failed: {0}")]
pub struct DispatchError(pub String);

/// Boxed future of a dispatch.
pub type DispatchFuture<'a> = Pin<Box<dyn Future<Output = Result<(), DispatchError>> + Send + 'a>>;

/// Boxed future of an end request: `Ok(true)` once the session has ended here, `Ok(false)` when
/// it does not run on this node.
pub type EndFuture<'a> = Pin<Box<dyn Future<Output = Result<bool, DispatchError>> + Send + 'a>>;

/// A phone call to place into a running session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhoneDial {
    /// The `dial_id` the route answers with.
    pub dial_id: String,
    /// The session.
    pub session_id: String,
    /// The callee, E.164.
    pub phone_number: String,
    /// The caller id presented: the one asked for, else the trunk's default.
    pub caller_number: String,
    /// The session's room, as stored (on a LiveKit server, any node can dial into it).
    pub room_name: Option<String>,
}

/// Why a dial was not placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialRefusal {
    /// This server has no phone trunk.
    #[error("this server has no phone trunk configured")]
    NoTrunk,
    /// The session does not run here (ended, or never ran).
    #[error("the session is not running")]
    NotRunning,
    /// The runtime could not take it.
    #[error("{0}")]
    Failed(String),
}

/// Boxed future of a dial hand-off.
pub type PhoneFuture<'a> = Pin<Box<dyn Future<Output = Result<(), DialRefusal>> + Send + 'a>>;

/// Something that runs sessions.
pub trait SessionDispatcher: Send + Sync + std::fmt::Debug {
    /// Takes a session; returns once the runtime has accepted it (not when it ends).
    fn dispatch(&self, request: DispatchRequest) -> DispatchFuture<'_>;

    /// Ends a running session (`session-ended` with `reason`) and returns once its end is
    /// stored; a session not running here is left alone. By default nothing runs here (test
    /// doubles, [`NoRuntime`]).
    fn end<'a>(&'a self, session_id: &'a str, reason: &'a str) -> EndFuture<'a> {
        // Nothing runs here, so there is nothing to end.
        let _ = (session_id, reason);
        Box::pin(async { Ok(false) })
    }

    /// The caller id a dial that names none presents, when dial-out can be placed at all (a
    /// phone trunk is configured); `None` without a trunk.
    fn trunk_caller_number(&self) -> Option<String> {
        None
    }

    /// Hands a dial to the session; returns once the call is placed (it rings asynchronously).
    fn dial(&self, dial: PhoneDial) -> PhoneFuture<'_> {
        // No phone here: `phone_available` said so first.
        let _ = dial;
        Box::pin(async { Err(DialRefusal::NoTrunk) })
    }

    /// What the media paths of the sessions that ended here dropped or sent late, summed; `None`
    /// when nothing runs sessions here.
    fn media_totals(&self) -> Option<svc_session::media::MediaCounts> {
        None
    }

    /// Media rooms open here; `None` when this process has no room server.
    fn open_rooms(&self) -> Option<usize> {
        None
    }

    /// Whether the server is draining before it stops: session starts are refused (503) and
    /// `/healthz` says so, while the live sessions run on.
    fn draining(&self) -> bool {
        false
    }

    /// Whether a session could start now; the error is the 503's message (draining, out of file
    /// descriptors). Asked before anything is stored.
    fn can_start(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Runs sessions in this process with the session runtime.
#[derive(Debug, Clone)]
pub struct RuntimeDispatcher(pub svc_session::Runtime);

impl SessionDispatcher for RuntimeDispatcher {
    fn dispatch(&self, request: DispatchRequest) -> DispatchFuture<'_> {
        Box::pin(async move {
            let request = svc_session::SessionRequest {
                session_id: request.session_id,
                room_name: request.room_name,
                session: request.session,
                local_slot: request.local_slot,
            };
            self.0.start_session(request).await.map_err(|error| DispatchError(error.to_string()))
        })
    }

    fn trunk_caller_number(&self) -> Option<String> {
        self.0.trunk_caller_number().map(str::to_owned)
    }

    fn media_totals(&self) -> Option<svc_session::media::MediaCounts> {
        Some(self.0.media_totals())
    }

    fn open_rooms(&self) -> Option<usize> {
        Some(self.0.open_rooms())
    }

    fn draining(&self) -> bool {
        self.0.is_draining()
    }

    fn can_start(&self) -> Result<(), String> {
        self.0.can_start().map_err(|error| match error {
            svc_session::RuntimeError::Draining => "This server is shutting down; retry with backoff".to_owned(),
            svc_session::RuntimeError::Descriptors(error) => {
                format!("This server is out of file descriptors ({error}); retry with backoff")
            }
            error => format!("The realtime backend is unavailable ({error}); retry with backoff"),
        })
    }

    fn dial(&self, dial: PhoneDial) -> PhoneFuture<'_> {
        Box::pin(async move {
            let request = svc_session::DialRequest {
                dial_id: dial.dial_id,
                session_id: dial.session_id,
                phone_number: dial.phone_number,
                caller_number: Some(dial.caller_number),
                room_name: dial.room_name,
            };
            self.0.dial(request).await.map_err(|error| match error {
                svc_session::DialError::NoTrunk => DialRefusal::NoTrunk,
                svc_session::DialError::NotRunning => DialRefusal::NotRunning,
                svc_session::DialError::Phone(error) => DialRefusal::Failed(error.to_string()),
                svc_session::DialError::LiveKit(error) => DialRefusal::Failed(error.to_string()),
            })
        })
    }

    fn end<'a>(&'a self, session_id: &'a str, reason: &'a str) -> EndFuture<'a> {
        Box::pin(async move {
            match self.0.end_session(session_id, reason).await {
                Ok(()) => Ok(true),
                Err(svc_session::EndError::NotRunning) => Ok(false),
                Err(error) => Err(DispatchError(error.to_string())),
            }
        })
    }
}

/// Accepts every session and runs nothing (for tests of the HTTP surface).
#[derive(Debug, Default)]
pub struct NoRuntime;

impl SessionDispatcher for NoRuntime {
    fn dispatch(&self, request: DispatchRequest) -> DispatchFuture<'_> {
        Box::pin(async move {
            tracing::debug!(session.id = %request.session_id, "no session runtime: the session will be reaped");
            Ok(())
        })
    }
}

/// A live session whose heartbeat is older than this is ended as `error`.
pub const HEARTBEAT_STALE_AFTER: Duration = Duration::from_secs(60);
/// How often the reaper looks.
pub const REAPER_INTERVAL: Duration = Duration::from_secs(15);

/// Ends stale live sessions every [`REAPER_INTERVAL`] until `shutdown`.
pub async fn run_reaper(store: svc_store::Store, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(REAPER_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        let now = crate::app::now_us();
        let stale_before = now - i64::try_from(HEARTBEAT_STALE_AFTER.as_micros()).unwrap_or(i64::MAX);
        match store.reap_stale_sessions(stale_before, now).await {
            Ok(reaped) if reaped.is_empty() => {}
            Ok(reaped) => {
                tracing::warn!(count = reaped.len(), sessions = ?reaped, "ended live sessions with a stale heartbeat")
            }
            Err(error) => tracing::warn!(error = %error, "reaper could not check for stale sessions"),
        }
    }
}
