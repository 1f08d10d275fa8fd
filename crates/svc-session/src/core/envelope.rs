//! Reassembly of chunked client messages (`envelope-chunk`, spec "Chunking"), under bounds that
//! keep a client from making the server buffer without limit: a bound on one envelope's size and
//! chunk count, on the envelopes open at once, on the bytes buffered across them, and on how long
//! an envelope may stay incomplete.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine;
use svc_wire::events::{ENVELOPE_CHUNK_BYTES, EnvelopeChunk};

/// Largest reassembled message, in bytes: room for a 1 MB camera frame in base64.
pub const MAX_ENVELOPE_BYTES: usize = 1_536 * 1024;
/// Most chunks one envelope may announce (what [`MAX_ENVELOPE_BYTES`] needs).
pub const MAX_ENVELOPE_CHUNKS: u32 = MAX_ENVELOPE_BYTES.div_ceil(ENVELOPE_CHUNK_BYTES) as u32;
/// Envelopes one session may hold open at once.
pub const MAX_OPEN_ENVELOPES: usize = 4;
/// Bytes buffered across all open envelopes of a session.
pub const MAX_BUFFERED_BYTES: usize = 3 * 1024 * 1024;
/// An envelope still incomplete this long after its first chunk is dropped.
pub const ENVELOPE_MAX_AGE: Duration = Duration::from_secs(30);
/// Longest `envelope_id`.
const MAX_ENVELOPE_ID_CHARS: usize = 128;

/// Why a chunk was not accepted (the envelope, if any, is dropped with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkRefusal {
    /// Empty or oversized `envelope_id`, `total` out of bounds, or `seq >= total`.
    BadHeader,
    /// `data` is not base64 or decodes to more than one chunk's worth.
    BadData,
    /// A chunk disagrees with earlier ones (`total` changed, or a `seq` came twice with other data).
    Inconsistent,
    /// Too many envelopes open, or too many bytes buffered.
    OverBudget,
    /// The reassembled bytes are not UTF-8.
    NotUtf8,
}

impl ChunkRefusal {
    /// Short reason for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkRefusal::BadHeader => "bad chunk header",
            ChunkRefusal::BadData => "bad chunk data",
            ChunkRefusal::Inconsistent => "chunk disagrees with its envelope",
            ChunkRefusal::OverBudget => "too much chunked data buffered",
            ChunkRefusal::NotUtf8 => "reassembled message is not UTF-8",
        }
    }
}

#[derive(Debug)]
struct Open {
    total: u32,
    first_at: Instant,
    parts: Vec<Option<Vec<u8>>>,
    received: u32,
    bytes: usize,
}

/// Buffers chunks by `(sender, envelope_id)` until every `seq` arrived.
#[derive(Debug, Default)]
pub struct Reassembler {
    open: HashMap<(String, String), Open>,
    buffered: usize,
}

