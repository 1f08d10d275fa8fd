"""The google-genai oracle for Gemini Live: what the SDK's own types and converters say about a
message, with no protocol state (gemini.py keeps the state and the rules that need it).

Client messages (what svc sends), each checked three ways:

1. Strictly typed: `types.LiveClientMessage.model_validate_json` (google-genai's BaseModel has
   `extra='forbid'` and camelCase aliases, so an unknown or misspelled field fails). An enum value
   the SDK does not know only warns (`CaseInSensitiveEnum._missing_`): that warning is a finding.
2. Converted to the Gemini Developer API wire by the SDK's own converters (a non-Vertex client
   built offline), which raise for what the Developer API does not take (e.g.
   `sessionResumption.transparent`, `explicitVadSignal`), and through the SDK's send-path
   transformers (`t_client_content`, `LiveSendRealtimeInputParameters`, `t_tool_response`).
3. For `setup`: the SDK's `LiveClientSetup` type has no `realtimeInputConfig`, although the SDK's
   own `live.connect` sends one (from `LiveConnectConfig.realtime_input_config`). So the setup is
   also rebuilt as a `LiveConnectConfig` and converted exactly as `AsyncLive.connect` does
   (`_LiveConnectParameters_to_mldev`): the SDK, configured the same way, must send the same setup.

Server messages (what the fake sends) are `types.LiveServerMessage` objects serialized with
`model_dump(mode='json', by_alias=True, exclude_none=True)`, then parsed back through the SDK's
receive path (`_LiveServerMessage_from_mldev` + `LiveServerMessage._from_response`, as
`AsyncSession._receive` does) and compared with the object: a message the SDK would read
differently is a bug of the fake, reported as such.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import pydantic
from google.genai import _common, _live_converters, types
from google.genai import _transformers as sdk_transformers
from google.genai._api_client import BaseApiClient

# The client the SDK speaks the Gemini Developer API with; nothing here touches the network
# (the converters read only `vertexai`).
DEVELOPER_API = BaseApiClient(api_key="conformance-offline", vertexai=False)

# The top-level fields of a client message: protobuf's `oneof message_type` (each `send_*`
# method of `AsyncSession` in google/genai/live.py sends exactly one of them).
CLIENT_FIELDS = {
    "setup": "setup",
    "clientContent": "client_content",
    "realtimeInput": "realtime_input",
    "toolResponse": "tool_response",
    "contextUpdate": "context_update",
}

# `FunctionDeclaration.name` docstring: "Must start with a letter or an underscore. Must be a-z,
# A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum length of 128."
FUNCTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")

# The rate svc declares for user audio; google/genai/live.py's `send_realtime_input` example and
# the Live API's input format (16-bit PCM, 16 kHz) spell it this way.
INPUT_AUDIO_MIME = "audio/pcm;rate=16000"


@dataclass
class Finding:
    """One thing the oracle refuses. `fatal`: the service closes the socket with 1007 for it."""

    text: str
    fatal: bool = True


@dataclass
class ClientMessage:
    """A client message that passed the SDK's types (findings may still apply)."""

    kind: str  # the snake_case field: setup, client_content, realtime_input, tool_response, …
    wire: dict[str, Any]
    message: types.LiveClientMessage
    # setup only: the part LiveClientSetup cannot type.
    realtime_input_config: Optional[types.RealtimeInputConfig] = None

    @property
    def realtime_field(self) -> Optional[str]:
        """The one field of a realtimeInput (`audio`, `text`, `activity_start`, …)."""
        realtime = self.message.realtime_input
        if realtime is None:
            return None
        fields = [name for name, value in realtime if value is not None]
        return fields[0] if len(fields) == 1 else None


