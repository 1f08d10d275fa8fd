use super::*;
use serde_json::Value;
use svc_wire::{ErrorCode, Loc};

use crate::parse::{Fields, Issues};
use crate::parse::{body, key};
use serde_json::json;

fn model_loc() -> Loc {
    key(&key(&body(), "agent"), "model")
}

/// Parses `value` at `["body","agent","model"]`, asserting it is clean.
fn parsed(value: Value) -> Option<ModelChoice> {
    let mut issues = Issues::default();
    let choice = parse_model(&value, &model_loc(), &mut issues);
    assert!(issues.is_empty(), "{value}: {:?}", issues.into_vec());
    choice
}

/// The issues of `value`, as (loc, kind).
fn problems(value: Value) -> Vec<(Value, String)> {
    let mut issues = Issues::default();
    let choice = parse_model(&value, &model_loc(), &mut issues);
    let issues = issues.into_vec();
    assert_eq!(choice.is_none(), !issues.is_empty() || value.is_null(), "{value}");
    issues.into_iter().map(|i| (serde_json::to_value(&i.loc).expect("loc"), i.kind)).collect()
}

/// Resolves against the embedded catalog; `Value::Null` means the field is absent.
fn resolve(model: Value, options: Value) -> Result<ResolvedModel, ModelError> {
    let model = parsed(model);
    let options = parsed(options);
    resolve_model(ModelCatalog::embedded(), model.as_ref(), options.as_ref())
}

fn model_of(model: Value, options: Value) -> String {
    resolve(model.clone(), options.clone()).unwrap_or_else(|e| panic!("{model} / {options}: {e}")).model_id
}

#[test]
fn embedded_catalog_validates() {
    let catalog = ModelCatalog::from_toml_str(DEFAULT_CATALOG_TOML).expect("embedded catalog is valid");
    assert_eq!(&catalog, ModelCatalog::embedded());
    assert_eq!(catalog.default_alias(), Provider::ProviderA);
    let aliases: Vec<Provider> = catalog.aliases().map(|(alias, _)| alias).collect();
    assert_eq!(aliases, Provider::ALL);
    for (alias, entry) in catalog.aliases() {
        assert_eq!(catalog.model(&entry.default_model).map(|m| m.alias), Some(alias));
    }
}

#[test]
fn every_alias_resolves_to_its_default() {
    let table = [
        ("provider_a", "gemini", "gemini-3.8-live", "Puck", None),
        ("provider_b", "openai", "gpt-realtime-2.1", "marin", None),
        ("provider_b_mini", "openai", "gpt-realtime-2.1-mini", "marin", None),
        ("provider_b_live", "openai_live", "gpt-live-1", "marin", Some(Delegation::Responses)),
        ("provider_c", "xai", "grok-voice-3.0", "eve", None),
    ];
    for (alias, family, model, voice, delegation) in table {
        for request in [json!(alias), json!({"provider": alias})] {
            let resolved = resolve(request.clone(), Value::Null).expect(alias);
            assert_eq!(resolved.alias.as_str(), alias, "{request}");
            assert_eq!(
                (resolved.family.as_str(), resolved.model_id.as_str(), resolved.default_voice.as_str()),
                (family, model, voice),
                "{request}"
            );
            assert_eq!(resolved.delegation, delegation, "{request}");
        }
    }
    let default = resolve(Value::Null, Value::Null).expect("default");
    assert_eq!((default.alias, default.model_id.as_str()), (Provider::ProviderA, "gemini-3.8-live"));
    assert_eq!(default.knobs.turn_detection(), Some(TurnDetection::SvcVad));
}

#[test]
fn concrete_ids_select_their_model() {
    for entry in ModelCatalog::embedded().models() {
        let resolved = resolve(json!(entry.id), Value::Null).expect(&entry.id);
        assert_eq!((resolved.alias, resolved.model_id.as_str()), (entry.alias, entry.id.as_str()));
        assert_eq!(resolved.deprecated, entry.deprecated, "{}", entry.id);
        let block =
            resolve(json!({"provider": entry.alias.as_str(), "model_id": entry.id}), Value::Null).expect(&entry.id);
        assert_eq!(block.model_id, entry.id);
    }
    let live = resolve(json!("gpt-live-1.1"), Value::Null).expect("live");
    assert!(live.speech_to_speech_only && !live.background_tools);
    let legacy = resolve(json!("gemini-3.1-flash-live-preview"), Value::Null).expect("legacy");
    assert!(legacy.deprecated && !legacy.background_tools && !legacy.speech_to_speech_only);
}

