//! Whisper's tokens back to text, read from the Hugging Face `tokenizer.json`.
//!
//! Transcription only ever *decodes*: the prompt is made of special tokens looked up by name. So
//! instead of the `tokenizers` crate (a large dependency for one direction of one algorithm) this
//! reads the vocabulary and undoes GPT-2's byte-level encoding, where each byte is written as one
//! printable character.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::SttError;

/// The parts of `tokenizer.json` needed to decode.
#[derive(Deserialize)]
struct TokenizerJson {
    model: BpeModel,
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
}

#[derive(Deserialize)]
struct BpeModel {
    vocab: HashMap<String, u32>,
}

#[derive(Deserialize)]
struct AddedToken {
    id: u32,
    content: String,
    #[serde(default)]
    special: bool,
}

/// Token ids → text.
#[derive(Debug, Clone)]
pub(crate) struct Tokenizer {
    /// The raw bytes of each ordinary token, by id; `None` where the id is special or unknown.
    bytes: Vec<Option<Vec<u8>>>,
    /// Special tokens by their text, e.g. `<|endoftext|>`.
    specials: HashMap<String, u32>,
}

/// GPT-2's byte ↔ character table: printable Latin-1 bytes stand for themselves, the others are
/// shifted to U+0100 and up. Returns the inverse, character → byte.
fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).expect("U+0100..U+0143 are characters")
        };
        map.insert(c, b);
    }
    map
}

impl Tokenizer {
    /// Reads `tokenizer.json` at `path`.
    pub(crate) fn load(path: &Path) -> Result<Self, SttError> {
        let text = std::fs::read(path).map_err(|e| SttError::io(path, e))?;
        Self::from_json(&text).map_err(|detail| SttError::format(path, detail))
    }

    /// Parses the JSON text of a tokenizer.
    pub(crate) fn from_json(text: &[u8]) -> Result<Self, String> {
        let json: TokenizerJson =
            serde_json::from_slice(text).map_err(|e| format!("not a Hugging Face tokenizer.json: {e}"))?;
        let table = unicode_to_byte();
        let max_id = json.model.vocab.values().chain(json.added_tokens.iter().map(|t| &t.id)).copied().max();
        let Some(max_id) = max_id else {
            return Err("the vocabulary is empty".to_owned());
        };
        // An id far beyond Whisper's 51,865 would make the table absurdly large: refuse it.
        if max_id > 1_000_000 {
            return Err(format!("token id {max_id} is implausibly large"));
        }
        let mut bytes = vec![None; max_id as usize + 1];
        let mut specials = HashMap::new();
        for t in &json.added_tokens {
            if t.special {
                specials.insert(t.content.clone(), t.id);
            } else {
                bytes[t.id as usize] = Some(t.content.as_bytes().to_vec());
            }
        }
        for (token, &id) in &json.model.vocab {
            if specials.contains_key(token) {
                continue;
            }
            // A token outside the byte alphabet cannot come from byte-level BPE; keep its UTF-8 as is.
            let raw: Option<Vec<u8>> = token.chars().map(|c| table.get(&c).copied()).collect();
            bytes[id as usize] = Some(raw.unwrap_or_else(|| token.as_bytes().to_vec()));
        }
        Ok(Tokenizer { bytes, specials })
    }

    /// The id of a special token such as `<|endoftext|>`.
    pub(crate) fn special(&self, name: &str) -> Option<u32> {
        self.specials.get(name).copied()
    }

    /// The text of `ids`, special and unknown ids skipped; invalid UTF-8 (a character cut between
    /// tokens) becomes U+FFFD.
    pub(crate) fn decode(&self, ids: &[u32]) -> String {
        let mut out = Vec::new();
        for &id in ids {
            if let Some(Some(b)) = self.bytes.get(id as usize) {
                out.extend_from_slice(b);
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_covers_every_byte_once() {
        let t = unicode_to_byte();
        assert_eq!(t.len(), 256);
        assert_eq!(t[&'Ġ'], b' ');
        assert_eq!(t[&'Ċ'], b'\n');
        assert_eq!(t[&'A'], b'A');
        assert_eq!(t[&'Ã'], 0xC3);
    }

    #[test]
    fn decodes_byte_level_tokens_and_skips_specials() {
        let json = r#"{
            "model": {"vocab": {"Hello": 0, "Ġworld": 1, "Ã©": 2, "<|endoftext|>": 3}},
            "added_tokens": [
                {"id": 3, "content": "<|endoftext|>", "special": true},
                {"id": 4, "content": "<|en|>", "special": true}
            ]
        }"#;
        let t = Tokenizer::from_json(json.as_bytes()).expect("valid");
        assert_eq!(t.special("<|endoftext|>"), Some(3));
        assert_eq!(t.special("<|en|>"), Some(4));
        assert_eq!(t.decode(&[4, 0, 1, 2, 3, 99]), "Hello worldé");
        assert!(Tokenizer::from_json(b"{}").is_err());
        assert!(Tokenizer::from_json(b"not json").is_err());
    }
}
