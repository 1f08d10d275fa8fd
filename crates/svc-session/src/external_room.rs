//! The agent in a room on another LiveKit server (LiveKit Cloud, a self-hosted cluster, or
//! another svc in its room-only role), joined over the network as a client: [`ExternalRoom`]
//! implements [`AgentRoom`] over `svc-room`'s str0m client ([`RoomClient`]), so the session
//! actor and core run unchanged whichever room carries the session.
//!
//! It keeps the embedded room's rules: nothing waits but the join and `close`; data, attributes
//! and RPC answers are handed to the client's IO task, whose failures come back as
//! [`AgentRoomEvent::CommandFailed`]; `svc.tool_result` is the one RPC method answered (every
//! request acknowledged, others refused, as LiveKit's SDKs do); the agent's frames take RTP time
//! from their place on the media clock. Closing leaves the room and deletes it on the server
//! ([`ExternalRooms`] keeps the server's API), as closing the embedded room ends it for everyone.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use svc_room::client::{AudioSender, ClientError, ClientEvent, ClientEvents, ClientOptions, RoomClient};
use svc_room::server_api::{ServerApi, ServerApiError};
use svc_room::{OutboundMedia, RoomCredentials, RoomError, RpcError, proto};

use crate::room::{
    AgentRoom, AgentRoomEvent, CloseReason, FAILURE_QUEUE, PeerAudio, PeerSnapshot, TOOL_RESULT_METHOD, ToolResultCall,
};

/// Name of the agent's audio track (as in the embedded room).
const AGENT_TRACK_NAME: &str = "agent-voice";
/// Samples per second of the RTP clock of Opus.
const RTP_RATE_HZ: u128 = 48_000;
/// Lifetime of the agent's join token: the join, and the reconnects of a long session.
const AGENT_TOKEN_SECONDS: i64 = 24 * 3600;

/// A LiveKit server svc's agents join as clients: its URL, its API key and secret (the agents'
/// tokens are signed with them) and its server API.
#[derive(Clone)]
pub struct ExternalRooms {
    url: String,
    credentials: RoomCredentials,
    api: ServerApi,
}

impl std::fmt::Debug for ExternalRooms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalRooms").field("url", &self.url).finish_non_exhaustive()
    }
}

impl ExternalRooms {
    /// The LiveKit server at `url` (`ws://` or `wss://`, what clients join) with its API key
    /// and secret.
    ///
    /// # Errors
    ///
    /// [`ServerApiError::Url`] for a URL that is not a LiveKit URL.
    pub fn new(url: &str, credentials: RoomCredentials) -> Result<ExternalRooms, ServerApiError> {
        let api = ServerApi::new(url, credentials.clone())?;
        Ok(ExternalRooms { url: url.to_owned(), credentials, api })
    }

    /// The URL clients join.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's API key and secret.
    pub fn credentials(&self) -> &RoomCredentials {
        &self.credentials
    }

    /// The server's API.
    pub fn api(&self) -> &ServerApi {
        &self.api
    }

    /// Joins `room` as the agent `identity` (kind `agent`, with `attributes`) and publishes its
    /// voice; closing the returned room deletes it on the server.
    ///
    /// # Errors
    ///
    /// [`RoomError::Client`] when the join fails; [`RoomError::Local`] never.
    pub async fn join(
        &self,
        room: &str,
        identity: &str,
        name: &str,
        attributes: BTreeMap<String, String>,
    ) -> Result<ExternalRoom, RoomError> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
        let expires_at = i64::try_from(now).unwrap_or(0) + AGENT_TOKEN_SECONDS;
        let token = self
            .credentials
            .agent_token(room, identity, Some(name), attributes, expires_at)
            .map_err(|error| RoomError::Client(ClientError::Connect(format!("signing the agent's token: {error}"))))?;
        let mut joined = ExternalRoom::join(&self.url, &token, BTreeMap::new()).await?;
        joined.deleted_on_close = Some((self.api.clone(), room.to_owned()));
        Ok(joined)
    }
}

