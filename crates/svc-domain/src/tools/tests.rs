use super::*;
use crate::limits::HOOKS_MAX;
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
    assert_eq!(tool_names(&tools), ["get_weather", "svc_sdk_x_y", "no_args", "web_search", "speaker_log", "end_call"]);
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
        (json!({"kind": "client", "name": 7, "description": "d"}), vec!["tools[0]: `name` must be a string".into()]),
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
        (client_with_parameters(json!("object")), vec!["tools[0]: `parameters` must be a JSON Schema object".into()]),
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
    let (_, issues, problems) =
        run_tools(json!([{"kind": "telepathy"}, 5, {"name": "x"}, {"kind": 3}, {"kind": "server"}]), INLINE_TOOLS_MAX);
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
    // A workspace that gated web_search (and detect_objects, which is not configured anyway) off.
    let gated = available.gated_for_workspace(&[ServerTool::WebSearch, ServerTool::DetectObjects]);
    assert!(!gated.allows(ServerTool::WebSearch) && gated.allows(ServerTool::EndCall));
    let (still, refused) = apply_availability(kept.clone(), &gated);
    assert_eq!(tool_names(&still), ["lookup", "end_call"]);
    assert_eq!(
        serde_json::to_value(&refused).expect("json"),
        json!([{"name": "web_search", "reason": "gated_off: web_search is gated off for this workspace"}])
    );
    assert_eq!(serde_json::to_value(&gated).expect("json"), json!(["web_search", "end_call"]), "not a setting");
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
        // The spec makes both optional: the model then checks the user is still there.
        hook(json!({"action": {"type": "say"}})),
        hook(json!({"action": {"type": "say", "text": null, "prompt": null}})),
    ]));
    assert!(issues.is_empty(), "{issues:?}");
    assert_eq!(hooks.len(), 7);
    for bare in &hooks[5..] {
        assert_eq!(bare.action, HookAction::Say { text: None, prompt: None });
        assert_eq!(serde_json::to_value(&bare.action).expect("json"), json!({"type": "say"}));
    }
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
    assert_eq!(serde_json::to_value(&hooks[2].action).expect("json"), json!({"type": "end_call", "farewell": "Bye."}));
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
        (json!({"action": {"type": "say", "text": "t".repeat(4097)}}), "string_too_long", json!(["action", "text"])),
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
            [json!(["body", "agent", "hooks", 0, "timeout_seconds"]), json!(["body", "agent", "hooks", 0, "action"])]
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
