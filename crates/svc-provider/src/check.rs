//! A live smoke test of one provider (`svc provider check`): connect, configure a session, send
//! a text turn or a recording as user audio, wait for the reply, and report what came back.
//!
//! It runs the production path — the provider's codec in the WebSocket driver — so a pass here
//! means the adapter works against that upstream (or a gateway / fake behind a base-URL override).

use std::time::{Duration, Instant};

use serde_json::json;
use svc_provider_core::{ProviderEvent, ProviderInput, SessionSetup};
use svc_wire::rest::UsageTokens;
use tokio_util::sync::CancellationToken;

use crate::endpoint::ProviderEnv;
use crate::recording::Recorder;

/// The instructions every check (and the replay of its recordings) runs with.
pub const CHECK_INSTRUCTIONS: &str = "You are a helpful voice assistant. Keep every reply to one short sentence.";

/// The session a check runs for `model`.
pub fn setup_for(model: svc_domain::model::ResolvedModel) -> SessionSetup {
    SessionSetup::new(model, CHECK_INSTRUCTIONS)
}

/// How long the check waits for usage after the reply's end when none came with it.
const USAGE_GRACE: Duration = Duration::from_secs(2);

/// What the check sends.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckInput {
    /// A typed user turn.
    Text(String),
    /// A recording, mono PCM16 at 48 kHz (see [`read_wav`]).
    Audio(Vec<i16>),
}

/// What came back.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckReport {
    /// Provider alias.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// The assistant's transcript (or model text).
    pub transcript: String,
    /// Seconds of assistant audio received.
    pub audio_seconds: f64,
    /// Cumulative usage, when the provider reported tokens.
    pub usage: Option<UsageTokens>,
    /// Milliseconds from start until the upstream session was ready.
    pub connect_ms: u64,
    /// Milliseconds from sending the input until the first assistant audio.
    pub first_audio_ms: Option<u64>,
    /// Milliseconds from start to the end of the reply.
    pub total_ms: u64,
}

/// Why the check failed; `Display` is the one-line reason the CLI prints.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// No key, or an unknown family.
    #[error(transparent)]
    Start(#[from] crate::StartError),
    /// The upstream refused (auth, quota, unknown model, …).
    #[error("upstream error {code}: {message}")]
    Upstream {
        /// Error code.
        code: String,
        /// Message.
        message: String,
    },
    /// The session ended without a reply.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Nothing came back in time.
    #[error("timed out after {seconds} s waiting for {waiting_for}")]
    Timeout {
        /// The limit.
        seconds: u64,
        /// What was missing.
        waiting_for: &'static str,
    },
}

/// Runs the check: `setup` against the credentials in `env`, sending `input`, within `timeout`.
///
/// # Errors
///
/// [`CheckError`] for a missing key, an upstream error, a session that ends without a reply, or
/// a timeout.
pub async fn run(
    setup: SessionSetup,
    env: &ProviderEnv,
    input: CheckInput,
    timeout: Duration,
) -> Result<CheckReport, CheckError> {
    run_recorded(setup, env, input, timeout, None).await
}

