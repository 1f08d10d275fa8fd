"""Gemini Live scenarios, played by the service of gemini_live.py against the google-genai oracle.

The Rust runner (crates/svc-provider/tests/conformance/gemini.rs) points an adapter at
`/gemini/<scenario>/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent`.
Each scenario below is the service's half of one conversation; every message svc sends on the way
is checked (gemini_oracle.py, gemini_live.py), and what the service sent is kept in the report's
`facts` for the runner's exact assertions.
"""

from __future__ import annotations

import re
from typing import Awaitable, Callable

from google.genai import types

from gemini_live import GeminiLive, usage
from wire import Conn

# How google-genai's AsyncLive.connect builds the Developer API socket path (live.py).
SOCKET_PATH = re.compile(
    r"/ws/google\.ai\.generativelanguage\.(v1|v1beta|v1alpha)\.GenerativeService\.BidiGenerateContent$"
)

# What the model says, one sentence a turn.
REPLIES = [
    "It is ten past nine in Lisbon.",
    "Your order ships on Friday morning.",
    "The museum opens at ten and closes at six.",
    "Two adults and one child, is that right?",
    "The train leaves from platform four.",
    "I found three hotels near the harbour.",
    "Your table is booked for eight o'clock.",
    "The forecast says light rain after noon.",
    "That flight has two seats left in economy.",
    "Sure, I can spell that for you again.",
]


def reply_text(turn: int) -> str:
    return REPLIES[turn % len(REPLIES)]


def turn_usage(turn: int) -> types.UsageMetadata:
    """Usage of a turn: the prompt grows with the history, as the service reports it."""
    return usage(prompt_text=310 + 45 * turn, prompt_audio=120 + 80 * turn, response_audio=60 + 7 * turn)


async def typed_turn(live: GeminiLive) -> None:
    """(a) A typed turn under svc_vad, answered with audio, transcript and usage."""
    if not await live.accept():
        return
    if await live.user_turn() is not None:
        await live.reply(reply_text(0), turn_usage(0))


async def typed_turns(live: GeminiLive) -> None:
    """(h) The greeting (a clientContent user turn), then typed turns, a background note
    between them that opens no turn; each user turn answered once."""
    if not await live.accept():
        return
    for turn in range(3):
        if await live.user_turn() is None:
            return
        await live.reply(reply_text(turn), turn_usage(turn))


async def audio_turn(live: GeminiLive) -> None:
    """(b) A spoken turn with input transcription: under svc_vad delimited by activity signals,
    under server_vad ended by audioStreamEnd (the microphone muted)."""
    if not await live.accept():
        return
    if await live.user_turn() is None:
        return
    if live.automatic_detection:
        # The server's detector reports what it heard (LiveServerMessage.voice_activity).
        for kind in (types.VoiceActivityType.ACTIVITY_START, types.VoiceActivityType.ACTIVITY_END):
            await live.send(types.LiveServerMessage(voice_activity=types.VoiceActivity(voice_activity_type=kind)))
    await live.reply(reply_text(1), turn_usage(1), input_text="Where is my order? It was due on Monday.")


async def several_turns(live: GeminiLive) -> None:
    """(c) Seven spoken turns, each with its own usageMetadata (thoughts and tool-use prompt
    tokens in some); one ends NEED_MORE_INPUT (no error), one on a safety stop."""
    if not await live.accept():
        return
    for turn in range(7):
        if await live.user_turn() is None:
            return
        metadata = turn_usage(turn)
        if turn == 2:
            metadata = usage(prompt_text=420, prompt_audio=260, response_audio=75, thoughts=38, tool_use=17, cached=64)
        reasons = {3: types.TurnCompleteReason.NEED_MORE_INPUT, 5: types.TurnCompleteReason.GENERATED_AUDIO_SAFETY}
        reason = reasons.get(turn)
        await live.reply(reply_text(turn), metadata, reason=reason)


async def barge_in(live: GeminiLive) -> None:
    """(d) server_vad: ten turns, each cut by the user after part of the reply: `interrupted`
    then at once `turnComplete` (one message when packed)."""
    if not await live.accept():
        return
    for turn in range(10):
        if await live.user_turn(audio_ms=200) is None:
            return
        await live.reply(reply_text(turn), turn_usage(turn), heard_share=0.5 + 0.04 * turn)


