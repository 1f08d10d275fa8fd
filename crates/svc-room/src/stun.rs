//! What the room reads of STUN without owning ICE (str0m does): the ufrag that routes a binding
//! request to its connection, and which address a client's latest nomination came from.
//!
//! The room is an ICE-lite agent: it sends no checks, so it learns a client's path only from the
//! client's own binding requests. str0m 0.25 (its `is` 0.12 agent) keeps sending to the
//! highest-priority nominated pair until that pair has been silent for 15 s, so when a client's
//! address changes (a NAT rebinding, a Wi-Fi to cellular move without an ICE restart) the agent's
//! audio went to the dead address for 15 s while the client's kept arriving from the new one.
//! LiveKit's server (pion) sends to the pair the latest USE-CANDIDATE arrived on; [`NominatedPath`]
//! does the same on top of str0m: it notes each nominating request, and once str0m has answered
//! it with a success response (so its integrity held), sends the connection's traffic from and
//! to that request's addresses.

use std::collections::VecDeque;
use std::net::SocketAddr;

use str0m::net::Transmit;

/// RFC 5389 magic cookie, bytes 4..8 of every STUN message.
const MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
const BINDING_REQUEST: u16 = 0x0001;
const BINDING_SUCCESS: u16 = 0x0101;
const USERNAME: u16 = 0x0006;
/// RFC 8445 §7.1.2: the controlling agent nominates the pair a request with it travels on.
const USE_CANDIDATE: u16 = 0x0025;
/// Nominating requests waiting for str0m's answer; a client sends one per check interval, so a
/// few cover any answer in flight, and a flood of them costs nothing.
const MAX_ASKED: usize = 8;

/// A STUN message's header, and its attributes unparsed.
struct Stun<'a> {
    kind: u16,
    transaction: &'a [u8],
    attributes: &'a [u8],
}

impl<'a> Stun<'a> {
    /// The message, if the datagram is a well-formed STUN message.
    fn parse(datagram: &'a [u8]) -> Option<Stun<'a>> {
        // RFC 5389: first two bits zero, magic cookie at bytes 4..8, attributes after 20 bytes.
        if datagram.len() < 20 || datagram[0] & 0xC0 != 0 || datagram[4..8] != MAGIC_COOKIE {
            return None;
        }
        let length = usize::from(u16::from_be_bytes([datagram[2], datagram[3]]));
        Some(Stun {
            kind: u16::from_be_bytes([datagram[0], datagram[1]]),
            transaction: &datagram[8..20],
            attributes: datagram.get(20..20 + length)?,
        })
    }

    /// The first attribute of this type; `None` also when the attributes are malformed.
    fn attribute(&self, wanted: u16) -> Option<&'a [u8]> {
        let body = self.attributes;
        let mut offset = 0;
        while offset + 4 <= body.len() {
            let kind = u16::from_be_bytes([body[offset], body[offset + 1]]);
            let size = usize::from(u16::from_be_bytes([body[offset + 2], body[offset + 3]]));
            let value = body.get(offset + 4..offset + 4 + size)?;
            if kind == wanted {
                return Some(value);
            }
            offset += 4 + size.div_ceil(4) * 4;
        }
        None
    }
}

/// The local (our) ufrag of a STUN message's USERNAME (`<our ufrag>:<their ufrag>`), if the
/// datagram is a STUN message with one.
pub(crate) fn stun_local_ufrag(datagram: &[u8]) -> Option<&str> {
    let username = Stun::parse(datagram)?.attribute(USERNAME)?;
    std::str::from_utf8(username).ok()?.split(':').next()
}

/// Where one connection's traffic goes: the addresses of the client's latest nomination that
/// str0m accepted, once there is one (until then, where str0m says).
#[derive(Debug, Default)]
pub(crate) struct NominatedPath {
    /// Nominating requests str0m has not answered yet: transaction id, (our address, theirs).
    asked: VecDeque<([u8; 12], (SocketAddr, SocketAddr))>,
    /// (our address, theirs) of the latest answered nomination.
    current: Option<(SocketAddr, SocketAddr)>,
}

impl NominatedPath {
    /// A datagram arrived for the connection (before str0m reads it).
    pub(crate) fn received(&mut self, source: SocketAddr, destination: SocketAddr, datagram: &[u8]) {
        let Some(stun) = Stun::parse(datagram) else { return };
        if stun.kind != BINDING_REQUEST || stun.attribute(USE_CANDIDATE).is_none() {
            return;
        }
        let Ok(transaction) = <[u8; 12]>::try_from(stun.transaction) else { return };
        if self.asked.len() == MAX_ASKED {
            self.asked.pop_front();
        }
        self.asked.push_back((transaction, (destination, source)));
    }

    /// Points a datagram str0m wants sent at the current path. STUN goes where str0m says (its
    /// answers go back to each request's source); an answer to a noted nomination makes that
    /// request's path the current one.
    pub(crate) fn direct(&mut self, transmit: &mut Transmit) {
        if let Some(stun) = Stun::parse(&transmit.contents) {
            if stun.kind == BINDING_SUCCESS {
                let answered = (transmit.source, transmit.destination);
                if let Some(index) =
                    self.asked.iter().position(|(id, path)| id == stun.transaction && *path == answered)
                {
                    self.asked.remove(index);
                    self.current = Some(answered);
                }
            }
            return;
        }
        if let Some((source, destination)) = self.current {
            transmit.source = source;
            transmit.destination = destination;
        }
    }

