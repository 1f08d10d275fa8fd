//! The response sequencer of the OpenAI-compatible realtime codec, as its own pure type.
//!
//! The upstream allows one response at a time and answers a `response.create` sent while one is
//! active (or already requested) with `conversation_already_has_active_response`. Every create
//! therefore goes through this sequencer: one in flight at a time, requests made meanwhile merged
//! into one, a refused create re-queued, one `response.cancel` per response, and everything that
//! belonged to an upstream session forgotten when the session is replaced. It owns all of that
//! state so the codec only reports what happened and asks what to send; the conditions it cannot
//! see (link, user speech, tool calls) come in as [`Gates`]. No IO, no clock: times are passed in.

use std::collections::HashMap;

use serde_json::{Value, json};

/// A requested `response.create`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ResponseRequest {
    /// Per-response instructions (greetings).
    pub(super) instructions: Option<String>,
}

/// What must hold, outside the sequencer, before a `response.create` may go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Gates {
    /// The upstream session is ready.
    pub(super) link_ready: bool,
    /// Server VAD says the user is speaking (a typed turn waits for the end of speech).
    pub(super) user_speaking: bool,
    /// A tool call has no `function_call_output` upstream yet.
    pub(super) tool_call_open: bool,
}

impl Gates {
    fn open(self) -> bool {
        self.link_ready && !self.user_speaking && !self.tool_call_open
    }
}

/// A `response.create` to send now.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Create {
    /// Our `event_id`, echoed by an error refusing it.
    pub(super) event_id: String,
    /// What was requested (merged).
    pub(super) request: ResponseRequest,
}

impl Create {
    /// The frame on the wire.
    pub(super) fn frame(&self) -> Value {
        let mut frame = json!({"type": "response.create", "event_id": self.event_id});
        if let Some(instructions) = &self.request.instructions {
            frame["response"] = json!({"instructions": instructions});
        }
        frame
    }
}

/// Decides when a `response.create` or a `response.cancel` may go out.
#[derive(Debug, Default)]
pub(super) struct ResponseSequencer {
    /// Between `response.created` and `response.done` (or the upstream says one is active).
    active: bool,
    /// When the current (or last) response started, ms since the codec's origin.
    started_ms: u64,
    /// `event_id` of our `response.create` not yet answered by `response.created`.
    in_flight: Option<String>,
    /// Our `response.create`s by event id (to re-queue one the upstream refuses).
    sent: HashMap<String, ResponseRequest>,
    /// Requested and not sent yet (several requests merge into one).
    queued: Option<ResponseRequest>,
    /// A `response.cancel` went out for the active response (or the server cancels it itself).
    cancel_sent: bool,
    /// A tool output went upstream: one response once every call of the turn is answered.
    follow_up: bool,
    /// Numbers our event ids; never reset, so ids stay unique across upstream sessions.
    seq: u64,
}

impl ResponseSequencer {
    /// Asks for a response. A request not sent yet merges into this one; the newer
    /// instructions win, else the older are kept.
    pub(super) fn request(&mut self, request: ResponseRequest) {
        let merged = match self.queued.take() {
            Some(queued) => ResponseRequest { instructions: request.instructions.or(queued.instructions) },
            None => request,
        };
        self.queued = Some(merged);
    }

    /// The `response.create` to send now: the queued request, if the gates are open, no response
    /// is active and none of our creates awaits its answer.
    pub(super) fn poll_create(&mut self, gates: Gates) -> Option<Create> {
        if !gates.open() || self.active || self.in_flight.is_some() {
            return None;
        }
        let request = self.queued.take()?;
        self.seq += 1;
        let event_id = format!("svc_response_{}", self.seq);
        self.sent.insert(event_id.clone(), request.clone());
        self.in_flight = Some(event_id.clone());
        Some(Create { event_id, request })
    }

    /// `response.created` (ours or the server's own) at `started_ms`.
    pub(super) fn on_created(&mut self, started_ms: u64) {
        self.active = true;
        self.in_flight = None;
        self.started_ms = started_ms;
    }

