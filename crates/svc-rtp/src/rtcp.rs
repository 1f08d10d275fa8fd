//! RTCP (RFC 3550 §6): sender and receiver reports, SDES CNAME and BYE, built and parsed;
//! the receiver-side statistics a report block carries (A.3); and the report interval (§6.3).
//!
//! Parsing is total like RTP's: any bytes give packets or a [`PacketError`]. Packet types this
//! crate does not use (APP, feedback, XR) are returned as [`RtcpPacket::Other`], not errors.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::packet::{PacketError, be_u32};

const SR: u8 = 200;
const RR: u8 = 201;
const SDES: u8 = 202;
const BYE: u8 = 203;
const SDES_CNAME: u8 = 1;
/// A report block's length on the wire.
const BLOCK_LEN: usize = 24;
/// At most 31 blocks fit the 5-bit count.
const MAX_BLOCKS: usize = 31;

/// A 64-bit NTP timestamp: seconds since 1900 in the high 32 bits, the fraction in the low.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct NtpTime(pub u64);

/// Seconds from the NTP epoch (1900) to the Unix epoch (1970).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

impl NtpTime {
    /// The NTP time of a wall-clock time given as the duration since the Unix epoch.
    #[must_use]
    pub fn from_unix(since_epoch: Duration) -> NtpTime {
        NtpTime(0).plus(since_epoch + Duration::from_secs(NTP_UNIX_OFFSET))
    }

    /// This time plus `duration` (wrapping with the NTP era).
    #[must_use]
    pub fn plus(self, duration: Duration) -> NtpTime {
        let seconds = duration.as_secs() << 32;
        let fraction = (u64::from(duration.subsec_nanos()) << 32) / 1_000_000_000;
        NtpTime(self.0.wrapping_add(seconds).wrapping_add(fraction))
    }

    /// The middle 32 bits, the "compact" form that LSR and round-trip times use.
    #[must_use]
    pub fn compact(self) -> u32 {
        (self.0 >> 16) as u32
    }
}

/// A reception report block (RFC 3550 §6.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportBlock {
    /// The source reported on.
    pub ssrc: u32,
    /// Fraction of packets lost since the last report, in 1/256.
    pub fraction_lost: u8,
    /// Packets lost since the start (24-bit signed; duplicates can make it negative).
    pub cumulative_lost: i32,
    /// Cycles × 65536 + the highest sequence number received.
    pub extended_highest_seq: u32,
    /// Interarrival jitter, in timestamp units.
    pub jitter: u32,
    /// The compact NTP time of the last SR from this source (0 if none).
    pub last_sr: u32,
    /// Delay since that SR, in 1/65536 s (0 if none).
    pub delay_since_last_sr: u32,
}

/// The sender information of an SR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderInfo {
    /// Wall-clock time of the report.
    pub ntp: NtpTime,
    /// The same instant on the RTP media clock.
    pub rtp_timestamp: u32,
    /// RTP packets sent since the start.
    pub packet_count: u32,
    /// Payload octets sent since the start.
    pub octet_count: u32,
}

/// One RTCP packet of a compound packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RtcpPacket {
    /// A sender report (PT 200).
    SenderReport {
        /// The sender.
        ssrc: u32,
        /// What it sent.
        info: SenderInfo,
        /// What it received.
        reports: Vec<ReportBlock>,
    },
    /// A receiver report (PT 201).
    ReceiverReport {
        /// The reporter.
        ssrc: u32,
        /// What it received.
        reports: Vec<ReportBlock>,
    },
    /// Source description (PT 202); only CNAME items are kept.
    SourceDescription {
        /// `(ssrc, cname)` per chunk.
        chunks: Vec<(u32, Option<String>)>,
    },
    /// Goodbye (PT 203).
    Bye {
        /// The sources leaving.
        ssrcs: Vec<u32>,
        /// Why, if said.
        reason: Option<String>,
    },
    /// Any other packet type, skipped.
    Other {
        /// Its packet type.
        packet_type: u8,
    },
}

