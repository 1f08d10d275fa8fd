"""One fake connection's wire: framing, recording, violations and the end-of-connection report.

A family module (gemini.py, openai_family.py) receives a `Conn` and plays a scenario on it. It
never touches the socket itself: `send` chooses the frame type the run asked for (text, binary,
or a seeded random choice per frame), `recv` parses and records what svc sent, `violation`
records a finding, and `reject` also closes the socket with 1007 as the real services do for an
invalid message. When the handler returns, the report (every frame both ways, the violations, and
the close frame svc sent) is printed as one JSON line on stdout for the Rust runner to read.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any, Optional, Union

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

FRAMINGS = ("text", "binary", "random")
PACKINGS = ("single", "combined", "random")


@dataclass(frozen=True)
class Options:
    """How this run frames and packs server messages."""

    framing: str = "random"
    packing: str = "random"
    seed: int = 0


def summarize(value: Any) -> Any:
    """The value with long base64 strings (audio, images) shortened, for readable reports."""
    if isinstance(value, dict):
        return {key: summarize(item) for key, item in value.items()}
    if isinstance(value, list):
        return [summarize(item) for item in value]
    if isinstance(value, str) and len(value) > 200:
        return f"<{len(value)} chars>"
    return value


class Conn:
    """One accepted WebSocket and everything recorded about it."""

    def __init__(self, ws: ServerConnection, options: Options, family: str, scenario: str, index: int):
        self.ws = ws
        self.options = options
        self.family = family
        self.scenario = scenario
        self.index = index
        # One generator per connection, seeded from the run's seed and the connection's number,
        # so a failing run replays exactly with the same --seed.
        self.rng = random.Random(options.seed * 1_000_003 + index)
        self.started = time.monotonic()
        self.frames: list[dict[str, Any]] = []
        self.violations: list[str] = []
        # What the scenario did that the runner checks the adapter against (what it sent,
        # what it counted), by name; reported beside the frames.
        self.facts: dict[str, Any] = {}
        self.closed_by_fake: Optional[tuple[int, str]] = None

    # ---- what the scenario uses ----------------------------------------------------------

    @property
    def path(self) -> str:
        return self.ws.request.path if self.ws.request else ""

    def header(self, name: str) -> Optional[str]:
        return self.ws.request.headers.get(name) if self.ws.request else None

    def pack(self) -> bool:
        """Whether to combine the next messages into one where the protocol allows it."""
        if self.options.packing == "single":
            return False
        if self.options.packing == "combined":
            return True
        return self.rng.random() < 0.5

    async def send(self, message: dict[str, Any]) -> bool:
        """Sends one JSON message in this run's framing; False once the socket is closed."""
        text = json.dumps(message, separators=(",", ":"))
        framing = self.options.framing
        if framing == "random":
            framing = "binary" if self.rng.random() < 0.5 else "text"
        data: Union[str, bytes] = text.encode() if framing == "binary" else text
        self._record("out", framing, message)
        try:
            await self.ws.send(data)
            return True
        except ConnectionClosed:
            return False

    async def recv(self, timeout: Optional[float] = None) -> Optional[dict[str, Any]]:
        """The next client message as JSON (recorded), None when the socket closed or timed out.

        A frame that is not a JSON object is a violation (the services answer it with 1007).
        """
        import asyncio

        while True:
            try:
                data = await asyncio.wait_for(self.ws.recv(), timeout) if timeout else await self.ws.recv()
            except (ConnectionClosed, asyncio.TimeoutError):
                return None
            framing = "binary" if isinstance(data, bytes) else "text"
            try:
                message = json.loads(data)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._record("in", framing, {"$unparsable": str(data)[:200]})
                await self.reject("client sent a frame that is not JSON")
                return None
            self._record("in", framing, message)
            if not isinstance(message, dict):
                await self.reject("client sent JSON that is not an object")
                return None
            return message

    def violation(self, text: str) -> None:
        """Records a conformance finding (the run fails on any)."""
        self.violations.append(text)

    def fact(self, name: str, value: Any) -> None:
        """Records a fact of the scenario for the runner (the last value under a name wins)."""
        self.facts[name] = value

    async def reject(self, text: str) -> None:
        """A violation the real service would answer by closing: close 1007 with the reason."""
        self.violation(text)
        await self.close(1007, f"conformance: {text}"[:120])

    async def wait_closed(self, timeout: float) -> None:
        """Waits (bounded) until svc closes the socket, so the report holds its close frame."""
        import asyncio

        try:
            await asyncio.wait_for(self.ws.wait_closed(), timeout)
        except asyncio.TimeoutError:
            self.violation(f"svc did not close the socket within {timeout:.0f} s of the scenario's end")

    async def cut(self, stall_seconds: float) -> None:
        """The service's side of the connection fails with no close frame, as when its host
        dies: it stops reading for `stall_seconds` (what svc sends meanwhile stays unread in the
        socket), then drops the connection, which discards the unread bytes (a TCP reset).
        Reported as `closed_by_fake` [1006, "cut"]."""
        import asyncio

        self.closed_by_fake = (1006, "cut")
        self.ws.transport.pause_reading()
        await asyncio.sleep(stall_seconds)
        self.ws.transport.abort()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed_by_fake is None:
            self.closed_by_fake = (code, reason)
        try:
            await self.ws.close(code, reason)
        except ConnectionClosed:
            pass

    # ---- the report ----------------------------------------------------------------------

    def _record(self, direction: str, framing: str, message: Any) -> None:
        ms = int((time.monotonic() - self.started) * 1000)
        self.frames.append({"t_ms": ms, "dir": direction, "frame": framing, "json": summarize(message)})

    def report(self) -> dict[str, Any]:
        protocol = self.ws.protocol
        client_close = protocol.close_rcvd
        return {
            "family": self.family,
            "scenario": self.scenario,
            "connection": self.index,
            "path": self.path,
            "violations": self.violations,
            "facts": self.facts,
            "client_close": None if client_close is None else {"code": client_close.code, "reason": client_close.reason},
            "closed_by_fake": None if self.closed_by_fake is None else list(self.closed_by_fake),
            # When the fake closed first: did svc answer with a close frame (RFC 6455 §5.5.1)?
            "client_answered_close": bool(protocol.close_rcvd_then_sent is False and client_close is not None),
            "frames": self.frames,
        }
