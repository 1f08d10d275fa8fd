//! The provider interface, below every transport: what the session runtime hands a provider
//! ([`SessionSetup`]), what it sends in ([`ProviderInput`]), the one event stream it gets back
//! ([`ProviderEvent`]) and the handle of a running provider ([`session::ProviderSession`]).
//!
//! Every upstream (Gemini Live, OpenAI Realtime, GPT-Live, xAI; their WebSocket adapters are
//! `svc-provider`'s) and svc's own local pipeline (`svc-local`) are driven through these closed
//! enums; nothing provider-specific leaks out, so the runtime turns [`ProviderEvent`]s into spec
//! events without knowing which provider it talks to (providers.md §1). No socket, TLS or
//! WebSocket code lives here: a crate that only speaks the interface does not link a transport.

pub mod session;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use svc_domain::model::ResolvedModel;
use svc_domain::session_config::InterruptionSensitivity;
use svc_domain::start::ResolvedSession;
use svc_domain::tools::ToolSpec;
use svc_wire::rest::UsageTokens;

/// A tool the model may call (client tools and the server tools svc runs look the same upstream).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDecl {
    /// Function name.
    pub name: String,
    /// Description written for the model.
    pub description: String,
    /// JSON Schema of the arguments (`type: object`).
    pub parameters: Value,
}

/// provider_a's tool-response policy (spec: "blocking or non_blocking, optional scheduling").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolBehavior {
    /// The model waits for the result before it continues.
    #[default]
    Blocking,
    /// The model keeps talking; the result is delivered per [`Scheduling`].
    NonBlocking,
}

/// When a non-blocking result reaches the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheduling {
    /// After the current turn (default).
    #[default]
    WhenIdle,
    /// Absorbed into context; nothing is said.
    Silent,
    /// Spoken now, cutting current speech.
    Interrupt,
}

impl Scheduling {
    /// Gemini's wire spelling.
    pub fn gemini(self) -> &'static str {
        match self {
            Scheduling::WhenIdle => "WHEN_IDLE",
            Scheduling::Silent => "SILENT",
            Scheduling::Interrupt => "INTERRUPT",
        }
    }
}

/// One policy: behaviour plus the default scheduling of its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Blocking or not.
    pub behavior: ToolBehavior,
    /// Scheduling of non-blocking results when the result names none.
    pub scheduling: Option<Scheduling>,
}

/// Session default plus per-tool overrides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolPolicy {
    /// Applies to every tool without an override.
    pub default: Policy,
    /// By tool name.
    pub overrides: BTreeMap<String, Policy>,
}

impl From<&svc_domain::tools::ToolResponsePolicy> for ToolPolicy {
    /// The session's `tool_response_policy` as the codecs read it.
    fn from(policy: &svc_domain::tools::ToolResponsePolicy) -> Self {
        use svc_domain::tools::{ToolBehavior as Behavior, ToolResponseRule, ToolScheduling};
        let rule = |rule: &ToolResponseRule| Policy {
            behavior: match rule.behavior {
                Behavior::Blocking => ToolBehavior::Blocking,
                Behavior::NonBlocking => ToolBehavior::NonBlocking,
            },
            scheduling: rule.scheduling.map(|scheduling| match scheduling {
                ToolScheduling::WhenIdle => Scheduling::WhenIdle,
                ToolScheduling::Silent => Scheduling::Silent,
                ToolScheduling::Interrupt => Scheduling::Interrupt,
            }),
        };
        ToolPolicy {
            default: rule(&policy.default),
            overrides: policy.overrides.iter().map(|(name, r)| (name.clone(), rule(r))).collect(),
        }
    }
}

impl ToolPolicy {
    /// The policy of `tool`.
    pub fn of(&self, tool: &str) -> Policy {
        self.overrides.get(tool).copied().unwrap_or(self.default)
    }
}

/// A speaker of a transcript turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The end user.
    User,
    /// The agent.
    Assistant,
}

/// One finished turn of the conversation (what rotation reseeds from).
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptTurn {
    /// Who spoke.
    pub role: Role,
    /// What was said (for the assistant: what was heard).
    pub text: String,
}

