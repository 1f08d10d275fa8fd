//! `POST /realtime/session/{id}/dial`: every gate of the contract, in order, and the one dial per
//! session; with a phone double standing in for the runtime's phone leg.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use svc_domain::Scope;
use svc_server::dispatch::{DialRefusal, DispatchFuture, DispatchRequest, PhoneDial, PhoneFuture, SessionDispatcher};
use svc_store::{Backend, DialOutcome, NewSession, WorkspaceRow};

use crate::common::TestApp;

crate::on_both_backends_with!(
    world;
    every_rejection_of_the_contract_in_order,
    a_dial_is_placed_once_per_session_and_counts_against_the_minute_limit,
    a_dial_the_runtime_cannot_place_leaves_the_session_free_to_dial,
    a_do_not_call_list_that_cannot_be_read_is_not_consent,
);

const ACTIVE_CALLER: &str = "+15550100000";
const INACTIVE_CALLER: &str = "+15550100001";
const BLOCKED: &str = "+14155550199";
const CALLEE: &str = "+14155550123";
/// The trunk's default caller id (`--sip-caller-number`).
const TRUNK_CALLER: &str = "+15550100999";

/// Stands in for the runtime: has a trunk, records the dials handed to it, or refuses them.
#[derive(Debug, Default)]
struct Phone {
    dials: Mutex<Vec<PhoneDial>>,
    refuse: Mutex<Option<DialRefusal>>,
}

impl SessionDispatcher for Phone {
    fn dispatch(&self, _request: DispatchRequest) -> DispatchFuture<'_> {
        Box::pin(async { Ok(()) })
    }

    fn trunk_caller_number(&self) -> Option<String> {
        Some(TRUNK_CALLER.to_owned())
    }

    fn dial(&self, dial: PhoneDial) -> PhoneFuture<'_> {
        Box::pin(async move {
            if let Some(refusal) = self.refuse.lock().expect("lock").take() {
                return Err(refusal);
            }
            self.dials.lock().expect("lock").push(dial);
            Ok(())
        })
    }
}

struct World {
    t: TestApp,
    phone: Arc<Phone>,
    ws: WorkspaceRow,
    project: String,
    key: String,
}

async fn world(backend: Backend) -> World {
    let phone = Arc::new(Phone::default());
    let t = TestApp::with(backend, |_| {}, phone.clone()).await;
    let mut ws = t.workspace("acme").await;
    ws.settings.phone_calls_enabled = true;
    ws.settings.dial_minute_limit = Some(10);
    t.app.store.update_workspace(&ws.id, &ws.settings, None).await.expect("settings");
    t.app.store.upsert_caller_number(&ws.id, ACTIVE_CALLER, true).await.expect("pool");
    t.app.store.upsert_caller_number(&ws.id, INACTIVE_CALLER, false).await.expect("pool");
    t.app.store.add_do_not_call(&ws.id, BLOCKED).await.expect("dnc");
    let project = t.app.store.default_project(&ws.id).await.expect("project").id;
    let key = t.api_key(&ws, &[Scope::RealtimeDial, Scope::UserTokensMint]).await;
    World { t, phone, ws, project, key }
}

impl World {
    async fn session(&self, id: &str, ended: bool) {
        insert_session(&self.t, &self.ws.id, &self.project, id, ended).await;
    }

    async fn dial(&self, session: &str, key: Option<&str>, body: Value) -> crate::common::Reply {
        self.t.post(&format!("/realtime/session/{session}/dial"), key, body).await
    }
}

/// A session of the project, live or ended.
async fn insert_session(t: &TestApp, workspace_id: &str, project_id: &str, id: &str, ended: bool) {
    let now = svc_server::app::now_us();
    t.app
        .store
        .insert_session(&NewSession {
            id,
            workspace_id,
            project_id,
            source: "live",
            status: if ended { "completed" } else { "active" },
            usage_status: "pending",
            started_us: now,
            ended_us: ended.then_some(now + 1),
            provider: Some("provider_b"),
            model: None,
            title: None,
            room_name: Some("room"),
            config: None,
            now_us: now,
        })
        .await
        .expect("session");
}

