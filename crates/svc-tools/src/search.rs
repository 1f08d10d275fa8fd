//! `web_search`, sans-IO: the request each search API takes, and its answer normalized to at most
//! [`MAX_RESULTS`] `{title, url, snippet}` entries, each bounded, so a search never floods the
//! model's context.
//!
//! - SearXNG: `GET {url}/search?q=…&format=json` (the instance must allow the `json` format);
//!   `results[].{title, url, content}`.
//! - Brave Search API: `GET {url}?q=…&count=…` with `X-Subscription-Token`;
//!   `web.results[].{title, url, description}` (descriptions carry `<strong>` markup, stripped).
//! - Tavily: `POST {url}` with `{api_key, query, max_results}` (and the key as a bearer token, the
//!   newer spelling); `results[].{title, url, content}`.

use serde_json::{Value, json};
use url::Url;

use crate::{BackendRequest, Method, ToolError};

/// Most results handed to the model.
pub const MAX_RESULTS: usize = 5;
/// Longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest snippet, in characters.
pub const MAX_SNIPPET_CHARS: usize = 500;
/// Longest URL kept (a longer one is dropped with its result).
pub const MAX_URL_CHARS: usize = 2048;
/// Longest query sent, in characters.
pub const MAX_QUERY_CHARS: usize = 400;

/// Which search API the backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchApi {
    /// A SearXNG instance's JSON API.
    Searxng,
    /// The Brave Search API.
    Brave,
    /// The Tavily search API.
    Tavily,
}

impl SearchApi {
    /// The flag value (`--web-search-api`).
    pub fn as_str(self) -> &'static str {
        match self {
            SearchApi::Searxng => "searxng",
            SearchApi::Brave => "brave",
            SearchApi::Tavily => "tavily",
        }
    }

    /// The API of a flag value.
    pub fn parse(text: &str) -> Option<SearchApi> {
        [SearchApi::Searxng, SearchApi::Brave, SearchApi::Tavily].into_iter().find(|api| api.as_str() == text)
    }

    /// The public endpoint of a hosted API (SearXNG is self-hosted, so it has none).
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            SearchApi::Searxng => None,
            SearchApi::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
            SearchApi::Tavily => Some("https://api.tavily.com/search"),
        }
    }
}

/// A configured search backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSearchBackend {
    /// The API.
    pub api: SearchApi,
    /// SearXNG: the instance's base URL (or its `/search` address); Brave and Tavily: the
    /// search endpoint.
    pub url: Url,
    /// The API key (Brave and Tavily need one; a SearXNG behind a proxy may want a bearer).
    pub key: Option<String>,
}

/// The query of a `web_search` call: `{"query": "…"}`.
pub fn query_of(arguments: &Value) -> Result<String, ToolError> {
    let query = arguments.get("query").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if query.is_empty() {
        return Err(ToolError::BadArguments("`query` must be a non-empty string".to_owned()));
    }
    Ok(truncate(query, MAX_QUERY_CHARS))
}

/// The request that runs `query` on `backend`.
pub fn request(backend: &WebSearchBackend, query: &str) -> BackendRequest {
    let mut headers = Vec::new();
    match backend.api {
        SearchApi::Searxng => {
            let mut url = backend.url.clone();
            if !url.path().trim_end_matches('/').ends_with("/search") {
                let path = format!("{}/search", url.path().trim_end_matches('/'));
                url.set_path(&path);
            }
            url.query_pairs_mut().append_pair("q", query).append_pair("format", "json");
            if let Some(key) = &backend.key {
                headers.push(("authorization".to_owned(), format!("Bearer {key}")));
            }
            BackendRequest { method: Method::Get, url, headers, body: None }
        }
        SearchApi::Brave => {
            let mut url = backend.url.clone();
            url.query_pairs_mut().append_pair("q", query).append_pair("count", &MAX_RESULTS.to_string());
            if let Some(key) = &backend.key {
                headers.push(("x-subscription-token".to_owned(), key.clone()));
            }
            BackendRequest { method: Method::Get, url, headers, body: None }
        }
        SearchApi::Tavily => {
            let key = backend.key.clone().unwrap_or_default();
            if !key.is_empty() {
                headers.push(("authorization".to_owned(), format!("Bearer {key}")));
            }
            let body = json!({"api_key": key, "query": query, "max_results": MAX_RESULTS});
            BackendRequest {
                method: Method::Post,
                url: backend.url.clone(),
                headers,
                body: Some(body.to_string().into_bytes()),
            }
        }
    }
}

