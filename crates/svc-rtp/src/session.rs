//! [`RtpSession`]: one call's media, sans-IO. The integrator feeds it datagrams and room audio
//! with the time they happened, and drains datagrams to send, room audio to play and events.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svc_audio::resample::Resampler;

use crate::dtmf::{DtmfError, DtmfEvent, DtmfReceiver, DtmfSender};
use crate::g711::G711;
use crate::jitter::{CLOCK_RATE, FRAME_SAMPLES, FrameKind, JitterBuffer, JitterConfig, JitterStats};
use crate::packet::{RtpPacket, SeqUnwrapper, TimestampUnwrapper, is_rtcp};
use crate::rtcp::{self, NtpTime, ReceptionStats, ReportBlock, RtcpPacket, SenderInfo};

/// The room's 48 kHz over the telephone's 8 kHz.
const ROOM_SAMPLES_PER_TELEPHONE_SAMPLE: usize = 6;

/// A pause in room audio longer than this starts a new talkspurt: the timestamp jumps over the
/// pause and the marker bit is set.
const SEND_GAP: Duration = Duration::from_millis(60);
/// A new SSRC is adopted once the old one has been silent this long (or after two of its
/// packets in a row), so a stray packet cannot take the stream over.
const SSRC_SWITCH_SILENCE: Duration = Duration::from_millis(60);

/// Whether to send to where the remote's packets come from instead of the SDP address.
///
/// Latching (symmetric RTP, RFC 4961 behaviour) is what makes a phone behind NAT work: its SDP
/// names a private address it cannot be reached at. The price is that the first packet from
/// *anyone* who learns the port decides where the call's audio goes (and whose audio is played),
/// so an attacker who races the real peer hijacks the media. With latching off only packets from
/// the SDP address's IP are accepted and media always goes to the SDP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SymmetricRtp {
    /// Never latch: send to the SDP address, accept only its IP.
    Off,
    /// Latch onto the source of the first valid RTP (and RTCP) packet.
    On,
    /// Latch only when the SDP address cannot be reached as given: unspecified, private (RFC
    /// 1918, RFC 6598 shared, IPv6 unique-local) or link-local.
    #[default]
    Auto,
}

impl SymmetricRtp {
    fn latches(self, remote: IpAddr) -> bool {
        match self {
            SymmetricRtp::Off => false,
            SymmetricRtp::On => true,
            SymmetricRtp::Auto => is_unroutable(remote),
        }
    }
}

/// Whether an address from SDP is one a public peer cannot send to.
#[must_use]
pub fn is_unroutable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_unspecified() || v4.is_private() || v4.is_link_local() || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_unspecified() || (first & 0xFE00) == 0xFC00 || (first & 0xFFC0) == 0xFE80
        }
    }
}

/// What the negotiation decided, and the knobs of one call's media.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Seeds the SSRC, the initial sequence number and timestamp, and RTCP's randomisation.
    /// Use a fresh random value per call in production, a constant in tests.
    pub seed: u64,
    /// The codec of the SDP answer: what is sent. Both laws are decoded on receive.
    pub codec: G711,
    /// The telephone-event payload type of the SDP answer, if any.
    pub telephone_event_pt: Option<u8>,
    /// Where to send RTP (the answer's connection address and media port).
    pub remote_rtp: SocketAddr,
    /// Where to send RTCP: the `a=rtcp` address, or the RTP port + 1.
    pub remote_rtcp: SocketAddr,
    /// RTCP on the RTP port (RFC 5761, `a=rtcp-mux` in the answer).
    pub rtcp_mux: bool,
    /// Address latching; see [`SymmetricRtp`].
    pub symmetric_rtp: SymmetricRtp,
    /// Our RTCP CNAME.
    pub cname: String,
    /// No RTP for this long raises [`MediaEvent::MediaTimeout`].
    pub media_timeout: Duration,
    /// The wall-clock time at the session's creation, for the NTP timestamps of sender reports.
    pub ntp_at_start: NtpTime,
    /// The receive jitter buffer's bounds.
    pub jitter: JitterConfig,
    /// Silence between DTMF digits sent.
    pub dtmf_gap: Duration,
}