impl RtcpPacket {
    /// Parses a compound packet (or a single one). Total.
    pub fn parse_compound(bytes: &[u8]) -> Result<Vec<RtcpPacket>, PacketError> {
        let mut packets = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let header: &[u8; 4] =
                rest.first_chunk().ok_or(PacketError::Truncated { needed: 4, actual: rest.len() })?;
            let version = header[0] >> 6;
            if version != 2 {
                return Err(PacketError::Version(version));
            }
            let length = 4 * (usize::from(u16::from_be_bytes([header[2], header[3]])) + 1);
            let packet = rest.get(..length).ok_or(PacketError::Truncated { needed: length, actual: rest.len() })?;
            let mut body = &packet[4..];
            if header[0] & 0x20 != 0 {
                let count = body.last().copied().unwrap_or(0);
                if count == 0 || usize::from(count) > body.len() {
                    return Err(PacketError::Padding(count));
                }
                body = &body[..body.len() - usize::from(count)];
            }
            packets.push(parse_one(header[0] & 0x1F, header[1], body)?);
            rest = &rest[length..];
        }
        if packets.is_empty() {
            return Err(PacketError::Truncated { needed: 4, actual: 0 });
        }
        Ok(packets)
    }

    /// Appends the packet's bytes to `out`. Report blocks beyond 31 and SDES/BYE beyond 31
    /// sources are left out (the count field has five bits); text is cut at 255 bytes.
    pub fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        match self {
            RtcpPacket::SenderReport { ssrc, info, reports } => {
                let reports = &reports[..reports.len().min(MAX_BLOCKS)];
                header(out, reports.len(), SR);
                out.extend_from_slice(&ssrc.to_be_bytes());
                out.extend_from_slice(&info.ntp.0.to_be_bytes());
                out.extend_from_slice(&info.rtp_timestamp.to_be_bytes());
                out.extend_from_slice(&info.packet_count.to_be_bytes());
                out.extend_from_slice(&info.octet_count.to_be_bytes());
                reports.iter().for_each(|block| write_block(out, block));
            }
            RtcpPacket::ReceiverReport { ssrc, reports } => {
                let reports = &reports[..reports.len().min(MAX_BLOCKS)];
                header(out, reports.len(), RR);
                out.extend_from_slice(&ssrc.to_be_bytes());
                reports.iter().for_each(|block| write_block(out, block));
            }
            RtcpPacket::SourceDescription { chunks } => {
                let chunks = &chunks[..chunks.len().min(MAX_BLOCKS)];
                header(out, chunks.len(), SDES);
                for (ssrc, cname) in chunks {
                    let chunk_start = out.len();
                    out.extend_from_slice(&ssrc.to_be_bytes());
                    if let Some(cname) = cname {
                        let text = truncated_text(cname);
                        out.push(SDES_CNAME);
                        out.push(text.len() as u8);
                        out.extend_from_slice(text);
                    }
                    // The item list ends with a zero byte, then zeros to the next 32-bit boundary.
                    out.push(0);
                    while !(out.len() - chunk_start).is_multiple_of(4) {
                        out.push(0);
                    }
                }
            }
            RtcpPacket::Bye { ssrcs, reason } => {
                let ssrcs = &ssrcs[..ssrcs.len().min(MAX_BLOCKS)];
                header(out, ssrcs.len(), BYE);
                ssrcs.iter().for_each(|ssrc| out.extend_from_slice(&ssrc.to_be_bytes()));
                if let Some(reason) = reason {
                    let text = truncated_text(reason);
                    out.push(text.len() as u8);
                    out.extend_from_slice(text);
                    while !(out.len() - start).is_multiple_of(4) {
                        out.push(0);
                    }
                }
            }
            RtcpPacket::Other { .. } => return,
        }
        let words = ((out.len() - start) / 4 - 1) as u16;
        out[start + 2..start + 4].copy_from_slice(&words.to_be_bytes());
    }

    /// A compound packet of `packets`, in order.
    #[must_use]
    pub fn compound(packets: &[RtcpPacket]) -> Vec<u8> {
        let mut out = Vec::new();
        packets.iter().for_each(|packet| packet.write(&mut out));
        out
    }
}

fn truncated_text(text: &str) -> &[u8] {
    let bytes = text.as_bytes();
    &bytes[..bytes.len().min(255)]
}

fn header(out: &mut Vec<u8>, count: usize, packet_type: u8) {
    out.extend_from_slice(&[0x80 | (count as u8 & 0x1F), packet_type, 0, 0]);
}

fn write_block(out: &mut Vec<u8>, block: &ReportBlock) {
    out.extend_from_slice(&block.ssrc.to_be_bytes());
    let lost = block.cumulative_lost.clamp(-0x80_0000, 0x7F_FFFF) as u32 & 0xFF_FFFF;
    out.extend_from_slice(&(u32::from(block.fraction_lost) << 24 | lost).to_be_bytes());
    out.extend_from_slice(&block.extended_highest_seq.to_be_bytes());
    out.extend_from_slice(&block.jitter.to_be_bytes());
    out.extend_from_slice(&block.last_sr.to_be_bytes());
    out.extend_from_slice(&block.delay_since_last_sr.to_be_bytes());
}

