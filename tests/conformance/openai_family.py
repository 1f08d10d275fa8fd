"""The OpenAI-family fakes, as fake.py's FAMILIES table names them.

- `serve_realtime`: OpenAI Realtime GA (`/openai/<scenario>/v1/realtime?model=…`), oracle
  `openai.types.realtime` (realtime_server.py, realtime_scenarios.py).
- `serve_xai`: xAI's Grok voice agent (`/xai/<scenario>/v1/realtime?model=…`), oracle the openai
  models plus xAI's documented differences (xai_models.py).
- `serve_live`: OpenAI GPT-Live (`/live/<scenario>/v1/live/sessions`), oracle
  `openai.types.live` (live_server.py, live_scenarios.py).

The SDK oracle itself (strict validation, SDK-built server events, audio) is openai_oracle.py.
"""

from __future__ import annotations

import live_scenarios
import realtime_scenarios
from wire import Conn


async def serve_realtime(conn: Conn) -> None:
    await realtime_scenarios.serve(conn, "openai")


async def serve_xai(conn: Conn) -> None:
    await realtime_scenarios.serve(conn, "xai")


async def serve_live(conn: Conn) -> None:
    await live_scenarios.serve(conn)
