use super::*;

const MS: Duration = Duration::from_millis(1);

/// `samples` samples counting up from `first`, so order and loss are visible.
fn counting(first: usize, samples: usize) -> Vec<i16> {
    (first..first + samples).map(|n| (n % 32_000) as i16).collect()
}

/// Polls until `None`, returning what was released.
fn drain(queue: &mut AudioOutQueue, now: Instant) -> Vec<PacedFrame> {
    std::iter::from_fn(|| queue.poll_frame(now)).collect()
}

fn queue(initial_rtp_timestamp: u32) -> AudioOutQueue {
    AudioOutQueue::new(OutQueueConfig { initial_rtp_timestamp, ..OutQueueConfig::default() })
}

#[test]
fn frames_are_due_every_20_ms_with_consecutive_timestamps() {
    let t0 = Instant::now();
    let mut queue = queue(1_000);
    assert!(queue.is_idle());
    assert_eq!(queue.next_deadline(), None);
    queue.push_pcm(&counting(0, 5 * FRAME_SAMPLES)).expect("fits");
    assert!(!queue.is_idle());

    let first = drain(&mut queue, t0);
    assert_eq!(first.len(), 1, "only frame 0 is due at the start");
    assert_eq!((first[0].rtp_timestamp, first[0].marker, first[0].due), (1_000, true, t0));
    assert!(first[0].pcm.to_vec() == counting(0, FRAME_SAMPLES), "samples differ");
    for k in 1..5_u32 {
        let due = t0 + FRAME_DURATION * k;
        assert_eq!(queue.next_deadline(), Some(due));
        assert!(queue.poll_frame(due - Duration::from_nanos(1)).is_none(), "frame {k} is not due early");
        let frames = drain(&mut queue, due);
        assert_eq!(frames.len(), 1);
        let frame = &frames[0];
        assert_eq!(
            (frame.rtp_timestamp, frame.marker, frame.due, frame.padded_samples),
            (1_000 + 960 * k, false, due, 0)
        );
        assert!(frame.pcm.to_vec() == counting(k as usize * FRAME_SAMPLES, FRAME_SAMPLES), "samples differ");
    }
    assert_eq!(queue.played_samples(), 5 * FRAME_SAMPLES as u64);
    // The talkspurt ends at the first slot with nothing to send.
    assert_eq!(queue.next_deadline(), Some(t0 + 100 * MS));
    assert!(queue.poll_frame(t0 + 100 * MS).is_none());
    assert!(queue.is_idle());
    assert_eq!(queue.next_deadline(), None);
}

#[test]
fn a_late_caller_gets_a_capped_burst_and_the_schedule_reanchors() {
    let t0 = Instant::now();
    let mut queue = queue(0);
    queue.push_pcm(&counting(0, 30 * FRAME_SAMPLES)).expect("fits");
    assert_eq!(drain(&mut queue, t0).len(), 1);

    // 45 ms: frames 1 (20 ms) and 2 (40 ms) are due, within the cap: back to back, continuous.
    let frames = drain(&mut queue, t0 + 45 * MS);
    let stamps: Vec<(u32, bool, Instant)> = frames.iter().map(|f| (f.rtp_timestamp, f.marker, f.due)).collect();
    assert_eq!(stamps, [(960, false, t0 + 20 * MS), (1_920, false, t0 + 40 * MS)]);
    assert_eq!(queue.next_deadline(), Some(t0 + 60 * MS));

    // 305 ms: frames due at 60..=300 ms are 13; only the last 3 slots are kept (260, 280, 300 ms)
    // and the RTP clock skips the 10 slots in between, marking the discontinuity.
    let frames = drain(&mut queue, t0 + 305 * MS);
    let stamps: Vec<(u32, bool, Instant)> = frames.iter().map(|f| (f.rtp_timestamp, f.marker, f.due)).collect();
    assert_eq!(
        stamps,
        [(960 * 13, true, t0 + 260 * MS), (960 * 14, false, t0 + 280 * MS), (960 * 15, false, t0 + 300 * MS)]
    );
    // No audio was skipped: the frames carry samples 3, 4 and 5 in order.
    assert!(frames[0].pcm.to_vec() == counting(3 * FRAME_SAMPLES, FRAME_SAMPLES), "samples differ");
    assert!(frames[2].pcm.to_vec() == counting(5 * FRAME_SAMPLES, FRAME_SAMPLES), "samples differ");
    assert_eq!(queue.next_deadline(), Some(t0 + 320 * MS));
    assert_eq!(queue.played_samples(), 6 * FRAME_SAMPLES as u64);
}

