//! The one IO shell: a Tokio task that owns a [`Codec`] and its WebSocket, and talks to the
//! runtime over bounded channels.
//!
//! After every thing that happens (input, frame, close, timer, HTTP progress) the task drains the
//! codec completely — transmits first, then events — in exactly one place ([`Driver::drain`]).
//! The task ends when the codec is closed, when the runtime drops its handle (treated as
//! [`ProviderInput::Close`]) or when the shutdown token fires; every socket and HTTP task it
//! started ends with it.
//!
//! A stalled upstream is a dropped one ([`Liveness`]): while connected the task pings every few
//! seconds and gives the socket up when nothing at all (a pong included) has come for longer than
//! the bound, or when the provider takes no bytes for as long (a send that cannot finish would
//! otherwise hold the task, and with it the session, forever). The codec then handles it as any
//! drop without a close frame (1006): reconnect, resume or reseed, replay the held audio.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use svc_http::{HttpEvent, tls_config};
use svc_provider_core::session::{EVENT_CAPACITY, INPUT_CAPACITY, ProviderSession};
use svc_provider_core::{ProviderEvent, ProviderInput};

use crate::codec::{Codec, ConnectFailure, ConnectRequest, Transmit};
use crate::recording::Recorder;
use crate::unread::ReadReceipt;

/// Largest upstream frame accepted (audio deltas are a few KiB; setups echo a few hundred).
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;
/// Most bytes one socket read takes. tungstenite zero-fills its read buffer up to this size before
/// every read (128 KiB by default): at 100 sessions that memset alone was ~3 % of svc's CPU
/// (docs/benchmarks.md, "the provider socket's read buffer"). A provider message is a few KiB, and
/// a larger one is still read whole, in more reads.
const READ_BUFFER_BYTES: usize = 16 << 10;
/// How long one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How the task tells a live upstream from a stalled one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// A WebSocket ping goes out this often while connected (RFC 6455 peers answer with a pong).
    pub ping_every: Duration,
    /// Nothing received for this long (no message, no pong): the upstream is gone.
    pub silent_for: Duration,
    /// One send (a frame, a ping) not taken by the socket within this: the upstream is gone.
    pub send_within: Duration,
}

impl Liveness {
    /// svc's bounds: a ping every second, gone after 10 s of silence or a send stuck for 10 s. A
    /// reply stalls at most that long before the session reconnects (`reconnecting` reaches the
    /// client); a quiet but healthy upstream answers every ping. The pongs also bound the user
    /// audio kept unconfirmed ([`crate::unread`]) to about a second's worth.
    pub const DEFAULT: Liveness = Liveness {
        ping_every: Duration::from_secs(1),
        silent_for: Duration::from_secs(10),
        send_within: Duration::from_secs(10),
    };
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Connecting = Pin<Box<dyn Future<Output = Result<Socket, ConnectFailure>> + Send>>;

/// Starts the adapter task for `codec` (TLS: [`tls_config`]).
pub fn spawn(codec: Box<dyn Codec>, shutdown: CancellationToken) -> ProviderSession {
    spawn_with_tls(codec, tls_config(), shutdown)
}

/// Starts the adapter task for `codec` with its own TLS client configuration (private roots of
/// a corporate gateway, or a test's self-signed certificate).
pub fn spawn_with_tls(
    codec: Box<dyn Codec>,
    tls: Arc<rustls::ClientConfig>,
    shutdown: CancellationToken,
) -> ProviderSession {
    spawn_recorded(codec, tls, shutdown, None)
}

/// As [`spawn_with_tls`], writing the whole upstream exchange into `recorder` when given
/// (`svc provider check --record`).
pub fn spawn_recorded(
    codec: Box<dyn Codec>,
    tls: Arc<rustls::ClientConfig>,
    shutdown: CancellationToken,
    recorder: Option<Recorder>,
) -> ProviderSession {
    spawn_with_liveness(codec, tls, shutdown, recorder, Liveness::DEFAULT)
}

/// As [`spawn_recorded`], telling a stalled upstream by `liveness` (tests shorten the bounds).
pub fn spawn_with_liveness(
    codec: Box<dyn Codec>,
    tls: Arc<rustls::ClientConfig>,
    shutdown: CancellationToken,
    recorder: Option<Recorder>,
    liveness: Liveness,
) -> ProviderSession {
    let (input_tx, input_rx) = mpsc::channel(INPUT_CAPACITY);
    let (event_tx, event_rx) = mpsc::channel(EVENT_CAPACITY);
    let (handle_tx, handle_rx) = watch::channel(None);
    let driver = Driver {
        codec,
        socket: None,
        connecting: None,
        input_rx,
        input_open: true,
        event_tx,
        handle_tx,
        http_tasks: JoinSet::new(),
        http_tx: None,
        tls,
        shutdown: shutdown.clone(),
        recorder,
        liveness,
        heard_at: Instant::now(),
        next_ping: Instant::now(),
        last_ping: 0,
        awaiting_pong: None,
    };
    let task = tokio::spawn(driver.run());
    ProviderSession { input: input_tx, events: event_rx, resumption_handle: handle_rx, shutdown, task }
}

struct Driver {
    codec: Box<dyn Codec>,
    socket: Option<Socket>,
    connecting: Option<Connecting>,
    input_rx: mpsc::Receiver<ProviderInput>,
    input_open: bool,
    event_tx: mpsc::Sender<ProviderEvent>,
    handle_tx: watch::Sender<Option<String>>,
    http_tasks: JoinSet<()>,
    http_tx: Option<mpsc::Sender<(u64, HttpEvent)>>,
    tls: Arc<rustls::ClientConfig>,
    shutdown: CancellationToken,
    recorder: Option<Recorder>,
    liveness: Liveness,
    /// When the socket last gave anything (its opening included).
    heard_at: Instant,
    /// When the next ping goes out.
    next_ping: Instant,
    /// The payload of the last ping sent on this socket (a counter).
    last_ping: u64,
    /// The payload of the ping whose pong will confirm what the upstream read (the codec was told
    /// [`ReadReceipt::PingSent`]); `None` when no ping awaits its pong.
    awaiting_pong: Option<u64>,
}

impl Driver {
    /// The codec's clock: Tokio's (so paused-time tests also pause the codec), as std `Instant`.
    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }

