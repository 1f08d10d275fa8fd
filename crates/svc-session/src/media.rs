//! What a session's media paths lost or delivered late, counted where it happens: user audio
//! refused by the room's queue, by the agent's queue in the room, or by the provider adapter's
//! input; agent audio the playback queue could not hold, the room refused, or that left later
//! than its place on the media clock; and what the network did to the user's audio (packets
//! too late, audio concealed). A session reports its counts in the timeline's
//! `session.ended` entry; the runtime sums the ended sessions' counts for `/metrics`. A failing
//! real-time test then names the queue that dropped, not only that audio went missing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// An agent frame that leaves more than this after its due time counts as late: one frame of
/// 20 ms is within the room's pacing, more is a stall the user hears. The room's frame sink
/// counts them where they leave.
pub const LATE_AFTER: Duration = svc_room::LATE_AFTER;

/// One session's counts (or the sum of many).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MediaCounts {
    /// User audio datagrams the room's queue refused (the room fell behind its socket).
    pub input_dropped_room_queue: u64,
    /// User audio frames the agent's queue in the room refused (the session fell behind the room).
    pub input_dropped_agent_queue: u64,
    /// User audio frames the provider adapter could not take (it fell behind the session).
    pub input_dropped_provider_queue: u64,
    /// Agent audio frames lost: the playback queue overflowed (the provider ran too far ahead),
    /// or the room's frame sink was full or refused them.
    pub output_dropped: u64,
    /// Agent audio frames that left the room more than [`LATE_AFTER`] after their due time
    /// (the session handed them over late, or they waited in the room's sink).
    pub output_late: u64,
    /// User audio packets dropped because their audio had already gone on: duplicates, and
    /// packets later than the room's reorder wait (their audio was concealed).
    pub input_dropped_late: u64,
    /// User audio filled in for packets that never came (FEC and concealment), in ms.
    pub input_concealed_ms: u64,
    /// Recordings that could not be made or finished (a full or unwritable disk): 1 for a
    /// session whose recording failed, the sum over sessions in totals.
    pub recordings_failed: u64,
}

impl MediaCounts {
    /// User audio lost anywhere on its way to the provider.
    pub fn input_dropped(&self) -> u64 {
        self.input_dropped_room_queue + self.input_dropped_agent_queue + self.input_dropped_provider_queue
    }

    /// The `media` object of the `session.ended` timeline entry.
    pub fn to_json(&self) -> Value {
        json!({
            "input_frames_dropped": {
                "room_queue": self.input_dropped_room_queue,
                "agent_queue": self.input_dropped_agent_queue,
                "provider_queue": self.input_dropped_provider_queue,
            },
            "input_network": {
                "dropped_late": self.input_dropped_late,
                "concealed_ms": self.input_concealed_ms,
            },
            "output_frames_dropped": self.output_dropped,
            "output_frames_late": self.output_late,
            "recording_failed": self.recordings_failed > 0,
        })
    }
}

/// The sum over ended sessions, shared by every session of a runtime.
#[derive(Debug, Default)]
pub struct MediaTotals {
    input_dropped_room_queue: AtomicU64,
    input_dropped_agent_queue: AtomicU64,
    input_dropped_provider_queue: AtomicU64,
    output_dropped: AtomicU64,
    output_late: AtomicU64,
    input_dropped_late: AtomicU64,
    input_concealed_ms: AtomicU64,
    recordings_failed: AtomicU64,
}

impl MediaTotals {
    /// Adds one session's counts.
    pub fn add(&self, counts: &MediaCounts) {
        let add = |total: &AtomicU64, value: u64| total.fetch_add(value, Ordering::Relaxed);
        add(&self.input_dropped_room_queue, counts.input_dropped_room_queue);
        add(&self.input_dropped_agent_queue, counts.input_dropped_agent_queue);
        add(&self.input_dropped_provider_queue, counts.input_dropped_provider_queue);
        add(&self.output_dropped, counts.output_dropped);
        add(&self.output_late, counts.output_late);
        add(&self.input_dropped_late, counts.input_dropped_late);
        add(&self.input_concealed_ms, counts.input_concealed_ms);
        add(&self.recordings_failed, counts.recordings_failed);
    }

    /// The sums so far.
    pub fn snapshot(&self) -> MediaCounts {
        let get = |total: &AtomicU64| total.load(Ordering::Relaxed);
        MediaCounts {
            input_dropped_room_queue: get(&self.input_dropped_room_queue),
            input_dropped_agent_queue: get(&self.input_dropped_agent_queue),
            input_dropped_provider_queue: get(&self.input_dropped_provider_queue),
            output_dropped: get(&self.output_dropped),
            output_late: get(&self.output_late),
            input_dropped_late: get(&self.input_dropped_late),
            input_concealed_ms: get(&self.input_concealed_ms),
            recordings_failed: get(&self.recordings_failed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_render_by_queue_and_sum_across_sessions() {
        let one = MediaCounts {
            input_dropped_room_queue: 1,
            input_dropped_agent_queue: 2,
            input_dropped_provider_queue: 3,
            output_dropped: 4,
            output_late: 5,
            input_dropped_late: 7,
            input_concealed_ms: 80,
            recordings_failed: 1,
        };
        assert_eq!(one.input_dropped(), 6);
        assert_eq!(
            one.to_json(),
            json!({"input_frames_dropped": {"room_queue": 1, "agent_queue": 2, "provider_queue": 3},
                   "input_network": {"dropped_late": 7, "concealed_ms": 80},
                   "output_frames_dropped": 4, "output_frames_late": 5, "recording_failed": true})
        );
        let totals = MediaTotals::default();
        totals.add(&one);
        totals.add(&one);
        assert_eq!(totals.snapshot().input_dropped(), 12);
        assert_eq!(totals.snapshot().output_late, 10);
        assert_eq!(totals.snapshot().recordings_failed, 2);
    }
}
