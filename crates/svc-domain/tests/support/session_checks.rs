//! The properties session-config parsing must keep, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/session_config.rs`) and the stable robustness test
//! (`crates/svc-domain/tests/robustness.rs`), which both include this file with `#[path]`.
//! See docs/FUZZING.md.

use std::collections::BTreeSet;
use std::fmt::Debug;

use serde_json::{Value, json};
use svc_domain::limits::{CATALOG_TOOLS_MAX, GREETING_MAX_CHARS, HOOKS_MAX, INSTRUCTIONS_MAX_CHARS, char_len};
use svc_domain::model::{Delegation, ModelCatalog};
use svc_domain::requests::is_agent_handle;
use svc_domain::session_config::{AgentRequest, StartParseError, StartRequest, parse_start};
use svc_domain::settings::RecordingConsents;
use svc_domain::start::{AgentKind, CatalogLookup, ResolvedSession, StartContext, StartRejection, resolve_start};
use svc_domain::tools::{INLINE_TOOLS_MAX, ServerTool, ServerToolAvailability, TOOL_PROBLEMS_LISTED_MAX, ToolSpec};

/// One fuzz input, decoded from the layout in docs/FUZZING.md: a selector byte, the header line
/// in header mode 7, then the body and an optional stored configuration as a JSON stream.
#[derive(Debug, Clone)]
pub(crate) struct Decoded {
    pub(crate) selector: u8,
    pub(crate) header: Option<String>,
    pub(crate) body: Value,
    pub(crate) stored: Value,
}

/// Decodes fuzz bytes; `None` when there is no selector byte or no JSON body.
pub(crate) fn decode(data: &[u8]) -> Option<Decoded> {
    let (&selector, rest) = data.split_first()?;
    let (header, json) = match selector & 7 {
        7 => {
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            (Some(String::from_utf8_lossy(&rest[..end]).into_owned()), rest.get(end + 1..).unwrap_or_default())
        }
        mode => (header(mode), rest),
    };
    let mut values = serde_json::Deserializer::from_slice(json).into_iter::<Value>();
    let body = values.next()?.ok()?;
    let stored = match values.next() {
        Some(Ok(stored)) => stored,
        _ => default_stored(),
    };
    Some(Decoded { selector, header, body, stored })
}

/// Values of length at least this many characters must never appear in a message.
pub(crate) const ECHO_MIN_CHARS: usize = 24;

/// The `X-Svc-SDK` header of header modes 0 to 6 (mode 7 reads it from the input).
pub(crate) fn header(mode: u8) -> Option<String> {
    let header = match mode {
        1 => "svc-python/1.4.2".to_owned(),
        2 => "  svc-js / 2.3.0-beta.1 (node 22) ".to_owned(),
        3 => "/".to_owned(),
        4 => "no-slash-at-all".to_owned(),
        5 => "a/".to_owned(),
        6 => format!("{}/1", "n".repeat(101)),
        _ => return None,
    };
    Some(header)
}

/// The stored catalog configuration used when the input carries none.
pub(crate) fn default_stored() -> Value {
    json!({
        "instructions": "You are the receptionist of {{company}}. The caller is {{caller_name}}.",
        "greeting": "Hello {{caller_name}}!",
        "model": "provider_b",
        "voice": {"name": "marin"},
        "tools": [{"kind": "end_call"}, {"kind": "client", "name": "lookup", "description": "Looks a caller up."}],
        "hooks": [{"trigger": "user.speech.timeout", "timeout_seconds": 10, "action": {"type": "end_call"}}]
    })
}

/// What the server knows, chosen by the selector byte.
pub(crate) struct Server {
    pub(crate) tools: ServerToolAvailability,
    pub(crate) caller_has_resources_read: bool,
    pub(crate) consents: RecordingConsents,
    pub(crate) avatar_enabled: bool,
    pub(crate) server_max_session_seconds: Option<u32>,
}

pub(crate) fn server(selector: u8) -> Server {
    let everything = selector & 0x80 != 0;
    Server {
        tools: if selector & 0x40 != 0 { ServerToolAvailability::all() } else { ServerToolAvailability::default() },
        caller_has_resources_read: selector & 0x20 != 0,
        consents: if everything {
            RecordingConsents { audio: true, transcript: true, video: true }
        } else {
            RecordingConsents::default()
        },
        avatar_enabled: everything,
        server_max_session_seconds: [None, Some(60), Some(14_400), Some(u32::MAX)][usize::from((selector >> 3) & 3)],
    }
}