fn code(error: &Value) -> &str {
    error["code"].as_str().unwrap_or("")
}

async fn every_rejection_of_the_contract_in_order(w: World) {
    w.session("live-1", false).await;
    w.session("ended-1", true).await;
    let callee = json!({"phone_number": CALLEE});

    w.dial("live-1", None, callee.clone()).await.expect_unauthorized();
    let minted = w.t.minted(&w.key, "end-user-1", &[]).await;
    let minted = minted["jwt"].as_str().expect("jwt");
    assert_eq!(code(&w.dial("live-1", Some(minted), callee.clone()).await.expect_error(403)), "dial_requires_api_key");
    let reader = w.t.api_key(&w.ws, &[Scope::RealtimeRead]).await;
    let error = w.dial("live-1", Some(&reader), callee.clone()).await.expect_error(403);
    assert_eq!(error["type"], "api_error");
    assert!(error["message"].as_str().unwrap_or("").contains("realtime:dial"), "{error}");

    for (body, loc) in [
        (json!({}), "phone_number"),
        (json!({"phone_number": "4155550123"}), "phone_number"),
        (json!({"phone_number": "+1234567"}), "phone_number"),
        (json!({"phone_number": "+1234567890123456"}), "phone_number"),
        (json!({"phone_number": CALLEE, "caller_number": "+1"}), "caller_number"),
        (json!({"phone_number": CALLEE, "extra": true}), "extra"),
    ] {
        let error = w.dial("live-1", Some(&w.key), body.clone()).await.expect_error(422);
        assert_eq!(error["errors"][0]["loc"], json!(["body", loc]), "{body}: {error}");
    }

    assert_eq!(code(&w.dial("no-such", Some(&w.key), callee.clone()).await.expect_error(404)), "session_not_found");
    assert_eq!(code(&w.dial("ended-1", Some(&w.key), callee.clone()).await.expect_error(409)), "session_not_live");
    for caller in [INACTIVE_CALLER, "+15559999999"] {
        let body = json!({"phone_number": CALLEE, "caller_number": caller});
        assert_eq!(
            code(&w.dial("live-1", Some(&w.key), body).await.expect_error(400)),
            "caller_number_not_available",
            "{caller}"
        );
    }
    let blocked = json!({"phone_number": BLOCKED, "caller_number": ACTIVE_CALLER});
    assert_eq!(code(&w.dial("live-1", Some(&w.key), blocked).await.expect_error(403)), "do_not_call");

    // A session of another workspace is not found, whatever it is.
    let other = w.t.workspace("other").await;
    let other_key = w.t.api_key(&other, &[Scope::RealtimeDial]).await;
    assert_eq!(code(&w.dial("live-1", Some(&other_key), callee.clone()).await.expect_error(404)), "session_not_found");

    // The workspace's switch comes before its lists.
    let mut settings = w.ws.settings.clone();
    settings.phone_calls_enabled = false;
    w.t.app.store.update_workspace(&w.ws.id, &settings, None).await.expect("settings");
    assert_eq!(code(&w.dial("live-1", Some(&w.key), callee).await.expect_error(403)), "phone_calls_disabled");
    assert!(w.phone.dials.lock().expect("lock").is_empty(), "nothing rejected reached the phone");
}