/// As [`run`], writing the upstream exchange and the verdict into `recorder` when given (the
/// recording is written whatever the verdict: a failing check is what a recording is for).
///
/// # Errors
///
/// As [`run`].
pub async fn run_recorded(
    setup: SessionSetup,
    env: &ProviderEnv,
    input: CheckInput,
    timeout: Duration,
    recorder: Option<Recorder>,
) -> Result<CheckReport, CheckError> {
    let provider = setup.model.alias.as_str().to_owned();
    let model = setup.model.model_id.clone();
    let svc_vad = matches!(setup.model.knobs.turn_detection(), Some(svc_domain::model::TurnDetection::SvcVad));
    // `codec_for` below refuses an unknown family, so the rate is known whenever it matters.
    let input_rate_hz = crate::input_rate_hz(&setup.model).unwrap_or(CHECK_RATE_HZ);
    let shutdown = CancellationToken::new();
    let codec = crate::codec_for(setup, env)?;
    let mut session = crate::driver::spawn_recorded(codec, svc_http::tls_config(), shutdown.clone(), recorder.clone());
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let seconds = timeout.as_secs();
    let mut report = CheckReport {
        provider,
        model,
        transcript: String::new(),
        audio_seconds: 0.0,
        usage: None,
        connect_ms: 0,
        first_audio_ms: None,
        total_ms: 0,
    };
    let result = async {
        // Ready.
        loop {
            match next(&mut session.events, deadline).await {
                Next::Event(ProviderEvent::Ready { .. }) => break,
                Next::Event(event) => fail_on(&event)?,
                Next::Ended => {
                    return Err(CheckError::Protocol("the upstream closed before the session was ready".to_owned()));
                }
                Next::Timeout => return Err(CheckError::Timeout { seconds, waiting_for: "the session to be ready" }),
            }
        }
        report.connect_ms = millis(started.elapsed());
        let sent_at = Instant::now();
        send(&session.input, input, svc_vad, input_rate_hz).await;
        let mut fragments = String::new();
        let mut final_text: Option<String> = None;
        let mut audio_samples = 0u64;
        let mut rate = 24_000u32;
        let mut response_done = false;
        // The reply is over when the response ended and its final transcript came: Gemini ends
        // generation (`generationComplete`) before the turn (`turnComplete`, which carries the
        // final transcript and usage, and waits for the audio to have played).
        loop {
            match next(&mut session.events, deadline).await {
                Next::Event(ProviderEvent::AssistantAudio { pcm, sample_rate }) => {
                    if report.first_audio_ms.is_none() {
                        report.first_audio_ms = Some(millis(sent_at.elapsed()));
                    }
                    audio_samples += pcm.len() as u64;
                    rate = sample_rate;
                }
                Next::Event(ProviderEvent::AssistantTranscript { text, is_final: false })
                | Next::Event(ProviderEvent::ModelText { text, is_final: false, thought: false }) => {
                    fragments.push_str(&text)
                }
                Next::Event(ProviderEvent::AssistantTranscript { text, is_final: true })
                | Next::Event(ProviderEvent::ModelText { text, is_final: true, thought: false }) => {
                    final_text = Some(text)
                }
                Next::Event(ProviderEvent::Usage(tokens)) => report.usage = Some(tokens),
                Next::Event(ProviderEvent::ResponseDone { .. }) => response_done = true,
                Next::Event(event) => fail_on(&event)?,
                Next::Ended => return Err(CheckError::Protocol("the upstream closed before replying".to_owned())),
                Next::Timeout => return Err(CheckError::Timeout { seconds, waiting_for: "the reply" }),
            }
            if response_done && final_text.is_some() {
                break;
            }
        }
        // Usage comes with the turn's end or right after it; a provider that reports none
        // (xAI often, GPT-Live in client delegation) leaves `usage` empty after the grace.
        if report.usage.is_none() {
            let grace = tokio::time::Instant::now() + USAGE_GRACE;
            while let Next::Event(event) = next(&mut session.events, grace.min(deadline)).await {
                if let ProviderEvent::Usage(tokens) = event {
                    report.usage = Some(tokens);
                    break;
                }
            }
        }
        report.transcript = final_text.unwrap_or(fragments).trim().to_owned();
        report.audio_seconds = audio_samples as f64 / f64::from(rate);
        report.total_ms = millis(started.elapsed());
        Ok(())
    }
    .await;
    shutdown.cancel();
    // The check has its verdict; the task only has to be gone.
    let _ = tokio::time::timeout(Duration::from_secs(3), session.task).await;
    if let Some(recorder) = &recorder {
        let verdict = match &result {
            Ok(()) => json!({"event": "report", "ok": true, "transcript": report.transcript,
                "audio_seconds": report.audio_seconds, "usage": report.usage}),
            Err(error) => json!({"event": "report", "ok": false, "error": error.to_string()}),
        };
        recorder.note(Instant::now(), verdict);
    }
    result.map(|()| report)
}

enum Next {
    Event(ProviderEvent),
    Ended,
    Timeout,
}

async fn next(events: &mut tokio::sync::mpsc::Receiver<ProviderEvent>, deadline: tokio::time::Instant) -> Next {
    match tokio::time::timeout_at(deadline, events.recv()).await {
        Ok(Some(event)) => Next::Event(event),
        Ok(None) => Next::Ended,
        Err(_) => Next::Timeout,
    }
}

fn fail_on(event: &ProviderEvent) -> Result<(), CheckError> {
    match event {
        ProviderEvent::Error(error) if error.fatal => {
            Err(CheckError::Upstream { code: error.code.clone(), message: error.message.clone() })
        }
        ProviderEvent::Closed { reason } => Err(CheckError::Protocol(format!("session closed: {reason}"))),
        _ => Ok(()),
    }
}

