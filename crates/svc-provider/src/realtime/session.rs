//! The realtime `session.update`: every knob of a session mapped onto OpenAI's GA shape or
//! xAI's (providers.md §3.2–3.3 and §5.2).

use serde_json::{Value, json};
use svc_domain::model::{Eagerness, Knobs, ProviderBTurnDetection, ProviderCKnobs};
use svc_domain::session_config::InterruptionSensitivity;

use super::{Dialect, OPENAI_TRANSCRIBE_MODEL, RATE_HZ, XAI_TRANSCRIBE_MODEL};
use svc_provider_core::{SessionSetup, ToolDecl};

/// The `session.update` for `setup` (the exact mapping of every knob, §3.2–3.3 and §5.2).
pub fn session_update(setup: &SessionSetup, dialect: Dialect, instructions: &str) -> Value {
    match dialect {
        Dialect::OpenAi => openai_session(setup, instructions),
        Dialect::Xai => xai_session(setup, instructions),
    }
}

fn tools_json(tools: &[ToolDecl]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "name": tool.name, "description": tool.description, "parameters": tool.parameters})
        })
        .collect()
}

/// server_vad threshold for an interruption sensitivity (providers.md §1.4 proposal); the
/// provider default when the agent keeps the default.
fn vad_threshold(sensitivity: InterruptionSensitivity) -> Option<f64> {
    match sensitivity {
        InterruptionSensitivity::Low => Some(0.7),
        InterruptionSensitivity::Default => None,
        InterruptionSensitivity::High => Some(0.35),
    }
}

/// Semantic VAD has no threshold; its one dial is eagerness (how soon it decides the user's
/// turn is over and the model may speak). An explicit eagerness wins; left at `auto`, the
/// session's interruption sensitivity sets it: `low` waits longer before taking the floor from
/// the user, `high` takes it sooner.
fn semantic_eagerness(eagerness: Eagerness, sensitivity: InterruptionSensitivity) -> Eagerness {
    match (eagerness, sensitivity) {
        (Eagerness::Auto, InterruptionSensitivity::Low) => Eagerness::Low,
        (Eagerness::Auto, InterruptionSensitivity::High) => Eagerness::High,
        (eagerness, _) => eagerness,
    }
}

fn openai_session(setup: &SessionSetup, instructions: &str) -> Value {
    let detection = match &setup.model.knobs {
        Knobs::ProviderB(knobs) | Knobs::ProviderBMini(knobs) => knobs.turn_detection.clone(),
        _ => ProviderBTurnDetection::SemanticVad { eagerness: Eagerness::Auto },
    };
    let turn_detection = match detection {
        ProviderBTurnDetection::ServerVad { silence_duration_ms, prefix_padding_ms } => {
            let mut vad = json!({"type": "server_vad"});
            if let Some(threshold) = vad_threshold(setup.interruption_sensitivity) {
                vad["threshold"] = json!(threshold);
            }
            if let Some(ms) = prefix_padding_ms {
                vad["prefix_padding_ms"] = json!(ms);
            }
            if let Some(ms) = silence_duration_ms {
                vad["silence_duration_ms"] = json!(ms);
            }
            vad["create_response"] = json!(true);
            vad["interrupt_response"] = json!(true);
            vad
        }
        ProviderBTurnDetection::SemanticVad { eagerness } => json!({
            "type": "semantic_vad", "eagerness": semantic_eagerness(eagerness, setup.interruption_sensitivity).as_str(),
            "create_response": true, "interrupt_response": true,
        }),
    };
    let mut audio = json!({
        "input": {
            "format": {"type": "audio/pcm", "rate": RATE_HZ},
            "transcription": {"model": OPENAI_TRANSCRIBE_MODEL},
            "turn_detection": turn_detection,
        }
    });
    if !setup.text_only {
        audio["output"] = json!({"format": {"type": "audio/pcm", "rate": RATE_HZ}});
        if let Some(voice) = &setup.voice {
            audio["output"]["voice"] = json!(voice);
        }
    }
    let mut session = json!({
        "type": "realtime",
        "model": setup.model.model_id,
        "instructions": instructions,
        "output_modalities": [if setup.text_only { "text" } else { "audio" }],
        "audio": audio,
    });
    if !setup.tools.is_empty() {
        session["tools"] = json!(tools_json(&setup.tools));
        session["tool_choice"] = json!("auto");
    }
    json!({"type": "session.update", "session": session})
}

fn xai_session(setup: &SessionSetup, instructions: &str) -> Value {
    let knobs = match &setup.model.knobs {
        Knobs::ProviderC(knobs) => knobs.clone(),
        _ => ProviderCKnobs {
            turn_detection: svc_domain::model::TurnDetection::ServerVad,
            silence_duration_ms: None,
            prefix_padding_ms: None,
            reasoning_effort: svc_domain::model::ProviderCReasoningEffort::High,
            speed: None,
            idle_timeout_ms: None,
        },
    };
    // Always send turn_detection: without it xAI suppresses speech events (§5.2).
    let mut vad = json!({"type": "server_vad"});
    if let Some(threshold) = vad_threshold(setup.interruption_sensitivity) {
        vad["threshold"] = json!(threshold);
    }
    if let Some(ms) = knobs.silence_duration_ms {
        vad["silence_duration_ms"] = json!(ms);
    }
    if let Some(ms) = knobs.prefix_padding_ms {
        vad["prefix_padding_ms"] = json!(ms);
    }
    if let Some(ms) = knobs.idle_timeout_ms {
        vad["idle_timeout_ms"] = json!(ms);
    }
    let mut output = json!({"format": {"type": "audio/pcm", "rate": RATE_HZ}});
    if let Some(speed) = knobs.speed {
        output["speed"] = json!(speed);
    }
    let mut session = json!({
        "instructions": instructions,
        "turn_detection": vad,
        "reasoning": {"effort": knobs.reasoning_effort.as_str()},
        "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": RATE_HZ}, "transcription": {"model": XAI_TRANSCRIBE_MODEL}},
            "output": output,
        },
    });
    if let Some(voice) = &setup.voice {
        session["voice"] = json!(voice);
    }
    if !setup.tools.is_empty() {
        session["tools"] = json!(tools_json(&setup.tools));
    }
    json!({"type": "session.update", "session": session})
}
