"""One OpenAI Realtime (GA) or xAI voice-agent connection, played by the fake.

`RealtimeServer` owns the server's side of the protocol: it validates every client event with
the oracle as it arrives (`on_client`, a reader task), keeps the state the service's documented
rules need (audio sent per assistant item, the calls the server made, the active response),
answers what the service answers by itself (acks, `session.updated`, the errors the service
returns for a refused command), and gives scenarios the building blocks of a conversation
(`handshake`, `play_response`, `user_turn`, …) whose events are built by `ServerEvents`.

Every rule checked here is one the SDK's docstrings (openai 3.57.0, `openai/types/realtime/`) or
xAI's docs state for the service; each cites its source.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Optional

from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent

import xai_models
from openai_oracle import ClientOracle, InputAudio, ServerEvents, b64, by_type, split_words, tone
from wire import Conn

RATE_HZ = 24_000
# 100 ms of reply audio per delta.
CHUNK_SAMPLES = RATE_HZ // 10
# `input_audio_buffer.append`: "The client may choose how much audio to place in each event up
# to a maximum of 15 MiB" (input_audio_buffer_append_event.py).
APPEND_MAX_BYTES = 15 << 20
# How long a scenario waits for svc's next message before it gives up (and the runner fails).
EXPECT_SECONDS = 10.0


@dataclass
class Played:
    """One response the fake played: what the runner checks the adapter's events against."""

    response_id: str
    item_id: str
    transcript: str
    samples: int
    status: str
    usage: dict[str, Any]
    call: Optional[dict[str, str]] = None
    # The user item whose speech interrupted this response (barge-in).
    user_item: Optional[str] = None

    def fact(self) -> dict[str, Any]:
        return {
            "response_id": self.response_id,
            "item_id": self.item_id,
            "transcript": self.transcript,
            "samples": self.samples,
            "status": self.status,
            "usage": self.usage,
            "call": self.call,
        }


@dataclass
class Truncation:
    item_id: str
    audio_end_ms: int
    audio_sent_ms: int


@dataclass
class ServerState:
    """What the server knows about the conversation."""

    # Audio sent per assistant message item, in samples (truncation is checked against it).
    assistant_samples: dict[str, int] = field(default_factory=dict)
    # Function calls the server made, and those answered with a function_call_output.
    calls_made: set[str] = field(default_factory=set)
    calls_answered: set[str] = field(default_factory=set)
    response_active: Optional[str] = None
    cancel_requested: bool = False
    audio_output_started: bool = False
    # xAI: the last item svc created was a force_message (no response.create may follow it).
    force_message_last: bool = False
    truncations: list[Truncation] = field(default_factory=list)
    refused_creates: int = 0
    session: dict[str, Any] = field(default_factory=dict)
    # Input audio (ms) already committed, by svc or by the server's detector.
    committed_ms: int = 0


