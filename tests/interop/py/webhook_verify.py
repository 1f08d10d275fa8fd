"""Verifies webhooks svc's room sent with the official server SDK's receiver (PyPI `livekit-api`
`WebhookReceiver`), as a LiveKit user's backend would.

Reads JSON lines `{"auth": <Authorization header>, "content_type": ..., "body": <body text>}` on
stdin; prints one JSON object: the events the receiver accepted (name, room, participant, track,
id, created_at, num_dropped, room_end_reason), and what it said of a copy of the first webhook with
its body changed (it must refuse it). The Rust test (crates/svc-room/tests/webhooks.rs) judges.
"""

import argparse
import json
import sys

from livekit import api


def summary(event):
    return {
        "event": event.event,
        "room": event.room.name,
        "room_sid": event.room.sid,
        "room_metadata": event.room.metadata,
        "identity": event.participant.identity,
        "participant_sid": event.participant.sid,
        "state": event.participant.state,
        "track": event.track.sid,
        "track_name": event.track.name,
        "id": event.id,
        "created_at": event.created_at,
        "num_dropped": event.num_dropped,
        "room_end_reason": event.room_end_reason,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    args = parser.parse_args()
    receiver = api.WebhookReceiver(api.TokenVerifier(args.key, args.secret))
    hooks = [json.loads(line) for line in sys.stdin if line.strip()]
    out = {"accepted": [], "refused": [], "content_types": sorted({h["content_type"] for h in hooks})}
    for hook in hooks:
        try:
            out["accepted"].append(summary(receiver.receive(hook["body"], hook["auth"])))
        except Exception as exc:  # the receiver's verdict, reported for the test to judge
            out["refused"].append(str(exc))
    if hooks:
        tampered = hooks[0]["body"].replace('"event"', '"event" ', 1)
        try:
            receiver.receive(tampered, hooks[0]["auth"])
            out["tampered"] = "accepted"
        except Exception as exc:
            out["tampered"] = str(exc)
        wrong = api.WebhookReceiver(api.TokenVerifier(args.key, "not-the-secret-0123456789abcdefghij"))
        try:
            wrong.receive(hooks[0]["body"], hooks[0]["auth"])
            out["wrong_secret"] = "accepted"
        except Exception as exc:
            out["wrong_secret"] = type(exc).__name__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
