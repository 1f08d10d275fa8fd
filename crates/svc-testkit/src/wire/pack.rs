//! Gemini Live: consecutive server messages combined into one, where the protocol allows it.
//!
//! The rules, from google-genai's `LiveServerMessage` / `LiveServerContent` and the API
//! reference's `BidiGenerateContentServerMessage` (whose `messageType` is a oneof):
//! - a message carries at most one of `setupComplete`, `serverContent`, `toolCall`,
//!   `toolCallCancellation`, `goAway`, `sessionResumptionUpdate`; `usageMetadata` sits outside
//!   the oneof, beside any of them (including a `serverContent` with `turnComplete`);
//! - one `serverContent` may carry several fields ("`turnComplete` … can be set alongside
//!   content, indicating that the content is the last in the turn"; an interrupted turn "will go
//!   through interrupted > turn_complete");
//! - never two of the same field: two messages that both carry `usageMetadata`, or the same
//!   `serverContent` field, stay apart;
//! - combining never reorders: fields in one message are simultaneous, so a message only takes
//!   the next one's fields when they belong at the same point of the turn or later — content
//!   (`modelTurn`, transcriptions), then `interrupted` / `generationComplete`, then `turnComplete`
//!   and its companions. A `turnComplete` never takes the next turn's content, nor a
//!   `usageMetadata` sent after it (that one is reported after the turn ended).
//!
//! Messages with anything else (an unknown key, a field these rules do not know) stay alone.

use serde_json::{Map, Value};

/// The oneof of a server message.
const MESSAGE_TYPES: [&str; 6] =
    ["setupComplete", "serverContent", "toolCall", "toolCallCancellation", "goAway", "sessionResumptionUpdate"];
const USAGE: &str = "usageMetadata";
const SERVER_CONTENT: &str = "serverContent";

/// Where a `serverContent` field belongs in a turn: content first, then the end of generation
/// (or the interruption), then the end of the turn. `None`: a field these rules do not know.
fn stage(field: &str) -> Option<u8> {
    match field {
        "modelTurn"
        | "inputTranscription"
        | "interimInputTranscription"
        | "outputTranscription"
        | "groundingMetadata"
        | "urlContextMetadata" => Some(0),
        "interrupted" | "generationComplete" => Some(1),
        "turnComplete" | "turnCompleteReason" | "waitingForInput" | "interactionStatus" => Some(2),
        _ => None,
    }
}

/// Combines consecutive `messages` where allowed, each time `decide` says so.
pub(crate) fn combine(messages: Vec<Value>, mut decide: impl FnMut() -> bool) -> Vec<Value> {
    let mut combined = Vec::with_capacity(messages.len());
    let mut current: Option<Map<String, Value>> = None;
    for message in messages {
        let Value::Object(next) = message else {
            combined.extend(current.take().map(Value::Object));
            combined.push(message);
            continue;
        };
        current = Some(match current.take() {
            Some(mut first) if decide() && combinable(&first, &next) => {
                merge(&mut first, next);
                first
            }
            Some(first) => {
                combined.push(Value::Object(first));
                next
            }
            None => next,
        });
    }
    combined.extend(current.map(Value::Object));
    combined
}

/// Whether `second`, sent right after `first`, may travel in the same message.
pub(crate) fn combinable(first: &Map<String, Value>, second: &Map<String, Value>) -> bool {
    let known = |message: &Map<String, Value>| {
        let content_known = match message.get(SERVER_CONTENT) {
            None => true,
            Some(Value::Object(content)) => content.keys().all(|key| stage(key).is_some()),
            Some(_) => false,
        };
        content_known
            && !message.is_empty()
            && message.keys().all(|key| key == USAGE || MESSAGE_TYPES.contains(&key.as_str()))
    };
    if !known(first) || !known(second) {
        return false;
    }
    if first.contains_key(USAGE) && second.contains_key(USAGE) {
        return false;
    }
    let message_type = |message: &Map<String, Value>| message.keys().find(|key| key.as_str() != USAGE).cloned();
    match (message_type(first), message_type(second)) {
        (Some(a), Some(b)) if a != SERVER_CONTENT || b != SERVER_CONTENT => return false,
        _ => {}
    }
    if second.contains_key(USAGE) && ends_turn(first) {
        return false;
    }
    match (first.get(SERVER_CONTENT), second.get(SERVER_CONTENT)) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => contents_combine(a, b),
        _ => true,
    }
}

fn ends_turn(message: &Map<String, Value>) -> bool {
    message.get(SERVER_CONTENT).and_then(|content| content.get("turnComplete")).is_some()
}

/// Two `serverContent`s (of known fields) combine when their fields are distinct and the
/// second's all belong at or after the first's latest stage.
fn contents_combine(first: &Map<String, Value>, second: &Map<String, Value>) -> bool {
    let latest_first = first.keys().filter_map(|key| stage(key)).max().unwrap_or(0);
    let earliest_second = second.keys().filter_map(|key| stage(key)).min().unwrap_or(u8::MAX);
    first.keys().all(|key| !second.contains_key(key)) && latest_first <= earliest_second
}

