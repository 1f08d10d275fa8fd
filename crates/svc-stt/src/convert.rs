//! One-off conversion of the CTranslate2 (faster-whisper) Whisper package into what
//! [`WhisperModel::load`](crate::WhisperModel::load) reads: `model.safetensors` with the
//! Hugging Face tensor names that candle-transformers' Whisper loads, candle's `config.json`,
//! and the tokenizer.
//!
//! Whisper's weights ship here only in CTranslate2's format, which fuses attention projections
//! (query, key and value in one matrix) and uses its own names. The tensors stay f16 on disk
//! (half the size); the loader widens them to f32. Every output file is written to a temporary
//! name and renamed, so an interrupted conversion leaves the previous state, never half a file.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SttError;
use crate::ct2::{self, Ct2Dtype, Ct2Model, Ct2Var};
use crate::safetensors::{self, TensorOut};
use crate::tokenizer::Tokenizer;

/// The weights file `load` reads.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The model's shape and decoding settings, candle's `whisper::Config` plus the begin-suppress list.
pub const CONFIG_FILE: &str = "config.json";
/// The Hugging Face tokenizer, copied from the package.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// Every file [`WhisperModel::load`](crate::WhisperModel::load) needs in its directory, for installers to check.
pub const REQUIRED_FILES: [&str; 3] = [WEIGHTS_FILE, CONFIG_FILE, TOKENIZER_FILE];

/// The special tokens transcription relies on; a tokenizer without them is not Whisper's.
pub(crate) const NEEDED_SPECIALS: [&str; 5] =
    ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"];

/// The written `config.json`: the fields of candle's `whisper::Config` (same names, so candle can
/// read the file too) and `begin_suppress_tokens` (Hugging Face's name), which candle lacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WhisperConfig {
    pub num_mel_bins: usize,
    pub max_source_positions: usize,
    pub d_model: usize,
    pub encoder_attention_heads: usize,
    pub encoder_layers: usize,
    pub vocab_size: usize,
    pub max_target_positions: usize,
    pub decoder_attention_heads: usize,
    pub decoder_layers: usize,
    /// Tokens never to emit (from CTranslate2's `suppress_ids`).
    pub suppress_tokens: Vec<u32>,
    /// Tokens not to emit first (from CTranslate2's `suppress_ids_begin`).
    pub begin_suppress_tokens: Vec<u32>,
}

impl WhisperConfig {
    /// candle-transformers' view of the same configuration (the tests load its Whisper to prove the names).
    #[cfg(test)]
    pub(crate) fn to_candle(&self) -> candle_transformers::models::whisper::Config {
        candle_transformers::models::whisper::Config {
            num_mel_bins: self.num_mel_bins,
            max_source_positions: self.max_source_positions,
            d_model: self.d_model,
            encoder_attention_heads: self.encoder_attention_heads,
            encoder_layers: self.encoder_layers,
            vocab_size: self.vocab_size,
            max_target_positions: self.max_target_positions,
            decoder_attention_heads: self.decoder_attention_heads,
            decoder_layers: self.decoder_layers,
            suppress_tokens: self.suppress_tokens.clone(),
        }
    }
}

/// The decoding lists in CTranslate2's `config.json`.
#[derive(Deserialize)]
struct Ct2Config {
    suppress_ids: Vec<u32>,
    suppress_ids_begin: Vec<u32>,
}

