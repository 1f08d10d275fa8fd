//! The room actor: one task per room owns its [`RoomCore`] and carries out its outputs (signal
//! messages, datagrams, in-process events). Everything that touches a room goes through its
//! bounded command channel, or, for in-process participants' posts, its bounded post channel;
//! the task ends when the room closes or the core says it expired (empty for too long). It
//! also keeps the in-process participants' RPC bookkeeping (`crate::rpc`), so no task runs
//! beside it per participant or per call.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use livekit_protocol as proto;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agents::AgentDispatch;
use crate::core::{
    AdminAnswer, AdminCommand, AdminError, CoreOutput, JoinRequest, Key, LocalCommand, LocalOutput, LocalReply, PcRole,
    RoomCore, RoomDescription, SERVER_KEY,
};
use crate::local::{LocalShared, RpcError, rpc_codes};
use crate::model::{LeaveReason, RoomEvent};
use crate::rpc::{RpcCall, RpcCalls};
use crate::udp::{RoomId, UdpMux};
use crate::wall_clock::unix_ms;
use crate::webhook::Webhooks;

/// Commands a room accepts.
pub(crate) enum RoomCommand {
    JoinRemote {
        request: JoinRequest,
        signal: mpsc::Sender<proto::signal_response::Message>,
        reply: oneshot::Sender<Option<Key>>,
    },
    JoinLocal {
        request: JoinRequest,
        events: mpsc::Sender<RoomEvent>,
        shared: Arc<LocalShared>,
        reply: oneshot::Sender<Option<Key>>,
    },
    Signal {
        key: Key,
        message: proto::signal_request::Message,
    },
    SignalClosed {
        key: Key,
        reason: LeaveReason,
    },
    Datagram {
        key: Key,
        role: PcRole,
        source: SocketAddr,
        destination: SocketAddr,
        /// A slice of the receive loop's block (no allocation per datagram).
        contents: bytes::Bytes,
        received_at: Instant,
    },
    Local {
        key: Key,
        command: LocalCommand,
        reply: oneshot::Sender<LocalReply>,
    },
    Close {
        reason: LeaveReason,
    },
    /// An in-process participant calls another participant's RPC method.
    PerformRpc(RpcCall),
    /// A fire-and-forget command of an in-process participant (read from the posts queue).
    Post(LocalPost),
    /// Whether the room is full for this join (`/rtc/validate` explains a refused connect).
    IsFull {
        request: JoinRequest,
        reply: oneshot::Sender<bool>,
    },
    /// The server API asks what is in the room.
    Describe {
        reply: oneshot::Sender<RoomDescription>,
    },
    /// The server API changes something in the room.
    Admin {
        command: AdminCommand,
        reply: oneshot::Sender<Result<AdminAnswer, AdminError>>,
    },
}

/// A fire-and-forget command of an in-process participant: nobody waits for a reply. Posts have
/// a queue of their own, apart from the datagrams that fill the command queue when the room is
/// busy, and the actor takes them first, so a participant's frames and messages neither wait
/// behind a burst of datagrams nor make their sender wait.
#[derive(Debug)]
pub(crate) struct LocalPost {
    pub(crate) key: Key,
    pub(crate) command: LocalCommand,
}

/// Capacity of a room's command channel. Datagrams beyond it are dropped (like a congested
/// link); signal and local commands wait.
pub(crate) const ROOM_QUEUE: usize = 1024;
/// Signal messages queued for one client; a client that falls this far behind is disconnected.
pub(crate) const SIGNAL_QUEUE: usize = 256;
/// Events queued for one in-process participant; audio beyond it is dropped.
pub(crate) const LOCAL_QUEUE: usize = 2048;
/// Posts (frames, messages, attribute changes) queued from the room's in-process participants:
/// five seconds of one agent's frames. A post beyond it is refused at once, never waited for.
pub(crate) const POST_QUEUE: usize = 256;

/// An in-process participant as its room sees it: its one event channel, and what it shares
/// with the room (where what could not go is counted, the RPC methods it answers).
pub(crate) struct Local {
    events: mpsc::Sender<RoomEvent>,
    shared: Arc<LocalShared>,
}