impl SessionConfig {
    /// A configuration with the defaults: RTCP on the next port, latching [`SymmetricRtp::Auto`],
    /// a 30 s media timeout, the default jitter buffer and a 60 ms DTMF gap.
    #[must_use]
    pub fn new(codec: G711, remote_rtp: SocketAddr, seed: u64, ntp_at_start: NtpTime) -> SessionConfig {
        let mut remote_rtcp = remote_rtp;
        remote_rtcp.set_port(remote_rtp.port().wrapping_add(1));
        SessionConfig {
            seed,
            codec,
            telephone_event_pt: None,
            remote_rtp,
            remote_rtcp,
            rtcp_mux: false,
            symmetric_rtp: SymmetricRtp::default(),
            cname: "svc".to_owned(),
            media_timeout: Duration::from_secs(30),
            ntp_at_start,
            jitter: JitterConfig::default(),
            dtmf_gap: Duration::from_millis(60),
        }
    }
}

/// Which socket a datagram goes out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransmitKind {
    /// The RTP socket.
    Rtp,
    /// The RTCP socket (the RTP socket under rtcp-mux; the destination says where).
    Rtcp,
}

/// A datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where to.
    pub destination: SocketAddr,
    /// RTP or RTCP.
    pub kind: TransmitKind,
    /// The datagram.
    pub bytes: Vec<u8>,
}

/// Something for the integrator's timeline (or the call's logic) to know.
#[derive(Debug, Clone, PartialEq)]
pub enum MediaEvent {
    /// A key press from the phone.
    Dtmf(DtmfEvent),
    /// The remote source announced it is leaving.
    RemoteBye {
        /// Its SSRC.
        ssrc: u32,
        /// Its reason, if any.
        reason: Option<String>,
    },
    /// The remote stream's SSRC was latched (`previous` is `None`) or changed.
    RemoteSsrc {
        /// The SSRC before.
        previous: Option<u32>,
        /// The SSRC now.
        ssrc: u32,
    },
    /// Symmetric RTP moved where media is sent.
    RemoteAddressLatched {
        /// RTP or RTCP.
        kind: TransmitKind,
        /// The new destination.
        address: SocketAddr,
    },
    /// No RTP for the configured time (raised once until RTP comes back).
    MediaTimeout {
        /// How long since the last packet (or the session's start).
        silent_for: Duration,
    },
    /// RTP came back after a timeout.
    MediaResumed,
    /// The remote's RTCP report about our stream.
    RemoteReport {
        /// The report block.
        block: ReportBlock,
        /// The round-trip time it implies, once the remote has had one of our SRs.
        round_trip: Option<Duration>,
    },
}

/// A 20 ms frame of 48 kHz room audio from the phone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomFrame {
    /// 960 samples.
    pub pcm: Vec<i16>,
    /// Received audio, concealment or silence.
    pub kind: FrameKind,
}

/// Counters for the integrator's timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SessionStats {
    /// RTP packets sent (audio and events).
    pub packets_sent: u64,
    /// Payload octets sent.
    pub octets_sent: u64,
    /// RTP packets received from the latched source (duplicates excluded).
    pub packets_received: u64,
    /// Packets lost (expected − received, RFC 3550).
    pub packets_lost: i64,
    /// Duplicates received.
    pub packets_duplicate: u64,
    /// Datagrams that were not valid RTP or RTCP.
    pub malformed: u64,
    /// Valid packets ignored: unexpected source address, payload type or SSRC.
    pub ignored: u64,
    /// The jitter buffer's counters (late packets, concealment, delay, jitter).
    pub jitter: JitterStats,
    /// The latest round-trip time from RTCP.
    pub round_trip: Option<Duration>,
}

