use super::*;

const REMOTE: &str = "203.0.113.7:40000";

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("an address")
}

fn session(configure: impl FnOnce(&mut SessionConfig)) -> (RtpSession, Instant) {
    let now = Instant::now();
    let mut config = SessionConfig::new(G711::Pcma, addr(REMOTE), 5, NtpTime::from_unix(Duration::from_secs(1_000)));
    config.telephone_event_pt = Some(101);
    configure(&mut config);
    (RtpSession::new(config, now), now)
}

fn rtp(ssrc: u32, seq: u16, ts: u32, payload_type: u8) -> Vec<u8> {
    RtpPacket {
        marker: false,
        payload_type,
        sequence: seq,
        timestamp: ts,
        ssrc,
        csrcs: Vec::new(),
        payload: vec![0xD5; 160],
    }
    .to_bytes()
    .expect("valid")
}

fn sent(session: &mut RtpSession) -> Vec<(Transmit, Option<RtpPacket>)> {
    std::iter::from_fn(|| session.poll_transmit())
        .map(|t| {
            let packet = (t.kind == TransmitKind::Rtp).then(|| RtpPacket::parse(&t.bytes).expect("our own RTP"));
            (t, packet)
        })
        .collect()
}

fn events(session: &mut RtpSession) -> Vec<MediaEvent> {
    std::iter::from_fn(|| session.poll_event()).collect()
}

#[test]
fn the_seed_decides_ssrc_sequence_and_timestamp() {
    let (mut a, now) = session(|_| {});
    let (mut b, _) = session(|_| {});
    let (mut c, _) = session(|config| config.seed = 6);
    for s in [&mut a, &mut b, &mut c] {
        s.push_room_pcm(now, &[0; 960]);
    }
    let first = |s: &mut RtpSession| sent(s).remove(0).1.expect("rtp");
    let (pa, pb, pc) = (first(&mut a), first(&mut b), first(&mut c));
    assert_eq!((pa.ssrc, pa.sequence, pa.timestamp), (pb.ssrc, pb.sequence, pb.timestamp));
    assert_ne!(pa.ssrc, pc.ssrc);
}

#[test]
fn packets_are_continuous_and_a_pause_is_marked_and_skipped_over() {
    let (mut s, t0) = session(|_| {});
    let ms = |n: u64| t0 + Duration::from_millis(n);
    for n in 0..3 {
        s.push_room_pcm(ms(20 * n), &[100; 960]);
    }
    // A 500 ms pause, then two more frames.
    s.push_room_pcm(ms(560), &[100; 960]);
    s.push_room_pcm(ms(580), &[100; 960]);
    let packets: Vec<RtpPacket> = sent(&mut s).into_iter().filter_map(|(_, p)| p).collect();
    assert_eq!(packets.len(), 5);
    let base = (packets[0].sequence, packets[0].timestamp);
    let offsets: Vec<(u16, u32, bool)> =
        packets.iter().map(|p| (p.sequence.wrapping_sub(base.0), p.timestamp.wrapping_sub(base.1), p.marker)).collect();
    assert_eq!(offsets, [(0, 0, true), (1, 160, false), (2, 320, false), (3, 560 * 8, true), (4, 580 * 8, false)]);
    assert!(packets.iter().all(|p| p.payload_type == 8 && p.payload.len() == 160));
    assert_eq!(s.stats().packets_sent, 5);
    assert_eq!(s.stats().octets_sent, 800);
}

