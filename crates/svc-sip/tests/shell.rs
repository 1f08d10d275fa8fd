//! The tokio shell over real loopback UDP, against a scripted trunk socket.

mod peer;

use std::time::Duration;

use peer::{answer_sdp, contact_header, response};
use rsip::{Method, SipMessage};
use svc_sip::shell::{self, SipShell};
use svc_sip::{CallEventKind, FailReason, LocalMedia, Party, SipConfig, SipCore};
use tokio::net::UdpSocket;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(5);

async fn setup() -> (SipShell, UdpSocket, CancellationToken) {
    let trunk = UdpSocket::bind("127.0.0.1:0").await.expect("bind trunk");
    let trunk_addr = trunk.local_addr().expect("trunk address");
    let mut config = SipConfig::new(format!("sip:{trunk_addr}"), "+15550100", "127.0.0.1:0".parse().expect("addr"));
    let socket = shell::bind(&config).await.expect("bind");
    config.advertised_addr = socket.local_addr().expect("local address");
    let core = SipCore::new(config, trunk_addr, 1).expect("core");
    let shutdown = CancellationToken::new();
    let shell = shell::spawn(socket, core, shutdown.clone()).expect("spawn");
    (shell, trunk, shutdown)
}

async fn receive(trunk: &UdpSocket) -> (SipMessage, std::net::SocketAddr) {
    let mut buffer = vec![0u8; 65_536];
    let (len, from) = timeout(WAIT, trunk.recv_from(&mut buffer)).await.expect("a datagram in time").expect("recv");
    (SipMessage::try_from(&buffer[..len]).expect("parses"), from)
}

async fn receive_request(trunk: &UdpSocket, method: Method) -> (SipMessage, std::net::SocketAddr) {
    loop {
        let (message, from) = receive(trunk).await;
        if matches!(&message, SipMessage::Request(r) if r.method == method) {
            return (message, from);
        }
    }
}

async fn next_kind(shell: &mut SipShell) -> CallEventKind {
    timeout(WAIT, shell.events.recv()).await.expect("an event in time").expect("event").kind
}

#[tokio::test]
async fn a_call_through_the_shell() {
    let (mut shell, trunk, _shutdown) = setup().await;
    let offer = LocalMedia::g711("127.0.0.1".parse().expect("ip"), 40000);
    let call = shell.client.dial("+15550199", None, offer).await.expect("dial");
    let (invite, ua) = receive_request(&trunk, Method::Invite).await;
    assert_eq!(ua, shell.local_addr);
    trunk.send_to(&response(&invite, 100, None, vec![], None), ua).await.expect("send");
    trunk.send_to(&response(&invite, 180, Some("b"), vec![contact_header("b")], None), ua).await.expect("send");
    let sdp = answer_sdp(1, "sendrecv");
    trunk.send_to(&response(&invite, 200, Some("b"), vec![contact_header("b")], Some(&sdp)), ua).await.expect("send");
    receive_request(&trunk, Method::Ack).await;
    assert!(matches!(next_kind(&mut shell).await, CallEventKind::Dialing { .. }));
    assert_eq!(next_kind(&mut shell).await, CallEventKind::Trying);
    assert!(matches!(next_kind(&mut shell).await, CallEventKind::Ringing { status: 180, .. }));
    assert!(matches!(next_kind(&mut shell).await, CallEventKind::Answered { .. }));

    shell.client.hangup(&call).await.expect("hangup");
    let (bye, ua) = receive_request(&trunk, Method::Bye).await;
    trunk.send_to(&response(&bye, 200, None, vec![], None), ua).await.expect("send");
    assert_eq!(
        next_kind(&mut shell).await,
        CallEventKind::Ended { by: Party::Local, reason: svc_sip::EndReason::Hangup }
    );

    // Dropping the last client stops the task; nothing is pending, so at once.
    drop(shell.client);
    let stats = timeout(WAIT, shell.task).await.expect("stops in time").expect("task");
    assert_eq!(stats.received, 4);
    assert_eq!(stats.dropped, 0);
    assert!(stats.sent >= 3);
}

#[tokio::test]
async fn shutdown_cancels_a_ringing_call() {
    let (mut shell, trunk, shutdown) = setup().await;
    let offer = LocalMedia::g711("127.0.0.1".parse().expect("ip"), 40000);
    shell.client.dial("+15550199", None, offer).await.expect("dial");
    let (invite, ua) = receive_request(&trunk, Method::Invite).await;
    trunk.send_to(&response(&invite, 180, Some("b"), vec![], None), ua).await.expect("send");
    assert!(matches!(next_kind(&mut shell).await, CallEventKind::Dialing { .. }));
    assert!(matches!(next_kind(&mut shell).await, CallEventKind::Ringing { .. }));
    shutdown.cancel();
    let (cancel, ua) = receive_request(&trunk, Method::Cancel).await;
    trunk.send_to(&response(&cancel, 200, Some("b"), vec![], None), ua).await.expect("send");
    trunk.send_to(&response(&invite, 487, Some("b"), vec![], None), ua).await.expect("send");
    receive_request(&trunk, Method::Ack).await;
    assert!(matches!(
        next_kind(&mut shell).await,
        CallEventKind::Failed { status: Some(487), reason: FailReason::Canceled, .. }
    ));
    timeout(WAIT, shell.task).await.expect("stops in time").expect("task");
}

#[tokio::test]
async fn the_trunk_uri_resolves() {
    assert_eq!(shell::resolve_trunk("sip:127.0.0.1").await.expect("resolves"), "127.0.0.1:5060".parse().expect("addr"));
    assert_eq!(shell::resolve_trunk("sip:localhost:5080").await.expect("resolves").port(), 5080);
    assert!(shell::resolve_trunk("not a uri").await.is_err());
}
