//! The resolution stage: a parsed [`ModelChoice`] checked against a [`ModelCatalog`] and turned
//! into one [`ResolvedModel`], or a typed [`ModelError`].

use serde::{Deserialize, Serialize};
use svc_wire::ErrorCode;

use super::wire::one_of;
use super::{
    AliasEntry, Delegation, Eagerness, Knobs, ModelCatalog, ModelChoice, ModelEntry, PROVIDERS, Provider,
    ProviderABlock, ProviderAKnobs, ProviderATurnDetection, ProviderBBlock, ProviderBKnobs, ProviderBLiveBlock,
    ProviderBLiveKnobs, ProviderBTurnDetection, ProviderBlock, ProviderCBlock, ProviderCKnobs,
    ProviderCReasoningEffort, ProviderLocalBlock, ProviderLocalKnobs, TurnDetection,
};

/// A typed rejection of model resolution. The string is a human message: it names aliases, model
/// ids of the catalog and knob names, never a value the caller sent that the catalog lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// `model_unavailable`: unknown or unoffered model, or a provider mismatch.
    #[error("{0}")]
    Unavailable(String),
    /// `turn_detection_knob_mismatch`: a knob of the unselected turn detector.
    #[error("{0}")]
    KnobMismatch(String),
    /// `turn_detection_unsupported`: a detector the provider cannot run.
    #[error("{0}")]
    TurnDetectionUnsupported(String),
    /// `thinking_level_unsupported`: a thinking level the model does not take.
    #[error("{0}")]
    ThinkingLevelUnsupported(String),
}

impl ModelError {
    /// The wire code (all four are 422 `api_error`).
    pub fn code(&self) -> ErrorCode {
        match self {
            ModelError::Unavailable(_) => ErrorCode::ModelUnavailable,
            ModelError::KnobMismatch(_) => ErrorCode::TurnDetectionKnobMismatch,
            ModelError::TurnDetectionUnsupported(_) => ErrorCode::TurnDetectionUnsupported,
            ModelError::ThinkingLevelUnsupported(_) => ErrorCode::ThinkingLevelUnsupported,
        }
    }

    /// The human message.
    pub fn message(&self) -> &str {
        match self {
            ModelError::Unavailable(message)
            | ModelError::KnobMismatch(message)
            | ModelError::TurnDetectionUnsupported(message)
            | ModelError::ThinkingLevelUnsupported(message) => message,
        }
    }
}

/// One concrete model with its effective settings: what the runtime runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedModel {
    /// The provider alias.
    pub alias: Provider,
    /// Upstream API family (from the catalog).
    pub family: String,
    /// Upstream model id.
    pub model_id: String,
    /// The model cannot serve `audio.output: false`.
    pub speech_to_speech_only: bool,
    /// The model supports non-blocking tool calls.
    pub background_tools: bool,
    /// Voice used when the agent names none.
    pub default_voice: String,
    /// The model is deprecated (still runs).
    pub deprecated: bool,
    /// provider_b_live only: who runs the delegated backend.
    pub delegation: Option<Delegation>,
    /// Effective knob settings.
    pub knobs: Knobs,
    /// provider_b_live: the catalog's backend Responses model (what `svc` delegation runs when
    /// the block names none).
    pub default_responses_model: Option<String>,
    /// Hard cap of one upstream session in seconds (from the catalog).
    pub session_cap_seconds: Option<u32>,
}

impl ResolvedModel {
    /// Whether the model takes image input (`send-image`, `examine_image`): the Gemini Live and
    /// OpenAI Realtime families do; xAI's voice API and GPT-Live (audio-only) do not. A property
    /// of the upstream family, read from the provider table's rows of [`Self::family`].
    pub fn takes_images(&self) -> bool {
        PROVIDERS.iter().any(|spec| spec.family == self.family && spec.takes_images)
    }
}

/// What one side of the request (`model` or `model_options`) asks for.
struct Want<'a> {
    provider: Provider,
    model: Option<&'a ModelEntry>,
    block: Option<&'a ProviderBlock>,
}

fn unknown_model() -> ModelError {
    ModelError::Unavailable("Unknown model: use a provider alias or a model id of this server's catalog".to_owned())
}

