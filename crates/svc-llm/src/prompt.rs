//! The embedded brain's prompt: messages rendered in ChatML, SmolLM2's chat template, as token
//! ids, kept within a token budget.
//!
//! ```text
//! <|im_start|>system\n…<|im_end|>\n<|im_start|>user\n…<|im_end|>\n<|im_start|>assistant\n
//! ```
//!
//! Each message is tokenized on its own and the turn markers are inserted by id, so message text
//! is never parsed for special tokens (see [`crate::tokenizer`]). A tool result is rendered as a
//! user turn wrapped in `<tool_response>` and an assistant's tool calls as
//! `<tool_call>[…]</tool_call>`, as in the SmolLM2 template Ollama ships, since the model's own
//! template knows no tool role.
//!
//! A voice conversation grows without end but the model's attention cost grows with the prompt,
//! so the prompt is kept under a budget: the oldest turns go first, eight messages at a time (so
//! that consecutive prompts share their beginning), system messages never, and the last message
//! (the one being answered) only loses its beginning if it alone is too long.

use crate::types::{ChatMessage, ChatRole, LlmError};

/// Anything that turns text into token ids without special-token parsing.
pub(crate) trait Encode {
    /// Token ids of plain `text`.
    fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError>;
}

impl Encode for crate::tokenizer::Tokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        crate::tokenizer::Tokenizer::encode(self, text)
    }
}

/// The ChatML turn markers' ids.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChatMl {
    pub im_start: u32,
    pub im_end: u32,
}

/// A prompt ready for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prompt {
    pub ids: Vec<u32>,
    /// Messages left out to fit the budget.
    pub dropped: u32,
    /// Tokens of the assistant header that ends `ids`.
    pub header: usize,
}

/// Messages are dropped in multiples of this many (four exchanges).
const DROP_STEP: usize = 8;

/// The fewest tokens of the last message worth keeping when it has to be cut.
const MIN_LAST_MESSAGE_TOKENS: usize = 8;

/// The text a message contributes to its ChatML turn, and the role the turn is given.
pub(crate) fn render(message: &ChatMessage) -> (ChatRole, String) {
    match message.role {
        ChatRole::Tool => (ChatRole::User, format!("<tool_response>\n{}\n</tool_response>", message.content)),
        ChatRole::Assistant if !message.tool_calls.is_empty() => {
            let calls: Vec<String> = message
                .tool_calls
                .iter()
                .map(|call| {
                    // The arguments are JSON text; written raw so the model sees an object, not a string.
                    let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments)
                        .map(|v| v.to_string())
                        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()).to_string());
                    format!(
                        "{{\"name\": {}, \"arguments\": {}}}",
                        serde_json::Value::String(call.name.clone()),
                        arguments
                    )
                })
                .collect();
            let markup = format!("<tool_call>[\n{}\n]</tool_call>", calls.join(",\n"));
            let text = if message.content.is_empty() { markup } else { format!("{}\n{markup}", message.content) };
            (ChatRole::Assistant, text)
        }
        role => (role, message.content.clone()),
    }
}

/// Builds the prompt for `messages` (which should start with the system message; the caller adds
/// the model's default one if there is none), ending with the opening of the assistant's turn.
pub(crate) fn build(
    encoder: &impl Encode,
    chatml: ChatMl,
    messages: &[ChatMessage],
    budget: usize,
) -> Result<Prompt, LlmError> {
    let newline = encoder.encode("\n")?;
    let turn = |role: ChatRole, content_ids: Option<Vec<u32>>, text: &str| -> Result<Vec<u32>, LlmError> {
        let mut ids = vec![chatml.im_start];
        match content_ids {
            None => ids.extend(encoder.encode(&format!("{}\n{text}", role.as_str()))?),
            Some(content) => {
                ids.extend(encoder.encode(&format!("{}\n", role.as_str()))?);
                ids.extend(content);
            }
        }
        ids.push(chatml.im_end);
        ids.extend_from_slice(&newline);
        Ok(ids)
    };
    let mut generation = vec![chatml.im_start];
    generation.extend(encoder.encode("assistant\n")?);

    let rendered: Vec<(ChatRole, String)> = messages.iter().map(render).collect();
    let mut blocks: Vec<Vec<u32>> =
        rendered.iter().map(|(role, text)| turn(*role, None, text)).collect::<Result<_, _>>()?;
    let keep: Vec<bool> = messages.iter().map(|m| m.role == ChatRole::System).collect();
    let last = messages.len().checked_sub(1);
    let mut dropped = vec![false; messages.len()];
    let size = |blocks: &[Vec<u32>], dropped: &[bool]| {
        generation.len() + blocks.iter().zip(dropped).filter(|(_, d)| !**d).map(|(b, _)| b.len()).sum::<usize>()
    };

    let droppable = |i: usize, dropped: &[bool]| !keep[i] && !dropped[i] && Some(i) != last;
    while size(&blocks, &dropped) > budget {
        let Some(oldest) = (0..messages.len()).find(|&i| droppable(i, &dropped)) else { break };
        dropped[oldest] = true;
    }
    // Cut in steps of DROP_STEP messages: the next turns then start with the same messages and
    // the model state after this prompt can be reused for them (see `smollm::PrefixCache`),
    // where a cut that moves by one turn every turn would make every prompt new.
    let mut count = dropped.iter().filter(|d| **d).count();
    while count % DROP_STEP != 0 {
        let Some(oldest) = (0..messages.len()).find(|&i| droppable(i, &dropped)) else { break };
        dropped[oldest] = true;
        count += 1;
    }
    if dropped.iter().any(|d| *d) {
        // After a cut the history should open with something the user said, not with a reply or
        // a tool result whose question is gone.
        while let Some(first) = (0..messages.len()).find(|&i| !keep[i] && !dropped[i])
            && messages[first].role != ChatRole::User
            && droppable(first, &dropped)
        {
            dropped[first] = true;
        }
    }

    let total = size(&blocks, &dropped);
    if total > budget
        && let Some(last) = last
        && !keep[last]
    {
        // The last message alone is too long: keep its end, which is what was said most recently.
        let (role, text) = &rendered[last];
        let content = encoder.encode(text)?;
        let overhead = 2 + encoder.encode(&format!("{}\n", role.as_str()))?.len() + newline.len();
        let room = budget.saturating_sub(total - blocks[last].len() + overhead);
        if room >= MIN_LAST_MESSAGE_TOKENS {
            let tail = content[content.len().saturating_sub(room)..].to_vec();
            blocks[last] = turn(*role, Some(tail), "")?;
        }
    }
    let total = size(&blocks, &dropped);
    if total > budget {
        return Err(LlmError::PromptTooLong { needed: total, budget });
    }

    let mut ids = Vec::with_capacity(total);
    for (block, _) in blocks.iter().zip(&dropped).filter(|(_, d)| !**d) {
        ids.extend_from_slice(block);
    }
    ids.extend_from_slice(&generation);
    let dropped = u32::try_from(dropped.iter().filter(|d| **d).count()).unwrap_or(u32::MAX);
    Ok(Prompt { ids, dropped, header: generation.len() })
}

#[cfg(test)]
mod tests;
