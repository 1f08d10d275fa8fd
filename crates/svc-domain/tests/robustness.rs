//! Robustness of session-config parsing and session-start resolution, on stable and in CI: a
//! deterministic xorshift generator mutates realistic start bodies (dropped, duplicated, retyped
//! and swapped fields, huge strings, schemas and unknown fields nested hundreds of levels deep,
//! numbers at their bounds, very long arrays) and every result must hold the properties that the
//! cargo-fuzz target `fuzz/fuzz_targets/session_config.rs` checks: no panic, no stack overflow,
//! typed errors that carry what they promise, and no message that echoes a string value sent in
//! the request. See docs/FUZZING.md.

use std::fmt::Debug;

use serde_json::{Value, json};
use svc_domain::limits::{CATALOG_TOOLS_MAX, GREETING_MAX_CHARS, INSTRUCTIONS_MAX_CHARS};
use svc_domain::tools::INLINE_TOOLS_MAX;

/// One input of the properties: what the fuzz target decodes from its bytes.
type Input = Decoded;

impl Input {
    fn check(&self) -> Result<(), String> {
        check(&self.body, self.header.as_deref(), &self.stored, self.selector)
    }
}

/// Checks `input` and panics with the violation and the input (cut) if a property fails.
fn assert_holds(name: &str, input: &Input) {
    if let Err(violation) = input.check() {
        panic!("{name}: {violation}\ninput: {}", describe(input));
    }
}

/// The input as the fuzz target's bytes would show it, cut to 2000 characters.
fn describe(input: &Input) -> String {
    let text = format!(
        "selector {:#04x}, header {:?}, body {}, stored {}",
        input.selector,
        input.header.as_deref().map(|header| prefix(header, 100)),
        input.body,
        input.stored
    );
    prefix(&text, 2000).to_owned()
}

#[path = "support/session_checks.rs"]
mod session_checks;
use session_checks::*;

#[path = "support/generator.rs"]
mod generator;
use generator::*;

// ---- Seeds ------------------------------------------------------------------------------------

