//! Session history: listing and paging, project scoping, transcript, usage, timeline, recording,
//! delete.

use serde_json::json;
use svc_domain::Scope;
use svc_store::{ArtifactRecord, NewSession, NewTimelineEvent, NewTurn, UsageRecord};
use svc_wire::rest::UsageTokens;

use crate::common::TestApp;

crate::on_both_backends!(
    lists_newest_first_with_stable_paging,
    list_query_is_validated,
    history_is_scoped_to_the_credentials_project,
    transcript_timeline_and_usage_read_back,
    usage_fields_wait_for_recorded_numbers,
    delete_removes_rows_and_files,
    capabilities_follow_configuration_and_entitlement,
);

const T0: i64 = 1_760_000_000_000_000;

async fn seed(t: &TestApp, project_id: &str, workspace_id: &str, id: &str, started_us: i64) {
    t.app
        .store
        .insert_session(&NewSession {
            id,
            workspace_id,
            project_id,
            source: "live",
            status: "active",
            usage_status: "pending",
            started_us,
            ended_us: None,
            provider: Some("provider_b"),
            model: Some("gpt-realtime-2.1"),
            title: None,
            room_name: Some("room"),
            config: None,
            now_us: started_us,
        })
        .await
        .expect("seed session");
}

fn uuid(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

async fn lists_newest_first_with_stable_paging(t: TestApp) {
    let ws = t.workspace("acme").await;
    let project = t.app.store.default_project(&ws.id).await.expect("project");
    let key = t.api_key(&ws, &[Scope::RealtimeRead]).await;
    for n in 0..45 {
        seed(&t, &project.id, &ws.id, &uuid(n), T0 + i64::from(n) * 1_500_000).await;
    }
    let first = t.get("/sessions", Some(&key)).await.expect(200);
    assert_eq!(first.as_array().expect("array").len(), 20, "default page is 20");
    assert_eq!(first[0]["id"], uuid(44));
    assert_eq!(first[0]["started_at"], json!(1_760_000_066.0));
    assert_eq!(first[0]["ended_at"], json!(null));
    assert_eq!(first[0]["status"], "active");
    assert_eq!(first[0]["provider"], "provider_b");
    assert_eq!(first[0]["has_resumption_handle"], false);
    let mut seen: Vec<String> = Vec::new();
    let mut before: Option<f64> = None;
    loop {
        let path = match before {
            Some(b) => format!("/sessions?limit=17&before_started_at={b}"),
            None => "/sessions?limit=17".to_owned(),
        };
        let page = t.get(&path, Some(&key)).await.expect(200);
        let page = page.as_array().expect("array").clone();
        if page.is_empty() {
            break;
        }
        before = page.last().and_then(|s| s["started_at"].as_f64());
        seen.extend(page.iter().map(|s| s["id"].as_str().expect("id").to_owned()));
    }
    let expected: Vec<String> = (0..45).rev().map(uuid).collect();
    assert_eq!(seen, expected);
}

async fn list_query_is_validated(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeRead]).await;
    for query in
        ["limit=0", "limit=101", "limit=abc", "limit=-1", "before_started_at=yesterday", "before_started_at=NaN"]
    {
        let error = t.get(&format!("/sessions?{query}"), Some(&key)).await.expect_error(422);
        assert_eq!(error["type"], "validation_error");
        assert_eq!(error["errors"][0]["loc"][0], "query", "{query}");
    }
    let error = t.get("/sessions?limit=0&before_started_at=x", Some(&key)).await.expect_error(422);
    assert_eq!(error["errors"].as_array().expect("errors").len(), 2, "every problem is reported");
    for query in ["limit=1", "limit=100", "before_started_at=0", "before_started_at=1760000000.5", "unknown=1"] {
        t.get(&format!("/sessions?{query}"), Some(&key)).await.expect(200);
    }
}

