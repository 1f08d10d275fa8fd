//! Gemini Live (provider_a) against the google-genai oracle: the real codec in the real driver,
//! facing `tests/conformance/gemini.py` in every framing and packing of [`fake::modes`].
//!
//! Each test plays one scenario of the fake (the service's half of a conversation) and acts as
//! the session runtime on svc's side; then it checks what the adapter reported against what the
//! fake says it sent (the report's `facts`), exactly, and that the oracle found nothing wrong in
//! what svc sent ([`PyFake::assert_conforms`]).

mod sessions;
mod tools;
mod turns;

use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use svc_domain::model::{ProviderABlock, ProviderBlock, TurnDetection};
use svc_provider_core::{ProviderError, ProviderEvent, ProviderInput, SessionSetup, ToolDecl};
use svc_wire::rest::UsageTokens;

use crate::fake::{self, Adapter, Mode, PyFake};

/// How long one step of a scenario may take: the fake answers in milliseconds, but on a loaded
/// machine its start (the SDK's import) has taken 8 s.
const STEP: Duration = fake::WAIT;
/// User audio rate svc sends Gemini, and so the rate of [`ProviderInput::NativeAudio`].
const INPUT_RATE_HZ: usize = 16_000;
/// Assistant audio rate.
const OUTPUT_RATE_HZ: u64 = 24_000;
/// Samples of one 20 ms user audio frame at the input rate.
const NATIVE_FRAME: usize = INPUT_RATE_HZ / 50;

fn provider_a(block: ProviderABlock) -> SessionSetup {
    SessionSetup::new(fake::model(ProviderBlock::ProviderA(block)), "You are a travel agent.")
}

fn server_vad() -> ProviderABlock {
    ProviderABlock { turn_detection: Some(TurnDetection::ServerVad), ..ProviderABlock::default() }
}

fn tool(name: &str, description: &str) -> ToolDecl {
    ToolDecl {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters: serde_json::json!({"type": "object", "properties": {"order_id": {"type": "string"}}}),
    }
}

/// `frames` 20 ms frames at the input rate (no resampling in svc), of a tone whose pitch is
/// `batch`'s: batches differ byte for byte, so the fake can tell which one it received.
fn native_frames(batch: usize, frames: usize) -> Vec<ProviderInput> {
    let pitch = 200.0 + 50.0 * batch as f64;
    (0..frames)
        .map(|frame| {
            let pcm = (0..NATIVE_FRAME)
                .map(|n| {
                    let t = (frame * NATIVE_FRAME + n) as f64 / INPUT_RATE_HZ as f64;
                    (6000.0 * (2.0 * std::f64::consts::PI * pitch * t).sin()) as i16
                })
                .collect();
            ProviderInput::NativeAudio(pcm)
        })
        .collect()
}

/// Bytes the fake receives for [`native_frames`]`(frames)`: 16-bit samples.
fn native_bytes(frames: usize) -> u64 {
    (frames * NATIVE_FRAME * 2) as u64
}

/// Runs `scenario` in every mode at once; fails when any mode failed.
async fn in_every_mode<F, Fut>(scenario: F)
where
    F: Fn(Mode) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let runs: Vec<_> = fake::modes().into_iter().map(|mode| (mode, tokio::spawn(scenario(mode)))).collect();
    let mut failed = Vec::new();
    for (mode, run) in runs {
        // A failing mode's panic message is printed above as it happens.
        if run.await.is_err() {
            failed.push(mode.to_string());
        }
    }
    assert!(failed.is_empty(), "failed in {} (messages above): {}", failed.len(), failed.join("; "));
}

/// One adapter against one scenario of a fake.
struct Run {
    fake: PyFake,
    adapter: Adapter,
    mode: Mode,
    scenario: &'static str,
    /// Reports of earlier runs on the same fake.
    earlier_reports: usize,
}

impl Run {
    async fn start(mode: Mode, scenario: &'static str, setup: SessionSetup) -> Run {
        Run::on(PyFake::start(mode).await, scenario, setup)
    }

