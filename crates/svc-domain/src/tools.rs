//! Tool specs (`agent.tools`) and server hooks (`agent.hooks`) of a session start.
//!
//! # Two kinds of failure
//!
//! The spec's session-start rejection table (interface-spec.md, "Session start rejections")
//! separates two failures, and [`parse_tools`] reports them to two different collectors:
//!
//! - **Schema failures** go to [`Issues`] and become 422 `validation_error`, each with its `loc`:
//!   `tools` is not an array, has more entries than the caller allows, an entry is not an object,
//!   or an entry's `kind` is missing, not a string, or outside the discriminator. These are the
//!   failures a JSON Schema of the request body would catch.
//! - **Tool-config failures** go to `problems` and become 422 `invalid_tool_config`, whose message
//!   is every problem joined by `; `: a bad client-tool name, description or `parameters` schema,
//!   duplicate names, unknown fields on a tool, and the kinds `server` (retired) and `catalog`
//!   (reserved) (spec "Tool specs" and "Versioning" item 8). Each problem is one short sentence
//!   that names the tool by its index, `tools[i]`, and by its name once that name is known to be
//!   valid.
//!
//! Hooks ([`parse_hooks`], spec "Server hooks (SilenceTimeout)") have no typed code of their own,
//! so every hook problem is a validation issue with its exact `loc`.
//!
//! No message echoes a payload value (descriptions, prompts, tool names; tools are named by position):
//! request bodies carry prompts and personal data that must not reach logs. Object keys appear in
//! messages and paths only when they look like identifiers; anything else shows as `<key>`.
//!
//! # Choices where the spec says "not shown"
//!
//! - Inline agents carry at most [`INLINE_TOOLS_MAX`] tools (the spec sets no bound): 128 is the
//!   largest function list OpenAI-style upstreams accept, so more could never run.
//! - A client tool's `description` is required (1 to 2048 chars): it is the model's only guide to
//!   when to call the tool, there is no sensible default, and relaxing a rule later is additive
//!   while tightening one is breaking. `parameters` is optional and defaults to an object schema
//!   without properties, as a tool without arguments has an exact default.
//! - Zero-config kinds (`web_search`, …, `speaker_log`) take only `kind`; any other field is a
//!   problem, so a setting the server would silently ignore is caught at start.
//! - Server tool kinds share the name space of client tools (both appear in the flat
//!   `ready.agent.tools` list and in `tool-call.name`), so a kind listed twice, or a client tool
//!   named like an enabled server tool, is a duplicate.
//! - At most [`TOOL_PROBLEMS_LISTED_MAX`] problems are listed; the rest are counted in a final
//!   problem, so a hostile schema cannot blow the error message up.
//! - Hook bounds follow Vapi's `customer.speech.timeout`, the peer our hook mirrors
//!   (shared/research/peers.md): see [`HOOK_TIMEOUT_MIN_SECONDS`], [`HOOK_MAX_COUNT_MAX`] and
//!   [`ResetMode`].

use std::collections::{BTreeMap, BTreeSet};

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use svc_wire::Loc;

use crate::limits::{HOOKS_MAX, char_len};
use crate::parse::{Fields, Issues, index, key};

/// Most tools an inline agent may declare (the spec sets no bound). Catalog starts use
/// [`crate::limits::CATALOG_TOOLS_MAX`]. 128 is the function-list cap of OpenAI-style upstreams.
pub const INLINE_TOOLS_MAX: usize = 128;
/// Longest client tool name, in characters.
pub const CLIENT_TOOL_NAME_MAX_CHARS: usize = 64;
/// Longest client tool description, in characters.
pub const CLIENT_TOOL_DESCRIPTION_MAX_CHARS: usize = 2048;
/// Deepest chain of nested schemas (`properties`/`items`) in `parameters`, the top level counting
/// as level 1. Deeper schemas are a problem; the check never recurses further.
pub const SCHEMA_DEPTH_MAX: usize = 32;
/// Most problems [`parse_tools`] lists; the rest are summed up in one final problem.
pub const TOOL_PROBLEMS_LISTED_MAX: usize = 100;

/// The tool a model writes `agent.state` with (offered only when the agent has a `state`).
pub const STATE_TOOL_NAME: &str = "set_state";

/// The only hook trigger: the user stayed silent after the assistant finished speaking.
pub const HOOK_TRIGGER: &str = "user.speech.timeout";
/// Shortest hook timeout, in seconds: the minimum of Vapi's `timeoutSeconds` schema.
pub const HOOK_TIMEOUT_MIN_SECONDS: f64 = 1.0;
/// Longest hook timeout, in seconds: Vapi's `silenceTimeoutSeconds` ceiling (one hour); longer
/// silences are better bounded by `max_session_seconds`.
pub const HOOK_TIMEOUT_MAX_SECONDS: f64 = 3600.0;
/// Largest `max_count`: Vapi's `triggerMaxCount` ceiling. More reminders are staggered hooks.
pub const HOOK_MAX_COUNT_MAX: u32 = 10;
/// Firings of a hook when `max_count` is absent: Vapi's `triggerMaxCount` default.
pub const HOOK_MAX_COUNT_DEFAULT: u32 = 3;
/// Longest `say` text or prompt and `end_call` farewell, in characters (the spec's farewell bound).
pub const HOOK_TEXT_MAX_CHARS: usize = 4096;
/// Longest hook `name`, in characters (same as a client tool name).
pub const HOOK_NAME_MAX_CHARS: usize = 64;

/// JSON Schema keywords a client tool's `parameters` may use (spec "Tool specs").
const SCHEMA_KEYWORDS: [&str; 6] = ["type", "properties", "required", "items", "enum", "description"];
/// JSON Schema type names.
const SCHEMA_TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];
/// Fields of a client tool spec.
const CLIENT_TOOL_FIELDS: [&str; 4] = ["kind", "name", "description", "parameters"];

/// One entry of `agent.tools`, parsed and valid.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolSpec {
    /// A tool the client runs (`kind: client`).
    Client(ClientTool),
    /// A zero-config server-executed tool.
    Server(ServerTool),
}

/// A client-executed tool, self-described at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientTool {
    /// Matches `^[a-z][a-z0-9_]{2,63}$`; starts with `svc_` only as `svc_sdk_`.
    pub name: String,
    /// 1 to 2048 characters, written for the model.
    pub description: String,
    /// A JSON Schema object restricted to `type`, `properties`, `required`, `items`, `enum` and
    /// `description`, with top-level `type` equal to `object`.
    pub parameters: Value,
}

/// A server-executed tool kind; serialized as its wire kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerTool {
    /// `web_search`.
    WebSearch,
    /// `examine_image`: looks at the latest video or screen frame.
    ExamineImage,
    /// `detect_objects`: availability is checked at start.
    DetectObjects,
    /// `point_at_object`.
    PointAtObject,
    /// `screen_locate`.
    ScreenLocate,
    /// `end_call`: the model may end the call (distinct from the hook action `end_call`).
    EndCall,
    /// `speaker_log` (fields and behavior not shown by the spec; parsed as kind only).
    SpeakerLog,
}