fn merge(first: &mut Map<String, Value>, second: Map<String, Value>) {
    for (key, value) in second {
        match (first.get_mut(&key), value) {
            (Some(Value::Object(into)), Value::Object(from)) if key == SERVER_CONTENT => into.extend(from),
            (_, value) => {
                first.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::combine;

    fn always(messages: Vec<Value>) -> Vec<Value> {
        combine(messages, || true)
    }

    #[test]
    fn a_turns_end_combines_into_as_few_messages_as_allowed() {
        let audio = json!({"serverContent": {"modelTurn": {"parts": [{"inlineData": {"data": "AA=="}}]}}});
        let words = json!({"serverContent": {"outputTranscription": {"text": "Hi."}}});
        let usage = json!({"usageMetadata": {"totalTokenCount": 9}});
        let done = json!({"serverContent": {"generationComplete": true}});
        let complete = json!({"serverContent": {"turnComplete": true}});
        let handle = json!({"sessionResumptionUpdate": {"newHandle": "h", "resumable": true}});
        let combined = always(vec![audio, words, done, usage, complete, handle.clone()]);
        assert_eq!(
            combined,
            vec![
                json!({"serverContent": {"modelTurn": {"parts": [{"inlineData": {"data": "AA=="}}]},
                    "outputTranscription": {"text": "Hi."}, "generationComplete": true, "turnComplete": true},
                    "usageMetadata": {"totalTokenCount": 9}}),
                handle,
            ]
        );
    }

    #[test]
    fn the_same_field_twice_stays_apart() {
        let usage = |n: u64| json!({"usageMetadata": {"totalTokenCount": n}});
        assert_eq!(always(vec![usage(1), usage(2)]).len(), 2);
        let audio = json!({"serverContent": {"modelTurn": {"parts": []}}});
        assert_eq!(always(vec![audio.clone(), audio]).len(), 2);
        let heard = |t: &str| json!({"serverContent": {"inputTranscription": {"text": t}}});
        assert_eq!(always(vec![heard("a "), heard("b")]).len(), 2);
    }

    #[test]
    fn nothing_is_pulled_before_what_it_followed() {
        let complete = json!({"serverContent": {"turnComplete": true}});
        let interrupted = json!({"serverContent": {"interrupted": true}});
        let audio = json!({"serverContent": {"modelTurn": {"parts": []}}});
        let heard = json!({"serverContent": {"inputTranscription": {"text": "stop"}}});
        let usage = json!({"usageMetadata": {"totalTokenCount": 3}});
        // The next turn's content never rides on the end of this one.
        assert_eq!(always(vec![complete.clone(), audio.clone()]).len(), 2);
        assert_eq!(always(vec![interrupted.clone(), heard]).len(), 2);
        assert_eq!(always(vec![interrupted.clone(), audio]).len(), 2);
        // Usage reported after the turn ended is not the ended turn's.
        assert_eq!(always(vec![complete.clone(), usage.clone()]).len(), 2);
        // An interruption ends its turn in the same message.
        assert_eq!(
            always(vec![interrupted, complete.clone()]),
            vec![json!({"serverContent": {"interrupted": true, "turnComplete": true}})]
        );
        // Usage before the end of the turn sits beside it.
        assert_eq!(
            always(vec![usage, complete]),
            vec![json!({"serverContent": {"turnComplete": true}, "usageMetadata": {"totalTokenCount": 3}})]
        );
    }

    #[test]
    fn only_one_message_type_per_message() {
        let setup = json!({"setupComplete": {}});
        let content = json!({"serverContent": {"generationComplete": true}});
        let call = json!({"toolCall": {"functionCalls": []}});
        let handle = json!({"sessionResumptionUpdate": {"newHandle": ""}});
        let go_away = json!({"goAway": {"timeLeft": "5s"}});
        let usage = json!({"usageMetadata": {"totalTokenCount": 1}});
        assert_eq!(always(vec![setup, content.clone(), call.clone(), handle, go_away]).len(), 5);
        assert_eq!(always(vec![call, usage.clone()]).len(), 1, "usage beside any message type");
        assert_eq!(always(vec![usage, content]).len(), 1);
    }

    #[test]
    fn unknown_keys_and_fields_stay_alone() {
        let unknown = json!({"fakeUnknown1": {}});
        let odd_content = json!({"serverContent": {"somethingNew": 1}});
        let usage = json!({"usageMetadata": {"totalTokenCount": 1}});
        assert_eq!(always(vec![unknown, usage.clone()]).len(), 2);
        assert_eq!(always(vec![usage, odd_content.clone(), odd_content]).len(), 3);
    }

    #[test]
    fn declining_keeps_every_message_as_it_was() {
        let messages = vec![
            json!({"serverContent": {"modelTurn": {"parts": []}}}),
            json!({"serverContent": {"outputTranscription": {"text": "x"}}}),
            json!({"usageMetadata": {"totalTokenCount": 1}}),
        ];
        assert_eq!(combine(messages.clone(), || false), messages);
    }
}
