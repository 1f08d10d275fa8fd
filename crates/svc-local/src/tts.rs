//! Text to speech with espeak-ng, run as a program (`espeak-ng --stdout`), never linked:
//! espeak-ng is GPL-3.0 and svc is not. The voice is robotic but intelligible, and it costs a few
//! milliseconds per sentence (research/local-models.md §4), so it never holds a reply up.

use std::io::Write;
use std::process::{Command, Stdio};

/// The program.
pub const PROGRAM: &str = "espeak-ng";
/// espeak-ng's own output rate.
pub const ESPEAK_RATE_HZ: u32 = 22_050;
/// The rate speech is handed out at: one Opus can encode (22.05 kHz is not), as OpenAI's voices.
pub const RATE_HZ: u32 = 24_000;
/// Longest text spoken at once (a sentence is far shorter; this bounds a runaway reply).
pub const MAX_CHARS: usize = 2_000;

/// Why speech could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TtsError {
    /// The program is not installed.
    #[error("espeak-ng is not installed (Debian: apt-get install espeak-ng); the local provider cannot speak")]
    Missing,
    /// It ran and failed.
    #[error("espeak-ng failed: {0}")]
    Failed(String),
}

/// A voice: an espeak-ng voice name and a speaking rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voice {
    /// espeak-ng voice (`en-us`, `en-gb`, …); anything else falls back to `en-us`.
    pub name: String,
    /// Words per minute (80–450).
    pub words_per_minute: u32,
}

impl Voice {
    /// The voice named `name` when it is a plausible espeak-ng voice name, else `en-us`, at 165 wpm.
    pub fn named(name: &str) -> Voice {
        let plausible = !name.is_empty()
            && name.len() <= 40
            && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'+'));
        Voice { name: if plausible { name.to_owned() } else { "en-us".to_owned() }, words_per_minute: 165 }
    }
}

/// Whether the program can be run here.
pub fn available() -> bool {
    Command::new(PROGRAM)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Speaks `text` with `voice`: mono PCM16 at [`RATE_HZ`]. Blocking (a few milliseconds).
///
/// # Errors
///
/// [`TtsError::Missing`] without the program; [`TtsError::Failed`] when it fails.
pub fn speak(text: &str, voice: &Voice) -> Result<Vec<i16>, TtsError> {
    let (pcm, rate) = speak_native(text, voice)?;
    Ok(resample(&pcm, rate, RATE_HZ))
}

/// Speaks `text` with `voice` at espeak-ng's own rate: `(mono PCM16, rate)`.
///
/// # Errors
///
/// As [`speak`].
pub fn speak_native(text: &str, voice: &Voice) -> Result<(Vec<i16>, u32), TtsError> {
    let text: String = text.chars().take(MAX_CHARS).collect();
    // The text goes through stdin, never the command line: nothing in it can become an option.
    let mut child = Command::new(PROGRAM)
        .args(["--stdout", "-b", "1", "-v", &voice.name, "-s", &voice.words_per_minute.clamp(80, 450).to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => TtsError::Missing,
            _ => TtsError::Failed(error.to_string()),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes()).map_err(|error| TtsError::Failed(error.to_string()))?;
    }
    let output = child.wait_with_output().map_err(|error| TtsError::Failed(error.to_string()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(TtsError::Failed(stderr.lines().next().unwrap_or("no message").to_owned()));
    }
    let wav = svc_audio::wav::read_wav(&output.stdout).map_err(|error| TtsError::Failed(error.to_string()))?;
    if wav.sample_rate == 0 {
        return Err(TtsError::Failed("a WAV without a sample rate".to_owned()));
    }
    Ok((wav.to_mono(), wav.sample_rate))
}

/// Half-width of the interpolation kernel, in input samples.
const KERNEL_HALF: isize = 16;

/// Converts a whole clip from `from` Hz to `to` Hz by windowed-sinc interpolation (a Hann window
/// over 32 input samples, cut off below the lower Nyquist frequency). For a sentence at a time:
/// it keeps no state between calls.
pub fn resample(pcm: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || pcm.is_empty() || from == 0 || to == 0 {
        return pcm.to_vec();
    }
    let ratio = f64::from(to) / f64::from(from);
    let cutoff = ratio.min(1.0);
    let out_len = (pcm.len() as f64 * ratio).round() as usize;
    let mut out = Vec::with_capacity(out_len);
    for n in 0..out_len {
        let position = n as f64 / ratio;
        let center = position.floor() as isize;
        let mut acc = 0.0f64;
        let mut norm = 0.0f64;
        for k in (center - KERNEL_HALF + 1)..=(center + KERNEL_HALF) {
            let Some(&sample) = usize::try_from(k).ok().and_then(|k| pcm.get(k)) else { continue };
            let x = position - k as f64;
            let sinc = if x.abs() < 1e-9 {
                1.0
            } else {
                (std::f64::consts::PI * x * cutoff).sin() / (std::f64::consts::PI * x * cutoff)
            };
            let window = 0.5 + 0.5 * (std::f64::consts::PI * x / KERNEL_HALF as f64).cos();
            let weight = sinc * window;
            acc += f64::from(sample) * weight;
            norm += weight;
        }
        let value = if norm.abs() > 1e-9 { acc / norm } else { 0.0 };
        out.push(value.round().clamp(-32_768.0, 32_767.0) as i16);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, hz: f64, seconds: f64) -> Vec<i16> {
        (0..(f64::from(rate) * seconds) as usize)
            .map(|n| ((n as f64 / f64::from(rate) * hz * std::f64::consts::TAU).sin() * 10_000.0) as i16)
            .collect()
    }

    #[test]
    fn resampling_keeps_the_pitch_and_the_length() {
        let from = tone(ESPEAK_RATE_HZ, 440.0, 1.0);
        let to = resample(&from, ESPEAK_RATE_HZ, RATE_HZ);
        assert_eq!(to.len(), RATE_HZ as usize);
        let reference = tone(RATE_HZ, 440.0, 1.0);
        // Away from the edges the result is the same tone sampled at the new rate.
        let error: f64 = to[100..23_900]
            .iter()
            .zip(&reference[100..23_900])
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs())
            .sum::<f64>()
            / 23_800.0;
        assert!(error < 150.0, "mean error {error}");
    }

    #[test]
    fn voice_names_cannot_smuggle_options() {
        assert_eq!(Voice::named("en-gb").name, "en-gb");
        assert_eq!(Voice::named("--foo bar").name, "en-us");
        assert_eq!(Voice::named("").name, "en-us");
        assert_eq!(Voice::named("Puck").name, "Puck");
    }
}