#[test]
fn unavailable() {
    let table = [
        (json!("no-such-model"), Value::Null),
        (json!(""), Value::Null),
        (json!("Provider_A"), Value::Null),
        (json!({"provider": "provider_a", "model_id": "no-such-model"}), Value::Null),
        (json!({"provider": "provider_a", "model_id": "provider_a"}), Value::Null),
        (json!({"provider": "provider_a", "model_id": "gpt-realtime-2.1"}), Value::Null),
        (json!({"provider": "provider_b", "model_id": "gpt-realtime-2.1-mini"}), Value::Null),
        (json!({"provider": "provider_b_live", "model_id": "gpt-realtime-2"}), Value::Null),
        (json!({"provider": "provider_c", "model_id": "gemini-3.8-live"}), Value::Null),
        // Folding: alias vs block, id vs block, string vs string, id vs model_id.
        (json!("provider_b"), json!({"provider": "provider_a"})),
        (json!({"provider": "provider_a"}), json!("provider_b")),
        (json!("gpt-live-1"), json!({"provider": "provider_b"})),
        (json!({"provider": "provider_c"}), json!("gemini-3.8-live")),
        (json!("provider_a"), json!("provider_c")),
        (json!("gpt-realtime-2"), json!("gpt-realtime-2.1")),
        (json!("gpt-realtime-2"), json!({"provider": "provider_b", "model_id": "gpt-realtime-2.1"})),
        (json!("no-such-model"), json!({"provider": "provider_a"})),
        (json!({"provider": "provider_a"}), json!({"provider": "provider_a"})),
    ];
    for (model, options) in table {
        match resolve(model.clone(), options.clone()) {
            Err(error @ ModelError::Unavailable(_)) => {
                assert_eq!(error.code(), ErrorCode::ModelUnavailable);
            }
            other => panic!("{model} / {options}: {other:?}"),
        }
    }
    let error = resolve(json!("my secret prompt text"), Value::Null).expect_err("unknown");
    assert!(!error.message().contains("secret"), "{error}");
    let error = resolve(json!({"provider": "provider_a", "model_id": "gpt-realtime-2.1"}), Value::Null)
        .expect_err("cross-provider");
    assert_eq!(error.message(), "Model gpt-realtime-2.1 belongs to provider_b, not provider_a");
}

#[test]
fn model_options_fold_into_model() {
    let extended = "gemini-3.8-live-extended-thinking";
    let block = json!({"provider": "provider_a", "thinking_level": "low"});
    for (model, options) in [(json!(extended), block.clone()), (block, json!(extended))] {
        let resolved = resolve(model, options).expect("fold");
        assert_eq!(resolved.model_id, extended);
        let Knobs::ProviderA(knobs) = resolved.knobs else { panic!("provider_a knobs") };
        assert_eq!(knobs.thinking_level, Some(ThinkingLevel::Low));
    }
    // An alias string must match the block; the block's own model_id then wins.
    assert_eq!(model_of(json!("provider_a"), json!({"provider": "provider_a", "model_id": extended})), extended);
    assert_eq!(model_of(json!({"provider": "provider_b"}), json!("provider_b")), "gpt-realtime-2.1");
    // Same id on both sides is fine; options alone act as model.
    assert_eq!(
        model_of(json!("gpt-realtime-2"), json!({"provider": "provider_b", "model_id": "gpt-realtime-2"})),
        "gpt-realtime-2"
    );
    assert_eq!(model_of(Value::Null, json!({"provider": "provider_c"})), "grok-voice-3.0");
    assert_eq!(model_of(Value::Null, json!("gpt-live-1.1")), "gpt-live-1.1");
    assert_eq!(model_of(json!("provider_b"), json!("gpt-realtime-1.5")), "gpt-realtime-1.5");
    // The folded block's knobs apply.
    let resolved = resolve(json!("gpt-realtime-2"), json!({"provider": "provider_b", "turn_detection": "server_vad"}))
        .expect("fold");
    assert_eq!(resolved.knobs.turn_detection(), Some(TurnDetection::ServerVad));
}

