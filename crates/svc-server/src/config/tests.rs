//! The configuration's rules: flags, environment and file merged, validated, refused.

use super::*;

fn resolve(args: ConfigArgs) -> Result<Config, ConfigError> {
    args.validate(ProviderKeys::default())
}

#[test]
fn defaults() {
    let config = resolve(ConfigArgs::default()).expect("defaults are valid");
    assert_eq!(config.listen, "127.0.0.1:8080".parse().expect("addr"));
    assert_eq!(config.database, Database::Sqlite(PathBuf::from("./svc-data/svc.db")));
    assert_eq!(config.public_url.as_str(), "http://127.0.0.1:8080/");
    assert_eq!(config.default_host.as_str(), "localhost");
}

#[test]
fn the_dev_workspace_is_on_for_loopback_listeners_only() {
    let dev = |listen: &str, mode: Option<DevWorkspace>| {
        resolve(ConfigArgs { listen: Some(listen.into()), dev_workspace: mode, ..Default::default() })
            .expect("valid")
            .dev_workspace
    };
    assert!(dev("127.0.0.1:8080", None));
    assert!(dev("[::1]:8080", None));
    assert!(!dev("0.0.0.0:8080", None), "reachable from other machines");
    assert!(!dev("192.0.2.7:8080", None));
    assert!(!dev("127.0.0.1:8080", Some(DevWorkspace::Off)));
    assert!(!dev("0.0.0.0:8080", Some(DevWorkspace::Auto)), "auto never turns it on off loopback");
}

#[test]
fn rejects_bad_values() {
    let cases = [
        ConfigArgs { listen: Some("nope".into()), ..Default::default() },
        ConfigArgs { database_url: Some("mysql://x".into()), ..Default::default() },
        ConfigArgs { public_url: Some("ftp://x".into()), ..Default::default() },
        ConfigArgs { jwt_secret: Some("short".into()), ..Default::default() },
        ConfigArgs { log: Some("[[[".into()), ..Default::default() },
        ConfigArgs { default_provider: Some("provider_z".into()), ..Default::default() },
        ConfigArgs { room_url: Some("ftp://x/room".into()), ..Default::default() },
        ConfigArgs { room_api_secret: Some("short".into()), ..Default::default() },
        ConfigArgs { room_node_ip: Some("10.0.0.300".into()), ..Default::default() },
        ConfigArgs { room_node_ip: Some("0.0.0.0".into()), ..Default::default() },
        ConfigArgs { room_node_ip: Some("10.0.0.5=public".into()), ..Default::default() },
        ConfigArgs { max_session_seconds: Some("9".into()), ..Default::default() },
        ConfigArgs { max_session_seconds: Some("86401".into()), ..Default::default() },
        ConfigArgs { node_id: Some("  ".into()), ..Default::default() },
        ConfigArgs { server_tools: Some("end_call,teleport".into()), ..Default::default() },
        ConfigArgs { server_tools: Some("end_call,web_search".into()), ..Default::default() },
        ConfigArgs { sdk_floors: Some("svc-js".into()), ..Default::default() },
        ConfigArgs { sdk_floors: Some("svc-js=one.two".into()), ..Default::default() },
        ConfigArgs { model_catalog: Some("/nonexistent/models.toml".into()), ..Default::default() },
        ConfigArgs { local_threads: Some(0), ..Default::default() },
        ConfigArgs { local_threads: Some(257), ..Default::default() },
        ConfigArgs { livekit_url: Some("wss://x.livekit.cloud".into()), ..Default::default() },
        ConfigArgs { livekit_api_key: Some("k".into()), livekit_api_secret: Some("s".into()), ..Default::default() },
        livekit("ftp://x.livekit.cloud", "k", "s"),
        livekit("wss://x.livekit.cloud", "a key", "s"),
        livekit("wss://x.livekit.cloud", "k", ""),
        ConfigArgs {
            sip_trunk: Some("sip:trunk.example.com".into()),
            sip_caller_number: Some("+15550100".into()),
            ..livekit("wss://x.livekit.cloud", "k", "s")
        },
        ConfigArgs { livekit_agent_name: Some("svc".into()), ..Default::default() },
        ConfigArgs { livekit_agent_name: Some("a name".into()), ..livekit("wss://x.livekit.cloud", "k", "s") },
        ConfigArgs { worker_capacity: Some(10), ..livekit("wss://x.livekit.cloud", "k", "s") },
        ConfigArgs {
            livekit_agent_name: Some("svc".into()),
            worker_capacity: Some(0),
            ..livekit("wss://x.livekit.cloud", "k", "s")
        },
        ConfigArgs {
            livekit_sip_trunk_id: Some("ST_x".into()),
            sip_caller_number: Some("+15550100".into()),
            ..Default::default()
        },
        ConfigArgs { livekit_sip_trunk_id: Some("ST_x".into()), ..livekit("wss://x.livekit.cloud", "k", "s") },
        ConfigArgs {
            livekit_sip_trunk_id: Some("ST x".into()),
            sip_caller_number: Some("+15550100".into()),
            ..livekit("wss://x.livekit.cloud", "k", "s")
        },
        ConfigArgs {
            livekit_sip_trunk_id: Some("ST_x".into()),
            sip_caller_number: Some("5550100".into()),
            ..livekit("wss://x.livekit.cloud", "k", "s")
        },
    ];
    for args in cases {
        assert!(matches!(resolve(args.clone()), Err(ConfigError::Invalid { .. })), "{args:?}");
    }
}