    /// `response.done`: the next request may go.
    pub(super) fn on_done(&mut self) {
        self.active = false;
        self.cancel_sent = false;
        // Only a create still in flight can be refused later; forget the others.
        let in_flight = &self.in_flight;
        self.sent.retain(|id, _| in_flight.as_deref() == Some(id.as_str()));
    }

    /// `conversation_already_has_active_response` for `event_id`: a response is active after all,
    /// and the refused request is queued again, in place of any queued one. An id that is not one
    /// of our sent creates (or none) queues a plain request.
    pub(super) fn on_already_active(&mut self, event_id: &str) {
        let request = self.sent.remove(event_id).unwrap_or_default();
        self.in_flight = None;
        self.active = true;
        self.queued = Some(request);
    }

    /// Any other (non-fatal) error naming `event_id`: whether it refused the create in flight,
    /// which is then given up (not re-queued) and the next request may go. Other ids change
    /// nothing.
    pub(super) fn on_create_failed(&mut self, event_id: &str) -> bool {
        if self.in_flight.as_deref() != Some(event_id) {
            return false;
        }
        self.in_flight = None;
        true
    }

    /// Whether a `response.cancel` must go out now: a response is active and not cancelled yet.
    pub(super) fn cancel(&mut self) -> bool {
        if !self.active || self.cancel_sent {
            return false;
        }
        self.cancel_sent = true;
        true
    }

    /// The user started speaking: with `interrupt_response` the server cancels the active response
    /// itself, so no `response.cancel` is needed for it.
    pub(super) fn cancelled_by_server(&mut self) {
        if self.active {
            self.cancel_sent = true;
        }
    }

    /// A tool output (or a background call's "started" output) went upstream: one response is due
    /// once every call of the turn is answered, see [`ResponseSequencer::follow_up`].
    pub(super) fn expect_follow_up(&mut self) {
        self.follow_up = true;
    }

    /// Requests the due follow-up response once no tool call is open and no response is active;
    /// whether it did (the caller then tries to send it).
    pub(super) fn follow_up(&mut self, tool_call_open: bool) -> bool {
        if !self.follow_up || tool_call_open || self.active {
            return false;
        }
        self.follow_up = false;
        self.request(ResponseRequest::default());
        true
    }

    /// No response is active and none of our creates awaits its answer (a queued request does not
    /// count: it waits for the gates).
    pub(super) fn is_idle(&self) -> bool {
        !self.active && self.in_flight.is_none()
    }

    /// When the current (or last) response started, as given to [`ResponseSequencer::on_created`].
    pub(super) fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// A new upstream session: the active response, the create in flight, the sent creates, the
    /// cancel and a due follow-up belonged to the old one and are forgotten. The queued request is
    /// kept (a turn asked for during the reconnect is answered on the new session), and so are the
    /// event id numbering and the last start time.
    pub(super) fn reset(&mut self) {
        self.active = false;
        self.in_flight = None;
        self.sent.clear();
        self.cancel_sent = false;
        self.follow_up = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: Gates = Gates { link_ready: true, user_speaking: false, tool_call_open: false };

    fn plain() -> ResponseRequest {
        ResponseRequest::default()
    }

    fn said(text: &str) -> ResponseRequest {
        ResponseRequest { instructions: Some(text.to_owned()) }
    }

    fn create(n: u64, request: ResponseRequest) -> Option<Create> {
        Some(Create { event_id: format!("svc_response_{n}"), request })
    }

    #[test]
    fn the_frame_carries_the_event_id_and_any_instructions() {
        let Some(bare) = create(1, plain()) else { panic!("a create") };
        assert_eq!(bare.frame(), json!({"type": "response.create", "event_id": "svc_response_1"}));
        let Some(greeting) = create(2, said("Hi")) else { panic!("a create") };
        assert_eq!(
            greeting.frame(),
            json!({"type": "response.create", "event_id": "svc_response_2", "response": {"instructions": "Hi"}})
        );
    }

    #[test]
    fn one_create_at_a_time_and_requests_made_meanwhile_merge() {
        let mut seq = ResponseSequencer::default();
        assert_eq!(seq.poll_create(OPEN), None, "nothing requested");
        seq.request(plain());
        assert_eq!(seq.poll_create(OPEN), create(1, plain()));
        // In flight: the next requests wait and merge, newer instructions winning.
        seq.request(said("older"));
        assert_eq!(seq.poll_create(OPEN), None);
        seq.request(said("newer"));
        seq.request(plain());
        assert_eq!(seq.poll_create(OPEN), None);
        seq.on_created(40);
        assert_eq!(seq.poll_create(OPEN), None, "a response is active");
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(2, said("newer")), "one create for three requests");
        assert_eq!(seq.poll_create(OPEN), None, "and only one");
    }

