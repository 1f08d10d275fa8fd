//! The session-config body of `POST /realtime/session/start`, parsed into domain types.
//!
//! Parsing is schema-level and collects every problem: a [`StartRequest`] exists only for a body
//! whose shape is valid. Problems are sorted into the spec's three schema-stage answers, in this
//! precedence: `validation_error` (422, every issue with its `loc`), then `invalid_tool_config`
//! (422, every tool problem joined by `; `), then `instructions_too_long`. Everything that needs
//! the model catalog, the workspace or the credential happens later, in `start`.
//!
//! Strictness: unknown fields are `extra_forbidden` at every level (a typo such as `greting` must
//! not silently run a session without a greeting), except the top-level `version` string that
//! older examples carry, which is accepted and ignored. Persona fields at the top level are the
//! legacy flat shape and are reported as such.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use svc_wire::{Loc, ValidationIssue};

use crate::limits::{
    AGENT_NAME_MAX_CHARS, CATALOG_TOOLS_MAX, GREETING_MAX_CHARS, INSTRUCTIONS_MAX_CHARS, SPEAKING_STYLE_MAX_CHARS,
    char_len,
};
use crate::model::{ModelChoice, ModelFields, parse_model_fields};
use crate::parse::{Fields, Issues, body, key};
use crate::requests::{is_agent_handle, is_uuid};
use crate::tools::{SilenceHook, ToolSpec, parse_hooks, parse_tools};

/// Tools an inline agent may declare (the catalog bound applies to catalog starts).
pub use crate::tools::INLINE_TOOLS_MAX;

/// Fields that mark the legacy flat shape when found at the top level.
const LEGACY_TOP_LEVEL_FIELDS: [&str; 12] = [
    "instructions",
    "model",
    "model_options",
    "voice",
    "audio",
    "tools",
    "greeting",
    "interruption_sensitivity",
    "hooks",
    "max_session_seconds",
    "persona",
    "system_prompt",
];

/// The calling client's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sdk {
    /// SDK name.
    pub name: String,
    /// SDK version as sent.
    pub version: String,
}

/// A schema-valid start request.
#[derive(Debug, Clone, PartialEq)]
pub struct StartRequest {
    /// Caller identity.
    pub sdk: Sdk,
    /// The agent to run.
    pub agent: AgentRequest,
    /// Per-run options.
    pub session: SessionParams,
}

/// Inline persona or catalog handle.
#[derive(Debug, Clone, PartialEq)]
#[expect(clippy::large_enum_variant, reason = "one per request, moved once; boxing buys nothing")]
pub enum AgentRequest {
    /// A persona supplied in the request.
    Inline(InlineAgent),
    /// A catalog agent run by handle.
    Catalog(CatalogAgent),
}

/// An inline agent (also the shape a stored catalog configuration parses into).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InlineAgent {
    /// System prompt; `None` = server default.
    pub instructions: Option<String>,
    /// Requested model.
    pub model: Option<ModelChoice>,
    /// Deprecated `model_options`, folded into `model` at resolution.
    pub model_options: Option<ModelChoice>,
    /// Voice.
    pub voice: Option<Voice>,
    /// Audio options.
    pub audio: AudioOptions,
    /// Tool specs.
    pub tools: Vec<ToolSpec>,
    /// Spoken first.
    pub greeting: Option<String>,
    /// Barge-in readiness.
    pub interruption_sensitivity: InterruptionSensitivity,
    /// Silence hooks.
    pub hooks: Vec<SilenceHook>,
    /// Initial session state: when present, the model gets the `set_state` tool and clients see
    /// `svc.session-state` after each write.
    pub state: Option<serde_json::Map<String, Value>>,
    /// The tool-response policy (blocking or not, scheduling of results), when given.
    pub tool_response_policy: Option<crate::tools::ToolResponsePolicy>,
}

/// A catalog agent request.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogAgent {
    /// Handle.
    pub name: String,
    /// Placeholder values.
    pub inputs: BTreeMap<String, String>,
    /// The whole tool set when present (replaces the stored one verbatim).
    pub tools: Option<Vec<ToolSpec>>,
    /// Per-run voice override.
    pub voice: Option<Voice>,
}

