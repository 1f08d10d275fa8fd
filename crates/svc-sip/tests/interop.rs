//! Against a real SIP stack: baresip on loopback (see `baresip/mod.rs` for its configuration).
//! Ignored by default: it needs `apt-get install -y baresip`. Run with
//! `cargo test -p svc-sip --test interop -- --ignored`.

mod baresip;

use std::time::Duration;

use baresip::Baresip;
use svc_sip::shell;
use svc_sip::{CallEventKind, EndReason, LocalMedia, Party, SipConfig, SipCore};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

#[tokio::test]
#[ignore = "needs baresip (apt-get install -y baresip)"]
async fn baresip_answers_and_we_hang_up() {
    let peer = Baresip::start("+15550199").expect("baresip is installed (apt-get install -y baresip)");
    let mut config = SipConfig::new(format!("sip:{}", peer.addr), "+15550100", "127.0.0.1:0".parse().expect("addr"));
    let socket = shell::bind(&config).await.expect("bind");
    config.advertised_addr = socket.local_addr().expect("local address");
    config.ring_timeout = Duration::from_secs(10);
    let core = SipCore::new(config, peer.addr, rand_seed()).expect("core");
    let mut sip = shell::spawn(socket, core, CancellationToken::new()).expect("spawn");
    // Our RTP port: nothing listens there; baresip's tone just goes nowhere.
    let offer = LocalMedia::g711("127.0.0.1".parse().expect("ip"), 41000);
    let call = sip.client.dial(&peer.number, None, offer).await.expect("dial");
    let mut kinds = Vec::new();
    let remote = loop {
        let event = timeout(Duration::from_secs(10), sip.events.recv()).await;
        let kind = event.unwrap_or_else(|_| panic!("no answer; so far {kinds:?}\n{}", peer.log())).expect("event").kind;
        match kind {
            CallEventKind::Answered { remote } => break remote,
            CallEventKind::Failed { .. } => panic!("failed: {kind:?}\n{}", peer.log()),
            other => kinds.push(other),
        }
    };
    assert_eq!(remote.address.to_string(), "127.0.0.1");
    assert!(remote.port != 0);
    assert!(remote.codec().is_some_and(|c| c.name == "PCMU" || c.name == "PCMA"), "{remote:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    sip.client.hangup(&call).await.expect("hangup");
    let ended = timeout(Duration::from_secs(5), sip.events.recv()).await.expect("in time").expect("event");
    assert_eq!(ended.kind, CallEventKind::Ended { by: Party::Local, reason: EndReason::Hangup });
    drop(sip.client);
    let stats = timeout(Duration::from_secs(10), sip.task).await.expect("stops").expect("task");
    assert_eq!(stats.dropped, 0, "{stats:?}\n{}", peer.log());
    // baresip's own view: it set the call up with us (and the BYE got its 200: the shell
    // stopped without waiting for a pending request).
    let log = peer.log();
    assert!(log.contains("Call established: sip:+15550100@127.0.0.1"), "{log}");
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}
