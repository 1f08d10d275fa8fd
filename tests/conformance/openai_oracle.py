"""The openai SDK (openai==3.57.0, requirements.txt) as the oracle of the OpenAI-family protocols.

Client side: every message svc sends is validated by the SDK's own model for its `type` (the
members of `openai.types.realtime.RealtimeClientEvent` or `openai.types.live.ClientEvent`), in
pydantic's strict mode (no coercion: a string where an integer belongs is a violation). The
SDK's `BaseModel` accepts unknown fields (`extra="allow"`, openai/_models.py), so after
validation `unknown_fields` walks the validated model at every depth and reports each field the
model does not declare: a misspelled or invented field is a violation, as it is to the service.

Server side: `ServerEvents.send` builds each event as the SDK's model (validated, so the fake
cannot send what the SDK does not describe), serializes it with the SDK's own `to_dict` (what
its `send` does: `to_json(use_api_names=True, exclude_unset=True)`), and checks that the text
parses back through the SDK's receive path (`AsyncRealtimeConnection.parse_event` and
`AsyncLiveConnection.parse_event` are `construct_type_unchecked(value=json.loads(data),
type_=<server event union>)`) to an equal object of the same class, and through a validating
parse too. "Packing" for these one-event-per-message protocols is what the SDK lets vary: each
event goes out minimal (required fields) or rich (every optional field the scenario knows plus a
field this SDK version does not model, which its models accept), chosen per event by
`Conn.pack()`.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
import typing
from typing import Any, Optional

from openai._models import construct_type_unchecked
from pydantic import BaseModel, ValidationError

from wire import Conn

# A field no version of the SDK models, added to rich events: the SDK's models accept unknown
# fields, so a service may add one at any time and svc must not care.
EXTENSION_FIELD = "conformance_extension"
EXTENSION_VALUE = {"note": "a field this SDK version does not model"}


def union_members(union: Any) -> tuple[type[BaseModel], ...]:
    """The model classes of an SDK event union (`Annotated[Union[...], PropertyInfo(...)]`)."""
    inner = typing.get_args(union)[0] if typing.get_origin(union) is typing.Annotated else union
    return tuple(member for member in typing.get_args(inner) if isinstance(member, type))


def by_type(union: Any) -> dict[str, type[BaseModel]]:
    """Event `type` literal → the union's model class for it."""
    table: dict[str, type[BaseModel]] = {}
    for member in union_members(union):
        for literal in typing.get_args(member.model_fields["type"].annotation):
            table.setdefault(literal, member)
    return table


