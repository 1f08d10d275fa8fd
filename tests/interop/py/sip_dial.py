"""LiveKit's SIP service against svc's room, driven by the official server SDK (PyPI
`livekit-api`): lists the outbound trunk, tries what must be refused, dials `--number` into
`--room` through `CreateSIPParticipant` and waits for the answer, reads the phone participant back
through `RoomService.ListParticipants`, lets the call run `--talk` seconds and hangs it up the
LiveKit way (`RemoveParticipant`). With `--expect-failure` it only dials, waiting for the answer,
and reports the SDK's SIP error; with `--list-only` it only lists the trunk.

Prints one JSON object (what each call answered) for the Rust test
(crates/svc-phone/tests/livekit_sip.rs) to judge; exits non-zero only when the harness itself breaks.
"""

import argparse
import asyncio
import json

from livekit import api
from livekit.protocol.sip import (
    CreateSIPParticipantRequest,
    ListSIPDispatchRuleRequest,
    ListSIPInboundTrunkRequest,
    ListSIPOutboundTrunkRequest,
    CreateSIPOutboundTrunkRequest,
    SIPOutboundTrunkInfo,
)


def error_of(exc):
    return {
        "type": type(exc).__name__,
        "code": getattr(exc, "code", None),
        "status": getattr(exc, "status", None),
        "message": getattr(exc, "message", str(exc)),
        "sip_status_code": getattr(exc, "sip_status_code", None),
        "sip_status": getattr(exc, "sip_status", None),
    }


async def refused(call):
    try:
        await call
        return {"code": "accepted"}
    except api.TwirpError as exc:
        return error_of(exc)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--room", required=True)
    parser.add_argument("--number", required=True)
    parser.add_argument("--talk", type=float, default=5.0)
    parser.add_argument("--expect-failure", action="store_true")
    parser.add_argument("--list-only", action="store_true")
    args = parser.parse_args()
    out = {}
    lk = api.LiveKitAPI(args.url, args.key, args.secret)
    sip = lk.sip

    trunks = (await sip.list_outbound_trunk(ListSIPOutboundTrunkRequest())).items
    out["trunks"] = [{"id": t.sip_trunk_id, "address": t.address, "numbers": list(t.numbers)} for t in trunks]
    if args.list_only:
        print(json.dumps(out))
        await lk.aclose()
        return
    trunk_id = trunks[0].sip_trunk_id

    def request(**fields):
        base = dict(sip_trunk_id=trunk_id, sip_call_to=args.number, room_name=args.room)
        base.update(fields)
        return CreateSIPParticipantRequest(**base)

    if args.expect_failure:
        try:
            await sip.create_sip_participant(request(wait_until_answered=True, participant_identity="busy-line"))
            out["failure"] = {"code": "accepted"}
        except api.TwirpError as exc:
            out["failure"] = error_of(exc)
        print(json.dumps(out))
        await lk.aclose()
        return

    out["inbound_trunks"] = len((await sip.list_inbound_trunk(ListSIPInboundTrunkRequest())).items)
    out["dispatch_rules"] = len((await sip.list_dispatch_rule(ListSIPDispatchRuleRequest())).items)
    out["refused"] = {
        "unknown_trunk": await refused(sip.create_sip_participant(request(sip_trunk_id="ST_nosuchtrunk"))),
        "dtmf": await refused(sip.create_sip_participant(request(dtmf="1234#"))),
        "not_e164": await refused(sip.create_sip_participant(request(sip_call_to="call-me"))),
        "create_trunk": await refused(
            sip.create_outbound_trunk(
                CreateSIPOutboundTrunkRequest(trunk=SIPOutboundTrunkInfo(name="t", address="x", numbers=["+1"]))
            )
        ),
    }
    wrong = api.LiveKitAPI(args.url, args.key, "not-the-secret-not-the-secret-not-the-secret")
    out["refused"]["wrong_secret"] = await refused(wrong.sip.create_sip_participant(request()))
    await wrong.aclose()

    # The call itself: waits for the answer, with LiveKit's options for who the phone is.
    dial = request(
        participant_identity="phone-caller",
        participant_name="Caller",
        participant_metadata='{"crm": 42}',
        participant_attributes={"crm.id": "42"},
        krisp_enabled=True,
        play_dialtone=True,
        wait_until_answered=True,
    )
    dial.ringing_timeout.seconds = 15
    dial.max_call_duration.seconds = 120
    info = await sip.create_sip_participant(dial)
    out["info"] = {
        "participant_id": info.participant_id,
        "participant_identity": info.participant_identity,
        "room_name": info.room_name,
        "sip_call_id": info.sip_call_id,
    }

    def phone_in(participants):
        for p in participants:
            if p.identity == "phone-caller":
                return {
                    "sid": p.sid,
                    "name": p.name,
                    "kind": p.kind,
                    "metadata": p.metadata,
                    "attributes": dict(p.attributes),
                }
        return None

    listed = await lk.room.list_participants(api.ListParticipantsRequest(room=args.room))
    out["listed"] = phone_in(listed.participants)
    await asyncio.sleep(args.talk)
    await lk.room.remove_participant(api.RoomParticipantIdentity(room=args.room, identity="phone-caller"))
    await asyncio.sleep(0.5)
    listed = await lk.room.list_participants(api.ListParticipantsRequest(room=args.room))
    out["after_remove"] = phone_in(listed.participants)
    await lk.aclose()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
