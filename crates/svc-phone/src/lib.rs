//! Phone dial-out: a SIP call over the trunk that joins a session's media room as a participant
//! of kind SIP, so the agent in that room hears and talks to the phone as to any WebRTC user.
//!
//! ```text
//!                      ┌──────────── PhoneService (one per server) ────────────┐
//! dial(DialRequest) ──▶│ svc-sip shell ──CallEvent──▶ dispatcher ──▶ call task │
//!                      └──────────────────────────────────────────────┬───────┘
//!                       call task: RTP/RTCP sockets ◀─▶ RtpSession (svc-rtp)
//!                                  LocalParticipant `sip-<dial_id>` (svc-room, kind SIP)
//! ```
//!
//! - [`PhoneService`] binds the SIP socket, runs the svc-sip shell and one dispatcher task that
//!   routes every [`svc_sip::CallEvent`] to its call's bounded queue ([`router`]: a full queue
//!   hangs that call up rather than stalling the others).
//! - [`PhoneService::dial`] binds an RTP/RTCP port pair from the configured range, sends the
//!   INVITE with a G.711 offer, joins the room as `sip-<dial_id>` (kind SIP) with LiveKit's SIP
//!   attributes ([`attributes`]: `sip.callStatus` `dialing` → `ringing` → `active` → `hangup`,
//!   `sip.phoneNumber`, `sip.callID` = the dial id, `sip.callIDFull` = the SIP Call-ID,
//!   `sip.trunkPhoneNumber` = the caller number) and spawns the call's task.
//! - The call task publishes nothing before the answer. On `Answered` it creates the
//!   [`svc_rtp::RtpSession`] toward the answer's address, port and codec, publishes the track
//!   `phone` and bridges on a 20 ms tick: RTP → jitter buffer → 48 kHz → the track; every
//!   subscribed remote audio track → Opus decode → [`mixer`] → RTP. RTCP goes on the next port.
//! - The phone hanging up (BYE, RTCP BYE or no RTP for the media timeout) or [`PhoneCall::hangup`]
//!   ends the call: `sip.callStatus` becomes `hangup`, the participant leaves the room, and
//!   [`DialProgress::Ended`] reports who ended it and the answered duration (for metering). An
//!   RTCP BYE gives the phone's SIP BYE 2 s to follow (phones send both as they hang up) before
//!   we send ours.
//!
//! Tests: `tests/trunk.rs` against a scripted trunk and an RTP phone built on svc-rtp (runs
//! everywhere); `tests/dial.rs` against baresip (`#[ignore]`, needs `apt-get install baresip`).
//!
//! Shutdown: cancelling the service's token hangs every call up (each task sends CANCEL/BYE
//! and leaves the room), then stops the SIP shell (which gives its transactions a grace period).
//!
//! Not done here: early media (183 with SDP is treated as ringing, its audio is not bridged),
//! codec changes by re-INVITE (a new address is followed, a new codec is not), sending DTMF.

pub mod attributes;
mod call;
pub mod mixer;
pub mod room_api;
pub mod router;

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use svc_room::RoomServer;
use svc_sip::shell::{self, SipClient};
use svc_sip::{CallEvent, CallId, Credentials, SipConfig, SipCore};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::router::{CALL_QUEUE, Routed, Router};

