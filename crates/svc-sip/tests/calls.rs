//! Whole calls against a scripted trunk, in virtual time.

mod peer;

use std::time::Duration;

use md5::{Digest as _, Md5};
use peer::*;
use rsip::headers::UntypedHeader as _;
use rsip::message::{HasHeaders as _, HeadersExt as _};
use rsip::{Header, Method};
use svc_sip::{CallEventKind, Codec, DialError, Direction, Dropped, EndReason, FailReason, Party};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn md5_hex(text: &str) -> String {
    Md5::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// `name=value` pairs of a digest header value (test-side reading, independent of the crate).
fn digest_params(value: &str) -> std::collections::HashMap<String, String> {
    let rest = value.strip_prefix("Digest ").expect("Digest scheme");
    rest.split(", ")
        .map(|pair| {
            let (k, v) = pair.split_once('=').expect("name=value");
            (k.to_owned(), v.trim_matches('"').to_owned())
        })
        .collect()
}

#[test]
fn the_invite_is_well_formed() {
    let mut h = Harness::new(config());
    let (call, invite) = h.dial("+15550199");
    let text = invite.text();
    let request = invite.request();
    assert_eq!(request.uri.to_string(), "sip:+15550199@trunk.example.com");
    assert_eq!(invite.to, trunk_addr());
    assert!(invite.branch().starts_with("z9hG4bK"), "{text}");
    let via = invite.header("Via").expect("the header is present");
    assert!(via.starts_with("SIP/2.0/UDP 192.0.2.10:5070;branch=z9hG4bK") && via.ends_with(";rport"), "{via}");
    assert!(
        invite.header("From").expect("the header is present").starts_with("<sip:+15550100@trunk.example.com>;tag=")
    );
    assert_eq!(invite.header("To").expect("the header is present"), "<sip:+15550199@trunk.example.com>");
    assert_eq!(invite.header("Call-ID").expect("the header is present"), call.0);
    assert_eq!(invite.cseq(), (1, Method::Invite));
    assert_eq!(invite.header("Max-Forwards").expect("the header is present"), "70");
    assert_eq!(invite.header("Contact").expect("the header is present"), "<sip:+15550100@192.0.2.10:5070>");
    assert_eq!(invite.header("Content-Type").expect("the header is present"), "application/sdp");
    let sdp = svc_sip::sdp::parse(&request.body).expect("parses");
    assert_eq!((sdp.port, sdp.payload_types.as_slice()), (40000, &[0u8, 8, 101][..]));
    assert_eq!(invite.header("Content-Length").expect("the header is present"), request.body.len().to_string());
    assert!(
        matches!(&h.kinds()[..], [CallEventKind::Dialing { request_uri }] if request_uri == "sip:+15550199@trunk.example.com")
    );
}

#[test]
fn answered_then_hung_up_by_us() {
    let mut h = Harness::new(config());
    let (call, invite, ack) = h.answered_call();
    // The ACK for a 2xx is its own transaction, to the remote target, same CSeq number.
    assert_eq!(ack.request().uri.to_string(), "sip:callee@198.51.100.7:5060");
    assert_eq!(ack.cseq(), (1, Method::Ack));
    assert_ne!(ack.branch(), invite.branch());
    assert!(ack.header("To").expect("the header is present").ends_with(";tag=callee"));
    let kinds = h.kinds();
    assert!(matches!(kinds[1], CallEventKind::Trying));
    assert!(matches!(kinds[2], CallEventKind::Ringing { status: 180, early_media: None }));
    let CallEventKind::Answered { remote } = &kinds[3] else { panic!("{kinds:?}") };
    assert_eq!(remote.address.to_string(), "198.51.100.7");
    assert_eq!((remote.port, remote.codec(), remote.telephone_event), (31000, Some(&Codec::pcma()), Some(101)));

    h.advance(secs(5.0));
    h.hangup(&call);
    let bye = h.sent.last().expect("something was sent").clone();
    assert_eq!(bye.method(), Some(Method::Bye));
    assert_eq!(bye.cseq(), (2, Method::Bye));
    assert_eq!(bye.request().uri.to_string(), "sip:callee@198.51.100.7:5060");
    assert!(bye.header("To").expect("the header is present").ends_with(";tag=callee"));
    assert_eq!(
        bye.header("From").expect("the header is present"),
        invite.header("From").expect("the header is present")
    );
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Ended { by: Party::Local, reason: EndReason::Hangup })));
    // A lost BYE is retransmitted (Timer E); its 200 ends the transaction.
    let again = h.advance(secs(0.5));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].bytes, bye.bytes);
    assert!(h.deliver(&response(&bye.message, 200, None, vec![], None)).is_empty());
    h.advance(secs(60.0));
    assert_eq!(h.kinds().last(), Some(&CallEventKind::Closed));
    assert_eq!(h.core.call_count(), 0);
    assert_eq!(h.core.poll_timeout(), None);
}

