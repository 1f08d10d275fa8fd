//! A phone dial-out as the agent sees it in a room on a LiveKit server: the call is placed by
//! the LiveKit server (`CreateSIPParticipant`, from whichever node took the `/dial`), and the
//! agent, on whichever node runs the session, follows it from the phone participant's `sip.*`
//! attributes, as LiveKit's own agents do. [`RoomDials`] turns those snapshots and the
//! participant's leave into the steps the embedded phone service reports directly (placed,
//! ringing, answered, failed, ended) and, once the call is over, the outcome to store (what the
//! dial minutes are metered from).
//!
//! Sans-IO: the actor feeds it what the room says and the time; it answers with [`DialStep`]s.
//! Only participants carrying [`DIAL_ID_ATTRIBUTE`] are svc's dials; other SIP participants
//! (a call placed through LiveKit's API by someone else) are ordinary participants.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::core::{DialStatus, DialUpdate};

/// The attribute svc's dials give their phone participant: the `dial_id` the `/dial` route
/// answered, which the agent's timeline, the client's `dial-progress` and the stored dial share.
pub const DIAL_ID_ATTRIBUTE: &str = "svc.dial_id";
/// LiveKit's call-state attribute (`dialing`, `ringing`, `automation`, `active`, `hangup`).
pub const CALL_STATUS_ATTRIBUTE: &str = "sip.callStatus";
/// LiveKit's attribute for the number dialled.
pub const PHONE_NUMBER_ATTRIBUTE: &str = "sip.phoneNumber";
/// LiveKit's attribute for the number presented.
pub const TRUNK_NUMBER_ATTRIBUTE: &str = "sip.trunkPhoneNumber";

/// A phone participant of the room, as its attributes describe its call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhoneCallSnapshot {
    /// The participant.
    pub identity: String,
    /// svc's dial (`svc.dial_id`).
    pub dial_id: String,
    /// `sip.callStatus`, as LiveKit spells it.
    pub call_status: String,
    /// `sip.phoneNumber` (absent when the dial hid it).
    pub phone_number: String,
    /// `sip.trunkPhoneNumber`.
    pub caller_number: String,
}

impl PhoneCallSnapshot {
    /// The snapshot of participant `identity` with `attributes`, when it is one of svc's dials.
    pub fn from_attributes<'a>(
        identity: &str,
        attributes: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Option<PhoneCallSnapshot> {
        let mut snapshot = PhoneCallSnapshot {
            identity: identity.to_owned(),
            dial_id: String::new(),
            call_status: String::new(),
            phone_number: String::new(),
            caller_number: String::new(),
        };
        for (key, value) in attributes {
            match key.as_str() {
                DIAL_ID_ATTRIBUTE => snapshot.dial_id = value.clone(),
                CALL_STATUS_ATTRIBUTE => snapshot.call_status = value.clone(),
                PHONE_NUMBER_ATTRIBUTE => snapshot.phone_number = value.clone(),
                TRUNK_NUMBER_ATTRIBUTE => snapshot.caller_number = value.clone(),
                _ => {}
            }
        }
        (!snapshot.dial_id.is_empty()).then_some(snapshot)
    }
}

/// The outcome of a call, to store with its dial (`svc_store::DialOutcome`, owned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialRecord {
    /// The dial.
    pub dial_id: String,
    /// When the callee answered (epoch µs), if they did.
    pub answered_us: Option<i64>,
    /// When the call ended or failed (epoch µs).
    pub ended_us: i64,
    /// `completed`, or why it failed.
    pub outcome: String,
    /// The answered time, every second begun.
    pub billed_seconds: i64,
}

/// What the session makes of a change in the room's calls.
#[derive(Debug, Clone, PartialEq)]
pub enum DialStep {
    /// A dial's phone joined the room: the call rings (`dial.placed`).
    Placed {
        /// The dial.
        dial_id: String,
        /// The callee.
        phone_number: String,
        /// The number presented.
        caller_number: String,
    },
    /// The call moved on.
    Update(DialUpdate),
    /// The call is over: its outcome, to store.
    Finished(DialRecord),
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Stage {
    Dialing,
    Ringing,
    Answered,
}

#[derive(Debug)]
struct Call {
    dial_id: String,
    stage: Stage,
    /// When it was answered: the session's clock and the epoch.
    answered: Option<(Instant, i64)>,
}

/// The svc dials whose phone is in the room, by the phone participant's identity.
#[derive(Debug, Default)]
pub struct RoomDials {
    calls: HashMap<String, Call>,
    /// Dials already over (a late snapshot of a call that ended must not place it again).
    over: Vec<String>,
}

impl RoomDials {
    /// Whether a call is ringing or answered.
    pub fn in_progress(&self) -> bool {
        !self.calls.is_empty()
    }

