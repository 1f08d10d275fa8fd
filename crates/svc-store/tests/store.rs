//! The store suite: every test runs once on SQLite and once on Postgres.

use svc_domain::{Scope, ScopeSet, WorkspaceSettings};
use svc_store::testing::TestDatabase;
use svc_store::{
    Admission, ApiKeyRecord, ArtifactRecord, Backend, DialOutcome, NewDial, NewSession, NewTimelineEvent, NewToken,
    NewTurn, SessionFilter, Store, StoreError, TokenKind, UsageRecord,
};
use svc_wire::rest::{AgentConfig, UsageTokens};

macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $name() { super::$name(super::TestDatabase::new(super::Backend::Sqlite).await.store.clone()).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $name() {
                let db = super::TestDatabase::new(super::Backend::Postgres).await;
                super::$name(db.store.clone()).await;
                db.store.close().await;
            })*
        }
    };
}

on_both_backends!(
    workspaces_have_unique_slugs_and_a_default_project,
    settings_round_trip_and_phone_lists,
    api_keys_store_hashes_and_revoke_once,
    end_user_grants_are_idempotent_until_revoked,
    end_user_projects_are_provisioned_once,
    user_tokens_and_users,
    sessions_are_project_scoped_and_paged_newest_first,
    paging_never_splits_a_group_of_equal_start_times,
    import_is_atomic_and_delete_removes_everything,
    finishing_a_session_records_usage,
    agents_crud_with_unique_handles,
    room_reservations_are_consumed_once_in_order,
    secrets_are_first_writer_wins,
    concurrent_grant_creation_converges,
    the_concurrency_gate_admits_exactly_the_limit,
    voice_seconds_count_ended_live_sessions_only,
    stale_sessions_are_reaped_and_heartbeats_keep_them_alive,
    a_restarted_node_ends_the_sessions_it_left_behind,
    resumption_handles_are_kept_with_their_time,
    a_session_dials_once_and_its_minutes_outlive_its_history,
    a_retried_writer_batch_is_stored_once,
);

const T0: i64 = 1_750_000_000_000_000;

async fn workspace(store: &Store, slug: &str) -> (String, String) {
    let ws = store.create_workspace(slug, "Acme", "localhost", T0).await.expect("create workspace");
    let project = store.default_project(&ws.id).await.expect("default project");
    (ws.id, project.id)
}

async fn workspaces_have_unique_slugs_and_a_default_project(store: Store) {
    let ws = store.create_workspace("acme", "Acme", "api.acme.test", T0).await.expect("create");
    assert_eq!(store.workspace_by_slug("acme").await.expect("by slug"), ws);
    assert_eq!(store.workspace_by_id(&ws.id).await.expect("by id").slug, "acme");
    let err = store.create_workspace("acme", "Other", "x", T0).await.expect_err("duplicate slug");
    assert!(matches!(err, StoreError::Conflict(ref m) if m.contains("acme")), "{err}");
    let project = store.default_project(&ws.id).await.expect("default project");
    assert_eq!(project.kind, "default");
    assert!(matches!(store.workspace_by_slug("nope").await, Err(StoreError::NotFound(_))));
    assert_eq!(store.list_workspaces().await.expect("list").len(), 1);
}

async fn settings_round_trip_and_phone_lists(store: Store) {
    let (ws, _) = workspace(&store, "acme").await;
    let mut settings = WorkspaceSettings {
        max_concurrent_sessions: Some(3),
        entitled_providers: Some(vec!["provider_a".into()]),
        disabled_server_tools: vec![
            svc_domain::tools::ServerTool::WebSearch,
            svc_domain::tools::ServerTool::ScreenLocate,
        ],
        ..WorkspaceSettings::default()
    };
    settings.consents.video = true;
    store.update_workspace(&ws, &settings, Some("voice.acme.test")).await.expect("update");
    let row = store.workspace_by_id(&ws).await.expect("read back");
    assert_eq!(row.settings, settings);
    assert_eq!(row.host, "voice.acme.test");

    store.upsert_caller_number(&ws, "+14155550100", true).await.expect("add");
    store.upsert_caller_number(&ws, "+14155550101", false).await.expect("add");
    store.upsert_caller_number(&ws, "+14155550100", false).await.expect("flip");
    let numbers = store.caller_numbers(&ws).await.expect("list");
    assert_eq!(numbers.len(), 2);
    assert!(numbers.iter().all(|n| !n.active));
    assert!(store.remove_caller_number(&ws, "+14155550101").await.expect("remove"));
    assert!(!store.remove_caller_number(&ws, "+14155550101").await.expect("remove again"));

    store.add_do_not_call(&ws, "+15555550123").await.expect("dnc");
    store.add_do_not_call(&ws, "+15555550123").await.expect("dnc idempotent");
    assert_eq!(store.do_not_call(&ws).await.expect("dnc list"), vec!["+15555550123".to_owned()]);
}