impl ServerTool {
    /// Every server tool kind.
    pub const ALL: [ServerTool; 7] = [
        ServerTool::WebSearch,
        ServerTool::ExamineImage,
        ServerTool::DetectObjects,
        ServerTool::PointAtObject,
        ServerTool::ScreenLocate,
        ServerTool::EndCall,
        ServerTool::SpeakerLog,
    ];

    /// The wire kind.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerTool::WebSearch => "web_search",
            ServerTool::ExamineImage => "examine_image",
            ServerTool::DetectObjects => "detect_objects",
            ServerTool::PointAtObject => "point_at_object",
            ServerTool::ScreenLocate => "screen_locate",
            ServerTool::EndCall => "end_call",
            ServerTool::SpeakerLog => "speaker_log",
        }
    }

    /// The server tool of a wire kind, if it is one.
    pub fn from_wire(kind: &str) -> Option<ServerTool> {
        ServerTool::ALL.into_iter().find(|tool| tool.as_str() == kind)
    }

    /// The kinds svc itself can run, so a deployment may enable them: `end_call`, `speaker_log`,
    /// and `examine_image` (the model's own vision on the latest `send-image` frame). The others
    /// need a backend svc does not have (a search API, an object detector).
    pub const RUNNABLE: [ServerTool; 3] = [ServerTool::EndCall, ServerTool::SpeakerLog, ServerTool::ExamineImage];

    /// Whether the model must take images for svc to run this tool.
    pub fn needs_image_input(self) -> bool {
        matches!(self, ServerTool::ExamineImage)
    }
}

impl std::fmt::Display for ServerTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serializes in the wire spelling: `{"kind":"client","name",…}` or `{"kind":"web_search"}`.
impl Serialize for ToolSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolSpec::Client(tool) => {
                let mut map = serializer.serialize_map(Some(4))?;
                map.serialize_entry("kind", "client")?;
                map.serialize_entry("name", &tool.name)?;
                map.serialize_entry("description", &tool.description)?;
                map.serialize_entry("parameters", &tool.parameters)?;
                map.end()
            }
            ToolSpec::Server(tool) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("kind", tool.as_str())?;
                map.end()
            }
        }
    }
}

/// Reads back what [`ToolSpec`]'s `Serialize` wrote. It does not validate: untrusted input goes
/// through [`parse_tools`].
impl<'de> Deserialize<'de> for ToolSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        enum Wire {
            Client { name: String, description: String, parameters: Value },
            WebSearch,
            ExamineImage,
            DetectObjects,
            PointAtObject,
            ScreenLocate,
            EndCall,
            SpeakerLog,
        }
        Ok(match Wire::deserialize(deserializer)? {
            Wire::Client { name, description, parameters } => {
                ToolSpec::Client(ClientTool { name, description, parameters })
            }
            Wire::WebSearch => ToolSpec::Server(ServerTool::WebSearch),
            Wire::ExamineImage => ToolSpec::Server(ServerTool::ExamineImage),
            Wire::DetectObjects => ToolSpec::Server(ServerTool::DetectObjects),
            Wire::PointAtObject => ToolSpec::Server(ServerTool::PointAtObject),
            Wire::ScreenLocate => ToolSpec::Server(ServerTool::ScreenLocate),
            Wire::EndCall => ToolSpec::Server(ServerTool::EndCall),
            Wire::SpeakerLog => ToolSpec::Server(ServerTool::SpeakerLog),
        })
    }
}

impl ToolSpec {
    /// The name the model and the `ready.agent.tools` list know the tool by: a client tool's
    /// `name`, a server tool's wire kind.
    pub fn name(&self) -> &str {
        match self {
            ToolSpec::Client(tool) => &tool.name,
            ToolSpec::Server(tool) => tool.as_str(),
        }
    }
}

/// What a `kind` discriminator names.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Client,
    Server(ServerTool),
    /// `catalog`: reserved.
    Catalog,
    /// `server`: retired.
    Retired,
}

impl Kind {
    fn parse(kind: &str) -> Option<Kind> {
        match kind {
            "client" => Some(Kind::Client),
            "catalog" => Some(Kind::Catalog),
            "server" => Some(Kind::Retired),
            other => ServerTool::from_wire(other).map(Kind::Server),
        }
    }
}

/// Parses `agent.tools` (the value at `loc`; null means no tools).
///
/// Schema failures go to `issues`, tool-config failures to `problems` (see the module docs). The
/// returned tools are the entries that parsed cleanly; they are the session's tool set only if
/// neither collector received anything. `max_items` is [`INLINE_TOOLS_MAX`] for inline agents and
/// [`crate::limits::CATALOG_TOOLS_MAX`] for catalog starts.
pub fn parse_tools(
    value: &Value,
    loc: &Loc,
    max_items: usize,
    issues: &mut Issues,
    problems: &mut Vec<String>,
) -> Vec<ToolSpec> {
    let items = match value {
        Value::Null => return Vec::new(),
        Value::Array(items) => items,
        _ => {
            issues.push(loc, "list_type", "Input should be a valid array");
            return Vec::new();
        }
    };
    if items.len() > max_items {
        issues.push(loc, "too_long", format!("List should have at most {max_items} items"));
    }
    let mut found = Vec::new();
    let mut first_use: BTreeMap<String, usize> = BTreeMap::new();
    let mut tools = Vec::new();
    for (position, item) in items.iter().enumerate() {
        let item_loc = index(loc, position);
        let Value::Object(map) = item else {
            issues.push(&item_loc, "object_type", "Input should be an object");
            continue;
        };
        let kind_loc = key(&item_loc, "kind");
        let kind = match map.get("kind") {
            None => {
                issues.push(&kind_loc, "missing", "Field required");
                continue;
            }
            Some(Value::String(text)) => match Kind::parse(text) {
                Some(kind) => kind,
                None => {
                    issues.push(
                        &kind_loc,
                        "union_tag_invalid",
                        "Input tag should be one of 'client', 'web_search', 'examine_image', 'detect_objects', \
                         'point_at_object', 'screen_locate', 'end_call', 'catalog', 'server', 'speaker_log'",
                    );
                    continue;
                }
            },
            Some(_) => {
                issues.push(&kind_loc, "string_type", "Input should be a valid string");
                continue;
            }
        };
        let before = found.len();
        let (name, spec) = match kind {
            Kind::Retired => {
                found.push(format!("tools[{position}]: kind `server` is retired"));
                (None, None)
            }
            Kind::Catalog => {
                found.push(format!("tools[{position}]: kind `catalog` is reserved"));
                (None, None)
            }
            Kind::Server(tool) => {
                for field in map.keys().filter(|field| field.as_str() != "kind") {
                    found.push(format!(
                        "tools[{position}] (`{tool}`): field `{}` is not allowed; this kind takes only `kind`",
                        show_key(field)
                    ));
                }
                (Some(tool.as_str().to_owned()), Some(ToolSpec::Server(tool)))
            }
            Kind::Client => {
                let (name, tool) = parse_client_tool(map, position, &mut found);
                (name, tool.map(ToolSpec::Client))
            }
        };
        if let Some(name) = name {
            match first_use.get(&name) {
                Some(first) => found.push(format!("tools[{position}]: name already used by tools[{first}]")),
                None => {
                    first_use.insert(name, position);
                }
            }
        }
        if let Some(spec) = spec
            && found.len() == before
        {
            tools.push(spec);
        }
    }
    if found.len() > TOOL_PROBLEMS_LISTED_MAX {
        let unlisted = found.len() - TOOL_PROBLEMS_LISTED_MAX;
        found.truncate(TOOL_PROBLEMS_LISTED_MAX);
        found.push(format!("{unlisted} more tool problems not listed"));
    }
    problems.extend(found);
    tools
}