    /// A run on a fake that served earlier runs (starting one costs about half a second).
    fn on(fake: PyFake, scenario: &'static str, setup: SessionSetup) -> Run {
        let mode = fake.mode;
        let adapter = Adapter::start(setup, &fake.env("gemini", scenario), mode);
        let earlier_reports = fake.reports_so_far().len();
        Run { fake, adapter, mode, scenario, earlier_reports }
    }

    async fn ready(&mut self) {
        self.until("Ready", |seen| has(seen, |e| matches!(e, ProviderEvent::Ready { .. }))).await;
    }

    async fn send(&self, input: ProviderInput) {
        self.adapter.send(input).await;
    }

    async fn send_all(&self, inputs: Vec<ProviderInput>) {
        for input in inputs {
            self.adapter.send(input).await;
        }
    }

    /// Reads events until `done` holds for every event seen so far (so the order in which
    /// several awaited events arrive does not matter).
    async fn until(&mut self, what: &str, done: impl Fn(&[ProviderEvent]) -> bool) {
        let deadline = tokio::time::Instant::now() + STEP;
        while !done(&self.adapter.seen) {
            match tokio::time::timeout_at(deadline, self.adapter.session.events.recv()).await {
                Ok(Some(event)) => self.adapter.seen.push(event),
                Ok(None) => self.fail(&format!("the adapter ended before {what}")).await,
                Err(_) => self.fail(&format!("no {what} within {STEP:?}")).await,
            }
        }
    }

    /// Fails the test with what the oracle found so far: closes the adapter (which ends the
    /// fake's connection and so prints its report) and waits a little for the reports.
    async fn fail(&mut self, why: &str) -> ! {
        // The adapter may be gone already.
        let _ = self.adapter.session.input.send(ProviderInput::Close).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.adapter.session.events.recv()).await {
            self.adapter.seen.push(event);
        }
        let mut reports = self.fake.reports_so_far();
        while reports.is_empty() && tokio::time::Instant::now() < deadline + Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            reports = self.fake.reports_so_far();
        }
        let violations = PyFake::violations(&reports);
        panic!(
            "{} [{}]: {why}\nthe SDK oracle found:\n{}\nevents: {}",
            self.mode,
            self.scenario,
            if violations.is_empty() { "(nothing)".to_owned() } else { violations.join("\n") },
            summary(&self.adapter.seen)
        );
    }

    /// Ends the session the way the runtime does, and checks every connection's report.
    async fn finish(self, connections: usize) -> Finished {
        let (done, fake) = self.finish_keeping_the_fake(connections).await;
        fake.stop().await;
        done
    }

    /// As [`Run::finish`], handing the fake back for another run.
    async fn finish_keeping_the_fake(self, connections: usize) -> (Finished, PyFake) {
        let Run { fake, adapter, mode, earlier_reports, .. } = self;
        let seen = adapter.close().await;
        let mut reports = fake.assert_conforms(earlier_reports + connections).await.split_off(earlier_reports);
        reports.sort_by_key(|report| report["connection"].as_u64());
        assert_eq!(reports.len(), connections, "{mode}: connections");
        (Finished { seen, reports, mode }, fake)
    }
}

/// The events as one line each, audio as its length.
fn summary(events: &[ProviderEvent]) -> String {
    format!("\n  {}", super::fake::brief(events).join("\n  "))
}

/// What the adapter reported and what the fake saw, after the session ended.
struct Finished {
    seen: Vec<ProviderEvent>,
    reports: Vec<Value>,
    mode: Mode,
}

impl Finished {
    fn facts(&self, connection: usize) -> &Value {
        &self.reports[connection]["facts"]
    }

    /// The model turns the fake sent on `connection`.
    fn turns(&self, connection: usize) -> Vec<Value> {
        self.facts(connection)["turns"].as_array().cloned().unwrap_or_default()
    }

    fn assistant_finals(&self) -> Vec<String> {
        assistant_finals(&self.seen)
    }