def _validation_text(error: pydantic.ValidationError) -> str:
    parts = []
    for item in error.errors()[:4]:
        where = ".".join(str(piece) for piece in item["loc"])
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def _strict(model: type[pydantic.BaseModel], data: Any, findings: list[Finding], what: str) -> Any:
    """`model.model_validate_json(data)`, turning refusals and unknown-enum warnings into findings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = model.model_validate_json(json.dumps(data))
        except pydantic.ValidationError as error:
            findings.append(Finding(f"{what}: the SDK's {model.__name__} refuses it: {_validation_text(error)}"))
            return None
    for warning in caught:
        if "is not a valid" in str(warning.message):
            findings.append(Finding(f"{what}: {warning.message} (an enum value the SDK does not know)"))
    return value


def _camel_keys(value: Any) -> Any:
    """The value with every key in camelCase, for comparing SDK output (snake_case inside
    pass-through objects, as google-genai sends it) with svc's wire (camelCase)."""
    if isinstance(value, dict):
        return {_common.maybe_snake_to_camel(str(key)): _camel_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_camel_keys(item) for item in value]
    return value


def parse_client_message(wire: Any) -> tuple[Optional[ClientMessage], list[Finding]]:
    """Checks one client message against the SDK; the message is None when its types refuse it."""
    findings: list[Finding] = []
    if not isinstance(wire, dict):
        return None, [Finding("client message is not a JSON object")]
    present = [key for key in wire if key in CLIENT_FIELDS]
    # Protobuf `oneof`: one message type per message (AsyncSession's send_* methods each send one).
    if len(wire) != 1 or len(present) != 1:
        findings.append(Finding(f"a client message carries exactly one of {sorted(CLIENT_FIELDS)}, got {sorted(wire)}"))
        if not present:
            return None, findings
    key = present[0]
    kind = CLIENT_FIELDS[key]
    realtime_input_config = None
    if key == "setup" and isinstance(wire.get("setup"), dict):
        setup = dict(wire["setup"])
        if "realtimeInputConfig" in setup:
            realtime_input_config = _strict(
                types.RealtimeInputConfig, setup.pop("realtimeInputConfig"), findings, "setup.realtimeInputConfig"
            )
        message = _strict(types.LiveClientMessage, {"setup": setup}, findings, "setup")
    else:
        message = _strict(types.LiveClientMessage, wire, findings, key)
    if message is None:
        return None, findings
    parsed = ClientMessage(kind, wire, message, realtime_input_config)
    _developer_api(parsed, findings)
    if kind == "setup":
        if not findings:  # a refusal above already says why the SDK could not send it
            _same_as_sdk_connect(parsed, findings)
        _setup_rules(parsed, findings)
    elif kind == "realtime_input":
        _realtime_input_rules(parsed, findings)
    elif kind == "client_content":
        _client_content_rules(parsed, findings)
    elif kind == "tool_response":
        _tool_response_rules(parsed, findings)
    return parsed, findings


def _developer_api(parsed: ClientMessage, findings: list[Finding]) -> None:
    """The SDK's conversion to the Developer API wire raises for Vertex-only fields."""
    try:
        _live_converters._LiveClientMessage_to_mldev(DEVELOPER_API, parsed.message)
    except (ValueError, TypeError) as error:
        findings.append(Finding(f"{parsed.kind}: the SDK refuses it for the Gemini Developer API: {error}"))


def _same_as_sdk_connect(parsed: ClientMessage, findings: list[Finding]) -> None:
    """The setup the SDK's `AsyncLive.connect` sends for the same configuration equals svc's."""
    setup = parsed.message.setup
    assert setup is not None
    config_fields = {
        name: getattr(setup, name)
        for name in types.LiveConnectConfig.model_fields
        if name in type(setup).model_fields and getattr(setup, name) is not None
    }
    if parsed.realtime_input_config is not None:
        config_fields["realtime_input_config"] = parsed.realtime_input_config
    with warnings.catch_warnings():
        # `LiveConnectConfig.generation_config` is deprecated in favour of flat fields; the wire
        # it produces is the same `setup.generationConfig`.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            config = types.LiveConnectConfig(**config_fields)
            model = sdk_transformers.t_model(DEVELOPER_API, setup.model or "")
            request = _common.convert_to_dict(
                _live_converters._LiveConnectParameters_to_mldev(
                    api_client=DEVELOPER_API,
                    from_object=types.LiveConnectParameters(model=model, config=config).model_dump(exclude_none=True),
                )
            )
        except (ValueError, TypeError, pydantic.ValidationError) as error:
            findings.append(Finding(f"setup: the SDK's live.connect cannot send this configuration: {error}"))
            return
    request.pop("config", None)
    request = _common.encode_unserializable_types(request)
    sdk_setup = _camel_keys(json.loads(json.dumps(request.get("setup", {}))))
    svc_setup = _camel_keys(parsed.wire["setup"])
    if sdk_setup != svc_setup:
        only_svc = sorted(set(svc_setup) - set(sdk_setup))
        differing = sorted(k for k in set(svc_setup) & set(sdk_setup) if svc_setup[k] != sdk_setup[k])
        findings.append(
            Finding(
                "setup: differs from what the SDK's live.connect sends for the same configuration "
                f"(fields only svc sends: {only_svc}; fields that differ: {differing})"
            )
        )


