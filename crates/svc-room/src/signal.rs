//! LiveKit v0 signalling over HTTP: `/rtc` (WebSocket, binary protobuf), `/rtc/validate`, and
//! the v1 paths answered 404 so that both official SDKs fall back to v0.
//!
//! Traps this module exists to avoid (research/livekit.md §6.3): the first frame must be the
//! join response; `/rtc/validate` must never answer a bare 404 (livekit-client retries forever);
//! validate responses need `Access-Control-Allow-Origin: *`; a server-side close is always
//! preceded by a leave with a reason, or clients try to resume.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use livekit_protocol as proto;
use prost::Message as _;
use tokio::sync::mpsc;

use crate::core::{JoinRequest, Key, Permissions, RoomOptions};
use crate::model::{LeaveReason, ParticipantKind};
use crate::server::{RoomError, RoomServer};
use crate::token::RoomToken;
use crate::wall_clock::unix_ms;

/// Largest signal message accepted. SDP offers are ~20 KB; anything near this is abuse.
const MAX_SIGNAL_MESSAGE: usize = 256 * 1024;
/// Malformed frames tolerated before the connection is closed with a leave.
const MAX_MALFORMED_FRAMES: u32 = 8;

/// The signalling routes, relative to the room URL's path (mount under e.g. `/room`).
pub(crate) fn router(server: RoomServer) -> Router {
    Router::new()
        .route("/rtc", get(connect_v0))
        .route("/rtc/validate", get(validate_v0))
        .route("/rtc/v1", get(v1_not_supported))
        .route("/rtc/v1/validate", get(v1_not_supported))
        .with_state(server)
}

/// Why a connect or validate request is refused, as status + plain-text body.
struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        text(self.0, self.1)
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut response = (status, body.into()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    // Browsers fetch validate cross-origin; without this the SDK reports "server unreachable".
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    response
}

/// Single-peer-connection signalling (v1) is not offered: a 404 whose body does not mention a
/// missing room makes both SDKs retry on v0.
async fn v1_not_supported() -> Response {
    text(StatusCode::NOT_FOUND, "v1 signalling is not supported by this server; use /rtc")
}

/// What a verified connect request asks for.
struct Admission {
    room: String,
    request: JoinRequest,
    reconnect: bool,
    /// The token's `roomConfig`, for a room this join creates.
    room_config: Option<RoomOptions>,
}

fn admit(server: &RoomServer, headers: &HeaderMap, query: &HashMap<String, String>) -> Result<Admission, Refusal> {
    let token = match headers.get(header::AUTHORIZATION) {
        Some(value) => {
            let value = value.to_str().unwrap_or_default();
            match value.strip_prefix("Bearer ") {
                Some(token) => token.trim().to_owned(),
                None => return Err(Refusal(StatusCode::UNAUTHORIZED, "invalid authorization header".into())),
            }
        }
        None => match query.get("access_token") {
            Some(token) => token.clone(),
            None => {
                return Err(Refusal(
                    StatusCode::UNAUTHORIZED,
                    "no access token: pass access_token or a Bearer header".into(),
                ));
            }
        },
    };
    let claims: RoomToken = server
        .credentials()
        .verify(&token)
        .map_err(|error| Refusal(StatusCode::UNAUTHORIZED, format!("invalid token: {error}")))?;
    if !claims.video.room_join || claims.video.room.is_empty() {
        return Err(Refusal(
            StatusCode::FORBIDDEN,
            "permissions denied: the token does not grant roomJoin for a room".into(),
        ));
    }
    if claims.video.room.len() > 256 || claims.sub.len() > 256 {
        return Err(Refusal(StatusCode::BAD_REQUEST, "room name and identity are limited to 256 bytes".into()));
    }
    let flag = |name: &str, default: bool| match query.get(name).map(String::as_str) {
        Some("1" | "true") => true,
        Some("0" | "false") => false,
        _ => default,
    };
    let can_publish = claims.video.can_publish.unwrap_or(true);
    let request = JoinRequest {
        identity: claims.sub.clone(),
        name: claims.name.clone().unwrap_or_default(),
        metadata: claims.metadata.clone().unwrap_or_default(),
        attributes: claims.attributes.clone(),
        kind: ParticipantKind::from_claim(claims.kind.as_deref()),
        permissions: Permissions {
            can_publish,
            can_subscribe: claims.video.can_subscribe.unwrap_or(true),
            can_publish_data: claims.video.can_publish_data.unwrap_or(can_publish),
            can_update_metadata: claims.video.can_update_own_metadata.unwrap_or(false),
            hidden: claims.video.hidden,
        },
        auto_subscribe: flag("auto_subscribe", true),
        client_protocol: query.get("client_protocol").and_then(|v| v.parse().ok()).unwrap_or(0),
    };
    let room_config = claims.room_config.map(|config| {
        RoomOptions::livekit(
            config.empty_timeout,
            config.departure_timeout,
            config.max_participants,
            config.metadata,
            config.agents,
        )
    });
    Ok(Admission { room: claims.video.room, request, reconnect: flag("reconnect", false), room_config })
}

