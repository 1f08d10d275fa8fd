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
//!
//! A connection to the server that breaks (not a leave the server asked for) is rejoined with
//! the same token, as LiveKit's SDKs rejoin after a failed resume: attempts with growing pauses
//! for up to [`REJOIN_FOR`], the attributes the agent had set re-applied, who is in the room
//! reported again. Meanwhile what the session hands over fails as `CommandFailed` and frames are
//! counted dropped; past the bound the agent is gone from the room and the session ends.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use svc_room::client::{AudioSender, ClientError, ClientEvent, ClientEvents, ClientOptions, RoomClient};
use svc_room::server_api::{ServerApi, ServerApiError};
use svc_room::{OutboundMedia, RoomCredentials, RoomError, proto};

use crate::phone_call::{DIAL_ID_ATTRIBUTE, PhoneCallSnapshot};
use crate::room::{
    AgentRoom, AgentRoomEvent, CloseReason, FAILURE_QUEUE, PeerAudio, PeerSnapshot, TOOL_RESULT_METHOD, ToolResultCall,
    rpc_answer,
};

/// Name of the agent's audio track (as in the embedded room).
const AGENT_TRACK_NAME: &str = "agent-voice";
/// Samples per second of the RTP clock of Opus.
const RTP_RATE_HZ: u128 = 48_000;
/// Lifetime of the agent's join token: the join, and the rejoins of a long session.
const AGENT_TOKEN_SECONDS: i64 = 24 * 3600;
/// How long a broken connection is rejoined before the agent counts as gone.
pub const REJOIN_FOR: Duration = Duration::from_secs(15);
/// The pause before the second rejoin attempt; it doubles with each failed one, up to 2 s.
const FIRST_REJOIN_PAUSE: Duration = Duration::from_millis(250);

/// A LiveKit server svc's agents join as clients: its URL, its API key and secret (the agents'
/// tokens are signed with them) and its server API.
#[derive(Clone)]
pub struct ExternalRooms {
    url: String,
    credentials: RoomCredentials,
    api: ServerApi,
    sip: Option<SipTrunk>,
}

/// Which node the store says runs a session. A node cut off from the LiveKit server (not dead)
/// may find on its return that LiveKit gave the session's job to another node, which took it
/// over: it must then neither rejoin as the agent (it would push the other node's agent out)
/// nor end the session or delete its room.
#[derive(Debug, Clone)]
pub struct SessionOwner {
    /// The shared store.
    pub store: svc_store::Store,
    /// The session.
    pub session_id: String,
    /// This node.
    pub node_id: String,
}

impl SessionOwner {
    /// The node that took the session over, when the store names another node than this one.
    /// A store that cannot answer names none: the session stays this node's.
    pub async fn taken_over_by(&self) -> Option<String> {
        match self.store.session(&self.session_id).await {
            Ok(Some(row)) => row.node_id.filter(|node| *node != self.node_id),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(session.id = %self.session_id, %error, "could not read which node runs the session");
                None
            }
        }
    }
}

/// The outbound trunk of the LiveKit server's SIP service that svc's dials go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SipTrunk {
    /// Its id on that server (`ST_…`).
    pub trunk_id: String,
    /// The number a dial that names none presents (E.164).
    pub caller_number: String,
}

