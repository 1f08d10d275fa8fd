//! Sans-IO, push-based splitter of an import body into "the audio" and "the rest".
//!
//! The scanner follows JSON's lexical structure byte by byte (strings, escapes, nesting depth)
//! and keeps all of its state in the struct, so a chunk may end anywhere: inside a key, inside an
//! escape, inside the base64 text. It does not validate JSON: it only has to agree with a JSON
//! parser on *valid* input. On invalid input it may misjudge the structure, but it never panics,
//! and everything before the first invalid byte reaches the rest verbatim, so serde_json still
//! rejects the rest.
//!
//! The string value of the top-level key `audio_wav_base64` is diverted: its characters are
//! base64-decoded and WAV-checked on the fly and the decoded bytes go to [`ScanSink::audio`];
//! the rest receives `null` in its place. Everything else goes to [`ScanSink::rest`] verbatim.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::ImportError;
use crate::wav::{WavInfo, WavValidator};

/// The key whose string value is streamed to disk instead of parsed.
const AUDIO_KEY: &[u8] = b"audio_wav_base64";
/// Column shifts remembered for error positions; only a body with duplicate audio keys has more
/// than one, and such a body is rejected anyway.
const MAX_SHIFTS: usize = 8;

/// Receives the two outputs of the [`ImportScanner`].
pub(crate) trait ScanSink {
    /// Next bytes of the rest document (the body with the audio string replaced by `null`).
    fn rest(&mut self, bytes: &[u8]);
    /// Next decoded audio bytes.
    fn audio(&mut self, bytes: &[u8]);
}

/// What the scanner learned, returned by [`ImportScanner::finish`].
#[derive(Debug, Default)]
pub(crate) struct ScanSummary {
    /// The audio string's WAV header, when an `audio_wav_base64` string was present and complete.
    pub(crate) wav: Option<WavInfo>,
    /// `audio_wav_base64` appeared more than once in the top-level object.
    pub(crate) duplicate_audio_key: bool,
    /// Where the rest differs in length from the body, to map serde_json positions back.
    shifts: Vec<Shift>,
}

/// One replaced audio string, in the rest's coordinates.
#[derive(Debug, Clone, Copy)]
struct Shift {
    /// 1-based line (the audio string cannot span lines: a raw newline is not base64).
    line: u64,
    /// Rest column just after the `null`.
    after_null: u64,
    /// Body length of the string (quotes included) minus 4, the length of `null`.
    delta: i64,
}

impl ScanSummary {
    /// Maps a serde_json error position in the rest back to the same position in the body.
    pub(crate) fn body_position(&self, line: usize, column: usize) -> (usize, usize) {
        let delta: i64 = self
            .shifts
            .iter()
            .filter(|s| s.line == line as u64 && column as u64 >= s.after_null)
            .map(|s| s.delta)
            .sum();
        (line, usize::try_from(column as i64 + delta).unwrap_or(column))
    }
}

/// Where we are in the top-level object (only tracked at depth 1 of an object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// After `{` or `,`: the next string is a key.
    Key,
    /// After a key, before `:`; `true` when the key was the audio key.
    Colon(bool),
    /// After `:`; `true` when the value belongs to the audio key.
    Value(bool),
    /// Inside or after a value, or lost on invalid JSON: wait for `,`.
    Other,
}

/// Escape progress inside an ordinary string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// Just saw `\`.
    Start,
    /// Inside `\uXXXX`: hex digits still to come and the code unit so far (`None` once invalid).
    Unicode {
        left: u8,
        unit: Option<u16>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Between tokens.
    Outside,
    /// Inside a string; `key` when it is a top-level key being compared with [`AUDIO_KEY`].
    Str { escape: Escape, key: bool },
    /// Inside the audio string; `escape` after a `\` (only `\/` is allowed).
    Audio { escape: bool },
}

/// Decoded-key comparison with [`AUDIO_KEY`], fed one decoded byte at a time.
#[derive(Debug, Default)]
struct KeyMatch {
    buf: [u8; AUDIO_KEY.len()],
    len: usize,
    mismatch: bool,
}

