//! `svc provider check` end to end: the real binary against each provider's fake upstream,
//! reached through the ecosystem's base-URL overrides, and its failures as one clear line.

use std::process::{Command, Output};

use serde_json::Value;
use svc_testkit::{FAKE_API_KEY, FakeUpstream, Flavor, Reply};

/// Runs `svc provider check` with exactly `vars` in the environment.
async fn check(vars: Vec<(&'static str, String)>, args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_svc"));
        command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
        for (name, value) in vars {
            command.env(name, value);
        }
        command.arg("provider").arg("check").args(args).output().expect("run svc")
    })
    .await
    .expect("join")
}

fn fake_env(fake: &FakeUpstream, key: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_KEY", key.to_owned()),
        ("OPENAI_BASE_URL", fake.openai_base_url()),
        ("GEMINI_API_KEY", key.to_owned()),
        ("GOOGLE_GEMINI_BASE_URL", fake.gemini_base_url()),
        ("XAI_API_KEY", key.to_owned()),
        ("XAI_BASE_URL", fake.openai_base_url()),
    ]
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_against_every_fake_through_the_base_url_overrides() {
    for (alias, flavor) in [
        ("provider_a", Flavor::OpenAi),
        ("provider_b", Flavor::OpenAi),
        ("provider_b_mini", Flavor::OpenAi),
        ("provider_b_live", Flavor::OpenAi),
        ("provider_c", Flavor::Xai),
    ] {
        let fake = FakeUpstream::start(flavor).await;
        fake.queue([Reply::Speak("Hello from the fake.".to_owned())]);
        // Gemini ends the turn (final transcript, usage) only once it thinks the audio played.
        fake.set_gemini_turn_complete_delay(std::time::Duration::from_millis(1500));
        let output = check(fake_env(&fake, FAKE_API_KEY), &["--provider", alias, "--json", "--timeout", "20"]).await;
        assert!(output.status.success(), "{alias}: exit {:?}: {}", output.status.code(), stderr(&output));
        let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
        assert_eq!(report["provider"], alias);
        assert_eq!(report["transcript"], "Hello from the fake.", "{alias}");
        let seconds = report["audio_seconds"].as_f64().expect("seconds");
        assert!(seconds > 0.8 && seconds < 3.0, "{alias}: {seconds}");
        assert!(report["timings"]["connect_ms"].as_u64().is_some());
        assert!(report["timings"]["first_audio_ms"].as_u64().is_some(), "{alias}");
        if alias != "provider_b_live" {
            assert_eq!(report["usage"]["total_tokens"], 210, "{alias}: {report}");
        }
        // The default text turn reached the upstream.
        assert!(fake.received().iter().any(|r| r.message.to_string().contains("Say hello.")), "{alias}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_output_and_a_wav_turn() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    fake.queue([Reply::Speak("I heard you.".to_owned())]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hello.wav");
    let pcm = svc_testkit::speech::speech("hello there", 16_000);
    let data: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
    let mut wav = b"RIFF".to_vec();
    wav.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    for field in [16u32.to_le_bytes().to_vec(), 1u16.to_le_bytes().to_vec(), 1u16.to_le_bytes().to_vec()] {
        wav.extend_from_slice(&field);
    }
    wav.extend_from_slice(&16_000u32.to_le_bytes());
    wav.extend_from_slice(&32_000u32.to_le_bytes());
    wav.extend_from_slice(&2u16.to_le_bytes());
    wav.extend_from_slice(&16u16.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(data.len() as u32).to_le_bytes());
    wav.extend_from_slice(&data);
    std::fs::write(&path, wav).expect("write wav");
    let output = check(
        fake_env(&fake, FAKE_API_KEY),
        &["--provider", "provider_b", "--model", "gpt-realtime-2", "--wav", path.to_str().expect("utf-8")],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("transcript:  I heard you."), "{text}");
    assert!(text.contains("provider:    provider_b (gpt-realtime-2)"), "{text}");
    assert!(text.contains("usage:       input 150"), "{text}");
    assert!(fake.connections()[0].target.ends_with("model=gpt-realtime-2"));
    // The recording arrived as user audio (server VAD answered it), not as text.
    assert!(fake.audio()[0].len() > 24_000 / 2);
    assert!(fake.frames("conversation.item.create").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_fast_with_one_clear_line() {
    // No key configured.
    let started = std::time::Instant::now();
    let output = check(vec![], &["--provider", "provider_b"]).await;
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(message.contains("no API key for provider_b: set OPENAI_API_KEY"), "{message}");
    assert!(started.elapsed().as_secs() < 5);
    let output = check(vec![], &["--provider", "provider_a"]).await;
    assert!(stderr(&output).contains("GEMINI_API_KEY (or GOOGLE_API_KEY)"));

    // Refused key.
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let output = check(fake_env(&fake, "wrong"), &["--provider", "provider_c"]).await;
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(message.contains("upstream error unauthorized") && message.contains("401"), "{message}");

    // Upstream that never answers.
    fake.queue([Reply::Speak("never heard".to_owned())]);
    let stall = FakeUpstream::start(Flavor::OpenAi).await;
    // Stalled before the check connects: acting on the open connection raced its first frames.
    stall.stall_new_connections(true);
    let output = check(fake_env(&stall, FAKE_API_KEY), &["--provider", "provider_b", "--timeout", "2"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("timed out after 2 s"), "{}", stderr(&output));

    // Protocol error: the upstream hangs up during setup.
    let gone = FakeUpstream::start(Flavor::OpenAi).await;
    gone.refuse_with(Some(500));
    let output = check(fake_env(&gone, FAKE_API_KEY), &["--provider", "provider_b_live"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("connect_failed"), "{}", stderr(&output));

    // Unknown alias or model: usage problems, one line.
    let output = check(fake_env(&fake, FAKE_API_KEY), &["--provider", "provider_z"]).await;
    assert!(stderr(&output).contains("unknown provider `provider_z`"));
    let output = check(fake_env(&fake, FAKE_API_KEY), &["--provider", "provider_b", "--model", "grok-voice-3.0"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("belongs to provider_c"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_base_url_is_a_configuration_error() {
    let output = check(
        vec![("OPENAI_API_KEY", "k".to_owned()), ("OPENAI_BASE_URL", "not a url".to_owned())],
        &["--provider", "provider_b"],
    )
    .await;
    assert_eq!(output.status.code(), Some(64));
    assert!(
        stderr(&output).contains("OPENAI_BASE_URL: `not a url` is not an http(s) or ws(s) URL"),
        "{}",
        stderr(&output)
    );
}

/// Runs `svc provider replay` on `file`.
async fn replay(file: &std::path::Path) -> Output {
    let file = file.to_owned();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_svc"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .args(["provider", "replay"])
            .arg(&file)
            .output()
            .expect("run svc")
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_check_replays_offline_to_the_same_reply() {
    let dir = tempfile::tempdir().expect("tempdir");
    for alias in ["provider_a", "provider_b", "provider_c"] {
        let fake = FakeUpstream::start(if alias == "provider_c" { Flavor::Xai } else { Flavor::OpenAi }).await;
        fake.queue([Reply::Speak("Recorded for later.".to_owned())]);
        let path = dir.path().join(format!("{alias}.jsonl"));
        let path_arg = path.to_str().expect("utf-8").to_owned();
        let output =
            check(fake_env(&fake, FAKE_API_KEY), &["--provider", alias, "--json", "--record", &path_arg]).await;
        assert!(output.status.success(), "{alias}: {}", stderr(&output));
        let text = std::fs::read_to_string(&path).expect("the recording was written");
        assert!(!text.contains(FAKE_API_KEY), "{alias}: the key never reaches a recording");
        let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).expect("JSON lines")).collect();
        assert_eq!(lines[0]["format"], "svc-provider-recording");
        assert_eq!(lines[0]["provider"], alias);
        assert!(lines.iter().any(|l| l["dir"] == "in"), "{alias}: upstream frames recorded");
        assert!(lines.iter().any(|l| l["input"]["kind"] == "text"), "{alias}: the typed turn recorded");
        let audio = lines.iter().find_map(|l| {
            let text = l["json"].to_string();
            text.contains("<base64 bytes=").then_some(())
        });
        assert!(audio.is_some(), "{alias}: audio summarized");
        assert_eq!(lines.last().expect("lines")["event"], "report");
        assert_eq!(lines.last().expect("lines")["transcript"], "Recorded for later.");

        // Offline, no key, no upstream: the adapter says the same thing again.
        let output = replay(&path).await;
        assert!(output.status.success(), "{alias}: {}", stderr(&output));
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(printed.contains("Ready"), "{alias}: {printed}");
        assert!(
            printed.contains(r#"AssistantTranscript { text: "Recorded for later.", is_final: true }"#),
            "{alias}: {printed}"
        );
        if alias != "provider_c" {
            assert!(printed.contains("total_tokens: 210"), "{alias}: usage replayed: {printed}");
        }
    }
    // Not a recording: one clear line.
    let bogus = dir.path().join("bogus.jsonl");
    std::fs::write(&bogus, "{\"hello\":1}\n").expect("write");
    let output = replay(&bogus).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("not an svc provider recording"), "{}", stderr(&output));
}
