//! The schema stage: the `model` and `model_options` values of an inline agent parsed into a
//! [`ModelChoice`] (a name, or a provider block with its knobs range-checked), reported as
//! validation issues with exact `loc`s. Nothing here looks at the catalog.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use svc_wire::Loc;

use super::wire::{WireEnum, one_of};
use super::{
    Delegation, Eagerness, EndOfSpeechSensitivity, Provider, ProviderCReasoningEffort, ReasoningEffort, ServiceTier,
    ThinkingLevel, ToolChoice, TurnDetection, Verbosity,
};
use crate::limits::INSTRUCTIONS_MAX_CHARS;
use crate::parse::{Fields, Issues};

/// Upper bound of each svc_vad field (`pause_ms`, `prefix_ms`, `max_hold_ms`), in ms (spec).
pub const SVC_VAD_MS_MAX: i64 = 5000;
/// Upper bound of `silence_duration_ms` and `prefix_padding_ms`, in ms. Not in the spec: 10 s is
/// far above any useful value (OpenAI defaults 500/300) and keeps absurd values out.
pub const DETECTOR_MS_MAX: i64 = 10_000;
/// provider_a `temperature` bounds. Not in the spec: Gemini's documented range is 0 to 2.
pub const PROVIDER_A_TEMPERATURE_MAX: f64 = 2.0;
/// provider_a `max_output_tokens` upper bound (lower bound 1). Not in the spec: Gemini 3.x output
/// is capped at 65,536 tokens.
pub const PROVIDER_A_MAX_OUTPUT_TOKENS_MAX: i64 = 65_536;
/// provider_b_live `max_output_tokens` lower bound (spec).
pub const LIVE_MAX_OUTPUT_TOKENS_MIN: i64 = 16;
/// provider_b_live `max_output_tokens` upper bound (spec).
pub const LIVE_MAX_OUTPUT_TOKENS_MAX: i64 = 32_768;
/// provider_c `speed` lower bound (spec).
pub const SPEED_MIN: f64 = 0.7;
/// provider_c `speed` upper bound (spec).
pub const SPEED_MAX: f64 = 1.5;
/// provider_c `idle_timeout_ms` lower bound. Not in the spec (upstream bounds unverified): below
/// one second the server would re-engage before the user could answer.
pub const IDLE_TIMEOUT_MS_MIN: i64 = 1000;
/// provider_c `idle_timeout_ms` upper bound. Not in the spec: ten minutes.
pub const IDLE_TIMEOUT_MS_MAX: i64 = 600_000;
/// provider_b_live `responses_model` length, in characters. Not in the spec.
pub const RESPONSES_MODEL_MAX_CHARS: usize = 200;

/// A parsed `model` (or deprecated `model_options`) value, not yet checked against the catalog.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelChoice {
    /// An alias or a concrete model id, resolved by [`resolve_model`].
    Name(String),
    /// A provider block.
    Block(ProviderBlock),
}

/// A provider block, discriminated on `provider`. Every knob is `None` when not sent (or null).
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderBlock {
    /// `provider: provider_a`.
    ProviderA(ProviderABlock),
    /// `provider: provider_b`.
    ProviderB(ProviderBBlock),
    /// `provider: provider_b_mini`.
    ProviderBMini(ProviderBMiniBlock),
    /// `provider: provider_b_live`.
    ProviderBLive(ProviderBLiveBlock),
    /// `provider: provider_c`.
    ProviderC(ProviderCBlock),
    /// `provider: provider_local`.
    ProviderLocal(ProviderLocalBlock),
}

impl ProviderBlock {
    /// The `provider` discriminator.
    pub fn provider(&self) -> Provider {
        match self {
            ProviderBlock::ProviderA(_) => Provider::ProviderA,
            ProviderBlock::ProviderB(_) => Provider::ProviderB,
            ProviderBlock::ProviderBMini(_) => Provider::ProviderBMini,
            ProviderBlock::ProviderBLive(_) => Provider::ProviderBLive,
            ProviderBlock::ProviderC(_) => Provider::ProviderC,
            ProviderBlock::ProviderLocal(_) => Provider::ProviderLocal,
        }
    }

