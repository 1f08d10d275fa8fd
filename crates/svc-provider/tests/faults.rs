//! The adapter against a link that breaks: svc-testkit's fault proxy between the real driver and
//! the OpenAI Realtime fake stalls, severs, garbles and closes the connection mid-conversation.
//! Each break is a drop the codec recovers from (`reconnecting`, then `reconnected` on a new
//! upstream session reseeded from the transcript), never a hang, and the conversation goes on.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Harness, model, user_frames};
use svc_domain::model::{ProviderBBlock, ProviderBlock};
use svc_provider::driver::{self, Liveness};
use svc_provider::endpoint::ProviderEnv;
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup};
use svc_testkit::fault_proxy::{self, FaultProxy};
use svc_testkit::{FAKE_API_KEY, FakeUpstream, Flavor, Reply};
use tokio_util::sync::CancellationToken;

/// Short bounds, so a stall is told in about a second.
const LIVENESS: Liveness = Liveness {
    ping_every: Duration::from_millis(200),
    silent_for: Duration::from_secs(1),
    send_within: Duration::from_secs(1),
};

fn setup() -> SessionSetup {
    SessionSetup::new(model(ProviderBlock::ProviderB(ProviderBBlock::default())), "You are a courteous shop assistant.")
}

/// The adapter, connecting to the fake through `proxy`.
fn through(proxy: &FaultProxy) -> Harness {
    let base = format!("http://{}/v1", proxy.addr());
    let vars = HashMap::from([("OPENAI_API_KEY", FAKE_API_KEY.to_owned()), ("OPENAI_BASE_URL", base)]);
    let env = ProviderEnv::from_lookup(|name| vars.get(name).cloned()).expect("valid env");
    let codec = svc_provider::codec_for(setup(), &env).expect("codec");
    let session = driver::spawn_with_liveness(codec, svc_http::tls_config(), CancellationToken::new(), None, LIVENESS);
    Harness { session, seen: Vec::new() }
}

/// The fake, the proxy in front of it, and the adapter through it, ready.
async fn ready_through_a_proxy() -> (FakeUpstream, FaultProxy, Harness) {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    let proxy = FaultProxy::start(fake.addr()).await;
    let mut h = through(&proxy);
    h.ready().await;
    (fake, proxy, h)
}

/// One way to break the link.
type Fault = fn(&FaultProxy);

fn is_final(text: &str) -> impl Fn(&ProviderEvent) -> bool + '_ {
    move |event| matches!(event, ProviderEvent::AssistantTranscript { text: said, is_final: true } if said == text)
}

#[tokio::test]
async fn a_link_that_stalls_mid_reply_is_given_up_within_the_bound_and_the_conversation_goes_on() {
    let fake = FakeUpstream::start(Flavor::OpenAi).await;
    // In real time, so the reply is still streaming when the link stalls.
    fake.set_speedup(1);
    let story = "Once upon a time there was a small shop that sold lamps, and every lamp had a story.";
    fake.queue([Reply::Speak(story.to_owned()), Reply::Speak("Still here.".to_owned())]);
    let proxy = FaultProxy::start(fake.addr()).await;
    let mut h = through(&proxy);
    h.ready().await;
    h.send(ProviderInput::Text("tell me a story".to_owned())).await;
    h.wait(|e| matches!(e, ProviderEvent::AssistantAudio { .. })).await;

    proxy.stall();
    let stalled_at = Instant::now();
    h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
    let detected = stalled_at.elapsed();
    eprintln!("stall detected after {detected:?}");
    // Nothing heard for `silent_for`, noticed at the next ping tick.
    assert!(detected >= LIVENESS.silent_for - LIVENESS.ping_every, "{detected:?}");
    assert!(detected <= LIVENESS.silent_for + LIVENESS.ping_every * 3, "{detected:?}");
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { resumed: false })).await;
    assert_eq!(proxy.accepted(), 2, "one new connection");

    // The interrupted reply is not spoken again; the next question is answered.
    let replies_before = h.seen.iter().filter(|e| matches!(e, ProviderEvent::ResponseStarted)).count();
    h.send(ProviderInput::Text("are you there?".to_owned())).await;
    h.wait(is_final("Still here.")).await;
    let replies = h.seen.iter().filter(|e| matches!(e, ProviderEvent::ResponseStarted)).count();
    assert_eq!(replies, replies_before + 1, "{:#?}", h.seen);
    assert!(!h.seen.iter().any(is_final(story)), "the stalled reply never completed, nor was it repeated");
    // The new upstream session was told what was said (the user's question at least).
    let seed = fake.wait_for(common::WAIT, |r| r.connection == 1 && r.message["item"]["role"] == "system").await;
    assert!(seed.message.to_string().contains("tell me a story"), "{}", seed.message);
}