#[test]
fn the_first_source_is_latched_and_a_new_one_takes_over_only_when_it_persists() {
    let (mut s, t0) = session(|_| {});
    let at = |n: u64| t0 + Duration::from_millis(20 * n);
    s.handle_rtp(at(0), addr(REMOTE), &rtp(1, 10, 1_000, 8));
    assert_eq!(events(&mut s), [MediaEvent::RemoteSsrc { previous: None, ssrc: 1 }]);
    // One stray packet of another source between packets of the first: ignored.
    s.handle_rtp(at(1), addr(REMOTE), &rtp(1, 11, 1_160, 8));
    s.handle_rtp(at(1), addr(REMOTE), &rtp(2, 500, 90_000, 8));
    s.handle_rtp(at(2), addr(REMOTE), &rtp(1, 12, 1_320, 8));
    assert_eq!(s.remote_ssrc(), Some(1));
    assert_eq!(s.stats().ignored, 1);
    // The first goes quiet; the new one takes over on its first packet.
    s.handle_rtp(at(6), addr(REMOTE), &rtp(2, 501, 90_160, 8));
    assert_eq!(events(&mut s), [MediaEvent::RemoteSsrc { previous: Some(1), ssrc: 2 }]);
    assert_eq!(s.stats().packets_received, 1, "statistics restart with the source");
    // Two in a row switch even while the old one is active.
    s.handle_rtp(at(7), addr(REMOTE), &rtp(3, 1, 5, 8));
    s.handle_rtp(at(7), addr(REMOTE), &rtp(3, 2, 165, 8));
    assert_eq!(s.remote_ssrc(), Some(3));
}

#[test]
fn packets_from_strangers_or_of_other_payload_types_are_ignored() {
    let (mut s, t0) = session(|_| {});
    s.handle_rtp(t0, addr("192.0.2.66:40000"), &rtp(1, 10, 1_000, 8));
    s.handle_rtp(t0, addr(REMOTE), &rtp(1, 10, 1_000, 13));
    s.handle_rtp(t0, addr(REMOTE), &rtp(1, 10, 1_000, 9));
    s.handle_rtp(t0, addr(REMOTE), &[0x80, 8, 0]);
    assert_eq!(s.remote_ssrc(), None);
    assert_eq!((s.stats().ignored, s.stats().malformed), (3, 1));
    // Another port of the same host is accepted (asymmetric senders exist).
    s.handle_rtp(t0, addr("203.0.113.7:40002"), &rtp(1, 10, 1_000, 8));
    assert_eq!(s.remote_ssrc(), Some(1));
    assert_eq!(s.remote_rtp(), addr(REMOTE), "no latching for a public SDP address");
}

#[test]
fn symmetric_rtp_latches_onto_the_first_sender_when_the_sdp_address_is_private() {
    let (mut s, t0) = session(|config| {
        config.remote_rtp = addr("192.168.1.20:4000");
        config.remote_rtcp = addr("192.168.1.20:4001");
    });
    let nat = addr("198.51.100.99:61000");
    s.handle_rtp(t0, nat, &rtp(1, 10, 1_000, 8));
    assert_eq!(s.remote_rtp(), nat);
    assert!(events(&mut s).contains(&MediaEvent::RemoteAddressLatched { kind: TransmitKind::Rtp, address: nat }));
    s.push_room_pcm(t0, &[0; 960]);
    assert_eq!(sent(&mut s)[0].0.destination, nat);
    // Once latched, the latch does not move.
    s.handle_rtp(t0, addr("192.0.2.1:5000"), &rtp(1, 11, 1_160, 8));
    assert_eq!(s.remote_rtp(), nat);
    assert_eq!(s.stats().ignored, 1);
    let (off, _) = session(|config| {
        config.remote_rtp = addr("192.168.1.20:4000");
        config.symmetric_rtp = SymmetricRtp::Off;
    });
    assert_eq!(off.remote_rtp(), addr("192.168.1.20:4000"));
    assert!(is_unroutable("100.64.0.1".parse().expect("ip")) && is_unroutable("fd00::1".parse().expect("ip")));
    assert!(!is_unroutable("203.0.113.7".parse().expect("ip")) && !is_unroutable("2001:db8::1".parse().expect("ip")));
}

