use axum::extract::ws::Message;
use serde_json::{Map, Value, json};

use super::{Family, Rng, Stream, Wire, WireMode, write_shuffled};

/// A frame's JSON, and whether it came as binary and indented.
fn decode(frame: &Message) -> (Value, bool, bool) {
    let (bytes, binary): (&[u8], bool) = match frame {
        Message::Text(text) => (text.as_bytes(), false),
        Message::Binary(bytes) => (bytes, true),
        other => panic!("not a data frame: {other:?}"),
    };
    let value = serde_json::from_slice(bytes).expect("every frame is JSON");
    (value, binary, bytes.contains(&b'\n'))
}

fn is_unknown_key(key: &str) -> bool {
    key.starts_with("fakeUnknown") || key.starts_with("fake_unknown_")
}

fn is_unknown_message(message: &Value) -> bool {
    let typed = message.get("type").and_then(Value::as_str).is_some_and(|t| t.contains("fake_unknown_"));
    let keyed = message.as_object().is_some_and(|o| o.len() == 1 && o.keys().all(|k| is_unknown_key(k)));
    typed || keyed
}

/// `value` without the fields the wire added.
fn without_unknown_fields(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !is_unknown_key(k))
                .map(|(k, v)| (k.clone(), without_unknown_fields(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_unknown_fields).collect()),
        other => other.clone(),
    }
}

/// Top-level keys of `text`'s outermost object, in the order written.
fn written_key_order(text: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(text).expect("JSON");
    let mut keys: Vec<(usize, String)> = value
        .as_object()
        .expect("object")
        .keys()
        .map(|k| (text.find(&format!("\"{k}\"")).expect("key written"), k.clone()))
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, k)| k).collect()
}

fn typed_messages() -> Vec<Value> {
    (0..40)
        .map(|i| {
            json!({"type": "response.output_audio.delta", "event_id": format!("event_{i}"), "response_id": "resp_1",
                "item_id": "item_1", "output_index": 0, "content_index": 0, "delta": format!("AAAA{i}"),
                "nested": {"a": 1, "b": [1, {"c": "d"}], "quote": "say \"hi\"\n\u{e9}"},
                "arguments": {"order_id": "42"}})
        })
        .collect()
}

#[test]
fn plain_sends_each_message_as_one_compact_text_frame() {
    let mut wire = Wire::new(WireMode::Plain, Family::Gemini, 0);
    let messages = vec![json!({"serverContent": {"turnComplete": true}}), json!({"usageMetadata": {"a": 1}})];
    let frames = wire.frames(messages.clone());
    let expected: Vec<Message> = messages.iter().map(|m| Message::Text(m.to_string().into())).collect();
    assert_eq!(frames, expected);
}

#[test]
fn randomized_typed_messages_arrive_whole_in_order_and_varied() {
    let messages = typed_messages();
    let (mut binary, mut text, mut indented, mut unknown_messages, mut unknown_fields, mut reordered) =
        (0, 0, 0, 0, 0, 0);
    for seed in 0..20 {
        let mut wire = Wire::new(WireMode::Randomized { seed }, Family::Typed, 0);
        let frames = wire.frames(messages.clone());
        let mut decoded = Vec::new();
        for (i, frame) in frames.iter().enumerate() {
            let (value, is_binary, is_indented) = decode(frame);
            if is_binary {
                binary += 1
            } else {
                text += 1
            }
            indented += usize::from(is_indented);
            if is_unknown_message(&value) {
                assert!(i > 0, "an unknown message only goes between two messages");
                unknown_messages += 1;
                continue;
            }
            let stripped = without_unknown_fields(&value);
            unknown_fields += usize::from(stripped != value);
            let written = match frame {
                Message::Text(t) => t.as_str().to_owned(),
                Message::Binary(b) => String::from_utf8(b.to_vec()).expect("UTF-8"),
                _ => unreachable!(),
            };
            let mut sorted = written_key_order(&written);
            let order = sorted.clone();
            sorted.sort();
            reordered += usize::from(order != sorted);
            decoded.push(stripped);
        }
        assert_eq!(decoded, messages, "seed {seed}: every message, once, in order, unchanged but for unknowns");
    }
    let frames = 20 * messages.len();
    assert!(binary > frames / 4 && text > frames / 4, "both framings: {binary} binary, {text} text");
    assert!(indented > frames / 10, "some indented: {indented}");
    assert!(reordered > frames / 2, "keys shuffled: {reordered}");
    assert!(unknown_messages > 20 && unknown_fields > frames / 10, "{unknown_messages} {unknown_fields}");
}

#[test]
fn unknown_fields_never_touch_tool_arguments() {
    for seed in 0..50 {
        let mut wire = Wire::new(WireMode::Randomized { seed }, Family::Typed, 0);
        for frame in wire.frames(typed_messages()) {
            let (value, _, _) = decode(&frame);
            if !is_unknown_message(&value) {
                assert_eq!(value["arguments"], json!({"order_id": "42"}), "seed {seed}");
            }
        }
    }
}

