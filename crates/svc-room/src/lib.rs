//! The embedded media room, LiveKit-compatible so official LiveKit client SDKs join it unchanged.
//!
//! - [`token`]: LiveKit access tokens (mint and verify).
//! - [`RoomServer`]: the signal server (`/rtc`, v0 protocol, binary protobuf over WebSocket),
//!   WebRTC through str0m (ICE-lite on one UDP port per host address, DTLS, SCTP data channels,
//!   Opus audio forwarded between participants: an audio SFU), and the room registry.
//! - LiveKit's server API (`twirp`): `RoomService`, `AgentDispatchService` and `SIP` (over a
//!   [`SipDialer`] the server installs) over Twirp, for the official server SDKs;
//!   and its webhooks (`webhook`): the rooms' events POSTed, signed, to configured URLs.
//! - [`LocalParticipant`]: the in-process participant API the session runtime uses to sit in a
//!   room without a WebRTC hop.
//!
//! Layering: [`core`] is the sans-IO room state machine (participants, peer connections, tracks,
//! data routing); `actor` runs one core per room on a task; `udp` demultiplexes datagrams to
//! rooms; `signal` is the HTTP/WebSocket edge; `local` is the in-process participant, whose RPC
//! bookkeeping the room's actor keeps (`rpc`).

mod actor;
mod agents;
pub mod client;
pub mod core;
mod ids;
mod local;
pub mod model;
mod rpc;
mod rtc;
mod server;
pub mod server_api;
mod signal;
#[cfg(test)]
mod sim;
mod sip;
mod stun;
pub mod token;
mod twirp;
mod udp;
mod wall_clock;
mod webhook;
pub mod worker;

pub use core::{AUDIO_REORDER_WAIT, LATE_AFTER, LocalError, RoomDescription, RoomOptions};
/// LiveKit's protocol types, as [`client`]'s events carry them.
pub use livekit_protocol as proto;
pub use local::{
    InboundDrops, LocalAudioTrack, LocalParticipant, MAX_RPC_PAYLOAD_BYTES, OutboundMedia, RemoteAudioDecoder,
    RpcError, RpcInvocation, rpc_codes,
};
pub use model::{
    DataMessage, LeaveReason, Participant, ParticipantKind, RemoteAudioFrame, RoomEvent, TrackPublication,
};
pub use server::{LocalJoinOptions, RoomError, RoomServer, RoomServerConfig};
pub use sip::{SipDial, SipDialError, SipDialer, SipTrunk};
pub use token::{RoomCredentials, RoomGrant, RoomToken, RoomTokenError, SipGrant};
pub use webhook::WebhookConfig;
