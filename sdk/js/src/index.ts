// svc-js: the browser client of svc. See README.md for a ten-line example.
export { SDK_NAME, SDK_VERSION } from './version.js';
export {
  SvcApi,
  SvcApiError,
  SDK_HEADER_VALUE,
  errorFrom,
  type ApiOptions,
  type SessionConfig,
  type ToolResponsePolicy,
  type ToolResponseRule,
  type StartResponse,
  type StartTimings,
  type CredentialInfo,
  type SessionRecord,
  type TranscriptTurn,
  type UsageSummary,
  type Timeline,
  type TimelineEvent,
  type MintedToken,
  type ValidationIssue,
  type SvcErrorDetails,
} from './api.js';
export {
  VoiceSession,
  BackgroundJob,
  TOOL_RESULT_METHOD,
  MAX_RPC_PAYLOAD_BYTES,
  DATA_TOPIC,
  type VoiceSessionOptions,
  type ToolHandler,
  type ToolContext,
  type SessionEvent,
  type SdkEvent,
} from './session.js';
export * from './protocol.js';
export {
  Lifecycle,
  agentStateFromAttribute,
  type SessionStateKind,
  type SessionState,
  type DisconnectReason,
  type TransportState,
  type AgentState,
  type LifecycleInput,
} from './lifecycle.js';
export { ReadyLatch, type Readiness } from './ready.js';
export { EventQueue, EVENT_QUEUE_CAPACITY } from './queue.js';
export {
  encodeMessage,
  Reassembler,
  ENVELOPE_THRESHOLD_BYTES,
  CHUNK_BYTES,
  type ChunkOutcome,
  type ChunkProblem,
} from './chunking.js';
export { TurnTimer, type TurnLatency } from './turns.js';
export { LevelMeter, VOICE_THRESHOLD_DBFS } from './audio.js';
export type { components, paths, operations } from './openapi.js';
