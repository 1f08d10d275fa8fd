//! Control of a session from a node that does not run it, through the LiveKit server every node
//! uses (external rooms, worker mode): a data packet on [`CONTROL_TOPIC`] addressed to the
//! session's agent, sent with the server API. No request has to reach the node that runs it.
//!
//! The packet carries a short-lived token signed with the server's API secret, which every svc
//! node holds and no room participant does. The agent acts only on a packet whose token verifies
//! and grants admin of its own room, so a participant that sends the same topic ends nothing.

use serde::{Deserialize, Serialize};
use svc_room::server_api::ServerApiError;
use svc_room::token::{RoomCredentials, RoomGrant};

use crate::external_room::ExternalRooms;

/// Topic of the control packets.
pub const CONTROL_TOPIC: &str = "svc.control";
/// Lifetime of a control packet's token: it is read at once or not at all.
const CONTROL_TOKEN_SECONDS: i64 = 60;
/// The `session-ended` reasons another node may end a session with.
const REMOTE_END_REASONS: &[&str] = &["session_deleted"];

#[derive(Serialize, Deserialize)]
struct ControlMessage {
    r#type: String,
    reason: String,
    token: String,
}

impl ExternalRooms {
    /// Asks the agent of session `session_id`, in `room` on this LiveKit server, to end it with
    /// `reason` (one of [`REMOTE_END_REASONS`]); returns once the server took the packet (the
    /// session's end is stored by its node, shortly after).
    ///
    /// # Errors
    ///
    /// [`ServerApiError`] as the server refused or could not be reached (`not_found`: the room
    /// is not open, so no agent runs the session).
    pub async fn request_end(&self, room: &str, session_id: &str, reason: &str) -> Result<(), ServerApiError> {
        let grant = RoomGrant { room_admin: true, room: room.to_owned(), ..RoomGrant::default() };
        let token =
            self.credentials().grant_token(grant, crate::runtime::epoch_us() / 1_000_000 + CONTROL_TOKEN_SECONDS)?;
        let message = ControlMessage { r#type: "end".to_owned(), reason: reason.to_owned(), token };
        let payload = serde_json::to_vec(&message).unwrap_or_default();
        let agent = crate::runtime::agent_identity(session_id);
        self.api().send_data(room, payload, CONTROL_TOPIC, vec![agent]).await
    }
}

/// The reason of an end request for the agent in `room`, when `payload` is one whose token
/// `credentials` verify; `None` for anything else.
pub(crate) fn read_end_request(credentials: &RoomCredentials, room: &str, payload: &[u8]) -> Option<String> {
    let message: ControlMessage = serde_json::from_slice(payload).ok()?;
    let claims = credentials.verify_server_api(&message.token).ok()?;
    let granted = claims.video.room_admin && claims.video.room == room;
    let known = REMOTE_END_REASONS.contains(&message.reason.as_str());
    (message.r#type == "end" && granted && known).then_some(message.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "control-secret-0123456789abcdefghijkl";

    fn request(credentials: &RoomCredentials, room: &str, reason: &str) -> Vec<u8> {
        let grant = RoomGrant { room_admin: true, room: room.to_owned(), ..RoomGrant::default() };
        let token = credentials.grant_token(grant, crate::runtime::epoch_us() / 1_000_000 + 60).expect("token");
        serde_json::to_vec(&ControlMessage { r#type: "end".to_owned(), reason: reason.to_owned(), token })
            .expect("json")
    }

    #[test]
    fn only_a_request_signed_for_the_agents_own_room_ends_it() {
        let credentials = RoomCredentials::new("key", SECRET);
        let ok = request(&credentials, "room-a", "session_deleted");
        assert_eq!(read_end_request(&credentials, "room-a", &ok).as_deref(), Some("session_deleted"));
        assert_eq!(read_end_request(&credentials, "room-b", &ok), None, "another room's request");
        let forged =
            request(&RoomCredentials::new("key", "another-secret-0123456789abcdefghijk"), "room-a", "session_deleted");
        assert_eq!(read_end_request(&credentials, "room-a", &forged), None, "not signed with the server's secret");
        let odd = request(&credentials, "room-a", "client_ended");
        assert_eq!(read_end_request(&credentials, "room-a", &odd), None, "a reason other nodes do not end with");
        assert_eq!(read_end_request(&credentials, "room-a", b"{\"type\":\"end\"}"), None);
    }
}
