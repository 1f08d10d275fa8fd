//! The recordings the conformance harness made against each provider's SDK-built fake
//! (`tests/fixtures/recordings/`, produced by `tests/conformance/recordings.rs`), replayed into
//! today's adapters offline: every one must still end in the reply it recorded.

mod common;

use std::time::Instant;

use serde_json::Value;
use svc_domain::model::{ModelCatalog, ModelChoice, Provider, ProviderBlock, resolve_model};
use svc_provider::endpoint::ProviderEnv;
use svc_provider::replay::{Recording, replay};
use svc_provider_core::ProviderEvent;
use svc_wire::rest::UsageTokens;

fn fixtures() -> Vec<(String, Recording)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings");
    let mut recordings: Vec<(String, Recording)> = std::fs::read_dir(&dir)
        .expect("the fixtures directory")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(entry.path()).expect("readable");
            let recording = Recording::parse(&text).unwrap_or_else(|error| panic!("{name}: {error}"));
            (name, recording)
        })
        .collect();
    recordings.sort_by(|a, b| a.0.cmp(&b.0));
    recordings
}

#[test]
fn every_recorded_exchange_replays_to_its_recorded_reply() {
    let recordings = fixtures();
    let families: Vec<&str> = recordings.iter().filter_map(|(_, r)| r.field("family")).collect();
    for family in ["gemini", "openai", "openai_live", "xai"] {
        assert!(families.contains(&family), "a recording of every family ({family} missing: {families:?})");
    }
    // Nothing connects during a replay; the codec only needs credentials to build its request.
    let env = ProviderEnv::from_lookup(|name| name.ends_with("_API_KEY").then(|| "replay".to_owned())).expect("env");
    for (name, recording) in &recordings {
        let provider = recording.field("provider").and_then(Provider::from_wire).expect("provider");
        let block = ProviderBlock::defaults(provider, recording.field("model").map(str::to_owned));
        let model =
            resolve_model(ModelCatalog::embedded(), Some(&ModelChoice::Block(block)), None).expect("model resolves");
        let mut codec =
            svc_provider::codec_for(svc_provider::check::setup_for(model), &env).expect("codec for the family");
        let outcome = replay(codec.as_mut(), recording, Instant::now());
        let report = recording.report().unwrap_or_else(|| panic!("{name}: no recorded verdict"));
        assert_eq!(report["ok"], true, "{name}");
        assert!(outcome.events.iter().any(|e| matches!(e, ProviderEvent::Ready { .. })), "{name}");
        assert!(
            !outcome.events.iter().any(|e| matches!(e, ProviderEvent::Error(_))),
            "{name}: no error on replay: {:?}",
            outcome.events
        );
        let finals: Vec<&str> = outcome
            .events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::AssistantTranscript { text, is_final: true } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(finals, vec![report["transcript"].as_str().expect("transcript")], "{name}");
        let usage = outcome.events.iter().rev().find_map(|e| match e {
            ProviderEvent::Usage(tokens) => Some(tokens.clone()),
            _ => None,
        });
        let recorded: Option<UsageTokens> =
            serde_json::from_value(report["usage"].clone()).unwrap_or_else(|_| panic!("{name}: usage"));
        assert_eq!(usage, recorded, "{name}: usage");
        let samples: usize = outcome
            .events
            .iter()
            .map(|e| match e {
                ProviderEvent::AssistantAudio { pcm, .. } => pcm.len(),
                _ => 0,
            })
            .sum();
        let seconds = report["audio_seconds"].as_f64().expect("seconds");
        // The check counted audio until its verdict; the recording goes on to the socket's close
        // (GPT-Live streams the model's silence between turns).
        assert!(samples as f64 / 24_000.0 >= seconds - 0.01, "{name}: {samples} samples vs {seconds} s");
        assert!(outcome.sent.iter().all(Value::is_object), "{name}: every frame svc sent is JSON");
    }
}