/// One call's media. See the crate documentation for the calling pattern.
#[derive(Debug)]
pub struct RtpSession {
    config: SessionConfig,
    rng: StdRng,
    start: Instant,
    /// The latest `now` any input carried.
    last_now: Instant,
    ssrc: u32,
    closed: bool,
    remote_rtp: SocketAddr,
    remote_rtcp: SocketAddr,
    latch_rtp: bool,
    latch_rtcp: bool,
    // Sending.
    sequence: u16,
    /// The room's 48 kHz to the telephone's 8 kHz.
    down: Resampler,
    /// 8 kHz samples not yet packetised, and the timestamp of the first.
    pending: Vec<i16>,
    pending_ts: u32,
    /// The media clock: the instant and timestamp of the next sample the room will push.
    send_clock: Option<(Instant, u32)>,
    initial_ts: u32,
    marker_next: bool,
    dtmf_out: DtmfSender,
    packets_sent: u64,
    octets_sent: u64,
    sent_since_report: bool,
    // Receiving.
    remote_ssrc: Option<u32>,
    ssrc_candidate: Option<(u32, u32)>,
    seq_unwrap: SeqUnwrapper,
    ts_unwrap: TimestampUnwrapper,
    reception: ReceptionStats,
    jitter: JitterBuffer,
    /// The telephone's 8 kHz to the room's 48 kHz.
    up: Resampler,
    dtmf_in: DtmfReceiver,
    last_received: Option<Instant>,
    /// Where the media timeout counts from when no packet is later.
    silence_since: Instant,
    media_timeout: Option<Duration>,
    timed_out: bool,
    malformed: u64,
    ignored: u64,
    round_trip: Option<Duration>,
    // RTCP.
    next_report: Instant,
    transmits: VecDeque<Transmit>,
    events: VecDeque<MediaEvent>,
}

impl RtpSession {
    /// A session created at `now`.
    #[must_use]
    pub fn new(config: SessionConfig, now: Instant) -> RtpSession {
        let mut rng = StdRng::seed_from_u64(config.seed);
        let ssrc = rng.r#gen::<u32>();
        let sequence = rng.r#gen::<u16>();
        let initial_ts = rng.r#gen::<u32>();
        let next_report = now + rtcp::report_interval(&mut rng, true);
        let latch_rtp = config.symmetric_rtp.latches(config.remote_rtp.ip());
        let remote_rtcp = if config.rtcp_mux { config.remote_rtp } else { config.remote_rtcp };
        RtpSession {
            rng,
            start: now,
            last_now: now,
            ssrc,
            closed: false,
            remote_rtp: config.remote_rtp,
            remote_rtcp,
            latch_rtp,
            latch_rtcp: latch_rtp && !config.rtcp_mux,
            sequence,
            down: Resampler::room_to_telephone(),
            pending: Vec::with_capacity(FRAME_SAMPLES),
            pending_ts: initial_ts,
            send_clock: None,
            initial_ts,
            marker_next: true,
            dtmf_out: DtmfSender::new(config.dtmf_gap),
            packets_sent: 0,
            octets_sent: 0,
            sent_since_report: false,
            remote_ssrc: None,
            ssrc_candidate: None,
            seq_unwrap: SeqUnwrapper::new(),
            ts_unwrap: TimestampUnwrapper::new(),
            reception: ReceptionStats::default(),
            jitter: JitterBuffer::new(config.jitter),
            up: Resampler::telephone_to_room(),
            dtmf_in: DtmfReceiver::new(),
            last_received: None,
            silence_since: now,
            media_timeout: Some(config.media_timeout),
            timed_out: false,
            malformed: 0,
            ignored: 0,
            round_trip: None,
            next_report,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            config,
        }
    }

    /// Our SSRC.
    #[must_use]
    pub fn ssrc(&self) -> u32 {
        self.ssrc
    }

    /// The remote stream's SSRC, once latched.
    #[must_use]
    pub fn remote_ssrc(&self) -> Option<u32> {
        self.remote_ssrc
    }

    /// Where RTP goes now (the SDP address, or the latched one).
    #[must_use]
    pub fn remote_rtp(&self) -> SocketAddr {
        self.remote_rtp
    }

