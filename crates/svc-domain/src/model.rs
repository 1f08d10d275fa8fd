//! The model catalog, the `model` / `model_options` values of an inline agent, and their
//! resolution into one concrete, runnable model configuration.
//!
//! Three stages, each with its own kind of failure:
//!
//! 1. **Catalog** ([`ModelCatalog`]): which aliases and model ids exist and what each model can do.
//!    It is configuration, not code: `models.toml` next to this crate's manifest is embedded as the
//!    default ([`ModelCatalog::embedded`]) and a deployment may replace it with its own file
//!    ([`ModelCatalog::from_toml_str`]). Its content comes from `shared/research/providers.md`
//!    ("Current model ids"; `thinking_levels` and `background_tools` from the per-model notes of
//!    §2.4 and §2.8; `speech_to_speech_only` from the `audio.output=false` rows of §1.4, §2.4,
//!    §3.3, §4.3 and §5.2).
//! 2. **Schema** ([`parse_model`]): the shape of the value, reported as validation issues with
//!    `loc` paths (422 `validation_error`). Source: the spec's "Model" section (provider table) and
//!    "Limits" (svc_vad 0–5000 ms, provider_b_live max_output_tokens 16–32768, provider_c speed
//!    0.7–1.5). Bounds the spec leaves open are chosen here and documented on the constants below.
//!    A detector name the spec knows (`svc_vad`, `server_vad`, `semantic_vad`) always passes this
//!    stage, even on a provider that cannot run it. The one cross-field schema rule, a provider
//!    block sent as both `model` and `model_options`, is [`both_blocks`] (spec: "agent, inline
//!    variant" and "Session start rejections").
//! 3. **Resolution** ([`resolve_model`]): typed rejections ([`ModelError`]). Sources, all in the
//!    spec: "Model" rules (unknown or other-provider ids → `model_unavailable`; the provider_a,
//!    provider_b and provider_c rules → `turn_detection_unsupported`,
//!    `turn_detection_knob_mismatch`, `thinking_level_unsupported`), "agent, inline variant"
//!    (`model_options` folding; provider mismatch → `model_unavailable`) and "provider_b_live
//!    delegation" (`responses` default; the responses_* knobs unused under `client`/`svc`).
//!
//! Choices where the spec is silent (see docs/API-DESIGN.md, "Known quirks"):
//! - provider_b with no `turn_detection` runs `semantic_vad` (eagerness `auto`), the same default
//!   providers.md recommends for OpenAI and the semantic counterpart of provider_a's `svc_vad`.
//!   As on provider_a, a knob of the other detector sent without `turn_detection` is a mismatch.
//! - provider_b_mini has no knobs and runs the provider_b default (`semantic_vad`, `auto`).
//! - A `model_options` string is folded like a second `model` string: both must name the same
//!   provider, and if both name concrete models they must be the same model.
//! - A string `model` that names a concrete id and a `model_options` block with a different
//!   `model_id` → `model_unavailable`.
//! - A block's `model_id` must be a concrete id; an alias name there is unknown.
//! - Under `client`/`svc` delegation `responses_model` and `responses_instructions` are dropped
//!   from the resolved knobs; the other provider_b_live knobs are kept as sent.
//! - Resolution reports the first failure in this order: `model_unavailable`,
//!   `turn_detection_unsupported`, `turn_detection_knob_mismatch`, `thinking_level_unsupported`.
//!
//! Messages never echo what the caller sent, except model ids and aliases found in the catalog.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use svc_wire::{ErrorCode, Loc};

use crate::limits::INSTRUCTIONS_MAX_CHARS;
use crate::parse::{Fields, Issues};

// ---------------------------------------------------------------------------------------------
// Wire enums
// ---------------------------------------------------------------------------------------------

/// Implemented by every closed wire vocabulary of this module.
trait WireEnum: Copy + 'static {
    /// Every value, in wire order.
    const VALUES: &'static [Self];
    /// The wire spelling.
    fn wire(self) -> &'static str;
}

/// `'a', 'b' or 'c'`.
fn one_of(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|value| format!("'{value}'")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in wire order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }

            /// Parses the wire spelling (exact, case-sensitive).
            pub fn from_wire(text: &str) -> Option<Self> {
                match text { $($wire => Some($name::$variant),)+ _ => None }
            }
        }

        impl WireEnum for $name {
            const VALUES: &'static [Self] = $name::ALL;
            fn wire(self) -> &'static str {
                self.as_str()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                $name::from_wire(&text).ok_or_else(|| {
                    let values: Vec<&str> = $name::ALL.iter().map(|v| v.as_str()).collect();
                    serde::de::Error::custom(format!("expected {}", one_of(&values)))
                })
            }
        }
    };
}

wire_enum! {
    /// A provider alias, also the `provider` discriminator of a provider block.
    Provider {
        /// Google Gemini Live.
        ProviderA = "provider_a",
        /// OpenAI Realtime.
        ProviderB = "provider_b",
        /// OpenAI Realtime mini.
        ProviderBMini = "provider_b_mini",
        /// OpenAI GPT-Live with delegation.
        ProviderBLive = "provider_b_live",
        /// xAI Grok Voice.
        ProviderC = "provider_c",
        /// svc's own offline pipeline on this machine: VAD, Whisper, a small LLM (or an
        /// OpenAI-compatible endpoint), TTS. An svc extension of the contract's aliases.
        ProviderLocal = "provider_local",
    }
}

wire_enum! {
    /// A turn detector name. Which provider runs which is decided at resolution.
    TurnDetection {
        /// svc's own semantic turn detection (provider_a only).
        SvcVad = "svc_vad",
        /// The provider's silence-based detector.
        ServerVad = "server_vad",
        /// The provider's semantic detector (provider_b only).
        SemanticVad = "semantic_vad",
    }
}

wire_enum! {
    /// provider_b `eagerness` of `semantic_vad`.
    Eagerness {
        /// Waits longest before ending the user's turn.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// Ends the user's turn soonest.
        High = "high",
        /// Provider default (medium).
        Auto = "auto",
    }
}

wire_enum! {
    /// provider_a `end_of_speech_sensitivity` of `server_vad`.
    EndOfSpeechSensitivity {
        /// Less eager to end the turn.
        Low = "low",
        /// More eager to end the turn.
        High = "high",
    }
}

wire_enum! {
    /// provider_a `thinking_level`; which values a model accepts is in the catalog.
    ThinkingLevel {
        /// Minimal.
        Minimal = "minimal",
        /// Low.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// High.
        High = "high",
    }
}