#[tokio::test]
async fn a_severed_garbled_oversized_or_closed_link_is_a_drop_and_the_conversation_goes_on() {
    let (fake, proxy, mut h) = ready_through_a_proxy().await;
    let faults: [(&str, Fault); 4] = [
        ("sever", FaultProxy::sever),
        ("garbage", |proxy| proxy.inject(&fault_proxy::garbage(), false)),
        ("oversized frame", |proxy| proxy.inject(&fault_proxy::oversized_frame_header(64 << 20), false)),
        ("close 1011", |proxy| proxy.inject(&fault_proxy::close_frame(1011), true)),
    ];
    for (round, (name, fault)) in faults.iter().enumerate() {
        let answer = format!("Answer {round}.");
        fake.queue([Reply::Speak(answer.clone())]);
        let started = Instant::now();
        fault(&proxy);
        h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
        h.wait(|e| matches!(e, ProviderEvent::Reconnected { .. })).await;
        eprintln!("{name}: reconnected after {:?}", started.elapsed());
        h.send(ProviderInput::Text(format!("question {round}"))).await;
        h.wait(is_final(&answer)).await;
        assert_eq!(proxy.accepted(), round + 2, "{name}: one new connection");
    }
    assert!(!h.seen.iter().any(|e| matches!(e, ProviderEvent::Closed { .. })), "{:#?}", h.seen);
}

#[tokio::test]
async fn user_audio_spoken_while_the_link_is_down_reaches_the_next_upstream_session() {
    let (fake, proxy, mut h) = ready_through_a_proxy().await;
    // The link drops and the way back is slow: the user talks meanwhile.
    proxy.delay_connects(Duration::from_millis(800));
    proxy.sever();
    h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
    let spoken = speak(&mut h, "my order number is four two seven").await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { .. })).await;
    let audio = audio_of_connection(&fake, 1, spoken.len()).await;
    assert_eq!(audio[..spoken.len()], spoken[..], "the held audio, in order, on the new session");
}

/// The user says `text` (24 kHz frames, sent as fast as the adapter takes them); the samples sent.
async fn speak(h: &mut Harness, text: &str) -> Vec<i16> {
    let frames = user_frames(text, 24_000);
    for frame in &frames {
        h.send(ProviderInput::NativeAudio(frame.clone())).await;
    }
    frames.concat()
}

/// The user audio the fake received on its `connection`th connection, once it holds at least
/// `samples` (and nothing more arrived for 200 ms).
async fn audio_of_connection(fake: &FakeUpstream, connection: usize, samples: usize) -> Vec<i16> {
    let deadline = Instant::now() + common::WAIT;
    loop {
        let arrived = fake.audio().get(connection).map_or(0, Vec::len);
        if arrived >= samples {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return fake.audio().swap_remove(connection);
        }
        assert!(Instant::now() < deadline, "{arrived} of {samples} samples arrived on connection {connection}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn user_audio_spoken_into_a_stalled_link_reaches_the_next_upstream_session_and_read_audio_does_not() {
    let (fake, proxy, mut h) = ready_through_a_proxy().await;
    // The upstream reads what the user says first, and its pongs say so.
    let read = speak(&mut h, "hello").await;
    audio_of_connection(&fake, 0, read.len()).await;
    tokio::time::sleep(LIVENESS.ping_every * 3).await;

    // Then the link stalls, and what the user says goes into a socket nobody reads until the
    // driver gives it up.
    proxy.stall();
    let unread = speak(&mut h, "my order number is four two seven").await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnecting { .. })).await;
    h.wait(|e| matches!(e, ProviderEvent::Reconnected { .. })).await;
    let audio = audio_of_connection(&fake, 1, unread.len()).await;
    // Exactly the unread words, in order: the read ones are not sent twice.
    assert!(audio == unread, "{} samples on the new session, {} unread", audio.len(), unread.len());
}
