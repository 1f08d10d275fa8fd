//! The agent's voice on its way out: provider audio is Opus-encoded as it arrives (at the
//! provider's own rate, no resampling) into a queue of 20 ms frames, and one frame is released
//! every 20 ms of the session clock. Encoding at arrival keeps the queue small (about 5 KB per
//! second of speech instead of 48 KB of PCM), so a provider that sends audio faster than real
//! time needs no backpressure, and a barge-in is a queue clear.
//!
//! While someone listens, the track never goes quiet: between responses it carries a frame of
//! silence every [`IDLE_SILENCE_EVERY`], the rhythm of an Opus sender with DTX on, with RTP time
//! running on through the gaps. A receiver's jitter buffer that sees a stream stop and restart
//! time-stretches the first words after each restart while it re-settles (measured with the PyPI
//! client: 0.89 correlation with what was sent, against 0.96 on a continuous stream), and the
//! first words are the ones that matter; a DTX rhythm is no restart (0.970 with the PyPI client
//! and 0.960 in Chromium, against 0.966 and 0.957 with silence every 20 ms), and it spares two
//! thirds of the packets a talking session sends (12 % of svc's CPU: docs/benchmarks.md). The
//! silence frame is encoded once per process.
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
/// How often a frame of filler silence goes out between responses (after the first, 20 ms after
/// the last frame of speech): Opus DTX's rhythm, which receivers take as a talker's pause.
pub const IDLE_SILENCE_EVERY: Duration = Duration::from_millis(400);
/// The `seq` of priming silence: no response's.
const PRIMING: u64 = 0;

/// One Opus frame of digital silence (any rate decodes it), made once.
fn silence_packet() -> Bytes {
    static SILENCE: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    SILENCE
        .get_or_init(|| {
            OpusEncoder::with_rate(EncoderConfig::VOICE, 48_000)
                .and_then(|mut encoder| encoder.encode_frame(&[0; 960]))
                .map(Bytes::from)
                .unwrap_or_default()
        })
        .clone()
}

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

    /// What of its transcript the user heard: the fragments released, and, unless it was cut,
    /// those still waiting (its audio plays, or played, to the end).
    pub fn heard_text(&self) -> String {
        let mut heard = self.released_text.clone();
        if !self.cut {
            for (_, fragment) in &self.fragments {
                heard.push_str(fragment);
            }
        }
        heard
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
    /// It is silence between responses (or priming), not speech.
    pub silence: bool,
    /// When it is due on the media clock (frames of a talkspurt are exactly 20 ms apart).
    pub due: Instant,
    /// Its response.
    pub seq: u64,
    /// The PCM it was encoded from, at [`Playback::rate_hz`], when the playback keeps it
    /// ([`Playback::keep_pcm`]; never for silence).
    pub pcm: Option<Box<[i16]>>,
    /// It is the response's first frame (the talkspurt starts).
    pub first: bool,
    /// Transcript fragments that are now heard.
    pub fragments: Vec<String>,
}

/// A queued frame: its response, the Opus, and the PCM it was encoded from when kept.
type QueuedFrame = (u64, Bytes, Option<Box<[i16]>>);

/// The outgoing audio queue with its responses.
#[derive(Debug)]
pub struct Playback {
    encoder: Option<OpusEncoder>,
    rate_hz: u32,
    /// Samples short of a whole frame, waiting for more.
    remainder: Vec<i16>,
    packet: Vec<u8>,
    /// Frames by response, each with the PCM it was encoded from when `keep_pcm` is set.
    queue: VecDeque<QueuedFrame>,
    /// Keep each frame's PCM with it (the recording wants it: decoding the frame again would
    /// cost a decode per 20 ms; keeping it costs about ten times the Opus, only while recording).
    keep_pcm: bool,
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
    /// The last frame out was filler silence (nothing was queued).
    idle: bool,
}

