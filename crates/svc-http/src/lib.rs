//! svc's outbound HTTPS client, below every crate that calls out: the TLS configuration
//! ([`tls_config`]: rustls with ring and the webpki roots, also what the provider driver's
//! WebSocket uses), the one streaming call ([`post`]), a JSON POST whose response may be a
//! stream of server-sent events (the Responses API under GPT-Live `svc` delegation, the local
//! provider's OpenAI-compatible reply endpoint), a one-shot POST that answers a status
//! ([`post_once`], the room's webhooks), and the request under both ([`send`]: connect, TLS,
//! one request; the tool backends read their answers from it). HTTP/1.1 over TCP. Progress goes back as
//! [`HttpEvent`]s on a bounded channel, so a sans-IO codec can be fed them as they come.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use url::Url;

/// The TLS client configuration [`tls_config`] builds (rustls'), for callers that keep one.
pub use rustls::ClientConfig as TlsClientConfig;

/// One outbound HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// Correlates [`HttpEvent`]s with this request.
    pub id: u64,
    /// `http://` or `https://` URL.
    pub url: String,
    /// Request headers.
    pub headers: Vec<(String, String)>,
    /// JSON body (POST).
    pub body: String,
}

/// Progress of an [`HttpRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpEvent {
    /// The response status arrived.
    Status(u16),
    /// One server-sent event's `data` (or the whole body of a non-streaming response).
    Data(String),
    /// The response ended.
    Done,
    /// The request failed before completing.
    Failed(String),
}

/// TLS client configuration: rustls with the ring provider and the webpki root store.
pub fn tls_config() -> Arc<rustls::ClientConfig> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|builder| builder.with_root_certificates(roots).with_no_client_auth());
    match config {
        Ok(config) => Arc::new(config),
        // The ring provider supports the default versions; keep a working config regardless.
        Err(_) => Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map(|builder| {
                    builder
                        .with_root_certificates(rustls::RootCertStore {
                            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                        })
                        .with_no_client_auth()
                })
                .expect("ring's provider supports TLS 1.3"),
        ),
    }
}

/// Longest response body accepted.
pub const MAX_BODY_BYTES: usize = 4 << 20;
/// Longest a request may take, start to end.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Performs `request`, reporting on `tx` (always ending with `Done` or `Failed`).
pub async fn post(request: HttpRequest, tls: Arc<rustls::ClientConfig>, tx: mpsc::Sender<(u64, HttpEvent)>) {
    let id = request.id;
    let outcome = tokio::time::timeout(REQUEST_TIMEOUT, run(request, tls, &tx)).await;
    let last = match outcome {
        Ok(Ok(())) => HttpEvent::Done,
        Ok(Err(message)) => HttpEvent::Failed(message),
        Err(_) => HttpEvent::Failed("timed out".to_owned()),
    };
    // The session is gone: nobody is waiting for this request any more.
    let _ = tx.send((id, last)).await;
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

async fn run(
    request: HttpRequest,
    tls: Arc<rustls::ClientConfig>,
    tx: &mpsc::Sender<(u64, HttpEvent)>,
) -> Result<(), String> {
    let outgoing = Outgoing {
        method: Method::Post,
        url: &request.url,
        content_type: Some("application/json"),
        accept: Some("text/event-stream"),
        headers: &request.headers,
        body: Bytes::from(request.body),
    };
    let (response, driver) = send(outgoing, tls).await?;
    let status = response.status().as_u16();
    // The session is gone: nobody is waiting for this request any more.
    let _ = tx.send((request.id, HttpEvent::Status(status))).await;
    let streaming = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let mut body = response.into_body();
    let mut buffer: Vec<u8> = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| error.to_string())?;
        let Ok(data) = frame.into_data() else { continue };
        total += data.len();
        if total > MAX_BODY_BYTES {
            return Err("response too large".to_owned());
        }
        buffer.extend_from_slice(&data);
        if streaming {
            for event in take_events(&mut buffer) {
                // The session is gone: nobody is waiting for this request any more.
                let _ = tx.send((request.id, HttpEvent::Data(event))).await;
            }
        }
    }
    if streaming {
        buffer.extend_from_slice(b"\n\n");
        for event in take_events(&mut buffer) {
            // The session is gone: nobody is waiting for this request any more.
            let _ = tx.send((request.id, HttpEvent::Data(event))).await;
        }
    } else if !buffer.is_empty() {
        // The session is gone: nobody is waiting for this request any more.
        let _ = tx.send((request.id, HttpEvent::Data(String::from_utf8_lossy(&buffer).into_owned()))).await;
    }
    driver.abort();
    Ok(())
}

/// An HTTP method [`send`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
}

/// One request on a fresh connection, as [`send`] makes it.
#[derive(Debug, Clone)]
pub struct Outgoing<'a> {
    /// The method.
    pub method: Method,
    /// `http://` or `https://` URL.
    pub url: &'a str,
    /// The body's `Content-Type`, if it has one.
    pub content_type: Option<&'a str>,
    /// The `Accept` header, if any.
    pub accept: Option<&'a str>,
    /// Further headers.
    pub headers: &'a [(String, String)],
    /// The body (empty: none).
    pub body: Bytes,
}

/// Why [`read_body`] stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The connection broke off mid-body.
    Broken(String),
    /// The body is longer than the limit given.
    TooLarge(usize),
}

/// Reads a response body whole, refusing one longer than `limit` bytes.
///
/// # Errors
///
/// [`BodyError`] when the body breaks off or outgrows `limit`.
pub async fn read_body(mut body: hyper::body::Incoming, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut buffer = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| BodyError::Broken(error.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        if buffer.len() + data.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        buffer.extend_from_slice(&data);
    }
    Ok(buffer)
}

