//! The boundary for client messages: bytes from the data channel become a [`ClientMessage`] whose
//! fields are within the spec's bounds, or a [`Dropped`] reason. The spec's rule for anything else
//! is to log and drop it, send nothing back, and keep the session running.

use base64::Engine;
use svc_wire::events::ClientMessage;

/// Longest `send-text` (characters); the spec sets none, and a turn longer than this is not speech.
pub const SEND_TEXT_MAX_CHARS: usize = 65_536;
/// `send-context` and `delegation-append` content bounds (spec "Limits").
pub const NOTE_MAX_CHARS: usize = 4096;
/// Largest decoded `send-image` frame.
pub const IMAGE_MAX_BYTES: usize = 1024 * 1024;
/// Image types the upstreams accept.
pub const IMAGE_TYPES: [&str; 3] = ["image/jpeg", "image/png", "image/webp"];
/// Longest identifier a client sends (`stream_id`, `job_id`, `delegation_id`, `tool_name`).
pub const ID_MAX_CHARS: usize = 256;
/// Longest model-facing `summary` or `error` of a `tool_job_result`.
pub const JOB_TEXT_MAX_CHARS: usize = 8192;
/// Largest `tool_job_result.result`, serialized.
pub const JOB_RESULT_MAX_BYTES: usize = 64 * 1024;

/// Why a message was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    /// Not UTF-8 JSON.
    NotJson,
    /// JSON, but not an object with a known `type` and the fields it needs.
    Unknown(String),
    /// A field out of the spec's bounds.
    OutOfBounds(&'static str),
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dropped::NotJson => f.write_str("not UTF-8 JSON"),
            Dropped::Unknown(detail) => write!(f, "unknown or malformed message: {detail}"),
            Dropped::OutOfBounds(what) => write!(f, "out of bounds: {what}"),
        }
    }
}

/// Parses and bounds-checks one message.
pub fn parse(payload: &[u8]) -> Result<ClientMessage, Dropped> {
    let value: serde_json::Value = serde_json::from_slice(payload).map_err(|_| Dropped::NotJson)?;
    // The type is echoed in logs only when it looks like one (a client's payload stays out of them).
    let kind = match value.get("type").and_then(serde_json::Value::as_str) {
        None => "<none>".to_owned(),
        Some(kind) if kind.len() <= 40 && kind.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) => {
            kind.to_owned()
        }
        Some(_) => "<unprintable>".to_owned(),
    };
    let message: ClientMessage = serde_json::from_value(value).map_err(|_| Dropped::Unknown(kind))?;
    check(message)
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

fn check(message: ClientMessage) -> Result<ClientMessage, Dropped> {
    use Dropped::OutOfBounds;
    match &message {
        ClientMessage::SendText { content } if content.trim().is_empty() || chars(content) > SEND_TEXT_MAX_CHARS => {
            Err(OutOfBounds("send-text content"))
        }
        ClientMessage::SendContext { content } if content.is_empty() || chars(content) > NOTE_MAX_CHARS => {
            Err(OutOfBounds("send-context content (1 to 4096 characters)"))
        }
        ClientMessage::DelegationAppend { content, delegation_id, .. } => {
            if content.is_empty() || chars(content) > NOTE_MAX_CHARS {
                Err(OutOfBounds("delegation-append content (1 to 4096 characters)"))
            } else if delegation_id.as_deref().is_some_and(|id| id.is_empty() || chars(id) > ID_MAX_CHARS) {
                Err(OutOfBounds("delegation_id"))
            } else {
                Ok(message)
            }
        }
        ClientMessage::SendImage { mime_type, data, stream_id } => {
            if !IMAGE_TYPES.contains(&mime_type.as_str()) {
                Err(OutOfBounds("send-image mime_type"))
            } else if stream_id.is_empty() || chars(stream_id) > ID_MAX_CHARS {
                Err(OutOfBounds("send-image stream_id"))
            } else if data.is_empty() || data.len() > IMAGE_MAX_BYTES.div_ceil(3) * 4 {
                Err(OutOfBounds("send-image data"))
            } else {
                Ok(message)
            }
        }
        ClientMessage::ToolJobResult { job_id, tool_name, result, summary, error, .. } => {
            let text_ok = |text: &Option<String>| text.as_deref().is_none_or(|t| chars(t) <= JOB_TEXT_MAX_CHARS);
            if job_id.is_empty() || chars(job_id) > ID_MAX_CHARS || tool_name.is_empty() || chars(tool_name) > 64 {
                Err(OutOfBounds("tool_job_result job_id or tool_name"))
            } else if !text_ok(summary) || !text_ok(error) {
                Err(OutOfBounds("tool_job_result summary or error"))
            } else if result.as_ref().is_some_and(|r| !r.is_object() || r.to_string().len() > JOB_RESULT_MAX_BYTES) {
                Err(OutOfBounds("tool_job_result result (an object of at most 64 KiB)"))
            } else {
                Ok(message)
            }
        }
        ClientMessage::ConnectTimings { mic_ms, ready_ms, request_ms, room_ms, server } => {
            let present =
                [mic_ms.is_some(), ready_ms.is_some(), request_ms.is_some(), room_ms.is_some(), server.is_some()]
                    .into_iter()
                    .filter(|present| *present)
                    .count();
            if present < 2 {
                Err(OutOfBounds("connect-timings needs at least two properties"))
            } else if server.as_ref().is_some_and(|s| !s.is_object() || s.to_string().len() > 4096) {
                Err(OutOfBounds("connect-timings server"))
            } else {
                Ok(message)
            }
        }
        _ => Ok(message),
    }
}

