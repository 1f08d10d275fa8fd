//! Seeded random call scripts: the trunk answers whatever the core last sent with any plausible
//! message, in any order, while time jumps about. Whatever happens, a call reports exactly one
//! outcome (`Failed`, or `Answered` then at most one `Ended`), and after a hangup and enough
//! time the core forgets it (`Closed`, no timer left).

mod peer;

use std::time::Duration;

use peer::*;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use rsip::headers::UntypedHeader as _;
use rsip::{Header, Method};
use svc_sip::CallEventKind;

fn challenge() -> Header {
    Header::WwwAuthenticate(rsip::headers::WwwAuthenticate::new("Digest realm=\"r\", nonce=\"n\", qop=\"auth\""))
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let config = if rng.gen_bool(0.5) { with_credentials(config()) } else { config() };
    let mut h = Harness::new(config);
    let (call, first) = h.dial("+15550199");
    let sdp = answer_sdp(1, "sendrecv");
    let tags = ["callee", "fork"];
    for _ in 0..rng.gen_range(1..25) {
        // The latest INVITE (a challenge makes a new one) and the latest other request.
        let invite = h.sent.iter().rev().find(|s| s.method() == Some(Method::Invite)).cloned().unwrap_or(first.clone());
        let other = h.sent.iter().rev().find(|s| matches!(s.method(), Some(Method::Bye | Method::Cancel))).cloned();
        let tag = tags[rng.gen_range(0..tags.len())];
        let contact = vec![contact_header(tag)];
        match rng.gen_range(0..17) {
            0 => drop(h.deliver(&response(&invite.message, 100, None, vec![], None))),
            1 => drop(h.deliver(&response(&invite.message, 180, Some(tag), contact, None))),
            2 => drop(h.deliver(&response(&invite.message, 183, Some(tag), contact, Some(&sdp)))),
            3 | 4 => drop(h.deliver(&response(&invite.message, 200, Some(tag), contact, Some(&sdp)))),
            5 => {
                let status = [404, 408, 480, 486, 487, 488, 500, 503, 603][rng.gen_range(0..9)];
                drop(h.deliver(&response(&invite.message, status, Some(tag), vec![], None)));
            }
            6 => drop(h.deliver(&response(&invite.message, 401, Some(tag), vec![challenge()], None))),
            7 => {
                if let Some(other) = other {
                    let status = [200, 481, 408][rng.gen_range(0..3)];
                    drop(h.deliver(&response(&other.message, status, None, vec![], None)));
                }
            }
            8 => {
                let bye = h.dialog_request(&first, tag, Method::Bye, vec![], None);
                drop(h.deliver(&bye));
            }
            9 => {
                let body = answer_sdp(2, "sendonly");
                let reinvite = h.dialog_request(&first, tag, Method::Invite, vec![], Some(("application/sdp", &body)));
                drop(h.deliver(&reinvite));
            }
            10 => {
                let info = h.dialog_request(&first, tag, Method::Info, vec![], Some(("application/dtmf", "5")));
                drop(h.deliver(&info));
            }
            11 if h.core.has_call(&call) => drop(h.hangup(&call)),
            12 => {
                let proxy = Header::ProxyAuthenticate(rsip::headers::ProxyAuthenticate::new(
                    "Digest realm=\"p\", nonce=\"m\", stale=true",
                ));
                drop(h.deliver(&response(&invite.message, 407, Some(tag), vec![proxy], None)));
            }
            13 => {
                // An ACK for whatever re-INVITE came last (or none).
                h.remote_cseq -= 1;
                let ack = h.dialog_request(&first, tag, Method::Ack, vec![], None);
                drop(h.deliver(&ack));
            }
            _ => drop(h.advance(Duration::from_millis(rng.gen_range(0..40_000)))),
        }
    }
    if h.core.has_call(&call) {
        h.hangup(&call);
    }
    // Answer nothing more: every transaction must give up on its own.
    h.advance(h.elapsed() + Duration::from_secs(300));

    let kinds = h.kinds();
    let count = |f: fn(&CallEventKind) -> bool| kinds.iter().filter(|k| f(k)).count();
    let answered = count(|k| matches!(k, CallEventKind::Answered { .. }));
    let failed = count(|k| matches!(k, CallEventKind::Failed { .. }));
    let ended = count(|k| matches!(k, CallEventKind::Ended { .. }));
    let context = format!("seed {seed}: {kinds:#?}");
    assert!(answered <= 1, "{context}");
    assert_eq!(answered + failed, 1, "exactly one outcome; {context}");
    assert!(ended <= answered, "Ended only after Answered; {context}");
    assert_eq!(ended, answered, "a hangup ends an answered call; {context}");
    assert_eq!(kinds.last(), Some(&CallEventKind::Closed), "{context}");
    assert_eq!(count(|k| matches!(k, CallEventKind::Closed)), 1, "{context}");
    assert_eq!(h.core.call_count(), 0, "{context}");
    assert_eq!(h.core.poll_timeout(), None, "{context}");
    assert!(h.core.poll_transmit().is_none());
}

#[test]
fn seeded_call_scripts_keep_the_invariants() {
    for seed in 0..1000 {
        run(seed);
    }
}
