// The data-channel protocol of the spec's Events section, as TypeScript types, and the parser that
// turns a decoded JSON object into a typed event. The parser never throws: a message whose `type`
// this SDK does not know, or whose fields do not have the shapes below, becomes an `unknown` event
// carrying the raw object (forward compatibility: the protocol evolves additively).

/** Data-channel error codes (`error.code`). Open-ended: treat unknown codes as `internal_error`. */
export type DataErrorCode =
  | 'upstream_disconnect'
  | 'internal_error'
  | 'auth_failed'
  | 'workspace_forbidden'
  | 'voice_disabled'
  | 'invalid_message'
  | 'version_mismatch'
  | (string & {});

export type Role = 'USER' | 'ASSISTANT';

export interface ReadyEvent {
  type: 'ready';
  session_id: string;
  /** `{name, tools}` for a catalog agent, null for an inline one. */
  agent: { name: string; tools: string[] } | null;
  rejected_tools: { name: string; reason: string }[];
  /** Null means no cap. */
  max_session_seconds: number | null;
}
export interface ReconnectingEvent {
  type: 'reconnecting';
  seconds_remaining: number | null;
}
/** First-party, additive: the rotation `reconnecting` announced is over. */
export interface ReconnectedEvent {
  type: 'svc.reconnected';
  resumed: boolean;
}
export interface SessionEndingSoonEvent {
  type: 'session-ending-soon';
  seconds_remaining: number;
  reason: string;
}
export interface SessionEndedEvent {
  type: 'session-ended';
  reason: string;
}
/** A phone dial-out's progress (`POST /realtime/session/{id}/dial`). */
export interface DialProgressEvent {
  type: 'dial-progress';
  dial_id: string;
  /** `failed` (never answered) and `ended` (after an answer) are final. */
  status: 'ringing' | 'answered' | 'failed' | 'ended' | 'dtmf';
  /** Why it failed or ended (`busy`, `no_answer`, `hangup`, …). */
  reason: string | null;
  /** The SIP status of a failure. */
  sip_status: number | null;
  /** `ended`: who hung up. */
  ended_by: 'phone' | 'svc' | null;
  /** `ended`: seconds from the answer to the end. */
  duration_seconds: number | null;
  /** `dtmf`: the key pressed. */
  digit: string | null;
}
const DIAL_STATUSES = ['ringing', 'answered', 'failed', 'ended', 'dtmf'] as const;
export interface ErrorEvent {
  type: 'error';
  code: DataErrorCode;
  message: string;
  fatal: boolean;
}
export interface PongEvent {
  type: 'pong';
}
export interface TranscriptEvent {
  type: 'transcript';
  role: Role;
  /** A fragment to append while `is_final` is false; the whole turn when true. */
  text: string;
  is_final: boolean;
}
export interface ModelTextEvent {
  type: 'model-text';
  text: string;
  is_final: boolean;
}
export interface TurnCompleteEvent {
  type: 'turn-complete';
  role: Role;
}
export const MARKER_TYPES = [
  'user-started-speaking',
  'user-stopped-speaking',
  'bot-started-speaking',
  'bot-stopped-speaking',
  'bot-llm-started',
  'bot-llm-stopped',
  'bot-tts-started',
  'bot-tts-stopped',
] as const;
export type MarkerType = (typeof MARKER_TYPES)[number];
export interface MarkerEvent {
  type: MarkerType;
}
export interface UserSpeechTimeoutEvent {
  type: 'user-speech-timeout';
  session_id: string;
  silence_ms: number;
  trigger_count: number;
  max_count: number;
  action: Record<string, unknown>;
}
export interface ToolCallEvent {
  type: 'tool-call' | 'tool-dispatch-started';
  tool_call_id: string;
  name: string;
}
export interface ToolResultEvent {
  type: 'tool-result';
  tool_call_id: string;
  ok: boolean;
  summary: string | null;
}
export interface ToolInvocationEvent {
  type: 'tool-invocation';
  request_id: string;
  tool_call_id: string;
  name: string;
  args: Record<string, unknown>;
  origin: 'realtime' | 'server' | (string & {});
  /** False marks an informational mirror executed out of band. */
  executable: boolean;
}
export interface DelegationCreatedEvent {
  type: 'delegation-created';
  delegation_id: string;
  transcript: string;
}
export interface UsageEvent {
  type: 'svc.usage';
  input_text_tokens: number;
  input_image_tokens: number;
  input_audio_tokens: number;
  input_cached_tokens: number;
  output_text_tokens: number;
  output_audio_tokens: number;
  total_tokens: number;
}
export interface SessionStateEvent {
  type: 'svc.session-state';
  state: Record<string, unknown>;
  updated_keys: string[];
  warnings: string[];
  stage: string | null;
}
/** A message whose `type` this SDK does not know (or whose fields it could not read). */
export interface UnknownEvent {
  type: 'unknown';
  /** The message's own `type`, if it had a string one. */
  raw_type: string | null;
  /** The message as received. */
  message: unknown;
}

