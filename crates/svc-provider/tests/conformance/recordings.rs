//! The recordings the harness produces: `svc provider check --record`'s runner against each
//! family's SDK-built fake, in binary frames (how Gemini sends) with combined messages where
//! the protocol has them. Each run's recording lands in `target/conformance/recordings/`; with
//! `SVC_UPDATE_FIXTURES=1` it also replaces the committed fixture in
//! `crates/svc-provider/tests/fixtures/recordings/`, which `tests/replay.rs` replays offline in
//! every `cargo test`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use svc_domain::model::{ProviderABlock, ProviderBBlock, ProviderBLiveBlock, ProviderBlock, ProviderCBlock};
use svc_provider::check::{CheckInput, run_recorded, setup_for};
use svc_provider::recording::Recorder;
use svc_provider::replay::Recording;

use crate::fake::{Mode, PyFake, model};

/// (fixture name, family path of the fake, provider block, framing, packing).
fn cases() -> Vec<(&'static str, &'static str, ProviderBlock, &'static str, &'static str)> {
    vec![
        ("gemini-binary-single", "gemini", ProviderBlock::ProviderA(ProviderABlock::default()), "binary", "single"),
        ("gemini-binary-combined", "gemini", ProviderBlock::ProviderA(ProviderABlock::default()), "binary", "combined"),
        ("openai-realtime-binary", "openai", ProviderBlock::ProviderB(ProviderBBlock::default()), "binary", "combined"),
        ("xai-binary", "xai", ProviderBlock::ProviderC(ProviderCBlock::default()), "binary", "combined"),
        ("gpt-live-binary", "live", ProviderBlock::ProviderBLive(ProviderBLiveBlock::default()), "binary", "combined"),
    ]
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
async fn the_check_records_every_family_against_its_sdk_fake() {
    let update = std::env::var("SVC_UPDATE_FIXTURES").is_ok_and(|v| v == "1");
    let out = repo().join("target/conformance/recordings");
    std::fs::create_dir_all(&out).expect("recordings dir");
    for (name, family, block, framing, packing) in cases() {
        let fake = PyFake::start(Mode { framing, packing, seed: 0 }).await;
        let resolved = model(block);
        let recorder = Recorder::new(resolved.alias.as_str(), &resolved.model_id, &resolved.family);
        let result = run_recorded(
            setup_for(resolved),
            &fake.env(family, "typed_turn"),
            CheckInput::Text("Say hello.".to_owned()),
            Duration::from_secs(20),
            Some(recorder.clone()),
        )
        .await;
        let text = recorder.lines();
        std::fs::write(out.join(format!("{name}.jsonl")), &text).expect("write the recording");
        let report = result.unwrap_or_else(|error| panic!("{name}: the check failed: {error}\n{}", fake.stderr()));
        fake.assert_conforms(1).await;
        assert!(!report.transcript.is_empty() && report.audio_seconds > 0.0, "{name}: {report:?}");
        let recording = Recording::parse(&text).expect("the recording parses");
        assert_eq!(recording.report().and_then(|r| r.get("ok")), Some(&Value::Bool(true)), "{name}");
        // The fake framed everything in binary; the recording says so.
        assert!(
            recording
                .lines
                .iter()
                .filter(|l| l["dir"] == "in" && l["frame"] != "close")
                .all(|l| l["frame"] == "binary"),
            "{name}: every upstream message in a binary frame"
        );
        if update {
            let fixture = repo().join(format!("crates/svc-provider/tests/fixtures/recordings/{name}.jsonl"));
            std::fs::write(&fixture, &text).expect("write the fixture");
        }
    }
}
