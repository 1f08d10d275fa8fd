//! The HTTP shell of the tool backends: one request, HTTP/1.1 over TCP (rustls for `https`, the
//! provider driver's TLS configuration), at most [`REQUEST_TIMEOUT`] start to end, a response
//! body of at most [`MAX_BODY_BYTES`], and no redirects followed (a 3xx is an `upstream_error`
//! like any other non-2xx answer: a search or vision API that moved is a configuration to fix,
//! not a hop to take with the key attached).

use std::time::Duration;

use bytes::Bytes;

use crate::{BackendRequest, Method, ToolError};

/// Longest a backend request may take, connect to last byte.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest response body read; a longer one is a `bad_response`.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// A 2xx answer's body.
pub(crate) async fn send(request: BackendRequest) -> Result<Vec<u8>, ToolError> {
    match tokio::time::timeout(REQUEST_TIMEOUT, exchange(request)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(ToolError::Timeout),
    }
}

async fn exchange(request: BackendRequest) -> Result<Vec<u8>, ToolError> {
    let BackendRequest { method, url, mut headers, body } = request;
    headers.push(("user-agent".to_owned(), concat!("svc-tools/", env!("CARGO_PKG_VERSION")).to_owned()));
    let outgoing = svc_http::Outgoing {
        method: match method {
            Method::Get => svc_http::Method::Get,
            Method::Post => svc_http::Method::Post,
        },
        url: url.as_str(),
        content_type: body.is_some().then_some("application/json"),
        accept: Some("application/json"),
        headers: &headers,
        body: Bytes::from(body.unwrap_or_default()),
    };
    let (response, driver) = svc_http::send(outgoing, svc_http::tls_config()).await.map_err(ToolError::Unreachable)?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        driver.abort();
        return Err(ToolError::Upstream { status });
    }
    let body = svc_http::read_body(response.into_body(), MAX_BODY_BYTES).await;
    driver.abort();
    body.map_err(|error| match error {
        svc_http::BodyError::Broken(error) => ToolError::BadResponse(format!("the body broke off: {error}")),
        svc_http::BodyError::TooLarge(limit) => {
            ToolError::BadResponse(format!("the body is larger than {limit} bytes"))
        }
    })
}