/** Every event the server sends, as this SDK reads it. */
export type ServerEvent =
  | ReadyEvent
  | ReconnectingEvent
  | ReconnectedEvent
  | SessionEndingSoonEvent
  | SessionEndedEvent
  | DialProgressEvent
  | ErrorEvent
  | PongEvent
  | TranscriptEvent
  | ModelTextEvent
  | TurnCompleteEvent
  | MarkerEvent
  | UserSpeechTimeoutEvent
  | ToolCallEvent
  | ToolResultEvent
  | ToolInvocationEvent
  | DelegationCreatedEvent
  | UsageEvent
  | SessionStateEvent
  | UnknownEvent;

/** Messages the client sends on the data channel (the spec's "Client to server"). */
export type ClientMessage =
  | { type: 'mute'; muted: boolean }
  | { type: 'send-text'; content: string }
  | { type: 'send-context'; content: string }
  | { type: 'send-image'; mime_type: string; data: string; stream_id: string }
  | { type: 'activity-end' }
  | { type: 'bind-input' }
  | {
      type: 'tool_job_result';
      job_id: string;
      tool_name: string;
      status: 'completed' | 'failed';
      result?: Record<string, unknown>;
      summary?: string;
      error?: string;
    }
  | { type: 'delegation-append'; channel: 'thinking' | 'commentary' | 'instructions'; content: string; delegation_id?: string }
  | {
      type: 'connect-timings';
      mic_ms?: number;
      ready_ms?: number;
      request_ms?: number;
      room_ms?: number;
      server?: Record<string, unknown>;
    }
  | { type: 'end' }
  | { type: 'ping' };

type Json = Record<string, unknown>;
const isString = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isRole = (v: unknown): v is Role => v === 'USER' || v === 'ASSISTANT';
const orNull = <T>(v: unknown, check: (v: unknown) => v is T): v is T | null => v === null || v === undefined || check(v);
const numberOrZero = (v: unknown): number => (isNumber(v) ? v : 0);

/**
 * Reads one decoded server message. Known types are checked field by field (defaults filled in
 * where the spec gives one); anything else becomes an `unknown` event. Never throws.
 */
