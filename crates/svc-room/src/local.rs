//! The in-process participant: how the session runtime sits in a room without WebRTC. It
//! receives subscribed audio as Opus frames (and decodes them with [`RemoteAudioDecoder`]),
//! publishes PCM that the room encodes and paces, sends and receives data, changes attributes,
//! and performs and answers RPC (LiveKit's v1 packets; the participant advertises
//! `client_protocol = 0`, so clients use v1 toward it).
//!
//! No task sits between the room and the application: the room's actor writes events straight
//! into the participant's one channel, read with [`LocalParticipant::next_event`], and keeps the
//! RPC bookkeeping itself (`crate::rpc`): requests for a method the participant registered
//! arrive as [`RoomEvent::RpcRequest`] and are answered with [`LocalParticipant::respond_rpc`];
//! the participant's own calls ([`LocalParticipant::perform_rpc`]) are resolved by the actor.
//!
//! Commands come in two kinds. Requests (`publish_audio`, `send_data`, `set_attributes`, …) go
//! on the room's command queue and are awaited. Posts (`try_send_data`, `try_set_attributes`,
//! `respond_rpc`, [`LocalAudioTrack::try_push_opus_at`]) go on the room's post queue and nobody
//! waits: a full queue refuses them at once, and a failure in the room comes back later as
//! [`RoomEvent::CommandFailed`] (a frame's as a count on its track). Posts fit a participant
//! whose room is across a network as well as one in the same process.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use livekit_protocol as proto;
use tokio::sync::{mpsc, oneshot};

use crate::actor::{LocalPost, RoomCommand};
use crate::core::{Key, LocalCommand, LocalError, LocalReply, TrackCounters};
pub use crate::model::RpcInvocation;
use crate::model::{RemoteAudioFrame, RoomEvent};
use crate::server::RoomError;

/// Largest RPC payload, each way (LiveKit v1).
pub const MAX_RPC_PAYLOAD_BYTES: usize = 15_360;

/// Inbound media lost on its way to an in-process participant, by where it was lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboundDrops {
    /// Datagrams the room's queue refused because the room fell behind its UDP socket (the
    /// media of every publisher in the room, which for a session is its user).
    pub room_queue: u64,
    /// Audio frames this participant's own queues refused because it fell behind the room.
    pub participant_queue: u64,
}

/// What became of the pre-encoded frames handed to an in-process track
/// ([`LocalAudioTrack::try_push_opus_at`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboundMedia {
    /// Frames lost: the room's post queue was full, the room was gone, or it refused them.
    pub dropped: u64,
    /// Frames the room sent more than [`crate::core::LATE_AFTER`] after their media time.
    pub late: u64,
}

/// What a participant shares with its room's actor: where [`InboundDrops`] are counted (the
/// actor and its UDP demultiplexer add what they drop, without a lock) and the RPC methods the
/// participant answers.
#[derive(Debug, Default)]
pub(crate) struct LocalShared {
    /// The room's count of refused datagrams, handed over when the participant joins.
    pub(crate) room_queue: OnceLock<Arc<AtomicU64>>,
    /// Audio frames for this participant that its full event queue refused.
    pub(crate) audio_dropped: AtomicU64,
    /// Methods registered with [`LocalParticipant::register_rpc_method`].
    pub(crate) rpc_methods: Mutex<HashSet<String>>,
}

impl LocalShared {
    /// Whether the participant answers `method`.
    pub(crate) fn answers(&self, method: &str) -> bool {
        self.rpc_methods.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(method)
    }

    fn snapshot(&self) -> InboundDrops {
        InboundDrops {
            room_queue: self.room_queue.get().map_or(0, |count| count.load(Ordering::Relaxed)),
            participant_queue: self.audio_dropped.load(Ordering::Relaxed),
        }
    }
}

/// LiveKit RPC error codes.
pub mod rpc_codes {
    /// The callee has no handler for the method.
    pub const UNSUPPORTED_METHOD: u32 = 1400;
    /// No participant with that identity.
    pub const RECIPIENT_NOT_FOUND: u32 = 1401;
    /// The request payload is over the limit.
    pub const REQUEST_PAYLOAD_TOO_LARGE: u32 = 1402;
    /// The handler failed.
    pub const APPLICATION_ERROR: u32 = 1500;
    /// No acknowledgement in time.
    pub const CONNECTION_TIMEOUT: u32 = 1501;
    /// No response in time.
    pub const RESPONSE_TIMEOUT: u32 = 1502;
    /// The callee left before answering.
    pub const RECIPIENT_DISCONNECTED: u32 = 1503;
    /// The response payload is over the limit.
    pub const RESPONSE_PAYLOAD_TOO_LARGE: u32 = 1504;
    /// The request could not be sent.
    pub const SEND_FAILED: u32 = 1505;
}