async fn api_keys_store_hashes_and_revoke_once(store: Store) {
    let (ws, _) = workspace(&store, "acme").await;
    let key = ApiKeyRecord {
        id: "key-1".into(),
        workspace_id: ws.clone(),
        lookup: "abcdefabcdef".into(),
        secret_hash: "00ff".repeat(16),
        scopes: ScopeSet::new([Scope::RealtimeUse]),
        label: None,
        created_us: T0,
        revoked_us: None,
    };
    store.insert_api_key(&key).await.expect("insert");
    let found = store.api_key_by_lookup("abcdefabcdef").await.expect("lookup").expect("present");
    assert_eq!(found, key);
    assert!(found.scopes.contains(Scope::SupportWrite), "expanded on read");
    assert!(store.api_key_by_lookup("zzz").await.expect("lookup").is_none());
    assert!(store.revoke_api_key(&ws, "key-1", T0 + 1).await.expect("revoke"));
    assert!(!store.revoke_api_key(&ws, "key-1", T0 + 2).await.expect("revoke twice"));
    assert_eq!(store.api_key_by_lookup("abcdefabcdef").await.expect("lookup").expect("kept").revoked_us, Some(T0 + 1));
    assert!(!store.revoke_api_key("other-ws", "key-1", T0).await.expect("wrong workspace"));
    assert_eq!(store.list_api_keys(&ws).await.expect("list").len(), 1);
}

async fn end_user_grants_are_idempotent_until_revoked(store: Store) {
    let (ws, _) = workspace(&store, "acme").await;
    let project = store.end_user_project(&ws, "user-7", T0).await.expect("project");
    let first = store.end_user_grant(&ws, "user-7", &project.id, T0).await.expect("grant");
    let again = store.end_user_grant(&ws, "user-7", &project.id, T0 + 5).await.expect("grant again");
    assert_eq!(first.id, again.id);
    let other = store.end_user_grant(&ws, "user-8", &project.id, T0).await.expect("other user");
    assert_ne!(first.id, other.id);
    assert!(store.revoke_token(&ws, &first.id, TokenKind::EndUser, T0 + 10).await.expect("revoke"));
    assert!(!store.revoke_token(&ws, &first.id, TokenKind::EndUser, T0 + 11).await.expect("revoke twice"));
    let fresh = store.end_user_grant(&ws, "user-7", &project.id, T0 + 20).await.expect("after revoke");
    assert_ne!(fresh.id, first.id, "a revoked grant is never handed out again");
    let stored = store.token_by_id(&first.id).await.expect("read").expect("kept");
    assert_eq!(stored.revoked_us, Some(T0 + 10));
    assert_eq!(stored.external_user_id.as_deref(), Some("user-7"));
}

async fn end_user_projects_are_provisioned_once(store: Store) {
    let (ws, default_project) = workspace(&store, "acme").await;
    let a = store.end_user_project(&ws, "u1", T0).await.expect("first");
    let b = store.end_user_project(&ws, "u1", T0 + 1).await.expect("second");
    assert_eq!(a, b);
    assert_ne!(a.id, default_project);
    assert_eq!(a.kind, "end_user");
    assert_eq!(store.project_by_id(&a.id).await.expect("by id"), a);
}

async fn user_tokens_and_users(store: Store) {
    let (ws, _) = workspace(&store, "acme").await;
    let roles = vec!["recordings-admin".to_owned()];
    let caps = vec!["recordings".to_owned()];
    let user = store.create_user(&ws, "ann@acme.test", &roles, &caps, T0).await.expect("user");
    assert!(matches!(store.create_user(&ws, "ann@acme.test", &[], &[], T0).await, Err(StoreError::Conflict(_))));
    assert_eq!(store.user_by_email(&ws, "ann@acme.test").await.expect("by email"), user);
    let token = store
        .insert_user_token(
            &NewToken { kind: TokenKind::UserAccess, workspace_id: &ws, user_id: &user.id, actor_user_id: None },
            T0,
        )
        .await
        .expect("token");
    assert_eq!(token.kind, TokenKind::UserAccess);
    assert_eq!(token.user_id.as_deref(), Some(user.id.as_str()));
    assert!(!store.revoke_token(&ws, &token.id, TokenKind::EndUser, T0).await.expect("kind must match"));
}

