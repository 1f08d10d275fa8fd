//! The embedded brain: SmolLM2-135M-Instruct (GGUF, Q4_1) run on the CPU by candle's quantized
//! llama, streaming its reply token by token.
//!
//! Loaded once and shared: [`SmolLm`] is `Send + Sync` and `generate` takes `&self`. candle's
//! `ModelWeights` keeps the KV cache inside itself, so each call works on a clone; the tensors
//! behind it are reference-counted, so the clone costs microseconds and no memory, and every
//! call gets its own cache. Calls may run at the same time on different threads; candle runs one
//! operation at a time on its thread pool, so they share the CPU.
//!
//! What happens at load, and why:
//! - The Q4_1 matrices are re-quantized to Q8_0 (`with_fast_weights`): candle has no SIMD
//!   kernel for Q4_1 on x86 and decoded at about 3 tokens/s with it; Q8_0 runs at 70–85.
//! - SmolLM2 ties its output projection to the token embeddings (the GGUF has no
//!   `output.weight`); candle's loader falls back to `token_embd.weight` (Q8_0), which is right
//!   for this model. It also keeps an f32 copy of the embeddings (113 MB) for the lookup.
//! - The tokenizer comes from the GGUF's own metadata ([`crate::tokenizer`]).
//!
//! Memory: about 250 MB once loaded (peak about 430 MB while loading), plus 46 KB per token of
//! each KV cache, live or kept in the prefix cache.
//!
//! Per generation: the prompt is built and kept under its budget ([`DEFAULT_PROMPT_BUDGET`]),
//! the part not already read by an earlier call is read in one batched forward pass (see
//! `PrefixCache`), then tokens are sampled one by one ([`GenerateParams`]) and streamed.

use std::collections::HashMap;
use std::io::{BufReader, Cursor, Read, Seek};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use candle_core::quantized::GgmlDType;
use candle_core::quantized::gguf_file::{self, TensorInfo};
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::{MAX_SEQ_LEN, ModelWeights};

use crate::prompt::{self, ChatMl};
use crate::sampler::Sampler;
use crate::tokenizer::{Tokenizer, Utf8Stream};
use crate::tools::{self, SpokenFilter, ToolPrompt};
use crate::types::{ChatMessage, Finish, GenerateParams, Generation, LlmError, ToolDef};

/// Default prompt budget in tokens. The model reads 8k tokens, but every prompt token costs
/// prefill time and every cached one attention time per generated token; a voice turn needs
/// only the recent conversation.
pub const DEFAULT_PROMPT_BUDGET: usize = 1536;

/// The system prompt SmolLM2's chat template inserts when a conversation has none.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// SmolLM2-135M-Instruct, loaded and ready to generate.
///
/// Cloning is cheap and shares the weights and the tokenizer (e.g. to use another
/// [`ToolPrompt`] for some sessions).
#[derive(Clone)]
pub struct SmolLm {
    weights: ModelWeights,
    tokenizer: Arc<Tokenizer>,
    device: Device,
    chatml: ChatMl,
    /// Tokens that end the reply (besides any other control token).
    end_of_turn: Vec<u32>,
    /// Positions the model can attend to: the GGUF's context, capped by candle's rotary table.
    context_length: usize,
    prompt_budget: usize,
    tool_prompt: ToolPrompt,
    /// Model states after recently read prompts, shared by clones.
    prefixes: Arc<Mutex<PrefixCache>>,
    /// Tokens whose text is not plain ASCII (control tokens excepted), for `ascii_only`.
    non_ascii: Arc<Vec<u32>>,
}

impl std::fmt::Debug for SmolLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmolLm")
            .field("context_length", &self.context_length)
            .field("prompt_budget", &self.prompt_budget)
            .field("tool_prompt", &self.tool_prompt)
            .finish_non_exhaustive()
    }
}

