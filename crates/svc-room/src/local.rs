//! The in-process participant: how the session runtime sits in a room without WebRTC. It
//! receives subscribed audio as Opus frames (and decodes them with [`RemoteAudioDecoder`]),
//! publishes PCM that the room encodes and paces, sends and receives data, changes attributes,
//! and performs and answers RPC (LiveKit's v1 packets; the participant advertises
//! `client_protocol = 0`, so clients use v1 toward it).
//!
//! A small pump task per participant sits between the room and the application: it turns RPC
//! packets into calls on registered handlers and results of pending calls, and forwards every
//! other event. The application reads events with [`LocalParticipant::next_event`].

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use livekit_protocol as proto;
use tokio::sync::{mpsc, oneshot};

use crate::actor::{LocalPost, RoomCommand};
use crate::core::{Key, LocalCommand, LocalError, LocalOutput, LocalReply, TrackCounters};
use crate::model::{RemoteAudioFrame, RoomEvent};
use crate::server::RoomError;

/// Largest RPC payload, each way (LiveKit v1).
pub const MAX_RPC_PAYLOAD_BYTES: usize = 15_360;
/// How long a callee has to acknowledge a request (LiveKit's client value).
const RPC_ACK_TIMEOUT: Duration = Duration::from_secs(7);
/// Events buffered for the application.
const EVENT_QUEUE: usize = 2048;

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

/// Where [`InboundDrops`] are counted: the room's actor, its UDP demultiplexer and the
/// participant's pump each add what they drop, without a lock.
#[derive(Debug, Default)]
pub(crate) struct LocalCounters {
    /// The room's count of refused datagrams, handed over when the participant joins.
    pub(crate) room_queue: OnceLock<Arc<AtomicU64>>,
    /// Audio frames for this participant that a full queue refused.
    pub(crate) audio_dropped: AtomicU64,
}

impl LocalCounters {
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

    fn to_proto(&self) -> proto::RpcError {
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

/// An incoming RPC call.
#[derive(Debug, Clone)]
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

type RpcFuture = Pin<Box<dyn Future<Output = Result<String, RpcError>> + Send>>;
type RpcHandler = Arc<dyn Fn(RpcInvocation) -> RpcFuture + Send + Sync>;

struct PendingCall {
    destination: String,
    acked: Option<oneshot::Sender<()>>,
    response: Option<oneshot::Sender<Result<String, RpcError>>>,
}

#[derive(Default)]
struct RpcState {
    handlers: HashMap<String, RpcHandler>,
    pending: HashMap<String, PendingCall>,
    present: std::collections::HashSet<String>,
}

/// A participant inside the room's process.
pub struct LocalParticipant {
    room: String,
    identity: String,
    key: Key,
    commands: mpsc::Sender<RoomCommand>,
    posts: mpsc::Sender<LocalPost>,
    events: mpsc::Receiver<RoomEvent>,
    rpc: Arc<Mutex<RpcState>>,
    counters: Arc<LocalCounters>,
}

impl std::fmt::Debug for LocalParticipant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalParticipant").field("room", &self.room).field("identity", &self.identity).finish()
    }
}

impl LocalParticipant {
    pub(crate) fn start(
        room: String,
        identity: String,
        key: Key,
        commands: mpsc::Sender<RoomCommand>,
        posts: mpsc::Sender<LocalPost>,
        outputs: mpsc::Receiver<LocalOutput>,
        counters: Arc<LocalCounters>,
    ) -> LocalParticipant {
        let (events_in, events) = mpsc::channel(EVENT_QUEUE);
        let rpc = Arc::new(Mutex::new(RpcState::default()));
        tokio::spawn(pump(outputs, events_in, rpc.clone(), commands.clone(), key, counters.clone()));
        LocalParticipant { room, identity, key, commands, posts, events, rpc, counters }
    }

