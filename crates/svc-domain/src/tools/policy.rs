//! The tool-response policy (interface-spec.md, "Model", the provider_a paragraph): whether the
//! model waits for a tool's result (`blocking`) or keeps talking (`non_blocking`), and when a
//! non-blocking result reaches the conversation (`when_idle`, `silent`, `interrupt`), as a session
//! default plus per-tool overrides.
//!
//! # Wire spelling (the spec: "not shown")
//!
//! The agent block carries it beside `tools` (an inline agent, or a stored catalog
//! configuration):
//!
//! ```json
//! "tool_response_policy": {
//!   "default": {"behavior": "non_blocking", "scheduling": "when_idle"},
//!   "overrides": {"lookup_order": {"behavior": "blocking"}}
//! }
//! ```
//!
//! Every problem is a tool-config problem (422 `invalid_tool_config`, listed with the tool
//! problems): a value outside the vocabulary, an unknown field, a `scheduling` on a `blocking`
//! policy (a blocking result is always answered at once, so the setting could never apply), and
//! an override naming no tool of the agent. Non-blocking results without a `scheduling` default
//! to `when_idle` (spec).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ToolSpec;

/// Whether the model waits for a tool's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolBehavior {
    /// The model waits for the result before it continues (the default).
    #[default]
    Blocking,
    /// The model keeps talking; the result arrives per [`ToolScheduling`].
    NonBlocking,
}

/// When a non-blocking result reaches the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolScheduling {
    /// After the current turn (the default of non-blocking results).
    WhenIdle,
    /// Absorbed into context; nothing is said.
    Silent,
    /// Spoken now, cutting current speech.
    Interrupt,
}

/// One policy: the behaviour and, for non-blocking tools, the scheduling of results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolResponseRule {
    /// Blocking or not.
    pub behavior: ToolBehavior,
    /// Scheduling of non-blocking results; `None` means `when_idle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<ToolScheduling>,
}

/// The session default plus per-tool overrides (keyed by the tool's name: a client tool's
/// `name`, a server tool's kind).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolResponsePolicy {
    /// Applies to every tool without an override.
    pub default: ToolResponseRule,
    /// By tool name.
    #[serde(default)]
    pub overrides: BTreeMap<String, ToolResponseRule>,
}

impl ToolResponsePolicy {
    /// The rule of `tool`.
    pub fn of(&self, tool: &str) -> ToolResponseRule {
        self.overrides.get(tool).copied().unwrap_or(self.default)
    }

    /// The policy with only the overrides of tools in `tools` (a catalog start replaces the
    /// stored tools; an override of a tool the session does not have would never apply).
    pub fn restricted_to(mut self, tools: &[ToolSpec]) -> ToolResponsePolicy {
        self.overrides.retain(|name, _| tools.iter().any(|tool| tool.name() == name));
        self
    }
}

/// Parses `tool_response_policy` (null means none). Problems go to `problems` (422
/// `invalid_tool_config`); `tools` are the agent's tools, which overrides must name.
pub fn parse_tool_response_policy(
    value: &Value,
    tools: &[ToolSpec],
    problems: &mut Vec<String>,
) -> Option<ToolResponsePolicy> {
    let map = match value {
        Value::Null => return None,
        Value::Object(map) => map,
        _ => {
            problems.push("tool_response_policy: must be an object with `default` and `overrides`".to_owned());
            return None;
        }
    };
    let before = problems.len();
    let mut policy = ToolResponsePolicy::default();
    for field in map.keys().filter(|field| !matches!(field.as_str(), "default" | "overrides")) {
        problems.push(format!("tool_response_policy: field `{}` is not allowed", super::show_key(field)));
    }
    if let Some(rule) = map.get("default").filter(|value| !value.is_null()) {
        policy.default = parse_rule(rule, "tool_response_policy.default", problems).unwrap_or_default();
    }
    match map.get("overrides") {
        None | Some(Value::Null) => {}
        Some(Value::Object(overrides)) => {
            for (name, rule) in overrides {
                // Names are payload: shown only when they look like a tool name.
                let label = format!("tool_response_policy.overrides.{}", super::show_key(name));
                if !tools.iter().any(|tool| tool.name() == name) {
                    problems.push(format!("{label}: names no tool of this agent"));
                    continue;
                }
                if let Some(rule) = parse_rule(rule, &label, problems) {
                    policy.overrides.insert(name.clone(), rule);
                }
            }
        }
        Some(_) => problems.push("tool_response_policy.overrides: must be an object keyed by tool name".to_owned()),
    }
    (problems.len() == before).then_some(policy)
}

