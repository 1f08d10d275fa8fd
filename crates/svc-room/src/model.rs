//! The room's public vocabulary: who is in a room, what they publish, and what the in-process
//! participant sees happen. Plain data, independent of the wire (`livekit_protocol`) types, so
//! the session runtime never depends on LiveKit's generated code.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use livekit_protocol as proto;

/// What kind of participant this is. Clients treat `Agent` specially (voice assistant UI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParticipantKind {
    /// A person with an app or browser.
    Standard,
    /// An ingress bridge.
    Ingress,
    /// An egress recorder.
    Egress,
    /// A phone call.
    Sip,
    /// An AI agent.
    Agent,
    /// A connector.
    Connector,
    /// A bridge.
    Bridge,
}

impl ParticipantKind {
    /// The kind named by a token's lowercase `kind` claim; unknown or absent means standard,
    /// as in LiveKit.
    pub fn from_claim(claim: Option<&str>) -> ParticipantKind {
        match claim.map(str::to_ascii_lowercase).as_deref() {
            Some("agent") => ParticipantKind::Agent,
            Some("sip") => ParticipantKind::Sip,
            Some("ingress") => ParticipantKind::Ingress,
            Some("egress") => ParticipantKind::Egress,
            Some("connector") => ParticipantKind::Connector,
            Some("bridge") => ParticipantKind::Bridge,
            _ => ParticipantKind::Standard,
        }
    }

    pub(crate) fn to_proto(self) -> proto::participant_info::Kind {
        use proto::participant_info::Kind;
        match self {
            ParticipantKind::Standard => Kind::Standard,
            ParticipantKind::Ingress => Kind::Ingress,
            ParticipantKind::Egress => Kind::Egress,
            ParticipantKind::Sip => Kind::Sip,
            ParticipantKind::Agent => Kind::Agent,
            ParticipantKind::Connector => Kind::Connector,
            ParticipantKind::Bridge => Kind::Bridge,
        }
    }
}

/// One published track, as others see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackPublication {
    /// `TR_…` id.
    pub sid: String,
    /// Publisher-chosen name.
    pub name: String,
    /// Whether the publisher muted it.
    pub muted: bool,
}

/// A participant as seen at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// `PA_…` id, new for every join.
    pub sid: String,
    /// Identity from the join token; unique within the room.
    pub identity: String,
    /// Display name.
    pub name: String,
    /// Kind.
    pub kind: ParticipantKind,
    /// Opaque metadata string.
    pub metadata: String,
    /// Key/value attributes.
    pub attributes: BTreeMap<String, String>,
    /// Audio tracks the participant publishes (bound to media).
    pub tracks: Vec<TrackPublication>,
    /// Media is connected (LiveKit's `ACTIVE` state): audio sent to it now is heard. In-process
    /// participants are active from the start.
    pub active: bool,
}

/// Why a participant left or was made to leave (LiveKit's `DisconnectReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// The participant left on its own.
    ClientInitiated,
    /// Someone joined with the same identity.
    DuplicateIdentity,
    /// The server is shutting down.
    ServerShutdown,
    /// Removed by the in-process participant or an operator.
    ParticipantRemoved,
    /// The room was closed.
    RoomDeleted,
    /// The signal connection broke or went silent.
    SignalClosed,
    /// Sent something the room could not accept.
    StateMismatch,
    /// Media could not be established.
    MediaFailure,
}

impl LeaveReason {
    pub(crate) fn to_proto(self) -> proto::DisconnectReason {
        use proto::DisconnectReason as R;
        match self {
            LeaveReason::ClientInitiated => R::ClientInitiated,
            LeaveReason::DuplicateIdentity => R::DuplicateIdentity,
            LeaveReason::ServerShutdown => R::ServerShutdown,
            LeaveReason::ParticipantRemoved => R::ParticipantRemoved,
            LeaveReason::RoomDeleted => R::RoomDeleted,
            LeaveReason::SignalClosed => R::SignalClose,
            LeaveReason::StateMismatch => R::StateMismatch,
            LeaveReason::MediaFailure => R::MediaFailure,
        }
    }
}

/// One Opus frame of a subscribed track, as it arrived.
#[derive(Debug, Clone)]
pub struct RemoteAudioFrame {
    /// Identity of the publisher.
    pub participant_identity: Arc<str>,
    /// The track's `TR_…` id.
    pub track_sid: Arc<str>,
    /// RTP timestamp on the 48 kHz clock, extended to 64 bits (no wrap).
    pub rtp_timestamp: u64,
    /// When the packet was read from the socket (or produced, for in-process publishers).
    pub received_at: Instant,
    /// The Opus payload.
    pub opus: Bytes,
}

/// A user data message (LiveKit `UserPacket`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataMessage {
    /// Sender identity (filled in by the room; never trusted from the sender).
    pub from_identity: String,
    /// Sender participant id.
    pub from_sid: String,
    /// Topic, when the sender set one.
    pub topic: Option<String>,
    /// Payload bytes.
    pub payload: Bytes,
    /// Whether it travelled on the reliable channel.
    pub reliable: bool,
}

/// An incoming RPC call of a method the in-process participant registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcInvocation {
    /// Request id.
    pub request_id: String,
    /// Identity of the caller.
    pub caller_identity: String,
    /// The method.
    pub method: String,
    /// The payload.
    pub payload: String,
    /// How long the caller waits.
    pub response_timeout: Duration,
}

/// What the in-process participant sees happen in its room.
#[derive(Debug, Clone)]
pub enum RoomEvent {
    /// Someone joined (or was already there when this participant joined).
    ParticipantJoined(Participant),
    /// Someone's name, metadata, attributes, tracks or mute state changed.
    ParticipantUpdated {
        /// The participant after the change.
        participant: Participant,
        /// Attribute keys whose value changed, appeared or disappeared.
        changed_attributes: Vec<String>,
    },
    /// Someone left.
    ParticipantLeft {
        /// Their identity.
        identity: String,
        /// Their participant id.
        sid: String,
        /// Why.
        reason: LeaveReason,
    },
    /// A track became available; its audio now arrives as [`RoomEvent::AudioFrame`].
    TrackPublished {
        /// Publisher identity.
        participant_identity: String,
        /// The track.
        track: TrackPublication,
    },
    /// A track went away.
    TrackUnpublished {
        /// Publisher identity.
        participant_identity: String,
        /// The track's id.
        track_sid: String,
    },
    /// One subscribed audio frame.
    AudioFrame(RemoteAudioFrame),
    /// A user data message.
    Data(DataMessage),
    /// This participant was removed from the room (duplicate identity, operator, shutdown).
    Disconnected {
        /// Why.
        reason: LeaveReason,
    },
    /// A call of a method this participant registered; answer it with
    /// `LocalParticipant::respond_rpc` (the room acknowledged it already).
    RpcRequest(RpcInvocation),
    /// A command this participant posted without waiting failed in the room.
    CommandFailed {
        /// The command (`send_data`, `set_attributes`, `send_rpc`, …).
        command: &'static str,
        /// Why.
        error: crate::core::LocalError,
    },
}
