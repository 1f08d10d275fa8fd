//! Where a reply's time goes: the shell notes when each stage of a turn happened and, when the
//! reply's first audio leaves, logs one line (target `svc_local::timing`, level debug) with every
//! stage's time relative to the end of the user's speech. A stage before it (a draft transcribed
//! and its reply begun during the end-of-turn silence) shows as a negative time.
//!
//! `SVC_LOG=info,svc_local::timing=debug svc serve` shows them; `local-turns` reads them to say
//! which stage a slow turn spent its time in.

use std::time::Instant;

/// The stages of one turn, as the shell saw them.
#[derive(Debug, Default)]
pub(crate) struct TurnTiming {
    speech_stopped: Option<Instant>,
    transcribe_started: Option<Instant>,
    transcribed: Option<Instant>,
    generate_started: Option<Instant>,
    first_text: Option<Instant>,
    speak_started: Option<Instant>,
    spoken: Option<Instant>,
    /// The turn's line was written (later audio belongs to the same reply).
    reported: bool,
}

/// A point of a turn the shell passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The user started speaking: a new turn.
    SpeechStarted,
    /// The turn detector ended the turn.
    SpeechStopped,
    /// A whole-turn transcription (a draft's or the turn's) started.
    TranscribeStarted,
    /// It finished.
    Transcribed,
    /// A generation started.
    GenerateStarted,
    /// A generation's text arrived.
    Text,
    /// A sentence's synthesis started.
    SpeakStarted,
    /// It finished.
    Spoken,
}

impl TurnTiming {
    /// Notes `stage` at `now`. Each stage keeps its latest time up to the reply's first text,
    /// so a draft thrown away and made again counts as made again.
    pub(crate) fn note(&mut self, stage: Stage, now: Instant) {
        // Only the reply's first piece, synthesis and audio matter for when it is heard.
        let (slot, first_only) = match stage {
            Stage::SpeechStarted => {
                *self = TurnTiming::default();
                return;
            }
            Stage::SpeechStopped => (&mut self.speech_stopped, false),
            Stage::TranscribeStarted => (&mut self.transcribe_started, false),
            Stage::Transcribed => (&mut self.transcribed, false),
            Stage::GenerateStarted => {
                self.first_text = None;
                self.speak_started = None;
                self.spoken = None;
                (&mut self.generate_started, false)
            }
            Stage::Text => (&mut self.first_text, true),
            Stage::SpeakStarted => (&mut self.speak_started, true),
            Stage::Spoken => (&mut self.spoken, true),
        };
        if !(first_only && slot.is_some()) {
            *slot = Some(now);
        }
    }

    /// The reply's first audio left at `now`: the turn's line, once per turn (and only for a
    /// turn the user ended: a greeting has none).
    pub(crate) fn first_audio(&mut self, now: Instant) -> Option<String> {
        let stopped = self.speech_stopped?;
        if self.reported {
            return None;
        }
        self.reported = true;
        let at = |instant: Option<Instant>| match instant {
            None => "-".to_owned(),
            Some(instant) if instant >= stopped => format!("{}", instant.duration_since(stopped).as_millis()),
            Some(instant) => format!("-{}", stopped.duration_since(instant).as_millis()),
        };
        Some(format!(
            "transcribe_start={} transcribed={} generate_start={} first_text={} speak_start={} spoken={} first_audio={}",
            at(self.transcribe_started),
            at(self.transcribed),
            at(self.generate_started),
            at(self.first_text),
            at(self.speak_started),
            at(self.spoken),
            at(Some(now)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn stages_are_reported_relative_to_the_end_of_speech_once_per_turn() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut timing = TurnTiming::default();
        timing.note(Stage::SpeechStarted, ms(0));
        timing.note(Stage::TranscribeStarted, ms(1_200));
        timing.note(Stage::Transcribed, ms(1_450));
        timing.note(Stage::GenerateStarted, ms(1_460));
        timing.note(Stage::SpeechStopped, ms(1_600));
        timing.note(Stage::Text, ms(1_700));
        timing.note(Stage::Text, ms(1_750));
        timing.note(Stage::SpeakStarted, ms(1_900));
        timing.note(Stage::Spoken, ms(1_950));
        let line = timing.first_audio(ms(1_960)).unwrap_or_default();
        assert_eq!(
            line,
            "transcribe_start=-400 transcribed=-150 generate_start=-140 first_text=100 speak_start=300 spoken=350 \
             first_audio=360"
        );
        assert_eq!(timing.first_audio(ms(2_000)), None, "one line per turn");
        timing.note(Stage::SpeechStarted, ms(3_000));
        assert_eq!(timing.first_audio(ms(3_100)), None, "a turn not yet ended has no line");
    }
}
