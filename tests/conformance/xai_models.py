"""xAI's Grok Voice Agent API as pydantic models: the oracle where the openai SDK's differ.

xAI publishes no realtime SDK: PyPI `xai-sdk` 1.21.0 ("The official Python SDK for the xAI
API") is a gRPC client whose services are auth, batch, chat, collections, deferred, documents,
embed, files, image, models, sample, tokenize, usage and video; it has no realtime, voice-agent
or WebSocket module. xAI documents the Voice Agent API as OpenAI-Realtime compatible, so its
oracle is the openai SDK's models for every event whose shape xAI shares (openai_oracle.py) plus
these models, `extra="forbid"`, for xAI's documented differences.

Sources (each field below cites one):
- [GUIDE] https://docs.x.ai/docs/guides/voice/agent — Voice Agent API guide: session parameters
  table (instructions, voice, tools, …), `force_message` items, resumption.
- [SCHEMA] https://docs.x.ai/voice-realtime.ws.json — the machine-readable schema the REST
  reference (https://docs.x.ai/developers/rest-api-reference/inference/voice) points to: 9 client
  and 37 server events. Its field ranges are quoted here as implementers reviewing it report them;
  the schema itself is not in the stored corpora.
- [DOCS SILENT] where neither says: the choice made and why.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from openai.types.realtime.input_audio_buffer_append_event import InputAudioBufferAppendEvent
from openai.types.realtime.realtime_conversation_item_assistant_message import (
    RealtimeConversationItemAssistantMessage,
)
from openai.types.realtime.realtime_conversation_item_function_call import RealtimeConversationItemFunctionCall
from openai.types.realtime.realtime_conversation_item_function_call_output import (
    RealtimeConversationItemFunctionCallOutput,
)
from openai.types.realtime.realtime_conversation_item_system_message import RealtimeConversationItemSystemMessage
from openai.types.realtime.realtime_conversation_item_user_message import RealtimeConversationItemUserMessage
from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Unknown fields are refused (the openai models accept them; xAI's schema lists its keys)."""

    model_config = ConfigDict(extra="forbid")


# ---- session.update ----------------------------------------------------------------------------

# [SCHEMA] PCM rates; pipecat's xAI events (written from the docs) list 21050 (sic) beside 22050's
# usual place, so both spellings are accepted. [GUIDE] "audio/pcmu", "audio/pcma" take 8 kHz.
PcmRate = Literal[8000, 16000, 21050, 22050, 24000, 32000, 44100, 48000]


class PcmFormat(Strict):
    type: Literal["audio/pcm"]
    rate: Optional[PcmRate] = None  # [SCHEMA] default 24000


class G711Format(Strict):
    type: Literal["audio/pcmu", "audio/pcma"]
    rate: Optional[Literal[8000]] = None


class OpusFormat(Strict):
    type: Literal["audio/opus"]  # [SCHEMA] "raw Opus packets (24 kHz)"
    rate: Optional[Literal[24000]] = None


AudioFormat = Union[PcmFormat, G711Format, OpusFormat]


class Transcription(Strict):
    # [SCHEMA] the transcription properties are `language_hint` and `keyterms` ("Max 100 terms,
    # each up to 50 characters"); `model` is not among them, yet the schema's
    # `conversation.item.input_audio_transcription.updated` says it is "Only emitted when
    # `audio.input.transcription.model` is set to `grok-transcribe`". The docs contradict each
    # other: `model` is accepted with the one value they name.
    model: Optional[Literal["grok-transcribe"]] = None
    language_hint: Optional[str] = None
    keyterms: Optional[list[str]] = Field(default=None, max_length=100)


class AudioInput(Strict):
    format: Optional[AudioFormat] = None
    transcription: Optional[Transcription] = None
    transport: Optional[Literal["json", "binary"]] = None  # [SCHEMA] speech-to-speech guide


class AudioOutput(Strict):
    format: Optional[AudioFormat] = None
    speed: Optional[float] = Field(default=None, ge=0.7, le=1.5)  # [SCHEMA] "Range: 0.7–1.5. Default: 1.0"
    transport: Optional[Literal["json", "binary"]] = None