#[test]
fn local_threads_are_a_setting_with_a_default_per_slot() {
    let config = resolve(ConfigArgs { local_threads: Some(3), ..Default::default() }).expect("valid");
    assert_eq!((config.local.config().threads, config.local.threads()), (3, 3));
    let config = resolve(ConfigArgs { local_capacity: Some(2), ..Default::default() }).expect("valid");
    assert_eq!(config.local.config().threads, 0, "not set");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    assert_eq!(config.local.threads(), (cores / 2).max(1), "the cores shared among the slots");
    let one = resolve(ConfigArgs { local_capacity: Some(64), ..Default::default() }).expect("valid");
    assert_eq!(one.local.threads(), 1.max(cores / 64));
}

#[test]
fn start_settings() {
    let config = resolve(ConfigArgs {
        public_url: Some("https://voice.example.com".into()),
        max_session_seconds: Some("none".into()),
        server_tools: Some("end_call, examine_image".into()),
        sdk_floors: Some("svc-js=1.4, svc-python=v2.0.1-beta".into()),
        ..Default::default()
    })
    .expect("valid");
    assert_eq!(config.room.url.as_str(), "wss://voice.example.com/room");
    assert_eq!(config.max_session_seconds, None);
    assert_eq!(config.server_tools, ["end_call", "examine_image"]);
    assert_eq!(config.sdk_floors[0].min_version, (1, 4, 0));
    assert_eq!(config.sdk_floors[1].min_version, (2, 0, 1));
    let defaults = resolve(ConfigArgs::default()).expect("valid");
    assert_eq!(defaults.room.url.as_str(), "ws://127.0.0.1:8080/room");
    assert_eq!(defaults.room.udp_port, DEFAULT_ROOM_UDP_PORT);
    assert!(defaults.room.node_ips.is_empty(), "detected at start");
    let pinned = resolve(ConfigArgs {
        room_udp_port: Some(0),
        room_node_ip: Some("127.0.0.1, 10.1.2.3".into()),
        ..Default::default()
    })
    .expect("valid");
    assert_eq!(pinned.room.udp_port, 0);
    assert_eq!(pinned.room.node_ips.len(), 2);
    let natted =
        resolve(ConfigArgs { room_node_ip: Some("10.0.0.5=203.0.113.7".into()), ..Default::default() }).expect("valid");
    assert_eq!(natted.room.node_ips, [std::net::IpAddr::from([10, 0, 0, 5])]);
    assert_eq!(natted.room.public_ips, [([10, 0, 0, 5].into(), [203, 0, 113, 7].into())]);
    assert!(defaults.room.webhook_urls.is_empty());
    let hooked = ConfigArgs {
        room_webhook_urls: Some("https://a.example/hook, http://10.0.0.2:9000/lk".into()),
        ..Default::default()
    };
    let urls: Vec<String> = resolve(hooked).expect("valid").room.webhook_urls.iter().map(ToString::to_string).collect();
    assert_eq!(urls, ["https://a.example/hook", "http://10.0.0.2:9000/lk"]);
    let error = resolve(ConfigArgs { room_webhook_urls: Some("ftp://a.example/x".into()), ..Default::default() })
        .expect_err("not http");
    assert!(error.to_string().contains("--room-webhook-urls"), "{error}");
    assert_eq!(defaults.max_session_seconds, Some(DEFAULT_MAX_SESSION_SECONDS));
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = dir.path().join("models.toml");
    std::fs::write(&catalog, "default_alias = \"provider_a\"\n").expect("write");
    let error =
        resolve(ConfigArgs { model_catalog: Some(catalog), ..Default::default() }).expect_err("incomplete catalog");
    assert!(error.to_string().contains("--model-catalog"), "{error}");
    assert_eq!(parse_version("1.2.3"), Some((1, 2, 3)));
    assert_eq!(parse_version("1.2.3.4"), None);
    assert_eq!(parse_version("x"), None);
}