/// Converts the CTranslate2 Whisper model in `ct2_dir` (`model.bin`, `config.json`,
/// `tokenizer.json`) into `out_dir` (created if needed): [`REQUIRED_FILES`].
pub fn convert_ct2(ct2_dir: &Path, out_dir: &Path) -> Result<(), SttError> {
    let bin_path = ct2_dir.join("model.bin");
    let bin = std::fs::read(&bin_path).map_err(|e| SttError::io(&bin_path, e))?;
    let model = ct2::parse(&bin).map_err(|e| SttError::format(&bin_path, e.to_string()))?;
    let (tensors, dims) = whisper_tensors(&model).map_err(|d| SttError::format(&bin_path, d))?;

    let ct2_config_path = ct2_dir.join("config.json");
    let raw = std::fs::read(&ct2_config_path).map_err(|e| SttError::io(&ct2_config_path, e))?;
    let ct2_config: Ct2Config = serde_json::from_slice(&raw)
        .map_err(|e| SttError::format(&ct2_config_path, format!("not a CTranslate2 Whisper config: {e}")))?;
    if let Some(bad) =
        ct2_config.suppress_ids.iter().chain(&ct2_config.suppress_ids_begin).find(|&&id| id as usize >= dims.vocab_size)
    {
        return Err(SttError::format(&ct2_config_path, format!("token {bad} is outside the vocabulary")));
    }

    let tokenizer_path = ct2_dir.join(TOKENIZER_FILE);
    let tokenizer_json = std::fs::read(&tokenizer_path).map_err(|e| SttError::io(&tokenizer_path, e))?;
    let tokenizer = Tokenizer::from_json(&tokenizer_json).map_err(|d| SttError::format(&tokenizer_path, d))?;
    if let Some(missing) = NEEDED_SPECIALS.iter().find(|s| tokenizer.special(s).is_none()) {
        return Err(SttError::format(&tokenizer_path, format!("no special token {missing}: not Whisper's tokenizer")));
    }

    let config = WhisperConfig {
        num_mel_bins: dims.n_mels,
        max_source_positions: dims.n_audio_ctx,
        d_model: dims.d_model,
        encoder_attention_heads: dims.encoder_heads,
        encoder_layers: dims.encoder_layers,
        vocab_size: dims.vocab_size,
        max_target_positions: dims.n_text_ctx,
        decoder_attention_heads: dims.decoder_heads,
        decoder_layers: dims.decoder_layers,
        suppress_tokens: ct2_config.suppress_ids,
        begin_suppress_tokens: ct2_config.suppress_ids_begin,
    };
    let config_json = serde_json::to_vec_pretty(&config)
        .map_err(|e| SttError::Io { path: out_dir.join(CONFIG_FILE), source: std::io::Error::other(e) })?;

    std::fs::create_dir_all(out_dir).map_err(|e| SttError::io(out_dir, e))?;
    let source = format!("CTranslate2 {} revision {}", model.spec, model.revision);
    write_atomic(&out_dir.join(WEIGHTS_FILE), |w| {
        safetensors::write(w, &tensors, &[("format", "pt"), ("converted_from", &source)])
    })?;
    write_atomic(&out_dir.join(TOKENIZER_FILE), |w| w.write_all(&tokenizer_json))?;
    // Last, so that a directory with a config also has the weights it describes.
    write_atomic(&out_dir.join(CONFIG_FILE), |w| w.write_all(&config_json))?;
    Ok(())
}

/// Writes `path` through a temporary file in the same directory, synced and then renamed over it.
fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> std::io::Result<()>,
) -> Result<(), SttError> {
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("output");
    let tmp: PathBuf = path.with_file_name(format!(".{file_name}.{}.partial", std::process::id()));
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &file);
        write(&mut w)?;
        w.flush()?;
        drop(w);
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        // The write already failed; a leftover temporary file only wastes space, so its removal may fail too.
        let _ = std::fs::remove_file(&tmp);
        SttError::Io { path: path.to_owned(), source: e }
    })
}

/// The model's dimensions as read off the tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dims {
    pub d_model: usize,
    pub vocab_size: usize,
    pub n_mels: usize,
    pub n_audio_ctx: usize,
    pub n_text_ctx: usize,
    pub encoder_layers: usize,
    pub decoder_layers: usize,
    pub encoder_heads: usize,
    pub decoder_heads: usize,
}

/// Collects the renamed tensors, checking each one's dtype and shape on the way.
struct Mapper<'a, 'm> {
    vars: &'m HashMap<String, Ct2Var<'a>>,
    out: Vec<TensorOut<'a>>,
}