#[test]
fn telephone_events_become_dtmf_and_never_audio() {
    let (mut s, t0) = session(|_| {});
    let event = |end, duration| crate::dtmf::TelephoneEvent { event: 11, end, volume: 10, duration }.to_bytes();
    for (n, (end, duration)) in
        [(false, 160), (false, 320), (true, 480), (true, 480), (true, 480)].into_iter().enumerate()
    {
        let packet = RtpPacket {
            marker: n == 0,
            payload_type: 101,
            sequence: n as u16,
            timestamp: 7_000,
            ssrc: 9,
            csrcs: Vec::new(),
            payload: event(end, duration).to_vec(),
        };
        s.handle_rtp(t0 + Duration::from_millis(20 * n as u64), addr(REMOTE), &packet.to_bytes().expect("valid"));
    }
    let dtmf: Vec<MediaEvent> = events(&mut s).into_iter().filter(|e| matches!(e, MediaEvent::Dtmf(_))).collect();
    assert_eq!(dtmf, [MediaEvent::Dtmf(DtmfEvent { digit: '#', duration_ms: 60 })]);
    assert_eq!(s.poll_room_pcm(t0 + Duration::from_secs(1)), None, "nothing entered the jitter buffer");
    assert_eq!(s.stats().packets_received, 5);
}

#[test]
fn dtmf_needs_a_negotiated_payload_type() {
    let (mut s, t0) = session(|config| config.telephone_event_pt = None);
    assert_eq!(s.send_dtmf(t0, "1", 100), Err(DtmfError::NotNegotiated));
    let (mut s, t0) = session(|_| {});
    assert_eq!(s.send_dtmf(t0, "1x", 100), Err(DtmfError::InvalidDigit('x')));
    s.send_dtmf(t0, "1", 100).expect("valid");
    let first = sent(&mut s).remove(0).1.expect("rtp");
    assert!(first.marker && first.payload_type == 101);
}

