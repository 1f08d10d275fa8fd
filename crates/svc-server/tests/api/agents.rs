//! Workspace catalog agents.

use serde_json::json;

use crate::common::TestApp;

crate::on_both_backends!(agents_crud_with_roles, agent_bodies_are_validated);

async fn agents_crud_with_roles(t: TestApp) {
    let ws = t.workspace("acme").await;
    let other = t.workspace("beta").await;
    let editor = t.user_token(&t.user(&ws, "ed@acme.test", &["agents-admin"], &[]).await).await;
    let viewer = t.user_token(&t.user(&ws, "vi@acme.test", &[], &[]).await).await;
    let outsider = t.user_token(&t.user(&other, "ed@beta.test", &["admin"], &[]).await).await;
    let body = json!({
        "name": "front-desk",
        "description": "Greets visitors",
        "config": {"instructions": "You greet {{visitor}}.", "greeting": "Welcome!", "model": "provider_a",
                    "voice": {"name": "Puck"}, "tools": [{"kind": "end_call"}], "interruption_sensitivity": "high"}
    });
    let created = t.post("/agents", Some(&editor), body.clone()).await.expect(201);
    assert_eq!(created["name"], "front-desk");
    assert_eq!(created["config"]["voice"], json!({"name": "Puck"}));
    t.post("/agents", Some(&editor), body.clone()).await.expect_error(409);
    t.post("/agents", Some(&viewer), json!({"name": "other"})).await.expect_error(403);
    let listed = t.get("/agents", Some(&viewer)).await.expect(200);
    assert_eq!(listed.as_array().expect("array").len(), 1);
    assert_eq!(t.get("/agents/front-desk", Some(&viewer)).await.expect(200)["config"], created["config"]);
    t.get("/agents/front-desk", Some(&outsider)).await.expect_error(404);
    assert_eq!(t.get("/agents", Some(&outsider)).await.expect(200), json!([]));

    let patched = t
        .send_json(
            "PATCH",
            "/agents/front-desk",
            Some(&editor),
            json!({"description": null, "config": {"instructions": "New."}}),
        )
        .await
        .expect(200);
    assert_eq!(patched["description"], json!(null));
    assert_eq!(patched["config"], json!({"instructions": "New."}));
    assert!(patched["updated_at"].as_f64() >= patched["created_at"].as_f64());
    // `config` is not nullable (the schema says so): an agent always has one.
    let error =
        t.send_json("PATCH", "/agents/front-desk", Some(&editor), json!({"config": null})).await.expect_error(422);
    assert_eq!(error["errors"][0]["loc"], json!(["body", "config"]), "{error}");
    t.send_json("PATCH", "/agents/front-desk", Some(&viewer), json!({})).await.expect_error(403);
    t.send_json("PATCH", "/agents/missing", Some(&editor), json!({})).await.expect_error(404);
    t.delete("/agents/front-desk", Some(&viewer)).await.expect_error(403);
    t.delete("/agents/front-desk", Some(&editor)).await.expect(204);
    t.delete("/agents/front-desk", Some(&editor)).await.expect_error(404);
}

async fn agent_bodies_are_validated(t: TestApp) {
    let ws = t.workspace("acme").await;
    let editor = t.user_token(&t.user(&ws, "ed@acme.test", &["admin"], &[]).await).await;
    let hook = json!({"trigger": "user.speech.timeout", "timeout_seconds": 20, "action": {"type": "say", "text": "Still there?"}});
    let error = t
        .post(
            "/agents",
            Some(&editor),
            json!({"name": "Front Desk", "config": {"instructions": "x".repeat(131_073), "hooks": vec![hook; 17], "unknown": 1}}),
        )
        .await
        .expect_error(422);
    let locs: Vec<_> = error["errors"].as_array().expect("errors").iter().map(|e| e["loc"].clone()).collect();
    assert_eq!(
        locs,
        vec![
            json!(["body", "name"]),
            json!(["body", "config", "hooks"]),
            json!(["body", "config", "unknown"]),
            json!(["body", "config", "instructions"])
        ]
    );
    t.post("/agents", Some(&editor), json!({"name": "a".repeat(101)})).await.expect_error(422);
    // Tool and model rules are the start's own: a config accepted here loads at start.
    let error = t
        .post(
            "/agents",
            Some(&editor),
            json!({"name": "tooly", "config": {"tools": [{"kind": "server"}], "model": {"provider": "provider_z"}}}),
        )
        .await
        .expect_error(422);
    let kinds: Vec<_> = error["errors"].as_array().expect("errors").iter().map(|e| e["type"].clone()).collect();
    assert!(kinds.contains(&json!("invalid_tool_config")) && kinds.contains(&json!("union_tag_invalid")), "{error}");
    t.post("/agents", Some(&editor), json!({"name": "ok-name"})).await.expect(201);
}