def _setup_rules(parsed: ClientMessage, findings: list[Finding]) -> None:
    setup = parsed.message.setup
    assert setup is not None
    compression = setup.context_window_compression
    if compression and compression.sliding_window and compression.sliding_window.target_tokens is not None:
        # SlidingWindow.target_tokens docstring: "Should be < trigger_tokens."
        trigger = compression.trigger_tokens
        if trigger is not None and compression.sliding_window.target_tokens >= trigger:
            findings.append(Finding("setup.contextWindowCompression: slidingWindow.targetTokens >= triggerTokens"))
    for tool in setup.tools or []:
        for declaration in getattr(tool, "function_declarations", None) or []:
            if not FUNCTION_NAME.match(declaration.name or ""):
                findings.append(Finding(f"setup.tools: function name {declaration.name!r} breaks the documented form"))
            schema = declaration.parameters_json_schema
            if schema is not None:
                # FunctionDeclaration.parameters_json_schema docstring: "The schema must describe an
                # object … This field is mutually exclusive with `parameters`."
                where = f"setup.tools: {declaration.name}"
                if not isinstance(schema, dict) or schema.get("type") != "object":
                    findings.append(Finding(f"{where}: parametersJsonSchema is no object"))
                if declaration.parameters is not None:
                    findings.append(Finding(f"{where}: both parameters and parametersJsonSchema"))


def _realtime_input_rules(parsed: ClientMessage, findings: list[Finding]) -> None:
    realtime = parsed.message.realtime_input
    assert realtime is not None
    fields = {name: value for name, value in realtime if value is not None}
    # AsyncSession.send_realtime_input: "Only one argument can be set" per message.
    if len(fields) != 1:
        findings.append(Finding(f"realtimeInput: one field per message (send_realtime_input), got {sorted(fields)}"))
        return
    # The SDK's send path: LiveSendRealtimeInputParameters and its Developer API converter, whose
    # transformers refuse an audio blob without an audio/* MIME type (t_audio_blob) and a video
    # frame without image/* (t_image_blob).
    params = {("media" if name == "media_chunks" else name): value for name, value in fields.items()}
    try:
        _live_converters._LiveSendRealtimeInputParameters_to_mldev(
            from_object=types.LiveSendRealtimeInputParameters.model_validate(params)
        )
    except (ValueError, TypeError, pydantic.ValidationError) as error:
        findings.append(Finding(f"realtimeInput: the SDK's send_realtime_input refuses it: {error}"))
    audio = realtime.audio
    if audio is not None:
        if audio.mime_type != INPUT_AUDIO_MIME:
            text = f"realtimeInput.audio: mimeType {audio.mime_type!r}, expected {INPUT_AUDIO_MIME!r}"
            findings.append(Finding(text, fatal=False))
        if audio.data is None or len(audio.data) % 2:
            # 16-bit PCM: two bytes a sample.
            findings.append(Finding("realtimeInput.audio: not a whole number of 16-bit samples", fatal=False))


