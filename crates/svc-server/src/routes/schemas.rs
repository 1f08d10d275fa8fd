//! The parts of the OpenAPI document a derive cannot state: tool specs (a client tool's name
//! rule and its restricted, recursive JSON Schema), silence hooks (an action discriminated on
//! `type`), and provider blocks (each provider's knobs and their values). Built from the same
//! constants and enums the parsers in `svc_domain` check with, so the document cannot drift from
//! the rules; `svc_wire`'s `ToolDoc`, `HookDoc` and `ModelBlockDoc` are placeholders this fills.

use serde_json::{Value, json};
use svc_domain::model::{self, Provider};
use svc_domain::tools::{self, ServerTool};
use utoipa::Modify;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::{OpenApi, RefOr};

/// Replaces the placeholder components with the full schemas.
pub(crate) struct RuleSchemas;

impl Modify for RuleSchemas {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, schema) in rule_schemas() {
            match serde_json::from_value::<Schema>(schema) {
                Ok(schema) => {
                    components.schemas.insert(name.to_owned(), RefOr::T(schema));
                }
                // Only a programming error gets here; the unit test below catches it.
                Err(error) => tracing::error!(schema = name, error = %error, "OpenAPI rule schema does not load"),
            }
        }
    }
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn string(min: usize, max: usize, description: &str) -> Value {
    json!({"type": "string", "minLength": min, "maxLength": max, "description": description})
}

/// A text field the server stores as text: it refuses U+0000, which Postgres cannot store.
fn text(min: usize, max: usize, description: &str) -> Value {
    let mut schema = string(min, max, description);
    schema["pattern"] = json!("^[^\\x00]*$");
    schema
}

fn nullable(mut schema: Value) -> Value {
    if let Some(kind) = schema.get("type").and_then(Value::as_str).map(str::to_owned) {
        schema["type"] = json!([kind, "null"]);
    }
    schema
}

/// The wire spellings of one of the model module's enums.
macro_rules! wire_values {
    ($enum:ty) => {
        <$enum>::ALL.iter().map(|value| value.as_str()).collect::<Vec<&'static str>>()
    };
}

/// Every rule schema, by component name.
pub(crate) fn rule_schemas() -> Vec<(&'static str, Value)> {
    vec![
        ("ToolDoc", tool_doc()),
        ("ClientToolDoc", client_tool_doc()),
        ("ServerToolDoc", server_tool_doc()),
        ("ToolParameters", tool_parameters(true)),
        ("ToolParameterSchema", tool_parameters(false)),
        ("HookDoc", hook_doc()),
        ("HookActionDoc", hook_action_doc()),
        ("ModelBlockDoc", model_block_doc()),
    ]
}

fn tool_doc() -> Value {
    json!({
        "description": "A tool spec, discriminated on `kind`. Names are unique within a session (a \
            duplicate is 422 `invalid_tool_config`); kinds `catalog` and `server` are rejected the same way.",
        "oneOf": [reference("ClientToolDoc"), reference("ServerToolDoc")],
    })
}

fn client_tool_doc() -> Value {
    json!({
        "type": "object",
        "description": "A tool the client runs (answered through the `svc.tool_result` RPC).",
        "additionalProperties": false,
        "required": ["kind", "name", "description"],
        "properties": {
            "kind": {"type": "string", "enum": ["client"]},
            "name": {
                "type": "string",
                "maxLength": tools::CLIENT_TOOL_NAME_MAX_CHARS,
                // `svc_` is reserved, except the `svc_sdk_` prefix of tools an SDK ships.
                "pattern": "^(?!svc_(?!sdk_))[a-z][a-z0-9_]{2,63}$",
            },
            "description": string(1, tools::CLIENT_TOOL_DESCRIPTION_MAX_CHARS, "Written for the model."),
            "parameters": nullable_ref("ToolParameters"),
        },
    })
}

fn nullable_ref(name: &str) -> Value {
    json!({"oneOf": [reference(name), {"type": "null"}]})
}

