"""The user's side of a spoken turn with a LiveKit Agents voice agent in svc's room, on the
official SDKs (PyPI `livekit` and `livekit-api`): dispatches `--agent-name` into the room with
`AgentDispatchService`, joins, waits for the agent, speaks `--speech` (a 48 kHz mono WAV) into its
microphone, then listens: the agent's audio and its transcription (LiveKit Agents' `lk.transcription`
text streams).

Prints one JSON object for the Rust test (crates/svc-room/tests/agents.rs) to judge; exits
non-zero only when the harness itself breaks.
"""

import argparse
import asyncio
import json
import time
import wave

import numpy as np
from livekit import api, rtc

FRAME = 480  # 10 ms at 48 kHz


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--agent-name", required=True)
    parser.add_argument("--room", required=True)
    parser.add_argument("--speech", required=True)
    args = parser.parse_args()
    out = {}
    lk = api.LiveKitAPI(args.url, args.key, args.secret)
    dispatch = await lk.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name=args.agent_name, room=args.room)
    )
    out["dispatch"] = dispatch.id

    room = rtc.Room()
    agent_joined = asyncio.Event()
    agent = {}
    # Samples heard, and samples in voiced frames (RMS over 300) after the user stopped speaking.
    heard = {"samples": 0, "voiced_after_speech": 0, "speech_done": False}
    transcript = []

    def on_participant(participant: rtc.RemoteParticipant):
        if participant.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            agent["identity"] = participant.identity
            agent["attributes"] = dict(participant.attributes)
            agent_joined.set()

    async def listen(track: rtc.Track):
        async for event in rtc.AudioStream(track, sample_rate=48000, num_channels=1):
            samples = np.frombuffer(event.frame.data, dtype=np.int16)
            heard["samples"] += len(samples)
            rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if len(samples) else 0.0
            if heard["speech_done"] and rms > 300:
                heard["voiced_after_speech"] += len(samples)

    def on_track(track: rtc.Track, publication, participant):
        if track.kind == rtc.TrackKind.KIND_AUDIO:
            asyncio.ensure_future(listen(track))

    async def read_transcript(reader, participant_identity):
        text = await reader.read_all()
        transcript.append({"from": participant_identity, "text": text})

    room.on("participant_connected", on_participant)
    room.on("track_subscribed", on_track)
    room.register_text_stream_handler(
        "lk.transcription", lambda reader, identity: asyncio.ensure_future(read_transcript(reader, identity))
    )
    token = (
        api.AccessToken(args.key, args.secret)
        .with_identity("py-user")
        .with_grants(api.VideoGrants(room_join=True, room=args.room))
        .to_jwt()
    )
    await room.connect(args.url, token)
    for participant in room.remote_participants.values():
        on_participant(participant)
    await asyncio.wait_for(agent_joined.wait(), 60)
    out["agent"] = agent

    with wave.open(args.speech, "rb") as wav:
        assert wav.getframerate() == 48000 and wav.getnchannels() == 1
        speech = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
    source = rtc.AudioSource(48000, 1)
    track = rtc.LocalAudioTrack.create_audio_track("mic", source)
    await room.local_participant.publish_track(track, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))
    await asyncio.sleep(1.0)  # the agent subscribes before the first word
    spoken_at = time.monotonic()
    silence = np.zeros(48000 * 2, dtype=np.int16)
    for pcm in (speech, silence):
        for start in range(0, len(pcm) - FRAME + 1, FRAME):
            frame = rtc.AudioFrame(pcm[start : start + FRAME].tobytes(), 48000, 1, FRAME)
            await source.capture_frame(frame)
        # From the last word on, what the agent says is its answer.
        heard["speech_done"] = True
    finished_at = time.monotonic()

    # The reply: the agent's words in its transcription, and its voice after the user stopped.
    def replied():
        return any(t["from"] == agent["identity"] and "help" in t["text"] for t in transcript)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (replied() and heard["voiced_after_speech"] > 48000):
        await asyncio.sleep(0.1)
    out["heard_seconds"] = heard["samples"] / 48000
    out["voiced_after_speech_seconds"] = heard["voiced_after_speech"] / 48000
    out["spoke_seconds"] = finished_at - spoken_at
    out["transcript"] = transcript
    await room.disconnect()
    await lk.aclose()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