async fn validate_v0(
    State(server): State<RoomServer>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    match admit(&server, &headers, &query) {
        // A full room is the reason a connect just failed: say so (the SDKs show this text).
        Ok(admission) if !admission.reconnect && server.is_full_for(&admission.room, &admission.request).await => {
            full_room()
        }
        Ok(_) => text(StatusCode::OK, "success"),
        Err(refusal) => refusal.into_response(),
    }
}

/// A join the room's `max_participants` leaves no place for. LiveKit refuses it before the
/// WebSocket upgrade; a 4xx lets the SDKs report the text instead of an unknown error.
fn full_room() -> Response {
    text(StatusCode::FORBIDDEN, "room has exceeded its max participants")
}

async fn connect_v0(
    State(server): State<RoomServer>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let admission = match admit(&server, &headers, &query) {
        Ok(admission) => admission,
        Err(refusal) => return refusal.into_response(),
    };
    let Ok(upgrade) = upgrade else {
        return text(StatusCode::BAD_REQUEST, "expected a WebSocket upgrade");
    };
    let upgrade = upgrade.max_message_size(MAX_SIGNAL_MESSAGE).max_frame_size(MAX_SIGNAL_MESSAGE);
    if admission.reconnect {
        // Resume is not supported: a leave asking for a full reconnect is what LiveKit sends for
        // an unknown participant, and both SDKs then rejoin from scratch.
        return upgrade.on_upgrade(|socket| {
            close_with(socket, leave(LeaveReason::StateMismatch, true), 1000, "resume not supported")
        });
    }
    // As LiveKit does, the room is joined before the upgrade: a refusal is an HTTP answer, and
    // the join response waits in the signal queue for the socket.
    let (to_client, from_room) = mpsc::channel(crate::actor::SIGNAL_QUEUE);
    let options = admission.room_config.as_ref();
    let (room, key) = match server.join_remote(&admission.room, admission.request, to_client, options).await {
        Ok(joined) => joined,
        Err(RoomError::Full) => return full_room(),
        Err(error) => {
            tracing::info!(%error, "join failed");
            return text(StatusCode::SERVICE_UNAVAILABLE, format!("join failed: {error}"));
        }
    };
    let abandoned = room.clone();
    upgrade
        .on_failed_upgrade(move |error| {
            tracing::debug!(%error, "the WebSocket upgrade failed after the join");
            tokio::spawn(async move { abandoned.signal_closed(key, LeaveReason::SignalClosed).await });
        })
        .on_upgrade(move |socket| serve_connection(server, socket, (room, key), from_room))
}

fn encode(message: proto::signal_response::Message) -> Message {
    Message::Binary(proto::SignalResponse { message: Some(message) }.encode_to_vec().into())
}

fn leave(reason: LeaveReason, reconnect: bool) -> proto::signal_response::Message {
    proto::signal_response::Message::Leave(crate::core::leave_request(reason, reconnect))
}

async fn close_with(mut socket: WebSocket, leave_message: proto::signal_response::Message, code: u16, reason: &str) {
    // Best effort: the peer may already be gone.
    let _ = socket.send(encode(leave_message)).await;
    // Best effort: the peer may already be gone.
    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
}