/// The realistic seeds of `fuzz/corpus/session_config/`, byte for byte (the hostile and huge ones
/// are built by [`generated_seeds`]). Each is a selector byte, the body and, for some catalog
/// starts, the stored configuration.
const SEEDS: &[(&str, &str)] = &[
    (
        "catalog-broken-stored",
        r#"r{
  "sdk": {"name": "curl", "version": "8"},
  "agent": {"type": "catalog", "name": "front-desk-2", "inputs": {"x": "{{x}}{{x}}"}}
}
{"model": 42, "greeting": "{{x}}", "tools": {"kind": "end_call"}, "bogus": true}"#,
    ),
    (
        "catalog-minimal",
        r#"4{
  "type": "session-config",
  "agent": {"type": "catalog", "name": "a", "inputs": null, "tools": null, "voice": null}
}"#,
    ),
    (
        "catalog-with-inputs",
        r#"q{
  "type": "session-config",
  "sdk": {"name": "svc-kotlin", "version": "3.0.0-rc.1"},
  "agent": {
    "type": "catalog",
    "name": "svc-receptionist",
    "inputs": {"company": "Harbor Dental", "caller_name": "Ada Lovelace", "weekday": "Tuesday"},
    "tools": [
      {"kind": "end_call"},
      {"kind": "client", "name": "transfer_to_human", "description": "Hands over."}
    ],
    "voice": {"speaking_style": "Calm."}
  },
  "session": {"store_audio": true, "store_video": true}
}
{
  "instructions": "You answer the phone for {{company}}. The caller is {{ caller_name }}; today is {{weekday}}. {{unknown}}",
  "greeting": "Hello {{caller_name}}, thanks for calling {{company}}!",
  "model": {"provider": "provider_b", "eagerness": "low"},
  "voice": {"name": "marin", "speaking_style": "Friendly."},
  "audio": {"output": true},
  "tools": [{"kind": "detect_objects"}, {"kind": "point_at_object"}, {"kind": "screen_locate"}],
  "hooks": [{"trigger": "user.speech.timeout", "timeout_seconds": 1, "action": {"type": "end_call"}}],
  "interruption_sensitivity": "low"
}"#,
    ),
    (
        "header-from-input",
        concat!(
            "\x07svc-rust / 0.1.0 (linux; x86_64)\n",
            r#"{"type": "session-config", "agent": {"type": "inline", "instructions": "hi"}}"#
        ),
    ),
    (
        "inline-model-string-header-sdk",
        r#"1{
  "type": "session-config",
  "agent": {
    "type": "inline",
    "model": "gemini-2.5-flash-native-audio-preview-12-2025",
    "model_options": {"provider": "provider_a", "end_of_speech_sensitivity": "low", "turn_detection": "server_vad"}
  },
  "session": null
}"#,
    ),
    (
        "inline-provider-a",
        r#"0{
  "type": "session-config",
  "version": "2026-08",
  "sdk": {"name": "svc-python", "version": "1.4.2"},
  "agent": {
    "type": "inline",
    "instructions": "You are the front desk of Harbor Dental. Book, move and cancel appointments; never give medical advice.",
    "model": {
      "provider": "provider_a",
      "model_id": "gemini-3.8-live-extended-thinking",
      "temperature": 0.7,
      "max_output_tokens": 2048,
      "thinking_level": "low",
      "include_thoughts": false,
      "turn_detection": "svc_vad",
      "svc_vad": {"pause_ms": 700, "prefix_ms": 120, "max_hold_ms": 3000}
    },
    "voice": {"name": "Puck", "speaking_style": "Warm, unhurried, smiles audibly."},
    "audio": {"output": true, "noise_cancellation": "voice_focus"},
    "tools": [
      {
        "kind": "client",
        "name": "lookup_customer_by_phone_number",
        "description": "Finds the patient record for a phone number in E.164 form.",
        "parameters": {
          "type": "object",
          "properties": {
            "phone": {"type": "string", "description": "E.164 number"},
            "include_history": {"type": "boolean"}
          },
          "required": ["phone"]
        }
      },
      {
        "kind": "client",
        "name": "book_slot",
        "description": "Books an appointment slot.",
        "parameters": {
          "type": "object",
          "properties": {
            "slot": {
              "type": "object",
              "properties": {"start": {"type": "string"}, "minutes": {"type": "integer", "enum": [15, 30, 60]}},
              "required": ["start"]
            },
            "reasons": {"type": "array", "items": {"type": ["string", "null"]}}
          }
        }
      },
      {"kind": "web_search"},
      {"kind": "end_call"},
      {"kind": "examine_image"}
    ],
    "greeting": "Harbor Dental, this is Ava. How can I help?",
    "interruption_sensitivity": "high",
    "hooks": [
      {
        "trigger": "user.speech.timeout",
        "timeout_seconds": 8,
        "action": {"type": "say", "text": "Are you still there?"},
        "max_count": 2,
        "reset_mode": "on_user_speech",
        "name": "nudge"
      },
      {
        "trigger": "user.speech.timeout",
        "timeout_seconds": 30.5,
        "action": {"type": "end_call", "farewell": "Goodbye!"}
      }
    ]
  },
  "session": {
    "max_session_seconds": 1800,
    "store_recording": true,
    "store_audio": false,
    "store_transcript": true,
    "store_video": null,
    "experimental": {
      "resume_session_id": "0196A3B4-0000-7000-8000-00000000ABCD",
      "avatar": {"provider": "avatar_vendor", "avatar_id": "ava-7", "quality": "high"}
    }
  }
}"#,
    ),
    (
        "inline-provider-b",
        r#"1{
  "type": "session-config",
  "sdk": {"name": "svc-js", "version": "2.3.0"},
  "agent": {
    "type": "inline",
    "instructions": "Answer billing questions for Acme Telecom.",
    "model": {
      "provider": "provider_b",
      "model_id": "gpt-realtime-2.1",
      "turn_detection": "server_vad",
      "silence_duration_ms": 500,
      "prefix_padding_ms": 300
    },
    "model_options": "provider_b",
    "voice": {"name": "marin"},
    "audio": {"noise_cancellation": true},
    "tools": [
      {
        "kind": "client",
        "name": "get_invoice",
        "description": "Fetches an invoice by number.",
        "parameters": {"type": "object", "properties": {"number": {"type": "string"}}}
      },
      {"kind": "speaker_log"}
    ],
    "interruption_sensitivity": "default"
  },
  "session": {"max_session_seconds": 60}
}"#,
    ),
    (
        "inline-provider-b-live",
        r#"p{
  "type": "session-config",
  "sdk": {"name": "svc-python", "version": "1.5.0"},
  "agent": {
    "type": "inline",
    "instructions": "Research assistant.",
    "model": {
      "provider": "provider_b_live",
      "model_id": "gpt-live-1.1",
      "responses_model": "gpt-5.6-luna",
      "responses_instructions": "Think step by step, cite sources.",
      "reasoning_effort": "medium",
      "verbosity": "low",
      "tool_choice": "auto",
      "parallel_tool_calls": true,
      "max_output_tokens": 32768,
      "service_tier": "flex",
      "delegation": "responses"
    },
    "tools": [{"kind": "web_search"}]
  },
  "session": {"max_session_seconds": 14400, "experimental": {"avatar": null, "resume_session_id": null}}
}"#,
    ),
    (
        "inline-provider-b-live-delegation",
        r#"x{
  "type": "session-config",
  "sdk": {"name": "svc-js", "version": "2.3.0"},
  "agent": {
    "type": "inline",
    "model": {"provider": "provider_b_live", "delegation": "svc", "max_output_tokens": 16},
    "audio": {"output": true}
  }
}"#,
    ),
    (
        "inline-provider-b-mini",
        r#"2{
  "type": "session-config",
  "sdk": {"name": "svc-swift", "version": "0.9.1"},
  "agent": {
    "type": "inline",
    "model": {"provider": "provider_b_mini", "model_id": "gpt-realtime-mini"},
    "audio": {"output": false, "noise_cancellation": "denoise"},
    "greeting": "Hi!",
    "tools": []
  },
  "session": {"store_recording": false}
}"#,
    ),
    (
        "inline-provider-c",
        r#"3{
  "type": "session-config",
  "sdk": {"name": "svc-go", "version": "0.2.0"},
  "agent": {
    "type": "inline",
    "instructions": "Talk like a pirate.",
    "model": {
      "provider": "provider_c",
      "model_id": "grok-voice-think-fast-1.0",
      "turn_detection": "server_vad",
      "silence_duration_ms": 0,
      "prefix_padding_ms": 10000,
      "reasoning_effort": "none",
      "speed": 1.5,
      "idle_timeout_ms": 600000
    },
    "voice": {"name": "eve", "speaking_style": "Gravelly."},
    "interruption_sensitivity": "low",
    "hooks": [
      {
        "trigger": "user.speech.timeout",
        "timeout_seconds": 3600,
        "action": {"type": "say", "prompt": "Re-engage gently."},
        "max_count": 10,
        "reset_mode": "never"
      }
    ]
  }
}"#,
    ),
    (
        "legacy-flat",
        r#"0{
  "version": "1",
  "sdk": {"name": "svc-js", "version": "1.3.9"},
  "instructions": "You are helpful.",
  "model": "provider_a",
  "model_options": {"temperature": 0.5},
  "voice": "Puck",
  "audio": {"output": true},
  "tools": [{"kind": "end_call"}],
  "greeting": "Hi",
  "interruption_sensitivity": "high",
  "hooks": [],
  "max_session_seconds": 600,
  "persona": "x",
  "system_prompt": "y"
}"#,
    ),
    (
        "numbers-at-bounds",
        r#"2{
  "type": "session-config",
  "sdk": {"name": "n", "version": "0"},
  "agent": {
    "type": "inline",
    "model": {
      "provider": "provider_a",
      "temperature": -0.0,
      "max_output_tokens": 65537,
      "silence_duration_ms": 10001,
      "prefix_padding_ms": -1,
      "svc_vad": {"pause_ms": 5000, "prefix_ms": 0, "max_hold_ms": 1e+308}
    },
    "hooks": [
      {
        "trigger": "user.speech.timeout",
        "timeout_seconds": 0.9999999999999999,
        "action": {"type": "end_call"}
      },
      {
        "trigger": "user.speech.timeout",
        "timeout_seconds": 3600.0000000001,
        "action": {"type": "end_call"},
        "max_count": 18446744073709551615
      },
      {
        "trigger": "user.speech.timeout",
        "timeout_seconds": -1e+308,
        "action": {"type": "end_call"},
        "max_count": -9223372036854775808
      }
    ]
  },
  "session": {
    "max_session_seconds": 14401,
    "store_audio": 0,
    "experimental": {"resume_session_id": "not-a-uuid-but-exactly-36-chars-long"}
  }
}"#,
    ),
    (
        "tool-problems",
        r#"1{
  "type": "session-config",
  "sdk": {"name": "svc-python", "version": "1.4.2"},
  "agent": {
    "type": "inline",
    "tools": [
      {"kind": "server", "name": "weather"},
      {"kind": "catalog", "name": "desk"},
      {"kind": "client", "name": "Bad-Name", "description": "x"},
      {"kind": "client", "name": "svc_internal_tool", "description": "y"},
      {"kind": "client", "name": "svc_sdk_helper", "description": ""},
      {
        "kind": "client",
        "name": "lookup",
        "description": "d",
        "x-extra": 1,
        "weird key with spaces": 2
      },
      {"kind": "client", "name": "lookup", "description": "duplicate"},
      {"kind": "web_search", "max_results": 3},
      {"kind": "web_search"},
      {"kind": "client", "name": "web_search", "description": "shadow"},
      {
        "kind": "client",
        "name": "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq",
        "description": 5,
        "parameters": []
      },
      {
        "kind": "client",
        "name": "params_tool",
        "description": "p",
        "parameters": {
          "type": "array",
          "format": "x",
          "required": [1],
          "enum": {},
          "description": 3,
          "properties": {"a": {"type": "strin"}, "b": 5, "c": {"type": []}},
          "items": "nope"
        }
      },
      {"kind": "telepathy"},
      7,
      {"kind": 3},
      {}
    ],
    "hooks": [
      3,
      {},
      {
        "trigger": "user.speech.start",
        "timeout_seconds": "8",
        "action": {"type": "transfer"},
        "max_count": 0,
        "reset_mode": "onUserSpeech",
        "name": "",
        "extra": 1
      }
    ]
  }
}"#,
    ),
];

