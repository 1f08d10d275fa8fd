//! The rules around the network that keep Whisper from inventing words, as pure functions:
//! what part of the audio the encoder sees ([`speech_window`]), how many tokens a window may
//! produce ([`token_budget`]), loops and doubled sentences ([`repetition_cut`],
//! [`drop_repeated_sentences`]), the reference decoder's quality checks
//! ([`compression_ratio`]) and the sampling its temperature fallback uses ([`Sampler`]).

use std::io::Write;
use std::ops::Range;

use crate::RATE_HZ;

/// Audio kept before the first frame of speech.
pub(crate) const LEAD_SECONDS: f32 = 0.3;
/// Audio kept after the last frame of speech: enough for the last word's release, and short
/// enough that the decoder is not handed a silent tail to fill (it writes the sentence again).
pub(crate) const TRAIL_SECONDS: f32 = 0.4;
/// A 20 ms frame is speech when its RMS is within this factor of the loudest frame's (−30 dB)…
const SPEECH_RELATIVE: f32 = 0.0316;
/// …and above this absolute floor (about −60 dBFS).
const SPEECH_FLOOR_RMS: f32 = 0.001;
/// Tokens a window may produce per second of audio, plus [`TOKEN_BUDGET_BASE`]: fast English is
/// about four tokens a second, so this leaves room for any real speech but stops a runaway loop.
const TOKENS_PER_SECOND: f32 = 8.0;
/// See [`TOKENS_PER_SECOND`].
const TOKEN_BUDGET_BASE: usize = 16;
/// A tail of repeats at least this many tokens long (with 3+ copies) is a decoding loop.
const REPEAT_SPAN: usize = 12;
/// The longest repeated pattern, in tokens, the loop guard looks for.
const REPEAT_MAX_PERIOD: usize = 40;
/// Two copies of a pattern at least this long are a doubled sentence, not speech ("no, no" is
/// speech; "How many minutes are left? How many minutes are left?" is the decoder filling time).
const DOUBLE_MIN_PERIOD: usize = 6;
/// Sentences with fewer words than this may be said twice on purpose ("Hello? Hello?").
const DOUBLE_MIN_WORDS: usize = 3;

/// The part of `audio` the encoder should see: from [`LEAD_SECONDS`] before the first frame of
/// speech to [`TRAIL_SECONDS`] after the last; all of it when no frame stands out. With it, the
/// silence to add after the audio when the speech runs to its very end (the last word needs
/// [`TRAIL_SECONDS`] after it: without, Whisper drops it).
pub(crate) fn speech_window(audio: &[f32]) -> (Range<usize>, usize) {
    let frame = RATE_HZ as usize / 50;
    let rms: Vec<f32> = audio
        .chunks(frame)
        .map(|chunk| (chunk.iter().map(|s| s * s).sum::<f32>() / chunk.len() as f32).sqrt())
        .collect();
    let peak = rms.iter().copied().fold(0.0, f32::max);
    let threshold = (peak * SPEECH_RELATIVE).max(SPEECH_FLOOR_RMS);
    let (Some(first), Some(last)) = (rms.iter().position(|&r| r > threshold), rms.iter().rposition(|&r| r > threshold))
    else {
        return (0..audio.len(), 0);
    };
    let lead = (LEAD_SECONDS * RATE_HZ as f32) as usize;
    let trail = (TRAIL_SECONDS * RATE_HZ as f32) as usize;
    let start = (first * frame).saturating_sub(lead);
    let wanted = ((last + 1) * frame).min(audio.len()) + trail;
    let end = wanted.min(audio.len());
    (start..end, wanted - end)
}

/// The most text tokens a window of `n_samples` may produce.
pub(crate) fn token_budget(n_samples: usize) -> usize {
    let seconds = n_samples as f32 / RATE_HZ as f32;
    TOKEN_BUDGET_BASE + (seconds * TOKENS_PER_SECOND).ceil() as usize
}

/// When `tokens` ends in a loop, how many tokens to keep: everything up to and including the
/// pattern's first copy. A loop is a pattern of up to [`REPEAT_MAX_PERIOD`] tokens repeated three
/// or more times over at least [`REPEAT_SPAN`] tokens, or a pattern of [`DOUBLE_MIN_PERIOD`] or
/// more tokens said twice in a row (a doubled sentence).
pub(crate) fn repetition_cut(tokens: &[u32]) -> Option<usize> {
    let n = tokens.len();
    for period in 1..=REPEAT_MAX_PERIOD {
        let copies = if period >= DOUBLE_MIN_PERIOD { 2 } else { REPEAT_SPAN.div_ceil(period).max(3) };
        let span = period * copies;
        if span > n {
            continue;
        }
        let tail = &tokens[n - span..];
        if tail.chunks_exact(period).all(|c| c == &tail[..period]) {
            return Some(n - span + period);
        }
    }
    None
}

