//! Nothing a peer sends may panic the core: random bytes, every truncation of valid messages,
//! mutated headers, and responses nobody asked for. Each is dropped, or answered 400 where
//! RFC 3261 says a request gets one (§8.2, §18.3), and none changes a call's state.

mod peer;

use peer::*;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use rsip::Method;
use svc_sip::{CallEventKind, Dropped};

/// A call with a live INVITE that got a 180 (so it has an early dialog), and the INVITE.
fn ringing() -> (Harness, Sent) {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    h.deliver(&response(&invite.message, 180, Some("callee"), vec![contact_header("callee")], None));
    (h, invite)
}

fn answered() -> (Harness, Sent) {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    (h, invite)
}

fn mutations(seed: u64, base: &[u8], count: usize) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let interesting: &[&[u8]] = &[
        b"\r\n",
        b":",
        b";",
        b",",
        b"<",
        b">",
        b"\"",
        b" ",
        b"\xff",
        b"\0",
        b"=",
        b"SIP/2.0",
        b"z9hG4bK",
        b"99999999999",
    ];
    (0..count)
        .map(|_| {
            let mut bytes = base.to_vec();
            for _ in 0..rng.gen_range(1..6) {
                if bytes.is_empty() {
                    break;
                }
                let at = rng.gen_range(0..bytes.len());
                match rng.gen_range(0..4) {
                    0 => bytes[at] = rng.r#gen(),
                    1 => {
                        bytes.remove(at);
                    }
                    2 => {
                        let piece = interesting[rng.gen_range(0..interesting.len())];
                        bytes.splice(at..at, piece.iter().copied());
                    }
                    _ => {
                        let end = (at + rng.gen_range(1..40)).min(bytes.len());
                        bytes.drain(at..end);
                    }
                }
            }
            bytes
        })
        .collect()
}

#[test]
fn seeded_random_bytes() {
    let (mut h, _invite) = ringing();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let prefixes: [&[u8]; 4] =
        [b"", b"SIP/2.0 200 OK\r\n", b"INVITE sip:a@b SIP/2.0\r\n", b"BYE sip:x SIP/2.0\r\nVia: "];
    for round in 0..4000 {
        let len = rng.gen_range(0..1500);
        let mut bytes = prefixes[round % prefixes.len()].to_vec();
        bytes.extend((0..len).map(|_| rng.r#gen::<u8>()));
        let (result, _out) = h.try_deliver(&bytes);
        assert!(result.is_err(), "random bytes were accepted: {bytes:?}");
    }
    assert!(!h.kinds().iter().any(|k| matches!(k, CallEventKind::Answered { .. } | CallEventKind::Failed { .. })));
}

#[test]
fn every_truncation_of_a_200_is_dropped() {
    let (h, invite) = ringing();
    drop(h);
    let sdp = answer_sdp(1, "sendrecv");
    let ok = response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some(&sdp));
    for len in 0..ok.len() {
        let (mut h, _) = ringing();
        let (result, out) = h.try_deliver(&ok[..len]);
        assert!(result.is_err(), "prefix of {len} bytes accepted");
        assert!(out.is_empty(), "prefix of {len} bytes answered");
        assert!(!h.kinds().iter().any(|k| matches!(k, CallEventKind::Answered { .. })));
    }
    let (mut h, _) = ringing();
    assert_eq!(h.try_deliver(&ok).0, Ok(()));
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Answered { .. })));
}

#[test]
fn every_truncation_of_an_in_dialog_request_is_dropped_or_400() {
    let (mut h, invite) = answered();
    let info = h.dialog_request(
        &invite,
        "callee",
        Method::Info,
        vec![],
        Some(("application/dtmf-relay", "Signal=5\r\nDuration=100\r\n")),
    );
    let bye = h.dialog_request(&invite, "callee", Method::Bye, vec![], None);
    for request in [info, bye] {
        for len in 0..request.len() {
            let (mut h, _) = answered();
            let events = h.events.len();
            let (result, out) = h.try_deliver(&request[..len]);
            match result {
                Err(Dropped::Rejected(400)) => {
                    assert_eq!(out.len(), 1);
                    assert_eq!(out[0].status(), Some(400), "prefix {len}");
                }
                Err(_) => assert!(out.is_empty(), "prefix {len} answered: {:?}", out.first().map(Sent::text)),
                Ok(()) => panic!("prefix of {len} bytes accepted: {:?}", String::from_utf8_lossy(&request[..len])),
            }
            assert_eq!(h.events.len(), events, "prefix {len} changed the call");
        }
    }
}

