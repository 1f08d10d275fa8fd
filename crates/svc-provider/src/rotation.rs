//! When a provider whose upstream sessions end at a hard cap (OpenAI 60 min, xAI 120 min,
//! GPT-Live) replaces its session before the cap: [`CapRotation`], shared by the realtime and
//! GPT-Live codecs. (Gemini's rotation follows the upstream's `goAway` and its resumption
//! handles instead.)

use std::time::Instant;

use svc_provider_core::SessionLimits;

/// The rotation clock of one codec: `rotate_after` past the upstream session's ready, the
/// session is replaced at the first quiet moment, or `quiet_wait_max` after it fell due
/// regardless.
///
/// Sans-IO like the codecs: the codec asks [`CapRotation::due`] whenever its state may have
/// changed (every input, upstream message and timeout) and sleeps until
/// [`CapRotation::deadline`].
#[derive(Debug, Default)]
pub(crate) struct CapRotation {
    /// When the current upstream session became ready (none while connecting).
    ready_at: Option<Instant>,
    /// When the rotation fell due and began waiting for a quiet moment.
    due_since: Option<Instant>,
    /// The last time [`CapRotation::due`] looked at a due rotation.
    checked_at: Option<Instant>,
    /// A replacement session is being opened (or the link is being re-established).
    rotating: bool,
}

impl CapRotation {
    /// The upstream session is ready at `now`; returns whether that ends a rotation (a
    /// reconnect rather than the first session).
    pub(crate) fn on_ready(&mut self, now: Instant) -> bool {
        self.ready_at = Some(now);
        std::mem::take(&mut self.rotating)
    }

    /// The current upstream session is being left (rotated away or lost); returns whether this
    /// starts the rotation, so that `reconnecting` is announced once however many steps follow.
    pub(crate) fn begin(&mut self) -> bool {
        let first = !self.rotating;
        *self = CapRotation { rotating: true, ..CapRotation::default() };
        first
    }

    /// Whether the session should be replaced now. `quiet`: nothing is under way that a rotation
    /// would cut (the codec's own judgement, including any quiet gap it keeps).
    pub(crate) fn due(&mut self, now: Instant, limits: &SessionLimits, quiet: bool) -> bool {
        let Some(ready_at) = self.ready_at else { return false };
        if now < ready_at + limits.rotate_after {
            return false;
        }
        let since = *self.due_since.get_or_insert(now);
        self.checked_at = Some(now);
        quiet || now >= since + limits.quiet_wait_max
    }

    /// When the codec must look again, while its session is ready: the moment the rotation falls
    /// due, then the earlier of `quiet_from` (when the codec's quiet gap will have passed, if it
    /// keeps one) and the hard deadline.
    ///
    /// A `quiet_from` that had already passed at the last check is not a reason to wake: what
    /// kept the session busy then is state, and every change of state is an input or an upstream
    /// message that checks again. Waking for it would return a deadline in the past and spin.
    pub(crate) fn deadline(&self, limits: &SessionLimits, quiet_from: Option<Instant>) -> Option<Instant> {
        let ready_at = self.ready_at?;
        let Some(since) = self.due_since else { return Some(ready_at + limits.rotate_after) };
        let hard = since + limits.quiet_wait_max;
        let quiet = quiet_from.filter(|at| self.checked_at.is_none_or(|checked| *at > checked));
        Some(quiet.map_or(hard, |quiet| quiet.min(hard)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits() -> SessionLimits {
        SessionLimits {
            rotate_after: Duration::from_secs(100),
            quiet_wait_max: Duration::from_secs(10),
            ..SessionLimits::default()
        }
    }

    #[test]
    fn falls_due_after_the_cap_margin_and_waits_for_quiet_up_to_the_hard_deadline() {
        let (t0, limits) = (Instant::now(), limits());
        let mut rotation = CapRotation::default();
        assert_eq!(rotation.deadline(&limits, None), None, "nothing to time before the session is ready");
        assert!(!rotation.on_ready(t0), "the first session is not a reconnect");
        let due = t0 + limits.rotate_after;
        assert_eq!(rotation.deadline(&limits, None), Some(due));
        assert!(!rotation.due(due - Duration::from_secs(1), &limits, true), "not before it falls due");
        assert!(!rotation.due(due, &limits, false), "busy");
        assert_eq!(rotation.deadline(&limits, None), Some(due + limits.quiet_wait_max));
        assert!(!rotation.due(due + Duration::from_secs(9), &limits, false));
        assert!(rotation.due(due + Duration::from_secs(10), &limits, false), "the hard deadline");
        assert!(rotation.due(due + Duration::from_secs(3), &limits, true), "or any quiet moment before it");
    }

    #[test]
    fn a_quiet_moment_already_passed_is_not_a_deadline() {
        let (t0, limits) = (Instant::now(), limits());
        let mut rotation = CapRotation::default();
        rotation.on_ready(t0);
        let due = t0 + limits.rotate_after;
        // The codec's quiet gap ended long ago, but the user is speaking: not quiet.
        let quiet_from = Some(due - Duration::from_secs(30));
        assert!(!rotation.due(due, &limits, false));
        let next = rotation.deadline(&limits, quiet_from).expect("a deadline");
        assert!(next > due, "a deadline at or before the last check would spin: {:?}", next - due);
        assert_eq!(next, due + limits.quiet_wait_max);
        // A quiet gap still running is a reason to look again when it ends.
        let later = Some(due + Duration::from_secs(2));
        assert_eq!(rotation.deadline(&limits, later), later);
    }

    #[test]
    fn a_rotation_is_announced_once_and_forgets_the_old_session() {
        let (t0, limits) = (Instant::now(), limits());
        let mut rotation = CapRotation::default();
        rotation.on_ready(t0);
        let due = t0 + limits.rotate_after;
        assert!(!rotation.due(due, &limits, false));
        assert!(rotation.begin(), "the first step announces");
        assert!(!rotation.begin(), "a failed attempt after it does not again");
        assert_eq!(rotation.deadline(&limits, None), None, "nothing to time while connecting");
        let back = due + Duration::from_secs(1);
        assert!(rotation.on_ready(back), "ready again ends the rotation");
        // The new session's clock starts over: the old one's waiting does not carry over.
        assert!(!rotation.due(back + limits.rotate_after, &limits, false));
        assert_eq!(rotation.deadline(&limits, None), Some(back + limits.rotate_after + limits.quiet_wait_max));
    }
}