/// Progress events waiting for the caller of [`PhoneService::dial`]. `Ringing` and `Dtmf` are
/// dropped when it is full; `Answered`, `Failed` and `Ended` wait for room (up to a second).
pub const PROGRESS_QUEUE: usize = 64;
/// Most port pairs tried per dial when binding RTP.
pub const MAX_PORT_ATTEMPTS: usize = 256;
/// How long a call task has, after shutdown, to hang up and leave before the SIP shell stops.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How the service reaches its trunk and where its media lives.
#[derive(Debug, Clone)]
pub struct PhoneConfig {
    /// The trunk, as a SIP URI (`sip:trunk.example.com:5060`).
    pub trunk_uri: String,
    /// Digest credentials for the trunk's challenges.
    pub credentials: Option<Credentials>,
    /// Caller number (E.164) when a dial names none.
    pub caller_number: String,
    /// Where the SIP socket binds (`0.0.0.0:5060`; port 0 for any).
    pub sip_bind: SocketAddr,
    /// The SIP address put in Via and Contact; `None`: the bound address.
    pub sip_advertised: Option<SocketAddr>,
    /// Where RTP sockets bind.
    pub rtp_bind_ip: IpAddr,
    /// The media address put in the SDP (a public address behind NAT).
    pub media_ip: IpAddr,
    /// RTP ports (each call takes an even port and the next, for RTCP).
    pub rtp_ports: RangeInclusive<u16>,
    /// How long a call may ring.
    pub ring_timeout: Duration,
    /// No RTP from the phone for this long ends the call.
    pub media_timeout: Duration,
    /// Most calls at once.
    pub max_calls: usize,
}

impl PhoneConfig {
    /// A configuration with defaults: SIP on `sip_bind`, RTP on the same IP, ports
    /// 20000–29999, 60 s ring timeout, 30 s media timeout, 64 calls.
    pub fn new(trunk_uri: impl Into<String>, caller_number: impl Into<String>, sip_bind: SocketAddr) -> PhoneConfig {
        PhoneConfig {
            trunk_uri: trunk_uri.into(),
            credentials: None,
            caller_number: caller_number.into(),
            sip_bind,
            sip_advertised: None,
            rtp_bind_ip: sip_bind.ip(),
            media_ip: sip_bind.ip(),
            rtp_ports: 20_000..=29_999,
            ring_timeout: Duration::from_secs(60),
            media_timeout: Duration::from_secs(30),
            max_calls: 64,
        }
    }
}

/// One dial-out.
#[derive(Debug, Clone)]
pub struct DialRequest {
    /// The room the phone joins (the session's).
    pub room_name: String,
    /// The session, for logs and the participant's metadata.
    pub session_id: String,
    /// This dial's id: the participant is `sip-<dial_id>`, and `sip.callID` is this id.
    pub dial_id: String,
    /// The number to call (E.164).
    pub phone_number: String,
    /// The number to present; `None`: the configured one.
    pub caller_number: Option<String>,
    /// Who the phone is in the room; the default: `sip-<dial_id>`, named by its number.
    pub participant: PhoneParticipant,
}

/// How the phone appears in the room, when its dialer says more than the defaults (LiveKit's
/// `CreateSIPParticipant` does: [`room_api`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhoneParticipant {
    /// The identity; `None`: `sip-<dial_id>`.
    pub identity: Option<String>,
    /// The name; `None`: the number dialled.
    pub name: Option<String>,
    /// Metadata.
    pub metadata: String,
    /// Attributes besides the `sip.*` ones the call sets (which win).
    pub attributes: BTreeMap<String, String>,
    /// The `sip.trunkID` attribute, when the dial names a trunk.
    pub trunk_id: Option<String>,
    /// Leave `sip.phoneNumber` and `sip.trunkPhoneNumber` out (and name it `Phone`).
    pub hide_phone_number: bool,
}

/// Who ended an answered call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// The phone: BYE, RTCP BYE, or its media stopped.
    Phone,
    /// svc: [`PhoneCall::hangup`] or a [`HangupHandle`], the room going away, or shutdown.
    Svc,
}

/// How a dial goes, for its caller.
#[derive(Debug, Clone, PartialEq)]
pub enum DialProgress {
    /// The phone rings.
    Ringing,
    /// Answered; audio flows.
    Answered,
    /// Never answered. Final.
    Failed {
        /// Why: [`svc_sip::FailReason::as_str`] (`canceled` whenever svc hung up first, whatever
        /// made it), or `event_overflow`, `closed`.
        reason: String,
        /// The SIP final response, when one came.
        status: Option<u16>,
        /// Its reason phrase as the far end sent it (`Busy Here`; empty when none came).
        phrase: String,
    },
    /// An answered call is over; the participant has left the room. Final.
    Ended {
        /// Who ended it.
        by: EndedBy,
        /// Why: `hangup`, `media_timeout`, `rtcp_bye`, `room_closed`, `event_overflow`,
        /// `shutdown`, `ack_timeout`, or the reason given to [`HangupHandle::hang_up`].
        reason: String,
        /// From the answer to the end: what dial minutes are metered on.
        answered_for: Duration,
    },
    /// A key pressed on the phone (RFC 4733 or SIP INFO).
    Dtmf {
        /// `0`–`9`, `*`, `#`, `A`–`D`.
        digit: char,
    },
}

