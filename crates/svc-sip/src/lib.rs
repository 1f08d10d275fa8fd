//! SIP signalling for svc's phone dial-out: a user agent that places outbound calls over a
//! configured trunk (RFC 3261, UAC side, UDP), sans-IO, plus a thin tokio shell around it.
//!
//! [`SipCore`] is a state machine in the shape of svc's other cores: inputs are
//! [`SipCore::dial`], [`SipCore::hangup`], [`SipCore::handle_datagram`] and
//! [`SipCore::handle_timeout`], each with the current time; outputs are drained with
//! [`SipCore::poll_transmit`], [`SipCore::poll_event`] and [`SipCore::poll_timeout`]. It never
//! reads the clock, never touches a socket and draws every identifier from a seeded RNG, so the
//! tests run it in virtual time against a scripted trunk. [`shell`] owns the UDP socket and the
//! timer and nothing else.
//!
//! ```
//! use std::time::Instant;
//! use svc_sip::{CallEventKind, LocalMedia, SipConfig, SipCore};
//!
//! let local = "127.0.0.1:5070".parse().unwrap();
//! let trunk = "127.0.0.1:5060".parse().unwrap();
//! let config = SipConfig::new("sip:127.0.0.1:5060", "+15550100", local);
//! let mut core = SipCore::new(config, trunk, 7).unwrap();
//! let now = Instant::now();
//! let call = core.dial(now, "+15550199", None, LocalMedia::g711(local.ip(), 40000)).unwrap();
//! let invite = core.poll_transmit().unwrap();
//! assert_eq!(invite.destination, trunk);
//! assert!(invite.bytes.starts_with(b"INVITE sip:+15550199@127.0.0.1:5060 SIP/2.0\r\n"));
//! assert!(matches!(core.poll_event().unwrap().kind, CallEventKind::Dialing { .. }));
//! // … feed the trunk's answers to `handle_datagram`, call `handle_timeout` at `poll_timeout`.
//! core.hangup(now, &call);
//! ```
//!
//! ## What it follows
//!
//! - RFC 3261 §8 (UAC requests, response handling), §9 (CANCEL: only after a provisional;
//!   64·T1 later the INVITE is given up), §12 (dialogs: remote tag, target and Record-Route set,
//!   loose and strict routing, CSeq ordering of the remote's requests), §13 (INVITE: ACK for
//!   2xx end to end and re-sent for every 2xx retransmission; re-INVITE answered with our SDP),
//!   §14/§15 (re-INVITE, BYE), §17 (client INVITE transaction with Timers A, B, D; non-INVITE
//!   with E, F, K; server transactions answer retransmissions from cache, INVITE finals are
//!   retransmitted until ACK — Timers G, H, I, J), §18.3 (Content-Length framing on UDP), §22
//!   with RFC 2617 (MD5 digest, `qop=auth` or none; one answer per challenge unless `stale`).
//! - RFC 3581 `rport` in our Via; responses go back to the request's source address.
//! - RFC 3264/4566 for one audio stream (see [`sdp`]): the remote's answers are restricted to the
//!   codecs we offered (none in common: BYE and `incompatible_media`), re-INVITE offers are
//!   answered with the common codecs and the mirrored direction (hold), or 488. SIP INFO DTMF
//!   (`application/dtmf-relay`, `application/dtmf`).
//! - RFC 5626 CRLF keep-alives are ignored; out-of-dialog OPTIONS (trunk pings) get 200.
//!
//! ## Out of scope
//!
//! TCP, TLS and SIPS; DNS and SRV/NAPTR lookups (the shell resolves the trunk host once);
//! incoming calls (an out-of-dialog INVITE gets 480); REGISTER; PRACK/100rel (RFC 3262);
//! session timers (RFC 4028); UPDATE; REFER/transfer; following 3xx redirects; forked early
//! dialogs beyond the first (later forks' 2xx are ACKed and hung up); MD5-sess, SHA-256 and
//! auth-int digests; S/MIME. All requests go to the trunk address (an outbound proxy), never to
//! the remote Contact's own address; datagrams from other IP addresses are dropped.

mod call;
mod core;
mod dialog;
mod message;
mod model;
mod transaction;

pub mod auth;
pub mod sdp;
pub mod shell;

pub use crate::auth::Credentials;
pub use crate::core::SipCore;
pub use crate::message::{Dropped, MAX_MESSAGE_BYTES};
pub use crate::model::{
    CallEvent, CallEventKind, CallId, ConfigError, DialError, EndReason, FailReason, Party, SipConfig, Transmit,
};
pub use crate::sdp::{Codec, Direction, LocalMedia, RemoteMedia};
pub use crate::transaction::Timers;