fn parse_blocks(count: usize, bytes: &[u8]) -> Result<Vec<ReportBlock>, PacketError> {
    let needed = count * BLOCK_LEN;
    let bytes = bytes.get(..needed).ok_or(PacketError::Truncated { needed, actual: bytes.len() })?;
    Ok(bytes
        .chunks_exact(BLOCK_LEN)
        .map(|b| {
            let lost = be_u32(&b[4..8]) & 0xFF_FFFF;
            // Sign-extend the 24-bit count.
            let cumulative_lost = ((lost << 8) as i32) >> 8;
            ReportBlock {
                ssrc: be_u32(&b[0..4]),
                fraction_lost: b[4],
                cumulative_lost,
                extended_highest_seq: be_u32(&b[8..12]),
                jitter: be_u32(&b[12..16]),
                last_sr: be_u32(&b[16..20]),
                delay_since_last_sr: be_u32(&b[20..24]),
            }
        })
        .collect())
}

fn parse_one(count: u8, packet_type: u8, body: &[u8]) -> Result<RtcpPacket, PacketError> {
    let count = usize::from(count);
    let truncated = |needed: usize| PacketError::Truncated { needed, actual: body.len() };
    match packet_type {
        SR => {
            let fixed = body.get(..24).ok_or_else(|| truncated(24))?;
            let ntp = (u64::from(be_u32(&fixed[4..8])) << 32) | u64::from(be_u32(&fixed[8..12]));
            Ok(RtcpPacket::SenderReport {
                ssrc: be_u32(&fixed[0..4]),
                info: SenderInfo {
                    ntp: NtpTime(ntp),
                    rtp_timestamp: be_u32(&fixed[12..16]),
                    packet_count: be_u32(&fixed[16..20]),
                    octet_count: be_u32(&fixed[20..24]),
                },
                reports: parse_blocks(count, &body[24..])?,
            })
        }
        RR => {
            let ssrc = body.get(..4).ok_or_else(|| truncated(4))?;
            Ok(RtcpPacket::ReceiverReport { ssrc: be_u32(ssrc), reports: parse_blocks(count, &body[4..])? })
        }
        SDES => {
            let mut chunks = Vec::with_capacity(count);
            let mut at = 0;
            for _ in 0..count {
                let ssrc = body.get(at..at + 4).ok_or_else(|| truncated(at + 4))?;
                let ssrc = be_u32(ssrc);
                at += 4;
                let mut cname = None;
                loop {
                    let kind = *body.get(at).ok_or_else(|| truncated(at + 1))?;
                    if kind == 0 {
                        // The terminating zero, then padding to the next 32-bit boundary.
                        at = (at + 4) & !3;
                        break;
                    }
                    let len = usize::from(*body.get(at + 1).ok_or_else(|| truncated(at + 2))?);
                    let text = body.get(at + 2..at + 2 + len).ok_or_else(|| truncated(at + 2 + len))?;
                    if kind == SDES_CNAME {
                        cname = Some(String::from_utf8_lossy(text).into_owned());
                    }
                    at += 2 + len;
                }
                chunks.push((ssrc, cname));
            }
            Ok(RtcpPacket::SourceDescription { chunks })
        }
        BYE => {
            let needed = 4 * count;
            let ids = body.get(..needed).ok_or_else(|| truncated(needed))?;
            let reason = body.get(needed).and_then(|&len| body.get(needed + 1..needed + 1 + usize::from(len)));
            Ok(RtcpPacket::Bye {
                ssrcs: ids.chunks_exact(4).map(be_u32).collect(),
                reason: reason.map(|text| String::from_utf8_lossy(text).into_owned()),
            })
        }
        other => Ok(RtcpPacket::Other { packet_type: other }),
    }
}

/// What one source's packets looked like, for the report block about it (RFC 3550 A.3).
/// Duplicates (a sequence number seen among the last 1024) are counted apart and not as
/// received, so the loss reported is the network's even when it duplicates.
#[derive(Debug, Clone, Default)]
pub struct ReceptionStats {
    base: Option<u64>,
    highest: u64,
    received: u64,
    duplicates: u64,
    expected_prior: u64,
    received_prior: u64,
    seen: BTreeSet<u64>,
    /// The last SR's compact NTP time and when it arrived.
    last_sr: Option<(u32, Instant)>,
}

impl ReceptionStats {
    /// Counts a packet by its extended sequence number; `false` for a duplicate.
    pub fn on_packet(&mut self, extended_seq: u64) -> bool {
        if !self.seen.insert(extended_seq) {
            self.duplicates += 1;
            return false;
        }
        while self.seen.len() > 1_024 {
            self.seen.pop_first();
        }
        let base = *self.base.get_or_insert(extended_seq);
        if extended_seq < base {
            // Reordered before the first packet: the stream started earlier than we thought.
            self.base = Some(extended_seq);
        }
        self.highest = self.highest.max(extended_seq);
        self.received += 1;
        true
    }