/// The weights of `content`, with every Q4_1 matrix re-quantized to Q8_0, as a GGUF content
/// description and the tensor data it points into.
///
/// candle 0.11 has no SIMD kernel for Q4_1 on x86: its scalar dot product made decoding about
/// 300 ms per token here. Q8_0 has AVX2/AVX-512 kernels. Eight bits per weight represent the
/// 4-bit values with an error far below their own quantization step, so the model's output is
/// practically unchanged (greedy replies in the tests are the same words); the weights grow from
/// about 60 to 100 MB.
fn with_fast_weights<R: Read + Seek>(
    content: gguf_file::Content,
    reader: &mut R,
) -> Result<(gguf_file::Content, Vec<u8>), LlmError> {
    let bad = |e: std::io::Error| LlmError::BadModel(format!("reading tensor data: {e}"));
    let file_len = reader.seek(std::io::SeekFrom::End(0)).map_err(bad)?;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    // Sized up front: ~100 MB grown by doubling would be copied and page-faulted twice over.
    let size = |info: &TensorInfo| {
        let blocks = info.shape.elem_count() / info.ggml_dtype.block_size();
        let dtype = if info.ggml_dtype == GgmlDType::Q4_1 { GgmlDType::Q8_0 } else { info.ggml_dtype };
        blocks * dtype.type_size()
    };
    let mut data = Vec::with_capacity(content.tensor_infos.values().map(size).sum());
    let mut infos = HashMap::with_capacity(names.len());
    for name in names {
        let info = &content.tensor_infos[name];
        let (dtype, elements) = (info.ggml_dtype, info.shape.elem_count());
        if !elements.is_multiple_of(dtype.block_size()) {
            return Err(LlmError::BadModel(format!("{name}: {elements} elements in blocks of {}", dtype.block_size())));
        }
        let bytes = elements / dtype.block_size() * dtype.type_size();
        let start = content.tensor_data_offset.saturating_add(info.offset);
        if start.saturating_add(bytes as u64) > file_len {
            return Err(LlmError::BadModel(format!("{name}: {bytes} bytes at {start} run past the end of the file")));
        }
        let mut raw = vec![0u8; bytes];
        reader.seek(std::io::SeekFrom::Start(start)).map_err(bad)?;
        reader.read_exact(&mut raw).map_err(bad)?;
        let offset = data.len() as u64;
        let ggml_dtype = if dtype == GgmlDType::Q4_1 {
            q4_1_to_q8_0(&raw, &mut data);
            GgmlDType::Q8_0
        } else {
            data.extend_from_slice(&raw);
            dtype
        };
        infos.insert(name.clone(), TensorInfo { ggml_dtype, shape: info.shape.clone(), offset });
    }
    let content = gguf_file::Content {
        magic: content.magic,
        metadata: content.metadata,
        tensor_infos: infos,
        tensor_data_offset: 0,
    };
    Ok((content, data))
}

/// Bytes of a Q4_1 block: f16 scale, f16 minimum, 32 four-bit values.
const Q4_1_BLOCK: usize = 20;

/// Converts Q4_1 blocks to Q8_0 blocks (f16 scale, 32 signed bytes), appending to `out`, with
/// ggml's own rules: Q4_1 value `j` is `d * q + m` where `q` is the low nibble of byte `j` for
/// the first 16 values and the high nibble for the rest; Q8_0 takes `d = max|x| / 127` and
/// rounds `x / d`.
fn q4_1_to_q8_0(blocks: &[u8], out: &mut Vec<u8>) {
    let mut x = [0f32; 32];
    for block in blocks.chunks_exact(Q4_1_BLOCK) {
        let d = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        let m = half::f16::from_le_bytes([block[2], block[3]]).to_f32();
        for (j, &byte) in block[4..].iter().enumerate() {
            x[j] = f32::from(byte & 0x0F) * d + m;
            x[j + 16] = f32::from(byte >> 4) * d + m;
        }
        let amax = x.iter().fold(0f32, |amax, v| amax.max(v.abs()));
        let scale = amax / 127.0;
        let inverse = if scale == 0.0 { 0.0 } else { 1.0 / scale };
        out.extend_from_slice(&half::f16::from_f32(scale).to_le_bytes());
        // Round half away from zero, like ggml's `roundf`, on a fixed-size block the compiler
        // vectorizes (a libm call per value made loading several times slower); |r| <= 127.
        let mut q = [0u8; 32];
        for (q, v) in q.iter_mut().zip(&x) {
            let r = v * inverse;
            *q = (r + 0.5f32.copysign(r)) as i32 as i8 as u8;
        }
        out.extend_from_slice(&q);
    }
}