/// An object of `fields`, moving the values in (`json!` would serialize them again at every level,
/// which makes deep nesting quadratic).
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(name, value)| (name.to_owned(), value)).collect())
}

/// A schema chain `levels` deep below a string schema, alternating `items` and `properties`.
fn nested_schema(levels: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for level in 0..levels {
        schema = if level % 2 == 1 {
            object([("type", json!("object")), ("properties", object([("a", schema)]))])
        } else {
            object([("type", json!("array")), ("items", schema)])
        };
    }
    schema
}

/// Arrays and objects alternating, `levels` deep, around a string.
fn nested_value(levels: usize) -> Value {
    let mut value = json!("bottom");
    for level in 0..levels {
        value = if level % 2 == 1 { Value::Array(vec![value]) } else { object([("k", value)]) };
    }
    value
}

/// An input of `body` as the fuzz target sees it with `selector` (header modes 0 to 6).
fn input(selector: u8, body: Value, stored: Option<Value>) -> Input {
    Input { selector, header: header(selector & 7), body, stored: stored.unwrap_or_else(default_stored) }
}

/// The hostile and huge seeds of `fuzz/corpus/session_config/`, built instead of written out.
fn generated_seeds() -> Vec<(&'static str, Input)> {
    let tools: Vec<Value> = (0..200)
        .map(|i| match i % 4 {
            0 => json!({"kind": "client", "name": format!("tool_{:03}", i % 50), "description": "d"}),
            1 => json!({"kind": "end_call"}),
            2 => {
                let properties: serde_json::Map<String, Value> =
                    (0..3).map(|j| (format!("p{j}"), json!({"format": "x"}))).collect();
                json!({"kind": "client", "name": format!("t{i}"), "description": "d",
                       "parameters": {"type": "object", "properties": properties}})
            }
            _ => json!({"kind": "server"}),
        })
        .collect();
    let hook = json!({"trigger": "user.speech.timeout", "timeout_seconds": 5, "action": {"type": "say", "text": "?"}});
    let inputs: serde_json::Map<String, Value> =
        (0..300).map(|i| (format!("k{i}"), json!("v".repeat(i % 7)))).collect();
    let catalog_tools: Vec<Value> =
        (0..300).map(|i| json!({"kind": "client", "name": format!("tool_{i:04}"), "description": "d"})).collect();
    vec![
        (
            "hostile-deep-nesting",
            input(
                b'3',
                json!({
                    "type": "session-config", "sdk": {"name": "deep", "version": "1"},
                    "agent": {"type": "inline", "tools": [{"kind": "client", "name": "deep_tool", "description": "deep",
                              "parameters": {"type": "object", "properties": {"root": nested_schema(110)}}}],
                              "unknown_deep": nested_value(100)},
                    "session": {"experimental": {"avatar": {"provider": "avatar_vendor", "cfg": nested_value(110)}}},
                    "extra_top": nested_value(100)
                }),
                None,
            ),
        ),
        (
            "huge-arrays",
            input(
                b'0',
                json!({
                    "type": "session-config", "sdk": {"name": "big", "version": "1"},
                    "agent": {"type": "inline", "tools": tools, "hooks": vec![hook; 17], "greeting": "g".repeat(4001)},
                    "session": {"experimental": {"avatar": {"provider": "avatar_vendor", "frames": (0..500).collect::<Vec<u32>>()}}}
                }),
                None,
            ),
        ),
        (
            "catalog-many-tools",
            input(
                b'q',
                json!({
                    "type": "session-config", "sdk": {"name": "big", "version": "1"},
                    "agent": {"type": "catalog", "name": "bulk", "inputs": inputs, "tools": catalog_tools}
                }),
                Some(json!({"instructions": "{{k1}}".repeat(200), "tools": vec![json!({"kind": "web_search"}); 3]})),
            ),
        ),
        (
            "long-strings",
            input(
                b'0',
                json!({
                    "type": "session-config", "sdk": {"name": "s".repeat(100), "version": "v".repeat(65)},
                    "agent": {"type": "inline", "greeting": "g".repeat(4001),
                              "voice": {"name": "n".repeat(201), "speaking_style": "s".repeat(8193)},
                              "tools": [{"kind": "client", "name": "a".repeat(64), "description": "d".repeat(2049)},
                                        {"kind": "client", "name": "b".repeat(65), "description": "d".repeat(2048)}],
                              "hooks": [{"trigger": "user.speech.timeout", "timeout_seconds": 5, "name": "h".repeat(65),
                                         "action": {"type": "say", "text": "t".repeat(4097), "prompt": "p".repeat(4096)}}]}
                }),
                None,
            ),
        ),
    ]
}