    /// Notes an SR from the source, for LSR/DLSR.
    pub fn on_sender_report(&mut self, now: Instant, ntp: NtpTime) {
        self.last_sr = Some((ntp.compact(), now));
    }

    /// Packets expected from the first sequence number to the highest.
    #[must_use]
    pub fn expected(&self) -> u64 {
        self.base.map_or(0, |base| self.highest - base + 1)
    }

    /// Packets received (duplicates excluded).
    #[must_use]
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Duplicates seen.
    #[must_use]
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Packets lost since the start (expected − received).
    #[must_use]
    pub fn cumulative_lost(&self) -> i64 {
        self.expected() as i64 - self.received as i64
    }

    /// The report block about `ssrc` at `now`, with `jitter` from the jitter buffer; starts a new
    /// interval for the fraction lost.
    pub fn report_block(&mut self, now: Instant, ssrc: u32, jitter: u32) -> ReportBlock {
        let expected = self.expected();
        let expected_interval = expected - self.expected_prior;
        let received_interval = self.received - self.received_prior;
        self.expected_prior = expected;
        self.received_prior = self.received;
        let lost_interval = expected_interval as i64 - received_interval as i64;
        let fraction_lost = if expected_interval == 0 || lost_interval <= 0 {
            0
        } else {
            ((lost_interval << 8) / expected_interval as i64).min(255) as u8
        };
        let (last_sr, delay_since_last_sr) = self
            .last_sr
            .map_or((0, 0), |(ntp, at)| (ntp, (now.saturating_duration_since(at).as_secs_f64() * 65_536.0) as u32));
        ReportBlock {
            ssrc,
            fraction_lost,
            cumulative_lost: self.cumulative_lost().clamp(-0x80_0000, 0x7F_FFFF) as i32,
            // The unwrapper starts one cycle up; the report counts cycles from zero.
            extended_highest_seq: self.highest.saturating_sub(1 << 16) as u32,
            jitter,
            last_sr,
            delay_since_last_sr,
        }
    }
}

/// The round-trip time a report block about us gives (RFC 3550 §6.4.1): arrival − LSR − DLSR,
/// all in compact NTP units. `None` when the peer has had no SR of ours.
#[must_use]
pub fn round_trip_time(arrival: NtpTime, block: &ReportBlock) -> Option<Duration> {
    if block.last_sr == 0 {
        return None;
    }
    let rtt = arrival.compact().wrapping_sub(block.last_sr).wrapping_sub(block.delay_since_last_sr);
    // A negative result (clock trouble) wraps to a huge value; a minute bounds anything real.
    (rtt < 60 << 16).then(|| Duration::from_secs_f64(f64::from(rtt) / 65_536.0))
}