impl Reassembler {
    /// Takes one chunk from `sender`; returns the whole message once its last chunk is in.
    pub fn push(&mut self, now: Instant, sender: &str, chunk: EnvelopeChunk) -> Result<Option<String>, ChunkRefusal> {
        self.expire(now);
        let key = (sender.to_owned(), chunk.envelope_id.clone());
        let header_ok = !chunk.envelope_id.is_empty()
            && chunk.envelope_id.chars().count() <= MAX_ENVELOPE_ID_CHARS
            && (1..=MAX_ENVELOPE_CHUNKS).contains(&chunk.total)
            && chunk.seq < chunk.total;
        if !header_ok {
            self.drop_envelope(&key);
            return Err(ChunkRefusal::BadHeader);
        }
        // Checked before decoding: base64 of one chunk is at most this long.
        if chunk.data.len() > ENVELOPE_CHUNK_BYTES.div_ceil(3) * 4 + 4 {
            self.drop_envelope(&key);
            return Err(ChunkRefusal::BadData);
        }
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(chunk.data.as_bytes()) else {
            self.drop_envelope(&key);
            return Err(ChunkRefusal::BadData);
        };
        if bytes.len() > ENVELOPE_CHUNK_BYTES {
            self.drop_envelope(&key);
            return Err(ChunkRefusal::BadData);
        }
        if !self.open.contains_key(&key) {
            if self.open.len() >= MAX_OPEN_ENVELOPES {
                return Err(ChunkRefusal::OverBudget);
            }
            let parts = vec![None; chunk.total as usize];
            self.open.insert(key.clone(), Open { total: chunk.total, first_at: now, parts, received: 0, bytes: 0 });
        }
        let over_budget = self.buffered + bytes.len() > MAX_BUFFERED_BYTES;
        let Some(open) = self.open.get_mut(&key) else { return Err(ChunkRefusal::BadHeader) };
        if open.total != chunk.total {
            self.drop_envelope(&key);
            return Err(ChunkRefusal::Inconsistent);
        }
        let slot = &mut open.parts[chunk.seq as usize];
        match slot {
            Some(existing) if *existing == bytes => return Ok(None),
            Some(_) => {
                self.drop_envelope(&key);
                return Err(ChunkRefusal::Inconsistent);
            }
            None => {}
        }
        if over_budget || open.bytes + bytes.len() > MAX_ENVELOPE_BYTES {
            self.drop_envelope(&key);
            return Err(ChunkRefusal::OverBudget);
        }
        open.bytes += bytes.len();
        self.buffered += bytes.len();
        *slot = Some(bytes);
        open.received += 1;
        if open.received < open.total {
            return Ok(None);
        }
        let Some(done) = self.open.remove(&key) else { return Ok(None) };
        self.buffered -= done.bytes;
        let mut whole = Vec::with_capacity(done.bytes);
        for part in done.parts.into_iter().flatten() {
            whole.extend_from_slice(&part);
        }
        String::from_utf8(whole).map(Some).map_err(|_| ChunkRefusal::NotUtf8)
    }

