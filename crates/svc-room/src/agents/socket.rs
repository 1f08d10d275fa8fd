//! The agent worker protocol's edge: `GET <room URL>/agent`, a WebSocket of binary protobuf
//! (`WorkerMessage` in, `ServerMessage` out), as LiveKit Agents workers connect to it. The bearer
//! token must carry the `agent` grant; the first message must be a registration, within
//! [`REGISTER_TIMEOUT`]; pings are answered here, everything else goes to the dispatcher.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use livekit_protocol as proto;
use prost::Message as _;
use proto::server_message::Message as ServerMessage;
use proto::worker_message::Message as WorkerMessage;
use tokio::sync::mpsc;

use super::service::WORKER_QUEUE;
use crate::server::RoomServer;
use crate::wall_clock::unix_ms;

/// How long a new connection has to register (LiveKit's `RegisterTimeout`).
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest worker message accepted.
const MAX_WORKER_MESSAGE: usize = 1024 * 1024;
/// A worker silent this long (no message, no WebSocket ping) is gone; LiveKit Agents sends a
/// status update every few seconds and a WebSocket heartbeat.
const SILENT_TIMEOUT: Duration = Duration::from_secs(60);

/// The `/agent` route, relative to the room URL's path.
pub(crate) fn router(server: RoomServer) -> Router {
    Router::new().route("/agent", get(connect)).with_state(server)
}

async fn connect(
    State(server): State<RoomServer>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let value = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).unwrap_or("");
    let Some(token) = value.strip_prefix("Bearer ").map(str::trim).filter(|token| !token.is_empty()) else {
        return (StatusCode::UNAUTHORIZED, "authorization required").into_response();
    };
    match server.credentials().verify_server_api(token) {
        Ok(claims) if claims.video.agent => {}
        Ok(_) => return (StatusCode::FORBIDDEN, "the token lacks the agent grant").into_response(),
        Err(error) => return (StatusCode::UNAUTHORIZED, format!("invalid token: {error}")).into_response(),
    }
    let Ok(upgrade) = upgrade else {
        return (StatusCode::BAD_REQUEST, "expected a WebSocket upgrade").into_response();
    };
    upgrade.max_message_size(MAX_WORKER_MESSAGE).on_upgrade(move |socket| serve_worker(server, socket))
}

async fn serve_worker(server: RoomServer, mut socket: WebSocket) {
    let dispatch = server.agent_dispatch().clone();
    let request = match tokio::time::timeout(REGISTER_TIMEOUT, next_message(&mut socket)).await {
        Ok(Some(WorkerMessage::Register(request))) => request,
        Ok(_) | Err(_) => {
            close(socket, 1008, "the first message must be a registration").await;
            return;
        }
    };
    let (to_worker, mut from_dispatcher) = mpsc::channel(WORKER_QUEUE);
    let worker = match dispatch.register(request, to_worker).await {
        Some(Ok(worker)) => worker,
        Some(Err(error)) => {
            close(socket, 1008, &error.to_string()).await;
            return;
        }
        None => {
            close(socket, 1001, "the server is shutting down").await;
            return;
        }
    };
    let registered = ServerMessage::Register(proto::RegisterWorkerResponse {
        worker_id: worker.clone(),
        server_info: Some(server.server_info()),
        endpoint_settings: None,
    });
    if socket.send(encode(registered)).await.is_err() {
        dispatch.gone(&worker).await;
        return;
    }
    let (mut sink, mut stream) = socket.split();
    let (pongs, mut pongs_out) = mpsc::channel::<ServerMessage>(16);
    let mut writer = tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                message = from_dispatcher.recv() => match message {
                    Some(message) => message,
                    // The dispatcher let go of this worker (it fell behind, or the server stops).
                    None => break,
                },
                Some(pong) = pongs_out.recv() => pong,
            };
            if sink.send(encode(message)).await.is_err() {
                return;
            }
        }
        // Best effort: the peer may already be gone.
        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1000, reason: "".into() }))).await;
    });
    loop {
        let frame = tokio::select! {
            frame = tokio::time::timeout(SILENT_TIMEOUT, stream.next()) => frame,
            // The writer ended: the dispatcher dropped this worker or the socket broke.
            _ = &mut writer => break,
        };
        let bytes = match frame {
            Ok(Some(Ok(Message::Binary(bytes)))) => bytes,
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(Some(Ok(Message::Text(_)))) => continue,
            Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) | Err(_) => break,
        };
        match proto::WorkerMessage::decode(bytes.as_ref()).map(|message| message.message) {
            Ok(Some(WorkerMessage::Ping(ping))) => {
                let pong = proto::WorkerPong { last_timestamp: ping.timestamp, timestamp: unix_ms() };
                if pongs.try_send(ServerMessage::Pong(pong)).is_err() {
                    tracing::debug!(worker, "pong dropped: the worker's queue is full");
                }
            }
            Ok(Some(message)) => dispatch.message(&worker, message).await,
            Ok(None) | Err(_) => tracing::debug!(worker, "undecodable worker message ignored"),
        }
    }
    dispatch.gone(&worker).await;
    writer.abort();
}

async fn next_message(socket: &mut WebSocket) -> Option<WorkerMessage> {
    loop {
        match socket.next().await? {
            Ok(Message::Binary(bytes)) => return proto::WorkerMessage::decode(bytes.as_ref()).ok()?.message,
            Ok(Message::Ping(_) | Message::Pong(_)) => {}
            Ok(_) | Err(_) => return None,
        }
    }
}

fn encode(message: ServerMessage) -> Message {
    Message::Binary(proto::ServerMessage { message: Some(message) }.encode_to_vec().into())
}

async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    // Best effort: the peer may already be gone.
    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
}