/// Every seed, decoded.
fn seeds() -> Vec<(&'static str, Input)> {
    let mut seeds: Vec<(&'static str, Input)> = SEEDS
        .iter()
        .map(|(name, data)| (*name, decode(data.as_bytes()).unwrap_or_else(|| panic!("seed {name} decodes"))))
        .collect();
    seeds.extend(generated_seeds());
    seeds
}

// ---- Tests ------------------------------------------------------------------------------------

#[test]
fn every_seed_holds_the_properties_under_every_server_context() {
    for (name, seed) in seeds() {
        for selector in [seed.selector, seed.selector ^ 0x40, seed.selector ^ 0x20, seed.selector ^ 0x80 ^ 0x18] {
            assert_holds(name, &Input { selector, ..seed.clone() });
        }
    }
}

#[test]
fn mutated_bodies_hold_the_properties() {
    const INPUTS: usize = 4000;
    let seeds = seeds();
    let mut rng = Rng(0x005e_ed0f_5e55_1011);
    let mut violations = Vec::new();
    for round in 0..INPUTS {
        let (name, seed) = &seeds[round % seeds.len()];
        let input = mutated(&mut rng, seed);
        if let Err(violation) = input.check() {
            violations.push(format!("#{round} from {name}: {violation}\n  input: {}", prefix(&describe(&input), 400)));
        }
    }
    assert!(
        violations.is_empty(),
        "{} of {INPUTS} mutated inputs break a property; the first ones:\n{}",
        violations.len(),
        violations.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn hostile_depth_never_overflows_the_stack() {
    // Deeper than serde_json's parser allows (128): values built in code, as a stored
    // configuration could be after a migration.
    for levels in [33, 129, 256, 400] {
        let deep_schema = json!({"type": "object", "properties": {"root": nested_schema(levels)}});
        let tool = json!({"kind": "client", "name": "deep_tool", "description": "d", "parameters": deep_schema});
        let inline = json!({
            "type": "session-config", "sdk": {"name": "deep", "version": "1"},
            "agent": {"type": "inline", "tools": [tool], "unknown": nested_value(levels)},
            "session": {"experimental": {"avatar": {"provider": "avatar_vendor", "cfg": nested_value(levels)}}},
            "extra": nested_value(levels)
        });
        assert_holds("deep inline", &input(b'p', inline, None));
        let valid = json!({
            "type": "session-config", "sdk": {"name": "deep", "version": "1"},
            "session": {"experimental": {"avatar": {"provider": "avatar_vendor", "cfg": nested_value(levels)}}}
        });
        assert_holds("deep avatar", &input(0xf0, valid, None));
        let catalog = json!({
            "type": "session-config", "sdk": {"name": "deep", "version": "1"},
            "agent": {"type": "catalog", "name": "deep", "tools": [tool.clone()]}
        });
        let stored = json!({"tools": [tool], "model": nested_value(levels), "hooks": [nested_value(levels)]});
        assert_holds("deep stored", &input(b'q', catalog, Some(stored)));
    }
}

#[test]
fn limits_hold_at_their_bounds() {
    let body = |agent: Value| json!({"type": "session-config", "sdk": {"name": "b", "version": "1"}, "agent": agent});
    let end_call = json!({"kind": "end_call"});
    let cases = [
        json!({"type": "inline", "instructions": "i".repeat(INSTRUCTIONS_MAX_CHARS)}),
        json!({"type": "inline", "instructions": "i".repeat(INSTRUCTIONS_MAX_CHARS + 1)}),
        json!({"type": "inline", "instructions": "é".repeat(INSTRUCTIONS_MAX_CHARS + 1)}),
        json!({"type": "inline", "tools": vec![end_call.clone(); INLINE_TOOLS_MAX]}),
        json!({"type": "inline", "tools": vec![end_call.clone(); INLINE_TOOLS_MAX + 1]}),
        json!({"type": "catalog", "name": "bulk", "tools": vec![end_call.clone(); CATALOG_TOOLS_MAX]}),
        json!({"type": "catalog", "name": "bulk", "tools": vec![end_call.clone(); CATALOG_TOOLS_MAX + 1]}),
        json!({"type": "catalog", "name": "x".repeat(101)}),
        json!({"type": "catalog", "name": "bulk", "inputs": {"k": "v".repeat(GREETING_MAX_CHARS)}}),
    ];
    for agent in cases {
        for selector in [b'p', b'0'] {
            let stored = json!({"instructions": "{{k}}".repeat(100), "greeting": "{{k}}", "tools": [end_call.clone()]});
            assert_holds("bounds", &input(selector, body(agent.clone()), Some(stored)));
        }
    }
}

#[test]
fn the_echo_check_tells_echoes_from_keys_and_fixed_text() {
    // A value that is also the fixed text of the message it provokes is no echo.
    let fixed = json!({"sdk": {"name": "a", "version": "1"}, "agent": {"type": "inline", "greeting": 5},
                       "session": {"store_audio": "Input should be a valid boolean"}});
    assert_holds("fixed text", &input(b'0', fixed, None));
    // A key may be named in a `loc` or message, even when a value repeats it.
    let key = "an_unknown_field_with_a_long_name";
    let keyed = object([
        ("sdk", json!({"name": "a", "version": "1"})),
        (key, json!(key)),
        ("agent", json!({"type": "inline", "tools": [{"kind": "web_search", "x": key}]})),
    ]);
    assert_holds("keys", &input(b'0', keyed, None));
    // Catalog model ids may be named by model-resolution messages.
    let ids = json!({"sdk": {"name": "a", "version": "1"},
                     "agent": {"type": "inline", "model": "gemini-3.8-live-extended-thinking",
                               "model_options": "gemini-3.1-flash-live-preview"}});
    assert_holds("catalog ids", &input(b'0', ids, None));
    // An echo is seen as written and as `{:?}` or JSON escape it; rotation keeps length and classes.
    let value = "line one \"quoted\"\nline two, long enough";
    assert!(shows(&format!("got {value} here"), value));
    assert!(shows(&format!("got {value:?} here"), value));
    assert!(shows(&format!("got {} here", serde_json::to_string(value).expect("json")), value));
    assert!(!shows("a message of fixed text only, nothing else", value));
    assert_eq!(rotate("svc_sdk_tool_9z"), "twd_tel_uppm_0a");
}

// ---- Regressions: minimized inputs of violations found by fuzzing ------------------------------

/// A client tool whose name passes the name rule is labelled by that name in every problem of
/// the tool, so a name of 24 or more characters is echoed into the `invalid_tool_config` message.
/// Found by `cargo fuzz run session_config` within three minutes (docs/FUZZING.md).
#[test]
fn regression_a_valid_long_tool_name_is_not_echoed_in_tool_problems() {
    let data = br#"0{"sdk":{"name":"a","version":"1"},"agent":{"type":"inline","tools":[{"kind":"client","name":"aaaaaaaaaaaaaaaaaaaaaaaa"}]}}"#;
    let input = decode(data).expect("decodes");
    assert_holds("tool name echo", &input);
}
