//! Parsed bodies of the control-plane routes: token mint, support requests, catalog agents, dial.

use serde_json::Value;
use svc_wire::ValidationIssue;
use svc_wire::rest::AgentConfig;

use crate::limits::{
    AGENT_NAME_MAX_CHARS, EXTERNAL_USER_ID_MAX_CHARS, INSTRUCTIONS_MAX_CHARS, PHONE_NUMBER_MAX_CHARS,
    SUPPORT_MESSAGE_MAX_CHARS, SUPPORT_SUBJECT_MAX_CHARS, TOKEN_TTL_DEFAULT_SECONDS, TOKEN_TTL_MAX_SECONDS,
    TOKEN_TTL_MIN_SECONDS,
};
use crate::parse::{Fields, Issues, body, index, key};
use crate::settings::is_e164;
use crate::{Scope, ScopeSet};

/// A valid `POST /realtime/session/{id}/dial` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialParams {
    /// The callee, E.164.
    pub phone_number: String,
    /// The caller id to present, E.164; `None` uses the trunk's default.
    pub caller_number: Option<String>,
}

impl DialParams {
    /// Parses the body, collecting every problem.
    pub fn parse(value: &Value) -> Result<Self, Vec<ValidationIssue>> {
        let mut issues = Issues::default();
        let Some(mut fields) = Fields::of(value, &body(), &mut issues) else {
            return Err(issues.into_vec());
        };
        let e164 = |fields: &Fields<'_>, name: &'static str, number: Option<&str>, issues: &mut Issues| {
            let number = number?;
            if is_e164(number) {
                return Some(number.to_owned());
            }
            issues.push(
                &fields.loc_of(name),
                "string_pattern_mismatch",
                "Input should be an E.164 number: a plus sign then 8 to 15 digits",
            );
            None
        };
        let phone_number = fields.required_string("phone_number", PHONE_NUMBER_MAX_CHARS, &mut issues);
        let phone_number = e164(&fields, "phone_number", phone_number, &mut issues);
        let caller_number = fields.optional_string("caller_number", PHONE_NUMBER_MAX_CHARS, &mut issues);
        let caller_number = e164(&fields, "caller_number", caller_number, &mut issues);
        fields.deny_unknown(&mut issues);
        issues.finish(|| DialParams { phone_number: phone_number.unwrap_or_default(), caller_number })
    }
}

/// A valid `POST /auth/token` request.
#[derive(Debug, Clone, PartialEq)]
pub struct MintTokenParams {
    /// The end user.
    pub external_user_id: String,
    /// Lifetime in seconds.
    pub ttl_seconds: i64,
    /// The token's scopes: `realtime:start` plus the requested extras.
    pub scopes: ScopeSet,
}

impl MintTokenParams {
    /// Parses the body, collecting every problem.
    pub fn parse(value: &Value) -> Result<Self, Vec<ValidationIssue>> {
        let mut issues = Issues::default();
        let Some(mut fields) = Fields::of(value, &body(), &mut issues) else {
            return Err(issues.into_vec());
        };
        let external_user_id = fields.required_string("external_user_id", EXTERNAL_USER_ID_MAX_CHARS, &mut issues);
        let ttl_seconds =
            fields.optional_integer("ttl_seconds", TOKEN_TTL_MIN_SECONDS, TOKEN_TTL_MAX_SECONDS, &mut issues);
        let mut scopes = vec![Scope::RealtimeStart];
        if let Some(items) = fields.optional_array("scopes", &mut issues) {
            let loc = fields.loc_of("scopes");
            for (position, item) in items.iter().enumerate() {
                let item_loc = index(&loc, position);
                match item.as_str().map(str::parse::<Scope>) {
                    None => issues.push(&item_loc, "string_type", "Input should be a valid string"),
                    Some(Ok(scope)) if scope == Scope::RealtimeStart || Scope::MINTABLE_EXTRAS.contains(&scope) => {
                        scopes.push(scope)
                    }
                    Some(Ok(_)) => issues.push(
                        &item_loc,
                        "scope_not_mintable",
                        "A minted token may only add realtime:read, realtime:delete, connectors:read or connectors:write",
                    ),
                    Some(Err(_)) => issues.push(&item_loc, "enum", "Input should be a known scope"),
                }
            }
        }
        fields.deny_unknown(&mut issues);
        issues.finish(|| MintTokenParams {
            external_user_id: external_user_id.unwrap_or_default().to_owned(),
            ttl_seconds: ttl_seconds.unwrap_or(TOKEN_TTL_DEFAULT_SECONDS),
            scopes: ScopeSet::new(scopes),
        })
    }
}

