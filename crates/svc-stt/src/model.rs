//! The speech-to-text model: Whisper loaded once (f32 weights on the CPU), then shared by every
//! session through an `Arc` and called from many threads at once.
//!
//! The network ([`crate::net`]) is read-only; each call keeps its own decoder state, so calls
//! never see each other's state and need no lock. Short turns are made fast by giving the encoder
//! only the speech that is there (plus a short margin, [`crate::decoding::speech_window`]) instead
//! of Whisper's fixed 30 s: the encoder's cost grows with its input, and a long silent tail is
//! where the decoder invents a second copy of the sentence. Decoding follows the reference
//! decoder: greedy, then a temperature fallback when the transcript looks like a loop or the
//! model is unsure, and the no-speech rule.

use std::ops::Range;
use std::path::Path;

use candle_core::{DType, Device, IndexOp, Tensor};

use crate::convert::{CONFIG_FILE, NEEDED_SPECIALS, REQUIRED_FILES, TOKENIZER_FILE, WEIGHTS_FILE, WhisperConfig};
use crate::decoding::{
    Sampler, compression_ratio, drop_repeated_sentences, repetition_cut, speech_window, token_budget,
};
use crate::mel::{HOP, LogMel};
use crate::net::Whisper;
use crate::tokenizer::Tokenizer;
use crate::{RATE_HZ, SttError};

/// The longest audio one encoder pass takes (Whisper's window).
const MAX_WINDOW_SECONDS: usize = 30;
/// The shortest encoder input, in mel frames (100 a second); shorter audio is padded with silence.
/// Whisper never saw very short windows in training: at 2 s, short sentences lost words
/// ("Turn off the lights in the kitchen" came back as "Turn off the light's invocation").
const MIN_WINDOW_FRAMES: usize = 300;
/// Tokens generated per window at most, after the prompt (Whisper's own `sample_len`).
const MAX_NEW_TOKENS: usize = 224;
/// The reference decoder's temperatures: greedy first, then sampling ever hotter while the
/// transcript fails [`COMPRESSION_RATIO_THRESHOLD`] or [`LOGPROB_THRESHOLD`].
const TEMPERATURES: [f32; 6] = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0];
/// A transcript compressing better than this (zlib) is a loop, not speech.
const COMPRESSION_RATIO_THRESHOLD: f32 = 2.4;
/// Audio whose loudest 20 ms is quieter than this RMS (about −54 dBFS) is silence: Whisper normalises
/// its input, so it would otherwise hear the noise floor as loud sound and invent words for it.
const SILENCE_RMS: f32 = 0.002;
/// Whisper's no-speech rule: a window counts as silent when P(no speech) is above this…
const NO_SPEECH_THRESHOLD: f32 = 0.6;
/// …and the mean log-probability of the decoded tokens is below this.
const LOGPROB_THRESHOLD: f32 = -1.0;

/// How much audio the encoder sees per window: the trade between speed and accuracy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AudioContext {
    /// The speech present, from 0.3 s before it to 0.4 s after it (at least 3 s): no silent
    /// tail for the decoder to fill. Several times faster than [`AudioContext::Full`] for short
    /// turns, and as accurate on average, but a word here and there can differ (see the crate's
    /// tests).
    #[default]
    Fitted,
    /// Whisper's full 30 s window, as in training, whatever the audio's length: the reference
    /// behaviour, at the cost of a whole window's encoder work for every turn.
    Full,
}

/// What [`WhisperModel::transcribe`] heard.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transcript {
    /// The text, trimmed, without special tokens; empty when nothing was said.
    pub text: String,
    /// How many text tokens the model produced.
    pub tokens: usize,
}

/// Special tokens' ids, looked up in the tokenizer at load.
#[derive(Debug, Clone, Copy)]
struct Specials {
    sot: u32,
    english: u32,
    transcribe: u32,
    no_timestamps: u32,
    eot: u32,
    no_speech: Option<u32>,
}

/// Whisper, loaded and ready: `Send + Sync`, so one instance serves every session.
#[derive(Debug)]
pub struct WhisperModel {
    whisper: Whisper,
    config: WhisperConfig,
    mel: LogMel,
    tokenizer: Tokenizer,
    specials: Specials,
    /// Tokens never emitted: the config's list, and every special or timestamp token but end-of-text.
    suppress: Vec<bool>,
    /// Tokens not emitted first (a bare space, end-of-text).
    suppress_begin: Vec<bool>,
    context: AudioContext,
    device: Device,
}

