//! A reader for CTranslate2's `model.bin` (format version 6), the form in which the Whisper weights
//! ship in the Python package. It only borrows slices of the file's bytes: the conversion copies
//! them straight into the safetensors file, so nothing is decoded or duplicated.
//!
//! The file comes from outside (a package from a registry), so every length is checked against
//! the bytes that are left and every failure is a [`Ct2Error`], never a panic or an
//! out-of-bounds read.

use std::collections::HashMap;

/// The only format version this reader knows. Versions differ in their header, so a guess would misparse.
pub(crate) const SUPPORTED_VERSION: u32 = 6;

/// Ranks beyond this are not tensors of any model CTranslate2 writes; a larger byte is a foreign file.
const MAX_RANK: u8 = 8;

/// Why a `model.bin` could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ct2Error {
    /// Byte offset at which the problem was found.
    pub offset: usize,
    /// What was expected there.
    pub detail: String,
}

impl std::fmt::Display for Ct2Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at byte {})", self.detail, self.offset)
    }
}

/// Element type of a variable, with CTranslate2's type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ct2Dtype {
    /// Code 0.
    F32,
    /// Code 1 (quantized weights or boolean flags).
    I8,
    /// Code 2.
    I16,
    /// Code 3.
    I32,
    /// Code 4.
    F16,
}

impl Ct2Dtype {
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Ct2Dtype::F32,
            1 => Ct2Dtype::I8,
            2 => Ct2Dtype::I16,
            3 => Ct2Dtype::I32,
            4 => Ct2Dtype::F16,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            Ct2Dtype::I8 => 1,
            Ct2Dtype::I16 | Ct2Dtype::F16 => 2,
            Ct2Dtype::F32 | Ct2Dtype::I32 => 4,
        }
    }
}

/// One stored variable: a tensor (or a scalar flag) borrowed from the file's bytes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ct2Var<'a> {
    /// Its shape; empty for a scalar.
    pub dims: Vec<usize>,
    /// Its element type.
    pub dtype: Ct2Dtype,
    /// Its little-endian bytes, exactly `product(dims) * dtype.size()` of them.
    pub data: &'a [u8],
}

impl Ct2Var<'_> {
    /// The value of a scalar integer variable (such as `encoder/num_heads`), if it is one.
    pub(crate) fn scalar_int(&self) -> Option<i64> {
        if !self.dims.is_empty() {
            return None;
        }
        match (self.dtype, self.data) {
            (Ct2Dtype::I8, [a]) => Some(i64::from(i8::from_le_bytes([*a]))),
            (Ct2Dtype::I16, [a, b]) => Some(i64::from(i16::from_le_bytes([*a, *b]))),
            (Ct2Dtype::I32, [a, b, c, d]) => Some(i64::from(i32::from_le_bytes([*a, *b, *c, *d]))),
            _ => None,
        }
    }
}

/// A parsed `model.bin`: its header and its variables by name, aliases resolved.
#[derive(Debug, Clone)]
pub(crate) struct Ct2Model<'a> {
    /// The model specification's name, e.g. `WhisperSpec`.
    pub spec: String,
    /// The specification's revision.
    pub revision: u32,
    /// Every variable by name, including the names of aliases.
    pub vars: HashMap<String, Ct2Var<'a>>,
}

/// A cursor over the file that refuses to read past its end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, detail: impl Into<String>) -> Ct2Error {
        Ct2Error { offset: self.pos, detail: detail.into() }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Ct2Error> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(self.err(format!("truncated: {what} needs {n} bytes, {left} left")));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u8(&mut self, what: &str) -> Result<u8, Ct2Error> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, Ct2Error> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, Ct2Error> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A string: u16 length counting a trailing NUL, then the bytes.
    fn string(&mut self, what: &str) -> Result<String, Ct2Error> {
        let start = self.pos;
        let len = usize::from(self.u16(what)?);
        let raw = self.take(len, what)?;
        let Some((&0, text)) = raw.split_last() else {
            return Err(Ct2Error { offset: start, detail: format!("{what}: string without its trailing NUL") });
        };
        String::from_utf8(text.to_vec())
            .map_err(|_| Ct2Error { offset: start, detail: format!("{what}: string is not UTF-8") })
    }
}

