//! The model catalog: which aliases and model ids this server offers and what each model can do.
//! Configuration, not code (`models.toml`); every catalog is validated when loaded.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::{Provider, ThinkingLevel};

/// The default catalog, embedded from `crates/svc-domain/models.toml`.
pub const DEFAULT_CATALOG_TOML: &str = include_str!("../../models.toml");

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
    /// Upstream API family (`gemini`, `openai`, `openai_live`, `xai`, `local`), always the
    /// provider table's ([`super::ProviderSpec::family`]): a catalog file may omit it, and one
    /// that names another is refused. The server maps it to an API key.
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
    aliases: BTreeMap<Provider, RawAlias>,
    #[serde(default)]
    models: Vec<ModelEntry>,
}

/// An `[aliases.…]` table of the file: an [`AliasEntry`] whose `family` may be left to the
/// provider table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAlias {
    #[serde(default)]
    family: Option<String>,
    default_model: String,
    default_voice: String,
    #[serde(default)]
    default_responses_model: Option<String>,
    #[serde(default)]
    session_cap_seconds: Option<u32>,
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
            if !model.thinking_levels.is_empty() && !model.alias.spec().thinking_levels {
                problems.push(format!(
                    "models[{position}]: thinking_levels apply to {} models only, not {:?}",
                    Provider::aliases_where(|spec| spec.thinking_levels),
                    model.id
                ));
            }
        }
        for (alias, entry) in &raw.aliases {
            let family = alias.spec().family;
            match &entry.family {
                Some(named) if named.trim().is_empty() => {
                    problems.push(format!("aliases.{alias}: family must be non-empty"))
                }
                Some(named) if named != family => problems
                    .push(format!("aliases.{alias}: family must be {family}, the provider's own (or be omitted)")),
                _ => {}
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
            match (&entry.default_responses_model, alias.spec().responses_backend) {
                (Some(_), true) | (None, false) => {}
                (Some(_), false) => problems.push(format!(
                    "aliases.{alias}: default_responses_model applies to {} only",
                    Provider::aliases_where(|spec| spec.responses_backend)
                )),
                (None, true) => problems.push(format!("aliases.{alias}: default_responses_model is required")),
            }
        }
        if !raw.aliases.contains_key(&raw.default_alias) {
            problems.push(format!("default_alias {} has no [aliases.{}] table", raw.default_alias, raw.default_alias));
        }
        if problems.is_empty() {
            let aliases = raw
                .aliases
                .into_iter()
                .map(|(alias, entry)| {
                    let entry = AliasEntry {
                        family: alias.spec().family.to_owned(),
                        default_model: entry.default_model,
                        default_voice: entry.default_voice,
                        default_responses_model: entry.default_responses_model,
                        session_cap_seconds: entry.session_cap_seconds,
                    };
                    (alias, entry)
                })
                .collect();
            Ok(ModelCatalog { default_alias: raw.default_alias, aliases, models: raw.models })
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
    pub(super) fn default_model(&self, alias: Provider) -> Option<&ModelEntry> {
        self.alias(alias).and_then(|entry| self.model(&entry.default_model))
    }
}
