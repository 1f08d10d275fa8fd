//! Bytes ⇄ SIP messages: rsip does the grammar; this module bounds what reaches it, fills the
//! gaps it leaves (compact header names, folded lines, Content-Length framing on UDP, unknown
//! methods) and reads the few header fields the user agent needs.

use rsip::headers::{ToTypedHeader as _, UntypedHeader as _};
use rsip::message::HasHeaders as _;
use rsip::{Header, Method, SipMessage};

/// Largest datagram read; bigger ones are dropped. SIP over UDP stays well under the path MTU
/// in practice, and 64 KiB is the UDP maximum.
pub const MAX_MESSAGE_BYTES: usize = 65_535;
/// Most header lines one message may carry.
pub const MAX_HEADERS: usize = 128;

/// Why an incoming datagram was not processed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    /// Larger than the configured limit.
    #[error("datagram larger than the limit")]
    TooLarge,
    /// A keep-alive (RFC 5626 CRLF) or empty datagram.
    #[error("keep-alive")]
    KeepAlive,
    /// Not a SIP message rsip could read, or one missing a header needed even to answer it.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// Came from an address other than the trunk.
    #[error("datagram from an address other than the trunk")]
    UnknownSource,
    /// A response no transaction or dialog is waiting for.
    #[error("response matches no transaction")]
    Stray,
    /// Well formed, answered with an error response (400, 481, 405, 501, …).
    #[error("answered with {0}")]
    Rejected(u16),
}

/// A parsed datagram.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub message: SipMessage,
    /// The request's real method when rsip does not know it (parsed as OPTIONS meanwhile).
    pub unknown_method: Option<String>,
    /// The reason phrase as sent (rsip replaces it by its own for known codes).
    pub reason_phrase: String,
    /// The body is shorter than Content-Length says (an error for requests: 400).
    pub truncated: bool,
}

const COMPACT: &[(&str, &str)] = &[
    ("i", "Call-ID"),
    ("m", "Contact"),
    ("e", "Content-Encoding"),
    ("l", "Content-Length"),
    ("c", "Content-Type"),
    ("f", "From"),
    ("s", "Subject"),
    ("k", "Supported"),
    ("t", "To"),
    ("v", "Via"),
];

const KNOWN_METHODS: &[&str] = &[
    "ACK",
    "BYE",
    "CANCEL",
    "INFO",
    "INVITE",
    "MESSAGE",
    "NOTIFY",
    "OPTIONS",
    "PRACK",
    "PUBLISH",
    "REFER",
    "REGISTER",
    "SUBSCRIBE",
    "UPDATE",
];