async fn history_is_scoped_to_the_credentials_project(t: TestApp) {
    let ws = t.workspace("acme").await;
    let other = t.workspace("beta").await;
    let key = t.api_key(&ws, &[Scope::RealtimeRead, Scope::UserTokensMint, Scope::RealtimeDelete]).await;
    let other_key = t.api_key(&other, &Scope::ALL).await;
    let project = t.app.store.default_project(&ws.id).await.expect("project");
    seed(&t, &project.id, &ws.id, &uuid(1), T0).await;
    let minted = t.minted(&key, "alice", &["realtime:read", "realtime:delete"]).await;
    let alice = minted["jwt"].as_str();
    let alice_project = t.get("/projects/default", alice).await.expect(200);
    seed(&t, alice_project["id"].as_str().expect("id"), &ws.id, &uuid(2), T0 + 1).await;

    let listed = t.get("/sessions", Some(&key)).await.expect(200);
    assert_eq!(listed.as_array().expect("array").len(), 1, "end-user sessions are not listed with the API key");
    assert_eq!(listed[0]["id"], uuid(1));
    let listed = t.get("/sessions", alice).await.expect(200);
    assert_eq!(listed[0]["id"], uuid(2));
    for suffix in ["", "/transcript", "/usage", "/recording"] {
        t.get(&format!("/sessions/{}{suffix}", uuid(2)), Some(&key)).await.expect_error(404);
        t.get(&format!("/sessions/{}{suffix}", uuid(1)), alice).await.expect_error(404);
        t.get(&format!("/sessions/{}{suffix}", uuid(1)), Some(&other_key)).await.expect_error(404);
    }
    t.get(&format!("/sessions/{}/timeline", uuid(1)), Some(&other_key)).await.expect_error(404);
    t.delete(&format!("/sessions/{}", uuid(1)), alice).await.expect_error(404);
    t.delete(&format!("/sessions/{}", uuid(1)), Some(&other_key)).await.expect_error(404);
    t.get(&format!("/sessions/{}", uuid(1)), Some(&key)).await.expect(200);
    t.get("/sessions/not-a-uuid", Some(&key)).await.expect_error(404);
}

async fn transcript_timeline_and_usage_read_back(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeRead, Scope::RealtimeLogs]).await;
    let project = t.app.store.default_project(&ws.id).await.expect("project");
    let id = uuid(7);
    seed(&t, &project.id, &ws.id, &id, T0).await;
    let turns = vec![
        NewTurn { ts_us: T0 + 1_000_000, role: "user", text: "Hello there".into() },
        NewTurn { ts_us: T0 + 2_500_000, role: "assistant", text: "Hi! How can I help?".into() },
    ];
    t.app.store.append_turns(&id, &turns).await.expect("turns");
    t.app
        .store
        .append_timeline(
            &id,
            &[
                NewTimelineEvent { ts_us: T0, kind: "session.started".into(), data: json!({"provider": "provider_b"}) },
                NewTimelineEvent { ts_us: T0 + 1_000_000, kind: "transcript.user".into(), data: json!({"chars": 11}) },
            ],
        )
        .await
        .expect("timeline");
    let transcript = t.get(&format!("/sessions/{id}/transcript"), Some(&key)).await.expect(200);
    assert_eq!(
        transcript,
        json!([
            {"ts": 1_760_000_001.0, "role": "user", "text": "Hello there"},
            {"ts": 1_760_000_002.5, "role": "assistant", "text": "Hi! How can I help?"}
        ])
    );
    let timeline = t.get(&format!("/sessions/{id}/timeline"), Some(&key)).await.expect(200);
    assert_eq!(timeline["session_id"], id);
    assert_eq!(
        timeline["events"][0],
        json!({"seq": 0, "ts": 1_760_000_000.0, "type": "session.started", "data": {"provider": "provider_b"}})
    );
    assert_eq!(timeline["events"][1]["seq"], 1);
    t.get(&format!("/sessions/{id}/recording"), Some(&key)).await.expect_error(404);
}

