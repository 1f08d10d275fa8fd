//! Authentication: credential formats, revocation, host binding, JWT attacks, and verify.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;
use svc_domain::Scope;
use svc_server::auth::jwt::{AUDIENCE, Claims, ISSUER, JwtKeys};

use crate::common::TestApp;

crate::on_both_backends!(
    missing_and_malformed_credentials_are_401_detail,
    revoked_keys_fail_everywhere,
    credentials_are_bound_to_their_workspace_host,
    verify_describes_api_keys_with_expanded_scopes,
    verify_describes_minted_tokens,
    verify_refuses_user_and_acts_as_user_tokens_with_403,
    jwt_attacks_are_rejected,
    scopes_fail_closed_without_scope_information,
);

async fn missing_and_malformed_credentials_are_401_detail(t: TestApp) {
    let detail = t.get("/realtime/verify", None).await.expect_unauthorized();
    assert!(detail.contains("Authentication required"), "{detail}");
    for header in ["Basic abc", "Bearer", "Bearer    ", "svc_sk_x"] {
        let request = TestApp::request("GET", "/realtime/verify", None)
            .header("authorization", header)
            .body(axum::body::Body::empty())
            .expect("request");
        t.send(request).await.expect_unauthorized();
    }
    for bogus in ["svc_sk_tooshort", &format!("svc_sk_{}", "A".repeat(44)), "random-string", "a.b.c"] {
        t.get("/realtime/verify", Some(bogus)).await.expect_unauthorized();
    }
    // A correct lookup part with a wrong secret.
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeStart]).await;
    let wrong = format!("{}{}", &key[..key.len() - 4], if key.ends_with("AAAA") { "BBBB" } else { "AAAA" });
    assert_eq!(t.get("/realtime/verify", Some(&wrong)).await.expect_unauthorized(), "Invalid API key");
}

async fn revoked_keys_fail_everywhere(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeRead, Scope::UserTokensMint]).await;
    t.get("/sessions", Some(&key)).await.expect(200);
    let keys = t.app.store.list_api_keys(&ws.id).await.expect("keys");
    assert!(t.app.store.revoke_api_key(&ws.id, &keys[0].id, svc_server::app::now_us()).await.expect("revoke"));
    for path in ["/realtime/verify", "/sessions", "/sessions/capabilities", "/projects/default"] {
        assert_eq!(t.get(path, Some(&key)).await.expect_unauthorized(), "API key has been revoked", "{path}");
    }
    t.post("/auth/token", Some(&key), json!({"external_user_id": "u"})).await.expect_unauthorized();
}

async fn credentials_are_bound_to_their_workspace_host(t: TestApp) {
    let local = t.workspace("acme").await;
    let remote = t.workspace_on("beta", "voice.beta.example").await;
    let local_key = t.api_key(&local, &[Scope::RealtimeStart, Scope::UserTokensMint]).await;
    let remote_key = t.api_key(&remote, &[Scope::RealtimeStart]).await;
    let detail = t.get("/realtime/verify", Some(&remote_key)).await.expect_unauthorized();
    assert!(detail.contains("no access to workspace 'beta'") && detail.contains("localhost"), "{detail}");

    let on_host = |host: &str, key: &str| {
        let mut request =
            TestApp::request("GET", "/realtime/verify", Some(key)).body(axum::body::Body::empty()).expect("request");
        request.headers_mut().insert("host", host.parse().expect("header value"));
        request
    };
    // Host matching ignores case, port and the loopback spelling.
    for host in ["voice.beta.example", "VOICE.beta.example:443", "voice.beta.example."] {
        t.send(on_host(host, &remote_key)).await.expect(200);
    }
    for host in ["127.0.0.1:8080", "[::1]:9000", "LOCALHOST"] {
        t.send(on_host(host, &local_key)).await.expect(200);
    }
    t.send(on_host("evil.example", &local_key)).await.expect_unauthorized();
    // A minted token of the local workspace is refused on the remote host too.
    let minted = t.minted(&local_key, "u1", &[]).await;
    let jwt = minted["jwt"].as_str().expect("jwt");
    t.send(on_host("localhost", jwt)).await.expect(200);
    let detail = t.send(on_host("voice.beta.example", jwt)).await.expect_unauthorized();
    assert!(detail.contains("no access to workspace 'acme'"), "{detail}");
}

async fn verify_describes_api_keys_with_expanded_scopes(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::RealtimeUse]).await;
    let body = t.get("/realtime/verify", Some(&key)).await.expect(200);
    assert_eq!(
        body,
        json!({
            "credential": "api_key",
            "workspace": {"name": "acme inc", "slug": "acme"},
            "scopes": ["realtime:start", "realtime:dial", "realtime:read", "realtime:logs", "realtime:delete", "realtime:use", "support:write"],
            "can_start_sessions": true,
            "realtime_voice_available": false,
            "external_user_id": null
        })
    );
    let under_scoped = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let body = t.get("/realtime/verify", Some(&under_scoped)).await.expect(200);
    assert_eq!(body["can_start_sessions"], false);
    assert_eq!(body["scopes"], json!(["user_tokens:mint"]));
}

async fn verify_describes_minted_tokens(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let minted = t.minted(&key, "end-user-42", &["realtime:read"]).await;
    let body = t.get("/realtime/verify", minted["jwt"].as_str()).await.expect(200);
    assert_eq!(body["credential"], "user_token");
    assert_eq!(body["workspace"], json!(null));
    assert_eq!(body["external_user_id"], "end-user-42");
    assert_eq!(body["scopes"], json!(["realtime:start", "realtime:read"]));
    assert_eq!(body["can_start_sessions"], true);
}