/// Timing policy of upstream session limits (providers.md §2.2, §3.1, §4.2, §5.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionLimits {
    /// Rotate onto a fresh upstream session after this long (OpenAI/xAI/GPT-Live hard caps);
    /// Gemini rotates on `goAway` instead and ignores this unless it is shorter.
    pub rotate_after: Duration,
    /// Longest wait for a quiet moment once rotation is due, then rotate anyway.
    pub quiet_wait_max: Duration,
    /// Audio quiet this long counts as a quiet moment.
    pub quiet_gap: Duration,
    /// User audio kept while the upstream is (re)connecting, in milliseconds at the room rate.
    pub reconnect_audio_ms: u32,
    /// Total time allowed for reconnect attempts before the session fails.
    pub reconnect_budget: Duration,
    /// GPT-Live: silence on the model's clock that ends a user turn.
    pub turn_gap: Duration,
    /// GPT-Live: the largest append in estimated tokens (upstream cap 500).
    pub append_max_tokens: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            rotate_after: Duration::from_secs(55 * 60),
            quiet_wait_max: Duration::from_secs(4 * 60),
            quiet_gap: Duration::from_millis(1000),
            reconnect_audio_ms: 10_000,
            reconnect_budget: Duration::from_secs(30),
            turn_gap: Duration::from_millis(800),
            append_max_tokens: 480,
        }
    }
}

impl SessionLimits {
    /// Limits for a model: rotate five minutes (at most a tenth of the cap) before the catalog's
    /// `session_cap_seconds` (OpenAI 60 min, GPT-Live and xAI 120 min). Without a cap (Gemini,
    /// whose connections announce their end with `goAway`) the timer stays a day away.
    pub fn for_model(model: &ResolvedModel) -> SessionLimits {
        let rotate_after = match model.session_cap_seconds {
            Some(cap) => {
                let cap = u64::from(cap);
                Duration::from_secs(cap - (cap / 10).min(5 * 60))
            }
            None => Duration::from_secs(24 * 3600),
        };
        SessionLimits { rotate_after, ..SessionLimits::default() }
    }
}

/// Everything an adapter needs to open and run one upstream conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSetup {
    /// The resolved model: alias, family, model id, knobs, delegation.
    pub model: ResolvedModel,
    /// The persona.
    pub instructions: String,
    /// Appended to the system prompt after the persona.
    pub speaking_style: Option<String>,
    /// Voice id the agent chose; `None`: the upstream picks (spec default), so none is sent.
    pub voice: Option<String>,
    /// `audio.output = false`: run text-only (or gate audio where the upstream cannot).
    pub text_only: bool,
    /// Barge-in readiness, mapped to detector thresholds where the upstream has one.
    pub interruption_sensitivity: InterruptionSensitivity,
    /// Tools the model may call.
    pub tools: Vec<ToolDecl>,
    /// provider_a tool-response policy (other providers emulate it, see the codecs).
    pub tool_policy: ToolPolicy,
    /// Spoken first, once per svc session (never again after a rotation).
    pub greeting: Option<String>,
    /// Earlier conversation to seed the upstream with (resume by transcript).
    pub history: Vec<TranscriptTurn>,
    /// Gemini handle of a prior session to resume natively.
    pub resumption_handle: Option<String>,
    /// Session-limit policy.
    pub limits: SessionLimits,
}

impl SessionSetup {
    /// A setup with `instructions` and defaults for everything else (the upstream's voice, no
    /// tools, audio output on).
    pub fn new(model: ResolvedModel, instructions: &str) -> SessionSetup {
        SessionSetup {
            voice: None,
            limits: SessionLimits::for_model(&model),
            model,
            instructions: instructions.to_owned(),
            speaking_style: None,
            text_only: false,
            interruption_sensitivity: InterruptionSensitivity::Default,
            tools: Vec::new(),
            tool_policy: ToolPolicy::default(),
            greeting: None,
            history: Vec::new(),
            resumption_handle: None,
        }
    }