/// Parses a whole `model.bin`. Trailing bytes after the aliases are an error: they mean the file is
/// not what this reader thinks it is.
pub(crate) fn parse(bytes: &[u8]) -> Result<Ct2Model<'_>, Ct2Error> {
    let mut r = Reader { bytes, pos: 0 };
    let version = r.u32("format version")?;
    if version != SUPPORTED_VERSION {
        return Err(Ct2Error {
            offset: 0,
            detail: format!(
                "not a CTranslate2 model of format version {SUPPORTED_VERSION} (the first word is {version})"
            ),
        });
    }
    let spec = r.string("specification name")?;
    let revision = r.u32("specification revision")?;
    let n_vars = r.u32("variable count")?;
    let mut vars = HashMap::new();
    for i in 0..n_vars {
        let start = r.pos;
        let name = r.string(&format!("name of variable {i}"))?;
        let rank = r.u8("rank")?;
        if rank > MAX_RANK {
            return Err(r.err(format!("variable {name}: rank {rank} is beyond {MAX_RANK}")));
        }
        let mut dims = Vec::with_capacity(usize::from(rank));
        for _ in 0..rank {
            dims.push(r.u32("dimension")? as usize);
        }
        let code = r.u8("dtype")?;
        let dtype =
            Ct2Dtype::from_code(code).ok_or_else(|| r.err(format!("variable {name}: unknown dtype code {code}")))?;
        let nbytes = r.u32("byte count")? as usize;
        let expected = dims
            .iter()
            .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| r.err(format!("variable {name}: shape {dims:?} overflows")))?;
        if expected != nbytes {
            return Err(r.err(format!(
                "variable {name}: shape {dims:?} of {dtype:?} needs {expected} bytes, the file says {nbytes}"
            )));
        }
        let data = r.take(nbytes, &format!("data of {name}"))?;
        if vars.insert(name.clone(), Ct2Var { dims, dtype, data }).is_some() {
            return Err(Ct2Error { offset: start, detail: format!("variable {name} appears twice") });
        }
    }
    let n_aliases = r.u32("alias count")?;
    for _ in 0..n_aliases {
        let start = r.pos;
        let alias = r.string("alias name")?;
        let target = r.string("alias target")?;
        let var = vars
            .get(&target)
            .cloned()
            .ok_or_else(|| Ct2Error { offset: start, detail: format!("alias {alias} points to unknown {target}") })?;
        if vars.insert(alias.clone(), var).is_some() {
            return Err(Ct2Error { offset: start, detail: format!("alias {alias} shadows a variable") });
        }
    }
    if r.pos != bytes.len() {
        return Err(r.err(format!("{} unexpected bytes after the aliases", bytes.len() - r.pos)));
    }
    Ok(Ct2Model { spec, revision, vars })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a `model.bin` in memory: the test-side writer of the format the parser reads.
    #[derive(Default)]
    pub(crate) struct Ct2Writer {
        vars: Vec<(String, Vec<u32>, u8, Vec<u8>)>,
        aliases: Vec<(String, String)>,
    }

    fn put_string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(u16::try_from(s.len() + 1).expect("short test names")).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    }

    impl Ct2Writer {
        /// Adds an f16 tensor whose element `i` is `f(i)`.
        pub(crate) fn f16(&mut self, name: &str, dims: &[u32], f: impl Fn(usize) -> f32) -> &mut Self {
            let n: u32 = dims.iter().product();
            let data = (0..n as usize).flat_map(|i| half_bits(f(i)).to_le_bytes()).collect();
            self.vars.push((name.to_owned(), dims.to_vec(), 4, data));
            self
        }

        /// Adds a scalar of the given dtype code and raw bytes.
        pub(crate) fn scalar(&mut self, name: &str, code: u8, data: &[u8]) -> &mut Self {
            self.vars.push((name.to_owned(), Vec::new(), code, data.to_vec()));
            self
        }

        /// Adds an alias.
        pub(crate) fn alias(&mut self, alias: &str, target: &str) -> &mut Self {
            self.aliases.push((alias.to_owned(), target.to_owned()));
            self
        }

        /// The file's bytes.
        pub(crate) fn bytes(&self, spec: &str) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&6u32.to_le_bytes());
            put_string(&mut out, spec);
            out.extend_from_slice(&3u32.to_le_bytes());
            out.extend_from_slice(&(self.vars.len() as u32).to_le_bytes());
            for (name, dims, code, data) in &self.vars {
                put_string(&mut out, name);
                out.push(dims.len() as u8);
                for d in dims {
                    out.extend_from_slice(&d.to_le_bytes());
                }
                out.push(*code);
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend_from_slice(data);
            }
            out.extend_from_slice(&(self.aliases.len() as u32).to_le_bytes());
            for (a, t) in &self.aliases {
                put_string(&mut out, a);
                put_string(&mut out, t);
            }
            out
        }
    }

    /// f32 → IEEE half bits, for values that are exactly representable (the tests use small integers and halves).
    pub(crate) fn half_bits(v: f32) -> u16 {
        if v == 0.0 {
            return if v.is_sign_negative() { 0x8000 } else { 0 };
        }
        let bits = v.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
        assert!((1..31).contains(&exp), "test value {v} is not a normal half");
        let mant = ((bits >> 13) & 0x3ff) as u16;
        sign | ((exp as u16) << 10) | mant
    }

    fn sample() -> Vec<u8> {
        let mut w = Ct2Writer::default();
        w.f16("a/weight", &[2, 3], |i| i as f32)
            .scalar("a/num_heads", 2, &8i16.to_le_bytes())
            .scalar("a/flag", 1, &[1])
            .alias("b/weight", "a/weight");
        w.bytes("WhisperSpec")
    }

    #[test]
    fn parses_a_small_file() {
        let bytes = sample();
        let m = parse(&bytes).expect("valid file");
        assert_eq!(m.spec, "WhisperSpec");
        assert_eq!(m.revision, 3);
        assert_eq!(m.vars.len(), 4);
        let a = &m.vars["a/weight"];
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(a.dtype, Ct2Dtype::F16);
        assert_eq!(a.data.len(), 12);
        // Element 5 is 5.0 = half 0x4500.
        assert_eq!(&a.data[10..12], &0x4500u16.to_le_bytes());
        assert_eq!(m.vars["b/weight"], *a);
        assert_eq!(m.vars["a/num_heads"].scalar_int(), Some(8));
        assert_eq!(m.vars["a/flag"].scalar_int(), Some(1));
        assert_eq!(a.scalar_int(), None);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = sample();
        for cut in 0..bytes.len() {
            let err = parse(&bytes[..cut]).expect_err("a truncated file must not parse");
            assert!(err.offset <= cut, "offset {} beyond the cut {cut}", err.offset);
        }
    }

    #[test]
    fn trailing_bytes_are_an_error() {
        let mut bytes = sample();
        bytes.push(0);
        let err = parse(&bytes).expect_err("trailing garbage");
        assert!(err.detail.contains("unexpected bytes"), "{err}");
    }

    #[test]
    fn foreign_files_are_errors() {
        assert!(parse(b"GGUF\x03\0\0\0").expect_err("gguf").detail.contains("format version"));
        assert!(parse(&[]).expect_err("empty").detail.contains("truncated"));
        // A lying byte count: the shape says 12 bytes.
        let mut bytes = sample();
        let pos = bytes.windows(4).position(|w| w == 12u32.to_le_bytes()).expect("byte count present");
        bytes[pos] = 200;
        assert!(parse(&bytes).expect_err("bad count").detail.contains("needs 12 bytes"));
        // An unknown dtype code.
        let mut bytes = sample();
        bytes[pos - 1] = 9;
        assert!(parse(&bytes).expect_err("bad dtype").detail.contains("dtype code 9"));
    }

    #[test]
    fn a_dangling_alias_is_an_error() {
        let mut w = Ct2Writer::default();
        w.f16("a", &[1], |_| 1.0).alias("b", "nowhere");
        assert!(parse(&w.bytes("WhisperSpec")).expect_err("dangling").detail.contains("unknown nowhere"));
    }
}
