//! Tool calling for the embedded brain: how tools are described to SmolLM2, and how its
//! `<tool_call>[…]</tool_call>` output is taken out of the spoken text and parsed.
//!
//! SmolLM2's instruct data taught function calling with a system prompt that lists the tools in
//! `<tools>…</tools>` and asks for `<tool_call>[{"name": …, "arguments": {…}}]</tool_call>` (the
//! same prompt is in the SmolLM2 template Ollama ships). [`ToolPrompt`] chooses how (or whether)
//! tools are described; `SpokenFilter` holds back the markup while text streams so a call is
//! never spoken, and `parse_calls` reads the JSON leniently. Only calls to tools that were
//! offered are kept.
//!
//! # Trial: SmolLM2-135M-Instruct Q4_1 does not call tools
//!
//! `tests/smollm.rs::tool_calling_trial`, greedy decoding, two tools (`get_weather(city)`,
//! `set_timer(minutes)`), 6 requests that should call one ("Is it raining in London?", "Set a
//! timer for 10 minutes.", …) and 6 that should not ("What is the capital of France?", "Tell me a
//! joke.", …), under six prompt variants (each [`ToolPrompt`], and `Native` and
//! `PersonaThenNative` again with a worked example — call, result, answer — earlier in the
//! conversation):
//!
//! | variant | right call | wrong tool | no call | false call | replies with a code block | prompt | first text |
//! |---|---|---|---|---|---|---|---|
//! | `Native` | 0/6 | 0 | 6/6 | 0/6 | 2/12 | 324 tokens | 1.77 s |
//! | `PersonaThenNative` | 0/6 | 0 | 6/6 | 0/6 | 3/12 | 257 tokens | 1.34 s |
//! | `Conversational` | 0/6 | 0 | 6/6 | 0/6 | 2/12 | 201 tokens | 1.03 s |
//! | `Omit` | 0/6 | 0 | 6/6 | 0/6 | 0/12 | 32 tokens | 0.17 s |
//! | `PersonaThenNative` + example | 0/6 | 0 | 6/6 | 0/6 | 2/12 | 357 tokens | 1.92 s |
//! | `Native` + example | 0/6 | 0 | 6/6 | 0/6 | 1/12 | 424 tokens | 2.33 s |
//!
//! ("first text": mean time to the first spoken text on the idle 2-core machine, each prompt
//! read from scratch; a session's later turns reuse the system prompt, see [`crate::smollm`].)
//!
//! Not one `<tool_call>` in 72 replies. Instead the model answers tool requests itself, made up
//! ("The weather in Paris is quite beautiful…", "It's currently raining in London!"), and with
//! tools described it sometimes writes code that defines the tool ("The example format is as
//! follows: ```python def set_timer…"), which a voice would read aloud. With the worked example it
//! twice answered a weather question by imitating a tool result (`<tool_response>{"temperature_c":
//! 25, …}`; such blocks are kept out of the spoken text since) and once answered "Start a five
//! minute timer please." with the example's Berlin weather. Describing the tools also makes the
//! prompt 170–390 tokens longer, about a second more on every prompt read from scratch. So the
//! default is [`ToolPrompt::Omit`]: SmolLM2-135M cannot use the client's tools. The other variants
//! stay for a bigger SmolLM2 GGUF (the 1.7B model was trained for function calling with the
//! native prompt) and for re-running the trial.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::types::{ToolCall, ToolDef};

/// Most bytes of tool-call markup kept from one generation (the model may babble inside a tag).
const MAX_CALL_TEXT: usize = 16 * 1024;

/// How tools are described to the embedded model.
///
/// With SmolLM2-135M-Instruct none of them leads to a tool call (see the trial in this module's
/// documentation), hence the default [`ToolPrompt::Omit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolPrompt {
    /// SmolLM2's own function-calling system prompt, verbatim, *replacing* the persona: the model
    /// must answer with `<tool_call>[…]</tool_call>` only, `[]` when no tool fits.
    Native,
    /// The persona's system prompt, followed by the native prompt's tool list and format.
    PersonaThenNative,
    /// The persona's system prompt and a short instruction: call a tool with the markup, or
    /// answer normally.
    Conversational,
    /// Tools are not described at all: the model cannot call them (markup it emits anyway is
    /// still kept out of the spoken text). The cheapest prompt, and the only one that never made
    /// the 135M model write code.
    #[default]
    Omit,
}

/// The tools as the native prompt lists them: a JSON array of `{name, description, parameters}`.
fn tools_json(tools: &[ToolDef]) -> String {
    let list: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    Value::Array(list).to_string()
}

const NATIVE_INTRO: &str =
    "You are an expert in composing functions. You are given a question and a set of possible functions.
Based on the question, you will need to make one or more function/tool calls to achieve the purpose.
If none of the functions can be used, point it out and refuse to answer.
If the given question lacks the parameters required by the function, also point it out.";