wire_enum! {
    /// provider_b_live `reasoning_effort` of the backend Responses model.
    ReasoningEffort {
        /// Minimal.
        Minimal = "minimal",
        /// Low.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// High.
        High = "high",
    }
}

wire_enum! {
    /// provider_b_live `verbosity` of the backend Responses model.
    Verbosity {
        /// Low.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// High.
        High = "high",
    }
}

wire_enum! {
    /// provider_b_live `tool_choice` of the backend Responses model.
    ToolChoice {
        /// The model decides.
        Auto = "auto",
        /// The model must call a tool.
        Required = "required",
        /// The model calls no tool.
        None = "none",
    }
}

wire_enum! {
    /// provider_b_live `service_tier` of the backend Responses model.
    ServiceTier {
        /// Auto.
        Auto = "auto",
        /// Default.
        Default = "default",
        /// Flex.
        Flex = "flex",
        /// Priority.
        Priority = "priority",
    }
}

wire_enum! {
    /// provider_b_live `delegation`: who runs the backend the voice model delegates to.
    Delegation {
        /// The provider runs a Responses model (default).
        Responses = "responses",
        /// The end-user client answers with `delegation-append`.
        Client = "client",
        /// svc runs the backend (needs `resources:read`).
        Svc = "svc",
    }
}

wire_enum! {
    /// provider_c `reasoning_effort`.
    ProviderCReasoningEffort {
        /// Reasoning on (default).
        High = "high",
        /// Reasoning off.
        None = "none",
    }
}

// ---------------------------------------------------------------------------------------------
// Catalog
// ---------------------------------------------------------------------------------------------

/// The default catalog, embedded from `crates/svc-domain/models.toml`.
pub const DEFAULT_CATALOG_TOML: &str = include_str!("../models.toml");

/// Which aliases and model ids this server offers, and what each model can do.
///
/// Always valid: the only ways to get one are [`ModelCatalog::from_toml_str`],
/// [`ModelCatalog::embedded`] and serde deserialization, all of which validate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawCatalog")]
pub struct ModelCatalog {
    default_alias: Provider,
    aliases: BTreeMap<Provider, AliasEntry>,
    models: Vec<ModelEntry>,
}

/// What the catalog knows about one provider alias.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AliasEntry {
    /// Upstream API family (`gemini`, `openai`, `openai_live`, `xai`); the server maps it to an
    /// API key.
    pub family: String,
    /// Model id used when a request names only the alias, or no model at all.
    pub default_model: String,
    /// Voice used when the agent names none.
    pub default_voice: String,
    /// provider_b_live only: the backend Responses model under `responses` delegation when the
    /// block names no `responses_model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_responses_model: Option<String>,
    /// Hard cap of one upstream session in seconds, if the provider has one; the adapter rotates
    /// onto a fresh upstream session a few minutes before it.
    #[serde(default)]
    pub session_cap_seconds: Option<u32>,
}

/// What the catalog knows about one concrete model id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Upstream model id.
    pub id: String,
    /// The alias the model belongs to.
    pub alias: Provider,
    /// The model cannot serve a text-only session (`audio.output: false`).
    pub speech_to_speech_only: bool,
    /// The provider_a `thinking_level` values the model accepts; empty = it takes none.
    #[serde(default)]
    pub thinking_levels: Vec<ThinkingLevel>,
    /// The model supports non-blocking (background) tool calls.
    pub background_tools: bool,
    /// Announced shutdown or labelled legacy; still selectable.
    #[serde(default)]
    pub deprecated: bool,
}

/// The file shape, before validation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    default_alias: Provider,
    aliases: BTreeMap<Provider, AliasEntry>,
    #[serde(default)]
    models: Vec<ModelEntry>,
}

impl TryFrom<RawCatalog> for ModelCatalog {
    type Error = String;

    fn try_from(raw: RawCatalog) -> Result<Self, String> {
        let mut problems = Vec::new();
        for (position, model) in raw.models.iter().enumerate() {
            if model.id.trim().is_empty() || model.id.trim() != model.id {
                problems.push(format!("models[{position}]: id must be non-empty without surrounding spaces"));
            }
            if raw.models[..position].iter().any(|earlier| earlier.id == model.id) {
                problems.push(format!("models[{position}]: duplicate model id {:?}", model.id));
            }
            if Provider::from_wire(&model.id).is_some() {
                problems.push(format!("models[{position}]: model id {:?} collides with an alias", model.id));
            }
            if !raw.aliases.contains_key(&model.alias) {
                problems.push(format!(
                    "models[{position}]: model {:?} belongs to alias {} which has no [aliases.{}] table",
                    model.id, model.alias, model.alias
                ));
            }
            if !model.thinking_levels.is_empty() && model.alias != Provider::ProviderA {
                problems.push(format!(
                    "models[{position}]: thinking_levels apply to provider_a models only, not {:?}",
                    model.id
                ));
            }
        }
        for (alias, entry) in &raw.aliases {
            if entry.family.trim().is_empty() {
                problems.push(format!("aliases.{alias}: family must be non-empty"));
            }
            if entry.default_voice.trim().is_empty() {
                problems.push(format!("aliases.{alias}: default_voice must be non-empty"));
            }
            match raw.models.iter().find(|model| model.id == entry.default_model) {
                None => problems.push(format!(
                    "aliases.{alias}: default_model {:?} is not listed under [[models]]",
                    entry.default_model
                )),
                Some(model) if model.alias != *alias => problems.push(format!(
                    "aliases.{alias}: default_model {:?} belongs to {}",
                    entry.default_model, model.alias
                )),
                Some(_) => {}
            }
            match (&entry.default_responses_model, alias) {
                (Some(_), Provider::ProviderBLive) => {}
                (Some(_), _) => {
                    problems.push(format!("aliases.{alias}: default_responses_model applies to provider_b_live only"))
                }
                (None, Provider::ProviderBLive) => {
                    problems.push(format!("aliases.{alias}: default_responses_model is required"))
                }
                (None, _) => {}
            }
        }
        if !raw.aliases.contains_key(&raw.default_alias) {
            problems.push(format!("default_alias {} has no [aliases.{}] table", raw.default_alias, raw.default_alias));
        }
        if problems.is_empty() {
            Ok(ModelCatalog { default_alias: raw.default_alias, aliases: raw.aliases, models: raw.models })
        } else {
            Err(format!("invalid model catalog: {}", problems.join("; ")))
        }
    }
}

