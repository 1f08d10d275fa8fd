//! Session-start resolution: a parsed [`StartRequest`] plus what the server knows (model catalog,
//! runnable server tools, the credential's scopes, the workspace's consents and flags, the
//! catalog agent's stored configuration) becomes a [`ResolvedSession`], or the typed rejection
//! the spec's table names. Pure: the server does every lookup first and passes the results in.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::{GREETING_MAX_CHARS, INSTRUCTIONS_MAX_CHARS, char_len};
use crate::model::{Delegation, ModelCatalog, ModelError, ResolvedModel, resolve_model};
use crate::parse::Issues;
use crate::requests::substitute_placeholders;
use crate::session_config::{
    AgentRequest, AudioOptions, InlineAgent, InterruptionSensitivity, Sdk, SessionParams, StartRequest, Voice,
    parse_inline_agent,
};
use crate::settings::RecordingConsents;
use crate::tools::{
    RejectedTool, STATE_TOOL_NAME, ServerToolAvailability, SilenceHook, ToolResponsePolicy, ToolSpec,
    apply_availability, apply_model_support, tool_names,
};

/// Instructions of the neutral inline agent (a start with no `agent`, or no `instructions`).
pub const DEFAULT_INSTRUCTIONS: &str = "You are a helpful voice assistant. Speak naturally, keep answers short and \
    conversational, and ask a brief clarifying question when a request is ambiguous.";

/// What the server knows when it resolves a start.
#[derive(Debug, Clone, Copy)]
pub struct StartContext<'a> {
    /// Models and aliases.
    pub catalog: &'a ModelCatalog,
    /// Server tools this deployment runs.
    pub server_tools: &'a ServerToolAvailability,
    /// Whether the credential holds `resources:read` (never true for minted tokens).
    pub caller_has_resources_read: bool,
    /// The workspace's recording consents.
    pub consents: RecordingConsents,
    /// The workspace's avatar flag.
    pub avatar_enabled: bool,
    /// The server's cap on session length.
    pub server_max_session_seconds: Option<u32>,
}

/// The catalog agent a catalog start names, as the server found it.
#[derive(Debug, Clone, Copy)]
pub enum CatalogLookup<'a> {
    /// Not a catalog start.
    NotApplicable,
    /// A workspace agent or built-in agent: its stored configuration document.
    Found(&'a Value),
    /// No such agent in this workspace or the built-in library.
    NotFound,
}

/// What may be recorded for this session (consents narrowed by the request's store flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFlags {
    /// Audio recording.
    pub audio: bool,
    /// Transcript and tool events.
    pub transcript: bool,
    /// Screen-share video and screenshots.
    pub video: bool,
}

/// Where the agent came from: the start's own persona, or the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// Supplied in the start request.
    Inline,
    /// A catalog agent run by handle.
    Catalog,
}

/// The agent as it will run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedAgent {
    /// Inline or from the catalog.
    pub kind: AgentKind,
    /// Catalog handle.
    pub name: Option<String>,
    /// The persona.
    pub instructions: String,
    /// Spoken first.
    pub greeting: Option<String>,
    /// Voice (speaking style is appended after the persona by the provider adapter).
    pub voice: Voice,
    /// Audio options.
    pub audio: AudioOptions,
    /// Barge-in readiness.
    pub interruption_sensitivity: InterruptionSensitivity,
    /// Tools the session runs (unavailable server tools removed).
    pub tools: Vec<ToolSpec>,
    /// Silence hooks.
    pub hooks: Vec<SilenceHook>,
    /// Initial session state (`set_state` is offered when present).
    pub state: Option<serde_json::Map<String, Value>>,
    /// The tool-response policy, with overrides only for tools the session runs.
    pub tool_response_policy: Option<ToolResponsePolicy>,
}

