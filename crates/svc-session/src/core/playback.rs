//! The agent's voice on its way out: provider audio is Opus-encoded as it arrives (at the
//! provider's own rate, no resampling) into a queue of 20 ms frames, and one frame is released
//! every 20 ms of the session clock. Encoding at arrival keeps the queue small (about 5 KB per
//! second of speech instead of 48 KB of PCM), so a provider that sends audio faster than real
//! time needs no backpressure, and a barge-in is a queue clear.
//!
//! Every frame belongs to a response (`seq`). Per response the playback keeps what the
//! transcript rules need (spec: "for the assistant in audio sessions it transcribes the audio
//! actually heard"): transcript fragments are stamped with how much of the response's audio had
//! arrived when they did, and released only once that much has been played.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use svc_audio::OpusEncoder;
use svc_audio::opus::{EncoderConfig, OPUS_RATES_HZ, frame_samples_at};

/// One frame's duration.
pub const FRAME: Duration = Duration::from_millis(20);
/// Frames the queue holds at most (two minutes of speech, about 600 KB of Opus). A provider
/// that runs further ahead of playback loses the excess, counted in [`Playback::dropped_frames`].
pub const MAX_QUEUED_FRAMES: usize = 6_000;
/// When the release clock falls this far behind (a stalled task), it restarts instead of
/// bursting the backlog out at once.
const MAX_LATENESS: Duration = Duration::from_millis(60);

/// One response's audio and text as playback sees them.
#[derive(Debug)]
pub struct Response {
    /// Sequence number (1, 2, …).
    pub seq: u64,
    /// The provider finished generating it.
    pub done: bool,
    /// Cut by a barge-in: no more audio is accepted for it.
    pub cut: bool,
    /// Frames queued so far (released or not).
    pub enqueued: u64,
    /// Frames released.
    pub released: u64,
    /// Transcript fragments not yet released, each with the frame count it waits for.
    pub fragments: VecDeque<(u64, String)>,
    /// The final transcript, once the provider sent it.
    pub final_text: Option<String>,
    /// Fragments released so far (the heard text, if no final ever comes).
    pub released_text: String,
    /// `bot-*-speaking` started for it and not yet stopped.
    pub speaking: bool,
    /// Finished: stop markers, final transcript and `turn-complete` are out.
    pub finished: bool,
    /// Text-only (model text) content was produced.
    pub had_text: bool,
}

impl Response {
    fn new(seq: u64) -> Response {
        Response {
            seq,
            done: false,
            cut: false,
            enqueued: 0,
            released: 0,
            fragments: VecDeque::new(),
            final_text: None,
            released_text: String::new(),
            speaking: false,
            finished: false,
            had_text: false,
        }
    }

    /// Whether any audio of it was queued.
    pub fn had_audio(&self) -> bool {
        self.enqueued > 0
    }

    /// Milliseconds of it played.
    pub fn played_ms(&self) -> u64 {
        self.released * FRAME.as_millis() as u64
    }
}

/// What releasing a frame did.
#[derive(Debug)]
pub struct Released {
    /// The frame to publish.
    pub opus: Bytes,
    /// Its response.
    pub seq: u64,
    /// It is the response's first frame (the talkspurt starts).
    pub first: bool,
    /// Transcript fragments that are now heard.
    pub fragments: Vec<String>,
}

/// The outgoing audio queue with its responses.
#[derive(Debug)]
pub struct Playback {
    encoder: Option<OpusEncoder>,
    rate_hz: u32,
    /// Samples short of a whole frame, waiting for more.
    remainder: Vec<i16>,
    packet: Vec<u8>,
    queue: VecDeque<(u64, Bytes)>,
    /// When the next frame is due (None: released at once when one is queued).
    next_due: Option<Instant>,
    /// Responses from the oldest unfinished one to the newest.
    pub responses: VecDeque<Response>,
    next_seq: u64,
    /// Frames released in total.
    pub released_total: u64,
    /// Frames lost to [`MAX_QUEUED_FRAMES`].
    pub dropped_frames: u64,
    /// Releasing waits until someone can hear it.
    pub audience: bool,
}

impl Default for Playback {
    fn default() -> Self {
        Playback {
            encoder: None,
            rate_hz: 0,
            remainder: Vec::new(),
            packet: Vec::new(),
            queue: VecDeque::new(),
            next_due: None,
            responses: VecDeque::new(),
            next_seq: 1,
            released_total: 0,
            dropped_frames: 0,
            audience: false,
        }
    }
}

impl Playback {
    /// Opens a new response; returns its `seq`.
    pub fn start_response(&mut self) -> u64 {
        self.flush_remainder();
        let seq = self.next_seq;
        self.next_seq += 1;
        self.responses.push_back(Response::new(seq));
        seq
    }