/// An RPC failure, with LiveKit's code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rpc error {code}: {message}")]
pub struct RpcError {
    /// LiveKit's code ([`rpc_codes`]).
    pub code: u32,
    /// Message (≤ 256 bytes on the wire).
    pub message: String,
    /// Optional data.
    pub data: String,
}

impl RpcError {
    /// An error with a code and message.
    pub fn new(code: u32, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: String::new() }
    }

    pub(crate) fn to_proto(&self) -> proto::RpcError {
        proto::RpcError {
            code: self.code,
            message: truncate(&self.message, 256),
            data: truncate(&self.data, MAX_RPC_PAYLOAD_BYTES),
        }
    }
}

fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A participant inside the room's process.
pub struct LocalParticipant {
    room: String,
    identity: String,
    key: Key,
    commands: mpsc::Sender<RoomCommand>,
    posts: mpsc::Sender<LocalPost>,
    events: mpsc::Receiver<RoomEvent>,
    shared: Arc<LocalShared>,
}

impl std::fmt::Debug for LocalParticipant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalParticipant").field("room", &self.room).field("identity", &self.identity).finish()
    }
}

impl LocalParticipant {
    pub(crate) fn new(
        room: String,
        identity: String,
        key: Key,
        (commands, posts): (mpsc::Sender<RoomCommand>, mpsc::Sender<LocalPost>),
        events: mpsc::Receiver<RoomEvent>,
        shared: Arc<LocalShared>,
    ) -> LocalParticipant {
        LocalParticipant { room, identity, key, commands, posts, events, shared }
    }

    /// Inbound media lost so far before this participant read it.
    pub fn inbound_drops(&self) -> InboundDrops {
        self.shared.snapshot()
    }

    /// The room's name.
    pub fn room(&self) -> &str {
        &self.room
    }

    /// This participant's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The next room event; `None` once this participant has left or the room closed.
    pub async fn next_event(&mut self) -> Option<RoomEvent> {
        self.events.recv().await
    }

    async fn command(&self, command: LocalCommand) -> Result<LocalReply, RoomError> {
        send_command(&self.commands, self.key, command).await
    }

