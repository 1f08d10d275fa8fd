//! The stream parser on canned payloads of each dialect, and the request body's shape.

use super::*;

fn feed(parser: &mut StreamParser, payloads: &[&str]) -> Vec<StreamEvent> {
    payloads.iter().flat_map(|p| parser.push_data(p)).collect()
}

fn text(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn calls(events: &[StreamEvent]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn errors(events: &[StreamEvent]) -> Vec<StreamError> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Error(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
}

#[test]
fn openai_and_vllm_text_then_usage_in_a_chunk_without_choices() {
    let mut parser = StreamParser::new();
    let events = feed(
        &mut parser,
        &[
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo!"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
            "[DONE]",
        ],
    );
    assert_eq!(
        events,
        [
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo!".into()),
            StreamEvent::Finish { finish: Finish::Stop, reason: "stop".into() },
            StreamEvent::Usage { prompt_tokens: 12, completion_tokens: 3 },
            StreamEvent::Done,
        ]
    );
}

#[test]
fn llama_cpp_null_content_and_usage_beside_the_finish() {
    let mut parser = StreamParser::new();
    let events = feed(
        &mut parser,
        &[
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"chatcmpl-x","model":"smollm2","system_fingerprint":"b1","object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Paris"}}],"object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"."}}],"object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":20,"total_tokens":22},"timings":{"prompt_n":20,"predicted_per_second":110.5}}"#,
            "[DONE]",
        ],
    );
    assert_eq!(
        events,
        [
            StreamEvent::TextDelta("Paris".into()),
            StreamEvent::TextDelta(".".into()),
            StreamEvent::Finish { finish: Finish::Length, reason: "length".into() },
            StreamEvent::Usage { prompt_tokens: 20, completion_tokens: 2 },
            StreamEvent::Done,
        ]
    );
}

