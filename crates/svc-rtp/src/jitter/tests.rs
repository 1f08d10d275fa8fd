use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A packet as the network delivers it: when, its extended sequence number and timestamp.
#[derive(Debug, Clone)]
struct Arrival {
    at: Duration,
    seq: u64,
    ts: u64,
}

/// Packet `i` of a 20 ms stream, sent at `i × 20 ms`, carrying the value `i + 1` in every
/// sample so a frame says which packet it came from.
fn audio_of(seq: u64) -> Vec<i16> {
    vec![(seq % 30_000) as i16 + 1; FRAME_SAMPLES]
}

fn stream(count: u64, mut delay: impl FnMut(u64) -> Option<Duration>) -> Vec<Arrival> {
    let mut arrivals: Vec<Arrival> = (0..count)
        .filter_map(|i| {
            delay(i).map(|d| Arrival { at: FRAME_DURATION * i as u32 + d, seq: 1_000 + i, ts: 50_000 + i * FRAME_TS })
        })
        .collect();
    arrivals.sort_by_key(|a| a.at);
    arrivals
}

struct Run {
    frames: Vec<(Duration, JitterFrame)>,
    buffer: JitterBuffer,
}

/// Plays the arrivals through a buffer with a 1 ms virtual clock.
fn run(arrivals: &[Arrival], until: Duration) -> Run {
    let t0 = Instant::now();
    let mut buffer = JitterBuffer::new(JitterConfig::default());
    let mut frames = Vec::new();
    let mut next = 0;
    let mut t = Duration::ZERO;
    while t <= until {
        while let Some(a) = arrivals.get(next).filter(|a| a.at <= t) {
            buffer.push(t0 + t, a.seq, a.ts, audio_of(a.seq - 1_000));
            next += 1;
        }
        while let Some(frame) = buffer.pop(t0 + t) {
            frames.push((t, frame));
        }
        t += Duration::from_millis(1);
    }
    Run { frames, buffer }
}

/// The packet index each frame came from (`None` for concealment and silence).
fn sources(frames: &[(Duration, JitterFrame)]) -> Vec<Option<u64>> {
    frames.iter().map(|(_, f)| (f.kind == FrameKind::Audio).then(|| f.samples[0] as u64 - 1)).collect()
}

fn played(frames: &[(Duration, JitterFrame)]) -> Vec<u64> {
    sources(frames).into_iter().flatten().collect()
}

#[test]
fn a_steady_stream_plays_in_order_after_the_minimum_delay() {
    let arrivals = stream(100, |_| Some(Duration::from_millis(30)));
    let run = run(&arrivals, Duration::from_millis(2_100));
    assert_eq!(played(&run.frames), (0..100).collect::<Vec<_>>());
    // The first packet arrives at 30 ms and plays one minimum delay (40 ms) later.
    assert_eq!(run.frames[0].0, Duration::from_millis(70));
    let stats = run.buffer.stats();
    assert_eq!((stats.late, stats.duplicate, stats.dropped_frames), (0, 0, 0));
    assert_eq!(stats.concealed_frames, 2, "only the fade-out after the stream ends");
    assert_eq!(stats.target_delay_ms, 40);
}

#[test]
fn reordered_and_duplicated_packets_play_once_in_order() {
    let mut arrivals = stream(200, |i| Some(Duration::from_millis(10 + if i % 5 == 1 { 25 } else { 0 })));
    let copies: Vec<Arrival> = arrivals
        .iter()
        .filter(|a| a.seq % 7 == 0)
        .map(|a| Arrival { at: a.at + Duration::from_millis(3), ..a.clone() })
        .collect();
    let duplicates = copies.len() as u64;
    arrivals.extend(copies);
    arrivals.sort_by_key(|a| a.at);
    let run = run(&arrivals, Duration::from_millis(4_300));
    assert_eq!(played(&run.frames), (0..200).collect::<Vec<_>>());
    let stats = run.buffer.stats();
    assert_eq!(stats.duplicate, duplicates);
    assert_eq!(stats.late, 0);
    assert!(run.frames[..200].iter().all(|(_, f)| f.kind == FrameKind::Audio));
}