def unknown_fields(value: Any, path: str = "$") -> list[str]:
    """Paths of the fields a validated model holds but does not declare, at any depth.

    Plain dicts (`Dict[str, object]` fields: tool parameter schemas, nested Responses events)
    are free-form JSON to the SDK and are not walked.
    """
    found: list[str] = []
    if isinstance(value, BaseModel):
        found += [f"{path}.{name}" for name in (value.model_extra or {})]
        for name, field in type(value).model_fields.items():
            found += unknown_fields(getattr(value, name), f"{path}.{field.alias or name}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found += unknown_fields(item, f"{path}[{index}]")
    return found


def relevant_errors(error: ValidationError) -> list[Any]:
    """The errors of a union's intended member: pydantic reports every member of a union, so
    members whose `type` (or `role`) literal did not match are dropped, when any is left."""
    errors = error.errors()
    wrong: set[tuple[Any, ...]] = set()
    for item in errors:
        loc = item["loc"]
        if item["type"] == "literal_error" and loc and loc[-1] in ("type", "role") and len(loc) >= 2:
            wrong.add(tuple(loc[:-1]))
    kept = [item for item in errors if not any(tuple(item["loc"][: len(branch)]) == branch for branch in wrong)]
    return kept or errors


def describe(error: ValidationError, limit: int = 6) -> str:
    """A validation error as one readable line: each failing location and why."""
    parts = []
    for item in relevant_errors(error)[:limit]:
        location = ".".join(str(part) for part in item["loc"]) or "$"
        parts.append(f"{location}: {item['msg']} (got {json.dumps(item.get('input'), default=str)[:80]})")
    more = len(relevant_errors(error)) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class ClientOracle:
    """Validates client messages against one SDK client event union, strictly."""

    def __init__(self, name: str, models: dict[str, type[BaseModel]]):
        self.name = name
        # Event `type` → its model: an SDK union's members (`by_type`) or a dialect's own (xAI).
        self.models = models

    def validate(self, message: dict[str, Any]) -> tuple[Optional[BaseModel], list[str]]:
        """The validated model (None when invalid) and every violation found."""
        kind = message.get("type")
        model_class = self.models.get(kind) if isinstance(kind, str) else None
        if model_class is None:
            return None, [f"{kind!r} is not a client event of {self.name}"]
        try:
            model = model_class.model_validate(message, strict=True)
        except ValidationError as error:
            return None, [f"{kind}: {describe(error)}"]
        return model, [f"{kind}: unknown field {path}" for path in unknown_fields(model)]


class ServerEvents:
    """Builds, self-checks and sends one connection's server events (see the module doc)."""

    def __init__(self, conn: Conn, union: Any, own_models: Optional[dict[str, type[BaseModel]]] = None):
        self.conn = conn
        self.union = union
        self.models = by_type(union)
        # Events the SDK does not know (xAI's additions): built from the dialect's own models.
        self.own_models = own_models or {}
        self.count = 0
        # Events sent, by type (for the runner's facts).
        self.sent: dict[str, int] = {}

    def next_id(self, prefix: str = "event") -> str:
        self.count += 1
        return f"{prefix}_{self.conn.index}_{self.count}"

    def build(self, kind: str, fields: dict[str, Any], optional: Optional[dict[str, Any]] = None) -> BaseModel:
        """The event `kind` with `fields` (and, when this event is packed rich, `optional` and an
        unknown extension field), validated by its model. A failure is a bug of the fake."""
        model_class = self.own_models.get(kind) or self.models[kind]
        values = {"type": kind, **fields}
        if "event_id" in model_class.model_fields and "event_id" not in values:
            values["event_id"] = self.next_id()
        if self.conn.pack():
            values.update(optional or {})
            if model_class.model_config.get("extra") != "forbid":
                values[EXTENSION_FIELD] = EXTENSION_VALUE
        return model_class.model_validate(values, strict=True)

    def wire(self, event: BaseModel) -> dict[str, Any]:
        """The event serialized by the SDK and checked to parse back to an equal object."""
        wire = event.model_dump(mode="json", by_alias=True, exclude_unset=True)
        text = json.dumps(wire)
        kind = wire["type"]
        if kind in self.own_models:
            # Not an SDK event: the SDK's receive path must still take it without raising.
            construct_type_unchecked(value=json.loads(text), type_=typing.cast(Any, self.union))
            back = type(event).model_validate_json(text)
        else:
            # What the SDK's `parse_event` does with the text.
            parsed = construct_type_unchecked(value=json.loads(text), type_=typing.cast(Any, self.union))
            if type(parsed) is not type(event) or parsed.model_dump(mode="json", by_alias=True) != event.model_dump(
                mode="json", by_alias=True
            ):
                self.conn.violation(f"fake bug: the SDK parses {kind} back to {type(parsed).__name__}, not equal")
            back = type(event).model_validate_json(text)
        if back != event:
            self.conn.violation(f"fake bug: {kind} does not round-trip through its model")
        return wire

    async def send(self, kind: str, fields: dict[str, Any], optional: Optional[dict[str, Any]] = None) -> bool:
        """Builds, checks and sends one event; False once the socket is closed."""
        event = self.build(kind, fields, optional)
        self.sent[kind] = self.sent.get(kind, 0) + 1
        return await self.conn.send(self.wire(event))

    async def send_unknown(self, kind: str) -> bool:
        """An event of a type the SDK does not know (its parsing is lenient: it must not raise);
        svc must ignore it."""
        message = {"type": kind, "event_id": self.next_id(), "detail": {"note": "an event type svc does not know"}}
        construct_type_unchecked(value=message, type_=typing.cast(Any, self.union))
        self.sent[kind] = self.sent.get(kind, 0) + 1
        return await self.conn.send(message)


# ---- audio -------------------------------------------------------------------------------------


def tone(samples: int, rate: int, hz: float = 440.0, amplitude: int = 8000, start: int = 0) -> bytes:
    """PCM16 LE mono sine (voiced audio the energy gates of svc see as speech)."""
    return b"".join(
        int(amplitude * math.sin(2 * math.pi * hz * (start + n) / rate)).to_bytes(2, "little", signed=True)
        for n in range(samples)
    )


def silence(samples: int) -> bytes:
    return bytes(2 * samples)


def b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()


class InputAudio:
    """What svc appended: decoded PCM16 (the first seconds kept) and its count.

    The SDK docstrings: Realtime `input_audio_buffer.append.audio` is "Base64-encoded audio bytes
    ... in the format specified by the input_audio_format field" (svc configures audio/pcm, PCM16
    at 24 kHz: realtime_audio_formats.AudioPCM "Only a 24kHz sample rate is supported"); GPT-Live
    `session.input_audio.append.audio` is "Base64-encoded raw audio in the startup-selected format,
    without a WAV or other container header".
    """

    KEEP_SECONDS = 4

    # Most values `runs` holds.
    RUNS_MAX = 2_000

    def __init__(self, rate: int):
        self.rate = rate
        self.samples = 0
        self.kept = bytearray()
        # When a scenario asks for it: the audio as its runs of one repeated sample value, in
        # order (a runner that sends each frame as one value reads back which frames came).
        self.runs: Optional[list[int]] = None

    def add(self, data: Any) -> Optional[str]:
        """Adds one append's audio; a violation text when it is not base64 PCM16."""
        if not isinstance(data, str):
            return "audio is not a base64 string"
        try:
            pcm = base64.b64decode(data, validate=True)
        except ValueError:
            return "audio is not valid base64"
        if len(pcm) % 2:
            return f"audio has {len(pcm)} bytes: PCM16 takes whole 2-byte samples"
        self.samples += len(pcm) // 2
        if self.runs is not None:
            for (value,) in struct.iter_unpack("<h", pcm):
                if (not self.runs or self.runs[-1] != value) and len(self.runs) < self.RUNS_MAX:
                    self.runs.append(value)
        if len(self.kept) < self.KEEP_SECONDS * self.rate * 2:
            self.kept += pcm
        return None

    @property
    def ms(self) -> int:
        return self.samples * 1000 // self.rate

    def tone_hz(self) -> float:
        """The dominant frequency of the kept audio read at the configured rate (zero crossings):
        a tone sent at the right rate reads as itself, at another rate as a scaled frequency."""
        values = [int.from_bytes(self.kept[i : i + 2], "little", signed=True) for i in range(0, len(self.kept) - 1, 2)]
        if len(values) < 2:
            return 0.0
        crossings = sum(1 for a, b in zip(values, values[1:]) if (a < 0) != (b < 0))
        return round(crossings / 2 / (len(values) / self.rate), 1)


def min_tokens(text: str) -> int:
    """A lower bound of `text`'s token count without the tokenizer (not installed): the o200k
    pre-tokenizer never lets a token span two whitespace-separated words, so each word is at
    least one token. A count above a cap is therefore certainly over it."""
    return len(text.split())


# ---- text --------------------------------------------------------------------------------------

WORDS = (
    "your order ships on friday morning from the warehouse in lyon and should reach you by "
    "tuesday the courier will call before delivery if nobody is home a neighbour can sign"
).split()


def sentence(rng: Any, words: int) -> str:
    """A deterministic sentence of `words` words from the connection's seeded generator."""
    start = rng.randrange(len(WORDS))
    picked = [WORDS[(start + n) % len(WORDS)] for n in range(words)]
    return " ".join(picked).capitalize() + "."


def split_words(text: str, parts: int) -> list[str]:
    """`text` in `parts` consecutive fragments that concatenate back to it."""
    tokens = re.findall(r"\S+\s*", text)
    if not tokens or parts < 1:
        return []
    size = max(1, math.ceil(len(tokens) / parts))
    return ["".join(tokens[i : i + size]) for i in range(0, len(tokens), size)]