#[test]
fn hung_up_by_them() {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    let bye = h.dialog_request(&invite, "callee", Method::Bye, vec![], None);
    let out = h.deliver(&bye);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status(), Some(200));
    assert_eq!(out[0].cseq(), (101, Method::Bye));
    assert_eq!(out[0].branch(), "z9hG4bKremote101");
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Ended { by: Party::Remote, reason: EndReason::Hangup })));
    // The retransmitted BYE gets the same answer, from the cache, and no second event.
    let events = h.events.len();
    let again = h.deliver(&bye);
    assert_eq!(again[0].bytes, out[0].bytes);
    assert_eq!(h.events.len(), events);
    h.advance(secs(40.0));
    assert_eq!(h.kinds().last(), Some(&CallEventKind::Closed));
}

#[test]
fn no_answer_cancels_at_the_ring_timeout() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    h.deliver(&response(&invite.message, 100, None, vec![], None));
    h.deliver(&response(&invite.message, 180, Some("callee"), vec![], None));
    assert!(h.advance(secs(29.9)).is_empty(), "no retransmission once proceeding");
    let out = h.advance(secs(0.2));
    assert_eq!(out.len(), 1);
    let cancel = &out[0];
    assert_eq!(cancel.at, secs(30.0));
    assert_eq!(cancel.method(), Some(Method::Cancel));
    assert_eq!(cancel.branch(), invite.branch(), "CANCEL shares the INVITE's branch");
    assert_eq!(cancel.cseq(), (1, Method::Cancel));
    assert_eq!(cancel.request().uri, invite.request().uri);
    assert_eq!(cancel.header("To"), invite.header("To"));
    assert!(h.deliver(&response(&cancel.message, 200, Some("callee"), vec![], None)).is_empty());
    let out = h.deliver(&response(&invite.message, 487, Some("callee"), vec![], None));
    assert_eq!(out.len(), 1);
    let ack = &out[0];
    assert_eq!((ack.method(), ack.cseq()), (Some(Method::Ack), (1, Method::Ack)));
    assert_eq!(ack.branch(), invite.branch(), "ACK for a non-2xx is part of the INVITE transaction");
    assert!(ack.header("To").expect("the header is present").ends_with("tag=callee"));
    assert!(matches!(
        h.kinds().last(),
        Some(CallEventKind::Failed { status: Some(487), reason: FailReason::NoAnswer, .. })
    ));
    // Timer D absorbs a retransmitted 487 with the same ACK.
    let again = h.deliver(&response(&invite.message, 487, Some("callee"), vec![], None));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].bytes, ack.bytes);
    h.advance(secs(31.0));
    assert_ne!(h.kinds().last(), Some(&CallEventKind::Closed), "Timer D runs 32 s");
    h.advance(secs(2.0));
    assert_eq!(h.kinds().last(), Some(&CallEventKind::Closed));
}

#[test]
fn busy() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    h.deliver(&response(&invite.message, 100, None, vec![], None));
    let out = h.deliver(&response(&invite.message, 486, Some("busy1"), vec![], None));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].method(), Some(Method::Ack));
    assert_eq!(out[0].branch(), invite.branch());
    assert_eq!(out[0].request().uri, invite.request().uri);
    assert!(out[0].header("To").expect("the header is present").ends_with(";tag=busy1"));
    let last = h.kinds().last().cloned().expect("an event");
    assert_eq!(
        last,
        CallEventKind::Failed { status: Some(486), reason_phrase: "Busy Here".into(), reason: FailReason::Busy }
    );
}

#[test]
fn cancel_while_ringing() {
    let mut h = Harness::new(config());
    let (call, invite) = h.dial("+15550199");
    h.deliver(&response(&invite.message, 180, Some("callee"), vec![], None));
    h.advance(secs(3.0));
    h.hangup(&call);
    let cancel = h.sent.last().expect("something was sent").clone();
    assert_eq!(cancel.method(), Some(Method::Cancel));
    h.deliver(&response(&cancel.message, 200, Some("callee"), vec![], None));
    h.deliver(&response(&invite.message, 487, Some("callee"), vec![], None));
    assert!(matches!(
        h.kinds().last(),
        Some(CallEventKind::Failed { status: Some(487), reason: FailReason::Canceled, .. })
    ));
}