#[test]
fn provider_keys_follow_the_ecosystem_variables() {
    let vars = [("GOOGLE_API_KEY", "g"), ("XAI_API_KEY", "x"), ("XAI_BASE_URL", "http://127.0.0.1:1/v1")];
    let env = svc_provider::endpoint::ProviderEnv::from_lookup(|name| {
        vars.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
    })
    .expect("valid");
    let keys = ProviderKeys::from_provider_env(&env);
    assert_eq!(keys, ProviderKeys { openai: false, gemini: true, xai: true });
    let config = ConfigArgs::default().validate(keys).expect("valid");
    assert!(config.voice_available("provider_a") && config.voice_available("provider_c"));
    assert!(!config.voice_available("provider_b") && !config.voice_available("provider_b_live"));
}

#[test]
fn flags_win_over_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("svc.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:9000\"\npublic_url = \"https://voice.example.com\"\n").expect("write");
    let args = ConfigArgs { config: Some(file.clone()), listen: Some("127.0.0.1:9100".into()), ..Default::default() };
    let config = args.resolve().expect("valid");
    assert_eq!(config.listen.port(), 9100);
    assert_eq!(config.default_host.as_str(), "voice.example.com");
    std::fs::write(&file, "listen = 5\n").expect("write");
    assert!(matches!(args.resolve(), Err(ConfigError::ParseFile { .. })));
    std::fs::write(&file, "unknown_key = 1\n").expect("write");
    assert!(matches!(args.resolve(), Err(ConfigError::ParseFile { .. })));
}

/// The three LiveKit-server settings.
fn livekit(url: &str, key: &str, secret: &str) -> ConfigArgs {
    ConfigArgs {
        livekit_url: Some(url.into()),
        livekit_api_key: Some(key.into()),
        livekit_api_secret: Some(secret.into()),
        ..Default::default()
    }
}

#[test]
fn a_livekit_server_takes_its_url_key_and_secret_together() {
    assert_eq!(resolve(ConfigArgs::default()).expect("valid").livekit, None, "the embedded room by default");
    let server = resolve(livekit("wss://x.livekit.cloud", "APIkey", "secret")).expect("valid").livekit.expect("set");
    assert_eq!((server.url.as_str(), server.api_key.as_str()), ("wss://x.livekit.cloud/", "APIkey"));
    assert!(!format!("{server:?}").contains("secret"), "the secret stays out of logs");
}

#[test]
fn worker_mode_takes_an_agent_name_and_a_capacity_on_a_livekit_server() {
    let server = resolve(livekit("wss://x.livekit.cloud", "k", "s")).expect("valid").livekit.expect("set");
    assert_eq!(server.worker, None, "each node runs the sessions it starts by default");
    let args =
        ConfigArgs { livekit_agent_name: Some("svc-agent".into()), ..livekit("wss://x.livekit.cloud", "k", "s") };
    let worker = resolve(args.clone()).expect("valid").livekit.and_then(|server| server.worker).expect("worker mode");
    assert_eq!((worker.agent_name.as_str(), worker.capacity), ("svc-agent", DEFAULT_WORKER_CAPACITY));
    let sized = resolve(ConfigArgs { worker_capacity: Some(8), ..args }).expect("valid");
    assert_eq!(sized.livekit.and_then(|server| server.worker).map(|worker| worker.capacity), Some(8));
}

#[test]
fn dial_out_on_a_livekit_server_takes_its_trunk_id_and_a_caller_number() {
    let server = resolve(livekit("wss://x.livekit.cloud", "k", "s")).expect("valid").livekit.expect("set");
    assert_eq!(server.sip, None, "no dial-out by default");
    let args = ConfigArgs {
        livekit_sip_trunk_id: Some("ST_abc".into()),
        sip_caller_number: Some("+15550100".into()),
        ..livekit("wss://x.livekit.cloud", "k", "s")
    };
    let config = resolve(args).expect("valid");
    assert!(config.phone.is_none(), "svc's own SIP stack stays off: the LiveKit server dials");
    let sip = config.livekit.and_then(|server| server.sip).expect("dial-out");
    assert_eq!((sip.trunk_id.as_str(), sip.caller_number.as_str()), ("ST_abc", "+15550100"));
}