/// Connects (TLS for `https`, with `tls`), sends the request and returns the response head with
/// its body to read, and the connection's task (abort it when done with the body). Errors are
/// described in words: the caller decides what kind of failure each is.
pub async fn send(
    outgoing: Outgoing<'_>,
    tls: Arc<rustls::ClientConfig>,
) -> Result<(hyper::Response<hyper::body::Incoming>, tokio::task::JoinHandle<()>), String> {
    let url = Url::parse(outgoing.url).map_err(|error| error.to_string())?;
    let host = url.host_str().ok_or("the URL has no host")?.to_owned();
    let port = url.port_or_known_default().ok_or("the URL has no port")?;
    // An IPv6 literal keeps its brackets in `host_str`; the socket and TLS want it bare.
    let connect_host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let tls_wanted = match url.scheme() {
        "https" => true,
        "http" => false,
        other => return Err(format!("unsupported scheme `{other}`")),
    };
    let tcp = TcpStream::connect((connect_host.as_str(), port)).await.map_err(|error| error.to_string())?;
    // Best effort: an option the OS may refuse.
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if tls_wanted {
        let name = rustls::pki_types::ServerName::try_from(connect_host).map_err(|error| error.to_string())?;
        let connector = tokio_rustls::TlsConnector::from(tls);
        Box::new(connector.connect(name, tcp).await.map_err(|error| error.to_string())?)
    } else {
        Box::new(tcp)
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| error.to_string())?;
    let driver = tokio::spawn(async move {
        // The connection's end is the response's: errors reach the caller through it.
        let _ = connection.await;
    });
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    let method = match outgoing.method {
        Method::Get => hyper::Method::GET,
        Method::Post => hyper::Method::POST,
    };
    let mut builder = hyper::Request::builder().method(method).uri(path).header("host", authority);
    if let Some(content_type) = outgoing.content_type {
        builder = builder.header("content-type", content_type);
    }
    if let Some(accept) = outgoing.accept {
        builder = builder.header("accept", accept);
    }
    for (name, value) in outgoing.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let sent = match builder.body(Full::new(outgoing.body)) {
        Ok(request) => sender.send_request(request).await.map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string()),
    };
    match sent {
        Ok(response) => Ok((response, driver)),
        Err(error) => {
            driver.abort();
            Err(error)
        }
    }
}

/// Posts `body` once with `content_type` and `headers` and answers the response's status; the
/// response body is read (up to [`MAX_BODY_BYTES`]) and dropped. For notifications (the room's
/// webhooks), where only "was it taken" matters. `timeout` bounds the whole exchange.
pub async fn post_once(
    url: &str,
    content_type: &str,
    headers: &[(String, String)],
    body: Bytes,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<u16, String> {
    let exchange = async {
        let content_type = Some(content_type);
        let outgoing = Outgoing { method: Method::Post, url, content_type, accept: None, headers, body };
        let (response, driver) = send(outgoing, tls).await?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut total = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            total += frame.data_ref().map_or(0, Bytes::len);
            if total > MAX_BODY_BYTES {
                break;
            }
        }
        driver.abort();
        Ok(status)
    };
    tokio::time::timeout(timeout, exchange).await.unwrap_or_else(|_| Err("timed out".to_owned()))
}

/// Removes every complete server-sent event from `buffer`, returning the joined `data:` lines of
/// each (events without data, and `[DONE]`, are skipped).
pub fn take_events(buffer: &mut Vec<u8>) -> Vec<String> {
    let mut events = Vec::new();
    // Work on bytes: a chunk may end inside a multi-byte character, which must not be decoded yet.
    while let Some((end, separator)) = find_blank_line(buffer) {
        let block = String::from_utf8_lossy(&buffer[..end]).replace("\r\n", "\n");
        let data: Vec<&str> = block
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|line| line.strip_prefix(' ').unwrap_or(line))
            .collect();
        if !data.is_empty() {
            let joined = data.join("\n");
            if joined != "[DONE]" {
                events.push(joined);
            }
        }
        buffer.drain(..end + separator);
    }
    events
}

/// Position and length of the first blank line (`\n\n` or `\r\n\r\n`).
fn find_blank_line(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buffer.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_uses_the_webpki_roots_with_ring() {
        let config = tls_config();
        assert!(config.alpn_protocols.is_empty(), "plain HTTP/1.1 upgrade (xAI refuses HTTP/2)");
        assert!(webpki_roots::TLS_SERVER_ROOTS.len() > 100);
        assert!(config.crypto_provider().cipher_suites.iter().any(|suite| suite.version() == &rustls::version::TLS13));
    }

    #[test]
    fn server_sent_events_split_across_chunks() {
        let mut buffer = b"event: response.created\ndata: {\"a\":1}\n\ndata: {\"b\"".to_vec();
        assert_eq!(take_events(&mut buffer), vec!["{\"a\":1}".to_owned()]);
        buffer.extend_from_slice(b":2}\r\n\r\ndata: [DONE]\n\n");
        assert_eq!(take_events(&mut buffer), vec!["{\"b\":2}".to_owned()]);
        assert!(buffer.is_empty());
        // A character split across chunks survives.
        let text = "data: {\"d\":\"caf\u{e9}\"}\n\n".as_bytes().to_vec();
        let split = text.len() - 5;
        let mut buffer = text[..split].to_vec();
        assert!(take_events(&mut buffer).is_empty());
        buffer.extend_from_slice(&text[split..]);
        assert_eq!(take_events(&mut buffer), vec!["{\"d\":\"caf\u{e9}\"}".to_owned()]);
    }
}
