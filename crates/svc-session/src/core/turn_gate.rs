//! `svc_vad` in a session: svc's own turn detection for provider_a (the default there), driving
//! the upstream's manual activity start and end.
//!
//! The gate runs [`svc_audio::vad::TurnDetector`] on the user's 16 kHz audio. Between turns
//! nothing goes upstream (the model hears no silence and no noise); when a turn starts, the core
//! sends `ActivityStart` and the detector's pre-roll, then the live audio, then `ActivityEnd` when
//! the turn ends. The knobs come from the session's `svc_vad` object (`pause_ms`, `prefix_ms`,
//! `max_hold_ms`) over the detector's defaults, and the agent's `interruption_sensitivity` tunes
//! how readily a voice counts as the user taking the turn.
//!
//! The "semantic" part: while the user's transcript so far ends in a word that leaves a sentence
//! open ("and", "but", "because", "the", "um", …, English only), the end of the turn is held for
//! up to `max_hold_ms` more, so a user who pauses mid-sentence is not cut off. It is a word-list
//! heuristic, not a turn model: nothing heavier runs offline on two cores per session.

use svc_audio::vad::{Sensitivity, TurnDetector, TurnDetectorConfig, VadOutput};
use svc_domain::model::{Knobs, ProviderATurnDetection};
use svc_domain::session_config::InterruptionSensitivity;
use svc_domain::start::ResolvedSession;

/// Words after which an English sentence is rarely over.
const OPEN_ENDINGS: [&str; 32] = [
    "and", "but", "or", "so", "because", "if", "when", "then", "that", "which", "who", "the", "a", "an", "to", "of",
    "for", "with", "in", "on", "at", "my", "your", "our", "is", "are", "was", "um", "uh", "er", "like", "i",
];

/// What the gate decided about a chunk of user audio.
#[derive(Debug, Clone, PartialEq)]
pub enum GateEvent {
    /// The user started speaking; `preroll` is the audio from just before the start.
    SpeechStarted {
        /// Audio before the start.
        preroll: Vec<i16>,
    },
    /// Audio of the user's turn.
    Audio(Vec<i16>),
    /// The user's turn ended.
    SpeechEnded,
}

/// The gate of one session.
#[derive(Debug)]
pub struct TurnGate {
    detector: TurnDetector,
    /// The transcript of the open turn, for the hold.
    transcript: String,
    outputs: Vec<VadOutput>,
}

impl TurnGate {
    /// The gate of a session that uses `svc_vad` (provider_a's default detector), fed at
    /// `rate_hz` (which must be the detector's 16 kHz); `None` for every other session.
    pub fn for_session(session: &ResolvedSession, rate_hz: u32) -> Option<TurnGate> {
        let Knobs::ProviderA(knobs) = &session.model.knobs else { return None };
        let ProviderATurnDetection::SvcVad(params) = &knobs.turn_detection else { return None };
        if rate_hz != svc_audio::vad::RATE_HZ {
            return None;
        }
        let defaults = TurnDetectorConfig::default();
        let config = TurnDetectorConfig {
            prefix_ms: params.prefix_ms.unwrap_or(defaults.prefix_ms),
            pause_ms: params.pause_ms.unwrap_or(defaults.pause_ms),
            max_hold_ms: params.max_hold_ms.unwrap_or(defaults.max_hold_ms),
            ..defaults
        };
        let sensitivity = match session.agent.interruption_sensitivity {
            InterruptionSensitivity::Low => Sensitivity::Low,
            InterruptionSensitivity::Default => Sensitivity::Default,
            InterruptionSensitivity::High => Sensitivity::High,
        };
        Some(TurnGate {
            detector: TurnDetector::new(config.with_sensitivity(sensitivity)),
            transcript: String::new(),
            outputs: Vec::new(),
        })
    }

    /// Takes user audio; returns what it means for the upstream, in order.
    pub fn push(&mut self, pcm: &[i16]) -> Vec<GateEvent> {
        self.outputs.clear();
        self.detector.push(pcm, &mut self.outputs);
        self.drain()
    }

    /// Ends an open turn now (`activity-end`, mute, a new input binding).
    pub fn force_end(&mut self) -> Vec<GateEvent> {
        self.outputs.clear();
        self.detector.force_end(&mut self.outputs);
        self.drain()
    }

    /// The transcript of the user's turn so far replaces the previous one.
    pub fn set_transcript_hint(&mut self, text: &str) {
        self.transcript.clear();
        self.transcript.push_str(text);
        self.detector.set_hold(looks_unfinished(&self.transcript));
    }

    /// A fragment of the user's transcript.
    pub fn append_transcript_hint(&mut self, text: &str) {
        self.transcript.push_str(text);
        // Only the end matters; keep the text short.
        if self.transcript.len() > 256 {
            let mut cut = self.transcript.len() - 128;
            while !self.transcript.is_char_boundary(cut) {
                cut += 1;
            }
            self.transcript.drain(..cut);
        }
        self.detector.set_hold(looks_unfinished(&self.transcript));
    }

    fn drain(&mut self) -> Vec<GateEvent> {
        let mut events = Vec::with_capacity(self.outputs.len());
        let mut starting = false;
        for output in self.outputs.drain(..) {
            match output {
                VadOutput::Started => starting = true,
                // The first audio after a start is its pre-roll.
                VadOutput::Audio(pcm) if starting => {
                    starting = false;
                    events.push(GateEvent::SpeechStarted { preroll: pcm });
                }
                VadOutput::Audio(pcm) => events.push(GateEvent::Audio(pcm)),
                VadOutput::Ended(_) => {
                    if starting {
                        starting = false;
                        events.push(GateEvent::SpeechStarted { preroll: Vec::new() });
                    }
                    self.transcript.clear();
                    events.push(GateEvent::SpeechEnded);
                }
            }
        }
        if starting {
            events.push(GateEvent::SpeechStarted { preroll: Vec::new() });
        }
        events
    }
}

/// Whether `text` ends in a word that leaves the sentence open.
fn looks_unfinished(text: &str) -> bool {
    let trimmed = text.trim_end();
    if trimmed.ends_with(['.', '?', '!']) {
        return false;
    }
    let last = trimmed.rsplit(|c: char| c.is_whitespace()).next().unwrap_or("");
    let word: String = last.chars().filter(|c| c.is_alphanumeric() || *c == '\'').collect::<String>().to_lowercase();
    trimmed.ends_with(',') || OPEN_ENDINGS.contains(&word.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_left_open_are_held() {
        for open in ["I want to book a table and", "so, um", "my order number is, ", "Because the"] {
            assert!(looks_unfinished(open), "{open:?}");
        }
        for done in ["That is all.", "What time is it?", "thanks", "I ordered two"] {
            assert!(!looks_unfinished(done), "{done:?}");
        }
    }
}
