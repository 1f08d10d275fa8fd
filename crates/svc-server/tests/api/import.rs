//! `POST /sessions/import`: permissions, transcript and audio round trip, and every rejection.

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use svc_domain::Scope;

use crate::common::TestApp;

crate::on_both_backends!(
    imports_round_trip_transcript_and_audio,
    import_requires_capability_and_role,
    import_rejections,
    the_published_bounds_are_the_servers
);

/// A mono 16-bit PCM WAV of `samples` samples at 16 kHz.
fn wav(channels: u16, samples: usize) -> Vec<u8> {
    let data_len = (samples * 2 * usize::from(channels)) as u32;
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&16_000u32.to_le_bytes());
    out.extend_from_slice(&(16_000u32 * 2 * u32::from(channels)).to_le_bytes());
    out.extend_from_slice(&(2 * channels).to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for i in 0..samples * usize::from(channels) {
        let sample = ((i as f32 * 0.05).sin() * 12_000.0) as i16;
        out.extend_from_slice(&sample.to_le_bytes());
    }
    out
}

async fn importer(t: &TestApp) -> String {
    let ws = t.workspace("acme").await;
    t.user_token(&t.user(&ws, "rec@acme.test", &["recordings-admin"], &["recordings"]).await).await
}

async fn imports_round_trip_transcript_and_audio(t: TestApp) {
    let token = importer(&t).await;
    let audio = wav(1, 48_000);
    let body = json!({
        "started_at": 1_700_000_000.25,
        "ended_at": 1_700_000_090.75,
        "title": "Support call",
        "provider": "provider_a",
        "transcript": [
            {"ts": 1_700_000_001.0, "role": "user", "text": "My order is late."},
            {"ts": 1_700_000_003.5, "role": "assistant", "text": "Let me check that for you."}
        ],
        "audio_wav_base64": STANDARD.encode(&audio)
    });
    let record = t.post("/sessions/import", Some(&token), body).await.expect(201);
    assert_eq!(record["status"], "completed");
    assert_eq!(record["started_at"], json!(1_700_000_000.25));
    assert_eq!(record["ended_at"], json!(1_700_000_090.75));
    assert_eq!(record["provider"], "provider_a");
    let id = record["id"].as_str().expect("id");

    // The workspace's API key sees the import in its default project.
    let ws = t.app.store.workspace_by_slug("acme").await.expect("workspace");
    let key = t.api_key(&ws, &[Scope::RealtimeRead, Scope::RealtimeLogs]).await;
    let transcript = t.get(&format!("/sessions/{id}/transcript"), Some(&key)).await.expect(200);
    assert_eq!(
        transcript[1],
        json!({"ts": 1_700_000_003.5, "role": "assistant", "text": "Let me check that for you."})
    );
    let recording = t.get(&format!("/sessions/{id}/recording"), Some(&key)).await;
    assert_eq!(recording.status, 200);
    assert!(recording.body == audio, "the stored recording is byte-identical to the upload");
    let usage = t.get(&format!("/sessions/{id}/usage"), Some(&key)).await.expect(200);
    assert_eq!(usage["usage_status"], "unavailable");
    let timeline = t.get(&format!("/sessions/{id}/timeline"), Some(&key)).await.expect(200);
    assert_eq!(timeline["events"][0]["type"], "session.imported");
    assert_eq!(t.get("/sessions", Some(&key)).await.expect(200)[0]["id"], id);

    // Without audio, and with an explicit null.
    t.post("/sessions/import", Some(&token), json!({"started_at": 1.0, "audio_wav_base64": null})).await.expect(201);
    t.post("/sessions/import", Some(&token), json!({"started_at": 2.0})).await.expect(201);
    // No spool files are left behind.
    assert_eq!(std::fs::read_dir(t.dir.path().join("tmp")).expect("spool dir").count(), 0);
}

