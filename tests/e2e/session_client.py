"""A client of svc on the official PyPI `livekit` SDK, for the end-to-end session tests.

It starts a session over REST (POST /realtime/session/start), joins the room with the returned
credentials, speaks the data-channel protocol (chunking both ways, the `svc.tool_result` RPC),
publishes a WAV as its microphone, records the agent's audio, and runs one named scenario. It
writes what it saw to a result JSON (`ok`, `failure`, every event with its time, observations) and
prints `@mark <name>` lines on stdout at checkpoints, so the orchestrating Rust test can act on the
fake provider at the right moment.

    session_client.py --base-url http://127.0.0.1:8080 --api-key svc_sk_… --scenario conversation \\
        --config '{"agent": {...}}' --mic caller.wav --out result.json
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import signal
import sys
import time
import traceback
import urllib.parse
import urllib.error
import urllib.request
import uuid
import wave
from pathlib import Path

import numpy as np
from livekit import rtc

RATE = 48_000
FRAME = 480  # 10 ms
THRESHOLD = 12_000
CHUNK = 8_000
TOOL_RESULT = "svc.tool_result"


class Failure(Exception):
    """A scenario expectation that did not hold."""


class Client:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.t0 = time.monotonic()
        self.room = rtc.Room()
        self.events: list[dict] = []
        self.changed = asyncio.Condition()
        self.chunks: dict[str, dict[int, bytes]] = {}
        self.ready_frame_at: float | None = None
        self.ready_attribute_at: float | None = None
        self.ready_attribute: dict | None = None
        self.agent_identity: str | None = None
        self.agent_states: list[tuple[float, str]] = []
        self.recorded: list[np.ndarray] = []
        self.first_audio_at: float | None = None
        self.disconnected_at: float | None = None
        # The SDK's own reconnects (`reconnecting`, `reconnected` room events), as times.
        self.reconnects: list[list] = []
        self.start_response: dict = {}
        self.observations: dict = {}
        self.tasks: list[asyncio.Task] = []

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def mark(self, name: str) -> None:
        print(f"@mark {name}", flush=True)

    # --- REST -------------------------------------------------------------------------------

    def rest(self, method: str, path: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, object]:
        url = self.args.base_url.rstrip("/") + "/api/v1/external" + path
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.args.api_key}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                kind = response.headers.get("Content-Type", "")
                return response.status, (json.loads(raw) if "json" in kind else raw)
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw)
            except ValueError:
                return error.code, raw

    # --- Room ---------------------------------------------------------------------------------

    async def start(self, config: dict) -> None:
        body = {"sdk": {"name": "e2e-python", "version": "1.0.0"}, **config}
        status, response = await asyncio.to_thread(self.rest, "POST", "/realtime/session/start", body, {"X-Svc-SDK": "e2e-python/1.0.0"})
        if status != 200:
            raise Failure(f"session start answered {status}: {response}")
        self.start_response = response
        self.observations["session_id"] = response["session_id"]
        self.observations["start_timings"] = response.get("timings")
        room = self.room
        room.on("data_received", self.on_data)
        room.on("participant_attributes_changed", self.on_attributes)
        room.on("participant_connected", self.on_participant)
        room.on("track_subscribed", self.on_track)
        room.on("disconnected", self.on_disconnected)
        room.on("reconnecting", lambda: self.on_reconnect("reconnecting"))
        room.on("reconnected", lambda: self.on_reconnect("reconnected"))
        options = rtc.RoomOptions(auto_subscribe=True)
        options.single_peer_connection = False
        joined = time.monotonic()
        # The agent's ready signals can arrive while connect() is still running (its attributes
        # come with the join), so readiness is measured from the start of the join.
        self.observations["join_started_at"] = self.now()
        url = response["livekit_url"]
        self.observations["livekit_url"] = url
        self.observations["room_name"] = response["room_name"]
        if self.args.signal_via:
            # The same room through another address (a test's proxy in front of svc).
            url = urllib.parse.urlsplit(url)._replace(netloc=self.args.signal_via).geturl()
        await asyncio.wait_for(room.connect(url, response["token"], options), 15)
        self.observations["room_ms"] = round((time.monotonic() - joined) * 1000)
        self.observations["joined_at"] = self.now()
        for participant in room.remote_participants.values():
            self.on_participant(participant)

    def on_participant(self, participant: rtc.RemoteParticipant) -> None:
        if participant.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            self.agent_identity = participant.identity
            self.on_attributes(dict(participant.attributes), participant)

    def on_attributes(self, changed: dict, participant: rtc.Participant) -> None:
        if "svc.ready" in changed and self.ready_attribute_at is None:
            self.ready_attribute_at = self.now()
            self.ready_attribute = json.loads(changed["svc.ready"])
            self.notify()
        if "lk.agent.state" in changed:
            self.agent_states.append((self.now(), changed["lk.agent.state"]))

    def on_reconnect(self, what: str) -> None:
        self.reconnects.append([what, self.now()])
        self.notify()

    def on_disconnected(self, reason) -> None:
        self.disconnected_at = self.now()
        self.observations["disconnect_reason"] = str(reason)
        self.notify()

    def on_track(self, track: rtc.Track, publication, participant) -> None:
        if track.kind == rtc.TrackKind.KIND_AUDIO:
            self.tasks.append(asyncio.ensure_future(self.record(track)))

    async def record(self, track: rtc.Track) -> None:
        stream = rtc.AudioStream(track, sample_rate=RATE, num_channels=1)
        async for event in stream:
            samples = np.frombuffer(event.frame.data, dtype=np.int16).copy()
            if self.first_audio_at is None and np.abs(samples).max(initial=0) > 300:
                self.first_audio_at = self.now()
            self.recorded.append(samples)

    def notify(self) -> None:
        async def wake() -> None:
            async with self.changed:
                self.changed.notify_all()

        asyncio.ensure_future(wake())

    def on_data(self, packet: rtc.DataPacket) -> None:
        try:
            message = json.loads(packet.data.decode())
        except ValueError:
            self.observations.setdefault("bad_frames", 0)
            self.observations["bad_frames"] += 1
            return
        if message.get("type") == "server-envelope-chunk":
            parts = self.chunks.setdefault(message["envelope_id"], {})
            parts[message["seq"]] = base64.b64decode(message["data"])
            self.observations["chunks_received"] = self.observations.get("chunks_received", 0) + 1
            self.observations.setdefault("chunk_log", []).append([message["envelope_id"], message["seq"], message["total"], len(message["data"])])
            if len(parts) < message["total"]:
                return
            whole = b"".join(parts[i] for i in range(message["total"]))
            del self.chunks[message["envelope_id"]]
            message = json.loads(whole.decode())
            message["_chunked"] = True
        message["_t"] = self.now()
        message["_topic"] = packet.topic
        self.events.append(message)
        if message.get("type") == "ready" and self.ready_frame_at is None:
            self.ready_frame_at = message["_t"]
        self.notify()

    # --- Protocol -----------------------------------------------------------------------------

    async def wait_for(self, what: str, predicate, timeout: float = 15.0, after: int = 0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[after:]:
                if predicate(event):
                    return event
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"no {what} within {timeout:.0f} s; types seen: {self.types()[-40:]}")
            async with self.changed:
                try:
                    await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
                except asyncio.TimeoutError:
                    pass

    async def wait_type(self, kind: str, timeout: float = 15.0, after: int = 0, **fields) -> dict:
        return await self.wait_for(
            f"{kind} {fields or ''}",
            lambda e: e.get("type") == kind and all(e.get(k) == v for k, v in fields.items()),
            timeout,
            after,
        )

    async def wait_ready(self) -> None:
        deadline = time.monotonic() + 15
        while self.ready_frame_at is None and self.ready_attribute_at is None:
            if time.monotonic() > deadline:
                raise Failure("neither the ready frame nor the svc.ready attribute within 15 s")
            await asyncio.sleep(0.02)
        self.observations["ready_ms_after_join"] = round(
            (min(t for t in (self.ready_frame_at, self.ready_attribute_at) if t is not None) - self.observations["join_started_at"]) * 1000
        )

    def types(self, after: int = 0) -> list[str]:
        return [e.get("type") for e in self.events[after:]]

    async def send(self, message: dict) -> None:
        data = json.dumps(message).encode()
        me = self.room.local_participant
        if len(data) <= THRESHOLD:
            await me.publish_data(data, reliable=True, topic="svc")
            return
        envelope = str(uuid.uuid4())
        parts = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
        for seq, part in enumerate(parts):
            chunk = {"type": "envelope-chunk", "envelope_id": envelope, "seq": seq, "total": len(parts),
                     "data": base64.b64encode(part).decode()}
            await me.publish_data(json.dumps(chunk).encode(), reliable=True)

    async def tool_result(self, payload: dict) -> dict:
        me = self.room.local_participant
        try:
            answer = await me.perform_rpc(destination_identity=self.agent_identity, method=TOOL_RESULT,
                                          payload=json.dumps(payload), response_timeout=10)
            return {"ok": True, "payload": json.loads(answer)}
        except rtc.RpcError as error:
            return {"ok": False, "code": error.code, "message": error.message}

    async def publish_mic(self, path: str, repeat: int = 1, silence_after: float = 1.5) -> None:
        """Publishes a 48 kHz mono WAV as the microphone, in real time, then silence."""
        with wave.open(path) as wav:
            assert wav.getframerate() == RATE and wav.getnchannels() == 1
            pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
        pcm = np.concatenate([pcm] * repeat + [np.zeros(int(silence_after * RATE), np.int16)])
        if not hasattr(self, "source"):
            self.source = rtc.AudioSource(RATE, 1, queue_size_ms=100)
            track = rtc.LocalAudioTrack.create_audio_track("microphone", self.source)
            options = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
            await self.room.local_participant.publish_track(track, options)
            await asyncio.sleep(0.5)
        frame = rtc.AudioFrame.create(RATE, 1, FRAME)
        samples = np.frombuffer(frame.data, dtype=np.int16)
        start, sent = time.monotonic(), 0
        self.observations.setdefault("mic", []).append({"path": path, "started_at": self.now()})
        for offset in range(0, len(pcm) - FRAME + 1, FRAME):
            samples[:] = pcm[offset : offset + FRAME]
            await self.source.capture_frame(frame)
            sent += 1
            ahead = start + sent * FRAME / RATE - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)

    async def leave(self) -> None:
        try:
            await asyncio.wait_for(self.room.disconnect(), 5)
        except Exception:  # noqa: BLE001 (leaving is best effort)
            pass

    def check_order(self, expected: list[str], after: int = 0, what: str = "events") -> None:
        seen = [t for t in self.types(after) if t in expected]
        # Each expected type in order, as a subsequence of what was seen.
        position = 0
        for kind in seen:
            if position < len(expected) and kind == expected[position]:
                position += 1
        if position < len(expected):
            raise Failure(f"{what}: expected {expected} in this order, saw {seen}")


# --- Scenarios --------------------------------------------------------------------------------


async def conversation(client: Client) -> None:
    """Ready both ways, a spoken turn from the microphone, a typed turn, ping, timings, end."""
    await client.wait_ready()
    await client.wait_for("both ready signals", lambda e: client.ready_frame_at is not None and client.ready_attribute_at is not None, 5)
    frame = next(e for e in client.events if e.get("type") == "ready")
    client.observations["ready_frame"] = {k: v for k, v in frame.items() if not k.startswith("_")}
    client.observations["ready_attribute"] = client.ready_attribute
    client.mark("ready")
    # The greeting plays first; the user listens to the end of it.
    await client.wait_type("turn-complete", 20, role="ASSISTANT")
    # A spoken turn: the fake's voice detector hears the microphone and answers.
    mark = len(client.events)
    await client.publish_mic(client.args.mic)
    await client.wait_type("turn-complete", 20, after=mark, role="ASSISTANT")
    client.check_order(["user-started-speaking", "user-stopped-speaking", "turn-complete", "bot-llm-started",
                        "bot-tts-started", "bot-started-speaking", "bot-tts-stopped", "bot-stopped-speaking",
                        "turn-complete"], mark, "spoken turn")
    client.mark("spoken-turn")
    # A typed turn.
    mark = len(client.events)
    await client.send({"type": "send-text", "content": "What time is it?"})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    client.check_order(["transcript", "turn-complete", "bot-llm-started", "bot-tts-started", "bot-started-speaking",
                        "transcript", "bot-tts-stopped", "bot-stopped-speaking", "transcript", "turn-complete"],
                       mark, "typed turn")
    client.observations["typed_turn"] = [
        {k: v for k, v in e.items() if k != "_topic"} for e in client.events[mark:]
    ]
    await client.send({"type": "ping"})
    await client.wait_type("pong", 5)
    await client.send({"type": "connect-timings", "mic_ms": 12, "room_ms": client.observations["room_ms"],
                       "ready_ms": client.observations["ready_ms_after_join"], "server": client.observations["start_timings"]})
    await client.send({"type": "this-type-does-not-exist", "x": 1})
    await client.send({"type": "send-context", "content": "x" * 5000})
    await asyncio.sleep(0.5)
    await client.send({"type": "end"})
    await client.wait_type("session-ended", 10, reason="client_ended")
    await wait_disconnected(client)


async def wait_disconnected(client: Client, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while client.disconnected_at is None:
        if time.monotonic() > deadline:
            raise Failure("the room did not close after session-ended")
        await asyncio.sleep(0.05)


async def tools(client: Client) -> None:
    """A client tool round trip through svc.tool_result, refusals, and a background job."""
    await client.wait_ready()
    mark = len(client.events)
    await client.send({"type": "send-text", "content": "Where is my order?"})
    invocation = await client.wait_type("tool-invocation", 15, after=mark)
    client.observations["invocation"] = {k: v for k, v in invocation.items() if not k.startswith("_")}
    answer = {"request_id": invocation["request_id"], "tool_call_id": invocation["tool_call_id"],
              "result": {"status": "shipped", "eta": "Friday"}}
    client.observations["rpc_first"] = await client.tool_result(answer)
    client.observations["rpc_duplicate"] = await client.tool_result(answer)
    client.observations["rpc_unknown"] = await client.tool_result({**answer, "request_id": "req_999"})
    client.observations["rpc_malformed"] = await client.tool_result({"request_id": invocation["request_id"]})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    client.mark("tool-answered")
    mark = len(client.events)
    await client.send({"type": "tool_job_result", "job_id": "job-1", "tool_name": invocation["name"], "status": "completed",
                       "summary": "The refund of 20 euros was issued."})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    client.mark("job-answered")
    await client.send({"type": "end"})
    await client.wait_type("session-ended", 10)


async def chunking(client: Client) -> None:
    """A 50 KB message each way."""
    await client.wait_ready()
    mark = len(client.events)
    await client.send({"type": "send-text", "content": "Please read this: " + "lorem ipsum " * 4200})
    invocation = await client.wait_type("tool-invocation", 15, after=mark)
    client.observations["invocation_text_len"] = len(invocation["args"].get("text", ""))
    client.observations["invocation_chunked"] = invocation.get("_chunked")
    await client.tool_result({"request_id": invocation["request_id"], "tool_call_id": invocation["tool_call_id"], "result": {"shown": True}})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    await client.send({"type": "end"})
    await client.wait_type("session-ended", 10)


async def cap(client: Client) -> None:
    """The server's duration cap: a warning, then the end."""
    await client.wait_ready()
    soon = await client.wait_type("session-ending-soon", 30)
    client.observations["ending_soon"] = {k: v for k, v in soon.items() if k != "_topic"}
    ended = await client.wait_type("session-ended", 30)
    client.observations["ended"] = {k: v for k, v in ended.items() if k != "_topic"}
    await wait_disconnected(client)


