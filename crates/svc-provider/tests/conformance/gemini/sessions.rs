//! The session's connections: resumption on goAway, and close codes both ways (svc's own
//! close, 1000, is checked at the end of every test).

use serde_json::{Value, json};
use svc_domain::model::ProviderABlock;
use svc_provider_core::ProviderEvent;

use super::{Run, count, has, in_every_mode, native_bytes, native_frames, provider_a, server_vad};
use crate::fake::{self, Mode};

/// 200 ms of user audio a batch: what the fake waits for before each of its steps.
const BATCH_FRAMES: usize = 10;

fn handles(events: &[ProviderEvent]) -> Vec<Option<String>> {
    events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::ResumptionHandle(handle) => Some(handle.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn go_away_resumes_with_the_latest_handle_and_replays_the_audio_since_it() {
    in_every_mode(go_away).await;
}

async fn go_away(mode: Mode) {
    let mut run = Run::start(mode, "resume", provider_a(server_vad())).await;
    run.ready().await;
    // A, then a resumable handle (and a non-resumable update); B, then the latest handle.
    for handles_seen in 1..=2 {
        run.send_all(native_frames(handles_seen, BATCH_FRAMES)).await;
        run.until(&format!("resumption handle {handles_seen}"), |seen| {
            count(seen, |e| matches!(e, ProviderEvent::ResumptionHandle(Some(_)))) >= handles_seen
        })
        .await;
    }
    // C: sent after the latest handle, before the rotation: the handle's state lacks it.
    run.send_all(native_frames(3, BATCH_FRAMES)).await;
    run.until("Reconnecting", |seen| has(seen, |e| matches!(e, ProviderEvent::Reconnecting { .. }))).await;
    // D: sent while svc rotates.
    run.send_all(native_frames(4, BATCH_FRAMES)).await;
    run.until("Reconnected", |seen| has(seen, |e| matches!(e, ProviderEvent::Reconnected { .. }))).await;
    let done = run.finish(2).await;
    let (old, new) = (done.facts(0), done.facts(1));
    assert_eq!(old["handles"], json!(["handle-0-1", null, "handle-0-2"]), "{mode}: what the fake issued");
    let latest = Some("handle-0-2".to_owned());
    assert_eq!(handles(&done.seen), [Some("handle-0-1".to_owned()), latest.clone()], "{mode}");
    let reconnecting: Vec<&ProviderEvent> =
        done.seen.iter().filter(|e| matches!(e, ProviderEvent::Reconnecting { .. })).collect();
    assert_eq!(reconnecting, [&ProviderEvent::Reconnecting { seconds_remaining: Some(10.0) }], "{mode}");
    assert_eq!(done.count(|e| *e == ProviderEvent::Reconnected { resumed: true }), 1, "{mode}");
    // The new connection resumed with the latest handle, nothing else in sessionResumption.
    let setup = &fake::client_messages(&done.reports[1])[0];
    assert_eq!(setup["setup"]["sessionResumption"], json!({"handle": latest}), "{mode}");
    assert_eq!(new["resumed_with"], json!(latest), "{mode}");
    // Every user audio byte arrived once: A, B and C on the old connection; C again (the
    // replay, checked byte for byte by the fake) and D on the new one.
    let batch = native_bytes(BATCH_FRAMES);
    assert_eq!(old["audio_bytes"].as_u64(), Some(3 * batch), "{mode}: old connection");
    assert_eq!(new["replay_expected_bytes"].as_u64(), Some(batch), "{mode}: audio after the latest handle");
    assert_eq!(new["audio_bytes"].as_u64(), Some(2 * batch), "{mode}: new connection (replay and D)");
    assert_eq!(done.errors(), [], "{mode}");
    // svc closed the old socket itself (1000) before resuming, and the new one at the end.
    done.assert_closed_normally(0);
    done.assert_closed_normally(1);
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn an_internal_error_close_is_answered_and_the_session_resumes() {
    in_every_mode(|mode| async move {
        let mut run = Run::start(mode, "close_1011", provider_a(ProviderABlock::default())).await;
        run.until("Reconnected", |seen| has(seen, |e| matches!(e, ProviderEvent::Reconnected { .. }))).await;
        let done = run.finish(2).await;
        let (old, new) = (&done.reports[0], &done.reports[1]);
        assert_eq!(old["closed_by_fake"][0], 1011, "{mode}");
        assert_eq!(old["client_answered_close"], true, "{mode}: svc answers the close frame");
        let handle = done.facts(0)["handles"][0].clone();
        assert_eq!(done.facts(1)["resumed_with"], handle, "{mode}");
        assert_eq!(done.count(|e| *e == ProviderEvent::Reconnected { resumed: true }), 1, "{mode}");
        assert_eq!(done.count(|e| matches!(e, ProviderEvent::Reconnecting { .. })), 1, "{mode}");
        assert_eq!(done.errors(), [], "{mode}");
        assert_eq!(new["closed_by_fake"], Value::Null, "{mode}");
        done.assert_closed_normally(1);
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn a_setup_refused_with_1007_is_fatal() {
    in_every_mode(|mode| async move {
        let mut run = Run::start(mode, "setup_1007", provider_a(ProviderABlock::default())).await;
        run.until("Closed", |seen| has(seen, |e| matches!(e, ProviderEvent::Closed { .. }))).await;
        // No retry after a fatal error: the adapter is over, after one connection.
        let done = run.finish(1).await;
        let errors = done.errors();
        assert!(errors.len() == 1 && errors[0].fatal && errors[0].code == "invalid_argument", "{mode}: {errors:?}");
        assert!(!done.seen.iter().any(|e| matches!(e, ProviderEvent::Ready { .. })), "{mode}");
        let report = &done.reports[0];
        assert_eq!(report["closed_by_fake"][0], 1007, "{mode}");
        assert_eq!(report["client_answered_close"], true, "{mode}: svc answers the close frame");
    })
    .await;
}
