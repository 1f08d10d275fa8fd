//! Schema check of the parsed rest document, collecting every problem.
//!
//! serde's derive stops at the first problem and its messages quote the payload, so the
//! [`Value`] is walked by hand instead. Owned strings are moved out of the value, not copied.

use serde_json::{Map, Value};
use svc_wire::rest::{TranscriptRole, TranscriptTurn};
use svc_wire::{Loc, LocSegment, ValidationIssue};

use crate::{ImportError, ImportMetadata};

/// Collected problems, each with its `loc` under `"body"`.
#[derive(Default)]
struct Issues(Vec<ValidationIssue>);

impl Issues {
    fn add(&mut self, loc: Loc, kind: &str, msg: &str) {
        self.0.push(ValidationIssue { loc, kind: kind.to_owned(), msg: msg.to_owned() });
    }

    fn missing(&mut self, loc: Loc) {
        self.add(loc, "missing", "Field required");
    }

    /// Reports every key of `map` (what is left after the known fields were removed), sorted so
    /// the order does not depend on serde_json's map flavour.
    fn extra(&mut self, map: &Map<String, Value>, loc: impl Fn(&str) -> Loc) {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for key in keys {
            self.add(loc(key), "extra_forbidden", "Extra inputs are not permitted");
        }
    }

    /// A finite number; `None` (with an issue) otherwise.
    fn number(&mut self, value: Option<Value>, loc: Loc) -> Option<f64> {
        match value {
            None => self.missing(loc),
            Some(Value::Number(n)) => match n.as_f64().filter(|f| f.is_finite()) {
                Some(f) => return Some(f),
                None => self.add(loc, "finite_number", "Input should be a finite number"),
            },
            Some(_) => self.add(loc, "float_type", "Input should be a valid number"),
        }
        None
    }

    /// An optional number: absent and `null` are `Some(None)`.
    fn optional_number(&mut self, value: Option<Value>, loc: Loc) -> Option<Option<f64>> {
        match value {
            None | Some(Value::Null) => Some(None),
            value => self.number(value, loc).map(Some),
        }
    }

    /// An optional string: absent and `null` are `Some(None)`.
    fn optional_string(&mut self, value: Option<Value>, loc: Loc) -> Option<Option<String>> {
        match value {
            None | Some(Value::Null) => Some(None),
            Some(Value::String(s)) if s.contains('\0') => {
                self.add(loc, svc_domain::parse::NUL_ISSUE, svc_domain::parse::NUL_MESSAGE);
                None
            }
            Some(Value::String(s)) => Some(Some(s)),
            Some(_) => {
                self.add(loc, "string_type", "Input should be a valid string");
                None
            }
        }
    }

    fn turn(&mut self, index: usize, value: Value) -> Option<TranscriptTurn> {
        let at = |field: &str| body(&[key("transcript"), LocSegment::Index(index as u64), key(field)]);
        let Value::Object(mut map) = value else {
            self.add(
                body(&[key("transcript"), LocSegment::Index(index as u64)]),
                "model_type",
                "Input should be an object",
            );
            return None;
        };
        let ts = self.number(map.remove("ts"), at("ts"));
        let role = match map.remove("role") {
            None => {
                self.missing(at("role"));
                None
            }
            Some(Value::String(role)) if role == "user" => Some(TranscriptRole::User),
            Some(Value::String(role)) if role == "assistant" => Some(TranscriptRole::Assistant),
            Some(_) => {
                self.add(at("role"), "enum", "Input should be 'user' or 'assistant'");
                None
            }
        };
        let text = match map.remove("text") {
            None => {
                self.missing(at("text"));
                None
            }
            Some(Value::String(text)) if text.contains('\0') => {
                self.add(at("text"), svc_domain::parse::NUL_ISSUE, svc_domain::parse::NUL_MESSAGE);
                None
            }
            Some(Value::String(text)) => Some(text),
            Some(_) => {
                self.add(at("text"), "string_type", "Input should be a valid string");
                None
            }
        };
        self.extra(&map, at);
        Some(TranscriptTurn { ts: ts?, role: role?, text: text? })
    }
}

fn key(name: &str) -> LocSegment {
    LocSegment::Key(name.to_owned())
}

fn body(path: &[LocSegment]) -> Loc {
    std::iter::once(key("body")).chain(path.iter().cloned()).collect()
}

