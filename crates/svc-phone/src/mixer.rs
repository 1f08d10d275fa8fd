//! The room's side of the bridge, sans-IO: every subscribed remote audio track (in practice the
//! agent's voice) decoded to 48 kHz PCM, buffered per track and mixed into one 20 ms frame per
//! tick for the phone.
//!
//! The room releases each publisher's frames on its own 20 ms clock, the call's tick runs on
//! another; per-track buffers absorb the difference. A track starts playing once
//! [`PRIME_SAMPLES`] are buffered (so the phase between the two clocks does not turn every other
//! tick into an underrun), plays until it runs dry, and then primes again. A track that runs
//! ahead (the tick stalled) is cut back to the newest [`MAX_BUFFERED_SAMPLES`], keeping the
//! phone's latency bounded.

use std::collections::HashMap;

/// Samples in one 20 ms frame at 48 kHz.
pub const FRAME_SAMPLES: usize = 960;
/// Buffered samples before a track plays: two frames (40 ms).
pub const PRIME_SAMPLES: usize = 2 * FRAME_SAMPLES;
/// Most samples buffered per track (200 ms); older audio is dropped.
pub const MAX_BUFFERED_SAMPLES: usize = 10 * FRAME_SAMPLES;
/// Most tracks mixed at once; frames of further tracks are ignored.
pub const MAX_TRACKS: usize = 16;

#[derive(Debug, Default)]
struct TrackBuffer {
    samples: std::collections::VecDeque<i16>,
    playing: bool,
}

/// Per-track buffers and the mix.
#[derive(Debug, Default)]
pub struct Mixer {
    tracks: HashMap<String, TrackBuffer>,
    dropped_samples: u64,
}

impl Mixer {
    /// No tracks.
    pub fn new() -> Mixer {
        Mixer::default()
    }

    /// Appends decoded PCM of `track`. Returns `false` (and drops it) when [`MAX_TRACKS`] other
    /// tracks are already buffered.
    pub fn push(&mut self, track: &str, pcm: &[i16]) -> bool {
        if !self.tracks.contains_key(track) && self.tracks.len() >= MAX_TRACKS {
            return false;
        }
        let buffer = self.tracks.entry(track.to_owned()).or_default();
        buffer.samples.extend(pcm.iter().copied());
        let excess = buffer.samples.len().saturating_sub(MAX_BUFFERED_SAMPLES);
        if excess > 0 {
            buffer.samples.drain(..excess);
            self.dropped_samples += excess as u64;
        }
        true
    }

    /// Forgets a track (unpublished, or its publisher left).
    pub fn remove(&mut self, track: &str) {
        self.tracks.remove(track);
    }

    /// Forgets every buffered sample (before the answer nothing is played).
    pub fn clear(&mut self) {
        self.tracks.clear();
    }

    /// Samples dropped because a track ran too far ahead.
    pub fn dropped_samples(&self) -> u64 {
        self.dropped_samples
    }

    /// Tracks known.
    pub fn track_count(&self) -> usize {
        self.tracks.len()
    }

    /// The next 20 ms: the sum (saturating) of one frame of every playing track, or silence.
    pub fn next_frame(&mut self) -> Vec<i16> {
        let mut mix = vec![0i32; FRAME_SAMPLES];
        for buffer in self.tracks.values_mut() {
            if !buffer.playing && buffer.samples.len() >= PRIME_SAMPLES {
                buffer.playing = true;
            }
            if !buffer.playing {
                continue;
            }
            let available = buffer.samples.len().min(FRAME_SAMPLES);
            for (slot, sample) in mix.iter_mut().zip(buffer.samples.drain(..available)) {
                *slot += i32::from(sample);
            }
            if buffer.samples.is_empty() {
                buffer.playing = false;
            }
        }
        mix.into_iter().map(|sample| sample.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_without_tracks() {
        let mut mixer = Mixer::new();
        assert_eq!(mixer.next_frame(), vec![0; FRAME_SAMPLES]);
    }

    #[test]
    fn a_track_primes_then_plays_in_order() {
        let mut mixer = Mixer::new();
        let pcm: Vec<i16> = (0..FRAME_SAMPLES as i16).collect();
        mixer.push("a", &pcm);
        // One frame is not enough to start.
        assert_eq!(mixer.next_frame(), vec![0; FRAME_SAMPLES]);
        mixer.push("a", &pcm);
        assert_eq!(mixer.next_frame(), pcm);
        assert_eq!(mixer.next_frame(), pcm);
        // Dry: silence until primed again.
        mixer.push("a", &pcm);
        assert_eq!(mixer.next_frame(), vec![0; FRAME_SAMPLES]);
    }

    #[test]
    fn tracks_are_summed_with_saturation() {
        let mut mixer = Mixer::new();
        mixer.push("a", &vec![20_000; PRIME_SAMPLES]);
        mixer.push("b", &vec![20_000; PRIME_SAMPLES]);
        mixer.push("c", &vec![-100; PRIME_SAMPLES]);
        assert_eq!(mixer.next_frame(), vec![i16::MAX; FRAME_SAMPLES]);
        mixer.remove("a");
        assert_eq!(mixer.next_frame(), vec![19_900; FRAME_SAMPLES]);
    }

    #[test]
    fn a_track_running_ahead_keeps_only_the_newest_audio() {
        let mut mixer = Mixer::new();
        for n in 0..30 {
            mixer.push("a", &vec![n; FRAME_SAMPLES]);
        }
        assert_eq!(mixer.dropped_samples(), 20 * FRAME_SAMPLES as u64);
        assert_eq!(mixer.next_frame(), vec![20; FRAME_SAMPLES]);
    }

    #[test]
    fn tracks_are_bounded() {
        let mut mixer = Mixer::new();
        for n in 0..MAX_TRACKS {
            assert!(mixer.push(&format!("t{n}"), &[1]));
        }
        assert!(!mixer.push("one-too-many", &[1]));
        assert!(mixer.push("t0", &[1]));
        mixer.clear();
        assert_eq!(mixer.track_count(), 0);
    }
}