    /// New remote addresses from a later SDP (a re-INVITE, or a 200 OK answering differently
    /// from early media). Latching starts over under the configured [`SymmetricRtp`] policy.
    pub fn set_remote(&mut self, remote_rtp: SocketAddr, remote_rtcp: SocketAddr) {
        self.config.remote_rtp = remote_rtp;
        self.config.remote_rtcp = remote_rtcp;
        self.remote_rtp = remote_rtp;
        self.remote_rtcp = if self.config.rtcp_mux { remote_rtp } else { remote_rtcp };
        self.latch_rtp = self.config.symmetric_rtp.latches(remote_rtp.ip());
        self.latch_rtcp = self.latch_rtp && !self.config.rtcp_mux;
    }

    /// Changes the media timeout, counted from `now` (or the last packet, if later); `None`
    /// turns it off, e.g. while the call is on hold and the phone sends nothing by design.
    pub fn set_media_timeout(&mut self, now: Instant, timeout: Option<Duration>) {
        self.touch(now);
        self.media_timeout = timeout;
        self.timed_out = false;
        self.silence_since = self.last_received.map_or(now, |at| at.max(now));
    }

    /// Counters for the timeline.
    #[must_use]
    pub fn stats(&self) -> SessionStats {
        SessionStats {
            packets_sent: self.packets_sent,
            octets_sent: self.octets_sent,
            packets_received: self.reception.received(),
            packets_lost: self.reception.cumulative_lost(),
            packets_duplicate: self.reception.duplicates(),
            malformed: self.malformed,
            ignored: self.ignored,
            jitter: self.jitter.stats(),
            round_trip: self.round_trip,
        }
    }

    fn touch(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
    }

    // ---- Receiving -------------------------------------------------------------------------

    /// A datagram that arrived on the RTP socket from `from`. Under rtcp-mux, RTCP arriving
    /// here is recognised and handled as such.
    pub fn handle_rtp(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) {
        self.touch(now);
        if self.closed {
            return;
        }
        if is_rtcp(bytes) {
            self.handle_rtcp(now, from, bytes);
            return;
        }
        let Ok(packet) = RtpPacket::parse(bytes) else {
            self.malformed += 1;
            return;
        };
        // Either G.711 law is decoded, whichever was negotiated: an answerer may send any codec
        // of its answer (RFC 3264 §5.1) and both cost nothing. Comfort noise (RFC 3389) and
        // anything else is ignored, so it plays as silence.
        let event = self.config.telephone_event_pt == Some(packet.payload_type);
        let audio = if event { None } else { G711::from_payload_type(packet.payload_type) };
        if !(audio.is_some() || event)
            || !self.accept_source(from, TransmitKind::Rtp)
            || !self.accept_ssrc(now, packet.ssrc)
        {
            self.ignored += 1;
            return;
        }
        let sequence = self.seq_unwrap.extend(u32::from(packet.sequence));
        if !self.reception.on_packet(sequence) {
            return;
        }
        self.last_received = Some(now);
        if self.timed_out {
            self.timed_out = false;
            self.events.push_back(MediaEvent::MediaResumed);
        }
        if let Some(law) = audio {
            let timestamp = self.ts_unwrap.extend(packet.timestamp);
            let mut pcm = Vec::with_capacity(packet.payload.len());
            law.decode(&packet.payload, &mut pcm);
            // What became of the packet (late, duplicate, …) is in the jitter buffer's counters.
            self.jitter.push(now, sequence, timestamp, pcm);
        } else {
            self.dtmf_in.handle(now, packet.timestamp, &packet.payload);
            self.drain_dtmf();
        }
    }

    fn drain_dtmf(&mut self) {
        while let Some(event) = self.dtmf_in.poll_event() {
            self.events.push_back(MediaEvent::Dtmf(event));
        }
    }

