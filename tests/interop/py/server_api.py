"""LiveKit's server API against svc's room, driven by the official server SDK (PyPI `livekit-api`)
while an official client (PyPI `livekit`) sits in the room.

Prints one JSON object: what each call answered (or the error it raised), for the Rust test
(crates/svc-room/tests/server_api.rs) to judge. Exits non-zero only when the harness itself breaks.
"""

import argparse
import asyncio
import json

from livekit import api, rtc


def error_of(exc):
    return {"code": getattr(exc, "code", type(exc).__name__), "status": getattr(exc, "status", None)}


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    args = parser.parse_args()
    out = {}

    lk = api.LiveKitAPI(args.url, args.key, args.secret)
    room_service = lk.room

    created = await room_service.create_room(
        api.CreateRoomRequest(name="sdk-room", empty_timeout=120, max_participants=7, metadata="from the sdk")
    )
    out["created"] = {
        "name": created.name,
        "sid": created.sid,
        "metadata": created.metadata,
        "empty_timeout": created.empty_timeout,
        "max_participants": created.max_participants,
        "creation_time": created.creation_time,
    }
    again = await room_service.create_room(api.CreateRoomRequest(name="sdk-room", metadata="ignored"))
    out["created_again"] = {"sid": again.sid, "metadata": again.metadata}

    # A real client joins the room the SDK created.
    token = (
        api.AccessToken(args.key, args.secret)
        .with_identity("py-user")
        .with_name("Python user")
        .with_grants(api.VideoGrants(room_join=True, room="sdk-room"))
        .to_jwt()
    )
    room = rtc.Room()
    disconnected = asyncio.Event()
    room.on("disconnected", lambda reason: disconnected.set())
    await room.connect(args.url, token)

    listed = await room_service.list_rooms(api.ListRoomsRequest())
    out["listed"] = sorted((r.name, r.num_participants) for r in listed.rooms)
    named = await room_service.list_rooms(api.ListRoomsRequest(names=["sdk-room", "no-such-room"]))
    out["listed_by_name"] = [r.name for r in named.rooms]

    participants = await room_service.list_participants(api.ListParticipantsRequest(room="sdk-room"))
    out["participants"] = [(p.identity, p.name, p.state) for p in participants.participants]
    one = await room_service.get_participant(api.RoomParticipantIdentity(room="sdk-room", identity="py-user"))
    out["participant"] = {"identity": one.identity, "sid": one.sid, "name": one.name}

    errors = {}
    try:
        await room_service.get_participant(api.RoomParticipantIdentity(room="sdk-room", identity="nobody"))
    except api.TwirpError as exc:
        errors["unknown_identity"] = error_of(exc)
    try:
        await room_service.list_participants(api.ListParticipantsRequest(room="no-such-room"))
    except api.TwirpError as exc:
        errors["unknown_room"] = error_of(exc)
    try:
        await room_service.delete_room(api.DeleteRoomRequest(room="no-such-room"))
    except api.TwirpError as exc:
        errors["delete_unknown_room"] = error_of(exc)
    try:
        await room_service.create_room(api.CreateRoomRequest(name=""))
    except api.TwirpError as exc:
        errors["empty_name"] = error_of(exc)
    # Signed with another secret: not authenticated.
    wrong = api.LiveKitAPI(args.url, args.key, "not-the-secret-0123456789abcdefghij")
    try:
        await wrong.room.list_rooms(api.ListRoomsRequest())
    except api.TwirpError as exc:
        errors["wrong_secret"] = error_of(exc)
    await wrong.aclose()
    out["errors"] = errors

    await room_service.delete_room(api.DeleteRoomRequest(room="sdk-room"))
    try:
        await asyncio.wait_for(disconnected.wait(), 10)
        out["client_disconnected"] = True
    except asyncio.TimeoutError:
        out["client_disconnected"] = False
    after = await room_service.list_rooms(api.ListRoomsRequest())
    out["after_delete"] = [r.name for r in after.rooms]

    await room.disconnect()
    await lk.aclose()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