    /// A phone participant's attributes, at `now` (`now_us` on the epoch).
    pub fn on_snapshot(&mut self, now: Instant, now_us: i64, snapshot: PhoneCallSnapshot) -> Vec<DialStep> {
        let mut steps = Vec::new();
        if self.over.contains(&snapshot.dial_id) {
            return steps;
        }
        let call = self.calls.entry(snapshot.identity.clone()).or_insert_with(|| {
            steps.push(DialStep::Placed {
                dial_id: snapshot.dial_id.clone(),
                phone_number: snapshot.phone_number.clone(),
                caller_number: snapshot.caller_number.clone(),
            });
            Call { dial_id: snapshot.dial_id.clone(), stage: Stage::Dialing, answered: None }
        });
        // A status may be skipped between two snapshots (a call answered at once goes from
        // dialing to active): each stage is reported once, in order.
        let reached = match snapshot.call_status.as_str() {
            "ringing" => Some(Stage::Ringing),
            "active" | "automation" => Some(Stage::Answered),
            _ => None,
        };
        if let Some(reached) = reached {
            if call.stage == Stage::Dialing {
                call.stage = Stage::Ringing;
                steps.push(DialStep::Update(DialUpdate::new(&call.dial_id, DialStatus::Ringing)));
            }
            if reached == Stage::Answered && call.stage == Stage::Ringing {
                call.stage = Stage::Answered;
                call.answered = Some((now, now_us));
                steps.push(DialStep::Update(DialUpdate::new(&call.dial_id, DialStatus::Answered)));
            }
        }
        if snapshot.call_status == "hangup" {
            steps.extend(self.end(now, now_us, &snapshot.identity, "phone", "hangup"));
        }
        steps
    }

    /// Participant `identity` left the room (its call is over if it was one of ours).
    pub fn on_left(&mut self, now: Instant, now_us: i64, identity: &str) -> Vec<DialStep> {
        self.end(now, now_us, identity, "phone", "hangup")
    }

    /// The session ends with its calls still up: the room's deletion hangs them up.
    pub fn on_session_end(&mut self, now: Instant, now_us: i64) -> Vec<DialStep> {
        let identities: Vec<String> = self.calls.keys().cloned().collect();
        identities.iter().flat_map(|identity| self.end(now, now_us, identity, "svc", "session_ended")).collect()
    }