fn want<'a>(catalog: &'a ModelCatalog, choice: &'a ModelChoice) -> Result<Want<'a>, ModelError> {
    match choice {
        ModelChoice::Name(name) => {
            if let Some(alias) = Provider::from_wire(name) {
                if catalog.alias(alias).is_none() {
                    return Err(ModelError::Unavailable(format!("Provider {alias} is not offered by this server")));
                }
                Ok(Want { provider: alias, model: None, block: None })
            } else {
                let model = catalog.model(name).ok_or_else(unknown_model)?;
                Ok(Want { provider: model.alias, model: Some(model), block: None })
            }
        }
        ModelChoice::Block(block) => {
            let provider = block.provider();
            if catalog.alias(provider).is_none() {
                return Err(ModelError::Unavailable(format!("Provider {provider} is not offered by this server")));
            }
            let model = match block.model_id() {
                None => None,
                Some(id) => {
                    let model = catalog.model(id).ok_or_else(unknown_model)?;
                    if model.alias != provider {
                        return Err(ModelError::Unavailable(format!(
                            "Model {} belongs to {}, not {provider}",
                            model.id, model.alias
                        )));
                    }
                    Some(model)
                }
            };
            Ok(Want { provider, model, block: Some(block) })
        }
    }
}

fn merge<'a>(model: Want<'a>, options: Want<'a>) -> Result<Want<'a>, ModelError> {
    if model.provider != options.provider {
        return Err(ModelError::Unavailable(format!(
            "model names {} but model_options names {}",
            model.provider, options.provider
        )));
    }
    let entry = match (model.model, options.model) {
        (Some(a), Some(b)) if a.id != b.id => {
            return Err(ModelError::Unavailable(format!("model names {} but model_options names {}", a.id, b.id)));
        }
        (a, b) => a.or(b),
    };
    let block = match (model.block, options.block) {
        (Some(_), Some(_)) => {
            return Err(ModelError::Unavailable("model and model_options may not both be provider blocks".to_owned()));
        }
        (a, b) => a.or(b),
    };
    Ok(Want { provider: model.provider, model: entry, block })
}

/// Resolves the `model` and deprecated `model_options` of an inline agent against `catalog`.
///
/// No model → the catalog's default alias. An alias → its default model; a concrete id → that
/// model. `model_options` folds into `model` (either may be a string or a block; both blocks is
/// a validation error the caller reports, see [`both_blocks`], and is `Unavailable` here). The
/// provider's turn-detection and thinking rules then apply to the block's knobs.
pub fn resolve_model(
    catalog: &ModelCatalog,
    model: Option<&ModelChoice>,
    model_options: Option<&ModelChoice>,
) -> Result<ResolvedModel, ModelError> {
    let wanted = match (model, model_options) {
        (None, None) => Want { provider: catalog.default_alias(), model: None, block: None },
        (Some(one), None) | (None, Some(one)) => want(catalog, one)?,
        (Some(model), Some(options)) => merge(want(catalog, model)?, want(catalog, options)?)?,
    };
    let provider = wanted.provider;
    let alias = catalog
        .alias(provider)
        .ok_or_else(|| ModelError::Unavailable(format!("Provider {provider} is not offered by this server")))?;
    let entry = match wanted.model {
        Some(entry) => entry,
        None => catalog.default_model(provider).ok_or_else(unknown_model)?,
    };
    let (knobs, delegation) = (provider.spec().resolve_knobs)(wanted.block, entry, alias)?;
    Ok(ResolvedModel {
        alias: provider,
        family: alias.family.clone(),
        model_id: entry.id.clone(),
        speech_to_speech_only: entry.speech_to_speech_only,
        background_tools: entry.background_tools,
        default_voice: alias.default_voice.clone(),
        deprecated: entry.deprecated,
        delegation,
        knobs,
        default_responses_model: alias.default_responses_model.clone(),
        session_cap_seconds: alias.session_cap_seconds,
    })
}

/// What a row's `resolve_knobs` returns: the knobs, and the delegation mode of a provider that
/// delegates.
type Resolved = Result<(Knobs, Option<Delegation>), ModelError>;

/// provider_a: its detector rules, and `thinking_level` against the model's accepted levels.
pub(super) fn provider_a_knobs(block: Option<&ProviderBlock>, entry: &ModelEntry, _: &AliasEntry) -> Resolved {
    let default = ProviderABlock::default();
    let block = match block {
        Some(ProviderBlock::ProviderA(block)) => block,
        _ => &default,
    };
    Ok((Knobs::ProviderA(a_knobs(block, entry)?), None))
}

