//! One call's task: its SIP events, its room participant, its RTP and RTCP sockets and the
//! 20 ms bridge between them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use svc_room::{LocalAudioTrack, LocalParticipant, RemoteAudioDecoder, RoomEvent};
use svc_rtp::{G711, MediaEvent, NtpTime, RtpSession, SessionConfig, TransmitKind};
use svc_sip::shell::SipClient;
use svc_sip::{CallEvent, CallEventKind, CallId, FailReason, Party, RemoteMedia};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::attributes::{self, CallStatus};
use crate::mixer::{MAX_TRACKS, Mixer};
use crate::router::Router;
use crate::{DialProgress, EndedBy, HangupHandle};

/// The phone's track in the room.
pub const PHONE_TRACK_NAME: &str = "phone";
/// The bridge's tick.
const TICK: Duration = Duration::from_millis(20);
/// How long a hangup may take to be confirmed by SIP (a CANCEL can wait for the INVITE's 487
/// up to 64·T1) before the task ends the call on its own.
const HANGUP_WAIT: Duration = Duration::from_secs(35);
/// The same at shutdown, inside the service's grace.
const SHUTDOWN_HANGUP_WAIT: Duration = Duration::from_secs(4);
/// How long a final progress event waits for the caller to make room.
const FINAL_PROGRESS_WAIT: Duration = Duration::from_secs(1);
/// After an RTCP BYE, how long the phone's SIP BYE has to arrive before we send ours (phones
/// send RTCP BYE first as they tear the call down; answering it at once with our own BYE would
/// cross theirs).
const RTCP_BYE_GRACE: Duration = Duration::from_secs(2);
/// Largest datagram read (RTP of G.711 at 20 ms is 172 bytes; RTCP compounds are small).
const DATAGRAM: usize = 2048;

pub(crate) struct CallContext {
    pub call_id: CallId,
    pub client: SipClient,
    pub router: Arc<Mutex<Router>>,
    pub events: mpsc::Receiver<CallEvent>,
    pub participant: LocalParticipant,
    pub rtp: UdpSocket,
    pub rtcp: UdpSocket,
    pub progress: mpsc::Sender<DialProgress>,
    pub hangup: HangupHandle,
    pub shutdown: CancellationToken,
    pub media_timeout: Duration,
}

/// The answered call's media.
struct Media {
    session: RtpSession,
    track: Option<LocalAudioTrack>,
}

/// How the call ended.
enum Outcome {
    Failed { reason: String, status: Option<u16>, phrase: String },
    Ended { by: EndedBy, reason: String },
}