#[test]
fn both_blocks_is_a_validation_error_at_model_options() {
    let a = parsed(json!({"provider": "provider_a"}));
    let name = parsed(json!("provider_a"));
    assert!(both_blocks(a.as_ref(), a.as_ref()));
    assert!(!both_blocks(a.as_ref(), name.as_ref()) && !both_blocks(name.as_ref(), a.as_ref()));
    assert!(!both_blocks(a.as_ref(), None) && !both_blocks(None, None));

    let agent = json!({"model": {"provider": "provider_a"}, "model_options": {"provider": "provider_a"}});
    let mut issues = Issues::default();
    let mut fields = Fields::of(&agent, &key(&body(), "agent"), &mut issues).expect("object");
    let read = parse_model_fields(&mut fields, &mut issues);
    fields.deny_unknown(&mut issues);
    assert!(read.model.is_some() && read.model_options.is_some());
    let issues = issues.into_vec();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].kind, "model_options_conflict");
    assert_eq!(serde_json::to_value(&issues[0].loc).expect("loc"), json!(["body", "agent", "model_options"]));
}

#[test]
fn knob_mismatch_rules() {
    let mismatches = [
        // provider_a: server_vad knobs with svc_vad, defaulted or explicit.
        json!({"provider": "provider_a", "silence_duration_ms": 500}),
        json!({"provider": "provider_a", "prefix_padding_ms": 100}),
        json!({"provider": "provider_a", "end_of_speech_sensitivity": "low"}),
        json!({"provider": "provider_a", "turn_detection": "svc_vad", "silence_duration_ms": 500}),
        json!({"provider": "provider_a", "turn_detection": "svc_vad", "prefix_padding_ms": 100}),
        json!({"provider": "provider_a", "turn_detection": "svc_vad", "end_of_speech_sensitivity": "high"}),
        // provider_a: the svc_vad object with server_vad.
        json!({"provider": "provider_a", "turn_detection": "server_vad", "svc_vad": {"pause_ms": 300}}),
        json!({"provider": "provider_a", "turn_detection": "server_vad", "svc_vad": {}}),
        // provider_b: server_vad knobs with semantic_vad (defaulted or explicit), eagerness with server_vad.
        json!({"provider": "provider_b", "silence_duration_ms": 500}),
        json!({"provider": "provider_b", "turn_detection": "semantic_vad", "silence_duration_ms": 500}),
        json!({"provider": "provider_b", "turn_detection": "semantic_vad", "prefix_padding_ms": 300}),
        json!({"provider": "provider_b", "turn_detection": "server_vad", "eagerness": "low"}),
        json!({"provider": "provider_b", "turn_detection": "server_vad", "eagerness": "auto", "silence_duration_ms": 1}),
    ];
    for block in mismatches {
        match resolve(block.clone(), Value::Null) {
            Err(error @ ModelError::KnobMismatch(_)) => {
                assert_eq!(error.code(), ErrorCode::TurnDetectionKnobMismatch)
            }
            other => panic!("{block}: {other:?}"),
        }
    }
    let accepted = [
        (json!({"provider": "provider_a", "svc_vad": {"pause_ms": 300}}), TurnDetection::SvcVad),
        (json!({"provider": "provider_a", "turn_detection": "svc_vad", "svc_vad": {}}), TurnDetection::SvcVad),
        (
            json!({"provider": "provider_a", "turn_detection": "server_vad", "silence_duration_ms": 500,
                   "prefix_padding_ms": 20, "end_of_speech_sensitivity": "low"}),
            TurnDetection::ServerVad,
        ),
        (json!({"provider": "provider_b", "eagerness": "high"}), TurnDetection::SemanticVad),
        (
            json!({"provider": "provider_b", "turn_detection": "semantic_vad", "eagerness": "low"}),
            TurnDetection::SemanticVad,
        ),
        (
            json!({"provider": "provider_b", "turn_detection": "server_vad", "silence_duration_ms": 500, "prefix_padding_ms": 300}),
            TurnDetection::ServerVad,
        ),
    ];
    for (block, detector) in accepted {
        let resolved = resolve(block.clone(), Value::Null).unwrap_or_else(|e| panic!("{block}: {e}"));
        assert_eq!(resolved.knobs.turn_detection(), Some(detector), "{block}");
    }
    let error = resolve(json!({"provider": "provider_a", "silence_duration_ms": 500}), Value::Null).expect_err("x");
    assert!(error.message().contains("silence_duration_ms") && error.message().contains("default"), "{error}");
}

