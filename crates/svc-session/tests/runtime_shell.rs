//! The runtime, the IO shell that starts sessions, in tokio's paused time: it joins the embedded
//! room as the agent, opens the provider adapter (svc-testkit's fake OpenAI upstream on loopback)
//! and runs the actor; `end_session` ends one session and returns once its end is stored.
//!
//! The clock stays frozen (auto-advance held off, as in `actor_shell.rs`): the room, the
//! upstream's socket and SQLite all answer in real time, and no timer of the session fires, so
//! what is checked is the runtime's own bookkeeping and the session's end.

#[path = "support/live_room.rs"]
mod live_room;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use svc_room::{LocalJoinOptions, LocalParticipant, ParticipantKind, RoomEvent};
use svc_session::{EndError, Runtime, RuntimeConfig, SessionRequest};
use svc_testkit::{FakeUpstream, Flavor};

const ROOM: &str = "room-runtime-shell";
const SESSION: &str = "7d1e3b9a-2c4f-4a8e-b6d0-5e9f1a2b3c04";

/// Keeps tokio from auto-advancing the paused clock while held (see `support/shell.rs`).
fn hold_auto_advance_off() -> std::sync::mpsc::Sender<()> {
    let (release, released) = std::sync::mpsc::channel::<()>();
    drop(tokio::task::spawn_blocking(move || {
        let _ = released.recv();
    }));
    release
}

/// Polls `future` until it is ready, on the wall clock (the paused clock stays where it is).
async fn in_real_time<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut future = std::pin::pin!(future);
    loop {
        let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(future.as_mut().poll(cx))).await;
        if let std::task::Poll::Ready(value) = polled {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: not within 10 s");
        tokio::task::yield_now().await;
    }
}

/// The next data message `user` hears of type `kind`.
async fn heard(user: &mut LocalParticipant, kind: &str) -> Value {
    in_real_time(kind, async {
        loop {
            match user.next_event().await {
                Some(RoomEvent::Data(data)) => {
                    let message: Value = serde_json::from_slice(&data.payload).unwrap_or(Value::Null);
                    if message["type"] == kind {
                        return message;
                    }
                }
                Some(_) => {}
                None => panic!("the user left the room before {kind}"),
            }
        }
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn the_runtime_starts_a_session_that_gets_ready_and_end_session_ends_it_and_stores_the_end() {
    let _auto_advance_off = hold_auto_advance_off();
    let (database, room) = live_room::store_and_room(SESSION, ROOM).await;
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let data_dir = tempfile::tempdir().expect("data dir");
    let runtime = Runtime::new(RuntimeConfig {
        store: database.store.clone(),
        rooms: svc_session::SessionRooms::Embedded(room.clone()),
        provider_env: live_room::provider_env(&fake),
        local: None,
        recordings_dir: data_dir.path().join("recordings"),
        node_id: "test".into(),
        timing: svc_session::core::Timing::default(),
        phone: None,
        tool_backends: Default::default(),
    });
    let request = SessionRequest {
        session_id: SESSION.into(),
        room_name: ROOM.into(),
        session: live_room::session_config(),
        local_slot: None,
    };
    in_real_time("the start", runtime.start_session(request)).await.expect("the session runs");
    assert!(runtime.is_running(SESSION));
    assert_eq!(runtime.live_sessions(), 1);

    let options = LocalJoinOptions {
        identity: "user".into(),
        name: "user".into(),
        kind: ParticipantKind::Standard,
        metadata: String::new(),
        attributes: BTreeMap::new(),
    };
    let mut user = in_real_time("the join", room.join_local(ROOM, options)).await.expect("the user joins");
    let ready = heard(&mut user, "ready").await;
    assert_eq!(ready["session_id"], SESSION);

    let ending = tokio::spawn({
        let runtime = runtime.clone();
        async move { runtime.end_session(SESSION, "session_deleted").await }
    });
    let ended = heard(&mut user, "session-ended").await;
    assert_eq!(ended["reason"], "session_deleted");
    let result = in_real_time("end_session", ending).await.expect("the task");
    assert_eq!(result, Ok(()));
    assert!(!runtime.is_running(SESSION));
    assert_eq!(runtime.live_sessions(), 0);
    assert_eq!(runtime.end_session(SESSION, "again").await, Err(EndError::NotRunning));

    let timeline = in_real_time("the timeline", database.store.timeline(SESSION)).await.expect("timeline");
    let last = timeline.last().expect("events");
    assert_eq!((last.kind.as_str(), last.data["reason"].as_str()), ("session.ended", Some("session_deleted")));
    assert!(timeline.iter().any(|event| event.kind == "provider.ready"));
    in_real_time("the shutdown", runtime.shutdown()).await;
    in_real_time("the room's shutdown", room.shutdown()).await;
}