    /// The setup of a resolved session start, with the family's default limits.
    pub fn from_resolved(session: &ResolvedSession) -> SessionSetup {
        let agent = &session.agent;
        let mut tools: Vec<ToolDecl> = agent
            .tools
            .iter()
            .map(|tool| match tool {
                ToolSpec::Client(client) => ToolDecl {
                    name: client.name.clone(),
                    description: client.description.clone(),
                    parameters: client.parameters.clone(),
                },
                ToolSpec::Server(kind) => ToolDecl {
                    name: kind.as_str().to_owned(),
                    description: server_tool_description(kind.as_str()).to_owned(),
                    parameters: server_tool_parameters(kind.as_str()),
                },
            })
            .collect();
        if agent.state.is_some() {
            tools.push(state_tool());
        }
        SessionSetup {
            voice: agent.voice.name.clone(),
            model: session.model.clone(),
            instructions: agent.instructions.clone(),
            speaking_style: agent.voice.speaking_style.clone(),
            text_only: !agent.audio.output,
            interruption_sensitivity: agent.interruption_sensitivity,
            tools,
            tool_policy: agent.tool_response_policy.as_ref().map(ToolPolicy::from).unwrap_or_default(),
            greeting: agent.greeting.clone(),
            history: Vec::new(),
            resumption_handle: None,
            limits: SessionLimits::for_model(&session.model),
        }
    }

    /// The system prompt: persona, then the speaking style (spec: "appended after the persona").
    pub fn system_prompt(&self) -> String {
        match self.speaking_style.as_deref().map(str::trim).filter(|style| !style.is_empty()) {
            Some(style) => format!("{}\n\nSpeaking style: {style}", self.instructions),
            None => self.instructions.clone(),
        }
    }
}

/// The `set_state` tool of an agent with a `state`: the model writes the session's state, which
/// the runtime keeps and publishes (`svc.session-state`).
fn state_tool() -> ToolDecl {
    ToolDecl {
        name: svc_domain::tools::STATE_TOOL_NAME.to_owned(),
        description: "Update the conversation's shared state. Pass in `values` the keys to set (a null value \
            removes a key) and in `stage` the conversation's current stage when it changes. The result is the \
            whole state."
            .to_owned(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {
                "values": {"type": "object", "description": "Keys to set; null removes a key."},
                "stage": {"type": "string", "description": "The current stage of the conversation."}
            }
        }),
    }
}

/// The arguments of a server tool, as svc-tools reads them.
fn server_tool_parameters(kind: &str) -> Value {
    let text = |name: &str, description: &str, required: bool| {
        let required: Vec<&str> = if required { vec![name] } else { Vec::new() };
        serde_json::json!({
            "type": "object",
            "properties": {name: {"type": "string", "description": description}},
            "required": required,
        })
    };
    match kind {
        "web_search" => text("query", "What to search the web for.", true),
        "detect_objects" => text("query", "Optional: the kind of objects to look for.", false),
        "point_at_object" => text("object", "The object to point at, as the user named it.", true),
        "screen_locate" => text("target", "The on-screen element to find (a button, a field, a label).", true),
        _ => serde_json::json!({"type": "object", "properties": {}}),
    }
}

fn server_tool_description(kind: &str) -> &'static str {
    match kind {
        "web_search" => "Search the web for current information; returns a few results with title, url and snippet.",
        "examine_image" => "Look at the latest camera or screen frame and describe it.",
        "detect_objects" => {
            "Detect objects in the latest camera or screen frame; returns labels with boxes (fractions of the frame)."
        }
        "point_at_object" => "Find one object in the latest camera frame; returns the point at its centre.",
        "screen_locate" => "Locate an element on the shared screen; returns its box (fractions of the frame).",
        "end_call" => "End the call when the conversation is over.",
        "speaker_log" => "Record who is speaking.",
        _ => "A tool run by the service.",
    }
}

/// Channel of a GPT-Live append (spec `delegation-append.channel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendChannel {
    /// Silent context.
    Thinking,
    /// Something to tell the user (paraphrased).
    Commentary,
    /// Standing developer instruction.
    Instructions,
}

impl AppendChannel {
    /// The upstream command type.
    pub fn command(self) -> &'static str {
        match self {
            AppendChannel::Thinking => "session.thinking.append",
            AppendChannel::Commentary => "session.commentary.append",
            AppendChannel::Instructions => "session.instructions.append",
        }
    }
}