/// Voice settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Voice {
    /// Provider-specific voice id.
    pub name: Option<String>,
    /// Appended to the system prompt after the persona.
    pub speaking_style: Option<String>,
}

/// Noise cancellation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseCancellation {
    /// None.
    #[default]
    Off,
    /// Keep every voice.
    Denoise,
    /// Keep only the primary speaker.
    VoiceFocus,
}

/// Audio options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioOptions {
    /// `false` runs text-only.
    pub output: bool,
    /// Input noise cancellation.
    pub noise_cancellation: NoiseCancellation,
}

impl Default for AudioOptions {
    fn default() -> Self {
        AudioOptions { output: true, noise_cancellation: NoiseCancellation::Off }
    }
}

/// How readily user audio barges in over the assistant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptionSensitivity {
    /// Harder to interrupt.
    Low,
    /// The provider's default.
    #[default]
    Default,
    /// Easier to interrupt.
    High,
}

/// Per-run options (`session`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionParams {
    /// Requested cap, 60 to 14400.
    pub max_session_seconds: Option<u32>,
    /// `store_recording`.
    pub store_recording: Option<bool>,
    /// `store_audio`.
    pub store_audio: Option<bool>,
    /// `store_transcript`.
    pub store_transcript: Option<bool>,
    /// `store_video`.
    pub store_video: Option<bool>,
    /// `experimental.resume_session_id`, lowercased.
    pub resume_session_id: Option<String>,
    /// `experimental.avatar`, as sent (fields beyond `provider` are not shown by the spec).
    pub avatar: Option<Value>,
}

/// Why a body is not a start request.
#[derive(Debug, Clone, PartialEq)]
pub enum StartParseError {
    /// 422 `validation_error`.
    Validation(Vec<ValidationIssue>),
    /// 422 `invalid_tool_config`; every problem.
    InvalidToolConfig(Vec<String>),
    /// 422 `instructions_too_long`.
    InstructionsTooLong,
}

/// Parses a session-config body. `sdk_header` is the `X-Svc-SDK` header (`name/version`), used
/// when the body carries no `sdk`.
pub fn parse_start(value: &Value, sdk_header: Option<&str>) -> Result<StartRequest, StartParseError> {
    let mut issues = Issues::default();
    let mut tool_problems = Vec::new();
    let mut instructions_too_long = false;
    let root = body();
    let Some(mut fields) = Fields::of(value, &root, &mut issues) else {
        return Err(StartParseError::Validation(issues.into_vec()));
    };
    for legacy in LEGACY_TOP_LEVEL_FIELDS {
        if fields.raw(legacy).is_some() {
            issues.push(
                &key(&root, legacy),
                "legacy_shape",
                "The flat session-config shape is no longer accepted: persona fields go under `agent`, run options under `session`",
            );
        }
    }
    if let Some(kind) = fields.raw("type").filter(|kind| !kind.is_null())
        && kind.as_str() != Some("session-config")
    {
        issues.push(&key(&root, "type"), "literal_error", "Input should be 'session-config'");
    }
    if let Some(version) = fields.raw("version")
        && !(version.is_string() || version.is_null())
    {
        issues.push(&key(&root, "version"), "string_type", "Input should be a valid string");
    }
    let sdk = match fields.raw("sdk") {
        Some(value) => parse_sdk(value, &key(&root, "sdk"), &mut issues),
        None => match sdk_header.and_then(parse_sdk_header) {
            Some(sdk) => Some(sdk),
            None => {
                issues.push(&key(&root, "sdk"), "missing", "Field required");
                None
            }
        },
    };
    let agent_loc = key(&root, "agent");
    let agent = match fields.raw("agent") {
        None | Some(Value::Null) => Some(AgentRequest::Inline(InlineAgent::default())),
        Some(value) => parse_agent(value, &agent_loc, &mut issues, &mut tool_problems, &mut instructions_too_long),
    };
    let session = match fields.raw("session") {
        None | Some(Value::Null) => Some(SessionParams::default()),
        Some(value) => parse_session(value, &key(&root, "session"), &mut issues),
    };
    fields.deny_unknown(&mut issues);
    if !issues.is_empty() {
        return Err(StartParseError::Validation(issues.into_vec()));
    }
    if !tool_problems.is_empty() {
        return Err(StartParseError::InvalidToolConfig(tool_problems));
    }
    if instructions_too_long {
        return Err(StartParseError::InstructionsTooLong);
    }
    match (sdk, agent, session) {
        (Some(sdk), Some(agent), Some(session)) => Ok(StartRequest { sdk, agent, session }),
        // Every `None` above recorded an issue, so this arm is unreachable in practice; answering
        // with a generic issue keeps it total without a panic.
        _ => Err(StartParseError::Validation(vec![ValidationIssue {
            loc: root,
            kind: "value_error".into(),
            msg: "Invalid session-config".into(),
        }])),
    }
}