fn parse_rule(value: &Value, label: &str, problems: &mut Vec<String>) -> Option<ToolResponseRule> {
    let Value::Object(map) = value else {
        problems.push(format!("{label}: must be an object with `behavior` and optional `scheduling`"));
        return None;
    };
    let before = problems.len();
    for field in map.keys().filter(|field| !matches!(field.as_str(), "behavior" | "scheduling")) {
        problems.push(format!("{label}: field `{}` is not allowed", super::show_key(field)));
    }
    let behavior = match map.get("behavior").and_then(Value::as_str) {
        Some("blocking") => Some(ToolBehavior::Blocking),
        Some("non_blocking") => Some(ToolBehavior::NonBlocking),
        _ => {
            problems.push(format!("{label}: `behavior` must be `blocking` or `non_blocking`"));
            None
        }
    };
    let scheduling = scheduling(map, label, problems);
    if behavior == Some(ToolBehavior::Blocking) && scheduling.is_some() {
        problems.push(format!("{label}: `scheduling` applies only to `non_blocking` tools"));
    }
    match behavior {
        Some(behavior) if problems.len() == before => Some(ToolResponseRule { behavior, scheduling }),
        _ => None,
    }
}

fn scheduling(map: &Map<String, Value>, label: &str, problems: &mut Vec<String>) -> Option<ToolScheduling> {
    match map.get("scheduling") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text == "when_idle" => Some(ToolScheduling::WhenIdle),
        Some(Value::String(text)) if text == "silent" => Some(ToolScheduling::Silent),
        Some(Value::String(text)) if text == "interrupt" => Some(ToolScheduling::Interrupt),
        Some(_) => {
            problems.push(format!("{label}: `scheduling` must be `when_idle`, `silent` or `interrupt`"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::{ClientTool, ServerTool};

    fn tools() -> Vec<ToolSpec> {
        vec![
            ToolSpec::Client(ClientTool {
                name: "lookup_order".into(),
                description: "Find an order.".into(),
                parameters: json!({"type": "object"}),
            }),
            ToolSpec::Server(ServerTool::WebSearch),
        ]
    }

    #[test]
    fn a_default_and_overrides_parse() {
        let mut problems = Vec::new();
        let value = json!({
            "default": {"behavior": "non_blocking", "scheduling": "silent"},
            "overrides": {"lookup_order": {"behavior": "blocking"}, "web_search": {"behavior": "non_blocking"}}
        });
        let policy = parse_tool_response_policy(&value, &tools(), &mut problems).expect("valid");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(policy.of("lookup_order"), ToolResponseRule { behavior: ToolBehavior::Blocking, scheduling: None });
        assert_eq!(policy.of("web_search").behavior, ToolBehavior::NonBlocking);
        assert_eq!(policy.of("other").scheduling, Some(ToolScheduling::Silent));
        assert_eq!(serde_json::to_value(&policy).expect("serializes")["default"]["behavior"], "non_blocking");
        assert_eq!(parse_tool_response_policy(&Value::Null, &tools(), &mut problems), None);
    }

    #[test]
    fn every_problem_is_listed() {
        let mut problems = Vec::new();
        let value = json!({
            "default": {"behavior": "sometimes"},
            "overrides": {"nope_tool": {"behavior": "blocking"}, "lookup_order": {"behavior": "blocking", "scheduling": "silent"},
                "web_search": {"behavior": "non_blocking", "scheduling": "later", "extra": 1}},
            "bogus": true
        });
        assert_eq!(parse_tool_response_policy(&value, &tools(), &mut problems), None);
        assert_eq!(problems.len(), 6, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("names no tool")));
        assert!(problems.iter().any(|p| p.contains("applies only to `non_blocking`")));
        let mut problems = Vec::new();
        assert_eq!(parse_tool_response_policy(&json!([1]), &tools(), &mut problems), None);
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn restricting_drops_overrides_of_absent_tools() {
        let mut policy = ToolResponsePolicy::default();
        policy.overrides.insert("gone".into(), ToolResponseRule::default());
        policy.overrides.insert("web_search".into(), ToolResponseRule::default());
        let kept = policy.restricted_to(&tools());
        assert_eq!(kept.overrides.keys().collect::<Vec<_>>(), ["web_search"]);
    }
}