    /// Whether a packet from `from` is from the peer; latches the address when configured to.
    fn accept_source(&mut self, from: SocketAddr, kind: TransmitKind) -> bool {
        let rtp_ip = self.remote_rtp.ip();
        let (latch, current) = match kind {
            TransmitKind::Rtp => (&mut self.latch_rtp, &mut self.remote_rtp),
            TransmitKind::Rtcp => (&mut self.latch_rtcp, &mut self.remote_rtcp),
        };
        if *latch {
            *latch = false;
            if *current != from {
                *current = from;
                self.events.push_back(MediaEvent::RemoteAddressLatched { kind, address: from });
            }
            if kind == TransmitKind::Rtp && self.config.rtcp_mux {
                // Under rtcp-mux the reports follow the media to the latched address.
                self.remote_rtcp = from;
            }
            return true;
        }
        from.ip() == current.ip() || from.ip() == rtp_ip
    }

    /// SSRC latching: the first source is adopted; another one replaces it once the current one
    /// has gone quiet or the newcomer sends twice in a row.
    fn accept_ssrc(&mut self, now: Instant, ssrc: u32) -> bool {
        let Some(current) = self.remote_ssrc else {
            self.adopt_ssrc(ssrc);
            return true;
        };
        if ssrc == current {
            self.ssrc_candidate = None;
            return true;
        }
        let quiet = self.last_received.is_none_or(|at| now.saturating_duration_since(at) >= SSRC_SWITCH_SILENCE);
        let count = match self.ssrc_candidate {
            Some((candidate, count)) if candidate == ssrc => count + 1,
            _ => 1,
        };
        if quiet || count >= 2 {
            self.adopt_ssrc(ssrc);
            return true;
        }
        self.ssrc_candidate = Some((ssrc, count));
        false
    }

    fn adopt_ssrc(&mut self, ssrc: u32) {
        let previous = self.remote_ssrc.replace(ssrc);
        self.ssrc_candidate = None;
        if previous.is_some() {
            self.seq_unwrap.reset();
            self.ts_unwrap.reset();
            self.reception = ReceptionStats::default();
            self.jitter.reset();
            self.dtmf_in.reset();
        }
        self.events.push_back(MediaEvent::RemoteSsrc { previous, ssrc });
    }

    /// A datagram that arrived on the RTCP socket.
    pub fn handle_rtcp(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) {
        self.touch(now);
        if self.closed {
            return;
        }
        let Ok(packets) = RtcpPacket::parse_compound(bytes) else {
            self.malformed += 1;
            return;
        };
        if !self.accept_source(from, TransmitKind::Rtcp) {
            self.ignored += 1;
            return;
        }
        let arrival = self.ntp_at(now);
        for packet in packets {
            match packet {
                RtcpPacket::SenderReport { ssrc, info, reports } => {
                    if self.remote_ssrc.is_none_or(|remote| remote == ssrc) {
                        self.reception.on_sender_report(now, info.ntp);
                    }
                    self.take_reports(arrival, &reports);
                }
                RtcpPacket::ReceiverReport { reports, .. } => self.take_reports(arrival, &reports),
                RtcpPacket::Bye { ssrcs, reason } => {
                    let ours = ssrcs.iter().copied().find(|s| self.remote_ssrc.is_none_or(|remote| remote == *s));
                    if let Some(ssrc) = ours {
                        self.events.push_back(MediaEvent::RemoteBye { ssrc, reason });
                    }
                }
                RtcpPacket::SourceDescription { .. } | RtcpPacket::Other { .. } => {}
            }
        }
    }

    fn take_reports(&mut self, arrival: NtpTime, reports: &[ReportBlock]) {
        for block in reports.iter().filter(|block| block.ssrc == self.ssrc) {
            let round_trip = rtcp::round_trip_time(arrival, block);
            if round_trip.is_some() {
                self.round_trip = round_trip;
            }
            self.events.push_back(MediaEvent::RemoteReport { block: *block, round_trip });
        }
    }

