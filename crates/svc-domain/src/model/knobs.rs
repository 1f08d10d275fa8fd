//! The effective knob settings of a resolved model, one struct per provider: what the runtime
//! and the provider adapters read.

use serde::{Deserialize, Serialize};

use super::{
    Eagerness, EndOfSpeechSensitivity, ProviderCReasoningEffort, ReasoningEffort, ServiceTier, SvcVadParams,
    ThinkingLevel, ToolChoice, TurnDetection, Verbosity,
};

/// Effective knob settings per provider. `None` fields were not sent and have no default in the
/// contract: the runtime (svc_vad) or the upstream decides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case")]
pub enum Knobs {
    /// provider_a.
    ProviderA(ProviderAKnobs),
    /// provider_b.
    ProviderB(ProviderBKnobs),
    /// provider_b_mini: fixed provider_b defaults (no knobs on the wire).
    ProviderBMini(ProviderBKnobs),
    /// provider_b_live.
    ProviderBLive(ProviderBLiveKnobs),
    /// provider_c.
    ProviderC(ProviderCKnobs),
    /// provider_local.
    ProviderLocal(ProviderLocalKnobs),
}

impl Knobs {
    /// The effective turn detector; `None` for provider_b_live (the model owns turn-taking).
    pub fn turn_detection(&self) -> Option<TurnDetection> {
        match self {
            Knobs::ProviderA(knobs) => Some(match knobs.turn_detection {
                ProviderATurnDetection::SvcVad(_) => TurnDetection::SvcVad,
                ProviderATurnDetection::ServerVad { .. } => TurnDetection::ServerVad,
            }),
            Knobs::ProviderB(knobs) | Knobs::ProviderBMini(knobs) => Some(match knobs.turn_detection {
                ProviderBTurnDetection::ServerVad { .. } => TurnDetection::ServerVad,
                ProviderBTurnDetection::SemanticVad { .. } => TurnDetection::SemanticVad,
            }),
            Knobs::ProviderBLive(_) => None,
            Knobs::ProviderC(_) | Knobs::ProviderLocal(_) => Some(TurnDetection::ServerVad),
        }
    }
}

/// Effective provider_a settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderAKnobs {
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output cap.
    pub max_output_tokens: Option<u32>,
    /// Thinking level, accepted by the model.
    pub thinking_level: Option<ThinkingLevel>,
    /// Forward thoughts as `model-text`.
    pub include_thoughts: Option<bool>,
    /// The detector and its knobs.
    pub turn_detection: ProviderATurnDetection,
}

/// provider_a detector with the knobs it reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProviderATurnDetection {
    /// svc's own semantic turn detection (default).
    SvcVad(SvcVadParams),
    /// Gemini's automatic activity detection.
    ServerVad {
        /// End-of-speech sensitivity.
        end_of_speech_sensitivity: Option<EndOfSpeechSensitivity>,
        /// Silence that ends the turn, ms.
        silence_duration_ms: Option<u32>,
        /// Speech needed before start-of-speech is committed, ms.
        prefix_padding_ms: Option<u32>,
    },
}

/// Effective provider_b (and provider_b_mini) settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderBKnobs {
    /// The detector and its knobs.
    pub turn_detection: ProviderBTurnDetection,
}

/// provider_b detector with the knobs it reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProviderBTurnDetection {
    /// Silence-based detection.
    ServerVad {
        /// Silence that ends the turn, ms.
        silence_duration_ms: Option<u32>,
        /// Audio kept before speech start, ms.
        prefix_padding_ms: Option<u32>,
    },
    /// Semantic detection (default).
    SemanticVad {
        /// Eagerness, default `auto`.
        eagerness: Eagerness,
    },
}

/// Effective provider_b_live settings (backend Responses knobs). The delegation mode is
/// [`ResolvedModel::delegation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderBLiveKnobs {
    /// Backend model under `responses` (catalog default filled in); `None` under `client`/`svc`.
    pub responses_model: Option<String>,
    /// Backend instructions under `responses`; `None` = the agent's own instructions.
    pub responses_instructions: Option<String>,
    /// Backend reasoning effort.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Backend verbosity.
    pub verbosity: Option<Verbosity>,
    /// Backend tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// Backend parallel tool calls.
    pub parallel_tool_calls: Option<bool>,
    /// Backend output cap.
    pub max_output_tokens: Option<u32>,
    /// Backend service tier.
    pub service_tier: Option<ServiceTier>,
}

/// Effective provider_c settings. The detector is always `server_vad`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderCKnobs {
    /// Always [`TurnDetection::ServerVad`].
    pub turn_detection: TurnDetection,
    /// Silence that ends the turn, ms.
    pub silence_duration_ms: Option<u32>,
    /// Audio kept before speech start, ms.
    pub prefix_padding_ms: Option<u32>,
    /// Reasoning, default `high`.
    pub reasoning_effort: ProviderCReasoningEffort,
    /// Playback-rate multiplier.
    pub speed: Option<f64>,
    /// Post-response silence before the server re-engages the user, ms.
    pub idle_timeout_ms: Option<u32>,
}

/// Effective provider_local settings. The detector is always svc's own (`server_vad`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderLocalKnobs {
    /// Silence that ends the turn, ms (`None`: the pipeline's default).
    pub silence_duration_ms: Option<u32>,
    /// Voiced audio needed before a turn starts, ms.
    pub prefix_padding_ms: Option<u32>,
    /// Sampling temperature of the reply model.
    pub temperature: Option<f64>,
    /// Longest reply in tokens.
    pub max_output_tokens: Option<u32>,
    /// Prepare the reply during the silence before the turn ends (`None`: on).
    pub preemptive_generation: Option<bool>,
}