#[test]
fn seeded_mutations_of_valid_messages_never_panic() {
    let (mut base, invite) = answered();
    let sdp = answer_sdp(1, "sendrecv");
    let messages = [
        response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some(&sdp)),
        response(&invite.message, 486, Some("callee"), vec![], None),
        base.dialog_request(&invite, "callee", Method::Bye, vec![], None),
        base.dialog_request(
            &invite,
            "callee",
            Method::Invite,
            vec![contact_header("callee")],
            Some(("application/sdp", &sdp)),
        ),
        base.dialog_request(&invite, "callee", Method::Info, vec![], Some(("application/dtmf", "5"))),
    ];
    for (seed, message) in messages.iter().enumerate() {
        let (mut h, _) = answered();
        for bytes in mutations(seed as u64, message, 4000) {
            // The verdict may be anything; surviving it and answering only with parseable
            // messages (the harness parses every datagram out) is the test.
            let _verdict = h.try_deliver(&bytes);
        }
        h.advance(std::time::Duration::from_secs(120));
    }
}

/// A request from the trunk with its header lines given.
fn request(lines: &[&str], body: &[u8]) -> Vec<u8> {
    let mut bytes = lines.join("\r\n").into_bytes();
    bytes.extend_from_slice(b"\r\n\r\n");
    bytes.extend_from_slice(body);
    bytes
}

const START: &str = "OPTIONS sip:svc@192.0.2.10:5070 SIP/2.0";
const VIA: &str = "Via: SIP/2.0/UDP 192.0.2.50:5060;branch=z9hG4bKm1";
const FROM: &str = "From: <sip:trunk@192.0.2.50>;tag=t";
const TO: &str = "To: <sip:svc@192.0.2.10>";
const CALL_ID: &str = "Call-ID: mutated-1";
const CSEQ: &str = "CSeq: 7 OPTIONS";

#[test]
fn mutated_requests() {
    let mut h = Harness::new(config());
    let good = request(&[START, VIA, FROM, TO, CALL_ID, CSEQ, "Content-Length: 0"], b"");
    assert_eq!(h.try_deliver(&good).0, Ok(()), "the unmutated request is fine");

    let answered_400 = [
        request(&[START, VIA, FROM, TO, CALL_ID, "CSeq: abc OPTIONS"], b""),
        request(&[START, VIA, FROM, TO, CALL_ID, "CSeq: 7"], b""),
        request(&[START, VIA, FROM, TO, CALL_ID, "CSeq: 4294967296 OPTIONS"], b""),
        request(&[START, VIA, FROM, TO, CALL_ID, "CSeq: 7 BYE"], b""),
        request(&[START, VIA, FROM, TO, CALL_ID, CSEQ, "Content-Length: 10"], b"short"),
        request(&[START, "Via: SIP/2.0/UDP 192.0.2.50:5060", FROM, TO, CALL_ID, CSEQ], b""),
    ];
    for bytes in answered_400 {
        let (result, out) = h.try_deliver(&bytes);
        assert_eq!(result, Err(Dropped::Rejected(400)), "{}", String::from_utf8_lossy(&bytes));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status(), Some(400));
        assert_eq!(out[0].header("CSeq"), rsip_value(&bytes, "CSeq"), "CSeq copied verbatim");
    }

    let dropped = [
        request(&[START, FROM, TO, CALL_ID, CSEQ], b""),
        request(&[START, VIA, FROM, TO, CSEQ], b""),
        request(&[START, VIA, TO, CALL_ID, CSEQ], b""),
        request(&[START, VIA, FROM, TO, CALL_ID, CSEQ, "Content-Length: 99999999999999999999999"], b""),
        request(&[START, VIA, FROM, TO, CALL_ID, CSEQ, "Content-Length: -1"], b""),
        // Header bytes that are not UTF-8.
        [START.as_bytes(), b"\r\nFrom: <sip:\xff@x>\r\n", VIA.as_bytes(), b"\r\n\r\n"].concat(),
        [b"OPTIONS sip:svc@192.0.2.10 SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK\xff\xfe\r\n\r\n".as_slice()]
            .concat(),
        request(&["OPTIONS SIP/2.0", VIA, FROM, TO, CALL_ID, CSEQ], b""),
        request(&["OPTIONS sip:svc@192.0.2.10:5070 SIP/3.0", VIA, FROM, TO, CALL_ID, CSEQ], b""),
        request(&[START, VIA, FROM, TO, CALL_ID, CSEQ, "NoColonHere"], b""),
        request(&[&"X".repeat(70_000)], b""),
        // An ACK is never answered, even a broken one.
        request(&["ACK sip:svc@192.0.2.10 SIP/2.0", VIA, FROM, TO, CALL_ID, "CSeq: 7 BYE"], b""),
        b"\r\n\r\n".to_vec(),
        Vec::new(),
    ];
    for bytes in dropped {
        let (result, out) = h.try_deliver(&bytes);
        assert!(result.is_err(), "{}", String::from_utf8_lossy(&bytes));
        assert!(
            out.is_empty(),
            "{} was answered with {:?}",
            String::from_utf8_lossy(&bytes),
            out.first().map(Sent::text)
        );
    }
    assert!(h.events.is_empty());
}

