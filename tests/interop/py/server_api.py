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
        api.CreateRoomRequest(
            name="sdk-room", empty_timeout=120, departure_timeout=30, max_participants=7, metadata="from the sdk"
        )
    )
    out["created"] = {
        "name": created.name,
        "sid": created.sid,
        "metadata": created.metadata,
        "empty_timeout": created.empty_timeout,
        "departure_timeout": created.departure_timeout,
        "max_participants": created.max_participants,
        "creation_time": created.creation_time,
    }
    again = await room_service.create_room(api.CreateRoomRequest(name="sdk-room", metadata="ignored"))
    out["created_again"] = {"sid": again.sid, "metadata": again.metadata}

    # A real client joins the room the SDK created.
    def join_token(identity, name=None, room_name="sdk-room"):
        token = api.AccessToken(args.key, args.secret).with_identity(identity)
        if name is not None:
            token = token.with_name(name)
        return token.with_grants(api.VideoGrants(room_join=True, room=room_name)).to_jwt()

    token = join_token("py-user", "Python user")
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

    # What the room's administrator changes, the client sees.
    seen = {name: asyncio.Event() for name in ["metadata", "attributes", "data", "room_metadata", "muted"]}
    got = {}
    room.on("participant_metadata_changed", lambda p, old, new: (got.__setitem__("metadata", new), seen["metadata"].set()))
    room.on(
        "participant_attributes_changed",
        lambda changed, p: (got.__setitem__("attributes", dict(p.attributes)), seen["attributes"].set()),
    )
    room.on(
        "data_received",
        lambda packet: (
            got.__setitem__("data", {"data": packet.data.decode(), "topic": packet.topic, "from": packet.participant.identity if packet.participant else None}),
            seen["data"].set(),
        ),
    )
    room.on("room_metadata_changed", lambda old, new: (got.__setitem__("room_metadata", new), seen["room_metadata"].set()))
    room.on("track_muted", lambda p, publication: (got.__setitem__("muted", publication.sid), seen["muted"].set()))

    source = rtc.AudioSource(48000, 1)
    track = rtc.LocalAudioTrack.create_audio_track("mic", source)
    published = await room.local_participant.publish_track(
        track, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
    )

    updated = await room_service.update_participant(
        api.UpdateParticipantRequest(
            room="sdk-room", identity="py-user", metadata="vip", attributes={"tier": "gold"}, name="Renamed"
        )
    )
    out["updated"] = {"metadata": updated.metadata, "attributes": dict(updated.attributes), "name": updated.name}
    muted = await room_service.mute_published_track(
        api.MuteRoomTrackRequest(room="sdk-room", identity="py-user", track_sid=published.sid, muted=True)
    )
    out["muted_track"] = {"sid": muted.track.sid == published.sid, "muted": muted.track.muted}
    await room_service.send_data(
        api.SendDataRequest(room="sdk-room", data=b"hello from the server", kind=0, topic="server.topic")
    )
    room_meta = await room_service.update_room_metadata(
        api.UpdateRoomMetadataRequest(room="sdk-room", metadata="room meta 2")
    )
    out["room_metadata"] = room_meta.metadata
    for name, event in seen.items():
        try:
            await asyncio.wait_for(event.wait(), 10)
        except asyncio.TimeoutError:
            got.setdefault(name, "not seen")
    got["muted"] = got.get("muted") == published.sid
    out["client_saw"] = got

    # A client that subscribes to nothing on its own is subscribed by the administrator.
    listener = rtc.Room()
    subscribed = asyncio.Event()
    listener.on("track_subscribed", lambda track, publication, participant: subscribed.set())
    await listener.connect(args.url, join_token("py-listener"), rtc.RoomOptions(auto_subscribe=False))
    await room_service.update_subscriptions(
        api.UpdateSubscriptionsRequest(room="sdk-room", identity="py-listener", track_sids=[published.sid], subscribe=True)
    )
    try:
        await asyncio.wait_for(subscribed.wait(), 10)
        out["subscribed_by_server"] = True
    except asyncio.TimeoutError:
        out["subscribed_by_server"] = False
    await listener.disconnect()

    # A second client is removed by the administrator.
    second_token = join_token("py-second")
    second = rtc.Room()
    second_gone = asyncio.Event()
    second.on("disconnected", lambda reason: second_gone.set())
    await second.connect(args.url, second_token)
    await room_service.remove_participant(api.RoomParticipantIdentity(room="sdk-room", identity="py-second"))
    try:
        await asyncio.wait_for(second_gone.wait(), 10)
        out["second_removed"] = True
    except asyncio.TimeoutError:
        out["second_removed"] = False

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
    try:
        await room_service.mute_published_track(
            api.MuteRoomTrackRequest(room="sdk-room", identity="py-user", track_sid="TR_nope", muted=True)
        )
    except api.TwirpError as exc:
        errors["unknown_track"] = error_of(exc)
    try:
        await room_service.remove_participant(api.RoomParticipantIdentity(room="sdk-room", identity="py-second"))
    except api.TwirpError as exc:
        errors["remove_twice"] = error_of(exc)
    out["errors"] = errors

    # A room for one: the second client is refused, with LiveKit's reason.
    await room_service.create_room(api.CreateRoomRequest(name="tiny-room", max_participants=1))
    first = rtc.Room()
    await first.connect(args.url, join_token("tiny-first", room_name="tiny-room"))
    refused = rtc.Room()
    try:
        await refused.connect(args.url, join_token("tiny-second", room_name="tiny-room"))
        out["full_room"] = "admitted"
    except Exception as exc:  # the SDK's own error, reported for the test to judge
        out["full_room"] = str(exc)
    tiny = await room_service.list_participants(api.ListParticipantsRequest(room="tiny-room"))
    out["tiny_room"] = [p.identity for p in tiny.participants]
    await first.disconnect()
    await room_service.delete_room(api.DeleteRoomRequest(room="tiny-room"))

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