impl WhisperModel {
    /// Loads the model from `dir`, which must hold [`REQUIRED_FILES`](crate::REQUIRED_FILES)
    /// (as written by [`convert_ct2`](crate::convert_ct2)). The weights are widened to f32.
    pub fn load(dir: &Path) -> Result<WhisperModel, SttError> {
        for f in REQUIRED_FILES {
            let path = dir.join(f);
            if !path.is_file() {
                return Err(SttError::MissingFile { path });
            }
        }
        let config_path = dir.join(CONFIG_FILE);
        let raw = std::fs::read(&config_path).map_err(|e| SttError::io(&config_path, e))?;
        let config: WhisperConfig = serde_json::from_slice(&raw)
            .map_err(|e| SttError::format(&config_path, format!("not a converted Whisper config: {e}")))?;
        let tokenizer = Tokenizer::load(&dir.join(TOKENIZER_FILE))?;
        let special = |name: &str| {
            tokenizer.special(name).filter(|&id| (id as usize) < config.vocab_size).ok_or_else(|| {
                SttError::format(dir.join(TOKENIZER_FILE), format!("no special token {name} in the vocabulary"))
            })
        };
        let specials = Specials {
            sot: special(NEEDED_SPECIALS[1])?,
            english: special(NEEDED_SPECIALS[2])?,
            transcribe: special(NEEDED_SPECIALS[3])?,
            no_timestamps: special(NEEDED_SPECIALS[4])?,
            eot: special(NEEDED_SPECIALS[0])?,
            no_speech: special("<|nospeech|>").or_else(|_| special("<|nocaptions|>")).ok(),
        };

        let device = Device::Cpu;
        let weights_path = dir.join(WEIGHTS_FILE);
        let bytes = std::fs::read(&weights_path).map_err(|e| SttError::io(&weights_path, e))?;
        let tensors = candle_core::safetensors::load_buffer(&bytes, &device)
            .map_err(|e| SttError::format(&weights_path, e.to_string()))?;
        drop(bytes);
        // Widen to f32 once here: the CPU kernels are fastest in f32 and candle would otherwise convert on every use.
        let tensors = tensors
            .into_iter()
            .map(|(name, t)| Ok((name, t.to_dtype(DType::F32)?)))
            .collect::<candle_core::Result<_>>()
            .map_err(|source| SttError::Load { path: dir.to_owned(), source })?;
        let vb = candle_nn::VarBuilder::from_tensors(tensors, DType::F32, &device);
        let whisper = Whisper::load(&config, &vb).map_err(|source| SttError::Load { path: dir.to_owned(), source })?;

        let mut suppress = vec![false; config.vocab_size];
        for &id in &config.suppress_tokens {
            if let Some(s) = suppress.get_mut(id as usize) {
                *s = true;
            }
        }
        // No timestamps and no task or language switches: only text and end-of-text may come out.
        for (id, s) in suppress.iter_mut().enumerate() {
            if id > specials.eot as usize {
                *s = true;
            }
        }
        let mut suppress_begin = suppress.clone();
        for &id in &config.begin_suppress_tokens {
            if let Some(s) = suppress_begin.get_mut(id as usize) {
                *s = true;
            }
        }
        let mel = LogMel::new(RATE_HZ, config.num_mel_bins);
        let context = AudioContext::default();
        Ok(WhisperModel { whisper, config, mel, tokenizer, specials, suppress, suppress_begin, context, device })
    }

    /// The same model with another [`AudioContext`] (set before sharing it; [`AudioContext::Fitted`] by default).
    pub fn with_audio_context(mut self, context: AudioContext) -> WhisperModel {
        self.context = context;
        self
    }

    /// The [`AudioContext`] in use.
    pub fn audio_context(&self) -> AudioContext {
        self.context
    }

    /// Transcribes English speech: `pcm_16k` is mono at [`RATE_HZ`](crate::RATE_HZ), full scale ±1.
    ///
    /// Audio longer than 30 s is cut into windows of at most 30 s (at the quietest moment near each
    /// limit) whose texts are joined. Silence gives an empty transcript without running the network.
    pub fn transcribe(&self, pcm_16k: &[f32]) -> Result<Transcript, SttError> {
        if let Some(i) = pcm_16k.iter().position(|s| !s.is_finite()) {
            return Err(SttError::InvalidAudio(format!("sample {i} is {}", pcm_16k[i])));
        }
        let mut text = String::new();
        let mut tokens = 0;
        for window in split_windows(pcm_16k, MAX_WINDOW_SECONDS * RATE_HZ as usize) {
            let audio = &pcm_16k[window];
            if is_silent(audio) {
                continue;
            }
            let ids = self.transcribe_window(audio)?;
            let piece = drop_repeated_sentences(self.tokenizer.decode(&ids).trim());
            let piece = piece.trim();
            if !piece.is_empty() {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(piece);
                tokens += ids.len();
            }
        }
        Ok(Transcript { text, tokens })
    }

