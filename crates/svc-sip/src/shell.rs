//! The IO shell: one tokio task owns the UDP socket and the [`SipCore`], and is the only place
//! that knows the clock. Commands come in over a bounded channel ([`SipClient`]), call events go
//! out over another; the task ends when every [`SipClient`] is dropped or the cancellation token
//! fires, after hanging every call up (bounded by [`SHUTDOWN_GRACE`]).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::SipCore;
use crate::model::{CallEvent, CallId, DialError, SipConfig};
use crate::sdp::LocalMedia;

/// Commands waiting for the task.
pub const COMMAND_CAPACITY: usize = 64;
/// Events waiting for the integrator. The task waits when it is full (events are never
/// dropped), so the integrator must keep reading.
pub const EVENT_CAPACITY: usize = 1024;
/// How long a shutdown waits for CANCEL/BYE transactions to complete.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(4);

/// What [`SipClient`] asks of the task.
#[derive(Debug)]
enum Command {
    Dial { to: String, from: Option<String>, offer: LocalMedia, reply: oneshot::Sender<Result<CallId, DialError>> },
    Hangup { call: CallId },
}

/// Why a command did not go through.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The core refused the dial.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The task has ended.
    #[error("the SIP task has stopped")]
    Stopped,
}

/// Sends commands to the SIP task; cheap to clone. The task stops when the last clone drops.
#[derive(Debug, Clone)]
pub struct SipClient {
    commands: mpsc::Sender<Command>,
}

impl SipClient {
    /// Places a call; events for it arrive on the events channel, keyed by the returned id.
    pub async fn dial(&self, to: &str, from: Option<&str>, offer: LocalMedia) -> Result<CallId, ShellError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Dial { to: to.to_owned(), from: from.map(str::to_owned), offer, reply };
        self.commands.send(command).await.map_err(|_| ShellError::Stopped)?;
        Ok(answer.await.map_err(|_| ShellError::Stopped)??)
    }

    /// Hangs a call up (CANCEL or BYE); its `Failed`/`Ended` event follows.
    pub async fn hangup(&self, call: &CallId) -> Result<(), ShellError> {
        self.commands.send(Command::Hangup { call: call.clone() }).await.map_err(|_| ShellError::Stopped)
    }
}

/// Counters the task returns when it ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellStats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams the core did not use (malformed, stray, foreign source, answered with an error).
    pub dropped: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// Sends that failed.
    pub send_errors: u64,
}

/// The running shell.
#[derive(Debug)]
pub struct SipShell {
    /// Commands.
    pub client: SipClient,
    /// Call events, in order.
    pub events: mpsc::Receiver<CallEvent>,
    /// The task; its result is the traffic counters.
    pub task: JoinHandle<ShellStats>,
    /// Where the socket is bound.
    pub local_addr: SocketAddr,
}

/// Binds `config.local_addr`.
pub async fn bind(config: &SipConfig) -> io::Result<UdpSocket> {
    UdpSocket::bind(config.local_addr).await
}

/// Resolves the trunk URI's host (port 5060 when none is given) to one address. The core
/// keeps that address for the shell's lifetime (no SRV, no failover).
pub async fn resolve_trunk(trunk_uri: &str) -> io::Result<SocketAddr> {
    let uri = rsip::Uri::try_from(trunk_uri)
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error.to_string()))?;
    let host = uri.host_with_port.host.to_string();
    let port = uri.host_with_port.port.map_or(5060, |port| *port.value());
    let mut addresses = tokio::net::lookup_host((host.as_str(), port)).await?;
    addresses.next().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address")))
}

/// Spawns the task around `core` on `socket`.
pub fn spawn(socket: UdpSocket, core: SipCore, shutdown: CancellationToken) -> io::Result<SipShell> {
    let local_addr = socket.local_addr()?;
    let (commands, command_rx) = mpsc::channel(COMMAND_CAPACITY);
    let (event_tx, events) = mpsc::channel(EVENT_CAPACITY);
    let task = tokio::spawn(run(socket, core, command_rx, event_tx, shutdown));
    Ok(SipShell { client: SipClient { commands }, events, task, local_addr })
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

async fn run(
    socket: UdpSocket,
    mut core: SipCore,
    mut commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<CallEvent>,
    shutdown: CancellationToken,
) -> ShellStats {
    let mut stats = ShellStats::default();
    let mut buffer = vec![0u8; 65_536];
    let mut grace: Option<Instant> = None;
    loop {
        drain(&socket, &mut core, &events, &mut stats).await;
        if let Some(until) = grace
            && (!core.has_pending_requests() || Instant::now() >= until)
        {
            break;
        }
        let deadline = core.poll_timeout().map(Instant::from_std);
        let wake = match (deadline, grace) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tokio::select! {
            () = shutdown.cancelled(), if grace.is_none() => {
                core.hangup_all(now());
                grace = Some(Instant::now() + SHUTDOWN_GRACE);
            }
            command = commands.recv(), if grace.is_none() => match command {
                Some(Command::Dial { to, from, offer, reply }) => {
                    let result = core.dial(now(), &to, from.as_deref(), offer);
                    // The caller may have given up waiting; the call goes on regardless and
                    // its events still arrive.
                    let _ = reply.send(result);
                }
                Some(Command::Hangup { call }) => {
                    if !core.hangup(now(), &call) {
                        tracing::debug!(%call, "hangup for an unknown call");
                    }
                }
                None => {
                    core.hangup_all(now());
                    grace = Some(Instant::now() + SHUTDOWN_GRACE);
                }
            },
            received = socket.recv_from(&mut buffer) => match received {
                Ok((len, from)) => {
                    stats.received += 1;
                    if let Err(why) = core.handle_datagram(now(), from, &buffer[..len]) {
                        stats.dropped += 1;
                        tracing::debug!(%from, %why, "SIP datagram not used");
                    }
                }
                // ICMP port unreachable surfaces here on some systems; the transactions'
                // timers decide what it means.
                Err(error) => tracing::debug!(%error, "SIP socket receive failed"),
            },
            () = sleep_until(wake), if wake.is_some() => {
                if deadline.is_some_and(|at| at <= Instant::now()) {
                    core.handle_timeout(now());
                }
            }
        }
    }
    drain(&socket, &mut core, &events, &mut stats).await;
    stats
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

async fn drain(socket: &UdpSocket, core: &mut SipCore, events: &mpsc::Sender<CallEvent>, stats: &mut ShellStats) {
    while let Some(transmit) = core.poll_transmit() {
        match socket.send_to(&transmit.bytes, transmit.destination).await {
            Ok(_) => stats.sent += 1,
            Err(error) => {
                stats.send_errors += 1;
                tracing::warn!(%error, destination = %transmit.destination, "SIP send failed");
            }
        }
    }
    let mut listening = !events.is_closed();
    while let Some(event) = core.poll_event() {
        // Once nobody listens the events are discarded; the calls still run to their end.
        if listening && events.send(event).await.is_err() {
            listening = false;
        }
    }
}