#[test]
fn hangup_before_any_provisional_waits_for_one() {
    let mut h = Harness::new(config());
    let (call, invite) = h.dial("+15550199");
    h.hangup(&call);
    assert_eq!(h.sent.len(), 1, "RFC 3261 §9.1: no CANCEL before a provisional response");
    let out = h.deliver(&response(&invite.message, 100, None, vec![], None));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].method(), Some(Method::Cancel));
}

#[test]
fn an_answer_racing_the_cancel_is_acked_then_hung_up() {
    let mut h = Harness::new(config());
    let (call, invite) = h.dial("+15550199");
    h.deliver(&response(&invite.message, 180, Some("callee"), vec![contact_header("callee")], None));
    h.hangup(&call);
    let cancel = h.sent.last().expect("something was sent").clone();
    let sdp = answer_sdp(1, "sendrecv");
    let out = h.deliver(&response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some(&sdp)));
    let methods: Vec<_> = out.iter().map(|s| s.method()).collect();
    assert_eq!(methods, [Some(Method::Ack), Some(Method::Bye)]);
    assert_eq!(out[1].cseq(), (2, Method::Bye));
    // The CANCEL found nothing to cancel any more.
    h.deliver(&response(&cancel.message, 481, Some("callee"), vec![], None));
    assert!(!h.kinds().iter().any(|k| matches!(k, CallEventKind::Answered { .. })));
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Failed { status: None, reason: FailReason::Canceled, .. })));
}

#[test]
fn a_401_is_answered_with_digest_and_qop() {
    let mut h = Harness::new(with_credentials(config()));
    let (_call, invite) = h.dial("+15550199");
    let challenge = Header::WwwAuthenticate(rsip::headers::WwwAuthenticate::new(
        "Digest realm=\"trunk.example.com\", nonce=\"abc123\", qop=\"auth,auth-int\", opaque=\"op4\", algorithm=MD5",
    ));
    let out = h.deliver(&response(&invite.message, 401, Some("proxy"), vec![challenge], None));
    let methods: Vec<_> = out.iter().map(|s| s.method()).collect();
    assert_eq!(methods, [Some(Method::Ack), Some(Method::Invite)]);
    assert_eq!(out[0].branch(), invite.branch());
    let retry = &out[1];
    assert_eq!(retry.cseq(), (2, Method::Invite));
    assert_ne!(retry.branch(), invite.branch());
    assert_eq!(retry.header("Call-ID"), invite.header("Call-ID"));
    assert_eq!(retry.header("From"), invite.header("From"));
    assert_eq!(retry.header("To"), invite.header("To"));
    let params = digest_params(&retry.header("Authorization").expect("the header is present"));
    assert_eq!(params["username"], "svc");
    assert_eq!(params["realm"], "trunk.example.com");
    assert_eq!(params["nonce"], "abc123");
    assert_eq!(params["uri"], "sip:+15550199@trunk.example.com");
    assert_eq!(params["qop"], "auth");
    assert_eq!(params["nc"], "00000001");
    assert_eq!(params["opaque"], "op4");
    let ha1 = md5_hex("svc:trunk.example.com:s3cret");
    let ha2 = md5_hex("INVITE:sip:+15550199@trunk.example.com");
    let expected = md5_hex(&format!("{ha1}:abc123:00000001:{}:auth:{ha2}", params["cnonce"]));
    assert_eq!(params["response"], expected);
    assert!(h.kinds().contains(&CallEventKind::AuthChallenge { status: 401 }));
    let sdp = answer_sdp(1, "sendrecv");
    let out = h.deliver(&response(&retry.message, 200, Some("callee"), vec![contact_header("callee")], Some(&sdp)));
    assert_eq!(out[0].cseq(), (2, Method::Ack));
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Answered { .. })));
}

#[test]
fn a_407_is_answered_with_proxy_authorization_without_qop() {
    let mut h = Harness::new(with_credentials(config()));
    let (_call, invite) = h.dial("+15550199");
    let challenge =
        Header::ProxyAuthenticate(rsip::headers::ProxyAuthenticate::new("Digest realm=\"proxy\", nonce=\"n0nce\""));
    let out = h.deliver(&response(&invite.message, 407, Some("p"), vec![challenge], None));
    let retry = &out[1];
    assert!(retry.header("Authorization").is_none());
    let params = digest_params(&retry.header("Proxy-Authorization").expect("the header is present"));
    assert!(!params.contains_key("qop") && !params.contains_key("cnonce"));
    let ha1 = md5_hex("svc:proxy:s3cret");
    let ha2 = md5_hex("INVITE:sip:+15550199@trunk.example.com");
    assert_eq!(params["response"], md5_hex(&format!("{ha1}:n0nce:{ha2}")));
}