impl KeyMatch {
    fn push(&mut self, byte: u8) {
        if self.mismatch || self.len == self.buf.len() {
            self.mismatch = true;
        } else {
            self.buf[self.len] = byte;
            self.len += 1;
        }
    }

    fn is_audio_key(&self) -> bool {
        !self.mismatch && self.buf[..self.len] == *AUDIO_KEY
    }
}

/// Incremental base64 decoder: standard alphabet, padded or unpadded, no whitespace.
///
/// It reports the bytes of the longest valid prefix even when the input turns invalid, so that
/// the WAV and size checks see exactly the bytes before the bad character whatever the chunking:
/// the error reported is then the one whose cause comes first in the body.
#[derive(Debug, Default)]
struct Base64Decoder {
    /// 0–3 characters of an incomplete quad carried over between pushes.
    pending: [u8; 4],
    pending_len: usize,
    /// A quad with `=` was decoded: nothing may follow.
    padded: bool,
    /// Reused output buffer.
    out: Vec<u8>,
}

impl Base64Decoder {
    /// Decodes the next characters: returns the decoded bytes and whether the input is still
    /// valid (after `false`, the decoder must not be fed again).
    fn push(&mut self, mut chars: &[u8]) -> (&[u8], bool) {
        self.out.clear();
        if self.pending_len > 0 {
            let take = (4 - self.pending_len).min(chars.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&chars[..take]);
            self.pending_len += take;
            chars = &chars[take..];
            if self.pending_len < 4 {
                return (&self.out, true);
            }
            self.pending_len = 0;
            let quad = self.pending;
            if !self.decode(&quad) {
                return (&self.out, false);
            }
        }
        let whole = chars.len() / 4 * 4;
        let tail = &chars[whole..];
        let valid = self.decode(&chars[..whole]) && (tail.is_empty() || !self.padded);
        self.pending[..tail.len()].copy_from_slice(tail);
        self.pending_len = tail.len();
        (&self.out, valid)
    }

    /// Ends the string: decodes an unpadded final group of 2 or 3 characters.
    fn finish(&mut self) -> (&[u8], bool) {
        self.out.clear();
        let tail_len = std::mem::take(&mut self.pending_len);
        let tail = &self.pending[..tail_len];
        // One leftover character cannot encode a byte, and padding must complete a quad.
        if tail_len == 1 || tail.contains(&b'=') {
            return (&self.out, false);
        }
        if tail_len == 0 {
            return (&self.out, true);
        }
        let mut quad = [b'='; 4];
        quad[..tail_len].copy_from_slice(tail);
        let valid = self.decode(&quad);
        (&self.out, valid)
    }

    /// Decodes whole quads, appending to `out`; on invalid input, appends what the quads before
    /// the first bad one decode to and returns `false`.
    fn decode(&mut self, quads: &[u8]) -> bool {
        if quads.is_empty() {
            return true;
        }
        // Padding is only valid in the very last quad of the string.
        if self.padded {
            return false;
        }
        let start = self.out.len();
        self.out.resize(start + quads.len() / 4 * 3, 0);
        match STANDARD.decode_slice(quads, &mut self.out[start..]) {
            Ok(n) => {
                self.out.truncate(start + n);
                // The engine rejects `=` anywhere but at the end of the slice.
                self.padded = quads.ends_with(b"=");
                true
            }
            Err(_) => {
                self.out.truncate(start);
                // Rare error path: redo it quad by quad to keep the valid prefix.
                quads.len() > 4 && quads.chunks(4).all(|quad| self.decode(quad))
            }
        }
    }
}

/// The audio string being diverted and decoded.
#[derive(Debug)]
struct AudioDecoder {
    base64: Base64Decoder,
    wav: WavValidator,
    /// Decoded bytes accepted so far, and the limit.
    total: u64,
    max: u64,
}