#[test]
fn a_lost_packet_is_concealed_by_a_fading_repeat_and_playout_moves_on() {
    let arrivals = stream(50, |i| (i != 20 && !(30..34).contains(&i)).then_some(Duration::from_millis(5)));
    let run = run(&arrivals, Duration::from_millis(1_100));
    let kinds: Vec<FrameKind> = run.frames.iter().map(|(_, f)| f.kind).collect();
    assert_eq!(kinds[20], FrameKind::Concealed);
    assert_eq!(
        &kinds[30..35],
        [FrameKind::Concealed, FrameKind::Concealed, FrameKind::Silence, FrameKind::Silence, FrameKind::Audio]
    );
    // The repeat is the last frame, fading: 20 came from 19, starting at full level.
    let repeat = &run.frames[20].1.samples;
    assert_eq!(repeat[0], 20);
    assert!(repeat[FRAME_SAMPLES - 1] < 20 && repeat[FRAME_SAMPLES - 1] >= 9);
    assert!(run.frames[32].1.samples.iter().all(|&s| s == 0));
    assert_eq!(sources(&run.frames)[21], Some(21));
    assert_eq!(sources(&run.frames)[34], Some(34));
    let count = |kind| kinds[..50].iter().filter(|k| **k == kind).count();
    assert_eq!((count(FrameKind::Concealed), count(FrameKind::Silence), count(FrameKind::Audio)), (3, 2, 45));
}

#[test]
fn a_packet_after_its_time_is_late_and_dropped() {
    let arrivals = stream(50, |i| Some(Duration::from_millis(if i == 10 { 200 } else { 5 })));
    let run = run(&arrivals, Duration::from_millis(1_200));
    let stats = run.buffer.stats();
    assert_eq!(stats.late, 1);
    assert_eq!(sources(&run.frames)[10], None);
    assert!(!played(&run.frames).contains(&10));
}

#[test]
fn the_delay_grows_under_jitter_and_shrinks_back_when_it_stops() {
    let mut rng = StdRng::seed_from_u64(7);
    // 5 s of a clean network, 10 s with 0–120 ms of random delay, then 15 s clean again.
    let delays: Vec<u64> =
        (0..1_500).map(|i| if (250..750).contains(&i) { rng.gen_range(0..120) } else { 0 }).collect();
    let arrivals = stream(1_500, |i| Some(Duration::from_millis(delays[i as usize])));
    let run = run(&arrivals, Duration::from_secs(31));
    // The delay from sending (packet i at i × 20 ms) to playing, averaged over a window.
    let mean_delay = |from: u64, to: u64| {
        let window: Vec<f64> = run
            .frames
            .iter()
            .filter(|(t, f)| {
                f.kind == FrameKind::Audio && *t >= Duration::from_secs(from) && *t < Duration::from_secs(to)
            })
            .map(|(t, f)| t.as_secs_f64() * 1e3 - 20.0 * (f.samples[0] - 1) as f64)
            .collect();
        window.iter().sum::<f64>() / window.len() as f64
    };
    let (calm_start, jittery, calm_end) = (mean_delay(2, 5), mean_delay(10, 15), mean_delay(27, 30));
    assert!(jittery > 100.0, "delay under jitter {jittery:.0} ms");
    assert!(calm_end < 70.0, "delay after the jitter stopped {calm_end:.0} ms");
    assert!(calm_start < 50.0, "delay before the jitter {calm_start:.0} ms");
    // It got there by growing and by dropping frames, and nearly every packet was played.
    let stats = run.buffer.stats();
    assert!(stats.dropped_frames >= 2, "{stats:?}");
    assert_eq!(stats.target_delay_ms, 40, "{stats:?}");
    let missing = 1_500 - played(&run.frames).len();
    assert!(missing < 40, "{missing} packets never played: {stats:?}");
}

#[test]
fn the_target_follows_the_measured_jitter() {
    let mut rng = StdRng::seed_from_u64(3);
    let arrivals = stream(500, |_| Some(Duration::from_millis(rng.gen_range(0..60))));
    let run = run(&arrivals, Duration::from_secs(10));
    let stats = run.buffer.stats();
    // Uniform 0–60 ms gives a mean |D| of 20 ms: a target of about 20 + 3 × 20.
    assert!((12.0..30.0).contains(&stats.jitter_ms), "{stats:?}");
    assert!((55..=110).contains(&stats.target_delay_ms), "{stats:?}");
}

