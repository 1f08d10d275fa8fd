//! Minted end-user tokens: validation, lifetime, idempotency, revocation, project provisioning.

use serde_json::json;
use svc_domain::Scope;

use crate::common::TestApp;

crate::on_both_backends!(
    mint_validates_every_field,
    mint_sets_the_requested_lifetime,
    minting_is_idempotent_per_end_user_until_revoked,
    revocation_is_workspace_scoped_and_idempotent,
    minted_tokens_cannot_mint_read_the_timeline_or_file_support,
    each_end_user_gets_its_own_project,
);

async fn mint_validates_every_field(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let error = t
        .post(
            "/auth/token",
            Some(&key),
            json!({"ttl_seconds": 59, "scopes": ["resources:read"], "extra": "private-value"}),
        )
        .await
        .expect_error(422);
    assert_eq!(error["type"], "validation_error");
    let locs: Vec<_> = error["errors"].as_array().expect("errors").iter().map(|e| e["loc"].clone()).collect();
    assert_eq!(
        locs,
        vec![
            json!(["body", "external_user_id"]),
            json!(["body", "ttl_seconds"]),
            json!(["body", "scopes", 0]),
            json!(["body", "extra"])
        ]
    );
    assert!(!error.to_string().contains("private-value"), "payload values are never echoed");
    for ttl in [60, 86_400] {
        t.post("/auth/token", Some(&key), json!({"external_user_id": "u", "ttl_seconds": ttl})).await.expect(200);
    }
    for ttl in [json!(86_401), json!(0), json!(-5), json!(120.5), json!("60")] {
        t.post("/auth/token", Some(&key), json!({"external_user_id": "u", "ttl_seconds": ttl})).await.expect_error(422);
    }
    t.post("/auth/token", Some(&key), json!({"external_user_id": "x".repeat(257)})).await.expect_error(422);
}

async fn mint_sets_the_requested_lifetime(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let now = svc_server::app::now_us() / 1_000_000;
    let default = t.post("/auth/token", Some(&key), json!({"external_user_id": "u"})).await.expect(200);
    let expires = default["expires_at"].as_i64().expect("integer");
    assert!((now + 86_400..=now + 86_402).contains(&expires), "default lifetime is 24 h");
    let short =
        t.post("/auth/token", Some(&key), json!({"external_user_id": "u", "ttl_seconds": 90})).await.expect(200);
    let expires = short["expires_at"].as_i64().expect("integer");
    assert!((now + 90..=now + 92).contains(&expires));
}

async fn minting_is_idempotent_per_end_user_until_revoked(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let first = t.minted(&key, "alice", &[]).await;
    let second = t.minted(&key, "alice", &["realtime:read"]).await;
    let bob = t.minted(&key, "bob", &[]).await;
    assert_eq!(first["token_id"], second["token_id"], "same end user, same grant");
    assert_ne!(first["token_id"], bob["token_id"]);
    // Each mint carries the scopes it asked for.
    assert_eq!(
        t.get("/sessions", first["jwt"].as_str()).await.expect_error(403)["message"],
        "API key missing required scopes: realtime:read"
    );
    t.get("/sessions", second["jwt"].as_str()).await.expect(200);

    let token_id = first["token_id"].as_str().expect("id");
    t.delete(&format!("/auth/token/{token_id}"), Some(&key)).await.expect(204);
    for jwt in [&first["jwt"], &second["jwt"]] {
        assert_eq!(t.get("/realtime/verify", jwt.as_str()).await.expect_unauthorized(), "Token has been revoked");
    }
    t.get("/realtime/verify", bob["jwt"].as_str()).await.expect(200);
    let fresh = t.minted(&key, "alice", &[]).await;
    assert_ne!(fresh["token_id"], first["token_id"], "a revoked grant is never reused");
    t.get("/realtime/verify", fresh["jwt"].as_str()).await.expect(200);
}

async fn revocation_is_workspace_scoped_and_idempotent(t: TestApp) {
    let ws = t.workspace("acme").await;
    let other = t.workspace("beta").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let other_key = t.api_key(&other, &[Scope::UserTokensMint]).await;
    let minted = t.minted(&key, "alice", &[]).await;
    let path = format!("/auth/token/{}", minted["token_id"].as_str().expect("id"));
    t.delete(&path, Some(&other_key)).await.expect_error(404);
    t.get("/realtime/verify", minted["jwt"].as_str()).await.expect(200);
    t.delete(&path, Some(&key)).await.expect(204);
    t.delete(&path, Some(&key)).await.expect(204);
    t.delete("/auth/token/not-a-token", Some(&key)).await.expect_error(404);
    let reader = t.api_key(&ws, &[Scope::RealtimeRead]).await;
    let error = t.delete(&path, Some(&reader)).await.expect_error(403);
    assert_eq!(error["message"], "API key missing required scopes: user_tokens:mint");
}

async fn minted_tokens_cannot_mint_read_the_timeline_or_file_support(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let minted = t.minted(&key, "alice", &["realtime:read", "realtime:delete", "connectors:read"]).await;
    let jwt = minted["jwt"].as_str();
    let error = t.post("/auth/token", jwt, json!({"external_user_id": "mallory"})).await.expect_error(403);
    assert_eq!(error["message"], "API key missing required scopes: user_tokens:mint");
    let id = uuid::Uuid::new_v4();
    t.get(&format!("/sessions/{id}/timeline"), jwt).await.expect_error(403);
    t.post("/support/requests", jwt, json!({"message": "help"})).await.expect_error(403);
    // What a minted token may do, it can.
    t.post("/realtime/session/prepare-room", jwt, json!({})).await.expect(201);
    t.get(&format!("/sessions/{id}"), jwt).await.expect_error(404);
}

async fn each_end_user_gets_its_own_project(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint, Scope::RealtimeRead]).await;
    let alice = t.minted(&key, "alice", &["realtime:read"]).await;
    let again = t.minted(&key, "alice", &["realtime:read"]).await;
    let bob = t.minted(&key, "bob", &["realtime:read"]).await;
    let alice_project = t.get("/projects/default", alice["jwt"].as_str()).await.expect(200);
    assert_eq!(alice_project["kind"], "end_user");
    assert_eq!(alice_project["external_user_id"], "alice");
    assert_eq!(t.get("/projects/default", again["jwt"].as_str()).await.expect(200)["id"], alice_project["id"]);
    assert_ne!(t.get("/projects/default", bob["jwt"].as_str()).await.expect(200)["id"], alice_project["id"]);
    let default = t.get("/projects/default", Some(&key)).await.expect(200);
    assert_eq!(default["kind"], "default");
    assert_ne!(default["id"], alice_project["id"]);
}
