//! The little SDP (RFC 4566, offer/answer per RFC 3264) one audio call needs: our offer (and
//! our answers to re-INVITEs) rendered from [`LocalMedia`], and the remote side's description
//! parsed into [`RemoteMedia`].
//!
//! Deliberately bounded and narrow: one audio stream, IPv4/IPv6 `c=` lines, `a=rtpmap`,
//! `a=fmtp` (only to recognise telephone-event), the four direction attributes and `a=ptime`.
//! Anything else is skipped, never rejected; no `sdp` crate covers offer/answer for this shape
//! without dragging in WebRTC.

use std::net::IpAddr;

/// Most payload types kept from one `m=` line (a real offer lists a handful).
pub const MAX_PAYLOAD_TYPES: usize = 32;
/// Most lines read from one description.
pub const MAX_LINES: usize = 256;

/// One RTP payload format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Codec {
    /// RTP payload type (0–127).
    pub payload_type: u8,
    /// Encoding name as in `a=rtpmap` (`PCMU`, `PCMA`, `telephone-event`, …).
    pub name: String,
    /// RTP clock rate in Hz.
    pub clock_rate: u32,
}

impl Codec {
    /// G.711 µ-law, static payload type 0.
    pub fn pcmu() -> Codec {
        Codec { payload_type: 0, name: "PCMU".to_owned(), clock_rate: 8000 }
    }

    /// G.711 A-law, static payload type 8.
    pub fn pcma() -> Codec {
        Codec { payload_type: 8, name: "PCMA".to_owned(), clock_rate: 8000 }
    }

    /// The static payload types of RFC 3551 a description may use without `a=rtpmap`.
    fn from_static(payload_type: u8) -> Option<Codec> {
        let (name, clock_rate) = match payload_type {
            0 => ("PCMU", 8000),
            3 => ("GSM", 8000),
            4 => ("G723", 8000),
            8 => ("PCMA", 8000),
            9 => ("G722", 8000),
            18 => ("G729", 8000),
            _ => return None,
        };
        Some(Codec { payload_type, name: name.to_owned(), clock_rate })
    }
}

/// Media direction attribute (RFC 3264 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// `a=sendrecv` (also the default when none is given).
    #[default]
    SendRecv,
    /// `a=sendonly`: the sender of this description only sends (holds us, typically).
    SendOnly,
    /// `a=recvonly`.
    RecvOnly,
    /// `a=inactive`.
    Inactive,
}

impl Direction {
    /// The direction an answer takes towards an offer with this direction.
    pub fn answer(self) -> Direction {
        match self {
            Direction::SendRecv => Direction::SendRecv,
            Direction::SendOnly => Direction::RecvOnly,
            Direction::RecvOnly => Direction::SendOnly,
            Direction::Inactive => Direction::Inactive,
        }
    }

    fn attribute(self) -> &'static str {
        match self {
            Direction::SendRecv => "sendrecv",
            Direction::SendOnly => "sendonly",
            Direction::RecvOnly => "recvonly",
            Direction::Inactive => "inactive",
        }
    }
}

/// What we offer: where our RTP listens and what it can send and receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalMedia {
    /// Address in `c=` (the RTP socket's advertised address).
    pub address: IpAddr,
    /// RTP port in `m=audio`.
    pub port: u16,
    /// Audio codecs in preference order.
    pub codecs: Vec<Codec>,
    /// RFC 4733 telephone-event payload type (rate 8000), if DTMF over RTP is offered.
    pub telephone_event: Option<u8>,
    /// Packetisation time in ms (`a=ptime`).
    pub ptime_ms: Option<u32>,
}

impl LocalMedia {
    /// G.711 (PCMU, PCMA), telephone-event on 101, 20 ms packets: what every trunk takes.
    pub fn g711(address: IpAddr, port: u16) -> LocalMedia {
        LocalMedia {
            address,
            port,
            codecs: vec![Codec::pcmu(), Codec::pcma()],
            telephone_event: Some(101),
            ptime_ms: Some(20),
        }
    }