    async fn run(mut self) {
        let (http_tx, mut http_rx) = mpsc::channel::<(u64, HttpEvent)>(64);
        self.http_tx = Some(http_tx);
        let mut closing = false;
        // These live across turns of the loop (one per frame each way): made afresh each turn,
        // they registered and removed two timers and a cancellation waiter every time.
        let mut shutdown = std::pin::pin!(self.shutdown.child_token().cancelled_owned());
        let mut timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
        let mut ping_timer = std::pin::pin!(tokio::time::sleep_until(self.next_ping));
        loop {
            if !self.drain().await && !closing {
                // Nobody listens any more: close properly (open tool calls answered, socket
                // closed), dropping the events that follow.
                closing = true;
                let now = self.now();
                self.codec.handle_input(now, ProviderInput::Close);
                self.drain().await;
            }
            if self.codec.is_closed() {
                break;
            }
            let deadline = self.codec.poll_timeout().map(Instant::from_std);
            if let Some(at) = deadline
                && timer.deadline() != at
            {
                timer.as_mut().reset(at);
            }
            if ping_timer.deadline() != self.next_ping {
                ping_timer.as_mut().reset(self.next_ping);
            }
            tokio::select! {
                () = &mut shutdown, if !closing => {
                    closing = true;
                    let now = self.now();
                    self.codec.handle_input(now, ProviderInput::Close);
                }
                result = next_connect(&mut self.connecting) => {
                    self.connecting = None;
                    let now = self.now();
                    match result {
                        Ok(socket) => {
                            self.socket = Some(socket);
                            self.awaiting_pong = None;
                            self.heard_at = Instant::now();
                            self.next_ping = self.heard_at + self.liveness.ping_every;
                            if let Some(recorder) = &self.recorder {
                                recorder.connected(now);
                            }
                            self.codec.handle_connected(now);
                        }
                        Err(failure) => {
                            if let Some(recorder) = &self.recorder {
                                recorder.connect_failed(now, &failure);
                            }
                            self.codec.handle_connect_failed(now, failure);
                        }
                    }
                }
                message = next_message(&mut self.socket) => {
                    let now = self.now();
                    self.heard_at = Instant::from_std(now);
                    match message {
                        // A message is JSON in either frame type: Gemini sends binary frames,
                        // the others text; the codec reads the payload's bytes either way.
                        Some(Ok(Message::Text(text))) => {
                            if let Some(recorder) = &self.recorder {
                                recorder.received(now, "text", text.as_bytes());
                            }
                            self.codec.handle_upstream_message(now, text.as_bytes());
                        }
                        Some(Ok(Message::Binary(bytes))) => {
                            if let Some(recorder) = &self.recorder {
                                recorder.received(now, "binary", &bytes);
                            }
                            self.codec.handle_upstream_message(now, &bytes);
                        }
                        Some(Ok(Message::Pong(payload))) => {
                            if self.awaiting_pong.is_some_and(|ping| payload[..] == ping.to_be_bytes()[..]) {
                                self.awaiting_pong = None;
                                self.codec.handle_read_receipt(now, ReadReceipt::PongReceived);
                            }
                        }
                        Some(Ok(Message::Ping(_) | Message::Frame(_))) => {}
                        Some(Ok(Message::Close(frame))) => {
                            // Answer the close frame (RFC 6455 §5.5.1: tungstenite queued the
                            // echo, flushing sends it) before the socket goes.
                            if let Some(mut socket) = self.socket.take() {
                                flush_close(&mut socket).await;
                            }
                            let (code, reason) = frame.map_or((None, String::new()), |frame| {
                                (Some(u16::from(frame.code)), frame.reason.to_string())
                            });
                            if let Some(recorder) = &self.recorder {
                                recorder.closed(now, code, &reason, true);
                            }
                            tracing::info!(?code, %reason, "the provider closed the link");
                            self.codec.handle_upstream_closed(now, code, &reason);
                        }
                        Some(Err(error)) => {
                            self.socket = None;
                            self.upstream_gone(now, &error.to_string());
                        }
                        None => {
                            self.socket = None;
                            self.upstream_gone(now, "connection ended");
                        }
                    }
                }
                input = self.input_rx.recv(), if self.input_open => {
                    let now = self.now();
                    match input {
                        Some(input) => {
                            if let Some(recorder) = &self.recorder {
                                recorder.input(now, &input);
                            }
                            self.codec.handle_input(now, input);
                        }
                        None => {
                            // The runtime is gone: close like it asked to.
                            self.input_open = false;
                            self.codec.handle_input(now, ProviderInput::Close);
                        }
                    }
                }
                Some((id, event)) = http_rx.recv() => {
                    let now = self.now();
                    self.codec.handle_http(now, id, event);
                }
                () = &mut timer, if deadline.is_some() => {
                    let now = self.now();
                    self.codec.handle_timeout(now);
                }
                () = &mut ping_timer, if self.socket.is_some() => self.keep_alive().await,
            }
        }
        if let Some(mut socket) = self.socket.take() {
            close_normally(&mut socket).await;
        }
        self.http_tasks.shutdown().await;
    }

