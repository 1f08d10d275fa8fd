//! The session runtime: what happens after a session start, until the session ends.
//!
//! - [`core`]: [`core::SessionCore`], the sans-IO session state machine (readiness, input binding,
//!   turns and markers, heard transcripts, tools, hooks, the cap, chunking, usage), tested in
//!   virtual time. It never does IO and never reads the clock.
//! - [`actor`]: [`actor::SessionActor`], one task per session that owns the core, the room
//!   connection, the adapter's channels, the user-audio decoder and the recording.
//! - [`room`]: [`room::AgentRoom`], the small interface to the media room (the embedded room
//!   today: [`room::EmbeddedRoom`]), including the `svc.tool_result` RPC.
//! - [`input`], [`recording`], [`persist`]: the user's audio on its way in, the stereo recording,
//!   and the per-session writer task.
//! - [`media`]: what each media path dropped or delivered late, per session and summed.
//! - [`runtime`]: [`runtime::Runtime`], which starts sessions and ends them all at shutdown.
//! - [`external_room`], [`worker`]: the agent in a room on a LiveKit server, and this node as
//!   that server's agent worker (the sessions come from its dispatch); [`phone_call`]: a dial
//!   placed by that server, followed from its phone participant's attributes.

pub mod actor;
pub mod control;
pub mod core;
pub mod external_room;
pub mod input;
pub mod media;
pub mod persist;
pub mod phone_call;
pub mod recording;
pub mod room;
pub mod runtime;
pub mod worker;

pub use runtime::{
    DialError, DialRequest, EndError, Runtime, RuntimeConfig, RuntimeError, SessionRequest, SessionRooms,
};

/// Topic of the runtime's data packets (clients may send with any topic or none).
pub const DATA_TOPIC: &str = "svc";