/// Default number of prompts whose model state is kept (see [`SmolLm::with_prefix_cache`]).
pub const DEFAULT_PREFIX_CACHE: usize = 4;

/// Model states after recently read prompts.
///
/// A conversation's next prompt is its last prompt plus the reply and the new user turn, so
/// starting from the state after the last prompt leaves only those to read: the time to first
/// token stays flat as the conversation grows instead of growing with it. candle's tensors are
/// immutable and reference-counted, so a `ModelWeights` clone taken after reading a prompt is a
/// snapshot of its KV cache that later generations extend without changing.
struct PrefixCache {
    /// Prompt ids and the model after reading exactly them; oldest first.
    entries: Vec<(Vec<u32>, ModelWeights)>,
    capacity: usize,
}

impl PrefixCache {
    /// The state after the longest cached prompt that `ids` starts with, and that prompt's length.
    fn longest_prefix(&self, ids: &[u32]) -> Option<(ModelWeights, usize)> {
        self.entries
            .iter()
            .filter(|(prefix, _)| !prefix.is_empty() && ids.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(prefix, model)| (model.clone(), prefix.len()))
    }

    /// Keeps the state after `ids`; entries it extends are dropped (it serves their prompts'
    /// continuations as well), then the oldest beyond the capacity.
    fn insert(&mut self, ids: &[u32], model: &ModelWeights) {
        if self.capacity == 0 {
            return;
        }
        self.entries.retain(|(prefix, _)| !ids.starts_with(prefix));
        self.entries.push((ids.to_vec(), model.clone()));
        let excess = self.entries.len().saturating_sub(self.capacity);
        self.entries.drain(..excess);
    }
}

/// `SmolLm` is shared by every session through an `Arc`.
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<SmolLm>();
}

impl SmolLm {
    /// Loads the GGUF file: weights and tokenizer. Takes about 0.4 s on the 2-core machine.
    pub fn load(path: impl AsRef<Path>) -> Result<SmolLm, LlmError> {
        let path = path.as_ref();
        let io = |source| LlmError::Io { path: path.display().to_string(), source };
        // Buffered: the metadata is read as ~100k small strings (the vocabulary and merges).
        let mut reader = BufReader::new(std::fs::File::open(path).map_err(io)?);
        let content = gguf_file::Content::read(&mut reader).map_err(|e| LlmError::BadModel(e.to_string()))?;
        let architecture = content.metadata.get("general.architecture").and_then(|v| v.to_string().ok());
        if architecture.map(String::as_str) != Some("llama") {
            return Err(LlmError::BadModel(format!("architecture {architecture:?} is not llama")));
        }
        let context_length = content
            .metadata
            .get("llama.context_length")
            .and_then(|v| v.to_u32().ok())
            .map_or(MAX_SEQ_LEN, |n| (n as usize).min(MAX_SEQ_LEN));
        let tokenizer = Tokenizer::from_gguf(&content)?;
        let id = |token: &str| {
            tokenizer.token_id(token).ok_or_else(|| LlmError::BadModel(format!("no `{token}` in the vocabulary")))
        };
        let chatml = ChatMl { im_start: id("<|im_start|>")?, im_end: id("<|im_end|>")? };
        let mut end_of_turn = vec![chatml.im_end];
        end_of_turn.extend(tokenizer.eos_id());
        end_of_turn.extend(tokenizer.token_id("<|endoftext|>"));

        let device = Device::Cpu;
        let (content, data) = with_fast_weights(content, &mut reader)?;
        let weights = ModelWeights::from_gguf(content, &mut Cursor::new(data), &device)
            .map_err(|e| LlmError::BadModel(e.to_string()))?;
        let non_ascii = (0..u32::try_from(tokenizer.vocab_size()).unwrap_or(u32::MAX))
            .filter(|&id| !tokenizer.is_control(id) && !tokenizer.token_bytes(id).is_ascii())
            .collect();
        Ok(SmolLm {
            weights,
            non_ascii: Arc::new(non_ascii),
            tokenizer: Arc::new(tokenizer),
            device,
            chatml,
            end_of_turn,
            context_length,
            prompt_budget: DEFAULT_PROMPT_BUDGET,
            tool_prompt: ToolPrompt::default(),
            prefixes: Arc::new(Mutex::new(PrefixCache { entries: Vec::new(), capacity: DEFAULT_PREFIX_CACHE })),
        })
    }