/// provider_b: its detector rules.
pub(super) fn provider_b_knobs(block: Option<&ProviderBlock>, _: &ModelEntry, _: &AliasEntry) -> Resolved {
    let default = ProviderBBlock::default();
    let block = match block {
        Some(ProviderBlock::ProviderB(block)) => block,
        _ => &default,
    };
    Ok((Knobs::ProviderB(b_knobs(block)?), None))
}

/// provider_b_mini: no knobs on the wire, the provider_b defaults.
pub(super) fn provider_b_mini_knobs(_: Option<&ProviderBlock>, _: &ModelEntry, _: &AliasEntry) -> Resolved {
    Ok((Knobs::ProviderBMini(b_knobs(&ProviderBBlock::default())?), None))
}

/// provider_b_live: the delegation mode (default `responses`) and the backend knobs it keeps.
pub(super) fn provider_b_live_knobs(block: Option<&ProviderBlock>, _: &ModelEntry, alias: &AliasEntry) -> Resolved {
    let default = ProviderBLiveBlock::default();
    let block = match block {
        Some(ProviderBlock::ProviderBLive(block)) => block,
        _ => &default,
    };
    let delegation = block.delegation.unwrap_or(Delegation::Responses);
    Ok((Knobs::ProviderBLive(b_live_knobs(block, delegation, alias)), Some(delegation)))
}

/// provider_c: `server_vad` only.
pub(super) fn provider_c_knobs(block: Option<&ProviderBlock>, _: &ModelEntry, _: &AliasEntry) -> Resolved {
    let default = ProviderCBlock::default();
    let block = match block {
        Some(ProviderBlock::ProviderC(block)) => block,
        _ => &default,
    };
    Ok((Knobs::ProviderC(c_knobs(block)?), None))
}

/// provider_local: svc's own detector (`server_vad`) only; the rest is the reply model's sampling.
pub(super) fn provider_local_knobs(block: Option<&ProviderBlock>, _: &ModelEntry, _: &AliasEntry) -> Resolved {
    let default = ProviderLocalBlock::default();
    let block = match block {
        Some(ProviderBlock::ProviderLocal(block)) => block,
        _ => &default,
    };
    match block.turn_detection {
        None | Some(TurnDetection::ServerVad) => {}
        Some(detector) => return Err(unsupported(Provider::ProviderLocal, detector)),
    }
    let knobs = ProviderLocalKnobs {
        silence_duration_ms: block.silence_duration_ms,
        prefix_padding_ms: block.prefix_padding_ms,
        temperature: block.temperature,
        max_output_tokens: block.max_output_tokens,
        preemptive_generation: block.preemptive_generation,
    };
    Ok((Knobs::ProviderLocal(knobs), None))
}

fn unsupported(provider: Provider, detector: TurnDetection) -> ModelError {
    ModelError::TurnDetectionUnsupported(format!("{provider} cannot run turn_detection {detector}"))
}