class Audio(Strict):
    input: Optional[AudioInput] = None
    output: Optional[AudioOutput] = None


class TurnDetection(Strict):
    # [GUIDE] voice and turn_detection sit at the top level of `session` (not under `audio` as in
    # OpenAI GA). [SCHEMA] `type` is "server_vad" or null (manual); threshold 0.1–0.9 (default
    # 0.85), silence_duration_ms 0–10000, prefix_padding_ms (default 333; range as silence's),
    # idle_timeout_ms: the server "proactively re-engages the user if no speech is detected for
    # this many milliseconds after the assistant finishes responding". [DOCS SILENT] on
    # idle_timeout_ms bounds: any positive integer is accepted.
    type: Optional[Literal["server_vad"]]
    threshold: Optional[float] = Field(default=None, ge=0.1, le=0.9)
    silence_duration_ms: Optional[int] = Field(default=None, ge=0, le=10_000)
    prefix_padding_ms: Optional[int] = Field(default=None, ge=0, le=10_000)
    idle_timeout_ms: Optional[int] = Field(default=None, gt=0)


class Reasoning(Strict):
    effort: Literal["high", "none"]  # [SCHEMA] enum high|none, default high


class Resumption(Strict):
    enabled: bool  # [GUIDE] opt-in turn cache replayed on reconnect


class FlatFunctionTool(Strict):
    # The OpenAI Realtime shape, which xAI's OpenAI compatibility and its integrations use.
    type: Literal["function"]
    name: str
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None


class FunctionSpec(Strict):
    name: str
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None


class NestedFunctionTool(Strict):
    # [SCHEMA] lists function tools nested Chat-Completions style; [DOCS SILENT] on whether the
    # flat form is refused. Both are accepted, and the report says so.
    type: Literal["function"]
    function: FunctionSpec


class HostedTool(Strict):
    # [SCHEMA] server-run tools; their options are not modelled (svc sends none).
    model_config = ConfigDict(extra="allow")
    type: Literal["web_search", "x_search", "file_search", "mcp"]


Tool = Union[FlatFunctionTool, NestedFunctionTool, HostedTool]


class Session(Strict):
    """[SCHEMA] the session object has exactly these keys."""

    model: Optional[str] = None
    instructions: Optional[str] = None
    reasoning: Optional[Reasoning] = None
    voice: Optional[str] = None  # [GUIDE] built-in names (case-insensitive) or a custom voice id
    turn_detection: Optional[TurnDetection] = None
    resumption: Optional[Resumption] = None
    audio: Optional[Audio] = None
    tools: Optional[list[Tool]] = None
    replace: Optional[dict[str, str]] = None  # [SCHEMA] spoken-text find-and-replace map


class SessionUpdate(Strict):
    type: Literal["session.update"]
    event_id: Optional[str] = None
    session: Session


# ---- conversation items ------------------------------------------------------------------------


class ForceMessageContent(Strict):
    # [GUIDE] `item.content[].text` (required): "Verbatim text to synthesize via TTS".
    # [DOCS SILENT] on the part's `type`; the assistant output part type is accepted.
    type: Optional[Literal["output_text", "text"]] = None
    text: str


class ForceMessage(Strict):
    """[GUIDE] "Make the agent speak a hard-coded, TTS-synthesized line": the server injects a
    full response lifecycle (`response.created` → `response.output_audio.delta` →
    `response.done`); "Do not send `response.create` after this"."""

    type: Literal["force_message"]
    # [DOCS SILENT] the guide's table lists type, content[].text, interruptible and voice; the
    # assistant role of the guide's example is accepted.
    role: Optional[Literal["assistant"]] = None
    content: list[ForceMessageContent] = Field(min_length=1)
    interruptible: Optional[bool] = None  # default true
    voice: Optional[str] = None