    fn end(&mut self, now: Instant, now_us: i64, identity: &str, by: &'static str, reason: &str) -> Vec<DialStep> {
        let Some(call) = self.calls.remove(identity) else { return Vec::new() };
        self.over.push(call.dial_id.clone());
        let mut finished = DialUpdate::new(&call.dial_id, DialStatus::Ended);
        let record = match call.answered {
            Some((answered_at, answered_us)) => {
                let answered_for = now.saturating_duration_since(answered_at);
                finished.ended_by = Some(by);
                finished.duration_seconds = Some(answered_for.as_secs_f64());
                finished.reason = Some(reason.to_owned());
                DialRecord {
                    dial_id: call.dial_id,
                    answered_us: Some(answered_us),
                    ended_us: now_us,
                    outcome: "completed".to_owned(),
                    billed_seconds: billed_seconds(answered_for),
                }
            }
            None => {
                // LiveKit's SIP participant says only that the call is gone, not why (its SIP
                // status stays on the server): a call never answered failed, as `unanswered`
                // unless the session itself hung up.
                let reason = if by == "svc" { "canceled" } else { "unanswered" };
                finished.status = DialStatus::Failed;
                finished.reason = Some(reason.to_owned());
                DialRecord {
                    dial_id: call.dial_id,
                    answered_us: None,
                    ended_us: now_us,
                    outcome: reason.to_owned(),
                    billed_seconds: 0,
                }
            }
        };
        vec![DialStep::Update(finished), DialStep::Finished(record)]
    }
}

/// The whole seconds a call of `answered_for` is billed: every second begun, to the nanosecond
/// (the timeline's `duration_seconds` is the same length, so its ceiling is the bill).
pub(crate) fn billed_seconds(answered_for: Duration) -> i64 {
    i64::try_from(answered_for.as_nanos().div_ceil(1_000_000_000)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn snapshot(status: &str) -> PhoneCallSnapshot {
        let attributes = BTreeMap::from([
            ("svc.dial_id".to_owned(), "dial-1".to_owned()),
            ("sip.callStatus".to_owned(), status.to_owned()),
            ("sip.phoneNumber".to_owned(), "+15550199".to_owned()),
            ("sip.trunkPhoneNumber".to_owned(), "+15550100".to_owned()),
            ("sip.callID".to_owned(), "SCL_x".to_owned()),
        ]);
        PhoneCallSnapshot::from_attributes("sip-dial-1", &attributes).expect("one of ours")
    }

    fn statuses(steps: &[DialStep]) -> Vec<&'static str> {
        steps
            .iter()
            .map(|step| match step {
                DialStep::Placed { .. } => "placed",
                DialStep::Update(update) => update.status.as_str(),
                DialStep::Finished(_) => "finished",
            })
            .collect()
    }

    #[test]
    fn only_svcs_dials_are_followed() {
        let attributes = BTreeMap::from([("sip.callStatus".to_owned(), "active".to_owned())]);
        assert_eq!(PhoneCallSnapshot::from_attributes("sip_+1555", &attributes), None);
        let ours = snapshot("dialing");
        assert_eq!((ours.phone_number.as_str(), ours.caller_number.as_str()), ("+15550199", "+15550100"));
    }

    #[test]
    fn a_call_answered_then_hung_up_by_the_phone_is_metered_from_the_answer() {
        let t0 = Instant::now();
        let mut dials = RoomDials::default();
        let steps = dials.on_snapshot(t0, 1_000_000, snapshot("dialing"));
        assert_eq!(
            steps,
            [DialStep::Placed {
                dial_id: "dial-1".into(),
                phone_number: "+15550199".into(),
                caller_number: "+15550100".into()
            }]
        );
        assert_eq!(statuses(&dials.on_snapshot(t0, 1_000_000, snapshot("ringing"))), ["ringing"]);
        // The same status again (another attribute changed) reports nothing.
        assert!(dials.on_snapshot(t0, 1_000_000, snapshot("ringing")).is_empty());
        let answered = t0 + Duration::from_secs(2);
        assert_eq!(statuses(&dials.on_snapshot(answered, 3_000_000, snapshot("active"))), ["answered"]);
        assert!(dials.in_progress());
        let ended = answered + Duration::from_millis(12_300);
        let steps = dials.on_snapshot(ended, 15_300_000, snapshot("hangup"));
        assert_eq!(statuses(&steps), ["ended", "finished"]);
        let DialStep::Update(update) = &steps[0] else { panic!("{steps:?}") };
        assert_eq!((update.ended_by, update.reason.as_deref()), (Some("phone"), Some("hangup")));
        assert_eq!(update.duration_seconds, Some(12.3));
        assert_eq!(
            steps[1],
            DialStep::Finished(DialRecord {
                dial_id: "dial-1".into(),
                answered_us: Some(3_000_000),
                ended_us: 15_300_000,
                outcome: "completed".into(),
                billed_seconds: 13,
            })
        );
        // The participant's leave after its hangup, or a late snapshot, changes nothing.
        assert!(dials.on_left(ended, 15_400_000, "sip-dial-1").is_empty());
        assert!(dials.on_snapshot(ended, 15_400_000, snapshot("active")).is_empty());
        assert!(!dials.in_progress());
    }

    #[test]
    fn a_call_answered_at_once_still_reports_ringing_first() {
        let t0 = Instant::now();
        let mut dials = RoomDials::default();
        assert_eq!(statuses(&dials.on_snapshot(t0, 0, snapshot("active"))), ["placed", "ringing", "answered"]);
    }

    #[test]
    fn a_phone_that_leaves_unanswered_failed_and_costs_nothing() {
        let t0 = Instant::now();
        let mut dials = RoomDials::default();
        dials.on_snapshot(t0, 0, snapshot("ringing"));
        let steps = dials.on_left(t0 + Duration::from_secs(30), 30_000_000, "sip-dial-1");
        assert_eq!(statuses(&steps), ["failed", "finished"]);
        let DialStep::Finished(record) = &steps[1] else { panic!("{steps:?}") };
        assert_eq!((record.outcome.as_str(), record.billed_seconds, record.answered_us), ("unanswered", 0, None));
    }

    #[test]
    fn a_session_that_ends_first_hangs_its_call_up() {
        let t0 = Instant::now();
        let mut dials = RoomDials::default();
        dials.on_snapshot(t0, 0, snapshot("active"));
        let steps = dials.on_session_end(t0 + Duration::from_millis(4_500), 4_500_000);
        assert_eq!(statuses(&steps), ["ended", "finished"]);
        let DialStep::Update(update) = &steps[0] else { panic!("{steps:?}") };
        assert_eq!((update.ended_by, update.reason.as_deref()), (Some("svc"), Some("session_ended")));
        let DialStep::Finished(record) = &steps[1] else { panic!("{steps:?}") };
        assert_eq!(record.billed_seconds, 5);
        assert!(dials.on_session_end(t0, 0).is_empty());
    }

    #[test]
    fn every_second_begun_is_billed_as_the_timeline_reports_its_length() {
        let cases = [(0, 0), (1, 1), (14_000_000_000, 14), (14_000_400_000, 15), (14_999_999_999, 15)];
        for (nanos, billed) in cases {
            let answered_for = Duration::from_nanos(nanos);
            assert_eq!(billed_seconds(answered_for), billed, "{answered_for:?}");
            assert_eq!(billed_seconds(answered_for), answered_for.as_secs_f64().ceil() as i64, "{answered_for:?}");
        }
    }
}
