//! The worker's IO shell: one task owns the [`WorkerCore`] and the WebSocket to `<url>/agent`,
//! connects (again, with growing pauses, for as long as the worker runs), feeds the core what
//! arrives, the owner's commands and time, and carries out what it says.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use livekit_protocol as proto;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use super::WorkerOptions;
use super::core::{CoreOutput, OfferAnswer, WorkerCore, WorkerEvent, WorkerStatus};
use crate::token::RoomGrant;
use crate::wall_clock::unix_ms;

type WebSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Pause before the second connection attempt; it doubles with each failure up to
/// [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);
/// How long a connection attempt (TCP, TLS, upgrade) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Lifetime of the token a connection is made with (it is checked at the upgrade only).
const CONNECT_TOKEN_SECONDS: i64 = 600;
/// Largest server message read.
const MAX_SERVER_MESSAGE: usize = 1 << 20;

pub(super) enum Command {
    Answer { job_id: String, answer: OfferAnswer },
    Status(WorkerStatus),
    JobEnded { job_id: String, error: Option<String> },
}

pub(super) struct Shell {
    pub(super) options: WorkerOptions,
    pub(super) core: WorkerCore,
    pub(super) commands: mpsc::Receiver<Command>,
    pub(super) events: mpsc::Sender<WorkerEvent>,
    pub(super) shutdown: CancellationToken,
}

/// How a connection ended.
enum Ended {
    /// The worker stops (shutdown, or its owner let go).
    Stop,
    /// It broke: connect again.
    Broken(String),
}

impl Shell {
    pub(super) async fn run(mut self) {
        let mut pause = FIRST_PAUSE;
        loop {
            let attempt = tokio::select! {
                () = self.shutdown.cancelled() => return,
                attempt = connect(&self.options) => attempt,
            };
            match attempt {
                Ok(socket) => {
                    pause = FIRST_PAUSE;
                    match self.serve(socket).await {
                        Ended::Stop => return,
                        Ended::Broken(reason) => {
                            tracing::warn!(%reason, url = %self.options.url, "agent worker connection lost; reconnecting");
                            self.core.disconnected(&reason);
                            if !self.carry_out_events().await {
                                return;
                            }
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, url = %self.options.url, "agent worker cannot connect; retrying"),
            }
            // Commands keep arriving while disconnected: the status is kept for the next
            // registration, the rest is moot.
            let until = tokio::time::Instant::now() + pause;
            loop {
                tokio::select! {
                    () = self.shutdown.cancelled() => return,
                    () = tokio::time::sleep_until(until) => break,
                    command = self.commands.recv() => match command {
                        Some(command) => self.apply(command),
                        None => return,
                    },
                }
            }
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }

    /// Runs one connection until it ends.
    async fn serve(&mut self, socket: WebSocket) -> Ended {
        let (mut sink, mut stream) = socket.split();
        self.core.connected(Instant::now());
        loop {
            while let Some(output) = self.core.poll_output() {
                match output {
                    CoreOutput::Send(message) => {
                        let bytes = proto::WorkerMessage { message: Some(message) }.encode_to_vec();
                        if let Err(error) = sink.send(WsMessage::Binary(bytes.into())).await {
                            return Ended::Broken(format!("sending: {error}"));
                        }
                    }
                    CoreOutput::Event(event) => {
                        if self.events.send(event).await.is_err() {
                            return Ended::Stop;
                        }
                    }
                    CoreOutput::Broken(reason) => return Ended::Broken(reason),
                }
            }
            let due = self.core.poll_timeout().map(tokio::time::Instant::from_std);
            tokio::select! {
                () = self.shutdown.cancelled() => {
                    // Best effort: the server learns of the end from the closed socket anyway.
                    let _ = sink.send(WsMessage::Close(None)).await;
                    return Ended::Stop;
                }
                frame = stream.next() => match frame {
                    Some(Ok(WsMessage::Binary(bytes))) => match proto::ServerMessage::decode(bytes.as_ref()) {
                        Ok(proto::ServerMessage { message: Some(message) }) => {
                            self.core.handle_message(Instant::now(), message);
                        }
                        Ok(_) | Err(_) => tracing::debug!("undecodable agent server message ignored"),
                    },
                    Some(Ok(WsMessage::Close(frame))) => {
                        let reason = frame.map(|frame| frame.reason.to_string()).unwrap_or_default();
                        return Ended::Broken(format!("the server closed the connection ({reason})"));
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return Ended::Broken(error.to_string()),
                    None => return Ended::Broken("the connection ended".to_owned()),
                },
                command = self.commands.recv() => match command {
                    Some(command) => self.apply(command),
                    None => return Ended::Stop,
                },
                () = sleep_until(due) => self.core.handle_timeout(Instant::now(), unix_ms()),
            }
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Answer { job_id, answer } => self.core.answer(&job_id, answer),
            Command::Status(status) => self.core.set_status(Instant::now(), status),
            Command::JobEnded { job_id, error } => self.core.job_ended(&job_id, error),
        }
    }

    /// Hands the events the core produced while not connected; `false` when the owner is gone.
    async fn carry_out_events(&mut self) -> bool {
        while let Some(output) = self.core.poll_output() {
            if let CoreOutput::Event(event) = output
                && self.events.send(event).await.is_err()
            {
                return false;
            }
        }
        true
    }
}

async fn sleep_until(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// `<url>/agent`, `http(s)` spelled `ws(s)`, the URL's path kept.
pub(super) fn agent_url(url: &str) -> Option<String> {
    let (secure, rest) = crate::server_api::split_livekit_url(url)?;
    let scheme = if secure { "wss" } else { "ws" };
    Some(format!("{scheme}://{rest}/agent"))
}

async fn connect(options: &WorkerOptions) -> Result<WebSocket, String> {
    let url = agent_url(&options.url).ok_or_else(|| format!("not a LiveKit URL: {}", options.url))?;
    let grant = RoomGrant { agent: true, ..RoomGrant::default() };
    let token = options
        .credentials
        .grant_token(grant, unix_ms() / 1000 + CONNECT_TOKEN_SECONDS)
        .map_err(|error| format!("signing the worker's token: {error}"))?;
    let mut request = url.as_str().into_client_request().map_err(|error| error.to_string())?;
    let bearer = format!("Bearer {token}").parse().map_err(|_| "the token is not a header value".to_owned())?;
    request.headers_mut().insert("authorization", bearer);
    let tls = options.tls.clone().unwrap_or_else(svc_http::tls_config);
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_SERVER_MESSAGE))
        .max_frame_size(Some(MAX_SERVER_MESSAGE));
    let connecting = tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(config),
        true,
        Some(tokio_tungstenite::Connector::Rustls(tls)),
    );
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no connection within {CONNECT_TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_agent_url_is_the_livekit_url_with_its_path_and_agent() {
        assert_eq!(super::agent_url("https://x.livekit.cloud").as_deref(), Some("wss://x.livekit.cloud/agent"));
        assert_eq!(
            super::agent_url("ws://127.0.0.1:7880/room/?a=b").as_deref(),
            Some("ws://127.0.0.1:7880/room/agent")
        );
        assert_eq!(super::agent_url("ftp://x.livekit.cloud"), None);
        assert_eq!(super::agent_url("wss:///room"), None);
    }
}