fn live_session<'a>(id: &'a str, ws: &'a str, project: &'a str, started_us: i64) -> NewSession<'a> {
    NewSession {
        id,
        workspace_id: ws,
        project_id: project,
        source: "live",
        status: "active",
        usage_status: "pending",
        started_us,
        ended_us: None,
        provider: Some("provider_a"),
        model: None,
        title: None,
        room_name: Some("room"),
        config: None,
        now_us: started_us,
    }
}

async fn sessions_are_project_scoped_and_paged_newest_first(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    let other = store.end_user_project(&ws, "u1", T0).await.expect("other project");
    let ids: Vec<String> = (0..25).map(|i| format!("00000000-0000-0000-0000-{i:012}")).collect();
    for (i, id) in ids.iter().enumerate() {
        store.insert_session(&live_session(id, &ws, &project, T0 + i as i64 * 1000)).await.expect("insert");
    }
    store.insert_session(&live_session("foreign", &ws, &other.id, T0 + 999_999)).await.expect("insert");
    assert_eq!(store.count_live_sessions(&ws).await.expect("count"), 26);

    let page1 =
        store.list_sessions(SessionFilter { project_id: &project, before_us: None, limit: 10 }).await.expect("page 1");
    assert_eq!(page1.len(), 10);
    assert_eq!(page1[0].id, ids[24]);
    let page2 = store
        .list_sessions(SessionFilter { project_id: &project, before_us: Some(page1[9].started_us), limit: 10 })
        .await
        .expect("page 2");
    let page3 = store
        .list_sessions(SessionFilter { project_id: &project, before_us: Some(page2[9].started_us), limit: 10 })
        .await
        .expect("page 3");
    assert_eq!(page3.len(), 5);
    let seen: Vec<&str> = page1.iter().chain(&page2).chain(&page3).map(|s| s.id.as_str()).collect();
    let expected: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(seen, expected, "every session once, newest first");
    assert!(store.session_in_project(&project, "foreign").await.expect("scoped").is_none());
    assert!(store.session_in_project(&other.id, "foreign").await.expect("own").is_some());
}

async fn paging_never_splits_a_group_of_equal_start_times(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    // Starts: 5 distinct, then a group of 4 equal, then 3 distinct.
    let mut starts = vec![T0 + 100, T0 + 90, T0 + 80, T0 + 70, T0 + 60];
    starts.extend([T0 + 50; 4]);
    starts.extend([T0 + 40, T0 + 30, T0 + 20]);
    for (i, started) in starts.iter().enumerate() {
        store.insert_session(&live_session(&format!("s{i:02}"), &ws, &project, *started)).await.expect("insert");
    }
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .list_sessions(SessionFilter { project_id: &project, before_us: before, limit: 7 })
            .await
            .expect("page");
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 7);
        before = page.last().map(|s| s.started_us);
        seen.extend(page.into_iter().map(|s| s.id));
    }
    assert_eq!(seen.len(), 12, "no session skipped or repeated: {seen:?}");

    // A group larger than a page comes back whole.
    let page = store
        .list_sessions(SessionFilter { project_id: &project, before_us: Some(T0 + 60), limit: 2 })
        .await
        .expect("page");
    assert_eq!(page.len(), 4);
    assert!(page.iter().all(|s| s.started_us == T0 + 50));
}

