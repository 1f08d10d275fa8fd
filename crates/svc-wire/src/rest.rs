//! REST request and response bodies under `/api/v1/external`.
//!
//! Field names and shapes follow the interface spec exactly; where the spec shows no shape
//! (prepare-room, timeline, support, agents, whoami, projects) the choice is documented in
//! docs/API-DESIGN.md and these types are its source of truth.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

// Text fields the server stores as text refuse U+0000 (Postgres cannot store it); their schemas
// say so with the pattern `^[^\x00]*$`.

/// Which kind of realtime credential `verify` saw. Open-ended on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    /// A workspace API key.
    ApiKey,
    /// A minted end-user JWT.
    UserToken,
}

/// `{name, slug}` of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceRef {
    /// Display name.
    pub name: String,
    /// Unique slug.
    pub slug: String,
}

/// `GET /realtime/verify` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CredentialInfo {
    /// Credential kind.
    pub credential: CredentialKind,
    /// The workspace of an API key; null for a minted token.
    pub workspace: Option<WorkspaceRef>,
    /// Scopes after hierarchy expansion.
    pub scopes: Vec<String>,
    /// Whether the credential carries `realtime:start`.
    pub can_start_sessions: bool,
    /// Whether the deployment has the default voice stack configured.
    pub realtime_voice_available: bool,
    /// The end user a minted token is bound to; null for an API key.
    pub external_user_id: Option<String>,
}

/// `POST /auth/token` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MintTokenRequest {
    /// The end user the token is bound to (1 to 256 chars).
    #[schema(min_length = 1, max_length = 256, pattern = r"^[^\x00]*$")]
    pub external_user_id: String,
    /// Lifetime, 60 to 86400 seconds; default 86400.
    #[serde(default)]
    #[schema(minimum = 60, maximum = 86400)]
    pub ttl_seconds: Option<i64>,
    /// Extra scopes beyond `realtime:start`: `realtime:read`, `realtime:delete`,
    /// `connectors:read`, `connectors:write`.
    #[serde(default)]
    #[schema(value_type = Option<Vec<MintableScope>>)]
    pub scopes: Option<Vec<String>>,
}

/// A scope a minted token may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum MintableScope {
    /// Implied; may be repeated.
    #[serde(rename = "realtime:start")]
    RealtimeStart,
    /// The end user's own session history.
    #[serde(rename = "realtime:read")]
    RealtimeRead,
    /// Deleting the end user's own sessions.
    #[serde(rename = "realtime:delete")]
    RealtimeDelete,
    /// Reading connectors.
    #[serde(rename = "connectors:read")]
    ConnectorsRead,
    /// Managing connectors.
    #[serde(rename = "connectors:write")]
    ConnectorsWrite,
}

/// `POST /auth/token` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MintedToken {
    /// The end-user JWT.
    pub jwt: String,
    /// Expiry, integer epoch seconds (the JWT's `exp`).
    pub expires_at: i64,
    /// Revocation handle, stable per (workspace, external_user_id) until revoked.
    pub token_id: String,
}

/// Session record status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Live.
    Active,
    /// Ended normally.
    Completed,
    /// Ended abnormally.
    Error,
}

/// Usage summary state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UsageStatus {
    /// Numbers not final yet.
    Pending,
    /// Detailed summary written.
    Recorded,
    /// No summary will be written.
    Unavailable,
}

/// A session record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionRecord {
    /// Session id (UUID).
    pub id: String,
    /// Epoch seconds.
    pub started_at: f64,
    /// Epoch seconds; null while live.
    pub ended_at: Option<f64>,
    /// Status.
    pub status: SessionStatus,
    /// Model provider that served the session.
    pub provider: Option<String>,
    /// Hint that resume would be native rather than by transcript seeding.
    pub has_resumption_handle: bool,
}

/// Transcript role in REST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptRole {
    /// The end user.
    User,
    /// The agent.
    Assistant,
}

/// One transcript turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TranscriptTurn {
    /// Epoch seconds.
    pub ts: f64,
    /// Speaker.
    pub role: TranscriptRole,
    /// What was said.
    #[schema(pattern = r"^[^\x00]*$")]
    pub text: String,
}