    /// Drops envelopes older than [`ENVELOPE_MAX_AGE`]; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let before = self.open.len();
        let mut freed = 0;
        self.open.retain(|_, open| {
            let keep = now.saturating_duration_since(open.first_at) < ENVELOPE_MAX_AGE;
            if !keep {
                freed += open.bytes;
            }
            keep
        });
        self.buffered -= freed;
        before - self.open.len()
    }

    /// When the oldest open envelope expires.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.open.values().map(|open| open.first_at + ENVELOPE_MAX_AGE).min()
    }

    /// Bytes buffered now.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    fn drop_envelope(&mut self, key: &(String, String)) {
        if let Some(open) = self.open.remove(key) {
            self.buffered -= open.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use svc_wire::events::chunk_message;

    use super::*;

    fn chunks(text: &str, id: &str) -> Vec<EnvelopeChunk> {
        chunk_message(text, id, |chunk| chunk).expect("over the threshold")
    }

    #[test]
    fn chunks_in_any_order_reassemble_once() {
        let now = Instant::now();
        let text = format!("{{\"type\":\"send-text\",\"content\":\"{}\"}}", "ü".repeat(20_000));
        let mut parts = chunks(&text, "e1");
        parts.reverse();
        let mut reassembler = Reassembler::default();
        let last = parts.pop().expect("parts");
        for part in parts.iter().cloned() {
            assert_eq!(reassembler.push(now, "alice", part), Ok(None));
        }
        // A repeated chunk with the same bytes is harmless.
        assert_eq!(reassembler.push(now, "alice", parts[0].clone()), Ok(None));
        assert_eq!(reassembler.push(now, "alice", last), Ok(Some(text)));
        assert_eq!(reassembler.buffered_bytes(), 0);
    }

    #[test]
    fn senders_do_not_share_envelopes() {
        let now = Instant::now();
        let text = "x".repeat(20_000);
        let parts = chunks(&text, "same");
        let mut reassembler = Reassembler::default();
        assert_eq!(reassembler.push(now, "alice", parts[0].clone()), Ok(None));
        assert_eq!(reassembler.push(now, "bob", parts[1].clone()), Ok(None));
        assert_eq!(reassembler.push(now, "bob", parts[2].clone()), Ok(None));
        assert_eq!(reassembler.push(now, "alice", parts[1].clone()), Ok(None));
        assert_eq!(reassembler.push(now, "alice", parts[2].clone()), Ok(Some(text)));
    }

    #[test]
    fn bad_headers_data_and_contradictions_are_refused() {
        let now = Instant::now();
        let mut reassembler = Reassembler::default();
        let chunk =
            |id: &str, seq, total, data: &str| EnvelopeChunk { envelope_id: id.into(), seq, total, data: data.into() };
        assert_eq!(reassembler.push(now, "a", chunk("", 0, 2, "eA==")), Err(ChunkRefusal::BadHeader));
        assert_eq!(reassembler.push(now, "a", chunk("e", 2, 2, "eA==")), Err(ChunkRefusal::BadHeader));
        assert_eq!(reassembler.push(now, "a", chunk("e", 0, 0, "eA==")), Err(ChunkRefusal::BadHeader));
        assert_eq!(
            reassembler.push(now, "a", chunk("e", 0, MAX_ENVELOPE_CHUNKS + 1, "eA==")),
            Err(ChunkRefusal::BadHeader)
        );
        assert_eq!(reassembler.push(now, "a", chunk("e", 0, 2, "not base64!")), Err(ChunkRefusal::BadData));
        let big = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; ENVELOPE_CHUNK_BYTES + 1]);
        assert_eq!(reassembler.push(now, "a", chunk("e", 0, 2, &big)), Err(ChunkRefusal::BadData));
        assert_eq!(reassembler.push(now, "a", chunk("e", 0, 2, "eA==")), Ok(None));
        assert_eq!(reassembler.push(now, "a", chunk("e", 0, 2, "eQ==")), Err(ChunkRefusal::Inconsistent));
        assert_eq!(reassembler.buffered_bytes(), 0, "the contradicted envelope is gone");
        assert_eq!(reassembler.push(now, "a", chunk("f", 0, 2, "eA==")), Ok(None));
        assert_eq!(reassembler.push(now, "a", chunk("f", 1, 3, "eA==")), Err(ChunkRefusal::Inconsistent));
        assert_eq!(reassembler.push(now, "a", chunk("g", 0, 1, "/w==")), Err(ChunkRefusal::NotUtf8));
    }

    #[test]
    fn open_envelopes_bytes_and_age_are_bounded() {
        let now = Instant::now();
        let mut reassembler = Reassembler::default();
        let data = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; ENVELOPE_CHUNK_BYTES]);
        let chunk =
            |id: String, seq| EnvelopeChunk { envelope_id: id, seq, total: MAX_ENVELOPE_CHUNKS, data: data.clone() };
        for id in 0..MAX_OPEN_ENVELOPES {
            assert_eq!(reassembler.push(now, "a", chunk(format!("e{id}"), 0)), Ok(None));
        }
        assert_eq!(reassembler.push(now, "a", chunk("one-too-many".into(), 0)), Err(ChunkRefusal::OverBudget));
        // Fill the byte budget: some chunk is refused before the buffered bytes pass the bound.
        let mut refused = false;
        'fill: for seq in 1..MAX_ENVELOPE_CHUNKS {
            for id in 0..MAX_OPEN_ENVELOPES {
                if reassembler.push(now, "a", chunk(format!("e{id}"), seq)) == Err(ChunkRefusal::OverBudget) {
                    refused = true;
                    break 'fill;
                }
                assert!(reassembler.buffered_bytes() <= MAX_BUFFERED_BYTES);
            }
        }
        assert!(refused, "the byte budget bites");
        assert!(reassembler.next_expiry().is_some());
        assert_eq!(reassembler.expire(now + ENVELOPE_MAX_AGE), MAX_OPEN_ENVELOPES - 1);
        assert_eq!(reassembler.buffered_bytes(), 0);
        assert_eq!(reassembler.next_expiry(), None);
    }
}