    /// Publishes a microphone audio track fed with [`LocalAudioTrack::push_pcm`].
    pub async fn publish_audio(&self, name: &str) -> Result<LocalAudioTrack, RoomError> {
        match self.command(LocalCommand::PublishAudio { name: name.to_owned() }).await? {
            LocalReply::TrackPublished { track_sid, counters } => Ok(LocalAudioTrack {
                sid: Arc::from(track_sid),
                key: self.key,
                commands: self.commands.clone(),
                posts: self.posts.clone(),
                counters,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// Sends a user data packet (to everyone else when `destinations` is empty).
    pub async fn send_data(
        &self,
        payload: impl Into<Bytes>,
        topic: Option<&str>,
        reliable: bool,
        destinations: &[String],
    ) -> Result<(), RoomError> {
        expect_done(self.command(data_command(payload.into(), topic, reliable, destinations)).await?)
    }

    /// [`LocalParticipant::send_data`] without waiting: refused at once when the room's post
    /// queue is full or the room is gone; a refusal by the room (a packet over the limit) comes
    /// back as [`RoomEvent::CommandFailed`].
    pub fn try_send_data(
        &self,
        payload: impl Into<Bytes>,
        topic: Option<&str>,
        reliable: bool,
        destinations: &[String],
    ) -> Result<(), RoomError> {
        try_post(&self.posts, self.key, data_command(payload.into(), topic, reliable, destinations))
    }

    /// [`LocalParticipant::set_attributes`] without waiting; failures as for
    /// [`LocalParticipant::try_send_data`].
    pub fn try_set_attributes(&self, attributes: BTreeMap<String, String>) -> Result<(), RoomError> {
        try_post(&self.posts, self.key, LocalCommand::SetAttributes { attributes })
    }

    /// Sets (empty value: deletes) attributes; everyone sees one update.
    pub async fn set_attributes(&self, attributes: BTreeMap<String, String>) -> Result<(), RoomError> {
        expect_done(self.command(LocalCommand::SetAttributes { attributes }).await?)
    }

    /// Replaces the metadata string.
    pub async fn set_metadata(&self, metadata: &str) -> Result<(), RoomError> {
        expect_done(self.command(LocalCommand::SetMetadata { metadata: metadata.to_owned() }).await?)
    }

    /// Removes another participant (it gets a leave with `PARTICIPANT_REMOVED`). Returns whether
    /// it was in the room.
    pub async fn remove_participant(&self, identity: &str) -> Result<bool, RoomError> {
        match self.command(LocalCommand::RemoveParticipant { identity: identity.to_owned() }).await? {
            LocalReply::Removed(found) => Ok(found),
            other => Err(unexpected(other)),
        }
    }

    /// Leaves the room.
    pub async fn leave(&self) -> Result<(), RoomError> {
        expect_done(self.command(LocalCommand::Leave).await?)
    }

    /// Answers calls of `method`: each arrives as [`RoomEvent::RpcRequest`] (the room has
    /// acknowledged it already) and is answered with [`LocalParticipant::respond_rpc`]. Calls of
    /// methods nobody registered are refused by the room (`UNSUPPORTED_METHOD`).
    pub fn register_rpc_method(&self, method: &str) {
        self.shared.rpc_methods.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(method.to_owned());
    }

    /// Answers the call `request_id` of `caller_identity` without waiting (a payload over
    /// [`MAX_RPC_PAYLOAD_BYTES`] is answered with LiveKit's error instead); failures as for
    /// [`LocalParticipant::try_send_data`].
    pub fn respond_rpc(
        &self,
        caller_identity: &str,
        request_id: &str,
        result: Result<String, RpcError>,
    ) -> Result<(), RoomError> {
        let value = crate::rpc::response(request_id.to_owned(), result);
        try_post(&self.posts, self.key, LocalCommand::SendRpc { destination: caller_identity.to_owned(), value })
    }

    /// Calls `method` on `destination` and waits for its answer.
    pub async fn perform_rpc(
        &self,
        destination: &str,
        method: &str,
        payload: &str,
        response_timeout: Duration,
    ) -> Result<String, RpcError> {
        crate::rpc::perform(&self.commands, self.key, destination, method, payload, response_timeout).await
    }
}

/// An audio track published by an in-process participant. The room encodes the PCM to Opus
/// and releases one 20 ms frame every 20 ms.
#[derive(Debug, Clone)]
pub struct LocalAudioTrack {
    sid: Arc<str>,
    key: Key,
    commands: mpsc::Sender<RoomCommand>,
    posts: mpsc::Sender<LocalPost>,
    counters: Arc<TrackCounters>,
}

impl LocalAudioTrack {
    /// The track's `TR_…` id.
    pub fn sid(&self) -> &str {
        &self.sid
    }

    /// Queues 48 kHz mono PCM for playout. Fails, without queueing any of it, when the queue's
    /// bound would be exceeded.
    pub async fn push_pcm(&self, pcm: Vec<i16>) -> Result<(), RoomError> {
        let command = LocalCommand::PushAudio { track_sid: self.sid.to_string(), pcm };
        expect_done(send_command(&self.commands, self.key, command).await?)
    }

    /// Sends one pre-encoded 20 ms Opus frame now, unpaced: for relaying frames that already
    /// arrive in real time. Feed a track with either this or [`LocalAudioTrack::push_pcm`].
    pub async fn push_opus(&self, opus: Bytes) -> Result<(), RoomError> {
        let command = LocalCommand::PushOpus { track_sid: self.sid.clone(), opus, media_time: None };
        expect_done(send_command(&self.commands, self.key, command).await?)
    }

    /// [`LocalAudioTrack::push_opus`] for a sender with its own media clock: `media_time` is when
    /// the frame is due to be heard, and RTP time follows it (frames due 20 ms apart are 960
    /// ticks apart, however late each is handed over).
    pub async fn push_opus_at(&self, opus: Bytes, media_time: std::time::Instant) -> Result<(), RoomError> {
        let command = LocalCommand::PushOpus { track_sid: self.sid.clone(), opus, media_time: Some(media_time) };
        expect_done(send_command(&self.commands, self.key, command).await?)
    }

    /// [`LocalAudioTrack::push_opus_at`] without waiting: the frame joins the room's bounded
    /// post queue and nobody waits for the room to take it. A full queue (the room is behind)
    /// or a closed room drops the frame, counted in [`LocalAudioTrack::outbound`] like the
    /// frames the room itself refuses and those it sends late; the error says which.
    pub fn try_push_opus_at(&self, opus: Bytes, media_time: std::time::Instant) -> Result<(), RoomError> {
        let command = LocalCommand::PushOpus { track_sid: self.sid.clone(), opus, media_time: Some(media_time) };
        try_post(&self.posts, self.key, command).inspect_err(|_| {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// The frames of [`LocalAudioTrack::try_push_opus_at`] lost or sent late so far.
    pub fn outbound(&self) -> OutboundMedia {
        OutboundMedia {
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            late: self.counters.late.load(Ordering::Relaxed),
        }
    }

    /// Drops queued audio (barge-in) and returns how many samples were never played.
    pub async fn clear(&self) -> Result<usize, RoomError> {
        match send_command(&self.commands, self.key, LocalCommand::ClearAudio { track_sid: self.sid.to_string() })
            .await?
        {
            LocalReply::Cleared { discarded_samples } => Ok(discarded_samples),
            other => Err(unexpected(other)),
        }
    }

    /// Samples released to listeners so far (what they have heard, up to network delay).
    pub fn played_samples(&self) -> u64 {
        self.counters.played_samples.load(Ordering::Relaxed)
    }

    /// Stops publishing.
    pub async fn unpublish(self) -> Result<(), RoomError> {
        expect_done(
            send_command(&self.commands, self.key, LocalCommand::UnpublishTrack { track_sid: self.sid.to_string() })
                .await?,
        )
    }
}

/// Decodes one subscribed track's frames into 48 kHz mono PCM, concealing lost frames.
pub struct RemoteAudioDecoder {
    decoder: svc_audio::TrackDecoder,
}

impl std::fmt::Debug for RemoteAudioDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAudioDecoder").finish_non_exhaustive()
    }
}

impl RemoteAudioDecoder {
    /// A decoder for one track.
    pub fn new() -> Result<RemoteAudioDecoder, svc_audio::AudioError> {
        Ok(RemoteAudioDecoder { decoder: svc_audio::TrackDecoder::new()? })
    }

    /// Appends the frame's PCM (plus concealment for any gap before it) to `out`.
    pub fn decode(&mut self, frame: &RemoteAudioFrame, out: &mut Vec<i16>) -> Result<(), svc_audio::AudioError> {
        if frame.opus.is_empty() {
            return Ok(());
        }
        self.decoder.push(frame.rtp_timestamp, &frame.opus, out).map(|_| ())
    }
}

async fn send_command(
    commands: &mpsc::Sender<RoomCommand>,
    key: Key,
    command: LocalCommand,
) -> Result<LocalReply, RoomError> {
    let (reply, answer) = oneshot::channel();
    commands.send(RoomCommand::Local { key, command, reply }).await.map_err(|_| RoomError::RoomClosed)?;
    match answer.await.map_err(|_| RoomError::RoomClosed)? {
        LocalReply::Failed(error) => Err(RoomError::Local(error)),
        reply => Ok(reply),
    }
}

/// The command of a data packet, waited for or posted.
fn data_command(payload: Bytes, topic: Option<&str>, reliable: bool, destinations: &[String]) -> LocalCommand {
    LocalCommand::SendData { payload, topic: topic.map(str::to_owned), reliable, destinations: destinations.to_vec() }
}

/// Hands a command to the room without waiting: refused at once when the room's post queue is
/// full or the room is gone.
fn try_post(posts: &mpsc::Sender<LocalPost>, key: Key, command: LocalCommand) -> Result<(), RoomError> {
    posts.try_send(LocalPost { key, command }).map_err(|error| match error {
        mpsc::error::TrySendError::Full(_) => RoomError::Busy,
        mpsc::error::TrySendError::Closed(_) => RoomError::RoomClosed,
    })
}

fn expect_done(reply: LocalReply) -> Result<(), RoomError> {
    match reply {
        LocalReply::Done => Ok(()),
        other => Err(unexpected(other)),
    }
}

fn unexpected(reply: LocalReply) -> RoomError {
    tracing::error!(?reply, "unexpected reply from the room");
    RoomError::Local(LocalError::NotInRoom)
}