/// A valid `POST /support/requests` request.
#[derive(Debug, Clone, PartialEq)]
pub struct SupportRequestParams {
    /// What happened.
    pub message: String,
    /// Summary.
    pub subject: Option<String>,
    /// The session it concerns (a UUID; its project is checked by the route).
    pub session_id: Option<String>,
    /// Where to answer.
    pub contact_email: Option<String>,
    /// Client diagnostics.
    pub diagnostics: Option<Value>,
}

/// Largest serialized `diagnostics` object of a support request.
pub const SUPPORT_DIAGNOSTICS_MAX_BYTES: usize = 64 * 1024;

impl SupportRequestParams {
    /// Parses the body, collecting every problem.
    pub fn parse(value: &Value) -> Result<Self, Vec<ValidationIssue>> {
        let mut issues = Issues::default();
        let Some(mut fields) = Fields::of(value, &body(), &mut issues) else {
            return Err(issues.into_vec());
        };
        let message = fields.required_string("message", SUPPORT_MESSAGE_MAX_CHARS, &mut issues);
        let subject = fields.optional_string("subject", SUPPORT_SUBJECT_MAX_CHARS, &mut issues);
        let session_id = fields.optional_string("session_id", 36, &mut issues);
        if session_id.is_some_and(|id| !is_uuid(id)) {
            issues.push(&fields.loc_of("session_id"), "uuid_parsing", "Input should be a valid UUID");
        }
        let contact_email = fields.optional_string("contact_email", 320, &mut issues);
        if contact_email.is_some_and(|email| !looks_like_email(email)) {
            issues.push(&fields.loc_of("contact_email"), "value_error", "Input should be an email address");
        }
        let diagnostics = match fields.raw("diagnostics") {
            None | Some(Value::Null) => None,
            Some(value @ Value::Object(_)) => {
                if value.to_string().len() > SUPPORT_DIAGNOSTICS_MAX_BYTES {
                    issues.push(&fields.loc_of("diagnostics"), "too_long", "Diagnostics should be at most 64 KiB");
                }
                Some(value.clone())
            }
            Some(_) => {
                issues.push(&fields.loc_of("diagnostics"), "object_type", "Input should be an object");
                None
            }
        };
        fields.deny_unknown(&mut issues);
        issues.finish(|| SupportRequestParams {
            message: message.unwrap_or_default().to_owned(),
            subject: subject.map(str::to_owned),
            session_id: session_id.map(|id| id.to_ascii_lowercase()),
            contact_email: contact_email.map(str::to_owned),
            diagnostics,
        })
    }
}

/// Whether `text` is a hyphenated UUID.
pub fn is_uuid(text: &str) -> bool {
    text.len() == 36
        && text.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `local@domain.tld`: one `@`, a non-empty local part, a dot in the domain, no space or ASCII
/// control character. The OpenAPI document states the same rule as a pattern.
fn looks_like_email(text: &str) -> bool {
    let plain = |c: char| c != '@' && c != ' ' && !c.is_ascii_control();
    text.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && local.chars().all(plain) && domain.chars().all(plain) && domain.contains('.')
    })
}

/// Whether `name` is a valid catalog agent handle: `^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`, ≤ 100 chars.
pub fn is_agent_handle(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= AGENT_NAME_MAX_CHARS
        && bytes.first().copied().is_some_and(edge)
        && bytes.last().copied().is_some_and(edge)
        && bytes.iter().all(|&b| edge(b) || b == b'-')
}

/// Largest agent description, in characters.
pub const AGENT_DESCRIPTION_MAX_CHARS: usize = 2000;

/// A valid stored-agent write (`POST /agents`, `PATCH /agents/{name}`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentParams {
    /// Handle (create only).
    pub name: Option<String>,
    /// Description: `None` = unchanged (patch), `Some(None)` = cleared.
    pub description: Option<Option<String>>,
    /// Configuration: `None` = unchanged (patch).
    pub config: Option<AgentConfig>,
}

impl AgentParams {
    /// Parses a create body (`name` required, `config` defaults to empty).
    pub fn parse_create(value: &Value) -> Result<Self, Vec<ValidationIssue>> {
        Self::parse(value, true)
    }

    /// Parses a patch body (no `name`; absent fields stay as stored).
    pub fn parse_update(value: &Value) -> Result<Self, Vec<ValidationIssue>> {
        Self::parse(value, false)
    }

