//! The WebSocket itself, against a bare server (not a fake of any provider): messages arrive in
//! binary frames as well as text frames, a message larger than the read buffer arrives whole, svc
//! closes with 1000, and it answers a close frame the upstream sends.

mod common;

use std::time::Duration;

use common::{WAIT, model};
use futures_util::{SinkExt, StreamExt};
use svc_domain::model::{ProviderABlock, ProviderBlock};
use svc_provider::endpoint::ProviderEnv;
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

type Server = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// A Gemini session whose upstream is whatever `listener` accepts.
fn gemini_against(listener: &TcpListener) -> svc_provider_core::session::ProviderSession {
    let base = format!("http://{}", listener.local_addr().expect("bound"));
    let env = ProviderEnv::from_lookup(|name| match name {
        "GEMINI_API_KEY" => Some("k".to_owned()),
        "GOOGLE_GEMINI_BASE_URL" => Some(base.clone()),
        _ => None,
    })
    .expect("valid env");
    let setup = SessionSetup::new(model(ProviderBlock::ProviderA(ProviderABlock::default())), "Be brief.");
    svc_provider::start(setup, &env, CancellationToken::new()).expect("adapter starts")
}

async fn accept(listener: &TcpListener) -> Server {
    let (stream, _) = tokio::time::timeout(WAIT, listener.accept()).await.expect("svc connects").expect("accept");
    tokio_tungstenite::accept_async(stream).await.expect("websocket upgrade")
}

/// The next data message svc sends, as JSON.
async fn next_json(server: &mut Server) -> serde_json::Value {
    loop {
        let message = tokio::time::timeout(WAIT, server.next()).await.expect("a message").expect("open").expect("ok");
        match message {
            Message::Text(text) => return serde_json::from_str(&text).expect("svc sends JSON"),
            Message::Binary(bytes) => return serde_json::from_slice(&bytes).expect("svc sends JSON"),
            _ => {}
        }
    }
}

/// The close frame svc sends (after any data still in flight).
async fn next_close(server: &mut Server) -> Option<CloseFrame> {
    loop {
        match tokio::time::timeout(WAIT, server.next()).await.expect("svc closes in time") {
            Some(Ok(Message::Close(frame))) => return frame,
            Some(Ok(_)) => {}
            other => panic!("the socket ended without a close frame: {other:?}"),
        }
    }
}

/// A Gemini session past its setup: the upstream answered `setupComplete` and svc said `Ready`.
async fn ready_gemini() -> (TcpListener, svc_provider_core::session::ProviderSession, Server) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let mut session = gemini_against(&listener);
    let mut server = accept(&listener).await;
    next_json(&mut server).await;
    server.send(Message::binary(br#"{"setupComplete":{}}"#.to_vec())).await.expect("send");
    wait_for(&mut session, |e| matches!(e, ProviderEvent::Ready { .. })).await;
    (listener, session, server)
}

async fn wait_for(
    session: &mut svc_provider_core::session::ProviderSession,
    predicate: impl Fn(&ProviderEvent) -> bool,
) -> ProviderEvent {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let event = tokio::time::timeout_at(deadline, session.events.recv())
            .await
            .expect("the event in time")
            .expect("the adapter is running");
        if predicate(&event) {
            return event;
        }
    }
}

#[tokio::test]
async fn messages_in_binary_frames_are_read_like_text_frames() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let mut session = gemini_against(&listener);
    let mut server = accept(&listener).await;
    assert!(next_json(&mut server).await.get("setup").is_some());
    // How the Live API answers: JSON in a binary frame.
    server.send(Message::binary(br#"{"setupComplete":{"sessionId":"s-bin"}}"#.to_vec())).await.expect("send");
    let ready = wait_for(&mut session, |e| matches!(e, ProviderEvent::Ready { .. })).await;
    assert_eq!(ready, ProviderEvent::Ready { upstream_session_id: Some("s-bin".to_owned()) });
    // Text frames still work on the same socket, mixed with binary ones.
    server.send(Message::text(r#"{"serverContent":{"outputTranscription":{"text":"Hel"}}}"#)).await.expect("send");
    server
        .send(Message::binary(br#"{"serverContent":{"outputTranscription":{"text":"lo."}}}"#.to_vec()))
        .await
        .expect("send");
    for fragment in ["Hel", "lo."] {
        let event = wait_for(&mut session, |e| matches!(e, ProviderEvent::AssistantTranscript { .. })).await;
        assert_eq!(event, ProviderEvent::AssistantTranscript { text: fragment.to_owned(), is_final: false });
    }
    // A binary frame that is not JSON is a per-turn error, never fatal.
    server.send(Message::binary(vec![0xff, 0x00, 0x13])).await.expect("send");
    let error = wait_for(&mut session, |e| matches!(e, ProviderEvent::Error(_))).await;
    assert!(matches!(&error, ProviderEvent::Error(e) if !e.fatal && e.code == "bad_frame"), "{error:?}");
}

#[tokio::test]
async fn a_message_larger_than_the_read_buffer_arrives_whole() {
    let (_listener, mut session, mut server) = ready_gemini().await;
    // 1.6 s of 24 kHz audio in one binary frame: ~100 KiB, six times the driver's 16 KiB read
    // buffer, so the frame takes several socket reads.
    let pcm: Vec<i16> = (0..38_400).map(|i| i16::try_from(i % 2_000).expect("small") - 1_000).collect();
    let data = svc_provider::codec::encode_pcm(&pcm);
    let message = serde_json::json!({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": data}}
    ]}}});
    let frame = serde_json::to_vec(&message).expect("json");
    assert!(frame.len() > 96 << 10, "{} bytes", frame.len());
    server.send(Message::binary(frame)).await.expect("send");
    let event = wait_for(&mut session, |e| matches!(e, ProviderEvent::AssistantAudio { .. })).await;
    assert_eq!(event, ProviderEvent::AssistantAudio { pcm, sample_rate: 24_000 }, "every sample, in order");
}

#[tokio::test]
async fn svc_closes_with_1000_when_the_session_ends() {
    let (_listener, session, mut server) = ready_gemini().await;
    session.input.send(ProviderInput::Close).await.expect("adapter alive");
    let frame = next_close(&mut server).await.expect("a close frame with a status code, not 1005");
    assert_eq!(frame.code, CloseCode::Normal);
}

#[tokio::test]
async fn svc_answers_the_upstreams_close_frame_and_reports_it() {
    let (listener, mut session, mut server) = ready_gemini().await;
    let close = CloseFrame { code: CloseCode::Error, reason: "Internal error encountered.".into() };
    server.send(Message::Close(Some(close))).await.expect("send close");
    // RFC 6455 §5.5.1: the endpoint that receives a close frame sends one back.
    let echo = next_close(&mut server).await.expect("svc echoes the close frame");
    assert_eq!(echo.code, CloseCode::Error);
    // svc goes on reconnecting (a 1011 after ready is transient), and says so.
    let event = wait_for(&mut session, |e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
    assert!(matches!(event, ProviderEvent::Reconnecting { .. }));
    let mut again = tokio::time::timeout(Duration::from_secs(5), accept(&listener)).await.expect("a reconnect");
    assert!(next_json(&mut again).await.get("setup").is_some());
}
