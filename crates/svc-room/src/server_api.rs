//! A client of LiveKit's server API (Twirp, research/livekit.md §5.3), for a LiveKit server svc
//! does not run (LiveKit Cloud, a self-hosted cluster, another svc): the rooms of its sessions
//! created and deleted there, participants removed, phones dialled into them. Each call is signed as LiveKit's server SDKs
//! sign it (a short-lived token with the one grant the method needs, from that server's API key
//! and secret), sends a protobuf body (as the Go and Rust SDKs do) to
//! `<url>/twirp/livekit.<Service>/<Method>` (the URL's path kept, as the Python SDK keeps it), and
//! reads Twirp's JSON errors. The embedded room answers the same routes (`crate::twirp`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use livekit_protocol as proto;
use prost::Message;

use crate::token::{RoomCredentials, RoomGrant, RoomTokenError, SipGrant};

/// Longest one call may take, connect to last byte.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read (a `ListRooms` of many rooms stays far below it).
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// Lifetime of the token signing one call.
const CALL_TOKEN_SECONDS: i64 = 600;

/// Why a server API call failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerApiError {
    /// The LiveKit URL is not `ws(s)://` or `http(s)://` with a host.
    #[error("invalid LiveKit URL {0:?}: expected ws://, wss://, http:// or https:// and a host")]
    Url(String),
    /// The server could not be reached (refused, TLS, DNS, a broken connection).
    #[error("the LiveKit server is unreachable: {0}")]
    Unreachable(String),
    /// The call took longer than its bound.
    #[error("the LiveKit server did not answer within {0:?}")]
    Timeout(Duration),
    /// The server refused the call: Twirp's code (`not_found`, `permission_denied`, …) and
    /// message.
    #[error("the LiveKit server refused the call ({status} {code}): {msg}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// Twirp's error code.
        code: String,
        /// Its message.
        msg: String,
    },
    /// The answer could not be read.
    #[error("the LiveKit server's answer is unreadable: {0}")]
    BadAnswer(String),
    /// The call's token could not be signed.
    #[error(transparent)]
    Token(#[from] RoomTokenError),
}

