//! Transcribes one espeak-ng sentence with silence around it, with the fitted and the full
//! window: `cargo run -p svc-stt --example window -- "<sentence>" [voice] [wpm] [after_s]`.

#[path = "../tests/common/mod.rs"]
mod common;

use svc_stt::{AudioContext, WhisperModel};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sentence = args.get(1).map_or("Turn off the lights in the kitchen.", String::as_str);
    let voice = args.get(2).map_or("en-us", String::as_str);
    let wpm = args.get(3).and_then(|w| w.parse().ok()).unwrap_or(150);
    let after: f32 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(0.3);
    let mut audio = common::silence(0.3);
    audio.extend(common::speak_as(sentence, voice, wpm));
    audio.extend(common::silence(after));
    let fitted = common::model();
    let full = WhisperModel::load(&common::model_dir()).expect("model").with_audio_context(AudioContext::Full);
    for (label, model) in [("fitted", &*fitted), ("full", &full)] {
        let text = model.transcribe(&audio).expect("transcribes").text;
        println!("{label}: {text:?} (WER {:.0} %)", common::wer(sentence, &text) * 100.0);
    }
}
