//! The session's recording: a stereo WAV, the user on the left channel and the agent on the right,
//! both on one timeline, so that a reader hears the conversation as it happened (overlaps,
//! barge-ins and silences included).
//!
//! [`StereoAligner`] (sans-IO) places each lane's audio by the time it arrived or was played,
//! keeps lanes continuous across the small jitter of real delivery, and hands out interleaved
//! samples a fixed delay behind `now`. [`RecordingFile`] streams them to
//! `<recordings dir>/<session>.wav`, writing the header's sizes when the session ends; a node
//! that takes a session over continues the recording the dead node left unfinished. The
//! recording is at the provider's input rate (16 or 24 kHz), which is also what the user's audio
//! is decoded at, so nothing is resampled.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use svc_store::ArtifactRecord;

/// Left channel.
pub const USER: usize = 0;
/// Right channel.
pub const AGENT: usize = 1;
/// Audio is written this far behind `now`, so late chunks still find their place.
const DELAY: Duration = Duration::from_millis(400);
/// A chunk that starts within this much of where the lane left off continues it (network jitter
/// and pacing are not gaps).
const TOLERANCE: Duration = Duration::from_millis(80);

#[derive(Debug, Default)]
struct Lane {
    /// Samples from `StereoAligner::flushed` on.
    buf: VecDeque<i16>,
    /// Where the lane's next chunk goes if it continues the last one.
    next: u64,
}

/// Places two mono lanes on one timeline and interleaves them.
#[derive(Debug)]
pub struct StereoAligner {
    rate_hz: u32,
    origin: Instant,
    lanes: [Lane; 2],
    /// Samples (per channel) handed out so far.
    flushed: u64,
}

impl StereoAligner {
    /// A timeline that starts at `origin`.
    pub fn new(rate_hz: u32, origin: Instant) -> StereoAligner {
        StereoAligner { rate_hz, origin, lanes: [Lane::default(), Lane::default()], flushed: 0 }
    }

    /// The rate of both lanes.
    pub fn rate_hz(&self) -> u32 {
        self.rate_hz
    }

