//! The sessions' rooms on a LiveKit server svc does not run (`--livekit-url`, issue 24's external
//! room mode): another `svc serve` plays that server (its embedded room and server API speak
//! LiveKit's protocols, as the official SDKs' interop tests show), and scenarios of the embedded
//! room's tests run through it unchanged: the conversation, and a client tool answered through
//! the `svc.tool_result` RPC. The start creates the room there and hands the client that server's
//! URL and a token signed with its key; the agent joins it as a client over the network; the
//! session's end deletes the room there.

use svc_room::server_api::ServerApi;

use super::*;

/// The LiveKit server's key: the one every test server signs with (`support::svc`).
const LIVEKIT_KEY: &str = support::ROOM_API_KEY;
const LIVEKIT_SECRET: &str = support::ROOM_API_SECRET;

/// Another `svc serve` as the LiveKit deployment, and the world of `test` whose sessions' rooms
/// are on it (`--livekit-url`).
struct OnLiveKit {
    world: World,
    livekit_url: String,
    _livekit: support::Server,
    _livekit_dir: tempfile::TempDir,
}

async fn on_livekit(test: &'static str) -> OnLiveKit {
    let listen = format!("127.0.0.1:{}", free_port());
    let livekit_url = format!("ws://{listen}/room");
    let external =
        ["--livekit-url", &livekit_url, "--livekit-api-key", LIVEKIT_KEY, "--livekit-api-secret", LIVEKIT_SECRET];
    let world = World::start(test, Flavor::OpenAi, &external).await;
    let livekit_dir = tempfile::tempdir().expect("tempdir");
    let livekit = support::Server::start_in(world.dir.join("livekit.log"), livekit_dir.path(), &listen, |_| {});
    OnLiveKit { world, livekit_url, _livekit: livekit, _livekit_dir: livekit_dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_conversation_in_a_room_on_another_livekit_server() {
    let OnLiveKit { world, livekit_url, .. } = &on_livekit("external_room").await;
    let ([greeting, spoken_reply, typed_reply], config) = queue_conversation(world);
    let result = world.client("conversation", config).finish(world, Duration::from_secs(90)).await;
    let observations = &result["observations"];
    let id = session_id(&result);
    assert_eq!(observations["livekit_url"], livekit_url.as_str(), "the client is sent to the LiveKit server");
    assert_eq!(observations["ready_frame"]["session_id"], id);

    // The conversation went as in the embedded room: every turn, the voice both ways.
    let finals = assistant_finals(&result);
    assert_eq!(finals, [greeting, spoken_reply, typed_reply]);
    let heard_by_fake = correlation(&mic_pcm(), 48_000, &fake_audio(&world.fake, 0), 24_000);
    assert!(heard_by_fake >= 0.9, "the microphone at the provider: correlation {heard_by_fake:.3}");
    let spoken = svc_testkit::speech::speech(spoken_reply, 24_000);
    let heard_by_client = correlation(&spoken, 24_000, &agent_recording(&result), 48_000);
    assert!(heard_by_client >= 0.9, "the provider's voice at the client: correlation {heard_by_client:.3}");
    let session = world.get_json(&format!("/sessions/{id}"));
    assert_eq!(session["status"], "completed");
    let usage = world.final_usage(&id).await;
    assert_eq!(usage["turn_count"], 3, "{usage}");
    world.assert_no_input_dropped(&id).await;

    // The session's end deleted its room on the LiveKit server.
    let room = observations["room_name"].as_str().expect("room name").to_owned();
    let api = ServerApi::new(livekit_url, svc_room::RoomCredentials::new(LIVEKIT_KEY, LIVEKIT_SECRET)).expect("url");
    until_room_gone(&api, &room).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the interop harness (scripts/interop-setup.sh); run by scripts/test.sh"]
async fn a_client_tool_round_trip_in_a_room_on_another_livekit_server() {
    let OnLiveKit { world, .. } = &on_livekit("external_tools").await;
    super::client_tool_round_trip(world).await;
}