#[test]
fn ollama_whole_tool_call_in_one_chunk_with_finish_reason_stop() {
    let mut parser = StreamParser::new();
    let events = feed(
        &mut parser,
        &[
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen2.5","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_ab12","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen2.5","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen2.5","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":140,"completion_tokens":18,"total_tokens":158}}"#,
            "[DONE]",
        ],
    );
    assert_eq!(
        events,
        [
            StreamEvent::ToolCall(call("call_ab12", "get_weather", r#"{"city":"Paris"}"#)),
            StreamEvent::Finish { finish: Finish::ToolCalls, reason: "stop".into() },
            StreamEvent::Usage { prompt_tokens: 140, completion_tokens: 18 },
            StreamEvent::Done,
        ]
    );
}

#[test]
fn tool_calls_split_over_many_chunks_are_assembled_by_index() {
    // vLLM / OpenAI style: the first fragment has id and name, the arguments follow in pieces;
    // two parallel calls interleave.
    let mut payloads = vec![
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"chatcmpl-tool-1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#.to_owned(),
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"chatcmpl-tool-2","type":"function","function":{"name":"set_timer"}}]},"finish_reason":null}]}"#.to_owned(),
    ];
    let first = r#"{"city": "Tōkyō", "unit": "celsius"}"#;
    let second = r#"{"minutes": 10}"#;
    let pieces = |s: &str| s.chars().collect::<Vec<_>>().chunks(3).map(String::from_iter).collect::<Vec<_>>();
    let (a, b) = (pieces(first), pieces(second));
    for i in 0..a.len().max(b.len()) {
        for (index, parts) in [(0, &a), (1, &b)] {
            if let Some(part) = parts.get(i) {
                let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": part}}]}, "finish_reason": null}]});
                payloads.push(chunk.to_string());
            }
        }
    }
    payloads.push(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#.to_owned());
    payloads.push(r#"{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":30,"total_tokens":80}}"#.to_owned());
    payloads.push("[DONE]".to_owned());

    let mut parser = StreamParser::new();
    let events: Vec<StreamEvent> = payloads.iter().flat_map(|p| parser.push_data(p)).collect();
    assert_eq!(
        calls(&events),
        [call("chatcmpl-tool-1", "get_weather", first), call("chatcmpl-tool-2", "set_timer", second)]
    );
    assert!(events.contains(&StreamEvent::Finish { finish: Finish::ToolCalls, reason: "tool_calls".into() }));
    assert!(errors(&events).is_empty(), "{events:?}");
    assert_eq!(text(&events), "");
    // Nothing is emitted before the finish: calls are only complete then.
    let finish_at = events.iter().position(|e| matches!(e, StreamEvent::Finish { .. })).expect("a finish");
    assert!(events[..finish_at - 2].iter().all(|e| !matches!(e, StreamEvent::ToolCall(_))));
}

#[test]
fn a_repeated_name_is_kept_once_and_fragments_without_index_are_placed() {
    let mut parser = StreamParser::new();
    let events = feed(
        &mut parser,
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"lookup","arguments":"{\"q\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"lookup","arguments":"\"x\"}"}}]}}]}"#,
            // No index: a new id is a new call, a fragment with neither continues the last call.
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"p1","function":{"name":"ping"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ],
    );
    // No finish_reason ever came: the calls are flushed at [DONE], before it; the call without
    // an id gets one made up from its index.
    assert_eq!(
        events,
        [
            StreamEvent::ToolCall(call("call_0", "lookup", r#"{"q":"x"}"#)),
            StreamEvent::ToolCall(call("p1", "ping", "{}")),
            StreamEvent::Done,
        ]
    );
}

#[test]
fn object_arguments_are_re_encoded_and_empty_arguments_become_an_empty_object() {
    let mut parser = StreamParser::new();
    let events = feed(
        &mut parser,
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":{"x":1}}},{"index":1,"id":"b","function":{"name":"g"}}]},"finish_reason":"tool_calls"}]}"#,
        ],
    );
    assert_eq!(calls(&events), [call("a", "f", r#"{"x":1}"#), call("b", "g", "{}")]);
}

#[test]
fn a_tool_call_without_a_name_is_an_error_not_a_call() {
    let mut parser = StreamParser::new();
    let events = feed(
        &mut parser,
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        ],
    );
    assert_eq!(errors(&events), [StreamError::ToolCallWithoutName { index: 0 }]);
    assert!(calls(&events).is_empty());
    // Nothing was emitted, so the server's reason stands.
    assert!(events.contains(&StreamEvent::Finish { finish: Finish::ToolCalls, reason: "tool_calls".into() }));
}

#[test]
fn finish_reasons_are_mapped() {
    for (reason, finish) in [
        ("stop", Finish::Stop),
        ("eos", Finish::Stop),
        ("length", Finish::Length),
        ("tool_calls", Finish::ToolCalls),
        ("function_call", Finish::ToolCalls),
        ("content_filter", Finish::ContentFilter),
        ("something_new", Finish::Stop),
    ] {
        let mut parser = StreamParser::new();
        let payload = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string();
        assert_eq!(parser.push_data(&payload), [StreamEvent::Finish { finish, reason: reason.into() }]);
    }
}

#[test]
fn error_objects_of_each_dialect() {
    let mut parser = StreamParser::new();
    assert_eq!(
        parser.push_data(
            r#"{"error":{"message":"model 'x' not found","type":"invalid_request_error","code":"model_not_found"}}"#
        ),
        [StreamEvent::Error(StreamError::Upstream {
            message: "model 'x' not found".into(),
            code: Some("model_not_found".into()),
        })]
    );
    assert_eq!(
        parser.push_data(r#"{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}"#),
        [StreamEvent::Error(StreamError::Upstream {
            message: "Context size has been exceeded.".into(),
            code: Some("500".into()),
        })]
    );
    assert_eq!(
        parser.push_data(r#"{"error":"something went wrong"}"#),
        [StreamEvent::Error(StreamError::Upstream { message: "something went wrong".into(), code: None })]
    );
    assert_eq!(
        parser.push_data(
            r#"{"object":"error","message":"This model's maximum context length is 2048 tokens.","type":"BadRequestError","param":null,"code":400}"#
        ),
        [StreamEvent::Error(StreamError::Upstream {
            message: "This model's maximum context length is 2048 tokens.".into(),
            code: Some("400".into()),
        })]
    );
}

#[test]
fn garbage_is_a_typed_error_and_keep_alives_are_nothing() {
    let mut parser = StreamParser::new();
    assert!(parser.push_data("").is_empty());
    assert!(parser.push_data("   \n").is_empty());
    for bad in ["not json", "{", r#"{"choices":[{"delta":{"content":"x"#, "\u{feff}{}x"] {
        let events = parser.push_data(bad);
        assert!(matches!(events.as_slice(), [StreamEvent::Error(StreamError::BadJson { .. })]), "{bad}: {events:?}");
    }
    for odd in ["[1,2]", "42", "{}", r#"{"id":"x","object":"chat.completion.chunk"}"#, "null"] {
        let events = parser.push_data(odd);
        assert!(
            matches!(events.as_slice(), [StreamEvent::Error(StreamError::UnexpectedShape { .. })]),
            "{odd}: {events:?}"
        );
    }
    // A stray `data:` prefix is tolerated.
    assert_eq!(
        parser.push_data(r#"data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}"#),
        [StreamEvent::TextDelta("ok".into())]
    );
    assert_eq!(parser.push_data("data: [DONE]"), [StreamEvent::Done]);
    // Long garbage is cut in the error, at a character boundary.
    let long = "é".repeat(500);
    match parser.push_data(&long).as_slice() {
        [StreamEvent::Error(StreamError::BadJson { excerpt, .. })] => assert!(excerpt.len() <= 200),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_prefix_of_a_valid_stream_is_handled_without_panic() {
    let payload = r#"{"choices":[{"index":0,"delta":{"content":"héllo","tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"k\": [1, 2]}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
    for end in (0..=payload.len()).filter(|&end| payload.is_char_boundary(end)) {
        let mut parser = StreamParser::new();
        // Any outcome is fine as long as it is not a panic.
        let _ = parser.push_data(&payload[..end]);
    }
}

#[test]
fn choices_other_than_the_first_are_ignored() {
    let mut parser = StreamParser::new();
    let events = parser.push_data(
        r#"{"choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"},"finish_reason":null}]}"#,
    );
    assert_eq!(events, [StreamEvent::TextDelta("A".into())]);
}

#[test]
fn tool_call_text_is_capped() {
    let mut parser = StreamParser::new();
    let mut events = parser.push_data(
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"big","function":{"name":"f","arguments":""}}]}}]}"#,
    );
    let piece = "x".repeat(1024);
    for _ in 0..80 {
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}}]});
        events.extend(parser.push_data(&chunk.to_string()));
    }
    // A later, small call still goes through.
    events.extend(parser.push_data(
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"small","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
    ));
    assert_eq!(errors(&events), [StreamError::ToolCallTooLarge { limit: MAX_TOOL_CALL_BYTES, index: 0 }]);
    assert_eq!(calls(&events), [call("small", "g", "{}")]);
    assert!(parser.call_bytes <= MAX_TOOL_CALL_BYTES);
}

