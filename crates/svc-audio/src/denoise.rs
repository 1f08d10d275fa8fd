//! `noise_cancellation`: the user's audio cleaned before it reaches the model. Sans-IO, 48 kHz.
//!
//! Both modes run RNNoise (the `nnnoiseless` port, pure Rust) on 10 ms frames: a recurrent network
//! estimates, per frequency band, how much of the frame is voice, and attenuates the rest. It
//! removes the noise of rooms and streets (fans, air vents, hum, traffic; measured: fan-like noise
//! 50 dB down) and **keeps every voice**: that is `denoise`. It was trained on such noise: flat
//! synthetic white noise it barely lowers (3 to 5 dB).
//!
//! `voice_focus` ("keeps only the primary speaker") adds a primary-talker gate on top. It follows
//! the level of the loudest voice heard recently (the person at the microphone is nearer, so
//! louder, than a TV or a colleague across the room): the level rises at once with a louder voiced
//! frame and sinks slowly (0.1 dB per second for every 10 dB a quieter voice is below it), so a
//! few seconds of background talk do not become the reference. A voiced frame more than 12 dB
//! below that level is taken for a background voice and attenuated by 20 dB; the gain opens within
//! about 5 ms and closes over about 60 ms, so words of the primary talker are not chopped.
//!
//! What it does not do: separate two voices that overlap in time (both pass or both are
//! attenuated, by the louder one's level), or tell apart two talkers at the same distance.
//! Commercial "background voice cancellation" uses speaker embeddings for that; nothing like it
//! ships offline here.

/// The filter's rate.
pub const RATE_HZ: u32 = 48_000;
/// RNNoise's frame (10 ms).
const FRAME: usize = nnnoiseless::DenoiseState::FRAME_SIZE;
/// Output lags input by this many samples (RNNoise's overlap-add), on top of whatever waits for a
/// whole frame.
pub const LATENCY_SAMPLES: usize = FRAME;
/// A voice this far below the primary talker's level is a background voice.
const BACKGROUND_BELOW_DB: f32 = 12.0;
/// What a background voice is multiplied by (-20 dB).
const BACKGROUND_GAIN: f32 = 0.1;
/// RNNoise's voice probability from which a frame counts as voiced.
const VOICED: f32 = 0.5;
/// Per-frame share by which the primary level follows a louder voice, and a quieter one.
const RISE: f32 = 0.5;
const SINK: f32 = 0.0001;
/// Per-sample gain smoothing toward a higher gain (opening, ~5 ms) and a lower one (~60 ms).
const OPEN: f32 = 1.0 / 240.0;
const CLOSE: f32 = 1.0 / 2880.0;

/// Which filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseMode {
    /// RNNoise: noise out, every voice kept.
    Denoise,
    /// RNNoise plus the primary-talker gate.
    VoiceFocus,
}

/// The filter. See the module docs.
pub struct NoiseFilter {
    mode: NoiseMode,
    state: Box<nnnoiseless::DenoiseState<'static>>,
    /// Samples waiting for a whole frame.
    pending: Vec<f32>,
    output: [f32; FRAME],
    /// The primary talker's level, dBFS.
    primary_db: Option<f32>,
    gain: f32,
}

impl std::fmt::Debug for NoiseFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoiseFilter")
            .field("mode", &self.mode)
            .field("primary_db", &self.primary_db)
            .field("gain", &self.gain)
            .finish_non_exhaustive()
    }
}

impl NoiseFilter {
    /// A filter in `mode`.
    pub fn new(mode: NoiseMode) -> NoiseFilter {
        NoiseFilter {
            mode,
            state: nnnoiseless::DenoiseState::new(),
            pending: Vec::with_capacity(FRAME),
            output: [0.0; FRAME],
            primary_db: None,
            gain: 1.0,
        }
    }

    /// The mode.
    pub fn mode(&self) -> NoiseMode {
        self.mode
    }

    /// Filters 48 kHz mono audio of any length, appending to `out` every whole 10 ms frame it
    /// completes (the rest waits for the next call: the runtime's 20 ms frames are two whole
    /// frames, so nothing waits).
    pub fn process(&mut self, pcm: &[i16], out: &mut Vec<i16>) {
        for sample in pcm {
            self.pending.push(f32::from(*sample));
            if self.pending.len() == FRAME {
                self.filter_frame(out);
                self.pending.clear();
            }
        }
    }

    fn filter_frame(&mut self, out: &mut Vec<i16>) {
        let voice = self.state.process_frame(&mut self.output, &self.pending);
        let target = match self.mode {
            NoiseMode::Denoise => 1.0,
            NoiseMode::VoiceFocus => self.focus_gain(voice),
        };
        for sample in &self.output {
            let step = if target > self.gain { OPEN } else { CLOSE };
            self.gain += (target - self.gain) * step;
            let value = sample * self.gain;
            out.push(value.clamp(-32768.0, 32767.0) as i16);
        }
    }

    /// The primary-talker gate's target gain for the frame just denoised.
    fn focus_gain(&mut self, voice: f32) -> f32 {
        if voice < VOICED {
            return 1.0;
        }
        let level = level_db(&self.output);
        let primary = match self.primary_db {
            None => level,
            Some(primary) if level > primary => primary + (level - primary) * RISE,
            Some(primary) => primary + (level - primary) * SINK,
        };
        self.primary_db = Some(primary);
        if level < primary - BACKGROUND_BELOW_DB { BACKGROUND_GAIN } else { 1.0 }
    }
}

fn level_db(frame: &[f32]) -> f32 {
    let energy = frame.iter().map(|s| f64::from(*s) * f64::from(*s)).sum::<f64>() / frame.len().max(1) as f64;
    if energy <= 0.0 { -100.0 } else { (10.0 * (energy / (32768.0 * 32768.0)).log10()).max(-100.0) as f32 }
}

#[cfg(test)]
mod tests;
