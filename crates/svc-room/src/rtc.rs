//! str0m's rule, written once for both sans-IO cores (the room's [`crate::core`] and the
//! client's `client::core`): after every mutation of an `Rtc` it is drained with `poll_output`
//! until `Timeout`.
//!
//! A mutation only marks its connection [`Dirty`]; [`flush`] is the one place that drains, and
//! it keeps draining while handling the events that come out dirties connections again (an event
//! on one connection often writes into another: forwarded media, routed data). What differs
//! between the two cores is policy only, behind [`DrainRtc`]: where a datagram goes, what a
//! failed connection means (the room logs it and lets the ICE state or the signal connection
//! remove the participant; the client closes).

use std::time::{Duration, Instant};

use str0m::net::Transmit;
use str0m::{Event, Input, Output, Rtc, RtcError};

use crate::stun::NominatedPath;

/// How far a failed connection's next timeout is pushed: it is dead, and whoever owns it removes
/// it on its own schedule; until then its timers must not spin.
const DEAD_CONNECTION_TIMEOUT: Duration = Duration::from_secs(3600);

/// How many due timeouts one drain gives before leaving the rest to the owner's timer: enough
/// for a written frame's packetizing and what it schedules at once, bounded so that a connection
/// that keeps naming the past cannot hold its owner.
const DUE_TIMEOUTS_PER_DRAIN: u32 = 4;

/// One str0m connection and the time it asked to be woken at.
pub(crate) struct PeerConnection {
    pub(crate) rtc: Rtc,
    /// From the last drain's `Output::Timeout`.
    pub(crate) timeout: Instant,
    /// Where the room (an ICE-lite agent) sends: the client's latest nomination, noted by the
    /// room core as datagrams arrive and applied to every transmit of a drain. The client's
    /// cores, full ICE agents, note nothing, and str0m decides.
    pub(crate) path: NominatedPath,
}

/// What a drain produced, in the order str0m produced it (transmits before the error).
#[derive(Debug, Default)]
pub(crate) struct Drained {
    pub(crate) transmits: Vec<Transmit>,
    pub(crate) events: Vec<Event>,
    pub(crate) error: Option<RtcError>,
}

impl PeerConnection {
    /// A connection that is due at once: str0m's ICE agent has no notion of time, and so never
    /// schedules a check, until it has seen a timeout.
    pub(crate) fn new(rtc: Rtc, now: Instant) -> PeerConnection {
        PeerConnection { rtc, timeout: now, path: NominatedPath::default() }
    }

    /// Gives the connection the time if it asked for it by `now`; `Ok(true)` when it did (the
    /// connection must then be marked dirty).
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Result<bool, RtcError> {
        if self.timeout > now {
            return Ok(false);
        }
        self.rtc.handle_input(Input::Timeout(now))?;
        Ok(true)
    }

    /// Polls until `Timeout`, adding what comes out to `drained`. A failed connection gets a far
    /// timeout so that its timers stop.
    ///
    /// A timeout that is already due is given at once, within the drain, a few times at most:
    /// str0m packetizes a written frame only when given the time, so each frame the room wrote
    /// used to come back as a due timeout, another turn of the owner's loop and its timer (four
    /// of five timeouts a room handled at 100 talking sessions).
    pub(crate) fn drain_into(&mut self, now: Instant, drained: &mut Drained) {
        let mut due_given = 0;
        let error = loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(at)) if at <= now && due_given < DUE_TIMEOUTS_PER_DRAIN => {
                    due_given += 1;
                    if let Err(error) = self.rtc.handle_input(Input::Timeout(now)) {
                        break error;
                    }
                }
                Ok(Output::Timeout(at)) => {
                    self.timeout = at;
                    return;
                }
                Ok(Output::Transmit(mut transmit)) => {
                    self.path.direct(&mut transmit);
                    drained.transmits.push(transmit);
                }
                Ok(Output::Event(event)) => drained.events.push(event),
                Err(error) => break error,
            }
        };
        self.timeout += DEAD_CONNECTION_TIMEOUT;
        drained.error = Some(error);
    }
}

/// Connections waiting to be drained, each once.
#[derive(Debug)]
pub(crate) struct Dirty<K> {
    pending: Vec<K>,
    /// What drains produce, emptied and kept for its capacity: a drain per packet then
    /// allocates nothing of ours.
    drained: Drained,
}

impl<K: Copy + PartialEq> Default for Dirty<K> {
    fn default() -> Dirty<K> {
        Dirty { pending: Vec::new(), drained: Drained::default() }
    }
}

impl<K: Copy + PartialEq> Dirty<K> {
    /// Marks a connection for draining (a second mark before the drain is a no-op).
    pub(crate) fn mark(&mut self, key: K) {
        if !self.pending.contains(&key) {
            self.pending.push(key);
        }
    }

    fn pop(&mut self) -> Option<K> {
        self.pending.pop()
    }
}

/// An owner of str0m connections: where [`flush`] finds them and what it does with their output.
pub(crate) trait DrainRtc {
    /// Names one connection of the owner.
    type Key: Copy + PartialEq;

    fn dirty(&mut self) -> &mut Dirty<Self::Key>;
    /// The connection, if it still exists.
    fn connection(&mut self, key: Self::Key) -> Option<&mut PeerConnection>;
    /// A datagram the connection wants sent.
    fn transmit(&mut self, key: Self::Key, transmit: Transmit);
    /// The connection failed (after its last transmits, before its last events).
    fn failed(&mut self, key: Self::Key, error: RtcError);
    /// An event of the connection; may mutate and dirty any connection.
    fn handle_event(&mut self, now: Instant, key: Self::Key, event: Event);
}

/// Drains every dirty connection of `owner`, handling what comes out, until none is dirty.
pub(crate) fn flush<O: DrainRtc>(owner: &mut O, now: Instant) {
    // Taken for the loop (a handler that flushes again drains into a buffer of its own).
    let mut drained = std::mem::take(&mut owner.dirty().drained);
    while let Some(key) = owner.dirty().pop() {
        let Some(connection) = owner.connection(key) else { continue };
        connection.drain_into(now, &mut drained);
        for transmit in drained.transmits.drain(..) {
            owner.transmit(key, transmit);
        }
        if let Some(error) = drained.error.take() {
            owner.failed(key, error);
        }
        for event in drained.events.drain(..) {
            owner.handle_event(now, key, event);
        }
    }
    owner.dirty().drained = drained;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_marked_once_until_drained() {
        let mut dirty = Dirty::default();
        dirty.mark(1);
        dirty.mark(2);
        dirty.mark(1);
        assert_eq!(dirty.pop(), Some(2));
        assert_eq!(dirty.pop(), Some(1));
        assert_eq!(dirty.pop(), None);
        dirty.mark(1);
        assert_eq!(dirty.pop(), Some(1));
    }

    #[test]
    fn a_drain_ends_at_the_timeout_the_connection_names_and_only_due_timeouts_are_given() {
        let start = Instant::now();
        let mut pc = PeerConnection::new(Rtc::builder().build(start), start);
        assert!(pc.handle_timeout(start).expect("fresh connection takes the time"));
        let mut drained = Drained::default();
        pc.drain_into(start, &mut drained);
        assert!(drained.error.is_none());
        assert!(pc.timeout > start, "str0m names a later wake-up");
        let before = pc.timeout;
        assert!(!pc.handle_timeout(before - Duration::from_millis(1)).expect("not due"));
        assert!(pc.handle_timeout(before).expect("due"));
    }
}