/// The RTCP report interval (RFC 3550 §6.3): five seconds for a two-party call, the first
/// halved, each randomised to 0.5–1.5 of it and divided by e − 3/2 to make up for the
/// randomisation's bias.
#[must_use]
pub fn report_interval(rng: &mut impl Rng, first: bool) -> Duration {
    let base = if first { 2.5 } else { 5.0 };
    let factor: f64 = rng.gen_range(0.5..1.5);
    Duration::from_secs_f64(base * factor / (std::f64::consts::E - 1.5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn block(ssrc: u32) -> ReportBlock {
        ReportBlock {
            ssrc,
            fraction_lost: 25,
            cumulative_lost: -3,
            extended_highest_seq: 0x0001_0005,
            jitter: 42,
            last_sr: 0x1234_5678,
            delay_since_last_sr: 65_536,
        }
    }

    #[test]
    fn a_compound_packet_round_trips() {
        let packets = vec![
            RtcpPacket::SenderReport {
                ssrc: 7,
                info: SenderInfo {
                    ntp: NtpTime(0xE000_0000_8000_0000),
                    rtp_timestamp: 160,
                    packet_count: 3,
                    octet_count: 480,
                },
                reports: vec![block(9)],
            },
            RtcpPacket::SourceDescription { chunks: vec![(7, Some("svc@example".into()))] },
            RtcpPacket::Bye { ssrcs: vec![7], reason: Some("hangup".into()) },
        ];
        let bytes = RtcpPacket::compound(&packets);
        assert_eq!(bytes.len() % 4, 0);
        assert_eq!(&bytes[..4], [0x81, 200, 0, 12]);
        assert_eq!(RtcpPacket::parse_compound(&bytes), Ok(packets));
        let rr = vec![RtcpPacket::ReceiverReport { ssrc: 1, reports: vec![block(2), block(3)] }];
        assert_eq!(RtcpPacket::parse_compound(&RtcpPacket::compound(&rr)), Ok(rr));
    }

    #[test]
    fn sdes_pads_each_chunk_and_bye_may_have_no_reason() {
        for name in ["", "a", "ab", "abc", "abcd"] {
            let packets = vec![
                RtcpPacket::SourceDescription { chunks: vec![(1, Some(name.into())), (2, None)] },
                RtcpPacket::Bye { ssrcs: vec![1, 2], reason: None },
            ];
            let bytes = RtcpPacket::compound(&packets);
            assert_eq!(bytes.len() % 4, 0);
            assert_eq!(RtcpPacket::parse_compound(&bytes), Ok(packets), "{name:?}");
        }
    }

    #[test]
    fn unknown_types_are_skipped_and_bad_headers_rejected() {
        let app = [0x80, 204, 0, 2, 0, 0, 0, 1, b'n', b'a', b'm', b'e'];
        assert_eq!(RtcpPacket::parse_compound(&app), Ok(vec![RtcpPacket::Other { packet_type: 204 }]));
        assert_eq!(RtcpPacket::parse_compound(&[0x40, 201, 0, 1, 0, 0, 0, 0]), Err(PacketError::Version(1)));
        assert!(RtcpPacket::parse_compound(&[0x80, 201, 0, 5, 0, 0, 0, 0]).is_err());
        assert!(RtcpPacket::parse_compound(&[0x81, 201, 0, 1, 0, 0, 0, 0]).is_err(), "a block announced, none there");
        assert!(RtcpPacket::parse_compound(&[]).is_err());
    }

    #[test]
    fn reception_stats_count_loss_per_interval_and_in_total() {
        let t0 = Instant::now();
        let mut stats = ReceptionStats::default();
        let base = 65_536 + 65_530;
        for seq in (base..base + 100).filter(|s| s % 10 != 3) {
            stats.on_packet(seq);
        }
        assert!(!stats.on_packet(base + 5), "a duplicate");
        let first = stats.report_block(t0, 5, 80);
        assert_eq!(first.cumulative_lost, 10);
        assert_eq!(first.fraction_lost, (10 * 256 / 100) as u8);
        assert_eq!(first.extended_highest_seq, 65_530 + 99, "crossed the wrap: one cycle");
        assert_eq!((first.last_sr, first.delay_since_last_sr), (0, 0));
        for seq in base + 100..base + 200 {
            stats.on_packet(seq);
        }
        stats.on_sender_report(t0, NtpTime(0x0000_1234_5678_0000));
        let second = stats.report_block(t0 + Duration::from_millis(500), 5, 80);
        assert_eq!((second.cumulative_lost, second.fraction_lost), (10, 0));
        assert_eq!((second.last_sr, second.delay_since_last_sr), (0x1234_5678, 32_768));
        assert_eq!(stats.duplicates(), 1);
    }

    #[test]
    fn ntp_time_and_round_trip() {
        let ntp = NtpTime::from_unix(Duration::from_millis(1_500));
        assert_eq!(ntp.0 >> 32, NTP_UNIX_OFFSET + 1);
        assert_eq!(ntp.0 & 0xFFFF_FFFF, 1 << 31);
        let sent = NtpTime(100 << 32);
        let block = ReportBlock { last_sr: sent.compact(), delay_since_last_sr: 65_536 / 2, ..block(1) };
        let rtt = round_trip_time(sent.plus(Duration::from_millis(700)), &block).expect("an SR was reported");
        assert!((rtt.as_secs_f64() - 0.2).abs() < 0.001, "{rtt:?}");
        assert_eq!(round_trip_time(sent, &ReportBlock { last_sr: 0, ..block }), None);
    }

    #[test]
    fn the_interval_is_randomised_around_five_seconds() {
        let mut rng = StdRng::seed_from_u64(1);
        let intervals: Vec<f64> = (0..1_000).map(|_| report_interval(&mut rng, false).as_secs_f64()).collect();
        let (lo, hi) = intervals.iter().fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        assert!(lo >= 2.5 / 1.2183 && hi <= 7.5 / 1.2182, "{lo} {hi}");
        let mean = intervals.iter().sum::<f64>() / 1_000.0;
        assert!((mean - 5.0 / 1.21828).abs() < 0.1, "{mean}");
        assert!(report_interval(&mut rng, true) < Duration::from_secs_f64(3.1));
    }
}
