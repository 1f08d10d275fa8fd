//! `PhoneService` against a scripted trunk on loopback (svc-sip's test `peer` helpers build the
//! responses) and a scripted phone that speaks RTP through `svc_rtp`: failures, cancelling,
//! the audio bridge both ways, the media timeout and shutdown, without baresip.

mod heard;
#[path = "../../svc-sip/tests/peer/mod.rs"]
mod peer;
mod room;

use std::net::SocketAddr;
use std::time::Duration;

use heard::assert_heard;
use peer::{contact_header, response};
use rsip::{Method, SipMessage};
use svc_audio::analysis::speech_like_signal;
use svc_phone::{DialProgress, DialRequest, EndedBy, PhoneCall, PhoneConfig, PhoneService};
use svc_room::{LocalParticipant, ParticipantKind, RemoteAudioDecoder, RoomEvent, RoomServer};
use svc_rtp::{G711, NtpTime, RtpSession, SessionConfig, TransmitKind};
use tokio::net::UdpSocket;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(5);
const ROOM: &str = "session-room";

struct Setup {
    room: RoomServer,
    phone: PhoneService,
    trunk: UdpSocket,
    shutdown: CancellationToken,
    agent: LocalParticipant,
}

async fn setup(ports: std::ops::RangeInclusive<u16>, media_timeout: Duration) -> Setup {
    let trunk = UdpSocket::bind("127.0.0.1:0").await.expect("bind trunk");
    let trunk_addr = trunk.local_addr().expect("trunk address");
    let (room, agent) = room::with_agent(ROOM).await;
    let shutdown = CancellationToken::new();
    let mut config = PhoneConfig::new(format!("sip:{trunk_addr}"), "+15550100", "127.0.0.1:0".parse().expect("addr"));
    config.rtp_ports = ports;
    config.media_timeout = media_timeout;
    let phone = PhoneService::start(config, room.clone(), shutdown.clone()).await.expect("phone service");
    Setup { room, phone, trunk, shutdown, agent }
}

fn request(dial_id: &str) -> DialRequest {
    DialRequest {
        room_name: ROOM.into(),
        session_id: "sess-1".into(),
        dial_id: dial_id.into(),
        phone_number: "+15550199".into(),
        caller_number: None,
        participant: Default::default(),
    }
}

async fn receive_request(trunk: &UdpSocket, method: Method) -> (SipMessage, SocketAddr) {
    let mut buffer = vec![0u8; 65_536];
    loop {
        let (len, from) = timeout(WAIT, trunk.recv_from(&mut buffer)).await.expect("a datagram in time").expect("recv");
        let message = SipMessage::try_from(&buffer[..len]).expect("parses");
        if matches!(&message, SipMessage::Request(r) if r.method == method) {
            return (message, from);
        }
    }
}

async fn send(trunk: &UdpSocket, bytes: Vec<u8>, to: SocketAddr) {
    trunk.send_to(&bytes, to).await.expect("send");
}

async fn next_progress(call: &mut PhoneCall) -> DialProgress {
    timeout(WAIT, call.progress.recv()).await.expect("progress in time").expect("progress")
}

