//! The driver over `wss://`: rustls with certificate verification, against a local TLS
//! WebSocket server with a self-signed certificate for `localhost`.

mod common;

use std::sync::Arc;

use common::{WAIT, model};
use futures_util::{SinkExt, StreamExt};
use svc_domain::model::{ProviderBBlock, ProviderBlock};
use svc_provider::codec::ConnectRequest;
use svc_provider::driver;
use svc_provider::realtime::{Dialect, RealtimeCodec};
use svc_provider_core::{ProviderEvent, SessionSetup};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// A TLS WebSocket server speaking just the Realtime handshake, and a client configuration that
/// trusts its self-signed certificate.
async fn tls_server() -> (u16, Arc<svc_http::TlsClientConfig>) {
    let tls = svc_testkit::tls::LocalhostTls::new();
    let acceptor = tls.acceptor.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut socket) = tokio_tungstenite::accept_async(tls).await else { return };
                let created = r#"{"type":"session.created","session":{"id":"tls_1"}}"#;
                let _ = socket.send(Message::text(created)).await;
                while let Some(Ok(message)) = socket.next().await {
                    if message.to_text().is_ok_and(|t| t.contains("session.update")) {
                        let updated = r#"{"type":"session.updated","session":{"id":"tls_1"}}"#;
                        let _ = socket.send(Message::text(updated)).await;
                    }
                }
            });
        }
    });
    (port, tls.client)
}

fn codec(port: u16) -> Box<RealtimeCodec> {
    let setup = SessionSetup::new(model(ProviderBlock::ProviderB(ProviderBBlock::default())), "p");
    let url = format!("wss://localhost:{port}/v1/realtime?model=gpt-realtime-2.1");
    Box::new(RealtimeCodec::new(setup, Dialect::OpenAi, ConnectRequest { url, headers: Vec::new() }))
}

#[tokio::test]
async fn wss_connects_with_a_trusted_root_and_refuses_an_unknown_one() {
    let (port, client) = tls_server().await;
    let mut session = driver::spawn_with_tls(codec(port), client, CancellationToken::new());
    let ready = tokio::time::timeout(WAIT, session.events.recv()).await.expect("in time").expect("event");
    assert_eq!(ready, ProviderEvent::Ready { upstream_session_id: Some("tls_1".to_owned()) });

    // The production roots do not know the self-signed certificate: a clear, fatal failure.
    let mut session = driver::spawn(codec(port), CancellationToken::new());
    let event = tokio::time::timeout(WAIT, session.events.recv()).await.expect("in time").expect("event");
    let ProviderEvent::Error(error) = event else { panic!("expected an error, got {event:?}") };
    assert!(error.fatal);
    assert_eq!(error.code, "connect_failed");
    assert!(error.message.to_lowercase().contains("certificate"), "{}", error.message);
}