async fn import_is_atomic_and_delete_removes_everything(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    let turns: Vec<NewTurn> = (0..1203)
        .map(|i| NewTurn {
            ts_us: T0 + i,
            role: if i % 2 == 0 { "user" } else { "assistant" },
            text: format!("turn {i}"),
        })
        .collect();
    let events =
        vec![NewTimelineEvent { ts_us: T0, kind: "session.imported".into(), data: serde_json::json!({"turns": 1203}) }];
    let artifact = ArtifactRecord {
        kind: "audio".into(),
        path: "recordings/x.wav".into(),
        content_type: "audio/wav".into(),
        bytes: 44,
    };
    let mut session = live_session("imp", &ws, &project, T0);
    session.source = "import";
    session.status = "completed";
    store.insert_imported_session(&session, &turns, &events, Some(&artifact)).await.expect("import");
    let transcript = store.transcript("imp").await.expect("transcript");
    assert_eq!(transcript.len(), 1203);
    assert_eq!(transcript[1202].text, "turn 1202");
    assert_eq!(transcript[1].role, "assistant");
    assert_eq!(store.timeline("imp").await.expect("timeline")[0].data["turns"], 1203);
    assert_eq!(store.artifact("imp", "audio").await.expect("artifact"), Some(artifact.clone()));

    // A failing import (duplicate id) leaves nothing half-written.
    let err = store.insert_imported_session(&session, &turns, &events, None).await.expect_err("duplicate id");
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert_eq!(store.transcript("imp").await.expect("transcript").len(), 1203);

    let other = store.end_user_project(&ws, "u1", T0).await.expect("other");
    assert_eq!(store.delete_session(&other.id, "imp").await.expect("other project"), None);
    assert_eq!(store.delete_session(&project, "imp").await.expect("delete"), Some(vec![artifact]));
    assert!(store.transcript("imp").await.expect("transcript").is_empty());
    assert!(store.timeline("imp").await.expect("timeline").is_empty());
    assert!(store.artifact("imp", "audio").await.expect("artifact").is_none());
    assert_eq!(store.delete_session(&project, "imp").await.expect("delete twice"), None);
}

async fn finishing_a_session_records_usage(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    store.insert_session(&live_session("s1", &ws, &project, T0)).await.expect("insert");
    store.insert_session(&live_session("s2", &ws, &project, T0)).await.expect("insert");
    let tokens = UsageTokens { input_tokens: 10, output_tokens: 5, total_tokens: 15, ..UsageTokens::default() };
    let usage =
        UsageRecord { turn_count: 3, user_speaking_ms: 1500, agent_speaking_ms: 2500, tokens: Some(tokens.clone()) };
    assert!(store.finish_session("s1", "completed", T0 + 60_000_000, Some(&usage)).await.expect("finish"));
    assert!(!store.finish_session("s1", "error", T0 + 70_000_000, None).await.expect("only once"));
    assert!(store.finish_session("s2", "error", T0 + 1, None).await.expect("finish abnormally"));
    let s1 = store.session_in_project(&project, "s1").await.expect("read").expect("present");
    assert_eq!((s1.status.as_str(), s1.usage_status.as_str()), ("completed", "recorded"));
    assert_eq!(s1.tokens, Some(tokens));
    assert_eq!(s1.turn_count, Some(3));
    let s2 = store.session_in_project(&project, "s2").await.expect("read").expect("present");
    assert_eq!((s2.status.as_str(), s2.usage_status.as_str(), s2.tokens), ("error", "unavailable", None));
    assert_eq!(store.count_live_sessions(&ws).await.expect("count"), 0);
}

async fn agents_crud_with_unique_handles(store: Store) {
    let (ws, _) = workspace(&store, "acme").await;
    let (ws2, _) = workspace(&store, "beta").await;
    let config = AgentConfig { instructions: Some("Be kind to {{name}}.".into()), ..AgentConfig::default() };
    let agent = store.create_agent(&ws, "front-desk", Some("Greets"), &config, T0).await.expect("create");
    assert!(matches!(store.create_agent(&ws, "front-desk", None, &config, T0).await, Err(StoreError::Conflict(_))));
    store.create_agent(&ws2, "front-desk", None, &config, T0).await.expect("same handle in another workspace");
    let found = store.agent_by_name(&ws, "front-desk").await.expect("get").expect("present");
    assert_eq!(found, agent);
    assert_eq!(found.config().expect("decodes"), config);
    let changed = AgentConfig { greeting: Some("Hi".into()), ..config };
    assert!(store.update_agent(&ws, "front-desk", None, &changed, T0 + 1).await.expect("update"));
    let found = store.agent_by_name(&ws, "front-desk").await.expect("get").expect("present");
    assert_eq!((found.config().expect("decodes"), found.description, found.updated_us), (changed, None, T0 + 1));
    assert_eq!(store.list_agents(&ws).await.expect("list").len(), 1);
    assert!(store.delete_agent(&ws, "front-desk").await.expect("delete"));
    assert!(!store.delete_agent(&ws, "front-desk").await.expect("delete twice"));
    assert!(store.agent_by_name(&ws2, "front-desk").await.expect("other kept").is_some());
}