impl<'a, 'm> Mapper<'a, 'm> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<&'m Ct2Var<'a>, String> {
        let vars: &'m HashMap<String, Ct2Var<'a>> = self.vars;
        let v = vars.get(name).ok_or_else(|| format!("missing variable {name}: not a Whisper model"))?;
        if !matches!(v.dtype, Ct2Dtype::F16 | Ct2Dtype::F32) {
            return Err(format!(
                "variable {name} is {:?}; only float (f16/f32) models are supported, not quantized ones",
                v.dtype
            ));
        }
        if v.dims != shape {
            return Err(format!("variable {name} has shape {:?}, expected {shape:?}", v.dims));
        }
        Ok(v)
    }

    /// Rows `start..start + count` (first dimension) of `v`, as `to`.
    fn push_rows(&mut self, to: String, v: &Ct2Var<'a>, start: usize, count: usize) {
        let row_len: usize = v.dims[1..].iter().product::<usize>() * v.dtype.size();
        let mut shape = v.dims.clone();
        shape[0] = count;
        let dtype = if v.dtype == Ct2Dtype::F16 { "F16" } else { "F32" };
        self.out.push(TensorOut { name: to, dtype, shape, data: &v.data[start * row_len..(start + count) * row_len] });
    }

    fn copy(&mut self, to: String, from: &str, shape: &[usize]) -> Result<(), String> {
        let v = self.get(from, shape)?;
        self.push_rows(to, v, 0, shape[0]);
        Ok(())
    }

    fn layer_norm(&mut self, to: &str, from: &str, d: usize) -> Result<(), String> {
        self.copy(format!("{to}.weight"), &format!("{from}/gamma"), &[d])?;
        self.copy(format!("{to}.bias"), &format!("{from}/beta"), &[d])
    }

    fn linear(&mut self, to: &str, from: &str, n_out: usize, n_in: usize) -> Result<(), String> {
        self.copy(format!("{to}.weight"), &format!("{from}/weight"), &[n_out, n_in])?;
        self.copy(format!("{to}.bias"), &format!("{from}/bias"), &[n_out])
    }

    /// CTranslate2 fuses the self-attention's query, key and value into one [3d, d] matrix; Whisper's
    /// key has no bias, so that slice of the fused bias (zeros) is dropped. Even a non-zero key bias
    /// would add the same amount to all of a query's scores, which the softmax cancels.
    fn self_attention(&mut self, to: &str, from: &str, d: usize) -> Result<(), String> {
        self.layer_norm(&format!("{to}.self_attn_layer_norm"), &format!("{from}/self_attention/layer_norm"), d)?;
        let w = self.get(&format!("{from}/self_attention/linear_0/weight"), &[3 * d, d])?;
        let b = self.get(&format!("{from}/self_attention/linear_0/bias"), &[3 * d])?;
        self.push_rows(format!("{to}.self_attn.q_proj.weight"), w, 0, d);
        self.push_rows(format!("{to}.self_attn.q_proj.bias"), b, 0, d);
        self.push_rows(format!("{to}.self_attn.k_proj.weight"), w, d, d);
        self.push_rows(format!("{to}.self_attn.v_proj.weight"), w, 2 * d, d);
        self.push_rows(format!("{to}.self_attn.v_proj.bias"), b, 2 * d, d);
        self.linear(&format!("{to}.self_attn.out_proj"), &format!("{from}/self_attention/linear_1"), d, d)
    }

    /// Cross-attention: query alone (`linear_0`), key and value fused in a [2d, d] `linear_1`, out `linear_2`.
    fn cross_attention(&mut self, to: &str, from: &str, d: usize) -> Result<(), String> {
        self.layer_norm(&format!("{to}.encoder_attn_layer_norm"), &format!("{from}/attention/layer_norm"), d)?;
        self.linear(&format!("{to}.encoder_attn.q_proj"), &format!("{from}/attention/linear_0"), d, d)?;
        let w = self.get(&format!("{from}/attention/linear_1/weight"), &[2 * d, d])?;
        let b = self.get(&format!("{from}/attention/linear_1/bias"), &[2 * d])?;
        self.push_rows(format!("{to}.encoder_attn.k_proj.weight"), w, 0, d);
        self.push_rows(format!("{to}.encoder_attn.v_proj.weight"), w, d, d);
        self.push_rows(format!("{to}.encoder_attn.v_proj.bias"), b, d, d);
        self.linear(&format!("{to}.encoder_attn.out_proj"), &format!("{from}/attention/linear_2"), d, d)
    }

    fn ffn(&mut self, to: &str, from: &str, d: usize) -> Result<(), String> {
        self.layer_norm(&format!("{to}.final_layer_norm"), &format!("{from}/ffn/layer_norm"), d)?;
        self.linear(&format!("{to}.fc1"), &format!("{from}/ffn/linear_0"), 4 * d, d)?;
        self.linear(&format!("{to}.fc2"), &format!("{from}/ffn/linear_1"), d, 4 * d)
    }
}

