//! Playback of the agent's audio, turn state and markers, and the transcripts of what was
//! actually heard.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl SessionCore {
    /// Releases every frame that is due.
    pub(super) fn pump(&mut self, now: Instant) {
        while let Some(released) = self.playback.release(now) {
            let pcm = released.pcm.map(|pcm| (pcm, self.playback.rate_hz()));
            self.outputs.push_back(Output::Audio {
                opus: released.opus,
                due: released.due,
                silence: released.silence,
                pcm,
            });
            if released.first {
                if let Some(response) = self.playback.response(released.seq) {
                    response.speaking = true;
                }
                self.thinking_since = None;
                self.hooks.disarm();
                self.emit(ServerEvent::BotTtsStarted, None);
                self.emit(ServerEvent::BotStartedSpeaking, None);
                if let Some(ended) = self.user_turn_ended_at.take() {
                    let latency_ms = millis(now.saturating_duration_since(ended));
                    self.timeline(now, "turn.latency", json!({"response_ms": latency_ms}));
                }
            }
            for fragment in released.fragments {
                self.emit(ServerEvent::Transcript { role: Speaker::Assistant, text: fragment, is_final: false }, None);
            }
            let seq = released.seq;
            self.maybe_finish(now, seq);
        }
    }

    /// Finishes a response whose audio has all been played and whose generation is done.
    pub(super) fn maybe_finish(&mut self, now: Instant, seq: u64) {
        let pending = self.playback.pending_of(seq);
        let Some(response) = self.playback.response(seq) else { return };
        if response.finished || (!response.done && !response.cut) || (pending && !response.cut) {
            return;
        }
        if response.final_text.is_none()
            && (response.had_audio() || response.had_text || !response.fragments.is_empty())
        {
            // The final transcript may still be on its way.
            if !self.pending_finals.iter().any(|(s, _)| *s == seq) {
                self.pending_finals.push((seq, now + FINAL_TRANSCRIPT_GRACE));
            }
            self.stop_speaking(seq);
            return;
        }
        self.finish_response(now, seq, false);
    }

    pub(super) fn stop_speaking(&mut self, seq: u64) {
        if let Some(response) = self.playback.response(seq)
            && response.speaking
        {
            response.speaking = false;
            self.emit(ServerEvent::BotTtsStopped, None);
            self.emit(ServerEvent::BotStoppedSpeaking, None);
        }
    }

    /// Ends a response: stop markers, the final transcript and `turn-complete`. With `forced`,
    /// the final is what was heard because the provider sent none in time.
    pub(super) fn finish_response(&mut self, now: Instant, seq: u64, forced: bool) {
        self.stop_speaking(seq);
        self.pending_finals.retain(|(s, _)| *s != seq);
        let text_only = !self.cfg.session.agent.audio.output;
        let Some(response) = self.playback.response(seq) else { return };
        if response.finished {
            return;
        }
        response.finished = true;
        let heard_all = !response.cut;
        let text = match (&response.final_text, forced) {
            (Some(text), false) => Some(text.clone()),
            _ => {
                let heard = response.heard_text();
                response.released_text.clear();
                if heard_all {
                    response.fragments.clear();
                }
                let heard = heard.trim();
                (!heard.is_empty()).then(|| heard.to_owned())
            }
        };
        // A reply cut before its first word was heard is neither a turn nor an empty transcript.
        let text = text.filter(|text| !text.trim().is_empty());
        let had_content =
            if response.cut { text.is_some() } else { response.had_audio() || response.had_text || text.is_some() };
        if !had_content {
            self.playback.prune();
            return;
        }
        let text = text.unwrap_or_default();
        if !text_only {
            self.emit(ServerEvent::Transcript { role: Speaker::Assistant, text: text.clone(), is_final: true }, None);
        }
        self.emit(ServerEvent::TurnComplete { role: Speaker::Assistant }, None);
        if !text.trim().is_empty() {
            self.store_turn(now, self.ts_us(now), "assistant", text.trim());
        }
        self.turn_count += 1;
        self.thinking_since = None;
        self.playback.prune();
        if self.playback.queued() == 0 {
            self.hooks.arm(now);
        }
    }

    /// The user talks over the agent: drop what was not played, tell the provider how much was.
    pub(super) fn barge_in(&mut self, now: Instant, cause: &'static str) {
        let target = self
            .playback
            .responses
            .iter()
            .find(|r| !r.finished && !r.cut && (r.released > 0 || r.enqueued > 0))
            .map(|r| (r.seq, r.played_ms(), r.released > 0));
        let Some((seq, played_ms, audible)) = target else { return };
        let dropped = self.playback.clear();
        self.stop_speaking(seq);
        self.timeline(now, "turn.barge_in", json!({"played_ms": played_ms, "dropped_frames": dropped, "cause": cause}));
        // Responses queued behind it were never heard: they end without a turn.
        let unheard: Vec<u64> =
            self.playback.responses.iter().filter(|r| !r.finished && r.seq != seq).map(|r| r.seq).collect();
        for other in unheard {
            if let Some(response) = self.playback.response(other) {
                response.finished = true;
            }
        }
        if audible {
            self.provider(ProviderInput::BargeIn { played_ms });
            // The adapter answers with the heard text (a final or a truncation); until then, or
            // if it does not, the fragments released so far are the final.
            if !self.pending_finals.iter().any(|(s, _)| *s == seq) {
                self.pending_finals.insert(0, (seq, now + FINAL_TRANSCRIPT_GRACE));
            }
            if let Some(response) = self.playback.response(seq) {
                response.final_text = None;
            }
        } else {
            self.provider(ProviderInput::BargeIn { played_ms: 0 });
            if let Some(response) = self.playback.response(seq) {
                response.finished = true;
            }
        }
    }
}