    /// Inbound media lost so far before this participant read it.
    pub fn inbound_drops(&self) -> InboundDrops {
        self.counters.snapshot()
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
        let command = LocalCommand::SendData {
            payload: payload.into(),
            topic: topic.map(str::to_owned),
            reliable,
            destinations: destinations.to_vec(),
        };
        expect_done(self.command(command).await?)
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

    /// Answers calls of `method` with `handler` (replacing an earlier one).
    pub fn register_rpc_method<F, Fut>(&self, method: &str, handler: F)
    where
        F: Fn(RpcInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, RpcError>> + Send + 'static,
    {
        let handler: RpcHandler = Arc::new(move |invocation| Box::pin(handler(invocation)));
        lock(&self.rpc).handlers.insert(method.to_owned(), handler);
    }

    /// Calls `method` on `destination` and waits for its answer.
    pub async fn perform_rpc(
        &self,
        destination: &str,
        method: &str,
        payload: &str,
        response_timeout: Duration,
    ) -> Result<String, RpcError> {
        if payload.len() > MAX_RPC_PAYLOAD_BYTES {
            return Err(RpcError::new(rpc_codes::REQUEST_PAYLOAD_TOO_LARGE, "request payload too large"));
        }
        let request_id = uuid::Uuid::new_v4().to_string();
        let (acked_tx, acked) = oneshot::channel();
        let (response_tx, response) = oneshot::channel();
        {
            let mut state = lock(&self.rpc);
            if !state.present.contains(destination) {
                return Err(RpcError::new(rpc_codes::RECIPIENT_NOT_FOUND, "recipient not found"));
            }
            state.pending.insert(
                request_id.clone(),
                PendingCall { destination: destination.to_owned(), acked: Some(acked_tx), response: Some(response_tx) },
            );
        }
        let request = proto::data_packet::Value::RpcRequest(proto::RpcRequest {
            id: request_id.clone(),
            method: method.to_owned(),
            payload: payload.to_owned(),
            response_timeout_ms: u32::try_from(response_timeout.as_millis()).unwrap_or(u32::MAX),
            version: 1,
            compressed_payload: Vec::new(),
        });
        let sent = self.command(LocalCommand::SendRpc { destination: destination.to_owned(), value: request }).await;
        let result = match sent {
            Ok(LocalReply::Done) => {
                match tokio::time::timeout(RPC_ACK_TIMEOUT, acked).await {
                    Ok(Ok(())) => match tokio::time::timeout(response_timeout, response).await {
                        Ok(Ok(result)) => result,
                        Ok(Err(_)) => Err(RpcError::new(rpc_codes::RECIPIENT_DISCONNECTED, "recipient disconnected")),
                        Err(_) => Err(RpcError::new(rpc_codes::RESPONSE_TIMEOUT, "response timeout")),
                    },
                    // The response may overtake the ack; the pump then resolves both.
                    Ok(Err(_)) => Err(RpcError::new(rpc_codes::RECIPIENT_DISCONNECTED, "recipient disconnected")),
                    Err(_) => Err(RpcError::new(rpc_codes::CONNECTION_TIMEOUT, "connection timeout")),
                }
            }
            _ => Err(RpcError::new(rpc_codes::SEND_FAILED, "failed to send the request")),
        };
        lock(&self.rpc).pending.remove(&request_id);
        result
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

fn lock(state: &Mutex<RpcState>) -> std::sync::MutexGuard<'_, RpcState> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Between the room and the application: RPC bookkeeping, then forwarding.
async fn pump(
    mut outputs: mpsc::Receiver<LocalOutput>,
    events: mpsc::Sender<RoomEvent>,
    rpc: Arc<Mutex<RpcState>>,
    commands: mpsc::Sender<RoomCommand>,
    key: Key,
    counters: Arc<LocalCounters>,
) {
    while let Some(output) = outputs.recv().await {
        match output {
            LocalOutput::Event(event) => {
                match &event {
                    RoomEvent::ParticipantJoined(participant) => {
                        lock(&rpc).present.insert(participant.identity.clone());
                    }
                    RoomEvent::ParticipantLeft { identity, .. } => {
                        let mut state = lock(&rpc);
                        state.present.remove(identity);
                        // Calls to someone who left fail now rather than at their timeout.
                        state.pending.retain(|_, call| call.destination != *identity);
                    }
                    _ => {}
                }
                let audio = matches!(event, RoomEvent::AudioFrame(_));
                let disconnected = matches!(event, RoomEvent::Disconnected { .. });
                if audio {
                    // Audio is not worth blocking for: a reader that falls behind loses frames
                    // (counted); one that is gone loses nothing it could still read.
                    if let Err(mpsc::error::TrySendError::Full(_)) = events.try_send(event) {
                        counters.audio_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                } else if events.send(event).await.is_err() {
                    // The application dropped its participant; keep answering RPC regardless.
                }
                if disconnected {
                    break;
                }
            }
            LocalOutput::Rpc { from_identity, packet } => handle_rpc(&rpc, &commands, key, from_identity, packet),
        }
    }
    // Whoever still waits on a call learns the room is gone.
    lock(&rpc).pending.clear();
}

fn handle_rpc(
    rpc: &Arc<Mutex<RpcState>>,
    commands: &mpsc::Sender<RoomCommand>,
    key: Key,
    from_identity: String,
    packet: proto::data_packet::Value,
) {
    match packet {
        proto::data_packet::Value::RpcRequest(request) => {
            let commands = commands.clone();
            let handler = lock(rpc).handlers.get(&request.method).cloned();
            tokio::spawn(async move {
                let ack = proto::data_packet::Value::RpcAck(proto::RpcAck { request_id: request.id.clone() });
                // The room is closing; the acknowledgement has nobody to reach.
                let _ = send_command(
                    &commands,
                    key,
                    LocalCommand::SendRpc { destination: from_identity.clone(), value: ack },
                )
                .await;
                let result = if request.version != 1 {
                    Err(RpcError::new(1404, "unsupported rpc version"))
                } else if request.payload.len() > MAX_RPC_PAYLOAD_BYTES {
                    Err(RpcError::new(rpc_codes::REQUEST_PAYLOAD_TOO_LARGE, "request payload too large"))
                } else if let Some(handler) = handler {
                    let timeout = Duration::from_millis(u64::from(request.response_timeout_ms.max(1000)));
                    let invocation = RpcInvocation {
                        request_id: request.id.clone(),
                        caller_identity: from_identity.clone(),
                        method: request.method.clone(),
                        payload: request.payload.clone(),
                        response_timeout: timeout,
                    };
                    match tokio::time::timeout(timeout, handler(invocation)).await {
                        Ok(Ok(payload)) if payload.len() > MAX_RPC_PAYLOAD_BYTES => {
                            Err(RpcError::new(rpc_codes::RESPONSE_PAYLOAD_TOO_LARGE, "response payload too large"))
                        }
                        Ok(result) => result,
                        Err(_) => Err(RpcError::new(rpc_codes::RESPONSE_TIMEOUT, "handler timed out")),
                    }
                } else {
                    Err(RpcError::new(rpc_codes::UNSUPPORTED_METHOD, "Method not supported at destination"))
                };
                let value = match result {
                    Ok(payload) => proto::rpc_response::Value::Payload(payload),
                    Err(error) => proto::rpc_response::Value::Error(error.to_proto()),
                };
                let response = proto::data_packet::Value::RpcResponse(proto::RpcResponse {
                    request_id: request.id,
                    value: Some(value),
                });
                // The room is closing; the response has nobody to reach.
                let _ =
                    send_command(&commands, key, LocalCommand::SendRpc { destination: from_identity, value: response })
                        .await;
            });
        }
        proto::data_packet::Value::RpcAck(ack) => {
            let mut state = lock(rpc);
            if let Some(call) = state.pending.get_mut(&ack.request_id)
                && call.destination == from_identity
                && let Some(acked) = call.acked.take()
            {
                // The caller gave up waiting; nothing to tell it.
                let _ = acked.send(());
            }
        }
        proto::data_packet::Value::RpcResponse(response) => {
            let mut state = lock(rpc);
            if let Some(call) = state.pending.get_mut(&response.request_id) {
                if call.destination != from_identity {
                    return;
                }
                if let Some(acked) = call.acked.take() {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = acked.send(());
                }
                let result = match response.value {
                    Some(proto::rpc_response::Value::Payload(payload)) => Ok(payload),
                    Some(proto::rpc_response::Value::Error(error)) => {
                        Err(RpcError { code: error.code, message: error.message, data: error.data })
                    }
                    Some(proto::rpc_response::Value::CompressedPayload(_)) | None => {
                        Err(RpcError::new(rpc_codes::APPLICATION_ERROR, "unsupported response encoding"))
                    }
                };
                if let Some(response) = call.response.take() {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = response.send(result);
                }
            }
        }
        _ => {}
    }
}