/// The call's state beside its IO.
struct Call {
    cx: CallContext,
    media: Option<Media>,
    answered_at: Option<Instant>,
    /// Set when we asked SIP to hang up: who caused it, why, and until when we wait.
    hanging_up: Option<(EndedBy, &'static str, Instant)>,
    ringing_reported: bool,
    /// When an RTCP BYE ends the call unless SIP does first.
    rtcp_bye_deadline: Option<Instant>,
    room_open: bool,
    mixer: Mixer,
    decoders: HashMap<String, (String, RemoteAudioDecoder)>,
    decoded: Vec<i16>,
}

pub(crate) async fn run(cx: CallContext) {
    let mut call = Call {
        cx,
        media: None,
        answered_at: None,
        hanging_up: None,
        ringing_reported: false,
        rtcp_bye_deadline: None,
        room_open: true,
        mixer: Mixer::new(),
        decoders: HashMap::new(),
        decoded: Vec::with_capacity(2 * crate::mixer::FRAME_SAMPLES),
    };
    let outcome = call.run().await;
    call.finish(outcome).await;
}

impl Call {
    async fn run(&mut self) -> Outcome {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut rtp_buffer = vec![0u8; DATAGRAM];
        let mut rtcp_buffer = vec![0u8; DATAGRAM];
        loop {
            let far = Instant::now() + Duration::from_secs(3600);
            let media_wake = self.media.as_ref().and_then(|media| media.session.poll_timeout()).map(Instant::from_std);
            let hangup_deadline = self.hanging_up.map(|(_, _, until)| until);
            let active = self.media.is_some();
            let hanging_up = self.hanging_up.is_some();
            let rtcp_bye = self.rtcp_bye_deadline.filter(|_| !hanging_up);
            tokio::select! {
                () = self.cx.hangup.token.cancelled(), if !hanging_up => {
                    let reason = self.cx.hangup.reason();
                    self.hang_up(EndedBy::Svc, reason).await;
                }
                () = self.cx.shutdown.cancelled(), if !hanging_up => self.hang_up(EndedBy::Svc, "shutdown").await,
                event = self.cx.events.recv() => match event {
                    Some(event) => {
                        if let Some(outcome) = self.on_sip(event.kind).await {
                            return outcome;
                        }
                    }
                    None => {
                        // Unrouted by the dispatcher (our queue overflowed); it hangs the call up.
                        return self.local_outcome(EndedBy::Svc, "event_overflow");
                    }
                },
                event = self.cx.participant.next_event(), if self.room_open => self.on_room(event).await,
                received = self.cx.rtp.recv_from(&mut rtp_buffer), if active => {
                    if let (Ok((len, from)), Some(media)) = (received, self.media.as_mut()) {
                        media.session.handle_rtp(std::time::Instant::now(), from, &rtp_buffer[..len]);
                    }
                }
                received = self.cx.rtcp.recv_from(&mut rtcp_buffer), if active => {
                    if let (Ok((len, from)), Some(media)) = (received, self.media.as_mut()) {
                        media.session.handle_rtcp(std::time::Instant::now(), from, &rtcp_buffer[..len]);
                    }
                }
                _ = tick.tick(), if active => {
                    let frame = self.mixer.next_frame();
                    if let Some(media) = self.media.as_mut() {
                        media.session.push_room_pcm(std::time::Instant::now(), &frame);
                    }
                }
                () = tokio::time::sleep_until(media_wake.unwrap_or(far)), if media_wake.is_some() => {
                    if let Some(media) = self.media.as_mut() {
                        media.session.handle_timeout(std::time::Instant::now());
                    }
                }
                () = tokio::time::sleep_until(rtcp_bye.unwrap_or(far)), if rtcp_bye.is_some() => {
                    self.hang_up(EndedBy::Phone, "rtcp_bye").await;
                }
                () = tokio::time::sleep_until(hangup_deadline.unwrap_or(far)), if hangup_deadline.is_some() => {
                    tracing::warn!("the hangup was not confirmed in time; ending the call");
                    let (by, reason, _) = self.hanging_up.unwrap_or((EndedBy::Svc, "hangup", far));
                    // Before an answer our hangup was a CANCEL, whatever made us send it.
                    let reason = if self.answered_at.is_some() { reason } else { FailReason::Canceled.as_str() };
                    return self.local_outcome(by, reason);
                }
            }
            self.drive_media().await;
            if !active && self.media.is_some() {
                tick.reset();
            }
        }
    }

    /// Asks SIP to hang up (once); the call ends when SIP confirms with `Failed`/`Ended`.
    async fn hang_up(&mut self, by: EndedBy, reason: &'static str) {
        if self.hanging_up.is_some() {
            return;
        }
        let wait = if reason == "shutdown" { SHUTDOWN_HANGUP_WAIT } else { HANGUP_WAIT };
        self.hanging_up = Some((by, reason, Instant::now() + wait));
        tracing::info!(?by, reason, "hanging up");
        if let Err(error) = self.cx.client.hangup(&self.cx.call_id).await {
            tracing::warn!(%error, "hangup not sent");
        }
    }

    fn local_outcome(&self, by: EndedBy, reason: &str) -> Outcome {
        if self.answered_at.is_some() {
            Outcome::Ended { by, reason: reason.to_owned() }
        } else {
            Outcome::Failed { reason: reason.to_owned(), status: None, phrase: String::new() }
        }
    }