impl ServerApiError {
    /// Twirp's code when the server refused the call.
    pub fn code(&self) -> Option<&str> {
        match self {
            ServerApiError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// A LiveKit URL (`ws(s)://` or `http(s)://`, as clients and SDKs are given it) as whether it
/// is secure and its `host[:port][/path]` without query, fragment or trailing slash; `None`
/// for another scheme or no host.
pub(crate) fn split_livekit_url(url: &str) -> Option<(bool, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let secure = match scheme {
        "ws" | "http" => false,
        "wss" | "https" => true,
        _ => return None,
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default().trim_end_matches('/');
    if rest.split('/').next().is_none_or(str::is_empty) {
        return None;
    }
    Some((secure, rest))
}

/// LiveKit's server API of one server.
#[derive(Clone)]
pub struct ServerApi {
    /// `http(s)://host[:port][/path]`, without a trailing slash.
    base: String,
    credentials: RoomCredentials,
    tls: Arc<svc_http::TlsClientConfig>,
}

impl std::fmt::Debug for ServerApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerApi").field("base", &self.base).finish_non_exhaustive()
    }
}

impl ServerApi {
    /// The server API of the LiveKit server at `livekit_url` (the URL clients join, `ws://` or
    /// `wss://`; `http(s)://` also accepted), called with `credentials` (its API key and secret).
    ///
    /// # Errors
    ///
    /// [`ServerApiError::Url`] for another scheme or a URL without a host.
    pub fn new(livekit_url: &str, credentials: RoomCredentials) -> Result<ServerApi, ServerApiError> {
        let (secure, rest) =
            split_livekit_url(livekit_url).ok_or_else(|| ServerApiError::Url(livekit_url.to_owned()))?;
        let scheme = if secure { "https" } else { "http" };
        Ok(ServerApi { base: format!("{scheme}://{rest}"), credentials, tls: svc_http::tls_config() })
    }

    /// `RoomService.CreateRoom`: creates the room (or returns the open one of that name).
    ///
    /// # Errors
    ///
    /// [`ServerApiError`] as the call failed.
    pub async fn create_room(&self, request: proto::CreateRoomRequest) -> Result<proto::Room, ServerApiError> {
        let grant = RoomGrant { room_create: true, ..RoomGrant::default() };
        self.call("livekit.RoomService", "CreateRoom", grant, &request).await
    }

    /// `RoomService.DeleteRoom`: every participant leaves and the room closes.
    ///
    /// # Errors
    ///
    /// [`ServerApiError`] as the call failed (`not_found` for a room that is not open).
    pub async fn delete_room(&self, room: &str) -> Result<(), ServerApiError> {
        let grant = RoomGrant { room_create: true, ..RoomGrant::default() };
        let request = proto::DeleteRoomRequest { room: room.to_owned() };
        let _: proto::DeleteRoomResponse = self.call("livekit.RoomService", "DeleteRoom", grant, &request).await?;
        Ok(())
    }

    /// `RoomService.ListRooms`: the open rooms among `names` (all when empty).
    ///
    /// # Errors
    ///
    /// [`ServerApiError`] as the call failed.
    pub async fn list_rooms(&self, names: Vec<String>) -> Result<Vec<proto::Room>, ServerApiError> {
        let grant = RoomGrant { room_list: true, ..RoomGrant::default() };
        let request = proto::ListRoomsRequest { names };
        let answer: proto::ListRoomsResponse = self.call("livekit.RoomService", "ListRooms", grant, &request).await?;
        Ok(answer.rooms)
    }

    /// `RoomService.RemoveParticipant`: `identity` leaves `room`.
    ///
    /// # Errors
    ///
    /// [`ServerApiError`] as the call failed (`not_found` for an unknown room or identity).
    pub async fn remove_participant(&self, room: &str, identity: &str) -> Result<(), ServerApiError> {
        let grant = RoomGrant { room_admin: true, room: room.to_owned(), ..RoomGrant::default() };
        let request = proto::RoomParticipantIdentity {
            room: room.to_owned(),
            identity: identity.to_owned(),
            ..Default::default()
        };
        let _: proto::RemoveParticipantResponse =
            self.call("livekit.RoomService", "RemoveParticipant", grant, &request).await?;
        Ok(())
    }

    /// `RoomService.SendData`: `data` on the reliable channel under `topic`, to the
    /// participants `to` (every one when empty), sent by the server (no participant).
    ///
    /// # Errors
    ///
    /// [`ServerApiError`] as the call failed (`not_found` for a room that is not open).
    pub async fn send_data(
        &self,
        room: &str,
        data: Vec<u8>,
        topic: &str,
        to: Vec<String>,
    ) -> Result<(), ServerApiError> {
        let grant = RoomGrant { room_admin: true, room: room.to_owned(), ..RoomGrant::default() };
        let request = proto::SendDataRequest {
            room: room.to_owned(),
            data,
            kind: proto::data_packet::Kind::Reliable as i32,
            destination_identities: to,
            topic: Some(topic.to_owned()),
            ..Default::default()
        };
        let _: proto::SendDataResponse = self.call("livekit.RoomService", "SendData", grant, &request).await?;
        Ok(())
    }

    /// `SIP.CreateSIPParticipant`: dials `request.sip_call_to` through the server's outbound
    /// trunk `request.sip_trunk_id` and joins the phone to `request.room_name` as a participant
    /// of kind SIP, whose `sip.callStatus` attribute follows the call.
    ///
    /// # Errors
    ///
    /// [`ServerApiError`] as the call failed (with `wait_until_answered`, a failed call too).
    pub async fn create_sip_participant(
        &self,
        request: proto::CreateSipParticipantRequest,
    ) -> Result<proto::SipParticipantInfo, ServerApiError> {
        let sip = SipGrant { call: true, ..SipGrant::default() };
        self.call_with("livekit.SIP", "CreateSIPParticipant", RoomGrant::default(), sip, &request).await
    }

    async fn call<Request: Message, Answer: Message + Default>(
        &self,
        service: &str,
        method: &str,
        grant: RoomGrant,
        request: &Request,
    ) -> Result<Answer, ServerApiError> {
        self.call_with(service, method, grant, SipGrant::default(), request).await
    }

    async fn call_with<Request: Message, Answer: Message + Default>(
        &self,
        service: &str,
        method: &str,
        grant: RoomGrant,
        sip: SipGrant,
        request: &Request,
    ) -> Result<Answer, ServerApiError> {
        let expires_at = crate::wall_clock::unix_seconds() + CALL_TOKEN_SECONDS;
        let token = self.credentials.server_token(grant, sip, expires_at)?;
        let url = format!("{}/twirp/{service}/{method}", self.base);
        let headers = [("authorization".to_owned(), format!("Bearer {token}"))];
        let outgoing = svc_http::Outgoing {
            method: svc_http::Method::Post,
            url: &url,
            content_type: Some("application/protobuf"),
            accept: Some("application/protobuf"),
            headers: &headers,
            body: Bytes::from(request.encode_to_vec()),
        };
        let exchange = async {
            let (response, driver) =
                svc_http::send(outgoing, self.tls.clone()).await.map_err(ServerApiError::Unreachable)?;
            let status = response.status().as_u16();
            let body = svc_http::read_body(response.into_body(), MAX_ANSWER_BYTES).await;
            driver.abort();
            let body = body.map_err(|error| match error {
                svc_http::BodyError::Broken(error) => ServerApiError::Unreachable(error),
                svc_http::BodyError::TooLarge(limit) => ServerApiError::BadAnswer(format!("longer than {limit} bytes")),
            })?;
            if status == 200 {
                Answer::decode(body.as_slice()).map_err(|error| ServerApiError::BadAnswer(error.to_string()))
            } else {
                Err(refusal(status, &body))
            }
        };
        tokio::time::timeout(CALL_TIMEOUT, exchange).await.unwrap_or(Err(ServerApiError::Timeout(CALL_TIMEOUT)))
    }
}

/// A non-200 answer: Twirp's `{"code", "msg"}`, or the status alone when the body is not that
/// (a proxy's error page).
fn refusal(status: u16, body: &[u8]) -> ServerApiError {
    let error: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let text = |key: &str| error.get(key).and_then(serde_json::Value::as_str).map(str::to_owned);
    ServerApiError::Refused {
        status,
        code: text("code").unwrap_or_else(|| "unknown".to_owned()),
        msg: text("msg").unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_lives_beside_the_url_clients_join() {
        let credentials = RoomCredentials::new("k", "secret");
        let base = |url: &str| ServerApi::new(url, credentials.clone()).map(|api| api.base);
        assert_eq!(base("ws://127.0.0.1:8080/room").expect("valid"), "http://127.0.0.1:8080/room");
        assert_eq!(base("wss://x.livekit.cloud").expect("valid"), "https://x.livekit.cloud");
        assert_eq!(base("https://x.livekit.cloud/?a=1").expect("valid"), "https://x.livekit.cloud");
        for bad in ["ftp://x", "x.livekit.cloud", "ws://", "ws:///room"] {
            assert!(matches!(base(bad), Err(ServerApiError::Url(_))), "{bad}");
        }
    }

    #[test]
    fn a_refusal_names_twirps_code_or_the_status_alone() {
        let refused = refusal(404, br#"{"code":"not_found","msg":"room not found"}"#);
        assert_eq!(refused.code(), Some("not_found"));
        assert!(refused.to_string().contains("room not found"), "{refused}");
        let proxy = refusal(502, b"<html>bad gateway</html>");
        assert_eq!(proxy.code(), Some("unknown"));
        assert!(proxy.to_string().contains("502"), "{proxy}");
    }
}
