//! The mutation generator of the robustness tests: a deterministic xorshift generator and the
//! mutations it applies to realistic start bodies (see `../robustness.rs`).

use super::*;

/// xorshift64*: small, fast and the same on every platform.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub(crate) fn percent(&mut self, chance: usize) -> bool {
        self.below(100) < chance
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Field names of the session-config, a typo and a few odd keys.
#[rustfmt::skip]
pub(crate) const FIELD_NAMES: &[&str] = &[
    "type", "version", "sdk", "name", "agent", "session", "instructions", "model", "model_options", "voice", "audio",
    "tools", "greeting", "greting", "interruption_sensitivity", "hooks", "inputs", "kind", "description", "parameters",
    "properties", "items", "required", "enum", "provider", "model_id", "temperature", "max_output_tokens",
    "thinking_level", "include_thoughts", "turn_detection", "end_of_speech_sensitivity", "silence_duration_ms",
    "prefix_padding_ms", "svc_vad", "pause_ms", "prefix_ms", "max_hold_ms", "eagerness", "responses_model",
    "responses_instructions", "reasoning_effort", "verbosity", "tool_choice", "parallel_tool_calls", "service_tier",
    "delegation", "speed", "idle_timeout_ms", "trigger", "timeout_seconds", "action", "text", "prompt", "farewell",
    "max_count", "reset_mode", "max_session_seconds", "store_recording", "store_audio", "store_transcript",
    "store_video", "experimental", "resume_session_id", "avatar", "output", "noise_cancellation", "speaking_style",
    "persona", "system_prompt", "x-unknown", "", "with space", "émoji😀",
];

/// Words of the contract's vocabulary, so that mutated bodies keep reaching resolution.
#[rustfmt::skip]
pub(crate) const WORDS: &[&str] = &[
    "session-config", "inline", "catalog", "client", "server", "web_search", "examine_image", "detect_objects",
    "point_at_object", "screen_locate", "end_call", "speaker_log", "provider_a", "provider_b", "provider_b_mini",
    "provider_b_live", "provider_c", "svc_vad", "server_vad", "semantic_vad", "low", "medium", "high", "auto", "none",
    "minimal", "default", "flex", "priority", "required", "responses", "svc", "user.speech.timeout", "say", "never",
    "on_user_speech", "off", "denoise", "voice_focus", "avatar_vendor", "gpt-live-1", "gpt-realtime-2.1",
    "gemini-3.8-live-extended-thinking", "gemini-3.1-flash-live-preview", "grok-voice-3.0", "gpt-realtime-2.1-mini",
    "object", "string", "array", "integer", "null", "0196a3b4-0000-7000-8000-000000000000", "svc-receptionist",
    "{{company}}", "{{caller_name}}{{caller_name}}", "lookup_customer_by_phone_number", "svc_sdk_lookup_customer_account",
    "svc_internal_lookup_tool_name", "", " ", "a/b", "Input should be a valid string",
];

/// Numbers at and around every bound of the contract, and extremes JSON can carry.
#[rustfmt::skip]
pub(crate) const NUMBERS: &[&str] = &[
    "0", "-0", "-0.0", "1", "-1", "0.5", "0.9999999999999999", "1.0", "2", "2.0000001", "3", "10", "11", "15", "16",
    "17", "59", "60", "60.0", "60.5", "61", "128", "129", "999", "1000", "1001", "3599", "3600", "3600.0000001",
    "3601", "4999", "5000", "5001", "9999", "10000", "10001", "14399", "14400", "14401", "32767", "32768", "32769",
    "65535", "65536", "65537", "599999", "600000", "600001", "0.7", "0.6999999", "1.5", "1.5000001", "4294967295",
    "4294967296", "9223372036854775807", "-9223372036854775808", "18446744073709551615", "1e308", "-1e308",
    "1.7976931348623157e308", "5e-324", "-5e-324", "1e-7", "123456789012345678901234567890",
];

/// Lengths at and around every string bound of the contract.
pub(crate) const LENGTHS: &[usize] =
    &[0, 1, 2, 3, 23, 24, 25, 36, 63, 64, 65, 100, 101, 200, 201, 2048, 2049, 4000, 4001, 4096, 4097, 8192, 8193];

/// One step of a path into a value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// The path of a random node of `root`: a random walk from the root that stops at each node with
/// a chance of 15 in 100 (always at a leaf).
pub(crate) fn random_path(rng: &mut Rng, root: &Value) -> Vec<Step> {
    let mut path = Vec::new();
    let mut node = root;
    loop {
        let size = match node {
            Value::Array(items) => items.len(),
            Value::Object(map) => map.len(),
            _ => 0,
        };
        if size == 0 || rng.percent(15) {
            return path;
        }
        let child = rng.below(size);
        match node {
            Value::Array(items) => {
                path.push(Step::Index(child));
                node = &items[child];
            }
            Value::Object(map) => {
                let Some((key, value)) = map.iter().nth(child) else { return path };
                path.push(Step::Key(key.clone()));
                node = value;
            }
            _ => return path,
        }
    }
}