/// The Gemini fields of `messages` as (message type, field, value), in the order sent.
fn gemini_fields(messages: &[Value]) -> Vec<(String, String, Value)> {
    let mut fields = Vec::new();
    for message in messages {
        for (key, value) in message.as_object().expect("object") {
            match (key.as_str(), value) {
                ("serverContent", Value::Object(content)) => {
                    fields.extend(content.iter().map(|(k, v)| (key.clone(), k.clone(), v.clone())));
                }
                _ => fields.push((key.clone(), String::new(), value.clone())),
            }
        }
    }
    fields
}

#[test]
fn randomized_gemini_packs_without_losing_or_duplicating_a_field() {
    let chunk = |i: u64| {
        vec![
            json!({"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": format!("AA{i}")}}]}}}),
            json!({"serverContent": {"outputTranscription": {"text": format!("word{i} ")}}}),
        ]
    };
    let end = vec![
        json!({"serverContent": {"generationComplete": true}}),
        json!({"usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 1}}),
        json!({"usageMetadata": {"promptTokenCount": 150, "totalTokenCount": 210}}),
        json!({"serverContent": {"turnComplete": true}}),
    ];
    let mut packed_fewer = 0;
    let mut usage_beside_turn_complete = 0;
    for seed in 0..40 {
        let mut wire = Wire::new(WireMode::Randomized { seed }, Family::Gemini, 3);
        let batches = [chunk(1), chunk(2), [chunk(3), end.clone()].concat()];
        let mut sent = Vec::new();
        let mut received = Vec::new();
        for batch in batches {
            sent.extend(batch.clone());
            for frame in wire.frames(batch) {
                let (value, _, _) = decode(&frame);
                if !is_unknown_message(&value) {
                    received.push(without_unknown_fields(&value));
                }
            }
        }
        packed_fewer += usize::from(received.len() < sent.len());
        usage_beside_turn_complete += received
            .iter()
            .filter(|m| m.get("usageMetadata").is_some() && m["serverContent"]["turnComplete"] == true)
            .count();
        let mut expected = gemini_fields(&sent);
        let mut got = gemini_fields(&received);
        // Within one message fields are simultaneous: compare the sequences message by message
        // as sets, in order — every field once, none moved across a message boundary backwards.
        assert_eq!(got.len(), expected.len(), "seed {seed}: {received:#?}");
        expected.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        got.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        assert_eq!(got, expected, "seed {seed}");
        let turn_complete = received.iter().position(|m| m["serverContent"]["turnComplete"] == true);
        assert_eq!(turn_complete, Some(received.len() - 1), "seed {seed}: the turn's end comes last");
        for message in &received {
            let types = message.as_object().expect("object").keys().filter(|k| *k != "usageMetadata").count();
            assert!(types <= 1, "seed {seed}: one message type per message: {message}");
        }
    }
    assert!(packed_fewer > 30, "most seeds combine something: {packed_fewer}");
    assert!(
        usage_beside_turn_complete > 5,
        "usage rides with turnComplete for some seeds: {usage_beside_turn_complete}"
    );
}

#[test]
fn a_seed_replays_the_same_frames_and_connections_differ() {
    let run = |seed: u64, connection: usize| {
        let mut wire = Wire::new(WireMode::Randomized { seed }, Family::Typed, connection);
        wire.frames(typed_messages())
    };
    assert_eq!(run(7, 0), run(7, 0));
    assert_ne!(run(7, 0), run(8, 0));
    assert_ne!(run(7, 0), run(7, 1));
    let mut wire = Rng::new(7, 0, Stream::Wire);
    let mut shape = Rng::new(7, 0, Stream::Shape);
    assert_ne!(wire.next_u64(), shape.next_u64(), "the two streams of a connection are independent");
}

#[test]
fn shuffled_json_is_the_same_value_with_escapes_intact() {
    let value = json!({"a\"b": "line\nbreak \u{1f600} \\ \"q\"", "n": -1.5e-7, "empty": {}, "list": [], "deep":
        {"x": [null, true, {"y": "z"}], "w": 18_446_744_073_709_551_615u64}});
    for seed in 0..30 {
        let mut rng = Rng::new(seed, 0, Stream::Wire);
        for indent in [None, Some(0)] {
            let mut text = String::new();
            write_shuffled(&mut rng, &value, indent, &mut text);
            assert_eq!(serde_json::from_str::<Value>(&text).expect("valid JSON"), value, "{text}");
        }
    }
}

#[test]
fn the_seed_variable_selects_the_mode() {
    assert_eq!(WireMode::from_setting(None), WireMode::Plain);
    assert_eq!(WireMode::from_setting(Some(" ")), WireMode::Plain);
    assert_eq!(WireMode::from_setting(Some("42")), WireMode::Randomized { seed: 42 });
    assert!(std::panic::catch_unwind(|| WireMode::from_setting(Some("forty-two"))).is_err());
}

#[test]
fn unknown_messages_are_unknown_to_every_protocol() {
    let mut seen = Map::new();
    for seed in 0..200 {
        let mut rng = Rng::new(seed, 0, Stream::Wire);
        for family in [Family::Gemini, Family::Typed] {
            let message = super::unknown_message(&mut rng, family, 1);
            assert!(is_unknown_message(&message), "{message}");
            seen.insert(message.to_string(), Value::Null);
        }
    }
    assert!(seen.len() > 100, "varied: {}", seen.len());
}
