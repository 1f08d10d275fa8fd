//! The provider table: every provider alias with what the code (not the catalog) knows about it.
//!
//! **To add a provider, add a row here** (and its block and knobs types with their two functions,
//! `choice.rs` and `resolve.rs`), then a `[aliases.…]` table and its models to `models.toml`; a
//! new upstream family also needs a row in svc-provider's `FAMILIES`. [`Provider`], its `ALL`,
//! `as_str` and `from_wire`, the catalog's alias → family wiring and its per-alias rules, block
//! parsing and knob resolution all read this table, so nothing else lists the providers (the
//! compiler points at the few `match`es on a block or knobs type that must grow a variant). One
//! place it cannot point at: svc-server's OpenAPI document (`routes/schemas.rs`) spells each
//! block's knobs out by hand.
//!
//! The table is a macro invocation so that the enum and the rows cannot drift apart: the
//! variants, `ALL` and [`PROVIDERS`] are emitted from the same list, in the same order.

use super::choice::{
    provider_a_block, provider_b_block, provider_b_live_block, provider_b_mini_block, provider_c_block,
    provider_local_block,
};
use super::resolve::{
    provider_a_knobs, provider_b_knobs, provider_b_live_knobs, provider_b_mini_knobs, provider_c_knobs,
    provider_local_knobs,
};
use super::wire::wire_enum_impls;
use super::{AliasEntry, Delegation, Knobs, ModelEntry, ModelError, ProviderBlock};
use crate::parse::{Fields, Issues};

/// The catalog family of svc's own pipeline on this machine (svc-local), which the session
/// runtime runs instead of an upstream codec. Every other family is one of svc-provider's.
pub const LOCAL_FAMILY: &str = "local";

/// Parses the knobs of a provider block (schema stage) once `provider` and `model_id` are read.
pub(super) type ParseBlock = fn(Option<String>, &mut Fields<'_>, &mut Issues) -> ProviderBlock;

/// Resolves a block's knobs against the chosen model and its alias entry (resolution stage); no
/// block means every knob at its default.
pub(super) type ResolveKnobs =
    fn(Option<&ProviderBlock>, &ModelEntry, &AliasEntry) -> Result<(Knobs, Option<Delegation>), ModelError>;

/// One row of [`PROVIDERS`].
#[derive(Debug, Clone, Copy)]
pub struct ProviderSpec {
    /// The provider.
    pub provider: Provider,
    /// The alias: a `model` string, a block's `provider`, a catalog `[aliases.…]` table name.
    pub alias: &'static str,
    /// The upstream API family: a row of svc-provider's `FAMILIES` (key, input rate, codec), or
    /// [`LOCAL_FAMILY`]. The catalog takes it from here.
    pub family: &'static str,
    /// Catalog models of this alias may list `thinking_levels` (the block has a `thinking_level`).
    pub thinking_levels: bool,
    /// The voice model delegates to a backend Responses model: the catalog entry must name a
    /// `default_responses_model`, and no other alias may.
    pub responses_backend: bool,
    /// Its models take image input (`send-image`, `examine_image`).
    pub takes_images: bool,
    /// Parses a block of this provider.
    pub(super) parse_block: ParseBlock,
    /// Resolves this provider's knobs.
    pub(super) resolve_knobs: ResolveKnobs,
}

macro_rules! providers {
    ($($(#[$meta:meta])* $variant:ident { alias: $alias:literal, $($field:ident: $value:expr),+ $(,)? })+) => {
        /// A provider alias, also the `provider` discriminator of a provider block. Declared by
        /// the provider table ([`PROVIDERS`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Provider {
            $($(#[$meta])* $variant),+
        }

        /// Every provider, in [`Provider`] order: the one table to edit when adding one.
        pub const PROVIDERS: &[ProviderSpec] =
            &[$(ProviderSpec { provider: Provider::$variant, alias: $alias, $($field: $value),+ }),+];

        impl Provider {
            /// Every value, in wire order.
            pub const ALL: &'static [Provider] = &[$(Provider::$variant),+];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $(Provider::$variant => $alias),+ }
            }

            /// Parses the wire spelling (exact, case-sensitive).
            pub fn from_wire(text: &str) -> Option<Self> {
                match text { $($alias => Some(Provider::$variant),)+ _ => None }
            }
        }
    };
}

providers! {
    /// Google Gemini Live.
    ProviderA {
        alias: "provider_a",
        family: "gemini",
        thinking_levels: true,
        responses_backend: false,
        takes_images: true,
        parse_block: provider_a_block,
        resolve_knobs: provider_a_knobs,
    }
    /// OpenAI Realtime.
    ProviderB {
        alias: "provider_b",
        family: "openai",
        thinking_levels: false,
        responses_backend: false,
        takes_images: true,
        parse_block: provider_b_block,
        resolve_knobs: provider_b_knobs,
    }
    /// OpenAI Realtime mini.
    ProviderBMini {
        alias: "provider_b_mini",
        family: "openai",
        thinking_levels: false,
        responses_backend: false,
        takes_images: true,
        parse_block: provider_b_mini_block,
        resolve_knobs: provider_b_mini_knobs,
    }
    /// OpenAI GPT-Live with delegation.
    ProviderBLive {
        alias: "provider_b_live",
        family: "openai_live",
        thinking_levels: false,
        responses_backend: true,
        takes_images: false,
        parse_block: provider_b_live_block,
        resolve_knobs: provider_b_live_knobs,
    }
    /// xAI Grok Voice.
    ProviderC {
        alias: "provider_c",
        family: "xai",
        thinking_levels: false,
        responses_backend: false,
        takes_images: false,
        parse_block: provider_c_block,
        resolve_knobs: provider_c_knobs,
    }
    /// svc's own offline pipeline on this machine: VAD, Whisper, a small LLM (or an
    /// OpenAI-compatible endpoint), TTS. An svc extension of the contract's aliases.
    ProviderLocal {
        alias: "provider_local",
        family: LOCAL_FAMILY,
        thinking_levels: false,
        responses_backend: false,
        takes_images: false,
        parse_block: provider_local_block,
        resolve_knobs: provider_local_knobs,
    }
}

wire_enum_impls!(Provider);

// `Provider::spec` indexes the table by discriminant: prove at compile time that row `i` is the
// `i`-th variant and that every variant has its row, so the index is always in range.
const _: () = {
    assert!(PROVIDERS.len() == Provider::ALL.len());
    let mut position = 0;
    while position < PROVIDERS.len() {
        assert!(PROVIDERS[position].provider as usize == position);
        position += 1;
    }
};

impl Provider {
    /// This provider's row of [`PROVIDERS`].
    pub const fn spec(self) -> &'static ProviderSpec {
        &PROVIDERS[self as usize]
    }

    /// The aliases whose row has `flag` set, for catalog messages (`provider_a`, or `a or b`).
    pub(super) fn aliases_where(flag: fn(&ProviderSpec) -> bool) -> String {
        let aliases: Vec<&str> = PROVIDERS.iter().filter(|spec| flag(spec)).map(|spec| spec.alias).collect();
        aliases.join(" or ")
    }
}