fn parse_sdk(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<Sdk> {
    let mut fields = Fields::of(value, loc, issues)?;
    let name = fields.required_string("name", 100, issues);
    let version = fields.required_string("version", 64, issues);
    fields.deny_unknown(issues);
    Some(Sdk { name: name?.to_owned(), version: version?.to_owned() })
}

/// `X-Svc-SDK: name/version` (the User-Agent convention).
pub fn parse_sdk_header(header: &str) -> Option<Sdk> {
    let (name, version) = header.trim().split_once('/')?;
    let (name, version) = (name.trim(), version.trim());
    (!name.is_empty() && !version.is_empty() && name.len() <= 100 && version.len() <= 64)
        .then(|| Sdk { name: name.to_owned(), version: version.to_owned() })
}

fn parse_agent(
    value: &Value,
    loc: &Loc,
    issues: &mut Issues,
    tool_problems: &mut Vec<String>,
    instructions_too_long: &mut bool,
) -> Option<AgentRequest> {
    let Value::Object(map) = value else {
        issues.push(loc, "object_type", "Input should be an object");
        return None;
    };
    match map.get("type").and_then(Value::as_str) {
        Some("inline") => {
            parse_inline_agent(value, loc, true, issues, tool_problems, instructions_too_long).map(AgentRequest::Inline)
        }
        Some("catalog") => parse_catalog_agent(value, loc, issues, tool_problems).map(AgentRequest::Catalog),
        Some(_) => {
            issues.push(&key(loc, "type"), "union_tag_invalid", "Input tag should be 'inline' or 'catalog'");
            None
        }
        None => {
            issues.push(&key(loc, "type"), "missing", "Field required: 'inline' or 'catalog'");
            None
        }
    }
}

/// Parses an inline agent block. With `has_type`, the block carries `type: inline` (a request);
/// without, it is a stored catalog configuration (no `type`).
pub fn parse_inline_agent(
    value: &Value,
    loc: &Loc,
    has_type: bool,
    issues: &mut Issues,
    tool_problems: &mut Vec<String>,
    instructions_too_long: &mut bool,
) -> Option<InlineAgent> {
    let mut fields = Fields::of(value, loc, issues)?;
    if has_type {
        fields.raw("type");
    }
    let instructions = match fields.raw("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            if char_len(text) > INSTRUCTIONS_MAX_CHARS {
                *instructions_too_long = true;
            }
            Some(text.clone())
        }
        Some(_) => {
            issues.push(&fields.loc_of("instructions"), "string_type", "Input should be a valid string");
            None
        }
    };
    let ModelFields { model, model_options } = parse_model_fields(&mut fields, issues);
    let voice =
        fields.raw("voice").filter(|v| !v.is_null()).and_then(|v| parse_voice(v, &fields.loc_of("voice"), issues));
    let audio = match fields.raw("audio") {
        None | Some(Value::Null) => AudioOptions::default(),
        Some(value) => parse_audio(value, &fields.loc_of("audio"), issues),
    };
    let tools = match fields.raw("tools") {
        None | Some(Value::Null) => Vec::new(),
        // A stored catalog configuration may carry as many tools as a catalog start.
        Some(value) => {
            let max = if has_type { INLINE_TOOLS_MAX } else { CATALOG_TOOLS_MAX };
            parse_tools(value, &fields.loc_of("tools"), max, issues, tool_problems)
        }
    };
    let tool_response_policy = fields
        .raw("tool_response_policy")
        .and_then(|value| crate::tools::parse_tool_response_policy(value, &tools, tool_problems));
    let greeting = fields.optional_string("greeting", GREETING_MAX_CHARS, issues).map(str::to_owned);
    let interruption_sensitivity = match fields.raw("interruption_sensitivity") {
        None | Some(Value::Null) => InterruptionSensitivity::Default,
        Some(Value::String(level)) if level == "low" => InterruptionSensitivity::Low,
        Some(Value::String(level)) if level == "default" => InterruptionSensitivity::Default,
        Some(Value::String(level)) if level == "high" => InterruptionSensitivity::High,
        Some(_) => {
            issues.push(
                &fields.loc_of("interruption_sensitivity"),
                "enum",
                "Input should be 'low', 'default' or 'high'",
            );
            InterruptionSensitivity::Default
        }
    };
    let hooks = match fields.raw("hooks") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => parse_hooks(value, &fields.loc_of("hooks"), issues),
    };
    let state = match fields.raw("state") {
        None | Some(Value::Null) => None,
        Some(Value::Object(state)) => {
            if Value::Object(state.clone()).to_string().len() > STATE_MAX_BYTES {
                issues.push(
                    &fields.loc_of("state"),
                    "too_long",
                    format!("State should be at most {STATE_MAX_BYTES} bytes of JSON"),
                );
            }
            Some(state.clone())
        }
        Some(_) => {
            issues.push(&fields.loc_of("state"), "dict_type", "Input should be a valid object");
            None
        }
    };
    if state.is_some() {
        for (position, tool) in tools.iter().enumerate() {
            if let ToolSpec::Client(client) = tool
                && client.name == crate::tools::STATE_TOOL_NAME
            {
                tool_problems.push(format!(
                    "tools[{position}]: the name {} is the session-state tool's when the agent has a `state`",
                    crate::tools::STATE_TOOL_NAME
                ));
            }
        }
    }
    fields.deny_unknown(issues);
    Some(InlineAgent {
        instructions,
        model,
        model_options,
        voice,
        audio,
        tools,
        greeting,
        interruption_sensitivity,
        hooks,
        state,
        tool_response_policy,
    })
}

