//! The vision tools, sans-IO: `detect_objects`, `point_at_object` and `screen_locate` ask an
//! OpenAI-compatible vision model (`POST {url}/chat/completions`) about the session's latest
//! frame, sent as a `data:` URL, with an instruction to answer in JSON. The answer is checked and
//! normalized; coordinates are fractions of the frame (0 to 1, origin top left), clamped.
//!
//! Result shapes (the spec names the tools but not their results; docs/API-DESIGN-tools.md):
//! - `detect_objects`: `{objects: [{label, box: [x0, y0, x1, y1]}]}`, at most [`MAX_OBJECTS`];
//! - `point_at_object`: `{found, object, point: [x, y] | null}`;
//! - `screen_locate`: `{found, target, box: [x0, y0, x1, y1] | null}`.

use base64::Engine;
use serde_json::{Value, json};
use svc_domain::tools::ServerTool;
use url::Url;

use crate::search::truncate;
use crate::{BackendRequest, Frame, Method, ToolError};

/// Most objects `detect_objects` returns.
pub const MAX_OBJECTS: usize = 20;
/// Longest label, in characters.
pub const MAX_LABEL_CHARS: usize = 100;
/// Longest `object` or `target` argument sent to the model, in characters.
pub const MAX_SUBJECT_CHARS: usize = 200;
/// Most tokens the vision model may answer with (a JSON list of 20 boxes fits).
const MAX_ANSWER_TOKENS: u32 = 1024;

/// A configured vision model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisionBackend {
    /// The `chat/completions` address.
    pub url: Url,
    /// Bearer token, if the endpoint wants one.
    pub key: Option<String>,
    /// The `model` sent.
    pub model: String,
}

/// What the model is asked, from the tool and its arguments.
fn task(tool: ServerTool, arguments: &Value) -> Result<(String, String), ToolError> {
    let text = |name: &str| {
        arguments
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(|text| truncate(text, MAX_SUBJECT_CHARS))
    };
    let required =
        |name: &str| text(name).ok_or_else(|| ToolError::BadArguments(format!("`{name}` must be a non-empty string")));
    Ok(match tool {
        ServerTool::DetectObjects => {
            let focus = text("query").map(|q| format!(" Only objects matching: {q}.")).unwrap_or_default();
            (
                format!(
                    "List the distinct objects visible in the image (at most {MAX_OBJECTS}).{focus} Answer with JSON \
                     only: {{\"objects\": [{{\"label\": string, \"box\": [x0, y0, x1, y1]}}]}}."
                ),
                String::new(),
            )
        }
        ServerTool::PointAtObject => {
            let object = required("object")?;
            (
                "Find the object the user names in the image and give the point at its centre. Answer with JSON \
                 only: {\"found\": boolean, \"point\": [x, y]} (point null when not found)."
                    .to_owned(),
                object,
            )
        }
        ServerTool::ScreenLocate => {
            let target = required("target")?;
            (
                "The image is a screenshot. Find the on-screen element the user names and give its bounding box. \
                 Answer with JSON only: {\"found\": boolean, \"box\": [x0, y0, x1, y1]} (box null when not found)."
                    .to_owned(),
                target,
            )
        }
        other => return Err(ToolError::BadArguments(format!("{other} is not a vision tool"))),
    })
}

/// The chat-completions request that asks about `frame`.
pub fn request(
    backend: &VisionBackend,
    tool: ServerTool,
    arguments: &Value,
    frame: &Frame,
) -> Result<BackendRequest, ToolError> {
    let (instruction, subject) = task(tool, arguments)?;
    let system = "You locate things in images. Coordinates are fractions of the image width and height, from 0 \
                  to 1, origin at the top left. Reply with one JSON object and nothing else.";
    let data = base64::engine::general_purpose::STANDARD.encode(&frame.data);
    let mut prompt = instruction;
    if !subject.is_empty() {
        prompt.push_str("\nThe user names: ");
        prompt.push_str(&subject);
    }
    let body = json!({
        "model": backend.model,
        "temperature": 0,
        "max_tokens": MAX_ANSWER_TOKENS,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": [
                {"type": "text", "text": prompt},
                {"type": "image_url", "image_url": {"url": format!("data:{};base64,{data}", frame.mime)}},
            ]},
        ],
    });
    let headers = backend.key.iter().map(|key| ("authorization".to_owned(), format!("Bearer {key}"))).collect();
    Ok(BackendRequest {
        method: Method::Post,
        url: backend.url.clone(),
        headers,
        body: Some(body.to_string().into_bytes()),
    })
}

