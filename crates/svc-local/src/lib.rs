//! The local provider (`provider_local`): svc's own voice pipeline on this machine, behind the
//! same interface as the upstream adapters (`svc_provider_core`), so the runtime, the playground
//! and every client treat it like any other model. No API key, no network.
//!
//! Layout (see ARCHITECTURE.md):
//! - [`core`]: the conversation, sans-IO — turn detection (svc_vad's earshot detector), partial
//!   and final transcriptions, replies streamed sentence by sentence into speech, barge-in, tool
//!   calls, usage. Time is the count of user samples.
//! - [`shell`]: the Tokio task that runs the core's jobs on the shared models.
//! - [`engines`]: the models every session shares, loaded once, and the capacity limit.
//! - [`models`] and [`install`]: where the models live and `svc models install`.
//! - [`tts`]: espeak-ng, run as a program (GPL: never linked). [`sentences`]: the splitter.
//!
//! The stages: Whisper base (`svc-stt`), SmolLM2-135M-Instruct or an OpenAI-compatible endpoint
//! (`svc-llm`), espeak-ng.

pub mod core;
pub mod engines;
pub mod install;
pub mod models;
pub mod sentences;
pub mod shell;
mod timing;
pub mod tts;

use std::sync::Arc;

use svc_audio::vad::{Sensitivity, TurnDetectorConfig};
use svc_domain::model::Knobs;
use svc_domain::session_config::InterruptionSensitivity;
use svc_llm::{GenerateParams, ToolDef};
use svc_provider_core::SessionSetup;
use svc_provider_core::session::ProviderSession;
use tokio_util::sync::CancellationToken;

pub use crate::engines::{Brain, LocalConfig, LocalEngines, Permit, Unavailable};
pub use crate::models::ModelsDir;

/// The model catalog's family of the local provider (the provider table's, in svc-domain).
pub const FAMILY: &str = svc_domain::model::LOCAL_FAMILY;
/// The rate the pipeline takes user audio at (send `NativeAudio` at this rate).
pub const INPUT_RATE_HZ: u32 = core::RATE_HZ;
/// Reply length when the session sets none: a spoken answer of a sentence or two (about 30
/// words); the reply is cut at its last whole sentence (and at two sentences,
/// `core::MAX_REPLY_SENTENCES`), so a voice agent answers briefly. At 60, SmolLM2's replies
/// had a median of 36 words (`local-turns`).
pub const DEFAULT_MAX_TOKENS: u32 = 40;
/// A reply never says the same four tokens twice (see `GenerateParams::no_repeat_ngram`).
pub const NO_REPEAT_NGRAM: u32 = 4;
/// The repetition penalty of replies: firmer than the model card's default, because the 135M
/// model otherwise opens reply after reply with the same words.
pub const REPEAT_PENALTY: f32 = 1.2;
/// Sampling temperature when the session sets none: low, because the small model wanders.
pub const DEFAULT_TEMPERATURE: f32 = 0.3;
/// How often an open turn is transcribed so far, for streaming user transcripts.
pub const PARTIAL_EVERY_MS: u32 = 1_000;

/// What the system prompt adds for a spoken conversation.
/// Said positively: a small model repeats a list of things not to do.
/// English because the pipeline hears (Whisper, set to English) and speaks (en-us) only English;
/// the small model otherwise drifts into French or Spanish after a question about France.
const SPOKEN_STYLE: &str = "You are speaking with the user out loud. Always answer in English, whatever the topic. \
     Answer in one or two short sentences.";

/// The pipeline's configuration for `setup`.
pub fn core_config(setup: &SessionSetup) -> core::CoreConfig {
    let knobs = match &setup.model.knobs {
        Knobs::ProviderLocal(knobs) => Some(knobs),
        _ => None,
    };
    let sensitivity = match setup.interruption_sensitivity {
        InterruptionSensitivity::Low => Sensitivity::Low,
        InterruptionSensitivity::Default => Sensitivity::Default,
        InterruptionSensitivity::High => Sensitivity::High,
    };
    let mut detector = TurnDetectorConfig::default().with_sensitivity(sensitivity);
    if let Some(pause_ms) = knobs.and_then(|knobs| knobs.silence_duration_ms) {
        detector.pause_ms = pause_ms;
    }
    if let Some(prefix_ms) = knobs.and_then(|knobs| knobs.prefix_padding_ms) {
        detector.prefix_ms = prefix_ms;
    }
    // The local turn ends on silence alone: no transcript-based hold.
    detector.max_hold_ms = 0;
    let mut system_prompt = setup.system_prompt();
    if !setup.text_only {
        system_prompt = format!("{system_prompt}\n\n{SPOKEN_STYLE}");
    }
    core::CoreConfig {
        system_prompt,
        tools: setup
            .tools
            .iter()
            .map(|tool| ToolDef {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
            })
            .collect(),
        greeting: setup.greeting.clone(),
        history: setup.history.clone(),
        text_only: setup.text_only,
        detector,
        params: GenerateParams {
            max_tokens: knobs.and_then(|knobs| knobs.max_output_tokens).unwrap_or(DEFAULT_MAX_TOKENS),
            temperature: knobs
                .and_then(|knobs| knobs.temperature)
                .map_or(DEFAULT_TEMPERATURE, |temperature| temperature as f32),
            repeat_penalty: REPEAT_PENALTY,
            no_repeat_ngram: NO_REPEAT_NGRAM,
            // The pipeline hears (Whisper, set to English) and speaks (espeak-ng, English voices)
            // only English.
            ascii_only: true,
            ..GenerateParams::default()
        },
        partial_every_ms: PARTIAL_EVERY_MS,
        preempt_after_ms: if knobs.and_then(|knobs| knobs.preemptive_generation).unwrap_or(true) {
            core::DEFAULT_PREEMPT_AFTER_MS
        } else {
            0
        },
    }
}

/// Starts a local session for `setup`, taking a slot of `engines`.
///
/// # Errors
///
/// [`Unavailable`] when the models are missing or the server runs as many local sessions as it
/// holds.
pub fn start(
    setup: &SessionSetup,
    engines: &Arc<LocalEngines>,
    shutdown: CancellationToken,
) -> Result<ProviderSession, Unavailable> {
    let permit = engines.acquire()?;
    Ok(start_with(setup, engines, permit, shutdown))
}

/// Starts a local session for `setup` in the slot `permit` already holds (the start route takes
/// it before answering, so a start it accepted cannot lose a race for the slot later).
pub fn start_with(
    setup: &SessionSetup,
    engines: &Arc<LocalEngines>,
    permit: Permit,
    shutdown: CancellationToken,
) -> ProviderSession {
    let core = core::LocalCore::new(core_config(setup));
    shell::spawn(core, shell::voice_for(setup), engines.clone(), permit, shutdown)
}
