//! [`RoomClient`]: a LiveKit client in Rust over str0m — what an official SDK does on the wire,
//! reduced to audio and data.
//!
//! It speaks LiveKit's v0 signalling (research/livekit.md §2–§3, §7): a WebSocket to
//! `<url>/rtc?access_token=…&auto_subscribe=1&protocol=16&client_protocol=0&sdk=rust` carrying
//! binary protobuf `SignalRequest`/`SignalResponse`, and two peer connections:
//!
//! - the **subscriber** PC, offered by the server (which is ICE-lite): we answer with a full-ICE,
//!   controlling str0m [`Rtc`]. It carries the server-created `_reliable`/`_lossy` data channels
//!   and one sendonly Opus m-line per subscribed track, whose msid is `<PA_sid>|<TR_sid>`.
//! - the **publisher** PC, offered by us right after the join (LiveKit's "fast publish"): the
//!   `_reliable` (ordered, reliable) and `_lossy` (unordered, no retransmits) data channels, and,
//!   after [`RoomClient::publish_audio`] sent `add_track` and got `track_published`, a sendonly
//!   Opus m-line whose msid track id is the `add_track` `cid` (how the server binds the m-line to
//!   the publication).
//!
//! Each PC has its own UDP socket: the server tells a participant's two connections apart by the
//! client's address, as it does for browsers.
//!
//! # Shape
//!
//! By layer, as the room is: the protocol lives in `ClientCore` (`core.rs`), a sans-IO state
//! machine (no sockets, no clock, no randomness: every input carries `now`; outputs are polled),
//! in the style of the room's own [`crate::core`]. One tokio task — the IO shell (`shell.rs`) —
//! owns the core, the WebSocket's write half and both UDP sockets; a small reader task decodes
//! incoming signal frames for it, and the [`RoomClient`] handle (`handle.rs`) talks to it over a
//! bounded channel. str0m's rule holds in one place for the client and the room alike: after
//! every mutation of an `Rtc`, `crate::rtc::flush` polls it until `Timeout`.
//!
//! # Use
//!
//! ```no_run
//! # async fn demo(token: String, opus_frames: Vec<Vec<u8>>) -> Result<(), svc_room::client::ClientError> {
//! use svc_room::client::{ClientEvent, ClientOptions, RoomClient};
//! let mut client = RoomClient::connect("ws://127.0.0.1:8080/room", &token, ClientOptions::default()).await?;
//! client.publish_audio("microphone").await?;
//! let audio = client.audio_sender();
//! for (k, frame) in opus_frames.into_iter().enumerate() {
//!     audio.send_opus(960 * k as u64, frame)?; // one 20 ms frame every 20 ms, paced by the caller
//! }
//! client.send_data(b"hello".to_vec(), Some("chat"), true, &[]).await?;
//! while let Some(event) = client.next_event().await {
//!     if let ClientEvent::AudioFrame(frame) = event { /* frame.opus, frame.received_at */ }
//! }
//! # Ok(()) }
//! ```
//!
//! RPC requests are answered as LiveKit's SDKs answer them: each is acknowledged at once, one for
//! a method in [`ClientOptions::rpc_methods`] becomes a [`ClientEvent::RpcRequest`] to answer
//! with [`RoomClient::try_respond_rpc`], any other is refused (unsupported method). Data,
//! attributes and RPC answers can be handed over without waiting (`try_*`), their failures
//! coming back as [`ClientEvent::CommandFailed`]: what an agent needs (`svc-session`'s
//! `ExternalRoom`).
//!
//! `wss://` URLs are verified with the webpki roots (or [`ClientOptions::tls`]).
//!
//! Not supported (yet): resume/reconnect, TURN, video, RPC calls of our own, and more than one
//! audio track.

pub(crate) mod core;
mod handle;
mod shell;

pub use handle::{
    AudioSender, ClientAudioFrame, ClientData, ClientError, ClientEvent, ClientEvents, ClientOptions, ClientStats,
    JoinInfo, RoomClient,
};