/// Token counters of a usage summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UsageTokens {
    /// All input tokens.
    pub input_tokens: i64,
    /// All output tokens.
    pub output_tokens: i64,
    /// Input plus output.
    pub total_tokens: i64,
    /// Input audio tokens.
    pub input_audio_tokens: i64,
    /// Input text tokens.
    pub input_text_tokens: i64,
    /// Input image tokens.
    pub input_image_tokens: i64,
    /// Cached input tokens.
    pub input_cached_tokens: i64,
    /// Output audio tokens.
    pub output_audio_tokens: i64,
    /// Output text tokens.
    pub output_text_tokens: i64,
}

impl UsageTokens {
    /// These counters and `more`'s, summed field by field (saturating; a negative field counts
    /// as 0: counters never go down).
    #[must_use]
    pub fn plus(&self, more: &UsageTokens) -> UsageTokens {
        let add = |a: i64, b: i64| a.max(0).saturating_add(b.max(0));
        UsageTokens {
            input_tokens: add(self.input_tokens, more.input_tokens),
            output_tokens: add(self.output_tokens, more.output_tokens),
            total_tokens: add(self.total_tokens, more.total_tokens),
            input_audio_tokens: add(self.input_audio_tokens, more.input_audio_tokens),
            input_text_tokens: add(self.input_text_tokens, more.input_text_tokens),
            input_image_tokens: add(self.input_image_tokens, more.input_image_tokens),
            input_cached_tokens: add(self.input_cached_tokens, more.input_cached_tokens),
            output_audio_tokens: add(self.output_audio_tokens, more.output_audio_tokens),
            output_text_tokens: add(self.output_text_tokens, more.output_text_tokens),
        }
    }
}

/// `GET /sessions/{id}/usage` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageSummary {
    /// Session status.
    pub status: SessionStatus,
    /// Usage state.
    pub usage_status: UsageStatus,
    /// Null while live.
    pub duration_seconds: Option<f64>,
    /// Model-response turns.
    pub turn_count: Option<i64>,
    /// User talk time.
    pub user_speaking_seconds: Option<f64>,
    /// Agent talk time.
    pub agent_speaking_seconds: Option<f64>,
    /// Provider.
    pub provider: Option<String>,
    /// Model.
    pub model: Option<String>,
    /// Null when the provider reports no token usage.
    pub tokens: Option<UsageTokens>,
}

/// `GET /sessions/capabilities` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Capabilities {
    /// Whether the server is configured for the provider_b family.
    pub openai_provider_available: bool,
}

/// `POST /sessions/import` body (documented shape; the server parses it as a stream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportSessionRequest {
    /// Epoch seconds.
    pub started_at: f64,
    /// Epoch seconds; not before `started_at` (a rule across two fields, which JSON Schema cannot
    /// state: 422 `value_error` at `["body","ended_at"]`).
    #[serde(default)]
    pub ended_at: Option<f64>,
    /// Title.
    #[serde(default)]
    #[schema(pattern = r"^[^\x00]*$")]
    pub title: Option<String>,
    /// Provider that served the call.
    #[serde(default)]
    #[schema(pattern = r"^[^\x00]*$")]
    pub provider: Option<String>,
    /// At most 100,000 turns (more is 400, as the spec fixes it).
    #[serde(default)]
    #[schema(max_items = 100000)]
    pub transcript: Vec<TranscriptTurn>,
    /// A mono WAV (RIFF/WAVE, PCM or float, 8 to 32 bits), base64 in the standard alphabet,
    /// padded or not; at most 200 MB decoded. The shortest WAV (a 44-byte header) is 59
    /// characters. Bytes that are not a mono WAV are 400, which JSON Schema cannot state.
    #[serde(default)]
    #[schema(min_length = 59, pattern = r"^[A-Za-z0-9+/]*={0,2}$")]
    pub audio_wav_base64: Option<String>,
}

/// One timeline event of a session (`GET /sessions/{id}/timeline`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TimelineEvent {
    /// Position in the session's timeline, from 0, gap-free.
    pub seq: i64,
    /// Epoch seconds.
    pub ts: f64,
    /// Event type slug (`session.started`, `transcript.user`, `tool.call`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Event details.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

/// `GET /sessions/{id}/timeline` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Timeline {
    /// Session id.
    pub session_id: String,
    /// Events ordered by `seq`.
    pub events: Vec<TimelineEvent>,
}

