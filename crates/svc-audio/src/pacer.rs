//! Pacing audio out to the room: one 20 ms frame every 20 ms, with RTP timing.
//!
//! Providers deliver speech in bursts, usually faster than real time; a WebRTC receiver wants one
//! packet every 20 ms whose RTP timestamp says when it was sampled. [`AudioOutQueue`] sits
//! between: the runtime pushes PCM as it arrives, and its IO shell polls the queue at the
//! deadlines the queue names and sends each [`PacedFrame`] it gets.
//!
//! The queue is pure: the caller passes `now` and owns the timer. It does not encode either, so
//! it can be tested in virtual time without libopus, and the caller decides on which thread the
//! ~0.1 ms of Opus encoding per frame runs (see [`crate::OpusEncoder`]).
//!
//! Timing rules:
//!
//! - A talkspurt starts when a full frame is buffered and the queue is polled: its frame `k` is
//!   due at `start + k × 20 ms`, the first frame carries the RTP marker bit.
//! - RTP timestamps advance by 960 per frame and, between talkspurts, by the wall time that passed
//!   (in whole frames), so the receiver's jitter buffer sees the real pause.
//! - A caller that wakes late gets the overdue frames back to back, but never more than
//!   `max_burst_frames`: beyond that the schedule is re-anchored to now, the RTP timestamp jumps
//!   by the skipped time, and the marker bit is set, exactly as if a pause had happened. No audio
//!   is skipped; it is played later.
//! - A frame that is only partly buffered when due waits up to `underrun_grace` for the rest, then
//!   goes out padded with silence (the producer fell behind, or the utterance ended). A queue that
//!   is empty when a frame is due ends the talkspurt.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::{FRAME_DURATION, FRAME_SAMPLES, QueueFull, samples_in};

/// Nanoseconds per frame, for whole-frame arithmetic on long durations.
const FRAME_NANOS: u128 = FRAME_DURATION.as_nanos();

/// Buffer capacity kept across talkspurts (1 s of audio, 94 KiB). A long answer can grow the
/// buffer to megabytes; giving that back when the queue goes idle keeps an idle session small.
const RETAINED_CAPACITY_SAMPLES: usize = 48_000;

/// Settings for [`AudioOutQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutQueueConfig {
    /// Most audio the queue holds; a push beyond it is refused whole with [`QueueFull`].
    pub max_buffered: Duration,
    /// Most frames released back to back to a caller that woke late (at least 1).
    pub max_burst_frames: u32,
    /// How long a partly buffered frame waits for the rest of its samples before it goes out
    /// padded with silence (capped at one second).
    pub underrun_grace: Duration,
    /// RTP timestamp of the first frame. RFC 3550 asks for a random start; the queue is pure, so
    /// the caller draws it.
    pub initial_rtp_timestamp: u32,
}

impl Default for OutQueueConfig {
    /// 120 s of buffer (≈ 11 MiB when full: providers send a long answer faster than real time,
    /// and refusing it would cut the answer off), bursts of at most 3 frames (60 ms, which any
    /// jitter buffer absorbs), 10 ms of underrun grace, RTP timestamps from 0.
    fn default() -> Self {
        Self {
            max_buffered: Duration::from_secs(120),
            max_burst_frames: 3,
            underrun_grace: Duration::from_millis(10),
            initial_rtp_timestamp: 0,
        }
    }
}

/// One 20 ms frame that is due to be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacedFrame {
    /// The frame's audio (zero-padded at the end when the queue ran short).
    pub pcm: [i16; FRAME_SAMPLES],
    /// RTP timestamp (48 kHz clock) of the frame's first sample.
    pub rtp_timestamp: u32,
    /// RTP marker bit: the first frame of a talkspurt (after a pause, a `clear`, or a re-anchor).
    pub marker: bool,
    /// When the frame was due; `now - due` is how late the caller is sending it.
    pub due: Instant,
    /// Samples of silence padded onto the end of `pcm` (0 unless the queue ran short).
    pub padded_samples: usize,
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// No talkspurt in progress.
    Idle {
        /// Where the schedule of the last talkspurt would have put its next frame: the RTP clock
        /// continues from there. `None` before the first frame.
        resume: Option<Instant>,
        /// When a poll first saw a partial frame (and nothing more) waiting; it is sent padded
        /// once it has waited `underrun_grace`.
        partial_since: Option<Instant>,
    },
    /// A talkspurt in progress; the next frame is due at `next_due`.
    Playing {
        next_due: Instant,
        /// The next frame starts a talkspurt (the first one, or one after a re-anchor).
        marker: bool,
    },
}