async fn room_reservations_are_consumed_once_in_order(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    store.reserve_room(&ws, &project, "cred", "room-a", T0, T0 + 60_000_000).await.expect("a");
    store.reserve_room(&ws, &project, "cred", "room-b", T0 + 1, T0 + 60_000_000).await.expect("b");
    store.reserve_room(&ws, &project, "cred", "room-old", T0 - 100_000_000, T0 - 1).await.expect("expired");
    assert_eq!(store.count_open_reservations("cred", T0).await.expect("count"), 2);
    assert!(store.consume_room_reservation("other-cred", T0).await.expect("other").is_none());
    let first = store.consume_room_reservation("cred", T0 + 2).await.expect("first").expect("a");
    assert_eq!(first.room_name, "room-a");
    let second = store.consume_room_reservation("cred", T0 + 3).await.expect("second").expect("b");
    assert_eq!(second.room_name, "room-b");
    assert!(store.consume_room_reservation("cred", T0 + 4).await.expect("none left").is_none());
}

async fn secrets_are_first_writer_wins(store: Store) {
    let first = store.get_or_insert_secret("jwt", "one", T0).await.expect("first");
    let second = store.get_or_insert_secret("jwt", "two", T0).await.expect("second");
    assert_eq!((first.as_str(), second.as_str()), ("one", "one"));
}

async fn concurrent_grant_creation_converges(store: Store) {
    let (ws, _) = workspace(&store, "acme").await;
    let project = store.end_user_project(&ws, "racer", T0).await.expect("project");
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (store, ws, project) = (store.clone(), ws.clone(), project.id.clone());
        tasks.push(tokio::spawn(async move { store.end_user_grant(&ws, "racer", &project, T0 + i).await }));
    }
    let mut ids = std::collections::HashSet::new();
    for task in tasks {
        ids.insert(task.await.expect("join").expect("grant").id);
    }
    assert_eq!(ids.len(), 1, "one grant per end user");
}