/// Why a dial did not start.
#[derive(Debug, thiserror::Error)]
pub enum PhoneError {
    /// `max_calls` reached (here or in the SIP user agent).
    #[error("too many calls in progress")]
    AtCapacity,
    /// A call with this dial id is already in progress.
    #[error("dial {0:?} is already in progress")]
    DuplicateDial(String),
    /// The number is not E.164.
    #[error("not an E.164 number: {0:?}")]
    InvalidNumber(String),
    /// No free RTP port pair in the range.
    #[error("no free RTP port in the configured range")]
    NoRtpPort,
    /// Joining the room failed.
    #[error("joining the room: {0}")]
    Room(#[from] svc_room::RoomError),
    /// Binding or resolving failed at start.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The SIP configuration is unusable.
    #[error(transparent)]
    Config(#[from] svc_sip::ConfigError),
    /// The service is shutting down (or its SIP task stopped).
    #[error("the phone service is shutting down")]
    ShuttingDown,
}

/// Hangs a call up on its owner's behalf, saying why: CANCEL before the answer (the dial then
/// fails as `canceled`), BYE after it (the call ends with this reason). Cheap to clone, so the
/// session a call belongs to can hold one while another task follows the call's progress.
#[derive(Debug, Clone)]
pub struct HangupHandle {
    token: CancellationToken,
    /// The first reason given; later ones do not replace it.
    reason: Arc<Mutex<Option<&'static str>>>,
}

impl HangupHandle {
    fn new() -> HangupHandle {
        HangupHandle { token: CancellationToken::new(), reason: Arc::new(Mutex::new(None)) }
    }

    /// Hangs up for `reason` (a slug: `hangup`, `session_ended`, …). Once; later calls do nothing.
    pub fn hang_up(&self, reason: &'static str) {
        lock(&self.reason).get_or_insert(reason);
        self.token.cancel();
    }

    /// The reason given, once [`HangupHandle::hang_up`] was called.
    fn reason(&self) -> &'static str {
        lock(&self.reason).unwrap_or("hangup")
    }
}

impl PartialEq for HangupHandle {
    /// Two handles are equal when they hang up the same call.
    fn eq(&self, other: &HangupHandle) -> bool {
        Arc::ptr_eq(&self.reason, &other.reason)
    }
}

/// A call placed by [`PhoneService::dial`]. Dropping it does not hang up: the call lives on
/// (with its participant in the room) until either side hangs up, the room closes or the
/// service shuts down; only the progress events are then lost.
#[derive(Debug)]
pub struct PhoneCall {
    /// The dial's id.
    pub dial_id: String,
    /// The SIP participant's identity: `sip-<dial_id>` unless the dial named one.
    pub identity: String,
    /// The SIP Call-ID.
    pub call_id: CallId,
    /// Progress, ending with `Failed` or `Ended`.
    pub progress: mpsc::Receiver<DialProgress>,
    hangup: HangupHandle,
    task: JoinHandle<()>,
}

impl PhoneCall {
    /// Hangs up: CANCEL before the answer, BYE after. `Failed`/`Ended` follows on `progress`.
    pub fn hangup(&self) {
        self.hangup.hang_up("hangup");
    }

    /// A handle that hangs this call up, for whoever else decides when it ends.
    pub fn hangup_handle(&self) -> HangupHandle {
        self.hangup.clone()
    }