async def hooks(client: Client) -> None:
    """Silence: the hooks speak, then end the call."""
    await client.wait_ready()
    ended = await client.wait_type("session-ended", 40)
    client.observations["ended"] = {k: v for k, v in ended.items() if k != "_topic"}
    client.observations["timeouts"] = [
        {k: v for k, v in e.items() if k != "_topic"} for e in client.events if e.get("type") == "user-speech-timeout"
    ]
    await wait_disconnected(client)


async def barge_in(client: Client) -> None:
    """The user talks over a long answer: playback stops at once, the transcript is what was heard."""
    await client.wait_ready()
    mark = len(client.events)
    await client.send({"type": "send-text", "content": "Tell me a long story."})
    await client.wait_type("bot-started-speaking", 15, after=mark)
    await asyncio.sleep(1.5)
    talk = client.now()
    client.observations["talk_at"] = talk
    speaking = asyncio.create_task(client.publish_mic(client.args.mic))
    stopped = await client.wait_type("bot-stopped-speaking", 10, after=mark)
    client.observations["stopped_after_talk_ms"] = round((stopped["_t"] - talk) * 1000)
    final = await client.wait_for("the assistant's final transcript",
                                  lambda e: e.get("type") == "transcript" and e.get("role") == "ASSISTANT" and e.get("is_final"), 10, mark)
    client.observations["heard"] = final["text"]
    await speaking
    await client.wait_type("turn-complete", 20, after=len(client.events) - 1, role="ASSISTANT")
    await client.send({"type": "end"})
    await client.wait_type("session-ended", 10)