    /// The SDP text for this media. `session_id` stays fixed for a call and `version` grows by
    /// one with every new description we send in it (RFC 3264 §8).
    pub fn render(&self, session_id: u64, version: u64, direction: Direction) -> String {
        let family = if self.address.is_ipv6() { "IP6" } else { "IP4" };
        let mut payload_types: Vec<String> = self.codecs.iter().map(|c| c.payload_type.to_string()).collect();
        if let Some(pt) = self.telephone_event {
            payload_types.push(pt.to_string());
        }
        let address = self.address;
        let mut sdp = format!(
            "v=0\r\no=svc {session_id} {version} IN {family} {address}\r\ns=svc\r\nc=IN {family} {address}\r\n\
             t=0 0\r\nm=audio {} RTP/AVP {}\r\n",
            self.port,
            payload_types.join(" ")
        );
        for codec in &self.codecs {
            sdp.push_str(&format!("a=rtpmap:{} {}/{}\r\n", codec.payload_type, codec.name, codec.clock_rate));
        }
        if let Some(pt) = self.telephone_event {
            sdp.push_str(&format!("a=rtpmap:{pt} telephone-event/8000\r\na=fmtp:{pt} 0-16\r\n"));
        }
        if let Some(ptime) = self.ptime_ms {
            sdp.push_str(&format!("a=ptime:{ptime}\r\n"));
        }
        sdp.push_str(&format!("a={}\r\n", direction.attribute()));
        sdp
    }
}

/// The remote side's audio description, as parsed from its SDP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteMedia {
    /// Where to send RTP (`c=`, media level over session level).
    pub address: IpAddr,
    /// RTP port; 0 means the stream was rejected.
    pub port: u16,
    /// Payload types of the `m=audio` line, in the remote's order.
    pub payload_types: Vec<u8>,
    /// Audio codecs the payload types resolve to (rtpmap or static), in the same order, without
    /// telephone-event.
    pub codecs: Vec<Codec>,
    /// The telephone-event payload type, if the remote takes DTMF over RTP.
    pub telephone_event: Option<u8>,
    /// The direction the remote declared.
    pub direction: Direction,
    /// `a=ptime`, if given.
    pub ptime_ms: Option<u32>,
    /// The `o=` version, to tell a changed description from a repeated one.
    pub version: Option<u64>,
}

impl RemoteMedia {
    /// The codec to send with: the first audio codec of the answer (RFC 3264 §6.1: the
    /// answerer lists what it will use, most preferred first).
    pub fn codec(&self) -> Option<&Codec> {
        self.codecs.first()
    }

    /// The stream was declined (port 0).
    pub fn is_rejected(&self) -> bool {
        self.port == 0
    }

    /// This description restricted to what `local` offered (codecs matched by name and clock
    /// rate, telephone-event only if we offered it), keeping the remote's order and payload
    /// types; `None` when no audio codec is left or the stream was declined.
    pub fn negotiated(mut self, local: &LocalMedia) -> Option<RemoteMedia> {
        self.codecs.retain(|codec| local.codecs.iter().any(|ours| ours.same_format(codec)));
        if local.telephone_event.is_none() {
            self.telephone_event = None;
        }
        (!self.codecs.is_empty() && !self.is_rejected()).then_some(self)
    }
}

impl Codec {
    /// Same encoding (case-insensitive) at the same clock rate, whatever the payload type.
    pub fn same_format(&self, other: &Codec) -> bool {
        self.name.eq_ignore_ascii_case(&other.name) && self.clock_rate == other.clock_rate
    }
}

impl LocalMedia {
    /// Our answer to the remote's `offer` (RFC 3264 §6.1): our codecs that the offer lists, in
    /// our order but with the offer's payload types, and telephone-event if both take it.
    /// `None` when nothing is common.
    pub fn answer_to(&self, offer: &RemoteMedia) -> Option<LocalMedia> {
        let codecs: Vec<Codec> = self
            .codecs
            .iter()
            .filter_map(|ours| offer.codecs.iter().find(|theirs| theirs.same_format(ours)).cloned())
            .collect();
        if codecs.is_empty() {
            return None;
        }
        let telephone_event = self.telephone_event.and(offer.telephone_event);
        Some(LocalMedia { codecs, telephone_event, ..self.clone() })
    }
}

/// Why an SDP body was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdpError {
    /// Not UTF-8, or more than [`MAX_LINES`] lines.
    #[error("SDP is not bounded UTF-8 text")]
    NotText,
    /// No `m=audio` line.
    #[error("no audio stream")]
    NoAudio,
    /// No usable `c=` line for the audio stream.
    #[error("no connection address")]
    NoAddress,
    /// A line we need could not be read.
    #[error("malformed {0} line")]
    Malformed(&'static str),
}