/// The number of `{stack}/layer_{i}/` blocks, checked to be numbered 0..n without gaps.
fn count_layers(vars: &HashMap<String, Ct2Var<'_>>, stack: &str) -> Result<usize, String> {
    let prefix = format!("{stack}/layer_");
    let found: BTreeSet<usize> =
        vars.keys().filter_map(|k| k.strip_prefix(&prefix)?.split('/').next()?.parse().ok()).collect();
    let n = found.len();
    if n == 0 || found.last() != Some(&(n - 1)) {
        return Err(format!("{stack} layers are not numbered 0..n: {found:?}"));
    }
    Ok(n)
}

/// Attention heads from the model's `{stack}/num_heads` scalar, else Whisper's 64 dimensions per head.
fn heads(vars: &HashMap<String, Ct2Var<'_>>, stack: &str, d: usize) -> Result<usize, String> {
    let n = match vars.get(&format!("{stack}/num_heads")) {
        Some(v) => v.scalar_int().ok_or_else(|| format!("{stack}/num_heads is not an integer scalar"))?,
        None => (d / 64) as i64,
    };
    match usize::try_from(n) {
        Ok(n) if n > 0 && d.is_multiple_of(n) && d / n >= 4 => Ok(n),
        _ => Err(format!("{stack}: {n} heads do not divide the width {d}")),
    }
}