    fn samples_at(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.origin);
        (elapsed.as_micros() * u128::from(self.rate_hz) / 1_000_000) as u64
    }

    /// Adds `pcm` to `lane` (ending at `now`: it just arrived or was just played).
    pub fn push(&mut self, lane: usize, now: Instant, pcm: &[i16]) {
        let Some(state) = self.lanes.get(lane) else { return };
        let tolerance = u64::from(self.rate_hz) * TOLERANCE.as_millis() as u64 / 1000;
        let end = self.samples_at(now);
        let arrived_start = end.saturating_sub(pcm.len() as u64);
        // Continuous within the jitter tolerance; after a pause, at its wall-clock place; a lane
        // that ran ahead (a burst after a stall) keeps appending.
        let start = if arrived_start > state.next + tolerance { arrived_start } else { state.next };
        // Never further ahead of the clock than the tolerance: bounds the buffer.
        let start = start.min(end + tolerance);
        let flushed = self.flushed;
        let lane_state = &mut self.lanes[lane];
        let mut pcm = pcm;
        let mut at = start;
        if at < flushed {
            // Too late for the part already written.
            let skip = (flushed - at).min(pcm.len() as u64) as usize;
            pcm = &pcm[skip..];
            at = flushed;
        }
        let offset = (at - flushed) as usize;
        if lane_state.buf.len() < offset + pcm.len() {
            lane_state.buf.resize(offset + pcm.len(), 0);
        }
        for (slot, sample) in lane_state.buf.range_mut(offset..offset + pcm.len()).zip(pcm) {
            *slot = *sample;
        }
        lane_state.next = at + pcm.len() as u64;
    }

    /// Interleaved samples up to [`DELAY`] before `now`.
    pub fn drain(&mut self, now: Instant) -> Vec<i16> {
        let up_to = self.writable_to(now);
        self.drain_to(up_to)
    }

    /// Samples per channel [`drain`](Self::drain) would hand out at `now`.
    pub fn ready(&self, now: Instant) -> u64 {
        self.writable_to(now).saturating_sub(self.flushed)
    }

    /// Interleaved samples up to [`DELAY`] before `now`, written into `out` (cleared first) as
    /// little-endian PCM16: the file's bytes, with no allocation once `out` has grown.
    pub fn drain_bytes(&mut self, now: Instant, out: &mut Vec<u8>) {
        out.clear();
        let up_to = self.writable_to(now);
        let count = self.pad_to(up_to);
        if count == 0 {
            return;
        }
        // A lane at a time, each sample into its two bytes of the frame, over the queue's two
        // contiguous slices: zipping both lanes' drains sample by sample into pushes was the
        // session's costliest function at 50 sessions (1.1 % of svc's CPU).
        out.resize(count * 4, 0);
        for (lane, offset) in self.lanes.iter_mut().zip([0, 2]) {
            let (front, back) = lane.buf.as_slices();
            let front = &front[..front.len().min(count)];
            let back = &back[..count - front.len()];
            let (head, tail) = out.split_at_mut(front.len() * 4);
            for (samples, bytes) in [(front, head), (back, tail)] {
                for (sample, frame) in samples.iter().zip(bytes.chunks_exact_mut(4)) {
                    frame[offset..offset + 2].copy_from_slice(&sample.to_le_bytes());
                }
            }
            lane.buf.drain(..count);
        }
        self.flushed = up_to;
    }

    fn writable_to(&self, now: Instant) -> u64 {
        let delay = u64::from(self.rate_hz) * DELAY.as_millis() as u64 / 1000;
        self.samples_at(now).saturating_sub(delay)
    }

    /// Everything that is left.
    pub fn drain_all(&mut self) -> Vec<i16> {
        let end = self.lanes.iter().map(|lane| self.flushed + lane.buf.len() as u64).max().unwrap_or(self.flushed);
        self.drain_to(end)
    }

    fn drain_to(&mut self, up_to: u64) -> Vec<i16> {
        let mut out = Vec::with_capacity(up_to.saturating_sub(self.flushed) as usize * 2);
        self.take_to(up_to, |left, right| out.extend_from_slice(&[left, right]));
        out
    }

    /// Hands each (user, agent) sample pair up to `up_to` to `pair`, in order; a lane with
    /// nothing there gives silence.
    fn take_to(&mut self, up_to: u64, mut pair: impl FnMut(i16, i16)) {
        let count = self.pad_to(up_to);
        if count == 0 {
            return;
        }
        let [user, agent] = &mut self.lanes;
        for (left, right) in user.buf.drain(..count).zip(agent.buf.drain(..count)) {
            pair(left, right);
        }
        self.flushed = up_to;
    }

    /// The samples per lane from what was handed out up to `up_to`, each lane padded with
    /// silence to that many (0 when there is nothing to hand out).
    fn pad_to(&mut self, up_to: u64) -> usize {
        if up_to <= self.flushed {
            return 0;
        }
        let count = (up_to - self.flushed) as usize;
        for lane in &mut self.lanes {
            if lane.buf.len() < count {
                lane.buf.resize(count, 0);
            }
        }
        count
    }
}

/// A stereo PCM16 WAV being written.
#[derive(Debug)]
pub struct RecordingFile {
    partial: PathBuf,
    done: PathBuf,
    relative: String,
    /// Written through, a block at a time (no buffer: what a node that dies had handed over
    /// is on disk for the node that takes the session over).
    file: File,
    data_bytes: u64,
    rate_hz: u32,
}

/// Bytes of the canonical 44-byte header.
const HEADER_BYTES: u64 = 44;
/// The longest outage a continued recording fills with silence: a takeover that came later
/// than this (it does not, with LiveKit's dispatch: seconds) gets no more than this.
pub const MAX_TAKEOVER_GAP: Duration = Duration::from_secs(120);