/// The agent in a room on another LiveKit server.
pub struct ExternalRoom {
    client: RoomClient,
    events: ClientEvents,
    audio: AudioSender,
    /// The media time RTP time 0 stands for: the first frame's.
    rtp_origin: OnceLock<Instant>,
    /// The agent's frames the client could not take.
    frames_dropped: AtomicU64,
    /// The room to delete on its server when the agent closes it.
    deleted_on_close: Option<(ServerApi, String)>,
    /// Events for `next_event` before the client's: who was in the room at the join (the
    /// embedded room reports them as joining), then refusals at the hand-over (bounded as the
    /// embedded room's).
    pending: VecDeque<AgentRoomEvent>,
}

impl std::fmt::Debug for ExternalRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalRoom").field("client", &self.client).finish_non_exhaustive()
    }
}

impl ExternalRoom {
    /// Joins the room at `url` (the server's LiveKit URL) with `token` (an agent's join token
    /// for the room, which grants publishing, data and its own attributes) and publishes the
    /// agent's voice.
    ///
    /// # Errors
    ///
    /// [`RoomError::Client`] when the connection, the join or the publication fails.
    pub async fn join(url: &str, token: &str, attributes: BTreeMap<String, String>) -> Result<ExternalRoom, RoomError> {
        let options = ClientOptions { rpc_methods: vec![TOOL_RESULT_METHOD.to_owned()], ..ClientOptions::default() };
        let client = RoomClient::connect(url, token, options).await?;
        client.publish_audio(AGENT_TRACK_NAME).await?;
        if !attributes.is_empty() {
            client.try_set_attributes(attributes.into_iter().collect())?;
        }
        let audio = client.audio_sender();
        let (client, events) = client.split_events();
        let mut room = ExternalRoom {
            client,
            events,
            audio,
            rtp_origin: OnceLock::new(),
            frames_dropped: AtomicU64::new(0),
            deleted_on_close: None,
            pending: VecDeque::new(),
        };
        let present: Vec<AgentRoomEvent> = room
            .client
            .info()
            .other_participants
            .clone()
            .into_iter()
            .filter_map(|info| room.peer_event(info))
            .collect();
        room.pending.extend(present);
        Ok(room)
    }

    /// Our identity in the room.
    pub fn identity(&self) -> &str {
        &self.client.info().identity
    }

    fn refused(&mut self, command: &'static str, result: Result<(), ClientError>) {
        let Err(error) = result else { return };
        if self.pending.len() < FAILURE_QUEUE {
            self.pending.push_back(AgentRoomEvent::CommandFailed { command, error: error.into() });
        } else {
            tracing::debug!(command, %error, "external room command refused");
        }
    }

