//! The dispatcher's IO shell: one task owns the [`Dispatcher`], reads commands (worker
//! connections and their messages, the server API's dispatch calls, rooms opening and closing),
//! drives its offer timeouts, sends what it says to each worker's connection and signs the join
//! tokens of its assignments with the room's key.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use livekit_protocol as proto;
use proto::server_message::Message as ServerMessage;
use proto::worker_message::Message as WorkerMessage;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::dispatcher::{AgentGrant, DispatchOutput, Dispatcher, RegisterError};
use crate::ids::Ids;
use crate::token::{RoomCredentials, RoomGrant, RoomToken, SipGrant};
use crate::wall_clock::unix_seconds;

/// Commands queued for the dispatcher.
const COMMAND_QUEUE: usize = 1024;
/// Messages queued for one worker; a worker this far behind is disconnected.
pub(crate) const WORKER_QUEUE: usize = 256;
/// How long an agent's join token is valid: the longest session, and then some.
const AGENT_TOKEN_SECONDS: i64 = 6 * 3600;

// Commands are few (registrations, API calls, rooms opening) and short-lived in the queue.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Command {
    Register {
        request: proto::RegisterWorkerRequest,
        to_worker: mpsc::Sender<ServerMessage>,
        reply: oneshot::Sender<Result<String, RegisterError>>,
    },
    Message {
        worker: String,
        message: WorkerMessage,
    },
    Gone {
        worker: String,
    },
    RoomOpened {
        room: proto::Room,
        agents: Vec<proto::RoomAgentDispatch>,
    },
    RoomClosed {
        room: String,
    },
    AgentLeft {
        room: String,
        identity: String,
    },
    Create {
        room: proto::Room,
        request: proto::CreateAgentDispatchRequest,
        reply: oneshot::Sender<Option<proto::AgentDispatch>>,
    },
    Delete {
        room: String,
        dispatch_id: String,
        reply: oneshot::Sender<Option<proto::AgentDispatch>>,
    },
    List {
        room: String,
        dispatch_id: String,
        reply: oneshot::Sender<Vec<proto::AgentDispatch>>,
    },
}

/// The handle every part of the room server uses to reach the dispatcher. Cheap to clone.
#[derive(Clone)]
pub(crate) struct AgentDispatch {
    commands: mpsc::Sender<Command>,
}

impl AgentDispatch {
    /// Starts the dispatcher's task on `tasks`; it ends with `shutdown`.
    pub(crate) fn start(
        credentials: RoomCredentials,
        answer_timeout: Duration,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> AgentDispatch {
        let (commands, receiver) = mpsc::channel(COMMAND_QUEUE);
        let shell = Shell {
            dispatcher: Dispatcher::new(Ids::from_entropy(), answer_timeout),
            workers: HashMap::new(),
            credentials,
            commands: receiver,
            shutdown,
        };
        tasks.spawn(shell.run());
        AgentDispatch { commands }
    }

    /// Registers a worker whose messages go to `to_worker`; its id.
    pub(crate) async fn register(
        &self,
        request: proto::RegisterWorkerRequest,
        to_worker: mpsc::Sender<ServerMessage>,
    ) -> Option<Result<String, RegisterError>> {
        self.ask(|reply| Command::Register { request, to_worker, reply }).await
    }

    /// A registered worker's message (waits for room in the queue: the worker's reader slows).
    pub(crate) async fn message(&self, worker: &str, message: WorkerMessage) {
        // The dispatcher is gone: the server is shutting down.
        let _ = self.commands.send(Command::Message { worker: worker.to_owned(), message }).await;
    }

    /// A worker's connection ended.
    pub(crate) async fn gone(&self, worker: &str) {
        // As above.
        let _ = self.commands.send(Command::Gone { worker: worker.to_owned() }).await;
    }

    /// A room opened (called where rooms open, which cannot wait: dropped if the queue is full).
    pub(crate) fn room_opened(&self, room: proto::Room, agents: Vec<proto::RoomAgentDispatch>) {
        if self.commands.try_send(Command::RoomOpened { room, agents }).is_err() {
            tracing::warn!("agent dispatch is behind: a room's opening was not seen");
        }
    }

    /// An agent participant left a room (as above).
    pub(crate) fn agent_left(&self, room: &str, identity: &str) {
        let command = Command::AgentLeft { room: room.to_owned(), identity: identity.to_owned() };
        if self.commands.try_send(command).is_err() {
            tracing::warn!("agent dispatch is behind: an agent's leaving was not seen");
        }
    }

    /// A room closed (as above).
    pub(crate) fn room_closed(&self, room: &str) {
        if self.commands.try_send(Command::RoomClosed { room: room.to_owned() }).is_err() {
            tracing::warn!("agent dispatch is behind: a room's closing was not seen");
        }
    }

    pub(crate) async fn create(
        &self,
        room: proto::Room,
        request: proto::CreateAgentDispatchRequest,
    ) -> Option<Option<proto::AgentDispatch>> {
        self.ask(|reply| Command::Create { room, request, reply }).await
    }

    pub(crate) async fn delete(&self, room: String, dispatch_id: String) -> Option<Option<proto::AgentDispatch>> {
        self.ask(|reply| Command::Delete { room, dispatch_id, reply }).await
    }

    pub(crate) async fn list(&self, room: String, dispatch_id: String) -> Option<Vec<proto::AgentDispatch>> {
        self.ask(|reply| Command::List { room, dispatch_id, reply }).await
    }

    async fn ask<T>(&self, command: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(command(reply)).await.ok()?;
        answer.await.ok()
    }
}

struct Shell {
    dispatcher: Dispatcher,
    workers: HashMap<String, mpsc::Sender<ServerMessage>>,
    credentials: RoomCredentials,
    commands: mpsc::Receiver<Command>,
    shutdown: CancellationToken,
}

impl Shell {
    async fn run(mut self) {
        loop {
            let deadline = self.dispatcher.poll_timeout();
            let command = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                command = self.commands.recv() => match command {
                    Some(command) => Some(command),
                    None => break,
                },
                () = sleep_until(deadline) => None,
            };
            let now = Instant::now();
            match command {
                Some(command) => self.handle(now, command),
                None => self.dispatcher.handle_timeout(now),
            }
            self.carry_out();
        }
    }

