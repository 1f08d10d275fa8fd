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
    svc_audio::resample::resample_clip(&pcm, rate, RATE_HZ).map_err(|error| TtsError::Failed(error.to_string()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voice_names_cannot_smuggle_options() {
        assert_eq!(Voice::named("en-gb").name, "en-gb");
        assert_eq!(Voice::named("--foo bar").name, "en-us");
        assert_eq!(Voice::named("").name, "en-us");
        assert_eq!(Voice::named("Puck").name, "Puck");
    }
}