/// `POST /support/requests` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SupportRequestCreate {
    /// What happened (1 to 20,000 chars).
    #[schema(min_length = 1, max_length = 20000, pattern = r"^[^\x00]*$")]
    pub message: String,
    /// Short summary (at most 200 chars).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = r"^[^\x00]*$")]
    pub subject: Option<String>,
    /// A session the request is about (UUID); must be in the credential's project, else 404.
    #[serde(default)]
    #[schema(pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    pub session_id: Option<String>,
    /// Where to answer: `local@domain.tld` (one `@`, a dot in the domain, no space or ASCII
    /// control character), at most 320 chars.
    #[serde(default)]
    #[schema(max_length = 320, pattern = r"^[^@\x00-\x20\x7f]+@[^@\x00-\x20\x7f]*\.[^@\x00-\x20\x7f]*$")]
    pub contact_email: Option<String>,
    /// Free-form client diagnostics (at most 64 KiB serialized).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub diagnostics: Option<serde_json::Value>,
}

/// A stored support request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SupportRequestRecord {
    /// Request id (UUID).
    pub id: String,
    /// Always `open` when created.
    pub status: String,
    /// Epoch seconds.
    pub created_at: f64,
    /// The session named, if any.
    pub session_id: Option<String>,
}

/// `GET /projects/default` response, and the project an end-user token acts on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProjectRecord {
    /// Project id (UUID).
    pub id: String,
    /// Display name.
    pub name: String,
    /// `default` for the workspace's own project, `end_user` for a minted token's.
    pub kind: String,
    /// The end user of an `end_user` project.
    pub external_user_id: Option<String>,
    /// Epoch seconds.
    pub created_at: f64,
}

/// `POST /realtime/session/prepare-room` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PreparedRoom {
    /// Reservation id.
    pub reservation_id: String,
    /// The room the next start by this credential will use.
    pub room_name: String,
    /// Epoch seconds after which the reservation lapses unused.
    pub expires_at: f64,
}

/// A workspace user as `whoami` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserInfo {
    /// User id (UUID).
    pub id: String,
    /// Email.
    pub email: String,
    /// Roles (`admin`, `agents-admin`, `recordings-admin`, …).
    pub roles: Vec<String>,
    /// Capabilities (`recordings`, …).
    pub capabilities: Vec<String>,
}

/// `GET /whoami` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Whoami {
    /// `user_access_token` or `acts_as_user_token`.
    pub credential: String,
    /// The user the token authenticates.
    pub user: UserInfo,
    /// The user who acts, for an acts-as-user token.
    pub acting_user: Option<UserInfo>,
    /// The user's workspace.
    pub workspace: WorkspaceRef,
    /// Token expiry, integer epoch seconds.
    pub expires_at: i64,
}

/// A stored catalog agent: the configuration a catalog start runs verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AgentRecord {
    /// Agent id (UUID).
    pub id: String,
    /// Workspace-unique handle.
    pub name: String,
    /// Human description.
    pub description: Option<String>,
    /// The stored configuration.
    pub config: AgentConfig,
    /// Epoch seconds.
    pub created_at: f64,
    /// Epoch seconds.
    pub updated_at: f64,
}

/// The runnable part of a catalog agent, shaped like an inline agent block without `type`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// System prompt (≤ 131,072 chars); may hold `{{key}}` placeholders filled from a start's
    /// `inputs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 131072)]
    pub instructions: Option<String>,
    /// Spoken first (1 to 4000 chars); may hold placeholders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 4000, pattern = r"^[^\x00]*$")]
    pub greeting: Option<String>,
    /// Model: alias, model id, or provider block (resolved against the model catalog at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ModelDoc>)]
    pub model: Option<serde_json::Value>,
    /// The voice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<VoiceDoc>)]
    pub voice: Option<serde_json::Value>,
    /// Audio options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<AudioDoc>)]
    pub audio: Option<serde_json::Value>,
    /// The agent's published tool specs (at most 10,000), checked with the start's rules. A
    /// catalog start runs only the tools it sends itself (spec), so clients read these and pass
    /// them on; they are never run otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<ToolDoc>>, max_items = 10000)]
    pub tools: Option<Vec<serde_json::Value>>,
    /// How readily the user's voice interrupts the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<InterruptionSensitivityDoc>)]
    pub interruption_sensitivity: Option<String>,
    /// Silence hooks (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<HookDoc>>, max_items = 16)]
    pub hooks: Option<Vec<serde_json::Value>>,
    /// Initial session state (≤ 16 KiB of JSON); the model gets a `set_state` tool and clients see
    /// `svc.session-state` after each write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub state: Option<serde_json::Value>,
    /// Whether the model waits for each tool's result, and when non-blocking results reach the
    /// conversation; problems are 422 `invalid_tool_config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ToolResponsePolicyDoc>)]
    pub tool_response_policy: Option<serde_json::Value>,
}

