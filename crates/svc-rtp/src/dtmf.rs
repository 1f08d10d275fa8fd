//! DTMF as RTP telephone events (RFC 4733): the payload, a sender that turns digits into
//! start/continuation/end packets, and a receiver that turns packets back into one
//! [`DtmfEvent`] per key press, however often the network repeats or reorders them.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::jitter::{CLOCK_RATE, FRAME_DURATION, FRAME_SAMPLES};
use crate::packet::PacketError;

/// Length of a telephone-event payload.
pub const EVENT_PAYLOAD_LEN: usize = 4;
/// The volume sent, in −dBm0 (RFC 4733 §2.3.4; 10 is a typical keypad level).
const VOLUME: u8 = 10;
/// How often the final packet is sent (RFC 4733 §2.5.1.4).
const END_REPEATS: u8 = 3;
/// An event with no packet for this long is taken as ended, its end packets lost.
const RECEIVE_TIMEOUT: Duration = Duration::from_millis(500);
/// Event timestamps remembered as reported, so late repeats do not report twice.
const REPORTED_MEMORY: usize = 16;
/// The longest event sent: the duration field counts 16 bits of 8 kHz samples (8.19 s).
const MAX_DURATION_MS: u32 = 5_000;

/// A key press received or sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DtmfEvent {
    /// `0`–`9`, `*`, `#` or `A`–`D`.
    pub digit: char,
    /// How long the key was held.
    pub duration_ms: u32,
}

/// Why a digit cannot be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DtmfError {
    /// Not one of `0`–`9`, `*`, `#`, `A`–`D`.
    #[error("{0:?} is not a DTMF digit")]
    InvalidDigit(char),
    /// No telephone-event payload type was negotiated.
    #[error("the remote side did not negotiate telephone-event")]
    NotNegotiated,
}

/// The event code of a DTMF digit (RFC 4733 §3.2: 0–9, then `*` 10, `#` 11, `A`–`D` 12–15).
#[must_use]
pub fn digit_to_event(digit: char) -> Option<u8> {
    match digit.to_ascii_uppercase() {
        d @ '0'..='9' => Some(d as u8 - b'0'),
        '*' => Some(10),
        '#' => Some(11),
        d @ 'A'..='D' => Some(d as u8 - b'A' + 12),
        _ => None,
    }
}

/// The digit of a DTMF event code; `None` for the other telephone events (flash, tones).
#[must_use]
pub fn event_to_digit(event: u8) -> Option<char> {
    match event {
        0..=9 => Some(char::from(b'0' + event)),
        10 => Some('*'),
        11 => Some('#'),
        12..=15 => Some(char::from(b'A' + event - 12)),
        _ => None,
    }
}

/// One telephone-event payload (RFC 4733 §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelephoneEvent {
    /// The event code.
    pub event: u8,
    /// The E bit: this is the event's final packet.
    pub end: bool,
    /// Power level, 0–63 in −dBm0.
    pub volume: u8,
    /// Duration so far, in timestamp units from the event's timestamp.
    pub duration: u16,
}

impl TelephoneEvent {
    /// Parses the first four bytes of `payload` (RFC 4733 allows several events per packet for
    /// redundancy; the first is the current one).
    pub fn parse(payload: &[u8]) -> Result<TelephoneEvent, PacketError> {
        let bytes: &[u8; EVENT_PAYLOAD_LEN] =
            payload.first_chunk().ok_or(PacketError::Truncated { needed: EVENT_PAYLOAD_LEN, actual: payload.len() })?;
        Ok(TelephoneEvent {
            event: bytes[0],
            end: bytes[1] & 0x80 != 0,
            volume: bytes[1] & 0x3F,
            duration: u16::from_be_bytes([bytes[2], bytes[3]]),
        })
    }

    /// The payload's bytes.
    #[must_use]
    pub fn to_bytes(self) -> [u8; EVENT_PAYLOAD_LEN] {
        let [high, low] = self.duration.to_be_bytes();
        [self.event, u8::from(self.end) << 7 | (self.volume & 0x3F), high, low]
    }
}

/// A telephone-event packet for the session to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPacket {
    /// The payload.
    pub payload: TelephoneEvent,
    /// The event's timestamp (the same for all of its packets).
    pub timestamp: u32,
    /// Set on the event's first packet.
    pub marker: bool,
}