    fn user_finals(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter_map(|event| match event {
                ProviderEvent::UserTranscript { text, is_final: true, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    fn usages(&self) -> Vec<UsageTokens> {
        self.seen
            .iter()
            .filter_map(|event| match event {
                ProviderEvent::Usage(usage) => Some(usage.clone()),
                _ => None,
            })
            .collect()
    }

    fn errors(&self) -> Vec<ProviderError> {
        self.seen
            .iter()
            .filter_map(|event| match event {
                ProviderEvent::Error(error) => Some(error.clone()),
                _ => None,
            })
            .collect()
    }

    fn count(&self, predicate: impl Fn(&ProviderEvent) -> bool) -> usize {
        self.seen.iter().filter(|event| predicate(event)).count()
    }

    /// svc ended `connection` itself, with a close frame carrying 1000.
    fn assert_closed_normally(&self, connection: usize) {
        let close = &self.reports[connection]["client_close"];
        assert_eq!(close["code"], 1000, "{}: svc's close frame on connection {connection}: {close}", self.mode);
    }

    /// The user turns the fake answered on `connection`: (how they came, text).
    fn user_turns(&self, connection: usize) -> Vec<(String, String)> {
        self.facts(connection)["user_turns"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|turn| (text(&turn["kind"]), text(&turn["text"])))
            .collect()
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn assistant_finals(events: &[ProviderEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::AssistantTranscript { text, is_final: true } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn audio_samples(events: &[ProviderEvent]) -> u64 {
    events
        .iter()
        .map(|event| match event {
            ProviderEvent::AssistantAudio { pcm, .. } => pcm.len() as u64,
            _ => 0,
        })
        .sum()
}

fn has(events: &[ProviderEvent], predicate: impl Fn(&ProviderEvent) -> bool) -> bool {
    events.iter().any(predicate)
}

fn count(events: &[ProviderEvent], predicate: impl Fn(&ProviderEvent) -> bool) -> usize {
    events.iter().filter(|event| predicate(event)).count()
}

fn is_assistant_final(event: &ProviderEvent) -> bool {
    matches!(event, ProviderEvent::AssistantTranscript { is_final: true, .. })
}

/// A Gemini `usageMetadata` (wire JSON, as the fake sent it) in the spec's nine fields, per the
/// mapping of providers.md §2.9, restated here rather than taken from svc's `usage::from_gemini`:
/// input is prompt plus tool-use prompt, output is response plus thoughts, the total as reported,
/// modalities from the details (IMAGE and VIDEO are image), thoughts count as output text.
fn expected_usage(metadata: &Value) -> UsageTokens {
    let number = |key: &str| metadata[key].as_i64().unwrap_or(0);
    let modality = |details: &str, names: &[&str]| -> i64 {
        metadata[details]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .filter(|entry| names.contains(&entry["modality"].as_str().unwrap_or_default()))
                    .map(|entry| entry["tokenCount"].as_i64().unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0)
    };
    let thoughts = number("thoughtsTokenCount");
    UsageTokens {
        input_tokens: number("promptTokenCount") + number("toolUsePromptTokenCount"),
        output_tokens: number("responseTokenCount") + thoughts,
        total_tokens: number("totalTokenCount"),
        input_audio_tokens: modality("promptTokensDetails", &["AUDIO"]),
        input_text_tokens: modality("promptTokensDetails", &["TEXT"]),
        input_image_tokens: modality("promptTokensDetails", &["IMAGE", "VIDEO"]),
        input_cached_tokens: number("cachedContentTokenCount"),
        output_audio_tokens: modality("responseTokensDetails", &["AUDIO"]),
        output_text_tokens: modality("responseTokensDetails", &["TEXT"]) + thoughts,
    }
}

fn add_usage(total: &UsageTokens, more: &UsageTokens) -> UsageTokens {
    UsageTokens {
        input_tokens: total.input_tokens + more.input_tokens,
        output_tokens: total.output_tokens + more.output_tokens,
        total_tokens: total.total_tokens + more.total_tokens,
        input_audio_tokens: total.input_audio_tokens + more.input_audio_tokens,
        input_text_tokens: total.input_text_tokens + more.input_text_tokens,
        input_image_tokens: total.input_image_tokens + more.input_image_tokens,
        input_cached_tokens: total.input_cached_tokens + more.input_cached_tokens,
        output_audio_tokens: total.output_audio_tokens + more.output_audio_tokens,
        output_text_tokens: total.output_text_tokens + more.output_text_tokens,
    }
}
