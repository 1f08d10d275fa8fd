//! How the fakes put their messages on the wire.
//!
//! [`WireMode::Plain`] sends every message as the fake built it: one compact JSON text frame per
//! message, keys in `serde_json`'s order (sorted: the workspace's `serde_json` has no
//! `preserve_order`), exactly the shapes the fakes were written with.
//!
//! [`WireMode::Randomized`] varies what a real service may vary and a client must not depend on,
//! every decision drawn from a generator seeded per connection (the seed and the connection's
//! number), so a seed replays the same decisions:
//! - framing: each message in a text or a binary frame (Gemini's real service sends binary);
//! - layout: keys of every object in shuffled order (the JSON text is written here, since
//!   `serde_json` would sort them), compact or indented with newlines;
//! - unknown content: an unknown field added to some messages (at the top or in any nested object
//!   other than tool arguments and schemas), and now and then an unknown message between two
//!   messages (Gemini: an unknown top-level key; the others: an unknown `type`);
//! - Gemini only: consecutive messages that arose together are combined into one where the Live
//!   protocol allows it ([`pack`]).
//!
//! What a seed cannot fix is the order in which a connection's messages arise when that depends
//! on timing (a reply racing a resumption update, say); given the same order, the same seed
//! makes the same frames.

mod pack;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::SinkExt;
use futures_util::stream::SplitSink;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

/// The environment variable a [`FakeUpstream`](crate::FakeUpstream) reads when it starts: a
/// number selects [`WireMode::Randomized`] with that seed; unset or empty, [`WireMode::Plain`].
pub const WIRE_SEED_ENV: &str = "SVC_FAKE_WIRE_SEED";

/// How a fake puts its messages on the wire (see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WireMode {
    /// One compact JSON text frame per message, as the fake built it.
    #[default]
    Plain,
    /// Framing, key order, layout, unknown content and (Gemini) packing drawn from this seed.
    Randomized {
        /// The seed; each connection draws from its own generator derived from it.
        seed: u64,
    },
}

impl WireMode {
    /// The mode [`WIRE_SEED_ENV`] asks for.
    ///
    /// # Panics
    ///
    /// When the variable is set to something other than an unsigned number: a typo must not
    /// quietly test the plain wire instead.
    pub fn from_env() -> WireMode {
        WireMode::from_setting(std::env::var(WIRE_SEED_ENV).ok().as_deref())
    }

    /// The mode for a value of [`WIRE_SEED_ENV`] (`None`: unset).
    ///
    /// # Panics
    ///
    /// As [`WireMode::from_env`].
    pub fn from_setting(value: Option<&str>) -> WireMode {
        match value.map(str::trim) {
            None | Some("") => WireMode::Plain,
            Some(value) => match value.parse::<u64>() {
                Ok(seed) => WireMode::Randomized { seed },
                Err(_) => panic!("{WIRE_SEED_ENV}={value:?}: expected an unsigned number (the wire seed)"),
            },
        }
    }
}

/// Which generator of a connection: the wire's own, or the one a fake draws its message shapes
/// from (kept apart so that the shapes a fake picks do not shift the wire's decisions).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    Wire = 1,
    Shape = 2,
}

/// SplitMix64: small, fast and deterministic; statistical quality beyond that is not needed.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64, connection: usize, stream: Stream) -> Rng {
        let mut mixer = Rng { state: seed };
        let base = mixer.next_u64();
        let offset = (connection as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)
            ^ (stream as u64).wrapping_mul(0xA24B_AED4_963E_E407);
        let mut rng = Rng { state: base ^ offset };
        rng.next_u64();
        rng
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0); the modulo bias is irrelevant at these sizes.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }

    /// True once in `n` draws on average.
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// Fisher–Yates.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// The protocol family a connection speaks, for what the randomized wire may do to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// Gemini Live: messages keyed by kind; combinable.
    Gemini,
    /// OpenAI Realtime, xAI, GPT-Live: one event per message, tagged by `type`.
    Typed,
}

