//! The room as the agent sees it: a small interface ([`AgentRoom`]) between the session actor and
//! whatever media room carries the session, so that an external LiveKit server can replace the
//! embedded room without touching the core or the actor. [`EmbeddedRoom`] implements it over the
//! in-process participant of `svc-room`.
//!
//! Nothing here makes the session wait for the room but `close`: data, attributes, RPC answers
//! and audio frames are handed over without waiting (bounded queues refuse what they cannot
//! take), and failures come back as [`AgentRoomEvent::CommandFailed`] (a frame's as a count).
//! That shape fits a room across a network (an agent joining an external LiveKit server as a
//! client) as well as the embedded one.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use svc_room::{
    LeaveReason, LocalAudioTrack, LocalJoinOptions, LocalParticipant, ParticipantKind, RoomError, RoomEvent,
    RoomServer, RpcError,
};

/// LiveKit RPC method clients answer `tool-invocation`s with.
pub const TOOL_RESULT_METHOD: &str = "svc.tool_result";
/// Name of the agent's audio track.
const AGENT_TRACK_NAME: &str = "agent-voice";
/// Failures of commands handed over without waiting, kept for `next_event`; more are only
/// logged (each was logged anyway).
pub(crate) const FAILURE_QUEUE: usize = 64;

/// A participant as the agent needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSnapshot {
    /// Identity.
    pub identity: String,
    /// Another agent.
    pub is_agent: bool,
    /// Media connected.
    pub active: bool,
    /// Publishes audio.
    pub publishes_audio: bool,
}

/// One Opus frame of a participant's microphone, as the room delivered it: the identity and
/// track id are the room's shared strings and the payload its buffer, so a frame costs no
/// allocation on its way to the session.
#[derive(Debug, Clone)]
pub struct PeerAudio {
    /// Publisher.
    pub identity: Arc<str>,
    /// Track id (a new track means a new stream to decode).
    pub track: Arc<str>,
    /// RTP timestamp on the 48 kHz clock, extended to 64 bits.
    pub rtp_timestamp: u64,
    /// When it was read from the socket.
    pub received_at: Instant,
    /// Payload.
    pub opus: Bytes,
}

/// An answer to `svc.tool_result`, waiting for the session's verdict
/// ([`AgentRoom::answer_tool_result`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResultCall {
    /// Who called.
    pub caller: String,
    /// The payload.
    pub payload: String,
    /// The RPC request's id, which the answer names.
    pub request_id: String,
}

/// What happens in the room, for the agent.
#[derive(Debug)]
pub enum AgentRoomEvent {
    /// A participant joined or changed.
    Peer(PeerSnapshot),
    /// A participant left; `deliberate` when it left on its own.
    PeerLeft {
        /// Identity.
        identity: String,
        /// It left on its own (rather than dropped, was replaced, or the server went away).
        deliberate: bool,
    },
    /// Microphone audio.
    Audio(PeerAudio),
    /// A data packet.
    Data {
        /// Sender.
        from: String,
        /// Payload.
        payload: Bytes,
    },
    /// A `svc.tool_result` RPC.
    ToolResult(ToolResultCall),
    /// Something handed to the room without waiting (data, attributes, an RPC answer) failed.
    CommandFailed {
        /// What it was.
        command: &'static str,
        /// Why.
        error: RoomError,
    },
    /// The agent is no longer in the room (removed, or the room closed).
    Gone,
    /// The phone of one of svc's dials changed its call's attributes (external rooms, where the
    /// LiveKit server places the call: `crate::phone_call`; in the embedded room svc's own
    /// phone service reports its calls to the session directly).
    PhoneCall(crate::phone_call::PhoneCallSnapshot),
    /// Another node asked the session to end (`reason`), through the LiveKit server
    /// (`crate::control`; external rooms only).
    EndRequested {
        /// The `session-ended` reason.
        reason: String,
    },
}

