//! The upstream family table: everything this crate does differently per upstream API family.
//!
//! **To add a family, add a row to [`FAMILIES`]** (and its codec); the model catalog's family
//! names come from svc-domain's provider table (`svc_domain::model::PROVIDERS`), whose every
//! upstream family must have a row here (a test checks it). [`crate::codec_for`],
//! [`crate::input_rate_hz`], [`ProviderEnv::credentials`] and [`ProviderEnv::key_variable`] read
//! the row; nothing else matches on a family. The `local` family is not an upstream: the session
//! runtime hands it to svc-local before it asks this crate.

use crate::codec::{Codec, ConnectRequest};
use crate::endpoint::{self, Account, Credentials, ProviderEnv};
use crate::{gemini, gpt_live, realtime};
use svc_provider_core::SessionSetup;

/// Builds a family's codec for `setup`, connecting with its account's `credentials`; `env` holds
/// the settings beyond the key (the Gemini API version).
pub type CodecFn = fn(SessionSetup, &Credentials, &ProviderEnv) -> Box<dyn Codec>;

/// One row of [`FAMILIES`].
#[derive(Debug)]
pub struct FamilySpec {
    /// The catalog's spelling (`family` of svc-domain's provider table).
    pub name: &'static str,
    /// The account whose key (and base URL) the family connects with.
    pub account: Account,
    /// The rate the family's codec takes user audio at natively (see [`crate::input_rate_hz`]).
    pub input_rate_hz: u32,
    /// Builds the family's codec.
    pub codec: CodecFn,
}

/// Every upstream family: the one table to edit when adding one.
pub const FAMILIES: &[FamilySpec] = &[
    FamilySpec { name: "gemini", account: Account::Gemini, input_rate_hz: gemini::INPUT_RATE_HZ, codec: gemini_codec },
    FamilySpec { name: "openai", account: Account::OpenAi, input_rate_hz: realtime::RATE_HZ, codec: openai_codec },
    FamilySpec {
        name: "openai_live",
        account: Account::OpenAi,
        input_rate_hz: gpt_live::RATE_HZ,
        codec: gpt_live_codec,
    },
    FamilySpec { name: "xai", account: Account::Xai, input_rate_hz: realtime::RATE_HZ, codec: xai_codec },
];

/// An upstream API family (the model catalog's `family`): a row of [`FAMILIES`]. Only
/// [`Family::from_catalog`] makes one, so every `Family` has its row.
#[derive(Clone, Copy)]
pub struct Family(&'static FamilySpec);

impl Family {
    /// Parses the catalog spelling.
    pub fn from_catalog(family: &str) -> Option<Family> {
        FAMILIES.iter().find(|spec| spec.name == family).map(Family)
    }

    /// The family's row.
    pub fn spec(self) -> &'static FamilySpec {
        self.0
    }

    /// The catalog spelling.
    pub fn name(self) -> &'static str {
        self.0.name
    }
}

impl PartialEq for Family {
    fn eq(&self, other: &Family) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Family {}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Family").field(&self.name()).finish()
    }
}

/// `authorization: Bearer <key>`, how the OpenAI-style upstreams authenticate.
fn bearer(credentials: &Credentials) -> Vec<(String, String)> {
    vec![("authorization".to_owned(), format!("Bearer {}", credentials.api_key))]
}

fn openai_codec(setup: SessionSetup, credentials: &Credentials, _: &ProviderEnv) -> Box<dyn Codec> {
    let url = endpoint::openai_realtime_url(credentials, &setup.model.model_id);
    let connect = ConnectRequest { url, headers: bearer(credentials) };
    Box::new(realtime::RealtimeCodec::new(setup, realtime::Dialect::OpenAi, connect))
}

fn xai_codec(setup: SessionSetup, credentials: &Credentials, _: &ProviderEnv) -> Box<dyn Codec> {
    let url = endpoint::xai_realtime_url(credentials, &setup.model.model_id);
    let connect = ConnectRequest { url, headers: bearer(credentials) };
    Box::new(realtime::RealtimeCodec::new(setup, realtime::Dialect::Xai, connect))
}

fn gemini_codec(setup: SessionSetup, credentials: &Credentials, env: &ProviderEnv) -> Box<dyn Codec> {
    let url = endpoint::gemini_url(credentials, &env.gemini_api_version);
    let headers = vec![("x-goog-api-key".to_owned(), credentials.api_key.clone())];
    Box::new(gemini::GeminiCodec::new(setup, ConnectRequest { url, headers }))
}

fn gpt_live_codec(setup: SessionSetup, credentials: &Credentials, _: &ProviderEnv) -> Box<dyn Codec> {
    let url = endpoint::gpt_live_url(credentials);
    let backend = gpt_live::Backend {
        url: endpoint::responses_url(credentials),
        headers: bearer(credentials),
        model: svc_backend_model(&setup),
    };
    Box::new(gpt_live::GptLiveCodec::new(setup, ConnectRequest { url, headers: bearer(credentials) }, backend))
}

/// The backend model of `svc` delegation: the session's `responses_model`, else the catalog's
/// default for provider_b_live.
fn svc_backend_model(setup: &SessionSetup) -> String {
    if let svc_domain::model::Knobs::ProviderBLive(knobs) = &setup.model.knobs
        && let Some(model) = &knobs.responses_model
    {
        return model.clone();
    }
    setup.model.default_responses_model.clone().unwrap_or_else(|| "gpt-5.6-luna".to_owned())
}

#[cfg(test)]
mod tests {
    use svc_domain::model::{LOCAL_FAMILY, PROVIDERS};

    use super::*;

    /// Every upstream family of svc-domain's provider table has its row here, and every row here
    /// serves some provider: the two tables describe the same families.
    #[test]
    fn every_domain_family_has_a_row() {
        for provider in PROVIDERS {
            let known = provider.family == LOCAL_FAMILY || Family::from_catalog(provider.family).is_some();
            assert!(known, "{}: family {} has no row in FAMILIES", provider.alias, provider.family);
        }
        for (position, row) in FAMILIES.iter().enumerate() {
            assert!(PROVIDERS.iter().any(|provider| provider.family == row.name), "{} serves no provider", row.name);
            assert!(FAMILIES[..position].iter().all(|earlier| earlier.name != row.name), "{} twice", row.name);
            assert_ne!(row.name, LOCAL_FAMILY, "the local family is svc-local's, not an upstream");
        }
        assert_eq!(Family::from_catalog("other"), None);
    }

    /// The row's values are the ones the match arms used to give.
    #[test]
    fn rows_give_rate_account_and_key_variable() {
        let row = |name: &str| Family::from_catalog(name).map(|family| family.spec()).expect(name);
        let rates: Vec<u32> = ["gemini", "openai", "openai_live", "xai"].iter().map(|f| row(f).input_rate_hz).collect();
        assert_eq!(rates, [16_000, 24_000, 24_000, 24_000]);
        let variables: Vec<&str> = ["gemini", "openai", "openai_live", "xai"]
            .iter()
            .filter_map(|f| Family::from_catalog(f))
            .map(ProviderEnv::key_variable)
            .collect();
        assert_eq!(
            variables,
            ["GEMINI_API_KEY (or GOOGLE_API_KEY)", "OPENAI_API_KEY", "OPENAI_API_KEY", "XAI_API_KEY"]
        );
    }
}