#[derive(Debug, Clone, Copy)]
struct Sending {
    event: u8,
    timestamp: u32,
    /// Total duration, in timestamp units.
    total: u16,
    /// Duration carried by the last packet sent.
    sent: u16,
    ends_sent: u8,
    next_at: Instant,
}

/// Sends queued digits as RFC 4733 events: a first packet with the marker bit, one packet per
/// 20 ms whose duration grows, then the final packet three times, 20 ms apart. While an event
/// is on the wire the session sends no audio (§2.5.1.1 leaves it to the sender; a tone and
/// speech at once would confuse the far end's detector).
#[derive(Debug, Clone)]
pub struct DtmfSender {
    queue: VecDeque<(u8, u16)>,
    sending: Option<Sending>,
    /// Silence between two queued digits.
    gap: Duration,
    /// When the next queued digit may start.
    not_before: Option<Instant>,
}

impl Default for DtmfSender {
    fn default() -> Self {
        Self::new(Duration::from_millis(60))
    }
}

impl DtmfSender {
    /// A sender that leaves `gap` between digits.
    #[must_use]
    pub fn new(gap: Duration) -> DtmfSender {
        DtmfSender { queue: VecDeque::new(), sending: None, gap, not_before: None }
    }

    /// Queues `digits` (each of `0`–`9`, `*`, `#`, `A`–`D`), each held for `duration_ms`
    /// (clamped to 40 ms–5 s). Nothing is queued if any digit is invalid.
    pub fn enqueue(&mut self, digits: &str, duration_ms: u32) -> Result<(), DtmfError> {
        let events = digits
            .chars()
            .map(|digit| digit_to_event(digit).ok_or(DtmfError::InvalidDigit(digit)))
            .collect::<Result<Vec<u8>, DtmfError>>()?;
        let samples = duration_ms.clamp(40, MAX_DURATION_MS) * (CLOCK_RATE / 1_000);
        let total = u16::try_from(samples).unwrap_or(u16::MAX);
        self.queue.extend(events.into_iter().map(|event| (event, total)));
        Ok(())
    }

    /// Whether an event is on the wire (its packets not all sent yet): audio waits meanwhile.
    #[must_use]
    pub fn is_sending(&self) -> bool {
        self.sending.is_some()
    }

    /// When [`DtmfSender::poll`] has the next packet; `None` when nothing is queued.
    #[must_use]
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        match &self.sending {
            Some(sending) => Some(sending.next_at),
            None if self.queue.is_empty() => None,
            None => Some(self.not_before.map_or(now, |at| at.max(now))),
        }
    }

    /// The next packet due at `now`. `timestamp_now` gives the media clock's timestamp for a
    /// digit that starts now.
    pub fn poll(&mut self, now: Instant, timestamp_now: impl FnOnce() -> u32) -> Option<EventPacket> {
        if self.sending.is_none() {
            if self.not_before.is_some_and(|at| now < at) {
                return None;
            }
            let (event, total) = self.queue.pop_front()?;
            let sending = Sending { event, timestamp: timestamp_now(), total, sent: 0, ends_sent: 0, next_at: now };
            self.sending = Some(sending);
        }
        let sending = self.sending.as_mut()?;
        if now < sending.next_at {
            return None;
        }
        let marker = sending.sent == 0 && sending.ends_sent == 0;
        sending.sent = sending.sent.saturating_add(FRAME_SAMPLES as u16).min(sending.total);
        let end = sending.sent >= sending.total;
        if end {
            sending.ends_sent += 1;
        }
        let packet = EventPacket {
            payload: TelephoneEvent { event: sending.event, end, volume: VOLUME, duration: sending.sent },
            timestamp: sending.timestamp,
            marker,
        };
        sending.next_at = now + FRAME_DURATION;
        if sending.ends_sent >= END_REPEATS {
            self.sending = None;
            self.not_before = Some(now + self.gap);
        }
        Some(packet)
    }
}

#[derive(Debug, Clone, Copy)]
struct Receiving {
    timestamp: u32,
    event: u8,
    duration: u16,
    last_seen: Instant,
}