#[test]
fn a_second_challenge_fails_unless_stale() {
    let mut h = Harness::new(with_credentials(config()));
    let (_call, invite) = h.dial("+15550199");
    let challenge = |stale: bool| {
        let stale = if stale { ", stale=true" } else { "" };
        Header::WwwAuthenticate(rsip::headers::WwwAuthenticate::new(format!(
            "Digest realm=\"r\", nonce=\"n{}\"{stale}",
            stale.len()
        )))
    };
    let out = h.deliver(&response(&invite.message, 401, Some("a"), vec![challenge(false)], None));
    let retry = out[1].clone();
    let out = h.deliver(&response(&retry.message, 401, Some("b"), vec![challenge(true)], None));
    assert_eq!(out.len(), 2, "a stale nonce is retried");
    let third = out[1].clone();
    assert_eq!(third.cseq(), (3, Method::Invite));
    let out = h.deliver(&response(&third.message, 401, Some("c"), vec![challenge(false)], None));
    assert_eq!(out.len(), 1, "only the ACK");
    assert!(matches!(
        h.kinds().last(),
        Some(CallEventKind::Failed { status: Some(401), reason: FailReason::AuthFailed, .. })
    ));
}

#[test]
fn a_challenge_without_credentials_fails() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    let challenge = Header::WwwAuthenticate(rsip::headers::WwwAuthenticate::new("Digest realm=\"r\", nonce=\"n\""));
    h.deliver(&response(&invite.message, 401, Some("a"), vec![challenge], None));
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Failed { reason: FailReason::AuthFailed, .. })));
}

#[test]
fn a_challenged_bye_is_retried_with_credentials() {
    let mut h = Harness::new(with_credentials(config()));
    let (call, _invite, _ack) = h.answered_call();
    h.hangup(&call);
    let bye = h.sent.last().expect("something was sent").clone();
    let challenge = Header::ProxyAuthenticate(rsip::headers::ProxyAuthenticate::new("Digest realm=\"r\", nonce=\"b\""));
    let out = h.deliver(&response(&bye.message, 407, None, vec![challenge], None));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].cseq(), (3, Method::Bye));
    let params = digest_params(&out[0].header("Proxy-Authorization").expect("the header is present"));
    assert_eq!(params["uri"], "sip:callee@198.51.100.7:5060");
    let ha2 = md5_hex("BYE:sip:callee@198.51.100.7:5060");
    assert_eq!(params["response"], md5_hex(&format!("{}:b:{ha2}", md5_hex("svc:r:s3cret"))));
}

#[test]
fn a_lost_invite_is_retransmitted_until_a_provisional() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    // The first INVITE is lost: Timer A fires at 0.5, then 1 s and 2 s later.
    let shots = h.advance(secs(4.0));
    let at: Vec<Duration> = shots.iter().map(|s| s.at).collect();
    assert_eq!(at, [secs(0.5), secs(1.5), secs(3.5)]);
    assert!(shots.iter().all(|s| s.bytes == invite.bytes), "retransmissions are byte-identical");
    h.deliver(&response(&invite.message, 100, None, vec![], None));
    assert!(h.advance(secs(20.0)).is_empty(), "a provisional stops Timer A");
}

#[test]
fn timer_b_fails_the_call_when_nothing_answers() {
    let mut config = config();
    config.ring_timeout = Duration::from_secs(60);
    let mut h = Harness::new(config);
    h.dial("+15550199");
    let shots = h.advance(secs(40.0));
    let at: Vec<f64> = shots.iter().map(|s| s.at.as_secs_f64()).collect();
    assert_eq!(at, [0.5, 1.5, 3.5, 7.5, 15.5, 31.5]);
    let failed = h.events.iter().find(|e| matches!(e.kind, CallEventKind::Failed { .. })).expect("find");
    assert_eq!(failed.at - h.t0, secs(32.0));
    assert!(matches!(failed.kind, CallEventKind::Failed { status: None, reason: FailReason::Timeout, .. }));
    assert_eq!(h.kinds().last(), Some(&CallEventKind::Closed));
}