impl RecordingFile {
    /// Creates `<session_id>.wav.part` in `recordings_dir`; the artifact names it
    /// `recordings/<session_id>.wav` (the recordings directory's stored prefix).
    pub fn create(recordings_dir: &Path, session_id: &str, rate_hz: u32) -> std::io::Result<RecordingFile> {
        let (relative, done, partial) = paths(recordings_dir, session_id);
        std::fs::create_dir_all(recordings_dir)?;
        let mut file = File::create(&partial)?;
        file.write_all(&header(rate_hz, 0))?;
        Ok(RecordingFile { partial, done, relative, file, data_bytes: 0, rate_hz })
    }

    /// Continues the recording another node left unfinished when it died (`<session_id>.wav.part`
    /// in a recordings directory the nodes share), for a session this node takes over: the part
    /// keeps its samples (cut to whole sample pairs), the time from its last write to `now` is
    /// filled with silence (at most [`MAX_TAKEOVER_GAP`]), and what this node records follows.
    /// Without a part (a directory not shared, or no recording yet), or with one this recording
    /// cannot continue (another rate, not svc's WAV), it creates a new one as [`Self::create`].
    pub fn continue_or_create(
        recordings_dir: &Path,
        session_id: &str,
        rate_hz: u32,
        now: SystemTime,
    ) -> std::io::Result<RecordingFile> {
        let (relative, done, partial) = paths(recordings_dir, session_id);
        let Ok(mut file) = std::fs::OpenOptions::new().read(true).write(true).open(&partial) else {
            return RecordingFile::create(recordings_dir, session_id, rate_hz);
        };
        let metadata = file.metadata()?;
        let mut head = [0u8; HEADER_BYTES as usize];
        let readable = std::io::Read::read_exact(&mut file, &mut head).is_ok();
        if !readable || head[..36] != header(rate_hz, 0)[..36] {
            tracing::warn!(session.id = %session_id, path = %partial.display(),
                "the unfinished recording of the session cannot be continued; a new one replaces it");
            drop(file);
            return RecordingFile::create(recordings_dir, session_id, rate_hz);
        }
        let data_bytes = (metadata.len().saturating_sub(HEADER_BYTES)) / 4 * 4;
        file.set_len(HEADER_BYTES + data_bytes)?;
        file.seek(SeekFrom::End(0))?;
        let gap = metadata.modified().ok().and_then(|written| now.duration_since(written).ok()).unwrap_or_default();
        let mut recording = RecordingFile { partial, done, relative, file, data_bytes, rate_hz };
        let silent_pairs = gap.min(MAX_TAKEOVER_GAP).as_micros() * u128::from(rate_hz) / 1_000_000;
        let silence = vec![0u8; 4 * 4_096];
        let mut left = u64::try_from(silent_pairs).unwrap_or(0) * 4;
        while left > 0 {
            let chunk = left.min(silence.len() as u64) as usize;
            recording.append_bytes(&silence[..chunk])?;
            left -= chunk as u64;
        }
        tracing::info!(session.id = %session_id, kept_seconds = data_bytes as f64 / f64::from(rate_hz * 4),
            gap_ms = gap.as_millis() as u64, "continuing the recording the previous node left unfinished");
        Ok(recording)
    }