    /// The next 20 ms of the phone's audio at 48 kHz, once due at `now` (call until `None`
    /// after waking at [`RtpSession::poll_timeout`]). `None` also while nothing is being
    /// received: before the first packet and after a second without any.
    pub fn poll_room_pcm(&mut self, now: Instant) -> Option<RoomFrame> {
        self.touch(now);
        let frame = self.jitter.pop(now)?;
        let mut pcm = Vec::with_capacity(FRAME_SAMPLES * ROOM_SAMPLES_PER_TELEPHONE_SAMPLE);
        self.up.process(&frame.samples, &mut pcm);
        Some(RoomFrame { pcm, kind: frame.kind })
    }

    // ---- Sending ---------------------------------------------------------------------------

    /// The media clock's timestamp at `now`.
    fn timestamp_at(&mut self, now: Instant) -> u32 {
        let (at, ts) = *self.send_clock.get_or_insert((now, self.initial_ts));
        let elapsed = |from: Instant, to: Instant| to.saturating_duration_since(from).as_micros() as u64 * 8 / 1_000;
        if now >= at { ts.wrapping_add(elapsed(at, now) as u32) } else { ts.wrapping_sub(elapsed(now, at) as u32) }
    }

    /// 48 kHz mono room audio to send, pushed at `now` (normally one 20 ms frame per 20 ms).
    /// After a pause of more than 60 ms the timestamp jumps over it and the next packet carries
    /// the marker bit. Audio pushed while a DTMF digit is being sent is dropped.
    pub fn push_room_pcm(&mut self, now: Instant, pcm: &[i16]) {
        self.touch(now);
        if self.closed {
            return;
        }
        let continuous = self.send_clock.is_some_and(|(at, _)| now <= at + SEND_GAP);
        if !continuous {
            let ts = self.timestamp_at(now);
            self.send_clock = Some((now, ts));
            self.pending.clear();
            self.pending_ts = ts;
            self.down.reset();
            self.marker_next = true;
        }
        let before = self.pending.len();
        self.down.process(pcm, &mut self.pending);
        let produced = (self.pending.len() - before) as u32;
        if let Some((at, ts)) = self.send_clock.as_mut() {
            *at += Duration::from_micros(u64::from(produced) * 1_000_000 / u64::from(CLOCK_RATE));
            *ts = ts.wrapping_add(produced);
        }
        while self.pending.len() >= FRAME_SAMPLES {
            let samples: Vec<i16> = self.pending.drain(..FRAME_SAMPLES).collect();
            let timestamp = self.pending_ts;
            self.pending_ts = self.pending_ts.wrapping_add(FRAME_SAMPLES as u32);
            if self.dtmf_out.is_sending() {
                self.marker_next = true;
                continue;
            }
            let mut payload = Vec::with_capacity(FRAME_SAMPLES);
            self.config.codec.encode(&samples, &mut payload);
            let marker = std::mem::take(&mut self.marker_next);
            self.send_rtp(self.config.codec.payload_type(), marker, timestamp, payload);
        }
    }

    /// Queues DTMF `digits`, each held for `duration_ms`, to send as RFC 4733 events.
    pub fn send_dtmf(&mut self, now: Instant, digits: &str, duration_ms: u32) -> Result<(), DtmfError> {
        self.touch(now);
        if self.config.telephone_event_pt.is_none() {
            return Err(DtmfError::NotNegotiated);
        }
        self.dtmf_out.enqueue(digits, duration_ms)?;
        self.send_due_dtmf(now);
        Ok(())
    }

    fn send_due_dtmf(&mut self, now: Instant) {
        let Some(payload_type) = self.config.telephone_event_pt else { return };
        loop {
            let timestamp = self.timestamp_at(now);
            let Some(packet) = self.dtmf_out.poll(now, || timestamp) else { break };
            self.send_rtp(payload_type, packet.marker, packet.timestamp, packet.payload.to_bytes().to_vec());
        }
    }

