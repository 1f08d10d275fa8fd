#!/usr/bin/env python3
"""One peer of the svc room interop protocol, on the official LiveKit Python SDK (PyPI `livekit`).

Two peers (two of these, one of these and the browser peer, or either and the in-process Rust
agent) join one room and each checks what the other one does: audio (correlation with the WAV the
other publishes), data packets, RPC, attributes, and leaving. tests/interop/README.md describes the
protocol step by step; this file is its Python implementation.

    lk_peer.py --url ws://127.0.0.1:PORT/room --token JWT --peer IDENTITY --role caller|responder
               --publish-wav mine.wav --expect-wav theirs.wav --out result.json
               [--single-pc 0|1|default] [--timeout 40]

Writes result.json ({"ok", "failures", "observations"}) and result.recorded.wav (what was heard
from the peer); exits 0 iff every check passed. Every wait is bounded: a server that never answers
yields a result naming what was still missing, not a hang.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from livekit import rtc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (sibling module, shared with the browser driver)

# --- The protocol's names (keep in sync with tests/interop/README.md and web/app.js) ---------------
DATA_TOPIC = "interop.data"
CONTROL_TOPIC = "interop.control"
DONE_MESSAGE = "interop.done"
ECHO_METHOD = "interop.echo"
MISSING_METHOD = "interop.missing"  # never registered by anyone: must fail with 1400
READY_ATTRIBUTE = "interop.ready"  # "1" once connected and serving: safe to set the role now
ROLE_ATTRIBUTE = "interop.role"  # the attribute whose change event each peer must see
RELIABLE_SEQS = (1, 2, 3)
LOSSY_SEQ = 4
UNSUPPORTED_METHOD = 1400
OTHER_ROLE = {"caller": "responder", "responder": "caller"}

SAMPLE_RATE = compare.SAMPLE_RATE
FRAME_SAMPLES = SAMPLE_RATE // 100  # 10 ms
CONNECT_TIMEOUT = 15.0  # per connect(); the SDK itself retries 3 times within it
# Checks that must pass before a peer says it is done.
REQUIRED_CHECKS = ("peer_joined", "peer_attribute", "data", "rpc_echo", "rpc_unsupported", "rpc_served", "audio")

log = logging.getLogger("lk_peer")


class Check:
    """A named expectation: met once, with a line saying what was (or was not yet) observed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.met = asyncio.Event()
        self.failed: str | None = None  # a definitive failure: waiting longer cannot fix it
        self.detail = "nothing observed yet"
        self.at: float | None = None

    def ok(self, detail: str, at: float) -> None:
        if not self.met.is_set() and self.failed is None:
            self.detail, self.at = detail, round(at, 3)
            self.met.set()

    def fail(self, detail: str) -> None:
        if self.failed is None:
            self.failed = detail

    def problem(self) -> str | None:
        if self.failed is not None:
            return f"{self.name}: {self.failed}"
        if not self.met.is_set():
            return f"{self.name}: not met ({self.detail})"
        return None


