//! The load generator: `C` keep-alive HTTP/1.1 connections, each with one request in flight at a
//! time (closed loop), written and parsed by hand so the client costs as little as possible.
//!
//! Only what the server sends is supported: a status line, headers, and a `Content-Length` body.
//! Anything else (chunked bodies, bytes after the body) is reported as a failure, not guessed at.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;
use svc_wire::rest::StartTimings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response that takes longer than this counts as a failure (and the connection is reopened).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response head accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Longest excerpt of a failure kept for the report.
const EXAMPLE_CHARS: usize = 300;

/// One endpoint under load.
#[derive(Debug)]
pub struct Target {
    /// Short name for the report (`verify`, `start`).
    pub name: &'static str,
    /// Method and path, for the report.
    pub label: String,
    /// The complete request, sent as is for every request.
    pub request: Vec<u8>,
    /// The 200 body carries `timings` (session start).
    pub has_timings: bool,
}

impl Target {
    /// A request with the bench's fixed headers and an optional JSON body.
    pub fn new(name: &'static str, method: &str, path: &str, key: &str, json_body: Option<&str>) -> Target {
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {key}\r\n");
        if let Some(body) = json_body {
            request.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len()));
            request.push_str(body);
        } else {
            request.push_str("\r\n");
        }
        Target {
            name,
            label: format!("{method} {path}"),
            request: request.into_bytes(),
            has_timings: json_body.is_some(),
        }
    }
}

/// How long and how wide to load one target.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Concurrent connections.
    pub connections: usize,
    /// Unmeasured warm-up.
    pub warmup: Duration,
    /// Measured phase.
    pub measure: Duration,
}

/// Failures by kind (`HTTP 503`, `transport`, `bad body`, …): count and the first example.
#[derive(Debug, Default)]
pub struct Failures(pub BTreeMap<String, (u64, String)>);

impl Failures {
    fn record(&mut self, kind: impl Into<String>, example: impl FnOnce() -> String) {
        let entry = self.0.entry(kind.into()).or_insert_with(|| (0, truncate(&example())));
        entry.0 += 1;
    }

    fn merge(&mut self, other: Failures) {
        for (kind, (count, example)) in other.0 {
            self.0.entry(kind).or_insert((0, example)).0 += count;
        }
    }

    /// Failures of every kind.
    pub fn total(&self) -> u64 {
        self.0.values().map(|(count, _)| count).sum()
    }
}

/// What loading one target produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// From the end of the warm-up until the last measured response.
    pub measured_wall: Duration,
    /// Client-side latency of each measured 200 response, in ms.
    pub latencies_ms: Vec<f64>,
    /// Server-side timings of each measured 200 response (session start only).
    pub timings: Vec<StartTimings>,
    /// 200 responses, warm-up included.
    pub ok_total: u64,
    /// Everything that was not a 200 with a well-formed body, warm-up included.
    pub failures: Failures,
}

/// Just the part of a start response the bench reads; the rest of the contract is not its business.
#[derive(Deserialize)]
struct StartBody {
    timings: StartTimings,
}

/// Sends one request on a fresh connection and returns its status and body. Used to fail fast,
/// with the server's own words, when the setup is wrong.
pub async fn probe(addr: SocketAddr, target: &Target) -> anyhow::Result<(u16, String)> {
    let mut conn = Conn::open(addr).await.context("connecting to the server")?;
    let response = conn.exchange(&target.request).await?;
    Ok((response.status, String::from_utf8_lossy(&response.body).into_owned()))
}

/// Loads `target` per `plan` and collects what came back.
pub async fn run(addr: SocketAddr, target: Arc<Target>, plan: Plan) -> anyhow::Result<Outcome> {
    let mut conns = Vec::with_capacity(plan.connections);
    for _ in 0..plan.connections {
        conns.push(Conn::open(addr).await.context("connecting to the server")?);
    }
    let warm_end = Instant::now() + plan.warmup;
    let end = warm_end + plan.measure;
    let tasks: Vec<_> =
        conns.into_iter().map(|conn| tokio::spawn(drive(addr, Arc::clone(&target), conn, warm_end, end))).collect();
    let mut outcome = Outcome::default();
    for task in tasks {
        let part = task.await.context("a client connection task panicked")?;
        outcome.latencies_ms.extend(part.latencies_ms);
        outcome.timings.extend(part.timings);
        outcome.ok_total += part.ok_total;
        outcome.failures.merge(part.failures);
    }
    outcome.measured_wall = warm_end.elapsed();
    Ok(outcome)
}

