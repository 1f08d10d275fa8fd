"""One OpenAI GPT-Live connection (`/v1/live/sessions`), played by the fake.

`LiveServer` validates every client command with `openai.types.live.ClientEvent`'s models
(strictly, see openai_oracle.py), checks the rules the SDK's docstrings (openai 3.57.0,
`openai/types/live/`) state for the service, answers what the service answers by itself
(`session.started`, append acknowledgements, mute acknowledgements, `session.closed`, refusals),
and gives scenarios GPT-Live's building blocks: the model speaking (a continuous audio stream,
silence included, with timed transcript fragments), the user's transcript, delegations and the
nested Responses stream of `responses` delegation, whose events are built by the SDK's
`openai.types.responses` models and round-trip through `ResponseStreamEvent`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Optional

from openai.types.live import ClientEvent, ServerEvent
from openai.types.responses import ResponseStreamEvent

from openai_oracle import ClientOracle, InputAudio, ServerEvents, b64, by_type, min_tokens, silence, split_words, tone
from wire import Conn

# session_config.py, `instructions`: "Limited to 16,384 client-supplied tokens".
INSTRUCTIONS_MAX_TOKENS = 16_384
# session_config.py, `input`: "at most 128 messages"; initial_item.py: "Supply exactly one text
# part for the initial Live conversation history".
INPUT_MAX_MESSAGES = 128
# *_append_event.py: each append's content is "limited to 500 tokens".
APPEND_MAX_TOKENS = 500
APPENDS = ("session.instructions.append", "session.thinking.append", "session.commentary.append")
EXPECT_SECONDS = 10.0


@dataclass
class LiveState:
    start: dict[str, Any] = field(default_factory=dict)
    delegation: str = "client"  # session_config.py: "Omitted or null selects your application"
    rate: int = 24_000
    # Delegations the server created: id → target.
    delegations: dict[str, str] = field(default_factory=dict)
    # Backend function calls not answered yet, and those answered.
    open_calls: set[str] = field(default_factory=set)
    answered_calls: set[str] = field(default_factory=set)
    backend_running: int = 0
    appends: list[dict[str, Any]] = field(default_factory=list)


class LiveServer:
    def __init__(self, conn: Conn):
        self.conn = conn
        self.client = ClientOracle("OpenAI GPT-Live (openai.types.live)", by_type(ClientEvent))
        self.events = ServerEvents(conn, ServerEvent)
        # The nested Responses stream of `response.event`: built by openai.types.responses.
        self.backend = ServerEvents(conn, ResponseStreamEvent)
        self.state = LiveState()
        self.started = False
        self.audio_in = InputAudio(self.state.rate)
        # The session timeline (ms since the session began), advanced by the audio both ways.
        self.clock_ms = 0
        self.output_samples = 0
        self.sequence = 0
        self.inbox: asyncio.Queue[Optional[dict[str, Any]]] = asyncio.Queue()
        self.reader = asyncio.create_task(self.read_loop())

    # ---- client side ---------------------------------------------------------------------------

    async def read_loop(self) -> None:
        while (message := await self.conn.recv()) is not None:
            await self.on_client(message)
        await self.inbox.put(None)

    async def on_client(self, message: dict[str, Any]) -> None:
        model, problems = self.client.validate(message)
        for problem in problems:
            self.conn.violation(problem)
        kind = str(message.get("type"))
        if kind == "session.start":
            await self.on_start(message)
            await self.inbox.put(message)  # the handshake waits for it, valid or not
            return
        if not self.started:
            # session_start_event.py: "Send this event before other commands and wait for
            # `session.started`."
            self.conn.violation(f"{kind} before session.started")
        if model is None:
            return
        if kind == "session.input_audio.append":
            problem = self.audio_in.add(message.get("audio"))
            if problem:
                self.conn.violation(f"session.input_audio.append: {problem}")
            self.conn.fact("input_samples", self.audio_in.samples)
            return
        handled = True
        if kind in APPENDS:
            handled = await self.on_append(message)
        elif kind == "response.item.create":
            handled = await self.on_item_create(message)
        elif kind == "response.create":
            handled = await self.on_response_create(message)
        elif kind == "session.update":
            self.on_update(message)
        elif kind in ("session.input_audio.mute", "session.input_audio.unmute"):
            # input_audio_mute_event.py: "The server acknowledges with `session.input_audio.muted`".
            acked = "session.input_audio.muted" if kind.endswith(".mute") else "session.input_audio.unmuted"
            await self.events.send(acked, {}, self.correlate(message))
        elif kind == "session.close":
            # session_close_event.py: "The terminal `session.closed` event contains the close reason
            # and final usage."
            await self.events.send(
                "session.closed",
                {
                    "reason": "close_requested",
                    "session": self.resource(),
                    "usage": {"seconds": float(self.clock_ms // 1000)},
                },
                self.correlate(message),
            )
        if handled:
            await self.inbox.put(message)

    def correlate(self, message: dict[str, Any]) -> dict[str, Any]:
        """`client_event_id` of an answer: "The event_id of the client command associated with this
        server event, when supplied"."""
        event_id = message.get("event_id")
        return {"client_event_id": event_id} if isinstance(event_id, str) else {}

    async def on_start(self, message: dict[str, Any]) -> None:
        if self.started:
            self.conn.violation("a second session.start on one connection")
            return
        session = message.get("session", {})
        self.conn.fact("session_start", message)
        instructions = session.get("instructions") or ""
        if min_tokens(instructions) > INSTRUCTIONS_MAX_TOKENS:
            self.conn.violation(
                f"instructions of at least {min_tokens(instructions)} tokens (cap {INSTRUCTIONS_MAX_TOKENS})"
            )
        history = session.get("input") or []
        if len(history) > INPUT_MAX_MESSAGES:
            self.conn.violation(f"{len(history)} input messages (cap {INPUT_MAX_MESSAGES})")
        for index, item in enumerate(history):
            if len(item.get("content") or []) != 1:
                self.conn.violation(f"input[{index}] has {len(item.get('content') or [])} parts, not exactly one")
        delegation = session.get("delegation") or {}
        self.state.delegation = delegation.get("type") or "client"
        rate = (session.get("audio") or {}).get("format", {}).get("rate")
        if isinstance(rate, int):
            self.state.rate = rate
            self.audio_in = InputAudio(rate)
        self.state.start = session
        self.started = True
        await self.events.send("session.started", {"session": self.resource()}, self.correlate(message))

    def resource(self) -> dict[str, Any]:
        """The resolved session (session_resource.py) echoed in session.started/updated/closed."""
        start = self.state.start
        resource = {
            "id": f"sess_{self.conn.index}",
            "expires_at": 1_900_000_000,
            "model": start.get("model", ""),
            "status": "active",
        }
        for key in ("audio", "delegation", "instructions", "input"):
            if start.get(key) is not None:
                resource[key] = start[key]
        return resource

    async def on_append(self, message: dict[str, Any]) -> bool:
        kind = message["type"]
        # *_append_event.py, `delegation_id`: "Required, nullable. Set null for general session
        # context, or use the ID from session.delegation.created for an existing client
        # delegation. Non-null IDs are not accepted with Responses delegation."
        if "delegation_id" not in message:
            self.conn.violation(f"{kind} without `delegation_id` (required, nullable)")
        delegation_id = message.get("delegation_id")
        if delegation_id is not None:
            if self.state.delegation == "responses":
                self.conn.violation(f"{kind} with delegation_id {delegation_id!r} under Responses delegation")
            elif self.state.delegations.get(delegation_id) != "client":
                self.conn.violation(f"{kind} names {delegation_id!r}, not a client delegation the server created")
        content = message.get("content") or ""
        if min_tokens(content) > APPEND_MAX_TOKENS:
            self.conn.violation(f"{kind} of at least {min_tokens(content)} tokens (cap {APPEND_MAX_TOKENS})")
        self.state.appends.append({"type": kind, "delegation_id": delegation_id, "content": content})
        self.conn.fact("appends", self.state.appends)
        # The acknowledgement arrives at the estimated injection point on the session timeline.
        await self.events.send(
            kind.replace(".append", ".appended"),
            {"start_ms": self.clock_ms, "end_ms": self.clock_ms},
            self.correlate(message),
        )
        return True

    async def on_item_create(self, message: dict[str, Any]) -> bool:
        # response_item_create_event.py: "Requires Responses delegation"; a function tool result
        # answers a call the backend made ("a function tool result").
        if self.state.delegation != "responses":
            return await self.refuse(message, "response.item.create without Responses delegation")
        item = message.get("item") or {}
        call_id = item.get("call_id")
        if item.get("type") == "function_call_output":
            if call_id not in self.state.open_calls:
                return await self.refuse(message, f"function_call_output for {call_id!r}, not an open backend call")
            self.state.open_calls.discard(call_id)
            self.state.answered_calls.add(call_id)
            self.conn.fact("tool_outputs", [*self.conn.facts.get("tool_outputs", []), item])
        return True

    async def on_response_create(self, message: dict[str, Any]) -> bool:
        # response_create_event.py: "Requires Responses delegation". The service refuses it with
        # `function_call_outputs_required` while a call of the session is open or a backend
        # response runs, and the backend then stalls (providers.md §4.6, from LiveKit's and
        # pydantic-ai's fixes).
        if self.state.delegation != "responses":
            return await self.refuse(message, "response.create without Responses delegation")
        if self.state.open_calls or self.state.backend_running:
            why = (
                f"response.create with calls {sorted(self.state.open_calls)} open, {self.state.backend_running} running"
            )
            self.conn.violation(why)
            await self.send_error("invalid_request_error", "function_call_outputs_required", why, message)
            return False
        return True

    def on_update(self, message: dict[str, Any]) -> None:
        # session_update_event.py: "The delegation type cannot change. Model, frontend
        # instructions, audio, and startup input are immutable." (The strict walk already
        # reports those fields: SessionUpdateConfig does not declare them.)
        delegation = (message.get("session") or {}).get("delegation") or {}
        if delegation.get("type") not in (None, self.state.delegation):
            self.conn.violation(f"session.update changes the delegation type to {delegation.get('type')!r}")

    async def refuse(self, message: dict[str, Any], why: str) -> bool:
        self.conn.violation(why)
        await self.send_error("invalid_request_error", "invalid_value", why, message)
        return False

    async def send_error(self, kind: str, code: str, text: str, message: Optional[dict[str, Any]] = None) -> None:
        error: dict[str, Any] = {"type": kind, "code": code, "message": text}
        correlation = self.correlate(message or {})
        await self.events.send("error", {"error": {**error, **correlation}}, correlation)

    async def expect(self, *kinds: str, timeout: float = EXPECT_SECONDS) -> Optional[dict[str, Any]]:
        """The next command of one of `kinds` (others skipped: already validated); None when svc
        closed or sent none in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                message = await asyncio.wait_for(self.inbox.get(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                self.conn.fact("timed_out_waiting_for", list(kinds))
                return None
            if message is None:
                await self.inbox.put(None)
                return None
            if message.get("type") in kinds:
                return message

    async def handshake(self) -> bool:
        """Waits for svc's `session.start` (answered with `session.started` as it arrives)."""
        return await self.expect("session.start") is not None

    async def wait_input_ms(self, ms: int, timeout: float = EXPECT_SECONDS) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.audio_in.ms < ms:
            if loop.time() > deadline or self.reader.done():
                return False
            await asyncio.sleep(0.01)
        return True

    # ---- server side -------------------------------------------------------------------------

    async def speak(self, text: str, voiced: int, silent: int = 0, silence_every: float = 0.0) -> dict[str, Any]:
        """The model speaks `text` over `voiced` × 100 ms of audio, then `silent` × 100 ms of
        silence (the stream goes on through silence), one silent chunk each `silence_every`
        seconds (the service streams at the pace of time; 0 sends them at once)."""
        chunk = self.state.rate // 10
        fragments = split_words(text, voiced)
        spoken, samples = "", 0
        for index in range(voiced):
            await self.events.send(
                "session.output_audio.delta", {"delta": b64(tone(chunk, self.state.rate, start=samples))}
            )
            samples += chunk
            if index < len(fragments):
                spoken += fragments[index]
                await self.events.send(
                    "session.output_transcript.delta",
                    {"delta": fragments[index], "start_ms": self.clock_ms, "end_ms": self.clock_ms + 100},
                )
            self.clock_ms += 100
        for _ in range(silent):
            if silence_every:
                await asyncio.sleep(silence_every)
            await self.events.send("session.output_audio.delta", {"delta": b64(silence(chunk))})
            samples += chunk
            self.clock_ms += 100
        self.output_samples += samples
        spoken_fact = {"transcript": spoken, "samples": samples}
        self.conn.fact("spoken", [*self.conn.facts.get("spoken", []), spoken_fact])
        self.conn.fact("output_samples", self.output_samples)
        return spoken_fact

    async def user_says(self, text: str, gap_ms: int = 1000) -> None:
        """The user's words as input transcript fragments, `gap_ms` after the last speech on the
        timeline ("these events do not define complete turns")."""
        self.clock_ms += gap_ms
        for fragment in split_words(text, 3):
            await self.events.send(
                "session.input_transcript.delta",
                {"delta": fragment, "start_ms": self.clock_ms, "end_ms": self.clock_ms + 200},
            )
            self.clock_ms += 200
        self.conn.fact("user_said", [*self.conn.facts.get("user_said", []), text])

    async def delegate(self, target: str) -> str:
        """`session.delegation.created`: the model hands work to `target`."""
        delegation_id = self.events.next_id("dlg")
        self.state.delegations[delegation_id] = target
        delegation: dict[str, Any] = {"id": delegation_id, "target": target, "type": "delegation"}
        if target == "responses":
            delegation["response_id"] = self.events.next_id("resp")
        await self.events.send("session.delegation.created", {"delegation": delegation, "offset_ms": self.clock_ms})
        return delegation_id

    async def backend_event(self, delegation_id: str, kind: str, fields: dict[str, Any]) -> None:
        """One nested Responses stream event, built and checked as the SDK's, inside
        `response.event`."""
        self.sequence += 1
        nested = self.backend.wire(self.backend.build(kind, {**fields, "sequence_number": self.sequence}))
        await self.events.send("response.event", {"event": nested}, {"delegation_id": delegation_id})

    def backend_response(self, response_id: str, status: str, usage: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """A Responses lifecycle snapshot ("omit input and clear instructions, tools, and output")."""
        response: dict[str, Any] = {
            "id": response_id,
            "created_at": 1_800_000_000.0,
            "model": "gpt-5.6-luna",
            "object": "response",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": status,
        }
        if usage is not None:
            response["usage"] = usage
        return response

    def backend_usage(self) -> dict[str, Any]:
        rng = self.conn.rng
        inp, out = rng.randrange(100, 2000), rng.randrange(10, 400)
        return {
            "input_tokens": inp,
            "output_tokens": out,
            "total_tokens": inp + out,
            "input_tokens_details": {"cached_tokens": rng.randrange(0, inp), "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": rng.randrange(0, out)},
        }

    async def backend_run(self, delegation_id: str, call: Optional[tuple[str, str]] = None, text: str = "") -> None:
        """One backend response: a function call (`call` = name, arguments) or text, then its
        completion with usage (recorded for the runner)."""
        response_id = self.events.next_id("resp")
        self.state.backend_running += 1
        await self.backend_event(
            delegation_id, "response.created", {"response": self.backend_response(response_id, "in_progress")}
        )
        if call is not None:
            call_id = self.events.next_id("call")
            item = {
                "type": "function_call",
                "id": self.events.next_id("fc"),
                "call_id": call_id,
                "name": call[0],
                "arguments": call[1],
                "status": "completed",
            }
            self.state.open_calls.add(call_id)
            self.conn.fact("calls", [*self.conn.facts.get("calls", []), item])
            await self.backend_event(delegation_id, "response.output_item.done", {"item": item, "output_index": 0})
        for fragment in split_words(text, 2) if text else []:
            await self.backend_event(
                delegation_id,
                "response.output_text.delta",
                {"delta": fragment, "item_id": "msg_1", "output_index": 0, "content_index": 0, "logprobs": []},
            )
        usage = self.backend_usage()
        self.conn.fact("backend_usage", [*self.conn.facts.get("backend_usage", []), usage])
        self.state.backend_running -= 1
        await self.backend_event(
            delegation_id, "response.completed", {"response": self.backend_response(response_id, "completed", usage)}
        )

    async def usage_updated(self) -> None:
        """`session.usage.updated`: cumulative seconds ("Do not sum values across usage events")."""
        await self.events.send(
            "session.usage.updated",
            {"usage": {"seconds": float(self.clock_ms // 1000)}},
            {"context_window": {"usage_ratio": 0.02}},
        )
