//! Transaction state machines over UDP (RFC 3261 §17): what to retransmit and when to give up.
//! They hold the bytes to resend; the call decides what a response means.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rsip::Method;

/// RFC 3261's timer base values (§17.1.1.1, Table 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// RTT estimate; retransmissions start at T1 and Timers B/F/H/J are 64·T1.
    pub t1: Duration,
    /// Cap on the retransmit interval of non-INVITE requests and INVITE responses.
    pub t2: Duration,
    /// How long a message may stay in the network (Timers I and K).
    pub t4: Duration,
}

impl Default for Timers {
    fn default() -> Timers {
        Timers { t1: Duration::from_millis(500), t2: Duration::from_secs(4), t4: Duration::from_secs(5) }
    }
}

impl Timers {
    /// 64·T1: Timers B, F, H and J.
    pub fn transaction_timeout(&self) -> Duration {
        self.t1.saturating_mul(64)
    }

    /// Timer D: at least 32 s on UDP, to absorb retransmitted final responses.
    fn timer_d(&self) -> Duration {
        self.transaction_timeout().max(Duration::from_secs(32))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// INVITE: Calling; non-INVITE: Trying.
    Initial,
    Proceeding,
    Completed,
    Terminated,
}

/// What a client transaction made of a final response.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Final {
    /// The first final response: pass it up. For a non-2xx INVITE final, the ACK was stored
    /// and must be sent.
    New,
    /// A retransmitted non-2xx final to an INVITE: resend the ACK (Timer D absorbs it).
    ResendAck(Vec<u8>),
    /// Nothing to do (retransmitted non-INVITE final, or a 2xx after the transaction ended,
    /// which the dialog handles).
    Absorbed,
}

/// What a client transaction's timer asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fired {
    /// Timer A or E: send the request again.
    Retransmit(Vec<u8>),
    /// Timer B or F: no final response in time.
    TimedOut,
}

/// One client transaction (INVITE §17.1.1 or non-INVITE §17.1.2), UDP only.
#[derive(Debug)]
pub(crate) struct ClientTx {
    pub branch: String,
    pub method: Method,
    pub cseq: u32,
    pub request: Vec<u8>,
    state: State,
    interval: Duration,
    retransmit_at: Option<Instant>,
    timeout_at: Option<Instant>,
    ack: Option<Vec<u8>>,
    timers: Timers,
}

impl ClientTx {
    /// A transaction whose request was just sent at `now`.
    pub fn new(now: Instant, method: Method, cseq: u32, branch: String, request: Vec<u8>, timers: Timers) -> ClientTx {
        ClientTx {
            branch,
            method,
            cseq,
            request,
            state: State::Initial,
            interval: timers.t1,
            retransmit_at: Some(now + timers.t1),
            timeout_at: Some(now + timers.transaction_timeout()),
            ack: None,
            timers,
        }
    }

    fn is_invite(&self) -> bool {
        self.method == Method::Invite
    }

    /// A provisional response arrived.
    pub fn on_provisional(&mut self) {
        if self.state != State::Initial {
            return;
        }
        self.state = State::Proceeding;
        if self.is_invite() {
            // §17.1.1.2: no more retransmissions, and Timer B only runs in Calling; the TU's
            // own timer (ring timeout, CANCEL) bounds the wait from here.
            self.retransmit_at = None;
            self.timeout_at = None;
        }
        // Non-INVITE (§17.1.2.2): Timer E keeps firing, at T2 from the next shot on.
    }

    /// A final response arrived; `ack` builds the ACK for a non-2xx final to an INVITE.
    pub fn on_final(&mut self, now: Instant, status: u16, ack: impl FnOnce() -> Vec<u8>) -> Final {
        match self.state {
            State::Initial | State::Proceeding => {
                self.retransmit_at = None;
                if self.is_invite() && (200..300).contains(&status) {
                    // §17.1.1.2: a 2xx ends the transaction; the dialog ACKs it.
                    self.state = State::Terminated;
                    self.timeout_at = None;
                } else {
                    self.state = State::Completed;
                    if self.is_invite() {
                        self.ack = Some(ack());
                        self.timeout_at = Some(now + self.timers.timer_d());
                    } else {
                        self.timeout_at = Some(now + self.timers.t4);
                    }
                }
                Final::New
            }
            State::Completed if self.is_invite() && status >= 300 => {
                self.ack.clone().map_or(Final::Absorbed, Final::ResendAck)
            }
            _ => Final::Absorbed,
        }
    }