    /// Appends interleaved stereo samples already in the file's byte order
    /// ([`StereoAligner::drain_bytes`]).
    pub fn append_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        // Each block reaches the file at once (the session's writes come in 200 ms blocks, five
        // a second): a node that dies loses what it had not handed out yet, not also up to a
        // buffer's worth of written audio, and a node that takes the session over continues
        // from there.
        self.file.write_all(bytes)?;
        self.data_bytes += bytes.len() as u64;
        Ok(())
    }

    /// Appends interleaved stereo samples.
    pub fn append(&mut self, interleaved: &[i16]) -> std::io::Result<()> {
        let bytes: Vec<u8> = interleaved.iter().flat_map(|sample| sample.to_le_bytes()).collect();
        self.append_bytes(&bytes)
    }

    /// Writes the sizes, moves the file to its final name and describes it; an empty recording is
    /// removed (`None`).
    pub fn finish(self) -> std::io::Result<Option<ArtifactRecord>> {
        if self.data_bytes == 0 {
            drop(self.file);
            std::fs::remove_file(&self.partial)?;
            return Ok(None);
        }
        let mut file = self.file;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header(self.rate_hz, self.data_bytes))?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.partial, &self.done)?;
        Ok(Some(ArtifactRecord {
            kind: "audio".to_owned(),
            path: self.relative,
            content_type: "audio/wav".to_owned(),
            bytes: i64::try_from(self.data_bytes + HEADER_BYTES).unwrap_or(i64::MAX),
        }))
    }

    /// Stops writing and leaves the unfinished file as it is on disk (its sizes not written, the
    /// `.part` not renamed): a node that took the session over continues it.
    pub fn leave_unfinished(self) {
        drop(self.file);
    }

    /// Gives up on the recording (the file is removed).
    pub fn discard(self) {
        drop(self.file);
        if let Err(error) = std::fs::remove_file(&self.partial)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.partial.display(), %error, "could not remove a discarded recording");
        }
    }
}

/// The artifact's stored path (`recordings/<id>.wav`), the finished file and the file being
/// written, of session `session_id` in `recordings_dir`.
fn paths(recordings_dir: &Path, session_id: &str) -> (String, PathBuf, PathBuf) {
    let done = recordings_dir.join(format!("{session_id}.wav"));
    let partial = done.with_extension("wav.part");
    (format!("recordings/{session_id}.wav"), done, partial)
}

