//! The ledger of the model's tool calls: every call is answered upstream exactly once, by the
//! client's `svc.tool_result` RPC, by the server tool that ran it, or by an error when the client
//! does not answer in time or the call was for no tool of the session. Later answers are refused
//! with a reason the client can show.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

/// How long a client has to answer a `tool-invocation` before the model gets an error instead.
/// Long enough for a slow lookup over a mobile network, short enough that the model (and the
/// user listening to silence) is not left hanging.
pub const CLIENT_TOOL_TIMEOUT: Duration = Duration::from_secs(30);
/// Closed calls remembered, so a late or repeated answer is refused with its real reason.
const CLOSED_REMEMBERED: usize = 512;
/// Background job ids remembered, so a repeated `tool_job_result` is delivered once.
const JOBS_REMEMBERED: usize = 1024;

/// Why an RPC answer was refused (the RPC error message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerRefusal {
    /// The payload is not `{request_id, tool_call_id, result | error}`.
    Malformed,
    /// No invocation with that `request_id`.
    UnknownRequest,
    /// The `tool_call_id` does not belong to that request.
    Mismatch,
    /// Answered already.
    Duplicate,
    /// The answer came after the timeout; the model already got an error.
    Late,
    /// The model abandoned the call (the user interrupted).
    Cancelled,
    /// The session is over.
    SessionEnded,
}

impl AnswerRefusal {
    /// The text of the RPC error.
    pub fn message(self) -> &'static str {
        match self {
            AnswerRefusal::Malformed => {
                "malformed tool result: expected {\"request_id\", \"tool_call_id\", \"result\"} or {…, \"error\"}"
            }
            AnswerRefusal::UnknownRequest => "unknown request_id",
            AnswerRefusal::Mismatch => "tool_call_id does not match the request",
            AnswerRefusal::Duplicate => "this tool call was already answered",
            AnswerRefusal::Late => "too late: the tool call timed out and the model was told so",
            AnswerRefusal::Cancelled => "the model cancelled this tool call",
            AnswerRefusal::SessionEnded => "the session has ended",
        }
    }
}

/// The payload of `svc.tool_result`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ToolAnswer {
    /// From the `tool-invocation`.
    pub request_id: String,
    /// From the `tool-invocation`.
    pub tool_call_id: String,
    /// The result (any JSON).
    #[serde(default)]
    pub result: Option<Value>,
    /// Or an error text.
    #[serde(default)]
    pub error: Option<String>,
}

impl ToolAnswer {
    /// Parses an RPC payload; exactly one of `result` and `error` must be there.
    pub fn parse(payload: &str) -> Result<ToolAnswer, AnswerRefusal> {
        // `"result": null` is a result (an explicit JSON null), so look at the raw object.
        let value: Value = serde_json::from_str(payload).map_err(|_| AnswerRefusal::Malformed)?;
        let object = value.as_object().ok_or(AnswerRefusal::Malformed)?;
        let has_result = object.contains_key("result");
        let mut answer: ToolAnswer = serde_json::from_value(value.clone()).map_err(|_| AnswerRefusal::Malformed)?;
        if has_result && answer.result.is_none() {
            answer.result = Some(Value::Null);
        }
        if has_result == answer.error.is_some() || answer.request_id.is_empty() {
            return Err(AnswerRefusal::Malformed);
        }
        Ok(answer)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    Answered,
    TimedOut,
    Cancelled,
}

#[derive(Debug)]
struct OpenCall {
    call_id: String,
    name: String,
    deadline: Instant,
}

/// A call whose client did not answer in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The call.
    pub call_id: String,
    /// Its tool.
    pub name: String,
    /// The request it was sent as.
    pub request_id: String,
}

/// Client tool calls waiting for an answer, and what happened to recent ones.
#[derive(Debug, Default)]
pub struct ToolLedger {
    /// By request id.
    open: HashMap<String, OpenCall>,
    /// Request id → (call id, how it closed), oldest first.
    closed: VecDeque<(String, String, Closed)>,
    /// Call ids seen (a repeated call from the provider is ignored).
    seen_calls: VecDeque<String>,
    jobs: VecDeque<String>,
    next_request: u64,
}

