//! Keeping tool-call markup out of the spoken text, and reading the calls.

use super::*;

fn tools() -> Vec<ToolDef> {
    ["get_weather", "set_timer"]
        .iter()
        .map(|name| ToolDef { name: (*name).into(), description: String::new(), parameters: serde_json::json!({}) })
        .collect()
}

/// Runs `text` through a filter in pieces of `size` characters.
fn filter_in_pieces(text: &str, size: usize) -> (Vec<String>, SpokenFilter) {
    let mut filter = SpokenFilter::default();
    let chars: Vec<char> = text.chars().collect();
    let mut spoken: Vec<String> = chars.chunks(size).map(|piece| filter.push(&String::from_iter(piece))).collect();
    spoken.push(filter.finish());
    (spoken, filter)
}

#[test]
fn markup_is_never_spoken_however_the_text_is_cut() {
    let text = "Sure, one moment. <tool_call>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}]</tool_call> Done.";
    for size in 1..=text.chars().count() {
        let (spoken, filter) = filter_in_pieces(text, size);
        assert_eq!(spoken.concat(), "Sure, one moment.  Done.", "pieces of {size}");
        assert!(spoken.iter().all(|p| !p.contains('<') && !p.contains('>')), "pieces of {size}: {spoken:?}");
        assert_eq!(filter.bodies, ["[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}]"]);
    }
}

#[test]
fn an_invented_tool_result_is_never_spoken_nor_a_call() {
    let text = "<tool_response>\n{\"temperature_c\": 25}\n</tool_response>It is warm. <tool_response>{\"x\": 1}";
    for size in 1..=text.chars().count() {
        let (spoken, filter) = filter_in_pieces(text, size);
        assert_eq!(spoken.concat(), "It is warm. ", "pieces of {size}");
        assert!(filter.bodies.is_empty());
    }
}

#[test]
fn text_that_only_looks_like_a_tag_start_is_held_then_spoken() {
    let mut filter = SpokenFilter::default();
    assert_eq!(filter.push("a < b and <to"), "a < b and ");
    assert_eq!(filter.push("day>"), "<today>");
    assert_eq!(filter.push(" x <tool_"), " x ");
    assert_eq!(filter.push("c"), "");
    assert_eq!(filter.finish(), "<tool_c");
    assert!(filter.bodies.is_empty());
}

#[test]
fn an_unclosed_call_is_still_read_at_the_end() {
    let (spoken, filter) =
        filter_in_pieces("<tool_call>[{\"name\": \"set_timer\", \"arguments\": {\"minutes\": 5}}]", 4);
    assert_eq!(spoken.concat(), "");
    let calls: Vec<ToolCall> = filter.bodies.iter().flat_map(|b| parse_calls(b, &tools())).collect();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("set_timer", r#"{"minutes":5}"#));
}

#[test]
fn collected_markup_is_bounded() {
    let mut filter = SpokenFilter::default();
    assert_eq!(filter.push("<tool_call>"), "");
    for _ in 0..100 {
        assert_eq!(filter.push(&"y".repeat(1000)), "");
    }
    assert!(filter.pending.len() <= MAX_CALL_TEXT);
    assert_eq!(filter.finish(), "");
    assert!(filter.bodies.iter().map(String::len).sum::<usize>() <= MAX_CALL_TEXT);
}

#[test]
fn calls_are_read_leniently_and_only_for_offered_tools() {
    let tools = tools();
    let read = |body: &str| -> Vec<(String, String)> {
        parse_calls(body, &tools).into_iter().map(|c| (c.name, c.arguments)).collect()
    };
    let pair = |n: &str, a: &str| (n.to_owned(), a.to_owned());
    // The native list form, and a single object.
    assert_eq!(
        read(
            "[\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}},\n{\"name\": \"set_timer\", \"arguments\": {\"minutes\": 3}}\n]"
        ),
        [pair("get_weather", r#"{"city":"Paris"}"#), pair("set_timer", r#"{"minutes":3}"#)]
    );
    assert_eq!(read(r#"{"name": "set_timer", "arguments": {"minutes": 1}}"#), [pair("set_timer", r#"{"minutes":1}"#)]);
    // Arguments as a JSON string, under "parameters", or missing.
    assert_eq!(
        read(r#"[{"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}]"#),
        [pair("get_weather", r#"{"city":"Rome"}"#)]
    );
    assert_eq!(
        read(r#"[{"name": "get_weather", "parameters": {"city": "Oslo"}}]"#),
        [pair("get_weather", r#"{"city":"Oslo"}"#)]
    );
    assert_eq!(read(r#"[{"name": "set_timer"}]"#), [pair("set_timer", "{}")]);
    // Prose around the JSON, objects without the list, trailing junk.
    assert_eq!(read(r#"Here: [{"name": "set_timer", "arguments": {}}] ok"#), [pair("set_timer", "{}")]);
    assert_eq!(
        read(r#"{"name": "set_timer", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "A"}}"#),
        [pair("set_timer", "{}"), pair("get_weather", r#"{"city":"A"}"#)]
    );
    // Unknown tools, the empty list, broken JSON and bad arguments give nothing.
    assert!(read(r#"[{"name": "launch_rockets", "arguments": {}}]"#).is_empty());
    assert!(read("[]").is_empty());
    assert!(read(r#"[{"name": "set_timer", "arguments": {"minutes": }]"#).is_empty());
    assert!(read(r#"[{"name": "set_timer", "arguments": "five"}]"#).is_empty());
    assert!(read(r#"[{"name": "set_timer", "arguments": [5]}]"#).is_empty());
    assert!(read("").is_empty());
    assert!(read("}{").is_empty());
}

#[test]
fn call_ids_do_not_repeat() {
    let tools = tools();
    let body = r#"[{"name": "set_timer", "arguments": {}}, {"name": "set_timer", "arguments": {}}]"#;
    let mut ids: Vec<String> = (0..3).flat_map(|_| parse_calls(body, &tools)).map(|c| c.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6);
}

#[test]
fn system_prompts_list_the_tools() {
    let tools = tools();
    let native = system_prompt(ToolPrompt::Native, "PERSONA", &tools);
    assert!(native.starts_with("You are an expert in composing functions."));
    assert!(!native.contains("PERSONA"));
    assert!(native.contains(r#"<tools>[{"description":"","name":"get_weather","parameters":{}},"#), "{native}");
    let persona = system_prompt(ToolPrompt::PersonaThenNative, "PERSONA", &tools);
    assert!(persona.starts_with("PERSONA\n\nYou have access to the following tools:\n<tools>["));
    assert!(persona.ends_with("]</tool_call>"));
    let conversational = system_prompt(ToolPrompt::Conversational, "PERSONA", &tools);
    assert!(conversational.starts_with("PERSONA\n\n") && conversational.contains("Otherwise answer"));
    assert_eq!(system_prompt(ToolPrompt::Omit, "PERSONA", &tools), "PERSONA");
    assert_eq!(system_prompt(ToolPrompt::Native, "PERSONA", &[]), "PERSONA");
}