/// Sans-IO pacer for publishing 48 kHz mono audio as 20 ms frames.
///
/// Use: [`push_pcm`](Self::push_pcm) whenever audio arrives, then (and whenever the timer set to
/// [`next_deadline`](Self::next_deadline) fires) call [`poll_frame`](Self::poll_frame) with the
/// current time until it returns `None`, encoding and sending each frame it yields. See the
/// module documentation for the timing rules.
#[derive(Debug)]
pub struct AudioOutQueue {
    buffer: VecDeque<i16>,
    max_buffered_samples: usize,
    max_burst_frames: u32,
    underrun_grace: Duration,
    state: State,
    /// RTP timestamp of the next frame if it continues the schedule.
    next_rtp: u32,
    /// The `now` of the latest poll: the earliest deadline the queue can name when something is
    /// due immediately.
    last_now: Option<Instant>,
    played_samples: u64,
    underruns: u64,
}

impl Default for AudioOutQueue {
    fn default() -> Self {
        Self::new(OutQueueConfig::default())
    }
}

impl AudioOutQueue {
    /// An empty, idle queue.
    #[must_use]
    pub fn new(config: OutQueueConfig) -> Self {
        Self {
            buffer: VecDeque::new(),
            max_buffered_samples: samples_in(config.max_buffered),
            max_burst_frames: config.max_burst_frames.max(1),
            underrun_grace: config.underrun_grace.min(Duration::from_secs(1)),
            state: State::Idle { resume: None, partial_since: None },
            next_rtp: config.initial_rtp_timestamp,
            last_now: None,
            played_samples: 0,
            underruns: 0,
        }
    }

    /// Queues `pcm` (48 kHz mono) behind what is buffered. Call [`poll_frame`](Self::poll_frame)
    /// afterwards: an idle queue starts playing at that poll.
    ///
    /// # Errors
    ///
    /// [`QueueFull`] when the chunk would take the queue past `max_buffered`; none of it is
    /// queued.
    pub fn push_pcm(&mut self, pcm: &[i16]) -> Result<(), QueueFull> {
        if pcm.len() > self.max_buffered_samples.saturating_sub(self.buffer.len()) {
            return Err(QueueFull {
                rejected_samples: pcm.len(),
                buffered_samples: self.buffer.len(),
                capacity_samples: self.max_buffered_samples,
            });
        }
        self.buffer.extend(pcm);
        Ok(())
    }

    /// The next frame, if one is due at `now`; call again until `None` (a late caller gets up to
    /// `max_burst_frames` at once). `now` must not go backwards.
    pub fn poll_frame(&mut self, now: Instant) -> Option<PacedFrame> {
        self.last_now = Some(now);
        match self.state {
            State::Idle { resume, partial_since } => {
                if self.buffer.is_empty() {
                    self.state = State::Idle { resume, partial_since: None };
                    return None;
                }
                if self.buffer.len() < FRAME_SAMPLES {
                    let since = partial_since.unwrap_or(now);
                    self.state = State::Idle { resume, partial_since: Some(since) };
                    if now < since + self.underrun_grace {
                        return None;
                    }
                }
                // A new talkspurt, due now. The RTP clock ran on through the pause.
                if let Some(resume) = resume {
                    self.next_rtp =
                        self.next_rtp.wrapping_add(rtp_advance(whole_frames(now.saturating_duration_since(resume))));
                }
                self.state = State::Playing { next_due: now, marker: true };
                Some(self.release(now))
            }
            State::Playing { next_due, marker } => {
                if now < next_due {
                    return None;
                }
                if self.buffer.is_empty() {
                    self.end_talkspurt(next_due);
                    return None;
                }
                if self.buffer.len() < FRAME_SAMPLES && now < next_due + self.underrun_grace {
                    return None;
                }
                // Frames overdue besides this one; past the burst cap, skip the schedule (and the
                // RTP clock) ahead so that only `max_burst_frames` are due now.
                let behind = whole_frames_floor(now - next_due);
                let (due, marker) = if behind >= u64::from(self.max_burst_frames) {
                    let skip = behind - u64::from(self.max_burst_frames - 1);
                    self.next_rtp = self.next_rtp.wrapping_add(rtp_advance(skip));
                    (frames_after(next_due, skip).unwrap_or(now), true)
                } else {
                    (next_due, marker)
                };
                self.state = State::Playing { next_due: due, marker };
                Some(self.release(due))
            }
        }
    }

