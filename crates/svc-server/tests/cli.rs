//! The `svc` binary end to end: configuration errors, admin commands, and `svc serve` answering
//! a credential made by the CLI while it runs, then stopping cleanly on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use svc_store::Backend;
use svc_store::testing::TestDatabase;

fn svc(data_dir: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_svc"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .arg("--data-dir")
        .arg(data_dir)
        .args(args);
    command
}

fn run(data_dir: &std::path::Path, args: &[&str]) -> Output {
    svc(data_dir, args).output().expect("run svc")
}

#[track_caller]
fn ok(output: &Output) -> String {
    assert!(output.status.success(), "exit {:?}: {}", output.status.code(), String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("utf-8")
}

#[test]
fn bad_configuration_and_usage_exit_64() {
    let dir = tempfile::tempdir().expect("tempdir");
    for args in [
        &["--listen", "not-an-address", "workspace", "list"][..],
        &["--database-url", "mysql://db/x", "serve"],
        &["--public-url", "ftp://x", "serve"],
        &["--jwt-secret", "short", "serve"],
        &["--frobnicate", "serve"],
        &["key", "create", "--workspace", "acme"],
        // A search API without its URL or key, a vision URL without a model.
        &["--web-search-api", "brave", "--web-search-url", "http://127.0.0.1:1", "workspace", "list"],
        &["--web-search-api", "altavista", "workspace", "list"],
        &["--vision-url", "http://127.0.0.1:1/v1", "workspace", "list"],
    ] {
        let output = run(dir.path(), args);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
    let config = dir.path().join("svc.toml");
    std::fs::write(&config, "listen = 12\n").expect("write");
    let output = run(dir.path(), &["--config", config.to_str().expect("utf-8"), "workspace", "list"]);
    assert_eq!(output.status.code(), Some(64));
    // The environment twin is read too.
    let output = svc(dir.path(), &["workspace", "list"]).env("SVC_LISTEN", "nope").output().expect("run");
    assert_eq!(output.status.code(), Some(64));
    let output =
        svc(dir.path(), &["workspace", "list"]).env("SVC_VISION_URL", "http://127.0.0.1:1/v1").output().expect("run");
    assert_eq!(output.status.code(), Some(64), "SVC_VISION_URL without SVC_VISION_MODEL");
    let output = svc(dir.path(), &["workspace", "list"])
        .env("SVC_VISION_URL", "http://127.0.0.1:1/v1")
        .env("SVC_VISION_MODEL", "qwen2.5-vl")
        .env("SVC_WEB_SEARCH_URL", "http://127.0.0.1:8888")
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(run(dir.path(), &["--help"]).status.code(), Some(0));
}

#[test]
fn admin_commands_manage_workspaces_keys_and_users() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    ok(&run(d, &["workspace", "create", "--slug", "acme", "--name", "Acme Corp"]));
    assert!(!run(d, &["workspace", "create", "--slug", "acme", "--name", "Again"]).status.success());
    assert!(!run(d, &["workspace", "create", "--slug", "Bad Slug", "--name", "x"]).status.success());
    let created: Value = serde_json::from_str(&ok(&run(
        d,
        &["--json", "workspace", "create", "--slug", "beta", "--name", "Beta", "--host", "Voice.Beta.example:443"],
    )))
    .expect("json");
    assert_eq!(created["host"], "voice.beta.example");

    ok(&run(
        d,
        &[
            "workspace",
            "set",
            "acme",
            "--max-concurrent-sessions",
            "3",
            "--free-minutes",
            "60",
            "--credit-balance-cents",
            "-250",
            "--entitled-providers",
            "provider_a,provider_b",
            "--avatar",
            "on",
            "--consent-video",
            "true",
            "--phone-calls",
            "yes",
            "--dial-minute-limit",
            "500",
            "--add-caller-number",
            "+14155550100",
            "--add-caller-number",
            "+14155550101",
            "--deactivate-caller-number",
            "+14155550101",
            "--add-do-not-call",
            "+15555550123",
        ],
    ));
    let shown: Value = serde_json::from_str(&ok(&run(d, &["--json", "workspace", "show", "acme"]))).expect("json");
    let settings = &shown["settings"];
    assert_eq!(settings["max_concurrent_sessions"], 3);
    assert_eq!(settings["free_minutes_granted"], 60);
    assert_eq!(settings["credit_balance_cents"], -250);
    assert_eq!(settings["entitled_providers"], serde_json::json!(["provider_a", "provider_b"]));
    assert_eq!(settings["avatar_enabled"], true);
    assert_eq!(settings["consents"]["video"], true);
    assert_eq!(settings["phone_calls_enabled"], true);
    assert_eq!(settings["dial_minute_limit"], 500);
    assert_eq!(
        shown["caller_numbers"],
        serde_json::json!([{"number": "+14155550100", "status": "ACTIVE"}, {"number": "+14155550101", "status": "INACTIVE"}])
    );
    assert_eq!(shown["do_not_call"], serde_json::json!(["+15555550123"]));
    ok(&run(d, &["workspace", "set", "acme", "--max-concurrent-sessions", "unlimited"]));
    let shown: Value = serde_json::from_str(&ok(&run(d, &["--json", "workspace", "show", "acme"]))).expect("json");
    assert_eq!(shown["settings"]["max_concurrent_sessions"], Value::Null);
    assert_eq!(shown["settings"]["disabled_server_tools"], serde_json::json!([]));
    ok(&run(d, &["workspace", "set", "acme", "--disabled-server-tools", "web_search, detect_objects,web_search"]));
    let shown: Value = serde_json::from_str(&ok(&run(d, &["--json", "workspace", "show", "acme"]))).expect("json");
    assert_eq!(shown["settings"]["disabled_server_tools"], serde_json::json!(["web_search", "detect_objects"]));
    assert!(
        ok(&run(d, &["workspace", "show", "acme"])).contains("disabled server tools    web_search, detect_objects")
    );
    ok(&run(d, &["workspace", "set", "acme", "--disabled-server-tools", "none"]));
    let shown: Value = serde_json::from_str(&ok(&run(d, &["--json", "workspace", "show", "acme"]))).expect("json");
    assert_eq!(shown["settings"]["disabled_server_tools"], serde_json::json!([]), "cleared");
    for bad in [
        &["--add-caller-number", "4155550100"][..],
        &["--entitled-providers", "provider_x"],
        &["--free-minutes", "lots"],
        &["--disabled-server-tools", "teleport"],
    ] {
        let mut args = vec!["workspace", "set", "acme"];
        args.extend_from_slice(bad);
        assert!(!run(d, &args).status.success(), "{bad:?}");
    }

    let plain = ok(&run(d, &["key", "create", "--workspace", "acme", "--scope", "realtime:start"]));
    assert!(
        plain.starts_with("svc_sk_") && plain.trim_end().lines().count() == 1,
        "only the secret on stdout: {plain:?}"
    );
    // `realtime:use` is deprecated and no longer issued (spec): a usage error that says what to
    // ask for instead.
    let refused = run(d, &["key", "create", "--workspace", "acme", "--scope", "realtime:use"]);
    assert_eq!(refused.status.code(), Some(64));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("no longer issued") && said.contains("realtime:start, realtime:dial"), "{said}");
    let json: Value = serde_json::from_str(&ok(&run(
        d,
        &["--json", "key", "create", "--workspace", "acme", "--scope", "realtime:start", "--scope", "user_tokens:mint"],
    )))
    .expect("json");
    assert_eq!(json.as_object().expect("object").len(), 3);
    assert!(json["key"].as_str().expect("key").starts_with("svc_sk_"));
    assert_eq!(json["scopes"], serde_json::json!(["realtime:start", "user_tokens:mint"]));
    let unknown = run(d, &["key", "create", "--workspace", "acme", "--scope", "realtime:everything"]);
    assert_eq!(unknown.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown scope `realtime:everything`; scopes:"));
    assert!(!run(d, &["key", "create", "--workspace", "nope", "--scope", "realtime:start"]).status.success());
    let listed = ok(&run(d, &["key", "list", "--workspace", "acme"]));
    assert_eq!(listed.lines().count(), 2);
    assert!(!listed.contains(json["key"].as_str().expect("key")), "listings never show secrets");
    ok(&run(d, &["key", "revoke", "--workspace", "acme", json["id"].as_str().expect("id")]));
    assert!(!run(d, &["key", "revoke", "--workspace", "acme", json["id"].as_str().expect("id")]).status.success());

    ok(&run(
        d,
        &[
            "user",
            "create",
            "--workspace",
            "acme",
            "--email",
            "ann@acme.test",
            "--role",
            "agents-admin",
            "--capability",
            "recordings",
        ],
    ));
    ok(&run(d, &["user", "create", "--workspace", "acme", "--email", "bob@acme.test"]));
    let token: Value = serde_json::from_str(&ok(&run(
        d,
        &["--json", "user", "token", "--workspace", "acme", "--email", "ann@acme.test"],
    )))
    .expect("json");
    assert_eq!(token["kind"], "user_access");
    let acts: Value = serde_json::from_str(&ok(&run(
        d,
        &["--json", "user", "token", "--workspace", "acme", "--email", "ann@acme.test", "--acts-as", "bob@acme.test"],
    )))
    .expect("json");
    assert_eq!(acts["kind"], "acts_as_user");
    assert!(!run(d, &["user", "token", "--workspace", "acme", "--email", "nobody@acme.test"]).status.success());
}

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(data_dir: &std::path::Path, extra: &[&str]) -> Server {
        Server::start_with_env(data_dir, extra, &[])
    }

    fn start_with_env(data_dir: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut args = vec!["--listen", "127.0.0.1:0", "--room-udp-port", "0", "--shutdown-grace-seconds", "5"];
        args.extend_from_slice(extra);
        args.push("serve");
        let mut command = svc(data_dir, &args);
        command.envs(env.iter().copied());
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn serve");
        let stderr = child.stderr.take().expect("stderr");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listen=").nth(1) {
                    let _ = sender.send(rest.split_whitespace().next().unwrap_or("").to_owned());
                }
            }
        });
        let addr = receiver.recv_timeout(Duration::from_secs(30)).expect("server announced its address");
        Server { child, addr }
    }

    fn get(&self, path: &str, token: &str) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        let status = response.split_whitespace().nth(1).and_then(|code| code.parse().ok()).expect("status line");
        let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "svc did not stop after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn serve_verify_and_stop(data_dir: &std::path::Path, extra: &[&str]) {
    let with = |args: &[&str]| {
        let mut all = extra.to_vec();
        all.extend_from_slice(args);
        run(data_dir, &all)
    };
    ok(&with(&["workspace", "create", "--slug", "acme", "--name", "Acme"]));
    let key = ok(&with(&["key", "create", "--workspace", "acme", "--scope", "realtime:start"])).trim().to_owned();
    let server = Server::start(data_dir, extra);
    let (status, body) = server.get("/api/v1/external/realtime/verify", &key);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["workspace"]["slug"], "acme");
    assert_eq!(body["can_start_sessions"], true);

    // The CLI writes to the same database while the server runs.
    let json: Value = serde_json::from_str(&ok(&with(&[
        "--json",
        "key",
        "create",
        "--workspace",
        "acme",
        "--scope",
        "realtime:read",
    ])))
    .expect("json");
    let second = json["key"].as_str().expect("key");
    assert_eq!(server.get("/api/v1/external/sessions", second).0, 200);
    ok(&with(&["key", "revoke", "--workspace", "acme", json["id"].as_str().expect("id")]));
    assert_eq!(server.get("/api/v1/external/sessions", second).0, 401);

    let status = server.terminate();
    assert!(status.success(), "graceful shutdown exits 0, got {status:?}");
}