async fn the_concurrency_gate_admits_exactly_the_limit(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    let ids: Vec<String> = (0..50).map(|i| format!("gate-{i:02}")).collect();
    let mut tasks = Vec::new();
    for id in &ids {
        let (store, ws, project, id) = (store.clone(), ws.clone(), project.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            store.insert_session_within_limit(&live_session(&id, &ws, &project, T0), Some(10), &[]).await
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        match task.await.expect("join").expect("insert") {
            Admission::Admitted => admitted += 1,
            Admission::LimitReached { active } => assert_eq!(active, 10),
        }
    }
    assert_eq!(admitted, 10, "exactly the limit is admitted");
    assert_eq!(store.count_live_sessions(&ws).await.expect("count"), 10);
    // Ending one frees a slot; no limit admits anything.
    let live =
        store.list_sessions(SessionFilter { project_id: &project, before_us: None, limit: 1 }).await.expect("list");
    store.finish_session(&live[0].id, "completed", T0 + 1, None).await.expect("finish");
    let next = live_session("gate-next", &ws, &project, T0);
    let started = NewTimelineEvent { ts_us: T0, kind: "session.started".into(), data: serde_json::json!({}) };
    assert_eq!(
        store.insert_session_within_limit(&next, Some(10), std::slice::from_ref(&started)).await.expect("insert"),
        Admission::Admitted
    );
    assert_eq!(store.timeline("gate-next").await.expect("timeline")[0].kind, "session.started");
    let unlimited = live_session("gate-free", &ws, &project, T0);
    assert_eq!(store.insert_session_within_limit(&unlimited, None, &[]).await.expect("insert"), Admission::Admitted);
}

async fn voice_seconds_count_ended_live_sessions_only(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    assert_eq!(store.voice_seconds_used(&ws, None).await.expect("sum"), 0.0);
    for (id, start, seconds) in [("a", T0, 90), ("b", T0 + 1_000_000_000, 30), ("live", T0, 0)] {
        store.insert_session(&live_session(id, &ws, &project, start)).await.expect("insert");
        if seconds > 0 {
            store.finish_session(id, "completed", start + seconds * 1_000_000, None).await.expect("finish");
        }
    }
    let mut import = live_session("imp", &ws, &project, T0);
    import.source = "import";
    import.ended_us = Some(T0 + 500_000_000);
    store.insert_session(&import).await.expect("import");
    assert_eq!(store.voice_seconds_used(&ws, None).await.expect("sum"), 120.0);
    assert_eq!(store.voice_seconds_used(&ws, Some(T0 + 1)).await.expect("sum"), 30.0);
}

async fn stale_sessions_are_reaped_and_heartbeats_keep_them_alive(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    store.insert_session(&live_session("old", &ws, &project, T0)).await.expect("insert");
    store.insert_session(&live_session("beating", &ws, &project, T0)).await.expect("insert");
    store.insert_session(&live_session("fresh", &ws, &project, T0 + 100_000_000)).await.expect("insert");
    assert!(store.touch_session("beating", T0 + 90_000_000, None).await.expect("touch"));
    let reaped = store.reap_stale_sessions(T0 + 60_000_000, T0 + 120_000_000).await.expect("reap");
    assert_eq!(reaped, vec!["old".to_owned()]);
    let old = store.session_in_project(&project, "old").await.expect("read").expect("row");
    assert_eq!(
        (old.status.as_str(), old.usage_status.as_str(), old.ended_us),
        ("error", "unavailable", Some(T0 + 120_000_000))
    );
    assert!(!store.touch_session("old", T0 + 130_000_000, None).await.expect("touch"), "an ended session stays ended");
    assert_eq!(store.timeline("old").await.expect("timeline")[0].data["reason"], "heartbeat_lost");
    assert_eq!(store.count_live_sessions(&ws).await.expect("count"), 2);
}

async fn a_restarted_node_ends_the_sessions_it_left_behind(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    for id in ["mine", "theirs", "unclaimed", "done"] {
        store.insert_session(&live_session(id, &ws, &project, T0)).await.expect("insert");
    }
    assert!(store.claim_session("mine", "node-a", T0 + 1).await.expect("claim"));
    assert!(store.claim_session("theirs", "node-b", T0 + 1).await.expect("claim"));
    assert!(store.claim_session("done", "node-a", T0 + 1).await.expect("claim"));
    store.finish_session("done", "completed", T0 + 5, None).await.expect("finish");
    assert!(!store.claim_session("done", "node-a", T0 + 6).await.expect("claim"), "an ended session is not claimed");
    let ended = store.end_orphaned_sessions(Some("node-a"), T0 + 10).await.expect("end");
    assert_eq!(ended, vec!["mine".to_owned()], "only this node's live sessions");
    let mine = store.session_in_project(&project, "mine").await.expect("read").expect("row");
    assert_eq!((mine.status.as_str(), mine.usage_status.as_str()), ("error", "unavailable"));
    assert_eq!(store.timeline("mine").await.expect("timeline")[0].data["reason"], "server_restarted");
    // A SQLite database has one serving node: every live session is an orphan.
    let mut ended = store.end_orphaned_sessions(None, T0 + 20).await.expect("end");
    ended.sort();
    assert_eq!(ended, vec!["theirs".to_owned(), "unclaimed".to_owned()]);
    assert_eq!(store.count_live_sessions(&ws).await.expect("count"), 0);
}

async fn resumption_handles_are_kept_with_their_time(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    store.insert_session(&live_session("s", &ws, &project, T0)).await.expect("insert");
    assert_eq!(store.resumption_handle("s").await.expect("read"), None);
    store.set_resumption_handle("s", Some("h-1"), T0 + 7).await.expect("set");
    assert_eq!(store.resumption_handle("s").await.expect("read"), Some(("h-1".to_owned(), T0 + 7)));
    assert!(store.session_in_project(&project, "s").await.expect("read").expect("row").has_resumption_handle);
    store.set_resumption_handle("s", None, T0 + 9).await.expect("clear");
    assert_eq!(store.resumption_handle("s").await.expect("read"), None);
    assert!(!store.session_in_project(&project, "s").await.expect("read").expect("row").has_resumption_handle);
    assert_eq!(store.resumption_handle("missing").await.expect("read"), None);
}

/// Managed Postgres usually requires TLS: the store must connect with `sslmode=require` (which
/// fails outright without TLS support compiled in).
#[tokio::test]
async fn postgres_over_tls() {
    let db = TestDatabase::new(Backend::Postgres).await;
    let separator = if db.url.contains('?') { '&' } else { '?' };
    let store = Store::connect(&format!("{}{separator}sslmode=require", db.url)).await.expect("TLS connection");
    store.ping().await.expect("ping over TLS");
    store.close().await;
}

async fn a_session_dials_once_and_its_minutes_outlive_its_history(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    store.insert_session(&live_session("s-1", &ws, &project, T0)).await.expect("session");
    let dial = |id: &'static str, created_us: i64| NewDial {
        id,
        workspace_id: ws.as_str(),
        session_id: "s-1",
        phone_number: "+14155550123",
        caller_number: None,
        created_us,
    };
    assert!(store.insert_dial(&dial("d-1", T0 + 1)).await.expect("first dial"));
    assert!(!store.insert_dial(&dial("d-2", T0 + 2)).await.expect("second dial"), "one dial per session");
    // Two racing dials: exactly one wins.
    store.remove_unplaced_dial("d-1").await.expect("unplaced");
    let (third, fourth) = (dial("d-3", T0 + 3), dial("d-4", T0 + 3));
    let (a, b) = tokio::join!(store.insert_dial(&third), store.insert_dial(&fourth));
    assert_eq!(u8::from(a.expect("a")) + u8::from(b.expect("b")), 1);
    let placed = store.dial_of_session("s-1").await.expect("read").expect("a dial");
    store
        .finish_dial(
            &placed.id,
            &DialOutcome {
                answered_us: Some(T0 + 10),
                ended_us: T0 + 100_000_010,
                outcome: "completed",
                billed_seconds: 100,
            },
        )
        .await
        .expect("finish");
    // A placed dial is not removed as unplaced.
    store.remove_unplaced_dial(&placed.id).await.expect("no-op");
    assert_eq!(store.dial_seconds_since(&ws, T0).await.expect("meter"), 100);
    assert_eq!(store.dial_seconds_since(&ws, T0 + 4).await.expect("meter"), 0, "placed before the window");
    // Deleting the session's history keeps the meter.
    assert!(store.delete_session(&project, "s-1").await.expect("delete").is_some());
    assert_eq!(store.dial_seconds_since(&ws, T0).await.expect("meter"), 100);
    let kept = store.dial_of_session("s-1").await.expect("read").expect("kept");
    assert_eq!(kept.outcome.as_deref(), Some("completed"));
    assert_eq!(kept.answered_us, Some(T0 + 10));
}