/// `POST /agents` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentCreate {
    /// Handle, `^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`, at most 100 chars, unique in the workspace.
    #[schema(min_length = 1, max_length = 100, pattern = r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")]
    pub name: String,
    /// Human description (at most 2000 chars).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 2000, pattern = r"^[^\x00]*$")]
    pub description: Option<String>,
    /// The configuration.
    #[serde(default)]
    pub config: AgentConfig,
}

/// `PATCH /agents/{name}` body: present fields replace stored ones; `config` replaces as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentUpdate {
    /// New description (at most 2000 chars); null clears it.
    #[serde(default, with = "double_option")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 2000, pattern = r"^[^\x00]*$")]
    pub description: Option<Option<String>>,
    /// New configuration, replacing the stored one; absent keeps it. Not nullable: an agent
    /// always has a configuration (send `{}` for the empty one).
    #[serde(default)]
    #[schema(nullable = false)]
    pub config: Option<AgentConfig>,
}

/// Distinguishes an absent field (`None`) from an explicit null (`Some(None)`).
mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer, T: Serialize>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

/// Server-side phase breakdown of a session start, in milliseconds (0 for a phase the serving
/// flow lacks).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StartTimings {
    /// SDK version floor check.
    pub version_check_ms: f64,
    /// Project, billing and resume checks.
    pub project_check_ms: f64,
    /// Provider entitlement and availability.
    pub provider_resolve_ms: f64,
    /// Session row insert (with the concurrency gate) and room reservation.
    pub db_insert_ms: f64,
    /// Room token minting.
    pub mint_tokens_ms: f64,
    /// Handing the session to the runtime.
    pub dispatch_ms: f64,
    /// Whole request, from arrival to response.
    pub total_ms: f64,
    /// Agent, tool and model resolution.
    pub resolve_ms: f64,
}

/// `POST /realtime/session/{session_id}/dial` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DialRequest {
    /// The number to call, E.164: a plus sign then 8 to 15 digits.
    #[schema(max_length = 20, pattern = r"^\+[0-9]{8,15}$")]
    pub phone_number: String,
    /// The caller id to present: an ACTIVE number of the workspace's pool. Without it, the
    /// trunk's default.
    #[serde(default)]
    #[schema(max_length = 20, pattern = r"^\+[0-9]{8,15}$")]
    pub caller_number: Option<String>,
}

/// `POST /realtime/session/{session_id}/dial` answer: the call rings asynchronously.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DialAccepted {
    /// Correlates the dial in logs, the timeline and the data channel's dial events (UUID).
    pub dial_id: String,
}

/// `POST /realtime/session/start` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StartResponse {
    /// Media room address.
    pub livekit_url: String,
    /// Short-lived participant join token; do not cache.
    pub token: String,
    /// Media room name.
    pub room_name: String,
    /// Session id (UUID).
    pub session_id: String,
    /// Server-side phase breakdown.
    pub timings: StartTimings,
}

/// `POST /realtime/session/start` body (documentation of the shape; the server parses it with
/// `svc_domain::session_config`, which collects every problem).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionConfigDoc {
    /// Always `session-config`.
    #[serde(rename = "type", default)]
    #[schema(value_type = Option<SessionConfigType>)]
    pub kind: Option<String>,
    /// Free-form client configuration version (informational).
    #[serde(default)]
    pub version: Option<String>,
    /// Identity of the calling client (also accepted as the `X-Svc-SDK: name/version` header).
    pub sdk: SdkDoc,
    /// Inline persona or catalog agent; default a neutral inline agent.
    #[serde(default)]
    pub agent: Option<AgentDoc>,
    /// Per-run options.
    #[serde(default)]
    pub session: Option<SessionParamsDoc>,
}

/// The session-config discriminator's one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum SessionConfigType {
    /// `session-config`.
    #[serde(rename = "session-config")]
    SessionConfig,
}

/// `{name, version}` of the calling client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SdkDoc {
    /// SDK name (1 to 100 chars).
    #[schema(min_length = 1, max_length = 100, pattern = r"^[^\x00]*$")]
    pub name: String,
    /// SDK version (1 to 64 chars; compared as `major.minor.patch` against `--sdk-floors`).
    #[schema(min_length = 1, max_length = 64, pattern = r"^[^\x00]*$")]
    pub version: String,
}

