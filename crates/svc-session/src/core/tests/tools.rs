//! Tools in virtual time: background job results from the client, `set_state`, and the
//! backend-run server tools as bounded jobs.

use super::*;

#[test]
fn background_job_results_reach_the_model_once_and_examine_image_needs_a_fresh_frame() {
    let tool = json!({"kind": "client", "name": "book_table", "description": "d"});
    let mut h = Harness::live(openai(json!({"tools": [tool, {"kind": "examine_image"}]})));
    let job = json!({"type": "tool_job_result", "job_id": "j1", "tool_name": "book_table", "status": "completed",
        "summary": "Table for two at 8pm."});
    h.data("alice", job.clone()).expect("ok");
    h.data("alice", job).expect("ok");
    let inputs = h.take_inputs();
    assert_eq!(inputs.len(), 1, "delivered once");
    assert!(
        matches!(&inputs[0], ProviderInput::Note { text, respond: true } if text.contains("Table for two at 8pm."))
    );
    h.data("alice", json!({"type": "tool_job_result", "job_id": "j2", "tool_name": "nope", "status": "failed"}))
        .expect("ok");
    assert!(h.take_inputs().is_empty(), "not a tool of this session");

    h.provider(ProviderEvent::ToolCall { call_id: "v1".into(), name: "examine_image".into(), arguments: json!({}) });
    let inputs = h.take_inputs();
    assert!(
        matches!(&inputs[..], [ProviderInput::ToolResult { is_error: true, output, .. }] if output["error"] == "no_fresh_frame")
    );
    h.data("alice", json!({"type": "send-image", "mime_type": "image/jpeg", "data": "/9j/4AA=", "stream_id": "cam"}))
        .expect("ok");
    h.take_inputs();
    h.advance(Duration::from_secs(2));
    h.provider(ProviderEvent::ToolCall { call_id: "v2".into(), name: "examine_image".into(), arguments: json!({}) });
    let inputs = h.take_inputs();
    assert!(matches!(&inputs[0], ProviderInput::Image { mime, .. } if mime == "image/jpeg"));
    assert!(matches!(&inputs[1], ProviderInput::ToolResult { is_error: false, .. }));
    let types = h.take_types();
    assert!(types.ends_with(&["tool-call".to_owned(), "tool-dispatch-started".to_owned(), "tool-result".to_owned()]));
}

#[test]
fn set_state_merges_publishes_the_whole_state_and_answers_the_model() {
    let mut h = Harness::live(openai(json!({"state": {"stage": "intro", "name": null, "answers": 0}})));
    h.provider(ProviderEvent::ToolCall {
        call_id: "s1".into(),
        name: "set_state".into(),
        arguments: json!({"values": {"name": "Ada", "answers": 1, "unused": null}, "stage": "questions"}),
    });
    let events = h.take_events();
    assert_eq!(
        events,
        vec![json!({"type": "svc.session-state", "state": {"stage": "questions", "name": "Ada", "answers": 1},
            "updated_keys": ["answers", "name", "stage"], "warnings": [], "stage": "questions"})]
    );
    assert_eq!(
        h.take_inputs(),
        vec![ProviderInput::ToolResult {
            call_id: "s1".into(),
            output: json!({"ok": true, "state": {"stage": "questions", "name": "Ada", "answers": 1}, "warnings": []}),
            is_error: false,
            scheduling: None,
        }]
    );
    // Bad arguments are reported, nothing changes, the model still gets an answer.
    h.provider(ProviderEvent::ToolCall {
        call_id: "s2".into(),
        name: "set_state".into(),
        arguments: json!({"values": [1], "stage": 7}),
    });
    let event = h.take_events().pop().expect("state event");
    assert_eq!(event["updated_keys"], json!([]));
    assert_eq!(event["warnings"].as_array().map(Vec::len), Some(2));
    assert_eq!(event["stage"], "questions");
    // A write past the size bound is refused whole.
    let huge = "x".repeat(STATE_MAX_BYTES);
    h.provider(ProviderEvent::ToolCall {
        call_id: "s3".into(),
        name: "set_state".into(),
        arguments: json!({"values": {"notes": huge}}),
    });
    let event = h.take_events().pop().expect("state event");
    assert!(event["state"].get("notes").is_none());
    assert!(h.timeline_kinds().contains(&"state.updated"));
}