/// The agent's view of `identity` until it leaves: `sip.callStatus` values in order.
async fn watch_statuses(agent: &mut LocalParticipant, identity: &str) -> Vec<String> {
    let mut statuses: Vec<String> = Vec::new();
    loop {
        let event = timeout(Duration::from_secs(10), agent.next_event()).await.expect("room events").expect("event");
        match event {
            RoomEvent::ParticipantJoined(p) | RoomEvent::ParticipantUpdated { participant: p, .. }
                if p.identity == identity =>
            {
                assert_eq!(p.kind, ParticipantKind::Sip);
                if let Some(status) = p.attributes.get("sip.callStatus")
                    && statuses.last() != Some(status)
                {
                    statuses.push(status.clone());
                }
            }
            RoomEvent::ParticipantLeft { identity: who, .. } if who == identity => return statuses,
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_busy_phone_fails_the_dial_and_the_participant_leaves() {
    let mut s = setup(32_000..=32_019, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("busy")).await.expect("dial");
    assert_eq!(s.phone.active_calls(), 1);
    assert!(matches!(s.phone.dial(request("busy")).await, Err(svc_phone::PhoneError::DuplicateDial(_))));
    let (invite, ua) = receive_request(&s.trunk, Method::Invite).await;
    assert_eq!(ua, s.phone.sip_addr());
    send(&s.trunk, response(&invite, 100, None, vec![], None), ua).await;
    send(&s.trunk, response(&invite, 486, Some("b"), vec![], None), ua).await;
    assert_eq!(
        next_progress(&mut call).await,
        DialProgress::Failed { reason: "busy".into(), status: Some(486), phrase: "Busy Here".into() }
    );
    let statuses = watch_statuses(&mut s.agent, "sip-busy").await;
    assert_eq!(statuses, ["dialing", "hangup"]);
    call.finished().await;
    assert_eq!(s.phone.active_calls(), 0);
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

#[tokio::test]
async fn hanging_up_while_it_rings_cancels() {
    let mut s = setup(32_020..=32_039, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("cancel")).await.expect("dial");
    let (invite, ua) = receive_request(&s.trunk, Method::Invite).await;
    send(&s.trunk, response(&invite, 180, Some("b"), vec![contact_header("b")], None), ua).await;
    assert_eq!(next_progress(&mut call).await, DialProgress::Ringing);
    call.hangup();
    let (cancel, ua) = receive_request(&s.trunk, Method::Cancel).await;
    send(&s.trunk, response(&cancel, 200, Some("b"), vec![], None), ua).await;
    send(&s.trunk, response(&invite, 487, Some("b"), vec![], None), ua).await;
    assert_eq!(
        next_progress(&mut call).await,
        DialProgress::Failed { reason: "canceled".into(), status: Some(487), phrase: "Request Terminated".into() }
    );
    let statuses = watch_statuses(&mut s.agent, "sip-cancel").await;
    assert_eq!(statuses, ["dialing", "ringing", "hangup"]);
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

#[tokio::test]
async fn a_livekit_api_call_that_rings_out_is_no_answer_and_its_phone_is_as_asked() {
    use svc_room::{SipDial, SipDialError, SipDialer};
    let mut s = setup(32_180..=32_199, Duration::from_secs(30)).await;
    let trunk_id = s.phone.outbound_trunk().id;
    let dial = SipDial {
        room: ROOM.into(),
        call_id: "SCL_test".into(),
        trunk_id: trunk_id.clone(),
        number: "+15550199".into(),
        caller_number: None,
        identity: "caller".into(),
        name: String::new(),
        metadata: "m".into(),
        attributes: [("crm.id".to_owned(), "7".to_owned())].into(),
        hide_phone_number: true,
        ringing_timeout: Some(Duration::from_millis(500)),
        max_call_duration: None,
        wait_until_answered: true,
    };
    let dialing = tokio::spawn(SipDialer::dial(&s.phone, dial));
    let (invite, ua) = receive_request(&s.trunk, Method::Invite).await;
    send(&s.trunk, response(&invite, 180, Some("b"), vec![contact_header("b")], None), ua).await;
    // The phone as the API asked: its identity, metadata and attributes, the number hidden.
    let joined = loop {
        match timeout(WAIT, s.agent.next_event()).await.expect("room events").expect("event") {
            RoomEvent::ParticipantJoined(p) if p.identity == "caller" => break p,
            _ => {}
        }
    };
    assert_eq!((joined.kind, joined.name.as_str(), joined.metadata.as_str()), (ParticipantKind::Sip, "Phone", "m"));
    let attribute = |key: &str| joined.attributes.get(key).map(String::as_str);
    assert_eq!((attribute("sip.callID"), attribute("sip.trunkID")), (Some("SCL_test"), Some(trunk_id.as_str())));
    assert_eq!(
        (attribute("crm.id"), attribute("sip.phoneNumber"), attribute("sip.trunkPhoneNumber")),
        (Some("7"), None, None)
    );
    // Nobody answers: the ringing timeout cancels, and the waiting caller hears "no answer".
    let (cancel, ua) = receive_request(&s.trunk, Method::Cancel).await;
    send(&s.trunk, response(&cancel, 200, Some("b"), vec![], None), ua).await;
    send(&s.trunk, response(&invite, 487, Some("b"), vec![], None), ua).await;
    let answered = timeout(WAIT, dialing).await.expect("the dial answers").expect("task");
    assert_eq!(answered, Err(SipDialError::NoAnswer));
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

#[tokio::test]
async fn the_room_closing_while_it_rings_cancels_the_dial() {
    // The session ended before the phone was answered: the dial fails as the CANCEL says,
    // `canceled` (the documented reason), not with what made svc hang up.
    let s = setup(32_120..=32_139, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("ring-then-close")).await.expect("dial");
    let (invite, ua) = receive_request(&s.trunk, Method::Invite).await;
    send(&s.trunk, response(&invite, 180, Some("b"), vec![contact_header("b")], None), ua).await;
    assert_eq!(next_progress(&mut call).await, DialProgress::Ringing);
    assert!(s.room.close_room(ROOM, svc_room::LeaveReason::RoomDeleted).await, "the room was open");
    let (cancel, ua) = receive_request(&s.trunk, Method::Cancel).await;
    send(&s.trunk, response(&cancel, 200, Some("b"), vec![], None), ua).await;
    send(&s.trunk, response(&invite, 487, Some("b"), vec![], None), ua).await;
    assert_eq!(
        next_progress(&mut call).await,
        DialProgress::Failed { reason: "canceled".into(), status: Some(487), phrase: "Request Terminated".into() }
    );
    drop(s.agent);
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

#[tokio::test]
async fn a_hangup_handle_ends_the_call_with_its_reason() {
    let s = setup(32_140..=32_159, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("handle")).await.expect("dial");
    let handle = call.hangup_handle();
    let (_phone, _ours, _invite, ua) = answer(&s.trunk).await;
    assert_eq!(next_progress(&mut call).await, DialProgress::Answered);
    handle.hang_up("session_ended");
    handle.hang_up("ignored: the first reason stays");
    let (bye, from) = receive_request(&s.trunk, Method::Bye).await;
    assert_eq!(from, ua);
    send(&s.trunk, response(&bye, 200, None, vec![], None), ua).await;
    let DialProgress::Ended { by, reason, .. } = next_progress(&mut call).await else { panic!("ended") };
    assert_eq!((by, reason.as_str()), (EndedBy::Svc, "session_ended"));
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

#[tokio::test]
async fn a_redirect_from_the_trunk_is_not_followed() {
    // svc places calls over its trunk only: a 3xx names another target, which is not called
    // (a redirect could send the call, and its cost, anywhere). The dial fails as `redirected`.
    let mut s = setup(32_160..=32_179, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("moved")).await.expect("dial");
    let (invite, ua) = receive_request(&s.trunk, Method::Invite).await;
    let elsewhere = contact_header("elsewhere");
    send(&s.trunk, response(&invite, 302, Some("b"), vec![elsewhere], None), ua).await;
    assert_eq!(
        next_progress(&mut call).await,
        DialProgress::Failed { reason: "redirected".into(), status: Some(302), phrase: peer::phrase(302).into() }
    );
    let statuses = watch_statuses(&mut s.agent, "sip-moved").await;
    assert_eq!(statuses, ["dialing", "hangup"]);
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

/// A phone on loopback: answers with PCMU toward `port`.
fn answer_sdp(port: u16) -> String {
    format!(
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
         m=audio {port} RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n\
         a=ptime:20\r\na=sendrecv\r\n"
    )
}

/// Answers the INVITE from a phone whose RTP socket is returned with where our RTP is.
async fn answer(trunk: &UdpSocket) -> (UdpSocket, SocketAddr, SipMessage, SocketAddr) {
    let (invite, ua) = receive_request(trunk, Method::Invite).await;
    let SipMessage::Request(ref request) = invite else { panic!("a request") };
    let offer = svc_sip::sdp::parse(&request.body).expect("our offer parses");
    let ours = SocketAddr::new(offer.address, offer.port);
    assert_eq!(offer.port % 2, 0, "RTP on an even port");
    let phone = UdpSocket::bind("127.0.0.1:0").await.expect("phone RTP");
    let sdp = answer_sdp(phone.local_addr().expect("addr").port());
    send(trunk, response(&invite, 200, Some("b"), vec![contact_header("b")], Some(&sdp)), ua).await;
    receive_request(trunk, Method::Ack).await;
    (phone, ours, invite, ua)
}

/// The phone: says `say` (48 kHz) over PCMU RTP to `ours` from the start, listens for
/// `listen_for`, and returns what it heard (48 kHz).
async fn run_phone(phone: UdpSocket, ours: SocketAddr, say: Vec<i16>, listen_for: Duration) -> Vec<i16> {
    let start = std::time::Instant::now();
    let ntp = NtpTime::from_unix(Duration::from_secs(1_800_000_000));
    let mut session = RtpSession::new(SessionConfig::new(G711::Pcmu, ours, 9, ntp), start);
    let mut heard = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut buffer = vec![0u8; 2048];
    let mut frames = say.chunks(960);
    while start.elapsed() < listen_for {
        tick.tick().await;
        let now = std::time::Instant::now();
        if let Some(frame) = frames.next() {
            session.push_room_pcm(now, frame);
        }
        while let Ok((len, from)) = phone.try_recv_from(&mut buffer) {
            session.handle_rtp(now, from, &buffer[..len]);
        }
        if let Some(at) = session.poll_timeout()
            && at <= now
        {
            session.handle_timeout(now);
        }
        while let Some(frame) = session.poll_room_pcm(now) {
            heard.extend_from_slice(&frame.pcm);
        }
        while let Some(transmit) = session.poll_transmit() {
            if transmit.kind == TransmitKind::Rtp {
                phone.send_to(&transmit.bytes, transmit.destination).await.expect("send RTP");
            }
        }
    }
    heard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_call_bridges_audio_both_ways_until_the_phone_goes_silent() {
    let mut s = setup(32_040..=32_059, Duration::from_secs(1)).await;
    let voice = s.agent.publish_audio("agent-voice").await.expect("agent publishes");
    let mut call = s.phone.dial(request("talk")).await.expect("dial");
    let (phone, ours, _invite, ua) = answer(&s.trunk).await;
    assert_eq!(next_progress(&mut call).await, DialProgress::Answered);

    let whole = speech_like_signal(4 * 48_000);
    let phone_says = whole[2 * 48_000..(2 * 48_000 + 72_000)].to_vec();
    let agent_says = whole[..72_000].to_vec();
    let phone_task = tokio::spawn(run_phone(phone, ours, phone_says.clone(), Duration::from_millis(2_500)));
    voice.push_pcm(agent_says.clone()).await.expect("queued");

    // The agent listens to the phone's track until the participant leaves.
    let mut decoder = RemoteAudioDecoder::new().expect("decoder");
    let mut agent_heard = Vec::new();
    let mut statuses = Vec::new();
    let ended = loop {
        tokio::select! {
            event = s.agent.next_event() => match event.expect("event") {
                RoomEvent::AudioFrame(frame) if &*frame.participant_identity == "sip-talk" => {
                    decoder.decode(&frame, &mut agent_heard).expect("decodes");
                }
                RoomEvent::ParticipantUpdated { participant, .. } if participant.identity == "sip-talk" => {
                    statuses.extend(participant.attributes.get("sip.callStatus").cloned());
                }
                RoomEvent::ParticipantLeft { identity, .. } if identity == "sip-talk" => break None,
                _ => {}
            },
            progress = call.progress.recv() => if let Some(progress) = progress {
                // No RTP for the media timeout after the phone went quiet: we hang up with BYE.
                let (bye, from) = receive_request(&s.trunk, Method::Bye).await;
                assert_eq!(from, ua);
                send(&s.trunk, response(&bye, 200, None, vec![], None), ua).await;
                break Some(progress);
            },
        }
    };
    // The Ended event comes after the BYE's answer; the participant's leave may come first.
    let ended = match ended {
        Some(progress) => progress,
        None => {
            let (bye, _) = receive_request(&s.trunk, Method::Bye).await;
            send(&s.trunk, response(&bye, 200, None, vec![], None), ua).await;
            next_progress(&mut call).await
        }
    };
    let DialProgress::Ended { by, reason, answered_for } = ended else { panic!("{ended:?}") };
    assert_eq!((by, reason.as_str()), (EndedBy::Phone, "media_timeout"));
    assert!(answered_for >= Duration::from_millis(1_500) && answered_for < Duration::from_secs(6), "{answered_for:?}");

    let phone_heard = phone_task.await.expect("phone");
    assert_heard("phone → agent", &phone_says, &agent_heard, 48_000);
    assert_heard("agent → phone", &agent_says, &phone_heard, 48_000);
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

#[tokio::test]
async fn shutdown_hangs_up_answered_calls() {
    let s = setup(32_060..=32_079, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("bye")).await.expect("dial");
    let (_phone, _ours, _invite, ua) = answer(&s.trunk).await;
    assert_eq!(next_progress(&mut call).await, DialProgress::Answered);
    s.shutdown.cancel();
    let (bye, from) = receive_request(&s.trunk, Method::Bye).await;
    assert_eq!(from, ua);
    send(&s.trunk, response(&bye, 200, None, vec![], None), ua).await;
    let DialProgress::Ended { by, reason, .. } = next_progress(&mut call).await else { panic!("ended") };
    assert_eq!((by, reason.as_str()), (EndedBy::Svc, "shutdown"));
    timeout(Duration::from_secs(10), s.phone.closed()).await.expect("stops");
    assert!(matches!(s.phone.dial(request("late")).await, Err(svc_phone::PhoneError::ShuttingDown)));
    s.room.shutdown().await;
}

#[tokio::test]
async fn a_key_press_is_reported_and_hanging_up_an_answered_call_sends_bye() {
    let s = setup(32_080..=32_099, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("keys")).await.expect("dial");
    let (phone, ours, _invite, ua) = answer(&s.trunk).await;
    assert_eq!(next_progress(&mut call).await, DialProgress::Answered);

    // The phone presses 7 (RFC 4733, payload type 101 as its answer says).
    let now = std::time::Instant::now();
    let mut config = SessionConfig::new(G711::Pcmu, ours, 3, NtpTime::from_unix(Duration::from_secs(1_800_000_000)));
    config.telephone_event_pt = Some(101);
    let mut session = RtpSession::new(config, now);
    session.send_dtmf(now, "7", 100).expect("telephone-event");
    let digit = loop {
        let now = std::time::Instant::now();
        session.push_room_pcm(now, &[0; 960]);
        if let Some(at) = session.poll_timeout()
            && at <= now
        {
            session.handle_timeout(now);
        }
        while let Some(transmit) = session.poll_transmit() {
            if transmit.kind == TransmitKind::Rtp {
                phone.send_to(&transmit.bytes, transmit.destination).await.expect("send RTP");
            }
        }
        if let Ok(Some(progress)) = timeout(Duration::from_millis(20), call.progress.recv()).await {
            break progress;
        }
    };
    assert_eq!(digit, DialProgress::Dtmf { digit: '7' });

    call.hangup();
    let (bye, from) = receive_request(&s.trunk, Method::Bye).await;
    assert_eq!(from, ua);
    send(&s.trunk, response(&bye, 200, None, vec![], None), ua).await;
    let DialProgress::Ended { by, reason, answered_for } = next_progress(&mut call).await else { panic!("ended") };
    assert_eq!((by, reason.as_str()), (EndedBy::Svc, "hangup"));
    assert!(answered_for > Duration::ZERO && answered_for < WAIT, "{answered_for:?}");
    call.finished().await;
    assert_eq!(s.phone.active_calls(), 0);
    s.shutdown.cancel();
    timeout(WAIT, s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}

#[tokio::test]
async fn the_session_closing_its_room_hangs_the_phone_up() {
    // Every leg drops: a session's end (end_call, a cap, the user leaving) closes its room.
    let s = setup(32_100..=32_119, Duration::from_secs(30)).await;
    let mut call = s.phone.dial(request("room-closes")).await.expect("dial");
    let (_phone, _ours, _invite, ua) = answer(&s.trunk).await;
    assert_eq!(next_progress(&mut call).await, DialProgress::Answered);
    assert!(s.room.close_room(ROOM, svc_room::LeaveReason::RoomDeleted).await, "the room was open");
    let (bye, from) = receive_request(&s.trunk, Method::Bye).await;
    assert_eq!(from, ua);
    send(&s.trunk, response(&bye, 200, None, vec![], None), ua).await;
    let DialProgress::Ended { by, reason, .. } = next_progress(&mut call).await else { panic!("ended") };
    assert_eq!((by, reason.as_str()), (EndedBy::Svc, "room_closed"));
    s.shutdown.cancel();
    timeout(Duration::from_secs(10), s.phone.closed()).await.expect("stops");
    s.room.shutdown().await;
}
