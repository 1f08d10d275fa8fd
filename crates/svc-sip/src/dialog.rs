//! Dialog state (RFC 3261 §12) and the requests built from it, plus the state every call
//! shares (queues, randomness, who we are).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use rand::Rng as _;
use rand::rngs::StdRng;
use rsip::headers as h;
use rsip::headers::UntypedHeader as _;
use rsip::{Header, Method, SipMessage};

use crate::message;
use crate::model::{CallEvent, CallEventKind, CallId, SipConfig, Transmit};

/// The methods we take inside a dialog (the Allow header).
pub(crate) const ALLOW: &str = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO";

/// What every call shares: configuration, the trunk, output queues and the seeded RNG.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: SipConfig,
    pub trunk: SocketAddr,
    /// `host[:port]` of the trunk URI: the domain of our URIs.
    pub domain: String,
    pub transmits: VecDeque<Transmit>,
    pub events: VecDeque<CallEvent>,
    pub rng: StdRng,
}

impl Shared {
    /// Sends to the trunk: every request goes there (it is our outbound proxy, RFC 3261 §8.1.2).
    pub fn send(&mut self, bytes: Vec<u8>) {
        let destination = self.trunk;
        self.transmits.push_back(Transmit { destination, bytes });
    }

    /// Sends a response to where its request came from (symmetric response routing, RFC 3581).
    pub fn send_to(&mut self, destination: SocketAddr, bytes: Vec<u8>) {
        self.transmits.push_back(Transmit { destination, bytes });
    }

    pub fn emit(&mut self, call: &CallId, at: Instant, kind: CallEventKind) {
        self.events.push_back(CallEvent { call: call.clone(), at, kind });
    }

    /// `len` random lower-case hex digits.
    pub fn token(&mut self, len: usize) -> String {
        (0..len).map(|_| char::from(b"0123456789abcdef"[self.rng.gen_range(0..16)])).collect()
    }

    /// 32 random bits (SDP session ids).
    pub fn rng_u32(&mut self) -> u32 {
        self.rng.r#gen()
    }

    /// A fresh RFC 3261 branch (magic cookie + 64 random bits).
    pub fn branch(&mut self) -> String {
        format!("z9hG4bK{}", self.token(16))
    }

    /// Our Via value for `branch`; `rport` asks for symmetric responses (RFC 3581).
    pub fn via(&self, branch: &str) -> String {
        format!("SIP/2.0/UDP {};branch={branch};rport", self.config.advertised_addr)
    }

    /// A SIP URI for `user` at `host`, bracketed for IPv6.
    pub fn uri(user: &str, host: &str) -> String {
        format!("sip:{user}@{host}")
    }
}

/// The remote half of a dialog (§12.1.2), set from a provisional with a To tag (early) or the
/// 2xx. The first early dialog wins: later forks of 18x are reported but not tracked.
#[derive(Debug, Clone)]
pub(crate) struct Dialog {
    pub remote_tag: String,
    /// The remote target (Contact), the Request-URI of our in-dialog requests.
    pub remote_target: String,
    /// Record-Route in reverse order, as Route values.
    pub route_set: Vec<String>,
    /// The highest CSeq of the remote's requests (§12.2.2).
    pub remote_cseq: Option<u32>,
}

impl Dialog {
    /// The dialog a response to our INVITE creates, or `None` without a To tag.
    pub fn from_response(response: &SipMessage, fallback_target: &str) -> Option<Dialog> {
        let remote_tag = message::to_tag(response)?;
        let mut route_set = message::record_route(response);
        route_set.reverse();
        Some(Dialog {
            remote_tag,
            remote_target: message::contact_uri(response).unwrap_or_else(|| fallback_target.to_owned()),
            route_set,
            remote_cseq: None,
        })
    }

    /// A target refresh (re-INVITE) moves the remote target (§12.2.2).
    pub fn refresh(&mut self, request: &SipMessage) {
        if let Some(target) = message::contact_uri(request) {
            self.remote_target = target;
        }
    }

    /// `(Request-URI, Route values)` for a request in this dialog (§12.2.1.1): loose routing
    /// when the first route has `;lr`, strict routing otherwise.
    pub fn routing(&self) -> (String, Vec<String>) {
        match self.route_set.first() {
            Some(first) if !first.contains(";lr") => {
                let uri = first.trim_start_matches('<').split('>').next().unwrap_or_default().to_owned();
                let mut routes: Vec<String> = self.route_set[1..].to_vec();
                routes.push(format!("<{}>", self.remote_target));
                (uri, routes)
            }
            _ => (self.remote_target.clone(), self.route_set.clone()),
        }
    }
}

/// The fixed parts of our requests in one call.
#[derive(Debug, Clone)]
pub(crate) struct Party {
    pub call_id: String,
    /// From value with our tag.
    pub from: String,
    /// To value without a tag (the initial INVITE, CANCEL, non-2xx ACK).
    pub to: String,
    pub contact: String,
    pub user_agent: String,
}

/// One request to build.
pub(crate) struct RequestSpec<'a> {
    pub method: Method,
    pub uri: &'a str,
    pub via: String,
    pub cseq: u32,
    /// The To value (with the remote tag inside a dialog).
    pub to: &'a str,
    pub routes: &'a [String],
    pub extra: Vec<Header>,
    pub body: Option<(&'a str, Vec<u8>)>,
}

impl Party {
    /// Serialises a request of this call.
    pub fn request(&self, spec: RequestSpec<'_>) -> Vec<u8> {
        let mut headers = vec![
            Header::Via(h::Via::new(spec.via)),
            Header::MaxForwards(h::MaxForwards::new("70")),
            Header::From(h::From::new(self.from.clone())),
            Header::To(h::To::new(spec.to)),
            Header::CallId(h::CallId::new(self.call_id.clone())),
            Header::CSeq(h::CSeq::new(format!("{} {}", spec.cseq, spec.method))),
        ];
        for route in spec.routes {
            headers.push(Header::Route(h::Route::new(route.clone())));
        }
        if matches!(spec.method, Method::Invite) {
            headers.push(Header::Contact(h::Contact::new(self.contact.clone())));
            headers.push(Header::Allow(h::Allow::new(ALLOW)));
        }
        headers.push(Header::UserAgent(h::UserAgent::new(self.user_agent.clone())));
        headers.extend(spec.extra);
        message::finish(format!("{} {} SIP/2.0\r\n", spec.method, spec.uri), headers, spec.body)
    }
}
