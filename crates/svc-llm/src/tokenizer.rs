//! SmolLM2's tokenizer, rebuilt from the GGUF file's own metadata so that no `tokenizer.json`
//! has to ship beside the weights.
//!
//! The GGUF says `tokenizer.ggml.model = gpt2` (byte-level BPE) and `tokenizer.ggml.pre = smollm`:
//! digits are split one by one, then GPT-2's regex splits words, as in the model's own
//! `tokenizer.json` (`Digits(individual_digits)` then `ByteLevel(add_prefix_space = false)`).
//! The BPE itself comes from the `tokenizers` crate, fed with the GGUF vocabulary and merges.
//!
//! Special (control) tokens such as `<|im_start|>` are deliberately *not* registered with the
//! BPE: [`Tokenizer::encode`] never turns text into a control token, so nothing a user says can
//! open or close a ChatML turn. The prompt builder inserts control tokens by id.
//!
//! Decoding goes through each token's raw bytes, and [`Utf8Stream`] holds back a character
//! whose bytes are split over tokens, so streamed text is always valid UTF-8.

use std::collections::HashMap;

use candle_core::quantized::gguf_file;
use tokenizers::models::bpe::{BPE, Merges, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;

use crate::types::LlmError;

/// GGUF token type of a control token (`llama_token_type`: 1 normal, 2 unknown, 3 control,
/// 4 user-defined, 5 unused, 6 byte).
const TOKEN_TYPE_CONTROL: i64 = 3;

/// Byte-level BPE tokenizer of a GGUF model.
pub struct Tokenizer {
    bpe: tokenizers::Tokenizer,
    /// Every token's text as in the vocabulary (byte-level alphabet for normal tokens).
    tokens: Vec<String>,
    /// Every token's bytes when decoded; empty for control tokens, which are never spoken.
    token_bytes: Vec<Vec<u8>>,
    /// Control tokens (`<|im_start|>`, `<|endoftext|>`, ...).
    control: Vec<bool>,
    ids: HashMap<String, u32>,
    bos: Option<u32>,
    eos: Option<u32>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("vocab_size", &self.tokens.len()).finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Reads only the tokenizer from a GGUF file (the weights are not loaded).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Tokenizer, LlmError> {
        let path = path.as_ref();
        let io = |source| LlmError::Io { path: path.display().to_string(), source };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let content = gguf_file::Content::read(&mut file).map_err(|e| LlmError::BadModel(e.to_string()))?;
        Tokenizer::from_gguf(&content)
    }

    /// Builds the tokenizer from a GGUF file's metadata.
    pub fn from_gguf(content: &gguf_file::Content) -> Result<Tokenizer, LlmError> {
        let md =
            |key: &str| content.metadata.get(key).ok_or_else(|| LlmError::BadModel(format!("no `{key}` metadata")));
        let bad = |key: &str, e: candle_core::Error| LlmError::BadModel(format!("`{key}`: {e}"));

        let model = md("tokenizer.ggml.model")?.to_string().map_err(|e| bad("tokenizer.ggml.model", e))?;
        if model != "gpt2" {
            return Err(LlmError::BadModel(format!("tokenizer model `{model}` is not gpt2 (byte-level BPE)")));
        }
        if let Some(pre) = content.metadata.get("tokenizer.ggml.pre").and_then(|v| v.to_string().ok())
            && pre != "smollm"
        {
            // Another pre-tokenizer splits words differently: ids would be subtly wrong, not fail.
            return Err(LlmError::BadModel(format!("pre-tokenizer `{pre}` is not supported (only smollm)")));
        }

        let tokens: Vec<String> = md("tokenizer.ggml.tokens")?
            .to_vec()
            .map_err(|e| bad("tokenizer.ggml.tokens", e))?
            .iter()
            .map(|v| v.to_string().cloned())
            .collect::<Result<_, _>>()
            .map_err(|e| bad("tokenizer.ggml.tokens", e))?;
        let merges: Merges = md("tokenizer.ggml.merges")?
            .to_vec()
            .map_err(|e| bad("tokenizer.ggml.merges", e))?
            .iter()
            .map(|v| {
                let merge = v.to_string().map_err(|e| bad("tokenizer.ggml.merges", e))?;
                merge
                    .split_once(' ')
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                    .ok_or_else(|| LlmError::BadModel(format!("merge `{merge}` has no space")))
            })
            .collect::<Result<_, _>>()?;
        let types: Vec<i64> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| bad("tokenizer.ggml.token_type", e))?
                .iter()
                .map(|t| t.to_i32().map(i64::from).or_else(|_| t.to_u32().map(i64::from)))
                .collect::<Result<_, _>>()
                .map_err(|e| bad("tokenizer.ggml.token_type", e))?,
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(LlmError::BadModel(format!("{} token types for {} tokens", types.len(), tokens.len())));
        }
        let special_id = |key: &str| content.metadata.get(key).and_then(|v| v.to_u32().ok());
        let (bos, eos) = (special_id("tokenizer.ggml.bos_token_id"), special_id("tokenizer.ggml.eos_token_id"));

        let vocab_size = u32::try_from(tokens.len()).map_err(|_| LlmError::BadModel("vocabulary too large".into()))?;
        let vocab: Vocab = tokens.iter().cloned().zip(0..vocab_size).collect();
        let bpe =
            BPE::builder().vocab_and_merges(vocab, merges).build().map_err(|e| LlmError::Tokenizer(e.to_string()))?;
        let mut tokenizer = tokenizers::Tokenizer::new(bpe);
        let pre: Vec<PreTokenizerWrapper> = vec![Digits::new(true).into(), ByteLevel::new(false, true, true).into()];
        tokenizer.with_pre_tokenizer(Some(Sequence::new(pre)));

        let chars = unicode_to_byte();
        let control: Vec<bool> = types.iter().map(|&t| t == TOKEN_TYPE_CONTROL).collect();
        let token_bytes = tokens
            .iter()
            .zip(&control)
            .map(|(text, &control)| {
                if control {
                    return Vec::new();
                }
                // A normal token is spelled in GPT-2's byte alphabet; anything outside it (a
                // user-defined token) is its own UTF-8 text.
                text.chars()
                    .flat_map(|c| chars.get(&c).map(|&b| vec![b]).unwrap_or_else(|| c.to_string().into_bytes()))
                    .collect()
            })
            .collect();
        let ids = tokens.iter().cloned().zip(0..vocab_size).collect();
        Ok(Tokenizer { bpe: tokenizer, tokens, token_bytes, control, ids, bos, eos })
    }

    /// Tokenizes plain text. Never yields a control token: `"<|im_end|>"` in the text becomes the
    /// tokens of its characters, so text cannot inject turn markers.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let encoding = self.bpe.encode_fast(text, false).map_err(|e| LlmError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids`, control tokens left out. Invalid UTF-8 (a character cut between
    /// tokens at either end) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.token_bytes(id).iter().copied()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The bytes token `id` stands for (empty for control tokens and unknown ids).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.token_bytes.get(id as usize).map(Vec::as_slice).unwrap_or_default()
    }

    /// The id of a vocabulary entry spelled exactly `token` (e.g. `"<|im_start|>"`, or `"ĠHello"`
    /// in the byte-level alphabet, where `Ġ` is a space).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// The vocabulary entry of `id`, as spelled in the GGUF.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Whether `id` is a control token (turn markers, end of text, ...).
    pub fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(false)
    }

    /// The beginning-of-sequence token, if the model has one.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token, if the model has one.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }
}

/// GPT-2's byte-to-character table, reversed: the character each byte is spelled with in a
/// byte-level vocabulary, mapped back to the byte. Printable Latin-1 bytes stand for themselves;
/// the other 68 are shifted to U+0100 and up, in order.
fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for byte in 0..=255u8 {
        let c = if printable(byte) {
            char::from(byte)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).expect("U+0100..U+0144 are valid characters")
        };
        map.insert(c, byte);
    }
    map
}

/// Turns a stream of bytes cut at arbitrary points into valid UTF-8 text: a character whose
/// bytes are not all there yet waits for the next push; bytes that can never form a character
/// become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).expect("from_utf8 said this prefix is valid"));
                    match error.error_len() {
                        // An incomplete character at the end: keep it for the next push.
                        None => {
                            rest = after;
                            break;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// Ends the stream: whatever is still pending can never complete and becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests;