    #[test]
    fn response_done_frees_the_next_request() {
        let mut seq = ResponseSequencer::default();
        seq.request(plain());
        assert_eq!(seq.poll_create(OPEN), create(1, plain()));
        seq.on_created(10);
        seq.request(said("next"));
        assert_eq!(seq.poll_create(OPEN), None);
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(2, said("next")));
        seq.on_created(20);
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), None, "nothing left");
    }

    #[test]
    fn every_gate_holds_the_request_until_it_opens() {
        let closed = [
            Gates { link_ready: false, ..OPEN },
            Gates { user_speaking: true, ..OPEN },
            Gates { tool_call_open: true, ..OPEN },
        ];
        for gates in closed {
            let mut seq = ResponseSequencer::default();
            seq.request(said("wait"));
            assert_eq!(seq.poll_create(gates), None, "{gates:?}");
            assert_eq!(seq.poll_create(gates), None, "{gates:?}");
            assert!(seq.is_idle(), "a held request is not in flight");
            assert_eq!(seq.poll_create(OPEN), create(1, said("wait")), "{gates:?}");
        }
        // A response the server started on its own (server VAD) holds ours too.
        let mut seq = ResponseSequencer::default();
        seq.on_created(5);
        seq.request(plain());
        assert_eq!(seq.poll_create(OPEN), None);
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(1, plain()));
    }

    #[test]
    fn already_active_requeues_exactly_the_refused_request() {
        let mut seq = ResponseSequencer::default();
        seq.request(said("greet"));
        assert_eq!(seq.poll_create(OPEN), create(1, said("greet")));
        seq.request(said("later"));
        seq.on_already_active("svc_response_1");
        assert!(!seq.is_idle(), "the upstream has a response active");
        assert_eq!(seq.poll_create(OPEN), None);
        seq.on_done();
        // The refused request replaces what was queued meanwhile (as the codec always did).
        assert_eq!(seq.poll_create(OPEN), create(2, said("greet")));
        assert_eq!(seq.poll_create(OPEN), None);

        // The server's own response.created came first (clearing the in-flight create), then the
        // refusal of ours: still the exact request.
        seq.on_created(30);
        seq.on_done();
        seq.request(said("again"));
        assert_eq!(seq.poll_create(OPEN), create(3, said("again")));
        seq.on_created(50);
        seq.on_already_active("svc_response_3");
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(4, said("again")));

        // Replaced, not merged: instructions queued behind a refused plain create are dropped.
        seq.on_created(60);
        seq.on_done();
        seq.request(plain());
        assert_eq!(seq.poll_create(OPEN), create(5, plain()));
        seq.request(said("queued behind"));
        seq.on_already_active("svc_response_5");
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(6, plain()));
    }

    #[test]
    fn a_refused_create_done_meanwhile_is_forgotten() {
        let mut seq = ResponseSequencer::default();
        seq.request(said("first"));
        assert_eq!(seq.poll_create(OPEN), create(1, said("first")));
        seq.on_created(10);
        seq.on_done();
        // svc_response_1 was answered and done: a late refusal naming it re-queues a plain request.
        seq.on_already_active("svc_response_1");
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(2, plain()));
    }

    #[test]
    fn unknown_event_ids_are_ignored() {
        let mut seq = ResponseSequencer::default();
        seq.request(said("mine"));
        assert_eq!(seq.poll_create(OPEN), create(1, said("mine")));
        seq.request(plain());
        assert!(!seq.on_create_failed("svc_response_99"), "not ours");
        assert!(!seq.on_create_failed(""), "no id");
        assert_eq!(seq.poll_create(OPEN), None, "svc_response_1 is still in flight");
        // The error that names our create gives it up and frees the next.
        assert!(seq.on_create_failed("svc_response_1"));
        assert!(!seq.on_create_failed("svc_response_1"), "only once");
        assert_eq!(seq.poll_create(OPEN), create(2, plain()));
        assert_eq!(seq.poll_create(OPEN), None, "the failed request is not re-sent");

        // "Already active" with an id that is not ours still means a response is active: a plain
        // request is queued behind it, replacing the queued one.
        let mut seq = ResponseSequencer::default();
        seq.request(said("queued"));
        seq.on_already_active("svc_response_x");
        assert_eq!(seq.poll_create(OPEN), None);
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(1, plain()));
    }

    #[test]
    fn cancel_goes_out_once_per_response_and_never_without_one() {
        let mut seq = ResponseSequencer::default();
        assert!(!seq.cancel(), "no response active");
        seq.request(plain());
        assert_eq!(seq.poll_create(OPEN), create(1, plain()));
        assert!(!seq.cancel(), "requested but not created yet");
        seq.on_created(10);
        assert!(seq.cancel());
        assert!(!seq.cancel(), "already sent for this response");
        seq.on_done();
        assert!(!seq.cancel());
        seq.on_created(20);
        assert!(seq.cancel(), "a new response can be cancelled again");

        // Server VAD cancels the active response itself.
        let mut seq = ResponseSequencer::default();
        seq.cancelled_by_server();
        seq.on_created(10);
        assert!(seq.cancel(), "speech before the response does not count");
        let mut seq = ResponseSequencer::default();
        seq.on_created(10);
        seq.cancelled_by_server();
        assert!(!seq.cancel());
    }

    #[test]
    fn follow_up_waits_for_every_tool_output_and_the_end_of_the_response() {
        let mut seq = ResponseSequencer::default();
        assert!(!seq.follow_up(false), "none due");
        seq.expect_follow_up();
        seq.expect_follow_up();
        assert!(!seq.follow_up(true), "a call is still open");
        seq.on_created(10);
        assert!(!seq.follow_up(false), "a response is active");
        seq.on_done();
        assert!(seq.follow_up(false));
        assert!(!seq.follow_up(false), "one follow-up for the turn");
        assert_eq!(seq.poll_create(OPEN), create(1, plain()));
        assert_eq!(seq.poll_create(OPEN), None);
    }

    #[test]
    fn idle_means_no_response_active_and_none_in_flight() {
        let mut seq = ResponseSequencer::default();
        assert!(seq.is_idle());
        seq.request(plain());
        assert!(seq.is_idle(), "queued only");
        assert_eq!(seq.poll_create(OPEN), create(1, plain()));
        assert!(!seq.is_idle(), "in flight");
        seq.on_created(1234);
        assert!(!seq.is_idle(), "active");
        assert_eq!(seq.started_ms(), 1234);
        seq.on_done();
        assert!(seq.is_idle());
        assert_eq!(seq.started_ms(), 1234, "kept after the response");
    }

    #[test]
    fn reset_forgets_the_old_session_but_keeps_the_queued_request() {
        let mut seq = ResponseSequencer::default();
        seq.request(said("first"));
        assert_eq!(seq.poll_create(OPEN), create(1, said("first")));
        seq.request(said("typed during the drop"));
        seq.expect_follow_up();
        seq.reset();
        assert!(seq.is_idle(), "the create in flight is gone, not re-queued");
        assert!(!seq.cancel(), "nothing active to cancel");
        assert!(!seq.follow_up(false), "the follow-up belonged to the old session");
        assert_eq!(seq.poll_create(OPEN), create(2, said("typed during the drop")), "ids keep counting");
        // A refusal naming a create of the old session finds nothing to re-queue.
        seq.reset();
        seq.on_already_active("svc_response_1");
        seq.on_done();
        assert_eq!(seq.poll_create(OPEN), create(3, plain()));

        // Reset while a response is active and cancelled: the new session starts clean.
        let mut seq = ResponseSequencer::default();
        seq.on_created(700);
        assert!(seq.cancel());
        seq.reset();
        assert!(seq.is_idle());
        assert_eq!(seq.started_ms(), 700, "the last start time is kept");
        seq.on_created(900);
        assert!(seq.cancel(), "the cancel of the old session is forgotten");
    }
}
