"""The conformance fake: provider servers built on the providers' own SDK types.

    target/conformance/venv/bin/python tests/conformance/fake.py [--framing text|binary|random]
        [--packing single|combined|random] [--seed N]

Listens on 127.0.0.1 (a free port), prints `{"port": N}` as its first stdout line, then serves
until stdin closes (the Rust runner holds it open) or it is killed. Every connection's path
names its family and scenario before the provider's own path, so a test selects both with the
base URL it gives svc:

    /gemini/<scenario>/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent
    /openai/<scenario>/v1/realtime?model=…     OpenAI Realtime     (OPENAI_BASE_URL=…/openai/<scenario>/v1)
    /xai/<scenario>/v1/realtime?model=…        xAI voice agent     (XAI_BASE_URL=…/xai/<scenario>/v1)
    /live/<scenario>/v1/live/sessions          OpenAI GPT-Live     (OPENAI_BASE_URL=…/live/<scenario>/v1)

When a connection ends, its report (wire.Conn.report) is printed as one line `{"report": …}`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import json
import sys
import traceback

from websockets.asyncio.server import ServerConnection, serve

from wire import FRAMINGS, PACKINGS, Conn, Options

# family → (module, coroutine name); imported on first use.
FAMILIES = {
    "gemini": ("gemini", "serve"),
    "openai": ("openai_family", "serve_realtime"),
    "xai": ("openai_family", "serve_xai"),
    "live": ("openai_family", "serve_live"),
}

# Larger than any frame svc sends (a setup with long instructions and tool schemas, 100 ms audio).
MAX_FRAME_BYTES = 16 << 20
# How long a finished scenario waits for svc to close the socket before reporting anyway.
CLOSE_WAIT_SECONDS = 30.0


def emit(line: dict) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framing", choices=FRAMINGS, default="random")
    parser.add_argument("--packing", choices=PACKINGS, default="random")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    options = Options(framing=args.framing, packing=args.packing, seed=args.seed)
    numbers = itertools.count()

    async def handler(ws: ServerConnection) -> None:
        parts = ws.request.path.split("/") if ws.request else []
        family, scenario = (parts[1], parts[2]) if len(parts) > 3 else ("", "")
        conn = Conn(ws, options, family, scenario, next(numbers))
        try:
            if family not in FAMILIES:
                await conn.reject(f"unknown family in path {conn.path!r}")
            else:
                module_name, function = FAMILIES[family]
                module = importlib.import_module(module_name)
                await getattr(module, function)(conn)
        except Exception:  # a bug in the fake itself: report it as a finding, never hang
            conn.violation("fake crashed: " + traceback.format_exc(limit=6))
            await conn.close(1011, "fake crashed")
        finally:
            # The scenario is over; the session may still be open until the test closes it.
            await conn.wait_closed(CLOSE_WAIT_SECONDS)
            emit({"report": conn.report()})

    async with serve(handler, "127.0.0.1", 0, max_size=MAX_FRAME_BYTES, ping_interval=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        emit({"port": port, "framing": options.framing, "packing": options.packing, "seed": options.seed})
        # Serve until the runner closes stdin (it holds the write end for the fake's lifetime).
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
