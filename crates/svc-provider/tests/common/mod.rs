//! Shared harness: an adapter (real codec in the real driver) against a fake upstream.
#![allow(dead_code, missing_docs)]

use std::collections::HashMap;
use std::time::Duration;

use svc_domain::model::{ModelCatalog, ModelChoice, ProviderBlock, ResolvedModel, resolve_model};
use svc_provider::codec::{Codec, ConnectRequest, Transmit};
use svc_provider::endpoint::ProviderEnv;
use svc_provider_core::session::ProviderSession;
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup};
use svc_testkit::{FAKE_API_KEY, FakeUpstream};
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(10);

pub fn model(block: ProviderBlock) -> ResolvedModel {
    resolve_model(ModelCatalog::embedded(), Some(&ModelChoice::Block(block)), None).expect("model resolves")
}

pub fn env_for(fake: &FakeUpstream, key: &str) -> ProviderEnv {
    let mut vars = HashMap::new();
    vars.insert("OPENAI_API_KEY", key.to_owned());
    vars.insert("OPENAI_BASE_URL", fake.openai_base_url());
    vars.insert("XAI_API_KEY", key.to_owned());
    vars.insert("XAI_BASE_URL", fake.openai_base_url());
    vars.insert("GEMINI_API_KEY", key.to_owned());
    vars.insert("GOOGLE_GEMINI_BASE_URL", fake.gemini_base_url());
    ProviderEnv::from_lookup(|name| vars.get(name).cloned()).expect("valid env")
}

pub struct Harness {
    pub session: ProviderSession,
    pub seen: Vec<ProviderEvent>,
}

impl Harness {
    pub async fn start(setup: SessionSetup, fake: &FakeUpstream) -> Harness {
        Harness::start_with_key(setup, fake, FAKE_API_KEY).await
    }

    pub async fn start_with_key(setup: SessionSetup, fake: &FakeUpstream, key: &str) -> Harness {
        let session =
            svc_provider::start(setup, &env_for(fake, key), CancellationToken::new()).expect("adapter starts");
        Harness { session, seen: Vec::new() }
    }

    pub async fn send(&self, input: ProviderInput) {
        self.session.input.send(input).await.expect("adapter alive");
    }

    /// Next event matching `predicate` (every event is kept in `seen`).
    pub async fn wait(&mut self, predicate: impl Fn(&ProviderEvent) -> bool) -> ProviderEvent {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let event = tokio::time::timeout_at(deadline, self.session.events.recv())
                .await
                .unwrap_or_else(|_| panic!("no matching event within {WAIT:?}; seen: {:#?}", self.seen))
                .unwrap_or_else(|| panic!("event stream ended; seen: {:#?}", self.seen));
            self.seen.push(event.clone());
            if predicate(&event) {
                return event;
            }
        }
    }

    /// Collects events for `duration`.
    pub async fn drain_for(&mut self, duration: Duration) {
        let deadline = tokio::time::Instant::now() + duration;
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.session.events.recv()).await {
            self.seen.push(event);
        }
    }

    pub async fn ready(&mut self) {
        self.wait(|e| matches!(e, ProviderEvent::Ready { .. })).await;
    }

    pub fn audio_samples(&self) -> Vec<i16> {
        self.seen
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::AssistantAudio { pcm, .. } => Some(pcm.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    pub fn assistant_fragments(&self) -> String {
        self.seen
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::AssistantTranscript { text, is_final: false } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn errors(&self) -> Vec<svc_provider_core::ProviderError> {
        self.seen
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::Error(error) => Some(error.clone()),
                _ => None,
            })
            .collect()
    }
}

/// `text` spoken at `rate_hz` in 20 ms frames: user audio as the runtime hands it to an adapter
/// (decoded straight to the adapter's input rate).
pub fn user_frames(text: &str, rate_hz: u32) -> Vec<Vec<i16>> {
    let frame = usize::try_from(rate_hz / 50).expect("small");
    svc_testkit::speech::speech(text, rate_hz).chunks(frame).map(<[i16]>::to_vec).collect()
}

// ---- codec-level helpers (no sockets: the test drives `handle_*`/`poll_*` itself) ----------

/// A connect request for a codec that never really connects.
pub fn request() -> ConnectRequest {
    ConnectRequest { url: "ws://upstream/".to_owned(), headers: Vec::new() }
}

/// Everything the codec wants sent and emitted, drained.
pub fn drain(codec: &mut dyn Codec) -> (Vec<Transmit>, Vec<ProviderEvent>) {
    let mut transmits = Vec::new();
    while let Some(t) = codec.poll_transmit() {
        transmits.push(t);
    }
    let mut events = Vec::new();
    while let Some(e) = codec.poll_event() {
        events.push(e);
    }
    (transmits, events)
}

/// How many new sockets `transmits` ask for.
pub fn connects(transmits: &[Transmit]) -> usize {
    transmits.iter().filter(|t| matches!(t, Transmit::Connect(_))).count()
}