impl AudioDecoder {
    /// Feeds characters of the string (`end` once it closed). Checks run in body order: the
    /// decoded bytes within the limit go through the WAV check and to the sink, then the size
    /// limit, then the base64 validity of what follows them.
    fn feed(&mut self, chars: &[u8], end: bool, sink: &mut impl ScanSink) -> Result<(), ImportError> {
        let (bytes, valid) = if end { self.base64.finish() } else { self.base64.push(chars) };
        let room = usize::try_from(self.max - self.total).unwrap_or(usize::MAX);
        let allowed = &bytes[..bytes.len().min(room)];
        self.wav.push(allowed)?;
        sink.audio(allowed);
        self.total += allowed.len() as u64;
        if allowed.len() < bytes.len() {
            return Err(ImportError::AudioTooLarge);
        }
        if !valid {
            return Err(ImportError::InvalidBase64);
        }
        Ok(())
    }
}

/// The audio string being diverted.
#[derive(Debug)]
struct AudioStream {
    /// `None` for a duplicate key's value, which is lexed but not decoded.
    decoder: Option<AudioDecoder>,
    /// Body column of the opening quote, and the rest column where `null` starts.
    body_column: u64,
    rest_column: u64,
}

/// The push-based splitter. After an error it must not be used again.
#[derive(Debug)]
pub(crate) struct ImportScanner {
    max_audio_bytes: u64,
    lex: Lex,
    /// Nesting depth of objects and arrays (saturating: on invalid input it may be wrong).
    depth: u32,
    /// The depth-1 container is an object (not an array).
    top_is_object: bool,
    slot: Slot,
    key: KeyMatch,
    audio: Option<AudioStream>,
    audio_keys: u32,
    /// Body position, for mapping serde_json error positions back (see [`ScanSummary`]).
    line: u64,
    column: u64,
    /// Rest column minus body column on the current line.
    line_delta: i64,
    summary: ScanSummary,
}

fn is_base64_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'=')
}

fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

impl ImportScanner {
    /// A scanner that rejects more than `max_audio_bytes` of decoded audio.
    pub(crate) fn new(max_audio_bytes: u64) -> Self {
        Self {
            max_audio_bytes,
            lex: Lex::Outside,
            depth: 0,
            top_is_object: false,
            slot: Slot::Other,
            key: KeyMatch::default(),
            audio: None,
            audio_keys: 0,
            line: 1,
            column: 0,
            line_delta: 0,
            summary: ScanSummary::default(),
        }
    }

    /// Consumes the next chunk of the body.
    pub(crate) fn push(&mut self, chunk: &[u8], sink: &mut impl ScanSink) -> Result<(), ImportError> {
        // Start of the run of bytes not yet forwarded to the rest.
        let mut run = 0;
        let mut i = 0;
        while i < chunk.len() {
            if let Lex::Audio { escape } = self.lex {
                if !escape {
                    // Fast path: hand the whole run of base64 characters over at once.
                    let len = chunk[i..].iter().position(|&b| !is_base64_char(b)).unwrap_or(chunk.len() - i);
                    self.audio_chars(&chunk[i..i + len], sink)?;
                    self.column += len as u64;
                    i += len;
                    if i == chunk.len() {
                        break;
                    }
                }
                let byte = chunk[i];
                self.column += 1;
                i += 1;
                match (escape, byte) {
                    (true, b'/') => {
                        self.lex = Lex::Audio { escape: false };
                        self.audio_chars(b"/", sink)?;
                    }
                    (false, b'\\') => self.lex = Lex::Audio { escape: true },
                    (false, b'"') => {
                        self.end_audio(sink, true)?;
                        run = i;
                    }
                    _ => return Err(ImportError::InvalidBase64),
                }
                continue;
            }

            let byte = chunk[i];
            if byte == b'\n' {
                self.line += 1;
                self.column = 0;
                self.line_delta = 0;
            } else {
                self.column += 1;
            }
            if self.lex == Lex::Outside && byte == b'"' && self.slot == Slot::Value(true) && self.at_top() {
                // The audio string starts: forward what came before, then `null` in its place.
                sink.rest(&chunk[run..i]);
                sink.rest(b"null");
                self.start_audio();
                i += 1;
                continue;
            }
            self.lex_byte(byte);
            i += 1;
        }
        if !matches!(self.lex, Lex::Audio { .. }) {
            sink.rest(&chunk[run..]);
        }
        Ok(())
    }

