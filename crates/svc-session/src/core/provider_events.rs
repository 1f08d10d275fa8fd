//! What the provider adapter reports (audio, transcripts, turns, tool calls, usage, errors), and
//! the svc_vad turn gate's events that drive the provider's activity signals.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl SessionCore {
    pub(super) fn on_provider_ready(&mut self, now: Instant, upstream_session_id: Option<String>) {
        if self.provider_ready {
            return;
        }
        self.provider_ready = true;
        self.timeline(now, "provider.ready", json!({"upstream_session_id": upstream_session_id}));
        let ready = self.ready_event();
        let json = ready_json(&ready);
        let attribute = if json.len() <= READY_ATTRIBUTE_MAX_BYTES {
            json
        } else {
            json!({"type": "ready", "session_id": self.cfg.session_id,
                "max_session_seconds": self.cfg.session.max_session_seconds})
            .to_string()
        };
        self.outputs.push_back(Output::Attributes(BTreeMap::from([(READY_ATTRIBUTE.to_owned(), attribute)])));
        self.emit(ready, None);
        if !self.peers.is_empty() && self.user_may_speak_first() {
            self.hooks.arm(now);
        }
    }

    /// Without a greeting (or on resume, which never greets) the user is expected to speak
    /// first, so the silence clock runs from when both sides are there.
    pub(super) fn user_may_speak_first(&self) -> bool {
        self.cfg.session.agent.greeting.is_none() || self.cfg.session.resume_session_id.is_some()
    }

    pub(super) fn ready_event(&self) -> ServerEvent {
        let session = &self.cfg.session;
        ServerEvent::Ready {
            session_id: self.cfg.session_id.clone(),
            agent: session.ready_agent(),
            rejected_tools: session
                .rejected_tools
                .iter()
                .map(|tool| RejectedToolEntry { name: tool.name.clone(), reason: tool.reason.clone() })
                .collect(),
            max_session_seconds: session.max_session_seconds,
        }
    }

    pub(super) fn user_started(&mut self, now: Instant) {
        if self.user_speaking_since.is_none() {
            self.user_speaking_since = Some(now);
        }
        self.hooks.user_spoke();
        self.thinking_since = None;
        self.emit(ServerEvent::UserStartedSpeaking, None);
    }

    pub(super) fn user_stopped(&mut self, now: Instant) {
        if let Some(since) = self.user_speaking_since.take() {
            self.user_speaking_ms += millis(now.saturating_duration_since(since));
        }
        self.user_turn_ended_at = Some(now);
        self.thinking_since = Some(now);
        self.emit(ServerEvent::UserStoppedSpeaking, None);
    }

    pub(super) fn on_user_transcript(&mut self, now: Instant, text: String, is_final: bool, speech_started_ms: u64) {
        if is_final {
            if text.trim().is_empty() {
                return;
            }
            self.emit(ServerEvent::Transcript { role: Speaker::User, text: text.clone(), is_final: true }, None);
            self.emit(ServerEvent::TurnComplete { role: Speaker::User }, None);
            let ts = self.cfg.started_at_us + i64::try_from(speech_started_ms * 1000).unwrap_or(i64::MAX / 2);
            self.store_turn(now, ts, "user", &text);
            if let Some(gate) = self.gate.as_mut() {
                gate.set_transcript_hint(&text);
            }
        } else if !text.is_empty() {
            if let Some(gate) = self.gate.as_mut() {
                gate.append_transcript_hint(&text);
            }
            self.emit(ServerEvent::Transcript { role: Speaker::User, text, is_final: false }, None);
        }
    }

    pub(super) fn on_response_started(&mut self, now: Instant) {
        if let Some(open) = self.playback.open_response() {
            // A response that never said it ended is over once the next one starts.
            open.done = true;
            let seq = open.seq;
            self.maybe_finish(now, seq);
        }
        self.playback.start_response();
        self.hooks.disarm();
        if self.thinking_since.is_none() {
            self.thinking_since = Some(now);
        }
        self.emit(ServerEvent::BotLlmStarted, None);
    }

    pub(super) fn on_response_done(&mut self, now: Instant, status: &ResponseStatus) {
        self.emit(ServerEvent::BotLlmStopped, None);
        let Some(seq) = self.playback.responses.iter().rev().find(|r| !r.done).map(|r| r.seq) else { return };
        self.playback.flush_remainder();
        if let Some(response) = self.playback.response(seq) {
            response.done = true;
        }
        if *status == ResponseStatus::Failed {
            self.emit(
                ServerEvent::Error {
                    code: "internal_error".into(),
                    message: "The model's response failed.".into(),
                    fatal: false,
                },
                None,
            );
        }
        self.maybe_finish(now, seq);
    }

    pub(super) fn on_assistant_audio(&mut self, now: Instant, pcm: &[i16], rate_hz: u32) {
        if !self.cfg.session.agent.audio.output {
            return;
        }
        let newest = self.playback.responses.back();
        let cut = newest.is_some_and(|r| r.cut && !r.done);
        if cut {
            // Audio of a response the user interrupted: never heard.
            return;
        }
        if newest.is_none_or(|r| r.done) {
            // Audio without a response to belong to: it starts one.
            self.on_response_started(now);
        }
        if !self.playback.push_pcm(pcm, rate_hz) {
            tracing::warn!(session.id = %self.cfg.session_id, rate_hz, "provider audio at a rate Opus cannot encode; dropped");
        }
        self.pump(now);
    }

    pub(super) fn on_assistant_transcript(&mut self, now: Instant, text: String, is_final: bool) {
        if !is_final {
            if text.is_empty() {
                return;
            }
            if self.playback.push_fragment(text.clone()).is_none() {
                // No response to pace it by: it is heard as it comes.
                self.emit(ServerEvent::Transcript { role: Speaker::Assistant, text, is_final: false }, None);
            }
            self.pump(now);
            return;
        }
        let target = self.playback.responses.iter().rev().find(|r| !r.finished).map(|r| r.seq);
        match target {
            Some(seq) => {
                if let Some(response) = self.playback.response(seq) {
                    response.final_text = Some(text);
                }
                self.maybe_finish(now, seq);
            }
            // A final with no response to pace it by (an adapter that sent no response events).
            None if !text.trim().is_empty() => {
                self.emit(
                    ServerEvent::Transcript { role: Speaker::Assistant, text: text.clone(), is_final: true },
                    None,
                );
                self.emit(ServerEvent::TurnComplete { role: Speaker::Assistant }, None);
                self.store_turn(now, self.ts_us(now), "assistant", &text);
                self.turn_count += 1;
            }
            None => {}
        }
    }

    pub(super) fn on_truncated(&mut self, now: Instant, heard: String) {
        // The cut response waiting for its final, else the newest unfinished one.
        let target = self
            .pending_finals
            .first()
            .map(|(seq, _)| *seq)
            .or_else(|| self.playback.responses.iter().rev().find(|r| !r.finished).map(|r| r.seq));
        if let Some(seq) = target
            && let Some(response) = self.playback.response(seq)
        {
            response.final_text = Some(heard);
            self.maybe_finish(now, seq);
        }
    }

    pub(super) fn on_model_text(&mut self, now: Instant, text: String, is_final: bool, thought: bool) {
        let text_only = !self.cfg.session.agent.audio.output;
        if !text_only || thought {
            if !text.is_empty() || is_final {
                self.emit(ServerEvent::ModelText { text, is_final: is_final && !thought }, None);
            }
            return;
        }
        // Text-only: model text is the response.
        let seq = match self.playback.responses.iter().rev().find(|r| !r.finished && !r.cut) {
            Some(response) => response.seq,
            None => {
                self.on_response_started(now);
                self.playback.responses.back().map_or(0, |r| r.seq)
            }
        };
        if let Some(response) = self.playback.response(seq) {
            response.had_text = true;
            if is_final {
                response.final_text = Some(text.clone());
            }
        }
        self.emit(ServerEvent::ModelText { text, is_final }, None);
        if is_final {
            self.maybe_finish(now, seq);
        }
    }

    pub(super) fn on_provider_error(&mut self, now: Instant, error: ProviderError) {
        if error.fatal {
            self.timeline(now, "provider.error", json!({"code": error.code, "message": error.message, "fatal": true}));
            self.fatal(now, "upstream_disconnect", &error.message);
        } else {
            self.timeline(now, "provider.error", json!({"code": error.code, "message": error.message, "fatal": false}));
            self.emit(ServerEvent::Error { code: "internal_error".into(), message: error.message, fatal: false }, None);
        }
    }

    // svc_vad

    pub(super) fn gate_event(&mut self, now: Instant, event: GateEvent) {
        match event {
            GateEvent::SpeechStarted { preroll } => {
                // The user talks over the agent: it stops at once, without waiting for the model.
                self.barge_in(now, "svc_vad");
                self.provider(ProviderInput::ActivityStart);
                if !preroll.is_empty() {
                    self.provider(ProviderInput::NativeAudio(preroll));
                }
            }
            GateEvent::Audio(pcm) => self.provider(ProviderInput::NativeAudio(pcm)),
            GateEvent::SpeechEnded => self.provider(ProviderInput::ActivityEnd),
        }
    }
}
