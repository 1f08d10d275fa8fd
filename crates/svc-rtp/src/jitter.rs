//! The receive-side jitter buffer: decoded 8 kHz audio in, one 20 ms frame out per 20 ms of the
//! caller's time, in timestamp order, with concealment for what did not come in time.
//!
//! Sans-IO: [`JitterBuffer::push`] and [`JitterBuffer::pop`] take `now`; the buffer keeps its own
//! playout schedule ([`JitterBuffer::next_due`]) so a caller only has to wake up when told.
//!
//! How the delay adapts:
//!
//! - The target is `20 ms + 3 × J`, clamped to 40–200 ms, where J is RFC 3550's interarrival
//!   jitter (A.8) in milliseconds. Playout starts one target after the first packet, and a new
//!   talkspurt after a gap is re-anchored one target behind its first packet.
//! - Up: when the frame due has not arrived and nothing later has either (an underrun), the
//!   buffer conceals *without* moving the playout point, so the delay grows by the 20 ms the
//!   network needed. When something later is there, the frame is taken as lost: conceal and move on.
//! - Down: when, over two seconds, even the smallest amount of buffered audio stayed 20 ms above
//!   the target, one frame is dropped; more than 100 ms above the maximum drops frames at once.
//!
//! Audio is kept per packet keyed by its extended timestamp, and frames are cut by timestamp, so a
//! sender whose packets are 10, 20 or 30 ms long plays the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Samples per second of the telephone clock.
pub const CLOCK_RATE: u32 = 8_000;
/// Samples in one 20 ms frame at [`CLOCK_RATE`].
pub const FRAME_SAMPLES: usize = 160;
/// One frame's duration.
pub const FRAME_DURATION: Duration = Duration::from_millis(20);

const FRAME_TS: u64 = FRAME_SAMPLES as u64;
/// Samples per millisecond.
const MS: u64 = CLOCK_RATE as u64 / 1_000;
/// Pops over which the smallest buffered level decides whether to shrink the delay.
const SHRINK_WINDOW_POPS: u32 = 100;
/// Packets kept at most, whatever their length.
const MAX_PACKETS: usize = 128;
/// The longest packet accepted (240 ms), longer than any telephone sender uses.
const MAX_PACKET_SAMPLES: usize = 1_920;
/// Extended sequence numbers remembered for duplicate detection.
const SEEN_WINDOW: u64 = 1_024;

/// The jitter buffer's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JitterConfig {
    /// The smallest target delay.
    pub min_delay: Duration,
    /// The largest target delay.
    pub max_delay: Duration,
    /// How far ahead of the playout point a packet may be before it counts as a timestamp jump.
    pub max_lead: Duration,
    /// After this long with nothing to play the buffer goes idle: it stops producing frames until
    /// the next packet starts a new stream.
    pub idle_after: Duration,
}

impl Default for JitterConfig {
    fn default() -> Self {
        JitterConfig {
            min_delay: Duration::from_millis(40),
            max_delay: Duration::from_millis(200),
            max_lead: Duration::from_secs(1),
            idle_after: Duration::from_secs(1),
        }
    }
}

/// What a frame from [`JitterBuffer::pop`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Received audio (possibly with a gap filled by silence inside the frame).
    Audio,
    /// A repetition of the last audio, fading out: the first two frames of a loss.
    Concealed,
    /// Silence: a longer loss, a pause between talkspurts, or the time before a re-anchored start.
    Silence,
}

/// One 20 ms frame at 8 kHz.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitterFrame {
    /// [`FRAME_SAMPLES`] samples.
    pub samples: Vec<i16>,
    /// Where they came from.
    pub kind: FrameKind,
}

/// What [`JitterBuffer::push`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// Kept for playout.
    Buffered,
    /// Kept, and it (re)started playout: the first packet, a talkspurt after a gap, or a resync.
    Started,
    /// Its time had already been played or concealed.
    Late,
    /// A packet with this sequence number or timestamp is already here or was played.
    Duplicate,
    /// Thrown away: too long, the buffer is full, or a lone timestamp jump.
    Discarded,
}