    fn handle(&mut self, now: Instant, command: Command) {
        match command {
            Command::Register { request, to_worker, reply } => {
                let registered = self.dispatcher.register(now, &request);
                if let Ok(worker) = &registered {
                    tracing::info!(worker, agent_name = %request.agent_name, "agent worker registered");
                    self.workers.insert(worker.clone(), to_worker);
                }
                // The connection gave up waiting: it ends, and says so.
                let _ = reply.send(registered);
            }
            Command::Message { worker, message } => self.dispatcher.handle_message(now, &worker, message),
            Command::Gone { worker } => {
                tracing::info!(worker, "agent worker left");
                self.workers.remove(&worker);
                self.dispatcher.worker_gone(now, &worker);
            }
            Command::RoomOpened { room, agents } => self.dispatcher.room_opened(now, room, &agents),
            Command::RoomClosed { room } => self.dispatcher.room_closed(&room),
            Command::AgentLeft { room, identity } => self.dispatcher.agent_left(now, &room, &identity),
            Command::Create { room, request, reply } => {
                // The caller gave up waiting; nothing to tell it.
                let _ = reply.send(self.dispatcher.create_dispatch(now, room, request));
            }
            Command::Delete { room, dispatch_id, reply } => {
                // As above.
                let _ = reply.send(self.dispatcher.delete_dispatch(&room, &dispatch_id));
            }
            Command::List { room, dispatch_id, reply } => {
                // As above.
                let _ = reply.send(self.dispatcher.list(&room, &dispatch_id));
            }
        }
    }

    fn carry_out(&mut self) {
        while let Some(output) = self.dispatcher.poll_output() {
            let (worker, message) = match output {
                DispatchOutput::Send { worker, message } => (worker, message),
                DispatchOutput::Assign { worker, job, grant } => match self.agent_token(&grant) {
                    Ok(token) => {
                        (worker, ServerMessage::Assignment(proto::JobAssignment { job: Some(*job), url: None, token }))
                    }
                    Err(error) => {
                        tracing::warn!(%error, "an agent's join token could not be signed");
                        continue;
                    }
                },
            };
            let Some(sender) = self.workers.get(&worker) else { continue };
            if sender.try_send(message).is_err() {
                // Too far behind (or gone): its connection closes when its sender goes, and
                // the dispatcher hears it left.
                tracing::warn!(worker, "agent worker is not reading; disconnecting it");
                self.workers.remove(&worker);
            }
        }
    }

    /// The join token of an assigned job's agent: LiveKit's `BuildAgentToken` (kind `agent`, the
    /// worker's permissions, the identity and attributes the worker asked for).
    fn agent_token(&self, grant: &AgentGrant) -> Result<String, crate::token::RoomTokenError> {
        let permissions = &grant.permissions;
        self.credentials.mint(RoomToken {
            iss: String::new(),
            sub: grant.identity.clone(),
            nbf: None,
            exp: unix_seconds() + AGENT_TOKEN_SECONDS,
            name: Some(grant.name.clone()).filter(|name| !name.is_empty()),
            kind: Some("agent".to_owned()),
            metadata: Some(grant.metadata.clone()).filter(|metadata| !metadata.is_empty()),
            attributes: grant.attributes.clone(),
            video: RoomGrant {
                room_join: true,
                room: grant.room.clone(),
                can_publish: Some(permissions.can_publish),
                can_subscribe: Some(permissions.can_subscribe),
                can_publish_data: Some(permissions.can_publish_data),
                can_update_own_metadata: Some(permissions.can_update_metadata),
                agent: true,
                hidden: permissions.hidden,
                ..RoomGrant::default()
            },
            room_config: None,
            sip: SipGrant::default(),
        })
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