/// Names of the knobs in `sent` that were sent, or `None`.
fn sent_knobs(sent: &[(&'static str, bool)]) -> Option<String> {
    let names: Vec<&str> = sent.iter().filter(|(_, is_sent)| *is_sent).map(|(name, _)| *name).collect();
    (!names.is_empty()).then(|| names.join(", "))
}

fn mismatch(knobs: &str, wanted: TurnDetection, effective: TurnDetection, defaulted: bool) -> ModelError {
    let how = if defaulted { " (the default; set turn_detection explicitly)" } else { "" };
    ModelError::KnobMismatch(format!("{knobs}: read only with turn_detection {wanted}, but it is {effective}{how}"))
}

fn a_knobs(block: &ProviderABlock, entry: &ModelEntry) -> Result<ProviderAKnobs, ModelError> {
    let defaulted = block.turn_detection.is_none();
    let detector = block.turn_detection.unwrap_or(TurnDetection::SvcVad);
    let server_knobs = [
        ("silence_duration_ms", block.silence_duration_ms.is_some()),
        ("prefix_padding_ms", block.prefix_padding_ms.is_some()),
        ("end_of_speech_sensitivity", block.end_of_speech_sensitivity.is_some()),
    ];
    let turn_detection = match detector {
        TurnDetection::SemanticVad => return Err(unsupported(Provider::ProviderA, detector)),
        TurnDetection::SvcVad => {
            if let Some(knobs) = sent_knobs(&server_knobs) {
                return Err(mismatch(&knobs, TurnDetection::ServerVad, detector, defaulted));
            }
            ProviderATurnDetection::SvcVad(block.svc_vad.unwrap_or_default())
        }
        TurnDetection::ServerVad => {
            if block.svc_vad.is_some() {
                return Err(mismatch("svc_vad", TurnDetection::SvcVad, detector, false));
            }
            ProviderATurnDetection::ServerVad {
                end_of_speech_sensitivity: block.end_of_speech_sensitivity,
                silence_duration_ms: block.silence_duration_ms,
                prefix_padding_ms: block.prefix_padding_ms,
            }
        }
    };
    if let Some(level) = block.thinking_level {
        if entry.thinking_levels.is_empty() {
            return Err(ModelError::ThinkingLevelUnsupported(format!("Model {} takes no thinking_level", entry.id)));
        }
        if !entry.thinking_levels.contains(&level) {
            let accepted: Vec<&str> = entry.thinking_levels.iter().map(|level| level.as_str()).collect();
            return Err(ModelError::ThinkingLevelUnsupported(format!(
                "Model {} takes thinking_level {} only",
                entry.id,
                one_of(&accepted)
            )));
        }
    }
    Ok(ProviderAKnobs {
        temperature: block.temperature,
        max_output_tokens: block.max_output_tokens,
        thinking_level: block.thinking_level,
        include_thoughts: block.include_thoughts,
        turn_detection,
    })
}

fn b_knobs(block: &ProviderBBlock) -> Result<ProviderBKnobs, ModelError> {
    let defaulted = block.turn_detection.is_none();
    let detector = block.turn_detection.unwrap_or(TurnDetection::SemanticVad);
    let server_knobs = [
        ("silence_duration_ms", block.silence_duration_ms.is_some()),
        ("prefix_padding_ms", block.prefix_padding_ms.is_some()),
    ];
    let turn_detection = match detector {
        TurnDetection::SvcVad => return Err(unsupported(Provider::ProviderB, detector)),
        TurnDetection::SemanticVad => {
            if let Some(knobs) = sent_knobs(&server_knobs) {
                return Err(mismatch(&knobs, TurnDetection::ServerVad, detector, defaulted));
            }
            ProviderBTurnDetection::SemanticVad { eagerness: block.eagerness.unwrap_or(Eagerness::Auto) }
        }
        TurnDetection::ServerVad => {
            if block.eagerness.is_some() {
                return Err(mismatch("eagerness", TurnDetection::SemanticVad, detector, false));
            }
            ProviderBTurnDetection::ServerVad {
                silence_duration_ms: block.silence_duration_ms,
                prefix_padding_ms: block.prefix_padding_ms,
            }
        }
    };
    Ok(ProviderBKnobs { turn_detection })
}

fn b_live_knobs(block: &ProviderBLiveBlock, delegation: Delegation, alias: &AliasEntry) -> ProviderBLiveKnobs {
    let responses = delegation == Delegation::Responses;
    ProviderBLiveKnobs {
        responses_model: responses
            .then(|| block.responses_model.clone().or_else(|| alias.default_responses_model.clone()))
            .flatten(),
        responses_instructions: block.responses_instructions.clone().filter(|_| responses),
        reasoning_effort: block.reasoning_effort,
        verbosity: block.verbosity,
        tool_choice: block.tool_choice,
        parallel_tool_calls: block.parallel_tool_calls,
        max_output_tokens: block.max_output_tokens,
        service_tier: block.service_tier,
    }
}

fn c_knobs(block: &ProviderCBlock) -> Result<ProviderCKnobs, ModelError> {
    match block.turn_detection {
        None | Some(TurnDetection::ServerVad) => {}
        Some(detector) => return Err(unsupported(Provider::ProviderC, detector)),
    }
    Ok(ProviderCKnobs {
        turn_detection: TurnDetection::ServerVad,
        silence_duration_ms: block.silence_duration_ms,
        prefix_padding_ms: block.prefix_padding_ms,
        reasoning_effort: block.reasoning_effort.unwrap_or(ProviderCReasoningEffort::High),
        speed: block.speed,
        idle_timeout_ms: block.idle_timeout_ms,
    })
}
