//! Whisper's network on candle tensors, written for inference in a shared, read-only model.
//!
//! It reads exactly the tensor names of candle-transformers' `whisper::model` (the converter's
//! tests load the converted file with that model too), but differs where it matters here:
//! - the decoder keeps a key/value cache for its self-attention, so each new token costs one
//!   position instead of re-running the whole sequence (candle-transformers caches only the
//!   cross-attention); the output projection runs only for the positions asked for;
//! - all state lives in a per-call [`DecoderState`], so `&self` suffices and one model serves
//!   many threads without cloning;
//! - the MLPs use the exact (erf) GELU that Whisper was trained with, not the tanh approximation;
//! - the encoder adds the model's stored positional table, narrowed to the input's length, so
//!   that a short input (a few seconds instead of 30) costs proportionally less.

use candle_core::{Device, IndexOp, Module, Result, Tensor};
use candle_nn::{Conv1d, Conv1dConfig, LayerNorm, Linear, VarBuilder};

use crate::convert::WhisperConfig;

fn layer_norm(size: usize, vb: VarBuilder) -> Result<LayerNorm> {
    Ok(LayerNorm::new(vb.get(size, "weight")?, vb.get(size, "bias")?, 1e-5))
}

fn linear(n_in: usize, n_out: usize, bias: bool, vb: VarBuilder) -> Result<Linear> {
    let w = vb.get((n_out, n_in), "weight")?;
    let b = if bias { Some(vb.get(n_out, "bias")?) } else { None };
    Ok(Linear::new(w, b))
}

/// Query, key, value and output projections of one attention layer.
#[derive(Debug, Clone)]
struct Attention {
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
    n_head: usize,
}

impl Attention {
    fn load(d: usize, n_head: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Attention {
            query: linear(d, d, true, vb.pp("q_proj"))?,
            key: linear(d, d, false, vb.pp("k_proj"))?,
            value: linear(d, d, true, vb.pp("v_proj"))?,
            out: linear(d, d, true, vb.pp("out_proj"))?,
            n_head,
        })
    }

    /// [b, t, d] → [b, heads, t, d / heads].
    fn split_heads(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        x.reshape((b, t, self.n_head, d / self.n_head))?.transpose(1, 2)?.contiguous()
    }

    /// Keys and values of `x` with heads split: what the decoder caches.
    fn keys_values(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        Ok((self.split_heads(&self.key.forward(x)?)?, self.split_heads(&self.value.forward(x)?)?))
    }

    /// Attention of the queries from `x` over keys `k` and values `v` (heads split), with an
    /// optional additive mask over [queries, keys].
    fn attend(&self, x: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        let q = self.split_heads(&self.query.forward(x)?)?;
        let scale = 1.0 / ((d / self.n_head) as f64).sqrt();
        let mut scores = (q.matmul(&k.t()?)? * scale)?;
        if let Some(mask) = mask {
            scores = scores.broadcast_add(mask)?;
        }
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let heads = weights.matmul(v)?;
        self.out.forward(&heads.transpose(1, 2)?.reshape((b, t, d))?)
    }
}