/// Largest `agent.state`, as JSON (the model reads it with every write; clients get it whole).
pub const STATE_MAX_BYTES: usize = 16 * 1024;

fn parse_catalog_agent(
    value: &Value,
    loc: &Loc,
    issues: &mut Issues,
    tool_problems: &mut Vec<String>,
) -> Option<CatalogAgent> {
    let mut fields = Fields::of(value, loc, issues)?;
    fields.raw("type");
    let name = fields.required_string("name", AGENT_NAME_MAX_CHARS, issues);
    if name.is_some_and(|name| !is_agent_handle(name)) {
        issues.push(
            &fields.loc_of("name"),
            "string_pattern_mismatch",
            "String should match pattern '^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$'",
        );
    }
    let mut inputs = BTreeMap::new();
    match fields.raw("inputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (input, value) in map {
                match value {
                    Value::String(text) => {
                        inputs.insert(input.clone(), text.clone());
                    }
                    _ => issues.push(
                        &key(&fields.loc_of("inputs"), input),
                        "string_type",
                        "Input should be a valid string",
                    ),
                }
            }
        }
        Some(_) => issues.push(&fields.loc_of("inputs"), "dict_type", "Input should be an object of strings"),
    }
    let tools = match fields.raw("tools") {
        None | Some(Value::Null) => None,
        Some(value) => Some(parse_tools(value, &fields.loc_of("tools"), CATALOG_TOOLS_MAX, issues, tool_problems)),
    };
    let voice =
        fields.raw("voice").filter(|v| !v.is_null()).and_then(|v| parse_voice(v, &fields.loc_of("voice"), issues));
    fields.deny_unknown(issues);
    Some(CatalogAgent { name: name?.to_owned(), inputs, tools, voice })
}

