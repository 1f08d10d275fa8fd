//! The HTTP shell of the tool backends: one request, HTTP/1.1 over TCP (rustls for `https`, the
//! provider driver's TLS configuration), at most [`REQUEST_TIMEOUT`] start to end, a response
//! body of at most [`MAX_BODY_BYTES`], and no redirects followed (a 3xx is an `upstream_error`
//! like any other non-2xx answer: a search or vision API that moved is a configuration to fix,
//! not a hop to take with the key attached).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

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

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

async fn exchange(request: BackendRequest) -> Result<Vec<u8>, ToolError> {
    let url = &request.url;
    let unreachable = |error: &dyn std::fmt::Display| ToolError::Unreachable(error.to_string());
    let host = url.host_str().ok_or_else(|| ToolError::Unreachable("the URL has no host".to_owned()))?.to_owned();
    let port = url.port_or_known_default().ok_or_else(|| ToolError::Unreachable("the URL has no port".to_owned()))?;
    // An IPv6 literal keeps its brackets in `host_str`; the socket wants it bare.
    let connect_host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let tcp = TcpStream::connect((connect_host.as_str(), port)).await.map_err(|e| unreachable(&e))?;
    // Best effort: an option the OS may refuse.
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = match url.scheme() {
        "https" => {
            let name = rustls::pki_types::ServerName::try_from(connect_host.clone()).map_err(|e| unreachable(&e))?;
            let connector = tokio_rustls::TlsConnector::from(svc_http::tls_config());
            Box::new(connector.connect(name, tcp).await.map_err(|e| unreachable(&e))?)
        }
        "http" => Box::new(tcp),
        other => return Err(ToolError::Unreachable(format!("unsupported scheme `{other}`"))),
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| unreachable(&e))?;
    // The connection task ends with the exchange: the function drops `sender`, which closes it.
    let driver = tokio::spawn(connection);
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    let method = match request.method {
        Method::Get => hyper::Method::GET,
        Method::Post => hyper::Method::POST,
    };
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(target)
        .header("host", authority)
        .header("accept", "application/json")
        .header("user-agent", concat!("svc-tools/", env!("CARGO_PKG_VERSION")));
    if request.body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let body = Full::new(Bytes::from(request.body.unwrap_or_default()));
    let http_request = builder.body(body).map_err(|e| unreachable(&e))?;
    let response = sender.send_request(http_request).await.map_err(|e| unreachable(&e))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        driver.abort();
        return Err(ToolError::Upstream { status });
    }
    let mut body = response.into_body();
    let mut buffer = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| ToolError::BadResponse(format!("the body broke off: {error}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if buffer.len() + data.len() > MAX_BODY_BYTES {
            driver.abort();
            return Err(ToolError::BadResponse(format!("the body is larger than {MAX_BODY_BYTES} bytes")));
        }
        buffer.extend_from_slice(&data);
    }
    driver.abort();
    Ok(buffer)
}