impl ToolLedger {
    /// Whether the provider already asked for `call_id` (a repeat is ignored).
    pub fn seen(&mut self, call_id: &str) -> bool {
        if self.seen_calls.iter().any(|id| id == call_id) {
            return true;
        }
        if self.seen_calls.len() >= CLOSED_REMEMBERED {
            self.seen_calls.pop_front();
        }
        self.seen_calls.push_back(call_id.to_owned());
        false
    }

    /// Registers a `tool-invocation` for a client tool; returns its `request_id`.
    pub fn invoke(&mut self, now: Instant, call_id: &str, name: &str, timeout: Duration) -> String {
        self.next_request += 1;
        let request_id = format!("req_{}", self.next_request);
        self.open.insert(
            request_id.clone(),
            OpenCall { call_id: call_id.to_owned(), name: name.to_owned(), deadline: now + timeout },
        );
        request_id
    }

    /// Accepts the client's answer: returns the call id and tool name it answers.
    pub fn answer(&mut self, request_id: &str, tool_call_id: &str) -> Result<(String, String), AnswerRefusal> {
        if let Some(call) = self.open.get(request_id) {
            if call.call_id != tool_call_id {
                return Err(AnswerRefusal::Mismatch);
            }
            let call = self.open.remove(request_id).ok_or(AnswerRefusal::UnknownRequest)?;
            self.close(request_id, &call.call_id, Closed::Answered);
            return Ok((call.call_id, call.name));
        }
        match self.closed.iter().find(|(request, _, _)| request == request_id) {
            Some((_, call_id, _)) if call_id != tool_call_id => Err(AnswerRefusal::Mismatch),
            Some((_, _, Closed::Answered)) => Err(AnswerRefusal::Duplicate),
            Some((_, _, Closed::TimedOut)) => Err(AnswerRefusal::Late),
            Some((_, _, Closed::Cancelled)) => Err(AnswerRefusal::Cancelled),
            None => Err(AnswerRefusal::UnknownRequest),
        }
    }

    /// The model abandoned these calls; returns the request ids that were still open.
    pub fn cancel(&mut self, call_ids: &[String]) -> Vec<String> {
        let requests: Vec<String> = self
            .open
            .iter()
            .filter(|(_, call)| call_ids.contains(&call.call_id))
            .map(|(request, _)| request.clone())
            .collect();
        for request in &requests {
            if let Some(call) = self.open.remove(request) {
                self.close(request, &call.call_id, Closed::Cancelled);
            }
        }
        requests
    }

    /// Calls past their deadline, closed as timed out.
    pub fn expire(&mut self, now: Instant) -> Vec<Expired> {
        let mut due: Vec<(String, Instant)> = self
            .open
            .iter()
            .filter(|(_, call)| call.deadline <= now)
            .map(|(request, call)| (request.clone(), call.deadline))
            .collect();
        due.sort_by_key(|(_, deadline)| *deadline);
        let mut expired = Vec::with_capacity(due.len());
        for (request_id, _) in due {
            if let Some(call) = self.open.remove(&request_id) {
                self.close(&request_id, &call.call_id, Closed::TimedOut);
                expired.push(Expired { call_id: call.call_id, name: call.name, request_id });
            }
        }
        expired
    }

    /// Every open call, closed because the session ends (their answers are refused from now on).
    pub fn close_all(&mut self) -> Vec<Expired> {
        let requests: Vec<String> = self.open.keys().cloned().collect();
        requests
            .into_iter()
            .filter_map(|request_id| {
                let call = self.open.remove(&request_id)?;
                self.close(&request_id, &call.call_id, Closed::Cancelled);
                Some(Expired { call_id: call.call_id, name: call.name, request_id })
            })
            .collect()
    }