impl ModelCatalog {
    /// Parses and validates a catalog file. The error names every problem found.
    pub fn from_toml_str(text: &str) -> Result<ModelCatalog, String> {
        toml::from_str(text).map_err(|error| error.to_string())
    }

    /// The catalog embedded in the binary ([`DEFAULT_CATALOG_TOML`]), parsed once.
    pub fn embedded() -> &'static ModelCatalog {
        static EMBEDDED: OnceLock<ModelCatalog> = OnceLock::new();
        EMBEDDED.get_or_init(|| {
            ModelCatalog::from_toml_str(DEFAULT_CATALOG_TOML)
                .expect("the embedded models.toml is valid (pinned by a unit test)")
        })
    }

    /// The alias used when a request names no model.
    pub fn default_alias(&self) -> Provider {
        self.default_alias
    }

    /// The entry of `alias`, if this catalog offers it.
    pub fn alias(&self, alias: Provider) -> Option<&AliasEntry> {
        self.aliases.get(&alias)
    }

    /// Every offered alias with its entry, in [`Provider`] order.
    pub fn aliases(&self) -> impl Iterator<Item = (Provider, &AliasEntry)> {
        self.aliases.iter().map(|(alias, entry)| (*alias, entry))
    }

    /// The entry of a concrete model id.
    pub fn model(&self, id: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|model| model.id == id)
    }

    /// Every model, in file order.
    pub fn models(&self) -> &[ModelEntry] {
        &self.models
    }

    /// The default model of `alias`. Present for every offered alias (checked at load).
    fn default_model(&self, alias: Provider) -> Option<&ModelEntry> {
        self.alias(alias).and_then(|entry| self.model(&entry.default_model))
    }
}

