//! LiveKit's server API over Twirp: `POST …/twirp/livekit.<Service>/<Method>` (relative to the
//! room URL's path, as the server SDKs build it), a protobuf or JSON body, a bearer token signed
//! with the room's key carrying `video` grants, answers in the body's encoding, and errors as
//! Twirp's JSON `{"code", "msg"}` with its HTTP statuses (research/livekit.md §5.3).
//!
//! `RoomService`: `CreateRoom`, `ListRooms`, `DeleteRoom`, `ListParticipants`, `GetParticipant`,
//! `PerformRpc` (the room's RPC bookkeeping with the server as caller, `crate::rpc::perform`),
//! `RemoveParticipant`, `UpdateParticipant`, `UpdateSubscriptions`, `MutePublishedTrack`,
//! `UpdateRoomMetadata`, `SendData` (the room's side of the last six: `core::admin`). `AgentDispatchService`:
//! `CreateDispatch`, `DeleteDispatch`, `ListDispatch` (`crate::agents`). `SIP`:
//! `CreateSIPParticipant` over the installed dialer (`crate::sip`), its one outbound trunk
//! (`ListSIPOutboundTrunk`, `GetSIPOutboundTrunk`) and empty inbound lists. Every other LiveKit
//! service answers `unimplemented`.

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use livekit_protocol as proto;
use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::agents::dispatcher::MAX_DISPATCHES_PER_ROOM;
use crate::core::{AdminAnswer, AdminCommand, AdminError, RoomOptions};
use crate::model::LeaveReason;
use crate::server::RoomServer;
use crate::sip::{SipDial, SipRefusal, SipTrunk, trunk_info};
use crate::token::{RoomGrant, RoomToken};