/// The tool result of the model's answer.
pub fn parse(tool: ServerTool, arguments: &Value, body: &[u8]) -> Result<Value, ToolError> {
    let completion: Value =
        serde_json::from_slice(body).map_err(|_| ToolError::BadResponse("the vision answer is not JSON".to_owned()))?;
    let content = completion
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::BadResponse("the vision answer has no message content".to_owned()))?;
    let answer = json_in(content)
        .ok_or_else(|| ToolError::BadResponse("the vision model did not answer with a JSON object".to_owned()))?;
    let subject =
        |name: &str| arguments.get(name).and_then(Value::as_str).map(|s| truncate(s.trim(), MAX_SUBJECT_CHARS));
    match tool {
        ServerTool::DetectObjects => {
            let objects: Vec<Value> = answer
                .get("objects")
                .and_then(Value::as_array)
                .ok_or_else(|| ToolError::BadResponse("the vision answer has no `objects` list".to_owned()))?
                .iter()
                .filter_map(|object| {
                    let label = object.get("label").and_then(Value::as_str)?.trim();
                    let bbox = bounding_box(object.get("box")?)?;
                    (!label.is_empty()).then(|| json!({"label": truncate(label, MAX_LABEL_CHARS), "box": bbox}))
                })
                .take(MAX_OBJECTS)
                .collect();
            Ok(json!({"objects": objects}))
        }
        ServerTool::PointAtObject => {
            let point = answer.get("point").and_then(point);
            let found = answer.get("found").and_then(Value::as_bool).unwrap_or(point.is_some()) && point.is_some();
            Ok(json!({"found": found, "object": subject("object"), "point": if found { point } else { None }}))
        }
        ServerTool::ScreenLocate => {
            let bbox = answer.get("box").and_then(bounding_box);
            let found = answer.get("found").and_then(Value::as_bool).unwrap_or(bbox.is_some()) && bbox.is_some();
            Ok(json!({"found": found, "target": subject("target"), "box": if found { bbox } else { None }}))
        }
        other => Err(ToolError::BadArguments(format!("{other} is not a vision tool"))),
    }
}

/// The JSON object in a model's reply: the whole text, or the span from the first `{` to the last
/// `}` (models wrap JSON in prose or code fences despite the instruction).
fn json_in(content: &str) -> Option<Value> {
    let start = content.find('{')?;
    let end = content.rfind('}')?;
    let value: Value = serde_json::from_str(content.get(start..=end)?).ok()?;
    value.is_object().then_some(value)
}

fn fraction(value: &Value) -> Option<f64> {
    let number = value.as_f64()?;
    number.is_finite().then(|| (number.clamp(0.0, 1.0) * 1000.0).round() / 1000.0)
}

fn point(value: &Value) -> Option<Value> {
    match value.as_array()?.as_slice() {
        [x, y] => Some(json!([fraction(x)?, fraction(y)?])),
        _ => None,
    }
}

fn bounding_box(value: &Value) -> Option<Value> {
    match value.as_array()?.as_slice() {
        [x0, y0, x1, y1] => {
            let (x0, y0, x1, y1) = (fraction(x0)?, fraction(y0)?, fraction(x1)?, fraction(y1)?);
            Some(json!([x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(content: &str) -> Vec<u8> {
        json!({"choices": [{"message": {"role": "assistant", "content": content}}]}).to_string().into_bytes()
    }

    #[test]
    fn the_frame_goes_as_a_data_url() {
        let backend = VisionBackend {
            url: Url::parse("http://127.0.0.1:1/v1/chat/completions").expect("url"),
            key: Some("s".into()),
            model: "qwen2.5-vl".into(),
        };
        let frame = Frame { mime: "image/jpeg".into(), data: vec![0xff, 0xd8, 0xff] };
        let request =
            request(&backend, ServerTool::PointAtObject, &json!({"object": "the red mug"}), &frame).expect("a request");
        let body: Value = serde_json::from_slice(request.body.as_deref().expect("body")).expect("json");
        assert_eq!(body["model"], "qwen2.5-vl");
        assert_eq!(body["messages"][1]["content"][1]["image_url"]["url"], "data:image/jpeg;base64,/9j/");
        assert!(body["messages"][1]["content"][0]["text"].as_str().is_some_and(|t| t.contains("the red mug")));
        assert!(request.headers.contains(&("authorization".to_owned(), "Bearer s".to_owned())));
        let missing = super::request(&backend, ServerTool::PointAtObject, &json!({}), &frame);
        assert!(matches!(missing, Err(ToolError::BadArguments(_))));
    }

    #[test]
    fn answers_are_checked_and_clamped() {
        let body = completion(
            "```json\n{\"objects\": [{\"label\": \"mug\", \"box\": [0.5, 0.2, 0.1, 1.7]}, {\"label\": \"x\"}]}\n```",
        );
        let result = parse(ServerTool::DetectObjects, &json!({}), &body).expect("parses");
        assert_eq!(result, json!({"objects": [{"label": "mug", "box": [0.1, 0.2, 0.5, 1.0]}]}));
        let body = completion(r#"{"found": true, "point": [0.25, 0.75]}"#);
        let result = parse(ServerTool::PointAtObject, &json!({"object": "mug"}), &body).expect("parses");
        assert_eq!(result, json!({"found": true, "object": "mug", "point": [0.25, 0.75]}));
        let body = completion(r#"{"found": false, "box": null}"#);
        let result = parse(ServerTool::ScreenLocate, &json!({"target": "OK"}), &body).expect("parses");
        assert_eq!(result, json!({"found": false, "target": "OK", "box": null}));
        assert!(matches!(
            parse(ServerTool::DetectObjects, &json!({}), &completion("no idea")),
            Err(ToolError::BadResponse(_))
        ));
        assert!(matches!(parse(ServerTool::DetectObjects, &json!({}), b"{}"), Err(ToolError::BadResponse(_))));
    }
}
