"""The OpenAI Realtime and xAI scenarios, by name (the path's `<scenario>` segment).

Each plays one conversation on a `RealtimeServer` and records, as facts, what the runner checks
the adapter's events against (what was played, the session svc configured, …). A scenario that
waits in vain for svc returns early; the runner then fails on the missing events.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from openai_oracle import sentence
from realtime_server import RealtimeServer
from wire import Conn

# Server-VAD barge-ins back to back in `barge_in`.
BARGE_INS = 10
# Connections seen per (family, scenario) by this fake process (one process serves one test).
CONNECTIONS: dict[tuple[str, str], int] = {}


async def config(server: RealtimeServer) -> None:
    """The session svc configures, then its greeting: OpenAI asks for a response with
    instructions; xAI sends a `force_message` and the server plays its whole lifecycle."""
    if not await server.handshake():
        return
    if server.xai:
        created = await server.expect("conversation.item.create")
        if created is None:
            return
        server.conn.fact("greeting_item", created["item"])
        text = "".join(part.get("text", "") for part in created["item"].get("content", []))
        await server.play_response(text, chunks=4)
    else:
        create = await server.expect("response.create")
        if create is None:
            return
        server.conn.fact("greeting_create", create)
        await server.play_response(sentence(server.conn.rng, 8), chunks=4)


async def typed_turn(server: RealtimeServer) -> None:
    """A typed user turn and its spoken answer."""
    if not await server.handshake() or not await answer_typed_turn(server):
        return
    await server.play_response(sentence(server.conn.rng, 12), chunks=6)


async def answer_typed_turn(server: RealtimeServer) -> bool:
    """svc's user text item and its `response.create`."""
    created = await server.expect("conversation.item.create")
    if created is None:
        return False
    server.conn.fact("user_items", [*server.conn.facts.get("user_items", []), created["item"]])
    return await server.expect("response.create") is not None


async def text_reply(server: RealtimeServer) -> None:
    """A typed turn in a text-only session, answered in text."""
    if not await server.handshake() or not await answer_typed_turn(server):
        return
    await server.play_text(sentence(server.conn.rng, 10), parts=4)


async def audio_turn(server: RealtimeServer) -> None:
    """A spoken user turn under server VAD: speech start once audio arrives, the end of the
    turn after a second of it, the input transcription, the server's own response."""
    if not await server.handshake() or not await server.wait_input_ms(300):
        return
    item_id = await server.speech_started()
    if not await server.wait_input_ms(1000):
        return
    await server.user_turn(item_id, sentence(server.conn.rng, 7), corrections=True)
    await server.play_response(sentence(server.conn.rng, 9), chunks=5)
    server.conn.fact("input_tone_hz", server.audio_in.tone_hz())


async def activity_end(server: RealtimeServer) -> None:
    """The client ends a spoken turn (`activity-end`) before the server's detector would: svc
    commits the buffer itself and asks for the answer."""
    if not await server.handshake() or not await server.wait_input_ms(300):
        return
    item_id = await server.speech_started()
    if await server.expect("input_audio_buffer.commit") is None:
        return
    await server.committed_by_client(item_id, sentence(server.conn.rng, 6))
    if await server.expect("response.create") is None:
        return
    await server.play_response(sentence(server.conn.rng, 8), chunks=4)


async def barge_in(server: RealtimeServer) -> None:
    """`BARGE_INS` responses each cut by server VAD while streaming (the cancelled response
    ends at once), each answered by svc's truncate; then one response plays out."""
    if not await server.handshake() or not await answer_typed_turn(server):
        return
    for _ in range(BARGE_INS):
        played = await server.play_response(sentence(server.conn.rng, 10), chunks=5, barge_in=True)
        if await server.expect("conversation.item.truncate", timeout=5) is None:
            return
        assert played.user_item is not None
        await server.user_turn(played.user_item, sentence(server.conn.rng, 4))
    await server.play_response(sentence(server.conn.rng, 6), chunks=3)


async def tool_call(server: RealtimeServer) -> None:
    """The model calls a tool; svc answers with a `function_call_output` and one
    `response.create`; the model speaks the result."""
    if not await server.handshake() or not await answer_typed_turn(server):
        return
    await server.play_tool_call("lookup_order", '{"order_id": "42", "verbose": false}')
    output = await server.expect("conversation.item.create")
    if output is None:
        return
    server.conn.fact("tool_output_item", output["item"])
    if await server.expect("response.create") is None:
        return
    await server.play_response(sentence(server.conn.rng, 8), chunks=4)


async def per_turn_error(server: RealtimeServer) -> None:
    """An `invalid_request_error` refusing svc's `response.create` (per turn: providers.md
    §1.5), then a second typed turn that is answered."""
    if not await server.handshake():
        return
    created = await server.expect("conversation.item.create")
    create = await server.expect("response.create")
    if created is None or create is None:
        return
    error = ("invalid_request_error", "invalid_value", "Invalid value: 'response.create' was refused for this test.")
    server.conn.fact("error", list(error))
    await server.send_error(*error, event_id=create.get("event_id"))
    if not await answer_typed_turn(server):
        return
    await server.play_response(sentence(server.conn.rng, 6), chunks=3)


async def fatal_error(server: RealtimeServer) -> None:
    """A billing error (fatal: providers.md §1.5); svc must end the session and close."""
    if not await server.handshake():
        return
    error = ("insufficient_quota", "insufficient_quota", "You exceeded your current quota.")
    server.conn.fact("error", list(error))
    await server.send_error(*error)


async def server_close(server: RealtimeServer) -> None:
    """The service closes the first connection (1001, going away) after the handshake: svc must
    answer the close frame and reconnect; the second connection is served normally."""
    key = (server.conn.family, server.conn.scenario)
    CONNECTIONS[key] = CONNECTIONS.get(key, 0) + 1
    if not await server.handshake():
        return
    if CONNECTIONS[key] == 1:
        await asyncio.sleep(0.05)
        await server.conn.close(1001, "going away")


async def drop_mid_speech(server: RealtimeServer) -> None:
    """The first connection fails while svc streams the user's speech: after 1.5 s of audio
    (a ping and its pong on the way: svc knows what was read) the service stops reading for
    0.3 s and drops the connection with no close frame. Each connection records the audio it
    got as runs of one value (the runner sends each frame as one value), so the runner can tell
    that nothing was lost across the two and that what was read is not sent again."""
    key = (server.conn.family, server.conn.scenario)
    CONNECTIONS[key] = CONNECTIONS.get(key, 0) + 1
    server.audio_in.runs = []
    if not await server.handshake():
        return
    if CONNECTIONS[key] == 1 and await server.wait_input_ms(1_500):
        await server.conn.cut(0.3)


SCENARIOS: dict[str, Callable[[RealtimeServer], Awaitable[None]]] = {
    "config": config,
    "typed_turn": typed_turn,
    "text_reply": text_reply,
    "audio_turn": audio_turn,
    "activity_end": activity_end,
    "barge_in": barge_in,
    "tool_call": tool_call,
    "per_turn_error": per_turn_error,
    "fatal_error": fatal_error,
    "server_close": server_close,
    "drop_mid_speech": drop_mid_speech,
}


async def serve(conn: Conn, dialect: str) -> None:
    """Plays `conn.scenario` as OpenAI Realtime (`dialect` "openai") or xAI ("xai")."""
    scenario = SCENARIOS.get(conn.scenario)
    if scenario is None:
        await conn.reject(f"unknown {dialect} scenario {conn.scenario!r}")
        return
    server = RealtimeServer(conn, dialect)
    await scenario(server)
    conn.fact("events_sent", server.events.sent)
