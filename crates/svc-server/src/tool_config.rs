//! The server tools' settings (`--server-tools`, `--web-search-*`, `--vision-*`), validated into
//! the kinds this deployment runs and the backends the runtime calls ([`svc_tools::ToolBackends`]).
//!
//! Without `--server-tools`, the deployment runs `end_call` and `speaker_log` plus every kind
//! whose backend is configured (`web_search` with a search API, the vision tools with a vision
//! model). With it, exactly the kinds listed, each of which must be runnable here.

use svc_domain::tools::{ServerTool, ToolBackend};
use svc_tools::{SearchApi, ToolBackends, VisionBackend, WebSearchBackend};
use url::Url;

use crate::config::{ConfigError, DEFAULT_SERVER_TOOLS};

/// The tool settings as given (after the flag > env > file merge).
#[derive(Debug, Clone, Default)]
pub struct ToolArgs {
    /// `--server-tools`.
    pub server_tools: Option<String>,
    /// `--web-search-url`.
    pub web_search_url: Option<String>,
    /// `--web-search-key`.
    pub web_search_key: Option<String>,
    /// `--web-search-api`.
    pub web_search_api: Option<String>,
    /// `--vision-url`.
    pub vision_url: Option<String>,
    /// `--vision-key`.
    pub vision_key: Option<String>,
    /// `--vision-model`.
    pub vision_model: Option<String>,
}

fn invalid(setting: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { setting, message: message.into() }
}

fn http_url(setting: &'static str, text: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(text.trim()).map_err(|error| invalid(setting, format!("`{text}`: {error}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid(setting, "must be an http or https URL with a host"));
    }
    Ok(url)
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|text| text.trim().to_owned()).filter(|text| !text.is_empty())
}

/// The enabled server tool kinds and the backends, or the setting that is wrong.
pub fn resolve(args: ToolArgs) -> Result<(Vec<String>, ToolBackends), ConfigError> {
    let api = match non_empty(args.web_search_api) {
        None => SearchApi::Searxng,
        Some(text) => SearchApi::parse(&text)
            .ok_or_else(|| invalid("--web-search-api", format!("`{text}` is not searxng, brave or tavily")))?,
    };
    let search_key = non_empty(args.web_search_key);
    let web_search = match non_empty(args.web_search_url) {
        Some(text) => Some(http_url("--web-search-url", &text)?),
        // The hosted APIs have a public endpoint: a key is enough.
        None if search_key.is_some() => match api.default_url() {
            Some(url) => Some(Url::parse(url).map_err(|error| invalid("--web-search-api", error.to_string()))?),
            None => return Err(invalid("--web-search-url", "a SearXNG backend needs the instance's URL")),
        },
        None => None,
    }
    .map(|url| {
        if api != SearchApi::Searxng && search_key.is_none() {
            return Err(invalid("--web-search-key", format!("the {} API needs a key", api.as_str())));
        }
        Ok(WebSearchBackend { api, url, key: search_key.clone() })
    })
    .transpose()?;
    let vision_model = non_empty(args.vision_model);
    let vision = match non_empty(args.vision_url) {
        None if vision_model.is_some() => return Err(invalid("--vision-model", "needs --vision-url")),
        None => None,
        Some(text) => {
            let base = http_url("--vision-url", text.trim_end_matches('/'))?;
            // The base of an OpenAI-compatible API, or its chat-completions address itself.
            let url = if base.path().ends_with("/chat/completions") {
                base
            } else {
                Url::parse(&format!("{}/chat/completions", base.as_str().trim_end_matches('/')))
                    .map_err(|error| invalid("--vision-url", error.to_string()))?
            };
            let model = vision_model.ok_or_else(|| invalid("--vision-model", "required with --vision-url"))?;
            Some(VisionBackend { url, key: non_empty(args.vision_key), model })
        }
    };
    let backends = ToolBackends { web_search, vision };
    let kinds: Vec<String> = match &args.server_tools {
        None => DEFAULT_SERVER_TOOLS
            .iter()
            .map(|kind| (*kind).to_owned())
            .chain(backends.served_kinds().into_iter().map(|tool| tool.as_str().to_owned()))
            .collect(),
        Some(list) => list.split(',').map(|kind| kind.trim().to_owned()).filter(|kind| !kind.is_empty()).collect(),
    };
    for kind in &kinds {
        let tool = ServerTool::from_wire(kind)
            .ok_or_else(|| invalid("--server-tools", format!("`{kind}` is not a server tool kind")))?;
        if !backends.serves(tool) {
            let needs = match tool.backend() {
                Some(ToolBackend::WebSearch) => "--web-search-url (or --web-search-key for brave and tavily)",
                Some(ToolBackend::Vision) => "--vision-url and --vision-model",
                None => "nothing",
            };
            return Err(invalid("--server-tools", format!("`{kind}` needs a backend: give {needs}")));
        }
    }
    Ok((kinds, backends))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_enable_their_tools() {
        let (kinds, backends) = resolve(ToolArgs::default()).expect("defaults");
        assert_eq!(kinds, ["end_call", "speaker_log"], "no backend, no backend tools");
        assert_eq!(backends, ToolBackends::default());
        let (kinds, backends) = resolve(ToolArgs {
            web_search_url: Some("http://127.0.0.1:8888".into()),
            vision_url: Some("http://127.0.0.1:8081/v1/".into()),
            vision_model: Some("qwen2.5-vl".into()),
            ..ToolArgs::default()
        })
        .expect("valid");
        assert_eq!(
            kinds,
            ["end_call", "speaker_log", "web_search", "detect_objects", "point_at_object", "screen_locate"]
        );
        let search = backends.web_search.expect("search");
        assert_eq!((search.api, search.url.as_str()), (SearchApi::Searxng, "http://127.0.0.1:8888/"));
        assert_eq!(backends.vision.expect("vision").url.as_str(), "http://127.0.0.1:8081/v1/chat/completions");
        let (_, brave) = resolve(ToolArgs {
            web_search_api: Some("brave".into()),
            web_search_key: Some("k".into()),
            ..ToolArgs::default()
        })
        .expect("a key is enough for a hosted API");
        assert_eq!(brave.web_search.expect("brave").url.as_str(), "https://api.search.brave.com/res/v1/web/search");
        let (kinds, _) = resolve(ToolArgs {
            server_tools: Some("end_call".into()),
            web_search_url: Some("http://127.0.0.1:8888".into()),
            ..ToolArgs::default()
        })
        .expect("an explicit list wins");
        assert_eq!(kinds, ["end_call"]);
    }

    #[test]
    fn incomplete_settings_are_refused() {
        let cases = [
            ToolArgs { web_search_api: Some("bing".into()), ..ToolArgs::default() },
            ToolArgs { web_search_url: Some("ftp://x".into()), ..ToolArgs::default() },
            ToolArgs { web_search_key: Some("k".into()), ..ToolArgs::default() },
            ToolArgs {
                web_search_api: Some("tavily".into()),
                web_search_url: Some("http://x".into()),
                ..ToolArgs::default()
            },
            ToolArgs { vision_url: Some("http://x/v1".into()), ..ToolArgs::default() },
            ToolArgs { vision_model: Some("m".into()), ..ToolArgs::default() },
            ToolArgs { server_tools: Some("web_search".into()), ..ToolArgs::default() },
            ToolArgs { server_tools: Some("teleport".into()), ..ToolArgs::default() },
        ];
        for args in cases {
            assert!(matches!(resolve(args.clone()), Err(ConfigError::Invalid { .. })), "{args:?}");
        }
    }
}