fn parse_voice(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<Voice> {
    let mut fields = Fields::of(value, loc, issues)?;
    let name = fields.optional_string("name", 200, issues).map(str::to_owned);
    let speaking_style = fields.optional_string("speaking_style", SPEAKING_STYLE_MAX_CHARS, issues).map(str::to_owned);
    fields.deny_unknown(issues);
    Some(Voice { name, speaking_style })
}

fn parse_audio(value: &Value, loc: &Loc, issues: &mut Issues) -> AudioOptions {
    let mut audio = AudioOptions::default();
    let Some(mut fields) = Fields::of(value, loc, issues) else {
        return audio;
    };
    match fields.raw("output") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(output)) => audio.output = *output,
        Some(_) => issues.push(&fields.loc_of("output"), "bool_type", "Input should be a valid boolean"),
    }
    audio.noise_cancellation = match fields.raw("noise_cancellation") {
        None | Some(Value::Null) => NoiseCancellation::Off,
        // The older spelling: a boolean.
        Some(Value::Bool(true)) => NoiseCancellation::VoiceFocus,
        Some(Value::Bool(false)) => NoiseCancellation::Off,
        Some(Value::String(mode)) if mode == "off" => NoiseCancellation::Off,
        Some(Value::String(mode)) if mode == "denoise" => NoiseCancellation::Denoise,
        Some(Value::String(mode)) if mode == "voice_focus" => NoiseCancellation::VoiceFocus,
        Some(_) => {
            issues.push(
                &fields.loc_of("noise_cancellation"),
                "enum",
                "Input should be 'off', 'denoise' or 'voice_focus'",
            );
            NoiseCancellation::Off
        }
    };
    fields.deny_unknown(issues);
    audio
}

fn optional_bool(fields: &mut Fields<'_>, name: &'static str, issues: &mut Issues) -> Option<bool> {
    match fields.raw(name) {
        None | Some(Value::Null) => None,
        Some(Value::Bool(flag)) => Some(*flag),
        Some(_) => {
            issues.push(&fields.loc_of(name), "bool_type", "Input should be a valid boolean");
            None
        }
    }
}

fn parse_session(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<SessionParams> {
    let mut fields = Fields::of(value, loc, issues)?;
    let max_session_seconds = fields.optional_integer("max_session_seconds", 60, 14_400, issues).map(|n| n as u32);
    let store_recording = optional_bool(&mut fields, "store_recording", issues);
    let store_audio = optional_bool(&mut fields, "store_audio", issues);
    let store_transcript = optional_bool(&mut fields, "store_transcript", issues);
    let store_video = optional_bool(&mut fields, "store_video", issues);
    let mut resume_session_id = None;
    let mut avatar = None;
    if let Some(experimental) = fields.raw("experimental").filter(|v| !v.is_null())
        && let Some(mut experimental) = Fields::of(experimental, &fields.loc_of("experimental"), issues)
    {
        if let Some(id) = experimental.optional_string("resume_session_id", 36, issues) {
            if is_uuid(id) {
                resume_session_id = Some(id.to_ascii_lowercase());
            } else {
                issues.push(&experimental.loc_of("resume_session_id"), "uuid_parsing", "Input should be a valid UUID");
            }
        }
        match experimental.raw("avatar") {
            None | Some(Value::Null) => {}
            Some(block @ Value::Object(map)) => {
                if map.get("provider").and_then(Value::as_str) == Some("avatar_vendor") {
                    avatar = Some(block.clone());
                } else {
                    issues.push(
                        &key(&experimental.loc_of("avatar"), "provider"),
                        "union_tag_invalid",
                        "Input tag should be 'avatar_vendor'",
                    );
                }
            }
            Some(_) => issues.push(&experimental.loc_of("avatar"), "object_type", "Input should be an object"),
        }
        experimental.deny_unknown(issues);
    }
    fields.deny_unknown(issues);
    Some(SessionParams {
        max_session_seconds,
        store_recording,
        store_audio,
        store_transcript,
        store_video,
        resume_session_id,
        avatar,
    })
}