    /// `provider`'s block with only `model_id` chosen (every knob at its default): what a tool
    /// that names a provider and a model, such as `svc provider check`, asks for.
    pub fn defaults(provider: Provider, model_id: Option<String>) -> ProviderBlock {
        match provider {
            Provider::ProviderA => ProviderBlock::ProviderA(ProviderABlock { model_id, ..ProviderABlock::default() }),
            Provider::ProviderB => ProviderBlock::ProviderB(ProviderBBlock { model_id, ..ProviderBBlock::default() }),
            Provider::ProviderBMini => ProviderBlock::ProviderBMini(ProviderBMiniBlock { model_id }),
            Provider::ProviderBLive => {
                ProviderBlock::ProviderBLive(ProviderBLiveBlock { model_id, ..ProviderBLiveBlock::default() })
            }
            Provider::ProviderC => ProviderBlock::ProviderC(ProviderCBlock { model_id, ..ProviderCBlock::default() }),
            Provider::ProviderLocal => {
                ProviderBlock::ProviderLocal(ProviderLocalBlock { model_id, ..ProviderLocalBlock::default() })
            }
        }
    }

    /// The block's `model_id`, if sent.
    pub fn model_id(&self) -> Option<&str> {
        match self {
            ProviderBlock::ProviderA(block) => block.model_id.as_deref(),
            ProviderBlock::ProviderB(block) => block.model_id.as_deref(),
            ProviderBlock::ProviderBMini(block) => block.model_id.as_deref(),
            ProviderBlock::ProviderBLive(block) => block.model_id.as_deref(),
            ProviderBlock::ProviderC(block) => block.model_id.as_deref(),
            ProviderBlock::ProviderLocal(block) => block.model_id.as_deref(),
        }
    }
}

/// provider_a block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderABlock {
    /// Concrete model id.
    pub model_id: Option<String>,
    /// 0 to [`PROVIDER_A_TEMPERATURE_MAX`].
    pub temperature: Option<f64>,
    /// 1 to [`PROVIDER_A_MAX_OUTPUT_TOKENS_MAX`].
    pub max_output_tokens: Option<u32>,
    /// Checked against the model at resolution.
    pub thinking_level: Option<ThinkingLevel>,
    /// Forward the model's thoughts as `model-text`.
    pub include_thoughts: Option<bool>,
    /// Any known detector name; `semantic_vad` is refused at resolution.
    pub turn_detection: Option<TurnDetection>,
    /// `server_vad` only.
    pub end_of_speech_sensitivity: Option<EndOfSpeechSensitivity>,
    /// `server_vad` only; 0 to [`DETECTOR_MS_MAX`].
    pub silence_duration_ms: Option<u32>,
    /// `server_vad` only; 0 to [`DETECTOR_MS_MAX`].
    pub prefix_padding_ms: Option<u32>,
    /// `svc_vad` only.
    pub svc_vad: Option<SvcVadParams>,
}

/// The provider_a `svc_vad` object; each field 0 to [`SVC_VAD_MS_MAX`] ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SvcVadParams {
    /// Silence that ends the user's turn.
    pub pause_ms: Option<u32>,
    /// Voiced audio needed before speech start is committed (also the pre-roll kept).
    pub prefix_ms: Option<u32>,
    /// Longest the turn model may hold the turn open.
    pub max_hold_ms: Option<u32>,
}

/// provider_b block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderBBlock {
    /// Concrete model id.
    pub model_id: Option<String>,
    /// Any known detector name; `svc_vad` is refused at resolution.
    pub turn_detection: Option<TurnDetection>,
    /// `semantic_vad` only.
    pub eagerness: Option<Eagerness>,
    /// `server_vad` only; 0 to [`DETECTOR_MS_MAX`].
    pub silence_duration_ms: Option<u32>,
    /// `server_vad` only; 0 to [`DETECTOR_MS_MAX`].
    pub prefix_padding_ms: Option<u32>,
}

/// provider_b_mini block: no knobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderBMiniBlock {
    /// Concrete model id.
    pub model_id: Option<String>,
}

/// provider_b_live block. No detector knobs: the model owns turn-taking.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderBLiveBlock {
    /// Concrete model id.
    pub model_id: Option<String>,
    /// Backend Responses model, 1 to [`RESPONSES_MODEL_MAX_CHARS`] characters.
    pub responses_model: Option<String>,
    /// Backend instructions (default: the agent's own), at most 131,072 characters.
    pub responses_instructions: Option<String>,
    /// Backend reasoning effort.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Backend verbosity.
    pub verbosity: Option<Verbosity>,
    /// Backend tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// Backend parallel tool calls.
    pub parallel_tool_calls: Option<bool>,
    /// Backend output cap, [`LIVE_MAX_OUTPUT_TOKENS_MIN`] to [`LIVE_MAX_OUTPUT_TOKENS_MAX`].
    pub max_output_tokens: Option<u32>,
    /// Backend service tier.
    pub service_tier: Option<ServiceTier>,
    /// Who runs the backend (default `responses`).
    pub delegation: Option<Delegation>,
}