async fn a_retried_writer_batch_is_stored_once(store: Store) {
    let (ws, project) = workspace(&store, "acme").await;
    store.insert_session(&live_session("s-1", &ws, &project, T0)).await.expect("insert");
    // Something else writes to the timeline too (the start route does).
    let started = NewTimelineEvent { ts_us: T0, kind: "session.started".into(), data: serde_json::json!({}) };
    store.append_timeline("s-1", std::slice::from_ref(&started)).await.expect("started");
    let turn = |text: &str| NewTurn { ts_us: T0 + 1, role: "user", text: text.into() };
    let event = |kind: &str| NewTimelineEvent { ts_us: T0 + 1, kind: kind.into(), data: serde_json::json!({}) };
    assert!(store.append_session_batch("s-1", 0, &[turn("one")], &[event("a")]).await.expect("batch 0"));
    // Batch 0 again, as a writer retries it when its commit's answer was lost: nothing stored.
    assert!(!store.append_session_batch("s-1", 0, &[turn("one")], &[event("a")]).await.expect("retry"));
    assert!(store.append_session_batch("s-1", 1, &[turn("two")], &[]).await.expect("batch 1"));
    assert!(store.append_session_batch("s-1", 2, &[], &[event("b")]).await.expect("batch 2"));
    let texts: Vec<(i64, String)> =
        store.transcript("s-1").await.expect("turns").into_iter().map(|t| (t.seq, t.text)).collect();
    assert_eq!(texts, [(0, "one".to_owned()), (1, "two".to_owned())]);
    let kinds: Vec<(i64, String)> =
        store.timeline("s-1").await.expect("timeline").into_iter().map(|e| (e.seq, e.kind)).collect();
    assert_eq!(kinds, [(0, "session.started".to_owned()), (1, "a".to_owned()), (2, "b".to_owned())]);
    // The markers go with the session.
    assert!(store.delete_session(&project, "s-1").await.expect("delete").is_some());
    store.insert_session(&live_session("s-1", &ws, &project, T0)).await.expect("insert again");
    assert!(store.append_session_batch("s-1", 0, &[turn("new")], &[]).await.expect("a new session's batch 0"));
}