#[test]
fn serve_answers_cli_made_credentials_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    serve_verify_and_stop(dir.path(), &[]);
    assert!(dir.path().join("svc.db").exists(), "SQLite lives in the data directory");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_cli_made_credentials_on_postgres() {
    let db = TestDatabase::new(Backend::Postgres).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = db.url.clone();
    let path = dir.path().to_owned();
    tokio::task::spawn_blocking(move || serve_verify_and_stop(&path, &["--database-url", &url])).await.expect("join");
    assert!(!dir.path().join("svc.db").exists(), "no SQLite file when Postgres is configured");
    assert_eq!(db.store.list_workspaces().await.expect("list")[0].slug, "acme");
}

#[tokio::test(flavor = "multi_thread")]
async fn room_token_mints_with_the_servers_room_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_owned();
    let printed = tokio::task::spawn_blocking(move || {
        let json: Value = serde_json::from_str(&ok(&run(
            &path,
            &[
                "--json",
                "--public-url",
                "https://voice.example.com",
                "room",
                "token",
                "--room",
                "r1",
                "--identity",
                "ann",
                "--name",
                "Ann",
                "--ttl",
                "600",
            ],
        )))
        .expect("json");
        let plain = ok(&run(&path, &["room", "token", "--room", "r1", "--identity", "bob"]));
        assert!(!run(&path, &["room", "token", "--room", "r1", "--identity", "bob", "--ttl", "10"]).status.success());
        (json, plain)
    })
    .await
    .expect("join");
    let (json, plain) = printed;
    assert_eq!(json["url"], "wss://voice.example.com/room");
    // The token verifies with the room secret the server keeps in its database.
    let url = svc_store::Store::sqlite_url(&dir.path().join("svc.db"));
    let store = svc_store::Store::connect(&url).await.expect("store");
    let config = svc_server::Config::for_tests(dir.path(), svc_server::config::Database::parse(&url).expect("url"));
    let app = svc_server::AppState::with_store(config, store).await.expect("app");
    let claims = app.room.verify(json["token"].as_str().expect("token")).expect("valid token");
    assert_eq!((claims.sub.as_str(), claims.name.as_deref(), claims.video.room.as_str()), ("ann", Some("Ann"), "r1"));
    assert!(claims.video.room_join && claims.video.can_update_own_metadata == Some(true));
    assert_eq!(app.room.verify(plain.trim()).expect("valid").sub, "bob");
}

