//! The phone service behind the room's LiveKit SIP API: [`PhoneService`] is the room's
//! [`SipDialer`], so `CreateSIPParticipant` (from LiveKit's server SDKs) places a call through
//! the same trunk, SIP user agent and media bridge as svc's own `/dial` route.
//!
//! A call placed this way is the API caller's, not a session's: nothing meters or records it for
//! a session (the room's agent hears it as any participant). What the request asks of the call
//! itself — its ringing timeout and longest duration — a watcher task carries out, which also
//! answers a caller that waits for the phone to pick up.

use std::time::Duration;

use futures_util::future::BoxFuture;
use svc_room::{SipDial, SipDialError, SipDialer, SipTrunk};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::{DialProgress, DialRequest, HangupHandle, PhoneError, PhoneParticipant, PhoneService};

impl SipDialer for PhoneService {
    fn outbound_trunk(&self) -> SipTrunk {
        let config = self.config();
        SipTrunk {
            id: trunk_id(&config.trunk_uri),
            name: "svc".to_owned(),
            address: trunk_address(&config.trunk_uri),
            numbers: vec![config.caller_number.clone()],
            auth_username: config
                .credentials
                .as_ref()
                .map(|credentials| credentials.username.clone())
                .unwrap_or_default(),
        }
    }

    fn dial(&self, dial: SipDial) -> BoxFuture<'static, Result<(), SipDialError>> {
        let phone = self.clone();
        Box::pin(async move { phone.dial_for_room_api(dial).await })
    }
}

impl PhoneService {
    async fn dial_for_room_api(&self, dial: SipDial) -> Result<(), SipDialError> {
        let request = DialRequest {
            room_name: dial.room,
            session_id: String::new(),
            dial_id: dial.call_id,
            phone_number: dial.number,
            caller_number: dial.caller_number,
            participant: PhoneParticipant {
                identity: Some(dial.identity),
                name: Some(dial.name).filter(|name| !name.is_empty()),
                metadata: dial.metadata,
                attributes: dial.attributes,
                trunk_id: Some(dial.trunk_id),
                hide_phone_number: dial.hide_phone_number,
            },
        };
        let call = self.dial(request).await.map_err(dial_error)?;
        let (answered_tx, answered) = oneshot::channel();
        let limits = CallLimits { ringing: dial.ringing_timeout, talking: dial.max_call_duration };
        let hangup = call.hangup_handle();
        // The call task ends with the call, and the watcher with its progress: shutdown reaches
        // both through the call.
        tokio::spawn(watch(call.progress, hangup, limits, answered_tx));
        if !dial.wait_until_answered {
            return Ok(());
        }
        answered.await.unwrap_or_else(|_| Err(SipDialError::Failed("closed".to_owned())))
    }
}

/// What the request asked of the call's length.
#[derive(Debug, Clone, Copy)]
struct CallLimits {
    /// Longest ringing (the service's own ring timeout still applies if it is shorter).
    ringing: Option<Duration>,
    /// Longest answered call.
    talking: Option<Duration>,
}