#[test]
fn turn_detection_unsupported() {
    for (provider, detector, supported) in [
        ("provider_a", "svc_vad", true),
        ("provider_a", "server_vad", true),
        ("provider_a", "semantic_vad", false),
        ("provider_b", "svc_vad", false),
        ("provider_b", "server_vad", true),
        ("provider_b", "semantic_vad", true),
        ("provider_c", "svc_vad", false),
        ("provider_c", "server_vad", true),
        ("provider_c", "semantic_vad", false),
    ] {
        let block = json!({"provider": provider, "turn_detection": detector});
        match (resolve(block.clone(), Value::Null), supported) {
            (Ok(resolved), true) => {
                assert_eq!(resolved.knobs.turn_detection().map(TurnDetection::as_str), Some(detector))
            }
            (Err(error @ ModelError::TurnDetectionUnsupported(_)), false) => {
                assert_eq!(error.code(), ErrorCode::TurnDetectionUnsupported)
            }
            (other, _) => panic!("{block}: {other:?}"),
        }
    }
    // Unsupported wins over a knob mismatch.
    let block = json!({"provider": "provider_b", "turn_detection": "svc_vad", "eagerness": "low"});
    assert!(matches!(resolve(block, Value::Null), Err(ModelError::TurnDetectionUnsupported(_))));
}

#[test]
fn thinking_level_per_model() {
    let table = [
        ("gemini-3.8-live-extended-thinking", "low", true),
        ("gemini-3.8-live-extended-thinking", "high", true),
        ("gemini-3.8-live-extended-thinking", "minimal", false),
        ("gemini-3.1-flash-live-preview", "minimal", true),
        ("gemini-3.8-live", "low", false),
        ("gemini-2.5-flash-native-audio-preview-12-2025", "high", false),
    ];
    for (model, level, accepted) in table {
        let block = json!({"provider": "provider_a", "model_id": model, "thinking_level": level});
        match (resolve(block.clone(), Value::Null), accepted) {
            (Ok(_), true) => {}
            (Err(error @ ModelError::ThinkingLevelUnsupported(_)), false) => {
                assert_eq!(error.code(), ErrorCode::ThinkingLevelUnsupported)
            }
            (other, _) => panic!("{block}: {other:?}"),
        }
    }
    // The default alias model takes none; leaving it unset is fine.
    assert!(matches!(
        resolve(json!({"provider": "provider_a", "thinking_level": "low"}), Value::Null),
        Err(ModelError::ThinkingLevelUnsupported(_))
    ));
    assert!(resolve(json!({"provider": "provider_a", "include_thoughts": true}), Value::Null).is_ok());
}