async fn verify_refuses_user_and_acts_as_user_tokens_with_403(t: TestApp) {
    let ws = t.workspace("acme").await;
    let admin = t.user(&ws, "admin@acme.test", &["admin"], &[]).await;
    let target = t.user(&ws, "ann@acme.test", &[], &[]).await;
    let acts_as = svc_server::auth::issue::issue_user_token(&t.app, &target, Some(&admin), 600).await.expect("token");
    let error = t.get("/realtime/verify", Some(&acts_as.token)).await.expect_error(403);
    assert!(error["message"].as_str().expect("message").contains("Acts-as-user"));
    t.get("/realtime/verify", Some(&t.user_token(&admin).await)).await.expect_error(403);
    // The acts-as token works where user tokens belong, carrying the target's identity.
    let whoami = t.get("/whoami", Some(&acts_as.token)).await.expect(200);
    assert_eq!(whoami["credential"], "acts_as_user_token");
    assert_eq!(whoami["user"]["email"], "ann@acme.test");
    assert_eq!(whoami["acting_user"]["email"], "admin@acme.test");
}

fn now() -> i64 {
    svc_server::app::now_us() / 1_000_000
}

async fn jwt_attacks_are_rejected(t: TestApp) {
    let ws = t.workspace("acme").await;
    let other = t.workspace("beta").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let other_key = t.api_key(&other, &[Scope::UserTokensMint]).await;
    let minted = t.minted(&key, "victim", &[]).await;
    let jwt = minted["jwt"].as_str().expect("jwt").to_owned();
    let parts: Vec<&str> = jwt.split('.').collect();
    let claims: Claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("claims");
    let encode = |value: &serde_json::Value| URL_SAFE_NO_PAD.encode(value.to_string());

    // alg none, with the original or no signature.
    let none = encode(&json!({"alg": "none", "typ": "JWT"}));
    for forged in [format!("{none}.{}.", parts[1]), format!("{none}.{}.{}", parts[1], parts[2])] {
        assert_eq!(t.get("/realtime/verify", Some(&forged)).await.expect_unauthorized(), "Invalid token");
    }
    // Scope escalation by editing the payload.
    let mut escalated = serde_json::to_value(&claims).expect("json");
    escalated["scope"] = json!("realtime:start resources:read user_tokens:mint");
    let forged = format!("{}.{}.{}", parts[0], encode(&escalated), parts[2]);
    t.get("/realtime/verify", Some(&forged)).await.expect_unauthorized();
    // Signed with a key that is not the server's.
    let attacker = JwtKeys::new(b"attacker-controlled-secret-000000");
    t.get("/realtime/verify", Some(&attacker.sign(&claims).expect("sign"))).await.expect_unauthorized();
    // Expired (validly signed by the server's own key).
    let mut expired = claims.clone();
    expired.exp = now() - 1;
    let detail = t.get("/realtime/verify", Some(&t.app.jwt.sign(&expired).expect("sign"))).await.expect_unauthorized();
    assert_eq!(detail, "Token has expired");
    // Validly signed but naming another workspace than its grant's.
    let mut moved = claims.clone();
    moved.ws = other.id.clone();
    t.get("/realtime/verify", Some(&t.app.jwt.sign(&moved).expect("sign"))).await.expect_unauthorized();
    // Another workspace's grant id under this workspace.
    let other_minted = t.minted(&other_key, "victim", &[]).await;
    let mut borrowed = claims.clone();
    borrowed.jti = other_minted["token_id"].as_str().expect("id").to_owned();
    t.get("/realtime/verify", Some(&t.app.jwt.sign(&borrowed).expect("sign"))).await.expect_unauthorized();
    // A grant id that does not exist.
    let mut unknown = claims.clone();
    unknown.jti = "00000000-0000-0000-0000-000000000000".into();
    t.get("/realtime/verify", Some(&t.app.jwt.sign(&unknown).expect("sign"))).await.expect_unauthorized();
    // Wrong audience (e.g. a room join token replayed against the API).
    let mut room = claims.clone();
    room.aud = "livekit".into();
    t.get("/realtime/verify", Some(&t.app.jwt.sign(&room).expect("sign"))).await.expect_unauthorized();
    // Sanity: the untouched token still works.
    t.get("/realtime/verify", Some(&jwt)).await.expect(200);
    assert_eq!((claims.iss.as_str(), claims.aud.as_str()), (ISSUER, AUDIENCE));
}

async fn scopes_fail_closed_without_scope_information(t: TestApp) {
    let ws = t.workspace("acme").await;
    let key = t.api_key(&ws, &[Scope::UserTokensMint]).await;
    let minted = t.minted(&key, "u", &[]).await;
    let jwt = minted["jwt"].as_str().expect("jwt");
    let payload = jwt.split('.').nth(1).expect("payload");
    let mut claims: Claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("b64")).expect("claims");
    claims.scope = None;
    let scopeless = t.app.jwt.sign(&claims).expect("sign");
    let error = t.get("/sessions", Some(&scopeless)).await.expect_error(403);
    assert_eq!(error["message"], "Missing scope information");
    claims.scope = Some("realtime:start not-a-scope".into());
    let garbled = t.app.jwt.sign(&claims).expect("sign");
    assert_eq!(t.get("/sessions", Some(&garbled)).await.expect_error(403)["message"], "Missing scope information");
}