fn server_tool_doc() -> Value {
    let kinds: Vec<&str> = ServerTool::ALL.iter().map(|tool| tool.as_str()).collect();
    json!({
        "type": "object",
        "description": "A server-executed tool; only `kind`. One this deployment does not run \
            (`not_configured`), or the workspace gated off (`gated_off`), is listed in \
            `ready.rejected_tools` and the session starts without it.",
        "additionalProperties": false,
        "required": ["kind"],
        "properties": {"kind": {"type": "string", "enum": kinds}},
    })
}

/// The restricted JSON Schema of a client tool's `parameters`: keywords `type`, `properties`,
/// `required`, `items`, `enum`, `description`; the top level is `type: object`.
fn tool_parameters(top: bool) -> Value {
    let type_names = json!(["string", "number", "integer", "boolean", "object", "array", "null"]);
    let kind = if top {
        json!({"type": "string", "enum": ["object"]})
    } else {
        json!({"oneOf": [
            {"type": "string", "enum": type_names},
            {"type": "array", "minItems": 1, "items": {"type": "string", "enum": type_names}},
        ]})
    };
    let mut schema = json!({
        "type": "object",
        "description": if top {
            "JSON Schema of the arguments, restricted to `type` (here `object`), `properties`, \
             `required`, `items`, `enum` and `description`, nested at most 32 levels."
        } else {
            "A nested JSON Schema with the same restricted keywords."
        },
        "additionalProperties": false,
        "properties": {
            "type": kind,
            "properties": {"type": "object", "additionalProperties": reference("ToolParameterSchema")},
            "required": {"type": "array", "items": {"type": "string"}},
            "items": reference("ToolParameterSchema"),
            "enum": {"type": "array"},
            "description": {"type": "string"},
        },
    });
    if top {
        schema["required"] = json!(["type"]);
    }
    schema
}

fn hook_doc() -> Value {
    json!({
        "type": "object",
        "description": "A silence hook: when the user stays silent, say something or end the call.",
        "additionalProperties": false,
        "required": ["trigger", "timeout_seconds", "action"],
        "properties": {
            "trigger": {"type": "string", "enum": [tools::HOOK_TRIGGER]},
            "timeout_seconds": {
                "type": "number",
                "minimum": tools::HOOK_TIMEOUT_MIN_SECONDS,
                "maximum": tools::HOOK_TIMEOUT_MAX_SECONDS,
            },
            "action": reference("HookActionDoc"),
            "max_count": {"type": ["integer", "null"], "minimum": 1, "maximum": tools::HOOK_MAX_COUNT_MAX,
                "description": "Most firings per stretch of silence (default 3)."},
            "reset_mode": {"type": ["string", "null"], "enum": ["never", "on_user_speech", null]},
            "name": nullable(text(1, tools::HOOK_NAME_MAX_CHARS, "A label for the timeline.")),
        },
    })
}

fn hook_action_doc() -> Value {
    let optional_text = || nullable(text(1, tools::HOOK_TEXT_MAX_CHARS, ""));
    json!({
        "description": "`say`: `text` spoken verbatim (it wins when both are given), else a line the \
            model phrases from `prompt`, else one it phrases to check the user is still there; or \
            `end_call`, with an optional parting line.",
        "oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["type"],
             "properties": {"type": {"type": "string", "enum": ["say"]}, "text": optional_text(), "prompt": optional_text()}},
            {"type": "object", "additionalProperties": false, "required": ["type"],
             "properties": {"type": {"type": "string", "enum": ["end_call"]}, "farewell": optional_text()}},
        ],
    })
}