async fn import_requires_capability_and_role(t: TestApp) {
    let ws = t.workspace("acme").await;
    let body = json!({"started_at": 1.0});
    for (roles, capabilities) in [(vec![], vec!["recordings"]), (vec!["recordings-admin"], vec![]), (vec![], vec![])] {
        let email = format!("u{}{}@acme.test", roles.len(), capabilities.len());
        let token = t.user_token(&t.user(&ws, &email, &roles, &capabilities).await).await;
        t.post("/sessions/import", Some(&token), body.clone()).await.expect_error(403);
    }
    let admin = t.user_token(&t.user(&ws, "boss@acme.test", &["admin"], &["recordings"]).await).await;
    t.post("/sessions/import", Some(&admin), body).await.expect(201);
}

async fn import_rejections(t: TestApp) {
    let token = importer(&t).await;
    let with_audio = |audio: String| json!({"started_at": 1.0, "audio_wav_base64": audio});
    let error = t.post("/sessions/import", Some(&token), with_audio("!!!not base64!!!".into())).await.expect_error(400);
    assert!(error["message"].as_str().expect("message").contains("base64"));
    t.post("/sessions/import", Some(&token), with_audio(STANDARD.encode(wav(2, 100)))).await.expect_error(400);
    t.post("/sessions/import", Some(&token), with_audio(STANDARD.encode(b"just some bytes, not RIFF")))
        .await
        .expect_error(400);
    let turns: Vec<_> = (0..100_001).map(|i| json!({"ts": i, "role": "user", "text": ""})).collect();
    let error = t
        .post("/sessions/import", Some(&token), json!({"started_at": 1.0, "transcript": turns}))
        .await
        .expect_error(400);
    assert!(error["message"].as_str().expect("message").contains("100000"));
    let error = t
        .post(
            "/sessions/import",
            Some(&token),
            json!({"transcript": [{"ts": 1, "role": "robot", "text": "private words"}], "bogus": 1}),
        )
        .await
        .expect_error(422);
    assert!(error["errors"].as_array().expect("errors").len() >= 3, "{error}");
    assert!(!error.to_string().contains("private words"));
    // A declared body over 256 MB is refused before it is read.
    let request = TestApp::request("POST", "/sessions/import", Some(&token))
        .header("content-type", "application/json")
        .header("content-length", "256000001")
        .body(Body::from("{}"))
        .expect("request");
    t.send(request).await.expect_error(413);
    let request = TestApp::request("POST", "/sessions/import", Some(&token))
        .header("content-type", "text/csv")
        .body(Body::from("{}"))
        .expect("request");
    t.send(request).await.expect_error(422);
    let ws = t.app.store.workspace_by_slug("acme").await.expect("workspace");
    let key = t.api_key(&ws, &[Scope::RealtimeRead]).await;
    assert_eq!(t.get("/sessions", Some(&key)).await.expect(200), json!([]), "no rejected import left a session");
}

/// The edges of what `docs/openapi.json` publishes for an import body (`minLength` of the audio,
/// the `ended_at` rule in its description), answered as published.
async fn the_published_bounds_are_the_servers(t: TestApp) {
    let token = importer(&t).await;
    let document = serde_json::to_value(svc_server::routes::openapi()).expect("document");
    let audio_schema = &document["components"]["schemas"]["ImportSessionRequest"]["properties"]["audio_wav_base64"];
    // The shortest WAV, a 44-byte header without samples, unpadded: exactly the schema's minimum.
    let shortest = base64::engine::general_purpose::STANDARD_NO_PAD.encode(wav(1, 0));
    assert_eq!(json!(shortest.len()), audio_schema["minLength"]);
    t.post("/sessions/import", Some(&token), json!({"started_at": 1.0, "audio_wav_base64": shortest}))
        .await
        .expect(201);
    // Shorter is no WAV: the empty string included.
    for short in ["", &shortest[..58]] {
        t.post("/sessions/import", Some(&token), json!({"started_at": 1.0, "audio_wav_base64": short}))
            .await
            .expect_error(400);
    }
    // The rule across fields: the end of a call is not before its start.
    let error = t
        .post("/sessions/import", Some(&token), json!({"started_at": 100.0, "ended_at": 99.5}))
        .await
        .expect_error(422);
    assert_eq!(error["errors"][0]["loc"], json!(["body", "ended_at"]), "{error}");
    t.post("/sessions/import", Some(&token), json!({"started_at": 100.0, "ended_at": 100.0})).await.expect(201);
}
