//! A writer for the safetensors format: an 8-byte little-endian header length, a JSON header
//! naming each tensor's dtype, shape and byte range, then the tensors' bytes back to back.
//!
//! Written here rather than through candle's `save`, because the converter's tensors are slices
//! of the CTranslate2 file's bytes: streaming them out avoids building 145 MB of tensors first.

use std::io::Write;

/// One tensor to write: its bytes are little-endian and laid out row-major.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TensorOut<'a> {
    /// Its name in the file.
    pub name: String,
    /// safetensors' dtype name, e.g. `F16`.
    pub dtype: &'static str,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its bytes.
    pub data: &'a [u8],
}

/// The header for `tensors`, in order, padded with spaces to a multiple of 8 bytes as the
/// reference implementation does (so that the data section starts aligned).
fn header(tensors: &[TensorOut<'_>], metadata: &[(&str, &str)]) -> Result<Vec<u8>, serde_json::Error> {
    let mut map = serde_json::Map::new();
    let mut offset = 0usize;
    for t in tensors {
        let end = offset + t.data.len();
        map.insert(
            t.name.clone(),
            serde_json::json!({ "dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    if !metadata.is_empty() {
        let meta: serde_json::Map<String, serde_json::Value> =
            metadata.iter().map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v))).collect();
        map.insert("__metadata__".to_owned(), serde_json::Value::Object(meta));
    }
    let mut bytes = serde_json::to_vec(&map)?;
    while bytes.len() % 8 != 0 {
        bytes.push(b' ');
    }
    Ok(bytes)
}

/// Writes `tensors` (names must be unique) and string `metadata` in safetensors format.
pub(crate) fn write(out: &mut impl Write, tensors: &[TensorOut<'_>], metadata: &[(&str, &str)]) -> std::io::Result<()> {
    let header = header(tensors, metadata).map_err(std::io::Error::other)?;
    out.write_all(&(header.len() as u64).to_le_bytes())?;
    out.write_all(&header)?;
    for t in tensors {
        out.write_all(t.data)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candle_reads_what_is_written() {
        let a: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        // Half 1.5 and -2.0.
        let b: Vec<u8> = [0x3e00u16, 0xc000].iter().flat_map(|v| v.to_le_bytes()).collect();
        let tensors = vec![
            TensorOut { name: "a".into(), dtype: "F32", shape: vec![2, 3], data: &a },
            TensorOut { name: "x.b".into(), dtype: "F16", shape: vec![2], data: &b },
        ];
        let mut buf = Vec::new();
        write(&mut buf, &tensors, &[("format", "pt")]).expect("in memory");
        let header_len = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")) as usize;
        assert_eq!(header_len % 8, 0);
        assert_eq!(buf.len(), 8 + header_len + a.len() + b.len());

        let loaded = candle_core::safetensors::load_buffer(&buf, &candle_core::Device::Cpu).expect("valid safetensors");
        let a = loaded["a"].to_vec2::<f32>().expect("f32");
        assert_eq!(a, vec![vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0]]);
        let b = loaded["x.b"].to_dtype(candle_core::DType::F32).and_then(|t| t.to_vec1::<f32>()).expect("f16");
        assert_eq!(b, vec![1.5, -2.0]);
    }
}
