//! [`SipCore`]: the sans-IO user agent holding every outbound call, keyed by Call-ID.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rsip::headers as h;
use rsip::headers::UntypedHeader as _;
use rsip::{Header, Method, SipMessage};

use crate::call::Call;
use crate::dialog::{ALLOW, Shared};
use crate::message::{self, Dropped};
use crate::model::{CallEvent, CallEventKind, CallId, ConfigError, DialError, SipConfig, Transmit, is_e164};
use crate::sdp::LocalMedia;

/// The SIP user agent, as a state machine: feed it datagrams, timeouts and commands with the
/// current time; drain datagrams to send, call events and its next deadline.
///
/// It never reads the clock and never touches a socket; identifiers come from its seeded RNG,
/// so a test that feeds the same inputs gets the same bytes out.
#[derive(Debug)]
pub struct SipCore {
    shared: Shared,
    calls: BTreeMap<CallId, Call>,
}

impl SipCore {
    /// A user agent sending to the already-resolved `trunk` address; `seed` drives Call-IDs,
    /// tags, branches and cnonces (use a random seed in production).
    pub fn new(config: SipConfig, trunk: SocketAddr, seed: u64) -> Result<SipCore, ConfigError> {
        SipCore::with_rng(config, trunk, StdRng::seed_from_u64(seed))
    }

