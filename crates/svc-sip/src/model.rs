//! The public vocabulary of the user agent: configuration, call ids, events and datagrams out.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::auth::Credentials;
use crate::message::MAX_MESSAGE_BYTES;
use crate::sdp::RemoteMedia;
use crate::transaction::Timers;

/// How the user agent reaches its trunk and presents itself.
#[derive(Debug, Clone)]
pub struct SipConfig {
    /// The trunk, as a SIP URI (`sip:trunk.example.com`, `sip:127.0.0.1:5060`): its host part
    /// goes into the Request-URI, To and From. Datagrams go to the resolved address the core
    /// is given, whatever this says.
    pub trunk_uri: String,
    /// Digest credentials for 401/407 challenges; without them a challenge fails the call.
    pub credentials: Option<Credentials>,
    /// Caller number (E.164) when a dial names none.
    pub caller_number: String,
    /// Where the shell binds its socket.
    pub local_addr: SocketAddr,
    /// The address put in Via and Contact (a public address behind NAT; else `local_addr`).
    pub advertised_addr: SocketAddr,
    /// `User-Agent` header value.
    pub user_agent: String,
    /// How long a call may go unanswered before it is cancelled (failed with `no_answer`).
    pub ring_timeout: Duration,
    /// T1, T2, T4.
    pub timers: Timers,
    /// Most calls held at once (a call is held until its last transaction ends).
    pub max_calls: usize,
    /// Most transactions, client and server, across all calls.
    pub max_transactions: usize,
    /// Datagrams larger than this are dropped.
    pub max_message_bytes: usize,
}

impl SipConfig {
    /// A configuration with the usual defaults: 60 s ring timeout, RFC 3261 timers, 64 calls,
    /// 1024 transactions, 64 KiB messages, `advertised_addr = local_addr`.
    pub fn new(trunk_uri: impl Into<String>, caller_number: impl Into<String>, local_addr: SocketAddr) -> SipConfig {
        SipConfig {
            trunk_uri: trunk_uri.into(),
            credentials: None,
            caller_number: caller_number.into(),
            local_addr,
            advertised_addr: local_addr,
            user_agent: concat!("svc-sip/", env!("CARGO_PKG_VERSION")).to_owned(),
            ring_timeout: Duration::from_secs(60),
            timers: Timers::default(),
            max_calls: 64,
            max_transactions: 1024,
            max_message_bytes: MAX_MESSAGE_BYTES,
        }
    }
}

/// One call, named by its Call-ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub String);

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where to.
    pub destination: SocketAddr,
    /// The whole SIP message.
    pub bytes: Vec<u8>,
}

/// Something that happened to a call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallEvent {
    /// Which call.
    pub call: CallId,
    /// When the core learnt it (the `now` of the input that caused it).
    pub at: Instant,
    /// What happened.
    pub kind: CallEventKind,
}

/// What happened to a call. A call sees `Dialing`, then any of `Trying`, `Ringing`,
/// `AuthChallenge`, then exactly one of `Failed` or `Answered`; an answered call later sees
/// exactly one `Ended`. Every call finally sees `Closed`.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEventKind {
    /// The INVITE went out to this Request-URI.
    Dialing {
        /// The Request-URI.
        request_uri: String,
    },
    /// 100 Trying: the trunk has the call.
    Trying,
    /// 180 Ringing or 183 Session Progress, with early media if the response carried SDP.
    Ringing {
        /// 180, 181, 182 or 183.
        status: u16,
        /// The remote description for early media.
        early_media: Option<RemoteMedia>,
    },
    /// A 401/407 challenge is being answered with the configured credentials.
    AuthChallenge {
        /// 401 or 407.
        status: u16,
    },
    /// 200 OK: the call is up.
    Answered {
        /// Where to send RTP and with which payload types.
        remote: RemoteMedia,
    },
    /// A re-INVITE (or its ACK) brought a new remote description (hold, new address, codec).
    RemoteMediaChanged {
        /// The new remote description.
        remote: RemoteMedia,
    },
    /// A DTMF digit arrived in SIP INFO.
    Dtmf {
        /// `0`–`9`, `*`, `#`, `A`–`D`, or `F` for flash.
        digit: char,
        /// Duration in ms, when given.
        duration_ms: Option<u32>,
    },
    /// The call never got up.
    Failed {
        /// The final response, or `None` when none came (timeout, cancelled before an answer).
        status: Option<u16>,
        /// Its reason phrase as sent, or a description of what happened.
        reason_phrase: String,
        /// The reason, classified.
        reason: FailReason,
    },
    /// An answered call is over.
    Ended {
        /// Who ended it.
        by: Party,
        /// Why.
        reason: EndReason,
    },
    /// The core has forgotten the call: every transaction of it is over.
    Closed,
}

