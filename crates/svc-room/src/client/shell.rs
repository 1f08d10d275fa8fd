//! The IO shell: one tokio task owns the [`ClientCore`], the WebSocket's write half and both UDP
//! sockets, feeds the core what arrives and carries out what it asks for; a small reader task
//! decodes incoming signal frames for it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use livekit_protocol as proto;
use prost::Message as _;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::core::{ClientCore, ClientOutput, Role, disconnect_reason};
use super::handle::{ClientError, ClientEvent, ClientOptions, ClientStats, Command, Post, RoomClient};
use crate::wall_clock::unix_ms;

type WebSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Signalling protocol version we announce (v0 without the packet trailer of 17).
const PROTOCOL_VERSION: u32 = 16;
/// Commands queued from the handle to the IO task (audio frames included).
const COMMAND_QUEUE: usize = 512;
/// Signal messages read ahead of the IO task.
const SIGNAL_QUEUE: usize = 64;
/// Largest datagram read (WebRTC keeps packets under the path MTU).
const MAX_DATAGRAM: usize = 2048;
/// Datagrams handled per socket wake-up before the task looks at its other inputs again.
const RECEIVE_BATCH: usize = 32;

/// The `/rtc` URL for a LiveKit URL: the path gets `rtc` appended (`ws://h/room` → `ws://h/room/rtc`,
/// `wss://` kept).
fn signal_url(url: &str, token: &str, auto_subscribe: bool) -> Result<(String, String), ClientError> {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme @ ("ws" | "wss"), rest)) => (scheme, rest),
        _ => return Err(ClientError::Url(url.to_owned())),
    };
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(authority, path)| (authority, path));
    if authority.is_empty() {
        return Err(ClientError::Url(url.to_owned()));
    }
    let path = path.split(['?', '#']).next().unwrap_or_default().trim_end_matches('/');
    let prefix = if path.is_empty() { String::new() } else { format!("/{path}") };
    let query = format!(
        "access_token={}&auto_subscribe={}&protocol={PROTOCOL_VERSION}&client_protocol=0&sdk=rust&version={}&adaptive_stream=0",
        percent_encode(token),
        u8::from(auto_subscribe),
        env!("CARGO_PKG_VERSION"),
    );
    Ok((format!("{scheme}://{authority}{prefix}/rtc?{query}"), authority.to_owned()))
}

/// Percent-encodes everything but RFC 3986 unreserved characters (JWTs only need `.`, `-`, `_`).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The local IP the system would use to reach `authority` (`host[:port]`).
async fn route_ip(authority: &str) -> Result<IpAddr, ClientError> {
    let target = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let address = tokio::net::lookup_host(&target)
        .await
        .map_err(|error| ClientError::Connect(format!("resolving {authority}: {error}")))?
        .next()
        .ok_or_else(|| ClientError::Connect(format!("{authority} has no address")))?;
    if address.ip().is_loopback() {
        return Ok(address.ip());
    }
    let unspecified: IpAddr = if address.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { IpAddr::from([0u16; 8]) };
    let probe = std::net::UdpSocket::bind((unspecified, 0)).map_err(|error| ClientError::Io(error.to_string()))?;
    probe.connect(address).map_err(|error| ClientError::Io(error.to_string()))?;
    probe.local_addr().map(|local| local.ip()).map_err(|error| ClientError::Io(error.to_string()))
}