    /// A participant as the agent sees it; `None` for ourselves.
    fn peer_event(&self, info: proto::ParticipantInfo) -> Option<AgentRoomEvent> {
        if info.identity == self.client.info().identity {
            return None;
        }
        if info.state == proto::participant_info::State::Disconnected as i32 {
            let deliberate = info.disconnect_reason == proto::DisconnectReason::ClientInitiated as i32;
            return Some(AgentRoomEvent::PeerLeft { identity: info.identity, deliberate });
        }
        Some(AgentRoomEvent::Peer(PeerSnapshot {
            is_agent: info.kind == proto::participant_info::Kind::Agent as i32,
            active: info.state == proto::participant_info::State::Active as i32,
            publishes_audio: info.tracks.iter().any(|track| track.r#type == proto::TrackType::Audio as i32),
            identity: info.identity,
        }))
    }
}

impl AgentRoom for ExternalRoom {
    async fn next_event(&mut self) -> AgentRoomEvent {
        if let Some(pending) = self.pending.pop_front() {
            return pending;
        }
        loop {
            let Some(event) = self.events.next().await else { return AgentRoomEvent::Gone };
            match event {
                ClientEvent::ParticipantUpdate(info) => {
                    if let Some(event) = self.peer_event(info) {
                        return event;
                    }
                }
                ClientEvent::AudioFrame(frame) => {
                    return AgentRoomEvent::Audio(PeerAudio {
                        identity: frame.participant_identity,
                        track: frame.track_sid,
                        rtp_timestamp: frame.rtp_timestamp,
                        received_at: frame.received_at,
                        opus: Bytes::from_owner(frame.opus),
                    });
                }
                ClientEvent::Data(data) => {
                    return AgentRoomEvent::Data { from: data.from_identity, payload: Bytes::from(data.payload) };
                }
                // The only method the client answers.
                ClientEvent::RpcRequest(invocation) => {
                    return AgentRoomEvent::ToolResult(ToolResultCall {
                        caller: invocation.caller_identity,
                        payload: invocation.payload,
                        request_id: invocation.request_id,
                    });
                }
                ClientEvent::CommandFailed { command, error } => {
                    return AgentRoomEvent::CommandFailed { command, error: error.into() };
                }
                ClientEvent::Left { .. } | ClientEvent::Closed { .. } => return AgentRoomEvent::Gone,
                // Subscriptions show as audio; other packets (RPC acknowledgements and answers
                // to calls the agent does not make) are not the agent's business.
                ClientEvent::TrackSubscribed { .. }
                | ClientEvent::OwnTrackSubscribed { .. }
                | ClientEvent::Packet(_) => {}
            }
        }
    }

    fn send_data(&mut self, json: String, to: Option<String>) {
        let destinations: Vec<String> = to.into_iter().collect();
        let sent = self.client.try_send_data(json.into_bytes(), Some(crate::DATA_TOPIC), true, &destinations);
        self.refused("send_data", sent);
    }

    fn set_attributes(&mut self, attributes: BTreeMap<String, String>) {
        let set = self.client.try_set_attributes(attributes.into_iter().collect::<HashMap<_, _>>());
        self.refused("set_attributes", set);
    }

    fn answer_tool_result(&mut self, call: &ToolResultCall, answer: Result<String, String>) {
        let answer = answer.map_err(|message| RpcError::new(svc_room::rpc_codes::APPLICATION_ERROR, message));
        let answered = self.client.try_respond_rpc(&call.caller, &call.request_id, answer);
        self.refused("answer_tool_result", answered);
    }

    fn try_push_audio(&self, opus: Bytes, due: Instant) -> Result<(), RoomError> {
        let origin = *self.rtp_origin.get_or_init(|| due);
        let rtp_timestamp = due.saturating_duration_since(origin).as_micros() * RTP_RATE_HZ / 1_000_000;
        let sent = self.audio.send_opus(u64::try_from(rtp_timestamp).unwrap_or(u64::MAX), &opus[..]);
        if sent.is_err() {
            self.frames_dropped.fetch_add(1, Ordering::Relaxed);
        }
        sent.map_err(RoomError::from)
    }

    fn outbound_media(&self) -> OutboundMedia {
        OutboundMedia { dropped: self.frames_dropped.load(Ordering::Relaxed), late: 0 }
    }

    /// Leaves the room, then, when joined through [`ExternalRooms`], deletes it on the server
    /// (everyone else leaves too, as from a closed embedded room).
    async fn close(&self, _reason: CloseReason) {
        if let Err(error) = self.client.try_leave() {
            tracing::debug!(%error, "leave not queued; the client leaves when it is dropped");
        }
        let Some((api, room)) = &self.deleted_on_close else { return };
        match api.delete_room(room).await {
            Ok(()) => {}
            // Emptied and closed already (the last participant left first).
            Err(error) if error.code() == Some("not_found") => {}
            Err(error) => tracing::warn!(%room, %error, "the room could not be deleted on its server"),
        }
    }
}