/// `text` without a sentence that repeats the one before it (compared without case and
/// punctuation), for sentences of [`DOUBLE_MIN_WORDS`] words or more: the same doubling
/// [`repetition_cut`] stops token by token, caught when the copies differ in a token (a leading
/// space, a capital).
pub(crate) fn drop_repeated_sentences(text: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut previous: Option<String> = None;
    for sentence in sentences(text) {
        let key: String = sentence
            .chars()
            .filter(|c| c.is_alphanumeric() || c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let words = key.split(' ').filter(|w| !w.is_empty()).count();
        if words >= DOUBLE_MIN_WORDS && previous.as_deref() == Some(key.as_str()) {
            continue;
        }
        previous = Some(key);
        kept.push(sentence);
    }
    kept.join(" ")
}

/// The sentences of `text`, each with its closing punctuation, trimmed.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let ends = matches!(b, b'.' | b'?' | b'!') && bytes.get(i + 1).is_none_or(|next| next.is_ascii_whitespace());
        if ends {
            let sentence = text[start..=i].trim();
            if !sentence.is_empty() {
                out.push(sentence);
            }
            start = i + 1;
        }
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The zlib compression ratio of `text` (bytes in / bytes out), the reference decoder's measure
/// of a repetitive, looping transcript (above 2.4 it decodes again at a higher temperature).
pub(crate) fn compression_ratio(text: &str) -> f32 {
    if text.is_empty() {
        return 0.0;
    }
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let compressed = encoder.write_all(text.as_bytes()).and_then(|()| encoder.finish());
    match compressed {
        Ok(bytes) if !bytes.is_empty() => text.len() as f32 / bytes.len() as f32,
        _ => 1.0,
    }
}

/// Picks the next token: greedy at temperature 0, else a draw from the softmax at the given
/// temperature (deterministic: a xorshift generator with a fixed seed per decode).
#[derive(Debug)]
pub(crate) struct Sampler {
    temperature: f32,
    state: u64,
}

impl Sampler {
    /// A sampler at `temperature`, seeded with `seed`.
    pub(crate) fn new(temperature: f32, seed: u64) -> Sampler {
        Sampler { temperature, state: seed | 1 }
    }

    /// The chosen allowed token and its log-probability among the allowed tokens (at
    /// temperature 1, as the reference decoder scores a transcript whatever the temperature).
    pub(crate) fn pick(&mut self, logits: &[f32], suppress: &[bool]) -> (u32, f32) {
        let allowed = || logits.iter().zip(suppress).enumerate().filter(|(_, (_, s))| !**s);
        let max = allowed().map(|(_, (&l, _))| l).fold(f32::NEG_INFINITY, f32::max);
        if !max.is_finite() {
            return (0, f32::NEG_INFINITY);
        }
        let log_sum = allowed().map(|(_, (&l, _))| (l - max).exp()).sum::<f32>().ln();
        let logprob = |l: f32| l - max - log_sum;
        if self.temperature <= 0.0 {
            let (best, _) =
                allowed().fold((0, f32::NEG_INFINITY), |best, (i, (&l, _))| if l > best.1 { (i, l) } else { best });
            return (best as u32, logprob(logits[best]));
        }
        let weights: Vec<(usize, f32)> =
            allowed().map(|(i, (&l, _))| (i, ((l - max) / self.temperature).exp())).collect();
        let total: f32 = weights.iter().map(|(_, w)| w).sum();
        let mut target = self.next_unit() * total;
        for &(i, w) in &weights {
            if target < w {
                return (i as u32, logprob(logits[i]));
            }
            target -= w;
        }
        let (i, _) = weights.last().copied().unwrap_or((0, 0.0));
        (i as u32, logprob(logits[i]))
    }

    /// A uniform draw in [0, 1).
    fn next_unit(&mut self) -> f32 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state >> 40) as f32 / (1u64 << 24) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_ends_a_little_after_the_speech() {
        let rate = RATE_HZ as usize;
        // 0.3 s of silence, 2 s of "speech", 1.5 s of silence.
        let mut audio = vec![0.0f32; 3 * rate / 10];
        audio.extend(vec![0.3f32; 2 * rate]);
        audio.extend(vec![0.0f32; 3 * rate / 2]);
        let (window, pad) = speech_window(&audio);
        assert_eq!((window.start, pad), (0, 0));
        let trail = window.end - (3 * rate / 10 + 2 * rate);
        assert!((6_000..=6_720).contains(&trail), "{trail} samples after the speech");
        // Faint noise is not speech; silence everywhere keeps everything.
        audio.iter_mut().skip(3 * rate).for_each(|s| *s = 0.0005);
        assert_eq!(speech_window(&audio).0.end, window.end);
        assert_eq!(speech_window(&[0.0; 1000]), (0..1000, 0));
        // Leading silence beyond the lead is dropped.
        let mut late = vec![0.0f32; rate];
        late.extend(vec![0.3f32; rate]);
        assert_eq!(speech_window(&late).0.start, rate - 4_800);
        // Speech to the very end: the trail is added as silence.
        assert_eq!(speech_window(&late).1, 6_400);
    }

    #[test]
    fn the_token_budget_grows_with_the_audio() {
        assert_eq!(token_budget(0), 16);
        assert_eq!(token_budget(2 * RATE_HZ as usize), 32);
        assert!(token_budget(30 * RATE_HZ as usize) >= 224);
    }

    #[test]
    fn loops_and_doubled_sentences_are_cut_after_their_first_copy() {
        assert_eq!(repetition_cut(&[1, 2, 3]), None);
        assert_eq!(repetition_cut(&[7u32; 12]), Some(1));
        let mut t = vec![1, 2];
        for _ in 0..3 {
            t.extend([5, 6, 7, 8]);
        }
        assert_eq!(repetition_cut(&t), Some(6));
        // "no, no, no" is speech, not a loop.
        assert_eq!(repetition_cut(&[3, 4, 3, 4, 3, 4]), None);
        // A sentence of eight tokens, twice: one copy is kept.
        let sentence = [10, 11, 12, 13, 14, 15, 16, 17];
        let mut doubled = sentence.to_vec();
        doubled.extend(sentence);
        assert_eq!(repetition_cut(&doubled), Some(8));
        // Twice a five-token phrase is left alone.
        assert_eq!(repetition_cut(&[1, 2, 3, 4, 5, 1, 2, 3, 4, 5]), None);
    }

    #[test]
    fn a_sentence_said_twice_is_kept_once() {
        assert_eq!(
            drop_repeated_sentences("How many minutes are left until sunset? How many minutes are left until sunset?"),
            "How many minutes are left until sunset?"
        );
        assert_eq!(drop_repeated_sentences("Turn it off. turn it off"), "Turn it off.");
        // Short repeats are speech; different sentences stay.
        assert_eq!(drop_repeated_sentences("Hello? Hello?"), "Hello? Hello?");
        assert_eq!(drop_repeated_sentences("It is late. It is early."), "It is late. It is early.");
        assert_eq!(drop_repeated_sentences(""), "");
        assert_eq!(drop_repeated_sentences("Pi is 3.14 today"), "Pi is 3.14 today");
    }

    #[test]
    fn loops_compress_far_better_than_speech() {
        let speech = compression_ratio("Can you remind me to buy milk on the way home?");
        let looped = compression_ratio(&"I'm going to go to the store. ".repeat(8));
        assert!(speech < 1.5, "{speech}");
        assert!(looped > 2.4, "{looped}");
        assert_eq!(compression_ratio(""), 0.0);
    }

    #[test]
    fn greedy_at_zero_and_deterministic_draws_above() {
        let logits = [0.0, 5.0, 1.0, 1.0];
        let suppress = [false, true, false, false];
        let (id, lp) = Sampler::new(0.0, 1).pick(&logits, &suppress);
        assert_eq!(id, 2);
        // Allowed: e^0, e^1, e^1 → log(e / (1 + 2e)).
        let want = 1.0 - (1.0 + 2.0 * 1f32.exp()).ln();
        assert!((lp - want).abs() < 1e-5);
        let draws = |seed| {
            let mut sampler = Sampler::new(1.0, seed);
            (0..200).map(|_| sampler.pick(&logits, &suppress).0).collect::<Vec<_>>()
        };
        let first = draws(7);
        assert_eq!(first, draws(7), "the same seed draws the same tokens");
        assert!(first.iter().all(|&id| id != 1), "suppressed tokens are never drawn");
        assert!(first.contains(&0) && first.contains(&2) && first.contains(&3));
    }
}