    /// The text tokens of one window of at most 30 s.
    fn transcribe_window(&self, audio: &[f32]) -> Result<Vec<u32>, SttError> {
        let (audio, pad) = match self.context {
            AudioContext::Fitted => {
                let (window, pad) = speech_window(audio);
                (&audio[window], pad)
            }
            AudioContext::Full => (audio, 0),
        };
        let n_frames = match self.context {
            AudioContext::Fitted => encoder_frames(audio.len() + pad, self.config.max_source_positions),
            AudioContext::Full => {
                encoder_frames(MAX_WINDOW_SECONDS * RATE_HZ as usize, self.config.max_source_positions)
            }
        };
        let mel = self.mel.compute(audio, n_frames);
        let mel = Tensor::from_vec(mel, (1, self.mel.n_mels(), n_frames), &self.device)?;
        let features = self.whisper.encoder.forward(&mel)?;
        let budget = token_budget(audio.len()).min(MAX_NEW_TOKENS);
        let mut decoded = None;
        for (attempt, &temperature) in TEMPERATURES.iter().enumerate() {
            let d = self.decode(&features, budget, Sampler::new(temperature, attempt as u64 + 1))?;
            let avg_logprob = d.avg_logprob();
            let ratio = compression_ratio(&self.tokenizer.decode(&d.tokens));
            let silent = d.no_speech_prob > NO_SPEECH_THRESHOLD && avg_logprob < LOGPROB_THRESHOLD;
            let fails = ratio > COMPRESSION_RATIO_THRESHOLD || avg_logprob < LOGPROB_THRESHOLD;
            decoded = Some(d);
            if silent || !fails {
                break;
            }
        }
        let Some(d) = decoded else { return Ok(Vec::new()) };
        // Whisper's own rule for "nothing was said": likely no speech, and an unsure transcript.
        if d.no_speech_prob > NO_SPEECH_THRESHOLD && d.avg_logprob() < LOGPROB_THRESHOLD {
            return Ok(Vec::new());
        }
        Ok(d.tokens)
    }

    /// Decodes encoded audio (`features`) with `sampler`, at most `budget` text tokens.
    fn decode(&self, features: &Tensor, budget: usize, mut sampler: Sampler) -> Result<Decoded, SttError> {
        let s = self.specials;
        // English pinned: the pipeline speaks English, and Whisper base guessing the language of
        // a short turn is one more way to hear words that were not said.
        let mut tokens = vec![s.sot, s.english, s.transcribe, s.no_timestamps];
        let prompt_len = tokens.len();
        let max_len = (prompt_len + budget).min(self.config.max_target_positions);
        let decoder = &self.whisper.decoder;
        let mut state = decoder.start(features)?;
        // The prompt in one pass; Whisper reads P(no speech) off the prediction after start-of-transcript.
        let logits = decoder.step(&mut state, &tokens, &[0, prompt_len - 1])?;
        let no_speech_prob = match s.no_speech {
            Some(ns) => softmax_at(&logits.i(0)?.to_vec1()?, ns as usize),
            None => 0.0,
        };
        let mut logits: Vec<f32> = logits.i(1)?.to_vec1()?;
        let mut sum_logprob = 0f32;
        while tokens.len() < max_len {
            let first = tokens.len() == prompt_len;
            let suppress = if first { &self.suppress_begin } else { &self.suppress };
            let (next, logprob) = sampler.pick(&logits, suppress);
            sum_logprob += logprob;
            if next == s.eot {
                break;
            }
            tokens.push(next);
            if let Some(keep) = repetition_cut(&tokens[prompt_len..]) {
                tokens.truncate(prompt_len + keep);
                break;
            }
            if tokens.len() < max_len {
                logits = decoder.step(&mut state, &[next], &[0])?.i(0)?.to_vec1()?;
            }
        }
        Ok(Decoded { tokens: tokens.split_off(prompt_len), sum_logprob, no_speech_prob })
    }
}

/// The outcome of decoding one window.
struct Decoded {
    /// Text tokens, without the prompt or end-of-text.
    tokens: Vec<u32>,
    /// Sum of the chosen tokens' log-probabilities, end-of-text included.
    sum_logprob: f32,
    /// P(no speech) at the start of the transcript.
    no_speech_prob: f32,
}