#[test]
fn a_timestamp_jump_resyncs_after_two_packets_and_a_lone_one_is_ignored() {
    let mut arrivals = stream(100, |_| Some(Duration::from_millis(5)));
    for a in &mut arrivals {
        if a.seq == 1_030 {
            a.ts += 8_000 * 60; // one stray packet a minute ahead
        }
        if a.seq >= 1_050 {
            a.ts += 8_000 * 3_600; // the sender's clock jumps an hour
        }
    }
    let run = run(&arrivals, Duration::from_millis(2_200));
    let stats = run.buffer.stats();
    assert_eq!(stats.resyncs, 1, "{stats:?}");
    assert_eq!(stats.discarded, 2, "the stray and the first packet after the jump: {stats:?}");
    let played = played(&run.frames);
    assert!(played.contains(&99) && played.contains(&51) && !played.contains(&30), "{played:?}");
}

#[test]
fn a_talkspurt_after_a_pause_is_re_anchored_one_target_behind() {
    // Packets 25..60 are not sent (silence suppression); the timestamps keep counting.
    let arrivals = stream(100, |i| (!(25..60).contains(&i)).then_some(Duration::from_millis(5)));
    let run = run(&arrivals, Duration::from_millis(2_200));
    let first_after =
        run.frames.iter().find(|(_, f)| f.kind == FrameKind::Audio && f.samples[0] == 61).expect("played");
    // Packet 60 arrives at 1205 ms and plays 40 ms later (±1 frame of schedule phase).
    let at = first_after.0.as_millis();
    assert!((1_240..=1_265).contains(&at), "played at {at} ms");
    assert_eq!(played(&run.frames), (0..25).chain(60..100).collect::<Vec<_>>());
    assert_eq!(run.buffer.stats().resyncs, 1);
}

#[test]
fn after_a_second_of_nothing_it_goes_idle_and_restarts_on_the_next_packet() {
    let mut arrivals = stream(20, |_| Some(Duration::from_millis(5)));
    arrivals.push(Arrival { at: Duration::from_secs(5), seq: 1_020, ts: 50_000 + 20 * FRAME_TS });
    let run = run(&arrivals, Duration::from_millis(6_300));
    let idle_gap = run.frames.windows(2).map(|w| w[1].0 - w[0].0).max().expect("frames");
    assert!(idle_gap > Duration::from_secs(3), "no frames while idle");
    assert_eq!(played(&run.frames), (0..21).collect::<Vec<_>>());
    assert_eq!(run.buffer.next_due(), None, "idle again at the end");
}

#[test]
fn oversized_and_empty_packets_are_discarded() {
    let mut buffer = JitterBuffer::new(JitterConfig::default());
    let now = Instant::now();
    assert_eq!(buffer.push(now, 1, 0, Vec::new()), PushOutcome::Discarded);
    assert_eq!(buffer.push(now, 2, 0, vec![0; MAX_PACKET_SAMPLES + 1]), PushOutcome::Discarded);
    assert_eq!(buffer.push(now, 3, 0, vec![0; 80]), PushOutcome::Started);
    assert_eq!(buffer.push(now, 3, 80, vec![0; 80]), PushOutcome::Duplicate);
    assert_eq!(buffer.pop(now), None, "not due before the initial delay");
}

#[test]
fn ten_millisecond_packets_make_twenty_millisecond_frames() {
    let t0 = Instant::now();
    let mut buffer = JitterBuffer::new(JitterConfig::default());
    let mut out = Vec::new();
    for i in 0..100u64 {
        let now = t0 + Duration::from_millis(10 * i);
        buffer.push(now, i, i * 80, vec![i as i16; 80]);
        while let Some(frame) = buffer.pop(now) {
            out.push(frame);
        }
    }
    assert!(out.len() >= 45);
    for (n, frame) in out.iter().enumerate() {
        assert_eq!(frame.kind, FrameKind::Audio);
        assert_eq!((frame.samples[0], frame.samples[80]), (2 * n as i16, 2 * n as i16 + 1));
    }
}