class RealtimeServer:
    def __init__(self, conn: Conn, dialect: str):
        self.conn = conn
        self.xai = dialect == "xai"
        query = urllib.parse.parse_qs(urllib.parse.urlparse(conn.path).query)
        self.model = query.get("model", [""])[0]
        if self.xai:
            self.client = ClientOracle("the xAI voice agent API", xai_models.CLIENT_EVENTS)
            self.events = ServerEvents(conn, RealtimeServerEvent, xai_models.SERVER_EVENTS)
        else:
            self.client = ClientOracle("OpenAI Realtime (openai.types.realtime)", by_type(RealtimeClientEvent))
            self.events = ServerEvents(conn, RealtimeServerEvent)
        self.state = ServerState()
        self.audio_in = InputAudio(RATE_HZ)
        self.inbox: asyncio.Queue[Optional[dict[str, Any]]] = asyncio.Queue()
        self.played: list[Played] = []
        self.reader = asyncio.create_task(self.read_loop())
        self.conversation_id = self.events.next_id("conv")
        if not self.model:
            conn.violation(f"no ?model= in the URL {conn.path!r} (the model is chosen at connect)")

    # ---- client side: validation and the service's own answers ----------------------------

    async def read_loop(self) -> None:
        while (message := await self.conn.recv()) is not None:
            await self.on_client(message)
        await self.inbox.put(None)

    async def on_client(self, message: dict[str, Any]) -> None:
        model, problems = self.client.validate(message)
        for problem in problems:
            self.conn.violation(problem)
        kind = message.get("type")
        if kind == "input_audio_buffer.append":
            self.on_append(message)
            return
        if model is not None:
            handler = {
                "session.update": self.on_session_update,
                "conversation.item.create": self.on_item_create,
                "conversation.item.truncate": self.on_truncate,
                "response.create": self.on_response_create,
                "response.cancel": self.on_response_cancel,
                "input_audio_buffer.commit": self.on_commit,
            }.get(str(kind))
            if handler is not None and not await handler(message):
                return  # answered by the service itself (an error), not the scenario's business
        await self.inbox.put(message)

    def on_append(self, message: dict[str, Any]) -> None:
        audio = message.get("audio")
        if isinstance(audio, str) and len(audio) * 3 // 4 > APPEND_MAX_BYTES:
            self.conn.violation(f"input_audio_buffer.append of {len(audio) * 3 // 4} bytes is over 15 MiB")
        problem = self.audio_in.add(audio)
        if problem:
            self.conn.violation(f"input_audio_buffer.append: {problem}")
        self.conn.fact("input_samples", self.audio_in.samples)
        if self.audio_in.runs is not None:
            self.conn.fact("input_runs", self.audio_in.runs)

    async def on_session_update(self, message: dict[str, Any]) -> bool:
        session = message.get("session", {})
        previous = self.state.session
        # session_update_event.py: "The client may send this event at any time to update any
        # field except for `voice` and `model`. `voice` can be updated only if there have been no
        # other audio outputs yet."
        if previous:
            if "model" in session and session.get("model") != previous.get("model"):
                self.conn.violation("session.update changed `model`, which cannot be updated")
            voice = voice_of(session, self.xai)
            if self.state.audio_output_started and voice not in (None, voice_of(previous, self.xai)):
                self.conn.violation("session.update changed `voice` after audio output")
        self.state.session = {**previous, **session}
        self.conn.fact("session_update", message)
        # "the server ... will respond with a `session.updated` event showing the full,
        # effective configuration."
        await self.events.send("session.updated", {"session": dict(self.state.session)})
        return True

    async def on_item_create(self, message: dict[str, Any]) -> bool:
        item = message.get("item", {})
        self.state.force_message_last = item.get("type") == "force_message"
        if item.get("type") == "function_call_output":
            call_id = item.get("call_id")
            # realtime_conversation_item_function_call_output.py: `call_id` is "The ID of the
            # function call this output is for": one the server made, answered once.
            if call_id not in self.state.calls_made:
                self.conn.violation(f"function_call_output for {call_id!r}, a call the server never made")
            elif call_id in self.state.calls_answered:
                self.conn.violation(f"a second function_call_output for {call_id!r}")
            self.state.calls_answered.add(call_id)
        if item.get("type") != "force_message":
            # conversation_item_create_event.py: "the server will emit a
            # `conversation.item.added` event and, when the item is finalized, a
            # `conversation.item.done` event".
            created = {**item, "id": item.get("id") or self.events.next_id("item"), "object": "realtime.item"}
            created.setdefault("status", "completed")
            await self.events.send("conversation.item.added", {"item": created}, {"previous_item_id": None})
            await self.events.send("conversation.item.done", {"item": created})
        return True

    async def on_truncate(self, message: dict[str, Any]) -> bool:
        item_id = str(message.get("item_id"))
        end_ms = int(message.get("audio_end_ms", 0))
        sent = self.state.assistant_samples.get(item_id)
        # conversation_item_truncate_event.py: "Only assistant message items can be truncated";
        # `content_index`: "Set this to `0`"; `audio_end_ms`: "If the audio_end_ms is greater
        # than the actual audio duration, the server will respond with an error."
        if sent is None:
            await self.refuse(message, f"truncate names {item_id!r}, not an assistant audio item the server sent")
            return True  # the scenario waits for it all the same
        if message.get("content_index") != 0:
            self.conn.violation(f"truncate content_index {message.get('content_index')}, not 0")
        sent_ms = sent * 1000 // RATE_HZ
        self.state.truncations.append(Truncation(item_id, end_ms, sent_ms))
        self.conn.fact("truncations", [vars(t) for t in self.state.truncations])
        if end_ms > sent_ms:
            await self.refuse(message, f"truncate audio_end_ms {end_ms} is past the {sent_ms} ms of audio sent")
            return True
        await self.events.send(
            "conversation.item.truncated", {"item_id": item_id, "content_index": 0, "audio_end_ms": end_ms}
        )
        return True

    async def on_response_create(self, message: dict[str, Any]) -> bool:
        # xAI [GUIDE] force_message: "Do not send `response.create` after this — the force
        # message is the complete turn."
        if self.xai and self.state.force_message_last:
            self.conn.violation("response.create right after a force_message item")
        self.state.force_message_last = False
        # response_create_event.py: "Only one Response can write to the default Conversation at
        # a time": the service refuses a create while one is active. A race with the server's
        # own response is legitimate, so this is answered as the service does, and counted.
        if self.state.response_active is not None:
            self.state.refused_creates += 1
            self.conn.fact("refused_creates", self.state.refused_creates)
            await self.send_error(
                "invalid_request_error",
                "conversation_already_has_active_response",
                f"Conversation already has an active response in progress: {self.state.response_active}.",
                event_id=message.get("event_id"),
            )
            return False
        return True

    async def on_response_cancel(self, message: dict[str, Any]) -> bool:
        # response_cancel_event.py: "If there is no response to cancel, the server will respond
        # with an error."
        if self.state.response_active is None:
            await self.send_error(
                "invalid_request_error",
                "response_cancel_not_active",
                "Cancellation failed: no active response found",
                event_id=message.get("event_id"),
            )
            return False
        self.state.cancel_requested = True
        return True

    async def on_commit(self, message: dict[str, Any]) -> bool:
        # InputAudioBufferCommitEvent: "This event will produce an error if the input audio
        # buffer is empty" (and the service wants at least 100 ms of audio in it).
        uncommitted = self.audio_in.ms - self.state.committed_ms
        if uncommitted < 100:
            return await self.refuse(message, f"input_audio_buffer.commit with {uncommitted} ms of uncommitted audio")
        self.state.committed_ms = self.audio_in.ms
        return True

    async def refuse(self, message: dict[str, Any], why: str) -> bool:
        """A command the service refuses with an `error` event: a violation of svc's."""
        self.conn.violation(why)
        await self.send_error("invalid_request_error", "invalid_value", why, event_id=message.get("event_id"))
        return False

    async def send_error(self, kind: str, code: str, message: str, event_id: Any = None) -> None:
        error: dict[str, Any] = {"type": kind, "code": code, "message": message}
        if isinstance(event_id, str):
            error["event_id"] = event_id
        await self.events.send("error", {"error": error}, {"error": {**error, "param": None}})

    async def expect(self, *kinds: str, timeout: float = EXPECT_SECONDS) -> Optional[dict[str, Any]]:
        """The next client message of one of `kinds` (others are skipped: already validated);
        None when svc closed the socket or sent none in time (the runner then fails)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                message = await asyncio.wait_for(self.inbox.get(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                self.conn.fact("timed_out_waiting_for", list(kinds))
                return None
            if message is None:
                await self.inbox.put(None)  # later expects see the end too
                return None
            if message.get("type") in kinds:
                return message

    async def wait_input_ms(self, ms: int, timeout: float = EXPECT_SECONDS) -> bool:
        """Waits until svc appended `ms` of audio."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.audio_in.ms < ms:
            if loop.time() > deadline or self.reader.done():
                return False
            await asyncio.sleep(0.01)
        return True

    # ---- server side: the conversation's events --------------------------------------------

    async def handshake(self) -> bool:
        """`session.created` (xAI: then `conversation.created`, its documented flow), svc's
        `session.update`, `session.updated`. False when svc never configured the session."""
        if self.xai:
            session = {"id": self.events.next_id("sess"), "model": self.model, "voice": "eve"}
            await self.events.send("session.created", {"session": session})
            await self.events.send(
                "conversation.created",
                {"conversation": {"id": self.conversation_id, "object": "realtime.conversation"}},
            )
        else:
            rich = {
                "type": "realtime",
                "model": self.model,
                "instructions": "",
                "output_modalities": ["audio"],
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": RATE_HZ},
                        "turn_detection": {"type": "server_vad"},
                    },
                    "output": {"format": {"type": "audio/pcm", "rate": RATE_HZ}, "voice": "marin"},
                },
                "max_output_tokens": "inf",
            }
            await self.events.send(
                "session.created", {"session": {"type": "realtime", "model": self.model}}, {"session": rich}
            )
        return await self.expect("session.update") is not None

    async def rate_limits(self) -> None:
        """rate_limits.updated: "Emitted at the beginning of a Response" (OpenAI only)."""
        if not self.xai:
            limits = [
                {"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 0.06},
                {"name": "tokens", "limit": 50_000, "remaining": 49_000, "reset_seconds": 1.2},
            ]
            await self.events.send("rate_limits.updated", {"rate_limits": limits})

    def usage(self) -> dict[str, Any]:
        """A response's usage, from the seeded generator (recorded for the runner)."""
        rng = self.conn.rng
        if self.xai:
            # [SCHEMA] response.done usage: {input_tokens, output_tokens, total_tokens}.
            inp, out = rng.randrange(50, 900), rng.randrange(20, 400)
            return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
        text_in, audio_in, image_in = rng.randrange(10, 500), rng.randrange(0, 300), rng.randrange(0, 3)
        cached = rng.randrange(0, text_in + 1)
        text_out, audio_out = rng.randrange(5, 80), rng.randrange(20, 300)
        inp, out = text_in + audio_in + image_in, text_out + audio_out
        return {
            "total_tokens": inp + out,
            "input_tokens": inp,
            "output_tokens": out,
            "input_token_details": {
                "text_tokens": text_in,
                "audio_tokens": audio_in,
                "image_tokens": image_in,
                "cached_tokens": cached,
                "cached_tokens_details": {"text_tokens": cached, "audio_tokens": 0, "image_tokens": 0},
            },
            "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out},
        }

    async def play_response(self, text: str, chunks: int, barge_in: bool = False) -> Played:
        """One spoken response: `chunks` × 100 ms of audio carrying `text` as its transcript.
        With `barge_in`, server VAD hears the user once the audio is out: `speech_started`, then
        at once everything that ends the cancelled response (what a real server sends when
        `interrupt_response` cancels it)."""
        rid, item_id = self.events.next_id("resp"), self.events.next_id("item")
        self.state.response_active, self.state.cancel_requested = rid, False
        await self.response_created(rid)
        message_item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        where = {"response_id": rid, "item_id": item_id, "output_index": 0, "content_index": 0}
        await self.events.send(
            "response.output_item.added", {"response_id": rid, "output_index": 0, "item": message_item}
        )
        await self.events.send("conversation.item.added", {"item": message_item})
        await self.events.send("response.content_part.added", {**where, "part": {"type": "audio", "transcript": ""}})
        if self.conn.pack():
            await self.events.send_unknown("response.conformance_probe.delta")
        fragments = split_words(text, chunks)
        self.state.assistant_samples[item_id] = 0
        spoken = ""
        for index in range(chunks):
            if self.state.cancel_requested:
                break
            audio = tone(CHUNK_SAMPLES, RATE_HZ, start=index * CHUNK_SAMPLES)
            await self.events.send("response.output_audio.delta", {**where, "delta": b64(audio)})
            self.state.assistant_samples[item_id] += CHUNK_SAMPLES
            self.state.audio_output_started = True
            if index < len(fragments):
                spoken += fragments[index]
                await self.events.send("response.output_audio_transcript.delta", {**where, "delta": fragments[index]})
            if self.xai and self.conn.pack():
                await self.events.send("ping", {"timestamp": 1_700_000_000 + index})
        status = "completed"
        if self.state.cancel_requested:
            status = "cancelled"
        user_item = None
        if barge_in:
            user_item = await self.speech_started()
            status = "cancelled"
        played = Played(rid, item_id, spoken, self.state.assistant_samples[item_id], status, self.usage())
        played.user_item = user_item
        await self.finish_message(played, where, reason="turn_detected" if barge_in else "client_cancelled")
        return played

    async def response_created(self, rid: str) -> None:
        response = {"id": rid, "object": "realtime.response", "status": "in_progress", "output": []}
        rich = {
            **response,
            "conversation_id": self.conversation_id,
            "output_modalities": ["audio"],
            "audio": {"output": {"format": {"type": "audio/pcm", "rate": RATE_HZ}, "voice": "marin"}},
        }
        if self.xai:
            rich = {**response, "conversation_id": self.conversation_id}
        await self.events.send("response.created", {"response": response}, {"response": rich})
        await self.rate_limits()

    async def finish_message(self, played: Played, where: dict[str, Any], reason: str) -> None:
        """Everything that ends a response whose output is one audio message."""
        done_item = {
            "id": played.item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "completed" if played.status == "completed" else "incomplete",
            "content": [{"type": "output_audio", "transcript": played.transcript}],
        }
        await self.events.send("response.output_audio.done", where)
        await self.events.send("response.output_audio_transcript.done", {**where, "transcript": played.transcript})
        await self.events.send(
            "response.content_part.done", {**where, "part": {"type": "audio", "transcript": played.transcript}}
        )
        await self.events.send(
            "response.output_item.done", {"response_id": played.response_id, "output_index": 0, "item": done_item}
        )
        await self.events.send("conversation.item.done", {"item": done_item})
        await self.response_done(played, [done_item], reason)

    async def response_done(self, played: Played, output: list[dict[str, Any]], reason: str) -> None:
        response: dict[str, Any] = {
            "id": played.response_id,
            "object": "realtime.response",
            "status": played.status,
            "output": output,
            "usage": played.usage,
        }
        if played.status == "cancelled":
            response["status_details"] = {"type": "cancelled", "reason": reason}
        await self.events.send(
            "response.done", {"response": response}, {"response": {**response, "conversation_id": self.conversation_id}}
        )
        self.state.response_active = None
        self.played.append(played)
        self.conn.fact("responses", [p.fact() for p in self.played])

    async def play_text(self, text: str, parts: int) -> Played:
        """A text-only response (`output_modalities: ["text"]`). xAI sends text deltas under both
        `response.output_text.delta` and the older `response.text.delta` (providers.md §5.3):
        its deltas alternate between the two."""
        rid, item_id = self.events.next_id("resp"), self.events.next_id("item")
        self.state.response_active = rid
        await self.response_created(rid)
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        where = {"response_id": rid, "item_id": item_id, "output_index": 0, "content_index": 0}
        await self.events.send("response.output_item.added", {"response_id": rid, "output_index": 0, "item": item})
        await self.events.send("response.content_part.added", {**where, "part": {"type": "text", "text": ""}})
        for index, fragment in enumerate(split_words(text, parts)):
            kind = "response.text.delta" if self.xai and index % 2 else "response.output_text.delta"
            await self.events.send(kind, {**where, "delta": fragment})
        await self.events.send("response.output_text.done", {**where, "text": text})
        await self.events.send("response.content_part.done", {**where, "part": {"type": "text", "text": text}})
        done_item = {**item, "status": "completed", "content": [{"type": "output_text", "text": text}]}
        await self.events.send("response.output_item.done", {"response_id": rid, "output_index": 0, "item": done_item})
        played = Played(rid, item_id, text, 0, "completed", self.usage())
        await self.response_done(played, [done_item], "")
        return played

    async def play_tool_call(self, name: str, arguments: str) -> Played:
        """A response whose output is one function call (the model asks for a tool)."""
        rid, item_id, call_id = self.events.next_id("resp"), self.events.next_id("item"), self.events.next_id("call")
        self.state.response_active = rid
        await self.response_created(rid)
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "call_id": call_id,
            "name": name,
            "arguments": "",
        }
        await self.events.send("response.output_item.added", {"response_id": rid, "output_index": 0, "item": item})
        await self.events.send("conversation.item.added", {"item": item})
        where = {"response_id": rid, "item_id": item_id, "output_index": 0, "call_id": call_id}
        for piece in split_words(arguments, 3):
            await self.events.send("response.function_call_arguments.delta", {**where, "delta": piece})
        self.state.calls_made.add(call_id)
        await self.events.send("response.function_call_arguments.done", {**where, "name": name, "arguments": arguments})
        done_item = {**item, "status": "completed", "arguments": arguments}
        await self.events.send("response.output_item.done", {"response_id": rid, "output_index": 0, "item": done_item})
        await self.events.send("conversation.item.done", {"item": done_item})
        played = Played(
            rid, item_id, "", 0, "completed", self.usage(), {"call_id": call_id, "name": name, "arguments": arguments}
        )
        await self.response_done(played, [done_item], "")
        return played

    async def speech_started(self) -> str:
        """Server VAD hears the user start: the new user item's id."""
        item_id = self.events.next_id("item")
        await self.events.send(
            "input_audio_buffer.speech_started", {"audio_start_ms": self.audio_in.ms, "item_id": item_id}
        )
        return item_id

    async def committed_by_client(self, item_id: str, transcript: str) -> None:
        """svc committed the buffer itself (the client's activity-end): the service confirms
        the commit, adds the user item and transcribes it; no speech_stopped (its detector did
        not end the turn)."""
        await self.events.send("input_audio_buffer.committed", {"item_id": item_id}, {"previous_item_id": None})
        await self.transcribe(item_id, transcript)

    async def user_turn(self, item_id: str, transcript: str, corrections: bool = False) -> None:
        """Server VAD's end of the user turn `item_id` and its input transcription (OpenAI:
        deltas; xAI: cumulative `updated` events, which "may have corrections")."""
        await self.events.send(
            "input_audio_buffer.speech_stopped", {"audio_end_ms": self.audio_in.ms, "item_id": item_id}
        )
        self.state.committed_ms = self.audio_in.ms
        await self.events.send("input_audio_buffer.committed", {"item_id": item_id}, {"previous_item_id": None})
        await self.transcribe(item_id, transcript, corrections)

    async def transcribe(self, item_id: str, transcript: str, corrections: bool = False) -> None:
        """The committed user item `item_id` and its input transcription."""
        user_item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        await self.events.send("conversation.item.added", {"item": user_item})
        fragments = split_words(transcript, 3)
        if self.xai:
            cumulative = ""
            for index, fragment in enumerate(fragments):
                cumulative += fragment
                shown = cumulative
                if corrections and index == 0 and len(cumulative) > 2:
                    shown = cumulative[:-2] + "x "  # a guess the next update corrects
                await self.events.send(
                    "conversation.item.input_audio_transcription.updated", {"item_id": item_id, "transcript": shown}
                )
        else:
            for fragment in fragments:
                await self.events.send(
                    "conversation.item.input_audio_transcription.delta",
                    {"item_id": item_id, "delta": fragment},
                    {"content_index": 0},
                )
        usage = (
            {"type": "duration", "seconds": 1.5}
            if self.conn.rng.random() < 0.5
            else {"type": "tokens", "input_tokens": 20, "output_tokens": 8, "total_tokens": 28}
        )
        await self.events.send(
            "conversation.item.input_audio_transcription.completed",
            {"item_id": item_id, "content_index": 0, "transcript": transcript, "usage": usage},
        )
        await self.events.send(
            "conversation.item.done",
            {"item": {**user_item, "content": [{"type": "input_audio", "transcript": transcript}]}},
        )
        self.conn.fact("user_transcripts", [*self.conn.facts.get("user_transcripts", []), transcript])


def voice_of(session: dict[str, Any], xai: bool) -> Any:
    if xai:
        return session.get("voice")
    return session.get("audio", {}).get("output", {}).get("voice")