async def rotation(client: Client) -> None:
    """An upstream rotation: `reconnecting`, and the user's audio survives it."""
    await client.wait_ready()
    client.mark("ready")
    reconnecting = await client.wait_type("reconnecting", 20)
    client.observations["reconnecting"] = {k: v for k, v in reconnecting.items() if k != "_topic"}
    mark = len(client.events)
    await client.publish_mic(client.args.mic)
    await client.wait_type("turn-complete", 20, after=mark, role="ASSISTANT")
    client.mark("spoken-after-rotation")
    await client.send({"type": "end"})
    await client.wait_type("session-ended", 10)


async def spoken_turn(client: Client) -> None:
    """One spoken turn: the microphone reaches the model, its voice reaches the client."""
    await client.wait_ready()
    mark = len(client.events)
    client.mark("speaking")
    await client.publish_mic(client.args.mic)
    client.mark("spoken")
    await client.wait_type("turn-complete", 25, after=mark, role="ASSISTANT")
    await asyncio.sleep(0.5)
    await client.send({"type": "end"})
    await client.wait_type("session-ended", 10)


async def typed_turn(client: Client) -> None:
    """One typed turn (`--text`), after the greeting if the session has one."""
    await client.wait_ready()
    config = json.loads(client.args.config)
    if config.get("agent", {}).get("greeting") and not config.get("session", {}).get("experimental", {}).get("resume_session_id"):
        await client.wait_type("turn-complete", 20, role="ASSISTANT")
    else:
        # Nothing is said until the user speaks (a resumed session never greets again).
        await asyncio.sleep(2.0)
        client.observations["spoke_first"] = [e.get("type") for e in client.events if e.get("type") == "bot-started-speaking"]
    mark = len(client.events)
    await client.send({"type": "send-text", "content": client.args.text})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    await client.send({"type": "end"})
    await client.wait_type("session-ended", 10)