async fn usage_fields_wait_for_recorded_numbers(t: TestApp) {
    let ws = t.workspace("acme").await;
    let project = t.app.store.default_project(&ws.id).await.expect("project");
    let starter = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let (live, done, broken) = (uuid(1), uuid(2), uuid(3));
    for id in [&live, &done, &broken] {
        seed(&t, &project.id, &ws.id, id, T0).await;
    }
    let pending = t.get(&format!("/sessions/{live}/usage"), Some(&starter)).await.expect(200);
    assert_eq!(
        pending,
        json!({"status": "active", "usage_status": "pending", "duration_seconds": null, "turn_count": null,
               "user_speaking_seconds": null, "agent_speaking_seconds": null, "provider": "provider_b",
               "model": null, "tokens": null})
    );
    let tokens = UsageTokens {
        input_tokens: 120,
        output_tokens: 80,
        total_tokens: 200,
        input_audio_tokens: 100,
        ..Default::default()
    };
    let usage =
        UsageRecord { turn_count: 4, user_speaking_ms: 12_500, agent_speaking_ms: 20_250, tokens: Some(tokens) };
    t.app.store.finish_session(&done, "completed", T0 + 95_000_000, Some(&usage)).await.expect("finish");
    let recorded = t.get(&format!("/sessions/{done}/usage"), Some(&starter)).await.expect(200);
    assert_eq!(recorded["usage_status"], "recorded");
    assert_eq!(recorded["duration_seconds"], json!(95.0));
    assert_eq!(recorded["turn_count"], 4);
    assert_eq!(recorded["user_speaking_seconds"], json!(12.5));
    assert_eq!(recorded["agent_speaking_seconds"], json!(20.25));
    assert_eq!(recorded["model"], "gpt-realtime-2.1");
    assert_eq!(recorded["tokens"]["input_audio_tokens"], 100);
    assert_eq!(recorded["tokens"]["output_text_tokens"], 0);
    t.app.store.finish_session(&broken, "error", T0 + 3_000_000, None).await.expect("finish");
    let unavailable = t.get(&format!("/sessions/{broken}/usage"), Some(&starter)).await.expect(200);
    assert_eq!(
        (unavailable["status"].clone(), unavailable["usage_status"].clone()),
        (json!("error"), json!("unavailable"))
    );
    assert_eq!(unavailable["duration_seconds"], json!(3.0));
    assert_eq!(unavailable["tokens"], json!(null));
}

async fn delete_removes_rows_and_files(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeRead, Scope::RealtimeDelete]).await;
    let project = t.app.store.default_project(&ws.id).await.expect("project");
    let id = uuid(9);
    seed(&t, &project.id, &ws.id, &id, T0).await;
    let relative = format!("recordings/{id}.wav");
    let file = t.dir.path().join(&relative);
    std::fs::write(&file, b"RIFF....WAVE").expect("write recording");
    t.app
        .store
        .upsert_artifact(
            &id,
            &ArtifactRecord { kind: "audio".into(), path: relative, content_type: "audio/wav".into(), bytes: 12 },
            T0,
        )
        .await
        .expect("artifact");
    t.app.store.append_turns(&id, &[NewTurn { ts_us: T0, role: "user", text: "secret".into() }]).await.expect("turn");
    let reply = t.get(&format!("/sessions/{id}/recording"), Some(&key)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"RIFF....WAVE");
    assert_eq!(reply.headers["content-type"], "audio/wav");
    t.delete(&format!("/sessions/{id}"), Some(&key)).await.expect(204);
    assert!(!file.exists(), "the recording file is removed");
    assert!(t.app.store.transcript(&id).await.expect("transcript").is_empty());
    t.get(&format!("/sessions/{id}"), Some(&key)).await.expect_error(404);
    t.delete(&format!("/sessions/{id}"), Some(&key)).await.expect_error(404);
}

async fn capabilities_follow_configuration_and_entitlement(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeRead]).await;
    assert_eq!(
        t.get("/sessions/capabilities", Some(&key)).await.expect(200),
        json!({"openai_provider_available": false})
    );
}