    async fn on_sip(&mut self, kind: CallEventKind) -> Option<Outcome> {
        match kind {
            CallEventKind::Dialing { .. } | CallEventKind::Trying | CallEventKind::AuthChallenge { .. } => None,
            CallEventKind::Ringing { .. } => {
                if !self.ringing_reported && self.answered_at.is_none() {
                    self.ringing_reported = true;
                    self.set_status(CallStatus::Ringing).await;
                    self.report(DialProgress::Ringing);
                }
                None
            }
            CallEventKind::Answered { remote } => {
                self.answered_at = Some(Instant::now());
                if self.hanging_up.is_some() {
                    // Answered while our CANCEL was on its way: svc-sip sends BYE; no media.
                    return None;
                }
                match self.start_media(&remote).await {
                    Ok(()) => {
                        self.set_status(CallStatus::Active).await;
                        self.report_final(DialProgress::Answered).await;
                    }
                    Err(why) => {
                        tracing::warn!(why, ?remote, "cannot bridge the answer's media");
                        self.hang_up(EndedBy::Svc, "incompatible_media").await;
                    }
                }
                None
            }
            CallEventKind::RemoteMediaChanged { remote } => {
                if let Some(media) = self.media.as_mut()
                    && remote.port != 0
                {
                    let rtp = SocketAddr::new(remote.address, remote.port);
                    media.session.set_remote(rtp, SocketAddr::new(remote.address, remote.port.wrapping_add(1)));
                }
                None
            }
            CallEventKind::Dtmf { digit, .. } => {
                self.report(DialProgress::Dtmf { digit });
                None
            }
            // A hangup of ours before the answer is a CANCEL, which SIP reports as `canceled`
            // (the documented reason) whatever made us hang up: the session ending, shutdown.
            // A final answer that crossed our CANCEL (busy, say) says what really happened.
            CallEventKind::Failed { status, reason, reason_phrase } => {
                Some(Outcome::Failed { reason: reason.as_str().to_owned(), status, phrase: reason_phrase })
            }
            CallEventKind::Ended { by, reason } => Some(match self.hanging_up {
                Some((by, why, _)) => Outcome::Ended { by, reason: why.to_owned() },
                None => Outcome::Ended {
                    by: if by == Party::Remote { EndedBy::Phone } else { EndedBy::Svc },
                    reason: reason.as_str().to_owned(),
                },
            }),
            // The core forgot the call without a final event: nothing more will come.
            CallEventKind::Closed => Some(self.local_outcome(EndedBy::Svc, "closed")),
        }
    }

    async fn start_media(&mut self, remote: &RemoteMedia) -> Result<(), &'static str> {
        let codec = remote.codec().ok_or("no common codec")?;
        let codec = if codec.name.eq_ignore_ascii_case("PCMA") { G711::Pcma } else { G711::Pcmu };
        if remote.port == 0 || remote.address.is_unspecified() {
            return Err("the answer has no media address");
        }
        let since_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let mut config = SessionConfig::new(
            codec,
            SocketAddr::new(remote.address, remote.port),
            rand::random(),
            NtpTime::from_unix(since_epoch),
        );
        config.telephone_event_pt = remote.telephone_event;
        config.media_timeout = self.cx.media_timeout;
        let session = RtpSession::new(config, std::time::Instant::now());
        // Only now the phone's voice is published: before the answer there is nothing to hear.
        let track = match self.cx.participant.publish_audio(PHONE_TRACK_NAME).await {
            Ok(track) => Some(track),
            Err(error) => {
                tracing::warn!(%error, "publishing the phone's track failed; the room will not hear it");
                None
            }
        };
        // Audio buffered before the answer is stale.
        self.mixer.clear();
        self.media = Some(Media { session, track });
        Ok(())
    }

    async fn on_room(&mut self, event: Option<RoomEvent>) {
        let Some(event) = event else {
            self.room_open = false;
            self.hang_up(EndedBy::Svc, "room_closed").await;
            return;
        };
        match event {
            RoomEvent::AudioFrame(frame) => {
                if self.media.is_none() || *frame.participant_identity == *self.cx.participant.identity() {
                    return;
                }
                let track = frame.track_sid.to_string();
                if !self.decoders.contains_key(&track) {
                    if self.decoders.len() >= MAX_TRACKS {
                        return;
                    }
                    match RemoteAudioDecoder::new() {
                        Ok(decoder) => {
                            self.decoders.insert(track.clone(), (frame.participant_identity.to_string(), decoder));
                        }
                        Err(error) => {
                            tracing::warn!(%error, "no Opus decoder");
                            return;
                        }
                    }
                }
                self.decoded.clear();
                if let Some((_, decoder)) = self.decoders.get_mut(&track)
                    && let Err(error) = decoder.decode(&frame, &mut self.decoded)
                {
                    tracing::debug!(%error, "undecodable room frame");
                    return;
                }
                self.mixer.push(&track, &self.decoded);
            }
            RoomEvent::TrackUnpublished { track_sid, .. } => {
                self.decoders.remove(&track_sid);
                self.mixer.remove(&track_sid);
            }
            RoomEvent::ParticipantLeft { identity, .. } => {
                let gone: Vec<String> = self
                    .decoders
                    .iter()
                    .filter(|(_, (owner, _))| *owner == identity)
                    .map(|(track, _)| track.clone())
                    .collect();
                for track in gone {
                    self.decoders.remove(&track);
                    self.mixer.remove(&track);
                }
            }
            RoomEvent::Disconnected { reason } => {
                tracing::info!(?reason, "removed from the room");
                self.room_open = false;
                self.hang_up(EndedBy::Svc, "room_closed").await;
            }
            RoomEvent::ParticipantJoined(_)
            | RoomEvent::ParticipantUpdated { .. }
            | RoomEvent::TrackPublished { .. }
            | RoomEvent::Data(_)
            // The phone registers no RPC method and posts nothing.
            | RoomEvent::RpcRequest(_)
            | RoomEvent::CommandFailed { .. } => {}
        }
    }