class Peer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.role = args.role
        self.peer_identity = args.peer
        self.started = time.monotonic()
        self.deadline = self.started + args.timeout
        self.room = rtc.Room()
        self.identity = "?"
        self.checks = {name: Check(name) for name in (*REQUIRED_CHECKS, "peer_ready", "peer_done", "peer_left")}
        self.failures: list[str] = []
        self.observations: dict = {"role": self.role, "peer": self.peer_identity, "single_pc": args.single_pc}
        self.publish_pcm, _ = load_pcm(args.publish_wav)
        self.expect_pcm, _ = load_pcm(args.expect_wav)
        self.recorded: list[np.ndarray] = []
        self.recording_started = False
        self.received_reliable: dict[int, int] = {}
        self.tasks: list[asyncio.Task] = []

    def now(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    async def bounded(self, what: str, awaitable, limit: float | None = None):
        """Await with the peer's overall deadline (or a smaller limit); a timeout names `what`."""
        budget = self.remaining() if limit is None else min(limit, self.remaining())
        try:
            async with asyncio.timeout(budget):
                return await awaitable
        except TimeoutError:
            raise PeerTimeout(f"timed out after {self.now():.1f} s waiting for {what}") from None

    # --- Event handlers (the SDK calls them synchronously on the event loop) -------------------

    def on_participant_connected(self, participant: rtc.RemoteParticipant) -> None:
        log.info("participant connected: %s attributes=%s", participant.identity, dict(participant.attributes))
        self.note_peer_present(participant)

    def note_peer_present(self, participant: rtc.RemoteParticipant) -> None:
        if participant.identity != self.peer_identity:
            return
        self.checks["peer_joined"].ok(f"{participant.identity} ({participant.sid}) is in the room", self.now())
        self.note_peer_ready(participant)

    def note_peer_ready(self, participant: rtc.Participant) -> None:
        # Readiness may come as a snapshot or as an event: only the role's event is checked.
        if participant.attributes.get(READY_ATTRIBUTE) == "1":
            self.checks["peer_ready"].ok(f"{READY_ATTRIBUTE}=1", self.now())

    def on_attributes_changed(self, changed: dict[str, str], participant: rtc.Participant) -> None:
        if participant.identity != self.peer_identity:
            return
        self.note_peer_ready(participant)
        if ROLE_ATTRIBUTE not in changed:
            return
        value, expected = changed[ROLE_ATTRIBUTE], OTHER_ROLE[self.role]
        check = self.checks["peer_attribute"]
        if value == expected:
            check.ok(f"attribute change event {ROLE_ATTRIBUTE}={value}", self.now())
        else:
            check.fail(f"attribute change event {ROLE_ATTRIBUTE}={value!r}, expected {expected!r}")

    def on_data(self, packet: rtc.DataPacket) -> None:
        sender = packet.participant.identity if packet.participant else None
        reliable = packet.kind == rtc.DataPacketKind.KIND_RELIABLE
        if packet.topic == CONTROL_TOPIC:
            if packet.data == DONE_MESSAGE.encode() and sender == self.peer_identity:
                self.checks["peer_done"].ok(f"{DONE_MESSAGE} from {sender}", self.now())
            else:
                self.failures.append(f"control: unexpected packet {packet.data[:80]!r} from {sender!r}")
            return
        try:
            message = json.loads(packet.data)
        except ValueError:
            message = None
        self.observations.setdefault("data_received", []).append(
            {"topic": packet.topic, "sender": sender, "reliable": reliable, "payload": packet.data[:200].decode(errors="replace"), "at": round(self.now(), 3)}
        )
        check = self.checks["data"]
        if packet.topic != DATA_TOPIC:
            check.fail(f"packet on topic {packet.topic!r}, expected {DATA_TOPIC!r}: {packet.data[:80]!r}")
            return
        if sender != self.peer_identity or not isinstance(message, dict) or message.get("from") != self.peer_identity:
            check.fail(f"packet from participant {sender!r} with payload {packet.data[:80]!r}; expected from {self.peer_identity!r}")
            return
        if not reliable:
            self.observations["lossy_received"] = True
            return
        seq = message.get("seq")
        self.received_reliable[seq] = self.received_reliable.get(seq, 0) + 1
        if self.received_reliable[seq] > 1:
            check.fail(f"reliable seq {seq} delivered {self.received_reliable[seq]} times")
        got = sorted(self.received_reliable)
        check.detail = f"reliable seqs received {got}, expected {list(RELIABLE_SEQS)}"
        if set(RELIABLE_SEQS) <= set(got):
            check.ok(check.detail, self.now())

    def on_track_subscribed(self, track: rtc.Track, publication: rtc.RemoteTrackPublication, participant: rtc.RemoteParticipant) -> None:
        log.info("subscribed to %s track %s of %s (source %s)", track.kind, track.sid, participant.identity, publication.source)
        if participant.identity != self.peer_identity or track.kind != rtc.TrackKind.KIND_AUDIO:
            return
        self.observations["peer_track"] = {"sid": track.sid, "source": rtc.TrackSource.Name(publication.source), "at": round(self.now(), 3)}
        if publication.source != rtc.TrackSource.SOURCE_MICROPHONE:
            self.checks["audio"].fail(f"peer's audio track has source {rtc.TrackSource.Name(publication.source)}, expected SOURCE_MICROPHONE")
        if not self.recording_started:
            self.recording_started = True
            self.tasks.append(asyncio.create_task(self.record(track)))
            self.tasks.append(asyncio.create_task(self.judge_audio()))

    def on_participant_disconnected(self, participant: rtc.RemoteParticipant) -> None:
        log.info("participant disconnected: %s", participant.identity)
        if participant.identity == self.peer_identity:
            self.checks["peer_left"].ok(f"participant_disconnected for {participant.identity}", self.now())

    # --- Media --------------------------------------------------------------------------------

    async def publish_loop(self, source: rtc.AudioSource) -> None:
        """Send the WAV as a microphone would, in real time, looping (like Chromium's fake mic)."""
        pcm = self.publish_pcm
        frame = rtc.AudioFrame.create(SAMPLE_RATE, 1, FRAME_SAMPLES)
        samples = np.frombuffer(frame.data, dtype=np.int16)
        start, sent = time.monotonic(), 0
        while True:
            for offset in range(0, len(pcm) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
                samples[:] = pcm[offset : offset + FRAME_SAMPLES]
                await source.capture_frame(frame)
                sent += 1
                # capture_frame only blocks once the source's queue is full; pace explicitly so the
                # stream never runs ahead of the wall clock.
                ahead = start + sent * 0.01 - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)

    async def record(self, track: rtc.Track) -> None:
        stream = rtc.AudioStream(track, sample_rate=SAMPLE_RATE, num_channels=1)
        try:
            async for event in stream:
                self.recorded.append(np.frombuffer(event.frame.data, dtype=np.int16).copy())
        finally:
            await stream.aclose()

    async def judge_audio(self) -> None:
        """Re-check the recording every second until it holds the peer's sentence."""
        reference = self.expect_pcm.astype(np.float32) / 32768.0
        # One loop of the sentence plus a margin: every part of it has then been heard once.
        need = len(reference) / SAMPLE_RATE + 1.5
        check = self.checks["audio"]
        while not check.met.is_set():
            await asyncio.sleep(1.0)
            recorded = np.concatenate(self.recorded) if self.recorded else np.zeros(0, np.int16)
            heard = len(recorded) / SAMPLE_RATE
            if heard < need:
                check.detail = f"{heard:.1f} s recorded, {compare.audible_seconds(recorded.astype(np.float32) / 32768.0):.1f} s audible; judging from {need:.1f} s"
                continue
            # The last `need` seconds: enough for a verdict, and cheap however long we record.
            tail = recorded[-int(need * SAMPLE_RATE) :].astype(np.float32) / 32768.0
            verdict = await asyncio.to_thread(compare.compare, tail, reference)
            verdict["total_recorded_seconds"] = round(heard, 2)
            self.observations["audio"] = verdict
            check.detail = verdict.get("reason", "")
            if verdict["ok"]:
                check.ok(f"correlation {verdict['correlation']} coverage {verdict['coverage']}", self.now())

    # --- The protocol -------------------------------------------------------------------------

    async def run(self) -> None:
        room = self.room
        room.on("participant_connected", self.on_participant_connected)
        room.on("participant_disconnected", self.on_participant_disconnected)
        room.on("participant_attributes_changed", self.on_attributes_changed)
        room.on("data_received", self.on_data)
        room.on("track_subscribed", self.on_track_subscribed)
        room.on("disconnected", lambda reason: self.observations.setdefault("disconnected_reason", str(reason)))

        # Steps as numbered in tests/interop/README.md.
        # 1. Connect (the single-PC choice decides whether the SDK first tries /rtc/v1).
        options = rtc.RoomOptions(auto_subscribe=True, connect_timeout=CONNECT_TIMEOUT / 3)
        if self.args.single_pc != "default":
            options.single_peer_connection = self.args.single_pc == "1"
        try:
            await self.bounded("connect()", room.connect(self.args.url, self.args.token, options), CONNECT_TIMEOUT)
        except rtc.ConnectError as error:
            raise PeerFailure(f"connect: {type(error).__name__}: {error.message}") from None
        me = room.local_participant
        self.identity = me.identity
        self.observations["connected_at"] = round(self.now(), 3)
        self.observations["identity"] = self.identity
        self.observations["room"] = {"name": room.name, "sid": await self.bounded("room sid", room.sid, 5)}
        log.info("connected as %s to room %s in %.2f s", self.identity, room.name, self.now())

        # 2. Serve RPC before anyone can know we are ready (the attribute below says so).
        async def echo(data: rtc.RpcInvocationData) -> str:
            served = self.checks["rpc_served"]
            if data.caller_identity == self.peer_identity:
                served.ok(f"{ECHO_METHOD} called by {data.caller_identity} with {data.payload!r}", self.now())
            else:
                served.fail(f"{ECHO_METHOD} called by {data.caller_identity!r}, expected {self.peer_identity!r}")
            return "echo:" + data.payload

        me.register_rpc_method(ECHO_METHOD, echo)

        # 3. Publish the microphone.
        source = rtc.AudioSource(SAMPLE_RATE, 1, queue_size_ms=100)
        track = rtc.LocalAudioTrack.create_audio_track("microphone", source)
        publish_options = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
        self.tasks.append(asyncio.create_task(self.publish_loop(source)))
        publication = await self.bounded("publish_track() to be acknowledged", me.publish_track(track, publish_options), 15)
        self.observations["published_track"] = {"sid": publication.sid, "at": round(self.now(), 3)}

        # 4. Ready: say we are connected and serving; wait until the peer says the same. Only
        #    then set the role: an SDK drops attribute events that arrive before its own
        #    connect() has finished (livekit-client does), so an earlier change could go unseen.
        await self.bounded(f"set_attributes({READY_ATTRIBUTE}) to be confirmed", me.set_attributes({READY_ATTRIBUTE: "1"}), 10)
        for participant in room.remote_participants.values():
            self.note_peer_present(participant)
        await self.bounded(f"peer {self.peer_identity!r} to join", self.wait_check("peer_joined"))
        await self.bounded(f"the peer's {READY_ATTRIBUTE}=1", self.wait_check("peer_ready"))

        # 5. Role. Both keys: the result is the same whether the server merges or replaces.
        attributes = {READY_ATTRIBUTE: "1", ROLE_ATTRIBUTE: self.role}
        await self.bounded(f"set_attributes({ROLE_ATTRIBUTE}) to be confirmed", me.set_attributes(attributes), 10)
        await self.bounded(f"the peer's {ROLE_ATTRIBUTE} attribute change event", self.wait_check("peer_attribute"))

        # 6. Exercise data and RPC toward the peer (its role event says it serves RPC).
        self.tasks.append(asyncio.create_task(self.send_data()))
        self.tasks.append(asyncio.create_task(self.call_rpc()))

        # 7, 8. Done once everything expected of the peer has been seen.
        await self.bounded("every check to pass", self.wait_checks(REQUIRED_CHECKS))
        await self.bounded(f"{DONE_MESSAGE} to be sent", me.publish_data(DONE_MESSAGE, reliable=True, topic=CONTROL_TOPIC), 10)
        self.observations["done_sent_at"] = round(self.now(), 3)
        log.info("all checks passed after %.2f s; sent %s", self.now(), DONE_MESSAGE)

        # 9. Leave in order: the caller goes once both are done; the responder stays (still
        #    serving RPC and audio) until it has seen the caller leave.
        if self.role == "caller":
            await self.bounded(f"the responder's {DONE_MESSAGE}", self.wait_check("peer_done"))
            # publish_data returns when the packet is queued, not delivered; give it a moment
            # before the peer connection closes under it.
            await asyncio.sleep(0.3)
        else:
            await self.bounded("the caller's participant_disconnected", self.wait_check("peer_left", until_peer_leaves=False))
            if not self.checks["peer_done"].met.is_set():
                self.failures.append(f"the caller left without sending {DONE_MESSAGE}")
        await self.leave()

    async def wait_check(self, name: str, until_peer_leaves: bool = True) -> None:
        """Wait for a check; fail at once if it failed or if the peer has left meanwhile."""
        check, left = self.checks[name], self.checks["peer_left"]
        while not check.met.is_set():
            if check.failed is not None:
                raise PeerFailure(f"{name}: {check.failed}")
            if until_peer_leaves and left.met.is_set():
                raise PeerFailure(f"the peer left (at {left.at} s) while we waited for {name}: {check.detail}")
            try:
                async with asyncio.timeout(0.2):
                    await check.met.wait()
            except TimeoutError:
                pass

    async def wait_checks(self, names) -> None:
        for name in names:
            await self.wait_check(name)

    async def send_data(self) -> None:
        me = self.room.local_participant
        try:
            for seq in RELIABLE_SEQS:
                await me.publish_data(json.dumps({"from": self.identity, "seq": seq}), reliable=True, topic=DATA_TOPIC)
            await me.publish_data(json.dumps({"from": self.identity, "seq": LOSSY_SEQ}), reliable=False, topic=DATA_TOPIC)
            self.observations["data_sent_at"] = round(self.now(), 3)
        except Exception as error:  # noqa: BLE001  (reported, not raised: the checks decide)
            self.failures.append(f"publish_data: {type(error).__name__}: {error}")

    async def call_rpc(self) -> None:
        me = self.room.local_participant
        payload = f"hello from {self.identity}"
        check = self.checks["rpc_echo"]
        try:
            answer = await me.perform_rpc(destination_identity=self.peer_identity, method=ECHO_METHOD, payload=payload, response_timeout=10)
            if answer == "echo:" + payload:
                check.ok(f"{ECHO_METHOD} answered {answer!r}", self.now())
            else:
                check.fail(f"{ECHO_METHOD} answered {answer!r}, expected {'echo:' + payload!r}")
        except rtc.RpcError as error:
            check.fail(f"{ECHO_METHOD} raised RpcError {error.code}: {error.message}")
        check = self.checks["rpc_unsupported"]
        try:
            answer = await me.perform_rpc(destination_identity=self.peer_identity, method=MISSING_METHOD, payload="?", response_timeout=10)
            check.fail(f"{MISSING_METHOD} answered {answer!r}, expected RpcError {UNSUPPORTED_METHOD}")
        except rtc.RpcError as error:
            if error.code == UNSUPPORTED_METHOD:
                check.ok(f"{MISSING_METHOD} raised RpcError {error.code}", self.now())
            else:
                check.fail(f"{MISSING_METHOD} raised RpcError {error.code} ({error.message}), expected {UNSUPPORTED_METHOD}")

    async def leave(self) -> None:
        if self.room.isconnected():
            try:
                async with asyncio.timeout(5):
                    await self.room.disconnect()
                self.observations["left_at"] = round(self.now(), 3)
            except TimeoutError:
                self.failures.append("disconnect() did not finish within 5 s")

    # --- Result ---------------------------------------------------------------------------------

    def result(self, error: str | None) -> dict:
        failures = list(self.failures)
        if error:
            failures.insert(0, error)
        needed = REQUIRED_CHECKS if "connected_at" in self.observations else ()
        for name in needed:
            problem = self.checks[name].problem()
            if problem and problem not in failures:
                failures.append(problem)
        self.observations["checks"] = {
            name: {"met": c.met.is_set(), "at": c.at, "detail": c.failed or c.detail} for name, c in self.checks.items()
        }
        self.observations["elapsed"] = round(self.now(), 3)
        return {"ok": not failures, "failures": failures, "observations": self.observations}


class SignalPathObserver(logging.Handler):
    """Learns from the SDK's own log which signalling path it took.

    The SDK says nothing about it in its API; its log line is the only witness that the default
    options really went /rtc/v1 -> 404 -> /rtc (livekit 1.2.1 wording, pinned by the setup script).
    """

    def __init__(self, observations: dict) -> None:
        super().__init__(logging.INFO)
        self.observations = observations

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "falling back to v0" in message:
            self.observations["signal_v1_fallback"] = True
        elif "connecting to ws" in message:
            self.observations.setdefault("signal_urls", []).append(message.rsplit("connecting to ", 1)[-1])


class PeerFailure(Exception):
    """A failure that ends the run (what was still missing is added from the checks)."""


class PeerTimeout(PeerFailure):
    pass


def load_pcm(path: str) -> tuple[np.ndarray, int]:
    samples, rate = compare.read_wav(path)
    if rate != SAMPLE_RATE:
        raise SystemExit(f"{path}: {rate} Hz, expected {SAMPLE_RATE} Hz mono (scripts/interop-setup.sh makes them)")
    return np.clip(np.round(samples * 32768.0), -32768, 32767).astype(np.int16), rate


async def main_async(args: argparse.Namespace) -> dict:
    peer = Peer(args)
    logging.getLogger("livekit").addHandler(SignalPathObserver(peer.observations))
    peer.observations["signal_v1_fallback"] = False
    error = None
    run = asyncio.create_task(peer.run())
    # A SIGTERM (the orchestrator's hard timeout) still yields a result with what was seen.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, run.cancel)
    try:
        await run
    except asyncio.CancelledError:
        error = f"stopped by SIGTERM after {peer.now():.1f} s"
    except PeerFailure as failure:
        error = str(failure)
    except Exception as failure:  # noqa: BLE001  (any surprise becomes a readable failure)
        error = f"unexpected {type(failure).__name__}: {failure}"
        traceback.print_exc()
    for task in peer.tasks:
        task.cancel()
    await asyncio.gather(*peer.tasks, return_exceptions=True)
    if error:
        await peer.leave()
    result = peer.result(error)
    out = Path(args.out)
    if peer.recorded:
        recording = out.with_suffix(".recorded.wav")
        compare.write_wav(str(recording), np.concatenate(peer.recorded))
        result["observations"]["recording"] = str(recording)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="room URL, e.g. ws://127.0.0.1:8080/room")
    parser.add_argument("--token", required=True, help="join token (svc room token --json)")
    parser.add_argument("--peer", required=True, help="identity of the other peer")
    parser.add_argument("--role", required=True, choices=("caller", "responder"))
    parser.add_argument("--publish-wav", required=True, help="48 kHz mono s16 WAV to publish as the microphone")
    parser.add_argument("--expect-wav", required=True, help="the WAV the peer publishes")
    parser.add_argument("--out", required=True, help="result JSON path (the recording goes next to it)")
    parser.add_argument("--single-pc", choices=("0", "1", "default"), default="default",
                        help="RoomOptions.single_peer_connection: 0 = straight to /rtc (v0), 1 or default = try /rtc/v1 first")
    parser.add_argument("--timeout", type=float, default=40.0, help="seconds for the whole run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s.%(msecs)03d {args.role} %(name)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(main_async(args))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"ok": result["ok"], "failures": result["failures"]}))
    sys.stdout.flush()
    # The SDK's native threads can keep the interpreter alive after a failed connect; the
    # result is written, so leave now.
    os._exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