/// The tool result of a search answer: `{query, results: [{title, url, snippet}]}`.
pub fn parse(api: SearchApi, query: &str, body: &[u8]) -> Result<Value, ToolError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| ToolError::BadResponse(format!("the {} answer is not JSON", api.as_str())))?;
    let (list, snippet_field) = match api {
        SearchApi::Searxng | SearchApi::Tavily => (value.get("results"), "content"),
        SearchApi::Brave => (value.get("web").and_then(|web| web.get("results")), "description"),
    };
    let Some(list) = list.and_then(Value::as_array) else {
        // Brave answers without `web` when nothing matched.
        if api == SearchApi::Brave && value.is_object() && value.get("web").is_none() {
            return Ok(json!({"query": query, "results": []}));
        }
        return Err(ToolError::BadResponse(format!("the {} answer has no result list", api.as_str())));
    };
    let results: Vec<Value> = list
        .iter()
        .filter_map(|item| {
            let url = item.get("url").and_then(Value::as_str)?.trim();
            let usable = (url.starts_with("http://") || url.starts_with("https://")) && url.len() <= MAX_URL_CHARS;
            if !usable {
                return None;
            }
            let title = item.get("title").and_then(Value::as_str).map(strip_markup).unwrap_or_default();
            let snippet = item.get(snippet_field).and_then(Value::as_str).map(strip_markup).unwrap_or_default();
            Some(json!({
                "title": truncate(title.trim(), MAX_TITLE_CHARS),
                "url": url,
                "snippet": truncate(snippet.trim(), MAX_SNIPPET_CHARS),
            }))
        })
        .take(MAX_RESULTS)
        .collect();
    Ok(json!({"query": query, "results": results}))
}

/// `text` without HTML tags, and with the entities search APIs put in snippets decoded.
fn strip_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&quot;", "\"").replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(api: SearchApi, url: &str) -> WebSearchBackend {
        WebSearchBackend { api, url: Url::parse(url).expect("url"), key: Some("k3y".into()) }
    }

    #[test]
    fn each_api_gets_its_own_request() {
        let searx = request(&backend(SearchApi::Searxng, "http://127.0.0.1:8888/"), "rust & tokio");
        assert_eq!(searx.method, Method::Get);
        assert_eq!(searx.url.as_str(), "http://127.0.0.1:8888/search?q=rust+%26+tokio&format=json");
        let searx = request(&backend(SearchApi::Searxng, "http://h/searx/search"), "x");
        assert_eq!(searx.url.path(), "/searx/search", "an address that names /search is kept");
        let brave = request(&backend(SearchApi::Brave, "https://api.search.brave.com/res/v1/web/search"), "x");
        assert_eq!(brave.url.query(), Some("q=x&count=5"));
        assert!(brave.headers.contains(&("x-subscription-token".to_owned(), "k3y".to_owned())));
        let tavily = request(&backend(SearchApi::Tavily, "https://api.tavily.com/search"), "x");
        assert_eq!(tavily.method, Method::Post);
        let body: Value = serde_json::from_slice(tavily.body.as_deref().expect("a body")).expect("json");
        assert_eq!(body, json!({"api_key": "k3y", "query": "x", "max_results": 5}));
    }

    #[test]
    fn answers_are_normalized_and_bounded() {
        let many: Vec<Value> = (0..20)
            .map(|i| json!({"title": format!("<b>T{i}</b>"), "url": format!("https://e.com/{i}"), "content": "é".repeat(900)}))
            .collect();
        let body = json!({"results": many}).to_string();
        let result = parse(SearchApi::Searxng, "q", body.as_bytes()).expect("parses");
        let results = result["results"].as_array().expect("a list");
        assert_eq!(results.len(), MAX_RESULTS);
        assert_eq!(results[0]["title"], "T0");
        assert_eq!(results[0]["snippet"].as_str().map(|s| s.chars().count()), Some(MAX_SNIPPET_CHARS + 1));
        let brave = json!({"web": {"results": [
            {"title": "A", "url": "javascript:alert(1)", "description": "x"},
            {"title": "B &amp; C", "url": "https://b.example", "description": "the <strong>best</strong>"}]}});
        let result = parse(SearchApi::Brave, "q", brave.to_string().as_bytes()).expect("parses");
        assert_eq!(result["results"], json!([{"title": "B & C", "url": "https://b.example", "snippet": "the best"}]));
        let empty = parse(SearchApi::Brave, "q", br#"{"type":"search","query":{}}"#).expect("no web block");
        assert_eq!(empty["results"], json!([]));
        assert!(matches!(parse(SearchApi::Tavily, "q", b"<html>"), Err(ToolError::BadResponse(_))));
        assert!(matches!(parse(SearchApi::Tavily, "q", b"{}"), Err(ToolError::BadResponse(_))));
    }

    #[test]
    fn a_query_is_required() {
        assert!(matches!(query_of(&json!({})), Err(ToolError::BadArguments(_))));
        assert!(matches!(query_of(&json!({"query": "  "})), Err(ToolError::BadArguments(_))));
        assert_eq!(query_of(&json!({"query": " rust "})).expect("valid"), "rust");
    }
}