async def shutdown(client: Client) -> None:
    """One typed turn (`--text`); then the server is stopped under the live session (the Rust test
    sends SIGTERM at the `talked` mark): the server drains, so the session is warned
    (`session-ending-soon`), still holds a turn, then says why it ends and the room closes."""
    await client.wait_ready()
    mark = len(client.events)
    await client.send({"type": "send-text", "content": client.args.text})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    client.mark("talked")
    soon = await client.wait_type("session-ending-soon", 30)
    client.observations["ending_soon"] = {k: v for k, v in soon.items() if k != "_topic"}
    mark = len(client.events)
    await client.send({"type": "send-text", "content": "One more thing, please."})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    ended = await client.wait_type("session-ended", 30)
    client.observations["ended"] = {k: v for k, v in ended.items() if k != "_topic"}
    await wait_disconnected(client)


async def turn_on_cue(client: Client) -> None:
    """Ready (the `ready` mark), then waits for `--cue-file` to exist (the Rust test changes the
    server's conditions meanwhile), then one typed turn (`--text`) and the end."""
    await client.wait_ready()
    client.mark("ready")
    deadline = time.monotonic() + 30
    while not os.path.exists(client.args.cue_file):
        if time.monotonic() > deadline:
            raise Failure(f"no cue ({client.args.cue_file}) within 30 s")
        await asyncio.sleep(0.05)
    mark = len(client.events)
    await client.send({"type": "send-text", "content": client.args.text})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    await client.send({"type": "end"})
    ended = await client.wait_type("session-ended", 10)
    client.observations["ended"] = {k: v for k, v in ended.items() if k != "_topic"}