async fn serve_connection(
    server: RoomServer,
    socket: WebSocket,
    (room, key): (RoomLink, Key),
    mut from_room: mpsc::Receiver<proto::signal_response::Message>,
) {
    let (mut sink, mut stream) = socket.split();
    let (replies, mut replies_out) = mpsc::channel::<proto::signal_response::Message>(16);

    // Writer: room messages and ping replies, in order; ends when the room lets go.
    let writer = tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                message = from_room.recv() => match message {
                    Some(message) => message,
                    None => break,
                },
                Some(reply) = replies_out.recv() => reply,
            };
            if sink.send(encode(message)).await.is_err() {
                return;
            }
        }
        // Best effort: the peer may already be gone.
        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1000, reason: "".into() }))).await;
    });

    let ping_timeout = Duration::from_secs(u64::try_from(server.ping_timeout_seconds()).unwrap_or(15));
    let mut malformed = 0u32;
    let reason = loop {
        let frame = match tokio::time::timeout(ping_timeout, stream.next()).await {
            Err(_) => break LeaveReason::SignalClosed,
            Ok(None | Some(Err(_))) => break LeaveReason::SignalClosed,
            Ok(Some(Ok(frame))) => frame,
        };
        let bytes = match frame {
            Message::Binary(bytes) => bytes,
            Message::Close(_) => break LeaveReason::ClientInitiated,
            Message::Ping(_) | Message::Pong(_) => continue,
            Message::Text(_) => {
                // Official clients speak binary protobuf only; JSON signalling is not offered.
                let _ = replies.send(leave(LeaveReason::StateMismatch, false)).await;
                break LeaveReason::StateMismatch;
            }
        };
        let message = match proto::SignalRequest::decode(bytes.as_ref()).map(|request| request.message) {
            Ok(Some(message)) => message,
            Ok(None) | Err(_) => {
                malformed += 1;
                if malformed >= MAX_MALFORMED_FRAMES {
                    // The writer is gone: the connection is closing anyway.
                    let _ = replies.send(leave(LeaveReason::StateMismatch, false)).await;
                    break LeaveReason::StateMismatch;
                }
                continue;
            }
        };
        use proto::signal_request::Message as M;
        match message {
            // A pong is not worth blocking the reader for; one dropped on a full reply queue is
            // logged (the client's next ping gets one).
            M::Ping(_) => {
                if replies.try_send(proto::signal_response::Message::Pong(unix_ms())).is_err() {
                    tracing::debug!("pong dropped: the signal reply queue is full or closed");
                }
            }
            M::PingReq(ping) => {
                let pong = proto::signal_response::Message::PongResp(proto::Pong {
                    last_ping_timestamp: ping.timestamp,
                    timestamp: unix_ms(),
                });
                if replies.try_send(pong).is_err() {
                    tracing::debug!("pong dropped: the signal reply queue is full or closed");
                }
            }
            M::Leave(_) => break LeaveReason::ClientInitiated,
            other => {
                if !room.signal(key, other).await {
                    break LeaveReason::RoomDeleted;
                }
            }
        }
    };
    room.signal_closed(key, reason).await;
    drop(replies);
    // The room drops its sender once the participant is gone; the writer then closes.
    let abort = writer.abort_handle();
    if tokio::time::timeout(Duration::from_secs(2), writer).await.is_err() {
        abort.abort();
    }
}

/// A room's command channel as the signal connection sees it.
#[derive(Clone)]
pub(crate) struct RoomLink {
    pub(crate) sender: mpsc::Sender<crate::actor::RoomCommand>,
}

impl RoomLink {
    async fn signal(&self, key: Key, message: proto::signal_request::Message) -> bool {
        self.sender.send(crate::actor::RoomCommand::Signal { key, message }).await.is_ok()
    }

    async fn signal_closed(&self, key: Key, reason: LeaveReason) {
        // The room is gone: nobody to tell.
        let _ = self.sender.send(crate::actor::RoomCommand::SignalClosed { key, reason }).await;
    }
}