    /// Ends the body and reports what was found.
    pub(crate) fn finish(mut self, sink: &mut impl ScanSink) -> Result<ScanSummary, ImportError> {
        if self.audio.is_some() {
            // The body ended inside the audio string. The rest is then certainly invalid JSON
            // (an unclosed top-level object), which is the error to report, not the WAV.
            self.end_audio(sink, false)?;
        }
        self.summary.duplicate_audio_key = self.audio_keys > 1;
        Ok(self.summary)
    }

    /// Directly inside the top-level object.
    fn at_top(&self) -> bool {
        self.depth == 1 && self.top_is_object
    }

    /// Advances the lexer over one byte that goes to the rest.
    fn lex_byte(&mut self, byte: u8) {
        match self.lex {
            Lex::Outside => self.lex_outside(byte),
            Lex::Str { escape, key } => {
                // What this byte contributes to the decoded string: nothing (mid-escape), a
                // byte, or something that cannot be part of the ASCII audio key.
                let mut decoded = None;
                let mut foreign = false;
                let escape = match escape {
                    Escape::None if byte == b'"' => {
                        self.lex = Lex::Outside;
                        if key {
                            let is_audio = self.key.is_audio_key();
                            self.audio_keys = self.audio_keys.saturating_add(u32::from(is_audio));
                            self.slot = Slot::Colon(is_audio);
                        }
                        return;
                    }
                    Escape::None if byte == b'\\' => Escape::Start,
                    Escape::None => {
                        decoded = Some(byte);
                        Escape::None
                    }
                    Escape::Start if byte == b'u' => Escape::Unicode { left: 4, unit: Some(0) },
                    Escape::Start => {
                        match byte {
                            b'"' | b'\\' | b'/' => decoded = Some(byte),
                            b'b' => decoded = Some(0x08),
                            b'f' => decoded = Some(0x0c),
                            b'n' => decoded = Some(b'\n'),
                            b'r' => decoded = Some(b'\r'),
                            b't' => decoded = Some(b'\t'),
                            // Invalid JSON; serde_json rejects it later.
                            _ => foreign = true,
                        }
                        Escape::None
                    }
                    Escape::Unicode { left, unit } => {
                        let unit = unit.zip(char::from(byte).to_digit(16)).map(|(u, d)| (u << 4) | d as u16);
                        if left > 1 {
                            Escape::Unicode { left: left - 1, unit }
                        } else {
                            match unit.and_then(|u| u8::try_from(u).ok()).filter(u8::is_ascii) {
                                Some(ascii) => decoded = Some(ascii),
                                None => foreign = true,
                            }
                            Escape::None
                        }
                    }
                };
                if key {
                    if foreign {
                        self.key.mismatch = true;
                    } else if let Some(decoded) = decoded {
                        self.key.push(decoded);
                    }
                }
                self.lex = Lex::Str { escape, key };
            }
            Lex::Audio { .. } => {}
        }
    }