#[test]
fn bounds_and_shapes_report_the_exact_loc() {
    let ok = [
        json!({"provider": "provider_a", "svc_vad": {"pause_ms": 0, "prefix_ms": 0, "max_hold_ms": 0}}),
        json!({"provider": "provider_a", "svc_vad": {"pause_ms": 5000, "prefix_ms": 5000, "max_hold_ms": 5000}}),
        json!({"provider": "provider_a", "temperature": 0, "max_output_tokens": 1}),
        json!({"provider": "provider_a", "temperature": 2.0, "max_output_tokens": 65536, "svc_vad": null}),
        json!({"provider": "provider_c", "speed": 0.7}),
        json!({"provider": "provider_c", "speed": 1.5, "idle_timeout_ms": 1000}),
        json!({"provider": "provider_c", "speed": 1, "idle_timeout_ms": 600000, "reasoning_effort": "none"}),
        json!({"provider": "provider_b_live", "max_output_tokens": 16}),
        json!({"provider": "provider_b_live", "max_output_tokens": 32768}),
        json!({"provider": "provider_b", "silence_duration_ms": 0, "prefix_padding_ms": 10000, "turn_detection": "server_vad"}),
        json!({"provider": "provider_b_mini", "model_id": null}),
    ];
    for value in ok {
        assert!(problems(value.clone()).is_empty(), "{value}");
    }
    let at = |path: &[&str]| {
        let mut loc = vec![json!("body"), json!("agent"), json!("model")];
        loc.extend(path.iter().map(|segment| json!(segment)));
        Value::Array(loc)
    };
    let bad = [
        (json!({"provider": "provider_a", "svc_vad": {"pause_ms": -1}}), at(&["svc_vad", "pause_ms"]), "range"),
        (json!({"provider": "provider_a", "svc_vad": {"pause_ms": 5001}}), at(&["svc_vad", "pause_ms"]), "range"),
        (json!({"provider": "provider_a", "svc_vad": {"prefix_ms": -1}}), at(&["svc_vad", "prefix_ms"]), "range"),
        (json!({"provider": "provider_a", "svc_vad": {"prefix_ms": 5001}}), at(&["svc_vad", "prefix_ms"]), "range"),
        (json!({"provider": "provider_a", "svc_vad": {"max_hold_ms": -1}}), at(&["svc_vad", "max_hold_ms"]), "range"),
        (json!({"provider": "provider_a", "svc_vad": {"max_hold_ms": 5001}}), at(&["svc_vad", "max_hold_ms"]), "range"),
        (
            json!({"provider": "provider_a", "svc_vad": {"max_hold_ms": 1.5}}),
            at(&["svc_vad", "max_hold_ms"]),
            "int_type",
        ),
        (json!({"provider": "provider_a", "svc_vad": {"bogus": 1}}), at(&["svc_vad", "bogus"]), "extra_forbidden"),
        (json!({"provider": "provider_a", "svc_vad": 300}), at(&["svc_vad"]), "object_type"),
        (json!({"provider": "provider_c", "speed": 0.69}), at(&["speed"]), "range"),
        (json!({"provider": "provider_c", "speed": 1.51}), at(&["speed"]), "range"),
        (json!({"provider": "provider_c", "speed": "fast"}), at(&["speed"]), "float_type"),
        (json!({"provider": "provider_c", "idle_timeout_ms": 999}), at(&["idle_timeout_ms"]), "range"),
        (json!({"provider": "provider_c", "idle_timeout_ms": 600001}), at(&["idle_timeout_ms"]), "range"),
        (json!({"provider": "provider_c", "reasoning_effort": "low"}), at(&["reasoning_effort"]), "enum"),
        (json!({"provider": "provider_b_live", "max_output_tokens": 15}), at(&["max_output_tokens"]), "range"),
        (json!({"provider": "provider_b_live", "max_output_tokens": 32769}), at(&["max_output_tokens"]), "range"),
        (json!({"provider": "provider_b_live", "delegation": "server"}), at(&["delegation"]), "enum"),
        (json!({"provider": "provider_b_live", "reasoning_effort": "xhigh"}), at(&["reasoning_effort"]), "enum"),
        (json!({"provider": "provider_b_live", "verbosity": 1}), at(&["verbosity"]), "enum"),
        (json!({"provider": "provider_b_live", "tool_choice": "any"}), at(&["tool_choice"]), "enum"),
        (json!({"provider": "provider_b_live", "service_tier": "ultrafast"}), at(&["service_tier"]), "enum"),
        (
            json!({"provider": "provider_b_live", "parallel_tool_calls": "yes"}),
            at(&["parallel_tool_calls"]),
            "bool_type",
        ),
        (json!({"provider": "provider_b_live", "responses_model": ""}), at(&["responses_model"]), "string_too_short"),
        (
            json!({"provider": "provider_b_live", "turn_detection": "server_vad"}),
            at(&["turn_detection"]),
            "extra_forbidden",
        ),
        (
            json!({"provider": "provider_b_mini", "turn_detection": "server_vad"}),
            at(&["turn_detection"]),
            "extra_forbidden",
        ),
        (json!({"provider": "provider_b_mini", "eagerness": "low"}), at(&["eagerness"]), "extra_forbidden"),
        (json!({"provider": "provider_b", "thinking_level": "low"}), at(&["thinking_level"]), "extra_forbidden"),
        (json!({"provider": "provider_c", "eagerness": "low"}), at(&["eagerness"]), "extra_forbidden"),
        (json!({"provider": "provider_b", "eagerness": "fast"}), at(&["eagerness"]), "enum"),
        (json!({"provider": "provider_b", "turn_detection": "manual"}), at(&["turn_detection"]), "enum"),
        (json!({"provider": "provider_b", "silence_duration_ms": 10001}), at(&["silence_duration_ms"]), "range"),
        (json!({"provider": "provider_a", "prefix_padding_ms": -1}), at(&["prefix_padding_ms"]), "range"),
        (
            json!({"provider": "provider_a", "end_of_speech_sensitivity": "medium"}),
            at(&["end_of_speech_sensitivity"]),
            "enum",
        ),
        (json!({"provider": "provider_a", "thinking_level": "xhigh"}), at(&["thinking_level"]), "enum"),
        (json!({"provider": "provider_a", "temperature": 2.01}), at(&["temperature"]), "range"),
        (json!({"provider": "provider_a", "temperature": -0.1}), at(&["temperature"]), "range"),
        (json!({"provider": "provider_a", "temperature": true}), at(&["temperature"]), "float_type"),
        (json!({"provider": "provider_a", "max_output_tokens": 0}), at(&["max_output_tokens"]), "range"),
        (json!({"provider": "provider_a", "max_output_tokens": 65537}), at(&["max_output_tokens"]), "range"),
        (json!({"provider": "provider_a", "include_thoughts": "yes"}), at(&["include_thoughts"]), "bool_type"),
        (json!({"provider": "provider_a", "model_id": 3}), at(&["model_id"]), "string_type"),
        (json!({"provider": "provider_d"}), at(&["provider"]), "union_tag_invalid"),
        (json!({"provider": 1}), at(&["provider"]), "union_tag_invalid"),
        (json!({"model_id": "gemini-3.8-live"}), at(&["provider"]), "missing"),
        (json!(42), at(&[]), "model_type"),
        (json!(["provider_a"]), at(&[]), "model_type"),
        (json!(true), at(&[]), "model_type"),
    ];
    for (value, loc, kind) in bad {
        assert_eq!(problems(value.clone()), vec![(loc, kind.to_owned())], "{value}");
    }
    // Several problems in one block are all reported; messages never echo values.
    let mut issues = Issues::default();
    let value = json!({"provider": "provider_c", "speed": 9, "turn_detection": "secret-value", "x": "private"});
    assert!(parse_model(&value, &model_loc(), &mut issues).is_none());
    let issues = issues.into_vec();
    assert_eq!(issues.len(), 3);
    let rendered = serde_json::to_string(&issues).expect("json");
    assert!(!rendered.contains("secret-value") && !rendered.contains("private"), "{rendered}");
    // Null is absent; strings are names.
    assert_eq!(problems(Value::Null), vec![]);
    assert_eq!(parsed(Value::Null), None);
    assert_eq!(parsed(json!("anything")), Some(ModelChoice::Name("anything".to_owned())));
}