/// Why the session closes the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The session ended normally.
    SessionEnded,
    /// The server is shutting down.
    ServerShutdown,
    /// Another node runs the session now (this one was cut off, not dead): the agent leaves,
    /// and the room, which is the other node's session's, stays.
    Superseded,
}

/// The media room, from the agent's side.
pub trait AgentRoom: Send + 'static {
    /// The next event; [`AgentRoomEvent::Gone`] once the agent is out of the room.
    fn next_event(&mut self) -> impl Future<Output = AgentRoomEvent> + Send;
    /// Sends JSON on the reliable data channel, to everyone or one participant, without
    /// waiting; a failure comes back as [`AgentRoomEvent::CommandFailed`].
    fn send_data(&mut self, json: String, to: Option<String>);
    /// Merges attributes into the agent's, without waiting; failures as for `send_data`.
    fn set_attributes(&mut self, attributes: BTreeMap<String, String>);
    /// Answers a `svc.tool_result` call with a payload or an error message, without waiting;
    /// failures as for `send_data`.
    fn answer_tool_result(&mut self, call: &ToolResultCall, answer: Result<String, String>);
    /// Hands one 20 ms Opus frame of the agent's voice to the room's bounded frame sink, without
    /// waiting; `due` is its place on the media clock, which RTP time follows. A frame the sink
    /// cannot take is dropped and counted in [`AgentRoom::outbound_media`] (the error says why).
    fn try_push_audio(&self, opus: Bytes, due: Instant) -> Result<(), RoomError>;
    /// Ends the room: every participant leaves with a reason.
    fn close(&self, reason: CloseReason) -> impl Future<Output = ()> + Send;
    /// The user's audio the room lost before the agent read it, so far (a room that cannot
    /// lose any, such as a test's, reports none).
    fn inbound_drops(&self) -> svc_room::InboundDrops {
        svc_room::InboundDrops::default()
    }
    /// The agent's frames the room dropped or sent late, so far.
    fn outbound_media(&self) -> svc_room::OutboundMedia {
        svc_room::OutboundMedia::default()
    }
}

/// A `svc.tool_result` verdict as the RPC answers it: a refusal is LiveKit's application error.
pub(crate) fn rpc_answer(answer: Result<String, String>) -> Result<String, RpcError> {
    answer.map_err(|message| RpcError::new(svc_room::rpc_codes::APPLICATION_ERROR, message))
}

/// The agent in the embedded room.
pub struct EmbeddedRoom {
    server: RoomServer,
    participant: LocalParticipant,
    track: LocalAudioTrack,
    /// Commands the room refused at once, for `next_event` to report.
    failures: VecDeque<AgentRoomEvent>,
}

impl std::fmt::Debug for EmbeddedRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedRoom").field("participant", &self.participant).finish_non_exhaustive()
    }
}

impl EmbeddedRoom {
    /// Joins `room` as the agent (kind AGENT, with `attributes`), publishes its voice track and
    /// answers `svc.tool_result` calls by handing them to [`AgentRoom::next_event`].
    pub async fn join(
        server: &RoomServer,
        room: &str,
        identity: &str,
        name: &str,
        attributes: BTreeMap<String, String>,
    ) -> Result<EmbeddedRoom, RoomError> {
        let options = LocalJoinOptions {
            identity: identity.to_owned(),
            name: name.to_owned(),
            kind: ParticipantKind::Agent,
            metadata: String::new(),
            attributes,
        };
        let participant = server.join_local(room, options).await?;
        let track = participant.publish_audio(AGENT_TRACK_NAME).await?;
        participant.register_rpc_method(TOOL_RESULT_METHOD);
        Ok(EmbeddedRoom { server: server.clone(), participant, track, failures: VecDeque::new() })
    }

    /// Keeps a refusal for `next_event` (bounded: past the bound it is only logged).
    fn refused(&mut self, command: &'static str, result: Result<(), RoomError>) {
        let Err(error) = result else { return };
        if self.failures.len() < FAILURE_QUEUE {
            self.failures.push_back(AgentRoomEvent::CommandFailed { command, error });
        } else {
            tracing::debug!(room = %self.participant.room(), command, %error, "room command refused");
        }
    }