/// Decodes a `send-image` frame's base64 data.
pub fn decode_image(data: &str) -> Option<Vec<u8>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(data.as_bytes()).ok()?;
    (!bytes.is_empty() && bytes.len() <= IMAGE_MAX_BYTES).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse_value(value: serde_json::Value) -> Result<ClientMessage, Dropped> {
        parse(value.to_string().as_bytes())
    }

    #[test]
    fn bounds_of_the_spec_are_enforced() {
        assert!(parse_value(json!({"type": "send-context", "content": "x".repeat(4096)})).is_ok());
        assert!(parse_value(json!({"type": "send-context", "content": "é".repeat(4096)})).is_ok(), "chars, not bytes");
        assert!(matches!(
            parse_value(json!({"type": "send-context", "content": "x".repeat(4097)})),
            Err(Dropped::OutOfBounds(_))
        ));
        assert!(matches!(parse_value(json!({"type": "send-context", "content": ""})), Err(Dropped::OutOfBounds(_))));
        assert!(matches!(
            parse_value(json!({"type": "delegation-append", "channel": "thinking", "content": ""})),
            Err(Dropped::OutOfBounds(_))
        ));
        assert!(matches!(parse_value(json!({"type": "send-text", "content": "  "})), Err(Dropped::OutOfBounds(_))));
        // connect-timings needs two properties; one is dropped at parse.
        assert!(matches!(parse_value(json!({"type": "connect-timings", "mic_ms": 3})), Err(Dropped::OutOfBounds(_))));
        assert!(parse_value(json!({"type": "connect-timings", "mic_ms": 3, "server": {"total_ms": 1.5}})).is_ok());
        assert!(matches!(
            parse_value(json!({"type": "connect-timings", "mic_ms": -3, "room_ms": 1})),
            Err(Dropped::Unknown(_))
        ));
        assert!(matches!(
            parse_value(json!({"type": "send-image", "mime_type": "image/gif", "data": "AA==", "stream_id": "cam"})),
            Err(Dropped::OutOfBounds(_))
        ));
        assert!(
            parse_value(json!({"type": "send-image", "mime_type": "image/jpeg", "data": "AA==", "stream_id": "cam"}))
                .is_ok()
        );
        assert!(matches!(
            parse_value(
                json!({"type": "tool_job_result", "job_id": "j", "tool_name": "t", "status": "completed", "result": [1]})
            ),
            Err(Dropped::OutOfBounds(_))
        ));
    }

    #[test]
    fn garbage_is_dropped_with_a_reason_that_echoes_no_payload() {
        assert_eq!(parse(b"\xff\xfe"), Err(Dropped::NotJson));
        assert_eq!(parse(b"[1,2]"), Err(Dropped::Unknown("<none>".into())));
        assert_eq!(parse(br#"{"type":"nope"}"#), Err(Dropped::Unknown("nope".into())));
        assert_eq!(parse(br#"{"type":"secret payload with spaces"}"#), Err(Dropped::Unknown("<unprintable>".into())));
        assert_eq!(parse(br#"{"type":"mute","muted":"yes"}"#), Err(Dropped::Unknown("mute".into())));
        assert!(decode_image("!!").is_none());
        assert_eq!(decode_image("AAE="), Some(vec![0, 1]));
    }
}
