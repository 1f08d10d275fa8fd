"""The GPT-Live scenarios, by name (the path's `<scenario>` segment).

GPT-Live owns its turns: the model speaks a continuous audio stream (silence included), the
user's words come as timed transcript fragments, and work is delegated: to a Responses backend
the service runs (`responses`, with function calls answered by svc) or to the application
(`client`, answered with appends). Each scenario records, as facts, what the runner checks the
adapter's events against.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from live_server import LiveServer
from openai_oracle import sentence
from wire import Conn

BARGE_INS = 10
# Silence after a response, in 100 ms chunks: svc's energy gate ends a response after 0.8 s.
TAIL = 9
# After a barge-in the model falls silent, and its stream goes on at the pace of time: svc's
# answer to `Interrupted` has the 0.8 s its energy gate waits before the reply's end.
SILENCE_EVERY_SECONDS = 0.1
CONNECTIONS: dict[str, int] = {}


async def config(server: LiveServer) -> None:
    """The strict `session.start` (recorded and validated on arrival)."""
    await server.handshake()


async def typed_turn(server: LiveServer) -> None:
    """svc's typed turn (a commentary append, GPT-Live has no user text channel) and the
    model's spoken reply; usage comes as cumulative seconds, which are not tokens."""
    if not await server.handshake() or await server.expect("session.commentary.append") is None:
        return
    if server.conn.pack():
        await server.events.send("info", {"code": "conformance_notice", "message": "an info event svc may log"})
        await server.events.send_unknown("session.conformance_probe.updated")
    await server.speak(sentence(server.conn.rng, 12), voiced=6, silent=TAIL)
    await server.usage_updated()


async def audio_turn(server: LiveServer) -> None:
    """The user speaks (svc's audio, then the transcript of it), the model answers."""
    if not await server.handshake() or not await server.wait_input_ms(600):
        return
    await server.user_says(sentence(server.conn.rng, 6), gap_ms=100)
    if not await server.wait_input_ms(1000):
        return
    await server.speak(sentence(server.conn.rng, 8), voiced=5, silent=TAIL)
    server.conn.fact("input_tone_hz", server.audio_in.tone_hz())


async def barge_in(server: LiveServer) -> None:
    """`BARGE_INS` times: the model speaks, the user's words arrive while it does (the model
    stops: silence follows at the pace of time); then one reply plays out."""
    if not await server.handshake() or await server.expect("session.commentary.append") is None:
        return
    for _ in range(BARGE_INS):
        await server.speak(sentence(server.conn.rng, 10), voiced=5)
        await server.user_says(sentence(server.conn.rng, 3), gap_ms=900)
        await server.speak("", voiced=0, silent=TAIL, silence_every=SILENCE_EVERY_SECONDS)
    await server.speak(sentence(server.conn.rng, 6), voiced=3, silent=TAIL)


async def tool_call(server: LiveServer) -> None:
    """`responses` delegation: the backend calls a function, svc answers it and asks the
    backend to continue once nothing is open, the backend answers, the model speaks."""
    if not await server.handshake() or await server.expect("session.commentary.append") is None:
        return
    delegation_id = await server.delegate("responses")
    await server.backend_run(delegation_id, call=("lookup_order", '{"order_id": "42"}'))
    if await server.expect("response.item.create") is None or await server.expect("response.create") is None:
        return
    await server.backend_run(delegation_id, text="Order 42 shipped on Friday.")
    await server.speak("Your order shipped on Friday.", voiced=4, silent=TAIL)


async def client_delegation(server: LiveServer) -> None:
    """`client` delegation: the model delegates, svc's appends (thinking, a long commentary cut
    to the cap, a session-wide instruction) come back tagged with the delegation's id."""
    if not await server.handshake() or await server.expect("session.commentary.append") is None:
        return
    server.conn.fact("delegation_id", await server.delegate("client"))
    if await server.expect("session.instructions.append") is None:
        return
    await server.speak("You have two meetings tomorrow.", voiced=4, silent=TAIL)


async def per_turn_error(server: LiveServer) -> None:
    """A refused command (the session stays open: a command error does not close it), then a
    second typed turn that is answered."""
    if not await server.handshake():
        return
    first = await server.expect("session.commentary.append")
    if first is None:
        return
    error = ("invalid_request_error", "invalid_value", "Invalid value: the append was refused for this test.")
    server.conn.fact("error", list(error))
    await server.send_error(*error, first)
    if await server.expect("session.commentary.append") is None:
        return
    await server.speak(sentence(server.conn.rng, 6), voiced=3, silent=TAIL)


async def fatal_error(server: LiveServer) -> None:
    """A billing error (fatal: providers.md §1.5)."""
    if not await server.handshake():
        return
    error = ("insufficient_quota", "insufficient_quota", "You exceeded your current quota.")
    server.conn.fact("error", list(error))
    await server.send_error(*error)


async def server_close(server: LiveServer) -> None:
    """The service closes the first connection (1001); the second is served normally."""
    CONNECTIONS[server.conn.scenario] = CONNECTIONS.get(server.conn.scenario, 0) + 1
    if not await server.handshake():
        return
    if CONNECTIONS[server.conn.scenario] == 1:
        await asyncio.sleep(0.05)
        await server.conn.close(1001, "going away")


SCENARIOS: dict[str, Callable[[LiveServer], Awaitable[None]]] = {
    "config": config,
    "typed_turn": typed_turn,
    "audio_turn": audio_turn,
    "barge_in": barge_in,
    "tool_call": tool_call,
    "client_delegation": client_delegation,
    "per_turn_error": per_turn_error,
    "fatal_error": fatal_error,
    "server_close": server_close,
}


async def serve(conn: Conn) -> None:
    scenario = SCENARIOS.get(conn.scenario)
    if scenario is None:
        await conn.reject(f"unknown GPT-Live scenario {conn.scenario!r}")
        return
    server = LiveServer(conn)
    await scenario(server)
    conn.fact("events_sent", server.events.sent)
