//! `svc_vad`: svc's own turn detection on a user's 16 kHz audio, for upstreams whose own detector
//! is switched off (Gemini Live's manual activity mode). Sans-IO; time is counted in samples.
//!
//! Every 16 ms frame is scored by the `earshot` voice detector (a small neural network, pure Rust,
//! about 3,600× real time). A frame is voiced when earshot says so *and* it stands out from the
//! background: at least 9 dB above the noise floor (the quietest frame of the last 1.5 s) and above
//! -55 dBFS. earshot alone takes stationary noise that follows silence (a fan switching on) for
//! speech, for as long as it lasts; the floor learns such noise within 1.5 s, and a turn lasts
//! at most a minute. A turn **starts** once `prefix_ms` of voiced audio has accumulated
//! (a click or a cough is shorter); it **ends** after `pause_ms` of silence, or, while the caller
//! says the utterance looks unfinished ([`TurnDetector::set_hold`]), after up to `max_hold_ms`
//! more. Between turns the detector keeps a bounded ring of recent audio: when a turn starts, the
//! caller gets it as the pre-roll, so the first syllables (spoken while the detector was still
//! confirming) reach the upstream, which hears nothing between turns.
//!
//! Audio passes through [`TurnDetector::push`] in chunks of any length and comes out, in order and
//! without gaps or duplicates, as [`VadOutput::Audio`] while a turn is open: the pre-roll of a
//! start, then everything after it, until its end.

use std::collections::VecDeque;

/// The detector's rate.
pub const RATE_HZ: u32 = 16_000;
/// Samples earshot scores at once (16 ms).
const FRAME: usize = 256;
/// Audio kept before a confirmed start beyond `prefix_ms`: the detector scores a frame only once
/// it is complete, and a word's onset is often scored unvoiced.
const PREROLL_MARGIN_MS: u32 = 300;
/// Voiced audio counted toward a start decays after this much silence (a broken run of clicks is
/// not speech).
const VOICED_RUN_GAP_MS: u32 = 100;
/// The noise floor is the quietest frame of this many frames (1.5 s).
const FLOOR_FRAMES: usize = 94;
/// How far above the floor a voiced frame must be.
const ABOVE_FLOOR_DB: f32 = 9.0;
/// Frames quieter than this are never voiced.
const MIN_LEVEL_DB: f32 = -55.0;
/// The longest turn: past it the turn ends (a stuck detector must not hold the upstream's turn
/// open for ever), and a new one starts if the user is still talking.
const MAX_TURN_MS: u32 = 60_000;

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// `pause_ms` of silence.
    Pause,
    /// `pause_ms + max_hold_ms` of silence while the caller held the end.
    MaxHold,
    /// The turn reached a minute.
    TooLong,
    /// The caller ended it ([`TurnDetector::force_end`]).
    Forced,
}

/// What the detector made of pushed audio, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum VadOutput {
    /// A turn starts. The audio that belongs to it follows as [`VadOutput::Audio`], beginning with
    /// the pre-roll.
    Started,
    /// Audio of the open turn.
    Audio(Vec<i16>),
    /// The turn ended.
    Ended(EndReason),
}

/// Settings of [`TurnDetector`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnDetectorConfig {
    /// earshot score (0–1) from which a frame is voiced.
    pub threshold: f32,
    /// Voiced audio needed to confirm a start.
    pub prefix_ms: u32,
    /// Silence that ends a turn.
    pub pause_ms: u32,
    /// Extra silence allowed while the caller holds the end.
    pub max_hold_ms: u32,
}

impl Default for TurnDetectorConfig {
    /// - `threshold` 0.5, earshot's own recommendation.
    /// - `prefix_ms` 100: a cough or a door is over sooner; a one-syllable "yes" is longer.
    /// - `pause_ms` 600: LiveKit Agents' default minimum endpointing delay is 500 ms and users
    ///   complain of being cut off at shorter ones (research/peers.md); earshot's own hangover
    ///   (voiced scores trail speech by a frame or two) comes on top.
    /// - `max_hold_ms` 1,500: a held end (the transcript so far ends mid-sentence) waits at most
    ///   2.1 s in all, under LiveKit's maximum endpointing delay of 3 s.
    fn default() -> Self {
        TurnDetectorConfig { threshold: 0.5, prefix_ms: 100, pause_ms: 600, max_hold_ms: 1500 }
    }
}