/// Counters for the integrator's timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JitterStats {
    /// Packets kept for playout.
    pub buffered: u64,
    /// Packets that came after their time.
    pub late: u64,
    /// Repeated packets.
    pub duplicate: u64,
    /// Packets thrown away (too long, buffer full, lone jumps).
    pub discarded: u64,
    /// Frames played from received audio.
    pub played_frames: u64,
    /// Frames concealed by repetition.
    pub concealed_frames: u64,
    /// Frames of silence played while the stream was live.
    pub silent_frames: u64,
    /// Frames skipped to bring the delay down.
    pub dropped_frames: u64,
    /// Restarts of the playout timeline (timestamp jumps, new talkspurts after a gap, idle ends).
    pub resyncs: u64,
    /// RFC 3550 interarrival jitter, in milliseconds.
    pub jitter_ms: f64,
    /// The current target delay, in milliseconds.
    pub target_delay_ms: u64,
    /// Audio buffered ahead of the playout point at the last frame, in milliseconds.
    pub buffered_ms: u64,
}

/// The jitter buffer. See the module documentation.
#[derive(Debug, Clone)]
pub struct JitterBuffer {
    config: JitterConfig,
    /// Decoded audio by extended timestamp.
    packets: BTreeMap<u64, Vec<i16>>,
    /// Extended sequence numbers seen recently.
    seen: BTreeSet<u64>,
    /// The timestamp of the next sample to play; `None` while idle.
    playout: Option<u64>,
    /// Whether the current timeline has produced a frame yet (before that, an earlier packet may
    /// still move the start back).
    playing: bool,
    /// When the next frame is due; `None` while idle.
    next_due: Option<Instant>,
    /// The end (exclusive) of the newest audio received.
    newest_end: u64,
    /// RFC 3550 A.8 jitter estimate, in timestamp units.
    jitter: f64,
    /// Arrival time origin, and the previous packet's transit time (arrival − timestamp).
    epoch: Option<Instant>,
    last_transit: Option<f64>,
    /// The last frame played, for concealment.
    last_audio: Vec<i16>,
    /// Consecutive frames with nothing received.
    missing_run: u32,
    /// Consecutive packets that jumped.
    jump_streak: u32,
    shrink_pops: u32,
    shrink_min_level: u64,
    stats: JitterStats,
}

impl JitterBuffer {
    /// An empty, idle buffer.
    #[must_use]
    pub fn new(config: JitterConfig) -> JitterBuffer {
        JitterBuffer {
            config,
            packets: BTreeMap::new(),
            seen: BTreeSet::new(),
            playout: None,
            playing: false,
            next_due: None,
            newest_end: 0,
            jitter: 0.0,
            epoch: None,
            last_transit: None,
            last_audio: vec![0; FRAME_SAMPLES],
            missing_run: 0,
            jump_streak: 0,
            shrink_pops: 0,
            shrink_min_level: u64::MAX,
            stats: JitterStats::default(),
        }
    }

    /// Forgets the stream (for a new source), keeping the counters.
    pub fn reset(&mut self) {
        let stats = self.stats;
        *self = JitterBuffer::new(self.config);
        self.stats = stats;
    }

    /// The target delay now, from the measured jitter.
    #[must_use]
    pub fn target_delay(&self) -> Duration {
        let jitter_ms = self.jitter / MS as f64;
        let target = Duration::from_secs_f64((20.0 + 3.0 * jitter_ms) / 1_000.0);
        target.clamp(self.config.min_delay, self.config.max_delay)
    }

    fn target_samples(&self) -> u64 {
        samples(self.target_delay())
    }

    /// Counters and the current delay.
    #[must_use]
    pub fn stats(&self) -> JitterStats {
        JitterStats {
            jitter_ms: self.jitter / MS as f64,
            target_delay_ms: self.target_delay().as_millis() as u64,
            ..self.stats
        }
    }

    /// RFC 3550 interarrival jitter in timestamp units, for RTCP reports.
    #[must_use]
    pub fn jitter_samples(&self) -> u32 {
        self.jitter as u32
    }

    /// When [`JitterBuffer::pop`] has the next frame; `None` while idle.
    #[must_use]
    pub fn next_due(&self) -> Option<Instant> {
        self.next_due
    }