/// `svc serve --room-webhook-urls` wires the room's webhooks: a room the server API creates and
/// deletes (at the origin's `/twirp`, where the Node SDK posts) reaches the receiver as
/// `room_started` and `room_finished`, signed with the room's key.
#[tokio::test(flavor = "multi_thread")]
async fn serve_posts_room_webhooks_to_the_configured_urls() {
    let receiver = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hook_url = format!("http://{}/hook", receiver.local_addr().expect("addr"));
    let (bodies, received) = std::sync::mpsc::channel::<(String, String)>();
    std::thread::spawn(move || {
        for stream in receiver.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = Vec::new();
            let mut buffer = [0_u8; 8192];
            // Headers, then the body its Content-Length announces.
            let (head, body) = loop {
                let read = stream.read(&mut buffer).unwrap_or(0);
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
                        .and_then(|value| value.trim().parse().ok())
                        .unwrap_or(0);
                    if body.len() >= length || read == 0 {
                        break (head.to_owned(), body.to_owned());
                    }
                } else if read == 0 {
                    return;
                }
            };
            let auth = head
                .lines()
                .find_map(|line| line.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("authorization")))
                .map(|(_, value)| value.trim().to_owned())
                .unwrap_or_default();
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = bodies.send((auth, body));
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_owned();
    let server = tokio::task::spawn_blocking(move || Server::start(&path, &["--room-webhook-urls", &hook_url]))
        .await
        .expect("join");
    let url = svc_store::Store::sqlite_url(&dir.path().join("svc.db"));
    let store = svc_store::Store::connect(&url).await.expect("store");
    let config = svc_server::Config::for_tests(dir.path(), svc_server::config::Database::parse(&url).expect("url"));
    let room_key = svc_server::AppState::with_store(config, store).await.expect("app").room.clone();
    let expires = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() + 600;
    let grant = svc_room::RoomGrant { room_create: true, ..svc_room::RoomGrant::default() };
    let token = room_key.grant_token(grant, i64::try_from(expires).expect("seconds")).expect("mint");
    let post = |method: &str, body: &str| {
        let mut stream = TcpStream::connect(&server.addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        write!(
            stream,
            "POST /twirp/livekit.RoomService/{method} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        response.split_whitespace().nth(1).and_then(|code| code.parse::<u16>().ok()).expect("status")
    };
    assert_eq!(post("CreateRoom", r#"{"name":"hooked"}"#), 200);
    assert_eq!(post("DeleteRoom", r#"{"room":"hooked"}"#), 200);
    let mut events = Vec::new();
    while events.len() < 2 {
        let (auth, body) = received.recv_timeout(Duration::from_secs(20)).expect("a webhook");
        assert!(!auth.is_empty() && !auth.starts_with("Bearer"), "LiveKit's bare token: {auth}");
        let event: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(event["room"]["name"], "hooked");
        events.push(event["event"].as_str().unwrap_or("").to_owned());
    }
    assert_eq!(events, ["room_started", "room_finished"]);
    assert!(server.terminate().success());
}

#[test]
fn json_logs_are_one_object_per_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child =
        svc(dir.path(), &["--log-format", "json", "--listen", "127.0.0.1:0", "--room-udp-port", "0", "serve"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    // Every line is one JSON object; the last one before serving announces the listener.
    let event = loop {
        let line = receiver.recv_timeout(Duration::from_secs(30)).expect("a log line");
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        if event["message"] == "svc is serving" {
            break event;
        }
        assert!(event["message"].is_string() && event["level"].is_string(), "{event}");
    };
    assert!(event["listen"].as_str().is_some_and(|addr| addr.starts_with("127.0.0.1:")), "{event}");
    assert_eq!(event["level"], "INFO");
    let server = Server { child, addr: String::new() };
    assert!(server.terminate().success());
}

#[test]
fn models_status_prints_json_with_the_flag_and_text_without() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    let models_arg = models.to_str().expect("utf-8");
    // Nothing installed: exit 1, and the JSON says what is missing and how to install it.
    let output = run(dir.path(), &["--local-models", models_arg, "models", "status", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let status: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!((status["installed"].clone(), status["brain"].clone()), (Value::Bool(false), "embedded".into()));
    assert!(status["missing"].as_str().is_some_and(|file| file.contains("whisper-base")), "{status}");
    assert_eq!(status["install_command"], "svc models install");
    // Every file in place (presence is what status checks).
    for file in svc_local::ModelsDir::new(&models).required_files() {
        std::fs::create_dir_all(file.parent().expect("parent")).expect("dir");
        std::fs::write(&file, b"").expect("file");
    }
    let status: Value =
        serde_json::from_str(&ok(&run(dir.path(), &["--local-models", models_arg, "models", "status", "--json"])))
            .expect("JSON");
    assert_eq!((status["installed"].clone(), status["missing"].clone()), (Value::Bool(true), Value::Null));
    assert_eq!(status["dir"], models_arg);
    assert!(status["capacity"].as_u64().is_some_and(|capacity| capacity >= 1), "{status}");
    let plain = ok(&run(dir.path(), &["--local-models", models_arg, "models", "status"]));
    assert_eq!(plain.trim(), format!("installed in {models_arg}"));
}

/// The local models, as `scripts/test.sh` installs them.
fn local_models() -> String {
    let dir = std::env::var_os("SVC_LOCAL_MODELS").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/local-models"),
        std::path::PathBuf::from,
    );
    assert!(dir.join("whisper-base/model.safetensors").is_file(), "run `svc models install` (scripts/test.sh does)");
    dir.display().to_string()
}

/// `svc serve`'s environment as the kernel has it.
fn environment_of(server: &Server) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{}/environ", server.child.id())).expect("environ");
    raw.split(|&byte| byte == 0).map(|entry| String::from_utf8_lossy(entry).into_owned()).collect()
}

#[test]
#[ignore = "needs the local models; run by scripts/test.sh"]
fn serve_runs_candles_quantized_products_on_the_local_threads() {
    let models = local_models();
    let dir = tempfile::tempdir().expect("tempdir");
    // Pinned to the threads per session: the same process, restarted once with the variable.
    let server = Server::start(dir.path(), &["--local-models", &models, "--local-threads", "1"]);
    assert!(environment_of(&server).contains(&"CANDLE_NUM_THREADS=1".to_owned()));
    let (status, _) = server.get("/healthz", "");
    assert_eq!(status, 200);
    assert!(server.terminate().success());
    // An operator's own value is kept.
    let server = Server::start_with_env(
        dir.path(),
        &["--local-models", &models, "--local-threads", "1"],
        &[("CANDLE_NUM_THREADS", "3")],
    );
    let environment = environment_of(&server);
    assert!(environment.contains(&"CANDLE_NUM_THREADS=3".to_owned()), "{environment:?}");
    assert!(server.terminate().success());
    // Without the models nothing is restarted.
    let server = Server::start(dir.path(), &["--local-models", "/nonexistent"]);
    assert!(!environment_of(&server).iter().any(|entry| entry.starts_with("CANDLE_NUM_THREADS=")));
    assert!(server.terminate().success());
}