#[test]
fn rtp_time_runs_on_through_a_pause() {
    let t0 = Instant::now();
    let mut queue = queue(u32::MAX - 1_000);
    queue.push_pcm(&counting(0, 2 * FRAME_SAMPLES)).expect("fits");
    assert_eq!(drain(&mut queue, t0).len(), 1);
    assert_eq!(drain(&mut queue, t0 + 20 * MS).len(), 1);
    assert!(queue.poll_frame(t0 + 40 * MS).is_none());
    assert!(queue.is_idle());

    // Speech resumes 1003 ms after the slot where the talkspurt ended: 50.15 frames round to 50.
    queue.push_pcm(&counting(0, FRAME_SAMPLES)).expect("fits");
    let resumed = t0 + 1_043 * MS;
    let frames = drain(&mut queue, resumed);
    assert_eq!(frames.len(), 1);
    let expected = (u32::MAX - 1_000).wrapping_add(960 * 2).wrapping_add(960 * 50);
    assert_eq!((frames[0].rtp_timestamp, frames[0].marker, frames[0].due), (expected, true, resumed));
    // A resumption within half a frame of the old schedule continues the clock exactly.
    assert!(queue.poll_frame(resumed + 20 * MS).is_none());
    queue.push_pcm(&counting(0, FRAME_SAMPLES)).expect("fits");
    let frames = drain(&mut queue, resumed + 29 * MS);
    assert_eq!((frames[0].rtp_timestamp, frames[0].marker), (expected.wrapping_add(960), true));
}

#[test]
fn clear_discards_the_rest_and_the_next_audio_starts_a_talkspurt() {
    let t0 = Instant::now();
    let mut queue = queue(0);
    queue.push_pcm(&counting(0, 10 * FRAME_SAMPLES)).expect("fits");
    for k in 0..3_u32 {
        assert_eq!(drain(&mut queue, t0 + FRAME_DURATION * k).len(), 1);
    }
    assert_eq!(queue.buffered_samples(), 7 * FRAME_SAMPLES);
    assert_eq!(queue.clear(), 7 * FRAME_SAMPLES);
    assert!(queue.is_idle());
    assert_eq!(queue.next_deadline(), None);
    assert!(queue.poll_frame(t0 + 60 * MS).is_none());
    assert_eq!(queue.played_samples(), 3 * FRAME_SAMPLES as u64);

    queue.push_pcm(&counting(50_000, FRAME_SAMPLES)).expect("fits");
    let frames = drain(&mut queue, t0 + 65 * MS);
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].rtp_timestamp, frames[0].marker), (3 * 960, true));
    assert!(frames[0].pcm.to_vec() == counting(50_000, FRAME_SAMPLES), "samples differ");
    assert_eq!(queue.clear(), 0);
}

#[test]
fn a_full_queue_refuses_whole_chunks_and_loses_nothing() {
    let t0 = Instant::now();
    let mut queue =
        AudioOutQueue::new(OutQueueConfig { max_buffered: Duration::from_secs(1), ..OutQueueConfig::default() });
    queue.push_pcm(&counting(0, 47_000)).expect("fits");
    let refused = queue.push_pcm(&counting(47_000, 1_001)).expect_err("over the bound");
    assert_eq!(refused, QueueFull { rejected_samples: 1_001, buffered_samples: 47_000, capacity_samples: 48_000 });
    assert_eq!(queue.buffered_samples(), 47_000);
    queue.push_pcm(&counting(47_000, 1_000)).expect("exactly fills");
    assert!(queue.push_pcm(&[0]).is_err());
    // Playing a frame makes room for one.
    assert_eq!(drain(&mut queue, t0).len(), 1);
    queue.push_pcm(&counting(48_000, FRAME_SAMPLES)).expect("room again");
    assert!(queue.push_pcm(&[0]).is_err());
    // Everything accepted comes out, in order.
    let mut out: Vec<i16> = Vec::new();
    for k in 1..=50_u32 {
        for frame in drain(&mut queue, t0 + FRAME_DURATION * k) {
            out.extend_from_slice(&frame.pcm);
        }
    }
    assert!(out == counting(FRAME_SAMPLES, 48_000), "{} samples out", out.len());
    // The error converts into the crate's error for `?` in code returning AudioError.
    let error: crate::AudioError = refused.into();
    assert!(error.to_string().contains("1001 samples refused"));
}

