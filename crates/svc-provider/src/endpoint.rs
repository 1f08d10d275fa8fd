//! Upstream credentials and URLs, configured the way each ecosystem's own SDK is.
//!
//! | family | key | base URL override (form) |
//! |---|---|---|
//! | openai, openai_live | `OPENAI_API_KEY` | `OPENAI_BASE_URL` (`https://api.openai.com/v1`, the OpenAI SDK's form) |
//! | gemini | `GEMINI_API_KEY`, else `GOOGLE_API_KEY` | `GOOGLE_GEMINI_BASE_URL` (`https://generativelanguage.googleapis.com`, the google-genai / Gemini CLI form) and `GOOGLE_GENAI_API_VERSION` (default `v1beta`) |
//! | xai | `XAI_API_KEY` | `XAI_BASE_URL` (`https://api.x.ai/v1`, OpenAI SDK form, as xAI's docs use it) |
//!
//! `http(s)` base URLs become `ws(s)` socket URLs: `http://127.0.0.1:9000/v1` gives
//! `ws://127.0.0.1:9000/v1/realtime?model=…` — so a proxy, gateway or test fake is one variable away.

use url::Url;

/// Default OpenAI base URL.
pub const OPENAI_DEFAULT_BASE: &str = "https://api.openai.com/v1";
/// Default Gemini base URL.
pub const GEMINI_DEFAULT_BASE: &str = "https://generativelanguage.googleapis.com";
/// Default Gemini API version (what raw-WebSocket users report working, providers.md §2.1).
pub const GEMINI_DEFAULT_VERSION: &str = "v1beta";
/// Default xAI base URL.
pub const XAI_DEFAULT_BASE: &str = "https://api.x.ai/v1";

pub use crate::family::Family;

/// An upstream account: one key and base URL in the environment, which every family of that
/// vendor connects with (a row of [`crate::family::FAMILIES`] names its account).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Account {
    /// OpenAI (Realtime and GPT-Live).
    OpenAi,
    /// Google Gemini.
    Gemini,
    /// xAI.
    Xai,
}

impl Account {
    /// The variable(s) holding the account's key, for "no key" messages.
    pub const fn key_variable(self) -> &'static str {
        match self {
            Account::Gemini => "GEMINI_API_KEY (or GOOGLE_API_KEY)",
            Account::OpenAi => "OPENAI_API_KEY",
            Account::Xai => "XAI_API_KEY",
        }
    }
}

/// A configured upstream account: key and base URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The API key (never logged).
    pub api_key: String,
    /// Base URL (`http`/`https`), without a trailing slash.
    pub base_url: Url,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url.as_str())
            .finish()
    }
}

/// A base URL variable that is not an http(s) URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: `{value}` is not an http(s) or ws(s) URL")]
pub struct EndpointError {
    /// The variable.
    pub variable: &'static str,
    /// Its value.
    pub value: String,
}

/// Every family's credentials as configured in the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderEnv {
    /// OpenAI (Realtime and GPT-Live).
    pub openai: Option<Credentials>,
    /// Gemini.
    pub gemini: Option<Credentials>,
    /// Gemini API version in the socket path.
    pub gemini_api_version: String,
    /// xAI.
    pub xai: Option<Credentials>,
}

impl ProviderEnv {
    /// Reads the process environment.
    ///
    /// # Errors
    ///
    /// A base-URL variable that is set but not a URL.
    pub fn from_env() -> Result<ProviderEnv, EndpointError> {
        ProviderEnv::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads variables through `lookup` (tests pass a map). Empty values count as unset.
    ///
    /// # Errors
    ///
    /// A base-URL variable that is set but not a URL.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<ProviderEnv, EndpointError> {
        let get = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
        let credentials = |key: Option<String>, variable: &'static str, default: &str| {
            let Some(api_key) = key else { return Ok(None) };
            let text = get(variable).unwrap_or_else(|| default.to_owned());
            let base_url = parse_base(&text).ok_or(EndpointError { variable, value: text })?;
            Ok(Some(Credentials { api_key, base_url }))
        };
        Ok(ProviderEnv {
            openai: credentials(get("OPENAI_API_KEY"), "OPENAI_BASE_URL", OPENAI_DEFAULT_BASE)?,
            gemini: credentials(
                get("GEMINI_API_KEY").or_else(|| get("GOOGLE_API_KEY")),
                "GOOGLE_GEMINI_BASE_URL",
                GEMINI_DEFAULT_BASE,
            )?,
            gemini_api_version: get("GOOGLE_GENAI_API_VERSION").unwrap_or_else(|| GEMINI_DEFAULT_VERSION.to_owned()),
            xai: credentials(get("XAI_API_KEY"), "XAI_BASE_URL", XAI_DEFAULT_BASE)?,
        })
    }

    /// Credentials of `account`.
    pub fn account(&self, account: Account) -> Option<&Credentials> {
        match account {
            Account::Gemini => self.gemini.as_ref(),
            Account::OpenAi => self.openai.as_ref(),
            Account::Xai => self.xai.as_ref(),
        }
    }

    /// Credentials of `family`: its account's.
    pub fn credentials(&self, family: Family) -> Option<&Credentials> {
        self.account(family.spec().account)
    }

    /// Whether the catalog family (`gemini`, `openai`, `openai_live`, `xai`) has a key.
    pub fn has_family(&self, family: &str) -> bool {
        Family::from_catalog(family).is_some_and(|family| self.credentials(family).is_some())
    }

    /// The name of the key variable of `family`, for "no key" messages.
    pub fn key_variable(family: Family) -> &'static str {
        family.spec().account.key_variable()
    }
}