#[test]
fn provider_b_live_delegation() {
    let resolved =
        resolve(json!({"provider": "provider_b_live", "tool_choice": "required"}), Value::Null).expect("responses");
    assert_eq!(resolved.delegation, Some(Delegation::Responses));
    assert_eq!(resolved.knobs.turn_detection(), None);
    let Knobs::ProviderBLive(knobs) = &resolved.knobs else { panic!("live knobs") };
    assert_eq!(
        (knobs.responses_model.as_deref(), knobs.tool_choice),
        (Some("gpt-5.6-luna"), Some(ToolChoice::Required))
    );

    for (delegation, expected) in [("client", Delegation::Client), ("svc", Delegation::Svc)] {
        let block = json!({"provider": "provider_b_live", "delegation": delegation,
                           "responses_model": "gpt-5.6-terra", "responses_instructions": "x"});
        let resolved = resolve(block, Value::Null).expect(delegation);
        assert_eq!(resolved.delegation, Some(expected));
        let Knobs::ProviderBLive(knobs) = &resolved.knobs else { panic!("live knobs") };
        assert_eq!((knobs.responses_model.as_deref(), knobs.responses_instructions.as_deref()), (None, None));
    }
    let named = resolve(json!({"provider": "provider_b_live", "responses_model": "gpt-5.6-terra"}), Value::Null)
        .expect("named");
    let Knobs::ProviderBLive(knobs) = &named.knobs else { panic!("live knobs") };
    assert_eq!(knobs.responses_model.as_deref(), Some("gpt-5.6-terra"));
    // Other providers carry no delegation.
    assert_eq!(resolve(json!("provider_b"), Value::Null).expect("b").delegation, None);
}

