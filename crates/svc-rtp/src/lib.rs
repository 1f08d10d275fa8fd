//! The telephone media path of a phone call, sans-IO: what flows once SIP (`svc-sip`) has
//! negotiated an RTP session with a phone or carrier.
//!
//! ```text
//! room 48 kHz ─▶ Resampler ─▶ G.711 ─▶ RTP ──────────▶ phone
//! room 48 kHz ◀─ Resampler ◀── jitter buffer ◀─ G.711 ◀─ RTP ◀── phone
//!                                        DTMF (RFC 4733) ◀┘      RTCP both ways
//! ```
//!
//! [`RtpSession`] is the one type an integrator drives per call. Like the rest of svc's cores
//! it never reads the clock, opens a socket or spawns a task: every input carries `now`, and
//! outputs are polled.
//!
//! - [`packet`]: RTP packets (RFC 3550 §5), parsing total over any bytes; sequence-number and
//!   timestamp unwrapping.
//! - [`g711`]: μ-law and A-law (ITU-T G.711).
//! - rate conversion 48 kHz ↔ 8 kHz is svc-audio's `Resampler` (the one the providers use).
//! - [`jitter`]: the adaptive jitter buffer with loss concealment.
//! - [`dtmf`]: telephone events (RFC 4733), sending and receiving.
//! - [`rtcp`]: SR, RR, SDES CNAME and BYE (RFC 3550 §6), reception statistics, report timing.
//! - [`session`]: [`RtpSession`], which ties them together, with SSRC and symmetric-RTP
//!   latching, the media timeout and RTCP scheduling.
//!
//! # Driving a session
//!
//! ```
//! use std::time::{Duration, Instant};
//! use svc_rtp::{G711, NtpTime, RtpSession, SessionConfig, TransmitKind};
//!
//! let now = Instant::now();
//! let remote = "203.0.113.5:40000".parse().expect("an address");
//! let mut config = SessionConfig::new(G711::Pcmu, remote, 42, NtpTime::from_unix(Duration::from_secs(1_700_000_000)));
//! config.telephone_event_pt = Some(101);
//! let mut session = RtpSession::new(config, now);
//!
//! // Every 20 ms: the agent's audio in, the phone's audio out.
//! session.push_room_pcm(now, &[0i16; 960]);
//! while let Some(transmit) = session.poll_transmit() {
//!     assert_eq!(transmit.kind, TransmitKind::Rtp); // send `transmit.bytes` to `transmit.destination`
//! }
//! while let Some(frame) = session.poll_room_pcm(now) {
//!     assert_eq!(frame.pcm.len(), 960); // for the room
//! }
//! // Datagrams from the sockets go to `handle_rtp` / `handle_rtcp`; at `poll_timeout`, call
//! // `handle_timeout`; events (DTMF, BYE, media timeout) come from `poll_event`.
//! session.handle_rtp(now, remote, &[0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0xFF]);
//! session.send_dtmf(now, "123#", 100).expect("telephone-event negotiated");
//! if let Some(at) = session.poll_timeout() {
//!     session.handle_timeout(at);
//! }
//! while let Some(event) = session.poll_event() {
//!     println!("{event:?}");
//! }
//! session.close(now, Some("hangup")); // a final RTCP report with BYE
//! ```
//!
//! # Standards
//!
//! RFC 3550 (RTP and RTCP: header, extended sequence numbers, interarrival jitter A.8,
//! reception statistics A.3, report interval §6.3), RFC 3551 (static payload types 0 and 8),
//! RFC 4733 (telephone events, DTMF), RFC 5761 (recognising RTCP on the RTP port), ITU-T G.711.
//!
//! # Out of scope
//!
//! SRTP and DTLS, video, codecs other than G.711 (Opus over SIP may come later), RTCP feedback
//! and extended reports, several remote sources mixed into one call, and RTP header extensions
//! (skipped when received, never sent). Timing is the integrator's: the session says when it
//! wants to be woken and trusts the `now` it is given.

pub mod dtmf;
pub mod g711;
pub mod jitter;
pub mod packet;
pub mod rtcp;
pub mod session;

pub use dtmf::{DtmfError, DtmfEvent};
pub use g711::G711;
pub use jitter::{FrameKind, JitterConfig, JitterStats};
pub use packet::{PacketError, RtpPacket};
pub use rtcp::{NtpTime, ReportBlock};
pub use session::{
    MediaEvent, RoomFrame, RtpSession, SessionConfig, SessionStats, SymmetricRtp, Transmit, TransmitKind,
};