/// Why [`ExternalRooms::dial`] placed no call.
#[derive(Debug, thiserror::Error)]
pub enum SipDialError {
    /// No trunk of the server's SIP service is configured.
    #[error("no SIP trunk of the LiveKit server is configured")]
    NoTrunk,
    /// The server refused or failed `CreateSIPParticipant`.
    #[error(transparent)]
    Server(#[from] ServerApiError),
}

/// One dial-out placed through the LiveKit server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SipDialOut<'a> {
    /// The session's room.
    pub room: &'a str,
    /// svc's dial: the phone joins as `sip-<dial_id>` with attribute [`DIAL_ID_ATTRIBUTE`].
    pub dial_id: &'a str,
    /// The callee (E.164).
    pub phone_number: &'a str,
    /// The number presented.
    pub caller_number: &'a str,
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
        Ok(ExternalRooms { url: url.to_owned(), credentials, api, sip: None })
    }

    /// Phone dial-out through the server's SIP service, over its outbound trunk `trunk`.
    #[must_use]
    pub fn with_sip_trunk(mut self, trunk: SipTrunk) -> ExternalRooms {
        self.sip = Some(trunk);
        self
    }

    /// The trunk dials go through, when one is configured.
    pub fn sip_trunk(&self) -> Option<&SipTrunk> {
        self.sip.as_ref()
    }

    /// Dials a phone into a session's room through the server (`CreateSIPParticipant`), from
    /// any node: the agent, on whichever node runs the session, follows the call from the
    /// phone participant's attributes (`crate::phone_call`). Returns once the phone is in the
    /// room, ringing.
    ///
    /// # Errors
    ///
    /// [`SipDialError::NoTrunk`] without a trunk; [`SipDialError::Server`] as the server refused
    /// or failed the call (`not_found`: the room is gone).
    pub async fn dial(&self, dial: SipDialOut<'_>) -> Result<(), SipDialError> {
        let trunk = self.sip.as_ref().ok_or(SipDialError::NoTrunk)?;
        let request = proto::CreateSipParticipantRequest {
            sip_trunk_id: trunk.trunk_id.clone(),
            sip_call_to: dial.phone_number.to_owned(),
            sip_number: dial.caller_number.to_owned(),
            room_name: dial.room.to_owned(),
            participant_identity: format!("sip-{}", dial.dial_id),
            participant_attributes: [(DIAL_ID_ATTRIBUTE.to_owned(), dial.dial_id.to_owned())].into(),
            wait_until_answered: false,
            ..Default::default()
        };
        let info = self.api.create_sip_participant(request).await?;
        tracing::debug!(dial.id = %dial.dial_id, sip.call_id = %info.sip_call_id, "the LiveKit server placed the call");
        Ok(())
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
        self.join_assigned(&self.url, &token, room).await
    }

    /// Joins `room` at `url` with `token`, signed by the server for the agent (a job's
    /// assignment in worker mode: the identity, name and attributes are in it), and publishes
    /// its voice; closing the returned room deletes it on the server.
    ///
    /// # Errors
    ///
    /// [`RoomError::Client`] when the join fails.
    pub async fn join_assigned(&self, url: &str, token: &str, room: &str) -> Result<ExternalRoom, RoomError> {
        let mut joined = ExternalRoom::join(url, token).await?;
        joined.deleted_on_close = Some((self.api.clone(), room.to_owned()));
        joined.control = Some(self.credentials.clone());
        Ok(joined)
    }
}

/// The agent in a room on another LiveKit server.
pub struct ExternalRoom {
    url: String,
    token: String,
    client: RoomClient,
    events: ClientEvents,
    /// Taken by `try_push_audio`, which the trait gives `&self`; replaced on a rejoin.
    audio: Mutex<AudioSender>,
    /// The attributes the agent set (re-applied on a rejoin).
    attributes: BTreeMap<String, String>,
    /// A rejoin under way: its attempt, and until when attempts go on.
    rejoin: Option<Rejoin>,
    /// The media time RTP time 0 stands for: the first frame's.
    rtp_origin: OnceLock<Instant>,
    /// The agent's frames the client could not take.
    frames_dropped: AtomicU64,
    /// The user's frames the clients before the last rejoin dropped.
    inbound_dropped_before: u64,
    /// The room to delete on its server when the agent closes it.
    deleted_on_close: Option<(ServerApi, String)>,
    /// The server's key, which control packets from other nodes are signed with
    /// (`crate::control`); `None`: none are accepted.
    control: Option<RoomCredentials>,
    /// Checked before each rejoin: a session another node took over is not rejoined.
    owner: Option<SessionOwner>,
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
    /// for the room, which grants publishing, data and its own attributes, and carries the
    /// agent's first attributes) and publishes the agent's voice.
    ///
    /// # Errors
    ///
    /// [`RoomError::Client`] when the connection, the join or the publication fails.
    pub async fn join(url: &str, token: &str) -> Result<ExternalRoom, RoomError> {
        let client = connect(url, token).await?;
        let audio = Mutex::new(client.audio_sender());
        let (client, events) = client.split_events();
        let mut room = ExternalRoom {
            url: url.to_owned(),
            token: token.to_owned(),
            client,
            events,
            audio,
            attributes: BTreeMap::new(),
            rejoin: None,
            rtp_origin: OnceLock::new(),
            frames_dropped: AtomicU64::new(0),
            inbound_dropped_before: 0,
            deleted_on_close: None,
            control: None,
            owner: None,
            pending: VecDeque::new(),
        };
        room.report_present();
        Ok(room)
    }

    /// Rejoins only while the store says this node runs the session.
    pub fn watch_owner(&mut self, owner: SessionOwner) {
        self.owner = Some(owner);
    }

    /// Reports who was in the room at the (re)join, as the embedded room reports them: joining.
    fn report_present(&mut self) {
        let present: Vec<AgentRoomEvent> =
            self.client.info().other_participants.clone().into_iter().flat_map(|info| self.peer_events(info)).collect();
        self.pending.extend(present);
    }