    /// Sets the prompt budget in tokens (at least 64, at most the context).
    pub fn with_prompt_budget(mut self, tokens: usize) -> Self {
        self.prompt_budget = tokens.clamp(64, self.context_length);
        self
    }

    /// Gives this model (and its later clones) its own, empty cache of the model state after
    /// the `entries` most recent prompts, reused when a prompt extends one of them (0 turns the
    /// reuse off; the default is [`DEFAULT_PREFIX_CACHE`]). Each entry costs about 46 KB per
    /// prompt token (the KV cache: 30 layers, keys and values, 3 heads of 64), so 70 MB for a
    /// prompt of 1,536 tokens.
    pub fn with_prefix_cache(mut self, entries: usize) -> Self {
        self.prefixes = Arc::new(Mutex::new(PrefixCache { entries: Vec::new(), capacity: entries }));
        self
    }

    /// Sets how tools are described to the model.
    pub fn with_tool_prompt(mut self, style: ToolPrompt) -> Self {
        self.tool_prompt = style;
        self
    }

    /// The prompt budget in tokens.
    pub fn prompt_budget(&self) -> usize {
        self.prompt_budget
    }

    /// How many positions prompt and reply may fill together.
    pub fn context_length(&self) -> usize {
        self.context_length
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Generates the assistant's reply to `messages`, streaming it.
    ///
    /// `on_text` is called once per generated token with the text that became speakable (valid
    /// UTF-8, tool-call markup removed). That text may be empty — half a character, or a token
    /// inside a tool call — so that the caller can still stop generation at every token:
    /// returning `ControlFlow::Break(())` ends it with [`Finish::Cancelled`] (barge-in).
    /// [`Generation::text`] is exactly the concatenation of the pieces passed to `on_text`.
    ///
    /// Generation ends at an end-of-turn token (`<|im_end|>`, end of text, any other control
    /// token), after `params.max_tokens` tokens or at the context's end ([`Finish::Length`]),
    /// or when `on_text` says stop. If the model called tools, the finish is
    /// [`Finish::ToolCalls`]; after a cancel no tool calls are returned.
    ///
    /// If `messages` does not start with a system message, SmolLM2's default one is used. With
    /// `tools`, the system prompt is rewritten as [`ToolPrompt`] says.
    pub fn generate(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolDef],
        params: &GenerateParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, LlmError> {
        params.validate()?;
        let messages = self.with_system_prompt(messages, tools);
        let prompt = prompt::build(self.tokenizer.as_ref(), self.chatml, &messages, self.prompt_budget)?;
        let prompt_len = prompt.ids.len();
        let max_new = (params.max_tokens as usize).min(self.context_length.saturating_sub(prompt_len));

        let mut generation = Generation {
            text: String::new(),
            tool_calls: Vec::new(),
            prompt_tokens: u32::try_from(prompt_len).unwrap_or(u32::MAX),
            output_tokens: 0,
            dropped_messages: prompt.dropped,
            finish: Finish::Length,
        };
        if max_new == 0 {
            return Ok(generation);
        }

        // All but the last prompt token: the state after them is kept for the next turn, whose
        // prompt starts with them (and a repeat of this prompt then reads a single token).
        let last = prompt_len - 1;
        let mut model = self.read(&prompt.ids[..last])?;
        let mut sampler = Sampler::new(params);
        let mut utf8 = Utf8Stream::new();
        let mut filter = SpokenFilter::default();
        let mut recent = prompt.ids.clone();

        let input = Tensor::new(&prompt.ids[last..], &self.device)?.unsqueeze(0)?;
        let mut logits = model.forward(&input, last)?.squeeze(0)?.to_vec1::<f32>()?;
        let mut produced = 0usize;
        let finish = loop {
            if produced == max_new {
                break Finish::Length;
            }
            self.ban(&mut logits, &recent[prompt_len..], params);
            let next = sampler.sample(&mut logits, &recent, |id| self.tokenizer.is_control(id));
            produced += 1;
            if self.end_of_turn.contains(&next) || self.tokenizer.is_control(next) {
                break Finish::Stop;
            }
            recent.push(next);
            let spoken = filter.push(&utf8.push(self.tokenizer.token_bytes(next)));
            generation.text.push_str(&spoken);
            if on_text(&spoken).is_break() {
                break Finish::Cancelled;
            }
            if produced == max_new {
                break Finish::Length;
            }
            let input = Tensor::new(&[next], &self.device)?.unsqueeze(0)?;
            logits = model.forward(&input, prompt_len + produced - 1)?.squeeze(0)?.to_vec1::<f32>()?;
        };
        generation.output_tokens = u32::try_from(produced).unwrap_or(u32::MAX);
        generation.finish = finish;
        if finish == Finish::Cancelled {
            return Ok(generation);
        }

        // Flush what was held back (an incomplete character, a possible tag start); the caller
        // already had its chance to cancel, so its answer no longer matters here.
        let tail = filter.push(&utf8.finish()) + &filter.finish();
        if !tail.is_empty() {
            generation.text.push_str(&tail);
            // The reply is over either way; a late stop changes nothing.
            let _ = on_text(&tail);
        }
        generation.tool_calls = filter.bodies.iter().flat_map(|body| tools::parse_calls(body, tools)).collect();
        if !generation.tool_calls.is_empty() {
            generation.finish = Finish::ToolCalls;
        }
        Ok(generation)
    }

    /// Reads the conversation so far into the prefix cache without replying, so that the next
    /// [`SmolLm::generate`] on these messages plus new ones reads only the new ones. Call it when
    /// a session starts, with the system prompt (and tools) it will use, while the user is still
    /// speaking: the first reply then starts as fast as later ones. Returns the tokens read.
    pub fn warm_up(&self, messages: &[ChatMessage], tools: &[ToolDef]) -> Result<u32, LlmError> {
        let messages = self.with_system_prompt(messages, tools);
        let prompt = prompt::build(self.tokenizer.as_ref(), self.chatml, &messages, self.prompt_budget)?;
        let ids = &prompt.ids[..prompt.ids.len() - prompt.header];
        self.read(ids)?;
        Ok(u32::try_from(ids.len()).unwrap_or(u32::MAX))
    }

    /// The model after reading `ids`, starting from the state after the longest cached prompt
    /// that `ids` extends (see [`PrefixCache`]); the new part is read in one forward pass
    /// (batched prefill) and the result is cached in turn.
    fn read(&self, ids: &[u32]) -> Result<ModelWeights, LlmError> {
        let cached = self.prefixes.lock().unwrap_or_else(PoisonError::into_inner).longest_prefix(ids);
        // Each call owns its KV cache: see the module documentation.
        let (mut model, reused) = cached.unwrap_or_else(|| (self.weights.clone(), 0));
        if reused < ids.len() {
            let input = Tensor::new(&ids[reused..], &self.device)?.unsqueeze(0)?;
            model.forward(&input, reused)?;
            self.prefixes.lock().unwrap_or_else(PoisonError::into_inner).insert(ids, &model);
        }
        Ok(model)
    }

    /// Rules out the tokens `params` forbids after `reply` (the reply so far): a repeated
    /// n-gram, text that is not ASCII.
    fn ban(&self, logits: &mut [f32], reply: &[u32], params: &GenerateParams) {
        let mut ban = |id: u32| {
            if let Some(logit) = logits.get_mut(id as usize) {
                *logit = f32::NEG_INFINITY;
            }
        };
        for id in crate::sampler::ngram_bans(reply, params.no_repeat_ngram as usize) {
            ban(id);
        }
        if params.ascii_only {
            self.non_ascii.iter().copied().for_each(ban);
        }
    }

    /// `messages` with the system prompt the model will see first.
    fn with_system_prompt(&self, messages: &[ChatMessage], tools: &[ToolDef]) -> Vec<ChatMessage> {
        let mut out = Vec::with_capacity(messages.len() + 1);
        let rest = match messages.first() {
            Some(first) if first.role == crate::ChatRole::System => {
                out.push(first.clone());
                &messages[1..]
            }
            _ => {
                out.push(ChatMessage::system(DEFAULT_SYSTEM_PROMPT));
                messages
            }
        };
        out[0].content = tools::system_prompt(self.tool_prompt, &out[0].content, tools);
        out.extend_from_slice(rest);
        out
    }
}

#[cfg(test)]
mod tests;