#[test]
fn the_number_of_tool_calls_is_capped() {
    let mut parser = StreamParser::new();
    let list: Vec<Value> = (0..MAX_TOOL_CALLS as u64 + 5)
        .map(|i| json!({"index": i, "id": format!("c{i}"), "function": {"name": "f", "arguments": "{}"}}))
        .collect();
    let mut events = parser.push_data(&json!({"choices": [{"index": 0, "delta": {"tool_calls": list}}]}).to_string());
    // The same refused index again is not reported twice.
    events.extend(parser.push_data(
        &json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": MAX_TOOL_CALLS + 1, "function": {"arguments": "x"}}]}, "finish_reason": "tool_calls"}]}).to_string(),
    ));
    assert_eq!(calls(&events).len(), MAX_TOOL_CALLS);
    assert_eq!(errors(&events).len(), 5);
}

fn weather() -> ToolDef {
    ToolDef {
        name: "get_weather".into(),
        description: "Weather in a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

#[test]
fn request_body_shape() {
    let params = GenerateParams { max_tokens: 77, temperature: 0.5, top_p: 0.75, seed: 9, ..Default::default() };
    let messages = [
        ChatMessage::system("Be brief."),
        ChatMessage::user("Weather in Paris?"),
        ChatMessage::assistant_with_tool_calls("", vec![call("call_1", "get_weather", r#"{"city":"Paris"}"#)]),
        ChatMessage::tool_result("call_1", r#"{"temp": 21}"#),
        ChatMessage::assistant("It is 21 degrees."),
    ];
    let body = request_body("smollm2", &messages, &[weather()], &params);
    assert_eq!(
        body,
        json!({
            "model": "smollm2",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
                {"role": "assistant", "content": "It is 21 degrees."},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 77,
            "temperature": 0.5,
            "top_p": 0.75,
            "seed": 9,
            "tools": [{"type": "function", "function": {
                "name": "get_weather",
                "description": "Weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            }}],
        })
    );
    // Without tools there is no "tools" key at all.
    let body = request_body("m", &messages[..2], &[], &params);
    assert!(body.get("tools").is_none());
    // f32 parameters go out as the decimals they were written as.
    let params = GenerateParams { temperature: 0.2, top_p: 0.9, ..params };
    let body = request_body("m", &messages[..2], &[], &params);
    assert_eq!(body["temperature"].to_string(), "0.2");
    assert_eq!(body["top_p"].to_string(), "0.9");
    // Text beside tool calls is kept.
    let body = request_body(
        "m",
        &[ChatMessage::assistant_with_tool_calls("One moment.", vec![call("c", "f", "{}")])],
        &[],
        &params,
    );
    assert_eq!(body["messages"][0]["content"], "One moment.");
}