    /// As [`SipCore::new`], with the RNG given.
    pub fn with_rng(config: SipConfig, trunk: SocketAddr, rng: StdRng) -> Result<SipCore, ConfigError> {
        let uri = rsip::Uri::try_from(config.trunk_uri.as_str())
            .map_err(|_| ConfigError::TrunkUri(config.trunk_uri.clone()))?;
        let scheme_ok = matches!(uri.scheme, Some(rsip::Scheme::Sip));
        let domain = uri.host_with_port.to_string();
        if !scheme_ok || domain.is_empty() {
            return Err(ConfigError::TrunkUri(config.trunk_uri));
        }
        if !is_e164(&config.caller_number) {
            return Err(ConfigError::CallerNumber(config.caller_number));
        }
        Ok(SipCore {
            shared: Shared { config, trunk, domain, transmits: VecDeque::new(), events: VecDeque::new(), rng },
            calls: BTreeMap::new(),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &SipConfig {
        &self.shared.config
    }

    /// Where requests go.
    pub fn trunk(&self) -> SocketAddr {
        self.shared.trunk
    }

    /// Calls held (including those only waiting for their transactions to run out).
    pub fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// Whether `call` is still held.
    pub fn has_call(&self, call: &CallId) -> bool {
        self.calls.contains_key(call)
    }

    /// Some request of ours still waits for its final response (a shutdown waits for these).
    pub fn has_pending_requests(&self) -> bool {
        self.calls.values().any(Call::has_pending_requests)
    }

    fn transactions(&self) -> usize {
        self.calls.values().map(Call::transactions).sum()
    }

    /// Places a call to `to_number` (E.164) from `from_number` (or the configured caller
    /// number), offering `offer`. The INVITE is queued at once.
    pub fn dial(
        &mut self,
        now: Instant,
        to_number: &str,
        from_number: Option<&str>,
        offer: LocalMedia,
    ) -> Result<CallId, DialError> {
        if !is_e164(to_number) {
            return Err(DialError::InvalidNumber(to_number.to_owned()));
        }
        let from_number = from_number.unwrap_or(&self.shared.config.caller_number).to_owned();
        if !is_e164(&from_number) {
            return Err(DialError::InvalidNumber(from_number));
        }
        // A call needs up to a handful of transactions at once (INVITE, CANCEL, BYE, retries).
        if self.calls.len() >= self.shared.config.max_calls
            || self.transactions() + 4 > self.shared.config.max_transactions
        {
            return Err(DialError::AtCapacity);
        }
        let call = Call::start(&mut self.shared, now, to_number, &from_number, offer);
        let id = call.id.clone();
        self.calls.insert(id.clone(), call);
        Ok(id)
    }

    /// Hangs `call` up: CANCEL before a final response (sent as soon as a provisional allows
    /// it), BYE once answered; nothing if it is already over. Returns whether the call exists.
    pub fn hangup(&mut self, now: Instant, call: &CallId) -> bool {
        let Some(entry) = self.calls.get_mut(call) else { return false };
        entry.hangup(&mut self.shared, now);
        self.reap(now);
        true
    }

    /// Hangs every call up (shutdown).
    pub fn hangup_all(&mut self, now: Instant) {
        for call in self.calls.values_mut() {
            call.hangup(&mut self.shared, now);
        }
        self.reap(now);
    }

    /// A datagram arrived from `from`. `Err` says why it was not used (for the shell's
    /// counters and logs); it never panics, whatever the bytes.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) -> Result<(), Dropped> {
        if from.ip() != self.shared.trunk.ip() {
            return Err(Dropped::UnknownSource);
        }
        let incoming = message::parse(bytes, self.shared.config.max_message_bytes)?;
        let outcome = match &incoming.message {
            SipMessage::Response(_) => self.on_response(now, &incoming),
            SipMessage::Request(_) => self.on_request(now, from, &incoming),
        };
        self.reap(now);
        outcome
    }

    fn on_response(&mut self, now: Instant, incoming: &message::Incoming) -> Result<(), Dropped> {
        let response = &incoming.message;
        if let SipMessage::Response(r) = response
            && !(100..700).contains(&r.status_code.code())
        {
            // §7.2: status codes are 1xx–6xx; anything else is not a class we can treat.
            return Err(Dropped::Malformed("status code out of range".into()));
        }
        // §18.1.2: a response must carry exactly our one Via.
        let (branch, vias) = message::top_branch(response).ok_or_else(|| Dropped::Malformed("Via".into()))?;
        if vias != 1 {
            return Err(Dropped::Malformed("more than one Via in a response".into()));
        }
        if incoming.truncated {
            // §18.3: a response shorter than its Content-Length is discarded.
            return Err(Dropped::Malformed("body shorter than Content-Length".into()));
        }
        let (cseq, method) = message::cseq(response).ok_or_else(|| Dropped::Malformed("CSeq".into()))?;
        let call_id = message::call_id(response).ok_or_else(|| Dropped::Malformed("Call-ID".into()))?;
        let call = self.calls.get_mut(&CallId(call_id)).ok_or(Dropped::Stray)?;
        call.on_response(&mut self.shared, now, incoming, &branch, cseq, method)
    }

    fn on_request(&mut self, now: Instant, from: SocketAddr, incoming: &message::Incoming) -> Result<(), Dropped> {
        let SipMessage::Request(request) = &incoming.message else { return Err(Dropped::Stray) };
        let message = &incoming.message;
        if !message::can_answer(message) {
            // Without Via, From, To, Call-ID and CSeq no response can be formed (§8.2.6.2).
            return Err(Dropped::Malformed("request without Via, From, To, Call-ID or CSeq".into()));
        }
        let is_ack = request.method == Method::Ack && incoming.unknown_method.is_none();
        let cseq = message::cseq(message);
        let bad = if incoming.truncated {
            Some("Content-Length Exceeds Body")
        } else if message::top_branch(message).is_none() {
            Some("Bad Via")
        } else if message::call_id(message).is_none() {
            Some("Bad Call-ID")
        } else if incoming.unknown_method.is_none() && cseq.is_none_or(|(_, method)| method != request.method) {
            Some("Bad CSeq")
        } else {
            None
        };
        if let Some(reason) = bad {
            if is_ack {
                // An ACK is never answered (§17.2.3).
                return Err(Dropped::Malformed(reason.into()));
            }
            self.stateless(from, message, 400, reason, Vec::new());
            return Err(Dropped::Rejected(400));
        }
        let call_id = message::call_id(message).unwrap_or_default();
        // At the transaction limit, requests are still answered, just not remembered.
        let may_remember = self.transactions() < self.shared.config.max_transactions;
        if let Some(call) = self.calls.get_mut(&CallId(call_id)) {
            return call.on_request(&mut self.shared, now, from, incoming, may_remember);
        }
        // Outside any call of ours.
        let has_to_tag = message::to_tag(message).is_some();
        let (status, reason, extra) = match request.method {
            _ if incoming.unknown_method.is_some() => (501, "Not Implemented", vec![allow()]),
            Method::Ack => return Err(Dropped::Stray),
            // Trunks probe with out-of-dialog OPTIONS (RFC 3261 §11.2).
            Method::Options if !has_to_tag => {
                (200, "OK", vec![allow(), Header::Accept(h::Accept::new("application/sdp"))])
            }
            // We only place calls; an incoming one may be retried elsewhere.
            Method::Invite if !has_to_tag => (480, "Temporarily Unavailable", Vec::new()),
            _ if has_to_tag => (481, "Call/Transaction Does Not Exist", Vec::new()),
            Method::Bye | Method::Cancel | Method::Info | Method::PRack | Method::Update => {
                (481, "Call/Transaction Does Not Exist", Vec::new())
            }
            _ => (405, "Method Not Allowed", vec![allow()]),
        };
        self.stateless(from, message, status, reason, extra);
        if status == 200 { Ok(()) } else { Err(Dropped::Rejected(status)) }
    }

    /// A response not kept for retransmissions: a retransmitted request is answered again the
    /// same way.
    fn stateless(&mut self, to: SocketAddr, request: &SipMessage, status: u16, reason: &str, extra: Vec<Header>) {
        let tag = self.shared.token(12);
        let bytes = message::response(request, status, reason, Some(&tag), extra, None);
        self.shared.send_to(to, bytes);
    }

    /// The instant of [`SipCore::poll_timeout`] (or later) has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        for call in self.calls.values_mut() {
            if call.deadline().is_some_and(|at| at <= now) {
                call.on_timeout(&mut self.shared, now);
            }
        }
        self.reap(now);
    }

    /// Forgets calls that are over and emits their `Closed`.
    fn reap(&mut self, now: Instant) {
        let finished: Vec<CallId> =
            self.calls.iter().filter(|(_, call)| call.is_finished()).map(|(id, _)| id.clone()).collect();
        for id in finished {
            self.calls.remove(&id);
            self.shared.events.push_back(CallEvent { call: id, at: now, kind: CallEventKind::Closed });
        }
    }

    /// Next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.shared.transmits.pop_front()
    }

    /// Next call event.
    pub fn poll_event(&mut self) -> Option<CallEvent> {
        self.shared.events.pop_front()
    }

    /// When [`SipCore::handle_timeout`] wants to be called; `None` with no call held.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.calls.values().filter_map(Call::deadline).min()
    }
}

fn allow() -> Header {
    Header::Allow(h::Allow::new(ALLOW))
}