#[test]
fn a_retransmitted_2xx_gets_the_same_ack() {
    let mut h = Harness::new(config());
    let (_call, invite, ack) = h.answered_call();
    let sdp = answer_sdp(1, "sendrecv");
    let ok = response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some(&sdp));
    h.advance(secs(0.5));
    let again = h.deliver(&ok);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].bytes, ack.bytes);
    let answered = h.kinds().iter().filter(|k| matches!(k, CallEventKind::Answered { .. })).count();
    assert_eq!(answered, 1);
}

#[test]
fn a_2xx_from_another_fork_is_acked_and_hung_up() {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    let sdp = answer_sdp(1, "sendrecv");
    let out = h.deliver(&response(&invite.message, 200, Some("fork2"), vec![contact_header("fork2")], Some(&sdp)));
    let methods: Vec<_> = out.iter().map(|s| s.method()).collect();
    assert_eq!(methods, [Some(Method::Ack), Some(Method::Bye)]);
    assert!(out.iter().all(|s| s.header("To").expect("the header is present").ends_with("tag=fork2")));
    assert_eq!(out[1].request().uri.to_string(), "sip:fork2@198.51.100.7:5060");
}

#[test]
fn record_route_becomes_the_route_set() {
    let mut h = Harness::new(config());
    let (call, invite) = h.dial("+15550199");
    let rr = Header::RecordRoute(rsip::headers::RecordRoute::new("<sip:p1.example.com;lr>, <sip:p2.example.com;lr>"));
    let sdp = answer_sdp(1, "sendrecv");
    let out =
        h.deliver(&response(&invite.message, 200, Some("callee"), vec![rr, contact_header("callee")], Some(&sdp)));
    let routes: Vec<String> = out[0]
        .message
        .headers()
        .iter()
        .filter_map(|h| match h {
            Header::Route(r) => Some(r.value().to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(routes, ["<sip:p2.example.com;lr>", "<sip:p1.example.com;lr>"]);
    h.hangup(&call);
    let bye = h.sent.last().expect("something was sent");
    assert_eq!(bye.request().uri.to_string(), "sip:callee@198.51.100.7:5060");
    assert_eq!(bye.header("Route").expect("the header is present"), "<sip:p2.example.com;lr>");
}

#[test]
fn early_media_comes_with_183() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    let sdp = answer_sdp(1, "sendrecv");
    h.deliver(&response(&invite.message, 183, Some("callee"), vec![], Some(&sdp)));
    let CallEventKind::Ringing { status: 183, early_media: Some(remote) } =
        h.kinds().last().cloned().expect("an event")
    else {
        panic!("{:?}", h.kinds())
    };
    assert_eq!(remote.port, 31000);
}

#[test]
fn a_reinvite_is_answered_and_its_200_retransmitted_until_ack() {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    let hold = answer_sdp(2, "sendonly");
    let reinvite = h.dialog_request(
        &invite,
        "callee",
        Method::Invite,
        vec![contact_header("callee")],
        Some(("application/sdp", &hold)),
    );
    let out = h.deliver(&reinvite);
    assert_eq!(out.len(), 1);
    let ok = &out[0];
    assert_eq!(ok.status(), Some(200));
    let answer = svc_sip::sdp::parse(&ok.response().body).expect("parses");
    assert_eq!(answer.version, Some(2), "o= version incremented");
    assert_eq!(answer.direction, Direction::RecvOnly, "hold answered recvonly");
    assert!(ok.header("To").expect("the header is present").contains("tag="));
    let CallEventKind::RemoteMediaChanged { remote } = h.kinds().last().cloned().expect("an event") else { panic!() };
    assert_eq!(remote.direction, Direction::SendOnly);
    // No ACK yet: the 200 goes out again at T1, then 2·T1.
    let shots = h.advance(secs(1.6));
    let at: Vec<Duration> = shots.iter().map(|s| s.at).collect();
    assert_eq!(at, [secs(0.5), secs(1.5)]);
    assert!(shots.iter().all(|s| s.bytes == ok.bytes));
    // The retransmitted re-INVITE is answered from the cache.
    assert_eq!(h.deliver(&reinvite)[0].bytes, ok.bytes);
    // The ACK (same CSeq number, new branch) stops it.
    h.remote_cseq -= 1;
    let ack = h.dialog_request(&invite, "callee", Method::Ack, vec![], None);
    assert!(h.deliver(&ack).is_empty());
    assert!(h.advance(secs(40.0)).is_empty());
    assert!(matches!(h.kinds().last(), Some(CallEventKind::RemoteMediaChanged { .. })), "the call is still up");
}

#[test]
fn an_unacknowledged_200_ends_the_call() {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    let offer = answer_sdp(2, "sendrecv");
    let reinvite = h.dialog_request(&invite, "callee", Method::Invite, vec![], Some(("application/sdp", &offer)));
    h.deliver(&reinvite);
    let out = h.advance(secs(33.0));
    let bye = out.iter().find(|s| s.method() == Some(Method::Bye)).expect("BYE after Timer H");
    assert_eq!(bye.at, secs(32.0));
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Ended { by: Party::Local, reason: EndReason::AckTimeout })));
}