#[test]
fn reports_follow_the_interval_and_close_says_bye() {
    let (mut s, t0) = session(|_| {});
    let first = s.poll_timeout().expect("a report is scheduled");
    assert!(first > t0 + Duration::from_secs(1) && first < t0 + Duration::from_secs(4), "{:?}", first - t0);
    s.handle_timeout(first);
    let report = sent(&mut s).remove(0).0;
    assert_eq!((report.kind, report.destination), (TransmitKind::Rtcp, addr("203.0.113.7:40001")));
    let packets = RtcpPacket::parse_compound(&report.bytes).expect("our own RTCP");
    assert!(matches!(packets[0], RtcpPacket::ReceiverReport { ref reports, .. } if reports.is_empty()));
    assert_eq!(packets[1], RtcpPacket::SourceDescription { chunks: vec![(s.ssrc(), Some("svc".into()))] });
    let second = s.poll_timeout().expect("the next report");
    assert!(second - first >= Duration::from_secs(2) && second - first <= Duration::from_secs(7));
    // Having sent audio, the next report is an SR whose RTP time follows the media clock.
    s.push_room_pcm(second - Duration::from_millis(20), &[0; 960]);
    let audio_ts = sent(&mut s).remove(0).1.expect("rtp").timestamp;
    s.handle_timeout(second);
    let packets = RtcpPacket::parse_compound(&sent(&mut s).remove(0).0.bytes).expect("our own RTCP");
    let RtcpPacket::SenderReport { info, .. } = packets[0] else { panic!("{packets:?}") };
    assert_eq!((info.packet_count, info.octet_count), (1, 160));
    assert_eq!(info.rtp_timestamp, audio_ts.wrapping_add(160));
    assert_eq!(info.ntp, NtpTime::from_unix(Duration::from_secs(1_000) + (second - t0)));
    s.close(second, Some("bye"));
    let packets = RtcpPacket::parse_compound(&sent(&mut s).remove(0).0.bytes).expect("our own RTCP");
    assert_eq!(packets.last(), Some(&RtcpPacket::Bye { ssrcs: vec![s.ssrc()], reason: Some("bye".into()) }));
    s.push_room_pcm(second, &[0; 960]);
    assert!(sent(&mut s).is_empty(), "nothing after close");
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn rtcp_mux_sends_reports_to_the_rtp_port_and_reads_them_there() {
    let (mut s, t0) = session(|config| config.rtcp_mux = true);
    s.handle_timeout(s.poll_timeout().expect("scheduled"));
    assert_eq!(sent(&mut s)[0].0.destination, addr(REMOTE));
    let bye = RtcpPacket::compound(&[
        RtcpPacket::ReceiverReport { ssrc: 4, reports: Vec::new() },
        RtcpPacket::Bye { ssrcs: vec![4], reason: None },
    ]);
    s.handle_rtp(t0, addr(REMOTE), &bye);
    assert!(events(&mut s).contains(&MediaEvent::RemoteBye { ssrc: 4, reason: None }));
}

#[test]
fn the_media_timeout_can_be_moved_and_turned_off_and_the_remote_changed() {
    let (mut s, t0) = session(|config| config.media_timeout = Duration::from_secs(5));
    let mut fired = Vec::new();
    for ms in (0..12_000).step_by(10) {
        let now = t0 + Duration::from_millis(ms);
        if ms == 3_000 {
            s.set_media_timeout(now, Some(Duration::from_secs(5)));
        }
        if ms == 9_000 {
            s.set_media_timeout(now, None);
        }
        s.handle_timeout(now);
        fired.extend(events(&mut s).into_iter().filter_map(|e| match e {
            MediaEvent::MediaTimeout { silent_for } => Some((ms, silent_for)),
            _ => None,
        }));
    }
    assert_eq!(fired, [(8_000, Duration::from_secs(5))], "restarted at 3 s, fired once");
    s.set_media_timeout(t0 + Duration::from_secs(12), None);
    for ms in (12_000..60_000).step_by(100) {
        s.handle_timeout(t0 + Duration::from_millis(ms));
    }
    assert!(!events(&mut s).iter().any(|e| matches!(e, MediaEvent::MediaTimeout { .. })), "off");
    s.set_remote(addr("198.51.100.1:7000"), addr("198.51.100.1:7001"));
    s.push_room_pcm(t0 + Duration::from_secs(60), &[0; 960]);
    assert_eq!(sent(&mut s).last().expect("rtp").0.destination, addr("198.51.100.1:7000"));
}

#[test]
fn under_rtcp_mux_reports_follow_a_latched_address() {
    let (mut s, t0) = session(|config| {
        config.rtcp_mux = true;
        config.remote_rtp = addr("10.1.2.3:4000");
    });
    let nat = addr("198.51.100.99:61000");
    s.handle_rtp(t0, nat, &rtp(1, 10, 1_000, 8));
    s.handle_timeout(t0 + Duration::from_secs(4));
    let report = sent(&mut s).into_iter().find(|(t, _)| t.kind == TransmitKind::Rtcp).expect("a report");
    assert_eq!(report.0.destination, nat);
}

#[test]
fn sequence_numbers_and_timestamps_wrap_without_a_glitch() {
    let (mut s, t0) = session(|_| {});
    let mut kinds = Vec::new();
    for n in 0..100u32 {
        let now = t0 + Duration::from_millis(20 * u64::from(n));
        let seq = 65_500u16.wrapping_add(n as u16);
        let ts = (u32::MAX - 5_000).wrapping_add(n * 160);
        // The other law than the negotiated one is decoded too.
        let law = if n % 2 == 0 { 8 } else { 0 };
        s.handle_rtp(now, addr(REMOTE), &rtp(1, seq, ts, law));
        while let Some(frame) = s.poll_room_pcm(now) {
            kinds.push(frame.kind);
        }
    }
    assert_eq!(kinds.len(), 98);
    assert!(kinds.iter().all(|k| *k == FrameKind::Audio), "{kinds:?}");
    let stats = s.stats();
    assert_eq!((stats.packets_received, stats.packets_lost, stats.jitter.resyncs), (100, 0, 0));
}
