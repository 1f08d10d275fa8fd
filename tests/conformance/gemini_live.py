"""One Gemini Live connection as the service plays it: the protocol state the SDK's docstrings
describe, checked on every client message, and model turns built from SDK objects.

gemini_oracle.py says whether each message is one the SDK accepts; this module adds the rules
that depend on what came before (each cites the SDK text it comes from), answers user turns the
way the service does, and records facts (what each model turn carried) for the Rust runner.
"""

from __future__ import annotations

import asyncio
import math
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from google.genai import types

from gemini_oracle import ClientMessage, Finding, parse_client_message, round_trip_problem, server_wire
from wire import Conn

OUTPUT_RATE_HZ = 24_000
OUTPUT_AUDIO_MIME = "audio/pcm;rate=24000"
# 40 ms of reply audio per message, about what the service sends.
CHUNK_SAMPLES = OUTPUT_RATE_HZ // 25
# Reply audio per character of its transcript (about the pace of speech).
MS_PER_CHAR = 55
# Output transcription arrives in tiny fragments ("Ca", "n I"): this many characters each.
FRAGMENT_CHARS = 3
# How long the fake waits for svc's next step before it records that svc did not take it:
# longer than the runner waits for the fake (15 s), so a slow machine fails in the runner.
STEP_TIMEOUT = 20.0


class Quiet(Exception):
    """Nothing arrived in time."""


@dataclass
class HandleState:
    """A resumable handle the fake issued, and the user audio received after it (what a resume
    with this handle must replay: the handle's state does not include it)."""

    audio_after: bytearray = field(default_factory=bytearray)
    superseded: bool = False


# Handles issued by every connection of this fake, so the connection that resumes can check it.
ISSUED_HANDLES: dict[str, HandleState] = {}


@dataclass
class UserTurn:
    """A user turn the service would answer."""

    kind: str  # activity (svc_vad), client_content, text or audio (automatic detection)
    text: str = ""
    audio_bytes: int = 0


@dataclass
class Activity:
    """An open activityStart … activityEnd."""

    texts: list[str] = field(default_factory=list)
    audio_bytes: int = 0


def tone(samples: int, start: int) -> bytes:
    """Real PCM: a soft tone that glides, 16-bit little-endian at 24 kHz."""
    values = []
    for n in range(start, start + samples):
        frequency = 220.0 + (n % OUTPUT_RATE_HZ) / OUTPUT_RATE_HZ * 220.0
        values.append(int(8000 * math.sin(2 * math.pi * frequency * n / OUTPUT_RATE_HZ)))
    return struct.pack(f"<{len(values)}h", *values)


def usage(prompt_text: int, prompt_audio: int, response_audio: int, **extra: int) -> types.UsageMetadata:
    """A usageMetadata as the service reports it: modality details omitted when zero, the total
    the sum of prompt, response, tool-use prompt and thoughts (UsageMetadata.total_token_count)."""
    prompt_details = [
        types.ModalityTokenCount(modality=modality, token_count=count)
        for modality, count in ((types.MediaModality.TEXT, prompt_text), (types.MediaModality.AUDIO, prompt_audio))
        if count
    ]
    thoughts = extra.get("thoughts", 0)
    tool_use = extra.get("tool_use", 0)
    return types.UsageMetadata(
        prompt_token_count=prompt_text + prompt_audio,
        response_token_count=response_audio,
        total_token_count=prompt_text + prompt_audio + response_audio + thoughts + tool_use,
        thoughts_token_count=thoughts or None,
        tool_use_prompt_token_count=tool_use or None,
        cached_content_token_count=extra.get("cached") or None,
        prompt_tokens_details=prompt_details,
        response_tokens_details=[
            types.ModalityTokenCount(modality=types.MediaModality.AUDIO, token_count=response_audio)
        ],
    )


def content(**fields: Any) -> types.LiveServerMessage:
    """A message with one serverContent of `fields`."""
    return types.LiveServerMessage(server_content=types.LiveServerContent(**fields))