async def network_change(client: Client) -> None:
    """A spoken turn (the `talked` mark); then the Rust test changes the client's network (its
    signal connection is cut, its media path moves): the SDK reconnects by itself, and the same
    session answers a second spoken turn."""
    await client.wait_ready()
    mark = len(client.events)
    await client.publish_mic(client.args.mic)
    await client.wait_type("turn-complete", 25, after=mark, role="ASSISTANT")
    client.mark("talked")
    talked = client.now()
    deadline = time.monotonic() + 30
    while not any(what == "reconnected" for what, _ in client.reconnects):
        if client.disconnected_at is not None:
            raise Failure(f"disconnected ({client.observations.get('disconnect_reason')}) instead of reconnecting")
        if time.monotonic() > deadline:
            raise Failure(f"no reconnect within 30 s of the network change: {client.reconnects}")
        await asyncio.sleep(0.05)
    client.observations["reconnects"] = client.reconnects
    client.observations["reconnected_after_ms"] = round((client.reconnects[-1][1] - talked) * 1000)
    mark = len(client.events)
    await client.publish_mic(client.args.mic)
    await client.wait_type("turn-complete", 25, after=mark, role="ASSISTANT")
    client.observations["answered_after_reconnect"] = True
    await client.send({"type": "end"})
    ended = await client.wait_type("session-ended", 10)
    client.observations["ended"] = {k: v for k, v in ended.items() if k != "_topic"}