fn rsip_value(bytes: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(bytes).lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

#[test]
fn odd_responses_change_nothing() {
    let (mut h, invite) = ringing();
    let sdp = answer_sdp(1, "sendrecv");
    let ok =
        String::from_utf8(response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some(&sdp)))
            .expect("text");
    let via = invite.header("Via").expect("Via");
    let odd = [
        // Another transaction's branch.
        ok.replace(&invite.branch(), "z9hG4bKnotours"),
        // Another call.
        ok.replace(&invite.header("Call-ID").expect("Call-ID"), "someone-else"),
        // Two Vias (§18.1.2: discard).
        ok.replacen("Via:", &format!("Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bKx\r\nVia: {via}\r\nX-Old-Via:"), 1),
        // No Via, no CSeq, no Call-ID.
        ok.lines().filter(|l| !l.starts_with("Via:")).collect::<Vec<_>>().join("\r\n"),
        ok.lines().filter(|l| !l.starts_with("CSeq:")).collect::<Vec<_>>().join("\r\n"),
        ok.lines().filter(|l| !l.starts_with("Call-ID:")).collect::<Vec<_>>().join("\r\n"),
        // The right transaction but the wrong method.
        ok.replace("CSeq: 1 INVITE", "CSeq: 1 BYE"),
        // Status codes out of range.
        ok.replacen("SIP/2.0 200 OK", "SIP/2.0 999 What", 1),
        ok.replacen("SIP/2.0 200 OK", "SIP/2.0 099 What", 1),
        ok.replacen("SIP/2.0 200 OK", "SIP/2.0 20 OK", 1),
        // A body longer than the datagram.
        ok.replace(&format!("Content-Length: {}", sdp.len()), "Content-Length: 5000"),
    ];
    for text in odd {
        let (result, out) = h.try_deliver(text.as_bytes());
        assert!(result.is_err() || out.is_empty(), "{text}");
        assert!(out.is_empty(), "answered: {text}");
    }
    assert!(!h.kinds().iter().any(|k| matches!(k, CallEventKind::Answered { .. } | CallEventKind::Failed { .. })));
    // A 200 with non-UTF-8 SDP is answered (ACK) and hung up, not trusted.
    let mut bytes =
        response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some("v=0\r\n\u{1}"));
    let at = bytes.len() - 1;
    bytes[at] = 0xff;
    let out = h.deliver(&bytes);
    let methods: Vec<_> = out.iter().map(Sent::method).collect();
    assert_eq!(methods, [Some(Method::Ack), Some(Method::Bye)]);
}

#[test]
fn limits_hold() {
    let mut config = config();
    config.max_message_bytes = 1000;
    let mut h = Harness::new(config);
    let (_call, invite) = h.dial("+15550199");
    let big = "x".repeat(2000);
    let bytes = response(&invite.message, 180, Some("callee"), vec![], Some(&big));
    assert_eq!(h.try_deliver(&bytes).0, Err(Dropped::TooLarge));
    // A flood of distinct requests in the dialog keeps a bounded cache.
    let mut h = Harness::new(peer::config());
    let (_call, invite, _ack) = h.answered_call();
    for _ in 0..500 {
        let options = h.dialog_request(&invite, "callee", Method::Options, vec![], None);
        assert_eq!(h.deliver(&options)[0].status(), Some(200));
    }
    assert!(h.core.poll_timeout().is_some());
}