/// A provider block: one object per provider with exactly that provider's knobs.
fn model_block_doc() -> Value {
    let ms = |max: i64| json!({"type": ["integer", "null"], "minimum": 0, "maximum": max});
    let choice = |values: Vec<&'static str>| {
        let mut values: Vec<Value> = values.into_iter().map(Value::from).collect();
        values.push(Value::Null);
        json!({"type": ["string", "null"], "enum": values})
    };
    let flag = || json!({"type": ["boolean", "null"]});
    let model_id = json!({"type": ["string", "null"], "description": "A model id of this provider in the catalog."});
    let block = |provider: Provider, knobs: Value| {
        let mut properties = json!({"provider": {"type": "string", "enum": [provider.as_str()]}, "model_id": model_id});
        if let (Some(properties), Value::Object(knobs)) = (properties.as_object_mut(), knobs) {
            properties.extend(knobs);
        }
        json!({"type": "object", "additionalProperties": false, "required": ["provider"], "properties": properties})
    };
    let detector = model::DETECTOR_MS_MAX;
    json!({
        "description": "`{provider, model_id?, …knobs}`: each provider takes only its own knobs. Which \
            combinations a model accepts (turn detector and its knobs, thinking levels) is checked at \
            start (422 `turn_detection_knob_mismatch`, `turn_detection_unsupported`, \
            `thinking_level_unsupported`, `model_unavailable`).",
        "oneOf": [
            block(Provider::ProviderA, json!({
                "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": model::PROVIDER_A_TEMPERATURE_MAX},
                "max_output_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": model::PROVIDER_A_MAX_OUTPUT_TOKENS_MAX},
                "thinking_level": choice(wire_values!(model::ThinkingLevel)),
                "include_thoughts": flag(),
                "turn_detection": choice(wire_values!(model::TurnDetection)),
                "end_of_speech_sensitivity": choice(wire_values!(model::EndOfSpeechSensitivity)),
                "silence_duration_ms": ms(detector),
                "prefix_padding_ms": ms(detector),
                "svc_vad": {"type": ["object", "null"], "additionalProperties": false, "properties": {
                    "pause_ms": ms(model::SVC_VAD_MS_MAX),
                    "prefix_ms": ms(model::SVC_VAD_MS_MAX),
                    "max_hold_ms": ms(model::SVC_VAD_MS_MAX),
                }},
            })),
            block(Provider::ProviderB, json!({
                "turn_detection": choice(wire_values!(model::TurnDetection)),
                "eagerness": choice(wire_values!(model::Eagerness)),
                "silence_duration_ms": ms(detector),
                "prefix_padding_ms": ms(detector),
            })),
            block(Provider::ProviderBMini, json!({})),
            block(Provider::ProviderBLive, json!({
                "responses_model": nullable(text(1, model::RESPONSES_MODEL_MAX_CHARS, "")),
                "responses_instructions": nullable(text(1, svc_domain::limits::INSTRUCTIONS_MAX_CHARS, "")),
                "reasoning_effort": choice(wire_values!(model::ReasoningEffort)),
                "verbosity": choice(wire_values!(model::Verbosity)),
                "tool_choice": choice(wire_values!(model::ToolChoice)),
                "parallel_tool_calls": flag(),
                "max_output_tokens": {"type": ["integer", "null"], "minimum": model::LIVE_MAX_OUTPUT_TOKENS_MIN,
                    "maximum": model::LIVE_MAX_OUTPUT_TOKENS_MAX},
                "service_tier": choice(wire_values!(model::ServiceTier)),
                "delegation": choice(wire_values!(model::Delegation)),
            })),
            block(Provider::ProviderC, json!({
                "turn_detection": choice(wire_values!(model::TurnDetection)),
                "silence_duration_ms": ms(detector),
                "prefix_padding_ms": ms(detector),
                "reasoning_effort": choice(wire_values!(model::ProviderCReasoningEffort)),
                "speed": {"type": ["number", "null"], "minimum": model::SPEED_MIN, "maximum": model::SPEED_MAX},
                "idle_timeout_ms": {"type": ["integer", "null"], "minimum": model::IDLE_TIMEOUT_MS_MIN,
                    "maximum": model::IDLE_TIMEOUT_MS_MAX},
            })),
            block(Provider::ProviderLocal, json!({
                "turn_detection": choice(wire_values!(model::TurnDetection)),
                "silence_duration_ms": ms(detector),
                "prefix_padding_ms": ms(detector),
                "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": model::LOCAL_TEMPERATURE_MAX},
                "max_output_tokens": {"type": ["integer", "null"], "minimum": 1,
                    "maximum": model::LOCAL_MAX_OUTPUT_TOKENS_MAX},
                "preemptive_generation": {"type": ["boolean", "null"]},
            })),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_schema_loads() {
        for (name, schema) in rule_schemas() {
            serde_json::from_value::<Schema>(schema).unwrap_or_else(|error| panic!("{name}: {error}"));
        }
    }
}