fn header(rate_hz: u32, data_bytes: u64) -> [u8; 44] {
    // RIFF sizes are 32-bit; a recording past 4 GiB (19 hours at 24 kHz) keeps the maximum.
    let data = u32::try_from(data_bytes).unwrap_or(u32::MAX - 36);
    let mut header = [0u8; 44];
    header[0..4].copy_from_slice(b"RIFF");
    header[4..8].copy_from_slice(&(36 + data).to_le_bytes());
    header[8..12].copy_from_slice(b"WAVE");
    header[12..16].copy_from_slice(b"fmt ");
    header[16..20].copy_from_slice(&16u32.to_le_bytes());
    header[20..22].copy_from_slice(&1u16.to_le_bytes());
    header[22..24].copy_from_slice(&2u16.to_le_bytes());
    header[24..28].copy_from_slice(&rate_hz.to_le_bytes());
    header[28..32].copy_from_slice(&(rate_hz * 4).to_le_bytes());
    header[32..34].copy_from_slice(&4u16.to_le_bytes());
    header[34..36].copy_from_slice(&16u16.to_le_bytes());
    header[36..40].copy_from_slice(b"data");
    header[40..44].copy_from_slice(&data.to_le_bytes());
    header
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u32 = 16_000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn drained_bytes_are_the_interleaved_samples_in_the_files_byte_order() {
        let t0 = Instant::now();
        let pushes = |aligner: &mut StereoAligner| {
            for k in 1..=30u64 {
                aligner.push(USER, t0 + ms(20 * k), &[i16::try_from(k).unwrap_or(0); 320]);
                if k > 10 {
                    aligner.push(AGENT, t0 + ms(20 * k + 3), &[-300; 480][..320]);
                }
            }
        };
        let (mut samples, mut bytes) = (StereoAligner::new(RATE, t0), StereoAligner::new(RATE, t0));
        pushes(&mut samples);
        pushes(&mut bytes);
        let now = t0 + ms(900);
        assert_eq!(bytes.ready(now), 500 * u64::from(RATE) / 1000, "900 ms less the 400 ms delay");
        let expected: Vec<u8> = samples.drain(now).iter().flat_map(|sample| sample.to_le_bytes()).collect();
        let mut out = vec![7; 3];
        bytes.drain_bytes(now, &mut out);
        assert_eq!(out, expected);
        assert_eq!(bytes.ready(now), 0);
        bytes.drain_bytes(now, &mut out);
        assert!(out.is_empty(), "nothing twice");
        assert_eq!(bytes.drain_all(), samples.drain_all(), "the rest is the same");
    }

    #[test]
    fn drained_bytes_stay_the_interleaved_samples_block_after_block() {
        // Many blocks: the lanes' ring buffers wrap around, so a block spans both of a queue's
        // slices; lanes of different lengths and gaps on both sides.
        let t0 = Instant::now();
        let (mut samples, mut bytes) = (StereoAligner::new(RATE, t0), StereoAligner::new(RATE, t0));
        let mut out = Vec::new();
        for k in 1..=400u64 {
            let now = t0 + ms(20 * k);
            let user: Vec<i16> = (0..320).map(|i| i16::try_from((k * 7 + i) % 3_000).unwrap_or(0)).collect();
            let agent: Vec<i16> = (0..480).map(|i| -i16::try_from((k * 11 + i) % 2_000).unwrap_or(0)).collect();
            for aligner in [&mut samples, &mut bytes] {
                if k % 50 < 40 {
                    aligner.push(USER, now, &user);
                }
                if k % 30 >= 10 {
                    aligner.push(AGENT, now + ms(3), &agent[..320 + usize::try_from(k % 3).unwrap_or(0) * 80]);
                }
            }
            if k % 10 == 0 {
                let expected: Vec<u8> = samples.drain(now).iter().flat_map(|sample| sample.to_le_bytes()).collect();
                bytes.drain_bytes(now, &mut out);
                assert_eq!(out, expected, "block ending at {} ms", 20 * k);
            }
        }
        assert_eq!(bytes.drain_all(), samples.drain_all());
    }

    #[test]
    fn lanes_land_on_one_timeline_with_silence_where_nobody_spoke() {
        let t0 = Instant::now();
        let mut aligner = StereoAligner::new(RATE, t0);
        // The user speaks 0–100 ms in 20 ms chunks with jitter; the agent answers at 500 ms.
        for k in 1..=5u64 {
            let jitter = if k % 2 == 0 { ms(7) } else { ms(0) };
            aligner.push(USER, t0 + ms(20 * k) + jitter, &[100; 320]);
        }
        aligner.push(AGENT, t0 + ms(520), &[-7; 320]);
        let out = aligner.drain_all();
        let left: Vec<i16> = out.iter().step_by(2).copied().collect();
        let right: Vec<i16> = out.iter().skip(1).step_by(2).copied().collect();
        assert_eq!(left.len(), right.len());
        assert!(left[..1600].iter().all(|s| *s == 100), "jitter does not open gaps");
        assert!(left[1600..].iter().all(|s| *s == 0));
        assert!(right[..8000].iter().all(|s| *s == 0), "the agent was silent until 500 ms");
        assert!(right[8000..8320].iter().all(|s| *s == -7));
    }

    #[test]
    fn drain_stays_behind_now_and_late_audio_is_cut_not_misplaced() {
        let t0 = Instant::now();
        let mut aligner = StereoAligner::new(RATE, t0);
        aligner.push(USER, t0 + ms(100), &[1; 1600]);
        assert!(aligner.drain(t0 + ms(300)).is_empty(), "within the delay");
        let out = aligner.drain(t0 + ms(1000));
        assert_eq!(out.len(), 2 * 9600, "600 ms, both channels");
        // A chunk claiming to end at 500 ms arrives after 600 ms were written: only its late part
        // that is still unwritten lands, at the lane's position.
        aligner.push(USER, t0 + ms(1100), &[2; 320]);
        let rest = aligner.drain_all();
        assert!(rest.chunks(2).any(|pair| pair[0] == 2));
    }

    #[test]
    fn a_lane_that_runs_ahead_is_bounded() {
        let t0 = Instant::now();
        let mut aligner = StereoAligner::new(RATE, t0);
        for _ in 0..100 {
            aligner.push(AGENT, t0, &[5; 320]);
        }
        // A burst at one instant is appended, not stacked without end.
        assert!(aligner.lanes[AGENT].buf.len() <= 320 * 100);
        assert!(aligner.lanes[AGENT].next <= 16_000 * 80 / 1000 + 320);
    }

    #[test]
    fn a_recording_file_is_a_valid_stereo_wav() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = RecordingFile::create(&dir.path().join("recordings"), "s1", RATE).expect("create");
        file.append(&[1, -1, 2, -2]).expect("append");
        let artifact = file.finish().expect("finish").expect("not empty");
        assert_eq!(artifact.path, "recordings/s1.wav");
        assert_eq!(artifact.bytes, 52);
        let wav = svc_audio::wav::read_wav_file(dir.path().join(&artifact.path)).expect("a WAV");
        assert_eq!((wav.sample_rate, wav.channels), (RATE, 2));
        assert_eq!(wav.samples, vec![1, -1, 2, -2]);
        assert!(!dir.path().join("recordings/s1.wav.part").exists());
        let empty = RecordingFile::create(&dir.path().join("recordings"), "s2", RATE).expect("create");
        assert!(empty.finish().expect("finish").is_none());
        assert!(!dir.path().join("recordings/s2.wav.part").exists());
    }

    #[test]
    fn a_takeover_continues_the_recording_the_dead_node_left_unfinished() {
        let dir = tempfile::tempdir().expect("tempdir");
        let recordings = dir.path().join("recordings");
        // The first node wrote three sample pairs and half of a fourth, then died (no finish).
        let mut first = RecordingFile::create(&recordings, "s1", RATE).expect("create");
        first.append(&[1, -1, 2, -2, 3, -3]).expect("append");
        first.append_bytes(&[9, 9]).expect("append");
        drop(first);
        let written = std::fs::metadata(recordings.join("s1.wav.part")).and_then(|m| m.modified()).expect("mtime");
        // The next node takes over 50 ms after the last write.
        let now = written + Duration::from_millis(50);
        let mut second = RecordingFile::continue_or_create(&recordings, "s1", RATE, now).expect("continue");
        second.append(&[4, -4]).expect("append");
        let artifact = second.finish().expect("finish").expect("not empty");
        let wav = svc_audio::wav::read_wav_file(dir.path().join(&artifact.path)).expect("a WAV");
        let gap = (RATE as usize * 50 / 1000) * 2;
        assert_eq!(wav.samples.len(), 6 + gap + 2, "the part, 50 ms of silence, the new samples");
        assert_eq!(&wav.samples[..6], [1, -1, 2, -2, 3, -3]);
        assert!(wav.samples[6..6 + gap].iter().all(|&s| s == 0));
        assert_eq!(&wav.samples[6 + gap..], [4, -4]);
        assert_eq!(artifact.bytes, 44 + 2 * wav.samples.len() as i64);

        // No part (or one at another rate): a new recording.
        let fresh = RecordingFile::continue_or_create(&recordings, "s2", RATE, now).expect("create");
        assert_eq!(fresh.data_bytes, 0);
        let mut other = RecordingFile::create(&recordings, "s3", 24_000).expect("create");
        other.append(&[1, 1]).expect("append");
        drop(other);
        let replaced = RecordingFile::continue_or_create(&recordings, "s3", RATE, now).expect("create");
        assert_eq!(replaced.data_bytes, 0);
        // A takeover long after the last write fills no more than the bound.
        let mut late = RecordingFile::create(&recordings, "s4", RATE).expect("create");
        late.append(&[1, 1]).expect("append");
        drop(late);
        let hours = now + Duration::from_secs(3 * 3600);
        let bounded = RecordingFile::continue_or_create(&recordings, "s4", RATE, hours).expect("continue");
        assert_eq!(bounded.data_bytes, 4 + MAX_TAKEOVER_GAP.as_secs() * u64::from(RATE) * 4);
    }
}