/// A text the caller or a log may see. `catalog` marks model-resolution messages, which may name
/// model ids and aliases of the catalog (and nothing else the caller sent).
pub(crate) struct Text {
    pub(crate) text: String,
    pub(crate) catalog: bool,
}

/// Runs parse and resolution once, checks the structural invariants, and returns every message.
pub(crate) fn run(body: &Value, header: Option<&str>, stored: &Value, selector: u8) -> Result<Vec<Text>, String> {
    let mut texts = Vec::new();
    let plain = |text: &str| Text { text: text.to_owned(), catalog: false };
    let request = match parse_start(body, header) {
        Err(StartParseError::Validation(issues)) => {
            if issues.is_empty() {
                return Err("validation_error without any issue".to_owned());
            }
            for issue in &issues {
                let loc =
                    serde_json::to_value(&issue.loc).map_err(|error| format!("loc does not serialize: {error}"))?;
                let segments = loc.as_array().cloned().unwrap_or_default();
                if segments.first().and_then(Value::as_str) != Some("body") {
                    return Err(format!("issue whose loc does not start with \"body\": {}", short(issue)));
                }
                if issue.kind.is_empty() || issue.msg.is_empty() {
                    return Err(format!("issue without kind or message: {}", short(issue)));
                }
                texts.push(plain(&issue.kind));
                texts.push(plain(&issue.msg));
                texts.extend(segments.iter().filter_map(Value::as_str).map(plain));
            }
            return Ok(texts);
        }
        Err(StartParseError::InvalidToolConfig(problems)) => {
            if problems.is_empty() {
                return Err("invalid_tool_config without any problem".to_owned());
            }
            if problems.len() > TOOL_PROBLEMS_LISTED_MAX + 1 {
                return Err(format!("{} tool problems listed, more than the cap", problems.len()));
            }
            if problems.iter().any(String::is_empty) {
                return Err("empty tool problem".to_owned());
            }
            texts.extend(problems.iter().map(|problem| plain(problem)));
            return Ok(texts);
        }
        Err(StartParseError::InstructionsTooLong) => return Ok(texts),
        Ok(request) => request,
    };
    check_request(&request)?;
    let server = server(selector);
    let context = StartContext {
        catalog: ModelCatalog::embedded(),
        server_tools: &server.tools,
        caller_has_resources_read: server.caller_has_resources_read,
        consents: server.consents,
        avatar_enabled: server.avatar_enabled,
        server_max_session_seconds: server.server_max_session_seconds,
    };
    let requested_cap = request.session.max_session_seconds;
    let result = match &request.agent {
        AgentRequest::Inline(_) => resolve_start(request, CatalogLookup::NotApplicable, &context),
        AgentRequest::Catalog(catalog) => {
            let name = catalog.name.clone();
            for lookup in [CatalogLookup::NotFound, CatalogLookup::NotApplicable] {
                match resolve_start(request.clone(), lookup, &context) {
                    Err(StartRejection::UnknownAgent(unknown)) if unknown == name => {}
                    other => return Err(format!("catalog start without its agent: {}", short(&other))),
                }
            }
            resolve_start(request, CatalogLookup::Found(stored), &context)
        }
    };
    match result {
        Err(StartRejection::Model(error)) => texts.push(Text { text: error.message().to_owned(), catalog: true }),
        Err(_) => {}
        Ok(session) => check_resolved(&session, requested_cap, &server)?,
    }
    Ok(texts)
}

/// Invariants of a schema-valid request.
pub(crate) fn check_request(request: &StartRequest) -> Result<(), String> {
    if request.sdk.name.is_empty() || request.sdk.version.is_empty() {
        return Err(format!("empty sdk: {}", short(&request.sdk)));
    }
    if request.session.max_session_seconds.is_some_and(|cap| !(60..=14_400).contains(&cap)) {
        return Err(format!("max_session_seconds out of range: {:?}", request.session.max_session_seconds));
    }
    match &request.agent {
        AgentRequest::Inline(agent) => {
            if agent.tools.len() > INLINE_TOOLS_MAX || agent.hooks.len() > HOOKS_MAX {
                return Err(format!(
                    "inline agent over its bounds: {} tools, {} hooks",
                    agent.tools.len(),
                    agent.hooks.len()
                ));
            }
        }
        AgentRequest::Catalog(agent) => {
            if !is_agent_handle(&agent.name) {
                return Err(format!("catalog handle accepted against its pattern: {:?}", agent.name));
            }
            if agent.tools.as_ref().is_some_and(|tools| tools.len() > CATALOG_TOOLS_MAX) {
                return Err("catalog start over its tool bound".to_owned());
            }
        }
    }
    Ok(())
}