    /// The client's address on the current path, once a nomination was answered.
    #[cfg(test)]
    pub(crate) fn remote(&self) -> Option<SocketAddr> {
        self.current.map(|(_, remote)| remote)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use str0m::net::Protocol;

    fn stun(kind: u16, transaction: u8, attributes: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, value) in attributes {
            body.extend_from_slice(&kind.to_be_bytes());
            body.extend_from_slice(&u16::try_from(value.len()).unwrap_or(0).to_be_bytes());
            body.extend_from_slice(value);
            while body.len() % 4 != 0 {
                body.push(0);
            }
        }
        let mut packet = kind.to_be_bytes().to_vec();
        packet.extend_from_slice(&u16::try_from(body.len()).unwrap_or(0).to_be_bytes());
        packet.extend_from_slice(&MAGIC_COOKIE);
        packet.extend_from_slice(&[transaction; 12]);
        packet.extend_from_slice(&body);
        packet
    }

    fn address(text: &str) -> SocketAddr {
        text.parse().expect("an address")
    }

    fn transmit(source: SocketAddr, destination: SocketAddr, contents: Vec<u8>) -> Transmit {
        Transmit { proto: Protocol::Udp, source, destination, contents: contents.into() }
    }

    #[test]
    fn the_local_ufrag_is_read_from_a_binding_request() {
        let request = stun(BINDING_REQUEST, 1, &[(USERNAME, b"ours123:theirs")]);
        assert_eq!(stun_local_ufrag(&request), Some("ours123"));
    }

    #[test]
    fn non_stun_and_truncated_datagrams_have_no_ufrag() {
        assert_eq!(stun_local_ufrag(&[0x80; 40]), None, "RTP");
        assert_eq!(stun_local_ufrag(&[22, 254, 253]), None, "DTLS");
        let mut truncated = stun(BINDING_REQUEST, 1, &[(USERNAME, b"ours:theirs")]);
        truncated.truncate(26);
        assert_eq!(stun_local_ufrag(&truncated), None);
        let mut lying = stun(BINDING_REQUEST, 1, &[(USERNAME, b"ours:theirs")]);
        lying[2] = 0xFF;
        assert_eq!(stun_local_ufrag(&lying), None, "length beyond the datagram");
    }

    #[test]
    fn traffic_follows_the_latest_answered_nomination_and_stun_goes_where_str0m_says() {
        let ours = address("10.0.0.1:7882");
        let (old, new) = (address("192.0.2.7:40000"), address("192.0.2.7:51000"));
        let mut path = NominatedPath::default();
        let mut media = transmit(ours, old, vec![0x80; 40]);
        path.direct(&mut media);
        assert_eq!(media.destination, old, "no nomination yet: str0m's choice");

        path.received(old, ours, &stun(BINDING_REQUEST, 1, &[(USE_CANDIDATE, b"")]));
        path.direct(&mut transmit(ours, old, stun(BINDING_SUCCESS, 1, &[])));
        assert_eq!(path.remote(), Some(old));

        // The client's NAT rebinds: its checks come from a new port, str0m answers them there,
        // and keeps naming the old pair for media.
        path.received(new, ours, &stun(BINDING_REQUEST, 2, &[(USE_CANDIDATE, b"")]));
        let mut answer = transmit(ours, new, stun(BINDING_SUCCESS, 2, &[]));
        path.direct(&mut answer);
        assert_eq!(answer.destination, new);
        let mut media = transmit(ours, old, vec![0x80; 40]);
        path.direct(&mut media);
        assert_eq!(media.destination, new, "media follows the nomination");
    }

    #[test]
    fn requests_without_nomination_or_answer_move_nothing() {
        let ours = address("10.0.0.1:7882");
        let (first, other) = (address("192.0.2.7:40000"), address("198.51.100.9:40000"));
        let mut path = NominatedPath::default();
        path.received(first, ours, &stun(BINDING_REQUEST, 1, &[(USE_CANDIDATE, b"")]));
        path.direct(&mut transmit(ours, first, stun(BINDING_SUCCESS, 1, &[])));

        // A check without USE-CANDIDATE, answered: not a nomination.
        path.received(other, ours, &stun(BINDING_REQUEST, 2, &[]));
        path.direct(&mut transmit(ours, other, stun(BINDING_SUCCESS, 2, &[])));
        // A nomination str0m refused (bad integrity): it answers with an error, or not at all.
        path.received(other, ours, &stun(BINDING_REQUEST, 3, &[(USE_CANDIDATE, b"")]));
        path.direct(&mut transmit(ours, other, stun(0x0111, 3, &[])));
        // An answer whose transaction was never a noted nomination.
        path.direct(&mut transmit(ours, other, stun(BINDING_SUCCESS, 9, &[])));
        assert_eq!(path.remote(), Some(first));

        // A flood of nominations that are never answered stays bounded.
        for id in 10..200 {
            path.received(other, ours, &stun(BINDING_REQUEST, id, &[(USE_CANDIDATE, b"")]));
        }
        assert_eq!(path.asked.len(), MAX_ASKED);
        assert_eq!(path.remote(), Some(first));
    }
}