fn parse_base(text: &str) -> Option<Url> {
    let url = Url::parse(text.trim_end_matches('/')).ok()?;
    matches!(url.scheme(), "http" | "https" | "ws" | "wss").then_some(url)
}

/// `base` + `/path`, with the scheme switched to ws/wss.
fn socket_url(base: &Url, path: &str) -> String {
    let scheme = match base.scheme() {
        "http" | "ws" => "ws",
        _ => "wss",
    };
    let rest = &base.as_str()[base.scheme().len()..];
    format!("{scheme}{}/{}", rest.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// `base` + `/path` over http/https.
fn http_url(base: &Url, path: &str) -> String {
    let scheme = match base.scheme() {
        "ws" | "http" => "http",
        _ => "https",
    };
    let rest = &base.as_str()[base.scheme().len()..];
    format!("{scheme}{}/{}", rest.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// Minimal query-value escaping for model ids.
fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// OpenAI Realtime socket: `{base}/realtime?model=…` (providers.md §3.1).
pub fn openai_realtime_url(credentials: &Credentials, model: &str) -> String {
    format!("{}?model={}", socket_url(&credentials.base_url, "realtime"), query_value(model))
}

/// GPT-Live socket: `{base}/live/sessions` — the model goes in `session.start` (§4.2).
pub fn gpt_live_url(credentials: &Credentials) -> String {
    socket_url(&credentials.base_url, "live/sessions")
}

/// Responses API: `{base}/responses` (GPT-Live `svc` delegation backend).
pub fn responses_url(credentials: &Credentials) -> String {
    http_url(&credentials.base_url, "responses")
}

/// xAI socket: `{base}/realtime?model=…` (§5.1).
pub fn xai_realtime_url(credentials: &Credentials, model: &str) -> String {
    format!("{}?model={}", socket_url(&credentials.base_url, "realtime"), query_value(model))
}

/// Gemini Live socket (§2.1): `{base}/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent`.
pub fn gemini_url(credentials: &Credentials, api_version: &str) -> String {
    socket_url(
        &credentials.base_url,
        &format!("ws/google.ai.generativelanguage.{api_version}.GenerativeService.BidiGenerateContent"),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<ProviderEnv, EndpointError> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        ProviderEnv::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn keys_decide_which_families_are_configured() {
        let none = env(&[]).expect("valid");
        assert!(!none.has_family("openai") && !none.has_family("gemini") && !none.has_family("xai"));
        let all = env(&[("OPENAI_API_KEY", "sk"), ("GOOGLE_API_KEY", "g"), ("XAI_API_KEY", "x")]).expect("valid");
        assert!(all.has_family("openai") && all.has_family("openai_live"));
        assert!(all.has_family("gemini") && all.has_family("xai"));
        assert!(!all.has_family("other"));
        let gemini = env(&[("GEMINI_API_KEY", "a"), ("GOOGLE_API_KEY", "b")]).expect("valid");
        assert_eq!(gemini.gemini.expect("set").api_key, "a", "GEMINI_API_KEY wins over GOOGLE_API_KEY");
        assert!(!env(&[("OPENAI_API_KEY", "  ")]).expect("valid").has_family("openai"));
    }

    #[test]
    fn base_urls_become_socket_urls_in_sdk_form() {
        let e = env(&[("OPENAI_API_KEY", "k"), ("OPENAI_BASE_URL", "http://127.0.0.1:9000/v1/")]).expect("valid");
        let openai = e.openai.expect("set");
        assert_eq!(
            openai_realtime_url(&openai, "gpt-realtime-2.1"),
            "ws://127.0.0.1:9000/v1/realtime?model=gpt-realtime-2.1"
        );
        assert_eq!(gpt_live_url(&openai), "ws://127.0.0.1:9000/v1/live/sessions");
        assert_eq!(responses_url(&openai), "http://127.0.0.1:9000/v1/responses");
        let defaults = env(&[("OPENAI_API_KEY", "k"), ("GEMINI_API_KEY", "g"), ("XAI_API_KEY", "x")]).expect("valid");
        assert_eq!(
            openai_realtime_url(defaults.openai.as_ref().expect("set"), "gpt-realtime-2.1"),
            "wss://api.openai.com/v1/realtime?model=gpt-realtime-2.1"
        );
        assert_eq!(responses_url(defaults.openai.as_ref().expect("set")), "https://api.openai.com/v1/responses");
        assert_eq!(
            xai_realtime_url(defaults.xai.as_ref().expect("set"), "grok-voice-3.0"),
            "wss://api.x.ai/v1/realtime?model=grok-voice-3.0"
        );
        assert_eq!(
            gemini_url(defaults.gemini.as_ref().expect("set"), &defaults.gemini_api_version),
            "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
        );
        let g = env(&[
            ("GEMINI_API_KEY", "g"),
            ("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:7"),
            ("GOOGLE_GENAI_API_VERSION", "v1"),
        ])
        .expect("valid");
        assert_eq!(
            gemini_url(g.gemini.as_ref().expect("set"), &g.gemini_api_version),
            "ws://127.0.0.1:7/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
        );
        let error = env(&[("XAI_API_KEY", "x"), ("XAI_BASE_URL", "not a url")]).expect_err("invalid");
        assert_eq!(error.variable, "XAI_BASE_URL");
        // A base URL without its key configures nothing and is not validated.
        assert!(env(&[("XAI_BASE_URL", "not a url")]).is_ok());
    }
}