#[test]
fn resolved_config_serializes_for_the_runtime() {
    let resolved = resolve(
        json!({"provider": "provider_b", "turn_detection": "server_vad", "silence_duration_ms": 400}),
        Value::Null,
    )
    .expect("b");
    assert_eq!(
        serde_json::to_value(&resolved).expect("json"),
        json!({
            "alias": "provider_b", "family": "openai", "model_id": "gpt-realtime-2.1",
            "speech_to_speech_only": false, "background_tools": true, "default_voice": "marin",
            "default_responses_model": null, "session_cap_seconds": 3600,
            "deprecated": false, "delegation": null,
            "knobs": {"provider": "provider_b",
                      "turn_detection": {"type": "server_vad", "silence_duration_ms": 400, "prefix_padding_ms": null}}
        })
    );
    let mini = resolve(json!("provider_b_mini"), Value::Null).expect("mini");
    assert_eq!(
        serde_json::to_value(&mini.knobs).expect("json"),
        json!({"provider": "provider_b_mini", "turn_detection": {"type": "semantic_vad", "eagerness": "auto"}})
    );
    let a = resolve(json!({"provider": "provider_a", "svc_vad": {"pause_ms": 700}}), Value::Null).expect("a");
    assert_eq!(
        serde_json::to_value(&a.knobs).expect("json")["turn_detection"],
        json!({"type": "svc_vad", "pause_ms": 700, "prefix_ms": null, "max_hold_ms": null})
    );
    let c = resolve(json!({"provider": "provider_c", "speed": 1.2}), Value::Null).expect("c");
    let Knobs::ProviderC(knobs) = c.knobs else { panic!("c knobs") };
    assert_eq!((knobs.reasoning_effort, knobs.speed), (ProviderCReasoningEffort::High, Some(1.2)));
}

const SMALL: &str = r#"
        default_alias = "provider_b"
        [aliases.provider_b]
        family = "openai"
        default_model = "m-b"
        default_voice = "marin"
        [aliases.provider_c]
        family = "xai"
        default_model = "m-c"
        default_voice = "eve"
        [[models]]
        id = "m-b"
        alias = "provider_b"
        speech_to_speech_only = false
        background_tools = true
        [[models]]
        id = "m-c"
        alias = "provider_c"
        speech_to_speech_only = false
        background_tools = true
"#;

#[test]
fn catalog_files_are_validated() {
    let small = ModelCatalog::from_toml_str(SMALL).expect("valid");
    // A catalog without an alias makes that alias and its ids unavailable.
    let missing = resolve_model(&small, Some(&ModelChoice::Name("provider_a".to_owned())), None);
    assert!(matches!(missing, Err(ModelError::Unavailable(_))), "{missing:?}");
    assert_eq!(resolve_model(&small, None, None).map(|r| r.model_id), Ok("m-b".to_owned()));

    let broken = [
        (SMALL.replace("default_model = \"m-c\"", "default_model = \"m-b\""), "belongs to provider_b"),
        (SMALL.replace("default_model = \"m-c\"", "default_model = \"m-x\""), "not listed"),
        (SMALL.replace("id = \"m-c\"", "id = \"m-b\""), "duplicate model id"),
        (SMALL.replace("default_alias = \"provider_b\"", "default_alias = \"provider_a\""), "default_alias"),
        (SMALL.replace("default_alias = \"provider_b\"", "default_alias = \"provider_z\""), "expected"),
        (SMALL.replace("id = \"m-c\"", "id = \"provider_c\""), "collides"),
        (
            SMALL.replace(
                "background_tools = true\n        [[models]]",
                "background_tools = true\n        thinking_levels = [\"low\"]\n        [[models]]",
            ),
            "thinking_levels",
        ),
        (
            SMALL
                .replace("default_voice = \"eve\"", "default_voice = \"eve\"\n        default_responses_model = \"x\""),
            "provider_b_live only",
        ),
        (SMALL.replace("family = \"xai\"", "family = \"xai\"\n        colour = \"blue\""), "unknown field"),
        (
            SMALL.replace(
                "speech_to_speech_only = false\n        background_tools = true\n    ",
                "speech_to_speech_only = false\n    ",
            ),
            "background_tools",
        ),
    ];
    for (text, expected) in broken {
        let error = ModelCatalog::from_toml_str(&text).expect_err(expected);
        assert!(error.contains(expected), "{expected}: {error}");
    }
}

