//! svc_vad: svc's own turn detection for provider_a (scaffold; the detector lands next).

use svc_domain::start::ResolvedSession;

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

/// The gate.
#[derive(Debug)]
pub struct TurnGate {}

impl TurnGate {
    /// The gate of a session that uses svc_vad.
    pub fn for_session(_session: &ResolvedSession, _rate_hz: u32) -> Option<TurnGate> {
        None
    }

    /// Takes user audio.
    pub fn push(&mut self, _pcm: &[i16]) -> Vec<GateEvent> {
        Vec::new()
    }

    /// Ends the turn now.
    pub fn force_end(&mut self) -> Vec<GateEvent> {
        Vec::new()
    }

    /// The transcript of the turn so far.
    pub fn set_transcript_hint(&mut self, _text: &str) {}

    /// More transcript.
    pub fn append_transcript_hint(&mut self, _text: &str) {}
}