#[test]
fn without_a_state_set_state_is_an_unknown_tool() {
    let mut h = Harness::live(openai(json!({})));
    h.provider(ProviderEvent::ToolCall { call_id: "s1".into(), name: "set_state".into(), arguments: json!({}) });
    assert!(h.take_events().is_empty());
    assert!(matches!(&h.take_inputs()[..], [ProviderInput::ToolResult { is_error: true, .. }]));
}

/// A session with the backend-run tools (the deployment has their backends).
fn with_backend_tools() -> Harness {
    let agent =
        json!({"type": "inline", "model": "provider_b", "tools": [{"kind": "web_search"}, {"kind": "detect_objects"}]});
    Harness::live(resolved_with(agent, json!({}), &ServerToolAvailability::all()))
}

fn call(h: &mut Harness, id: &str, name: &str) {
    h.provider(ProviderEvent::ToolCall { call_id: id.into(), name: name.into(), arguments: json!({"query": "q"}) });
}

/// The error code the model got for `id`, or `None` for a result.
fn answered(h: &mut Harness, id: &str) -> Option<Option<String>> {
    h.take_inputs().into_iter().find_map(|input| match input {
        ProviderInput::ToolResult { call_id, output, is_error, .. } if call_id == id => {
            Some(is_error.then(|| output["error"].as_str().unwrap_or_default().to_owned()))
        }
        _ => None,
    })
}

#[test]
fn backend_tools_run_as_bounded_jobs_answered_exactly_once() {
    let mut h = with_backend_tools();
    for n in 1..=MAX_TOOL_JOBS {
        call(&mut h, &format!("c{n}"), "web_search");
    }
    assert_eq!(h.jobs.len(), MAX_TOOL_JOBS, "each call is a job");
    assert_eq!(h.take_types().iter().filter(|t| *t == "tool-dispatch-started").count(), MAX_TOOL_JOBS);
    call(&mut h, "c5", "web_search");
    assert_eq!(answered(&mut h, "c5"), Some(Some("busy".into())), "a fifth is refused at once");
    h.take_events();
    let result = svc_tools::ToolOutput { result: json!({"results": []}), summary: "0 results".into() };
    h.core.handle_tool_job_done(h.now, "c1", Ok(result.clone()));
    h.collect();
    assert_eq!(answered(&mut h, "c1"), Some(None));
    let events = h.take_events();
    let done = events.iter().find(|e| e["type"] == "tool-result").expect("tool-result");
    assert_eq!((done["ok"].clone(), done["summary"].clone()), (json!(true), json!("0 results")));
    h.core.handle_tool_job_done(h.now, "c1", Ok(result.clone()));
    h.collect();
    assert_eq!(answered(&mut h, "c1"), None, "a second outcome is dropped");
    // The model abandons c2: its job stops and it gets no answer.
    h.provider(ProviderEvent::ToolCallsCancelled { call_ids: vec!["c2".into()] });
    assert_eq!(h.aborted, ["c2"]);
    h.advance(TOOL_JOB_BACKSTOP);
    assert_eq!(h.aborted, ["c2", "c3", "c4"], "jobs past the backstop are aborted");
    let timed_out: Vec<ProviderInput> = h.take_inputs();
    let codes: Vec<&str> = timed_out
        .iter()
        .filter_map(|input| match input {
            ProviderInput::ToolResult { output, .. } => output["error"].as_str(),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["timeout", "timeout"]);
    h.core.handle_tool_job_done(h.now, "c3", Ok(result));
    h.collect();
    assert_eq!(answered(&mut h, "c3"), None, "too late: the model was told");
}

#[test]
fn a_vision_tool_needs_a_fresh_frame_and_the_end_aborts_every_job() {
    let mut h = with_backend_tools();
    call(&mut h, "v1", "detect_objects");
    assert_eq!(answered(&mut h, "v1"), Some(Some("no_video_frame".into())));
    assert!(h.jobs.is_empty());
    let image = json!({"type": "send-image", "mime_type": "image/jpeg", "stream_id": "cam", "data": "/9j/4A=="});
    h.data("alice", image).expect("accepted");
    call(&mut h, "v2", "detect_objects");
    let job = h.jobs.pop().expect("a job");
    assert_eq!(
        job.frame.map(|frame| (frame.mime, frame.data)),
        Some(("image/jpeg".into(), vec![0xff, 0xd8, 0xff, 0xe0]))
    );
    call(&mut h, "s1", "web_search");
    h.core.handle_end_request(h.now, "client_ended");
    h.collect();
    assert_eq!(h.aborted, ["s1", "v2"], "the end aborts every job");
}