pub(crate) struct RoomActor {
    pub(crate) id: RoomId,
    pub(crate) name: String,
    pub(crate) core: RoomCore,
    /// Where the core's webhook events go (none configured: the core builds none).
    pub(crate) webhooks: Option<Arc<Webhooks>>,
    /// Agent dispatch, told when an agent leaves.
    pub(crate) dispatch: AgentDispatch,
    pub(crate) commands: mpsc::Receiver<RoomCommand>,
    pub(crate) sender: mpsc::Sender<RoomCommand>,
    /// In-process participants' posts; the room keeps a sender, so this never ends.
    pub(crate) posts: mpsc::Receiver<LocalPost>,
    pub(crate) mux: Arc<UdpMux>,
    /// Datagrams this room's queue refused (counted by the demultiplexer).
    pub(crate) datagrams_dropped: Arc<AtomicU64>,
    pub(crate) shutdown: CancellationToken,
    /// Called once when the actor ends, to unregister the room.
    pub(crate) on_exit: Box<dyn FnOnce(RoomId) + Send>,
}

/// How long a closing room waits at most for its reliable data to be acknowledged: two SCTP
/// retransmissions of a lost packet (its retransmission timeout is a second at least).
pub(crate) const CLOSE_LINGER: Duration = Duration::from_secs(3);