    /// The ACK stored for a non-2xx final, to send right after [`ClientTx::on_final`].
    pub fn ack(&self) -> Option<&[u8]> {
        self.ack.as_deref()
    }

    /// Stops waiting (the INVITE after a CANCEL that got no final response in 64·T1, §9.1).
    pub fn abandon(&mut self) {
        self.state = State::Terminated;
        self.retransmit_at = None;
        self.timeout_at = None;
    }

    /// Still waiting for a final response.
    pub fn is_pending(&self) -> bool {
        matches!(self.state, State::Initial | State::Proceeding)
    }

    /// A provisional response arrived (Proceeding) and no final one yet.
    pub fn is_proceeding(&self) -> bool {
        self.state == State::Proceeding
    }

    /// Nothing left to do.
    pub fn is_terminated(&self) -> bool {
        self.state == State::Terminated
    }

    /// Next instant [`ClientTx::on_timeout`] wants.
    pub fn deadline(&self) -> Option<Instant> {
        match (self.retransmit_at, self.timeout_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) -> Option<Fired> {
        if let Some(at) = self.timeout_at
            && at <= now
        {
            let timed_out = self.is_pending();
            self.state = State::Terminated;
            self.retransmit_at = None;
            self.timeout_at = None;
            return timed_out.then_some(Fired::TimedOut);
        }
        let at = self.retransmit_at.filter(|at| *at <= now)?;
        self.interval = match (self.is_invite(), self.state) {
            // Timer A doubles without a cap.
            (true, _) => self.interval.saturating_mul(2),
            // Timer E doubles up to T2 while Trying, and is T2 once Proceeding.
            (false, State::Initial) => self.interval.saturating_mul(2).min(self.timers.t2),
            (false, _) => self.timers.t2,
        };
        // From `now`, not `at`: a shell that woke late sends one retransmission, not a burst.
        self.retransmit_at = Some(now.max(at) + self.interval);
        Some(Fired::Retransmit(self.request.clone()))
    }
}

/// What a server transaction's timer asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ServerFired {
    /// Timer G (or the 2xx retransmission of §13.3.1.4): send the final response again.
    Retransmit(Vec<u8>, SocketAddr),
    /// Timer H: the ACK for the final response never came.
    AckTimeout {
        /// The unacknowledged response was a 2xx (the dialog must end).
        success: bool,
    },
}

/// A request we answered, kept to answer its retransmissions from cache (§17.2). For INVITE,
/// the final response is also retransmitted until its ACK arrives.
#[derive(Debug)]
pub(crate) struct ServerTx {
    pub branch: String,
    pub method: Method,
    pub cseq: u32,
    pub response: Vec<u8>,
    pub destination: SocketAddr,
    success: bool,
    interval: Duration,
    retransmit_at: Option<Instant>,
    /// Timer H while waiting for an ACK, then Timer I/J: when the entry is forgotten.
    expires: Instant,
    awaiting_ack: bool,
    timers: Timers,
}