async def takeover(client: Client) -> None:
    """A typed turn (`--text`, then the `talked` mark); then the Rust test kills the node whose
    agent runs the session (SIGKILL): LiveKit dispatches the job again, another node takes the
    session over from the shared store, and its agent says `ready` again (the `ready-again` mark).
    The same session then answers a second typed turn, which needs the first one to be answered
    right."""
    await client.wait_ready()
    if json.loads(client.args.config).get("agent", {}).get("greeting"):
        await client.wait_type("turn-complete", 20, role="ASSISTANT")
    mark = len(client.events)
    await client.send({"type": "send-text", "content": client.args.text})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    mark = len(client.events)
    client.mark("talked")
    await client.wait_type("ready", 40, after=mark)
    client.mark("ready-again")
    client.observations["types_between"] = client.types(mark)
    mark = len(client.events)
    await client.send({"type": "send-text", "content": "What is my name?"})
    await client.wait_type("turn-complete", 15, after=mark, role="ASSISTANT")
    await client.send({"type": "end"})
    ended = await client.wait_type("session-ended", 10)
    client.observations["ended"] = {k: v for k, v in ended.items() if k != "_topic"}


SCENARIOS = {
    f.__name__: f
    for f in (conversation, tools, chunking, cap, hooks, barge_in, rotation, spoken_turn, typed_turn, shutdown, turn_on_cue, network_change, takeover)
}


async def run(args: argparse.Namespace) -> dict:
    client = Client(args)
    failure = None
    task = asyncio.current_task()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await client.start(json.loads(args.config))
        await asyncio.wait_for(SCENARIOS[args.scenario](client), args.timeout)
    except Failure as error:
        failure = str(error)
    except asyncio.TimeoutError:
        failure = f"the scenario did not finish within {args.timeout:.0f} s; types seen: {client.types()[-40:]}"
    except asyncio.CancelledError:
        failure = "stopped by SIGTERM"
    except Exception as error:  # noqa: BLE001 (a surprise is a readable failure)
        traceback.print_exc()
        failure = f"unexpected {type(error).__name__}: {error}"
    await asyncio.sleep(0.2)
    for spawned in client.tasks:
        spawned.cancel()
    await client.leave()
    client.observations["ready_attribute"] = client.ready_attribute
    client.observations["ready_frame_at"] = client.ready_frame_at
    client.observations["ready_attribute_at"] = client.ready_attribute_at
    client.observations["agent_states"] = client.agent_states
    client.observations["first_agent_audio_at"] = client.first_audio_at
    client.observations["disconnected_at"] = client.disconnected_at
    out = Path(args.out)
    if client.recorded:
        recording = out.with_suffix(".agent.wav")
        with wave.open(str(recording), "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(RATE)
            wav.writeframes(np.concatenate(client.recorded).tobytes())
        client.observations["agent_recording"] = str(recording)
    return {"ok": failure is None, "failure": failure, "events": client.events, "observations": client.observations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--config", default="{}", help="session-config fields beside `sdk` (JSON)")
    parser.add_argument("--mic", help="48 kHz mono WAV the microphone plays")
    parser.add_argument("--text", default="Hello!", help="what `typed_turn` types")
    parser.add_argument("--cue-file", help="what `turn_on_cue` waits for")
    parser.add_argument("--signal-via", metavar="HOST:PORT", help="reach the room's signalling through this address (a proxy)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"ok": result["ok"], "failure": result["failure"]}), flush=True)
    # The SDK's native threads can outlive asyncio; the result is written, so leave now.
    os._exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