/// The provider table is complete: every row is its variant's, spells the alias the enum parses,
/// has an entry in the embedded catalog with the row's family, and resolves (as a name and as a
/// bare block) to that entry's default model. The family is checked against svc-provider's
/// families there (`every_domain_family_has_a_row`).
#[test]
fn every_provider_row_is_complete() {
    let catalog = ModelCatalog::embedded();
    assert_eq!(PROVIDERS.len(), Provider::ALL.len());
    for (row, provider) in PROVIDERS.iter().zip(Provider::ALL) {
        assert_eq!(row.provider, *provider);
        assert_eq!(provider.spec().alias, row.alias);
        assert_eq!(provider.as_str(), row.alias);
        assert_eq!(Provider::from_wire(row.alias), Some(*provider));
        assert!(!row.family.trim().is_empty(), "{}", row.alias);
        let entry = catalog.alias(*provider).unwrap_or_else(|| panic!("{}: no [aliases.{0}] entry", row.alias));
        assert_eq!(entry.family, row.family, "{}", row.alias);
        for request in [json!(row.alias), json!({"provider": row.alias})] {
            let resolved = resolve(request.clone(), Value::Null).unwrap_or_else(|e| panic!("{request}: {e}"));
            assert_eq!(resolved.alias, *provider, "{request}");
            assert_eq!(resolved.model_id, entry.default_model, "{request}");
            assert_eq!(resolved.family, row.family, "{request}");
            assert_eq!(resolved.delegation.is_some(), row.responses_backend, "{request}");
        }
        // Image input is a property of the family: rows that share one agree on it.
        for other in PROVIDERS.iter().filter(|other| other.family == row.family) {
            assert_eq!(other.takes_images, row.takes_images, "{} and {}", row.alias, other.alias);
        }
    }
    let local: Vec<&str> = PROVIDERS.iter().filter(|row| row.family == LOCAL_FAMILY).map(|row| row.alias).collect();
    assert_eq!(local, ["provider_local"]);
}

#[test]
fn the_catalog_takes_each_family_from_the_provider_table() {
    let without = SMALL.replace("        family = \"openai\"\n", "").replace("        family = \"xai\"\n", "");
    assert!(!without.contains("family"));
    let catalog = ModelCatalog::from_toml_str(&without).expect("family may be omitted");
    assert_eq!(catalog, ModelCatalog::from_toml_str(SMALL).expect("valid"));
    let families: Vec<&str> = catalog.aliases().map(|(_, entry)| entry.family.as_str()).collect();
    assert_eq!(families, ["openai", "xai"]);
    let error = ModelCatalog::from_toml_str(&SMALL.replace("family = \"xai\"", "family = \"openai\""))
        .expect_err("another provider's family");
    assert!(error.contains("aliases.provider_c: family must be xai"), "{error}");
    let error =
        ModelCatalog::from_toml_str(&SMALL.replace("family = \"xai\"", "family = \" \"")).expect_err("an empty family");
    assert!(error.contains("aliases.provider_c: family must be non-empty"), "{error}");
    // The per-alias catalog rules name the aliases the table allows.
    assert_eq!(Provider::aliases_where(|spec| spec.thinking_levels), "provider_a");
    assert_eq!(Provider::aliases_where(|spec| spec.responses_backend), "provider_b_live");
}