const NATIVE_FORMAT: &str = "The output MUST strictly adhere to the following format, and NO other text MUST be included.
The example format is as follows. Please make sure the parameter type is correct. If no function call is needed, please make the tool calls an empty list '[]'.
<tool_call>[
{\"name\": \"func_name1\", \"arguments\": {\"argument1\": \"value1\", \"argument2\": \"value2\"}},
... (more tool calls as required)
]</tool_call>";

/// The system prompt to use when `tools` are offered (`persona` is the caller's system prompt).
pub(crate) fn system_prompt(style: ToolPrompt, persona: &str, tools: &[ToolDef]) -> String {
    if tools.is_empty() {
        return persona.to_owned();
    }
    let list = format!("You have access to the following tools:\n<tools>{}</tools>", tools_json(tools));
    match style {
        ToolPrompt::Native => format!("{NATIVE_INTRO}\n{list}\n{NATIVE_FORMAT}"),
        ToolPrompt::PersonaThenNative => format!("{persona}\n\n{list}\n{NATIVE_FORMAT}"),
        ToolPrompt::Conversational => format!(
            "{persona}\n\n{list}\nIf one of these tools is needed to answer, reply with only \
             <tool_call>[{{\"name\": \"tool_name\", \"arguments\": {{...}}}}]</tool_call>. \
             Otherwise answer the user normally, without a tool call."
        ),
        ToolPrompt::Omit => persona.to_owned(),
    }
}

/// Markup that is never spoken: `(opening tag, closing tag, whether the text between is a tool
/// call to keep)`. The model also imitates the `<tool_response>` blocks it sees in the prompt
/// (tool results are rendered that way), inventing a result; that is dropped.
const HIDDEN: [(&str, &str, bool); 2] =
    [("<tool_call>", "</tool_call>", true), ("<tool_response>", "</tool_response>", false)];

/// Separates streamed text into what may be spoken and markup (see `HIDDEN`).
///
/// Text that might be the start of an opening tag is held back until it is clear; markup between
/// the tags is collected (tool calls) or dropped (invented tool results), never returned.
#[derive(Debug, Default)]
pub(crate) struct SpokenFilter {
    pending: String,
    /// The `HIDDEN` entry whose closing tag is awaited.
    inside: Option<usize>,
    /// The bodies of the calls seen so far (between the tags).
    pub(crate) bodies: Vec<String>,
    kept: usize,
}

impl SpokenFilter {
    /// Adds generated text; returns the part that can be spoken now.
    pub(crate) fn push(&mut self, text: &str) -> String {
        self.pending.push_str(text);
        let mut spoken = String::new();
        loop {
            if let Some(which) = self.inside {
                let (_, close, keep) = HIDDEN[which];
                let Some(end) = self.pending.find(close) else {
                    // Keep collecting, within bounds: past the cap the rest of the markup is lost.
                    if self.pending.len() > MAX_CALL_TEXT {
                        let mut cut = MAX_CALL_TEXT;
                        while !self.pending.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        self.pending.truncate(cut);
                    }
                    break;
                };
                let body: String = self.pending[..end].to_owned();
                self.pending.drain(..end + close.len());
                if keep {
                    self.keep_body(body);
                }
                self.inside = None;
            } else if let Some((start, which)) = HIDDEN
                .iter()
                .enumerate()
                .filter_map(|(which, (open, _, _))| self.pending.find(open).map(|start| (start, which)))
                .min()
            {
                spoken.push_str(&self.pending[..start]);
                self.pending.drain(..start + HIDDEN[which].0.len());
                self.inside = Some(which);
            } else {
                // Speak all but a tail that could still grow into an opening tag (all are ASCII,
                // so the cut falls on a character boundary).
                let hold = HIDDEN
                    .iter()
                    .filter_map(|(open, _, _)| (1..open.len()).rev().find(|&n| self.pending.ends_with(&open[..n])))
                    .max()
                    .unwrap_or(0);
                let cut = self.pending.len() - hold;
                spoken.push_str(&self.pending[..cut]);
                self.pending.drain(..cut);
                break;
            }
        }
        spoken
    }

    /// Ends the text: a held-back tail is spoken; an unclosed call (the model stopped before
    /// `</tool_call>`) is still parsed.
    pub(crate) fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        match self.inside.take() {
            Some(which) => {
                if HIDDEN[which].2 {
                    self.keep_body(rest);
                }
                String::new()
            }
            None => rest,
        }
    }

    fn keep_body(&mut self, body: String) {
        if self.kept + body.len() <= MAX_CALL_TEXT {
            self.kept += body.len();
            self.bodies.push(body);
        }
    }
}

/// Process-wide counter behind call ids: the pipeline pairs results with calls by id, so ids
/// must not repeat across the turns of a conversation.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// Reads the calls in one `<tool_call>` body: a JSON array of `{"name", "arguments"}` objects
/// or a single object. Calls to tools not in `tools` are dropped; so is anything unparsable.
pub(crate) fn parse_calls(body: &str, tools: &[ToolDef]) -> Vec<ToolCall> {
    let Some(value) = lenient_json(body) else { return Vec::new() };
    let items = match value {
        Value::Array(items) => items,
        object @ Value::Object(_) => vec![object],
        _ => return Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|item| {
            let name = item.get("name")?.as_str()?.trim().to_owned();
            if !tools.iter().any(|t| t.name == name) {
                return None;
            }
            // The native format says "arguments"; the model sometimes echoes the schema's word.
            let arguments = match item.get("arguments").or_else(|| item.get("parameters")) {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(map)) => Value::Object(map).to_string(),
                    _ => return None,
                },
                Some(object @ Value::Object(_)) => object.to_string(),
                Some(_) => return None,
            };
            let id = format!("call_smol_{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed));
            Some(ToolCall { id, name, arguments })
        })
        .collect()
}

/// `text` as JSON, or failing that, the span from its first `[`/`{` to its last `]`/`}`
/// (the model wraps calls in prose or adds a trailing token).
fn lenient_json(text: &str) -> Option<Value> {
    let text = text.trim();
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let start = text.find(['[', '{'])?;
    let end = text.rfind([']', '}'])?;
    if end <= start {
        return None;
    }
    let inner = &text[start..=end];
    serde_json::from_str(inner).ok().or_else(|| {
        // Several objects without the enclosing list: `{…}, {…}`.
        serde_json::from_str(&format!("[{inner}]")).ok()
    })
}

#[cfg(test)]
mod tests;
