//! The dispatcher's routing table, sans-IO: which call task gets a SIP [`CallEvent`].
//!
//! The svc-sip shell has one event stream for every call; each call task has its own bounded
//! queue. The shell answers a dial (with the new [`CallId`]) on a different channel from its
//! events, so a call's first events (`Dialing`, even `Failed`) can reach the dispatcher before
//! `PhoneService::dial` has registered the call: those wait here, bounded, until it does.
//!
//! **A full queue.** A call's queue holds [`CALL_QUEUE`] events, far more than a healthy call
//! ever has waiting (a call sees a handful of events in its life, DTMF aside). A full queue
//! means the call task is stuck; the dispatcher never waits for it (that would stall every other
//! call behind it) and never silently drops an event (a lost `Answered` or `Ended` would leave
//! the call half alive). It unroutes the call and reports [`Routed::Overflow`], and the
//! dispatcher hangs the call up: the call task sees its queue close and ends the call as
//! `event_overflow`.

use std::collections::{HashMap, VecDeque};

use svc_sip::{CallEvent, CallEventKind, CallId};
use tokio::sync::mpsc;

/// Events waiting in one call's queue.
pub const CALL_QUEUE: usize = 64;
/// Calls whose events may wait for their registration.
pub const MAX_UNCLAIMED_CALLS: usize = 64;
/// Ended calls remembered, so that their last events (`Closed` comes after the call task has
/// finished) are dropped instead of waiting as unclaimed.
pub const MAX_RETIRED_CALLS: usize = 256;
/// Events kept per unclaimed call (a dial's early events are `Dialing`, `Trying`, maybe a
/// quick `Failed` and `Closed`).
pub const MAX_UNCLAIMED_EVENTS: usize = 16;

/// What became of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    /// In the call's queue.
    Delivered,
    /// Kept until the call is registered.
    Held,
    /// The call's task is gone (its queue closed) or the event is for nobody and could not be
    /// held; dropped.
    Dropped,
    /// The call's queue was full: the call is unrouted and must be hung up.
    Overflow(CallId),
}

/// The routing table.
#[derive(Debug, Default)]
pub struct Router {
    calls: HashMap<CallId, mpsc::Sender<CallEvent>>,
    unclaimed: HashMap<CallId, VecDeque<CallEvent>>,
    /// Unclaimed calls in arrival order, to evict the oldest.
    unclaimed_order: VecDeque<CallId>,
    /// Recently unregistered calls, oldest first.
    retired: VecDeque<CallId>,
}

impl Router {
    /// An empty table.
    pub fn new() -> Router {
        Router::default()
    }

    /// Registers `call`'s queue, first handing it the events that arrived before. Returns
    /// `false` when those did not fit (the call must then be hung up).
    pub fn register(&mut self, call: CallId, queue: mpsc::Sender<CallEvent>) -> bool {
        let mut fits = true;
        if let Some(held) = self.unclaimed.remove(&call) {
            self.unclaimed_order.retain(|id| id != &call);
            for event in held {
                fits &= queue.try_send(event).is_ok();
            }
        }
        if fits {
            self.calls.insert(call, queue);
        }
        fits
    }

    /// Forgets `call` (its task has ended); its later events are dropped.
    pub fn unregister(&mut self, call: &CallId) {
        self.calls.remove(call);
        if self.unclaimed.remove(call).is_some() {
            self.unclaimed_order.retain(|id| id != call);
        }
        if !self.retired.contains(call) {
            if self.retired.len() >= MAX_RETIRED_CALLS {
                self.retired.pop_front();
            }
            self.retired.push_back(call.clone());
        }
    }

    /// Calls routed now.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// No call routed.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Routes one event without waiting.
    pub fn route(&mut self, event: CallEvent) -> Routed {
        if let Some(queue) = self.calls.get(&event.call) {
            let closed = matches!(event.kind, CallEventKind::Closed);
            let call = event.call.clone();
            return match queue.try_send(event) {
                Ok(()) => {
                    // The core forgets the call after `Closed`; so does the table.
                    if closed {
                        self.calls.remove(&call);
                    }
                    Routed::Delivered
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    self.calls.remove(&call);
                    Routed::Overflow(call)
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.calls.remove(&call);
                    Routed::Dropped
                }
            };
        }
        if self.retired.contains(&event.call) {
            return Routed::Dropped;
        }
        self.hold(event)
    }