impl ServerTx {
    /// Remembers the final response `response` (status `status`) sent at `now`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        now: Instant,
        method: Method,
        cseq: u32,
        branch: String,
        status: u16,
        response: Vec<u8>,
        destination: SocketAddr,
        timers: Timers,
    ) -> ServerTx {
        let invite = method == Method::Invite;
        ServerTx {
            branch,
            method,
            cseq,
            response,
            destination,
            success: (200..300).contains(&status),
            interval: timers.t1,
            retransmit_at: invite.then(|| now + timers.t1),
            expires: now + timers.transaction_timeout(),
            awaiting_ack: invite,
            timers,
        }
    }

    /// Waiting for the ACK of an INVITE's final response.
    pub fn awaiting_ack(&self) -> bool {
        self.awaiting_ack
    }

    /// The ACK arrived: stop retransmitting and linger T4 for stray retransmissions (Timer I).
    pub fn on_ack(&mut self, now: Instant) {
        if self.awaiting_ack {
            self.awaiting_ack = false;
            self.retransmit_at = None;
            self.expires = now + self.timers.t4;
        }
    }

    /// Next instant [`ServerTx::on_timeout`] wants.
    pub fn deadline(&self) -> Instant {
        self.retransmit_at.map_or(self.expires, |at| at.min(self.expires))
    }

    /// The entry can be forgotten.
    pub fn is_expired(&self, now: Instant) -> bool {
        self.expires <= now
    }

    /// Runs the timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) -> Option<ServerFired> {
        if self.expires <= now {
            self.retransmit_at = None;
            if self.awaiting_ack {
                self.awaiting_ack = false;
                return Some(ServerFired::AckTimeout { success: self.success });
            }
            return None;
        }
        let at = self.retransmit_at.filter(|at| *at <= now)?;
        self.interval = self.interval.saturating_mul(2).min(self.timers.t2);
        self.retransmit_at = Some(now.max(at) + self.interval);
        Some(ServerFired::Retransmit(self.response.clone(), self.destination))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn timer_a_doubles_until_timer_b() {
        let t0 = Instant::now();
        let mut tx = ClientTx::new(t0, Method::Invite, 1, "z9hG4bKa".into(), b"INVITE".to_vec(), Timers::default());
        let mut shots = Vec::new();
        while let Some(at) = tx.deadline() {
            match tx.on_timeout(at) {
                Some(Fired::Retransmit(_)) => shots.push((at - t0).as_millis()),
                Some(Fired::TimedOut) => shots.push(0),
                None => {}
            }
        }
        assert_eq!(shots, [500, 1500, 3500, 7500, 15500, 31500, 0]);
        assert!(tx.is_terminated());
    }

    #[test]
    fn timer_e_caps_at_t2_and_proceeding_uses_t2() {
        let t0 = Instant::now();
        let mut tx = ClientTx::new(t0, Method::Bye, 2, "z9hG4bKb".into(), b"BYE".to_vec(), Timers::default());
        let mut at = Vec::new();
        for _ in 0..5 {
            let next = tx.deadline().expect("deadline");
            assert!(matches!(tx.on_timeout(next), Some(Fired::Retransmit(_))));
            at.push((next - t0).as_millis());
        }
        assert_eq!(at, [500, 1500, 3500, 7500, 11500]);
        tx.on_provisional();
        let next = tx.deadline().expect("deadline");
        assert_eq!(next - t0, ms(15500));
        assert_eq!(tx.on_final(next, 200, Vec::new), Final::New);
        assert_eq!(tx.deadline(), Some(next + ms(5000)), "Timer K = T4");
        assert_eq!(tx.on_final(next, 200, Vec::new), Final::Absorbed);
    }

    #[test]
    fn invite_non_2xx_keeps_its_ack_for_timer_d() {
        let t0 = Instant::now();
        let mut tx = ClientTx::new(t0, Method::Invite, 1, "z9hG4bKc".into(), b"INVITE".to_vec(), Timers::default());
        tx.on_provisional();
        assert_eq!(tx.deadline(), None, "no retransmission and no Timer B once proceeding");
        assert_eq!(tx.on_final(t0, 486, || b"ACK".to_vec()), Final::New);
        assert_eq!(tx.ack(), Some(&b"ACK"[..]));
        assert_eq!(tx.on_final(t0, 486, Vec::new), Final::ResendAck(b"ACK".to_vec()));
        assert_eq!(tx.deadline(), Some(t0 + Duration::from_secs(32)));
        assert_eq!(tx.on_timeout(t0 + Duration::from_secs(32)), None);
        assert!(tx.is_terminated());
    }

    #[test]
    fn server_invite_response_retransmits_until_ack() {
        let t0 = Instant::now();
        let to: SocketAddr = "127.0.0.1:5060".parse().expect("parses");
        let mut tx = ServerTx::new(t0, Method::Invite, 5, "b".into(), 200, b"200".to_vec(), to, Timers::default());
        let mut shots = Vec::new();
        while let Some(fired) = tx.on_timeout(tx.deadline()) {
            match fired {
                ServerFired::Retransmit(..) => shots.push((tx.deadline() - t0).as_millis()),
                ServerFired::AckTimeout { success } => {
                    assert!(success);
                    break;
                }
            }
        }
        // Next shots after 0.5, 1.5, 3.5, 7.5, 11.5 … capped at T2, up to Timer H at 32 s.
        assert_eq!(&shots[..4], [1500, 3500, 7500, 11500]);
        assert!(!tx.awaiting_ack());
    }
}