async fn a_dial_is_placed_once_per_session_and_counts_against_the_minute_limit(w: World) {
    w.session("live-1", false).await;
    w.session("live-2", false).await;
    let body = json!({"phone_number": CALLEE, "caller_number": ACTIVE_CALLER});
    let accepted = w.dial("live-1", Some(&w.key), body.clone()).await.expect(202);
    let dial_id = accepted["dial_id"].as_str().expect("dial_id").to_owned();
    assert!(uuid::Uuid::parse_str(&dial_id).is_ok(), "{accepted}");
    {
        let dials = w.phone.dials.lock().expect("lock");
        assert_eq!(
            *dials,
            [PhoneDial {
                dial_id: dial_id.clone(),
                session_id: "live-1".into(),
                phone_number: CALLEE.into(),
                caller_number: ACTIVE_CALLER.into(),
                room_name: Some("room".into()),
            }]
        );
    }
    let stored = w.t.app.store.dial_of_session("live-1").await.expect("read").expect("the dial");
    assert_eq!(stored.caller_number.as_deref(), Some(ACTIVE_CALLER));
    assert_eq!(code(&w.dial("live-1", Some(&w.key), body.clone()).await.expect_error(409)), "session_already_dialed");

    // Ten minutes of calls this month use the workspace's limit up.
    let now = svc_server::app::now_us();
    let outcome =
        DialOutcome { answered_us: Some(now), ended_us: now + 600_000_000, outcome: "completed", billed_seconds: 600 };
    w.t.app.store.finish_dial(&dial_id, &outcome).await.expect("finish");
    assert_eq!(code(&w.dial("live-2", Some(&w.key), body).await.expect_error(403)), "minute_limit_exceeded");
    assert_eq!(w.phone.dials.lock().expect("lock").len(), 1);
}

async fn a_dial_the_runtime_cannot_place_leaves_the_session_free_to_dial(w: World) {
    w.session("live-1", false).await;
    let body = json!({"phone_number": CALLEE});
    *w.phone.refuse.lock().expect("lock") = Some(DialRefusal::NotRunning);
    assert_eq!(code(&w.dial("live-1", Some(&w.key), body.clone()).await.expect_error(409)), "session_not_live");
    *w.phone.refuse.lock().expect("lock") = Some(DialRefusal::Failed("the trunk is unreachable".into()));
    let error = w.dial("live-1", Some(&w.key), body.clone()).await.expect_error(503);
    assert!(error["code"].is_null(), "{error}");
    assert!(w.t.app.store.dial_of_session("live-1").await.expect("read").is_none(), "an unplaced dial is forgotten");
    w.dial("live-1", Some(&w.key), body).await.expect(202);
    // No caller id asked for: the trunk's default is what the callee sees, and what is kept.
    let stored = w.t.app.store.dial_of_session("live-1").await.expect("read").expect("the dial");
    assert_eq!(stored.caller_number.as_deref(), Some(TRUNK_CALLER));
    assert_eq!(w.phone.dials.lock().expect("lock")[0].caller_number, TRUNK_CALLER);
}

async fn a_do_not_call_list_that_cannot_be_read_is_not_consent(w: World) {
    w.session("live-1", false).await;
    w.t.app.store.execute_for_tests("DROP TABLE do_not_call").await.expect("break the list");
    let error = w.dial("live-1", Some(&w.key), json!({"phone_number": CALLEE})).await.expect_error(503);
    assert_eq!(code(&error), "consent_check_unavailable");
    assert!(w.phone.dials.lock().expect("lock").is_empty());
}

/// `svc serve` without a phone trunk (the runtime's dispatcher says no phone).
mod without_trunk {
    use super::*;

    crate::on_both_backends!(a_server_without_a_phone_trunk_says_so);

    async fn a_server_without_a_phone_trunk_says_so(t: TestApp) {
        let mut ws = t.workspace("acme").await;
        ws.settings.phone_calls_enabled = true;
        t.app.store.update_workspace(&ws.id, &ws.settings, None).await.expect("settings");
        let key = t.api_key(&ws, &[Scope::RealtimeDial]).await;
        let error =
            t.post("/realtime/session/any/dial", Some(&key), json!({"phone_number": CALLEE})).await.expect_error(404);
        assert_eq!(error["code"], "session_not_found");
        let project = t.app.store.default_project(&ws.id).await.expect("project").id;
        insert_session(&t, &ws.id, &project, "live-1", false).await;
        let error = t
            .post("/realtime/session/live-1/dial", Some(&key), json!({"phone_number": CALLEE}))
            .await
            .expect_error(403);
        assert_eq!(error["code"], "phone_calls_disabled");
        assert!(error["message"].as_str().unwrap_or("").contains("trunk"), "{error}");
    }
}