/// Invariants of a resolved session.
pub(crate) fn check_resolved(
    session: &ResolvedSession,
    requested_cap: Option<u32>,
    server: &Server,
) -> Result<(), String> {
    let cap = session.max_session_seconds;
    let bounded_by = |limit: Option<u32>| limit.is_none_or(|limit| cap.is_some_and(|cap| cap <= limit));
    if cap.is_some() != (requested_cap.is_some() || server.server_max_session_seconds.is_some())
        || !bounded_by(requested_cap)
        || !bounded_by(server.server_max_session_seconds)
    {
        return Err(format!("cap {cap:?} from {requested_cap:?} and {:?}", server.server_max_session_seconds));
    }
    let store = session.store;
    let consents = server.consents;
    if (store.audio && !consents.audio)
        || (store.transcript && !consents.transcript)
        || (store.video && !consents.video)
    {
        return Err(format!("store flags {store:?} wider than consents {consents:?}"));
    }
    if session.warnings.iter().any(|warning| warning != "avatar_disabled")
        || (session.avatar.is_some() && !server.avatar_enabled)
    {
        return Err(format!("avatar {:?} with warnings {:?}", session.avatar.is_some(), session.warnings));
    }
    // A server tool runs when the deployment enables it and the model can serve it (the vision
    // tool needs a model that takes images).
    let runnable =
        |kind: ServerTool| server.tools.allows(kind) && (!kind.needs_image_input() || session.model.takes_images());
    for tool in &session.agent.tools {
        if let ToolSpec::Server(kind) = tool
            && !runnable(*kind)
        {
            return Err(format!("unavailable server tool {kind} kept"));
        }
    }
    for rejected in &session.rejected_tools {
        if ServerTool::from_wire(&rejected.name).is_none_or(runnable) {
            return Err(format!("tool rejected though runnable: {}", short(rejected)));
        }
    }
    let delegated = matches!(session.model.delegation, Some(Delegation::Client | Delegation::Svc));
    if delegated && !(session.agent.tools.is_empty() && session.rejected_tools.is_empty()) {
        return Err("tools kept under client or svc delegation".to_owned());
    }
    if session.model.delegation == Some(Delegation::Svc) && !server.caller_has_resources_read {
        return Err("svc delegation without resources:read".to_owned());
    }
    if !session.agent.audio.output && session.model.speech_to_speech_only {
        return Err(format!("text-only session on speech-to-speech model {}", session.model.model_id));
    }
    if char_len(&session.agent.instructions) > INSTRUCTIONS_MAX_CHARS
        || session.agent.greeting.as_deref().is_some_and(|greeting| char_len(greeting) > GREETING_MAX_CHARS)
    {
        return Err("instructions or greeting over their bound after resolution".to_owned());
    }
    if (session.agent.kind == AgentKind::Catalog) != session.agent.name.is_some() {
        return Err(format!("agent kind {:?} with name {:?}", session.agent.kind, session.agent.name));
    }
    // Stored in the session row, and read back by the node that runs it (another one in worker
    // mode, or the one that takes it over): the row must give back the very same session. Values
    // nested deeper than serde_json's parser reads (128) are built in code by the depth test and
    // cannot arrive in a request body, whose parser has the same bound.
    let stored =
        serde_json::to_string(session).map_err(|error| format!("resolved session does not serialize: {error}"))?;
    if serde_json::from_str::<Value>(&stored).is_ok() {
        let read_back: ResolvedSession = serde_json::from_str(&stored)
            .map_err(|error| format!("stored session does not read back: {error}: {stored}"))?;
        if &read_back != session {
            return Err(format!("stored session reads back different: {stored}"));
        }
    }
    session.ready_agent();
    Ok(())
}

