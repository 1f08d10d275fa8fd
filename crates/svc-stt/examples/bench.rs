//! Measures load time, transcription time and word error rate on espeak-ng speech.
//!
//! `SVC_LOCAL_MODELS=… cargo run --release -p svc-stt --example bench [-- repeats]`: each
//! sentence is transcribed `repeats` times (default 3) and the best time is kept, because the
//! machine is shared with builds; the word error rate is over all sentences. Timings depend on
//! the cores free at the time (the research machine has two).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use svc_stt::{RATE_HZ, WhisperModel};

/// Everyday requests to a voice agent; the first three are the research note's u2, u3 and u1.
const SENTENCES: [&str; 20] = [
    "What is the weather going to be like this weekend?",
    "Please call my sister and tell her I will be late.",
    "Hello, I would like to book a table for two people tomorrow evening at seven.",
    "What is the capital of France?",
    "I would like to book a table for dinner tomorrow evening.",
    "Turn off the lights in the kitchen.",
    "Can you remind me to buy milk on the way home?",
    "How long does it take to drive to the airport?",
    "My favorite color is blue and I like to swim.",
    "The meeting has been moved to Thursday afternoon.",
    "Could you play some relaxing music for me?",
    "Where is the nearest train station?",
    "I need to cancel my appointment with the dentist.",
    "What time does the store close tonight?",
    "Set an alarm for half past six in the morning.",
    "Tell me a joke about cats.",
    "How do I reset my password?",
    "The package should arrive by the end of the week.",
    "Who wrote the novel Pride and Prejudice?",
    "Please send an email to my manager about the delay.",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repeats: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(3).max(1);
    let dir = common::model_dir();
    let t = Instant::now();
    let model = WhisperModel::load(&dir)?;
    println!("load: {:.3} s", t.elapsed().as_secs_f64());
    let (mut errors, mut words) = (0.0, 0.0);
    for sentence in SENTENCES {
        let audio = common::speak(sentence);
        let mut best = f64::INFINITY;
        let mut text = String::new();
        for _ in 0..repeats {
            let t = Instant::now();
            text = model.transcribe(&audio)?.text;
            best = best.min(t.elapsed().as_secs_f64());
        }
        let wer = common::wer(sentence, &text);
        let n = svc_testkit::speech::words(sentence).len() as f64;
        errors += wer * n;
        words += n;
        println!(
            "{:.2} s audio: {best:.3} s, WER {:>3.0} %: {text:?}",
            audio.len() as f64 / f64::from(RATE_HZ),
            wer * 100.0
        );
    }
    println!("word error rate over {words} words: {:.1} %", errors / words * 100.0);
    Ok(())
}