/// Follows one API call: hangs up when it rang or talked too long, and tells `answered` how the
/// dial went (once: the answer, or why there was none).
async fn watch(
    mut progress: mpsc::Receiver<DialProgress>,
    hangup: HangupHandle,
    limits: CallLimits,
    answered: oneshot::Sender<Result<(), SipDialError>>,
) {
    let mut answered = Some(answered);
    let mut deadline = limits.ringing.map(|ringing| (Instant::now() + ringing, "no_answer"));
    let mut rang_out = false;
    loop {
        let until = deadline.map(|(at, _)| at);
        tokio::select! {
            event = progress.recv() => match event {
                Some(DialProgress::Answered) => {
                    if let Some(answered) = answered.take() {
                        // A caller that did not wait for the answer dropped its end: nobody to tell.
                        let _ = answered.send(Ok(()));
                    }
                    deadline = limits.talking.map(|talking| (Instant::now() + talking, "max_call_duration"));
                }
                Some(DialProgress::Failed { reason, status, phrase }) => {
                    let error = if rang_out { SipDialError::NoAnswer } else { not_answered(&reason, status, phrase) };
                    tracing::info!(%error, "the phone did not answer");
                    if let Some(answered) = answered.take() {
                        // As above: only a waiting caller listens.
                        let _ = answered.send(Err(error));
                    }
                    return;
                }
                Some(DialProgress::Ended { .. }) | None => return,
                Some(DialProgress::Ringing | DialProgress::Dtmf { .. }) => {}
            },
            () = sleep_until(until), if until.is_some() => {
                if let Some((_, why)) = deadline.take() {
                    rang_out = why == "no_answer";
                    hangup.hang_up(why);
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A failed dial in the API's terms: the far end's final status and its reason phrase (svc's
/// slug when it sent none) when it answered.
fn not_answered(reason: &str, status: Option<u16>, phrase: String) -> SipDialError {
    match status {
        Some(status) if status >= 300 => {
            let reason = if phrase.is_empty() { reason.to_owned() } else { phrase };
            SipDialError::Rejected { status, reason }
        }
        _ if reason == svc_sip::FailReason::NoAnswer.as_str() => SipDialError::NoAnswer,
        _ => SipDialError::Failed(reason.to_owned()),
    }
}

fn dial_error(error: PhoneError) -> SipDialError {
    match error {
        PhoneError::InvalidNumber(number) => SipDialError::InvalidNumber(number),
        PhoneError::AtCapacity | PhoneError::Room(svc_room::RoomError::Full) => {
            SipDialError::AtCapacity(error.to_string())
        }
        error => SipDialError::Unavailable(error.to_string()),
    }
}

/// The trunk's id: `ST_` and twelve base-36 digits of the FNV-1a hash of its URI, so the same
/// configuration keeps the same id across restarts and nodes (API callers keep it in code).
pub fn trunk_id(trunk_uri: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in trunk_uri.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let digits: Vec<u8> = (0..12)
        .map(|_| {
            let digit = (hash % 36) as u8;
            hash /= 36;
            if digit < 10 { b'0' + digit } else { b'a' + digit - 10 }
        })
        .collect();
    format!("ST_{}", String::from_utf8_lossy(&digits))
}

/// `host:port` of a trunk URI (`sip:host:port;transport=udp` → `host:port`).
fn trunk_address(trunk_uri: &str) -> String {
    let rest = trunk_uri.strip_prefix("sips:").or_else(|| trunk_uri.strip_prefix("sip:")).unwrap_or(trunk_uri);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    rest.split(';').next().unwrap_or(rest).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trunk_id_is_stable_and_shaped_as_livekits() {
        let id = trunk_id("sip:trunk.example.com:5060");
        assert_eq!(id, trunk_id("sip:trunk.example.com:5060"));
        assert_ne!(id, trunk_id("sip:other.example.com:5060"));
        assert!(id.starts_with("ST_") && id.len() == 15, "{id}");
        assert!(id[3..].bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()), "{id}");
        assert_eq!(trunk_address("sip:trunk.example.com:5060;transport=udp"), "trunk.example.com:5060");
        assert_eq!(trunk_address("sip:acct@10.0.0.1"), "10.0.0.1");
    }

    #[test]
    fn failures_keep_the_far_ends_status() {
        assert_eq!(
            not_answered("busy", Some(486), "Busy Here".into()),
            SipDialError::Rejected { status: 486, reason: "Busy Here".into() }
        );
        assert_eq!(not_answered("no_answer", None, String::new()), SipDialError::NoAnswer);
        assert_eq!(not_answered("timeout", None, String::new()), SipDialError::Failed("timeout".into()));
        // A final answer without a phrase keeps svc's slug.
        assert_eq!(
            not_answered("rejected", Some(499), String::new()),
            SipDialError::Rejected { status: 499, reason: "rejected".into() }
        );
    }

    #[tokio::test]
    async fn the_watcher_hangs_up_a_call_that_rings_too_long_and_reports_no_answer() {
        let (progress_tx, progress) = mpsc::channel(8);
        let hangup = HangupHandle::new();
        let (answered_tx, answered) = oneshot::channel();
        let limits = CallLimits { ringing: Some(Duration::from_millis(100)), talking: None };
        let watcher = tokio::spawn(watch(progress, hangup.clone(), limits, answered_tx));
        progress_tx.send(DialProgress::Ringing).await.expect("sent");
        tokio::time::timeout(Duration::from_secs(5), hangup.token.cancelled()).await.expect("hung up after ringing");
        assert_eq!(hangup.reason(), "no_answer");
        // svc-sip reports its CANCEL as the far end's 487.
        let canceled =
            DialProgress::Failed { reason: "canceled".into(), status: Some(487), phrase: "Request Terminated".into() };
        progress_tx.send(canceled).await.expect("sent");
        assert_eq!(answered.await.expect("told"), Err(SipDialError::NoAnswer));
        watcher.await.expect("watcher ends");
    }

    #[tokio::test]
    async fn the_watcher_ends_an_answered_call_at_its_longest_duration() {
        let (progress_tx, progress) = mpsc::channel(8);
        let hangup = HangupHandle::new();
        let (answered_tx, answered) = oneshot::channel();
        let limits =
            CallLimits { ringing: Some(Duration::from_millis(200)), talking: Some(Duration::from_millis(600)) };
        let watcher = tokio::spawn(watch(progress, hangup.clone(), limits, answered_tx));
        progress_tx.send(DialProgress::Answered).await.expect("sent");
        assert_eq!(answered.await.expect("told"), Ok(()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!hangup.token.is_cancelled(), "the ringing timeout no longer applies once answered");
        tokio::time::timeout(Duration::from_secs(5), hangup.token.cancelled()).await.expect("hung up at the limit");
        assert_eq!(hangup.reason(), "max_call_duration");
        drop(progress_tx);
        watcher.await.expect("watcher ends");
    }
}