impl Decoded {
    /// Mean log-probability per token, end-of-text counted as Whisper does.
    fn avg_logprob(&self) -> f32 {
        self.sum_logprob / (self.tokens.len() + 1) as f32
    }
}

/// Mel frames to encode `n_samples` of audio: every sample (the caller already kept a margin
/// after the speech), an even count (the encoder's second convolution halves the frames), at
/// least [`MIN_WINDOW_FRAMES`] and at most what the encoder's positions allow.
fn encoder_frames(n_samples: usize, max_source_positions: usize) -> usize {
    let frames = n_samples.div_ceil(HOP).next_multiple_of(2);
    let max_frames = (max_source_positions * 2).min(MAX_WINDOW_SECONDS * RATE_HZ as usize / HOP);
    frames.max(MIN_WINDOW_FRAMES).min(max_frames)
}

/// Softmax of `logits` at `index`.
fn softmax_at(logits: &[f32], index: usize) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    logits.get(index).map_or(0.0, |&l| (l - max).exp() / sum)
}

/// True when no 20 ms of `audio` is louder than [`SILENCE_RMS`].
fn is_silent(audio: &[f32]) -> bool {
    let frame = RATE_HZ as usize / 50;
    audio.chunks(frame).all(|c| {
        let energy: f32 = c.iter().map(|s| s * s).sum();
        energy <= SILENCE_RMS * SILENCE_RMS * c.len() as f32
    })
}

/// Cuts `audio` into consecutive windows of at most `max_len` samples. Each cut falls at the quietest
/// 100 ms within the last 5 s before the limit, so that words are not split when a pause is near.
fn split_windows(audio: &[f32], max_len: usize) -> Vec<Range<usize>> {
    let block = RATE_HZ as usize / 10;
    let step = RATE_HZ as usize / 100;
    let search = (5 * RATE_HZ as usize).min(max_len / 2);
    let mut windows = Vec::new();
    let mut start = 0;
    while audio.len() - start > max_len {
        let limit = start + max_len;
        let mut best = (limit, f32::INFINITY);
        let mut pos = limit - search;
        while pos + block <= limit {
            let energy: f32 = audio[pos..pos + block].iter().map(|s| s * s).sum();
            if energy < best.1 {
                best = (pos + block / 2, energy);
            }
            pos += step;
        }
        windows.push(start..best.0);
        start = best.0;
    }
    windows.push(start..audio.len());
    windows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cut_in_the_pause_and_cover_everything() {
        let rate = RATE_HZ as usize;
        // 40 s of "speech" (a tone) with a pause from 27.0 to 27.8 s.
        let audio: Vec<f32> = (0..40 * rate)
            .map(|i| if (27 * rate..27 * rate + 8 * rate / 10).contains(&i) { 0.0 } else { 0.3 })
            .collect();
        let w = split_windows(&audio, 30 * rate);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].start, 0);
        assert_eq!(w[0].end, w[1].start);
        assert_eq!(w[1].end, audio.len());
        assert!((27 * rate..27 * rate + 8 * rate / 10).contains(&w[0].end), "cut at {}", w[0].end);

        // Without a pause the cut stays within the limit, and 95 s needs four windows.
        let loud = vec![0.3f32; 95 * rate];
        let w = split_windows(&loud, 30 * rate);
        assert_eq!(w.len(), 4);
        assert!(w.iter().all(|r| r.len() <= 30 * rate && !r.is_empty()));
        assert_eq!(w.last().map(|r| r.end), Some(loud.len()));

        assert_eq!(split_windows(&[], 30 * rate), vec![0..0]);
    }

    #[test]
    fn encoder_input_is_sized_to_the_audio() {
        let rate = RATE_HZ as usize;
        assert_eq!(encoder_frames(0, 1500), 300);
        assert_eq!(encoder_frames(2 * rate, 1500), 300);
        assert_eq!(encoder_frames(3 * rate + 1, 1500), 302, "every sample, an even count");
        assert_eq!(encoder_frames(29 * rate + 1, 1500), 2902);
        assert_eq!(encoder_frames(31 * rate, 1500), 3000);
        assert_eq!(encoder_frames(30 * rate, 100), 200);
        assert!((softmax_at(&[0.0, 0.0], 1) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn the_model_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<WhisperModel>();
    }

    #[test]
    fn silence_detection() {
        assert!(is_silent(&[]));
        assert!(is_silent(&vec![0.001; 16_000]));
        let mut a = vec![0.0; 16_000];
        a[8000..8320].fill(0.01);
        assert!(!is_silent(&a));
    }
}
