//! A simulated network between two sessions in virtual time, signals, and their comparison.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svc_rtp::{G711, MediaEvent, NtpTime, RoomFrame, RtpSession, SessionConfig, Transmit, TransmitKind};

pub const SVC: &str = "198.51.100.10:20000";
pub const PHONE: &str = "203.0.113.20:30000";

pub fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// How one direction of the network treats packets.
#[derive(Debug, Clone, Copy)]
pub struct Conditions {
    pub delay: Duration,
    /// Extra delay, uniform in `0..jitter`: packets overtake each other when it exceeds 20 ms.
    pub jitter: Duration,
    pub loss: f64,
    pub duplicate: f64,
}

impl Conditions {
    pub fn clean() -> Conditions {
        Conditions { delay: Duration::from_millis(30), jitter: Duration::ZERO, loss: 0.0, duplicate: 0.0 }
    }
}

/// One direction: packets in flight with their delivery time.
pub struct Link {
    pub conditions: Conditions,
    rng: StdRng,
    in_flight: Vec<(Instant, u64, Transmit)>,
    order: u64,
    /// Drops RTP packets for which this returns true (given the count of RTP packets sent).
    pub drop_rtp: Option<Box<dyn FnMut(u64) -> bool>>,
    pub rtp_sent: u64,
    pub rtp_dropped: u64,
}

impl Link {
    pub fn new(conditions: Conditions, seed: u64) -> Link {
        Link {
            conditions,
            rng: StdRng::seed_from_u64(seed),
            in_flight: Vec::new(),
            order: 0,
            drop_rtp: None,
            rtp_sent: 0,
            rtp_dropped: 0,
        }
    }

    pub fn send(&mut self, now: Instant, transmit: Transmit) {
        if transmit.kind == TransmitKind::Rtp {
            let index = self.rtp_sent;
            self.rtp_sent += 1;
            if self.drop_rtp.as_mut().is_some_and(|drop| drop(index)) {
                self.rtp_dropped += 1;
                return;
            }
        }
        if self.rng.gen_bool(self.conditions.loss) {
            return;
        }
        let copies = if self.rng.gen_bool(self.conditions.duplicate) { 2 } else { 1 };
        for _ in 0..copies {
            let jitter = if self.conditions.jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_micros(self.rng.gen_range(0..self.conditions.jitter.as_micros() as u64))
            };
            self.order += 1;
            self.in_flight.push((now + self.conditions.delay + jitter, self.order, transmit.clone()));
        }
    }

    pub fn deliver(&mut self, now: Instant) -> Vec<Transmit> {
        self.in_flight.sort_by_key(|(at, order, _)| (*at, *order));
        let due = self.in_flight.iter().take_while(|(at, _, _)| *at <= now).count();
        self.in_flight.drain(..due).map(|(_, _, t)| t).collect()
    }
}

/// One end: a session, what it played and what it heard about.
pub struct End {
    pub session: RtpSession,
    pub address: SocketAddr,
    pub played: Vec<RoomFrame>,
    pub events: Vec<(Duration, MediaEvent)>,
}

pub fn config(seed: u64, remote: &str) -> SessionConfig {
    let mut config =
        SessionConfig::new(G711::Pcmu, addr(remote), seed, NtpTime::from_unix(Duration::from_secs(1_750_000_000)));
    config.telephone_event_pt = Some(101);
    config
}

/// Two sessions and the network between them, stepped 1 ms at a time.
pub struct Call {
    pub t0: Instant,
    pub now: Instant,
    pub svc: End,
    pub phone: End,
    /// svc → phone.
    pub uplink: Link,
    /// phone → svc.
    pub downlink: Link,
}

impl Call {
    pub fn new(svc: SessionConfig, phone: SessionConfig, to_phone: Conditions, to_svc: Conditions) -> Call {
        Call::with_network_seed(svc, phone, to_phone, to_svc, 11)
    }