/// Checks one `kind: client` entry. Returns its name if valid (for the duplicate check, even when
/// other fields are wrong) and the tool if everything is valid.
fn parse_client_tool(
    map: &Map<String, Value>,
    position: usize,
    found: &mut Vec<String>,
) -> (Option<String>, Option<ClientTool>) {
    let bare = format!("tools[{position}]");
    let name = match map.get("name") {
        None => {
            found.push(format!("{bare}: a client tool needs a `name`"));
            None
        }
        Some(Value::String(name)) => match name_rule_broken(name) {
            Some(rule) => {
                found.push(format!("{bare}: `name` {rule}"));
                None
            }
            None => Some(name.clone()),
        },
        Some(_) => {
            found.push(format!("{bare}: `name` must be a string"));
            None
        }
    };
    // Tools are named by position only: a name, even a valid one, is payload and is not echoed.
    let label = bare;
    let before = found.len();
    let description = match map.get("description") {
        None => {
            found.push(format!("{label}: a client tool needs a `description`"));
            None
        }
        Some(Value::String(text)) if text.is_empty() => {
            found.push(format!("{label}: `description` must not be empty"));
            None
        }
        Some(Value::String(text)) if char_len(text) > CLIENT_TOOL_DESCRIPTION_MAX_CHARS => {
            found
                .push(format!("{label}: `description` must be at most {CLIENT_TOOL_DESCRIPTION_MAX_CHARS} characters"));
            None
        }
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => {
            found.push(format!("{label}: `description` must be a string"));
            None
        }
    };
    // `None` = absent; cloned only once the whole tool is known to be valid.
    let parameters = match map.get("parameters") {
        None | Some(Value::Null) => None,
        Some(schema @ Value::Object(_)) => {
            let mut check = SchemaCheck { label: &label, found, too_deep: false };
            check.schema(schema, &mut String::from("/parameters"), 1);
            Some(schema)
        }
        Some(_) => {
            found.push(format!("{label}: `parameters` must be a JSON Schema object"));
            None
        }
    };
    for field in map.keys().filter(|field| !CLIENT_TOOL_FIELDS.contains(&field.as_str())) {
        found.push(format!("{label}: field `{}` is not allowed on a client tool", show_key(field)));
    }
    let tool = match (&name, description) {
        (Some(name), Some(description)) if found.len() == before => {
            let parameters = match parameters {
                Some(schema) => schema.clone(),
                None => serde_json::json!({"type": "object", "properties": {}}),
            };
            Some(ClientTool { name: name.clone(), description, parameters })
        }
        _ => None,
    };
    (name, tool)
}

/// The rule a client tool name breaks, phrased to follow "`name` ", or `None` if it is valid.
fn name_rule_broken(name: &str) -> Option<String> {
    if char_len(name) > CLIENT_TOOL_NAME_MAX_CHARS {
        return Some(format!("must be at most {CLIENT_TOOL_NAME_MAX_CHARS} characters"));
    }
    let bytes = name.as_bytes();
    let pattern = bytes.len() >= 3
        && bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !pattern {
        return Some("must match ^[a-z][a-z0-9_]{2,63}$".to_owned());
    }
    if name.starts_with("svc_") && !name.starts_with("svc_sdk_") {
        return Some("must not start with `svc_` (only `svc_sdk_` is allowed, for tools an SDK ships)".to_owned());
    }
    None
}

/// Walks a `parameters` schema, recording every rule it breaks.
struct SchemaCheck<'a> {
    label: &'a str,
    found: &'a mut Vec<String>,
    too_deep: bool,
}

impl SchemaCheck<'_> {
    /// Checks the schema at `path` (a JSON pointer relative to the tool spec), `level` levels deep.
    fn schema(&mut self, schema: &Value, path: &mut String, level: usize) {
        let label = self.label;
        if level > SCHEMA_DEPTH_MAX {
            if !self.too_deep {
                self.too_deep = true;
                self.found.push(format!("{label}: `parameters` nests schemas deeper than {SCHEMA_DEPTH_MAX} levels"));
            }
            return;
        }
        let Value::Object(map) = schema else {
            self.found.push(format!("{label}: `{path}` must be a JSON Schema object"));
            return;
        };
        if level == 1 && map.get("type").and_then(Value::as_str) != Some("object") {
            self.found.push(format!("{label}: top-level `type` of `parameters` must be `object`"));
        }
        let start = path.len();
        for keyword in SCHEMA_KEYWORDS {
            let Some(value) = map.get(keyword) else { continue };
            path.push('/');
            path.push_str(keyword);
            match keyword {
                "type" if level > 1 && !is_schema_type(value) => self
                    .found
                    .push(format!("{label}: `{path}` must be a JSON Schema type name or a non-empty array of them")),
                "properties" => match value {
                    Value::Object(properties) => {
                        for (property, sub) in properties {
                            let before = path.len();
                            path.push('/');
                            path.push_str(show_key(property));
                            self.schema(sub, path, level + 1);
                            path.truncate(before);
                        }
                    }
                    _ => self.found.push(format!("{label}: `{path}` must be an object of property schemas")),
                },
                "items" => self.schema(value, path, level + 1),
                "required" if !value.as_array().is_some_and(|names| names.iter().all(Value::is_string)) => {
                    self.found.push(format!("{label}: `{path}` must be an array of strings"))
                }
                "enum" if !value.is_array() => self.found.push(format!("{label}: `{path}` must be an array")),
                "description" if !value.is_string() => self.found.push(format!("{label}: `{path}` must be a string")),
                _ => {}
            }
            path.truncate(start);
        }
        for keyword in map.keys().filter(|keyword| !SCHEMA_KEYWORDS.contains(&keyword.as_str())) {
            self.found.push(format!(
                "{label}: `{path}/{}` is not an allowed keyword (allowed: type, properties, required, items, enum, \
                 description)",
                show_key(keyword)
            ));
        }
    }
}