#[test]
fn a_reinvite_without_sdp_gets_our_offer_and_the_ack_brings_the_answer() {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    let reinvite = h.dialog_request(&invite, "callee", Method::Invite, vec![], None);
    let out = h.deliver(&reinvite);
    assert_eq!(svc_sip::sdp::parse(&out[0].response().body).expect("parses").direction, Direction::SendRecv);
    h.remote_cseq -= 1;
    let answer = answer_sdp(3, "sendrecv");
    let ack = h.dialog_request(&invite, "callee", Method::Ack, vec![], Some(("application/sdp", &answer)));
    h.deliver(&ack);
    let CallEventKind::RemoteMediaChanged { remote } = h.kinds().last().cloned().expect("an event") else { panic!() };
    assert_eq!(remote.version, Some(3));
}

#[test]
fn info_dtmf_options_and_other_requests_in_the_dialog() {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    let info = h.dialog_request(
        &invite,
        "callee",
        Method::Info,
        vec![],
        Some(("application/dtmf-relay", "Signal=7\r\nDuration=160\r\n")),
    );
    assert_eq!(h.deliver(&info)[0].status(), Some(200));
    assert_eq!(h.kinds().last(), Some(&CallEventKind::Dtmf { digit: '7', duration_ms: Some(160) }));
    let options = h.dialog_request(&invite, "callee", Method::Options, vec![], None);
    let out = h.deliver(&options);
    assert_eq!(out[0].status(), Some(200));
    assert!(out[0].header("Allow").expect("the header is present").contains("INFO"));
    let message = h.dialog_request(&invite, "callee", Method::Message, vec![], Some(("text/plain", "hi")));
    let out = h.deliver(&message);
    assert_eq!(out[0].status(), Some(405));
    assert!(out[0].header("Allow").is_some());
    // A method rsip does not know is answered 501.
    let frob = String::from_utf8(h.dialog_request(&invite, "callee", Method::Notify, vec![], None))
        .expect("value")
        .replace("NOTIFY", "FROB");
    let (result, out) = h.try_deliver(frob.as_bytes());
    assert_eq!((result, out[0].status()), (Ok(()), Some(501)));
    // Wrong remote tag: not our dialog.
    let stranger = h.dialog_request(&invite, "someone-else", Method::Bye, vec![], None);
    assert_eq!(h.deliver(&stranger)[0].status(), Some(481));
    // An old CSeq is out of order.
    h.remote_cseq -= 3;
    let old = h.dialog_request(&invite, "callee", Method::Bye, vec![], None);
    assert_eq!(h.deliver(&old)[0].status(), Some(500));
    assert!(!h.kinds().iter().any(|k| matches!(k, CallEventKind::Ended { .. })));
}

#[test]
fn requests_outside_any_call() {
    let mut h = Harness::new(config());
    let ping = "OPTIONS sip:svc@192.0.2.10:5070 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.50:5060;branch=z9hG4bKping\r\n\
                From: <sip:trunk@192.0.2.50>;tag=t\r\nTo: <sip:svc@192.0.2.10>\r\nCall-ID: ping1\r\nCSeq: 1 OPTIONS\r\n\
                Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n";
    let (result, out) = h.try_deliver(ping.as_bytes());
    assert_eq!(result, Ok(()));
    assert_eq!(out[0].status(), Some(200));
    assert!(out[0].header("To").expect("the header is present").contains(";tag="));
    let invite = ping.replace("OPTIONS", "INVITE");
    assert_eq!(h.try_deliver(invite.as_bytes()).1[0].status(), Some(480));
    let bye = ping.replace("OPTIONS", "BYE").replace("<sip:svc@192.0.2.10>", "<sip:svc@192.0.2.10>;tag=x");
    let (result, out) = h.try_deliver(bye.as_bytes());
    assert_eq!((result, out[0].status()), (Err(Dropped::Rejected(481)), Some(481)));
    let ack = ping.replace("OPTIONS", "ACK");
    let (result, out) = h.try_deliver(ack.as_bytes());
    assert_eq!(result, Err(Dropped::Stray));
    assert!(out.is_empty(), "an ACK is never answered");
    let register = ping.replace("OPTIONS", "REGISTER");
    assert_eq!(h.try_deliver(register.as_bytes()).1[0].status(), Some(405));
    // Not from the trunk at all.
    let foreign = h.core.handle_datagram(h.now, "203.0.113.9:5060".parse().expect("parses"), ping.as_bytes());
    assert_eq!(foreign, Err(Dropped::UnknownSource));
}