class GeminiLive:
    """The service's side of one connection."""

    def __init__(self, conn: Conn):
        self.conn = conn
        self.inbox: deque[Any] = deque()
        self.closed = False
        self.setup: Optional[ClientMessage] = None
        self.setup_complete_sent = False
        # RealtimeInputConfig.automatic_activity_detection: "If not set, automatic activity
        # detection is enabled by default."
        self.automatic_detection = True
        self.history_until_turn_complete = False
        self.activity: Optional[Activity] = None
        self.user_turns: deque[UserTurn] = deque()
        self.audio = bytearray()
        self.audio_since_turn = 0
        self.declared_behavior: dict[str, Optional[str]] = {}
        self.open_calls: dict[str, str] = {}
        self.cancelled_calls: set[str] = set()
        self.latest_handle: Optional[HandleState] = None
        self.resumed_from: Optional[HandleState] = None
        self.handles_issued = 0
        self.samples_sent = 0
        # Unknown fields and messages go out in every mode but the one closest to the service
        # (binary frames, one field per message).
        self.extras = conn.options.packing != "single"
        conn.facts.update(turns=[], user_turns=[], tool_calls=[], tool_responses=[], audio_bytes=0)

    # ---- receiving -----------------------------------------------------------------------

    async def _next_wire(self, timeout: Optional[float]) -> Any:
        if self.inbox:
            return self.inbox.popleft()
        if self.closed:
            return None
        try:
            wire = await asyncio.wait_for(self.conn.recv(), timeout)
        except asyncio.TimeoutError as error:
            raise Quiet from error
        if wire is None:
            self.closed = True
        return wire

    async def receive(self, timeout: Optional[float] = STEP_TIMEOUT) -> Optional[ClientMessage]:
        """The next client message, checked by the oracle and the protocol rules; None once
        svc closed (or the fake rejected it). Raises Quiet on timeout."""
        while True:
            wire = await self._next_wire(timeout)
            if wire is None:
                return None
            message, findings = parse_client_message(wire)
            if message is not None:
                findings += self._rules(message)
            rejected = await self._report(findings)
            if rejected:
                return None
            if message is not None:
                return message

    async def _report(self, findings: list[Finding]) -> bool:
        fatal = [finding.text for finding in findings if finding.fatal]
        for finding in findings:
            if not finding.fatal:
                self.conn.violation(finding.text)
        if fatal:
            # The service answers an invalid message with close 1007; the rest of the findings
            # go in the report with it.
            for text in fatal[1:]:
                self.conn.violation(text)
            await self.conn.reject(fatal[0])
            self.closed = True
            return True
        return False

    async def until(
        self, what: str, done: Callable[[ClientMessage], bool], timeout: float = STEP_TIMEOUT
    ) -> Optional[ClientMessage]:
        """Reads (and checks) messages until one satisfies `done`; None (with a finding) if svc
        closed first or nothing came in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                message = await self.receive(max(0.0, deadline - loop.time()))
            except Quiet:
                self.conn.violation(f"svc did not send {what} within {timeout:.0f} s")
                return None
            if message is None:
                return None
            if done(message):
                return message

    async def user_turn(self, timeout: float = STEP_TIMEOUT, audio_ms: Optional[int] = None) -> Optional[UserTurn]:
        """The next user turn the service would answer. With automatic detection, audio is a
        turn once `audio_ms` of it arrived (the server's detector heard speech), or at
        audioStreamEnd."""
        audio_bytes = None if audio_ms is None else audio_ms * 32  # 16 kHz, 16-bit

        def heard(_: ClientMessage) -> bool:
            if self.user_turns:
                return True
            return audio_bytes is not None and self.automatic_detection and self.audio_since_turn >= audio_bytes

        if not self.user_turns and await self.until("a user turn", heard, timeout) is None:
            return None
        if self.user_turns:
            turn = self.user_turns.popleft()
        else:
            turn = UserTurn("audio", audio_bytes=self.audio_since_turn)
            self.conn.facts["user_turns"].append(turn.__dict__)
        self.audio_since_turn = 0
        return turn

    async def drain(self) -> None:
        """Checks everything svc still sends until it closes the socket."""
        while not self.closed:
            try:
                await self.receive(timeout=None)
            except Quiet:
                return
        self._check_replay()

    # ---- the rules that depend on what came before --------------------------------------

    def _rules(self, message: ClientMessage) -> list[Finding]:
        findings: list[Finding] = []
        if message.kind == "setup":
            # LiveClientMessage.setup: "Message to be sent by the system when connecting to the
            # API"; AsyncLive.connect sends it first and once, and waits for the answer.
            if self.setup is not None:
                return [Finding("setup sent twice on one connection")]
            self._accept_setup(message, findings)
            return findings
        if self.setup is None:
            return [Finding(f"{message.kind} before setup: setup is the first message (AsyncLive.connect)")]
        if not self.setup_complete_sent:
            # AsyncLive.connect returns the session (and so sends nothing more) only after the
            # server answered the setup.
            findings.append(Finding(f"{message.kind} sent before setupComplete", fatal=False))
        if message.kind == "realtime_input":
            self._realtime_input(message, findings)
        elif message.kind == "client_content":
            self._client_content(message, findings)
        elif message.kind == "tool_response":
            self._tool_response(message, findings)
        return findings

    def _accept_setup(self, message: ClientMessage, findings: list[Finding]) -> None:
        self.setup = message
        detection = message.realtime_input_config and message.realtime_input_config.automatic_activity_detection
        self.automatic_detection = not (detection and detection.disabled)
        setup = message.message.setup
        assert setup is not None
        history = setup.history_config
        self.history_until_turn_complete = bool(history and history.initial_history_in_client_content)
        for tool in setup.tools or []:
            for declaration in getattr(tool, "function_declarations", None) or []:
                behavior = declaration.behavior.value if declaration.behavior else None
                self.declared_behavior[declaration.name or ""] = behavior
        self.conn.facts["automatic_detection"] = self.automatic_detection
        self.conn.facts["declared_behaviors"] = dict(self.declared_behavior)
        handle = setup.session_resumption.handle if setup.session_resumption else None
        self.conn.facts["resumed_with"] = handle
        if handle:
            state = ISSUED_HANDLES.get(handle)
            if state is None:
                findings.append(Finding(f"setup resumes with a handle this service never issued: {handle!r}"))
            elif state.superseded:
                # Only the latest resumable handle holds everything before it (the updates'
                # docstring: "New handle that represents state that can be resumed").
                findings.append(Finding(f"setup resumes with {handle!r}, not the latest resumable handle", fatal=False))
            self.resumed_from = state

    def _realtime_input(self, message: ClientMessage, findings: list[Finding]) -> None:
        realtime = message.message.realtime_input
        assert realtime is not None
        which = message.realtime_field
        if self.history_until_turn_complete:
            # HistoryConfig.initial_history_in_client_content: "After `turn_complete` is `true`,
            # the client can start the realtime conversation via `realtime_input`."
            findings.append(Finding("realtimeInput before the initial history's clientContent turnComplete"))
        if which in ("activity_start", "activity_end") and self.automatic_detection:
            # ActivityStart/ActivityEnd: "This can only be sent if automatic (i.e. server-side)
            # activity detection is disabled."
            findings.append(Finding(f"realtimeInput.{which} while automatic activity detection is enabled"))
            return
        if which == "activity_start":
            if self.activity is not None:
                findings.append(Finding("activityStart while an activity is already open", fatal=False))
            self.activity = Activity()
        elif which == "activity_end":
            if self.activity is None:
                findings.append(Finding("activityEnd without an open activity", fatal=False))
                return
            activity, self.activity = self.activity, None
            if activity.texts or activity.audio_bytes:
                self._user_turn(UserTurn("activity", "".join(activity.texts), activity.audio_bytes))
            else:
                # TurnCoverage: the default TURN_INCLUDES_ONLY_ACTIVITY turn "only includes
                # activity since the last turn": an empty one gives the model nothing to answer
                # (and audio that comes after it is in no turn).
                findings.append(Finding("activityStart … activityEnd with no audio or text in between", fatal=False))
        elif which == "audio_stream_end":
            # audio_stream_end: "This should only be sent when automatic activity detection is
            # enabled (which is the default)."
            if not self.automatic_detection:
                findings.append(Finding("audioStreamEnd while automatic activity detection is disabled", fatal=False))
            elif self.audio_since_turn:
                self._user_turn(UserTurn("audio", audio_bytes=self.audio_since_turn))
        elif which == "text":
            text = realtime.text or ""
            if self.automatic_detection:
                # AutomaticActivityDetection.disabled: "If enabled, detected voice and text input
                # count as activity."
                self._user_turn(UserTurn("text", text))
            elif self.activity is not None:
                self.activity.texts.append(text)
            else:
                # ... "If disabled, the client must send activity signals": text outside
                # activityStart … activityEnd is no activity, so the model does not answer it.
                findings.append(
                    Finding(
                        "realtimeInput.text outside activityStart … activityEnd while automatic activity "
                        "detection is disabled: not a user turn, the model does not answer it",
                        fatal=False,
                    )
                )
        elif which == "audio" and realtime.audio is not None:
            data = realtime.audio.data or b""
            self.audio += data
            self.audio_since_turn += len(data)
            self.conn.facts["audio_bytes"] = len(self.audio)
            if self.activity is not None:
                self.activity.audio_bytes += len(data)
            if self.latest_handle is not None:
                self.latest_handle.audio_after += data

    def _client_content(self, message: ClientMessage, findings: list[Finding]) -> None:
        turn_content = message.message.client_content
        assert turn_content is not None
        if turn_content.turn_complete:
            self.history_until_turn_complete = False
            turns = turn_content.turns or []
            # LiveClientContent.turn_complete: "If true, indicates that the server content
            # generation should start with the currently accumulated prompt."
            if turns and turns[-1].role == "user":
                text = "".join(part.text or "" for part in turns[-1].parts or [])
                self._user_turn(UserTurn("client_content", text))
        roles = [turn.role for turn in turn_content.turns or []]
        self.conn.facts.setdefault("client_content", []).append(
            {"roles": roles, "turn_complete": bool(turn_content.turn_complete)}
        )

    def _tool_response(self, message: ClientMessage, findings: list[Finding]) -> None:
        response = message.message.tool_response
        assert response is not None
        for function_response in response.function_responses or []:
            call_id = function_response.id or ""
            as_sent = function_response.model_dump(mode="json", by_alias=True, exclude_none=True)
            self.conn.facts["tool_responses"].append(as_sent)
            if call_id in self.cancelled_calls:
                # LiveServerToolCallCancellation: the calls "should have been not executed and
                # should be cancelled".
                findings.append(Finding(f"toolResponse for cancelled call {call_id!r}", fatal=False))
                continue
            name = self.open_calls.pop(call_id, None)
            if name is None:
                # LiveClientToolResponse: "matched to the respective FunctionCall objects by the id".
                findings.append(Finding(f"toolResponse for {call_id!r}, which is no open call", fatal=False))
                continue
            if function_response.name != name:
                text = f"toolResponse {call_id!r} names {function_response.name!r}, the call was {name!r}"
                findings.append(Finding(text, fatal=False))
            if function_response.scheduling is not None and self.declared_behavior.get(name) != "NON_BLOCKING":
                # FunctionResponse.scheduling: "Only applicable to NON_BLOCKING function calls,
                # is ignored otherwise."
                text = f"toolResponse {call_id!r}: scheduling on a call that is not NON_BLOCKING"
                findings.append(Finding(text, fatal=False))

    def _user_turn(self, turn: UserTurn) -> None:
        self.user_turns.append(turn)
        self.conn.facts["user_turns"].append(turn.__dict__)

    # ---- sending ---------------------------------------------------------------------------

    async def send(self, message: types.LiveServerMessage, unknown_field: bool = False) -> None:
        """Serializes `message`, checks the SDK reads it back as the same object, and sends it."""
        # The base64 alphabet of audio: the service's (standard) where the run is closest to
        # it, pydantic's URL-safe one when combined, either when random.
        packing = self.conn.options.packing
        standard = packing == "single" or (packing == "random" and self.conn.rng.random() < 0.5)
        wire = server_wire(message, standard_base64=standard)
        if unknown_field and self.extras and "serverContent" in wire:
            # A field newer than the pinned SDK inside a known message: the SDK drops it
            # (_common._remove_extra_fields); svc must ignore it too.
            wire["serverContent"]["futureSignal"] = {"level": 2, "note": "added after google-genai 3.6.1"}
        problem = round_trip_problem(message, wire)
        if problem:
            self.conn.violation(f"fake bug: a server message does not round-trip through the SDK: {problem}")
        if not self.closed and not await self.conn.send(wire):
            self.closed = True

    async def send_unknown_message(self) -> None:
        """A top-level message newer than the pinned SDK. google-genai's receive path cannot
        take it (a message with no known field becomes an APIError in AsyncSession._receive), so
        there is nothing to round-trip; the service may still add message types (voiceActivity
        came after the others), and svc must ignore one it does not know."""
        if self.extras and not self.closed:
            if not await self.conn.send({"futureServerEvent": {"sequence": len(self.conn.facts["turns"])}}):
                self.closed = True

    async def accept(self, settle: float = 0.15, session_id: Optional[str] = "conformance-session") -> bool:
        """Reads the setup and answers setupComplete after `settle` seconds, checking that svc
        sends nothing meanwhile. False when the setup was refused or svc left."""
        message = await self.until("setup", lambda _: True)
        if message is None:
            return False
        if message.kind != "setup":
            return False
        try:
            early = await self._next_wire(settle)
        except Quiet:
            early = None
        if early is not None:
            # AsyncLive.connect hands out the session (so sends nothing more) only once the
            # server answered the setup.
            kind = next(iter(early), "?") if isinstance(early, dict) else "?"
            self.conn.violation(f"{kind} sent before setupComplete")
            self.inbox.append(early)  # and checked like any other message
        # Whether the Developer API names the session is not documented: both ways, then.
        session_id = session_id if self.conn.options.packing != "single" else None
        self.conn.facts["session_id"] = session_id
        await self.send(types.LiveServerMessage(setup_complete=types.LiveServerSetupComplete(session_id=session_id)))
        self.setup_complete_sent = True
        return not self.closed

    async def issue_handle(self, resumable: bool = True) -> Optional[str]:
        """A sessionResumptionUpdate; a resumable one carries a new handle."""
        handle = None
        if resumable:
            self.handles_issued += 1
            handle = f"handle-{self.conn.index}-{self.handles_issued}"
            if self.latest_handle is not None:
                self.latest_handle.superseded = True
            self.latest_handle = ISSUED_HANDLES[handle] = HandleState()
        update = types.LiveServerSessionResumptionUpdate(new_handle=handle or "", resumable=resumable)
        await self.send(types.LiveServerMessage(session_resumption_update=update))
        self.conn.facts.setdefault("handles", []).append(handle)
        return handle

    async def tool_call(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        self.open_calls[call_id] = name
        call = types.FunctionCall(id=call_id, name=name, args=args)
        self.conn.facts["tool_calls"].append({"id": call_id, "name": name, "args": args})
        await self.send(types.LiveServerMessage(tool_call=types.LiveServerToolCall(function_calls=[call])))

    async def cancel_calls(self, call_ids: list[str]) -> None:
        for call_id in call_ids:
            self.open_calls.pop(call_id, None)
            self.cancelled_calls.add(call_id)
        cancellation = types.LiveServerToolCallCancellation(ids=call_ids)
        await self.send(types.LiveServerMessage(tool_call_cancellation=cancellation))

    async def reply(
        self,
        text: str,
        metadata: types.UsageMetadata,
        *,
        heard_share: Optional[float] = None,
        input_text: Optional[str] = None,
        reason: Optional[types.TurnCompleteReason] = None,
    ) -> None:
        """One model turn: audio and output transcription fragments, then the turn's end with
        its usage. With `heard_share`, the user barges in after that share of the turn: per
        LiveServerContent.generation_complete, an interrupted turn "will go through interrupted >
        turn_complete" with no generationComplete."""
        samples = len(text) * MS_PER_CHAR * OUTPUT_RATE_HZ // 1000
        pcm = tone(samples, self.samples_sent)
        self.samples_sent += samples
        chunks = [pcm[at : at + CHUNK_SAMPLES * 2] for at in range(0, len(pcm), CHUNK_SAMPLES * 2)]
        fragments = [text[at : at + FRAGMENT_CHARS] for at in range(0, len(text), FRAGMENT_CHARS)]
        steps = max(len(chunks), len(fragments))
        stop = steps if heard_share is None else max(1, int(steps * heard_share))
        facts: dict[str, Any] = {"audio_samples": 0, "transcript": "", "interrupted": heard_share is not None}
        self.conn.facts["turns"].append(facts)
        await self.send_unknown_message()
        if input_text:
            for at in range(0, len(input_text), FRAGMENT_CHARS * 2):
                piece = types.Transcription(text=input_text[at : at + FRAGMENT_CHARS * 2])
                await self.send(content(input_transcription=piece))
            facts["input_transcript"] = input_text
        for step in range(stop):
            audio = chunks[step] if step < len(chunks) else None
            fragment = fragments[step] if step < len(fragments) else None
            blob = types.Blob(data=audio, mime_type=OUTPUT_AUDIO_MIME)
            model_turn = types.Content(parts=[types.Part(inline_data=blob)]) if audio else None
            transcription = types.Transcription(text=fragment) if fragment else None
            facts["audio_samples"] += len(audio or b"") // 2
            facts["transcript"] += fragment or ""
            last = step == stop - 1 and heard_share is None
            if self.conn.pack():
                # One serverContent may carry all of these (and the last one the turn's end,
                # with usageMetadata beside it).
                packed = types.LiveServerContent(
                    model_turn=model_turn,
                    output_transcription=transcription,
                    generation_complete=True if last else None,
                    turn_complete=True if last else None,
                    turn_complete_reason=reason if last else None,
                )
                message = types.LiveServerMessage(server_content=packed, usage_metadata=metadata if last else None)
                await self.send(message, unknown_field=step == 0)
                if last:
                    facts["usage"] = metadata.model_dump(mode="json", by_alias=True, exclude_none=True)
                    return
                continue
            if model_turn:
                await self.send(content(model_turn=model_turn), unknown_field=step == 0)
            if transcription:
                await self.send(content(output_transcription=transcription))
        await self._end_turn(metadata, facts, interrupted=heard_share is not None, reason=reason)

    async def _end_turn(
        self,
        metadata: types.UsageMetadata,
        facts: dict[str, Any],
        interrupted: bool,
        reason: Optional[types.TurnCompleteReason],
    ) -> None:
        facts["usage"] = metadata.model_dump(mode="json", by_alias=True, exclude_none=True)
        if self.conn.pack():
            packed = types.LiveServerContent(
                interrupted=True if interrupted else None,
                generation_complete=None if interrupted else True,
                turn_complete=True,
                turn_complete_reason=reason,
            )
            await self.send(types.LiveServerMessage(server_content=packed, usage_metadata=metadata))
            return
        await self.send(content(interrupted=True) if interrupted else content(generation_complete=True))
        await self.send(types.LiveServerMessage(usage_metadata=metadata))
        await self.send(content(turn_complete=True, turn_complete_reason=reason))

    # ---- resumption ----------------------------------------------------------------------

    def _check_replay(self) -> None:
        """A resumed connection must first receive the user audio sent after the handle was
        issued (LiveServerSessionResumptionUpdate.last_consumed_client_message_index: a client
        reconnecting after GoAway keeps its state "by buffering messages sent since last
        `SessionResumptionTokenUpdate`"), and nothing the handle already holds."""
        if self.resumed_from is None:
            return
        expected = bytes(self.resumed_from.audio_after)
        self.conn.facts["replay_expected_bytes"] = len(expected)
        if not bytes(self.audio).startswith(expected):
            got = len(self.audio)
            self.conn.violation(
                f"the resumed connection did not start with the {len(expected)} bytes of user audio sent after the "
                f"last resumable update ({got} bytes arrived here): audio lost or duplicated across the rotation"
            )