    fn parse(value: &Value, create: bool) -> Result<Self, Vec<ValidationIssue>> {
        let mut issues = Issues::default();
        let Some(mut fields) = Fields::of(value, &body(), &mut issues) else {
            return Err(issues.into_vec());
        };
        let name = if create {
            let name = fields.required_string("name", AGENT_NAME_MAX_CHARS, &mut issues);
            if name.is_some_and(|name| !is_agent_handle(name)) {
                issues.push(
                    &fields.loc_of("name"),
                    "string_pattern_mismatch",
                    "String should match pattern '^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$'",
                );
            }
            name.map(str::to_owned)
        } else {
            None
        };
        let description = match fields.raw("description") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(_) => fields
                .optional_string("description", AGENT_DESCRIPTION_MAX_CHARS, &mut issues)
                .map(|text| Some(text.to_owned())),
        };
        let config = match fields.raw("config") {
            None if create => Some(AgentConfig::default()),
            None => None,
            Some(value) => parse_agent_config(value, &fields.loc_of("config"), &mut issues),
        };
        fields.deny_unknown(&mut issues);
        issues.finish(|| AgentParams { name, description, config })
    }
}

/// Checks a stored agent configuration with exactly the rules a start applies to an inline agent
/// (so a configuration accepted here loads at start), reporting tool problems and over-long
/// instructions as validation issues of the write.
fn parse_agent_config(value: &Value, loc: &svc_wire::Loc, issues: &mut Issues) -> Option<AgentConfig> {
    let mut tool_problems = Vec::new();
    let mut instructions_too_long = false;
    let parsed = crate::session_config::parse_inline_agent(
        value,
        loc,
        false,
        issues,
        &mut tool_problems,
        &mut instructions_too_long,
    );
    if instructions_too_long {
        issues.push(
            &key(loc, "instructions"),
            "string_too_long",
            format!("String should have at most {INSTRUCTIONS_MAX_CHARS} characters"),
        );
    }
    for problem in tool_problems {
        let field = if problem.starts_with("tool_response_policy") { "tool_response_policy" } else { "tools" };
        issues.push(&key(loc, field), "invalid_tool_config", problem);
    }
    parsed?;
    // The inline rules accepted every field, and `AgentConfig` holds exactly those fields.
    serde_json::from_value(value.clone()).ok()
}