#[test]
fn dial_limits() {
    let mut config = config();
    config.max_calls = 2;
    let mut h = Harness::new(config);
    h.dial("+15550001");
    h.dial("15550002");
    assert_eq!(h.core.dial(h.now, "+15550003", None, offer()), Err(DialError::AtCapacity));
    assert!(matches!(h.core.dial(h.now, "+1555x", None, offer()), Err(DialError::InvalidNumber(_))));
    assert!(matches!(h.core.dial(h.now, "+1234567890123456", None, offer()), Err(DialError::InvalidNumber(_))));
    assert!(matches!(h.core.dial(h.now, "+15550004", Some("alice"), offer()), Err(DialError::InvalidNumber(_))));
}

#[test]
fn an_answer_without_sdp_is_hung_up() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    let out = h.deliver(&response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], None));
    let methods: Vec<_> = out.iter().map(|s| s.method()).collect();
    assert_eq!(methods, [Some(Method::Ack), Some(Method::Bye)]);
    assert!(matches!(
        h.kinds().last(),
        Some(CallEventKind::Failed { status: Some(200), reason: FailReason::IncompatibleMedia, .. })
    ));
}

#[test]
fn same_seed_same_bytes() {
    let run = || {
        let mut h = Harness::new(with_credentials(config()));
        let (_call, invite) = h.dial("+15550199");
        let challenge = Header::WwwAuthenticate(rsip::headers::WwwAuthenticate::new(
            "Digest realm=\"r\", nonce=\"n\", qop=\"auth\"",
        ));
        h.deliver(&response(&invite.message, 401, Some("a"), vec![challenge], None));
        h.sent.iter().map(|s| s.bytes.clone()).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn the_from_header_uses_the_given_number() {
    let mut h = Harness::new(config());
    h.core.dial(h.now, "+15550199", Some("+15557777"), offer()).expect("value");
    let invite = h.core.poll_transmit().expect("poll_transmit");
    let text = String::from_utf8(invite.bytes).expect("from_utf8");
    assert!(text.contains("From: <sip:+15557777@trunk.example.com>;tag="), "{text}");
    let message = rsip::SipMessage::try_from(text.as_str()).expect("try_from");
    assert!(message.from_header().is_ok());
}

#[test]
fn a_ring_timeout_before_any_provisional_cancels_on_the_first_one() {
    let mut config = config();
    config.ring_timeout = Duration::from_secs(2);
    let mut h = Harness::new(config);
    let (_call, invite) = h.dial("+15550199");
    let out = h.advance(secs(3.0));
    assert!(out.iter().all(|s| s.method() == Some(Method::Invite)), "only INVITE retransmissions");
    let out = h.deliver(&response(&invite.message, 100, None, vec![], None));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].method(), Some(Method::Cancel));
    // The trunk never answers the CANCEL nor the INVITE: 64·T1 after the CANCEL it is over.
    h.advance(secs(3.0 + 32.0));
    let failed = h.events.iter().find(|e| matches!(e.kind, CallEventKind::Failed { .. })).expect("failed");
    assert_eq!(failed.at - h.t0, secs(35.0));
    assert!(matches!(failed.kind, CallEventKind::Failed { status: None, reason: FailReason::NoAnswer, .. }));
}

#[test]
fn a_cancel_from_them_inside_the_dialog_matches_nothing() {
    let mut h = Harness::new(config());
    let (_call, invite, _ack) = h.answered_call();
    let cancel = h.dialog_request(&invite, "callee", Method::Cancel, vec![], None);
    assert_eq!(h.deliver(&cancel)[0].status(), Some(481));
}

#[test]
fn an_answer_with_no_codec_we_offered_is_hung_up() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    let g729 =
        "v=0\r\no=- 1 1 IN IP4 198.51.100.7\r\ns=-\r\nc=IN IP4 198.51.100.7\r\nt=0 0\r\nm=audio 31000 RTP/AVP 18\r\n";
    let out = h.deliver(&response(&invite.message, 200, Some("callee"), vec![contact_header("callee")], Some(g729)));
    let methods: Vec<_> = out.iter().map(|s| s.method()).collect();
    assert_eq!(methods, [Some(Method::Ack), Some(Method::Bye)]);
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Failed { reason: FailReason::IncompatibleMedia, .. })));
}