pub(super) async fn connect(url: &str, token: &str, options: ClientOptions) -> Result<RoomClient, ClientError> {
    let (signal_url, authority) = signal_url(url, token, options.auto_subscribe)?;
    let ip = match options.udp_ip {
        Some(ip) => ip,
        None => route_ip(&authority).await?,
    };
    let publisher_socket =
        UdpSocket::bind((ip, 0)).await.map_err(|error| ClientError::Io(format!("binding udp on {ip}: {error}")))?;
    let subscriber_socket =
        UdpSocket::bind((ip, 0)).await.map_err(|error| ClientError::Io(format!("binding udp on {ip}: {error}")))?;
    let local = |socket: &UdpSocket| socket.local_addr().map_err(|error| ClientError::Io(error.to_string()));
    let (publisher_addr, subscriber_addr) = (local(&publisher_socket)?, local(&subscriber_socket)?);

    // Nagle off: signalling is small request/response messages. `wss://` verifies the server
    // with `options.tls` (the webpki roots unless the caller trusts others).
    let tls = options.tls.clone().unwrap_or_else(svc_http::tls_config);
    let connector = tokio_tungstenite::Connector::Rustls(tls);
    let (mut ws, _) =
        tokio_tungstenite::connect_async_tls_with_config(signal_url.as_str(), None, true, Some(connector))
            .await
            .map_err(|error| ClientError::Connect(error.to_string()))?;
    let join = match read_signal(&mut ws).await? {
        proto::signal_response::Message::Join(join) => join,
        proto::signal_response::Message::Leave(leave) => {
            return Err(ClientError::Refused(disconnect_reason(leave.reason)));
        }
        other => {
            return Err(ClientError::Protocol(format!(
                "expected the join response first, got {}",
                message_name(&other)
            )));
        }
    };
    let now = Instant::now();
    let (core, info) = ClientCore::new(now, join, publisher_addr, subscriber_addr, options.rpc_methods)?;
    let (commands, command_queue) = mpsc::channel(COMMAND_QUEUE);
    let (events_in, events) = mpsc::channel(options.event_queue.max(16));
    let (ready, is_ready) = oneshot::channel();
    // The signal stream is read on a task of its own: tungstenite zeroes its whole read buffer
    // (128 KiB) on every poll that finds no data, and the IO task wakes for every datagram.
    let (sink, stream) = ws.split();
    let (signals_in, signals) = mpsc::channel(SIGNAL_QUEUE);
    let reader = tokio::spawn(read_signals(stream, signals_in));
    let audio_dropped = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let shell = Shell {
        core,
        sink,
        signals,
        reader,
        publisher_socket,
        subscriber_socket,
        commands: command_queue,
        events: events_in,
        audio_dropped: audio_dropped.clone(),
        ready: Some(ready),
        publish_reply: None,
    };
    let task = tokio::spawn(shell.run());
    match is_ready.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(error),
        Err(_) => return Err(ClientError::Closed),
    }
    let publish_timeout = options.publish_timeout;
    Ok(RoomClient { info, commands, events, publish_timeout, task: Some(task), audio_dropped })
}

/// What the signal reader hands the IO task.
enum SignalInput {
    Message(Box<proto::signal_response::Message>),
    /// The connection ended (with the error, if it broke).
    Closed(Option<String>),
}

async fn read_signals(mut stream: futures_util::stream::SplitStream<WebSocket>, signals: mpsc::Sender<SignalInput>) {
    loop {
        let input = match stream.next().await {
            Some(Ok(WsMessage::Binary(bytes))) => match decode_signal(&bytes) {
                Ok(message) => SignalInput::Message(Box::new(message)),
                // One bad frame is the server's bug, not a reason to drop the call.
                Err(error) => {
                    tracing::debug!(%error, "signal frame ignored");
                    continue;
                }
            },
            Some(Ok(WsMessage::Text(_) | WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_))) => continue,
            Some(Ok(WsMessage::Close(_))) | None => SignalInput::Closed(None),
            Some(Err(error)) => SignalInput::Closed(Some(error.to_string())),
        };
        let closed = matches!(input, SignalInput::Closed(_));
        if signals.send(input).await.is_err() || closed {
            return;
        }
    }
}

async fn read_signal(ws: &mut WebSocket) -> Result<proto::signal_response::Message, ClientError> {
    loop {
        match ws.next().await {
            Some(Ok(WsMessage::Binary(bytes))) => return decode_signal(&bytes),
            Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_))) => continue,
            Some(Ok(WsMessage::Text(_))) => return Err(ClientError::Protocol("text signal frame".to_owned())),
            Some(Ok(WsMessage::Close(frame))) => {
                return Err(ClientError::Connect(format!("closed by the server: {frame:?}")));
            }
            Some(Err(error)) => return Err(ClientError::Connect(error.to_string())),
            None => return Err(ClientError::Connect("closed by the server".to_owned())),
        }
    }
}

fn decode_signal(bytes: &[u8]) -> Result<proto::signal_response::Message, ClientError> {
    proto::SignalResponse::decode(bytes)
        .map_err(|error| ClientError::Protocol(format!("undecodable SignalResponse: {error}")))?
        .message
        .ok_or_else(|| ClientError::Protocol("empty SignalResponse".to_owned()))
}

fn message_name(message: &proto::signal_response::Message) -> String {
    let debug = format!("{message:?}");
    debug.split(['(', ' ', '{']).next().unwrap_or_default().to_owned()
}