/// Layer norm → 4× wider linear → GELU → linear.
#[derive(Debug, Clone)]
struct Mlp {
    ln: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn load(d: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Mlp {
            ln: layer_norm(d, vb.pp("final_layer_norm"))?,
            fc1: linear(d, 4 * d, true, vb.pp("fc1"))?,
            fc2: linear(4 * d, d, true, vb.pp("fc2"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(&self.ln.forward(x)?)?.gelu_erf()?)
    }
}

#[derive(Debug, Clone)]
struct EncoderLayer {
    attn_ln: LayerNorm,
    attn: Attention,
    mlp: Mlp,
}

/// Two convolutions over the mel frames (the second halves them), then transformer layers.
#[derive(Debug, Clone)]
pub(crate) struct Encoder {
    conv1: Conv1d,
    conv2: Conv1d,
    positions: Tensor,
    layers: Vec<EncoderLayer>,
    ln_post: LayerNorm,
}

impl Encoder {
    fn load(cfg: &WhisperConfig, vb: VarBuilder) -> Result<Self> {
        let d = cfg.d_model;
        let conv = |n_in: usize, stride: usize, vb: VarBuilder| -> Result<Conv1d> {
            let config = Conv1dConfig { padding: 1, stride, dilation: 1, groups: 1, cudnn_fwd_algo: None };
            Ok(Conv1d::new(vb.get((d, n_in, 3), "weight")?, Some(vb.get(d, "bias")?), config))
        };
        let layers = (0..cfg.encoder_layers)
            .map(|i| {
                let vb = vb.pp(format!("layers.{i}"));
                Ok(EncoderLayer {
                    attn_ln: layer_norm(d, vb.pp("self_attn_layer_norm"))?,
                    attn: Attention::load(d, cfg.encoder_attention_heads, vb.pp("self_attn"))?,
                    mlp: Mlp::load(d, vb.clone())?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Encoder {
            conv1: conv(cfg.num_mel_bins, 1, vb.pp("conv1"))?,
            conv2: conv(d, 2, vb.pp("conv2"))?,
            positions: vb.get((cfg.max_source_positions, d), "embed_positions.weight")?,
            layers,
            ln_post: layer_norm(d, vb.pp("layer_norm"))?,
        })
    }

    /// Mel [1, n_mels, frames] → audio features [1, frames / 2, d].
    pub(crate) fn forward(&self, mel: &Tensor) -> Result<Tensor> {
        let x = self.conv1.forward(mel)?.gelu_erf()?;
        let x = self.conv2.forward(&x)?.gelu_erf()?.transpose(1, 2)?;
        let (_, t, _) = x.dims3()?;
        let mut x = x.broadcast_add(&self.positions.narrow(0, 0, t)?)?;
        for layer in &self.layers {
            let h = layer.attn_ln.forward(&x)?;
            let (k, v) = layer.attn.keys_values(&h)?;
            x = (&x + layer.attn.attend(&h, &k, &v, None)?)?;
            x = (&x + layer.mlp.forward(&x)?)?;
        }
        self.ln_post.forward(&x)
    }
}

#[derive(Debug, Clone)]
struct DecoderLayer {
    attn_ln: LayerNorm,
    attn: Attention,
    cross_ln: LayerNorm,
    cross: Attention,
    mlp: Mlp,
}

/// Token embeddings plus positions, transformer layers with cross-attention to the audio, and
/// the output projection tied to the embeddings.
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    embeddings: Tensor,
    positions: Tensor,
    layers: Vec<DecoderLayer>,
    ln: LayerNorm,
}

/// One call's decoder state: the cross-attention keys/values of its audio and the self-attention
/// cache of the tokens so far.
pub(crate) struct DecoderState {
    cross: Vec<(Tensor, Tensor)>,
    cache: Vec<Option<(Tensor, Tensor)>>,
    len: usize,
}

impl Decoder {
    fn load(cfg: &WhisperConfig, vb: VarBuilder) -> Result<Self> {
        let d = cfg.d_model;
        let heads = cfg.decoder_attention_heads;
        let layers = (0..cfg.decoder_layers)
            .map(|i| {
                let vb = vb.pp(format!("layers.{i}"));
                Ok(DecoderLayer {
                    attn_ln: layer_norm(d, vb.pp("self_attn_layer_norm"))?,
                    attn: Attention::load(d, heads, vb.pp("self_attn"))?,
                    cross_ln: layer_norm(d, vb.pp("encoder_attn_layer_norm"))?,
                    cross: Attention::load(d, heads, vb.pp("encoder_attn"))?,
                    mlp: Mlp::load(d, vb.clone())?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Decoder {
            embeddings: vb.get((cfg.vocab_size, d), "embed_tokens.weight")?,
            positions: vb.get((cfg.max_target_positions, d), "embed_positions.weight")?,
            layers,
            ln: layer_norm(d, vb.pp("layer_norm"))?,
        })
    }

    /// Fresh state for decoding against `features` ([1, positions, d]).
    pub(crate) fn start(&self, features: &Tensor) -> Result<DecoderState> {
        let cross = self.layers.iter().map(|l| l.cross.keys_values(features)).collect::<Result<_>>()?;
        Ok(DecoderState { cross, cache: vec![None; self.layers.len()], len: 0 })
    }

    /// Feeds `tokens` (after those already in `state`) and returns the vocabulary logits at the
    /// positions `want` (indices into `tokens`), as rows of a [want.len(), vocab] tensor.
    pub(crate) fn step(&self, state: &mut DecoderState, tokens: &[u32], want: &[usize]) -> Result<Tensor> {
        let device = self.embeddings.device();
        let n = tokens.len();
        let start = state.len;
        let ids = Tensor::new(tokens, device)?;
        let x = self.embeddings.embedding(&ids)?.broadcast_add(&self.positions.narrow(0, start, n)?)?;
        let mut x = x.unsqueeze(0)?;
        // Several new tokens at once (the prompt) must not see the ones after them.
        let mask = if n > 1 { Some(causal_mask(n, start, device)?) } else { None };
        for (i, layer) in self.layers.iter().enumerate() {
            let h = layer.attn_ln.forward(&x)?;
            let (k, v) = layer.attn.keys_values(&h)?;
            let (k, v) = match state.cache[i].take() {
                Some((pk, pv)) => (Tensor::cat(&[&pk, &k], 2)?, Tensor::cat(&[&pv, &v], 2)?),
                None => (k, v),
            };
            x = (&x + layer.attn.attend(&h, &k, &v, mask.as_ref())?)?;
            state.cache[i] = Some((k, v));
            let (ck, cv) = &state.cross[i];
            x = (&x + layer.cross.attend(&layer.cross_ln.forward(&x)?, ck, cv, None)?)?;
            x = (&x + layer.mlp.forward(&x)?)?;
        }
        state.len += n;
        let picked = Tensor::new(want.iter().map(|&w| w as u32).collect::<Vec<_>>().as_slice(), device)?;
        let last = self.ln.forward(&x.i(0)?.index_select(&picked, 0)?)?;
        last.matmul(&self.embeddings.t()?)
    }
}

/// Additive mask for `n` new queries over `start + n` keys: query `i` sees keys up to `start + i`.
fn causal_mask(n: usize, start: usize, device: &Device) -> Result<Tensor> {
    let data: Vec<f32> =
        (0..n).flat_map(|i| (0..start + n).map(move |j| if j > start + i { f32::NEG_INFINITY } else { 0.0 })).collect();
    Tensor::from_vec(data, (n, start + n), device)
}

/// Whisper's encoder and decoder.
#[derive(Debug, Clone)]
pub(crate) struct Whisper {
    pub encoder: Encoder,
    pub decoder: Decoder,
}

impl Whisper {
    /// Loads the tensors under `model.encoder` and `model.decoder` (widened to f32 by `vb`).
    pub(crate) fn load(cfg: &WhisperConfig, vb: &VarBuilder) -> Result<Self> {
        Ok(Whisper {
            encoder: Encoder::load(cfg, vb.pp("model.encoder"))?,
            decoder: Decoder::load(cfg, vb.pp("model.decoder"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::DType;

    #[test]
    fn the_mask_hides_later_tokens() {
        let m = causal_mask(2, 3, &Device::Cpu).and_then(|m| m.to_vec2::<f32>()).expect("small");
        assert_eq!(m[0][..4], [0.0; 4]);
        assert_eq!(m[0][4], f32::NEG_INFINITY);
        assert_eq!(m[1], vec![0.0; 5]);
    }

    /// Decoding token by token with the cache gives the same logits as feeding the whole sequence.
    #[test]
    fn cached_steps_match_a_full_pass() {
        let src = tempfile::tempdir().expect("temp dir");
        let out = tempfile::tempdir().expect("temp dir");
        crate::convert::tests::write_tiny_ct2_dir(src.path());
        crate::convert_ct2(src.path(), out.path()).expect("converts");
        let cfg: WhisperConfig =
            serde_json::from_slice(&std::fs::read(out.path().join("config.json")).expect("written")).expect("json");
        let tensors =
            candle_core::safetensors::load(out.path().join("model.safetensors"), &Device::Cpu).expect("safetensors");
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        let w = Whisper::load(&cfg, &vb).expect("loads");
        // 24 frames → 12 positions (the tiny model has 16).
        let mel = Tensor::randn(0f32, 1.0, (1, 80, 24), &Device::Cpu).expect("random");
        let features = w.encoder.forward(&mel).expect("encodes");
        assert_eq!(features.dims(), &[1, 12, 8]);
        let tokens = [9u32, 3, 5, 1, 7];
        let mut full = w.decoder.start(&features).expect("state");
        let all = w.decoder.step(&mut full, &tokens, &[0, 1, 2, 3, 4]).expect("full pass");
        let mut inc = w.decoder.start(&features).expect("state");
        let mut rows = vec![w.decoder.step(&mut inc, &tokens[..2], &[0, 1]).expect("prompt")];
        for t in &tokens[2..] {
            rows.push(w.decoder.step(&mut inc, &[*t], &[0]).expect("step"));
        }
        let inc = Tensor::cat(&rows, 0).expect("same width");
        let diff = (all - &inc).and_then(|d| d.abs()?.max_all()?.to_scalar::<f32>()).expect("diff");
        let scale = inc.abs().and_then(|d| d.max_all()?.to_scalar::<f32>()).expect("max");
        assert!(diff <= 1e-4 * scale.max(1.0), "cached decoding differs by {diff} (scale {scale})");
        assert_eq!(inc.dims(), &[5, 16]);
    }
}
