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
//!
//! Layout, one file per stage: `providers.rs` (**the provider table**, the one place a provider
//! is added), `wire.rs` (the closed vocabularies), `catalog.rs` (stage 1),
//! `choice.rs` (stage 2: the blocks and their parsing), `resolve.rs` (stage 3) and `knobs.rs` (what
//! resolution yields per provider). Every public item is re-exported here, so its path is
//! `svc_domain::model::X` whichever file holds it.

mod catalog;
mod choice;
mod knobs;
mod providers;
mod resolve;
mod wire;

pub use catalog::{AliasEntry, DEFAULT_CATALOG_TOML, ModelCatalog, ModelEntry};
pub use choice::*;
pub use knobs::*;
pub use providers::{LOCAL_FAMILY, PROVIDERS, Provider, ProviderSpec};
pub use resolve::{ModelError, ResolvedModel, resolve_model};
pub use wire::{
    Delegation, Eagerness, EndOfSpeechSensitivity, ProviderCReasoningEffort, ReasoningEffort, ServiceTier,
    ThinkingLevel, ToolChoice, TurnDetection, Verbosity,
};

#[cfg(test)]
mod tests;
