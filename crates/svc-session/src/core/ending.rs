//! Silence hooks, the duration cap, goodbyes and the end of the session (what is stored).

// The parent's types and imports: this file only adds methods by concern.
use super::*;

/// What a `say` hook with neither `text` nor `prompt` asks of the model: the check-in that
/// Pipecat's and LiveKit's "user idle" examples make, phrased by the model in the conversation's
/// language and tone.
pub(super) const CHECK_IN_PROMPT: &str =
    "Check in briefly: ask whether they are still there, in one short sentence, in the language of the conversation.";

impl SessionCore {
    pub(super) fn fire_hook(&mut self, now: Instant, firing: Firing) {
        let action = serde_json::to_value(&firing.hook.action).unwrap_or(Value::Null);
        self.timeline(
            now,
            "hook.fired",
            json!({"name": firing.hook.name, "trigger_count": firing.trigger_count, "silence_ms": firing.silence_ms}),
        );
        self.emit(
            ServerEvent::UserSpeechTimeout {
                session_id: self.cfg.session_id.clone(),
                silence_ms: firing.silence_ms,
                trigger_count: firing.trigger_count,
                max_count: firing.hook.effective_max_count(),
                action,
            },
            None,
        );
        let silence_s = firing.silence_ms as f64 / 1000.0;
        match firing.hook.action {
            HookAction::Say { text: Some(text), .. } => self.provider(ProviderInput::Greeting(text)),
            HookAction::Say { text: None, prompt } => {
                let prompt = prompt.unwrap_or_else(|| CHECK_IN_PROMPT.to_owned());
                self.provider(ProviderInput::Note {
                    text: format!("The user has been silent for {silence_s:.0} seconds. {prompt}"),
                    respond: true,
                });
            }
            HookAction::EndCall { farewell: Some(farewell) } => {
                self.provider(ProviderInput::Greeting(farewell));
                self.end_after_goodbye(now, "silence_timeout");
            }
            HookAction::EndCall { farewell: None } => self.finish(now, "silence_timeout", EndStatus::Completed),
        }
    }

    pub(super) fn end_after_goodbye(&mut self, now: Instant, reason: &'static str) {
        if self.pending_end.is_none() {
            let seq_at_request = self.playback.responses.back().map_or(0, |r| r.seq);
            self.pending_end =
                Some(PendingEnd { reason, status: EndStatus::Completed, requested_at: now, seq_at_request });
        }
    }

    /// Checks that run after every input: a pending end whose goodbye is over.
    pub(super) fn after(&mut self, now: Instant) {
        if self.phase == Phase::Finished {
            return;
        }
        // Someone may have just become able to hear queued audio.
        self.pump(now);
        if let Some(end) = &self.pending_end {
            let idle = self.playback.queued() == 0 && self.playback.responses.iter().all(|r| r.finished);
            let newest = self.playback.responses.back().map_or(0, |r| r.seq);
            let waited = now.saturating_duration_since(end.requested_at);
            let goodbye_over = idle && (newest > end.seq_at_request || waited >= GOODBYE_START_GRACE);
            if goodbye_over || waited >= GOODBYE_MAX_WAIT {
                let (reason, status) = (end.reason, end.status);
                self.finish(now, reason, status);
                return;
            }
        }
        self.update_agent_state(now);
    }

    /// The session's recording could not be made, written or finished (`error` says which and
    /// why): the session goes on without it, and the timeline says so (also after the end, for
    /// a recording that failed to finish).
    pub fn handle_recording_failed(&mut self, now: Instant, error: &str) {
        self.timeline(now, "recording.failed", json!({"error": error}));
    }

    /// Tells the clients the session ends at `end` for `reason` (`session-ending-soon`).
    pub(super) fn warn_ending_soon(&mut self, now: Instant, end: Instant, reason: &str) {
        let seconds_remaining = end.saturating_duration_since(now).as_secs_f64();
        self.emit(ServerEvent::SessionEndingSoon { seconds_remaining, reason: reason.to_owned() }, None);
        self.timeline(now, "session.ending_soon", json!({"seconds_remaining": seconds_remaining, "reason": reason}));
    }