/// How often the randomized wire does each thing (one in N).
const BINARY_ONE_IN: usize = 2;
const INDENTED_ONE_IN: usize = 4;
const UNKNOWN_FIELD_ONE_IN: usize = 4;
const UNKNOWN_MESSAGE_ONE_IN: usize = 10;

/// Objects under these keys are data, not protocol (tool arguments, JSON schemas): an unknown
/// field there would change what the test sent, not test the client.
const OPAQUE_KEYS: [&str; 3] = ["args", "arguments", "parameters"];

/// What a fake connection queues for its writer.
pub(crate) enum Out {
    /// One message.
    Frame(Value),
    /// Messages that arose together, with no pacing between them: the randomized Gemini wire may
    /// combine them. Only what is ready at once is batched, so combining never holds a message
    /// back waiting for a partner.
    Batch(Vec<Value>),
    /// Close the socket with this code and reason.
    Close(u16, String),
}

/// One connection's wire: turns the messages a fake sends into frames.
pub(crate) struct Wire {
    family: Family,
    rng: Option<Rng>,
    /// Messages sent so far (an unknown message goes only between two of them).
    sent: u64,
}

impl Wire {
    pub(crate) fn new(mode: WireMode, family: Family, connection: usize) -> Wire {
        let rng = match mode {
            WireMode::Plain => None,
            WireMode::Randomized { seed } => Some(Rng::new(seed, connection, Stream::Wire)),
        };
        Wire { family, rng, sent: 0 }
    }

    /// The frames that carry `messages` (which arose together), in order.
    pub(crate) fn frames(&mut self, messages: Vec<Value>) -> Vec<Message> {
        let Some(rng) = self.rng.as_mut() else {
            return messages.into_iter().map(|message| Message::Text(message.to_string().into())).collect();
        };
        let messages = match self.family {
            Family::Gemini => pack::combine(messages, || rng.one_in(2)),
            Family::Typed => messages,
        };
        let mut frames = Vec::with_capacity(messages.len());
        for mut message in messages {
            if self.sent > 0 && rng.one_in(UNKNOWN_MESSAGE_ONE_IN) {
                let unknown = unknown_message(rng, self.family, self.sent);
                frames.push(encode(rng, &unknown));
            }
            if rng.one_in(UNKNOWN_FIELD_ONE_IN) {
                add_unknown_field(rng, self.family, &mut message);
            }
            frames.push(encode(rng, &message));
            self.sent += 1;
        }
        frames
    }
}

/// Writes what a fake connection queues, in order, until a close or a send failure; `capacity`
/// items may wait.
pub(crate) fn spawn_writer(
    mut sink: SplitSink<WebSocket, Message>,
    capacity: usize,
    mut wire: Wire,
) -> (mpsc::Sender<Out>, tokio::task::JoinHandle<()>) {
    let (out_tx, mut out_rx) = mpsc::channel::<Out>(capacity);
    let writer = tokio::spawn(async move {
        while let Some(out) = out_rx.recv().await {
            let messages = match out {
                Out::Frame(message) => vec![message],
                Out::Batch(messages) => messages,
                Out::Close(code, reason) => {
                    let _ = sink.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
                    break;
                }
            };
            for frame in wire.frames(messages) {
                if sink.send(frame).await.is_err() {
                    return;
                }
            }
        }
    });
    (out_tx, writer)
}

/// `message` as JSON text with shuffled keys, compact or indented, in a text or binary frame.
fn encode(rng: &mut Rng, message: &Value) -> Message {
    let indent = rng.one_in(INDENTED_ONE_IN).then_some(0);
    let mut text = String::new();
    write_shuffled(rng, message, indent, &mut text);
    if rng.one_in(BINARY_ONE_IN) { Message::Binary(text.into_bytes().into()) } else { Message::Text(text.into()) }
}

