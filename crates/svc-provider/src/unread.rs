//! The user audio an upstream link was given but has not shown it read.
//!
//! A socket takes bytes long before the provider reads them, and a link that stalls takes them
//! until its buffers fill: everything the user said from the stall until the driver gives the link
//! up (up to [`crate::driver::Liveness::DEFAULT`]'s 10–11 s) went into a connection nobody
//! read. The driver's pings tell what was read: a WebSocket peer answers a ping only after
//! reading every frame before it, so a pong confirms all the audio sent before its ping. The
//! rest stays here, bounded, and when the link drops it is replayed on the next upstream
//! session before the audio held during the outage ([`crate::codec::Core::keep_unread_audio`]).
//!
//! Audio the upstream read is never replayed, nor is audio sent before a response began or the
//! user's transcript became final (the upstream took the user's turn in; replaying its tail could
//! ask the same question twice). An upstream whose pongs do not echo the ping's payload (RFC 6455
//! §5.5.3 says they must) confirms nothing: its unconfirmed audio is still bounded, and cleared
//! at every turn.

use std::collections::VecDeque;

/// What the driver learned about the upstream's reading of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadReceipt {
    /// A ping went out after everything sent so far.
    PingSent,
    /// The pong of that ping came: the upstream read everything sent before it.
    PongReceived,
}

/// User audio (at the provider's rate) sent on the current link and not yet confirmed read.
#[derive(Debug)]
pub struct UnreadAudio {
    /// The newest unconfirmed samples, oldest first (at most `max`).
    samples: VecDeque<i16>,
    max: usize,
    /// Samples sent on this link so far.
    sent: u64,
    /// `sent` when the ping awaiting its pong went out.
    asked_at: Option<u64>,
}

impl UnreadAudio {
    /// Keeps at most `max` samples (older unconfirmed audio is dropped first).
    pub fn new(max: usize) -> UnreadAudio {
        UnreadAudio { samples: VecDeque::new(), max, sent: 0, asked_at: None }
    }

    /// `pcm` was sent on the link.
    pub fn sent(&mut self, pcm: &[i16]) {
        self.sent += pcm.len() as u64;
        if self.max == 0 {
            return;
        }
        let pcm = &pcm[pcm.len().saturating_sub(self.max)..];
        let excess = (self.samples.len() + pcm.len()).saturating_sub(self.max);
        self.samples.drain(..excess);
        self.samples.extend(pcm);
    }

    /// A receipt from the driver. A pong with no ping awaiting it (unsolicited, RFC 6455 §5.5.3)
    /// confirms nothing.
    pub fn receipt(&mut self, receipt: ReadReceipt) {
        match receipt {
            // Only the first of several unanswered pings is tracked: its pong comes first.
            ReadReceipt::PingSent => {
                self.asked_at.get_or_insert(self.sent);
            }
            ReadReceipt::PongReceived => {
                if let Some(read) = self.asked_at.take() {
                    let unread = self.sent - read;
                    let confirmed = (self.samples.len() as u64).saturating_sub(unread);
                    self.samples.drain(..confirmed as usize);
                }
            }
        }
    }

    /// The upstream took the user's turn in (a response began, or its transcript is final):
    /// nothing sent so far is replayed.
    pub fn taken(&mut self) {
        self.samples.clear();
    }

    /// The link dropped: the unconfirmed audio, oldest first, and a fresh start for the next link.
    pub fn take(&mut self) -> Vec<i16> {
        self.sent = 0;
        self.asked_at = None;
        self.samples.drain(..).collect()
    }

    /// A new link is ready: nothing on it is unread yet.
    pub fn reset(&mut self) {
        self.samples.clear();
        self.sent = 0;
        self.asked_at = None;
    }

    /// Samples kept.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(from: i16, n: i16) -> Vec<i16> {
        (from..from + n).collect()
    }

    #[test]
    fn a_pong_confirms_what_was_sent_before_its_ping_only() {
        let mut unread = UnreadAudio::new(100);
        unread.sent(&ramp(0, 10));
        unread.receipt(ReadReceipt::PingSent);
        unread.sent(&ramp(10, 5));
        // A second ping before the first pong does not move the mark.
        unread.receipt(ReadReceipt::PingSent);
        unread.sent(&ramp(15, 5));
        unread.receipt(ReadReceipt::PongReceived);
        assert_eq!(unread.take(), ramp(10, 10));
    }

    #[test]
    fn an_unsolicited_pong_confirms_nothing() {
        let mut unread = UnreadAudio::new(100);
        unread.sent(&ramp(0, 10));
        unread.receipt(ReadReceipt::PongReceived);
        assert_eq!(unread.len(), 10);
    }

    #[test]
    fn the_oldest_unconfirmed_audio_goes_first_beyond_the_bound() {
        let mut unread = UnreadAudio::new(8);
        unread.sent(&ramp(0, 5));
        unread.receipt(ReadReceipt::PingSent);
        unread.sent(&ramp(5, 5));
        assert_eq!(unread.len(), 8);
        // The pong confirms the first 5, of which 3 are still kept.
        unread.receipt(ReadReceipt::PongReceived);
        assert_eq!(unread.take(), ramp(5, 5));
        unread.sent(&ramp(0, 20));
        assert_eq!(unread.take(), ramp(12, 8));
    }

    #[test]
    fn a_turn_taken_in_or_a_new_link_leaves_nothing_to_replay() {
        let mut unread = UnreadAudio::new(100);
        unread.sent(&ramp(0, 10));
        unread.taken();
        unread.sent(&ramp(10, 4));
        assert_eq!(unread.len(), 4);
        unread.receipt(ReadReceipt::PingSent);
        unread.reset();
        unread.sent(&ramp(0, 3));
        // The ping belonged to the old link: its pong confirms nothing on this one.
        unread.receipt(ReadReceipt::PongReceived);
        assert_eq!(unread.take(), ramp(0, 3));
    }
}