impl Default for Playback {
    fn default() -> Self {
        Playback {
            encoder: None,
            rate_hz: 0,
            remainder: Vec::new(),
            packet: Vec::new(),
            queue: VecDeque::new(),
            keep_pcm: false,
            next_due: None,
            responses: VecDeque::new(),
            next_seq: 1,
            released_total: 0,
            dropped_frames: 0,
            audience: false,
            idle: true,
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
        let kept = self.keep_pcm.then(|| Box::from(pcm));
        self.queue.push_back((seq, Bytes::copy_from_slice(&self.packet), kept));
        if let Some(response) = self.response(seq) {
            response.enqueued += 1;
        }
    }

    /// Keeps each frame's PCM from now on, handed out with it on release.
    pub fn keep_pcm(&mut self) {
        self.keep_pcm = true;
    }

    /// The rate of the PCM handed out with frames (the provider's output rate).
    pub fn rate_hz(&self) -> u32 {
        self.rate_hz
    }

    /// Puts `frames` frames of silence before everything queued, for a listener whose media just
    /// connected: a receiver's jitter buffer sizes itself on the first packets of a stream, and
    /// time-stretches what it plays while it does; silence is what it should stretch, not the
    /// first words of the greeting. Also covers the moment between media connecting and the
    /// client attaching its player to the track.
    pub fn prime(&mut self, frames: usize) {
        let silence = silence_packet();
        if silence.is_empty() {
            return;
        }
        for _ in 0..frames.min(MAX_QUEUED_FRAMES.saturating_sub(self.queue.len())) {
            self.queue.push_front((PRIMING, silence.clone(), None));
        }
    }

    /// Frames waiting.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Frames of `seq` still waiting, counting a partial frame in the encoder.
    pub fn pending_of(&self, seq: u64) -> bool {
        self.queue.iter().any(|(s, _, _)| *s == seq)
            || (!self.remainder.is_empty() && self.responses.back().is_some_and(|r| r.seq == seq))
    }

    /// When the next frame (speech or silence) should be released.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.audience || self.underrun() {
            return None;
        }
        self.next_due
    }

    /// Whether a frame is due now (none is due while nobody listens). Speech that arrives while
    /// the track carries filler silence goes out at once rather than at the next 20 ms slot: the
    /// receiver takes an early packet as jitter, and the reply is 0–20 ms sooner.
    pub fn due(&self, now: Instant) -> bool {
        let speech_waits = self.idle && self.queue.front().is_some_and(|(seq, _, _)| *seq != PRIMING);
        self.audience && !self.underrun() && (speech_waits || self.next_due.is_none_or(|due| due <= now))
    }

    /// A response is being spoken and its next audio is late: wait for it rather than fill the
    /// gap with silence (the receiver's jitter buffer absorbs a late packet; an inserted silent
    /// frame would be an audible gap inside a word).
    fn underrun(&self) -> bool {
        self.queue.is_empty() && self.responses.iter().any(|r| r.speaking && !r.finished && !r.cut)
    }

    /// Releases the frame that is due: the next queued one, or silence.
    pub fn release(&mut self, now: Instant) -> Option<Released> {
        if !self.due(now) {
            return None;
        }
        let speech_waits = self.idle && self.queue.front().is_some_and(|(seq, _, _)| *seq != PRIMING);
        if self.underrun() {
            return None;
        }
        let (seq, opus, pcm) = self.queue.pop_front().unwrap_or_else(|| (PRIMING, silence_packet(), None));
        // The clock keeps its pace, so frames that trickle in early still leave 20 ms apart; it
        // restarts when speech ends filler silence, and when it fell behind (a stall).
        let due = match self.next_due {
            Some(due) if !speech_waits && now.saturating_duration_since(due) <= MAX_LATENESS => due,
            _ => now,
        };
        self.idle = self.queue.is_empty() && seq == PRIMING;
        self.next_due = Some(due + if self.idle { IDLE_SILENCE_EVERY } else { FRAME });
        if seq != PRIMING {
            self.released_total += 1;
        }
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
        Some(Released { opus, silence: seq == PRIMING, due, seq, pcm, first, fragments })
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
            // A reset that fails leaves only stale history, as no reset would.
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
    fn frames_carry_the_pcm_they_were_encoded_from_only_when_asked() {
        let t0 = Instant::now();
        let mut plain = Playback { audience: true, ..Playback::default() };
        plain.start_response();
        assert!(plain.push_pcm(&[7; 480], 24_000));
        assert!(plain.release(t0).expect("due").pcm.is_none(), "no PCM kept unless asked");
        let mut playback = Playback { audience: true, ..Playback::default() };
        playback.keep_pcm();
        playback.prime(1);
        playback.start_response();
        let speech: Vec<i16> = (0..960).map(|n| n as i16).collect();
        assert!(playback.push_pcm(&speech, 24_000));
        let primed = playback.release(t0).expect("due");
        assert!(primed.silence && primed.pcm.is_none(), "priming silence has none");
        let first = playback.release(t0 + FRAME).expect("due");
        let second = playback.release(t0 + FRAME * 2).expect("due");
        assert_eq!(first.pcm.as_deref(), Some(&speech[..480]));
        assert_eq!(second.pcm.as_deref(), Some(&speech[480..]));
        assert_eq!(playback.rate_hz(), 24_000);
    }

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
        let idle = playback.release(t0 + FRAME * 3).expect("silence keeps the stream going");
        assert!(idle.silence && !idle.first);
        // Then a frame of silence per 400 ms, the rhythm of DTX, until speech comes.
        let next_silence = t0 + FRAME * 3 + IDLE_SILENCE_EVERY;
        assert_eq!(playback.poll_timeout(), Some(next_silence));
        assert!(playback.release(next_silence - Duration::from_millis(1)).is_none());
        assert!(playback.release(next_silence).is_some_and(|frame| frame.silence));
        // Speech that arrives meanwhile goes out at once, and every 20 ms after it.
        let reply = playback.start_response();
        assert!(playback.push_pcm(&vec![1000; 960], 24_000));
        let spoken = next_silence + Duration::from_millis(130);
        assert!(playback.release(spoken).is_some_and(|frame| frame.seq == reply && frame.first));
        assert_eq!(playback.poll_timeout(), Some(spoken + FRAME));
    }

    #[test]
    fn nothing_is_released_without_an_audience_and_a_stall_restarts_the_clock() {
        let t0 = Instant::now();
        let mut playback = Playback::default();
        playback.start_response();
        playback.push_pcm(&vec![0; 480 * 5], 24_000);
        assert!(playback.release(t0).is_none());
        assert_eq!(playback.poll_timeout(), None, "nobody listens: nothing is sent, not even silence");
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
    fn an_underrun_inside_a_response_waits_instead_of_inserting_silence() {
        let t0 = Instant::now();
        let mut playback = Playback { audience: true, ..Playback::default() };
        let seq = playback.start_response();
        playback.push_pcm(&vec![900; 480], 24_000);
        assert!(playback.release(t0).is_some_and(|f| f.first));
        if let Some(response) = playback.response(seq) {
            response.speaking = true;
        }
        assert!(playback.release(t0 + FRAME * 3).is_none(), "late audio, but no filler inside the response");
        assert_eq!(playback.poll_timeout(), None);
        playback.push_pcm(&vec![900; 480], 24_000);
        let next = playback.release(t0 + FRAME * 3).expect("released as soon as it arrives");
        assert!(!next.silence);
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
    fn priming_silence_goes_first_and_belongs_to_no_response() {
        let t0 = Instant::now();
        let mut playback = Playback { audience: true, ..Playback::default() };
        let seq = playback.start_response();
        playback.push_pcm(&vec![900; 480 * 2], 24_000);
        playback.prime(3);
        assert_eq!(playback.queued(), 5);
        for k in 0..3 {
            let frame = playback.release(t0 + FRAME * k).expect("due");
            assert!(!frame.first && frame.seq == PRIMING);
            assert!(frame.opus.len() < 40, "silence is a few bytes: {}", frame.opus.len());
        }
        let speech = playback.release(t0 + FRAME * 3).expect("due");
        assert!(speech.first && speech.seq == seq);
        assert_eq!(playback.released_total, 1, "silence is not agent speech");
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