/// Maps a parsed CTranslate2 Whisper model to Hugging Face names (those candle-transformers' `whisper::model` loads).
pub(crate) fn whisper_tensors<'a>(m: &Ct2Model<'a>) -> Result<(Vec<TensorOut<'a>>, Dims), String> {
    if m.spec != "WhisperSpec" {
        return Err(format!("the model is a {}, not a WhisperSpec", m.spec));
    }
    let vars = &m.vars;
    let dims2 = |name: &str| -> Result<(usize, usize), String> {
        match vars.get(name).map(|v| v.dims.as_slice()) {
            Some(&[a, b]) => Ok((a, b)),
            Some(other) => Err(format!("variable {name} has shape {other:?}, expected two dimensions")),
            None => Err(format!("missing variable {name}: not a Whisper model")),
        }
    };
    let (vocab_size, d) = dims2("decoder/embeddings/weight")?;
    let (n_text_ctx, _) = dims2("decoder/position_encodings/encodings")?;
    let (n_audio_ctx, _) = dims2("encoder/position_encodings/encodings")?;
    let n_mels = match vars.get("encoder/conv1/weight").map(|v| v.dims.as_slice()) {
        Some(&[_, n, 3]) => n,
        _ => return Err("encoder/conv1/weight is missing or not [d, n_mels, 3]".to_owned()),
    };
    let dims = Dims {
        d_model: d,
        vocab_size,
        n_mels,
        n_audio_ctx,
        n_text_ctx,
        encoder_layers: count_layers(vars, "encoder")?,
        decoder_layers: count_layers(vars, "decoder")?,
        encoder_heads: heads(vars, "encoder", d)?,
        decoder_heads: heads(vars, "decoder", d)?,
    };
    let mut mp = Mapper { vars, out: Vec::new() };
    let enc = "model.encoder";
    mp.copy(format!("{enc}.conv1.weight"), "encoder/conv1/weight", &[d, n_mels, 3])?;
    mp.copy(format!("{enc}.conv1.bias"), "encoder/conv1/bias", &[d])?;
    mp.copy(format!("{enc}.conv2.weight"), "encoder/conv2/weight", &[d, d, 3])?;
    mp.copy(format!("{enc}.conv2.bias"), "encoder/conv2/bias", &[d])?;
    // candle recomputes the encoder's sinusoids; the table is kept so that the file is a complete Whisper.
    mp.copy(format!("{enc}.embed_positions.weight"), "encoder/position_encodings/encodings", &[n_audio_ctx, d])?;
    for i in 0..dims.encoder_layers {
        let (to, from) = (format!("{enc}.layers.{i}"), format!("encoder/layer_{i}"));
        mp.self_attention(&to, &from, d)?;
        mp.ffn(&to, &from, d)?;
    }
    mp.layer_norm(&format!("{enc}.layer_norm"), "encoder/layer_norm", d)?;
    let dec = "model.decoder";
    // The output projection (`decoder/projection/weight`) is an alias of these embeddings; candle ties them too.
    mp.copy(format!("{dec}.embed_tokens.weight"), "decoder/embeddings/weight", &[vocab_size, d])?;
    mp.copy(format!("{dec}.embed_positions.weight"), "decoder/position_encodings/encodings", &[n_text_ctx, d])?;
    for i in 0..dims.decoder_layers {
        let (to, from) = (format!("{dec}.layers.{i}"), format!("decoder/layer_{i}"));
        mp.self_attention(&to, &from, d)?;
        mp.cross_attention(&to, &from, d)?;
        mp.ffn(&to, &from, d)?;
    }
    mp.layer_norm(&format!("{dec}.layer_norm"), "decoder/layer_norm", d)?;
    Ok((mp.out, dims))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ct2::tests::Ct2Writer;

    /// A complete but tiny CTranslate2 Whisper: width 8, two heads, one layer each, a vocabulary of
    /// `vocab` tokens. Element `i` of every tensor is `(i % 7) as f32 - 3.0`, except the fused
    /// projections, whose rows hold their row index (so that the split can be checked).
    pub(crate) fn tiny_ct2(vocab: u32) -> Ct2Writer {
        let d = 8u32;
        let val = |i: usize| (i % 7) as f32 - 3.0;
        let mut w = Ct2Writer::default();
        w.f16("encoder/conv1/weight", &[d, 80, 3], val)
            .f16("encoder/conv1/bias", &[d], val)
            .f16("encoder/conv2/weight", &[d, d, 3], val)
            .f16("encoder/conv2/bias", &[d], val)
            .f16("encoder/position_encodings/encodings", &[16, d], val)
            .scalar("encoder/num_heads", 2, &2i16.to_le_bytes())
            .scalar("decoder/num_heads", 2, &2i16.to_le_bytes())
            .scalar("decoder/scale_embeddings", 1, &[0])
            .f16("decoder/embeddings/weight", &[vocab, d], val)
            .f16("decoder/position_encodings/encodings", &[12, d], val)
            .alias("decoder/projection/weight", "decoder/embeddings/weight");
        let row = move |i: usize| (i / d as usize) as f32;
        for stack in ["encoder", "decoder"] {
            let p = format!("{stack}/layer_0");
            for ln in ["self_attention/layer_norm", "ffn/layer_norm"] {
                w.f16(&format!("{p}/{ln}/gamma"), &[d], val).f16(&format!("{p}/{ln}/beta"), &[d], val);
            }
            w.f16(&format!("{p}/self_attention/linear_0/weight"), &[3 * d, d], row)
                .f16(&format!("{p}/self_attention/linear_0/bias"), &[3 * d], |i| i as f32)
                .f16(&format!("{p}/self_attention/linear_1/weight"), &[d, d], val)
                .f16(&format!("{p}/self_attention/linear_1/bias"), &[d], val)
                .f16(&format!("{p}/ffn/linear_0/weight"), &[4 * d, d], val)
                .f16(&format!("{p}/ffn/linear_0/bias"), &[4 * d], val)
                .f16(&format!("{p}/ffn/linear_1/weight"), &[d, 4 * d], val)
                .f16(&format!("{p}/ffn/linear_1/bias"), &[d], val)
                .f16(&format!("{stack}/layer_norm/gamma"), &[d], val)
                .f16(&format!("{stack}/layer_norm/beta"), &[d], val);
        }
        let p = "decoder/layer_0/attention";
        w.f16(&format!("{p}/layer_norm/gamma"), &[d], val)
            .f16(&format!("{p}/layer_norm/beta"), &[d], val)
            .f16(&format!("{p}/linear_0/weight"), &[d, d], val)
            .f16(&format!("{p}/linear_0/bias"), &[d], val)
            .f16(&format!("{p}/linear_1/weight"), &[2 * d, d], row)
            .f16(&format!("{p}/linear_1/bias"), &[2 * d], |i| i as f32)
            .f16(&format!("{p}/linear_2/weight"), &[d, d], val)
            .f16(&format!("{p}/linear_2/bias"), &[d], val);
        w
    }

    #[test]
    fn maps_every_tensor_to_its_hugging_face_name() {
        let bytes = tiny_ct2(16).bytes("WhisperSpec");
        let model = ct2::parse(&bytes).expect("valid");
        let (tensors, dims) = whisper_tensors(&model).expect("a whisper");
        assert_eq!(
            dims,
            Dims {
                d_model: 8,
                vocab_size: 16,
                n_mels: 80,
                n_audio_ctx: 16,
                n_text_ctx: 12,
                encoder_layers: 1,
                decoder_layers: 1,
                encoder_heads: 2,
                decoder_heads: 2
            }
        );
        let by_name: HashMap<&str, &TensorOut<'_>> = tensors.iter().map(|t| (t.name.as_str(), t)).collect();
        assert_eq!(by_name.len(), tensors.len(), "duplicate names");
        // 5 encoder stem + 15 per encoder layer + 2 + 2 decoder stem + 24 per decoder layer + 2.
        assert_eq!(tensors.len(), 5 + 15 + 2 + 2 + 24 + 2);
        for name in [
            "model.encoder.conv1.weight",
            "model.encoder.layers.0.self_attn.k_proj.weight",
            "model.encoder.layers.0.self_attn_layer_norm.bias",
            "model.encoder.layers.0.fc2.bias",
            "model.encoder.layer_norm.weight",
            "model.decoder.embed_tokens.weight",
            "model.decoder.embed_positions.weight",
            "model.decoder.layers.0.encoder_attn.out_proj.weight",
            "model.decoder.layers.0.encoder_attn_layer_norm.weight",
            "model.decoder.layers.0.final_layer_norm.bias",
            "model.decoder.layer_norm.bias",
        ] {
            assert!(by_name.contains_key(name), "{name} missing");
        }
        assert!(!by_name.contains_key("model.encoder.layers.0.self_attn.k_proj.bias"), "Whisper's key has no bias");
        // The fused rows go to query (rows 0..8), key (8..16), value (16..24); the weights hold their row index.
        let values = |t: &TensorOut<'_>| -> Vec<f32> {
            candle_core::Tensor::from_raw_buffer(t.data, candle_core::DType::F16, &t.shape, &candle_core::Device::Cpu)
                .and_then(|x| x.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1())
                .expect("f16 data")
        };
        let q = by_name["model.decoder.layers.0.self_attn.q_proj.weight"];
        assert_eq!(q.shape, vec![8, 8]);
        assert_eq!(values(q)[..9], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(values(by_name["model.decoder.layers.0.self_attn.k_proj.weight"])[0], 8.0);
        assert_eq!(values(by_name["model.decoder.layers.0.self_attn.v_proj.weight"])[0], 16.0);
        assert_eq!(values(by_name["model.encoder.layers.0.self_attn.v_proj.bias"])[..2], [16.0, 17.0]);
        assert_eq!(values(by_name["model.decoder.layers.0.encoder_attn.k_proj.weight"])[63], 7.0);
        assert_eq!(values(by_name["model.decoder.layers.0.encoder_attn.v_proj.weight"])[0], 8.0);
        let vb = by_name["model.decoder.layers.0.encoder_attn.v_proj.bias"];
        assert_eq!(vb.shape, vec![8]);
        assert_eq!(values(vb)[0], 8.0, "cross value bias starts at fused element 8");
    }

    #[test]
    fn rejects_models_that_are_not_whisper() {
        let bytes = tiny_ct2(16).bytes("TransformerSpec");
        assert!(whisper_tensors(&ct2::parse(&bytes).expect("valid")).expect_err("spec").contains("not a WhisperSpec"));
        let mut w = Ct2Writer::default();
        w.f16("decoder/embeddings/weight", &[4, 8], |_| 0.0);
        let bytes = w.bytes("WhisperSpec");
        assert!(whisper_tensors(&ct2::parse(&bytes).expect("valid")).expect_err("incomplete").contains("missing"));
    }

    /// Writes the tiny model's three source files into `dir`.
    pub(crate) fn write_tiny_ct2_dir(dir: &Path) {
        let vocab = 16;
        std::fs::write(dir.join("model.bin"), tiny_ct2(vocab).bytes("WhisperSpec")).expect("temp dir");
        std::fs::write(dir.join("config.json"), r#"{"suppress_ids": [1, 2], "suppress_ids_begin": [3, 9]}"#)
            .expect("temp dir");
        let mut added = Vec::new();
        for (i, s) in NEEDED_SPECIALS.iter().enumerate() {
            added.push(serde_json::json!({"id": 9 + i, "content": s, "special": true}));
        }
        let vocab: serde_json::Map<String, serde_json::Value> = ["a", "b", "c", "Ġd", "e", "f", "g", "h", "i"]
            .iter()
            .enumerate()
            .map(|(i, t)| ((*t).into(), i.into()))
            .collect();
        let tok = serde_json::json!({"model": {"vocab": vocab}, "added_tokens": added});
        std::fs::write(dir.join(TOKENIZER_FILE), tok.to_string()).expect("temp dir");
    }

    #[test]
    fn converts_a_tiny_model_that_candle_loads() {
        let src = tempfile::tempdir().expect("temp dir");
        let out = tempfile::tempdir().expect("temp dir");
        write_tiny_ct2_dir(src.path());
        let out_dir = out.path().join("whisper-base");
        convert_ct2(src.path(), &out_dir).expect("converts");
        let mut names: Vec<String> = std::fs::read_dir(&out_dir)
            .expect("exists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["config.json", "model.safetensors", "tokenizer.json"], "no temporary files left");

        let config: WhisperConfig =
            serde_json::from_slice(&std::fs::read(out_dir.join(CONFIG_FILE)).expect("written")).expect("valid json");
        assert_eq!(config.d_model, 8);
        assert_eq!(config.suppress_tokens, vec![1, 2]);
        assert_eq!(config.begin_suppress_tokens, vec![3, 9]);
        // candle's own Config reads the same file.
        let candle_config: candle_transformers::models::whisper::Config =
            serde_json::from_slice(&std::fs::read(out_dir.join(CONFIG_FILE)).expect("written")).expect("candle config");
        assert_eq!(candle_config, config.to_candle());

        // candle-transformers' Whisper finds every tensor it needs, with the right shapes.
        let tensors = candle_core::safetensors::load(out_dir.join(WEIGHTS_FILE), &candle_core::Device::Cpu)
            .expect("valid safetensors");
        let vb = candle_nn::VarBuilder::from_tensors(tensors, candle_core::DType::F32, &candle_core::Device::Cpu);
        candle_transformers::models::whisper::model::Whisper::load(&vb, config.to_candle())
            .expect("candle loads the converted names");
    }

    #[test]
    fn a_truncated_model_is_a_typed_error_and_writes_nothing() {
        let src = tempfile::tempdir().expect("temp dir");
        let out = tempfile::tempdir().expect("temp dir");
        write_tiny_ct2_dir(src.path());
        let full = std::fs::read(src.path().join("model.bin")).expect("written");
        std::fs::write(src.path().join("model.bin"), &full[..full.len() / 2]).expect("temp dir");
        let err = convert_ct2(src.path(), out.path()).expect_err("truncated");
        assert!(matches!(&err, SttError::BadFormat { detail, .. } if detail.contains("truncated")), "{err}");
        assert_eq!(std::fs::read_dir(out.path()).expect("exists").count(), 0);

        std::fs::remove_file(src.path().join("model.bin")).expect("exists");
        let err = convert_ct2(src.path(), out.path()).expect_err("missing");
        assert!(matches!(&err, SttError::MissingFile { path } if path.ends_with("model.bin")), "{err}");
    }
}