/// The rate of [`CheckInput::Audio`] (what [`read_wav`] gives).
const CHECK_RATE_HZ: u32 = 48_000;

/// Sends the check's input; audio as the runtime sends it: at the adapter's input rate, in 20 ms
/// frames.
async fn send(input: &tokio::sync::mpsc::Sender<ProviderInput>, what: CheckInput, svc_vad: bool, rate_hz: u32) {
    match what {
        CheckInput::Text(text) => {
            // The session ended early; its verdict says why.
            let _ = input.send(ProviderInput::Text(text)).await;
        }
        CheckInput::Audio(pcm) => {
            // Every adapter's rate is one the resampler takes from 48 kHz (16 or 24 kHz).
            let pcm = svc_audio::resample::resample_clip(&pcm, CHECK_RATE_HZ, rate_hz).unwrap_or(pcm);
            let frame_samples = usize::try_from(rate_hz / 50).unwrap_or(480).max(1);
            if svc_vad {
                // The session ended early; its verdict says why.
                let _ = input.send(ProviderInput::ActivityStart).await;
            }
            for frame in pcm.chunks(frame_samples) {
                // The session ended early; its verdict says why.
                let _ = input.send(ProviderInput::NativeAudio(frame.to_vec())).await;
            }
            if svc_vad {
                // The session ended early; its verdict says why.
                let _ = input.send(ProviderInput::ActivityEnd).await;
            }
            // Trailing silence lets server-side detectors end the turn.
            for _ in 0..75 {
                // The session ended early; its verdict says why.
                let _ = input.send(ProviderInput::NativeAudio(vec![0; frame_samples])).await;
            }
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Decodes a PCM16 WAV (mono, or stereo mixed down) at any rate the resampler takes into 48 kHz
/// mono.
///
/// # Errors
///
/// A reason when the file is not such a WAV.
pub fn read_wav(bytes: &[u8]) -> Result<Vec<i16>, String> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err("not a RIFF/WAVE file".to_owned());
    }
    let mut at = 12;
    let mut format: Option<(u16, u16, u32, u16)> = None;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]) as usize;
        let body = at + 8;
        let end = body.saturating_add(size).min(bytes.len());
        if id == b"fmt " && end >= body + 16 {
            let b = &bytes[body..end];
            format = Some((
                u16::from_le_bytes([b[0], b[1]]),
                u16::from_le_bytes([b[2], b[3]]),
                u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                u16::from_le_bytes([b[14], b[15]]),
            ));
        } else if id == b"data" {
            let (tag, channels, rate, bits) = format.ok_or("data before fmt chunk")?;
            if tag != 1 || bits != 16 || !(1..=2).contains(&channels) {
                return Err("only PCM16 mono or stereo WAV is supported".to_owned());
            }
            let samples: Vec<i16> =
                bytes[body..end].chunks_exact(2).map(|p| i16::from_le_bytes([p[0], p[1]])).collect();
            let mono: Vec<i16> = if channels == 2 {
                samples.chunks_exact(2).map(|p| ((i32::from(p[0]) + i32::from(p[1])) / 2) as i16).collect()
            } else {
                samples
            };
            if rate == 48_000 {
                return Ok(mono);
            }
            return svc_audio::resample::resample_clip(&mono, rate, 48_000).map_err(|error| format!("WAV: {error}"));
        }
        at = body + size + (size & 1);
    }
    Err("no data chunk".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
        let data: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        let mut out = b"RIFF".to_vec();
        out.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
        out.extend_from_slice(b"WAVEfmt ");
        out.extend_from_slice(&16u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&channels.to_le_bytes());
        out.extend_from_slice(&rate.to_le_bytes());
        out.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
        out.extend_from_slice(&(channels * 2).to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(b"data");
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&data);
        out
    }

    #[test]
    fn wav_files_become_48k_mono() {
        assert_eq!(read_wav(&wav(48_000, 1, &[1, 2, 3])).expect("valid"), vec![1, 2, 3]);
        assert_eq!(read_wav(&wav(48_000, 2, &[2, 4, -2, -4])).expect("valid"), vec![3, -3]);
        assert_eq!(read_wav(&wav(16_000, 1, &[0; 160])).expect("valid").len(), 480, "as long as the file");
        assert_eq!(read_wav(&wav(44_100, 1, &[0; 441])).expect("CD rate").len(), 480);
        assert!(read_wav(&wav(1_009, 1, &[0; 10])).is_err(), "a ratio the resampler does not take");
        assert!(read_wav(b"not a wav").is_err());
    }
}