#[test]
fn a_partial_frame_waits_for_the_grace_period_then_goes_out_padded() {
    let t0 = Instant::now();
    let mut queue = queue(0);
    queue.push_pcm(&counting(0, 1_000)).expect("fits");
    assert_eq!(drain(&mut queue, t0).len(), 1);
    // 40 samples left when frame 1 is due at 20 ms: wait up to 10 ms for more.
    assert!(queue.poll_frame(t0 + 20 * MS).is_none());
    assert_eq!(queue.next_deadline(), Some(t0 + 30 * MS));
    assert!(queue.poll_frame(t0 + 29 * MS).is_none());
    let frames = drain(&mut queue, t0 + 30 * MS);
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].padded_samples, frames[0].rtp_timestamp, frames[0].due), (920, 960, t0 + 20 * MS));
    assert_eq!(&frames[0].pcm[..40], &counting(960, 40)[..]);
    assert!(frames[0].pcm[40..].iter().all(|&s| s == 0));
    assert_eq!((queue.underruns(), queue.played_samples()), (1, 1_000));

    // If the rest arrives within the grace period, the frame goes out whole and on schedule.
    queue.push_pcm(&counting(0, 500)).expect("fits");
    assert!(queue.poll_frame(t0 + 40 * MS).is_none());
    queue.push_pcm(&counting(500, 460)).expect("fits");
    let frames = drain(&mut queue, t0 + 45 * MS);
    assert_eq!((frames[0].padded_samples, frames[0].due, frames[0].marker), (0, t0 + 40 * MS, false));
    assert_eq!(queue.underruns(), 1);
}

#[test]
fn an_idle_queue_waits_briefly_for_a_partial_frame_to_fill() {
    let t0 = Instant::now();
    let mut queue = queue(0);
    queue.push_pcm(&counting(0, 500)).expect("fits");
    assert!(queue.poll_frame(t0).is_none());
    assert_eq!(queue.next_deadline(), Some(t0 + 10 * MS));
    // The producer completes the frame in time: it starts at once, unpadded.
    queue.push_pcm(&counting(500, 500)).expect("fits");
    assert_eq!(queue.next_deadline(), Some(t0), "a full frame is due now");
    let frames = drain(&mut queue, t0 + 4 * MS);
    assert_eq!((frames.len(), frames[0].padded_samples, frames[0].marker), (1, 0, true));

    // A lone tail is sent padded once the grace period has passed.
    let mut queue = AudioOutQueue::default();
    queue.push_pcm(&counting(0, 100)).expect("fits");
    assert!(queue.poll_frame(t0).is_none());
    assert!(queue.poll_frame(t0 + 9 * MS).is_none());
    let frames = drain(&mut queue, t0 + 10 * MS);
    assert_eq!((frames.len(), frames[0].padded_samples, frames[0].due), (1, 860, t0 + 10 * MS));
    assert_eq!(queue.next_deadline(), Some(t0 + 30 * MS));
    assert!(queue.poll_frame(t0 + 30 * MS).is_none());
    assert!(queue.is_idle());
}

#[test]
fn memory_is_given_back_when_the_queue_goes_idle() {
    let t0 = Instant::now();
    let mut queue = queue(0);
    queue.push_pcm(&vec![1; 20 * 48_000]).expect("fits");
    assert!(queue.buffer.capacity() >= 20 * 48_000);
    assert_eq!(drain(&mut queue, t0).len(), 1);
    queue.clear();
    assert!(queue.buffer.capacity() <= 2 * RETAINED_CAPACITY_SAMPLES, "{}", queue.buffer.capacity());
}