// ---------------------------------------------------------------------------------------------
// Parsed values (schema level)
// ---------------------------------------------------------------------------------------------

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
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
    let block = match provider {
        Provider::ProviderA => ProviderBlock::ProviderA(ProviderABlock {
            model_id,
            temperature: number(&mut fields, "temperature", 0.0, PROVIDER_A_TEMPERATURE_MAX, issues),
            max_output_tokens: integer(&mut fields, "max_output_tokens", 1, PROVIDER_A_MAX_OUTPUT_TOKENS_MAX, issues),
            thinking_level: choice(&mut fields, "thinking_level", issues),
            include_thoughts: boolean(&mut fields, "include_thoughts", issues),
            turn_detection: choice(&mut fields, "turn_detection", issues),
            end_of_speech_sensitivity: choice(&mut fields, "end_of_speech_sensitivity", issues),
            silence_duration_ms: integer(&mut fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
            prefix_padding_ms: integer(&mut fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
            svc_vad: svc_vad(&mut fields, issues),
        }),
        Provider::ProviderB => ProviderBlock::ProviderB(ProviderBBlock {
            model_id,
            turn_detection: choice(&mut fields, "turn_detection", issues),
            eagerness: choice(&mut fields, "eagerness", issues),
            silence_duration_ms: integer(&mut fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
            prefix_padding_ms: integer(&mut fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
        }),
        Provider::ProviderBMini => ProviderBlock::ProviderBMini(ProviderBMiniBlock { model_id }),
        Provider::ProviderBLive => ProviderBlock::ProviderBLive(ProviderBLiveBlock {
            model_id,
            responses_model: fields
                .optional_string("responses_model", RESPONSES_MODEL_MAX_CHARS, issues)
                .map(str::to_owned),
            responses_instructions: fields
                .optional_string("responses_instructions", INSTRUCTIONS_MAX_CHARS, issues)
                .map(str::to_owned),
            reasoning_effort: choice(&mut fields, "reasoning_effort", issues),
            verbosity: choice(&mut fields, "verbosity", issues),
            tool_choice: choice(&mut fields, "tool_choice", issues),
            parallel_tool_calls: boolean(&mut fields, "parallel_tool_calls", issues),
            max_output_tokens: integer(
                &mut fields,
                "max_output_tokens",
                LIVE_MAX_OUTPUT_TOKENS_MIN,
                LIVE_MAX_OUTPUT_TOKENS_MAX,
                issues,
            ),
            service_tier: choice(&mut fields, "service_tier", issues),
            delegation: choice(&mut fields, "delegation", issues),
        }),
        Provider::ProviderC => ProviderBlock::ProviderC(ProviderCBlock {
            model_id,
            turn_detection: choice(&mut fields, "turn_detection", issues),
            silence_duration_ms: integer(&mut fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
            prefix_padding_ms: integer(&mut fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
            reasoning_effort: choice(&mut fields, "reasoning_effort", issues),
            speed: number(&mut fields, "speed", SPEED_MIN, SPEED_MAX, issues),
            idle_timeout_ms: integer(&mut fields, "idle_timeout_ms", IDLE_TIMEOUT_MS_MIN, IDLE_TIMEOUT_MS_MAX, issues),
        }),
        Provider::ProviderLocal => ProviderBlock::ProviderLocal(ProviderLocalBlock {
            model_id,
            turn_detection: choice(&mut fields, "turn_detection", issues),
            silence_duration_ms: integer(&mut fields, "silence_duration_ms", 0, DETECTOR_MS_MAX, issues),
            prefix_padding_ms: integer(&mut fields, "prefix_padding_ms", 0, DETECTOR_MS_MAX, issues),
            temperature: number(&mut fields, "temperature", 0.0, LOCAL_TEMPERATURE_MAX, issues),
            max_output_tokens: integer(&mut fields, "max_output_tokens", 1, LOCAL_MAX_OUTPUT_TOKENS_MAX, issues),
            preemptive_generation: boolean(&mut fields, "preemptive_generation", issues),
        }),
    };
    fields.deny_unknown(issues);
    Some(block)
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

// ---------------------------------------------------------------------------------------------
// Resolution
// ---------------------------------------------------------------------------------------------

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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// OpenAI Realtime families do; xAI's voice API and GPT-Live (audio-only) do not.
    pub fn takes_images(&self) -> bool {
        matches!(self.family.as_str(), "gemini" | "openai")
    }
}

/// Effective knob settings per provider. `None` fields were not sent and have no default in the
/// contract: the runtime (svc_vad) or the upstream decides.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderBKnobs {
    /// The detector and its knobs.
    pub turn_detection: ProviderBTurnDetection,
}

/// provider_b detector with the knobs it reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    let (knobs, delegation) = match (provider, wanted.block) {
        (Provider::ProviderA, block) => {
            let default = ProviderABlock::default();
            let block = match block {
                Some(ProviderBlock::ProviderA(block)) => block,
                _ => &default,
            };
            (Knobs::ProviderA(provider_a_knobs(block, entry)?), None)
        }
        (Provider::ProviderB, block) => {
            let default = ProviderBBlock::default();
            let block = match block {
                Some(ProviderBlock::ProviderB(block)) => block,
                _ => &default,
            };
            (Knobs::ProviderB(provider_b_knobs(block)?), None)
        }
        (Provider::ProviderBMini, _) => (Knobs::ProviderBMini(provider_b_knobs(&ProviderBBlock::default())?), None),
        (Provider::ProviderBLive, block) => {
            let default = ProviderBLiveBlock::default();
            let block = match block {
                Some(ProviderBlock::ProviderBLive(block)) => block,
                _ => &default,
            };
            let delegation = block.delegation.unwrap_or(Delegation::Responses);
            (Knobs::ProviderBLive(provider_b_live_knobs(block, delegation, alias)), Some(delegation))
        }
        (Provider::ProviderC, block) => {
            let default = ProviderCBlock::default();
            let block = match block {
                Some(ProviderBlock::ProviderC(block)) => block,
                _ => &default,
            };
            (Knobs::ProviderC(provider_c_knobs(block)?), None)
        }
        (Provider::ProviderLocal, block) => {
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
            (Knobs::ProviderLocal(knobs), None)
        }
    };
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

fn provider_a_knobs(block: &ProviderABlock, entry: &ModelEntry) -> Result<ProviderAKnobs, ModelError> {
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

fn provider_b_knobs(block: &ProviderBBlock) -> Result<ProviderBKnobs, ModelError> {
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

fn provider_b_live_knobs(block: &ProviderBLiveBlock, delegation: Delegation, alias: &AliasEntry) -> ProviderBLiveKnobs {
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

fn provider_c_knobs(block: &ProviderCBlock) -> Result<ProviderCKnobs, ModelError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{body, key};
    use serde_json::json;

    fn model_loc() -> Loc {
        key(&key(&body(), "agent"), "model")
    }

    /// Parses `value` at `["body","agent","model"]`, asserting it is clean.
    fn parsed(value: Value) -> Option<ModelChoice> {
        let mut issues = Issues::default();
        let choice = parse_model(&value, &model_loc(), &mut issues);
        assert!(issues.is_empty(), "{value}: {:?}", issues.into_vec());
        choice
    }

    /// The issues of `value`, as (loc, kind).
    fn problems(value: Value) -> Vec<(Value, String)> {
        let mut issues = Issues::default();
        let choice = parse_model(&value, &model_loc(), &mut issues);
        let issues = issues.into_vec();
        assert_eq!(choice.is_none(), !issues.is_empty() || value.is_null(), "{value}");
        issues.into_iter().map(|i| (serde_json::to_value(&i.loc).expect("loc"), i.kind)).collect()
    }

    /// Resolves against the embedded catalog; `Value::Null` means the field is absent.
    fn resolve(model: Value, options: Value) -> Result<ResolvedModel, ModelError> {
        let model = parsed(model);
        let options = parsed(options);
        resolve_model(ModelCatalog::embedded(), model.as_ref(), options.as_ref())
    }

    fn model_of(model: Value, options: Value) -> String {
        resolve(model.clone(), options.clone()).unwrap_or_else(|e| panic!("{model} / {options}: {e}")).model_id
    }

    #[test]
    fn embedded_catalog_validates() {
        let catalog = ModelCatalog::from_toml_str(DEFAULT_CATALOG_TOML).expect("embedded catalog is valid");
        assert_eq!(&catalog, ModelCatalog::embedded());
        assert_eq!(catalog.default_alias(), Provider::ProviderA);
        let aliases: Vec<Provider> = catalog.aliases().map(|(alias, _)| alias).collect();
        assert_eq!(aliases, Provider::ALL);
        for (alias, entry) in catalog.aliases() {
            assert_eq!(catalog.model(&entry.default_model).map(|m| m.alias), Some(alias));
        }
    }

    #[test]
    fn every_alias_resolves_to_its_default() {
        let table = [
            ("provider_a", "gemini", "gemini-3.8-live", "Puck", None),
            ("provider_b", "openai", "gpt-realtime-2.1", "marin", None),
            ("provider_b_mini", "openai", "gpt-realtime-2.1-mini", "marin", None),
            ("provider_b_live", "openai_live", "gpt-live-1", "marin", Some(Delegation::Responses)),
            ("provider_c", "xai", "grok-voice-3.0", "eve", None),
        ];
        for (alias, family, model, voice, delegation) in table {
            for request in [json!(alias), json!({"provider": alias})] {
                let resolved = resolve(request.clone(), Value::Null).expect(alias);
                assert_eq!(resolved.alias.as_str(), alias, "{request}");
                assert_eq!(
                    (resolved.family.as_str(), resolved.model_id.as_str(), resolved.default_voice.as_str()),
                    (family, model, voice),
                    "{request}"
                );
                assert_eq!(resolved.delegation, delegation, "{request}");
            }
        }
        let default = resolve(Value::Null, Value::Null).expect("default");
        assert_eq!((default.alias, default.model_id.as_str()), (Provider::ProviderA, "gemini-3.8-live"));
        assert_eq!(default.knobs.turn_detection(), Some(TurnDetection::SvcVad));
    }

    #[test]
    fn concrete_ids_select_their_model() {
        for entry in ModelCatalog::embedded().models() {
            let resolved = resolve(json!(entry.id), Value::Null).expect(&entry.id);
            assert_eq!((resolved.alias, resolved.model_id.as_str()), (entry.alias, entry.id.as_str()));
            assert_eq!(resolved.deprecated, entry.deprecated, "{}", entry.id);
            let block =
                resolve(json!({"provider": entry.alias.as_str(), "model_id": entry.id}), Value::Null).expect(&entry.id);
            assert_eq!(block.model_id, entry.id);
        }
        let live = resolve(json!("gpt-live-1.1"), Value::Null).expect("live");
        assert!(live.speech_to_speech_only && !live.background_tools);
        let legacy = resolve(json!("gemini-3.1-flash-live-preview"), Value::Null).expect("legacy");
        assert!(legacy.deprecated && !legacy.background_tools && !legacy.speech_to_speech_only);
    }

    #[test]
    fn unavailable() {
        let table = [
            (json!("no-such-model"), Value::Null),
            (json!(""), Value::Null),
            (json!("Provider_A"), Value::Null),
            (json!({"provider": "provider_a", "model_id": "no-such-model"}), Value::Null),
            (json!({"provider": "provider_a", "model_id": "provider_a"}), Value::Null),
            (json!({"provider": "provider_a", "model_id": "gpt-realtime-2.1"}), Value::Null),
            (json!({"provider": "provider_b", "model_id": "gpt-realtime-2.1-mini"}), Value::Null),
            (json!({"provider": "provider_b_live", "model_id": "gpt-realtime-2"}), Value::Null),
            (json!({"provider": "provider_c", "model_id": "gemini-3.8-live"}), Value::Null),
            // Folding: alias vs block, id vs block, string vs string, id vs model_id.
            (json!("provider_b"), json!({"provider": "provider_a"})),
            (json!({"provider": "provider_a"}), json!("provider_b")),
            (json!("gpt-live-1"), json!({"provider": "provider_b"})),
            (json!({"provider": "provider_c"}), json!("gemini-3.8-live")),
            (json!("provider_a"), json!("provider_c")),
            (json!("gpt-realtime-2"), json!("gpt-realtime-2.1")),
            (json!("gpt-realtime-2"), json!({"provider": "provider_b", "model_id": "gpt-realtime-2.1"})),
            (json!("no-such-model"), json!({"provider": "provider_a"})),
            (json!({"provider": "provider_a"}), json!({"provider": "provider_a"})),
        ];
        for (model, options) in table {
            match resolve(model.clone(), options.clone()) {
                Err(error @ ModelError::Unavailable(_)) => {
                    assert_eq!(error.code(), ErrorCode::ModelUnavailable);
                }
                other => panic!("{model} / {options}: {other:?}"),
            }
        }
        let error = resolve(json!("my secret prompt text"), Value::Null).expect_err("unknown");
        assert!(!error.message().contains("secret"), "{error}");
        let error = resolve(json!({"provider": "provider_a", "model_id": "gpt-realtime-2.1"}), Value::Null)
            .expect_err("cross-provider");
        assert_eq!(error.message(), "Model gpt-realtime-2.1 belongs to provider_b, not provider_a");
    }

    #[test]
    fn model_options_fold_into_model() {
        let extended = "gemini-3.8-live-extended-thinking";
        let block = json!({"provider": "provider_a", "thinking_level": "low"});
        for (model, options) in [(json!(extended), block.clone()), (block, json!(extended))] {
            let resolved = resolve(model, options).expect("fold");
            assert_eq!(resolved.model_id, extended);
            let Knobs::ProviderA(knobs) = resolved.knobs else { panic!("provider_a knobs") };
            assert_eq!(knobs.thinking_level, Some(ThinkingLevel::Low));
        }
        // An alias string must match the block; the block's own model_id then wins.
        assert_eq!(model_of(json!("provider_a"), json!({"provider": "provider_a", "model_id": extended})), extended);
        assert_eq!(model_of(json!({"provider": "provider_b"}), json!("provider_b")), "gpt-realtime-2.1");
        // Same id on both sides is fine; options alone act as model.
        assert_eq!(
            model_of(json!("gpt-realtime-2"), json!({"provider": "provider_b", "model_id": "gpt-realtime-2"})),
            "gpt-realtime-2"
        );
        assert_eq!(model_of(Value::Null, json!({"provider": "provider_c"})), "grok-voice-3.0");
        assert_eq!(model_of(Value::Null, json!("gpt-live-1.1")), "gpt-live-1.1");
        assert_eq!(model_of(json!("provider_b"), json!("gpt-realtime-1.5")), "gpt-realtime-1.5");
        // The folded block's knobs apply.
        let resolved =
            resolve(json!("gpt-realtime-2"), json!({"provider": "provider_b", "turn_detection": "server_vad"}))
                .expect("fold");
        assert_eq!(resolved.knobs.turn_detection(), Some(TurnDetection::ServerVad));
    }

    #[test]
    fn both_blocks_is_a_validation_error_at_model_options() {
        let a = parsed(json!({"provider": "provider_a"}));
        let name = parsed(json!("provider_a"));
        assert!(both_blocks(a.as_ref(), a.as_ref()));
        assert!(!both_blocks(a.as_ref(), name.as_ref()) && !both_blocks(name.as_ref(), a.as_ref()));
        assert!(!both_blocks(a.as_ref(), None) && !both_blocks(None, None));

        let agent = json!({"model": {"provider": "provider_a"}, "model_options": {"provider": "provider_a"}});
        let mut issues = Issues::default();
        let mut fields = Fields::of(&agent, &key(&body(), "agent"), &mut issues).expect("object");
        let read = parse_model_fields(&mut fields, &mut issues);
        fields.deny_unknown(&mut issues);
        assert!(read.model.is_some() && read.model_options.is_some());
        let issues = issues.into_vec();
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].kind, "model_options_conflict");
        assert_eq!(serde_json::to_value(&issues[0].loc).expect("loc"), json!(["body", "agent", "model_options"]));
    }

    #[test]
    fn knob_mismatch_rules() {
        let mismatches = [
            // provider_a: server_vad knobs with svc_vad, defaulted or explicit.
            json!({"provider": "provider_a", "silence_duration_ms": 500}),
            json!({"provider": "provider_a", "prefix_padding_ms": 100}),
            json!({"provider": "provider_a", "end_of_speech_sensitivity": "low"}),
            json!({"provider": "provider_a", "turn_detection": "svc_vad", "silence_duration_ms": 500}),
            json!({"provider": "provider_a", "turn_detection": "svc_vad", "prefix_padding_ms": 100}),
            json!({"provider": "provider_a", "turn_detection": "svc_vad", "end_of_speech_sensitivity": "high"}),
            // provider_a: the svc_vad object with server_vad.
            json!({"provider": "provider_a", "turn_detection": "server_vad", "svc_vad": {"pause_ms": 300}}),
            json!({"provider": "provider_a", "turn_detection": "server_vad", "svc_vad": {}}),
            // provider_b: server_vad knobs with semantic_vad (defaulted or explicit), eagerness with server_vad.
            json!({"provider": "provider_b", "silence_duration_ms": 500}),
            json!({"provider": "provider_b", "turn_detection": "semantic_vad", "silence_duration_ms": 500}),
            json!({"provider": "provider_b", "turn_detection": "semantic_vad", "prefix_padding_ms": 300}),
            json!({"provider": "provider_b", "turn_detection": "server_vad", "eagerness": "low"}),
            json!({"provider": "provider_b", "turn_detection": "server_vad", "eagerness": "auto", "silence_duration_ms": 1}),
        ];
        for block in mismatches {
            match resolve(block.clone(), Value::Null) {
                Err(error @ ModelError::KnobMismatch(_)) => {
                    assert_eq!(error.code(), ErrorCode::TurnDetectionKnobMismatch)
                }
                other => panic!("{block}: {other:?}"),
            }
        }
        let accepted = [
            (json!({"provider": "provider_a", "svc_vad": {"pause_ms": 300}}), TurnDetection::SvcVad),
            (json!({"provider": "provider_a", "turn_detection": "svc_vad", "svc_vad": {}}), TurnDetection::SvcVad),
            (
                json!({"provider": "provider_a", "turn_detection": "server_vad", "silence_duration_ms": 500,
                       "prefix_padding_ms": 20, "end_of_speech_sensitivity": "low"}),
                TurnDetection::ServerVad,
            ),
            (json!({"provider": "provider_b", "eagerness": "high"}), TurnDetection::SemanticVad),
            (
                json!({"provider": "provider_b", "turn_detection": "semantic_vad", "eagerness": "low"}),
                TurnDetection::SemanticVad,
            ),
            (
                json!({"provider": "provider_b", "turn_detection": "server_vad", "silence_duration_ms": 500, "prefix_padding_ms": 300}),
                TurnDetection::ServerVad,
            ),
        ];
        for (block, detector) in accepted {
            let resolved = resolve(block.clone(), Value::Null).unwrap_or_else(|e| panic!("{block}: {e}"));
            assert_eq!(resolved.knobs.turn_detection(), Some(detector), "{block}");
        }
        let error = resolve(json!({"provider": "provider_a", "silence_duration_ms": 500}), Value::Null).expect_err("x");
        assert!(error.message().contains("silence_duration_ms") && error.message().contains("default"), "{error}");
    }

    #[test]
    fn turn_detection_unsupported() {
        for (provider, detector, supported) in [
            ("provider_a", "svc_vad", true),
            ("provider_a", "server_vad", true),
            ("provider_a", "semantic_vad", false),
            ("provider_b", "svc_vad", false),
            ("provider_b", "server_vad", true),
            ("provider_b", "semantic_vad", true),
            ("provider_c", "svc_vad", false),
            ("provider_c", "server_vad", true),
            ("provider_c", "semantic_vad", false),
        ] {
            let block = json!({"provider": provider, "turn_detection": detector});
            match (resolve(block.clone(), Value::Null), supported) {
                (Ok(resolved), true) => {
                    assert_eq!(resolved.knobs.turn_detection().map(TurnDetection::as_str), Some(detector))
                }
                (Err(error @ ModelError::TurnDetectionUnsupported(_)), false) => {
                    assert_eq!(error.code(), ErrorCode::TurnDetectionUnsupported)
                }
                (other, _) => panic!("{block}: {other:?}"),
            }
        }
        // Unsupported wins over a knob mismatch.
        let block = json!({"provider": "provider_b", "turn_detection": "svc_vad", "eagerness": "low"});
        assert!(matches!(resolve(block, Value::Null), Err(ModelError::TurnDetectionUnsupported(_))));
    }

    #[test]
    fn thinking_level_per_model() {
        let table = [
            ("gemini-3.8-live-extended-thinking", "low", true),
            ("gemini-3.8-live-extended-thinking", "high", true),
            ("gemini-3.8-live-extended-thinking", "minimal", false),
            ("gemini-3.1-flash-live-preview", "minimal", true),
            ("gemini-3.8-live", "low", false),
            ("gemini-2.5-flash-native-audio-preview-12-2025", "high", false),
        ];
        for (model, level, accepted) in table {
            let block = json!({"provider": "provider_a", "model_id": model, "thinking_level": level});
            match (resolve(block.clone(), Value::Null), accepted) {
                (Ok(_), true) => {}
                (Err(error @ ModelError::ThinkingLevelUnsupported(_)), false) => {
                    assert_eq!(error.code(), ErrorCode::ThinkingLevelUnsupported)
                }
                (other, _) => panic!("{block}: {other:?}"),
            }
        }
        // The default alias model takes none; leaving it unset is fine.
        assert!(matches!(
            resolve(json!({"provider": "provider_a", "thinking_level": "low"}), Value::Null),
            Err(ModelError::ThinkingLevelUnsupported(_))
        ));
        assert!(resolve(json!({"provider": "provider_a", "include_thoughts": true}), Value::Null).is_ok());
    }

    #[test]
    fn bounds_and_shapes_report_the_exact_loc() {
        let ok = [
            json!({"provider": "provider_a", "svc_vad": {"pause_ms": 0, "prefix_ms": 0, "max_hold_ms": 0}}),
            json!({"provider": "provider_a", "svc_vad": {"pause_ms": 5000, "prefix_ms": 5000, "max_hold_ms": 5000}}),
            json!({"provider": "provider_a", "temperature": 0, "max_output_tokens": 1}),
            json!({"provider": "provider_a", "temperature": 2.0, "max_output_tokens": 65536, "svc_vad": null}),
            json!({"provider": "provider_c", "speed": 0.7}),
            json!({"provider": "provider_c", "speed": 1.5, "idle_timeout_ms": 1000}),
            json!({"provider": "provider_c", "speed": 1, "idle_timeout_ms": 600000, "reasoning_effort": "none"}),
            json!({"provider": "provider_b_live", "max_output_tokens": 16}),
            json!({"provider": "provider_b_live", "max_output_tokens": 32768}),
            json!({"provider": "provider_b", "silence_duration_ms": 0, "prefix_padding_ms": 10000, "turn_detection": "server_vad"}),
            json!({"provider": "provider_b_mini", "model_id": null}),
        ];
        for value in ok {
            assert!(problems(value.clone()).is_empty(), "{value}");
        }
        let at = |path: &[&str]| {
            let mut loc = vec![json!("body"), json!("agent"), json!("model")];
            loc.extend(path.iter().map(|segment| json!(segment)));
            Value::Array(loc)
        };
        let bad = [
            (json!({"provider": "provider_a", "svc_vad": {"pause_ms": -1}}), at(&["svc_vad", "pause_ms"]), "range"),
            (json!({"provider": "provider_a", "svc_vad": {"pause_ms": 5001}}), at(&["svc_vad", "pause_ms"]), "range"),
            (json!({"provider": "provider_a", "svc_vad": {"prefix_ms": -1}}), at(&["svc_vad", "prefix_ms"]), "range"),
            (json!({"provider": "provider_a", "svc_vad": {"prefix_ms": 5001}}), at(&["svc_vad", "prefix_ms"]), "range"),
            (
                json!({"provider": "provider_a", "svc_vad": {"max_hold_ms": -1}}),
                at(&["svc_vad", "max_hold_ms"]),
                "range",
            ),
            (
                json!({"provider": "provider_a", "svc_vad": {"max_hold_ms": 5001}}),
                at(&["svc_vad", "max_hold_ms"]),
                "range",
            ),
            (
                json!({"provider": "provider_a", "svc_vad": {"max_hold_ms": 1.5}}),
                at(&["svc_vad", "max_hold_ms"]),
                "int_type",
            ),
            (json!({"provider": "provider_a", "svc_vad": {"bogus": 1}}), at(&["svc_vad", "bogus"]), "extra_forbidden"),
            (json!({"provider": "provider_a", "svc_vad": 300}), at(&["svc_vad"]), "object_type"),
            (json!({"provider": "provider_c", "speed": 0.69}), at(&["speed"]), "range"),
            (json!({"provider": "provider_c", "speed": 1.51}), at(&["speed"]), "range"),
            (json!({"provider": "provider_c", "speed": "fast"}), at(&["speed"]), "float_type"),
            (json!({"provider": "provider_c", "idle_timeout_ms": 999}), at(&["idle_timeout_ms"]), "range"),
            (json!({"provider": "provider_c", "idle_timeout_ms": 600001}), at(&["idle_timeout_ms"]), "range"),
            (json!({"provider": "provider_c", "reasoning_effort": "low"}), at(&["reasoning_effort"]), "enum"),
            (json!({"provider": "provider_b_live", "max_output_tokens": 15}), at(&["max_output_tokens"]), "range"),
            (json!({"provider": "provider_b_live", "max_output_tokens": 32769}), at(&["max_output_tokens"]), "range"),
            (json!({"provider": "provider_b_live", "delegation": "server"}), at(&["delegation"]), "enum"),
            (json!({"provider": "provider_b_live", "reasoning_effort": "xhigh"}), at(&["reasoning_effort"]), "enum"),
            (json!({"provider": "provider_b_live", "verbosity": 1}), at(&["verbosity"]), "enum"),
            (json!({"provider": "provider_b_live", "tool_choice": "any"}), at(&["tool_choice"]), "enum"),
            (json!({"provider": "provider_b_live", "service_tier": "ultrafast"}), at(&["service_tier"]), "enum"),
            (
                json!({"provider": "provider_b_live", "parallel_tool_calls": "yes"}),
                at(&["parallel_tool_calls"]),
                "bool_type",
            ),
            (
                json!({"provider": "provider_b_live", "responses_model": ""}),
                at(&["responses_model"]),
                "string_too_short",
            ),
            (
                json!({"provider": "provider_b_live", "turn_detection": "server_vad"}),
                at(&["turn_detection"]),
                "extra_forbidden",
            ),
            (
                json!({"provider": "provider_b_mini", "turn_detection": "server_vad"}),
                at(&["turn_detection"]),
                "extra_forbidden",
            ),
            (json!({"provider": "provider_b_mini", "eagerness": "low"}), at(&["eagerness"]), "extra_forbidden"),
            (json!({"provider": "provider_b", "thinking_level": "low"}), at(&["thinking_level"]), "extra_forbidden"),
            (json!({"provider": "provider_c", "eagerness": "low"}), at(&["eagerness"]), "extra_forbidden"),
            (json!({"provider": "provider_b", "eagerness": "fast"}), at(&["eagerness"]), "enum"),
            (json!({"provider": "provider_b", "turn_detection": "manual"}), at(&["turn_detection"]), "enum"),
            (json!({"provider": "provider_b", "silence_duration_ms": 10001}), at(&["silence_duration_ms"]), "range"),
            (json!({"provider": "provider_a", "prefix_padding_ms": -1}), at(&["prefix_padding_ms"]), "range"),
            (
                json!({"provider": "provider_a", "end_of_speech_sensitivity": "medium"}),
                at(&["end_of_speech_sensitivity"]),
                "enum",
            ),
            (json!({"provider": "provider_a", "thinking_level": "xhigh"}), at(&["thinking_level"]), "enum"),
            (json!({"provider": "provider_a", "temperature": 2.01}), at(&["temperature"]), "range"),
            (json!({"provider": "provider_a", "temperature": -0.1}), at(&["temperature"]), "range"),
            (json!({"provider": "provider_a", "temperature": true}), at(&["temperature"]), "float_type"),
            (json!({"provider": "provider_a", "max_output_tokens": 0}), at(&["max_output_tokens"]), "range"),
            (json!({"provider": "provider_a", "max_output_tokens": 65537}), at(&["max_output_tokens"]), "range"),
            (json!({"provider": "provider_a", "include_thoughts": "yes"}), at(&["include_thoughts"]), "bool_type"),
            (json!({"provider": "provider_a", "model_id": 3}), at(&["model_id"]), "string_type"),
            (json!({"provider": "provider_d"}), at(&["provider"]), "union_tag_invalid"),
            (json!({"provider": 1}), at(&["provider"]), "union_tag_invalid"),
            (json!({"model_id": "gemini-3.8-live"}), at(&["provider"]), "missing"),
            (json!(42), at(&[]), "model_type"),
            (json!(["provider_a"]), at(&[]), "model_type"),
            (json!(true), at(&[]), "model_type"),
        ];
        for (value, loc, kind) in bad {
            assert_eq!(problems(value.clone()), vec![(loc, kind.to_owned())], "{value}");
        }
        // Several problems in one block are all reported; messages never echo values.
        let mut issues = Issues::default();
        let value = json!({"provider": "provider_c", "speed": 9, "turn_detection": "secret-value", "x": "private"});
        assert!(parse_model(&value, &model_loc(), &mut issues).is_none());
        let issues = issues.into_vec();
        assert_eq!(issues.len(), 3);
        let rendered = serde_json::to_string(&issues).expect("json");
        assert!(!rendered.contains("secret-value") && !rendered.contains("private"), "{rendered}");
        // Null is absent; strings are names.
        assert_eq!(problems(Value::Null), vec![]);
        assert_eq!(parsed(Value::Null), None);
        assert_eq!(parsed(json!("anything")), Some(ModelChoice::Name("anything".to_owned())));
    }

    #[test]
    fn provider_b_live_delegation() {
        let resolved =
            resolve(json!({"provider": "provider_b_live", "tool_choice": "required"}), Value::Null).expect("responses");
        assert_eq!(resolved.delegation, Some(Delegation::Responses));
        assert_eq!(resolved.knobs.turn_detection(), None);
        let Knobs::ProviderBLive(knobs) = &resolved.knobs else { panic!("live knobs") };
        assert_eq!(
            (knobs.responses_model.as_deref(), knobs.tool_choice),
            (Some("gpt-5.6-luna"), Some(ToolChoice::Required))
        );

        for (delegation, expected) in [("client", Delegation::Client), ("svc", Delegation::Svc)] {
            let block = json!({"provider": "provider_b_live", "delegation": delegation,
                               "responses_model": "gpt-5.6-terra", "responses_instructions": "x"});
            let resolved = resolve(block, Value::Null).expect(delegation);
            assert_eq!(resolved.delegation, Some(expected));
            let Knobs::ProviderBLive(knobs) = &resolved.knobs else { panic!("live knobs") };
            assert_eq!((knobs.responses_model.as_deref(), knobs.responses_instructions.as_deref()), (None, None));
        }
        let named = resolve(json!({"provider": "provider_b_live", "responses_model": "gpt-5.6-terra"}), Value::Null)
            .expect("named");
        let Knobs::ProviderBLive(knobs) = &named.knobs else { panic!("live knobs") };
        assert_eq!(knobs.responses_model.as_deref(), Some("gpt-5.6-terra"));
        // Other providers carry no delegation.
        assert_eq!(resolve(json!("provider_b"), Value::Null).expect("b").delegation, None);
    }

    #[test]
    fn resolved_config_serializes_for_the_runtime() {
        let resolved = resolve(
            json!({"provider": "provider_b", "turn_detection": "server_vad", "silence_duration_ms": 400}),
            Value::Null,
        )
        .expect("b");
        assert_eq!(
            serde_json::to_value(&resolved).expect("json"),
            json!({
                "alias": "provider_b", "family": "openai", "model_id": "gpt-realtime-2.1",
                "speech_to_speech_only": false, "background_tools": true, "default_voice": "marin",
                "default_responses_model": null, "session_cap_seconds": 3600,
                "deprecated": false, "delegation": null,
                "knobs": {"provider": "provider_b",
                          "turn_detection": {"type": "server_vad", "silence_duration_ms": 400, "prefix_padding_ms": null}}
            })
        );
        let mini = resolve(json!("provider_b_mini"), Value::Null).expect("mini");
        assert_eq!(
            serde_json::to_value(&mini.knobs).expect("json"),
            json!({"provider": "provider_b_mini", "turn_detection": {"type": "semantic_vad", "eagerness": "auto"}})
        );
        let a = resolve(json!({"provider": "provider_a", "svc_vad": {"pause_ms": 700}}), Value::Null).expect("a");
        assert_eq!(
            serde_json::to_value(&a.knobs).expect("json")["turn_detection"],
            json!({"type": "svc_vad", "pause_ms": 700, "prefix_ms": null, "max_hold_ms": null})
        );
        let c = resolve(json!({"provider": "provider_c", "speed": 1.2}), Value::Null).expect("c");
        let Knobs::ProviderC(knobs) = c.knobs else { panic!("c knobs") };
        assert_eq!((knobs.reasoning_effort, knobs.speed), (ProviderCReasoningEffort::High, Some(1.2)));
    }

    const SMALL: &str = r#"
        default_alias = "provider_b"
        [aliases.provider_b]
        family = "openai"
        default_model = "m-b"
        default_voice = "marin"
        [aliases.provider_c]
        family = "xai"
        default_model = "m-c"
        default_voice = "eve"
        [[models]]
        id = "m-b"
        alias = "provider_b"
        speech_to_speech_only = false
        background_tools = true
        [[models]]
        id = "m-c"
        alias = "provider_c"
        speech_to_speech_only = false
        background_tools = true
    "#;

    #[test]
    fn catalog_files_are_validated() {
        let small = ModelCatalog::from_toml_str(SMALL).expect("valid");
        // A catalog without an alias makes that alias and its ids unavailable.
        let missing = resolve_model(&small, Some(&ModelChoice::Name("provider_a".to_owned())), None);
        assert!(matches!(missing, Err(ModelError::Unavailable(_))), "{missing:?}");
        assert_eq!(resolve_model(&small, None, None).map(|r| r.model_id), Ok("m-b".to_owned()));

        let broken = [
            (SMALL.replace("default_model = \"m-c\"", "default_model = \"m-b\""), "belongs to provider_b"),
            (SMALL.replace("default_model = \"m-c\"", "default_model = \"m-x\""), "not listed"),
            (SMALL.replace("id = \"m-c\"", "id = \"m-b\""), "duplicate model id"),
            (SMALL.replace("default_alias = \"provider_b\"", "default_alias = \"provider_a\""), "default_alias"),
            (SMALL.replace("default_alias = \"provider_b\"", "default_alias = \"provider_z\""), "expected"),
            (SMALL.replace("id = \"m-c\"", "id = \"provider_c\""), "collides"),
            (
                SMALL.replace(
                    "background_tools = true\n        [[models]]",
                    "background_tools = true\n        thinking_levels = [\"low\"]\n        [[models]]",
                ),
                "thinking_levels",
            ),
            (
                SMALL.replace(
                    "default_voice = \"eve\"",
                    "default_voice = \"eve\"\n        default_responses_model = \"x\"",
                ),
                "provider_b_live only",
            ),
            (SMALL.replace("family = \"xai\"", "family = \"xai\"\n        colour = \"blue\""), "unknown field"),
            (
                SMALL.replace(
                    "speech_to_speech_only = false\n        background_tools = true\n    ",
                    "speech_to_speech_only = false\n    ",
                ),
                "background_tools",
            ),
        ];
        for (text, expected) in broken {
            let error = ModelCatalog::from_toml_str(&text).expect_err(expected);
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }
}