    /// Waits for the call's task to finish (after `Failed`/`Ended`; the participant has left).
    pub async fn finished(self) {
        // A panicking task has nothing left to report: the progress channel is closed either way.
        let _ = self.task.await;
    }
}

/// The identity of a dial's participant.
pub fn participant_identity(dial_id: &str) -> String {
    format!("sip-{dial_id}")
}

struct Inner {
    config: PhoneConfig,
    room: RoomServer,
    client: SipClient,
    router: Arc<Mutex<Router>>,
    calls: TaskTracker,
    shutdown: CancellationToken,
    next_port: AtomicU16,
    active: Mutex<HashSet<String>>,
    sip_addr: SocketAddr,
}

/// The phone dial-out service; cheap to clone.
#[derive(Clone)]
pub struct PhoneService {
    inner: Arc<Inner>,
    done: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for PhoneService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhoneService").field("trunk", &self.inner.config.trunk_uri).finish_non_exhaustive()
    }
}

impl PhoneService {
    /// Resolves the trunk, binds the SIP socket and starts the shell and the dispatcher. The
    /// service runs until `shutdown` is cancelled (dropping every clone does not stop it): then
    /// every call hangs up and leaves its room, and the SIP shell stops; [`PhoneService::closed`]
    /// waits for that.
    pub async fn start(
        config: PhoneConfig,
        room: RoomServer,
        shutdown: CancellationToken,
    ) -> Result<PhoneService, PhoneError> {
        let trunk = shell::resolve_trunk(&config.trunk_uri).await?;
        let mut sip_config = SipConfig::new(config.trunk_uri.clone(), config.caller_number.clone(), config.sip_bind);
        sip_config.credentials = config.credentials.clone();
        sip_config.ring_timeout = config.ring_timeout;
        sip_config.max_calls = config.max_calls;
        let socket = shell::bind(&sip_config).await?;
        sip_config.advertised_addr = match config.sip_advertised {
            Some(address) => address,
            None => socket.local_addr()?,
        };
        let core = SipCore::new(sip_config, trunk, rand::random())?;
        // The shell stops after the calls have hung up, not with them: its own token.
        let shell_stop = CancellationToken::new();
        let sip = shell::spawn(socket, core, shell_stop.clone())?;
        tracing::info!(sip = %sip.local_addr, %trunk, "phone service started");
        let router = Arc::new(Mutex::new(Router::new()));
        let inner = Arc::new(Inner {
            next_port: AtomicU16::new(*config.rtp_ports.start()),
            config,
            room,
            client: sip.client.clone(),
            router: router.clone(),
            calls: TaskTracker::new(),
            shutdown: shutdown.clone(),
            active: Mutex::new(HashSet::new()),
            sip_addr: sip.local_addr,
        });
        let dispatcher = tokio::spawn(dispatch(sip.events, router, sip.client));
        let supervisor = {
            let calls = inner.calls.clone();
            let sip_task = sip.task;
            tokio::spawn(async move {
                shutdown.cancelled().await;
                calls.close();
                if tokio::time::timeout(SHUTDOWN_GRACE, calls.wait()).await.is_err() {
                    tracing::warn!("phone calls did not end within the shutdown grace");
                }
                shell_stop.cancel();
                match sip_task.await {
                    Ok(stats) => tracing::info!(?stats, "SIP shell stopped"),
                    Err(error) => tracing::error!(%error, "SIP shell task failed"),
                }
                // The shell's end closes the event stream, which ends the dispatcher.
                if let Err(error) = dispatcher.await {
                    tracing::error!(%error, "phone dispatcher failed");
                }
            })
        };
        Ok(PhoneService { inner, done: Arc::new(Mutex::new(Some(supervisor))) })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &PhoneConfig {
        &self.inner.config
    }

    /// Where the SIP socket is bound (the port, when `sip_bind` asked for any).
    pub fn sip_addr(&self) -> SocketAddr {
        self.inner.sip_addr
    }

    /// Calls in progress.
    pub fn active_calls(&self) -> usize {
        lock(&self.inner.active).len()
    }

    /// After the shutdown token: waits until every call has hung up and the SIP shell stopped.
    pub async fn closed(&self) {
        let handle = self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(handle) = handle
            && let Err(error) = handle.await
        {
            tracing::error!(%error, "phone supervisor failed");
        }
    }

    /// Places a call and joins it to `request.room_name`. Returns once the INVITE is out and the
    /// participant is in the room; the rest arrives on [`PhoneCall::progress`].
    pub async fn dial(&self, request: DialRequest) -> Result<PhoneCall, PhoneError> {
        let inner = &self.inner;
        if inner.shutdown.is_cancelled() {
            return Err(PhoneError::ShuttingDown);
        }
        {
            let mut active = lock(&inner.active);
            if active.len() >= inner.config.max_calls {
                return Err(PhoneError::AtCapacity);
            }
            if !active.insert(request.dial_id.clone()) {
                return Err(PhoneError::DuplicateDial(request.dial_id));
            }
        }
        let guard = ActiveGuard { inner: self.inner.clone(), dial_id: request.dial_id.clone() };
        let (rtp, rtcp) = self.bind_rtp().await?;
        let rtp_port = rtp.local_addr()?.port();
        let offer = svc_sip::LocalMedia::g711(inner.config.media_ip, rtp_port);
        let call_id = match inner.client.dial(&request.phone_number, request.caller_number.as_deref(), offer).await {
            Ok(call_id) => call_id,
            Err(shell::ShellError::Dial(svc_sip::DialError::AtCapacity)) => return Err(PhoneError::AtCapacity),
            Err(shell::ShellError::Dial(svc_sip::DialError::InvalidNumber(number))) => {
                return Err(PhoneError::InvalidNumber(number));
            }
            Err(shell::ShellError::Stopped) => return Err(PhoneError::ShuttingDown),
        };
        let (events_tx, events) = mpsc::channel::<CallEvent>(CALL_QUEUE);
        if !lock(&inner.router).register(call_id.clone(), events_tx) {
            // Unreachable in practice (a dial's early events are few); never leave it ringing.
            hangup_quietly(&inner.client, &call_id).await;
            return Err(PhoneError::AtCapacity);
        }
        let trunk_number = request.caller_number.clone().unwrap_or_else(|| inner.config.caller_number.clone());
        let options = join_options(&request, &call_id, &trunk_number);
        let identity = options.identity.clone();
        let participant = match inner.room.join_local(&request.room_name, options).await {
            Ok(participant) => participant,
            Err(error) => {
                hangup_quietly(&inner.client, &call_id).await;
                lock(&inner.router).unregister(&call_id);
                return Err(error.into());
            }
        };
        tracing::info!(
            session = %request.session_id, dial = %request.dial_id, room = %request.room_name,
            call = %call_id, rtp_port, "dialing"
        );
        let (progress_tx, progress) = mpsc::channel(PROGRESS_QUEUE);
        let hangup = HangupHandle::new();
        let context = call::CallContext {
            call_id: call_id.clone(),
            client: inner.client.clone(),
            router: inner.router.clone(),
            events,
            participant,
            rtp,
            rtcp,
            progress: progress_tx,
            hangup: hangup.clone(),
            shutdown: inner.shutdown.clone(),
            media_timeout: inner.config.media_timeout,
        };
        let span =
            tracing::info_span!("phone_call", call = %call_id, dial = %request.dial_id, session = %request.session_id);
        let task = inner.calls.spawn(
            async move {
                call::run(context).await;
                drop(guard);
            }
            .instrument(span),
        );
        Ok(PhoneCall { dial_id: request.dial_id, identity, call_id, progress, hangup, task })
    }

    /// An even RTP port and the next one for RTCP, from the range, starting after the last
    /// pair handed out (so a just-closed pair is not reused at once).
    async fn bind_rtp(&self) -> Result<(UdpSocket, UdpSocket), PhoneError> {
        let ip = self.inner.config.rtp_bind_ip;
        let start = self.inner.next_port.load(Ordering::Relaxed);
        for port in port_pairs(&self.inner.config.rtp_ports, start).take(MAX_PORT_ATTEMPTS) {
            let Ok(rtp) = UdpSocket::bind((ip, port)).await else { continue };
            let Ok(rtcp) = UdpSocket::bind((ip, port + 1)).await else { continue };
            self.inner.next_port.store(port.saturating_add(2), Ordering::Relaxed);
            return Ok((rtp, rtcp));
        }
        Err(PhoneError::NoRtpPort)
    }
}

/// How a dial's phone joins its room: the participant's identity, name and metadata, and the
/// `sip.*` attributes over the dialer's own.
fn join_options(request: &DialRequest, call_id: &CallId, trunk_number: &str) -> svc_room::LocalJoinOptions {
    let participant = &request.participant;
    let mut attributes = participant.attributes.clone();
    let mut sip = attributes::initial(&request.dial_id, &call_id.0, &request.phone_number, trunk_number);
    if participant.hide_phone_number {
        sip.remove(attributes::PHONE_NUMBER);
        sip.remove(attributes::TRUNK_PHONE_NUMBER);
    }
    if let Some(trunk_id) = &participant.trunk_id {
        sip.insert(attributes::TRUNK_ID.to_owned(), trunk_id.clone());
    }
    attributes.extend(sip);
    let name = match &participant.name {
        Some(name) if !name.is_empty() => name.clone(),
        _ if participant.hide_phone_number => "Phone".to_owned(),
        _ => request.phone_number.clone(),
    };
    svc_room::LocalJoinOptions {
        identity: participant.identity.clone().unwrap_or_else(|| participant_identity(&request.dial_id)),
        name,
        kind: svc_room::ParticipantKind::Sip,
        metadata: participant.metadata.clone(),
        attributes,
    }
}

/// The RTP ports of `range` (even, with the next port also in the range, for RTCP), each once,
/// beginning at the first at or after `start` and wrapping around.
fn port_pairs(range: &RangeInclusive<u16>, start: u16) -> impl Iterator<Item = u16> {
    let first = range.start().saturating_add(range.start() % 2);
    let last = range.end().saturating_sub(1);
    let evens: Vec<u16> = if first <= last { (first..=last).step_by(2).collect() } else { Vec::new() };
    let begin = evens.iter().position(|&port| port >= start).unwrap_or(0);
    let (before, after) = evens.split_at(begin);
    after.iter().chain(before).copied().collect::<Vec<u16>>().into_iter()
}

/// Frees the dial's slot when the dial fails or its call task ends.
struct ActiveGuard {
    inner: Arc<Inner>,
    dial_id: String,
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        lock(&self.inner.active).remove(&self.dial_id);
    }
}

