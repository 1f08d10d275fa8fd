//! Tool calls: server tools answered here, client tools over RPC or the data channel, each
//! answered upstream exactly once, with timeouts.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl SessionCore {
    pub(super) fn on_tool_call(&mut self, now: Instant, call_id: String, name: String, arguments: Value) {
        if self.tools.seen(&call_id) {
            return;
        }
        if name == STATE_TOOL_NAME && self.state.is_some() {
            self.write_state(now, call_id, &arguments);
            return;
        }
        if self.client_tools.contains(&name) {
            let request_id = self.tools.invoke(now, &call_id, &name, self.cfg.timing.tool_timeout);
            let origin = match (&self.cfg.session.model.knobs, self.cfg.session.model.delegation) {
                (Knobs::ProviderBLive(_), Some(Delegation::Responses)) => "server",
                _ => "realtime",
            };
            let mut data = json!({"tool_call_id": call_id, "name": name, "request_id": request_id});
            if self.cfg.session.store.transcript {
                data["args"] = arguments.clone();
            }
            self.timeline(now, "tool.invocation", data);
            let args = if arguments.is_object() { arguments } else { json!({"_raw": arguments}) };
            self.emit(
                ServerEvent::ToolInvocation {
                    request_id,
                    tool_call_id: call_id,
                    name,
                    args,
                    origin: origin.to_owned(),
                    executable: true,
                },
                None,
            );
            return;
        }
        match ServerTool::from_wire(&name).filter(|tool| self.server_tools.contains(tool)) {
            Some(tool) => self.run_server_tool(now, call_id, tool, arguments),
            None => {
                self.timeline(now, "tool.unknown", json!({"tool_call_id": call_id, "name": name}));
                self.provider(ProviderInput::ToolResult {
                    call_id,
                    output: json!({"error": "unknown_tool", "message": "This session has no tool by that name."}),
                    is_error: true,
                    scheduling: None,
                });
            }
        }
    }

    pub(super) fn run_server_tool(&mut self, now: Instant, call_id: String, tool: ServerTool, arguments: Value) {
        let name = tool.as_str().to_owned();
        self.emit(ServerEvent::ToolCall { tool_call_id: call_id.clone(), name: name.clone() }, None);
        self.emit(ServerEvent::ToolDispatchStarted { tool_call_id: call_id.clone(), name: name.clone() }, None);
        if tool.backend().is_some() {
            // Runs in the background; `tool-result` follows when it ends (tool_jobs.rs).
            self.start_tool_job(now, call_id, tool, arguments);
            return;
        }
        let (ok, summary, output) = match tool {
            ServerTool::EndCall => {
                self.end_after_goodbye(now, "end_call");
                (
                    true,
                    "ending the call after the goodbye".to_owned(),
                    json!({"ok": true, "message": "The call ends after you finish speaking. Say a short goodbye."}),
                )
            }
            ServerTool::SpeakerLog => {
                let mut data = json!({"tool_call_id": call_id});
                if self.cfg.session.store.transcript {
                    data["entry"] = arguments;
                }
                self.timeline(now, "tool.speaker_log", data);
                (true, "logged".to_owned(), json!({"ok": true}))
            }
            ServerTool::ExamineImage => match self.latest_image.clone() {
                Some((at, mime, data)) if at + FRESH_FRAME > now => {
                    self.provider(ProviderInput::Image { mime, data });
                    let age_ms = millis(now.saturating_duration_since(at));
                    (
                        true,
                        format!("latest frame attached ({age_ms} ms old)"),
                        json!({"ok": true, "frame_age_ms": age_ms,
                            "message": "The latest frame is now in the conversation; look at it to answer."}),
                    )
                }
                _ => (
                    false,
                    "no_fresh_frame".to_owned(),
                    json!({"error": "no_fresh_frame",
                        "message": format!("No camera or screen frame arrived in the last {} s.", FRESH_FRAME.as_secs())}),
                ),
            },
            other => (
                false,
                "not_available".to_owned(),
                json!({"error": "not_available", "message": format!("{other} is not available here.")}),
            ),
        };
        self.timeline(now, "tool.server", json!({"tool_call_id": call_id, "name": name, "ok": ok, "summary": summary}));
        self.provider(ProviderInput::ToolResult { call_id: call_id.clone(), output, is_error: !ok, scheduling: None });
        self.emit(ServerEvent::ToolResult { tool_call_id: call_id, ok, summary: Some(summary) }, None);
    }

    /// `set_state`: merges the model's write into the session state, publishes the whole state
    /// (`svc.session-state`) and answers the model with it.
    pub(super) fn write_state(&mut self, now: Instant, call_id: String, arguments: &Value) {
        let Some(state) = self.state.as_mut() else { return };
        let before = state.clone();
        let mut updated_keys = Vec::new();
        let mut warnings = Vec::new();
        match arguments {
            Value::Object(args) => {
                match args.get("values") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(values)) => {
                        for (key, value) in values {
                            let changed = if value.is_null() {
                                state.remove(key).is_some()
                            } else if state.get(key) != Some(value) {
                                state.insert(key.clone(), value.clone());
                                true
                            } else {
                                false
                            };
                            if changed {
                                updated_keys.push(key.clone());
                            }
                        }
                    }
                    Some(_) => warnings.push("`values` should be an object; it was ignored".to_owned()),
                }
                match args.get("stage") {
                    None | Some(Value::Null) => {}
                    Some(stage @ Value::String(_)) => {
                        if state.get("stage") != Some(stage) {
                            state.insert("stage".to_owned(), stage.clone());
                            if !updated_keys.iter().any(|key| key == "stage") {
                                updated_keys.push("stage".to_owned());
                            }
                        }
                    }
                    Some(_) => warnings.push("`stage` should be a string; it was ignored".to_owned()),
                }
                if args.keys().any(|key| key != "values" && key != "stage") {
                    warnings.push("only `values` and `stage` are read; other arguments were ignored".to_owned());
                }
            }
            _ => warnings.push("the arguments should be an object with `values` and `stage`".to_owned()),
        }
        if Value::Object(state.clone()).to_string().len() > STATE_MAX_BYTES {
            *state = before;
            updated_keys.clear();
            warnings
                .push(format!("the write would make the state larger than {STATE_MAX_BYTES} bytes; it was refused"));
        }
        let state = Value::Object(state.clone());
        let stage = state.get("stage").and_then(Value::as_str).map(str::to_owned);
        let mut data = json!({"tool_call_id": call_id, "updated_keys": updated_keys, "warnings": warnings});
        if self.cfg.session.store.transcript {
            data["state"] = state.clone();
        }
        self.timeline(now, "state.updated", data);
        self.provider(ProviderInput::ToolResult {
            call_id,
            output: json!({"ok": warnings.is_empty(), "state": state, "warnings": warnings}),
            is_error: false,
            scheduling: None,
        });
        self.emit(ServerEvent::SessionState { state, updated_keys, warnings, stage }, None);
    }
}