    /// A byte between tokens.
    fn lex_outside(&mut self, byte: u8) {
        if is_json_whitespace(byte) {
            return;
        }
        let top = self.at_top();
        match byte {
            b'"' => {
                let key = top && self.slot == Slot::Key;
                if key {
                    self.key = KeyMatch::default();
                } else if top {
                    self.slot = Slot::Other;
                }
                self.lex = Lex::Str { escape: Escape::None, key };
            }
            b'{' | b'[' => {
                if top {
                    self.slot = Slot::Other;
                }
                self.depth = self.depth.saturating_add(1);
                if self.depth == 1 {
                    self.top_is_object = byte == b'{';
                    self.slot = Slot::Key;
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if top => self.slot = Slot::Key,
            b':' if top => {
                self.slot = match self.slot {
                    Slot::Colon(audio) => Slot::Value(audio),
                    _ => Slot::Other,
                };
            }
            _ if top => self.slot = Slot::Other,
            _ => {}
        }
    }

    fn start_audio(&mut self) {
        let decoder = (self.audio_keys == 1).then(|| AudioDecoder {
            base64: Base64Decoder::default(),
            wav: WavValidator::new(),
            total: 0,
            max: self.max_audio_bytes,
        });
        // `self.column` already counts the opening quote.
        let body_column = self.column - 1;
        let rest_column = (body_column as i64 + self.line_delta).max(0) as u64;
        self.audio = Some(AudioStream { decoder, body_column, rest_column });
        self.lex = Lex::Audio { escape: false };
    }

    /// Feeds base64 characters of the audio string.
    fn audio_chars(&mut self, chars: &[u8], sink: &mut impl ScanSink) -> Result<(), ImportError> {
        match &mut self.audio {
            Some(AudioStream { decoder: Some(decoder), .. }) => decoder.feed(chars, false, sink),
            _ => Ok(()),
        }
    }

    /// Closes the audio string; `complete` is false when the body ended inside it.
    fn end_audio(&mut self, sink: &mut impl ScanSink, complete: bool) -> Result<(), ImportError> {
        let Some(audio) = self.audio.take() else { return Ok(()) };
        if let (Some(mut decoder), true) = (audio.decoder, complete) {
            decoder.feed(&[], true, sink)?;
            self.summary.wav = Some(decoder.wav.finish()?);
        }
        let delta = self.column.saturating_sub(audio.body_column) as i64 - 4;
        if self.summary.shifts.len() < MAX_SHIFTS {
            self.summary.shifts.push(Shift { line: self.line, after_null: audio.rest_column + 4, delta });
        }
        self.line_delta -= delta;
        self.lex = Lex::Outside;
        self.slot = Slot::Other;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wav::tests::sine_wav;

    #[derive(Debug, Default, PartialEq)]
    struct Collect {
        rest: Vec<u8>,
        audio: Vec<u8>,
    }

    impl ScanSink for Collect {
        fn rest(&mut self, bytes: &[u8]) {
            self.rest.extend_from_slice(bytes);
        }
        fn audio(&mut self, bytes: &[u8]) {
            self.audio.extend_from_slice(bytes);
        }
    }

    /// Scans `body` cut at the given offsets; the result rendered comparably (errors by Debug).
    fn scan_cut(body: &[u8], cuts: &[usize], max_audio: u64) -> Result<(Collect, String), String> {
        let mut scanner = ImportScanner::new(max_audio);
        let mut sink = Collect::default();
        let mut start = 0;
        for &cut in cuts.iter().chain([&body.len()]) {
            scanner.push(&body[start..cut], &mut sink).map_err(|e| format!("{e:?}"))?;
            start = cut;
        }
        let summary = scanner.finish(&mut sink).map_err(|e| format!("{e:?}"))?;
        Ok((sink, format!("{summary:?}")))
    }

    fn scan(body: &[u8]) -> Result<(Collect, ScanSummary), ImportError> {
        let mut scanner = ImportScanner::new(u64::MAX);
        let mut sink = Collect::default();
        scanner.push(body, &mut sink)?;
        let summary = scanner.finish(&mut sink)?;
        Ok((sink, summary))
    }

    fn b64(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    /// A small body with the audio in the middle, between fields full of lexical traps.
    fn body_around(audio_value: &str) -> String {
        format!(
            r#"{{"started_at": 1.5, "title": "}}]\" {{\\", "transcript": [{{"ts": 1, "role": "user", "text": "a\u0022}}"}}], "audio_wav_\u0062ase64" : "{audio_value}", "provider":null}}"#
        )
    }

    #[test]
    fn every_split_point_gives_the_same_result() {
        let wav = sine_wav(16_000, 30);
        let encoded = b64(&wav).replace('/', "\\/");
        let body = body_around(&encoded);
        let expected_rest = body_around("").replace(r#""""#, "null");
        let bytes = body.as_bytes();

        let (whole, summary) = scan_cut(bytes, &[], u64::MAX).expect("valid body");
        assert_eq!(String::from_utf8_lossy(&whole.rest), expected_rest);
        assert_eq!(whole.audio, wav);
        assert!(summary.contains("data_bytes: 60"), "{summary}");

        for i in 0..=bytes.len() {
            assert_eq!(scan_cut(bytes, &[i], u64::MAX), Ok((whole_clone(&whole), summary.clone())), "cut at {i}");
            for j in i..=bytes.len() {
                assert_eq!(
                    scan_cut(bytes, &[i, j], u64::MAX).map(|r| r.0),
                    Ok(whole_clone(&whole)),
                    "cuts at {i}, {j}"
                );
            }
        }
        let every_byte: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(scan_cut(bytes, &every_byte, u64::MAX), Ok((whole_clone(&whole), summary)));
    }

    fn whole_clone(c: &Collect) -> Collect {
        Collect { rest: c.rest.clone(), audio: c.audio.clone() }
    }

    #[test]
    fn escaped_key_spellings_match_and_near_misses_do_not() {
        let wav = sine_wav(8_000, 4);
        let encoded = b64(&wav);
        for key in [r#""audio_wav_\u0062ase64""#, r#""\u0061udio\u005Fwav_base64""#, r#""audio_wav_base64""#] {
            let body = format!(r#"{{{key}:"{encoded}"}}"#);
            let (out, summary) = scan(body.as_bytes()).expect("valid");
            assert_eq!(String::from_utf8_lossy(&out.rest), format!("{{{key}:null}}"));
            assert_eq!(out.audio, wav, "{key}");
            assert!(summary.wav.is_some());
        }
        for key in [
            r#""audio_wav_base64x""#,
            r#""audio_wav_base6""#,
            r#""Audio_wav_base64""#,
            r#""audio_wav_base64\u0000""#,
            r#""audio_wav_base\u00364\n""#,
            r#""audio_wav_base64\u0100""#,
        ] {
            let body = format!(r#"{{{key}:"{encoded}"}}"#);
            let (out, summary) = scan(body.as_bytes()).expect("not diverted");
            assert_eq!(out.rest, body.as_bytes(), "{key}");
            assert!(out.audio.is_empty() && summary.wav.is_none());
        }
    }

    #[test]
    fn escaped_slash_inside_base64_decodes() {
        // Runs of 0xFF encode to `////`.
        let wav = crate::wav::tests::wav_with(1, 1, 8_000, 8, &[], &[0xFF; 12]);
        let encoded = b64(&wav);
        assert!(encoded.contains('/'));
        let body = format!(r#"{{"audio_wav_base64":"{}"}}"#, encoded.replace('/', r"\/"));
        let (out, _) = scan(body.as_bytes()).expect("valid");
        assert_eq!(out.audio, wav);
        assert_eq!(out.rest, br#"{"audio_wav_base64":null}"#);
    }

    #[test]
    fn other_escapes_and_foreign_characters_are_invalid_base64() {
        let encoded = b64(&sine_wav(8_000, 4));
        for bad in [r"\n", r"\u0041", r"\\", r#"\""#, " ", "\n", "-", "_", "é", "\t", "\0"] {
            let body = format!(r#"{{"audio_wav_base64":"{}{bad}{}"}}"#, &encoded[..8], &encoded[8..]);
            assert!(matches!(scan(body.as_bytes()), Err(ImportError::InvalidBase64)), "{bad:?}");
        }
    }

    #[test]
    fn padding_is_optional_at_the_end_only() {
        let decode = |chunks: &[&str]| -> (Vec<u8>, bool) {
            let mut d = Base64Decoder::default();
            let mut out = Vec::new();
            for chunk in chunks {
                let (bytes, valid) = d.push(chunk.as_bytes());
                out.extend_from_slice(bytes);
                if !valid {
                    return (out, false);
                }
            }
            let (bytes, valid) = d.finish();
            out.extend_from_slice(bytes);
            (out, valid)
        };
        assert_eq!(decode(&["QUJD", "RA=="]), (b"ABCD".to_vec(), true));
        assert_eq!(decode(&["QUJDRA"]), (b"ABCD".to_vec(), true));
        assert_eq!(decode(&["Q", "UJ", "DRE", "U"]), (b"ABCDE".to_vec(), true));
        assert_eq!(decode(&["QUJDREU="]), (b"ABCDE".to_vec(), true));
        assert_eq!(decode(&[""]), (Vec::new(), true));
        // Invalid input still yields the bytes before the problem.
        assert_eq!(decode(&["QUJDRA==QUJD"]), (b"ABCD".to_vec(), false));
        assert_eq!(decode(&["QUJDRA==", "Q"]), (b"ABCD".to_vec(), false));
        assert_eq!(decode(&["QUJDR"]), (b"ABC".to_vec(), false));
        assert_eq!(decode(&["QUJDRA="]), (b"ABC".to_vec(), false));
        assert_eq!(decode(&["QUJD", "R===", "QUJD"]), (b"ABC".to_vec(), false));
        assert_eq!(decode(&["QUJDQUJD=A==QUJD"]), (b"ABCABC".to_vec(), false));
    }

    #[test]
    fn audio_over_the_limit_stops_after_exactly_the_limit() {
        let wav = sine_wav(8_000, 100);
        let body = format!(r#"{{"audio_wav_base64":"{}"}}"#, b64(&wav));
        let mut scanner = ImportScanner::new(100);
        let mut sink = Collect::default();
        let result = scanner.push(body.as_bytes(), &mut sink);
        assert!(matches!(result, Err(ImportError::AudioTooLarge)), "{result:?}");
        assert_eq!(sink.audio, wav[..100]);
        // Exactly at the limit is fine.
        let (out, _) = scan_cut(body.as_bytes(), &[], wav.len() as u64).expect("at the limit");
        assert_eq!(out.audio, wav);
    }

    #[test]
    fn audio_key_below_the_top_level_is_forwarded() {
        for body in [
            r#"{"transcript":[{"ts":1,"role":"user","text":"x","audio_wav_base64":"QUJD"}],"meta":{"audio_wav_base64":"QUJD"}}"#,
            r#"[{"audio_wav_base64":"QUJD"}, "audio_wav_base64", "QUJD"]"#,
            r#"{"title":"audio_wav_base64","provider":"QUJD"}"#,
            r#"{"title":["audio_wav_base64", "QUJD"], "x": {"y": 1}, "audio_wav_base64x": "QUJD"}"#,
            r#"{"audio_wav_base64":null,"title":"QUJD"}"#,
            r#"{"audio_wav_base64": 12, "title":"QUJD"}"#,
            r#"{"audio_wav_base64": ["QUJD"]}"#,
            r#""audio_wav_base64""#,
        ] {
            let (out, summary) = scan(body.as_bytes()).expect("nothing to divert");
            assert_eq!(String::from_utf8_lossy(&out.rest), body);
            assert!(out.audio.is_empty() && summary.wav.is_none() && !summary.duplicate_audio_key);
        }
    }

    #[test]
    fn strings_with_brackets_and_escaped_quotes_keep_the_depth() {
        let wav = sine_wav(8_000, 4);
        let body = format!(
            r#"{{"a\\":"}}\"]\\\"{{","b":["]",{{"c":"\"}}}}"}}],"d\"":"{{","audio_wav_base64":"{}"}}"#,
            b64(&wav)
        );
        serde_json::from_str::<serde_json::Value>(&body).expect("the test body is valid JSON");
        let (out, summary) = scan(body.as_bytes()).expect("valid");
        assert_eq!(out.audio, wav);
        assert!(summary.wav.is_some());
        assert!(out.rest.ends_with(br#""audio_wav_base64":null}"#));
    }

    #[test]
    fn duplicate_audio_key_is_flagged_and_only_the_first_is_decoded() {
        let wav = sine_wav(8_000, 4);
        let body = format!(r#"{{"audio_wav_base64":"{}","audio_wav_base64":"QUJD"}}"#, b64(&wav));
        let (out, summary) = scan(body.as_bytes()).expect("lexically fine");
        assert_eq!(out.audio, wav);
        assert_eq!(out.rest, br#"{"audio_wav_base64":null,"audio_wav_base64":null}"#);
        assert!(summary.duplicate_audio_key);

        let body = br#"{"audio_wav_base64":null,"audio_wav_base64":"QUJD"}"#;
        let (out, summary) = scan(body).expect("lexically fine");
        assert!(out.audio.is_empty() && summary.wav.is_none() && summary.duplicate_audio_key);
        // The duplicate is lexed by the same rules.
        let body = br#"{"audio_wav_base64":null,"audio_wav_base64":"QU JD"}"#;
        assert!(matches!(scan(body), Err(ImportError::InvalidBase64)));
    }

    #[test]
    fn error_columns_map_back_to_the_body() {
        let wav = sine_wav(8_000, 4);
        for body in [
            format!(r#"{{"title":"x", "audio_wav_base64":"{}", "x": tru}}"#, b64(&wav)),
            format!("{{\n\"audio_wav_base64\" : \"{}\" ,\n\"a\": [1,]}}", b64(&wav)),
            format!(r#"{{"audio_wav_base64":"{}","audio_wav_base64":"","x" 1}}"#, b64(&wav)),
            format!(r#"{{"audio_wav_base64":"{}", "t": 1"#, b64(&wav)),
            format!(r#"{{"audio_wav_base64":"{}"#, b64(&wav)),
        ] {
            let expected = serde_json::from_str::<serde_json::Value>(&body).expect_err("invalid JSON");
            let (out, summary) = scan(body.as_bytes()).expect("lexically fine");
            let err = serde_json::from_slice::<serde_json::Value>(&out.rest).expect_err("rest invalid too");
            assert_eq!(summary.body_position(err.line(), err.column()), (expected.line(), expected.column()), "{body}");
        }
    }

    /// xorshift64*: deterministic and dependency-free.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Random inputs, random chunkings: never a panic, and the outcome never depends on where
    /// the chunks are cut.
    #[test]
    fn random_input_never_panics_and_chunking_never_matters() {
        let wav = sine_wav(8_000, 8);
        let valid = body_around(&b64(&wav));
        const TOKENS: &[&str] = &[
            "{",
            "}",
            "[",
            "]",
            "\"",
            "\\",
            ":",
            ",",
            " ",
            "\n",
            "null",
            "1",
            "\"audio_wav_base64\"",
            r#""audio_wav_\u0062ase64""#,
            "\\u00",
            "\\/",
            "=",
            "UklGR",
            "AAAA",
            "QUJD",
            "\"x\"",
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..3000 {
            let body: Vec<u8> = match round % 3 {
                0 => (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
                1 => (0..rng.below(60)).flat_map(|_| TOKENS[rng.below(TOKENS.len())].bytes()).collect(),
                _ => {
                    let mut body = valid.clone().into_bytes();
                    for _ in 0..1 + rng.below(3) {
                        let at = rng.below(body.len());
                        body[at] = TOKENS[rng.below(TOKENS.len())].as_bytes()[0];
                    }
                    body
                }
            };
            let max_audio = if rng.below(4) == 0 { rng.below(80) as u64 } else { u64::MAX };
            let whole = scan_cut(&body, &[], max_audio);
            let mut cuts: Vec<usize> = (0..rng.below(8)).map(|_| rng.below(body.len() + 1)).collect();
            cuts.sort_unstable();
            assert_eq!(scan_cut(&body, &cuts, max_audio), whole, "round {round}, cuts {cuts:?}");
        }
    }
}