async fn hangup_quietly(client: &SipClient, call: &CallId) {
    if let Err(error) = client.hangup(call).await {
        tracing::warn!(%error, %call, "hangup not sent");
    }
}

/// The dispatcher: routes every event of the shell, never waiting for a call.
async fn dispatch(mut events: mpsc::Receiver<CallEvent>, router: Arc<Mutex<Router>>, client: SipClient) {
    while let Some(event) = events.recv().await {
        let call = event.call.clone();
        let routed = lock(&router).route(event);
        match routed {
            Routed::Delivered | Routed::Held => {}
            Routed::Dropped => tracing::debug!(%call, "SIP event for no call dropped"),
            Routed::Overflow(call) => {
                tracing::warn!(%call, "call's event queue is full; hanging it up");
                let client = client.clone();
                // Off the dispatcher: the shell's command queue may be busy, other calls' events
                // must keep flowing. The call task sees its queue closed and ends itself.
                tokio::spawn(async move { hangup_quietly(&client, &call).await });
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_pairs_are_even_inside_the_range_and_wrap() {
        let pairs: Vec<u16> = port_pairs(&(31_001..=31_010), 31_007).collect();
        assert_eq!(pairs, [31_008, 31_002, 31_004, 31_006]);
        let pairs: Vec<u16> = port_pairs(&(40_000..=40_005), 0).collect();
        assert_eq!(pairs, [40_000, 40_002, 40_004]);
        assert_eq!(port_pairs(&(40_001..=40_002), 0).count(), 0);
        assert_eq!(port_pairs(&(65_534..=65_535), 65_535).collect::<Vec<_>>(), [65_534]);
        let (low, high) = (5, 1);
        assert_eq!(port_pairs(&(low..=high), 0).count(), 0);
    }
}