/// Reads one datagram (RFC 3261 §7, §18.3).
pub(crate) fn parse(bytes: &[u8], max_bytes: usize) -> Result<Incoming, Dropped> {
    if bytes.len() > max_bytes {
        return Err(Dropped::TooLarge);
    }
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(Dropped::KeepAlive);
    }
    let split = find(bytes, b"\r\n\r\n").ok_or_else(|| Dropped::Malformed("no end of headers".into()))?;
    let head = std::str::from_utf8(&bytes[..split]).map_err(|_| Dropped::Malformed("headers are not UTF-8".into()))?;
    let body = &bytes[split + 4..];
    let mut lines = unfold(head);
    if lines.len() > MAX_HEADERS + 1 {
        return Err(Dropped::Malformed("too many headers".into()));
    }
    let mut unknown_method = None;
    let mut reason_phrase = String::new();
    let first = lines.first().cloned().unwrap_or_default();
    if first.starts_with("SIP/") {
        reason_phrase = first.splitn(3, ' ').nth(2).unwrap_or_default().to_owned();
    } else if let Some((method, rest)) = first.split_once(' ')
        && !KNOWN_METHODS.contains(&method)
        && !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.!%*_+`'~".contains(&b))
    {
        unknown_method = Some(method.to_owned());
        lines[0] = format!("OPTIONS {rest}");
    }
    let mut content_length = None;
    for line in lines.iter_mut().skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(Dropped::Malformed("header line without a colon".into()));
        };
        let name = name.trim();
        let full = COMPACT.iter().find(|(short, _)| name.eq_ignore_ascii_case(short)).map(|(_, full)| *full);
        let name = full.unwrap_or(name);
        if name.eq_ignore_ascii_case("Content-Length") {
            let length = value.trim().parse::<usize>().map_err(|_| Dropped::Malformed("bad Content-Length".into()))?;
            content_length = Some(length);
        }
        *line = format!("{name}: {}", value.trim());
    }
    // RFC 3261 §18.3: on UDP, Content-Length frames the body; extra bytes are discarded, and a
    // body shorter than announced is an error.
    let (body, truncated) = match content_length {
        Some(length) if length <= body.len() => (&body[..length], false),
        Some(_) => (body, true),
        None => (body, false),
    };
    let mut text = lines.join("\r\n").into_bytes();
    text.extend_from_slice(b"\r\n\r\n");
    text.extend_from_slice(body);
    let message = SipMessage::try_from(text.as_slice()).map_err(|error| Dropped::Malformed(error.to_string()))?;
    Ok(Incoming { message, unknown_method, reason_phrase, truncated })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Header lines with continuation lines (leading whitespace) joined (RFC 3261 §7.3.1).
fn unfold(head: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for line in head.split("\r\n") {
        match lines.last_mut() {
            Some(last) if line.starts_with([' ', '\t']) => {
                let rest = line.trim_start();
                // rsip reads `uri;tag=x` but not `uri ;tag=x`, which the grammar also allows.
                if !rest.starts_with(';') {
                    last.push(' ');
                }
                last.push_str(rest);
            }
            _ => lines.push(line.to_owned()),
        }
    }
    lines
}

/// `(branch, number of Via headers)` of the top Via.
pub(crate) fn top_branch(message: &SipMessage) -> Option<(String, usize)> {
    let mut vias = message.headers().iter().filter_map(|h| match h {
        Header::Via(via) => Some(via),
        _ => None,
    });
    let top = vias.next()?;
    let branch = top.typed().ok()?.branch()?.to_string();
    // A Via value may itself be a comma-separated list.
    let count = 1 + vias.count() + top.value().matches(',').count();
    Some((branch, count))
}

/// `(sequence number, method)` of CSeq.
pub(crate) fn cseq(message: &SipMessage) -> Option<(u32, Method)> {
    message.headers().iter().find_map(|h| match h {
        Header::CSeq(cseq) => cseq.typed().ok().map(|c| (c.seq, c.method)),
        _ => None,
    })
}

/// The sequence number of CSeq, whatever its method says (unknown methods too).
pub(crate) fn cseq_number(message: &SipMessage) -> Option<u32> {
    message.headers().iter().find_map(|h| match h {
        Header::CSeq(cseq) => cseq.value().split_whitespace().next()?.parse().ok(),
        _ => None,
    })
}

/// Call-ID.
pub(crate) fn call_id(message: &SipMessage) -> Option<String> {
    message.headers().iter().find_map(|h| match h {
        Header::CallId(id) => Some(id.value().trim().to_owned()).filter(|id| !id.is_empty()),
        _ => None,
    })
}

/// The `tag` of From.
pub(crate) fn from_tag(message: &SipMessage) -> Option<String> {
    message.headers().iter().find_map(|h| match h {
        Header::From(from) => from.typed().ok()?.tag().map(|t| t.to_string()),
        _ => None,
    })
}

/// The `tag` of To.
pub(crate) fn to_tag(message: &SipMessage) -> Option<String> {
    message.headers().iter().find_map(|h| match h {
        Header::To(to) => to.typed().ok()?.tag().map(|t| t.to_string()),
        _ => None,
    })
}

/// The URI of the first Contact, as text.
pub(crate) fn contact_uri(message: &SipMessage) -> Option<String> {
    message.headers().iter().find_map(|h| match h {
        Header::Contact(contact) => contact.typed().ok().map(|c| c.uri.to_string()),
        _ => None,
    })
}

/// Record-Route entries in order, each as a `<uri;params>` value.
pub(crate) fn record_route(message: &SipMessage) -> Vec<String> {
    let mut routes = Vec::new();
    for header in message.headers().iter() {
        if let Header::RecordRoute(rr) = header
            && let Ok(typed) = rr.typed()
        {
            for entry in typed.uris() {
                let params: String = entry.params.iter().map(|p| p.to_string()).collect();
                routes.push(format!("<{}{}>", entry.uri, params));
            }
        }
    }
    routes
}

/// The Content-Type's media type, lower-cased, without parameters.
pub(crate) fn content_type(message: &SipMessage) -> Option<String> {
    message.headers().iter().find_map(|h| match h {
        Header::ContentType(ct) => Some(ct.value().split(';').next().unwrap_or_default().trim().to_ascii_lowercase()),
        _ => None,
    })
}

/// A header whose value must be copied verbatim into a response (Via, From, To, Call-ID, CSeq).
fn is_copied(header: &Header) -> bool {
    matches!(header, Header::Via(_) | Header::From(_) | Header::To(_) | Header::CallId(_) | Header::CSeq(_))
}

/// The request has the five headers a response needs (RFC 3261 §8.2.6.2).
pub(crate) fn can_answer(message: &SipMessage) -> bool {
    let has = |f: fn(&Header) -> bool| message.headers().iter().any(f);
    has(|h| matches!(h, Header::Via(_)))
        && has(|h| matches!(h, Header::From(_)))
        && has(|h| matches!(h, Header::To(_)))
        && has(|h| matches!(h, Header::CallId(_)))
        && has(|h| matches!(h, Header::CSeq(_)))
}

/// Builds a response to `request` (RFC 3261 §8.2.6): Via, From, Call-ID and CSeq copied; To
/// copied with `to_tag` added when it has none.
pub(crate) fn response(
    request: &SipMessage,
    status: u16,
    reason: &str,
    to_tag: Option<&str>,
    extra: Vec<Header>,
    body: Option<(&str, Vec<u8>)>,
) -> Vec<u8> {
    let mut headers: Vec<Header> = Vec::new();
    for header in request.headers().iter().filter(|h| is_copied(h)) {
        match (header, to_tag) {
            (Header::To(to), Some(tag)) if !to.value().contains(";tag=") && status != 100 => {
                headers.push(Header::To(rsip::headers::To::new(format!("{};tag={tag}", to.value()))));
            }
            _ => headers.push(header.clone()),
        }
    }
    headers.extend(extra);
    finish(format!("SIP/2.0 {status} {reason}\r\n"), headers, body)
}

/// Serialises a start line, headers and an optional `(content type, body)` with its
/// Content-Length (always present: RFC 3261 §18.3 requires it on stream transports and it
/// frames bodies on UDP too).
pub(crate) fn finish(start_line: String, headers: Vec<Header>, body: Option<(&str, Vec<u8>)>) -> Vec<u8> {
    let mut text = start_line;
    for header in &headers {
        text.push_str(&header.to_string());
        text.push_str("\r\n");
    }
    let body = match body {
        Some((content_type, body)) => {
            text.push_str(&format!("Content-Type: {content_type}\r\n"));
            body
        }
        None => Vec::new(),
    };
    text.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    const INVITE: &str = "INVITE sip:bob@example.com SIP/2.0\r\n\
        v: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK776asdhds\r\n\
        Max-Forwards: 70\r\n\
        t: <sip:bob@example.com>\r\n\
        f: <sip:alice@example.com>\r\n  ;tag=1928301774\r\n\
        i: a84b4c76e66710\r\n\
        CSeq: 314159 INVITE\r\n\
        m: <sip:alice@192.0.2.1>\r\n\
        l: 4\r\n\r\nbodyEXTRA";

    #[test]
    fn compact_and_folded_headers_and_framing() {
        let incoming = parse(INVITE.as_bytes(), MAX_MESSAGE_BYTES).expect("parses");
        let m = &incoming.message;
        assert_eq!(top_branch(m), Some(("z9hG4bK776asdhds".into(), 1)));
        assert_eq!(call_id(m).as_deref(), Some("a84b4c76e66710"));
        assert_eq!(from_tag(m).as_deref(), Some("1928301774"));
        assert_eq!(cseq(m), Some((314159, Method::Invite)));
        assert_eq!(contact_uri(m).as_deref(), Some("sip:alice@192.0.2.1"));
        assert_eq!(m.body(), b"body");
        assert!(!incoming.truncated);
    }

    #[test]
    fn unknown_methods_and_short_bodies_are_flagged() {
        let text = INVITE.replacen("INVITE sip", "FROB sip", 1).replace("l: 4", "l: 40");
        let incoming = parse(text.as_bytes(), MAX_MESSAGE_BYTES).expect("parses");
        assert_eq!(incoming.unknown_method.as_deref(), Some("FROB"));
        assert!(incoming.truncated);
    }

    #[test]
    fn responses_keep_their_reason_phrase() {
        let text = "SIP/2.0 486 Nobody Home\r\nVia: SIP/2.0/UDP h;branch=z9hG4bKx\r\nCSeq: 1 INVITE\r\n\r\n";
        assert_eq!(parse(text.as_bytes(), MAX_MESSAGE_BYTES).expect("parses").reason_phrase, "Nobody Home");
    }

    #[test]
    fn limits() {
        assert_eq!(parse(&[b'x'; 100], 10).expect_err("dropped"), Dropped::TooLarge);
        assert_eq!(parse(b"\r\n\r\n", 10).expect_err("dropped"), Dropped::KeepAlive);
        assert!(matches!(parse(b"INVITE x\r\n", 100), Err(Dropped::Malformed(_))));
    }
}