    fn send_rtp(&mut self, payload_type: u8, marker: bool, timestamp: u32, payload: Vec<u8>) {
        let octets = payload.len() as u64;
        let packet = RtpPacket {
            marker,
            payload_type,
            sequence: self.sequence,
            timestamp,
            ssrc: self.ssrc,
            csrcs: Vec::new(),
            payload,
        };
        let Ok(bytes) = packet.to_bytes() else { return };
        self.sequence = self.sequence.wrapping_add(1);
        self.packets_sent += 1;
        self.octets_sent += octets;
        self.sent_since_report = true;
        self.transmits.push_back(Transmit { destination: self.remote_rtp, kind: TransmitKind::Rtp, bytes });
    }

    // ---- Time, RTCP and closing ------------------------------------------------------------

    /// Since when no RTP has come.
    fn silent_since(&self) -> Instant {
        self.last_received.map_or(self.silence_since, |at| at.max(self.silence_since))
    }

    fn ntp_at(&self, now: Instant) -> NtpTime {
        self.config.ntp_at_start.plus(now.saturating_duration_since(self.start))
    }

    /// Does what is due at `now`: DTMF packets, RTCP reports, the media timeout, an incoming
    /// DTMF event whose end never came.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.touch(now);
        if self.closed {
            return;
        }
        self.send_due_dtmf(now);
        self.dtmf_in.handle_timeout(now);
        self.drain_dtmf();
        let silent_for = now.saturating_duration_since(self.silent_since());
        if !self.timed_out && self.media_timeout.is_some_and(|timeout| silent_for >= timeout) {
            self.timed_out = true;
            self.events.push_back(MediaEvent::MediaTimeout { silent_for });
        }
        if now >= self.next_report {
            let report = self.report(now);
            self.send_rtcp(&report);
            self.next_report = now + rtcp::report_interval(&mut self.rng, false);
        }
    }

    /// The report RFC 3550 §6.4 calls for now: SR if we sent RTP since the last one, else RR;
    /// a block about the remote source once it sent; and our CNAME.
    fn report(&mut self, now: Instant) -> Vec<RtcpPacket> {
        let reports = match self.remote_ssrc {
            Some(remote) if self.reception.received() > 0 => {
                vec![self.reception.report_block(now, remote, self.jitter.jitter_samples())]
            }
            _ => Vec::new(),
        };
        let first = if std::mem::take(&mut self.sent_since_report) {
            let info = SenderInfo {
                ntp: self.ntp_at(now),
                rtp_timestamp: self.timestamp_at(now),
                packet_count: self.packets_sent as u32,
                octet_count: self.octets_sent as u32,
            };
            RtcpPacket::SenderReport { ssrc: self.ssrc, info, reports }
        } else {
            RtcpPacket::ReceiverReport { ssrc: self.ssrc, reports }
        };
        vec![first, RtcpPacket::SourceDescription { chunks: vec![(self.ssrc, Some(self.config.cname.clone()))] }]
    }

    fn send_rtcp(&mut self, packets: &[RtcpPacket]) {
        let bytes = RtcpPacket::compound(packets);
        self.transmits.push_back(Transmit { destination: self.remote_rtcp, kind: TransmitKind::Rtcp, bytes });
    }

    /// Ends the session: a last report with a BYE goes out, and every later input is ignored.
    pub fn close(&mut self, now: Instant, reason: Option<&str>) {
        self.touch(now);
        if self.closed {
            return;
        }
        let mut packets = self.report(now);
        packets.push(RtcpPacket::Bye { ssrcs: vec![self.ssrc], reason: reason.map(str::to_owned) });
        self.send_rtcp(&packets);
        self.closed = true;
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<MediaEvent> {
        self.events.pop_front()
    }

    /// When to call [`RtpSession::handle_timeout`] (and [`RtpSession::poll_room_pcm`]) next;
    /// `None` once closed.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let media_timeout = self.media_timeout.filter(|_| !self.timed_out).map(|timeout| self.silent_since() + timeout);
        [
            Some(self.next_report),
            media_timeout,
            self.jitter.next_due(),
            self.dtmf_out.next_due(self.last_now),
            self.dtmf_in.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

#[cfg(test)]
mod tests;