/// One connection's closed loop: send, wait for the whole response, repeat until `end`.
async fn drive(addr: SocketAddr, target: Arc<Target>, conn: Conn, warm_end: Instant, end: Instant) -> Outcome {
    let mut outcome = Outcome::default();
    let mut conn = Some(conn);
    while Instant::now() < end {
        let mut open = match conn.take() {
            Some(open) => open,
            None => match Conn::open(addr).await {
                Ok(open) => open,
                Err(error) => {
                    // The server is gone; retrying in a tight loop would only inflate the count.
                    outcome.failures.record("connect", || error.to_string());
                    break;
                }
            },
        };
        let sent = Instant::now();
        let result = tokio::time::timeout(REQUEST_TIMEOUT, open.exchange(&target.request)).await;
        let latency = sent.elapsed();
        let measured = sent >= warm_end;
        let response = match result {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => {
                outcome.failures.record("transport", || format!("{error:#}"));
                continue;
            }
            Err(_) => {
                outcome.failures.record("timeout", || format!("no response within {REQUEST_TIMEOUT:?}"));
                continue;
            }
        };
        let close = response.close;
        if response.status != 200 {
            outcome
                .failures
                .record(format!("HTTP {}", response.status), || String::from_utf8_lossy(&response.body).into_owned());
        } else if target.has_timings {
            match serde_json::from_slice::<StartBody>(&response.body) {
                Ok(body) => {
                    outcome.ok_total += 1;
                    if measured {
                        outcome.latencies_ms.push(latency.as_secs_f64() * 1000.0);
                        outcome.timings.push(body.timings);
                    }
                }
                Err(error) => outcome.failures.record("bad body", || error.to_string()),
            }
        } else {
            outcome.ok_total += 1;
            if measured {
                outcome.latencies_ms.push(latency.as_secs_f64() * 1000.0);
            }
        }
        if !close {
            conn = Some(open);
        }
    }
    outcome
}

struct Response {
    status: u16,
    body: Vec<u8>,
    close: bool,
}

struct Head {
    status: u16,
    content_length: usize,
    close: bool,
}

/// A keep-alive connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, buf: Vec::with_capacity(16 * 1024) })
    }

    async fn exchange(&mut self, request: &[u8]) -> anyhow::Result<Response> {
        self.stream.write_all(request).await.context("writing the request")?;
        self.buf.clear();
        let (body_start, head) = loop {
            if let Some(at) = self.buf.windows(4).position(|window| window == b"\r\n\r\n") {
                break (at + 4, parse_head(&self.buf[..at])?);
            }
            if self.buf.len() > MAX_HEAD_BYTES {
                bail!("response head exceeds {MAX_HEAD_BYTES} bytes");
            }
            self.fill().await?;
        };
        let body_end = body_start + head.content_length;
        while self.buf.len() < body_end {
            self.fill().await?;
        }
        if self.buf.len() > body_end {
            bail!("{} unexpected bytes after the response body", self.buf.len() - body_end);
        }
        Ok(Response { status: head.status, body: self.buf[body_start..body_end].to_vec(), close: head.close })
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        self.buf.reserve(16 * 1024);
        let read = self.stream.read_buf(&mut self.buf).await.context("reading the response")?;
        if read == 0 {
            bail!("the server closed the connection mid-response");
        }
        Ok(())
    }
}

fn parse_head(head: &[u8]) -> anyhow::Result<Head> {
    let text = std::str::from_utf8(head).context("response head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    if parts.next() != Some("HTTP/1.1") {
        bail!("unexpected status line {status_line:?}");
    }
    let status = parts
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .with_context(|| format!("unexpected status line {status_line:?}"))?;
    let mut content_length = None;
    let mut close = false;
    for line in lines {
        let (name, value) = line.split_once(':').with_context(|| format!("malformed header line {line:?}"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = Some(value.parse::<usize>().with_context(|| format!("bad Content-Length {value:?}"))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            bail!("unsupported Transfer-Encoding {value:?}");
        } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close") {
            close = true;
        }
    }
    let content_length = content_length.context("response without Content-Length")?;
    Ok(Head { status, content_length, close })
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(EXAMPLE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_head() {
        let head =
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 12").expect("valid head");
        assert_eq!((head.status, head.content_length, head.close), (200, 12, false));
        let head = parse_head(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close")
            .expect("valid head");
        assert_eq!((head.status, head.content_length, head.close), (503, 0, true));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nx-other: 1").is_err());
        assert!(parse_head(b"HTTP/1.0 200 OK\r\ncontent-length: 0").is_err());
    }

    #[test]
    fn builds_requests() {
        let get = Target::new("verify", "GET", "/v", "k", None);
        assert_eq!(get.request, b"GET /v HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n\r\n");
        let post = Target::new("start", "POST", "/s", "k", Some("{}"));
        assert!(post.request.ends_with(b"Content-Length: 2\r\n\r\n{}"));
        assert!(post.has_timings);
    }
}
