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
//!
//! Layout: the tool specs in this file, the hooks in `hooks.rs`; they share the parsing helpers of
//! [`crate::parse`] and nothing else.

use std::collections::{BTreeMap, BTreeSet};

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use svc_wire::Loc;

use crate::limits::char_len;
use crate::parse::{Issues, index, key};

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
    /// need a configured backend ([`ServerTool::backend`]).
    pub const RUNNABLE: [ServerTool; 3] = [ServerTool::EndCall, ServerTool::SpeakerLog, ServerTool::ExamineImage];

    /// The external backend a kind runs on, if it needs one: a search API for `web_search`, a
    /// vision model for `detect_objects`, `point_at_object` and `screen_locate`.
    pub fn backend(self) -> Option<ToolBackend> {
        match self {
            ServerTool::WebSearch => Some(ToolBackend::WebSearch),
            ServerTool::DetectObjects | ServerTool::PointAtObject | ServerTool::ScreenLocate => {
                Some(ToolBackend::Vision)
            }
            ServerTool::ExamineImage | ServerTool::EndCall | ServerTool::SpeakerLog => None,
        }
    }

    /// Whether this tool looks at the session's latest frame (so the session keeps it).
    pub fn looks_at_frames(self) -> bool {
        matches!(
            self,
            ServerTool::ExamineImage | ServerTool::DetectObjects | ServerTool::PointAtObject | ServerTool::ScreenLocate
        )
    }

    /// Whether the model must take images for svc to run this tool.
    pub fn needs_image_input(self) -> bool {
        matches!(self, ServerTool::ExamineImage)
    }
}

/// An external service some server tools run on (configured with `svc serve` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolBackend {
    /// A search API (`--web-search-url`).
    WebSearch,
    /// An OpenAI-compatible vision model (`--vision-url`).
    Vision,
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
    /// Enabled here, but gated off for the workspace of this start (its
    /// `disabled_server_tools` setting); never part of the deployment's own list.
    #[serde(skip)]
    gated: BTreeSet<ServerTool>,
}

impl ServerToolAvailability {
    /// A deployment that can run exactly `enabled`.
    pub fn new(enabled: impl IntoIterator<Item = ServerTool>) -> Self {
        ServerToolAvailability { enabled: enabled.into_iter().collect(), gated: BTreeSet::new() }
    }

    /// This deployment's tools as one workspace sees them: the kinds in `disabled` are gated off
    /// (reported as `gated_off` rather than `not_configured`).
    pub fn gated_for_workspace(&self, disabled: &[ServerTool]) -> Self {
        let gated = disabled.iter().copied().filter(|tool| self.enabled.contains(tool)).collect();
        ServerToolAvailability { enabled: self.enabled.clone(), gated }
    }

    /// A deployment that can run every server tool.
    pub fn all() -> Self {
        Self::new(ServerTool::ALL)
    }

    /// Whether this deployment can run `tool` (for this workspace: not gated off).
    pub fn allows(&self, tool: ServerTool) -> bool {
        self.enabled.contains(&tool) && !self.gated.contains(&tool)
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
            ToolSpec::Server(kind) if available.gated.contains(&kind) => rejected.push(RejectedTool {
                name: kind.as_str().to_owned(),
                reason: format!("gated_off: {kind} is gated off for this workspace"),
            }),
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

mod hooks;
pub mod policy;

pub use hooks::*;
pub use policy::{ToolBehavior, ToolResponsePolicy, ToolResponseRule, ToolScheduling, parse_tool_response_policy};

#[cfg(test)]
mod tests;
