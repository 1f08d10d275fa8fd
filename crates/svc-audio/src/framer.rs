//! Cutting a PCM stream of arbitrary chunk sizes into 20 ms frames.

use crate::FRAME_SAMPLES;

/// Collects PCM of any chunk size and hands it out as full [`FRAME_SAMPLES`]-sample frames,
/// keeping the remainder for the next chunk.
///
/// ```
/// # use svc_audio::{Framer, FRAME_SAMPLES};
/// let mut framer = Framer::new();
/// framer.push(&[1; 1500]);
/// let mut frames = 0;
/// while let Some(frame) = framer.next_frame() {
///     assert_eq!(frame.len(), FRAME_SAMPLES);
///     frames += 1;
/// }
/// assert_eq!((frames, framer.pending_samples()), (1, 540));
/// let last = framer.flush_padded().expect("540 samples were pending");
/// assert_eq!((last[539], last[540]), (1, 0));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Framer {
    /// Pushed samples; those before `read` were handed out already.
    buffer: Vec<i16>,
    /// Start of the first sample not yet handed out.
    read: usize,
}

impl Framer {
    /// An empty framer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends samples. Drain full frames with [`Framer::next_frame`] after each push: the framer
    /// keeps whatever is pushed, so memory follows what the caller leaves in it.
    pub fn push(&mut self, pcm: &[i16]) {
        // Drop what was handed out before growing, so the buffer holds at most one push plus
        // one partial frame instead of the whole stream.
        if self.read > 0 {
            self.buffer.drain(..self.read);
            self.read = 0;
        }
        self.buffer.extend_from_slice(pcm);
    }

    /// The next full frame, if one is buffered.
    pub fn next_frame(&mut self) -> Option<&[i16; FRAME_SAMPLES]> {
        let end = self.read.checked_add(FRAME_SAMPLES)?;
        let frame = self.buffer.get(self.read..end)?.try_into().ok()?;
        self.read = end;
        Some(frame)
    }

    /// Samples buffered that do not yet fill a frame (plus any full frames not yet taken).
    #[must_use]
    pub fn pending_samples(&self) -> usize {
        self.buffer.len() - self.read
    }

    /// Hands out everything still buffered as one frame, padded with zeros (silence) to full
    /// length; `None` when nothing is buffered. Call after the last push of a stream, having taken
    /// all full frames (any left are flushed one per call).
    pub fn flush_padded(&mut self) -> Option<[i16; FRAME_SAMPLES]> {
        let pending = self.buffer.get(self.read..).filter(|rest| !rest.is_empty())?;
        let take = pending.len().min(FRAME_SAMPLES);
        let mut frame = [0; FRAME_SAMPLES];
        frame[..take].copy_from_slice(&pending[..take]);
        self.read += take;
        if self.read == self.buffer.len() {
            self.buffer.clear();
            self.read = 0;
        }
        Some(frame)
    }

    /// Discards everything buffered.
    pub fn clear(&mut self) {
        self.buffer.clear();
        self.read = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(start: usize, len: usize) -> Vec<i16> {
        (start..start + len).map(|n| (n % 30_000) as i16).collect()
    }

    #[test]
    fn frames_come_out_in_order_whatever_the_chunk_sizes() {
        let mut framer = Framer::new();
        let mut out = Vec::new();
        let mut pushed = 0;
        for chunk in [1, 959, 960, 961, 3_000, 7, 0, 480, 2_000] {
            framer.push(&ramp(pushed, chunk));
            pushed += chunk;
            while let Some(frame) = framer.next_frame() {
                out.extend_from_slice(frame);
            }
            assert!(framer.pending_samples() < FRAME_SAMPLES);
            assert_eq!(out.len() + framer.pending_samples(), pushed);
        }
        assert_eq!(out, ramp(0, out.len()));
        let rest = framer.pending_samples();
        let last = framer.flush_padded().expect("samples are pending");
        assert_eq!(&last[..rest], &ramp(out.len(), rest)[..]);
        assert!(last[rest..].iter().all(|&s| s == 0));
        assert_eq!(framer.pending_samples(), 0);
        assert!(framer.flush_padded().is_none());
    }

    #[test]
    fn memory_stays_at_one_push_plus_a_partial_frame() {
        let mut framer = Framer::new();
        for _ in 0..1_000 {
            framer.push(&[3; 1_000]);
            while framer.next_frame().is_some() {}
        }
        assert!(framer.buffer.len() <= 1_000 + FRAME_SAMPLES);
    }

    #[test]
    fn flush_of_an_exact_frame_is_not_padded_and_clear_empties() {
        let mut framer = Framer::new();
        framer.push(&[9; FRAME_SAMPLES]);
        assert_eq!(framer.flush_padded(), Some([9; FRAME_SAMPLES]));
        framer.push(&[1; 10]);
        framer.clear();
        assert_eq!(framer.pending_samples(), 0);
        assert!(framer.next_frame().is_none());
    }
}
