//! A scripted trunk/callee for virtual-time tests: it parses what the core sends with rsip and
//! answers with rsip-built messages. Time only moves when a test moves it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rsip::headers::{ToTypedHeader as _, UntypedHeader as _};
use rsip::message::{HasHeaders as _, HeadersExt as _};
use rsip::{Header, Method, Request, Response, SipMessage, StatusCode};
use svc_sip::{CallEvent, CallEventKind, CallId, Credentials, Dropped, LocalMedia, SipConfig, SipCore, Transmit};

pub const TRUNK: &str = "192.0.2.50:5060";
pub const LOCAL: &str = "192.0.2.10:5070";

pub fn trunk_addr() -> SocketAddr {
    TRUNK.parse().expect("parses")
}

pub fn config() -> SipConfig {
    let mut config = SipConfig::new("sip:trunk.example.com", "+15550100", LOCAL.parse().expect("parses"));
    config.ring_timeout = Duration::from_secs(30);
    config
}

pub fn with_credentials(mut config: SipConfig) -> SipConfig {
    config.credentials = Some(Credentials { username: "svc".into(), password: "s3cret".into() });
    config
}

pub fn offer() -> LocalMedia {
    LocalMedia::g711("192.0.2.10".parse().expect("parses"), 40000)
}

/// What the remote side answers with.
pub fn answer_sdp(version: u32, direction: &str) -> String {
    format!(
        "v=0\r\no=- 99 {version} IN IP4 198.51.100.7\r\ns=-\r\nc=IN IP4 198.51.100.7\r\nt=0 0\r\n\
         m=audio 31000 RTP/AVP 8 101\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\n\
         a=fmtp:101 0-16\r\na=ptime:20\r\na={direction}\r\n"
    )
}

/// One datagram the core sent, with the (virtual) time it went out.
#[derive(Debug, Clone)]
pub struct Sent {
    pub at: Duration,
    pub to: SocketAddr,
    pub message: SipMessage,
    pub bytes: Vec<u8>,
}

impl Sent {
    pub fn request(&self) -> &Request {
        match &self.message {
            SipMessage::Request(r) => r,
            SipMessage::Response(r) => panic!("expected a request, got {}", r.status_code),
        }
    }

    pub fn response(&self) -> &Response {
        match &self.message {
            SipMessage::Response(r) => r,
            SipMessage::Request(r) => panic!("expected a response, got {}", r.method),
        }
    }