    fn hold(&mut self, event: CallEvent) -> Routed {
        if let Some(held) = self.unclaimed.get_mut(&event.call) {
            if held.len() >= MAX_UNCLAIMED_EVENTS {
                return Routed::Dropped;
            }
            held.push_back(event);
            return Routed::Held;
        }
        // A call nobody claims (its dial was abandoned, or it is a stray of the shell's) must
        // not grow the table: the oldest unclaimed call makes room.
        if self.unclaimed.len() >= MAX_UNCLAIMED_CALLS
            && let Some(oldest) = self.unclaimed_order.pop_front()
        {
            self.unclaimed.remove(&oldest);
        }
        self.unclaimed_order.push_back(event.call.clone());
        self.unclaimed.insert(event.call.clone(), VecDeque::from([event]));
        Routed::Held
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn event(call: &str, kind: CallEventKind) -> CallEvent {
        CallEvent { call: CallId(call.to_owned()), at: Instant::now(), kind }
    }

    #[test]
    fn events_before_registration_are_handed_over_in_order() {
        let mut router = Router::new();
        assert_eq!(router.route(event("a", CallEventKind::Dialing { request_uri: "sip:x".into() })), Routed::Held);
        assert_eq!(router.route(event("a", CallEventKind::Trying)), Routed::Held);
        let (tx, mut rx) = mpsc::channel(CALL_QUEUE);
        assert!(router.register(CallId("a".into()), tx));
        assert_eq!(router.route(event("a", CallEventKind::Closed)), Routed::Delivered);
        let kinds: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).map(|e| e.kind).collect();
        assert!(matches!(kinds[0], CallEventKind::Dialing { .. }));
        assert_eq!(kinds[1..], [CallEventKind::Trying, CallEventKind::Closed]);
        // `Closed` unroutes the call.
        assert!(router.is_empty());
    }

    #[test]
    fn a_full_queue_overflows_that_call_only() {
        let mut router = Router::new();
        let (slow, _slow_rx) = mpsc::channel(2);
        let (fast, mut fast_rx) = mpsc::channel(CALL_QUEUE);
        router.register(CallId("slow".into()), slow);
        router.register(CallId("fast".into()), fast);
        assert_eq!(router.route(event("slow", CallEventKind::Trying)), Routed::Delivered);
        assert_eq!(router.route(event("slow", CallEventKind::Trying)), Routed::Delivered);
        assert_eq!(router.route(event("slow", CallEventKind::Trying)), Routed::Overflow(CallId("slow".into())));
        assert_eq!(router.len(), 1);
        for _ in 0..10 {
            assert_eq!(router.route(event("fast", CallEventKind::Trying)), Routed::Delivered);
        }
        assert_eq!(std::iter::from_fn(|| fast_rx.try_recv().ok()).count(), 10);
        // Later events of the overflowed call wait as unclaimed (bounded), never reach it.
        assert_eq!(router.route(event("slow", CallEventKind::Closed)), Routed::Held);
    }

    #[test]
    fn a_closed_queue_drops_and_unroutes() {
        let mut router = Router::new();
        let (tx, rx) = mpsc::channel(CALL_QUEUE);
        router.register(CallId("a".into()), tx);
        drop(rx);
        assert_eq!(router.route(event("a", CallEventKind::Trying)), Routed::Dropped);
        assert!(router.is_empty());
    }

    #[test]
    fn unclaimed_events_are_bounded() {
        let mut router = Router::new();
        for n in 0..MAX_UNCLAIMED_CALLS * 3 {
            router.route(event(&format!("stray-{n}"), CallEventKind::Trying));
        }
        assert_eq!(router.unclaimed.len(), MAX_UNCLAIMED_CALLS);
        assert_eq!(router.unclaimed_order.len(), MAX_UNCLAIMED_CALLS);
        for _ in 0..MAX_UNCLAIMED_EVENTS * 2 {
            router.route(event("busy", CallEventKind::Trying));
        }
        assert_eq!(router.unclaimed.get(&CallId("busy".into())).map(VecDeque::len), Some(MAX_UNCLAIMED_EVENTS));
        // The oldest strays were evicted, the newest kept.
        assert!(!router.unclaimed.contains_key(&CallId("stray-0".into())));
        router.unregister(&CallId("busy".into()));
        assert!(!router.unclaimed.contains_key(&CallId("busy".into())));
    }

    #[test]
    fn events_after_unregistering_are_dropped_and_the_memory_is_bounded() {
        let mut router = Router::new();
        let (tx, _rx) = mpsc::channel(CALL_QUEUE);
        router.register(CallId("a".into()), tx);
        router.unregister(&CallId("a".into()));
        assert_eq!(router.route(event("a", CallEventKind::Closed)), Routed::Dropped);
        assert!(router.unclaimed.is_empty());
        for n in 0..MAX_RETIRED_CALLS * 2 {
            router.unregister(&CallId(format!("old-{n}")));
        }
        assert_eq!(router.retired.len(), MAX_RETIRED_CALLS);
        // "a" has been forgotten: its events would wait again (bounded) as unclaimed.
        assert_eq!(router.route(event("a", CallEventKind::Closed)), Routed::Held);
    }

    #[test]
    fn held_events_that_do_not_fit_refuse_the_registration() {
        let mut router = Router::new();
        for _ in 0..4 {
            router.route(event("a", CallEventKind::Trying));
        }
        let (tx, _rx) = mpsc::channel(2);
        assert!(!router.register(CallId("a".into()), tx));
        assert!(router.is_empty());
    }
}