    /// Takes one packet's decoded audio: `sequence` and `timestamp` extended (see
    /// [`crate::packet::Unwrapper`]).
    pub fn push(&mut self, now: Instant, sequence: u64, timestamp: u64, audio: Vec<i16>) -> PushOutcome {
        if audio.is_empty() || audio.len() > MAX_PACKET_SAMPLES {
            self.stats.discarded += 1;
            return PushOutcome::Discarded;
        }
        if !self.seen.insert(sequence) || self.packets.contains_key(&timestamp) {
            self.stats.duplicate += 1;
            return PushOutcome::Duplicate;
        }
        while self.seen.len() as u64 > SEEN_WINDOW {
            self.seen.pop_first();
        }
        self.update_jitter(now, timestamp);
        let end = timestamp + audio.len() as u64;
        let Some(playout) = self.playout else {
            self.start(now, timestamp, timestamp, audio);
            return PushOutcome::Started;
        };
        let max_lead = samples(self.config.max_lead);
        let jumped = timestamp > playout + max_lead || end + max_lead < playout;
        if jumped {
            self.jump_streak += 1;
            if self.jump_streak < 2 {
                self.stats.discarded += 1;
                return PushOutcome::Discarded;
            }
            // Two in a row: the sender's timeline moved (a restart, or a clock jump), not a stray.
            self.stats.resyncs += 1;
            self.restart(now, timestamp, audio);
            return PushOutcome::Started;
        }
        self.jump_streak = 0;
        if !self.playing && timestamp < playout {
            // Reordered before playout began: start earlier rather than call it late.
            self.playout = Some(timestamp);
        } else if end <= playout {
            self.stats.late += 1;
            return PushOutcome::Late;
        }
        if self.packets.len() >= MAX_PACKETS {
            self.stats.discarded += 1;
            return PushOutcome::Discarded;
        }
        let underrun = self.playing && self.missing_run > 0 && self.newest_end <= playout;
        let mut outcome = PushOutcome::Buffered;
        if underrun && timestamp > playout + self.target_samples() + FRAME_TS {
            // A new talkspurt after a pause (or after a loss longer than the buffer): play it one
            // target delay from now rather than at once, which would leave no room for jitter.
            self.playout = Some(timestamp - self.target_samples());
            self.stats.resyncs += 1;
            outcome = PushOutcome::Started;
        }
        self.newest_end = self.newest_end.max(end);
        self.packets.insert(timestamp, audio);
        self.stats.buffered += 1;
        outcome
    }