/// Parses the first `m=audio` stream of an SDP body.
pub fn parse(body: &[u8]) -> Result<RemoteMedia, SdpError> {
    let text = std::str::from_utf8(body).map_err(|_| SdpError::NotText)?;
    let mut session_address: Option<IpAddr> = None;
    let mut media_address: Option<IpAddr> = None;
    let mut version = None;
    let mut audio: Option<(u16, Vec<u8>)> = None;
    // Attributes of the audio stream (or session-level ones before any m= line).
    let mut rtpmap: Vec<Codec> = Vec::new();
    let mut session_direction = None;
    let mut media_direction = None;
    let mut ptime_ms = None;
    // 0: session level, 1: inside the audio stream, 2: inside a later or other stream.
    let mut section = 0u8;
    for (count, line) in text.lines().enumerate() {
        if count >= MAX_LINES {
            return Err(SdpError::NotText);
        }
        let line = line.trim_end_matches('\r');
        let Some((kind, value)) = line.split_once('=') else { continue };
        match kind {
            "o" if section == 0 => {
                version = value.split_whitespace().nth(2).and_then(|v| v.parse().ok());
            }
            "c" if section < 2 => {
                let address = parse_connection(value)?;
                if section == 0 {
                    session_address = Some(address);
                } else {
                    media_address = Some(address);
                }
            }
            "m" => {
                if section == 1 || audio.is_some() {
                    section = 2;
                    continue;
                }
                let mut fields = value.split_whitespace();
                if fields.next() != Some("audio") {
                    section = 2;
                    continue;
                }
                let port = fields
                    .next()
                    .and_then(|p| p.split('/').next())
                    .and_then(|p| p.parse::<u16>().ok())
                    .ok_or(SdpError::Malformed("m="))?;
                let _protocol = fields.next().ok_or(SdpError::Malformed("m="))?;
                let payload_types: Vec<u8> = fields
                    .take(MAX_PAYLOAD_TYPES)
                    .map(|pt| pt.parse::<u8>().ok().filter(|pt| *pt < 128))
                    .collect::<Option<_>>()
                    .ok_or(SdpError::Malformed("m="))?;
                audio = Some((port, payload_types));
                section = 1;
            }
            "a" if section < 2 => {
                let (name, rest) = value.split_once(':').unwrap_or((value, ""));
                match name {
                    "rtpmap" if section == 1 => {
                        if let Some(codec) = parse_rtpmap(rest)
                            && rtpmap.len() < MAX_PAYLOAD_TYPES
                        {
                            rtpmap.push(codec);
                        }
                    }
                    "ptime" => ptime_ms = rest.trim().parse().ok(),
                    "sendrecv" | "sendonly" | "recvonly" | "inactive" => {
                        let direction = match name {
                            "sendonly" => Direction::SendOnly,
                            "recvonly" => Direction::RecvOnly,
                            "inactive" => Direction::Inactive,
                            _ => Direction::SendRecv,
                        };
                        if section == 0 {
                            session_direction = Some(direction);
                        } else {
                            media_direction = Some(direction);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let (port, payload_types) = audio.ok_or(SdpError::NoAudio)?;
    let address = media_address.or(session_address).ok_or(SdpError::NoAddress)?;
    let mut codecs = Vec::new();
    let mut telephone_event = None;
    for &pt in &payload_types {
        let codec = rtpmap.iter().find(|c| c.payload_type == pt).cloned().or_else(|| Codec::from_static(pt));
        match codec {
            Some(codec) if codec.name.eq_ignore_ascii_case("telephone-event") => {
                // The first one wins; a second rate (16 kHz) for wideband is of no use to G.711.
                telephone_event.get_or_insert(pt);
            }
            Some(codec) => codecs.push(codec),
            None => {}
        }
    }
    Ok(RemoteMedia {
        address,
        port,
        payload_types,
        codecs,
        telephone_event,
        direction: media_direction.or(session_direction).unwrap_or_default(),
        ptime_ms,
        version,
    })
}

fn parse_connection(value: &str) -> Result<IpAddr, SdpError> {
    let mut fields = value.split_whitespace();
    let (Some("IN"), Some(_family), Some(address)) = (fields.next(), fields.next(), fields.next()) else {
        return Err(SdpError::Malformed("c="));
    };
    // A multicast address carries a /ttl suffix; unicast calls never do, but tolerate it.
    let address = address.split('/').next().unwrap_or(address);
    address.parse().map_err(|_| SdpError::Malformed("c="))
}

fn parse_rtpmap(rest: &str) -> Option<Codec> {
    let (pt, encoding) = rest.trim().split_once(' ')?;
    let payload_type = pt.parse::<u8>().ok().filter(|pt| *pt < 128)?;
    let mut parts = encoding.trim().split('/');
    let name = parts.next()?.to_owned();
    let clock_rate = parts.next()?.parse().ok()?;
    Some(Codec { payload_type, name, clock_rate })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_offer_parses_back_to_itself() {
        let local = LocalMedia::g711("192.0.2.10".parse().expect("parses"), 40000);
        let sdp = local.render(7, 1, Direction::SendRecv);
        assert!(sdp.contains("m=audio 40000 RTP/AVP 0 8 101\r\n"), "{sdp}");
        assert!(sdp.contains("o=svc 7 1 IN IP4 192.0.2.10\r\n"));
        let remote = parse(sdp.as_bytes()).expect("parses");
        assert_eq!(remote.address, local.address);
        assert_eq!(remote.port, 40000);
        assert_eq!(remote.payload_types, [0, 8, 101]);
        assert_eq!(remote.codecs, [Codec::pcmu(), Codec::pcma()]);
        assert_eq!(remote.telephone_event, Some(101));
        assert_eq!(remote.ptime_ms, Some(20));
        assert_eq!(remote.version, Some(1));
    }

    #[test]
    fn an_answer_from_a_trunk() {
        let answer = "v=0\r\no=- 123 456 IN IP4 203.0.113.5\r\ns=-\r\nc=IN IP4 203.0.113.5\r\nt=0 0\r\n\
                      m=audio 30000 RTP/AVP 8 96\r\na=rtpmap:96 telephone-event/8000\r\na=fmtp:96 0-15\r\n\
                      a=sendonly\r\nm=video 0 RTP/AVP 31\r\nc=IN IP4 198.51.100.1\r\na=recvonly\r\n";
        let remote = parse(answer.as_bytes()).expect("parses");
        assert_eq!(remote.address, "203.0.113.5".parse::<IpAddr>().expect("value"));
        assert_eq!(remote.codec(), Some(&Codec::pcma()));
        assert_eq!(remote.telephone_event, Some(96));
        assert_eq!(remote.direction, Direction::SendOnly);
        assert_eq!(remote.version, Some(456));
    }

    #[test]
    fn media_level_address_wins_and_garbage_is_an_error() {
        let sdp = "v=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 5000 RTP/AVP 0\r\nc=IN IP6 ::1\r\n";
        assert_eq!(parse(sdp.as_bytes()).expect("parses").address, "::1".parse::<IpAddr>().expect("value"));
        assert_eq!(parse(b"v=0\r\n"), Err(SdpError::NoAudio));
        assert_eq!(parse(b"m=audio 5000 RTP/AVP 0\r\n"), Err(SdpError::NoAddress));
        assert_eq!(parse(b"m=audio x RTP/AVP 0\r\n"), Err(SdpError::Malformed("m=")));
        assert_eq!(parse(&[0xff, 0xfe]), Err(SdpError::NotText));
    }

    #[test]
    fn negotiation_keeps_what_both_sides_take() {
        let local = LocalMedia::g711("192.0.2.10".parse().expect("ip"), 40000);
        let offer = "v=0\r\nc=IN IP4 203.0.113.5\r\nm=audio 30000 RTP/AVP 18 8 97\r\n\
                     a=rtpmap:97 telephone-event/8000\r\n";
        let remote = parse(offer.as_bytes()).expect("parses");
        let answer = local.answer_to(&remote).expect("PCMA in common");
        assert_eq!(answer.codecs, [Codec::pcma()]);
        assert_eq!(answer.telephone_event, Some(97), "the offer's payload type");
        let negotiated = remote.negotiated(&local).expect("PCMA in common");
        assert_eq!(negotiated.codec(), Some(&Codec::pcma()), "G.729 was never offered");
        let g729 = parse(b"c=IN IP4 203.0.113.5\r\nm=audio 30000 RTP/AVP 18\r\n").expect("parses");
        assert!(local.answer_to(&g729).is_none());
        assert!(g729.negotiated(&local).is_none());
    }

    #[test]
    fn hold_is_answered_with_the_mirror_direction() {
        assert_eq!(Direction::SendOnly.answer(), Direction::RecvOnly);
        assert_eq!(Direction::Inactive.answer(), Direction::Inactive);
    }
}