    /// Sends what the session has to send, hands the phone's audio to the room and acts on
    /// media events.
    async fn drive_media(&mut self) {
        let Some(media) = self.media.as_mut() else { return };
        let now = std::time::Instant::now();
        let mut frames = Vec::new();
        while let Some(frame) = media.session.poll_room_pcm(now) {
            frames.push(frame.pcm);
        }
        while let Some(transmit) = media.session.poll_transmit() {
            let socket = if transmit.kind == TransmitKind::Rtcp { &self.cx.rtcp } else { &self.cx.rtp };
            if let Err(error) = socket.send_to(&transmit.bytes, transmit.destination).await {
                tracing::debug!(%error, "RTP send failed");
            }
        }
        let mut ended = None;
        let mut rtcp_bye = false;
        let mut digits = Vec::new();
        while let Some(event) = media.session.poll_event() {
            match event {
                MediaEvent::Dtmf(dtmf) => digits.push(dtmf.digit),
                MediaEvent::RemoteBye { .. } => rtcp_bye = true,
                MediaEvent::MediaTimeout { silent_for } => {
                    tracing::info!(?silent_for, "no RTP from the phone");
                    ended = Some("media_timeout");
                }
                other => tracing::debug!(?other, "media event"),
            }
        }
        if let Some(track) = media.track.as_ref() {
            for pcm in frames {
                if let Err(error) = track.push_pcm(pcm).await {
                    tracing::debug!(%error, "phone audio not queued");
                }
            }
        }
        for digit in digits {
            self.report(DialProgress::Dtmf { digit });
        }
        if rtcp_bye && self.rtcp_bye_deadline.is_none() {
            self.rtcp_bye_deadline = Some(Instant::now() + RTCP_BYE_GRACE);
        }
        if let Some(reason) = ended {
            self.hang_up(EndedBy::Phone, reason).await;
        }
    }

    async fn set_status(&mut self, status: CallStatus) {
        if !self.room_open {
            return;
        }
        if let Err(error) = self.cx.participant.set_attributes(attributes::status(status)).await {
            tracing::debug!(%error, "call status not set");
        }
    }

    /// A progress event the caller may miss when not reading (ringing, DTMF).
    fn report(&self, progress: DialProgress) {
        if self.cx.progress.try_send(progress).is_err() {
            tracing::debug!("progress event dropped: the caller is not reading");
        }
    }

    /// A progress event that waits (bounded) for the caller.
    async fn report_final(&mut self, progress: DialProgress) {
        if tokio::time::timeout(FINAL_PROGRESS_WAIT, self.cx.progress.send(progress)).await.is_err() {
            tracing::warn!("final progress event dropped: the caller is not reading");
        }
    }

    async fn finish(&mut self, outcome: Outcome) {
        if let Some(media) = self.media.as_mut() {
            let now = std::time::Instant::now();
            media.session.close(now, Some("hangup"));
            while let Some(transmit) = media.session.poll_transmit() {
                let socket = if transmit.kind == TransmitKind::Rtcp { &self.cx.rtcp } else { &self.cx.rtp };
                // Best effort: the call is over whether or not the final report leaves.
                let _ = socket.send_to(&transmit.bytes, transmit.destination).await;
            }
        }
        self.set_status(CallStatus::Hangup).await;
        if self.room_open
            && let Err(error) = self.cx.participant.leave().await
        {
            tracing::debug!(%error, "leaving the room failed");
        }
        lock(&self.cx.router).unregister(&self.cx.call_id);
        let progress = match outcome {
            Outcome::Failed { reason, status, phrase } => {
                tracing::info!(reason, ?status, phrase, "call failed");
                DialProgress::Failed { reason, status, phrase }
            }
            Outcome::Ended { by, reason } => {
                let answered_for = self.answered_at.map(|at| at.elapsed()).unwrap_or_default();
                tracing::info!(?by, reason, ?answered_for, "call ended");
                DialProgress::Ended { by, reason, answered_for }
            }
        };
        self.report_final(progress).await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