    /// The ping timer: gives up a socket silent for too long, else pings it.
    async fn keep_alive(&mut self) {
        let silent = self.heard_at.elapsed();
        self.next_ping = Instant::now() + self.liveness.ping_every;
        if silent >= self.liveness.silent_for {
            self.socket = None;
            let now = self.now();
            let reason = format!("stalled: nothing from the provider for {} ms", silent.as_millis());
            tracing::warn!(%reason, "provider link stalled");
            self.upstream_gone(now, &reason);
            return;
        }
        // Everything the codec produced is on the socket before the ping (it is drained after
        // every event), so the pong confirms it was read.
        self.last_ping += 1;
        let ping = self.last_ping;
        if self.awaiting_pong.is_none() {
            self.awaiting_pong = Some(ping);
            let now = self.now();
            self.codec.handle_read_receipt(now, ReadReceipt::PingSent);
        }
        self.send(Message::Ping(ping.to_be_bytes().to_vec().into())).await;
    }

    /// Sends one message, bounded by [`Liveness::send_within`]; a failure or a send that cannot
    /// finish loses the socket (the codec hears of it as a drop).
    async fn send(&mut self, message: Message) {
        let Some(socket) = self.socket.as_mut() else {
            // Not connected: the codec only sends when ready, so this is a frame racing a drop;
            // the close already told (or is about to tell) the codec.
            return;
        };
        let failure = match tokio::time::timeout(self.liveness.send_within, socket.send(message)).await {
            Ok(Ok(())) => return,
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("stalled: the provider took no data for {} ms", self.liveness.send_within.as_millis()),
        };
        self.socket = None;
        let now = self.now();
        self.upstream_gone(now, &failure);
    }

    /// The socket failed or ended without a close frame (1006).
    fn upstream_gone(&mut self, now: std::time::Instant, reason: &str) {
        if let Some(recorder) = &self.recorder {
            recorder.closed(now, Some(1006), reason, false);
        }
        tracing::info!(%reason, "the provider link dropped");
        self.codec.handle_upstream_closed(now, Some(1006), reason);
    }