/// Every property: [`run`]'s invariants, and no message echoes a long string value of the input.
///
/// A string value of at least [`ECHO_MIN_CHARS`] characters found in a message is an echo unless
/// it is part of an object key of the input (keys may be named in messages and `loc`s), or the
/// message is a model-resolution message and the value is part of the catalog's vocabulary, or
/// the message is fixed text: re-running with every occurrence of the value rotated (letters and
/// digits shifted by one) still shows the original.
pub(crate) fn check(body: &Value, header: Option<&str>, stored: &Value, selector: u8) -> Result<(), String> {
    let texts = run(body, header, stored, selector)?;
    let (values, keys) = strings(&[body, stored]);
    let candidates: BTreeSet<&str> =
        values.into_iter().chain(header).filter(|value| char_len(value) >= ECHO_MIN_CHARS).collect();
    for candidate in candidates {
        let Some(text) = texts
            .iter()
            .find(|text| shows(&text.text, candidate) && !(text.catalog && in_catalog_vocabulary(candidate)))
        else {
            continue;
        };
        if keys.iter().any(|key| key.contains(candidate)) {
            continue;
        }
        let rotated = rotate(candidate);
        if rotated != candidate {
            let (mut body, mut stored) = (body.clone(), stored.clone());
            replace_strings(&mut body, candidate, &rotated);
            replace_strings(&mut stored, candidate, &rotated);
            let header = header.map(|header| header.replace(candidate, &rotated));
            let again = run(&body, header.as_deref(), &stored, selector)?;
            if again.iter().any(|text| shows(&text.text, candidate)) {
                continue;
            }
        }
        return Err(format!(
            "a message echoes a string value of the input ({} chars, starting {:?}): {:?}",
            char_len(candidate),
            prefix(candidate, 40),
            prefix(&text.text, 300)
        ));
    }
    Ok(())
}

/// Whether `text` contains `value` as written, or as `{:?}` or JSON would escape it.
pub(crate) fn shows(text: &str, value: &str) -> bool {
    if text.len() < value.len() {
        return false;
    }
    let debug = format!("{value:?}");
    let json = serde_json::to_string(value).unwrap_or_default();
    text.contains(value)
        || text.contains(debug.trim_matches('"'))
        || json.get(1..json.len().saturating_sub(1)).is_some_and(|json| text.contains(json))
}

/// Whether `value` is part of a model id, alias or other name of the embedded catalog.
pub(crate) fn in_catalog_vocabulary(value: &str) -> bool {
    let catalog = ModelCatalog::embedded();
    catalog.models().iter().any(|model| model.id.contains(value))
        || catalog.aliases().any(|(alias, entry)| {
            alias.as_str().contains(value)
                || entry.default_model.contains(value)
                || entry.default_responses_model.as_deref().is_some_and(|model| model.contains(value))
        })
}

/// Every string value and every object key under `roots`, without recursion.
pub(crate) fn strings<'a>(roots: &[&'a Value]) -> (Vec<&'a str>, Vec<&'a str>) {
    let (mut values, mut keys) = (Vec::new(), Vec::new());
    let mut stack: Vec<&Value> = roots.to_vec();
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => values.push(text.as_str()),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                keys.extend(map.keys().map(String::as_str));
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    (values, keys)
}

/// Replaces `from` by `to` inside every string value (not key) under `root`, without recursion.
pub(crate) fn replace_strings(root: &mut Value, from: &str, to: &str) {
    let mut stack = vec![root];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) if text.contains(from) => *text = text.replace(from, to),
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
}

/// `value` with ASCII letters and digits shifted by one (`z` to `a`, `9` to `0`): same length,
/// same character classes, different text.
pub(crate) fn rotate(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            'z' => 'a',
            'Z' => 'A',
            '9' => '0',
            'a'..='y' | 'A'..='Y' | '0'..='8' => char::from(c as u8 + 1),
            other => other,
        })
        .collect()
}

/// The first `chars` characters of `text`.
pub(crate) fn prefix(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or(text, |(end, _)| &text[..end])
}

/// `{:?}` of `value`, cut to 500 characters.
pub(crate) fn short(value: &impl Debug) -> String {
    let text = format!("{value:?}");
    prefix(&text, 500).to_owned()
}