/// Checks the rest document and builds the metadata. `TooManyTurns` wins over schema issues.
pub(crate) fn into_metadata(
    value: Value,
    duplicate_audio_key: bool,
    max_turns: usize,
) -> Result<ImportMetadata, ImportError> {
    let mut issues = Issues::default();
    let Value::Object(mut map) = value else {
        issues.add(body(&[]), "model_type", "Input should be an object");
        return Err(ImportError::Validation(issues.0));
    };
    if let Some(Value::Array(turns)) = map.get("transcript")
        && turns.len() > max_turns
    {
        return Err(ImportError::TooManyTurns { max: max_turns });
    }
    let field = |name: &str| body(&[key(name)]);

    let started_at = issues.number(map.remove("started_at"), field("started_at"));
    let ended_at = issues.optional_number(map.remove("ended_at"), field("ended_at"));
    if let (Some(started), Some(Some(ended))) = (started_at, ended_at)
        && ended < started
    {
        issues.add(field("ended_at"), "value_error", "ended_at must not be before started_at");
    }
    let title = issues.optional_string(map.remove("title"), field("title"));
    let provider = issues.optional_string(map.remove("provider"), field("provider"));
    let transcript = match map.remove("transcript") {
        None => Some(Vec::new()),
        Some(Value::Array(turns)) => {
            let mut ok = Vec::with_capacity(turns.len());
            let mut all_ok = true;
            for (index, turn) in turns.into_iter().enumerate() {
                match issues.turn(index, turn) {
                    Some(turn) => ok.push(turn),
                    None => all_ok = false,
                }
            }
            all_ok.then_some(ok)
        }
        Some(_) => {
            issues.add(field("transcript"), "list_type", "Input should be a valid array");
            None
        }
    };
    match map.remove("audio_wav_base64") {
        // The scanner replaced the string value with `null`, and it diverts every string value
        // of this key in valid JSON: a string cannot reach this point.
        None | Some(Value::Null | Value::String(_)) => {}
        Some(_) => issues.add(field("audio_wav_base64"), "string_type", "Input should be a valid string"),
    }
    if duplicate_audio_key {
        issues.add(field("audio_wav_base64"), "duplicate_field", "Field must not be given more than once");
    }
    issues.extra(&map, field);

    match (started_at, ended_at, title, provider, transcript) {
        (Some(started_at), Some(ended_at), Some(title), Some(provider), Some(transcript)) if issues.0.is_empty() => {
            Ok(ImportMetadata { started_at, ended_at, title, provider, transcript })
        }
        _ => Err(ImportError::Validation(issues.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn issues(value: Value) -> Vec<(String, String)> {
        match into_metadata(value, false, 10) {
            Err(ImportError::Validation(issues)) => {
                issues.into_iter().map(|i| (serde_json::to_string(&i.loc).expect("loc serializes"), i.kind)).collect()
            }
            other => panic!("expected validation issues, got {other:?}"),
        }
    }

    #[test]
    fn accepts_a_complete_body() {
        let meta = into_metadata(
            json!({"started_at": 10, "ended_at": 12.5, "title": "t", "provider": null,
                   "transcript": [{"ts": 11, "role": "assistant", "text": "hi"}], "audio_wav_base64": null}),
            false,
            10,
        )
        .expect("valid");
        assert_eq!(meta.started_at, 10.0);
        assert_eq!(meta.ended_at, Some(12.5));
        assert_eq!(meta.title.as_deref(), Some("t"));
        assert_eq!(meta.provider, None);
        assert_eq!(
            meta.transcript,
            vec![TranscriptTurn { ts: 11.0, role: TranscriptRole::Assistant, text: "hi".into() }]
        );

        let minimal = into_metadata(json!({"started_at": 1}), false, 10).expect("valid");
        assert!(minimal.transcript.is_empty() && minimal.ended_at.is_none());
    }

    #[test]
    fn reports_each_type_problem() {
        assert_eq!(
            issues(json!({"started_at": "x", "ended_at": "y", "title": 1, "provider": [], "transcript": {},
                          "audio_wav_base64": 5})),
            [
                (r#"["body","started_at"]"#, "float_type"),
                (r#"["body","ended_at"]"#, "float_type"),
                (r#"["body","title"]"#, "string_type"),
                (r#"["body","provider"]"#, "string_type"),
                (r#"["body","transcript"]"#, "list_type"),
                (r#"["body","audio_wav_base64"]"#, "string_type"),
            ]
            .map(|(l, k)| (l.to_owned(), k.to_owned()))
        );
        assert_eq!(
            issues(json!({"started_at": 5, "ended_at": 4, "transcript": [1, {"ts": null, "role": 3, "x": 1}]})),
            [
                (r#"["body","ended_at"]"#, "value_error"),
                (r#"["body","transcript",0]"#, "model_type"),
                (r#"["body","transcript",1,"ts"]"#, "float_type"),
                (r#"["body","transcript",1,"role"]"#, "enum"),
                (r#"["body","transcript",1,"text"]"#, "missing"),
                (r#"["body","transcript",1,"x"]"#, "extra_forbidden"),
            ]
            .map(|(l, k)| (l.to_owned(), k.to_owned()))
        );
        assert_eq!(issues(json!([1])), [(r#"["body"]"#.to_owned(), "model_type".to_owned())]);
    }

    #[test]
    fn duplicate_audio_key_is_an_issue_and_too_many_turns_wins() {
        match into_metadata(json!({"started_at": 1}), true, 10) {
            Err(ImportError::Validation(issues)) => assert_eq!(issues[0].kind, "duplicate_field"),
            other => panic!("expected duplicate_field, got {other:?}"),
        }
        let turns = vec![json!({"bad": true}); 11];
        assert!(matches!(
            into_metadata(json!({"transcript": turns}), false, 10),
            Err(ImportError::TooManyTurns { max: 10 })
        ));
    }
}