impl RoomActor {
    pub(crate) async fn run(mut self) {
        let mut signals: HashMap<Key, mpsc::Sender<proto::signal_response::Message>> = HashMap::new();
        let mut locals: HashMap<Key, Local> = HashMap::new();
        let mut rpc_calls = RpcCalls::default();
        // What the core said as it opened (`room_started`).
        self.carry_out(&mut signals, &mut locals, &mut rpc_calls);
        let mut shutdown_seen = false;
        // Both live across turns of the loop: a room turns over about 200 times a second, and a
        // future made afresh each turn registered (then removed) a timer and a cancellation
        // waiter every time.
        let mut shutdown = std::pin::pin!(self.shutdown.child_token().cancelled_owned());
        let mut timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
        loop {
            let deadline = self.core.poll_timeout();
            if let Some(at) = deadline.map(tokio::time::Instant::from_std)
                && timer.deadline() != at
            {
                timer.as_mut().reset(at);
            }
            let command = tokio::select! {
                biased;
                () = &mut shutdown, if !shutdown_seen => {
                    shutdown_seen = true;
                    Some(RoomCommand::Close { reason: LeaveReason::ServerShutdown })
                }
                // Before commands: what a participant posted before asking the room to close
                // (its last words) goes out before the close.
                post = self.posts.recv() => post.map(RoomCommand::Post),
                command = self.commands.recv() => command,
                () = &mut timer, if deadline.is_some() => None,
            };
            let now = Instant::now();
            let mut closing = false;
            match command {
                Some(RoomCommand::JoinRemote { request, reply, .. }) if self.core.is_full_for(&request) => {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(None);
                }
                Some(RoomCommand::JoinLocal { request, reply, .. }) if self.core.is_full_for(&request) => {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(None);
                }
                Some(RoomCommand::JoinRemote { request, signal, reply }) => {
                    // The signal sender is registered before the core speaks, so the join
                    // response is the first frame the client reads.
                    let key = self.core.next_key_hint();
                    signals.insert(key, signal);
                    let joined = self.core.join_remote(now, unix_ms(), request);
                    debug_assert_eq!(key, joined);
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(Some(joined));
                }
                Some(RoomCommand::JoinLocal { request, events, shared, reply }) => {
                    let key = self.core.next_key_hint();
                    // A participant joins one room once: the cell is empty.
                    let _ = shared.room_queue.set(self.datagrams_dropped.clone());
                    locals.insert(key, Local { events, shared });
                    let joined = self.core.join_local(now, unix_ms(), request);
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(Some(joined));
                }
                Some(RoomCommand::Signal { key, message }) => self.core.handle_signal(now, key, message),
                Some(RoomCommand::SignalClosed { key, reason }) => self.core.signal_closed(now, key, reason),
                Some(RoomCommand::Datagram { key, role, source, destination, contents, received_at }) => {
                    self.core.handle_receive(received_at.min(now), key, role, source, destination, &contents);
                }
                Some(RoomCommand::Local { key, command, reply }) => {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(self.core.handle_local(now, key, command));
                }
                Some(RoomCommand::Post(LocalPost { key, command })) => {
                    let name = command.name();
                    // A frame's failure is counted on its track; a frame an event each would
                    // flood the queue that reports it.
                    let frame = matches!(command, LocalCommand::PushOpus { .. });
                    if let LocalReply::Failed(error) = self.core.handle_local(now, key, command) {
                        tracing::debug!(room = %self.name, command = name, %error, "in-process post failed");
                        if !frame && let Some(local) = locals.get(&key) {
                            let failed = RoomEvent::CommandFailed { command: name, error };
                            if local.events.try_send(failed).is_err() {
                                tracing::warn!(room = %self.name, "in-process participant is not reading events");
                            }
                        }
                    }
                }
                Some(RoomCommand::PerformRpc(call)) => {
                    if self.core.has_identity(&call.destination) {
                        let request_id = call.request.id.clone();
                        let (caller, destination, value) = rpc_calls.start(call);
                        let sent = if caller == SERVER_KEY {
                            self.core.send_server_rpc(now, destination, value);
                            LocalReply::Done
                        } else {
                            self.core.handle_local(now, caller, LocalCommand::SendRpc { destination, value })
                        };
                        if let LocalReply::Failed(_) = sent {
                            rpc_calls
                                .fail(&request_id, RpcError::new(rpc_codes::SEND_FAILED, "failed to send the request"));
                        }
                    } else {
                        // The caller gave up waiting; nothing to tell it.
                        let _ = call
                            .response
                            .send(Err(RpcError::new(rpc_codes::RECIPIENT_NOT_FOUND, "recipient not found")));
                    }
                }
                Some(RoomCommand::IsFull { request, reply }) => {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(self.core.is_full_for(&request));
                }
                Some(RoomCommand::Describe { reply }) => {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(self.core.describe());
                }
                Some(RoomCommand::Admin { command, reply }) => {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = reply.send(self.core.admin(now, command));
                }
                // The room ends once what it sent reliably is delivered (the core then says
                // `Expired`), within `CLOSE_LINGER`.
                Some(RoomCommand::Close { reason }) => self.core.close_after_delivery(now, reason, CLOSE_LINGER),
                None => {
                    if deadline.is_some_and(|at| at <= now) {
                        self.core.handle_timeout(now);
                    }
                }
            }
            if self.carry_out(&mut signals, &mut locals, &mut rpc_calls) {
                closing = true;
            }
            if closing {
                break;
            }
        }
        self.commands.close();
        self.posts.close();
        // Anyone still waiting on the room learns it is gone.
        while let Ok(command) = self.commands.try_recv() {
            drop(command);
        }
        self.mux.remove_room(self.id);
        tracing::debug!(room = %self.name, "room closed");
        (self.on_exit)(self.id);
    }

