//! The embedded media room, LiveKit-compatible so official LiveKit client SDKs join it unchanged.
//!
//! Today this crate holds the room access tokens: LiveKit's JWT format, minted by session start
//! for the user's participant and verified by the room server. The signal server, WebRTC and the
//! in-process participant API land here next (issue 4).

pub mod token;

pub use token::{RoomCredentials, RoomGrant, RoomToken, RoomTokenError};