def _client_content_rules(parsed: ClientMessage, findings: list[Finding]) -> None:
    content = parsed.message.client_content
    assert content is not None
    if content.turns:
        try:
            # The SDK's send_client_content path (strict contents).
            sdk_transformers.t_client_content(content.turns, bool(content.turn_complete))
        except ValueError as error:
            findings.append(Finding(f"clientContent: the SDK's send_client_content refuses it: {error}"))
    for turn in content.turns or []:
        # Content.role docstring: "Must be either 'user' or 'model'." (Gemini 3.x closes with 1007
        # on a turn without one, providers.md §2.1.)
        if turn.role not in ("user", "model"):
            findings.append(Finding(f"clientContent: a turn's role must be 'user' or 'model', got {turn.role!r}"))
        if not turn.parts:
            findings.append(Finding("clientContent: a turn without parts"))


def _tool_response_rules(parsed: ClientMessage, findings: list[Finding]) -> None:
    response = parsed.message.tool_response
    assert response is not None
    if not response.function_responses:
        findings.append(Finding("toolResponse: no functionResponses"))
        return
    try:
        sdk_transformers.t_tool_response(response.function_responses)
    except ValueError as error:
        findings.append(Finding(f"toolResponse: the SDK's send_tool_response refuses it: {error}"))
    for function_response in response.function_responses:
        # live.py _FUNCTION_RESPONSE_REQUIRES_ID: "FunctionResponse request must have an `id` field
        # from the response of a ToolCall.FunctionalCalls in Google AI."
        if not function_response.id:
            findings.append(Finding("toolResponse: a functionResponse without id (required on the Developer API)"))
        # FunctionResponse docstring: name "Required", response "Required … JSON object format".
        if not function_response.name:
            findings.append(Finding("toolResponse: a functionResponse without name"))
        if not isinstance(function_response.response, dict):
            findings.append(Finding("toolResponse: a functionResponse without a response object"))


# ---- server messages --------------------------------------------------------------------------


def server_wire(message: types.LiveServerMessage, standard_base64: bool) -> dict[str, Any]:
    """The wire JSON of a server message, serialized from the SDK object.

    Pydantic writes bytes in the URL-safe base64 alphabet (google-genai's `ser_json_bytes`); the
    service's protobuf JSON writes the standard one. Both are valid protobuf JSON and the SDK's
    receive path reads both, so the fake sends either (`standard_base64`)."""
    wire = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    activity = wire.get("voiceActivity")
    if isinstance(activity, dict) and "voiceActivityType" in activity:
        # The Developer API spells it `type` (_live_converters._VoiceActivity_from_mldev).
        activity["type"] = activity.pop("voiceActivityType")
    if standard_base64:
        parts = wire.get("serverContent", {}).get("modelTurn", {}).get("parts", [])
        for part in parts:
            blob = part.get("inlineData")
            if isinstance(blob, dict) and isinstance(blob.get("data"), str):
                blob["data"] = base64.b64encode(base64.urlsafe_b64decode(blob["data"])).decode("ascii")
    return wire


def sdk_receive(wire: dict[str, Any]) -> types.LiveServerMessage:
    """What google-genai's `AsyncSession._receive` makes of a message (live.py)."""
    response = copy.deepcopy(wire)
    response_dict = _live_converters._LiveServerMessage_from_mldev(response)
    if not response_dict and response:
        # live.py raises APIError here: a message with no field it knows is an error to the SDK.
        raise ValueError(f"the SDK's receive path knows no field of {sorted(response)}")
    return types.LiveServerMessage._from_response(response=response_dict, kwargs=types.LiveServerMessage().model_dump())


def round_trip_problem(message: types.LiveServerMessage, wire: dict[str, Any]) -> Optional[str]:
    """None when the SDK reads `wire` back as `message`; else what went wrong (a fake bug)."""
    try:
        received = sdk_receive(wire)
    except (ValueError, TypeError, pydantic.ValidationError) as error:
        return f"the SDK cannot read it: {error}"
    if received != message:
        return f"the SDK reads it as {received.model_dump(exclude_none=True)!r}"
    return None