    fn update_jitter(&mut self, now: Instant, timestamp: u64) {
        let epoch = *self.epoch.get_or_insert(now);
        let arrival = now.saturating_duration_since(epoch).as_secs_f64() * f64::from(CLOCK_RATE);
        let transit = arrival - timestamp as f64;
        if let Some(last) = self.last_transit {
            let d = (transit - last).abs();
            self.jitter += (d - self.jitter) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    fn start(&mut self, now: Instant, playout: u64, timestamp: u64, audio: Vec<i16>) {
        self.playout = Some(playout);
        self.playing = false;
        self.next_due = Some(now + self.target_delay());
        self.missing_run = 0;
        self.newest_end = timestamp + audio.len() as u64;
        self.packets.insert(timestamp, audio);
        self.stats.buffered += 1;
    }

    fn restart(&mut self, now: Instant, timestamp: u64, audio: Vec<i16>) {
        self.packets.clear();
        self.jump_streak = 0;
        // The transit time changes with the timeline; measuring across it would be a false spike.
        self.last_transit = None;
        self.epoch = None;
        self.update_jitter(now, timestamp);
        self.start(now, timestamp, timestamp, audio);
    }

    /// The next frame, if one is due at `now`. Call until `None` after waking at
    /// [`JitterBuffer::next_due`].
    pub fn pop(&mut self, now: Instant) -> Option<JitterFrame> {
        let due = self.next_due?;
        if now < due {
            return None;
        }
        // A caller that stalled for more than a second gets the schedule moved, not a burst.
        let next = if now > due + Duration::from_secs(1) { now + FRAME_DURATION } else { due + FRAME_DURATION };
        self.next_due = Some(next);
        let playout = self.playout?;
        self.playing = true;
        let (audio, filled) = self.cut(playout);
        let frame = if filled > 0 {
            self.missing_run = 0;
            self.advance(playout + FRAME_TS);
            self.stats.played_frames += 1;
            self.last_audio.clone_from(&audio);
            self.adapt_down();
            JitterFrame { samples: audio, kind: FrameKind::Audio }
        } else {
            self.missing_run += 1;
            if self.newest_end > playout + FRAME_TS {
                // Later audio is here: this frame is lost (or later than the buffer), move on.
                self.advance(playout + FRAME_TS);
            } else if u64::from(self.missing_run) * FRAME_TS >= samples(self.config.idle_after) {
                self.go_idle();
            }
            self.conceal()
        };
        self.stats.buffered_ms = self.level() / MS;
        Some(frame)
    }

    /// The audio of `[from, from + FRAME_SAMPLES)`, and how many of its samples were received.
    fn cut(&self, from: u64) -> (Vec<i16>, usize) {
        let mut out = vec![0i16; FRAME_SAMPLES];
        let mut filled = 0;
        let until = from + FRAME_TS;
        let earliest = from.saturating_sub(MAX_PACKET_SAMPLES as u64);
        for (&start, audio) in self.packets.range(earliest..until) {
            let end = start + audio.len() as u64;
            if end <= from {
                continue;
            }
            let (lo, hi) = (start.max(from), end.min(until));
            for ts in lo..hi {
                if let (Some(slot), Some(&sample)) =
                    (out.get_mut((ts - from) as usize), audio.get((ts - start) as usize))
                {
                    *slot = sample;
                    filled += 1;
                }
            }
        }
        (out, filled)
    }

    /// Moves the playout point to `to`, forgetting audio that ends before it.
    fn advance(&mut self, to: u64) {
        self.playout = Some(to);
        while let Some(entry) = self.packets.first_entry() {
            if *entry.key() + entry.get().len() as u64 > to {
                break;
            }
            entry.remove();
        }
    }

    /// Audio buffered ahead of the playout point, in samples.
    fn level(&self) -> u64 {
        self.playout.map_or(0, |playout| self.newest_end.saturating_sub(playout))
    }

    fn adapt_down(&mut self) {
        let level = self.level();
        let Some(playout) = self.playout else { return };
        let target = self.target_samples();
        if level > samples(self.config.max_delay) + 100 * MS {
            // Far too much (a burst after a stall): back to the target at once.
            let skip = (level - target) / FRAME_TS * FRAME_TS;
            self.stats.dropped_frames += skip / FRAME_TS;
            self.advance(playout + skip);
            self.reset_shrink_window();
            return;
        }
        self.shrink_min_level = self.shrink_min_level.min(level);
        self.shrink_pops += 1;
        if self.shrink_pops >= SHRINK_WINDOW_POPS {
            if self.shrink_min_level > target + FRAME_TS {
                self.stats.dropped_frames += 1;
                self.advance(playout + FRAME_TS);
            }
            self.reset_shrink_window();
        }
    }

    fn reset_shrink_window(&mut self) {
        self.shrink_pops = 0;
        self.shrink_min_level = u64::MAX;
    }

    fn go_idle(&mut self) {
        self.playout = None;
        self.playing = false;
        self.next_due = None;
        self.packets.clear();
        self.last_transit = None;
        self.reset_shrink_window();
    }

    /// The frame for a time nothing was received for: the last audio fading out over two frames,
    /// then silence.
    fn conceal(&mut self) -> JitterFrame {
        let run = self.missing_run;
        if run > 2 {
            self.stats.silent_frames += 1;
            return JitterFrame { samples: vec![0; FRAME_SAMPLES], kind: FrameKind::Silence };
        }
        self.stats.concealed_frames += 1;
        let n = FRAME_SAMPLES as f32;
        let samples = self
            .last_audio
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                // Gain falls linearly from 1 to 0 across the two frames.
                let position = (run - 1) as f32 * n + i as f32;
                (f32::from(s) * (1.0 - position / (2.0 * n))) as i16
            })
            .collect();
        JitterFrame { samples, kind: FrameKind::Concealed }
    }
}

fn samples(duration: Duration) -> u64 {
    (duration.as_micros() as u64 * u64::from(CLOCK_RATE)) / 1_000_000
}

#[cfg(test)]
mod tests;
