//! The server tools that run on outside backends (interface-spec.md, "Tool specs"):
//!
//! - `web_search` through a configured search API ([`search`]: SearXNG, Brave or Tavily);
//! - `detect_objects`, `point_at_object` and `screen_locate` through a configured
//!   OpenAI-compatible vision model ([`vision`]), on the session's latest frame (a `send-image`
//!   frame; svc does not decode video tracks, so a session without a fresh `send-image` frame
//!   gets a typed `no_video_frame` answer).
//!
//! [`ToolBackends::run`] turns one call into the tool result the model gets, or a [`ToolError`]
//! whose [`ToolError::to_result`] the model gets instead. The request building and answer parsing
//! are sans-IO; [`http`] is the one place that talks to the network (15 s, 1 MiB, no redirects).
//! The session runtime (svc-session) runs calls as bounded background jobs.

pub mod http;
pub mod search;
pub mod vision;

use serde_json::{Value, json};
use svc_domain::tools::{ServerTool, ToolBackend};

pub use search::{SearchApi, WebSearchBackend};
pub use vision::VisionBackend;

/// The backends this deployment has (`svc serve --web-search-* --vision-*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolBackends {
    /// The search API of `web_search`.
    pub web_search: Option<WebSearchBackend>,
    /// The vision model of `detect_objects`, `point_at_object` and `screen_locate`.
    pub vision: Option<VisionBackend>,
}

/// An image the session received (the latest `send-image` frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Its media type (`image/jpeg`, `image/png`).
    pub mime: String,
    /// The encoded image.
    pub data: Vec<u8>,
}

/// One backend call to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendRequest {
    /// GET or POST.
    pub method: Method,
    /// The full address.
    pub url: url::Url,
    /// Extra headers (lower-case names).
    pub headers: Vec<(String, String)>,
    /// A JSON body.
    pub body: Option<Vec<u8>>,
}

/// The HTTP methods the backends take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
}

/// Why a server tool produced no result. The model gets [`ToolError::to_result`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The deployment has no backend for the tool.
    #[error("this deployment has no backend for the tool")]
    NotConfigured,
    /// A vision tool ran without a fresh frame.
    #[error("no camera or screen frame arrived recently")]
    NoVideoFrame,
    /// The model's arguments are unusable.
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// The backend answered with a non-2xx status (a redirect included: none is followed).
    #[error("the backend answered HTTP {status}")]
    Upstream {
        /// The HTTP status.
        status: u16,
    },
    /// The backend could not be reached (connect, TLS, or the exchange broke).
    #[error("the backend could not be reached: {0}")]
    Unreachable(String),
    /// The backend took longer than [`http::REQUEST_TIMEOUT`] (or the session's backstop).
    #[error("the backend did not answer in time")]
    Timeout,
    /// The answer is not what the API documents, or is too large.
    #[error("the backend's answer is unusable: {0}")]
    BadResponse(String),
    /// The session already runs as many tool jobs as it may.
    #[error("too many tool calls are running")]
    Busy,
}

impl ToolError {
    /// The machine code of the error result.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::NotConfigured => "not_configured",
            ToolError::NoVideoFrame => "no_video_frame",
            ToolError::BadArguments(_) => "bad_arguments",
            ToolError::Upstream { .. } | ToolError::Unreachable(_) => "upstream_error",
            ToolError::Timeout => "timeout",
            ToolError::BadResponse(_) => "bad_response",
            ToolError::Busy => "busy",
        }
    }

    /// The error result the model gets: `{error, message}`, plus `status` for an HTTP status.
    /// Nothing the backend sent is echoed beyond its status.
    pub fn to_result(&self) -> Value {
        let mut result = json!({"error": self.code(), "message": self.to_string()});
        if let ToolError::Upstream { status } = self {
            result["status"] = json!(status);
        }
        result
    }
}

/// A finished call: the result the model gets and a one-line summary for `tool-result`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The tool result.
    pub result: Value,
    /// For `tool-result.summary` (no payload: counts only).
    pub summary: String,
}

impl ToolBackends {
    /// Whether this deployment has the backend `tool` runs on (tools that need none: true).
    pub fn serves(&self, tool: ServerTool) -> bool {
        match tool.backend() {
            None => true,
            Some(ToolBackend::WebSearch) => self.web_search.is_some(),
            Some(ToolBackend::Vision) => self.vision.is_some(),
        }
    }

    /// The backend-run kinds this deployment can run.
    pub fn served_kinds(&self) -> Vec<ServerTool> {
        ServerTool::ALL.into_iter().filter(|tool| tool.backend().is_some() && self.serves(*tool)).collect()
    }

    /// Runs one call of a backend-run tool. `frame` is the session's latest fresh frame.
    pub async fn run(
        &self,
        tool: ServerTool,
        arguments: &Value,
        frame: Option<&Frame>,
    ) -> Result<ToolOutput, ToolError> {
        match tool.backend() {
            Some(ToolBackend::WebSearch) => {
                let backend = self.web_search.as_ref().ok_or(ToolError::NotConfigured)?;
                let query = search::query_of(arguments)?;
                let body = http::send(search::request(backend, &query)).await?;
                let result = search::parse(backend.api, &query, &body)?;
                let count = result["results"].as_array().map_or(0, Vec::len);
                Ok(ToolOutput { result, summary: format!("{count} results") })
            }
            Some(ToolBackend::Vision) => {
                let backend = self.vision.as_ref().ok_or(ToolError::NotConfigured)?;
                let frame = frame.ok_or(ToolError::NoVideoFrame)?;
                let body = http::send(vision::request(backend, tool, arguments, frame)?).await?;
                let result = vision::parse(tool, arguments, &body)?;
                let summary = match tool {
                    ServerTool::DetectObjects => {
                        format!("{} objects", result["objects"].as_array().map_or(0, Vec::len))
                    }
                    _ if result["found"] == json!(true) => "found".to_owned(),
                    _ => "not found".to_owned(),
                };
                Ok(ToolOutput { result, summary })
            }
            None => Err(ToolError::NotConfigured),
        }
    }
}
