//! Support requests.

use serde_json::json;
use svc_domain::Scope;

use crate::common::TestApp;

crate::on_both_backends!(
    support_requests_are_validated_and_stored,
    text_with_a_nul_character_is_refused_on_both_backends
);

async fn support_requests_are_validated_and_stored(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeUse]).await;
    let created = t
        .post(
            "/support/requests",
            Some(&key),
            json!({"message": "The agent stopped talking", "subject": "Silence", "contact_email": "dev@acme.test", "diagnostics": {"sdk": "1.2.3"}}),
        )
        .await
        .expect(201);
    assert_eq!(created["status"], "open");
    assert_eq!(created["session_id"], json!(null));
    assert_eq!(created["id"].as_str().expect("id").len(), 36);
    assert_eq!(t.app.store.count_support_requests(&ws.id).await.expect("count"), 1);
    let error = t
        .post("/support/requests", Some(&key), json!({"message": "", "contact_email": "nope", "x": 1}))
        .await
        .expect_error(422);
    assert_eq!(error["errors"].as_array().expect("errors").len(), 3);
    // A session of another project is not found.
    let unknown = uuid::Uuid::new_v4().to_string();
    t.post("/support/requests", Some(&key), json!({"message": "m", "session_id": unknown})).await.expect_error(404);
    assert_eq!(
        t.app.store.count_support_requests(&ws.id).await.expect("count"),
        1,
        "nothing stored for a rejected request"
    );
}

/// Postgres cannot store U+0000 in text; SQLite can. Both refuse it at the boundary (found by the
/// API fuzzer as a 500 on Postgres).
async fn text_with_a_nul_character_is_refused_on_both_backends(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::SupportWrite, Scope::UserTokensMint]).await;
    let error = t.post("/support/requests", Some(&key), json!({"message": "a\u{0}b"})).await.expect_error(422);
    assert_eq!(error["errors"][0]["loc"], json!(["body", "message"]));
    assert_eq!(error["errors"][0]["type"], "string_nul_character");
    let error = t.post("/auth/token", Some(&key), json!({"external_user_id": "\u{0}"})).await.expect_error(422);
    assert_eq!(error["errors"][0]["type"], "string_nul_character");
    // Inside free-form JSON it is stored as the JSON escape, which both backends keep.
    let created = t
        .post("/support/requests", Some(&key), json!({"message": "ok", "diagnostics": {"raw": "a\u{0}b"}}))
        .await
        .expect(201);
    assert_eq!(created["status"], "open");
}