/// Agent block, discriminated on `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentDoc {
    /// A persona supplied in the request.
    Inline(InlineAgentDoc),
    /// A workspace catalog agent (or built-in `svc-` agent) run by handle. No other fields allowed.
    Catalog(CatalogAgentDoc),
}

/// Inline agent fields. The deprecated `model_options` is absent, as the spec publishes it
/// (Versioning 6); the server still accepts it from older clients and folds it into `model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InlineAgentDoc {
    /// ≤ 131,072 chars, else `instructions_too_long`.
    #[serde(default)]
    #[schema(max_length = 131072)]
    pub instructions: Option<String>,
    /// Provider alias, concrete model id, or provider block `{provider, model_id?, …knobs}`.
    #[serde(default)]
    #[schema(value_type = Option<ModelDoc>)]
    pub model: Option<serde_json::Value>,
    /// The voice.
    #[serde(default)]
    pub voice: Option<VoiceDoc>,
    /// Audio options.
    #[serde(default)]
    pub audio: Option<AudioDoc>,
    /// Tool specs discriminated on `kind` (at most 128).
    #[serde(default)]
    #[schema(value_type = Option<Vec<ToolDoc>>, max_items = 128)]
    pub tools: Option<Vec<serde_json::Value>>,
    /// What the agent says first (1 to 4000 chars).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 4000, pattern = r"^[^\x00]*$")]
    pub greeting: Option<String>,
    /// How readily the user's voice interrupts the agent.
    #[serde(default)]
    #[schema(value_type = Option<InterruptionSensitivityDoc>)]
    pub interruption_sensitivity: Option<String>,
    /// Silence hooks (at most 16).
    #[serde(default)]
    #[schema(value_type = Option<Vec<HookDoc>>, max_items = 16)]
    pub hooks: Option<Vec<serde_json::Value>>,
    /// Initial session state (≤ 16 KiB of JSON); the model gets a `set_state` tool and clients see
    /// `svc.session-state` after each write.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub state: Option<serde_json::Value>,
    /// Whether the model waits for each tool's result, and when non-blocking results reach the
    /// conversation (provider_a on the wire; OpenAI Realtime and xAI emulate it); problems are 422
    /// `invalid_tool_config`.
    #[serde(default)]
    pub tool_response_policy: Option<ToolResponsePolicyDoc>,
}

/// `agent.tool_response_policy`: a session default and per-tool overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResponsePolicyDoc {
    /// Applies to every tool without an override [default: `{"behavior": "blocking"}`].
    #[serde(default)]
    pub default: Option<ToolResponseRuleDoc>,
    /// Rules by tool name (a client tool's `name` or a server tool's kind); each must name a tool
    /// of the agent.
    #[serde(default)]
    pub overrides: Option<std::collections::BTreeMap<String, ToolResponseRuleDoc>>,
}

/// One rule of the tool-response policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResponseRuleDoc {
    /// `blocking`: the model waits for the result; `non_blocking`: it keeps talking.
    pub behavior: ToolBehaviorDoc,
    /// When a non-blocking result reaches the conversation [default: `when_idle`]; not allowed on
    /// a `blocking` rule.
    #[serde(default)]
    pub scheduling: Option<ToolSchedulingDoc>,
}

/// `tool_response_policy` behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolBehaviorDoc {
    /// The model waits for the result.
    Blocking,
    /// The model keeps talking; the result arrives per `scheduling`.
    NonBlocking,
}

/// `tool_response_policy` scheduling of non-blocking results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolSchedulingDoc {
    /// After the current turn.
    WhenIdle,
    /// Into the context; nothing is said.
    Silent,
    /// Now, cutting current speech.
    Interrupt,
}

/// Catalog agent fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogAgentDoc {
    /// Handle, `^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`, ≤ 100 chars; an unknown handle is 404.
    #[schema(min_length = 1, max_length = 100, pattern = r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")]
    pub name: String,
    /// Values for `{{key}}` placeholders.
    #[serde(default)]
    pub inputs: Option<std::collections::BTreeMap<String, String>>,
    /// The session's whole tool set (≤ 10,000), used verbatim; empty or absent means no tools
    /// (the stored agent's `tools` are not run).
    #[serde(default)]
    #[schema(value_type = Option<Vec<ToolDoc>>, max_items = 10000)]
    pub tools: Option<Vec<serde_json::Value>>,
    /// Per-run voice override.
    #[serde(default)]
    pub voice: Option<VoiceDoc>,
}