    pub fn method(&self) -> Option<Method> {
        match &self.message {
            SipMessage::Request(r) => Some(r.method),
            SipMessage::Response(_) => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match &self.message {
            SipMessage::Response(r) => Some(r.status_code.code()),
            SipMessage::Request(_) => None,
        }
    }

    pub fn header(&self, name: &str) -> Option<String> {
        header(&self.message, name)
    }

    pub fn branch(&self) -> String {
        branch(&self.message)
    }

    pub fn cseq(&self) -> (u32, Method) {
        let cseq = self.message.cseq_header().expect("cseq_header").typed().expect("typed");
        (cseq.seq, cseq.method)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// The value of the first header named `name` (case-insensitive), as serialised.
pub fn header(message: &SipMessage, name: &str) -> Option<String> {
    message.headers().iter().find_map(|h| {
        let line = h.to_string();
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

pub fn branch(message: &SipMessage) -> String {
    message.via_header().expect("via_header").typed().expect("typed").branch().expect("branch").to_string()
}

/// A response to `request` the way a UAS builds one (RFC 3261 §8.2.6).
pub fn response(
    request: &SipMessage,
    status: u16,
    to_tag: Option<&str>,
    extra: Vec<Header>,
    body: Option<&str>,
) -> Vec<u8> {
    let mut headers: Vec<Header> = Vec::new();
    for h in request.headers().iter() {
        match h {
            Header::Via(_) | Header::From(_) | Header::CallId(_) | Header::CSeq(_) => headers.push(h.clone()),
            Header::To(to) => match to_tag {
                Some(tag) if !to.value().contains("tag=") => {
                    headers.push(Header::To(rsip::headers::To::new(format!("{};tag={tag}", to.value()))))
                }
                _ => headers.push(h.clone()),
            },
            _ => {}
        }
    }
    headers.extend(extra);
    if let Some(body) = body {
        headers.push(Header::ContentType(rsip::headers::ContentType::new("application/sdp")));
        headers.push(Header::ContentLength(rsip::headers::ContentLength::new(body.len().to_string())));
    } else {
        headers.push(Header::ContentLength(rsip::headers::ContentLength::new("0")));
    }
    let response = Response {
        status_code: StatusCode::Other(status, phrase(status).into()),
        version: rsip::Version::V2,
        headers: headers.into(),
        body: body.unwrap_or_default().as_bytes().to_vec(),
    };
    response.to_string().into_bytes()
}

/// RFC 3261's reason phrases (rsip prints its enum names, `BusyHere`).
pub fn phrase(status: u16) -> &'static str {
    match status {
        100 => "Trying",
        180 => "Ringing",
        183 => "Session Progress",
        200 => "OK",
        401 => "Unauthorized",
        407 => "Proxy Authentication Required",
        481 => "Call/Transaction Does Not Exist",
        486 => "Busy Here",
        487 => "Request Terminated",
        _ => "Whatever",
    }
}

pub fn contact_header(user: &str) -> Header {
    Header::Contact(rsip::headers::Contact::new(format!("<sip:{user}@198.51.100.7:5060>")))
}

/// The harness: the core, a virtual clock, and what came out of it.
pub struct Harness {
    pub core: SipCore,
    pub t0: Instant,
    pub now: Instant,
    pub sent: Vec<Sent>,
    pub events: Vec<CallEvent>,
    pub remote_cseq: u32,
}

impl Harness {
    pub fn new(config: SipConfig) -> Harness {
        let core = SipCore::new(config, trunk_addr(), 42).expect("new");
        let t0 = Instant::now();
        Harness { core, t0, now: t0, sent: Vec::new(), events: Vec::new(), remote_cseq: 100 }
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    fn collect(&mut self) -> Vec<Sent> {
        let mut out = Vec::new();
        while let Some(Transmit { destination, bytes }) = self.core.poll_transmit() {
            let message = SipMessage::try_from(bytes.as_slice()).unwrap_or_else(|e| {
                panic!("core sent what rsip cannot read ({e}):\n{}", String::from_utf8_lossy(&bytes))
            });
            out.push(Sent { at: self.elapsed(), to: destination, message, bytes });
        }
        while let Some(event) = self.core.poll_event() {
            self.events.push(event);
        }
        self.sent.extend(out.iter().cloned());
        out
    }

    pub fn hangup(&mut self, call: &CallId) -> Vec<Sent> {
        assert!(self.core.hangup(self.now, call));
        self.collect()
    }

    pub fn dial(&mut self, to: &str) -> (CallId, Sent) {
        let call = self.core.dial(self.now, to, None, offer()).expect("dial");
        let mut sent = self.collect();
        assert_eq!(sent.len(), 1);
        (call, sent.remove(0))
    }

    /// Delivers a datagram from the trunk and returns what the core sent in reply.
    pub fn deliver(&mut self, bytes: &[u8]) -> Vec<Sent> {
        self.try_deliver(bytes).1
    }

    pub fn try_deliver(&mut self, bytes: &[u8]) -> (Result<(), Dropped>, Vec<Sent>) {
        let result = self.core.handle_datagram(self.now, trunk_addr(), bytes);
        (result, self.collect())
    }

    /// Moves the clock to `t0 + at`, firing every timer due on the way at its exact instant.
    pub fn advance_to(&mut self, at: Duration) -> Vec<Sent> {
        let target = self.t0 + at;
        let mut out = Vec::new();
        while let Some(deadline) = self.core.poll_timeout() {
            if deadline > target {
                break;
            }
            self.now = self.now.max(deadline);
            self.core.handle_timeout(self.now);
            out.extend(self.collect());
        }
        self.now = self.now.max(target);
        out
    }

    pub fn advance(&mut self, by: Duration) -> Vec<Sent> {
        let at = self.elapsed() + by;
        self.advance_to(at)
    }

    /// Events so far, without their call and time.
    pub fn kinds(&self) -> Vec<CallEventKind> {
        self.events.iter().map(|e| e.kind.clone()).collect()
    }

    /// A request from the remote inside the dialog established by `invite` and `their_tag`.
    pub fn dialog_request(
        &mut self,
        invite: &Sent,
        their_tag: &str,
        method: Method,
        extra: Vec<Header>,
        body: Option<(&str, &str)>,
    ) -> Vec<u8> {
        self.remote_cseq += 1;
        let m = &invite.message;
        let from = m.from_header().expect("from_header").value().to_owned();
        let to = m.to_header().expect("to_header").value().to_owned();
        let call_id = m.call_id_header().expect("call_id_header").value().to_owned();
        let contact = m.contact_header().expect("contact_header").typed().expect("typed").uri.to_string();
        let branch = format!("z9hG4bKremote{}", self.remote_cseq);
        let mut headers: Vec<Header> = vec![
            Header::Via(rsip::headers::Via::new(format!("SIP/2.0/UDP {TRUNK};branch={branch}"))),
            Header::MaxForwards(rsip::headers::MaxForwards::new("70")),
            Header::From(rsip::headers::From::new(format!("{to};tag={their_tag}"))),
            Header::To(rsip::headers::To::new(from)),
            Header::CallId(rsip::headers::CallId::new(call_id)),
            Header::CSeq(rsip::headers::CSeq::new(format!("{} {method}", self.remote_cseq))),
        ];
        headers.extend(extra);
        let body_bytes = match body {
            Some((content_type, body)) => {
                headers.push(Header::ContentType(rsip::headers::ContentType::new(content_type)));
                body.as_bytes().to_vec()
            }
            None => Vec::new(),
        };
        headers.push(Header::ContentLength(rsip::headers::ContentLength::new(body_bytes.len().to_string())));
        let request = Request {
            method,
            uri: rsip::Uri::try_from(contact.as_str()).expect("try_from"),
            version: rsip::Version::V2,
            headers: headers.into(),
            body: body_bytes,
        };
        request.to_string().into_bytes()
    }

    /// Dials and answers with 100, 180, 200 (tag `callee`); returns the call, the INVITE and the ACK.
    pub fn answered_call(&mut self) -> (CallId, Sent, Sent) {
        let (call, invite) = self.dial("+15550199");
        self.deliver(&response(&invite.message, 100, None, vec![], None));
        self.deliver(&response(&invite.message, 180, Some("callee"), vec![contact_header("callee")], None));
        let sdp = answer_sdp(1, "sendrecv");
        let out =
            self.deliver(&response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some(&sdp)));
        assert_eq!(out.len(), 1, "one ACK for the 200");
        let ack = out.into_iter().next().expect("next");
        assert_eq!(ack.method(), Some(Method::Ack));
        (call, invite, ack)
    }
}