# [SCHEMA] message roles user|assistant|system, function_call and function_call_output items:
# the openai models of the same shapes, walked for unknown fields by the oracle.
Item = Union[
    RealtimeConversationItemSystemMessage,
    RealtimeConversationItemUserMessage,
    RealtimeConversationItemAssistantMessage,
    RealtimeConversationItemFunctionCall,
    RealtimeConversationItemFunctionCallOutput,
    ForceMessage,
]


class ConversationItemCreate(Strict):
    type: Literal["conversation.item.create"]
    event_id: Optional[str] = None
    previous_item_id: Optional[str] = None
    item: Item


class ResponseParams(Strict):
    # [SCHEMA] response.create takes modalities, instructions ("replaces the session-level
    # instructions for this response only") and metadata (up to 16 pairs).
    modalities: Optional[list[Literal["text", "audio"]]] = None
    instructions: Optional[str] = None
    metadata: Optional[dict[str, str]] = Field(default=None, max_length=16)


class ResponseCreate(Strict):
    type: Literal["response.create"]
    event_id: Optional[str] = None
    response: Optional[ResponseParams] = None


class ResponseCancel(Strict):
    type: Literal["response.cancel"]
    event_id: Optional[str] = None
    response_id: Optional[str] = None  # [SCHEMA] "If not provided, cancels the current in-progress response"


class ConversationItemTruncate(Strict):
    # [SCHEMA] required: type, item_id, content_index, audio_end_ms ("How many milliseconds of
    # audio the client has actually played back before the interruption").
    type: Literal["conversation.item.truncate"]
    event_id: Optional[str] = None
    item_id: str
    content_index: int
    audio_end_ms: int = Field(ge=0)


class InputAudioBufferCommit(Strict):
    type: Literal["input_audio_buffer.commit"]  # [SCHEMA] only with turn_detection null
    event_id: Optional[str] = None


class InputAudioBufferClear(Strict):
    type: Literal["input_audio_buffer.clear"]
    event_id: Optional[str] = None


# The client events xAI documents, by type (append: the openai model, same shape).
CLIENT_EVENTS: dict[str, type[BaseModel]] = {
    "session.update": SessionUpdate,
    "input_audio_buffer.append": InputAudioBufferAppendEvent,
    "input_audio_buffer.commit": InputAudioBufferCommit,
    "input_audio_buffer.clear": InputAudioBufferClear,
    "conversation.item.create": ConversationItemCreate,
    "conversation.item.truncate": ConversationItemTruncate,
    "response.create": ResponseCreate,
    "response.cancel": ResponseCancel,
}


# ---- server events xAI adds or shapes differently ----------------------------------------------


class SessionEvent(Strict):
    # [DOCS SILENT] on the exact session object of session.created/session.updated: the
    # session.update shape plus the id the guide's flow reads.
    type: Literal["session.created", "session.updated"]
    event_id: str
    session: dict[str, Any]


class TranscriptionUpdated(Strict):
    # [SCHEMA] "cumulative transcript which may have corrections to previous updated
    # transcripts — this is different from a transcript delta": {item_id, transcript}.
    type: Literal["conversation.item.input_audio_transcription.updated"]
    event_id: str
    item_id: str
    transcript: str


class Ping(Strict):
    # [DOCS SILENT] keep-alive `ping {timestamp}` as integrations observe it (providers.md §5.1).
    type: Literal["ping"]
    event_id: str
    timestamp: int


class TextDeltaBeta(Strict):
    # xAI sends text deltas under both `response.output_text.delta` (the openai model) and the
    # older `response.text.delta` (providers.md §5.3); same fields.
    type: Literal["response.text.delta"]
    event_id: str
    response_id: str
    item_id: str
    output_index: int
    content_index: int
    delta: str


SERVER_EVENTS: dict[str, type[BaseModel]] = {
    "session.created": SessionEvent,
    "session.updated": SessionEvent,
    "conversation.item.input_audio_transcription.updated": TranscriptionUpdated,
    "ping": Ping,
    "response.text.delta": TextDeltaBeta,
}