/// provider_c block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderCBlock {
    /// Concrete model id.
    pub model_id: Option<String>,
    /// Any known detector name; only `server_vad` resolves.
    pub turn_detection: Option<TurnDetection>,
    /// 0 to [`DETECTOR_MS_MAX`].
    pub silence_duration_ms: Option<u32>,
    /// 0 to [`DETECTOR_MS_MAX`].
    pub prefix_padding_ms: Option<u32>,
    /// Default `high`.
    pub reasoning_effort: Option<ProviderCReasoningEffort>,
    /// Playback-rate multiplier, [`SPEED_MIN`] to [`SPEED_MAX`].
    pub speed: Option<f64>,
    /// Post-response silence before the server re-engages the user,
    /// [`IDLE_TIMEOUT_MS_MIN`] to [`IDLE_TIMEOUT_MS_MAX`] ms.
    pub idle_timeout_ms: Option<u32>,
}

/// provider_local block: svc's own detector and the local reply model's sampling.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderLocalBlock {
    /// Concrete model id.
    pub model_id: Option<String>,
    /// Any known detector name; only `server_vad` (svc's own VAD on this machine) resolves.
    pub turn_detection: Option<TurnDetection>,
    /// Silence that ends the user's turn; 0 to [`DETECTOR_MS_MAX`].
    pub silence_duration_ms: Option<u32>,
    /// Voiced audio needed before a turn starts; 0 to [`DETECTOR_MS_MAX`].
    pub prefix_padding_ms: Option<u32>,
    /// Sampling temperature of the reply model, 0 to [`LOCAL_TEMPERATURE_MAX`].
    pub temperature: Option<f64>,
    /// Longest reply in tokens, 1 to [`LOCAL_MAX_OUTPUT_TOKENS_MAX`].
    pub max_output_tokens: Option<u32>,
    /// Whether the reply is prepared during the silence before the turn ends (default on).
    pub preemptive_generation: Option<bool>,
}

/// Highest provider_local `temperature`.
pub const LOCAL_TEMPERATURE_MAX: f64 = 2.0;
/// Highest provider_local `max_output_tokens` (a spoken reply; the small model rambles past it).
pub const LOCAL_MAX_OUTPUT_TOKENS_MAX: i64 = 1024;

/// Parses a `model` value, or a deprecated `model_options` value, at `loc`.
///
/// Null → `None` without an issue. A string → [`ModelChoice::Name`] (any string: unknown names
/// are `model_unavailable` at resolution, not schema errors). An object → a provider block whose
/// fields are checked here. Anything else → `model_type` at `loc`. Returns `None` whenever an
/// issue was recorded for this value.
pub fn parse_model(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<ModelChoice> {
    match value {
        Value::Null => None,
        Value::String(name) => Some(ModelChoice::Name(name.clone())),
        Value::Object(_) => {
            let mut local = Issues::default();
            let block = parse_block(value, loc, &mut local);
            let clean = local.is_empty();
            for issue in local.into_vec() {
                issues.push(&issue.loc, &issue.kind, issue.msg);
            }
            block.filter(|_| clean).map(ModelChoice::Block)
        }
        _ => {
            issues.push(loc, "model_type", "Input should be a model string or provider object");
            None
        }
    }
}

/// Whether `model` and `model_options` are both provider blocks: a validation error the caller
/// reports at the `model_options` loc (see [`parse_model_fields`]).
pub fn both_blocks(model: Option<&ModelChoice>, model_options: Option<&ModelChoice>) -> bool {
    matches!((model, model_options), (Some(ModelChoice::Block(_)), Some(ModelChoice::Block(_))))
}

/// The `model` and `model_options` fields of an inline agent block, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelFields {
    /// `model`.
    pub model: Option<ModelChoice>,
    /// Deprecated `model_options`.
    pub model_options: Option<ModelChoice>,
}

