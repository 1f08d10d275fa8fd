"""A PyPI `livekit` client that answers an RPC method, for LiveKit's server-side `PerformRpc`
(which the official server SDKs do not call yet): joins `--room` as `--identity`, registers
`greet`, prints `ready`, answers one call (`hello <payload>`, and who called), then leaves. Run by
crates/svc-room/tests/server_api.rs.
"""

import argparse
import asyncio
import json

from livekit import api, rtc


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--room", required=True)
    parser.add_argument("--identity", required=True)
    args = parser.parse_args()
    token = (
        api.AccessToken(args.key, args.secret)
        .with_identity(args.identity)
        .with_grants(api.VideoGrants(room_join=True, room=args.room))
        .to_jwt()
    )
    room = rtc.Room()
    called = asyncio.Event()
    seen = {}

    async def greet(data: rtc.RpcInvocationData) -> str:
        seen["caller"] = data.caller_identity
        seen["payload"] = data.payload
        called.set()
        return f"hello {data.payload}"

    await room.connect(args.url, token)
    room.local_participant.register_rpc_method("greet", greet)
    print("ready", flush=True)
    await asyncio.wait_for(called.wait(), 30)
    await asyncio.sleep(0.5)  # the response leaves before the client does
    await room.disconnect()
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