/// Why a call never got up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// 486 Busy Here, 600 Busy Everywhere.
    Busy,
    /// Nobody answered within the ring timeout (we cancelled), or 408/480 from the trunk.
    NoAnswer,
    /// 603 Decline and other refusals without a more precise class.
    Rejected,
    /// 404 Not Found, 604 Does Not Exist Anywhere.
    NotFound,
    /// 484 Address Incomplete, 485 Ambiguous, 416 Unsupported URI Scheme.
    InvalidNumber,
    /// 403 Forbidden.
    Forbidden,
    /// A challenge we could not answer: no credentials, unsupported algorithm, or rejected
    /// credentials (a second challenge).
    AuthFailed,
    /// 488 / 606 Not Acceptable, or an answer whose SDP we cannot use.
    IncompatibleMedia,
    /// 3xx: redirection is not followed.
    Redirected,
    /// 5xx from the trunk.
    Unavailable,
    /// No final response to the INVITE (Timer B).
    Timeout,
    /// Cancelled by a local hangup before the answer.
    Canceled,
}

impl FailReason {
    /// The class of a final error response.
    pub fn from_status(status: u16) -> FailReason {
        match status {
            486 | 600 => FailReason::Busy,
            408 | 480 => FailReason::NoAnswer,
            487 => FailReason::Canceled,
            404 | 604 => FailReason::NotFound,
            416 | 484 | 485 => FailReason::InvalidNumber,
            401 | 407 => FailReason::AuthFailed,
            403 => FailReason::Forbidden,
            488 | 606 => FailReason::IncompatibleMedia,
            300..=399 => FailReason::Redirected,
            500..=599 => FailReason::Unavailable,
            _ => FailReason::Rejected,
        }
    }

    /// snake_case name for timelines and APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            FailReason::Busy => "busy",
            FailReason::NoAnswer => "no_answer",
            FailReason::Rejected => "rejected",
            FailReason::NotFound => "not_found",
            FailReason::InvalidNumber => "invalid_number",
            FailReason::Forbidden => "forbidden",
            FailReason::AuthFailed => "auth_failed",
            FailReason::IncompatibleMedia => "incompatible_media",
            FailReason::Redirected => "redirected",
            FailReason::Unavailable => "unavailable",
            FailReason::Timeout => "timeout",
            FailReason::Canceled => "canceled",
        }
    }
}

/// Which side ended a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party {
    /// We did (hangup, or a protocol failure on our side).
    Local,
    /// The remote side sent BYE.
    Remote,
}

/// Why an answered call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// A BYE, from whichever party.
    Hangup,
    /// The remote never ACKed our 200 to its re-INVITE (Timer H); we sent BYE.
    AckTimeout,
}

impl EndReason {
    /// snake_case name for timelines and APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Hangup => "hangup",
            EndReason::AckTimeout => "ack_timeout",
        }
    }
}

/// Why a dial was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialError {
    /// The number is not E.164 (`+` and 1–15 digits; the `+` may be left out).
    #[error("not an E.164 number: {0:?}")]
    InvalidNumber(String),
    /// `max_calls` or `max_transactions` reached.
    #[error("too many calls in progress")]
    AtCapacity,
}

/// The configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `trunk_uri` is not a `sip:` URI with a host.
    #[error("trunk URI {0:?} is not a sip: URI")]
    TrunkUri(String),
    /// The caller number is not E.164.
    #[error("caller number {0:?} is not E.164")]
    CallerNumber(String),
}

/// `+` then 1–15 digits (the `+` may be omitted); returns the number as given.
pub(crate) fn is_e164(number: &str) -> bool {
    let digits = number.strip_prefix('+').unwrap_or(number);
    (1..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}