/// `agent.model`: a provider alias or model id of the catalog (anything else is 422
/// `model_unavailable` at start), or a provider block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ModelDoc {
    /// `provider_a` … `provider_c`, or a concrete model id.
    Name(String),
    /// `{provider, model_id?, …}` with the provider's knobs (docs/API-DESIGN.md lists them).
    Block(ModelBlockDoc),
}

/// A provider block. Each provider takes its own knobs; an unknown knob is a validation error.
/// (Placeholder: the server's OpenAPI document replaces it with the per-provider schema built from
/// `svc_domain::model`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ModelBlockDoc {
    /// The provider alias.
    pub provider: ProviderAliasDoc,
    /// A concrete model id of the provider (the catalog's default when absent).
    #[serde(default)]
    pub model_id: Option<String>,
}

/// A tool spec (placeholder: the server's OpenAPI document replaces it with the schema built from
/// `svc_domain::tools`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolDoc {
    /// Tool kind.
    pub kind: String,
}

/// A silence hook (placeholder: the server's OpenAPI document replaces it with the schema built
/// from `svc_domain::tools`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HookDoc {
    /// `user.speech.timeout`.
    pub trigger: String,
}

/// Provider aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderAliasDoc {
    /// Gemini Live.
    ProviderA,
    /// OpenAI Realtime.
    ProviderB,
    /// OpenAI Realtime mini.
    ProviderBMini,
    /// OpenAI GPT-Live.
    ProviderBLive,
    /// xAI Grok voice.
    ProviderC,
}

/// `agent.voice`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VoiceDoc {
    /// The provider's voice name (1 to 200 chars).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = r"^[^\x00]*$")]
    pub name: Option<String>,
    /// How to speak (1 to 8192 chars).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 8192, pattern = r"^[^\x00]*$")]
    pub speaking_style: Option<String>,
}

/// `agent.audio`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AudioDoc {
    /// `false`: no spoken output (text only); default `true`.
    #[serde(default)]
    pub output: Option<bool>,
    /// Filtering of the user's audio: a mode, or the older boolean (`true` is `voice_focus`).
    #[serde(default)]
    pub noise_cancellation: Option<NoiseCancellationDoc>,
}

/// `agent.audio.noise_cancellation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum NoiseCancellationDoc {
    /// A mode.
    Mode(NoiseCancellationMode),
    /// The older spelling.
    Flag(bool),
}

/// A noise-cancellation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NoiseCancellationMode {
    /// No filtering.
    Off,
    /// RNNoise.
    Denoise,
    /// RNNoise and a primary-talker gate.
    VoiceFocus,
}

/// `agent.interruption_sensitivity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InterruptionSensitivityDoc {
    /// A surer voice is needed.
    Low,
    /// The provider's default.
    Default,
    /// Interrupts readily.
    High,
}

/// Session params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionParamsDoc {
    /// 60 to 14400; the effective cap is the minimum of this and the server's.
    #[serde(default)]
    #[schema(minimum = 60, maximum = 14400)]
    pub max_session_seconds: Option<u32>,
    /// `false` writes no recording artifacts.
    #[serde(default)]
    pub store_recording: Option<bool>,
    /// Wins over `store_recording`; narrows only.
    #[serde(default)]
    pub store_audio: Option<bool>,
    /// Transcript and tool events.
    #[serde(default)]
    pub store_transcript: Option<bool>,
    /// Screen-share video and screenshots.
    #[serde(default)]
    pub store_video: Option<bool>,
    /// Experimental options; may change shape.
    #[serde(default)]
    pub experimental: Option<ExperimentalDoc>,
}

/// `session.experimental`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentalDoc {
    /// A prior session of the caller's project to resume (UUID; an unknown one is 404).
    #[serde(default)]
    #[schema(pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    pub resume_session_id: Option<String>,
    /// An avatar renderer (only with the workspace's avatar flag; otherwise the session starts
    /// without it).
    #[serde(default)]
    pub avatar: Option<AvatarDoc>,
}

/// `session.experimental.avatar`: its other fields are passed to the vendor as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AvatarDoc {
    /// The renderer.
    pub provider: AvatarProvider,
}

/// Avatar vendors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AvatarProvider {
    /// The one vendor.
    AvatarVendor,
}