/// What the runtime sends to an adapter.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderInput {
    /// User audio, mono PCM16 at the adapter's input rate (`svc_provider::input_rate_hz`,
    /// `svc_local::INPUT_RATE_HZ`), any length: the runtime decodes Opus straight to that rate,
    /// so no adapter resamples what it is sent.
    NativeAudio(Vec<i16>),
    /// A typed user turn (`send-text`): the model answers it.
    Text(String),
    /// A background note (`send-context`): opens no turn, nothing is spoken.
    Context(String),
    /// A note from outside the conversation that is not the user speaking: a background tool
    /// job finished (`tool_job_result`), or a silence hook asks the model to re-engage. With
    /// `respond` the model reacts to it (after any response in progress); without, it is
    /// context only.
    Note {
        /// What the model should know.
        text: String,
        /// Ask for a response.
        respond: bool,
    },
    /// A still image (`send-image`); ignored where the upstream has no image input.
    Image {
        /// `image/jpeg` or `image/png`.
        mime: String,
        /// The encoded image.
        data: Vec<u8>,
    },
    /// svc's own detector heard the user start (provider_a `svc_vad`; also a barge-in there).
    ActivityStart,
    /// The user's turn is over (`activity-end` / svc_vad end of turn).
    ActivityEnd,
    /// Answer of a [`ProviderEvent::ToolCall`]. Answered exactly once: later answers are dropped.
    ToolResult {
        /// The call's id.
        call_id: String,
        /// Result (`{"output": …}` or an error object).
        output: Value,
        /// Whether `output` reports a failure.
        is_error: bool,
        /// Scheduling for a non-blocking call (else the policy's default).
        scheduling: Option<Scheduling>,
    },
    /// GPT-Live client/svc delegation: context for an open delegation.
    DelegationAppend {
        /// From [`ProviderEvent::DelegationCreated`] (or `None` for session-wide context).
        delegation_id: Option<String>,
        /// Which append.
        channel: AppendChannel,
        /// Text (split to the upstream's per-append cap).
        content: String,
    },
    /// The user barged in: the runtime flushed its playback queue after `played_ms` of the
    /// current assistant item. Cancels the response and truncates at what was heard.
    BargeIn {
        /// Milliseconds of the current assistant item actually played.
        played_ms: u64,
    },
    /// Speak the agent's greeting now (normally sent automatically from [`SessionSetup::greeting`]).
    Greeting(String),
    /// Microphone muted or unmuted.
    Mute(bool),
    /// End the session: every open tool call is answered, then the socket closes.
    Close,
}

/// How a response ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseStatus {
    /// Finished normally.
    Completed,
    /// Cut short (barge-in or cancel).
    Cancelled,
    /// Stopped by a limit (`max_output_tokens`, content filter).
    Incomplete,
    /// Failed upstream.
    Failed,
}

/// An upstream problem, classified per providers.md §1.5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    /// `true`: the session is over (auth, billing, unknown model, exhausted context, or
    /// reconnects exhausted). `false`: one turn or command failed; the session continues.
    pub fatal: bool,
    /// Short machine code (upstream's when it has one).
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