    /// Drains every transmit and event; `false` when the runtime stopped listening (events are
    /// then discarded).
    async fn drain(&mut self) -> bool {
        while let Some(transmit) = self.codec.poll_transmit() {
            if let Some(recorder) = &self.recorder {
                recorder.transmit(self.now(), &transmit);
            }
            match transmit {
                Transmit::Text(text) => self.send(Message::text(text)).await,
                Transmit::Connect(request) => {
                    // Close the old socket first: Gemini refuses a resume while it is open (§2.2).
                    if let Some(mut old) = self.socket.take() {
                        close_normally(&mut old).await;
                    }
                    self.connecting = Some(Box::pin(open(request, self.tls.clone())));
                }
                Transmit::Close => {
                    self.connecting = None;
                    if let Some(mut socket) = self.socket.take() {
                        close_normally(&mut socket).await;
                    }
                }
                Transmit::Http(request) => {
                    if let Some(tx) = self.http_tx.clone() {
                        let tls = self.tls.clone();
                        self.http_tasks.spawn(svc_http::post(request, tls, tx));
                    }
                }
            }
        }
        if let Some(handle) = self.codec.resumption_handle()
            && self.handle_tx.borrow().as_deref() != Some(handle)
        {
            let handle = handle.to_owned();
            self.handle_tx.send_replace(Some(handle));
        }
        let mut listening = !self.event_tx.is_closed();
        while let Some(event) = self.codec.poll_event() {
            if listening && self.event_tx.send(event).await.is_err() {
                listening = false;
            }
        }
        listening
    }
}

/// How long closing a socket may take before it is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Closes a socket svc is done with: a close frame with 1000 (a frame without a code reads as
/// 1005, "no status", to the service), then the upstream's close awaited before the connection
/// goes (RFC 6455 §7.1.1), bounded in time.
///
/// Waiting matters: what the upstream sent meanwhile (a pong, its echo) would otherwise be unread
/// when the socket closes, the kernel then resets the connection, and a reset can destroy svc's
/// close frame before the upstream read it (it saw a connection lost, not a close).
async fn close_normally(socket: &mut Socket) {
    let frame = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    // Best effort: the upstream may already be gone.
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
        if socket.close(Some(frame)).await.is_ok() {
            // Everything until the upstream's close is dropped: the session is over for svc.
            while let Some(Ok(_)) = socket.next().await {}
        }
    })
    .await;
}

/// Sends the echo of a close frame the upstream sent (queued by tungstenite on receipt).
async fn flush_close(socket: &mut Socket) {
    // Not `close`: it would queue a second close frame, which tungstenite refuses after the
    // peer's. Best effort: the upstream may already have dropped the connection.
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, SinkExt::flush(socket)).await;
}

async fn next_connect(connecting: &mut Option<Connecting>) -> Result<Socket, ConnectFailure> {
    match connecting.as_mut() {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

async fn next_message(socket: &mut Option<Socket>) -> Option<Result<Message, tungstenite::Error>> {
    match socket.as_mut() {
        Some(socket) => socket.next().await,
        None => std::future::pending().await,
    }
}

/// Opens one WebSocket (HTTP/1.1 upgrade; rustls for `wss`).
async fn open(request: ConnectRequest, tls: Arc<rustls::ClientConfig>) -> Result<Socket, ConnectFailure> {
    let failure = |message: String| ConnectFailure { status: None, message };
    let mut http = request.url.as_str().into_client_request().map_err(|error| failure(error.to_string()))?;
    for (name, value) in &request.headers {
        let name = tungstenite::http::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|error| failure(error.to_string()))?;
        let value = HeaderValue::from_str(value).map_err(|error| failure(error.to_string()))?;
        http.headers_mut().insert(name, value);
    }
    let config =
        WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE_BYTES)).read_buffer_size(READ_BUFFER_BYTES);
    let connect =
        tokio_tungstenite::connect_async_tls_with_config(http, Some(config), true, Some(Connector::Rustls(tls)));
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Err(_) => Err(failure(format!("timed out after {} s", CONNECT_TIMEOUT.as_secs()))),
        Ok(Ok((socket, _response))) => Ok(socket),
        Ok(Err(tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            let body =
                response.body().as_ref().map(|body| String::from_utf8_lossy(body).into_owned()).unwrap_or_default();
            Err(ConnectFailure { status: Some(status), message: format!("HTTP {status} {}", body.trim()) })
        }
        Ok(Err(error)) => Err(failure(error.to_string())),
    }
}