export function parseServerEvent(message: unknown): ServerEvent {
  const unknown = (): UnknownEvent => ({
    type: 'unknown',
    raw_type: isObject(message) && isString(message.type) ? message.type : null,
    message,
  });
  if (!isObject(message) || !isString(message.type)) return unknown();
  const m = message;
  const type: string = message.type;
  switch (type) {
    case 'ready': {
      if (!isString(m.session_id)) return unknown();
      const agent = isObject(m.agent) && isString(m.agent.name) && Array.isArray(m.agent.tools)
        ? { name: m.agent.name, tools: m.agent.tools.filter(isString) }
        : null;
      const rejected = Array.isArray(m.rejected_tools)
        ? m.rejected_tools.filter(isObject).map((r) => ({ name: String(r.name ?? ''), reason: String(r.reason ?? '') }))
        : [];
      return {
        type: 'ready',
        session_id: m.session_id,
        agent,
        rejected_tools: rejected,
        max_session_seconds: isNumber(m.max_session_seconds) ? m.max_session_seconds : null,
      };
    }
    case 'reconnecting':
      return { type: 'reconnecting', seconds_remaining: isNumber(m.seconds_remaining) ? m.seconds_remaining : null };
    case 'svc.reconnected':
      return { type: 'svc.reconnected', resumed: m.resumed === true };
    case 'session-ending-soon':
      if (!isNumber(m.seconds_remaining)) return unknown();
      return { type: 'session-ending-soon', seconds_remaining: m.seconds_remaining, reason: isString(m.reason) ? m.reason : '' };
    case 'session-ended':
      return { type: 'session-ended', reason: isString(m.reason) ? m.reason : '' };
    case 'dial-progress': {
      const status = DIAL_STATUSES.find((known) => known === m.status);
      if (!isString(m.dial_id) || status === undefined) return unknown();
      return {
        type: 'dial-progress',
        dial_id: m.dial_id,
        status,
        reason: isString(m.reason) ? m.reason : null,
        sip_status: isNumber(m.sip_status) ? m.sip_status : null,
        ended_by: m.ended_by === 'phone' || m.ended_by === 'svc' ? m.ended_by : null,
        duration_seconds: isNumber(m.duration_seconds) ? m.duration_seconds : null,
        digit: isString(m.digit) ? m.digit : null,
      };
    }
    case 'error':
      if (!isString(m.code)) return unknown();
      return { type: 'error', code: m.code, message: isString(m.message) ? m.message : '', fatal: m.fatal === true };
    case 'pong':
      return { type: 'pong' };
    case 'transcript':
      if (!isRole(m.role) || !isString(m.text)) return unknown();
      return { type: 'transcript', role: m.role, text: m.text, is_final: m.is_final === true };
    case 'model-text':
      if (!isString(m.text)) return unknown();
      return { type: 'model-text', text: m.text, is_final: m.is_final === true };
    case 'turn-complete':
      if (!isRole(m.role)) return unknown();
      return { type: 'turn-complete', role: m.role };
    case 'user-speech-timeout':
      return {
        type: 'user-speech-timeout',
        session_id: isString(m.session_id) ? m.session_id : '',
        silence_ms: numberOrZero(m.silence_ms),
        trigger_count: numberOrZero(m.trigger_count),
        max_count: numberOrZero(m.max_count),
        action: isObject(m.action) ? m.action : {},
      };
    case 'tool-call':
    case 'tool-dispatch-started':
      if (!isString(m.tool_call_id) || !isString(m.name)) return unknown();
      return { type, tool_call_id: m.tool_call_id, name: m.name };
    case 'tool-result':
      if (!isString(m.tool_call_id) || !isBool(m.ok) || !orNull(m.summary, isString)) return unknown();
      return { type: 'tool-result', tool_call_id: m.tool_call_id, ok: m.ok, summary: m.summary ?? null };
    case 'tool-invocation':
      if (!isString(m.request_id) || !isString(m.tool_call_id) || !isString(m.name)) return unknown();
      return {
        type: 'tool-invocation',
        request_id: m.request_id,
        tool_call_id: m.tool_call_id,
        name: m.name,
        args: isObject(m.args) ? m.args : {},
        origin: isString(m.origin) ? m.origin : 'realtime',
        executable: m.executable !== false,
      };
    case 'delegation-created':
      if (!isString(m.delegation_id)) return unknown();
      return { type: 'delegation-created', delegation_id: m.delegation_id, transcript: isString(m.transcript) ? m.transcript : '' };
    case 'svc.usage':
      return {
        type: 'svc.usage',
        input_text_tokens: numberOrZero(m.input_text_tokens),
        input_image_tokens: numberOrZero(m.input_image_tokens),
        input_audio_tokens: numberOrZero(m.input_audio_tokens),
        input_cached_tokens: numberOrZero(m.input_cached_tokens),
        output_text_tokens: numberOrZero(m.output_text_tokens),
        output_audio_tokens: numberOrZero(m.output_audio_tokens),
        total_tokens: numberOrZero(m.total_tokens),
      };
    case 'svc.session-state':
      if (!isObject(m.state)) return unknown();
      return {
        type: 'svc.session-state',
        state: m.state,
        updated_keys: Array.isArray(m.updated_keys) ? m.updated_keys.filter(isString) : [],
        warnings: Array.isArray(m.warnings) ? m.warnings.filter(isString) : [],
        stage: isString(m.stage) ? m.stage : null,
      };
    default:
      if ((MARKER_TYPES as readonly string[]).includes(type)) return { type: type as MarkerType };
      return unknown();
  }
}