    /// When to call [`poll_frame`](Self::poll_frame) next; `None` when the queue is idle and
    /// empty (wait for a push). Meaningful after `poll_frame` returned `None`; a deadline in the
    /// past means "poll now".
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.state {
            State::Playing { next_due, .. } if self.partial_frame() => Some(next_due + self.underrun_grace),
            State::Playing { next_due, .. } => Some(next_due),
            State::Idle { .. } if self.buffer.is_empty() => None,
            State::Idle { partial_since: Some(since), .. } if self.partial_frame() => Some(since + self.underrun_grace),
            State::Idle { .. } => self.last_now,
        }
    }

    /// Discards all buffered audio (barge-in) and returns how many samples were discarded. A
    /// talkspurt in progress ends; the next audio starts a new one.
    pub fn clear(&mut self) -> usize {
        let discarded = self.buffer.len();
        self.buffer.clear();
        match self.state {
            State::Playing { next_due, .. } => self.end_talkspurt(next_due),
            State::Idle { resume, .. } => {
                self.state = State::Idle { resume, partial_since: None };
                self.buffer.shrink_to(RETAINED_CAPACITY_SAMPLES);
            }
        }
        discarded
    }

    /// Samples of pushed audio released in frames so far (padding not counted): how far playback
    /// has been sent, e.g. for truncating a provider's transcript at a barge-in. The listener
    /// hears it later by the network and jitter-buffer delay.
    #[must_use]
    pub fn played_samples(&self) -> u64 {
        self.played_samples
    }

    /// Samples buffered and not yet released.
    #[must_use]
    pub fn buffered_samples(&self) -> usize {
        self.buffer.len()
    }

    /// Whether no talkspurt is in progress and nothing is buffered.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle { .. }) && self.buffer.is_empty()
    }

    /// Frames released with padding because the buffer ran short.
    #[must_use]
    pub fn underruns(&self) -> u64 {
        self.underruns
    }

    fn partial_frame(&self) -> bool {
        !self.buffer.is_empty() && self.buffer.len() < FRAME_SAMPLES
    }

    /// Takes the frame due at `due` out of the buffer and moves the schedule on by one frame.
    fn release(&mut self, due: Instant) -> PacedFrame {
        let mut pcm = [0; FRAME_SAMPLES];
        let take = self.buffer.len().min(FRAME_SAMPLES);
        for (slot, sample) in pcm.iter_mut().zip(self.buffer.drain(..take)) {
            *slot = sample;
        }
        let marker = matches!(self.state, State::Playing { marker: true, .. });
        let frame = PacedFrame { pcm, rtp_timestamp: self.next_rtp, marker, due, padded_samples: FRAME_SAMPLES - take };
        if take < FRAME_SAMPLES {
            self.underruns += 1;
        }
        self.played_samples += take as u64;
        self.next_rtp = self.next_rtp.wrapping_add(FRAME_SAMPLES as u32);
        self.state = State::Playing { next_due: due + FRAME_DURATION, marker: false };
        frame
    }

    fn end_talkspurt(&mut self, next_due: Instant) {
        self.state = State::Idle { resume: Some(next_due), partial_since: None };
        self.buffer.shrink_to(RETAINED_CAPACITY_SAMPLES);
    }
}

/// Whole frames in `elapsed`, rounded to the nearest.
fn whole_frames(elapsed: Duration) -> u64 {
    u64::try_from((elapsed.as_nanos() + FRAME_NANOS / 2) / FRAME_NANOS).unwrap_or(u64::MAX)
}

/// Whole frames in `elapsed`, rounded down.
fn whole_frames_floor(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_nanos() / FRAME_NANOS).unwrap_or(u64::MAX)
}

/// RTP ticks for `frames` frames, modulo 2³² like the RTP timestamp itself.
fn rtp_advance(frames: u64) -> u32 {
    // Only the low 32 bits survive the multiplication modulo 2^32, so truncating first is exact.
    (frames as u32).wrapping_mul(FRAME_SAMPLES as u32)
}

/// `start + frames × 20 ms`, or `None` if that is beyond what `Instant` can hold.
fn frames_after(start: Instant, frames: u64) -> Option<Instant> {
    let nanos = u64::try_from(u128::from(frames) * FRAME_NANOS).ok()?;
    start.checked_add(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests;