    /// The earliest deadline of an open call.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.open.values().map(|call| call.deadline).min()
    }

    /// Calls waiting for the client.
    pub fn open_calls(&self) -> usize {
        self.open.len()
    }

    /// Records a background job's id; false when it was delivered before.
    pub fn first_job_result(&mut self, job_id: &str) -> bool {
        if self.jobs.iter().any(|id| id == job_id) {
            return false;
        }
        if self.jobs.len() >= JOBS_REMEMBERED {
            self.jobs.pop_front();
        }
        self.jobs.push_back(job_id.to_owned());
        true
    }

    fn close(&mut self, request_id: &str, call_id: &str, how: Closed) {
        if self.closed.len() >= CLOSED_REMEMBERED {
            self.closed.pop_front();
        }
        self.closed.push_back((request_id.to_owned(), call_id.to_owned(), how));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_taken_once_and_every_other_answer_says_why_not() {
        let t0 = Instant::now();
        let mut ledger = ToolLedger::default();
        let request = ledger.invoke(t0, "call_1", "lookup", CLIENT_TOOL_TIMEOUT);
        assert_eq!(ledger.answer(&request, "call_2"), Err(AnswerRefusal::Mismatch));
        assert_eq!(ledger.answer(&request, "call_1"), Ok(("call_1".into(), "lookup".into())));
        assert_eq!(ledger.answer(&request, "call_1"), Err(AnswerRefusal::Duplicate));
        assert_eq!(ledger.answer("req_999", "call_1"), Err(AnswerRefusal::UnknownRequest));
        let late = ledger.invoke(t0, "call_3", "lookup", CLIENT_TOOL_TIMEOUT);
        assert!(ledger.expire(t0 + CLIENT_TOOL_TIMEOUT - Duration::from_millis(1)).is_empty());
        assert_eq!(ledger.next_deadline(), Some(t0 + CLIENT_TOOL_TIMEOUT));
        let expired = ledger.expire(t0 + CLIENT_TOOL_TIMEOUT);
        assert_eq!(
            expired,
            vec![Expired { call_id: "call_3".into(), name: "lookup".into(), request_id: late.clone() }]
        );
        assert_eq!(ledger.answer(&late, "call_3"), Err(AnswerRefusal::Late));
        let cancelled = ledger.invoke(t0, "call_4", "lookup", CLIENT_TOOL_TIMEOUT);
        assert_eq!(ledger.cancel(&["call_4".into()]), vec![cancelled.clone()]);
        assert_eq!(ledger.answer(&cancelled, "call_4"), Err(AnswerRefusal::Cancelled));
        assert_eq!(ledger.open_calls(), 0);
    }

    #[test]
    fn repeated_calls_and_job_results_are_recognised() {
        let mut ledger = ToolLedger::default();
        assert!(!ledger.seen("call_1"));
        assert!(ledger.seen("call_1"));
        assert!(ledger.first_job_result("job"));
        assert!(!ledger.first_job_result("job"));
    }

    #[test]
    fn answers_parse_with_exactly_one_of_result_and_error() {
        let ok = ToolAnswer::parse(r#"{"request_id":"r","tool_call_id":"c","result":{"a":1}}"#).expect("ok");
        assert_eq!(ok.result, Some(serde_json::json!({"a": 1})));
        let null = ToolAnswer::parse(r#"{"request_id":"r","tool_call_id":"c","result":null}"#).expect("null result");
        assert_eq!(null.result, Some(Value::Null));
        assert!(ToolAnswer::parse(r#"{"request_id":"r","tool_call_id":"c","error":"boom"}"#).is_ok());
        for bad in [
            r#"{"request_id":"r","tool_call_id":"c"}"#,
            r#"{"request_id":"r","tool_call_id":"c","result":1,"error":"x"}"#,
            r#"{"request_id":"","tool_call_id":"c","result":1}"#,
            r#"{"tool_call_id":"c","result":1}"#,
            "[]",
            "nope",
        ] {
            assert_eq!(ToolAnswer::parse(bad), Err(AnswerRefusal::Malformed), "{bad}");
        }
    }
}