    /// Carries out the core's outputs; `true` when the core says the room expired.
    fn carry_out(
        &mut self,
        signals: &mut HashMap<Key, mpsc::Sender<proto::signal_response::Message>>,
        locals: &mut HashMap<Key, Local>,
        rpc_calls: &mut RpcCalls,
    ) -> bool {
        let mut too_slow = Vec::new();
        let mut expired = false;
        loop {
            while let Some(output) = self.core.poll_output() {
                match output {
                    CoreOutput::Transmit { source, destination, contents } => {
                        self.mux.send(source, destination, &contents);
                    }
                    CoreOutput::Signal { to, message } => {
                        if let Some(sender) = signals.get(&to)
                            && sender.try_send(message).is_err()
                        {
                            too_slow.push(to);
                        }
                    }
                    CoreOutput::CloseSignal { to } => {
                        // Dropping the sender ends the connection after what is queued (the
                        // leave) has been written.
                        signals.remove(&to);
                    }
                    CoreOutput::Local { to, output } => {
                        let Some(local) = locals.get(&to) else { continue };
                        match output {
                            LocalOutput::Rpc { from_identity, packet } => {
                                if let proto::data_packet::Value::RpcRequest(request) = packet {
                                    self.answer_rpc_request(to, local, from_identity, request);
                                } else {
                                    rpc_calls.handle_packet(to, &from_identity, packet);
                                }
                            }
                            LocalOutput::Event(event) => {
                                if let RoomEvent::ParticipantLeft { identity, .. } = &event {
                                    rpc_calls.recipient_left(identity);
                                }
                                let disconnected = matches!(event, RoomEvent::Disconnected { .. });
                                if let Err(mpsc::error::TrySendError::Full(event)) = local.events.try_send(event) {
                                    if matches!(event, RoomEvent::AudioFrame(_)) {
                                        // Audio is not worth blocking the room for: a reader
                                        // that falls behind loses frames (counted).
                                        local.shared.audio_dropped.fetch_add(1, Ordering::Relaxed);
                                    } else {
                                        tracing::warn!(room = %self.name, "in-process participant is not reading events");
                                    }
                                }
                                if disconnected {
                                    locals.remove(&to);
                                    rpc_calls.caller_left(to);
                                }
                            }
                        }
                    }
                    CoreOutput::RouteAdded { ufrag, key, role } => {
                        self.mux.add_route(
                            ufrag,
                            self.id,
                            key,
                            role,
                            self.sender.clone(),
                            self.datagrams_dropped.clone(),
                        );
                    }
                    CoreOutput::RoutesRemoved { key } => self.mux.remove_routes(self.id, key),
                    CoreOutput::Expired => expired = true,
                    CoreOutput::Webhook(event) => {
                        if let Some(webhooks) = &self.webhooks {
                            webhooks.notify(*event);
                        }
                    }
                    CoreOutput::AgentLeft { identity } => self.dispatch.agent_left(&self.name, &identity),
                    CoreOutput::ServerRpc { from_identity, packet } => {
                        rpc_calls.handle_packet(SERVER_KEY, &from_identity, packet);
                    }
                }
            }
            if too_slow.is_empty() {
                break;
            }
            let now = Instant::now();
            for key in too_slow.drain(..) {
                tracing::info!(room = %self.name, "signal client too slow; disconnecting");
                signals.remove(&key);
                self.core.signal_closed(now, key, LeaveReason::SignalClosed);
            }
        }
        locals.retain(|_, local| !local.events.is_closed());
        expired
    }

    /// A request for in-process participant `to`: acknowledged at once, then handed over as an
    /// event, or answered with LiveKit's error when the participant cannot take it.
    fn answer_rpc_request(&mut self, to: Key, local: &Local, from_identity: String, request: proto::RpcRequest) {
        let now = Instant::now();
        let ack = crate::rpc::ack(request.id.clone());
        // A refusal (the caller left, its budget ran out) leaves the caller to its timeout.
        let _ =
            self.core.handle_local(now, to, LocalCommand::SendRpc { destination: from_identity.clone(), value: ack });
        let refused =
            match crate::rpc::admit_request(request, from_identity.clone(), |method| local.shared.answers(method)) {
                Ok(invocation) => {
                    let request_id = invocation.request_id.clone();
                    match local.events.try_send(RoomEvent::RpcRequest(invocation)) {
                        Ok(()) => None,
                        Err(_) => Some((
                            request_id,
                            RpcError::new(rpc_codes::APPLICATION_ERROR, "the participant is busy; retry"),
                        )),
                    }
                }
                Err(refusal) => Some(refusal),
            };
        if let Some((request_id, error)) = refused {
            let value = crate::rpc::response(request_id, Err(error));
            // As for the acknowledgement.
            let _ = self.core.handle_local(now, to, LocalCommand::SendRpc { destination: from_identity, value });
        }
    }
}