    /// The newest response, if it still takes content.
    pub fn open_response(&mut self) -> Option<&mut Response> {
        self.responses.back_mut().filter(|r| !r.done && !r.cut)
    }

    /// The response with `seq`.
    pub fn response(&mut self, seq: u64) -> Option<&mut Response> {
        self.responses.iter_mut().find(|r| r.seq == seq)
    }

    /// Encodes `pcm` at `rate_hz` into frames of the newest open response. Returns `false` when
    /// the rate cannot be encoded.
    pub fn push_pcm(&mut self, pcm: &[i16], rate_hz: u32) -> bool {
        if !OPUS_RATES_HZ.contains(&rate_hz) {
            return false;
        }
        if self.encoder.is_none() || self.rate_hz != rate_hz {
            self.remainder.clear();
            match OpusEncoder::with_rate(EncoderConfig::VOICE, rate_hz) {
                Ok(encoder) => self.encoder = Some(encoder),
                Err(_) => return false,
            }
            self.rate_hz = rate_hz;
        }
        let Some(seq) = self.responses.back().filter(|r| !r.done && !r.cut).map(|r| r.seq) else { return true };
        let frame = frame_samples_at(rate_hz);
        let mut input = pcm;
        if !self.remainder.is_empty() {
            let take = (frame - self.remainder.len()).min(input.len());
            self.remainder.extend_from_slice(&input[..take]);
            input = &input[take..];
            if self.remainder.len() == frame {
                let whole = std::mem::take(&mut self.remainder);
                self.encode(seq, &whole);
            }
        }
        let mut chunks = input.chunks_exact(frame);
        for chunk in chunks.by_ref() {
            self.encode(seq, chunk);
        }
        self.remainder.extend_from_slice(chunks.remainder());
        true
    }

    /// Pads and queues a trailing partial frame (the response's audio ended).
    pub fn flush_remainder(&mut self) {
        if self.remainder.is_empty() {
            return;
        }
        let frame = frame_samples_at(self.rate_hz);
        let mut whole = std::mem::take(&mut self.remainder);
        whole.resize(frame, 0);
        if let Some(seq) = self.responses.back().filter(|r| !r.cut).map(|r| r.seq) {
            self.encode(seq, &whole);
        }
    }

    fn encode(&mut self, seq: u64, pcm: &[i16]) {
        let Some(encoder) = self.encoder.as_mut() else { return };
        if encoder.encode_frame_into(pcm, &mut self.packet).is_err() {
            return;
        }
        if self.queue.len() >= MAX_QUEUED_FRAMES {
            self.dropped_frames += 1;
            return;
        }
        self.queue.push_back((seq, Bytes::copy_from_slice(&self.packet)));
        if let Some(response) = self.response(seq) {
            response.enqueued += 1;
        }
    }

    /// Frames waiting.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Frames of `seq` still waiting, counting a partial frame in the encoder.
    pub fn pending_of(&self, seq: u64) -> bool {
        self.queue.iter().any(|(s, _)| *s == seq)
            || (!self.remainder.is_empty() && self.responses.back().is_some_and(|r| r.seq == seq))
    }