/// Fills `{{key}}` placeholders of `template` from `inputs`; unknown keys are left as written.
pub fn substitute_placeholders(template: &str, inputs: &std::collections::BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let name = after[..end].trim();
                match inputs.get(name) {
                    Some(value) => out.push_str(value),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kinds(issues: &[ValidationIssue]) -> Vec<&str> {
        issues.iter().map(|i| i.kind.as_str()).collect()
    }

    #[test]
    fn dial_numbers_are_e164_and_every_problem_is_reported() {
        let params = DialParams::parse(&json!({"phone_number": "+14155550123"})).expect("valid");
        assert_eq!(params, DialParams { phone_number: "+14155550123".into(), caller_number: None });
        let params = DialParams::parse(&json!({"phone_number": "+442071838750", "caller_number": "+15550100000"}))
            .expect("valid");
        assert_eq!(params.caller_number.as_deref(), Some("+15550100000"));
        assert!(DialParams::parse(&json!({"phone_number": "+14155550123", "caller_number": null})).is_ok());

        let issues = DialParams::parse(&json!({"caller_number": "4155550123", "extra": 1})).expect_err("invalid");
        assert_eq!(kinds(&issues), ["missing", "string_pattern_mismatch", "extra_forbidden"]);
        for bad in ["+1234567", "+1234567890123456", "+1415555012a", "", "+14155550123000000000"] {
            let issues = DialParams::parse(&json!({"phone_number": bad})).expect_err(bad);
            assert_eq!(issues.len(), 1, "{bad}: {issues:?}");
        }
        assert_eq!(
            kinds(&DialParams::parse(&json!({"phone_number": 14155550123_i64})).expect_err("number")),
            ["string_type"]
        );
    }

    #[test]
    fn mint_defaults_to_a_day_and_realtime_start() {
        let params = MintTokenParams::parse(&json!({"external_user_id": "u-1"})).expect("valid");
        assert_eq!(params.ttl_seconds, 86_400);
        assert_eq!(params.scopes.wire_strings(), ["realtime:start"]);
    }

    #[test]
    fn contact_emails_follow_the_documented_pattern() {
        for good in ["a@b.c", "ünïcode@exämple.org", "a@.", "x@y\u{2003}.z"] {
            assert!(looks_like_email(good), "{good}");
        }
        for bad in ["a@b@c.d", "@b.c", "a@bc", "a b@c.d", "a@b.c\u{7f}", "a\t@b.c", ""] {
            assert!(!looks_like_email(bad), "{bad}");
        }
    }

    #[test]
    fn whole_numbers_written_as_floats_are_integers() {
        // JSON Schema's integer, as the OpenAPI document declares it: 4698.0 is 4698.
        let params = MintTokenParams::parse(&json!({"external_user_id": "u", "ttl_seconds": 4698.0})).expect("valid");
        assert_eq!(params.ttl_seconds, 4698);
        let issues =
            MintTokenParams::parse(&json!({"external_user_id": "u", "ttl_seconds": 4698.5})).expect_err("a fraction");
        assert_eq!(kinds(&issues), ["int_type"]);
        let issues =
            MintTokenParams::parse(&json!({"external_user_id": "u", "ttl_seconds": 1e300})).expect_err("too big");
        assert_eq!(kinds(&issues), ["range"]);
    }

    #[test]
    fn mint_accepts_only_the_mintable_extras() {
        let params = MintTokenParams::parse(
            &json!({"external_user_id": "u", "ttl_seconds": 60, "scopes": ["realtime:read", "connectors:write"]}),
        )
        .expect("valid");
        assert_eq!(params.scopes.wire_strings(), ["realtime:start", "realtime:read", "connectors:write"]);
        let issues = MintTokenParams::parse(
            &json!({"external_user_id": "", "ttl_seconds": 59, "scopes": ["resources:read", "user_tokens:mint", "nope", 3], "x": 1}),
        )
        .expect_err("invalid");
        assert_eq!(
            kinds(&issues),
            [
                "string_too_short",
                "range",
                "scope_not_mintable",
                "scope_not_mintable",
                "enum",
                "string_type",
                "extra_forbidden"
            ]
        );
        assert_eq!(serde_json::to_value(&issues[4].loc).expect("loc"), json!(["body", "scopes", 2]));
        assert_eq!(
            kinds(&MintTokenParams::parse(&json!({"ttl_seconds": 86401})).expect_err("x")),
            ["missing", "range"]
        );
        assert_eq!(kinds(&MintTokenParams::parse(&json!([1])).expect_err("x")), ["object_type"]);
    }

    #[test]
    fn support_requests_validate_every_field() {
        let ok = SupportRequestParams::parse(
            &json!({"message": "no audio", "session_id": "0196A3B4-0000-7000-8000-000000000000"}),
        )
        .expect("valid");
        assert_eq!(ok.session_id.as_deref(), Some("0196a3b4-0000-7000-8000-000000000000"));
        let issues = SupportRequestParams::parse(
            &json!({"session_id": "nope", "contact_email": "not-an-email", "diagnostics": [1]}),
        )
        .expect_err("invalid");
        assert_eq!(kinds(&issues), ["missing", "uuid_parsing", "value_error", "object_type"]);
    }

    #[test]
    fn agent_handles() {
        for good in ["a", "front-desk", "a1-b2", &"x".repeat(100)] {
            assert!(is_agent_handle(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a b", &"x".repeat(101)] {
            assert!(!is_agent_handle(bad), "{bad}");
        }
    }

    #[test]
    fn agent_bodies_collect_problems() {
        let created = AgentParams::parse_create(
            &json!({"name": "desk", "config": {"instructions": "hi", "tools": [{"kind": "end_call"}]}}),
        )
        .expect("valid");
        assert_eq!(created.config.and_then(|c| c.instructions).as_deref(), Some("hi"));
        let issues = AgentParams::parse_create(&json!({
            "name": "Bad_Name",
            "config": {"greeting": "g".repeat(4001), "interruption_sensitivity": "max", "tools": [{}], "bogus": 1,
                       "voice": {"speaking_style": "s".repeat(8193)}}
        }))
        .expect_err("invalid");
        assert_eq!(
            kinds(&issues),
            ["string_pattern_mismatch", "string_too_long", "missing", "string_too_long", "enum", "extra_forbidden"]
        );
        let patch = AgentParams::parse_update(&json!({"description": null})).expect("valid patch");
        assert_eq!((patch.description, patch.config), (Some(None), None));
        assert_eq!(kinds(&AgentParams::parse_update(&json!({"name": "x"})).expect_err("x")), ["extra_forbidden"]);
    }

    #[test]
    fn placeholders() {
        let inputs = [("name".to_owned(), "Ada".to_owned())].into_iter().collect();
        assert_eq!(
            substitute_placeholders("Hi {{name}}, {{ name }}! {{other}} {{", &inputs),
            "Hi Ada, Ada! {{other}} {{"
        );
    }
}