pub(crate) fn node_mut<'a>(root: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut node = root;
    for step in path {
        node = match (step, node) {
            (Step::Key(key), Value::Object(map)) => map.get_mut(key)?,
            (Step::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

pub(crate) fn node<'a>(root: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let mut node = root;
    for step in path {
        node = match (step, node) {
            (Step::Key(key), Value::Object(map)) => map.get(key)?,
            (Step::Index(i), Value::Array(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

/// A string of `length` characters of one of several shapes: ASCII, two- and four-byte
/// characters, placeholders, and valid-looking tool names (which pass the name rule when short).
pub(crate) fn long_string(rng: &mut Rng, length: usize) -> String {
    match rng.below(5) {
        0 => "a".repeat(length),
        1 => "é".repeat(length),
        2 => "😀".repeat(length),
        3 => "{{k1}}".repeat(length / 6 + 1).chars().take(length).collect(),
        _ => {
            let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789_";
            (0..length).map(|i| if i == 0 { 'l' } else { char::from(*rng.pick(alphabet)) }).collect()
        }
    }
}

pub(crate) fn number(rng: &mut Rng) -> Value {
    let text = rng.pick(NUMBERS);
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

/// A value nested `levels` deep in one of several shapes.
pub(crate) fn deep(rng: &mut Rng, levels: usize) -> Value {
    match rng.below(4) {
        0 => nested_schema(levels),
        1 => nested_value(levels),
        2 => {
            let mut value = json!({"type": "string"});
            for _ in 0..levels {
                value = object([
                    ("type", json!("object")),
                    ("properties", object([("p", value)])),
                    ("required", json!(["p"])),
                ]);
            }
            value
        }
        _ => {
            let mut value = Value::Null;
            for _ in 0..levels {
                value = Value::Array(vec![value]);
            }
            value
        }
    }
}

/// A scalar or container of a random type.
pub(crate) fn any_value(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 => Value::Null,
        1 => json!(rng.percent(50)),
        2 => number(rng),
        3 => json!(*rng.pick(WORDS)),
        4 => json!([]),
        5 => json!({}),
        6 => json!([*rng.pick(WORDS), number(rng)]),
        _ => json!({*rng.pick(FIELD_NAMES): *rng.pick(WORDS)}),
    }
}

/// Applies one random mutation to `root`.
pub(crate) fn mutate(rng: &mut Rng, root: &mut Value) {
    let path = random_path(rng, root);
    if rng.percent(15) {
        mutate_list_entry(rng, root);
        return;
    }
    let Some(target) = node(root, &path).cloned() else { return };
    let parent_path = &path[..path.len().saturating_sub(1)];
    match rng.below(14) {
        // Drop the field or item.
        0 => match (path.last(), node_mut(root, parent_path)) {
            (Some(Step::Key(key)), Some(Value::Object(map))) => {
                map.remove(key);
            }
            (Some(Step::Index(i)), Some(Value::Array(items))) => {
                items.remove(*i);
            }
            _ => {}
        },
        // Duplicate it: a second array item, or the same value under another field name.
        1 => match node_mut(root, parent_path) {
            Some(Value::Array(items)) => {
                let at = rng.below(items.len() + 1);
                items.insert(at, target);
            }
            Some(Value::Object(map)) => {
                map.insert((*rng.pick(FIELD_NAMES)).to_owned(), target);
            }
            _ => {}
        },
        // Retype it.
        2 => {
            if let Some(node) = node_mut(root, &path) {
                *node = any_value(rng);
            }
        }
        // Swap it with another node (unless one contains the other).
        3 => {
            let other = random_path(rng, root);
            if !other.starts_with(&path)
                && !path.starts_with(&other)
                && let Some(other_value) = node(root, &other).cloned()
            {
                if let Some(node) = node_mut(root, &path) {
                    *node = other_value;
                }
                if let Some(node) = node_mut(root, &other) {
                    *node = target;
                }
            }
        }
        // A long string, now and then a huge one.
        4 => {
            let length = if rng.percent(3) { *rng.pick(&[131_072, 131_073, 200_000]) } else { *rng.pick(LENGTHS) };
            let text = long_string(rng, length);
            if let Some(node) = node_mut(root, &path) {
                *node = json!(text);
            }
        }
        // Deep nesting in place.
        5 => {
            let levels = *rng.pick(&[31, 32, 33, 64, 127, 128, 129, 200, 300]);
            let value = deep(rng, levels);
            if let Some(node) = node_mut(root, &path) {
                *node = value;
            }
        }
        // Deep `parameters` on an object (a client tool when it is one).
        6 => {
            let levels = *rng.pick(&[31, 32, 33, 100, 128, 300]);
            let schema = object([("type", json!("object")), ("properties", object([("root", deep(rng, levels))]))]);
            if let Some(Value::Object(map)) = node_mut(root, &path) {
                map.insert("parameters".to_owned(), schema);
            }
        }
        // An unknown field holding a deep value.
        7 => {
            let levels = *rng.pick(&[10, 128, 300]);
            let value = deep(rng, levels);
            if let Some(Value::Object(map)) = node_mut(root, &path) {
                map.insert(format!("unknown_{}", rng.below(3)), value);
            }
        }
        // A number at a bound, in place or under a field name.
        8 => {
            let value = number(rng);
            match node_mut(root, &path) {
                Some(Value::Object(map)) if rng.percent(50) => {
                    map.insert((*rng.pick(FIELD_NAMES)).to_owned(), value);
                }
                Some(node) => *node = value,
                None => {}
            }
        }
        // A long array of copies.
        9 => {
            let length = if rng.percent(5) { CATALOG_TOOLS_MAX + 1 } else { *rng.pick(&[16, 17, 128, 129, 300]) };
            let item = if target.to_string().len() <= 200 { target } else { json!({"kind": "end_call"}) };
            if let Some(node) = node_mut(root, &path) {
                *node = Value::Array(vec![item; length]);
            }
        }
        // A word of the vocabulary, in place or under a field name.
        10 | 11 => {
            let word = json!(*rng.pick(WORDS));
            match node_mut(root, &path) {
                Some(Value::Object(map)) => {
                    map.insert((*rng.pick(FIELD_NAMES)).to_owned(), word);
                }
                Some(node) => *node = word,
                None => {}
            }
        }
        // A string tweaked: cut, doubled, upper-cased.
        12 => {
            if let Some(Value::String(text)) = node_mut(root, &path) {
                *text = match rng.below(3) {
                    0 => text.chars().take(text.chars().count() / 2).collect(),
                    1 => text.repeat(2),
                    _ => text.to_uppercase(),
                };
            }
        }
        // A whole realistic block under a field name.
        _ => {
            let block = match rng.below(4) {
                0 => json!({"kind": "client", "name": "lookup_customer_by_phone_number", "description": "Finds."}),
                1 => json!({"trigger": "user.speech.timeout", "timeout_seconds": 8, "action": {"type": "end_call"}}),
                2 => json!({"provider": *rng.pick(PROVIDERS)}),
                _ => json!({"type": "catalog", "name": "svc-receptionist", "inputs": {"company": "Acme"}}),
            };
            if let Some(Value::Object(map)) = node_mut(root, &path) {
                map.insert((*rng.pick(FIELD_NAMES)).to_owned(), block);
            }
        }
    }
}

/// Targets an entry of `tools` or `hooks` (of the agent block, or of a stored configuration):
/// duplicates it, adds an unknown field, or breaks one of its fields.
pub(crate) fn mutate_list_entry(rng: &mut Rng, root: &mut Value) {
    let list = *rng.pick(&["tools", "hooks"]);
    let path = if root.get("agent").is_some() {
        vec![Step::Key("agent".to_owned()), Step::Key(list.to_owned())]
    } else {
        vec![Step::Key(list.to_owned())]
    };
    let Some(Value::Array(items)) = node_mut(root, &path) else { return };
    if items.is_empty() {
        return;
    }
    let at = rng.below(items.len());
    match rng.below(4) {
        0 => {
            let copy = items[at].clone();
            items.push(copy);
        }
        1 => {
            if let Value::Object(entry) = &mut items[at] {
                entry.insert((*rng.pick(FIELD_NAMES)).to_owned(), any_value(rng));
            }
        }
        2 => {
            if let Value::Object(entry) = &mut items[at] {
                let field = *rng.pick(&["description", "parameters", "name", "timeout_seconds", "action", "kind"]);
                entry.remove(field);
            }
        }
        _ => {
            if let Value::Object(entry) = &mut items[at] {
                let schema = object([("type", json!(*rng.pick(WORDS))), (*rng.pick(FIELD_NAMES), any_value(rng))]);
                entry.insert("parameters".to_owned(), schema);
            }
        }
    }
}

/// The provider aliases.
pub(crate) const PROVIDERS: &[&str] = &["provider_a", "provider_b", "provider_b_mini", "provider_b_live", "provider_c"];

/// Headers of header mode 7.
pub(crate) const HEADERS: &[&str] = &[
    "svc-python/1.4.2",
    "svc-python/1.4.2 (linux; cpython 3.13; build 2026-08-01T12:00:00Z)",
    "  /  ",
    "x/y/z",
    "ñ/ü",
    "",
];

/// A mutated copy of `seed`.
pub(crate) fn mutated(rng: &mut Rng, seed: &Input) -> Input {
    let mut input = seed.clone();
    for _ in 0..=rng.below(4) {
        if rng.percent(80) {
            mutate(rng, &mut input.body);
        } else {
            mutate(rng, &mut input.stored);
        }
    }
    if rng.percent(20) {
        input.selector = rng.next_u64() as u8;
        input.header = match input.selector & 7 {
            7 => Some((*rng.pick(HEADERS)).to_owned()),
            mode => header(mode),
        };
    }
    input
}