/// Largest request body accepted: the largest legitimate one (`SendData`) carries at most
/// 64 KiB of data (LiveKit's own limit is near that).
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest `SendData` payload: what the room forwards from a client.
const MAX_DATA_BYTES: usize = 64 * 1024;
/// Longest a `PerformRpc` call may wait for its answer.
const MAX_RPC_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest room name accepted (LiveKit's limit).
const MAX_ROOM_NAME: usize = 256;

/// The Twirp routes, relative to the room URL's path.
pub(crate) fn router(server: RoomServer) -> Router {
    Router::new()
        .route("/twirp/{service}/{method}", post(call))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(server)
}

/// A Twirp error: its code decides the HTTP status.
#[derive(Debug)]
struct TwirpError {
    code: &'static str,
    msg: String,
    /// Twirp's `meta`: string pairs a caller can branch on (a failed call's SIP status).
    meta: Vec<(&'static str, String)>,
}

impl TwirpError {
    fn new(code: &'static str, msg: impl Into<String>) -> TwirpError {
        TwirpError { code, msg: msg.into(), meta: Vec::new() }
    }

    fn status(&self) -> StatusCode {
        match self.code {
            "invalid_argument" | "malformed" => StatusCode::BAD_REQUEST,
            "unauthenticated" => StatusCode::UNAUTHORIZED,
            "permission_denied" => StatusCode::FORBIDDEN,
            "not_found" | "bad_route" => StatusCode::NOT_FOUND,
            "already_exists" | "aborted" => StatusCode::CONFLICT,
            "out_of_range" => StatusCode::BAD_REQUEST,
            "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
            "deadline_exceeded" => StatusCode::REQUEST_TIMEOUT,
            "failed_precondition" => StatusCode::PRECONDITION_FAILED,
            "unimplemented" => StatusCode::NOT_IMPLEMENTED,
            "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for TwirpError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = serde_json::json!({"code": self.code, "msg": self.msg});
        if !self.meta.is_empty() {
            let meta: serde_json::Map<String, serde_json::Value> =
                self.meta.into_iter().map(|(key, value)| (key.to_owned(), value.into())).collect();
            body["meta"] = meta.into();
        }
        let body = body.to_string();
        let mut response = (status, body).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}

/// How the request's body was encoded; the answer uses the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    fn of(headers: &HeaderMap) -> Result<Encoding, TwirpError> {
        let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
        let mime = content_type.split(';').next().unwrap_or("").trim();
        match mime {
            "application/protobuf" => Ok(Encoding::Protobuf),
            "application/json" => Ok(Encoding::Json),
            other => Err(TwirpError::new("bad_route", format!("unexpected Content-Type: {other:?}"))),
        }
    }

    fn decode<T: Message + Default + DeserializeOwned>(self, body: &[u8]) -> Result<T, TwirpError> {
        let decoded = match self {
            Encoding::Protobuf => T::decode(body).map_err(|error| error.to_string()),
            // An empty JSON body is an empty message, as Twirp's own servers take it.
            Encoding::Json if body.iter().all(u8::is_ascii_whitespace) => Ok(T::default()),
            Encoding::Json => serde_json::from_slice(body).map_err(|error| error.to_string()),
        };
        decoded.map_err(|error| TwirpError::new("malformed", format!("the request body could not be decoded: {error}")))
    }

    fn answer<T: Message + Serialize>(self, message: &T) -> Response {
        let (content_type, body) = match self {
            Encoding::Protobuf => ("application/protobuf", message.encode_to_vec()),
            Encoding::Json => ("application/json", serde_json::to_vec(message).unwrap_or_default()),
        };
        let mut response = (StatusCode::OK, body).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    }
}

async fn call(
    State(server): State<RoomServer>,
    Path((service, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let encoding = match Encoding::of(&headers) {
        Ok(encoding) => encoding,
        Err(error) => return error.into_response(),
    };
    // Over the limit (or cut off): a Twirp error like every other refusal, not axum's plain text.
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let msg = format!("the request body could not be read (at most {MAX_BODY_BYTES} bytes): {rejection}");
            return TwirpError::new("invalid_argument", msg).into_response();
        }
    };
    let result = match (service.as_str(), method.as_str()) {
        ("livekit.RoomService", method) => room_service(&server, method, &headers, encoding, &body).await,
        ("livekit.AgentDispatchService", method) => dispatch_service(&server, method, &headers, encoding, &body).await,
        ("livekit.SIP", method) => sip_service(&server, method, &headers, encoding, &body).await,
        (service, method) if LIVEKIT_SERVICES.contains(&service) => {
            Err(TwirpError::new("unimplemented", format!("{service}/{method} is not implemented by svc's room")))
        }
        (service, method) => Err(TwirpError::new("bad_route", format!("no such service: {service}/{method}"))),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// LiveKit's other services: a call to one is a known gap (`unimplemented`), not a bad route.
const LIVEKIT_SERVICES: &[&str] = &["livekit.Egress", "livekit.Ingress", "livekit.Connector"];

/// `AgentDispatchService`: `roomAdmin` for the room, as LiveKit checks it.
async fn dispatch_service(
    server: &RoomServer,
    method: &str,
    headers: &HeaderMap,
    encoding: Encoding,
    body: &[u8],
) -> Result<Response, TwirpError> {
    let grant = authorize(server, headers)?;
    let gone = || TwirpError::new("unavailable", "the server is shutting down");
    let dispatch = server.agent_dispatch();
    match method {
        "CreateDispatch" => {
            let request: proto::CreateAgentDispatchRequest = encoding.decode(body)?;
            require_admin(&grant, &request.room)?;
            check_room_name(&request.room)?;
            // As LiveKit does, a dispatch to a room that is not open opens it.
            let room = server
                .create_room(&request.room, RoomOptions::default())
                .await
                .map_err(|error| TwirpError::new("unavailable", error.to_string()))?
                .room;
            match dispatch.create(room, request).await.ok_or_else(gone)? {
                Some(created) => Ok(encoding.answer(&created)),
                None => Err(TwirpError::new(
                    "resource_exhausted",
                    format!("a room holds at most {MAX_DISPATCHES_PER_ROOM} dispatches"),
                )),
            }
        }
        "DeleteDispatch" => {
            let request: proto::DeleteAgentDispatchRequest = encoding.decode(body)?;
            require_admin(&grant, &request.room)?;
            match dispatch.delete(request.room, request.dispatch_id.clone()).await.ok_or_else(gone)? {
                Some(deleted) => Ok(encoding.answer(&deleted)),
                None => Err(TwirpError::new("not_found", format!("no dispatch {:?} in the room", request.dispatch_id))),
            }
        }
        "ListDispatch" => {
            let request: proto::ListAgentDispatchRequest = encoding.decode(body)?;
            require_admin(&grant, &request.room)?;
            let agent_dispatches = dispatch.list(request.room, request.dispatch_id).await.ok_or_else(gone)?;
            Ok(encoding.answer(&proto::ListAgentDispatchResponse { agent_dispatches }))
        }
        method => Err(TwirpError::new("bad_route", format!("no such method: AgentDispatchService/{method}"))),
    }
}

/// `SIP`: calls with the `sip.call` grant, trunks and rules with `sip.admin`, as LiveKit checks
/// them. svc has one outbound trunk (its configuration's) and no inbound side.
async fn sip_service(
    server: &RoomServer,
    method: &str,
    headers: &HeaderMap,
    encoding: Encoding,
    body: &[u8],
) -> Result<Response, TwirpError> {
    let grant = authorize_claims(server, headers)?.sip;
    // Without `--sip-trunk` there is no trunk to list and no call to place.
    let dialer = server.sip_dialer();
    let trunk = dialer.as_ref().map(|dialer| dialer.outbound_trunk());
    match method {
        "CreateSIPParticipant" => {
            require(grant.call, "sip.call")?;
            let request: proto::CreateSipParticipantRequest = encoding.decode(body)?;
            check_room_name(&request.room_name)?;
            let (Some(dialer), Some(trunk)) = (dialer, trunk) else {
                return Err(TwirpError::new(
                    "failed_precondition",
                    "phone dial-out is not configured on this server (svc serve --sip-trunk …)",
                ));
            };
            let call_id = crate::ids::Ids::from_entropy().prefixed("SCL_");
            let dial = SipDial::from_livekit(request, &trunk, call_id).map_err(TwirpError::from)?;
            let (room, identity, call_id) = (dial.room.clone(), dial.identity.clone(), dial.call_id.clone());
            dialer.dial(dial).await.map_err(|error| TwirpError::from(error.twirp()))?;
            // The participant's sid, as the room knows it (it may already have hung up).
            let participant_id = server
                .describe_room(&room)
                .await
                .and_then(|description| description.participants.into_iter().find(|p| p.identity == identity))
                .map(|participant| participant.sid)
                .unwrap_or_default();
            let info = proto::SipParticipantInfo {
                participant_id,
                participant_identity: identity,
                room_name: room,
                sip_call_id: call_id,
            };
            Ok(encoding.answer(&info))
        }
        "ListSIPOutboundTrunk" => {
            require(grant.admin, "sip.admin")?;
            let request: proto::ListSipOutboundTrunkRequest = encoding.decode(body)?;
            let listed = |trunk: &&SipTrunk| {
                (request.trunk_ids.is_empty() || request.trunk_ids.contains(&trunk.id))
                    && (request.numbers.is_empty()
                        || request.numbers.iter().any(|number| trunk.numbers.contains(number)))
            };
            let items = trunk.iter().filter(listed).map(trunk_info).collect();
            Ok(encoding.answer(&proto::ListSipOutboundTrunkResponse { items }))
        }
        "GetSIPOutboundTrunk" => {
            require(grant.admin, "sip.admin")?;
            let request: proto::GetSipOutboundTrunkRequest = encoding.decode(body)?;
            let Some(trunk) = trunk.filter(|trunk| trunk.id == request.sip_trunk_id) else {
                return Err(TwirpError::new("not_found", format!("no outbound trunk {:?}", request.sip_trunk_id)));
            };
            Ok(encoding.answer(&proto::GetSipOutboundTrunkResponse { trunk: Some(trunk_info(&trunk)) }))
        }
        // svc takes no inbound calls: nothing to list.
        "ListSIPInboundTrunk" => {
            require(grant.admin, "sip.admin")?;
            let _: proto::ListSipInboundTrunkRequest = encoding.decode(body)?;
            Ok(encoding.answer(&proto::ListSipInboundTrunkResponse { items: Vec::new() }))
        }
        "ListSIPDispatchRule" => {
            require(grant.admin, "sip.admin")?;
            let _: proto::ListSipDispatchRuleRequest = encoding.decode(body)?;
            Ok(encoding.answer(&proto::ListSipDispatchRuleResponse { items: Vec::new() }))
        }
        "CreateSIPOutboundTrunk"
        | "UpdateSIPOutboundTrunk"
        | "DeleteSIPTrunk"
        | "CreateSIPInboundTrunk"
        | "UpdateSIPInboundTrunk"
        | "CreateSIPDispatchRule"
        | "UpdateSIPDispatchRule"
        | "DeleteSIPDispatchRule"
        | "CreateSIPTrunk"
        | "ListSIPTrunk" => Err(TwirpError::new(
            "unimplemented",
            format!("livekit.SIP/{method}: svc's trunk comes from its configuration and it takes no inbound calls"),
        )),
        method => {
            Err(TwirpError::new("unimplemented", format!("livekit.SIP/{method} is not implemented by svc's room")))
        }
    }
}

impl From<SipRefusal> for TwirpError {
    fn from(refusal: SipRefusal) -> TwirpError {
        TwirpError { code: refusal.code, msg: refusal.msg, meta: refusal.meta }
    }
}

async fn room_service(
    server: &RoomServer,
    method: &str,
    headers: &HeaderMap,
    encoding: Encoding,
    body: &[u8],
) -> Result<Response, TwirpError> {
    let grant = authorize(server, headers)?;
    match method {
        "PerformRpc" => {
            let request: proto::PerformRpcRequest = encoding.decode(body)?;
            require_admin(&grant, &request.room)?;
            // LiveKit's clients default to 10 s; a call the server API waits on is capped.
            let timeout = match request.response_timeout_ms {
                0 => Duration::from_secs(10),
                ms => Duration::from_millis(u64::from(ms)).min(MAX_RPC_TIMEOUT),
            };
            let (destination, method, payload) = (&request.destination_identity, &request.method, &request.payload);
            let Some(result) = server.perform_rpc(&request.room, destination, method, payload, timeout).await else {
                return Err(TwirpError::new("not_found", format!("room {:?} is not open", request.room)));
            };
            match result {
                Ok(payload) => Ok(encoding.answer(&proto::PerformRpcResponse { payload })),
                Err(error) => Err(rpc_failure(&error)),
            }
        }
        "CreateRoom" => {
            require(grant.room_create, "roomCreate")?;
            let request: proto::CreateRoomRequest = encoding.decode(body)?;
            check_room_name(&request.name)?;
            let options = RoomOptions::livekit(
                request.empty_timeout,
                request.departure_timeout,
                request.max_participants,
                request.metadata,
                request.agents,
            );
            let description = server
                .create_room(&request.name, options)
                .await
                .map_err(|error| TwirpError::new("unavailable", error.to_string()))?;
            Ok(encoding.answer(&description.room))
        }
        "ListRooms" => {
            require(grant.room_list, "roomList")?;
            let request: proto::ListRoomsRequest = encoding.decode(body)?;
            let names = if request.names.is_empty() { server.room_names() } else { request.names };
            let mut rooms = Vec::with_capacity(names.len());
            for name in names {
                if let Some(description) = server.describe_room(&name).await {
                    rooms.push(description.room);
                }
            }
            Ok(encoding.answer(&proto::ListRoomsResponse { rooms }))
        }
        "DeleteRoom" => {
            require(grant.room_create, "roomCreate")?;
            let request: proto::DeleteRoomRequest = encoding.decode(body)?;
            if !server.close_room(&request.room, LeaveReason::RoomDeleted).await {
                return Err(TwirpError::new("not_found", format!("room {:?} does not exist", request.room)));
            }
            Ok(encoding.answer(&proto::DeleteRoomResponse {}))
        }
        "ListParticipants" => {
            let request: proto::ListParticipantsRequest = encoding.decode(body)?;
            require_admin(&grant, &request.room)?;
            let description = described(server, &request.room).await?;
            Ok(encoding.answer(&proto::ListParticipantsResponse { participants: description.participants }))
        }
        "GetParticipant" => {
            let request: proto::RoomParticipantIdentity = encoding.decode(body)?;
            require_admin(&grant, &request.room)?;
            let description = described(server, &request.room).await?;
            let participant = description
                .participants
                .into_iter()
                .find(|participant| participant.identity == request.identity)
                .ok_or_else(|| {
                    TwirpError::new("not_found", format!("participant {:?} is not in the room", request.identity))
                })?;
            Ok(encoding.answer(&participant))
        }
        method => {
            let Some((room, command)) = admin_command(method, encoding, body)? else {
                return Err(TwirpError::new(
                    "unimplemented",
                    format!("livekit.RoomService/{method} is not implemented by svc's room"),
                ));
            };
            require_admin(&grant, &room)?;
            let answer = server
                .admin(&room, command)
                .await
                .ok_or_else(|| TwirpError::new("not_found", format!("room {room:?} does not exist")))?
                .map_err(|error| match error {
                    AdminError::TooLarge => TwirpError::new("invalid_argument", error.to_string()),
                    AdminError::NoParticipant(_) | AdminError::NoTrack(_) => {
                        TwirpError::new("not_found", error.to_string())
                    }
                })?;
            Ok(match answer {
                AdminAnswer::Done if method == "RemoveParticipant" => {
                    encoding.answer(&proto::RemoveParticipantResponse {})
                }
                // `SendDataResponse`, `UpdateSubscriptionsResponse`: both empty.
                AdminAnswer::Done => encoding.answer(&proto::SendDataResponse {}),
                AdminAnswer::Participant(participant) => encoding.answer(&participant),
                AdminAnswer::Track(track) => encoding.answer(&proto::MuteRoomTrackResponse { track: Some(track) }),
                AdminAnswer::Room(room) => encoding.answer(&room),
            })
        }
    }
}

/// The room-changing `RoomService` calls: their room and the command, `None` for a method svc's
/// room does not have.
fn admin_command(method: &str, encoding: Encoding, body: &[u8]) -> Result<Option<(String, AdminCommand)>, TwirpError> {
    Ok(Some(match method {
        "RemoveParticipant" => {
            let request: proto::RoomParticipantIdentity = encoding.decode(body)?;
            (request.room, AdminCommand::RemoveParticipant { identity: request.identity })
        }
        "UpdateParticipant" => {
            let request: proto::UpdateParticipantRequest = encoding.decode(body)?;
            let command = AdminCommand::UpdateParticipant {
                identity: request.identity,
                name: request.name,
                metadata: request.metadata,
                attributes: request.attributes.into_iter().collect(),
                permission: request.permission,
            };
            (request.room, command)
        }
        "MutePublishedTrack" => {
            let request: proto::MuteRoomTrackRequest = encoding.decode(body)?;
            let command = AdminCommand::MutePublishedTrack {
                identity: request.identity,
                track_sid: request.track_sid,
                muted: request.muted,
            };
            (request.room, command)
        }
        "UpdateSubscriptions" => {
            let request: proto::UpdateSubscriptionsRequest = encoding.decode(body)?;
            let subscription = proto::UpdateSubscription {
                track_sids: request.track_sids,
                subscribe: request.subscribe,
                participant_tracks: request.participant_tracks,
            };
            (request.room, AdminCommand::UpdateSubscriptions { identity: request.identity, subscription })
        }
        "UpdateRoomMetadata" => {
            let request: proto::UpdateRoomMetadataRequest = encoding.decode(body)?;
            (request.room, AdminCommand::UpdateRoomMetadata { metadata: request.metadata })
        }
        "SendData" => {
            let request: proto::SendDataRequest = encoding.decode(body)?;
            if request.data.len() > MAX_DATA_BYTES {
                return Err(TwirpError::new("invalid_argument", format!("data is limited to {MAX_DATA_BYTES} bytes")));
            }
            let reliable = request.kind != proto::data_packet::Kind::Lossy as i32;
            #[allow(deprecated)]
            let packet = proto::DataPacket {
                kind: request.kind,
                destination_identities: request.destination_identities.clone(),
                value: Some(proto::data_packet::Value::User(proto::UserPacket {
                    payload: request.data,
                    destination_identities: request.destination_identities,
                    topic: request.topic,
                    nonce: request.nonce,
                    ..Default::default()
                })),
                ..Default::default()
            };
            (request.room, AdminCommand::SendData { packet, reliable })
        }
        _ => return Ok(None),
    }))
}

/// How a failed `PerformRpc` is answered: the RPC error's code and message in the Twirp message,
/// with the Twirp code its cause maps to.
fn rpc_failure(error: &crate::local::RpcError) -> TwirpError {
    use crate::local::rpc_codes;
    let code = match error.code {
        rpc_codes::RECIPIENT_NOT_FOUND | rpc_codes::RECIPIENT_DISCONNECTED => "not_found",
        rpc_codes::CONNECTION_TIMEOUT | rpc_codes::RESPONSE_TIMEOUT => "deadline_exceeded",
        rpc_codes::REQUEST_PAYLOAD_TOO_LARGE | rpc_codes::RESPONSE_PAYLOAD_TOO_LARGE => "invalid_argument",
        rpc_codes::UNSUPPORTED_METHOD => "failed_precondition",
        _ => "internal",
    };
    TwirpError::new(code, format!("rpc error {}: {}", error.code, error.message))
}

/// The verified `video` grant of the request's bearer token.
fn authorize(server: &RoomServer, headers: &HeaderMap) -> Result<RoomGrant, TwirpError> {
    authorize_claims(server, headers).map(|claims| claims.video)
}

/// The verified claims of the request's bearer token.
fn authorize_claims(server: &RoomServer, headers: &HeaderMap) -> Result<RoomToken, TwirpError> {
    let value = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).unwrap_or("");
    let Some(token) = value.strip_prefix("Bearer ").map(str::trim).filter(|token| !token.is_empty()) else {
        return Err(TwirpError::new("unauthenticated", "authorization required"));
    };
    server.credentials().verify_server_api(token).map_err(|error| TwirpError::new("unauthenticated", error.to_string()))
}

fn require(granted: bool, grant: &str) -> Result<(), TwirpError> {
    if granted {
        Ok(())
    } else {
        Err(TwirpError::new("permission_denied", format!("the token lacks the {grant} grant")))
    }
}

/// `roomAdmin` for this very room, as LiveKit checks it.
fn require_admin(grant: &RoomGrant, room: &str) -> Result<(), TwirpError> {
    require(grant.room_admin, "roomAdmin")?;
    if grant.room != room {
        return Err(TwirpError::new(
            "permission_denied",
            format!("the token administers {:?}, not {room:?}", grant.room),
        ));
    }
    Ok(())
}

fn check_room_name(name: &str) -> Result<(), TwirpError> {
    if name.is_empty() || name.len() > MAX_ROOM_NAME {
        return Err(TwirpError::new("invalid_argument", format!("a room name is 1 to {MAX_ROOM_NAME} bytes")));
    }
    Ok(())
}

async fn described(server: &RoomServer, room: &str) -> Result<crate::core::RoomDescription, TwirpError> {
    server
        .describe_room(room)
        .await
        .ok_or_else(|| TwirpError::new("not_found", format!("room {room:?} does not exist")))
}
