//! A recording ([`crate::recording`]) fed back into a codec in virtual time: the upstream's
//! messages, socket events and the runtime's inputs at their recorded times, the codec's timers
//! fired in between. What the codec sends is not checked against the recording (that is the
//! adapter's choice and may legitimately change); what it reports is the outcome.

use std::time::{Duration, Instant};

use serde_json::Value;
use svc_provider_core::ProviderEvent;

use crate::codec::{Codec, ConnectFailure, Transmit};
use crate::recording::{FORMAT, VERSION, expand, input_from};

/// Why a recording cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// Not a recording (first line) or a version this build does not read.
    #[error("not an svc provider recording (version {VERSION}): {0}")]
    Header(String),
    /// A line that is not a JSON object.
    #[error("line {line}: {message}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// A parsed recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// The first line: format, version, provider, model, family.
    pub header: Value,
    /// Every later line, in order.
    pub lines: Vec<Value>,
}

impl Recording {
    /// Parses JSON Lines text.
    ///
    /// # Errors
    ///
    /// [`ReplayError`] for a missing or foreign header, or a line that is not a JSON object.
    pub fn parse(text: &str) -> Result<Recording, ReplayError> {
        let mut parsed = Vec::new();
        for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            let value: Value = serde_json::from_str(line)
                .map_err(|error| ReplayError::Line { line: index + 1, message: error.to_string() })?;
            if !value.is_object() {
                return Err(ReplayError::Line { line: index + 1, message: "not a JSON object".to_owned() });
            }
            parsed.push(value);
        }
        let mut lines = parsed.into_iter();
        let header = lines.next().ok_or_else(|| ReplayError::Header("empty".to_owned()))?;
        if header.get("format").and_then(Value::as_str) != Some(FORMAT)
            || header.get("version").and_then(Value::as_u64) != Some(VERSION)
        {
            return Err(ReplayError::Header(header.to_string()));
        }
        Ok(Recording { header, lines: lines.collect() })
    }

    /// A header field as text (`provider`, `model`, `family`).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.header.get(name).and_then(Value::as_str)
    }

    /// The check's verdict line (`{"event": "report", …}`), when the recording has one.
    pub fn report(&self) -> Option<&Value> {
        self.lines.iter().rev().find(|line| line.get("event").and_then(Value::as_str) == Some("report"))
    }
}

/// What the codec did during a replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Every event, in order.
    pub events: Vec<ProviderEvent>,
    /// Every text frame the codec sent, parsed (a frame that is not JSON as a string).
    pub sent: Vec<Value>,
    /// Lines the replay skipped (kinds this version does not drive).
    pub skipped: usize,
}

/// Replays `recording` into `codec`, starting the virtual clock at `t0`.
pub fn replay(codec: &mut dyn Codec, recording: &Recording, t0: Instant) -> Outcome {
    let mut outcome = Outcome::default();
    let mut now = t0;
    drain(codec, &mut outcome);
    for line in &recording.lines {
        let at = t0 + Duration::from_millis(line.get("t_ms").and_then(Value::as_u64).unwrap_or(0));
        // The codec's timers due before this line fire first, at their own deadlines.
        while let Some(deadline) = codec.poll_timeout().filter(|deadline| *deadline <= at) {
            now = now.max(deadline);
            codec.handle_timeout(now);
            drain(codec, &mut outcome);
            if codec.poll_timeout() == Some(deadline) {
                break; // A codec that keeps a past deadline would spin: move on.
            }
        }
        now = now.max(at);
        if !apply(codec, line, now) {
            outcome.skipped += 1;
        }
        drain(codec, &mut outcome);
    }
    outcome
}

/// Drives one line; `false` when the line is not one a replay drives.
fn apply(codec: &mut dyn Codec, line: &Value, now: Instant) -> bool {
    if let Some(description) = line.get("input") {
        return match input_from(description) {
            Some(input) => {
                codec.handle_input(now, input);
                true
            }
            None => false,
        };
    }
    match (line.get("dir").and_then(Value::as_str), line.get("event").and_then(Value::as_str)) {
        (Some("in"), _) => match line.get("frame").and_then(Value::as_str) {
            Some("close") => {
                let code = line.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
                codec.handle_upstream_closed(now, code, line.get("reason").and_then(Value::as_str).unwrap_or(""));
                true
            }
            _ => {
                let payload = match (line.get("json"), line.get("raw").and_then(Value::as_str)) {
                    (Some(message), _) => expand(message.clone()).to_string().into_bytes(),
                    (None, Some(raw)) => raw.as_bytes().to_vec(),
                    (None, None) => return false,
                };
                codec.handle_upstream_message(now, &payload);
                true
            }
        },
        (_, Some("connected")) => {
            codec.handle_connected(now);
            true
        }
        (_, Some("connect_failed")) => {
            let failure = ConnectFailure {
                status: line.get("status").and_then(Value::as_u64).and_then(|s| u16::try_from(s).ok()),
                message: line.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
            };
            codec.handle_connect_failed(now, failure);
            true
        }
        (_, Some("closed")) => {
            let code = line.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
            codec.handle_upstream_closed(now, code, line.get("reason").and_then(Value::as_str).unwrap_or(""));
            true
        }
        // svc's own frames, connect requests and the verdict are outcomes, not causes.
        _ => false,
    }
}

fn drain(codec: &mut dyn Codec, outcome: &mut Outcome) {
    while let Some(transmit) = codec.poll_transmit() {
        if let Transmit::Text(text) = transmit {
            outcome.sent.push(serde_json::from_str(&text).unwrap_or(Value::String(text)));
        }
    }
    while let Some(event) = codec.poll_event() {
        outcome.events.push(event);
    }
}
