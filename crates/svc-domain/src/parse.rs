//! Building blocks for parsing JSON request bodies into domain types while collecting *every*
//! problem with its `loc` path, instead of stopping at the first as serde does.
//!
//! Messages describe the rule that failed and never echo payload values: request bodies carry
//! prompts and personal data that must not be reflected into logs or error trackers.

use serde_json::{Map, Value};
use svc_wire::{Loc, LocSegment, ValidationIssue};

/// Collected validation problems.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Issues(Vec<ValidationIssue>);

impl Issues {
    /// Records one problem at `loc`.
    pub fn push(&mut self, loc: &Loc, kind: &str, msg: impl Into<String>) {
        self.0.push(ValidationIssue { loc: loc.clone(), kind: kind.to_owned(), msg: msg.into() });
    }

    /// Whether no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(value)` if no problem was recorded, else every problem.
    pub fn finish<T>(self, value: impl FnOnce() -> T) -> Result<T, Vec<ValidationIssue>> {
        if self.0.is_empty() { Ok(value()) } else { Err(self.0) }
    }

    /// The problems.
    pub fn into_vec(self) -> Vec<ValidationIssue> {
        self.0
    }
}

/// `loc` extended by an object key.
pub fn key(loc: &Loc, name: &str) -> Loc {
    let mut child = loc.clone();
    child.push(LocSegment::Key(name.to_owned()));
    child
}

/// `loc` extended by an array index.
pub fn index(loc: &Loc, position: usize) -> Loc {
    let mut child = loc.clone();
    child.push(LocSegment::Index(position as u64));
    child
}

/// The root of a request body.
pub fn body() -> Loc {
    vec![LocSegment::Key("body".to_owned())]
}