impl TurnDetectorConfig {
    /// The interruption sensitivity of a session applied to this config: `low` needs a more
    /// certain voice (0.7) held longer (at least 250 ms) before it counts as the user taking the
    /// turn, so backchannels and background noise do not cut the agent off; `high` takes a less
    /// certain voice (0.35) and a short prefix (at most 60 ms).
    pub fn with_sensitivity(self, sensitivity: Sensitivity) -> TurnDetectorConfig {
        match sensitivity {
            Sensitivity::Low => TurnDetectorConfig { threshold: 0.7, prefix_ms: self.prefix_ms.max(250), ..self },
            Sensitivity::Default => self,
            Sensitivity::High => TurnDetectorConfig { threshold: 0.35, prefix_ms: self.prefix_ms.min(60), ..self },
        }
    }
}

/// How readily user audio counts as the user taking the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sensitivity {
    /// Harder to trigger.
    Low,
    /// The config as given.
    Default,
    /// Easier to trigger.
    High,
}

/// The detector. See the module docs.
pub struct TurnDetector {
    detector: Box<earshot::Detector>,
    config: TurnDetectorConfig,
    /// Samples waiting to complete a frame for scoring.
    frame: Vec<i16>,
    /// Recent audio between turns (the pre-roll), bounded.
    ring: VecDeque<i16>,
    ring_capacity: usize,
    speaking: bool,
    voiced: u32,
    unvoiced: u32,
    /// Samples of the open turn.
    turn: u32,
    hold: bool,
    /// Levels (dBFS) of the last [`FLOOR_FRAMES`] frames.
    levels: VecDeque<f32>,
}

impl std::fmt::Debug for TurnDetector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnDetector")
            .field("config", &self.config)
            .field("speaking", &self.speaking)
            .field("hold", &self.hold)
            .finish_non_exhaustive()
    }
}

fn samples(ms: u32) -> u32 {
    ms * (RATE_HZ / 1000)
}