/// Everything the runtime needs to run the session. Serialized into the session row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedSession {
    /// Caller identity.
    pub sdk: Sdk,
    /// The agent.
    pub agent: ResolvedAgent,
    /// Valid tools this deployment cannot run, for the `ready` frame.
    pub rejected_tools: Vec<RejectedTool>,
    /// The model.
    pub model: ResolvedModel,
    /// Effective cap: the minimum of the request and the server limit; `None` = no cap.
    pub max_session_seconds: Option<u32>,
    /// What may be recorded.
    pub store: StoreFlags,
    /// Prior session to resume (already checked to be in the caller's project).
    pub resume_session_id: Option<String>,
    /// Avatar block, when requested and allowed.
    pub avatar: Option<Value>,
    /// Requested features the start continued without (`avatar_disabled`).
    pub warnings: Vec<String>,
}

impl ResolvedSession {
    /// The `ready.agent` value: `{name, tools}` for a catalog agent, null for inline.
    pub fn ready_agent(&self) -> Value {
        match &self.agent.name {
            Some(name) if self.agent.kind == AgentKind::Catalog => {
                serde_json::json!({"name": name, "tools": tool_names(&self.agent.tools)})
            }
            _ => Value::Null,
        }
    }
}

/// A start the spec rejects after parsing.
#[derive(Debug, Clone, PartialEq)]
pub enum StartRejection {
    /// `unknown_agent`.
    UnknownAgent(String),
    /// `agent_config_unavailable`.
    AgentConfigUnavailable(String),
    /// `greeting_too_long` (catalog greeting after substitution).
    GreetingTooLong,
    /// `instructions_too_long` (catalog instructions after substitution).
    InstructionsTooLong,
    /// A model rule: `model_unavailable`, `turn_detection_*`, `thinking_level_unsupported`.
    Model(ModelError),
    /// 400 `api_error` without code: text-only output on a speech-to-speech-only model.
    TextOnlyUnsupported(String),
    /// `delegation_tools_unsupported`.
    DelegationToolsUnsupported,
    /// `svc_delegation_scope_required`.
    SvcDelegationScopeRequired,
}

