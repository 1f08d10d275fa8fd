//! What the session's clients send on the data channel: ready, text, context, images, tool
//! results, state, delegation appends, chunked envelopes.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl SessionCore {
    pub(super) fn handle_message(&mut self, now: Instant, from: &str, message: ClientMessage) {
        match message {
            ClientMessage::Mute { muted } => {
                if muted != self.muted {
                    self.muted = muted;
                    self.provider(ProviderInput::Mute(muted));
                    if muted && let Some(gate) = self.gate.as_mut() {
                        let events = gate.force_end();
                        for event in events {
                            self.gate_event(now, event);
                        }
                    }
                    self.timeline(now, "input.mute", json!({"muted": muted, "from": from}));
                }
            }
            ClientMessage::SendText { content } => {
                self.barge_in(now, "send-text");
                self.hooks.user_spoke();
                self.emit(ServerEvent::Transcript { role: Speaker::User, text: content.clone(), is_final: true }, None);
                self.emit(ServerEvent::TurnComplete { role: Speaker::User }, None);
                self.store_turn(now, self.ts_us(now), "user", &content);
                self.user_turn_ended_at = Some(now);
                self.thinking_since = Some(now);
                self.provider(ProviderInput::Text(content));
            }
            ClientMessage::SendContext { content } => self.provider(ProviderInput::Context(content)),
            ClientMessage::SendImage { mime_type, data, stream_id } => {
                let Some(bytes) = inbound::decode_image(&data) else {
                    tracing::debug!(session.id = %self.cfg.session_id, "send-image data is not base64; dropped");
                    return;
                };
                // Kept only for the tools that look at it (`examine_image`, the vision tools).
                if self.server_tools.iter().any(|tool| tool.looks_at_frames()) {
                    self.latest_image = Some((now, mime_type.clone(), bytes.clone()));
                }
                self.timeline(now, "input.image", json!({"stream_id": stream_id, "bytes": bytes.len()}));
                self.provider(ProviderInput::Image { mime: mime_type, data: bytes });
            }
            ClientMessage::ActivityEnd => match self.gate.as_mut() {
                Some(gate) => {
                    let events = gate.force_end();
                    for event in events {
                        self.gate_event(now, event);
                    }
                }
                None => self.provider(ProviderInput::ActivityEnd),
            },
            ClientMessage::BindInput => self.bind(now, Some(from.to_owned()), true),
            ClientMessage::ToolJobResult { job_id, tool_name, status, result, summary, error } => {
                if !self.client_tools.contains(&tool_name) {
                    tracing::debug!(session.id = %self.cfg.session_id, "tool_job_result for an undeclared tool; dropped");
                    return;
                }
                if !self.tools.first_job_result(&job_id) {
                    return;
                }
                let outcome = match status {
                    JobStatus::Completed => "completed",
                    JobStatus::Failed => "failed",
                };
                let detail = match (status, &summary, &error, &result) {
                    (JobStatus::Failed, _, Some(error), _) => error.clone(),
                    (_, Some(summary), _, _) => summary.clone(),
                    (_, _, _, Some(result)) => result.to_string(),
                    _ => String::new(),
                };
                let text = format!(
                    "The background job {job_id} of the tool {tool_name} has {outcome}. {detail}\n\
                     Tell the user about it when it fits the conversation."
                );
                let mut data = json!({"job_id": job_id, "name": tool_name, "status": outcome});
                if self.cfg.session.store.transcript {
                    data["detail"] = json!(detail);
                }
                self.timeline(now, "tool.job_result", data);
                self.provider(ProviderInput::Note { text, respond: true });
            }
            ClientMessage::DelegationAppend { channel, content, delegation_id } => {
                let delegating =
                    matches!(self.cfg.session.model.delegation, Some(Delegation::Client | Delegation::Svc));
                let known = delegation_id.as_ref().is_none_or(|id| self.delegations.contains(id));
                if !delegating || !known {
                    tracing::debug!(session.id = %self.cfg.session_id, delegating, known, "delegation-append dropped");
                    return;
                }
                let channel = match channel {
                    DelegationChannel::Thinking => AppendChannel::Thinking,
                    DelegationChannel::Commentary => AppendChannel::Commentary,
                    DelegationChannel::Instructions => AppendChannel::Instructions,
                };
                self.provider(ProviderInput::DelegationAppend { delegation_id, channel, content });
            }
            ClientMessage::ConnectTimings { mic_ms, ready_ms, request_ms, room_ms, server } => {
                if !self.connect_timings_taken {
                    self.connect_timings_taken = true;
                    let data = json!({"mic_ms": mic_ms, "ready_ms": ready_ms, "request_ms": request_ms,
                        "room_ms": room_ms, "server": server, "from": from});
                    self.timeline(now, "client.connect_timings", data);
                }
            }
            ClientMessage::End => self.finish(now, "client_ended", EndStatus::Completed),
            ClientMessage::Ping => self.emit(ServerEvent::Pong, Some(from)),
            ClientMessage::EnvelopeChunk(_) => {}
        }
    }

    pub(super) fn bind(&mut self, now: Instant, identity: Option<String>, sticky: bool) {
        self.bind_sticky |= sticky;
        if self.bound == identity {
            return;
        }
        self.bound = identity.clone();
        if let Some(gate) = self.gate.as_mut() {
            let events = gate.force_end();
            for event in events {
                self.gate_event(now, event);
            }
        }
        self.timeline(now, "input.bound", json!({"identity": identity, "sticky": sticky}));
        self.outputs.push_back(Output::BindInput(identity));
    }
}