    /// [`Call::new`] with another seed for the network's randomness.
    pub fn with_network_seed(
        svc: SessionConfig,
        phone: SessionConfig,
        to_phone: Conditions,
        to_svc: Conditions,
        seed: u64,
    ) -> Call {
        let t0 = Instant::now();
        Call {
            t0,
            now: t0,
            svc: End { session: RtpSession::new(svc, t0), address: addr(SVC), played: Vec::new(), events: Vec::new() },
            phone: End {
                session: RtpSession::new(phone, t0),
                address: addr(PHONE),
                played: Vec::new(),
                events: Vec::new(),
            },
            uplink: Link::new(to_phone, seed),
            downlink: Link::new(to_svc, seed + 1),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    /// Runs for `duration`; `svc_audio` / `phone_audio` give each side's 20 ms frame `n` (or
    /// `None` for a pause).
    pub fn run(
        &mut self,
        duration: Duration,
        mut svc_audio: impl FnMut(u64) -> Option<Vec<i16>>,
        mut phone_audio: impl FnMut(u64) -> Option<Vec<i16>>,
    ) {
        let end = self.now + duration;
        while self.now < end {
            let ms = (self.now - self.t0).as_millis() as u64;
            if ms.is_multiple_of(20) {
                if let Some(frame) = svc_audio(ms / 20) {
                    self.svc.session.push_room_pcm(self.now, &frame);
                }
                if let Some(frame) = phone_audio(ms / 20) {
                    self.phone.session.push_room_pcm(self.now, &frame);
                }
            }
            self.step();
            self.now += Duration::from_millis(1);
        }
    }

    fn step(&mut self) {
        let (now, elapsed) = (self.now, self.now - self.t0);
        step_end(now, elapsed, &mut self.svc, &mut self.downlink, &mut self.uplink, addr(PHONE));
        step_end(now, elapsed, &mut self.phone, &mut self.uplink, &mut self.downlink, addr(SVC));
    }
}

fn step_end(now: Instant, elapsed: Duration, end: &mut End, link_in: &mut Link, link_out: &mut Link, from: SocketAddr) {
    for transmit in link_in.deliver(now) {
        match transmit.kind {
            TransmitKind::Rtp => end.session.handle_rtp(now, from, &transmit.bytes),
            TransmitKind::Rtcp => end.session.handle_rtcp(now, from, &transmit.bytes),
        }
    }
    if end.session.poll_timeout().is_some_and(|at| at <= now) {
        end.session.handle_timeout(now);
    }
    while let Some(frame) = end.session.poll_room_pcm(now) {
        end.played.push(frame);
    }
    while let Some(transmit) = end.session.poll_transmit() {
        assert_eq!(transmit.destination.ip(), from.ip(), "sent to the peer");
        link_out.send(now, transmit);
    }
    while let Some(event) = end.session.poll_event() {
        end.events.push((elapsed, event));
    }
}

/// Speech-like test audio at 48 kHz: a gliding voice (120–200 Hz) with harmonics up to 3.3 kHz,
/// syllables at 4 Hz, every harmonic's phase advancing continuously.
pub fn speech_like(seconds: f64) -> Vec<i16> {
    let n = (48_000.0 * seconds) as usize;
    let mut phase = 0.0f64;
    (0..n)
        .map(|i| {
            let t = i as f64 / 48_000.0;
            let f0 = 160.0 + 40.0 * (2.0 * std::f64::consts::PI * 0.7 * t).sin();
            phase += 2.0 * std::f64::consts::PI * f0 / 48_000.0;
            let envelope = 0.15 + 0.85 * (2.0 * std::f64::consts::PI * 2.0 * t).sin().abs();
            let mut sample = 0.0;
            for k in 1..=20 {
                if k as f64 * f0 < 3_300.0 {
                    sample += (k as f64 * phase + k as f64).sin() / k as f64;
                }
            }
            (4_000.0 * envelope * sample).round() as i16
        })
        .collect()
}

pub fn frames(signal: &[i16]) -> Vec<Vec<i16>> {
    signal.chunks(960).map(<[i16]>::to_vec).collect()
}

pub fn concatenate(frames: &[RoomFrame]) -> Vec<i16> {
    frames.iter().flat_map(|f| f.pcm.iter().copied()).collect()
}

// ---- Correlation ------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Complex {
    re: f64,
    im: f64,
}

fn fft(data: &mut [Complex], inverse: bool) {
    let n = data.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            data.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let angle = 2.0 * std::f64::consts::PI / len as f64 * if inverse { 1.0 } else { -1.0 };
        let (wr, wi) = (angle.cos(), angle.sin());
        for start in (0..n).step_by(len) {
            let (mut cr, mut ci) = (1.0, 0.0);
            for k in 0..len / 2 {
                let a = data[start + k];
                let b = data[start + k + len / 2];
                let (br, bi) = (b.re * cr - b.im * ci, b.re * ci + b.im * cr);
                data[start + k] = Complex { re: a.re + br, im: a.im + bi };
                data[start + k + len / 2] = Complex { re: a.re - br, im: a.im - bi };
                (cr, ci) = (cr * wr - ci * wi, cr * wi + ci * wr);
            }
        }
        len <<= 1;
    }
}

/// The best normalised cross-correlation of `reference` against `received[lag..lag + len]`
/// over lags `0..=max_lag`: (coefficient, lag).
pub fn best_correlation(reference: &[i16], received: &[i16], max_lag: usize) -> (f64, usize) {
    let len = reference.len();
    let span = (len + max_lag).min(received.len());
    if span < len {
        return (0.0, 0);
    }
    let size = (len + span).next_power_of_two();
    let mut a: Vec<Complex> = received[..span].iter().map(|&x| Complex { re: f64::from(x), im: 0.0 }).collect();
    a.resize(size, Complex { re: 0.0, im: 0.0 });
    let mut b: Vec<Complex> = reference.iter().map(|&x| Complex { re: f64::from(x), im: 0.0 }).collect();
    b.resize(size, Complex { re: 0.0, im: 0.0 });
    fft(&mut a, false);
    fft(&mut b, false);
    let mut product: Vec<Complex> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| Complex { re: x.re * y.re + x.im * y.im, im: x.im * y.re - x.re * y.im })
        .collect();
    fft(&mut product, true);
    let reference_energy: f64 = reference.iter().map(|&x| f64::from(x).powi(2)).sum();
    let mut prefix = vec![0.0; span + 1];
    for (i, &x) in received[..span].iter().enumerate() {
        prefix[i + 1] = prefix[i] + f64::from(x).powi(2);
    }
    let mut best = (0.0, 0);
    for lag in 0..=(span - len) {
        let energy = prefix[lag + len] - prefix[lag];
        if energy <= 0.0 || reference_energy <= 0.0 {
            continue;
        }
        let coefficient = product[lag].re / size as f64 / (energy * reference_energy).sqrt();
        if coefficient > best.0 {
            best = (coefficient, lag);
        }
    }
    best
}

/// Per one-second window of `reference` (from `skip` on), the best correlation with what was
/// received within `max_lag` samples after it: the delay may change between windows as the
/// jitter buffer adapts.
pub fn windowed_correlation(reference: &[i16], received: &[i16], skip: usize, max_lag: usize) -> Vec<f64> {
    let window = 48_000;
    let mut out = Vec::new();
    let mut start = skip;
    while start + window + max_lag <= received.len() && start + window <= reference.len() {
        let (c, _) = best_correlation(&reference[start..start + window], &received[start..], max_lag);
        out.push(c);
        start += window;
    }
    out
}