#[test]
fn a_reinvite_we_cannot_take_gets_488_and_the_call_stays_up() {
    let mut h = Harness::new(config());
    let (call, invite, _ack) = h.answered_call();
    let g729 =
        "v=0\r\no=- 1 2 IN IP4 198.51.100.7\r\ns=-\r\nc=IN IP4 198.51.100.7\r\nt=0 0\r\nm=audio 31000 RTP/AVP 18\r\n";
    let reinvite = h.dialog_request(&invite, "callee", Method::Invite, vec![], Some(("application/sdp", g729)));
    assert_eq!(h.deliver(&reinvite)[0].status(), Some(488));
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Answered { .. })));
    // The 488 is retransmitted until its ACK like any final response to an INVITE.
    assert_eq!(h.advance(secs(0.5))[0].status(), Some(488));
    h.remote_cseq -= 1;
    let ack = h.dialog_request(&invite, "callee", Method::Ack, vec![], None);
    h.deliver(&ack);
    assert!(h.advance(secs(10.0)).is_empty());
    assert_eq!(h.hangup(&call)[0].method(), Some(Method::Bye));
}

#[test]
fn an_unanswered_bye_runs_timer_e_then_timer_f() {
    let mut h = Harness::new(config());
    let (call, _invite, _ack) = h.answered_call();
    let start = h.elapsed();
    h.hangup(&call);
    let shots = h.advance(secs(40.0));
    let at: Vec<f64> = shots.iter().map(|s| (s.at - start).as_secs_f64()).collect();
    assert_eq!(at, [0.5, 1.5, 3.5, 7.5, 11.5, 15.5, 19.5, 23.5, 27.5, 31.5]);
    assert!(shots.iter().all(|s| s.method() == Some(Method::Bye)));
    assert_eq!(h.kinds().last(), Some(&CallEventKind::Closed));
}

#[test]
fn a_bye_on_the_early_dialog_fails_the_call_and_cancels_the_invite() {
    let mut h = Harness::new(config());
    let (_call, invite) = h.dial("+15550199");
    h.deliver(&response(&invite.message, 180, Some("callee"), vec![contact_header("callee")], None));
    let bye = h.dialog_request(&invite, "callee", Method::Bye, vec![], None);
    let out = h.deliver(&bye);
    let what: Vec<_> = out.iter().map(|s| (s.status(), s.method())).collect();
    assert_eq!(what, [(None, Some(Method::Cancel)), (Some(200), None)]);
    assert!(matches!(h.kinds().last(), Some(CallEventKind::Failed { reason: FailReason::Rejected, .. })));
    // Nobody answers the CANCEL or the INVITE: the call is still forgotten in the end.
    h.advance(secs(120.0));
    assert_eq!(h.kinds().last(), Some(&CallEventKind::Closed));
}

#[test]
fn calls_do_not_cross() {
    let mut h = Harness::new(config());
    let (first, invite1) = h.dial("+15550001");
    let (second, invite2) = h.dial("+15550002");
    assert_ne!(first, second);
    assert_ne!(invite1.header("Call-ID"), invite2.header("Call-ID"));
    assert_ne!(invite1.header("From"), invite2.header("From"), "each call has its own tag");
    h.deliver(&response(&invite2.message, 486, Some("x"), vec![], None));
    let sdp = answer_sdp(1, "sendrecv");
    h.deliver(&response(&invite1.message, 200, Some("y"), vec![contact_header("y")], Some(&sdp)));
    let outcome = |call: &svc_sip::CallId| {
        h.events
            .iter()
            .filter(|e| &e.call == call)
            .map(|e| e.kind.clone())
            .find(|k| matches!(k, CallEventKind::Answered { .. } | CallEventKind::Failed { .. }))
    };
    assert!(matches!(outcome(&first), Some(CallEventKind::Answered { .. })));
    assert!(matches!(outcome(&second), Some(CallEventKind::Failed { reason: FailReason::Busy, .. })));
}

#[test]
fn at_the_transaction_limit_requests_are_answered_but_not_remembered() {
    let mut config = config();
    config.max_transactions = 6;
    let mut h = Harness::new(config);
    let (_call, invite, _ack) = h.answered_call();
    for _ in 0..10 {
        let options = h.dialog_request(&invite, "callee", Method::Options, vec![], None);
        assert_eq!(h.deliver(&options)[0].status(), Some(200));
    }
    assert_eq!(h.core.dial(h.now, "+15550003", None, offer()), Err(DialError::AtCapacity));
}