/// Reads `model` and `model_options` from an agent block and records the both-blocks rule as
/// `model_options_conflict` at the `model_options` loc.
pub fn parse_model_fields(fields: &mut Fields<'_>, issues: &mut Issues) -> ModelFields {
    let model = fields.raw("model").and_then(|value| parse_model(value, &fields.loc_of("model"), issues));
    let options_loc = fields.loc_of("model_options");
    let model_options = fields.raw("model_options").and_then(|value| parse_model(value, &options_loc, issues));
    if both_blocks(model.as_ref(), model_options.as_ref()) {
        issues.push(
            &options_loc,
            "model_options_conflict",
            "A provider block may not be sent as both model and model_options",
        );
    }
    ModelFields { model, model_options }
}

fn parse_block(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<ProviderBlock> {
    let mut fields = Fields::of(value, loc, issues)?;
    let provider_loc = fields.loc_of("provider");
    let provider = match fields.raw("provider") {
        None | Some(Value::Null) => {
            issues.push(&provider_loc, "missing", "Field required");
            return None;
        }
        Some(Value::String(text)) => Provider::from_wire(text),
        Some(_) => None,
    };
    let Some(provider) = provider else {
        let values: Vec<&str> = Provider::ALL.iter().map(|p| p.as_str()).collect();
        issues.push(&provider_loc, "union_tag_invalid", format!("Input should be {}", one_of(&values)));
        return None;
    };
    let model_id = model_id(&mut fields, issues);
    let block = (provider.spec().parse_block)(model_id, &mut fields, issues);
    fields.deny_unknown(issues);
    Some(block)
}

/// The knobs of a `provider_a` block (its row's `parse_block`).
pub(super) fn provider_a_block(
    model_id: Option<String>,
    fields: &mut Fields<'_>,
    issues: &mut Issues,
) -> ProviderBlock {
    ProviderBlock::ProviderA(ProviderABlock {
        model_id,
        temperature: number(fields, "temperature", 0.0, PROVIDER_A_TEMPERATURE_MAX, issues),
        max_output_tokens: integer(fields, "max_output_tokens", 1, PROVIDER_A_MAX_OUTPUT_TOKENS_MAX, issues),
        thinking_level: choice(fields, "thinking_level", issues),
        include_thoughts: boolean(fields, "include_thoughts", issues),
        turn_detection: choice(fields, "turn_detection", issues),
        end_of_speech_sensitivity: choice(fields, "end_of_speech_sensitivity", issues),
        silence_duration_ms: integer(fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
        prefix_padding_ms: integer(fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
        svc_vad: svc_vad(fields, issues),
    })
}

/// The knobs of a `provider_b` block (its row's `parse_block`).
pub(super) fn provider_b_block(
    model_id: Option<String>,
    fields: &mut Fields<'_>,
    issues: &mut Issues,
) -> ProviderBlock {
    ProviderBlock::ProviderB(ProviderBBlock {
        model_id,
        turn_detection: choice(fields, "turn_detection", issues),
        eagerness: choice(fields, "eagerness", issues),
        silence_duration_ms: integer(fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
        prefix_padding_ms: integer(fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
    })
}

/// A `provider_b_mini` block (its row's `parse_block`): it has no knobs, so any other field is
/// left for `deny_unknown`.
pub(super) fn provider_b_mini_block(model_id: Option<String>, _: &mut Fields<'_>, _: &mut Issues) -> ProviderBlock {
    ProviderBlock::ProviderBMini(ProviderBMiniBlock { model_id })
}

/// The knobs of a `provider_b_live` block (its row's `parse_block`).
pub(super) fn provider_b_live_block(
    model_id: Option<String>,
    fields: &mut Fields<'_>,
    issues: &mut Issues,
) -> ProviderBlock {
    ProviderBlock::ProviderBLive(ProviderBLiveBlock {
        model_id,
        responses_model: fields
            .optional_string("responses_model", RESPONSES_MODEL_MAX_CHARS, issues)
            .map(str::to_owned),
        responses_instructions: fields
            .optional_string("responses_instructions", INSTRUCTIONS_MAX_CHARS, issues)
            .map(str::to_owned),
        reasoning_effort: choice(fields, "reasoning_effort", issues),
        verbosity: choice(fields, "verbosity", issues),
        tool_choice: choice(fields, "tool_choice", issues),
        parallel_tool_calls: boolean(fields, "parallel_tool_calls", issues),
        max_output_tokens: integer(
            fields,
            "max_output_tokens",
            LIVE_MAX_OUTPUT_TOKENS_MIN,
            LIVE_MAX_OUTPUT_TOKENS_MAX,
            issues,
        ),
        service_tier: choice(fields, "service_tier", issues),
        delegation: choice(fields, "delegation", issues),
    })
}

/// The knobs of a `provider_c` block (its row's `parse_block`).
pub(super) fn provider_c_block(
    model_id: Option<String>,
    fields: &mut Fields<'_>,
    issues: &mut Issues,
) -> ProviderBlock {
    ProviderBlock::ProviderC(ProviderCBlock {
        model_id,
        turn_detection: choice(fields, "turn_detection", issues),
        silence_duration_ms: integer(fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
        prefix_padding_ms: integer(fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
        reasoning_effort: choice(fields, "reasoning_effort", issues),
        speed: number(fields, "speed", SPEED_MIN, SPEED_MAX, issues),
        idle_timeout_ms: integer(fields, "idle_timeout_ms", IDLE_TIMEOUT_MS_MIN, IDLE_TIMEOUT_MS_MAX, issues),
    })
}

/// The knobs of a `provider_local` block (its row's `parse_block`).
pub(super) fn provider_local_block(
    model_id: Option<String>,
    fields: &mut Fields<'_>,
    issues: &mut Issues,
) -> ProviderBlock {
    ProviderBlock::ProviderLocal(ProviderLocalBlock {
        model_id,
        turn_detection: choice(fields, "turn_detection", issues),
        silence_duration_ms: integer(fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
        prefix_padding_ms: integer(fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
        temperature: number(fields, "temperature", 0.0, LOCAL_TEMPERATURE_MAX, issues),
        max_output_tokens: integer(fields, "max_output_tokens", 1, LOCAL_MAX_OUTPUT_TOKENS_MAX, issues),
        preemptive_generation: boolean(fields, "preemptive_generation", issues),
    })
}

/// `model_id`: any string (checked against the catalog at resolution).
fn model_id(fields: &mut Fields<'_>, issues: &mut Issues) -> Option<String> {
    match fields.raw("model_id")? {
        Value::Null => None,
        Value::String(id) => Some(id.clone()),
        _ => {
            issues.push(&fields.loc_of("model_id"), "string_type", "Input should be a valid string");
            None
        }
    }
}

fn choice<T: WireEnum>(fields: &mut Fields<'_>, name: &'static str, issues: &mut Issues) -> Option<T> {
    let value = fields.raw(name)?;
    if value.is_null() {
        return None;
    }
    let found = value.as_str().and_then(|text| T::VALUES.iter().copied().find(|v| v.wire() == text));
    if found.is_none() {
        let values: Vec<&str> = T::VALUES.iter().map(|v| v.wire()).collect();
        issues.push(&fields.loc_of(name), "enum", format!("Input should be {}", one_of(&values)));
    }
    found
}

fn integer(fields: &mut Fields<'_>, name: &'static str, min: i64, max: i64, issues: &mut Issues) -> Option<u32> {
    // Every bound of this module fits in u32, so the conversion only drops values already reported.
    fields.optional_integer(name, min, max, issues).and_then(|n| u32::try_from(n).ok())
}

fn number(fields: &mut Fields<'_>, name: &'static str, min: f64, max: f64, issues: &mut Issues) -> Option<f64> {
    let value = fields.raw(name)?;
    let loc = fields.loc_of(name);
    match value {
        Value::Null => None,
        Value::Number(number) => match number.as_f64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                issues.push(&loc, "range", format!("Input should be between {min} and {max}"));
                None
            }
        },
        _ => {
            issues.push(&loc, "float_type", "Input should be a valid number");
            None
        }
    }
}

fn boolean(fields: &mut Fields<'_>, name: &'static str, issues: &mut Issues) -> Option<bool> {
    match fields.raw(name)? {
        Value::Null => None,
        Value::Bool(flag) => Some(*flag),
        _ => {
            issues.push(&fields.loc_of(name), "bool_type", "Input should be a valid boolean");
            None
        }
    }
}

fn svc_vad(fields: &mut Fields<'_>, issues: &mut Issues) -> Option<SvcVadParams> {
    let value = fields.raw("svc_vad").filter(|value| !value.is_null())?;
    let mut inner = Fields::of(value, &fields.loc_of("svc_vad"), issues)?;
    let params = SvcVadParams {
        pause_ms: integer(&mut inner, "pause_ms", 0, SVC_VAD_MS_MAX, issues),
        prefix_ms: integer(&mut inner, "prefix_ms", 0, SVC_VAD_MS_MAX, issues),
        max_hold_ms: integer(&mut inner, "max_hold_ms", 0, SVC_VAD_MS_MAX, issues),
    };
    inner.deny_unknown(issues);
    Some(params)
}