async def tool_blocking(live: GeminiLive) -> None:
    """(e) A blocking call: the model waits for the response, then answers."""
    if not await live.accept():
        return
    if await live.user_turn() is None:
        return
    await live.tool_call("call-1", "lookup_order", {"order_id": "A-17"})
    if await live.until("the toolResponse for call-1", lambda m: m.kind == "tool_response") is not None:
        await live.reply(reply_text(1), usage(prompt_text=520, prompt_audio=160, response_audio=70, tool_use=24))


async def tool_non_blocking(live: GeminiLive) -> None:
    """(e) NON_BLOCKING calls: the model keeps talking; the responses come later, each with the
    scheduling svc chose."""
    if not await live.accept():
        return
    if await live.user_turn() is None:
        return
    await live.tool_call("job-1", "start_job", {"kind": "report"})
    await live.reply("I'm starting that report now.", turn_usage(0))
    if await live.until("the toolResponse for job-1", lambda m: m.kind == "tool_response") is None:
        return
    await live.tool_call("job-2", "start_job", {"kind": "invoice"})
    if await live.until("the toolResponse for job-2", lambda m: m.kind == "tool_response") is None:
        return
    await live.reply("Both jobs are done.", turn_usage(1))


async def tool_cancelled(live: GeminiLive) -> None:
    """(e) A call the user interrupted (toolCallCancellation): no response may follow for it;
    the next call is answered as usual."""
    if not await live.accept():
        return
    if await live.user_turn() is None:
        return
    await live.tool_call("call-9", "lookup_order", {"order_id": "B-2"})
    await live.cancel_calls(["call-9"])
    if await live.user_turn() is None:
        return
    await live.tool_call("call-10", "lookup_order", {"order_id": "B-3"})
    if await live.until("the toolResponse for call-10", lambda m: m.kind == "tool_response") is not None:
        await live.reply(reply_text(2), turn_usage(2))


async def resume(live: GeminiLive) -> None:
    """(f) Handles, then goAway: svc resumes on a new connection with the latest handle and the
    user audio sent since it (checked when the resumed connection ends)."""
    if not await live.accept():
        return
    if live.resumed_from is not None:
        return  # the resumed connection: drain() checks what it received
    # 200 ms of user audio, a resumable handle, then one that is not (the model generating);
    # 200 ms more and the latest resumable handle; 200 ms more (to replay), and goAway.
    for updates in ((True, False), (True,), ()):
        if await live.user_turn(audio_ms=200) is None:
            return
        for resumable in updates:
            await live.issue_handle(resumable)
    await live.send(types.LiveServerMessage(go_away=types.LiveServerGoAway(time_left="10s")))


async def close_1011(live: GeminiLive) -> None:
    """(g) After ready, the service fails (close 1011): svc answers the close frame and resumes."""
    if not await live.accept():
        return
    if live.resumed_from is not None:
        return
    await live.issue_handle()
    await live.conn.close(1011, "Internal error encountered.")
    live.closed = True


async def setup_1007(live: GeminiLive) -> None:
    """(g) The service refuses the setup (close 1007): fatal for svc, no retry."""
    if await live.until("setup", lambda message: message.kind == "setup") is not None:
        await live.conn.close(1007, "Request contains an invalid argument.")
        live.closed = True


SCENARIOS: dict[str, Callable[[GeminiLive], Awaitable[None]]] = {
    "typed_turn": typed_turn,
    "typed_turns": typed_turns,
    "audio_turn": audio_turn,
    "several_turns": several_turns,
    "barge_in": barge_in,
    "tool_blocking": tool_blocking,
    "tool_non_blocking": tool_non_blocking,
    "tool_cancelled": tool_cancelled,
    "resume": resume,
    "close_1011": close_1011,
    "setup_1007": setup_1007,
}


async def serve(conn: Conn) -> None:
    """fake.py's entry: one connection of `conn.scenario`."""
    play = SCENARIOS.get(conn.scenario)
    if play is None:
        await conn.reject(f"unknown gemini scenario {conn.scenario!r}")
        return
    # AsyncLive.connect: f'{base_url}/ws/google.ai.generativelanguage.{version}.GenerativeService.{method}'
    # with the key in `x-goog-api-key`.
    if not SOCKET_PATH.search(conn.path.split("?")[0]):
        await conn.reject(f"not the Gemini Developer API socket path: {conn.path!r}")
        return
    if not conn.header("x-goog-api-key"):
        await conn.reject("no x-goog-api-key header")
        return
    live = GeminiLive(conn)
    await play(live)
    await live.drain()
