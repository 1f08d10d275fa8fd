//! Untrusted bytes from the network never panic: seeded random datagrams, every truncation of
//! valid packets, and single-bit corruptions of them, through the parsers and a live session.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svc_rtp::dtmf::TelephoneEvent;
use svc_rtp::rtcp::{ReportBlock, RtcpPacket, SenderInfo};
use svc_rtp::{G711, NtpTime, RtpPacket, RtpSession, SessionConfig};

const REMOTE: &str = "203.0.113.7:40000";

fn remote() -> SocketAddr {
    REMOTE.parse().unwrap()
}

fn session(now: Instant) -> RtpSession {
    let mut config = SessionConfig::new(G711::Pcmu, remote(), 3, NtpTime::default());
    config.telephone_event_pt = Some(101);
    RtpSession::new(config, now)
}

/// Valid packets with every optional part: CSRCs, an extension, padding; events; compound RTCP.
fn valid_datagrams() -> Vec<Vec<u8>> {
    let mut rtp = vec![0x80 | 0x20 | 0x10 | 2, 0x80, 0x12, 0x34, 0, 0, 0x10, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 2];
    rtp.extend_from_slice(&[0xBE, 0xDE, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8]);
    rtp.extend_from_slice(&[0xFF; 160]);
    rtp.extend_from_slice(&[0, 0, 0, 4]);
    let event = RtpPacket {
        marker: true,
        payload_type: 101,
        sequence: 7,
        timestamp: 800,
        ssrc: 9,
        csrcs: Vec::new(),
        payload: TelephoneEvent { event: 5, end: true, volume: 10, duration: 800 }.to_bytes().to_vec(),
    }
    .to_bytes()
    .unwrap();
    let block = ReportBlock {
        ssrc: 1,
        fraction_lost: 3,
        cumulative_lost: -2,
        extended_highest_seq: 70_000,
        jitter: 9,
        last_sr: 5,
        delay_since_last_sr: 6,
    };
    let rtcp = RtcpPacket::compound(&[
        RtcpPacket::SenderReport {
            ssrc: 9,
            info: SenderInfo { ntp: NtpTime(1 << 40), rtp_timestamp: 5, packet_count: 6, octet_count: 7 },
            reports: vec![block, block],
        },
        RtcpPacket::SourceDescription { chunks: vec![(9, Some("phone@example".into())), (10, None)] },
        RtcpPacket::Bye { ssrcs: vec![9, 10], reason: Some("gone".into()) },
    ]);
    let rr = RtcpPacket::compound(&[RtcpPacket::ReceiverReport { ssrc: 9, reports: vec![block] }]);
    vec![rtp, event, rtcp, rr]
}

fn feed(session: &mut RtpSession, now: Instant, bytes: &[u8]) {
    let _ = RtpPacket::parse(bytes);
    let _ = RtcpPacket::parse_compound(bytes);
    let _ = TelephoneEvent::parse(bytes);
    session.handle_rtp(now, remote(), bytes);
    session.handle_rtcp(now, remote(), bytes);
    while session.poll_event().is_some() {}
    while session.poll_transmit().is_some() {}
}

#[test]
fn valid_packets_parse() {
    let datagrams = valid_datagrams();
    let rtp = RtpPacket::parse(&datagrams[0]).unwrap();
    assert_eq!((rtp.csrcs.len(), rtp.payload.len(), rtp.sequence), (2, 160, 0x1234));
    assert_eq!(RtcpPacket::parse_compound(&datagrams[2]).unwrap().len(), 3);
}

#[test]
fn every_truncation_of_a_valid_packet_is_handled() {
    let now = Instant::now();
    let mut session = session(now);
    for datagram in valid_datagrams() {
        for len in 0..=datagram.len() {
            feed(&mut session, now, &datagram[..len]);
        }
        assert!(
            RtpPacket::parse(&datagram[..datagram.len() - 1]).is_err()
                || RtcpPacket::parse_compound(&datagram[..datagram.len() - 1]).is_err()
        );
    }
}

#[test]
fn every_single_bit_flip_of_a_valid_packet_is_handled() {
    let now = Instant::now();
    let mut session = session(now);
    for datagram in valid_datagrams() {
        for bit in 0..datagram.len() * 8 {
            let mut corrupt = datagram.clone();
            corrupt[bit / 8] ^= 1 << (bit % 8);
            feed(&mut session, now, &corrupt);
        }
    }
}

#[test]
fn random_bytes_are_handled() {
    let t0 = Instant::now();
    let mut session = session(t0);
    let mut rng = StdRng::seed_from_u64(0x5EED);
    for i in 0..50_000u32 {
        let len = rng.gen_range(0..300);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
        // Half of them look like version 2, so they get past the first check.
        if i % 2 == 0 && !bytes.is_empty() {
            bytes[0] = (bytes[0] & 0x3F) | 0x80;
        }
        let now = t0 + Duration::from_millis(u64::from(i));
        feed(&mut session, now, &bytes);
        if i % 97 == 0 {
            session.handle_timeout(now);
            while session.poll_room_pcm(now).is_some() {}
        }
    }
    let stats = session.stats();
    assert!(stats.malformed > 10_000, "{stats:?}");
}

#[test]
fn well_formed_packets_with_wild_fields_are_handled() {
    // Valid headers carrying nonsense: jumping sequence numbers and timestamps, sources that
    // come and go, empty and oversized payloads, events with any code and duration.
    let t0 = Instant::now();
    let mut session = session(t0);
    let mut rng = StdRng::seed_from_u64(77);
    let mut played = 0;
    for i in 0..20_000u64 {
        let now = t0 + Duration::from_millis(i * rng.gen_range(0..4));
        let event = rng.gen_bool(0.2);
        let payload_len = if event { rng.gen_range(0..8) } else { [0, 1, 80, 160, 240, 1_400][rng.gen_range(0..6)] };
        let packet = RtpPacket {
            marker: rng.r#gen(),
            payload_type: if event { 101 } else { 0 },
            sequence: if rng.gen_bool(0.9) { i as u16 } else { rng.r#gen() },
            timestamp: if rng.gen_bool(0.9) { (i * 160) as u32 } else { rng.r#gen() },
            ssrc: rng.gen_range(1..4),
            csrcs: Vec::new(),
            payload: (0..payload_len).map(|_| rng.r#gen()).collect(),
        };
        session.handle_rtp(now, remote(), &packet.to_bytes().unwrap());
        session.handle_timeout(now);
        while let Some(frame) = session.poll_room_pcm(now) {
            assert_eq!(frame.pcm.len(), 960);
            played += 1;
        }
        while session.poll_event().is_some() {}
        while session.poll_transmit().is_some() {}
    }
    assert!(played > 100, "{played}");
}
