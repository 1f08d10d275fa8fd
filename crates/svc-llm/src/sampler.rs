//! Picks the next token from the model's logits: repetition penalty, temperature, top-k, top-p,
//! then a draw from a seeded generator.
//!
//! The generator is a SplitMix64 written out here rather than a crate's `StdRng`, whose algorithm
//! may change between versions: the same seed must give the same reply on every build, which
//! is what makes replies reproducible in tests and bug reports.

use crate::types::GenerateParams;

/// How many recent tokens the repetition penalty looks at (llama.cpp's default).
const REPEAT_WINDOW: usize = 64;

/// SmolLM2's seeded random source (SplitMix64).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Token sampler for one generation.
#[derive(Debug)]
pub(crate) struct Sampler {
    rng: SplitMix64,
    temperature: f32,
    top_p: f32,
    top_k: usize,
    repeat_penalty: f32,
    /// Scratch: candidate ids, reused across tokens.
    order: Vec<u32>,
}

impl Sampler {
    pub(crate) fn new(params: &GenerateParams) -> Self {
        Sampler {
            rng: SplitMix64::new(params.seed),
            temperature: params.temperature,
            top_p: params.top_p,
            top_k: params.top_k as usize,
            repeat_penalty: params.repeat_penalty,
            order: Vec::new(),
        }
    }

    /// Picks a token. `recent` is the text so far (only its last [`REPEAT_WINDOW`] tokens are
    /// penalised); `exempt` says which tokens are never penalised (turn markers: penalising the
    /// end-of-turn token because the prompt is full of it would make replies ramble on).
    pub(crate) fn sample(&mut self, logits: &mut [f32], recent: &[u32], exempt: impl Fn(u32) -> bool) -> u32 {
        if self.repeat_penalty != 1.0 {
            let window = &recent[recent.len().saturating_sub(REPEAT_WINDOW)..];
            let mut seen: Vec<u32> = window.iter().copied().filter(|&id| !exempt(id)).collect();
            seen.sort_unstable();
            seen.dedup();
            for id in seen {
                if let Some(logit) = logits.get_mut(id as usize) {
                    *logit = if *logit >= 0.0 { *logit / self.repeat_penalty } else { *logit * self.repeat_penalty };
                }
            }
        }
        if self.temperature <= 0.0 {
            return argmax(logits);
        }

        self.order.clear();
        self.order.extend(0..logits.len() as u32);
        let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
        if self.top_k > 0 && self.top_k < self.order.len() {
            self.order.select_nth_unstable_by(self.top_k - 1, by_logit);
            self.order.truncate(self.top_k);
        }
        self.order.sort_unstable_by(by_logit);

        // Softmax over the candidates, most likely first.
        let max = logits[self.order[0] as usize];
        let mut probs: Vec<f64> =
            self.order.iter().map(|&id| f64::from((logits[id as usize] - max) / self.temperature).exp()).collect();
        let sum: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= sum);

        // Nucleus: the smallest head whose mass reaches top_p (at least one token).
        let mut kept = probs.len();
        if self.top_p < 1.0 {
            let mut mass = 0.0;
            for (i, p) in probs.iter().enumerate() {
                mass += p;
                if mass >= f64::from(self.top_p) {
                    kept = i + 1;
                    break;
                }
            }
        }
        let mass: f64 = probs[..kept].iter().sum();
        let mut draw = self.rng.next_f64() * mass;
        for (i, p) in probs[..kept].iter().enumerate() {
            draw -= p;
            if draw < 0.0 {
                return self.order[i];
            }
        }
        // Rounding left a sliver of mass undrawn: it belongs to the last kept token.
        self.order[kept - 1]
    }
}

/// The tokens that, said next after `generated`, would repeat an `n`-gram already in it: for
/// each earlier occurrence of its last `n - 1` tokens, the token that followed (Hugging Face's
/// `no_repeat_ngram_size`). Empty when `n` is 0.
pub(crate) fn ngram_bans(generated: &[u32], n: usize) -> Vec<u32> {
    if n == 0 || generated.len() < n.saturating_sub(1).max(1) {
        return Vec::new();
    }
    let prefix = &generated[generated.len() + 1 - n..];
    generated.windows(n).filter(|window| &window[..n - 1] == prefix).map(|window| window[n - 1]).collect()
}

/// Index of the largest logit (the first one on ties).
pub(crate) fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &logit) in logits.iter().enumerate() {
        if logit > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests;