/// Resolves a parsed start.
pub fn resolve_start(
    request: StartRequest,
    catalog_agent: CatalogLookup<'_>,
    context: &StartContext<'_>,
) -> Result<ResolvedSession, StartRejection> {
    let StartRequest { sdk, agent, session } = request;
    let (kind, name, agent) = match agent {
        AgentRequest::Inline(inline) => (AgentKind::Inline, None, inline),
        AgentRequest::Catalog(catalog) => {
            let stored = match catalog_agent {
                CatalogLookup::Found(config) => config,
                CatalogLookup::NotFound | CatalogLookup::NotApplicable => {
                    return Err(StartRejection::UnknownAgent(catalog.name));
                }
            };
            let mut agent = load_stored_agent(stored)
                .ok_or_else(|| StartRejection::AgentConfigUnavailable(catalog.name.clone()))?;
            agent.instructions = agent.instructions.map(|text| substitute_placeholders(&text, &catalog.inputs));
            agent.greeting = agent.greeting.map(|text| substitute_placeholders(&text, &catalog.inputs));
            if agent.greeting.as_deref().is_some_and(|greeting| char_len(greeting) > GREETING_MAX_CHARS) {
                return Err(StartRejection::GreetingTooLong);
            }
            if agent.instructions.as_deref().is_some_and(|text| char_len(text) > INSTRUCTIONS_MAX_CHARS) {
                return Err(StartRejection::InstructionsTooLong);
            }
            // The start's tools are the whole tool set, used verbatim; empty or absent means no
            // tools (spec, "agent, catalog variant"): the client that runs the client tools says
            // which exist, so a stored agent's `tools` are never run behind its back.
            agent.tools = catalog.tools.unwrap_or_default();
            if let Some(voice) = catalog.voice {
                let base = agent.voice.take().unwrap_or_default();
                agent.voice = Some(Voice {
                    name: voice.name.or(base.name),
                    speaking_style: voice.speaking_style.or(base.speaking_style),
                });
            }
            (AgentKind::Catalog, Some(catalog.name), agent)
        }
    };
    let model = resolve_model(context.catalog, agent.model.as_ref(), agent.model_options.as_ref())
        .map_err(StartRejection::Model)?;
    if !agent.audio.output && model.speech_to_speech_only {
        return Err(StartRejection::TextOnlyUnsupported(model.model_id));
    }
    if matches!(model.delegation, Some(Delegation::Client | Delegation::Svc)) {
        if matches!(model.delegation, Some(Delegation::Svc)) && !context.caller_has_resources_read {
            return Err(StartRejection::SvcDelegationScopeRequired);
        }
        if !agent.tools.is_empty() {
            return Err(StartRejection::DelegationToolsUnsupported);
        }
    }
    let mut state = agent.state;
    let mut warnings = Vec::new();
    let shadowed = agent.tools.iter().any(|tool| matches!(tool, ToolSpec::Client(c) if c.name == STATE_TOOL_NAME));
    if state.is_some() && shadowed {
        // A catalog start's tools replaced the stored ones with a client tool of that name: the
        // client's tool wins, and the session runs without a state.
        state = None;
        warnings.push("state_tool_shadowed".to_owned());
    }
    let (tools, mut rejected_tools) = apply_availability(agent.tools, context.server_tools);
    let (tools, unsupported) = apply_model_support(tools, model.takes_images(), &model.model_id);
    rejected_tools.extend(unsupported);
    let tool_response_policy = agent.tool_response_policy.map(|policy| policy.restricted_to(&tools));
    let store = store_flags(&session, context.consents);
    let avatar = match session.avatar {
        Some(_) if !context.avatar_enabled => {
            warnings.push("avatar_disabled".to_owned());
            None
        }
        avatar => avatar,
    };
    Ok(ResolvedSession {
        sdk,
        agent: ResolvedAgent {
            kind,
            name,
            instructions: agent.instructions.unwrap_or_else(|| DEFAULT_INSTRUCTIONS.to_owned()),
            greeting: agent.greeting,
            voice: agent.voice.unwrap_or_default(),
            audio: agent.audio,
            interruption_sensitivity: agent.interruption_sensitivity,
            tools,
            hooks: agent.hooks,
            state,
            tool_response_policy,
        },
        rejected_tools,
        model,
        max_session_seconds: effective_cap(session.max_session_seconds, context.server_max_session_seconds),
        store,
        resume_session_id: session.resume_session_id,
        avatar,
        warnings,
    })
}

/// Parses a stored catalog configuration with the inline-agent rules; any problem makes it
/// unavailable (the caller reports `agent_config_unavailable`, never the stored document's
/// details).
fn load_stored_agent(config: &Value) -> Option<InlineAgent> {
    let mut issues = Issues::default();
    let mut tool_problems = Vec::new();
    let mut too_long = false;
    let agent = parse_inline_agent(config, &Vec::new(), false, &mut issues, &mut tool_problems, &mut too_long)?;
    (issues.is_empty() && tool_problems.is_empty() && !too_long).then_some(agent)
}

/// The minimum of the requested and the server cap; `None` only when neither caps.
pub fn effective_cap(requested: Option<u32>, server: Option<u32>) -> Option<u32> {
    match (requested, server) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (one, other) => one.or(other),
    }
}

/// Consents narrowed by the request: `store_audio`/`store_transcript`/`store_video` win over
/// `store_recording`, which defaults to recording; a flag can only narrow a consent.
pub fn store_flags(session: &SessionParams, consents: RecordingConsents) -> StoreFlags {
    let wanted = |specific: Option<bool>| specific.or(session.store_recording).unwrap_or(true);
    StoreFlags {
        audio: consents.audio && wanted(session.store_audio),
        transcript: consents.transcript && wanted(session.store_transcript),
        video: consents.video && wanted(session.store_video),
    }
}