/// Whether `value` is a JSON Schema `type`: a type name or a non-empty array of them.
fn is_schema_type(value: &Value) -> bool {
    let known = |v: &Value| v.as_str().is_some_and(|name| SCHEMA_TYPES.contains(&name));
    match value {
        Value::Array(names) => !names.is_empty() && names.iter().all(known),
        other => known(other),
    }
}

/// An object key as it may appear in a message: identifier-like keys as written, others hidden.
fn show_key(name: &str) -> &str {
    let printable = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'$');
    if !name.is_empty() && name.len() <= 64 && name.bytes().all(printable) { name } else { "<key>" }
}

/// The server tool kinds this deployment can run. Deserializes from a list of wire kinds
/// (`["web_search", "end_call"]`); an unknown kind is an error. The default enables nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ServerToolAvailability {
    enabled: BTreeSet<ServerTool>,
}

impl ServerToolAvailability {
    /// A deployment that can run exactly `enabled`.
    pub fn new(enabled: impl IntoIterator<Item = ServerTool>) -> Self {
        ServerToolAvailability { enabled: enabled.into_iter().collect() }
    }

    /// A deployment that can run every server tool.
    pub fn all() -> Self {
        Self::new(ServerTool::ALL)
    }

    /// Whether this deployment can run `tool`.
    pub fn allows(&self, tool: ServerTool) -> bool {
        self.enabled.contains(&tool)
    }

    /// The enabled kinds, in declaration order.
    pub fn enabled(&self) -> impl Iterator<Item = ServerTool> + '_ {
        self.enabled.iter().copied()
    }
}

/// A valid tool the session starts without (an entry of `ready.rejected_tools`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedTool {
    /// The tool's name: the wire kind for server tools.
    pub name: String,
    /// Why: a slug, a colon, then a sentence (`not_configured: …`).
    pub reason: String,
}

/// Drops the server tools `available` does not allow and reports each as a [`RejectedTool`].
/// Client tools always pass. Order is kept.
pub fn apply_availability(
    tools: Vec<ToolSpec>,
    available: &ServerToolAvailability,
) -> (Vec<ToolSpec>, Vec<RejectedTool>) {
    let mut kept = Vec::with_capacity(tools.len());
    let mut rejected = Vec::new();
    for tool in tools {
        match tool {
            ToolSpec::Server(kind) if !available.allows(kind) => rejected.push(RejectedTool {
                name: kind.as_str().to_owned(),
                reason: format!("not_configured: this deployment has no backend for {kind}"),
            }),
            tool => kept.push(tool),
        }
    }
    (kept, rejected)
}

/// Drops the server tools the model itself cannot serve (`examine_image` on a model that takes
/// no images) and reports each as a [`RejectedTool`] with reason `not_supported`. Order is kept.
pub fn apply_model_support(
    tools: Vec<ToolSpec>,
    takes_images: bool,
    model: &str,
) -> (Vec<ToolSpec>, Vec<RejectedTool>) {
    let mut kept = Vec::with_capacity(tools.len());
    let mut rejected = Vec::new();
    for tool in tools {
        match tool {
            ToolSpec::Server(kind) if kind.needs_image_input() && !takes_images => rejected.push(RejectedTool {
                name: kind.as_str().to_owned(),
                reason: format!("not_supported: {model} takes no images, so {kind} cannot see a frame"),
            }),
            tool => kept.push(tool),
        }
    }
    (kept, rejected)
}

/// The flat `ready.agent.tools` list: client tool names, then server tool kinds, each in order.
pub fn tool_names(tools: &[ToolSpec]) -> Vec<String> {
    let clients = tools.iter().filter(|tool| matches!(tool, ToolSpec::Client(_)));
    let servers = tools.iter().filter(|tool| matches!(tool, ToolSpec::Server(_)));
    clients.chain(servers).map(|tool| tool.name().to_owned()).collect()
}

/// A parsed SilenceTimeout hook: when the user stays silent for `timeout_seconds` after the
/// assistant finished speaking, the server performs `action`, at most `max_count` times.
/// Serializes in the wire spelling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SilenceHook {
    /// Always `user.speech.timeout`, the one trigger.
    pub trigger: HookTrigger,
    /// A label for logs and the caller's own bookkeeping, 1 to 64 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Silence before the action, in seconds: 1 to 3600, fractions allowed.
    pub timeout_seconds: f64,
    /// What the server does.
    pub action: HookAction,
    /// Most firings, 1 to 10; absent means [`HOOK_MAX_COUNT_DEFAULT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<u32>,
    /// When the firing counter starts over.
    #[serde(default)]
    pub reset_mode: ResetMode,
}

impl SilenceHook {
    /// `max_count`, or [`HOOK_MAX_COUNT_DEFAULT`] when absent (the `user-speech-timeout` event
    /// always carries a number).
    pub fn effective_max_count(&self) -> u32 {
        self.max_count.unwrap_or(HOOK_MAX_COUNT_DEFAULT)
    }
}

/// What starts a hook's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HookTrigger {
    /// `user.speech.timeout`: the clock starts when the assistant finishes speaking and stops when
    /// the user speaks.
    #[serde(rename = "user.speech.timeout")]
    UserSpeechTimeout,
}

/// What a hook does when it fires. Also the `action` of the `user-speech-timeout` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HookAction {
    /// Speak. At least one field is present; with both, `text` is spoken as written.
    Say {
        /// Exact words to speak, 1 to 4096 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// An instruction from which the model phrases the line itself, 1 to 4096 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
    },
    /// End the call, after speaking `farewell` (1 to 4096 characters) if present.
    EndCall {
        /// Parting line; absent ends the call without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        farewell: Option<String>,
    },
}

/// When a hook's firing counter (`trigger_count`) starts over. The silence clock itself always
/// re-arms after every assistant turn; only the counter is governed here. Values and meaning follow
/// Vapi's `triggerResetMode` (`never`, `onUserSpeech`), in this API's snake_case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetMode {
    /// `never` (default): firings count over the whole session; after `max_count` the hook is
    /// spent.
    #[default]
    Never,
    /// `on_user_speech`: the counter returns to 0 whenever the user speaks, so the hook may fire
    /// `max_count` times per stretch of silence.
    OnUserSpeech,
}

impl ResetMode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetMode::Never => "never",
            ResetMode::OnUserSpeech => "on_user_speech",
        }
    }
}

/// Parses `agent.hooks` (the value at `loc`; null means no hooks), recording every problem in
/// `issues` with its exact `loc`. The hooks are the session's only if no issue was recorded.
pub fn parse_hooks(value: &Value, loc: &Loc, issues: &mut Issues) -> Vec<SilenceHook> {
    let items = match value {
        Value::Null => return Vec::new(),
        Value::Array(items) => items,
        _ => {
            issues.push(loc, "list_type", "Input should be a valid array");
            return Vec::new();
        }
    };
    if items.len() > HOOKS_MAX {
        issues.push(loc, "too_long", format!("List should have at most {HOOKS_MAX} items"));
    }
    items.iter().enumerate().filter_map(|(position, item)| parse_hook(item, &index(loc, position), issues)).collect()
}