    fn peer(participant: &svc_room::Participant) -> PeerSnapshot {
        PeerSnapshot {
            identity: participant.identity.clone(),
            is_agent: participant.kind == ParticipantKind::Agent,
            active: participant.active,
            publishes_audio: !participant.tracks.is_empty(),
        }
    }
}

impl AgentRoom for EmbeddedRoom {
    async fn next_event(&mut self) -> AgentRoomEvent {
        if let Some(failure) = self.failures.pop_front() {
            return failure;
        }
        loop {
            let Some(event) = self.participant.next_event().await else { return AgentRoomEvent::Gone };
            match event {
                RoomEvent::ParticipantJoined(participant) => return AgentRoomEvent::Peer(Self::peer(&participant)),
                RoomEvent::ParticipantUpdated { participant, .. } => {
                    return AgentRoomEvent::Peer(Self::peer(&participant));
                }
                RoomEvent::ParticipantLeft { identity, reason, .. } => {
                    let deliberate = matches!(reason, LeaveReason::ClientInitiated);
                    return AgentRoomEvent::PeerLeft { identity, deliberate };
                }
                RoomEvent::AudioFrame(frame) => {
                    return AgentRoomEvent::Audio(PeerAudio {
                        identity: frame.participant_identity,
                        track: frame.track_sid,
                        rtp_timestamp: frame.rtp_timestamp,
                        received_at: frame.received_at,
                        opus: frame.opus,
                    });
                }
                RoomEvent::Data(message) => {
                    return AgentRoomEvent::Data { from: message.from_identity, payload: message.payload };
                }
                // The only method the agent registered.
                RoomEvent::RpcRequest(invocation) => {
                    return AgentRoomEvent::ToolResult(ToolResultCall {
                        caller: invocation.caller_identity,
                        payload: invocation.payload,
                        request_id: invocation.request_id,
                    });
                }
                RoomEvent::CommandFailed { command, error } => {
                    return AgentRoomEvent::CommandFailed { command, error: RoomError::Local(error) };
                }
                RoomEvent::Disconnected { .. } => return AgentRoomEvent::Gone,
                // Track changes arrive as participant updates too.
                RoomEvent::TrackPublished { .. } | RoomEvent::TrackUnpublished { .. } => {}
            }
        }
    }

    fn send_data(&mut self, json: String, to: Option<String>) {
        let destinations: Vec<String> = to.into_iter().collect();
        let sent = self.participant.try_send_data(json.into_bytes(), Some(crate::DATA_TOPIC), true, &destinations);
        self.refused("send_data", sent);
    }

    fn set_attributes(&mut self, attributes: BTreeMap<String, String>) {
        let set = self.participant.try_set_attributes(attributes);
        self.refused("set_attributes", set);
    }

    fn answer_tool_result(&mut self, call: &ToolResultCall, answer: Result<String, String>) {
        let answered = self.participant.respond_rpc(&call.caller, &call.request_id, rpc_answer(answer));
        self.refused("answer_tool_result", answered);
    }

    fn try_push_audio(&self, opus: Bytes, due: Instant) -> Result<(), RoomError> {
        self.track.try_push_opus_at(opus, due)
    }

    fn inbound_drops(&self) -> svc_room::InboundDrops {
        self.participant.inbound_drops()
    }

    fn outbound_media(&self) -> svc_room::OutboundMedia {
        self.track.outbound()
    }

    async fn close(&self, reason: CloseReason) {
        let reason = match reason {
            CloseReason::SessionEnded => LeaveReason::RoomDeleted,
            CloseReason::ServerShutdown => LeaveReason::ServerShutdown,
            // The embedded room is this node's own: no other node can take its sessions over.
            CloseReason::Superseded => LeaveReason::RoomDeleted,
        };
        self.server.close_room(self.participant.room(), reason).await;
    }
}