/// Turns received telephone-event packets into one [`DtmfEvent`] per event: reported on its
/// first end packet, or when a new event starts or 500 ms pass without a packet of it (all
/// end packets lost). Events are told apart by their timestamp; a packet of an event already
/// reported (the repeated end packets, a reordered start) is ignored.
#[derive(Debug, Clone, Default)]
pub struct DtmfReceiver {
    current: Option<Receiving>,
    reported: VecDeque<u32>,
    events: VecDeque<DtmfEvent>,
}

impl DtmfReceiver {
    /// A receiver that has seen nothing.
    #[must_use]
    pub fn new() -> DtmfReceiver {
        DtmfReceiver::default()
    }

    /// Takes one telephone-event packet's timestamp and payload. Non-DTMF events (flash, tones)
    /// and malformed payloads are ignored.
    pub fn handle(&mut self, now: Instant, timestamp: u32, payload: &[u8]) {
        let Ok(event) = TelephoneEvent::parse(payload) else { return };
        if event_to_digit(event.event).is_none() || self.reported.contains(&timestamp) {
            return;
        }
        match self.current {
            Some(current) if current.timestamp == timestamp => {}
            Some(_) => {
                // A new event while the last never ended: its end packets were lost.
                self.finish();
                self.current = None;
            }
            None => {}
        }
        let current =
            self.current.get_or_insert(Receiving { timestamp, event: event.event, duration: 0, last_seen: now });
        current.duration = current.duration.max(event.duration);
        current.last_seen = now;
        if event.end {
            self.finish();
        }
    }