struct Shell {
    core: ClientCore,
    sink: futures_util::stream::SplitSink<WebSocket, WsMessage>,
    signals: mpsc::Receiver<SignalInput>,
    reader: tokio::task::JoinHandle<()>,
    publisher_socket: UdpSocket,
    subscriber_socket: UdpSocket,
    commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<ClientEvent>,
    ready: Option<oneshot::Sender<Result<(), ClientError>>>,
    publish_reply: Option<oneshot::Sender<Result<String, ClientError>>>,
    /// Shared with the handle: the audio frames the application's queue refused.
    audio_dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Shell {
    async fn run(mut self) {
        let mut publisher_buffer = vec![0u8; MAX_DATAGRAM];
        let mut subscriber_buffer = vec![0u8; MAX_DATAGRAM];
        // One timer, moved when the core's deadline moves (a new one per wake-up costs).
        let mut armed = self.core.poll_timeout();
        let timer = tokio::time::sleep_until(armed.unwrap_or_else(far_future).into());
        tokio::pin!(timer);
        let outcome = loop {
            if let Some(outcome) = self.carry_out().await {
                break outcome;
            }
            let wake = self.core.poll_timeout();
            if wake != armed {
                armed = wake;
                timer.as_mut().reset(wake.unwrap_or_else(far_future).into());
            }
            tokio::select! {
                command = self.commands.recv() => {
                    let now = Instant::now();
                    match command {
                        Some(command) => self.handle_command(now, command),
                        // Every handle is gone: leave.
                        None => self.core.leave(),
                    }
                }
                received = self.subscriber_socket.recv_from(&mut subscriber_buffer) => {
                    self.receive(Role::Subscriber, received, &mut subscriber_buffer);
                }
                received = self.publisher_socket.recv_from(&mut publisher_buffer) => {
                    self.receive(Role::Publisher, received, &mut publisher_buffer);
                }
                input = self.signals.recv() => match input {
                    Some(SignalInput::Message(message)) => self.core.handle_signal(Instant::now(), unix_ms(), *message),
                    Some(SignalInput::Closed(error)) => self.core.signal_closed(error),
                    None => self.core.signal_closed(None),
                },
                () = &mut timer, if armed.is_some() => {
                    self.core.handle_timeout(Instant::now(), unix_ms());
                    // A fired timer stays ready: re-arm it whatever the next deadline is.
                    armed = None;
                }
            }
        };
        // Say goodbye properly (a leave may already be queued ahead of this), then close.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.sink.close()).await;
        self.reader.abort();
        self.core.disconnect();
        let error = outcome.clone().unwrap_or(ClientError::Closed);
        if let Some(ready) = self.ready.take() {
            // The caller gave up waiting; nothing to tell it.
            let _ = ready.send(Err(error.clone()));
        }
        if let Some(reply) = self.publish_reply.take() {
            // The caller gave up waiting; nothing to tell it.
            let _ = reply.send(Err(error));
        }
        // A reader that stopped reading does not need the close event.
        let _ = self.events.try_send(ClientEvent::Closed { error: outcome });
    }

    fn handle_command(&mut self, now: Instant, command: Command) {
        match command {
            Command::PublishAudio { name, reply } => {
                if self.publish_reply.is_some() {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(Err(ClientError::AlreadyPublished));
                } else if let Err(error) =
                    self.core.publish_audio(now, name, format!("svc-{}", uuid::Uuid::new_v4().simple()))
                {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(Err(error));
                } else {
                    self.publish_reply = Some(reply);
                }
            }
            Command::WriteAudio { rtp_timestamp, opus } => self.core.write_audio(now, rtp_timestamp, opus),
            Command::SendData { packet, reply } => {
                // The caller gave up waiting; nothing to tell it.
                let _ = reply.send(self.core.send_data(now, packet));
            }
            Command::Post(post) => {
                let command = post.name();
                let outcome = match post {
                    Post::Data(packet) => self.core.send_data(now, packet),
                    Post::Attributes(attributes) => {
                        self.core.set_attributes(now, attributes);
                        Ok(())
                    }
                    Post::RpcResponse { caller, request_id, result } => {
                        self.core.respond_rpc(now, caller, request_id, result)
                    }
                };
                if let Err(error) = outcome
                    && self.events.try_send(ClientEvent::CommandFailed { command, error }).is_err()
                {
                    self.core.stats.events_dropped += 1;
                }
            }
            Command::Stats { reply } => {
                let stats = ClientStats {
                    audio_frames_dropped: self.audio_dropped.load(std::sync::atomic::Ordering::Relaxed),
                    ..self.core.stats
                };
                // The caller gave up waiting; nothing to tell it.
                let _ = reply.send(stats);
            }
            Command::Leave => self.core.leave(),
        }
    }

    fn receive(&mut self, role: Role, first: std::io::Result<(usize, SocketAddr)>, buffer: &mut [u8]) {
        let socket = match role {
            Role::Publisher => &self.publisher_socket,
            Role::Subscriber => &self.subscriber_socket,
        };
        let Ok(destination) = socket.local_addr() else { return };
        let mut next = Some(first);
        let mut handled = 0;
        while let Some(received) = next.take() {
            match received {
                Ok((length, source)) => {
                    self.core.handle_receive(Instant::now(), role, source, destination, &buffer[..length]);
                }
                // ICMP errors surface as receive errors on Linux; keep serving.
                Err(error) => tracing::trace!(%error, "udp receive error"),
            }
            handled += 1;
            if handled < RECEIVE_BATCH {
                match socket.try_recv_from(buffer) {
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                    other => next = Some(other),
                }
            }
        }
    }

    /// Carries out everything the core asked for; `Some` when the client is done.
    async fn carry_out(&mut self) -> Option<Option<ClientError>> {
        while let Some(output) = self.core.poll_output() {
            match output {
                ClientOutput::Transmit(role, transmit) => {
                    let socket = match role {
                        Role::Publisher => &self.publisher_socket,
                        Role::Subscriber => &self.subscriber_socket,
                    };
                    // Never wait: a full socket buffer loses the datagram, which WebRTC tolerates.
                    if socket.try_send_to(&transmit.contents, transmit.destination).is_ok() {
                        self.core.stats.datagrams_sent += 1;
                    }
                }
                ClientOutput::Signal(message) => {
                    let bytes = proto::SignalRequest { message: Some(message) }.encode_to_vec();
                    if let Err(error) = self.sink.send(WsMessage::Binary(bytes.into())).await {
                        self.core.signal_closed(Some(error.to_string()));
                    }
                }
                ClientOutput::Event(event) => {
                    let audio = matches!(event, ClientEvent::AudioFrame(_));
                    if self.events.try_send(event).is_err() {
                        if audio {
                            // Counted where the handle reads it without asking this task.
                            self.audio_dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        } else {
                            self.core.stats.events_dropped += 1;
                        }
                    }
                }
                ClientOutput::Ready => {
                    if let Some(ready) = self.ready.take() {
                        // The caller gave up waiting; nothing to tell it.
                        let _ = ready.send(Ok(()));
                    }
                }
                ClientOutput::Published(result) => {
                    if let Some(reply) = self.publish_reply.take() {
                        // The caller gave up waiting; nothing to tell it.
                        let _ = reply.send(result);
                    }
                }
                ClientOutput::Close(error) => return Some(error),
            }
        }
        None
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signal_url_appends_rtc_to_the_path_and_carries_the_v0_parameters() {
        let (url, authority) = signal_url("ws://127.0.0.1:8080/room", "a.b-c_d", true).expect("valid url");
        assert_eq!(authority, "127.0.0.1:8080");
        assert!(
            url.starts_with("ws://127.0.0.1:8080/room/rtc?access_token=a.b-c_d&auto_subscribe=1&protocol=16"),
            "{url}"
        );
        assert!(url.contains("client_protocol=0") && url.contains("sdk=rust"), "{url}");
        let (url, _) = signal_url("ws://host/", "t", false).expect("valid url");
        assert!(url.starts_with("ws://host/rtc?access_token=t&auto_subscribe=0"), "{url}");
        let (url, _) = signal_url("ws://host/a/b/", "t", true).expect("valid url");
        assert!(url.starts_with("ws://host/a/b/rtc?"), "{url}");
    }

    #[test]
    fn only_websocket_urls_with_a_host_are_accepted() {
        let (url, authority) = signal_url("wss://x.livekit.cloud", "t", true).expect("valid url");
        assert!(url.starts_with("wss://x.livekit.cloud/rtc?access_token=t"), "{url}");
        assert_eq!(authority, "x.livekit.cloud");
        assert!(matches!(signal_url("http://host/room", "t", true), Err(ClientError::Url(_))));
        assert!(matches!(signal_url("ws:///room", "t", true), Err(ClientError::Url(_))));
    }

    #[test]
    fn tokens_are_percent_encoded() {
        assert_eq!(percent_encode("a b+c/="), "a%20b%2Bc%2F%3D");
    }
}