/// A JSON object being read field by field. Fields not read by the time
/// [`Fields::deny_unknown`] runs are reported as `extra_forbidden`.
#[derive(Debug)]
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    loc: Loc,
    read: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    /// Reads `value` as an object, or records `object_type` and returns `None`.
    pub fn of(value: &'a Value, loc: &Loc, issues: &mut Issues) -> Option<Fields<'a>> {
        match value {
            Value::Object(map) => Some(Fields { map, loc: loc.clone(), read: Vec::new() }),
            _ => {
                issues.push(loc, "object_type", "Input should be an object");
                None
            }
        }
    }

    /// The path of field `name`.
    pub fn loc_of(&self, name: &str) -> Loc {
        key(&self.loc, name)
    }

    /// The raw value of `name`, if present (null counts as present).
    pub fn raw(&mut self, name: &'static str) -> Option<&'a Value> {
        self.read.push(name);
        self.map.get(name)
    }

    /// A required string of at most `max_chars` characters (and at least one).
    pub fn required_string(&mut self, name: &'static str, max_chars: usize, issues: &mut Issues) -> Option<&'a str> {
        match self.raw(name) {
            None => {
                issues.push(&self.loc_of(name), "missing", "Field required");
                None
            }
            Some(value) => self.string_value(name, value, max_chars, issues),
        }
    }

    /// An optional string (absent or null → `None`) of 1 to `max_chars` characters.
    pub fn optional_string(&mut self, name: &'static str, max_chars: usize, issues: &mut Issues) -> Option<&'a str> {
        match self.raw(name) {
            None | Some(Value::Null) => None,
            Some(value) => self.string_value(name, value, max_chars, issues),
        }
    }

    fn string_value(&self, name: &str, value: &'a Value, max_chars: usize, issues: &mut Issues) -> Option<&'a str> {
        let loc = self.loc_of(name);
        let Value::String(text) = value else {
            issues.push(&loc, "string_type", "Input should be a valid string");
            return None;
        };
        let length = crate::limits::char_len(text);
        if length == 0 {
            issues.push(&loc, "string_too_short", "String should have at least 1 character");
            None
        } else if text.contains('\0') {
            issues.push(&loc, NUL_ISSUE, NUL_MESSAGE);
            None
        } else if length > max_chars {
            issues.push(&loc, "string_too_long", format!("String should have at most {max_chars} characters"));
            None
        } else {
            Some(text)
        }
    }

    /// An optional integer in `min..=max` (absent or null → `None`).
    pub fn optional_integer(&mut self, name: &'static str, min: i64, max: i64, issues: &mut Issues) -> Option<i64> {
        let value = self.raw(name)?;
        let loc = self.loc_of(name);
        match value {
            Value::Null => None,
            // JSON Schema's integer: `60.0` is the integer 60 (clients that type every number as
            // a float send it so).
            Value::Number(number) => match number.as_i64().or_else(|| integral(number.as_f64())) {
                Some(n) if (min..=max).contains(&n) => Some(n),
                Some(_) => {
                    issues.push(&loc, "range", format!("Input should be between {min} and {max}"));
                    None
                }
                None if number.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                    issues.push(&loc, "range", format!("Input should be between {min} and {max}"));
                    None
                }
                None => {
                    issues.push(&loc, "int_type", "Input should be a valid integer");
                    None
                }
            },
            _ => {
                issues.push(&loc, "int_type", "Input should be a valid integer");
                None
            }
        }
    }

    /// An optional array (absent or null → `None`).
    pub fn optional_array(&mut self, name: &'static str, issues: &mut Issues) -> Option<&'a Vec<Value>> {
        match self.raw(name)? {
            Value::Null => None,
            Value::Array(items) => Some(items),
            _ => {
                issues.push(&self.loc_of(name), "list_type", "Input should be a valid array");
                None
            }
        }
    }

    /// Reports every field that was not read as `extra_forbidden`.
    pub fn deny_unknown(self, issues: &mut Issues) {
        for name in self.map.keys() {
            if !self.read.contains(&name.as_str()) {
                issues.push(&key(&self.loc, name), "extra_forbidden", "Extra inputs are not permitted");
            }
        }
    }
}

/// Issue type of a text field holding U+0000.
pub const NUL_ISSUE: &str = "string_nul_character";
/// Its message. Postgres cannot store the character in text, so neither backend accepts it.
pub const NUL_MESSAGE: &str = "String should not contain the NUL character (U+0000)";

/// `f` as an `i64` when it is a whole number that fits.
fn integral(f: Option<f64>) -> Option<i64> {
    let f = f?;
    // i64::MAX is not representable as f64; 2^63 is the first value past the range.
    (f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f)).then_some(f as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn collects_every_problem_without_echoing_values() {
        let value = json!({"a": 5, "b": "x".repeat(20), "n": "secret-value", "extra": "private"});
        let mut issues = Issues::default();
        let mut fields = Fields::of(&value, &body(), &mut issues).expect("object");
        assert!(fields.required_string("a", 10, &mut issues).is_none());
        assert!(fields.required_string("b", 10, &mut issues).is_none());
        assert!(fields.required_string("missing", 10, &mut issues).is_none());
        assert!(fields.optional_integer("n", 0, 1, &mut issues).is_none());
        fields.deny_unknown(&mut issues);
        let issues = issues.into_vec();
        let kinds: Vec<&str> = issues.iter().map(|i| i.kind.as_str()).collect();
        assert_eq!(kinds, ["string_type", "string_too_long", "missing", "int_type", "extra_forbidden"]);
        let rendered = serde_json::to_string(&issues).expect("serializes");
        assert!(!rendered.contains("secret-value") && !rendered.contains("private") && !rendered.contains("xxxx"));
        assert_eq!(serde_json::to_value(&issues[4].loc).expect("loc"), json!(["body", "extra"]));
    }

    #[test]
    fn integers_are_range_checked() {
        let value = json!({"ok": 60, "low": 59, "float": 60.5, "big": 1e30});
        let mut issues = Issues::default();
        let mut fields = Fields::of(&value, &body(), &mut issues).expect("object");
        assert_eq!(fields.optional_integer("ok", 60, 100, &mut issues), Some(60));
        assert_eq!(fields.optional_integer("low", 60, 100, &mut issues), None);
        assert_eq!(fields.optional_integer("float", 60, 100, &mut issues), None);
        assert_eq!(fields.optional_integer("big", 60, 100, &mut issues), None);
        assert_eq!(fields.optional_integer("absent", 60, 100, &mut issues), None);
        let kinds: Vec<String> = issues.into_vec().into_iter().map(|i| i.kind).collect();
        assert_eq!(kinds, ["range", "int_type", "range"]);
    }
}