    /// Ends an event whose end packets never came.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.current.is_some_and(|current| now >= current.last_seen + RECEIVE_TIMEOUT) {
            self.finish();
        }
    }

    /// When [`DtmfReceiver::handle_timeout`] has something to do.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.current.map(|current| current.last_seen + RECEIVE_TIMEOUT)
    }

    /// The next event received.
    pub fn poll_event(&mut self) -> Option<DtmfEvent> {
        self.events.pop_front()
    }

    /// Forgets the source (after an SSRC change).
    pub fn reset(&mut self) {
        self.current = None;
        self.reported.clear();
    }

    fn finish(&mut self) {
        let Some(current) = self.current.take() else { return };
        if let Some(digit) = event_to_digit(current.event) {
            let duration_ms = u32::from(current.duration) * 1_000 / CLOCK_RATE;
            self.events.push_back(DtmfEvent { digit, duration_ms });
        }
        self.reported.push_back(current.timestamp);
        if self.reported.len() > REPORTED_MEMORY {
            self.reported.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_map_to_event_codes_and_back() {
        for (digit, code) in [('0', 0), ('9', 9), ('*', 10), ('#', 11), ('A', 12), ('d', 15)] {
            assert_eq!(digit_to_event(digit), Some(code));
            assert_eq!(event_to_digit(code), Some(digit.to_ascii_uppercase()));
        }
        assert_eq!(digit_to_event('E'), None);
        assert_eq!(event_to_digit(16), None, "flash is not a digit");
    }

    #[test]
    fn payload_round_trips() {
        let event = TelephoneEvent { event: 11, end: true, volume: 10, duration: 800 };
        assert_eq!(event.to_bytes(), [11, 0x8A, 0x03, 0x20]);
        assert_eq!(TelephoneEvent::parse(&event.to_bytes()), Ok(event));
        assert!(TelephoneEvent::parse(&[1, 2, 3]).is_err());
    }

    fn send_all(sender: &mut DtmfSender, t0: Instant) -> Vec<(Duration, EventPacket)> {
        let mut packets = Vec::new();
        let mut clock = 1_000u32;
        for ms in 0..5_000u64 {
            let now = t0 + Duration::from_millis(ms);
            while let Some(packet) = sender.poll(now, || clock) {
                packets.push((now - t0, packet));
            }
            clock += 8;
        }
        packets
    }

    #[test]
    fn a_digit_is_a_marked_start_growing_durations_and_three_ends() {
        let mut sender = DtmfSender::default();
        sender.enqueue("5", 100).expect("valid");
        let packets = send_all(&mut sender, Instant::now());
        let durations: Vec<(u16, bool, bool)> =
            packets.iter().map(|(_, p)| (p.payload.duration, p.payload.end, p.marker)).collect();
        assert_eq!(
            durations,
            [
                (160, false, true),
                (320, false, false),
                (480, false, false),
                (640, false, false),
                (800, true, false),
                (800, true, false),
                (800, true, false)
            ]
        );
        assert!(packets.iter().all(|(_, p)| p.timestamp == 1_000 && p.payload.event == 5));
        let times: Vec<u64> = packets.iter().map(|(t, _)| t.as_millis() as u64).collect();
        assert_eq!(times, [0, 20, 40, 60, 80, 100, 120]);
        assert!(!sender.is_sending());
    }

    #[test]
    fn digits_follow_each_other_after_a_gap_with_their_own_timestamps() {
        let mut sender = DtmfSender::default();
        sender.enqueue("1#", 60).expect("valid");
        let packets = send_all(&mut sender, Instant::now());
        let starts: Vec<(u64, u32)> =
            packets.iter().filter(|(_, p)| p.marker).map(|(t, p)| (t.as_millis() as u64, p.timestamp)).collect();
        // "1": 60 ms = 3 packets + 2 more ends, the last at 80 ms; the gap is 60 ms.
        assert_eq!(starts, [(0, 1_000), (140, 1_000 + 140 * 8)]);
        assert_eq!(sender.enqueue("12X", 100), Err(DtmfError::InvalidDigit('X')));
        assert_eq!(sender.next_due(Instant::now()), None, "nothing of the invalid string was queued");
    }

    #[test]
    fn the_receiver_reports_each_event_once_despite_repeats_and_reordering() {
        let mut receiver = DtmfReceiver::new();
        let t0 = Instant::now();
        let mut sender = DtmfSender::default();
        sender.enqueue("123#", 100).expect("valid");
        let mut packets = send_all(&mut sender, t0);
        // Swap the first two packets of each event and repeat every start.
        for i in (0..packets.len() - 1).step_by(7) {
            packets.swap(i, i + 1);
        }
        let starts: Vec<(Duration, EventPacket)> = packets.iter().filter(|(_, p)| p.marker).copied().collect();
        packets.extend(starts);
        for (at, packet) in &packets {
            receiver.handle(t0 + *at, packet.timestamp, &packet.payload.to_bytes());
        }
        let events: Vec<DtmfEvent> = std::iter::from_fn(|| receiver.poll_event()).collect();
        let expected: Vec<DtmfEvent> = "123#".chars().map(|digit| DtmfEvent { digit, duration_ms: 100 }).collect();
        assert_eq!(events, expected);
    }

    #[test]
    fn an_event_whose_end_is_lost_is_reported_on_timeout_or_the_next_event() {
        let mut receiver = DtmfReceiver::new();
        let t0 = Instant::now();
        let start = |duration| TelephoneEvent { event: 7, end: false, volume: 10, duration }.to_bytes();
        receiver.handle(t0, 100, &start(160));
        receiver.handle(t0 + Duration::from_millis(20), 100, &start(320));
        assert_eq!(receiver.poll_event(), None);
        assert_eq!(receiver.poll_timeout(), Some(t0 + Duration::from_millis(520)));
        receiver.handle_timeout(t0 + Duration::from_millis(519));
        assert_eq!(receiver.poll_event(), None);
        receiver.handle_timeout(t0 + Duration::from_millis(520));
        assert_eq!(receiver.poll_event(), Some(DtmfEvent { digit: '7', duration_ms: 40 }));
        // A late packet of that event does not bring it back.
        receiver.handle(t0 + Duration::from_millis(600), 100, &start(480));
        assert_eq!(receiver.poll_timeout(), None);
        // Next event interrupts one without an end.
        receiver.handle(t0 + Duration::from_secs(1), 900, &start(160));
        receiver.handle(t0 + Duration::from_millis(1_020), 1_800, &start(160));
        assert_eq!(receiver.poll_event(), Some(DtmfEvent { digit: '7', duration_ms: 20 }));
        // Not a digit: ignored.
        receiver.handle(t0, 5_000, &TelephoneEvent { event: 16, end: true, volume: 0, duration: 800 }.to_bytes());
        assert_eq!(receiver.poll_event(), None);
    }
}