    /// The connection broke: the first rejoin attempt starts at once.
    fn start_rejoin(&mut self, error: &ClientError) {
        tracing::warn!(%error, room = %self.client.info().room_name, "the connection to the LiveKit server broke; rejoining");
        let task =
            tokio::spawn(rejoin_attempt(self.url.clone(), self.token.clone(), Duration::ZERO, self.owner.clone()));
        self.rejoin = Some(Rejoin { task, attempt: 1, until: Instant::now() + REJOIN_FOR });
    }

    /// Waits for the rejoin under way: `true` once in the room again, `false` when it gave up.
    async fn finish_rejoin(&mut self) -> bool {
        let Some(rejoin) = self.rejoin.as_mut() else { return true };
        // Awaiting the handle is cancel-safe: the attempt runs on its own task.
        let outcome = (&mut rejoin.task)
            .await
            .unwrap_or_else(|error| Rejoined::Failed(RoomError::Client(ClientError::Io(error.to_string()))));
        match outcome {
            Rejoined::Superseded(node) => {
                tracing::warn!(room = %self.client.info().room_name, %node,
                    "another node took the session over while this one was cut off; not rejoining");
                self.rejoin = None;
                false
            }
            Rejoined::Joined(client) => {
                self.rejoin = None;
                if !self.attributes.is_empty()
                    && let Err(error) = client.try_set_attributes(self.attributes.clone().into_iter().collect())
                {
                    tracing::warn!(%error, "the agent's attributes could not be set again after the rejoin");
                }
                *self.audio.get_mut().unwrap_or_else(PoisonError::into_inner) = client.audio_sender();
                let (client, events) = client.split_events();
                self.inbound_dropped_before += self.client.audio_frames_dropped();
                self.client = client;
                self.events = events;
                self.report_present();
                tracing::info!(room = %self.client.info().room_name, "rejoined the room on the LiveKit server");
                true
            }
            Rejoined::Failed(error) if Instant::now() < rejoin.until => {
                let pause = FIRST_REJOIN_PAUSE * 2u32.pow(rejoin.attempt.min(4) - 1);
                tracing::debug!(%error, attempt = rejoin.attempt, "rejoin failed; trying again");
                rejoin.attempt += 1;
                let owner = self.owner.clone();
                rejoin.task = tokio::spawn(rejoin_attempt(self.url.clone(), self.token.clone(), pause, owner));
                true
            }
            Rejoined::Failed(error) => {
                tracing::warn!(%error, "could not rejoin the room on the LiveKit server; the agent is gone");
                self.rejoin = None;
                false
            }
        }
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

    /// A participant as the agent sees it (nothing for ourselves), and, for the phone of one of
    /// svc's dials, its call.
    fn peer_events(&self, info: proto::ParticipantInfo) -> Vec<AgentRoomEvent> {
        if info.identity == self.client.info().identity {
            return Vec::new();
        }
        if info.state == proto::participant_info::State::Disconnected as i32 {
            let deliberate = info.disconnect_reason == proto::DisconnectReason::ClientInitiated as i32;
            return vec![AgentRoomEvent::PeerLeft { identity: info.identity, deliberate }];
        }
        let call = (info.kind == proto::participant_info::Kind::Sip as i32)
            .then(|| PhoneCallSnapshot::from_attributes(&info.identity, &info.attributes))
            .flatten();
        let peer = AgentRoomEvent::Peer(PeerSnapshot {
            is_agent: info.kind == proto::participant_info::Kind::Agent as i32,
            active: info.state == proto::participant_info::State::Active as i32,
            publishes_audio: info.tracks.iter().any(|track| track.r#type == proto::TrackType::Audio as i32),
            identity: info.identity,
        });
        std::iter::once(peer).chain(call.map(AgentRoomEvent::PhoneCall)).collect()
    }
}

impl AgentRoom for ExternalRoom {
    async fn next_event(&mut self) -> AgentRoomEvent {
        loop {
            if let Some(pending) = self.pending.pop_front() {
                return pending;
            }
            if self.rejoin.is_some() {
                if !self.finish_rejoin().await {
                    return AgentRoomEvent::Gone;
                }
                continue;
            }
            let Some(event) = self.events.next().await else { return AgentRoomEvent::Gone };
            match event {
                ClientEvent::ParticipantUpdate(info) => {
                    let events = self.peer_events(info);
                    self.pending.extend(events);
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
                ClientEvent::Data(data) if data.topic.as_deref() == Some(crate::control::CONTROL_TOPIC) => {
                    let room = &self.client.info().room_name;
                    let request = self
                        .control
                        .as_ref()
                        .and_then(|credentials| crate::control::read_end_request(credentials, room, &data.payload));
                    match request {
                        Some(reason) => return AgentRoomEvent::EndRequested { reason },
                        None => {
                            tracing::warn!(from = %data.from_identity, "a control packet that does not verify was ignored")
                        }
                    }
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
                // A broken connection is rejoined; a leave (the server's or ours) is the end.
                ClientEvent::Closed { error: Some(error) } => self.start_rejoin(&error),
                ClientEvent::Left { .. } | ClientEvent::Closed { error: None } => return AgentRoomEvent::Gone,
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
        for (key, value) in &attributes {
            if value.is_empty() {
                self.attributes.remove(key);
            } else {
                self.attributes.insert(key.clone(), value.clone());
            }
        }
        let set = self.client.try_set_attributes(attributes.into_iter().collect::<HashMap<_, _>>());
        self.refused("set_attributes", set);
    }

    fn answer_tool_result(&mut self, call: &ToolResultCall, answer: Result<String, String>) {
        let answered = self.client.try_respond_rpc(&call.caller, &call.request_id, rpc_answer(answer));
        self.refused("answer_tool_result", answered);
    }

    fn try_push_audio(&self, opus: Bytes, due: Instant) -> Result<(), RoomError> {
        let origin = *self.rtp_origin.get_or_init(|| due);
        let rtp_timestamp = due.saturating_duration_since(origin).as_micros() * RTP_RATE_HZ / 1_000_000;
        let audio = self.audio.lock().unwrap_or_else(PoisonError::into_inner);
        let sent = audio.send_opus(u64::try_from(rtp_timestamp).unwrap_or(u64::MAX), &opus[..]);
        if sent.is_err() {
            self.frames_dropped.fetch_add(1, Ordering::Relaxed);
        }
        sent.map_err(RoomError::from)
    }

    /// The user's frames the client's event queue refused (the session fell behind). What the
    /// server dropped on its way is the server's to count.
    fn inbound_drops(&self) -> svc_room::InboundDrops {
        let dropped = self.inbound_dropped_before + self.client.audio_frames_dropped();
        svc_room::InboundDrops { room_queue: 0, participant_queue: dropped }
    }

    fn outbound_media(&self) -> OutboundMedia {
        OutboundMedia { dropped: self.frames_dropped.load(Ordering::Relaxed), late: 0 }
    }

    /// Leaves the room, then, when joined through [`ExternalRooms`], deletes it on the server
    /// (everyone else leaves too, as from a closed embedded room); a session another node runs
    /// now ([`CloseReason::Superseded`]) keeps its room.
    async fn close(&self, reason: CloseReason) {
        if let Some(rejoin) = &self.rejoin {
            rejoin.task.abort();
        }
        if let Err(error) = self.client.try_leave() {
            tracing::debug!(%error, "leave not queued; the client leaves when it is dropped");
        }
        if reason == CloseReason::Superseded {
            return;
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

impl Drop for ExternalRoom {
    fn drop(&mut self) {
        // A rejoin must not put the agent back into a room the session has left.
        if let Some(rejoin) = &self.rejoin {
            rejoin.task.abort();
        }
    }
}

/// A rejoin under way.
struct Rejoin {
    task: tokio::task::JoinHandle<Rejoined>,
    attempt: u32,
    until: Instant,
}

/// Joins as the agent (answering `svc.tool_result`) and publishes its voice.
async fn connect(url: &str, token: &str) -> Result<RoomClient, RoomError> {
    let options = ClientOptions { rpc_methods: vec![TOOL_RESULT_METHOD.to_owned()], ..ClientOptions::default() };
    let client = RoomClient::connect(url, token, options).await?;
    client.publish_audio(AGENT_TRACK_NAME).await?;
    Ok(client)
}

/// What one rejoin attempt came to.
enum Rejoined {
    Joined(RoomClient),
    Failed(RoomError),
    /// The store names another node (this one's): the session is that node's now.
    Superseded(String),
}

/// One rejoin attempt after `pause`, unless another node runs the session by then.
async fn rejoin_attempt(url: String, token: String, pause: Duration, owner: Option<SessionOwner>) -> Rejoined {
    tokio::time::sleep(pause).await;
    if let Some(node) = match &owner {
        Some(owner) => owner.taken_over_by().await,
        None => None,
    } {
        return Rejoined::Superseded(node);
    }
    match connect(&url, &token).await {
        Ok(client) => Rejoined::Joined(client),
        Err(error) => Rejoined::Failed(error),
    }
}