fn parse_hook(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<SilenceHook> {
    let mut fields = Fields::of(value, loc, issues)?;
    let trigger = match fields.raw("trigger") {
        None => {
            issues.push(&fields.loc_of("trigger"), "missing", "Field required");
            None
        }
        Some(Value::String(text)) if text == HOOK_TRIGGER => Some(HookTrigger::UserSpeechTimeout),
        Some(Value::String(_)) => {
            issues.push(&fields.loc_of("trigger"), "enum", "Input should be 'user.speech.timeout'");
            None
        }
        Some(_) => {
            issues.push(&fields.loc_of("trigger"), "string_type", "Input should be a valid string");
            None
        }
    };
    let timeout_loc = fields.loc_of("timeout_seconds");
    let timeout_seconds = match fields.raw("timeout_seconds") {
        None => {
            issues.push(&timeout_loc, "missing", "Field required");
            None
        }
        Some(Value::Number(number)) => match number.as_f64() {
            Some(seconds) if (HOOK_TIMEOUT_MIN_SECONDS..=HOOK_TIMEOUT_MAX_SECONDS).contains(&seconds) => Some(seconds),
            _ => {
                issues.push(
                    &timeout_loc,
                    "range",
                    format!("Input should be between {HOOK_TIMEOUT_MIN_SECONDS} and {HOOK_TIMEOUT_MAX_SECONDS}"),
                );
                None
            }
        },
        Some(_) => {
            issues.push(&timeout_loc, "float_type", "Input should be a valid number");
            None
        }
    };
    let action = match fields.raw("action") {
        None => {
            issues.push(&fields.loc_of("action"), "missing", "Field required");
            None
        }
        Some(action) => parse_action(action, &fields.loc_of("action"), issues),
    };
    let max_count = fields
        .optional_integer("max_count", 1, i64::from(HOOK_MAX_COUNT_MAX), issues)
        .and_then(|count| u32::try_from(count).ok());
    let reset_mode = match fields.raw("reset_mode") {
        None | Some(Value::Null) => ResetMode::default(),
        Some(Value::String(text)) if text == "never" => ResetMode::Never,
        Some(Value::String(text)) if text == "on_user_speech" => ResetMode::OnUserSpeech,
        Some(_) => {
            issues.push(&fields.loc_of("reset_mode"), "enum", "Input should be 'never' or 'on_user_speech'");
            ResetMode::default()
        }
    };
    let name = fields.optional_string("name", HOOK_NAME_MAX_CHARS, issues).map(str::to_owned);
    fields.deny_unknown(issues);
    Some(SilenceHook {
        trigger: trigger?,
        name,
        timeout_seconds: timeout_seconds?,
        action: action?,
        max_count,
        reset_mode,
    })
}

fn parse_action(value: &Value, loc: &Loc, issues: &mut Issues) -> Option<HookAction> {
    let mut fields = Fields::of(value, loc, issues)?;
    let action = match fields.raw("type") {
        None => {
            issues.push(&fields.loc_of("type"), "missing", "Field required");
            return None;
        }
        Some(Value::String(kind)) if kind == "say" => {
            let present = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
            if !present(fields.raw("text")) && !present(fields.raw("prompt")) {
                issues.push(loc, "value_error", "A say action needs at least one of 'text' or 'prompt'");
            }
            let text = fields.optional_string("text", HOOK_TEXT_MAX_CHARS, issues).map(str::to_owned);
            let prompt = fields.optional_string("prompt", HOOK_TEXT_MAX_CHARS, issues).map(str::to_owned);
            HookAction::Say { text, prompt }
        }
        Some(Value::String(kind)) if kind == "end_call" => HookAction::EndCall {
            farewell: fields.optional_string("farewell", HOOK_TEXT_MAX_CHARS, issues).map(str::to_owned),
        },
        Some(_) => {
            issues.push(&fields.loc_of("type"), "union_tag_invalid", "Input tag should be 'say' or 'end_call'");
            return None;
        }
    };
    fields.deny_unknown(issues);
    Some(action)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::body;
    use serde_json::json;
    use svc_wire::ValidationIssue;

    const SECRET: &str = "sk-live-TOPSECRET-42";

    fn tools_loc() -> Loc {
        key(&key(&body(), "agent"), "tools")
    }

    fn hooks_loc() -> Loc {
        key(&key(&body(), "agent"), "hooks")
    }

    fn run_tools(tools: Value, max: usize) -> (Vec<ToolSpec>, Vec<ValidationIssue>, Vec<String>) {
        let mut issues = Issues::default();
        let mut problems = Vec::new();
        let parsed = parse_tools(&tools, &tools_loc(), max, &mut issues, &mut problems);
        (parsed, issues.into_vec(), problems)
    }

    fn client(name: &str) -> Value {
        json!({"kind": "client", "name": name, "description": "Looks things up.",
               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}})
    }

    fn client_with_parameters(parameters: Value) -> Value {
        json!({"kind": "client", "name": "lookup", "description": "d", "parameters": parameters})
    }

    fn locs(issues: &[ValidationIssue]) -> Vec<Value> {
        issues.iter().map(|issue| serde_json::to_value(&issue.loc).expect("loc")).collect()
    }

    fn kinds(issues: &[ValidationIssue]) -> Vec<&str> {
        issues.iter().map(|issue| issue.kind.as_str()).collect()
    }

    #[test]
    fn valid_tools_parse_and_serialize_in_wire_spelling() {
        let (tools, issues, problems) = run_tools(
            json!([client("get_weather"), {"kind": "web_search"}, client("svc_sdk_x_y"), {"kind": "speaker_log"},
                   {"kind": "client", "name": "no_args", "description": "d"}, {"kind": "end_call"}]),
            INLINE_TOOLS_MAX,
        );
        assert!(issues.is_empty() && problems.is_empty(), "{issues:?} {problems:?}");
        assert_eq!(tools.len(), 6);
        assert_eq!(
            tool_names(&tools),
            ["get_weather", "svc_sdk_x_y", "no_args", "web_search", "speaker_log", "end_call"]
        );
        let ToolSpec::Client(no_args) = &tools[4] else { panic!("client") };
        assert_eq!(no_args.parameters, json!({"type": "object", "properties": {}}));
        let wire = serde_json::to_value(&tools).expect("serializes");
        assert_eq!(wire[1], json!({"kind": "web_search"}));
        assert_eq!(wire[0], client("get_weather"));
        let back: Vec<ToolSpec> = serde_json::from_value(wire).expect("round trip");
        assert_eq!(back, tools);
        assert!(run_tools(Value::Null, INLINE_TOOLS_MAX).0.is_empty());
    }

    #[test]
    fn every_tool_rule_is_a_problem_with_its_exact_sentence() {
        let nested_bad = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {
            "b": {"type": "array", "items": {"type": "string", "format": "email"}}}}}});
        let cases: Vec<(Value, Vec<String>)> = vec![
            (client("ab"), vec!["tools[0]: `name` must match ^[a-z][a-z0-9_]{2,63}$".into()]),
            (client("Lookup"), vec!["tools[0]: `name` must match ^[a-z][a-z0-9_]{2,63}$".into()]),
            (client("1lookup"), vec!["tools[0]: `name` must match ^[a-z][a-z0-9_]{2,63}$".into()]),
            (client("look-up"), vec!["tools[0]: `name` must match ^[a-z][a-z0-9_]{2,63}$".into()]),
            (client(&"a".repeat(65)), vec!["tools[0]: `name` must be at most 64 characters".into()]),
            (client(&"a".repeat(64)), vec![]),
            (
                client("svc_x"),
                vec![
                    "tools[0]: `name` must not start with `svc_` (only `svc_sdk_` is allowed, for tools an SDK ships)"
                        .into(),
                ],
            ),
            (client("svc_sdk_x"), vec![]),
            (json!({"kind": "client", "description": "d"}), vec!["tools[0]: a client tool needs a `name`".into()]),
            (
                json!({"kind": "client", "name": 7, "description": "d"}),
                vec!["tools[0]: `name` must be a string".into()],
            ),
            (json!({"kind": "client", "name": "lookup"}), vec!["tools[0]: a client tool needs a `description`".into()]),
            (
                json!({"kind": "client", "name": "lookup", "description": ""}),
                vec!["tools[0]: `description` must not be empty".into()],
            ),
            (
                json!({"kind": "client", "name": "lookup", "description": ["d"]}),
                vec!["tools[0]: `description` must be a string".into()],
            ),
            (
                json!({"kind": "client", "name": "lookup", "description": "d".repeat(2049)}),
                vec!["tools[0]: `description` must be at most 2048 characters".into()],
            ),
            (json!({"kind": "client", "name": "lookup", "description": "é".repeat(2048)}), vec![]),
            (
                client_with_parameters(json!({"type": "object", "additionalProperties": false})),
                vec![
                    "tools[0]: `/parameters/additionalProperties` is not an allowed keyword (allowed: \
                      type, properties, required, items, enum, description)"
                        .into(),
                ],
            ),
            (
                client_with_parameters(nested_bad),
                vec![
                    "tools[0]: `/parameters/properties/a/properties/b/items/format` is not an allowed \
                      keyword (allowed: type, properties, required, items, enum, description)"
                        .into(),
                ],
            ),
            (
                client_with_parameters(json!({"type": "array", "items": {"type": "string"}})),
                vec!["tools[0]: top-level `type` of `parameters` must be `object`".into()],
            ),
            (
                client_with_parameters(json!({"properties": {}})),
                vec!["tools[0]: top-level `type` of `parameters` must be `object`".into()],
            ),
            (
                client_with_parameters(json!("object")),
                vec!["tools[0]: `parameters` must be a JSON Schema object".into()],
            ),
            (
                client_with_parameters(json!({"type": "object", "properties": {
                    "a": {"type": "strin"}, "b": {"type": []}, "c": {"type": ["string", "null"]},
                    "d": {"enum": "x"}, "e": {"description": 5}, "f": true, "g": {"items": [{"type": "string"}]}},
                    "required": ["a", 1]})),
                vec![
                    "tools[0]: `/parameters/properties/a/type` must be a JSON Schema type name or a \
                     non-empty array of them"
                        .into(),
                    "tools[0]: `/parameters/properties/b/type` must be a JSON Schema type name or a \
                     non-empty array of them"
                        .into(),
                    "tools[0]: `/parameters/properties/d/enum` must be an array".into(),
                    "tools[0]: `/parameters/properties/e/description` must be a string".into(),
                    "tools[0]: `/parameters/properties/f` must be a JSON Schema object".into(),
                    "tools[0]: `/parameters/properties/g/items` must be a JSON Schema object".into(),
                    "tools[0]: `/parameters/required` must be an array of strings".into(),
                ],
            ),
            (
                client_with_parameters(json!({"type": "object", "properties": []})),
                vec!["tools[0]: `/parameters/properties` must be an object of property schemas".into()],
            ),
            (
                json!({"kind": "client", "name": "lookup", "description": "d", "strict": true}),
                vec!["tools[0]: field `strict` is not allowed on a client tool".into()],
            ),
            (json!({"kind": "server", "name": "x", "url": "u"}), vec!["tools[0]: kind `server` is retired".into()]),
            (json!({"kind": "catalog", "name": "x"}), vec!["tools[0]: kind `catalog` is reserved".into()]),
            (
                json!({"kind": "web_search", "max_results": 3}),
                vec!["tools[0] (`web_search`): field `max_results` is not allowed; this kind takes only `kind`".into()],
            ),
            (json!({"kind": "speaker_log"}), vec![]),
            (json!({"kind": "detect_objects"}), vec![]),
        ];
        for (tool, expected) in cases {
            let (tools, issues, problems) = run_tools(json!([tool]), INLINE_TOOLS_MAX);
            assert!(issues.is_empty(), "{tool}: {issues:?}");
            assert_eq!(problems, expected, "{tool}");
            assert_eq!(tools.len(), usize::from(expected.is_empty()), "{tool}");
        }
    }

    #[test]
    fn duplicates_name_both_indexes_and_every_problem_is_reported_in_order() {
        let (tools, issues, problems) = run_tools(
            json!([
                client("lookup"),
                {"kind": "server"},
                client("Bad"),
                client("lookup"),
                {"kind": "web_search"},
                {"kind": "client", "name": "web_search", "description": "d"},
                {"kind": "catalog", "name": "desk"},
                {"kind": "web_search"},
                {"kind": "client", "name": "lookup", "description": 1},
            ]),
            INLINE_TOOLS_MAX,
        );
        assert!(issues.is_empty());
        assert_eq!(
            problems,
            [
                "tools[1]: kind `server` is retired",
                "tools[2]: `name` must match ^[a-z][a-z0-9_]{2,63}$",
                "tools[3]: name already used by tools[0]",
                "tools[5]: name already used by tools[4]",
                "tools[6]: kind `catalog` is reserved",
                "tools[7]: name already used by tools[4]",
                "tools[8]: `description` must be a string",
                "tools[8]: name already used by tools[0]",
            ]
        );
        assert_eq!(tool_names(&tools), ["lookup", "web_search"]);
        assert_eq!(problems.join("; ").matches("; ").count(), 7);
    }

    #[test]
    fn schema_failures_are_issues_not_problems() {
        let (_, issues, problems) = run_tools(
            json!([{"kind": "telepathy"}, 5, {"name": "x"}, {"kind": 3}, {"kind": "server"}]),
            INLINE_TOOLS_MAX,
        );
        assert_eq!(kinds(&issues), ["union_tag_invalid", "object_type", "missing", "string_type"]);
        assert_eq!(
            locs(&issues),
            [
                json!(["body", "agent", "tools", 0, "kind"]),
                json!(["body", "agent", "tools", 1]),
                json!(["body", "agent", "tools", 2, "kind"]),
                json!(["body", "agent", "tools", 3, "kind"]),
            ]
        );
        assert_eq!(problems, ["tools[4]: kind `server` is retired"]);

        let (_, issues, problems) = run_tools(json!({"kind": "client"}), INLINE_TOOLS_MAX);
        assert_eq!((kinds(&issues), problems.len()), (vec!["list_type"], 0));
        assert_eq!(locs(&issues), [json!(["body", "agent", "tools"])]);

        let (_, issues, _) = run_tools(json!(vec![json!({"kind": "end_call"}); 3]), 2);
        assert_eq!(kinds(&issues), ["too_long"]);
        assert_eq!(issues[0].msg, "List should have at most 2 items");
        let (_, issues, _) = run_tools(json!(vec![json!({"kind": "end_call"}); 129]), INLINE_TOOLS_MAX);
        assert_eq!(kinds(&issues), ["too_long"]);
    }

    fn nested(levels: usize, via_items: bool) -> Value {
        let mut schema = json!({"type": "string"});
        for _ in 1..levels {
            schema = if via_items {
                json!({"type": "array", "items": schema})
            } else {
                json!({"type": "object", "properties": {"a": schema}})
            };
        }
        schema
    }

    #[test]
    fn hostile_depth_is_one_problem_without_overflow() {
        let ok = json!({"type": "object", "properties": {"a": nested(SCHEMA_DEPTH_MAX - 1, true)}});
        assert!(run_tools(json!([client_with_parameters(ok)]), INLINE_TOOLS_MAX).2.is_empty());
        for depth in [SCHEMA_DEPTH_MAX, 64, 200] {
            for via_items in [true, false] {
                let deep = json!({"type": "object", "properties": {"a": nested(depth, via_items)}});
                let (tools, _, problems) = run_tools(json!([client_with_parameters(deep)]), INLINE_TOOLS_MAX);
                assert_eq!(problems, ["tools[0]: `parameters` nests schemas deeper than 32 levels"]);
                assert!(tools.is_empty());
            }
        }
    }

    #[test]
    fn problems_are_capped() {
        let properties: Map<String, Value> = (0..150).map(|i| (format!("p{i:03}"), json!({"format": "x"}))).collect();
        let (_, _, problems) = run_tools(
            json!([client_with_parameters(json!({"type": "object", "properties": properties}))]),
            INLINE_TOOLS_MAX,
        );
        assert_eq!(problems.len(), TOOL_PROBLEMS_LISTED_MAX + 1);
        assert_eq!(problems.last().map(String::as_str), Some("50 more tool problems not listed"));
    }

    #[test]
    fn messages_never_echo_payload_values() {
        let long_secret = SECRET.repeat(200);
        let odd_key = format!("{SECRET} as a key");
        let (_, issues, problems) = run_tools(
            json!([
                {"kind": "client", "name": SECRET, "description": long_secret, "x-secret": SECRET,
                 "parameters": {"type": SECRET, "properties": {"q": {"enum": SECRET, "description": [SECRET],
                   "default": SECRET}, "k": {"type": "string"}}, "required": [SECRET, 5]}},
                {"kind": "client", "name": format!("svc_{}", "a".repeat(10)), "description": SECRET},
                {"kind": "end_call", "farewell": SECRET},
                {"kind": SECRET},
                {"kind": "client", "name": "lookup", "description": "d", odd_key: 1},
            ]),
            INLINE_TOOLS_MAX,
        );
        let rendered = format!("{} {}", serde_json::to_string(&issues).expect("json"), problems.join("; "));
        assert!(!rendered.contains("TOPSECRET") && !rendered.contains("svc_aaaa"), "{rendered}");
        assert!(rendered.contains("field `<key>` is not allowed"), "{rendered}");
        assert_eq!(problems.len(), 11, "{problems:?}");

        let mut issues = Issues::default();
        parse_hooks(
            &json!([{"trigger": SECRET, "timeout_seconds": SECRET, "action": {"type": SECRET}, "name": long_secret,
                     "reset_mode": SECRET, "x": SECRET},
                    {"trigger": "user.speech.timeout", "timeout_seconds": 5,
                     "action": {"type": "say", "text": long_secret, "prompt": 5, "y": SECRET}}]),
            &hooks_loc(),
            &mut issues,
        );
        let rendered = serde_json::to_string(&issues.into_vec()).expect("json");
        assert!(!rendered.contains("TOPSECRET"), "{rendered}");
    }

    #[test]
    fn availability_drops_and_reports() {
        let (tools, _, _) = run_tools(
            json!([{"kind": "detect_objects"}, client("lookup"), {"kind": "web_search"}, {"kind": "end_call"}]),
            INLINE_TOOLS_MAX,
        );
        let available: ServerToolAvailability =
            serde_json::from_value(json!(["web_search", "end_call"])).expect("list of kinds");
        assert!(available.allows(ServerTool::EndCall) && !available.allows(ServerTool::DetectObjects));
        let (kept, rejected) = apply_availability(tools, &available);
        assert_eq!(tool_names(&kept), ["lookup", "web_search", "end_call"]);
        assert_eq!(
            serde_json::to_value(&rejected).expect("json"),
            json!([{"name": "detect_objects", "reason": "not_configured: this deployment has no backend for detect_objects"}])
        );
        let (kept, rejected) = apply_availability(kept, &ServerToolAvailability::default());
        assert_eq!(tool_names(&kept), ["lookup"]);
        assert_eq!(rejected.len(), 2);
        assert!(serde_json::from_value::<ServerToolAvailability>(json!(["client"])).is_err());
        assert_eq!(ServerToolAvailability::all().enabled().count(), ServerTool::ALL.len());
        for tool in ServerTool::ALL {
            assert_eq!(serde_json::to_value(tool).expect("json"), json!(tool.as_str()));
            assert_eq!(ServerTool::from_wire(tool.as_str()), Some(tool));
        }
    }

    #[test]
    fn a_vision_tool_needs_a_model_that_takes_images() {
        let (tools, _, _) =
            run_tools(json!([{"kind": "examine_image"}, client("lookup"), {"kind": "end_call"}]), INLINE_TOOLS_MAX);
        let (kept, rejected) = apply_model_support(tools.clone(), true, "gemini-3.8-live");
        assert_eq!((tool_names(&kept).len(), rejected.len()), (3, 0));
        let (kept, rejected) = apply_model_support(tools, false, "grok-voice-3.0");
        assert_eq!(tool_names(&kept), ["lookup", "end_call"]);
        assert_eq!(
            serde_json::to_value(&rejected).expect("json"),
            json!([{"name": "examine_image", "reason": "not_supported: grok-voice-3.0 takes no images, so examine_image cannot see a frame"}])
        );
        assert!(ServerTool::RUNNABLE.iter().all(|tool| ServerTool::ALL.contains(tool)));
    }

    fn run_hooks(hooks: Value) -> (Vec<SilenceHook>, Vec<ValidationIssue>) {
        let mut issues = Issues::default();
        let parsed = parse_hooks(&hooks, &hooks_loc(), &mut issues);
        (parsed, issues.into_vec())
    }

    fn hook(extra: Value) -> Value {
        let mut base = json!({"trigger": "user.speech.timeout", "timeout_seconds": 8, "action": {"type": "say", "text": "Still there?"}});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            for (name, value) in extra {
                base.insert(name.clone(), value.clone());
            }
        }
        base
    }

    #[test]
    fn valid_hooks_parse_with_defaults_and_serialize_in_wire_spelling() {
        let (hooks, issues) = run_hooks(json!([
            hook(json!({})),
            hook(json!({"timeout_seconds": 7.5, "action": {"type": "say", "prompt": "Check in gently."},
                        "max_count": 10, "reset_mode": "on_user_speech", "name": "nudge"})),
            hook(json!({"timeout_seconds": 3600, "action": {"type": "end_call", "farewell": "Bye."}, "max_count": 1,
                        "reset_mode": null})),
            hook(json!({"timeout_seconds": 1, "action": {"type": "end_call"}, "reset_mode": "never"})),
            hook(json!({"action": {"type": "say", "text": "a", "prompt": "b"}})),
        ]));
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(hooks.len(), 5);
        assert_eq!(hooks[0].reset_mode, ResetMode::Never);
        assert_eq!(hooks[0].effective_max_count(), HOOK_MAX_COUNT_DEFAULT);
        assert_eq!(hooks[1].effective_max_count(), 10);
        assert_eq!(hooks[3].action, HookAction::EndCall { farewell: None });
        assert_eq!(
            serde_json::to_value(&hooks[1]).expect("json"),
            json!({"trigger": "user.speech.timeout", "name": "nudge", "timeout_seconds": 7.5,
                   "action": {"type": "say", "prompt": "Check in gently."}, "max_count": 10,
                   "reset_mode": "on_user_speech"})
        );
        assert_eq!(
            serde_json::to_value(&hooks[2].action).expect("json"),
            json!({"type": "end_call", "farewell": "Bye."})
        );
        let back: Vec<SilenceHook> = serde_json::from_value(serde_json::to_value(&hooks).expect("json")).expect("back");
        assert_eq!(back, hooks);
        assert_eq!(ResetMode::OnUserSpeech.as_str(), "on_user_speech");
        assert!(run_hooks(Value::Null).0.is_empty());
    }

    #[test]
    fn every_hook_rule_is_an_issue_at_its_exact_loc() {
        let cases: Vec<(Value, &str, Value)> = vec![
            (json!({"trigger": "user.speech.start"}), "enum", json!(["trigger"])),
            (json!({"trigger": 1}), "string_type", json!(["trigger"])),
            (json!({"timeout_seconds": 0.5}), "range", json!(["timeout_seconds"])),
            (json!({"timeout_seconds": 3600.5}), "range", json!(["timeout_seconds"])),
            (json!({"timeout_seconds": "8"}), "float_type", json!(["timeout_seconds"])),
            (json!({"action": {"type": "transfer"}}), "union_tag_invalid", json!(["action", "type"])),
            (json!({"action": {"text": "hi"}}), "missing", json!(["action", "type"])),
            (json!({"action": "say"}), "object_type", json!(["action"])),
            (json!({"action": {"type": "say"}}), "value_error", json!(["action"])),
            (json!({"action": {"type": "say", "text": null}}), "value_error", json!(["action"])),
            (
                json!({"action": {"type": "say", "text": "t".repeat(4097)}}),
                "string_too_long",
                json!(["action", "text"]),
            ),
            (json!({"action": {"type": "say", "prompt": ""}}), "string_too_short", json!(["action", "prompt"])),
            (
                json!({"action": {"type": "end_call", "farewell": "f".repeat(4097)}}),
                "string_too_long",
                json!(["action", "farewell"]),
            ),
            (json!({"action": {"type": "end_call", "text": "x"}}), "extra_forbidden", json!(["action", "text"])),
            (json!({"max_count": 0}), "range", json!(["max_count"])),
            (json!({"max_count": 11}), "range", json!(["max_count"])),
            (json!({"max_count": 2.5}), "int_type", json!(["max_count"])),
            (json!({"reset_mode": "onUserSpeech"}), "enum", json!(["reset_mode"])),
            (json!({"reset_mode": true}), "enum", json!(["reset_mode"])),
            (json!({"name": "n".repeat(65)}), "string_too_long", json!(["name"])),
            (json!({"name": ""}), "string_too_short", json!(["name"])),
            (json!({"do": "say"}), "extra_forbidden", json!(["do"])),
        ];
        for (extra, kind, tail) in cases {
            let (hooks, issues) = run_hooks(json!([{"trigger": "user.speech.timeout"}, hook(extra.clone())]));
            // Hook 0 lacks timeout_seconds and action; hook 1 carries the case.
            assert_eq!(kinds(&issues[..2]), ["missing", "missing"], "{extra}");
            assert_eq!(
                locs(&issues[..2]),
                [
                    json!(["body", "agent", "hooks", 0, "timeout_seconds"]),
                    json!(["body", "agent", "hooks", 0, "action"])
                ]
            );
            assert_eq!(kinds(&issues[2..]), [kind], "{extra}");
            let mut expected = json!(["body", "agent", "hooks", 1]);
            if let (Some(expected), Some(tail)) = (expected.as_array_mut(), tail.as_array()) {
                expected.extend(tail.iter().cloned());
            }
            assert_eq!(locs(&issues[2..]), [expected], "{extra}");
            assert!(hooks.is_empty() || hooks.len() == 1, "{extra}");
        }
    }

    #[test]
    fn hook_list_shape_and_bound() {
        let (_, issues) = run_hooks(json!(vec![hook(json!({})); HOOKS_MAX + 1]));
        assert_eq!((kinds(&issues), locs(&issues)), (vec!["too_long"], vec![json!(["body", "agent", "hooks"])]));
        let (_, issues) = run_hooks(json!({"trigger": "user.speech.timeout"}));
        assert_eq!(kinds(&issues), ["list_type"]);
        let (_, issues) = run_hooks(json!([3, {}]));
        assert_eq!(kinds(&issues), ["object_type", "missing", "missing", "missing"]);
        assert_eq!(
            locs(&issues),
            [
                json!(["body", "agent", "hooks", 0]),
                json!(["body", "agent", "hooks", 1, "trigger"]),
                json!(["body", "agent", "hooks", 1, "timeout_seconds"]),
                json!(["body", "agent", "hooks", 1, "action"]),
            ]
        );
    }
}
