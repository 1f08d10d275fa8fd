use super::*;
use crate::wav::read_wav_file;

/// 16 kHz espeak-ng speech (tests/fixtures, made with espeak-ng and sox; see its README).
fn fixture(name: &str) -> Vec<i16> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    let wav = read_wav_file(format!("{path}{name}")).expect("fixture");
    assert_eq!((wav.sample_rate, wav.channels), (16_000, 1));
    wav.samples
}

fn noise(samples: usize, amplitude: i16, seed: u64) -> Vec<i16> {
    let mut x = seed;
    (0..samples)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 48) as i16) / (i16::MAX / amplitude).max(1)
        })
        .collect()
}

/// Pushes `pcm` in 20 ms chunks (as the runtime does) and returns every output.
fn run(detector: &mut TurnDetector, pcm: &[i16]) -> Vec<VadOutput> {
    let mut out = Vec::new();
    for chunk in pcm.chunks(320) {
        detector.push(chunk, &mut out);
    }
    out
}

fn starts_and_ends(out: &[VadOutput]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            VadOutput::Started => Some("start".to_owned()),
            VadOutput::Ended(reason) => Some(format!("end:{reason:?}")),
            VadOutput::Audio(_) => None,
        })
        .collect()
}

/// Where each output lands, in samples of the input: (start output index, audio emitted).
fn audio_of(out: &[VadOutput]) -> Vec<i16> {
    out.iter()
        .flat_map(|o| match o {
            VadOutput::Audio(pcm) => pcm.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// The last sample of `pcm` louder than -40 dBFS.
fn last_loud(pcm: &[i16]) -> usize {
    pcm.iter().rposition(|s| s.unsigned_abs() > 330).expect("some speech")
}

#[test]
fn silence_and_quiet_noise_are_not_speech() {
    let mut detector = TurnDetector::new(TurnDetectorConfig::default());
    assert!(run(&mut detector, &vec![0; 48_000]).is_empty());
    assert!(run(&mut detector, &noise(48_000, 40, 7)).is_empty());
    assert!(!detector.is_speaking());
}

#[test]
fn an_utterance_is_one_turn_that_ends_a_pause_after_the_speech() {
    let speech = fixture("near-talker-16k.wav");
    let mut input = vec![0; 8_000];
    input.extend_from_slice(&speech);
    let speech_end = last_loud(&input);
    input.extend(vec![0; 32_000]);
    let mut detector = TurnDetector::new(TurnDetectorConfig::default());
    let mut out = Vec::new();
    let mut ended_at = None;
    for (k, chunk) in input.chunks(320).enumerate() {
        detector.push(chunk, &mut out);
        if ended_at.is_none() && out.iter().any(|o| matches!(o, VadOutput::Ended(_))) {
            ended_at = Some((k + 1) * 320);
        }
    }
    assert_eq!(starts_and_ends(&out), ["start", "end:Pause"], "one turn");
    let ended_at = ended_at.expect("ended");
    let after_speech_ms = (ended_at - speech_end) * 1000 / 16_000;
    assert!((600..=1_100).contains(&after_speech_ms), "ended {after_speech_ms} ms after the last loud sample");
}

#[test]
fn the_turn_audio_is_the_input_from_the_preroll_on_without_gap_or_duplicate() {
    let speech = fixture("near-talker-16k.wav");
    let mut input = noise(16_000, 30, 3);
    input.extend_from_slice(&speech);
    input.extend(vec![0; 24_000]);
    for chunk in [1, 160, 320, 999] {
        let mut detector = TurnDetector::new(TurnDetectorConfig::default());
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            detector.push(piece, &mut out);
        }
        let audio = audio_of(&out);
        assert!(!audio.is_empty());
        let start =
            input.windows(audio.len().min(64)).position(|w| w == &audio[..w.len()]).expect("found in the input");
        assert_eq!(&input[start..start + audio.len()], &audio[..], "contiguous input (chunks of {chunk})");
        let first_loud = input.iter().position(|s| s.unsigned_abs() > 330).expect("speech");
        assert!(start <= first_loud, "the pre-roll reaches back to the first syllable (chunks of {chunk})");
    }
}

#[test]
fn a_click_shorter_than_the_prefix_does_not_start_a_turn() {
    let mut input = vec![0; 16_000];
    input.extend(noise(480, 16_000, 11)); // 30 ms
    input.extend(vec![0; 16_000]);
    let mut detector = TurnDetector::new(TurnDetectorConfig::default());
    assert!(starts_and_ends(&run(&mut detector, &input)).is_empty());
}

#[test]
fn steady_noise_after_silence_is_learned_and_does_not_hold_a_turn_open() {
    // earshot alone scores this as speech for as long as it lasts.
    let mut input = vec![0; 16_000];
    input.extend(noise(16_000 * 8, 1_000, 5));
    let mut detector = TurnDetector::new(TurnDetectorConfig::default());
    let out = run(&mut detector, &input);
    let events = starts_and_ends(&out);
    assert!(events.len() <= 2, "{events:?}");
    assert!(!detector.is_speaking(), "the turn does not stay open in steady noise");
    // Speech over that noise is heard.
    let mut speech: Vec<i16> = fixture("near-talker-16k.wav");
    for (s, n) in speech.iter_mut().zip(noise(60_000, 1_000, 9)) {
        *s = s.saturating_add(n);
    }
    let out = run(&mut detector, &speech);
    assert!(starts_and_ends(&out).first().is_some_and(|e| e == "start"), "speech 20 dB over the noise starts a turn");
}

#[test]
fn holding_delays_the_end_by_at_most_max_hold() {
    let speech = fixture("near-talker-16k.wav");
    let config = TurnDetectorConfig { pause_ms: 400, max_hold_ms: 1_000, ..TurnDetectorConfig::default() };
    let end_of = |hold: bool| {
        let mut detector = TurnDetector::new(config);
        detector.set_hold(hold);
        let mut out = Vec::new();
        for chunk in speech.chunks(320) {
            detector.push(chunk, &mut out);
        }
        let mut silence_ms: u32 = 0;
        while !out.iter().any(|o| matches!(o, VadOutput::Ended(_))) && silence_ms < 5_000 {
            detector.push(&[0; 320], &mut out);
            silence_ms += 20;
        }
        (silence_ms, starts_and_ends(&out))
    };
    let (plain, events) = end_of(false);
    assert_eq!(events.last().map(String::as_str), Some("end:Pause"));
    let (held, events) = end_of(true);
    assert_eq!(events, ["start", "end:MaxHold"], "held through the pauses between words, then the most it may");
    assert!(held > plain && held - plain <= 1_000 + 40, "held {held} ms against {plain} ms");
}

#[test]
fn force_end_and_sensitivity() {
    let speech = fixture("near-talker-16k.wav");
    let mut detector = TurnDetector::new(TurnDetectorConfig::default());
    let mut out = run(&mut detector, &speech[..16_000]);
    assert!(detector.is_speaking());
    detector.force_end(&mut out);
    assert_eq!(starts_and_ends(&out), ["start", "end:Forced"]);
    detector.force_end(&mut out);
    assert_eq!(starts_and_ends(&out).len(), 2, "nothing to end twice");
    let low = TurnDetectorConfig::default().with_sensitivity(Sensitivity::Low);
    let high = TurnDetectorConfig::default().with_sensitivity(Sensitivity::High);
    assert!(low.threshold > 0.5 && low.prefix_ms >= 250);
    assert!(high.threshold < 0.5 && high.prefix_ms <= 60);
    // A low-sensitivity detector still hears a whole sentence.
    let mut detector = TurnDetector::new(low);
    assert_eq!(starts_and_ends(&run(&mut detector, &speech)).first().map(String::as_str), Some("start"));
}

#[test]
fn extreme_values_and_reset() {
    let mut detector =
        TurnDetector::new(TurnDetectorConfig { prefix_ms: 9_999, pause_ms: 0, max_hold_ms: 9_999, threshold: 2.0 });
    assert_eq!(detector.config().prefix_ms, 5000);
    let mut out = Vec::new();
    detector.push(&[i16::MIN; 777], &mut out);
    detector.push(&[i16::MAX; 777], &mut out);
    detector.reset();
    assert!(!detector.is_speaking());
}