    /// When the next frame should be released.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.queue.is_empty() || !self.audience {
            return None;
        }
        self.next_due
    }

    /// Whether a frame is due now (none is due while nobody listens).
    pub fn due(&self, now: Instant) -> bool {
        self.audience && !self.queue.is_empty() && self.next_due.is_none_or(|due| due <= now)
    }

    /// Releases the frame that is due.
    pub fn release(&mut self, now: Instant) -> Option<Released> {
        if !self.due(now) {
            return None;
        }
        let (seq, opus) = self.queue.pop_front()?;
        // The clock keeps its pace across a drained queue, so frames that trickle in early still
        // leave 20 ms apart; it restarts only when it fell behind (a stall, or a long pause).
        let due = match self.next_due {
            Some(due) if now.saturating_duration_since(due) <= MAX_LATENESS => due,
            _ => now,
        };
        self.next_due = Some(due + FRAME);
        self.released_total += 1;
        let (first, fragments) = match self.responses.iter_mut().find(|r| r.seq == seq) {
            Some(response) => {
                response.released += 1;
                let mut fragments = Vec::new();
                while response.fragments.front().is_some_and(|(at, _)| *at < response.released) {
                    if let Some((_, text)) = response.fragments.pop_front() {
                        response.released_text.push_str(&text);
                        fragments.push(text);
                    }
                }
                (response.released == 1, fragments)
            }
            None => (false, Vec::new()),
        };
        Some(Released { opus, seq, first, fragments })
    }

    /// Barge-in: drops every queued frame (and the partial one) and marks every unfinished
    /// response cut. Returns the frames dropped.
    pub fn clear(&mut self) -> usize {
        let dropped = self.queue.len();
        self.queue.clear();
        self.remainder.clear();
        self.next_due = None;
        for response in self.responses.iter_mut().filter(|r| !r.finished) {
            response.cut = true;
            response.fragments.clear();
        }
        // The encoder's history belongs to audio nobody will hear.
        if let Some(encoder) = self.encoder.as_mut() {
            let _ = encoder.reset();
        }
        dropped
    }

    /// Adds a transcript fragment to the newest open response: it is heard once as many frames
    /// as had arrived with it have been played.
    pub fn push_fragment(&mut self, text: String) -> Option<u64> {
        let response = self.responses.back_mut().filter(|r| !r.cut && !r.finished)?;
        let at = response.enqueued;
        response.fragments.push_back((at, text));
        Some(response.seq)
    }

    /// Forgets finished responses at the front.
    pub fn prune(&mut self) {
        while self.responses.len() > 1 && self.responses.front().is_some_and(|r| r.finished) {
            self.responses.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_encoded_at_arrival_and_released_every_20_ms() {
        let t0 = Instant::now();
        let mut playback = Playback { audience: true, ..Playback::default() };
        let seq = playback.start_response();
        // 50 ms at 24 kHz: two whole frames now, the rest waits for more.
        assert!(playback.push_pcm(&vec![1000; 1200], 24_000));
        assert_eq!(playback.queued(), 2);
        playback.push_fragment("Hello ".into());
        assert!(playback.push_pcm(&vec![1000; 240], 24_000));
        assert_eq!(playback.queued(), 3, "the remainder completed a frame");
        let first = playback.release(t0).expect("due at once");
        assert!(first.first && first.seq == seq);
        assert!(first.fragments.is_empty(), "the fragment arrived with frame 3");
        assert!(playback.release(t0 + Duration::from_millis(19)).is_none());
        let second = playback.release(t0 + FRAME).expect("due");
        assert!(!second.first && second.fragments.is_empty());
        let third = playback.release(t0 + FRAME * 2).expect("due");
        assert_eq!(third.fragments, vec!["Hello ".to_owned()]);
        assert_eq!(playback.response(seq).map(|r| r.played_ms()), Some(60));
        assert_eq!(playback.poll_timeout(), None, "drained");
    }

    #[test]
    fn nothing_is_released_without_an_audience_and_a_stall_restarts_the_clock() {
        let t0 = Instant::now();
        let mut playback = Playback::default();
        playback.start_response();
        playback.push_pcm(&vec![0; 480 * 5], 24_000);
        assert!(playback.release(t0).is_none());
        assert_eq!(playback.poll_timeout(), None);
        playback.audience = true;
        assert!(playback.release(t0).is_some());
        // Late by 100 ms: one frame now, the next 20 ms after it, not a burst.
        let late = t0 + Duration::from_millis(120);
        assert!(playback.release(late).is_some());
        assert!(playback.release(late).is_none());
        assert_eq!(playback.poll_timeout(), Some(late + FRAME));
    }

    #[test]
    fn a_barge_in_clears_everything_and_cuts_the_response() {
        let t0 = Instant::now();
        let mut playback = Playback { audience: true, ..Playback::default() };
        let seq = playback.start_response();
        playback.push_pcm(&vec![500; 480 * 10 + 100], 24_000);
        playback.release(t0);
        assert_eq!(playback.clear(), 9);
        assert_eq!(playback.queued(), 0);
        assert!(playback.response(seq).is_some_and(|r| r.cut && r.played_ms() == 20));
        // Late audio of the cut response is not queued.
        playback.push_pcm(&vec![500; 4800], 24_000);
        assert_eq!(playback.queued(), 0);
        let next = playback.start_response();
        playback.push_pcm(&vec![500; 480], 24_000);
        assert_eq!(playback.release(t0 + FRAME).map(|r| (r.seq, r.first)), Some((next, true)));
    }

    #[test]
    fn the_queue_is_bounded_and_unsupported_rates_are_refused() {
        let mut playback = Playback::default();
        playback.start_response();
        assert!(!playback.push_pcm(&[0; 441], 22_050));
        playback.push_pcm(&vec![0; 160 * (MAX_QUEUED_FRAMES + 10)], 8_000);
        assert_eq!(playback.queued(), MAX_QUEUED_FRAMES);
        assert_eq!(playback.dropped_frames, 10);
    }

    #[test]
    fn the_last_partial_frame_is_padded_when_the_response_ends() {
        let mut playback = Playback::default();
        let seq = playback.start_response();
        playback.push_pcm(&[7; 100], 16_000);
        assert_eq!(playback.queued(), 0);
        assert!(playback.pending_of(seq));
        playback.flush_remainder();
        assert_eq!(playback.queued(), 1);
    }
}
