//! The server event types the realtime codec knows but does not act on.

/// Server events of the OpenAI Realtime schema (openai 3.57.0 `RealtimeServerEvent`) and of
/// xAI's documented set that svc does not act on, on purpose (docs/providers/: item
/// bookkeeping svc keeps itself, WebRTC-only output buffers, MCP tools svc does not declare,
/// rate limits, DTMF of a SIP leg svc does not use, keep-alive pings). Anything else is logged
/// once as unknown and ignored.
pub(super) const KNOWN_UNUSED_EVENTS: [&str; 28] = [
    "session.created",
    "conversation.created",
    "conversation.item.added",
    "conversation.item.created",
    "conversation.item.deleted",
    "conversation.item.done",
    "conversation.item.input_audio_transcription.segment",
    "conversation.item.retrieved",
    "conversation.item.truncated",
    "input_audio_buffer.dtmf_event_received",
    "input_audio_buffer.timeout_triggered",
    "mcp_list_tools.completed",
    "mcp_list_tools.failed",
    "mcp_list_tools.in_progress",
    "output_audio_buffer.cleared",
    "output_audio_buffer.started",
    "output_audio_buffer.stopped",
    "rate_limits.updated",
    "response.content_part.added",
    "response.content_part.done",
    "response.function_call_arguments.delta",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.mcp_call.in_progress",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.output_audio.done",
    "ping",
];