impl TurnDetector {
    /// A detector with `config` (`prefix_ms`, `pause_ms`, `max_hold_ms` are clamped to 0–5000,
    /// the bounds of the session config's `svc_vad` knobs).
    pub fn new(config: TurnDetectorConfig) -> TurnDetector {
        let config = TurnDetectorConfig {
            threshold: config.threshold.clamp(0.0, 1.0),
            prefix_ms: config.prefix_ms.min(5000),
            pause_ms: config.pause_ms.min(5000),
            max_hold_ms: config.max_hold_ms.min(5000),
        };
        TurnDetector {
            detector: earshot::Detector::default_boxed(),
            ring_capacity: samples(config.prefix_ms + PREROLL_MARGIN_MS) as usize,
            config,
            frame: Vec::with_capacity(FRAME),
            ring: VecDeque::new(),
            speaking: false,
            voiced: 0,
            unvoiced: 0,
            turn: 0,
            hold: false,
            levels: VecDeque::with_capacity(FLOOR_FRAMES),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> TurnDetectorConfig {
        self.config
    }

    /// Whether a turn is open.
    pub fn is_speaking(&self) -> bool {
        self.speaking
    }

    /// Milliseconds of silence at the end of the open turn so far (0 with no turn open): what a
    /// caller that starts work before the turn ends (preemptive generation) watches.
    pub fn trailing_silence_ms(&self) -> u32 {
        if self.speaking { self.unvoiced / (RATE_HZ / 1000) } else { 0 }
    }

    /// Holds the end of the turn (up to `max_hold_ms` past `pause_ms`) while `hold` is true: the
    /// caller's "the utterance looks unfinished" (a transcript ending mid-sentence).
    pub fn set_hold(&mut self, hold: bool) {
        self.hold = hold;
    }

    /// Takes 16 kHz mono audio; appends what it decided to `out`.
    pub fn push(&mut self, pcm: &[i16], out: &mut Vec<VadOutput>) {
        let mut pcm = pcm;
        while !pcm.is_empty() {
            let take = (FRAME - self.frame.len()).min(pcm.len());
            let (now, rest) = pcm.split_at(take);
            pcm = rest;
            // Each sample goes where the state says at its arrival: into the open turn, or into
            // the pre-roll ring. Scoring happens once a frame is complete.
            if self.speaking {
                push_audio(out, now);
            } else {
                self.ring.extend(now.iter().copied());
                let excess = self.ring.len().saturating_sub(self.ring_capacity);
                self.ring.drain(..excess);
            }
            self.frame.extend_from_slice(now);
            if self.frame.len() == FRAME {
                let score = self.detector.predict_i16(&self.frame);
                let level = level_db(&self.frame);
                self.frame.clear();
                let floor = self.levels.iter().copied().fold(f32::INFINITY, f32::min).min(level);
                if self.levels.len() == FLOOR_FRAMES {
                    self.levels.pop_front();
                }
                self.levels.push_back(level);
                let stands_out = level >= MIN_LEVEL_DB && level >= floor + ABOVE_FLOOR_DB;
                self.decide(score >= self.config.threshold && stands_out, out);
            }
        }
    }

    /// Ends an open turn now (the client's `activity-end`, a mute, a new input binding).
    pub fn force_end(&mut self, out: &mut Vec<VadOutput>) {
        if self.speaking {
            self.end(EndReason::Forced, out);
        }
    }

    /// Forgets everything (a new audio stream).
    pub fn reset(&mut self) {
        self.detector.reset();
        self.frame.clear();
        self.ring.clear();
        self.speaking = false;
        self.voiced = 0;
        self.unvoiced = 0;
        self.turn = 0;
        self.hold = false;
        self.levels.clear();
    }

    fn decide(&mut self, voiced: bool, out: &mut Vec<VadOutput>) {
        let frame = FRAME as u32;
        if voiced {
            self.voiced += frame;
            self.unvoiced = 0;
        } else {
            self.unvoiced += frame;
            if !self.speaking && self.unvoiced > samples(VOICED_RUN_GAP_MS) {
                self.voiced = 0;
            }
        }
        if !self.speaking {
            if voiced && self.voiced >= samples(self.config.prefix_ms).max(1) {
                self.speaking = true;
                self.unvoiced = 0;
                out.push(VadOutput::Started);
                let preroll: Vec<i16> = self.ring.drain(..).collect();
                push_audio(out, &preroll);
            }
            return;
        }
        self.turn += frame;
        if self.turn >= samples(MAX_TURN_MS) {
            self.end(EndReason::TooLong, out);
            return;
        }
        let limit = samples(self.config.pause_ms) + if self.hold { samples(self.config.max_hold_ms) } else { 0 };
        if self.unvoiced >= limit.max(frame) {
            let reason = if self.hold && self.config.max_hold_ms > 0 { EndReason::MaxHold } else { EndReason::Pause };
            self.end(reason, out);
        }
    }

    fn end(&mut self, reason: EndReason, out: &mut Vec<VadOutput>) {
        self.speaking = false;
        self.voiced = 0;
        self.unvoiced = 0;
        self.turn = 0;
        self.hold = false;
        self.ring.clear();
        out.push(VadOutput::Ended(reason));
    }
}

/// A frame's RMS level in dBFS (-100 for digital silence).
fn level_db(frame: &[i16]) -> f32 {
    let energy: f64 = frame.iter().map(|s| f64::from(*s) * f64::from(*s)).sum::<f64>() / frame.len().max(1) as f64;
    if energy <= 0.0 {
        return -100.0;
    }
    (10.0 * (energy / (32768.0 * 32768.0)).log10()).max(-100.0) as f32
}

/// Appends audio, merging with the previous output when that is audio too.
fn push_audio(out: &mut Vec<VadOutput>, pcm: &[i16]) {
    if pcm.is_empty() {
        return;
    }
    if let Some(VadOutput::Audio(last)) = out.last_mut() {
        last.extend_from_slice(pcm);
    } else {
        out.push(VadOutput::Audio(pcm.to_vec()));
    }
}

#[cfg(test)]
mod tests;