    /// When a drain warns and when it ends the session; `None` without a drain, or when the
    /// duration cap ends the session first (the cap's own warning covers it).
    pub(super) fn drain_times(&self) -> Option<(Instant, Instant)> {
        let end = self.drain_end?;
        if self.cap().is_some_and(|cap| self.cap_times(cap).1 <= end) {
            return None;
        }
        Some((end.checked_sub(self.cfg.timing.ending_soon_lead).unwrap_or(self.start).max(self.start), end))
    }

    /// Carries out a drain's warning and end when due; true once the session has ended.
    pub(super) fn drain_due(&mut self, now: Instant) -> bool {
        let Some((soon, end)) = self.drain_times() else { return false };
        if now >= end {
            self.finish(now, "server_shutdown", EndStatus::Completed);
            return true;
        }
        if !self.drain_warned && now >= soon {
            self.drain_warned = true;
            self.warn_ending_soon(now, end, "server_shutdown");
        }
        false
    }

    pub(super) fn fatal(&mut self, now: Instant, code: &str, message: &str) {
        if self.phase == Phase::Finished {
            return;
        }
        self.emit(ServerEvent::Error { code: code.to_owned(), message: message.to_owned(), fatal: true }, None);
        self.finish(now, "upstream_error", EndStatus::Error);
    }

    pub(super) fn finish(&mut self, now: Instant, reason: &str, status: EndStatus) {
        if self.phase == Phase::Finished {
            return;
        }
        // A reply the user was hearing when the session ended is a turn, stored as far as it was
        // heard (as after a barge-in: the provider's final covers words never played).
        let heard: Vec<u64> =
            self.playback.responses.iter().filter(|r| !r.finished && r.released > 0).map(|r| r.seq).collect();
        for seq in heard {
            let unplayed = self.playback.pending_of(seq);
            let Some(response) = self.playback.response(seq) else { continue };
            response.cut |= unplayed;
            // Only words heard make a turn: audio without a transcript (yet) leaves none.
            if !response.heard_text().trim().is_empty() {
                self.finish_response(now, seq, true);
            }
        }
        self.playback.clear();
        self.emit(ServerEvent::SessionEnded { reason: reason.to_owned() }, None);
        let usage = self.usage_totals(now);
        let status_slug = match status {
            EndStatus::Completed => "completed",
            EndStatus::Error => "error",
        };
        self.timeline(
            now,
            "session.ended",
            json!({"reason": reason, "status": status_slug, "turns": usage.turn_count,
                "user_speaking_ms": usage.user_speaking_ms, "agent_speaking_ms": usage.agent_speaking_ms}),
        );
        self.tools.close_all();
        self.abort_tool_jobs();
        self.provider(ProviderInput::Close);
        self.phase = Phase::Finished;
        self.outputs.push_back(Output::Finished(Finish { status, reason: reason.to_owned(), usage }));
    }

    /// Usage so far (with what ran before a takeover).
    pub fn usage_totals(&self, now: Instant) -> UsageTotals {
        let ongoing = self.user_speaking_since.map_or(0, |since| millis(now.saturating_duration_since(since)));
        let here = UsageTotals {
            turn_count: self.turn_count,
            user_speaking_ms: self.user_speaking_ms + ongoing,
            agent_speaking_ms: i64::try_from(self.playback.released_total).unwrap_or(i64::MAX)
                * FRAME.as_millis() as i64,
            tokens: self.tokens.clone(),
        };
        self.carried.plus(&here)
    }

    pub(super) fn cap(&self) -> Option<Duration> {
        self.cfg.session.max_session_seconds.map(|seconds| Duration::from_secs(u64::from(seconds)))
    }

    pub(super) fn cap_times(&self, cap: Duration) -> (Instant, Instant) {
        let lead = self.cfg.timing.ending_soon_lead.min(cap / 2);
        (self.start + cap - lead, self.start + cap)
    }

    pub(super) fn update_agent_state(&mut self, now: Instant) {
        let speaking = self.playback.responses.iter().any(|r| r.speaking);
        let responding = self.playback.responses.iter().any(|r| !r.done && !r.cut);
        let state = if !self.provider_ready {
            "initializing"
        } else if speaking {
            "speaking"
        } else if self.thinking_since.is_some_and(|since| now < since + THINKING_MAX) || responding {
            "thinking"
        } else {
            "listening"
        };
        if state != self.agent_state {
            self.agent_state = state;
            self.outputs
                .push_back(Output::Attributes(BTreeMap::from([(AGENT_STATE_ATTRIBUTE.to_owned(), state.to_owned())])));
        }
    }
}