/// Writes `value` as JSON with every object's keys in shuffled order; `indent` is the current
/// depth when indenting (two spaces a level, as Google's JSON output does), `None` for compact.
pub(crate) fn write_shuffled(rng: &mut Rng, value: &Value, indent: Option<usize>, out: &mut String) {
    let inner = indent.map(|depth| depth + 1);
    match value {
        Value::Object(map) if !map.is_empty() => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            rng.shuffle(&mut entries);
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(inner, out);
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(if indent.is_some() { ": " } else { ":" });
                write_shuffled(rng, value, inner, out);
            }
            newline(indent, out);
            out.push('}');
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(inner, out);
                write_shuffled(rng, item, inner, out);
            }
            newline(indent, out);
            out.push(']');
        }
        scalar_or_empty => out.push_str(&scalar_or_empty.to_string()),
    }
}

fn newline(indent: Option<usize>, out: &mut String) {
    if let Some(depth) = indent {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    }
}

/// A name no protocol uses, in the family's style.
fn unknown_name(rng: &mut Rng, family: Family) -> String {
    let n = rng.below(1000);
    match family {
        Family::Gemini => format!("fakeUnknown{n}"),
        Family::Typed => format!("fake_unknown_{n}"),
    }
}

/// A value of any JSON kind.
fn unknown_value(rng: &mut Rng) -> Value {
    match rng.below(6) {
        0 => json!("ignore me"),
        1 => json!(rng.below(100_000)),
        2 => json!(rng.one_in(2)),
        3 => Value::Null,
        4 => json!([1.5, "two", {"three": [3]}]),
        _ => json!({"nested": {"deeper": ["x"]}, "count": 0}),
    }
}

/// A message of a kind the protocol does not define (yet).
fn unknown_message(rng: &mut Rng, family: Family, sent: u64) -> Value {
    let detail = unknown_value(rng);
    match family {
        Family::Gemini => {
            let mut message = Map::new();
            message.insert(unknown_name(rng, family), json!({"detail": detail}));
            Value::Object(message)
        }
        Family::Typed => {
            // Prefixes of real event families too: a client must not act on a prefix alone.
            let prefix = ["", "response.", "session.", "conversation.item.", "input_audio_buffer."][rng.below(5)];
            json!({"type": format!("{prefix}{}", unknown_name(rng, family)), "event_id": format!("event_unknown_{sent}"),
                "detail": detail})
        }
    }
}

/// Adds an unknown field to one object of `message`, chosen among all of them.
fn add_unknown_field(rng: &mut Rng, family: Family, message: &mut Value) {
    let count = count_objects(message);
    if count == 0 {
        return;
    }
    let target = rng.below(count);
    let name = unknown_name(rng, family);
    let value = unknown_value(rng);
    let mut seen = 0;
    insert_into_object(message, target, &mut seen, name, value);
}

/// Objects in `value` that may take an unknown field.
fn count_objects(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            1 + map
                .iter()
                .filter(|(key, _)| !OPAQUE_KEYS.contains(&key.as_str()))
                .map(|(_, v)| count_objects(v))
                .sum::<usize>()
        }
        Value::Array(items) => items.iter().map(count_objects).sum(),
        _ => 0,
    }
}

/// Inserts `name: value` into the `target`-th object (pre-order, as [`count_objects`] counts);
/// `true` once done.
fn insert_into_object(value: &mut Value, target: usize, seen: &mut usize, name: String, field: Value) -> bool {
    match value {
        Value::Object(map) => {
            if *seen == target {
                map.entry(name).or_insert(field);
                return true;
            }
            *seen += 1;
            for (key, child) in map.iter_mut() {
                if OPAQUE_KEYS.contains(&key.as_str()) {
                    continue;
                }
                if insert_into_object(child, target, seen, name.clone(), field.clone()) {
                    return true;
                }
            }
            false
        }
        Value::Array(items) => {
            items.iter_mut().any(|item| insert_into_object(item, target, seen, name.clone(), field.clone()))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