/// The one event stream an adapter produces.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// The upstream session is configured and takes input.
    Ready {
        /// Upstream session id, when it reports one.
        upstream_session_id: Option<String>,
    },
    /// The user started speaking (upstream VAD, or svc_vad's `ActivityStart`).
    UserSpeechStarted,
    /// The user stopped speaking.
    UserSpeechStopped,
    /// User transcript: fragments (`is_final: false`, append) then the full turn (`is_final: true`).
    UserTranscript {
        /// Fragment or full text.
        text: String,
        /// Final text of the turn.
        is_final: bool,
        /// Milliseconds since the adapter started when this user turn's speech started: order
        /// user turns by this, not by arrival (transcripts arrive late, §1.3).
        speech_started_ms: u64,
    },
    /// Assistant audio, mono PCM16 at `sample_rate` (the provider's native output rate).
    AssistantAudio {
        /// Samples.
        pcm: Vec<i16>,
        /// Rate of `pcm`.
        sample_rate: u32,
    },
    /// Assistant transcript: fragments, then the final text (cut to what was heard on barge-in).
    AssistantTranscript {
        /// Fragment or full text.
        text: String,
        /// Final text of the response.
        is_final: bool,
    },
    /// A barge-in cut the assistant item whose final transcript was already sent: `heard` is
    /// what the user actually heard and supersedes that final (providers.md §1.2).
    AssistantTruncated {
        /// The heard part.
        heard: String,
    },
    /// Model text (text-only sessions, thoughts, backend text).
    ModelText {
        /// Fragment or full text.
        text: String,
        /// Last piece of this text.
        is_final: bool,
        /// A thought (only when `include_thoughts`).
        thought: bool,
    },
    /// The model started a response (`bot-llm-started`).
    ResponseStarted,
    /// The response ended (`bot-llm-stopped`).
    ResponseDone {
        /// How.
        status: ResponseStatus,
    },
    /// The user started talking while assistant audio of the current item may still be playing:
    /// if it is, flush playback and answer with [`ProviderInput::BargeIn`] carrying the played
    /// milliseconds (if nothing is playing any more, ignore it).
    Interrupted,
    /// The model calls a tool; answer with [`ProviderInput::ToolResult`].
    ToolCall {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments (parsed JSON; a string when the model sent invalid JSON).
        arguments: Value,
    },
    /// The upstream abandoned these calls (user interrupted); their results are dropped.
    ToolCallsCancelled {
        /// Call ids.
        call_ids: Vec<String>,
    },
    /// GPT-Live client/svc delegation opened (`delegation-created`).
    DelegationCreated {
        /// Id the appends carry.
        delegation_id: String,
        /// What the user said in the prompting turn.
        transcript: String,
    },
    /// Cumulative token usage of the whole svc session (each event supersedes the previous).
    Usage(UsageTokens),
    /// The upstream session is being replaced (`reconnecting`).
    Reconnecting {
        /// Seconds the old upstream session still has, when known.
        seconds_remaining: Option<f64>,
    },
    /// A replacement upstream session is ready; the conversation continues.
    Reconnected {
        /// `true`: resumed natively (Gemini handle); `false`: reseeded from the transcript.
        resumed: bool,
    },
    /// The current resumption handle changed (`has_resumption_handle`).
    ResumptionHandle(Option<String>),
    /// An upstream problem.
    Error(ProviderError),
    /// The adapter is done; no more events follow.
    Closed {
        /// Why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use svc_domain::model::ModelCatalog;
    use svc_domain::session_config::parse_start;
    use svc_domain::settings::RecordingConsents;
    use svc_domain::start::{CatalogLookup, StartContext, resolve_start};
    use svc_domain::tools::{ServerTool, ServerToolAvailability};

    use super::*;

    #[test]
    fn a_resolved_start_becomes_the_adapter_setup() {
        let body = json!({
            "sdk": {"name": "svc-js", "version": "1.0.0"},
            "agent": {"type": "inline", "instructions": "Be brief.", "greeting": "Hi!",
                "model": {"provider": "provider_c", "speed": 1.2},
                "voice": {"name": "rex", "speaking_style": "Calm."},
                "audio": {"output": false},
                "interruption_sensitivity": "high",
                "tools": [{"kind": "end_call"}, {"kind": "client", "name": "lookup_order", "description": "Find",
                    "parameters": {"type": "object", "properties": {}}}],
                "tool_response_policy": {"default": {"behavior": "non_blocking", "scheduling": "silent"},
                    "overrides": {"lookup_order": {"behavior": "blocking"}}}}
        });
        let request = parse_start(&body, None).expect("valid start");
        let tools = ServerToolAvailability::new([ServerTool::EndCall]);
        let context = StartContext {
            catalog: ModelCatalog::embedded(),
            server_tools: &tools,
            caller_has_resources_read: false,
            consents: RecordingConsents { audio: true, transcript: true, video: false },
            avatar_enabled: false,
            server_max_session_seconds: None,
        };
        let session = resolve_start(request, CatalogLookup::NotApplicable, &context).expect("resolves");
        let setup = SessionSetup::from_resolved(&session);
        assert_eq!(setup.model.model_id, "grok-voice-3.0");
        assert_eq!(setup.voice.as_deref(), Some("rex"));
        assert_eq!(setup.system_prompt(), "Be brief.\n\nSpeaking style: Calm.");
        assert!(setup.text_only);
        assert_eq!(setup.interruption_sensitivity, InterruptionSensitivity::High);
        assert_eq!(setup.greeting.as_deref(), Some("Hi!"));
        let names: Vec<&str> = setup.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["end_call", "lookup_order"]);
        assert_eq!(setup.tool_policy.of("lookup_order"), Policy { behavior: ToolBehavior::Blocking, scheduling: None });
        let background = Policy { behavior: ToolBehavior::NonBlocking, scheduling: Some(Scheduling::Silent) };
        assert_eq!(setup.tool_policy.of("end_call"), background, "the session default");
        assert_eq!(setup.limits.rotate_after, Duration::from_secs(7200 - 300), "xAI cap from the catalog");
    }
}
