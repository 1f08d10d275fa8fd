//! Converts the CTranslate2 Whisper package into the directory `WhisperModel::load` reads.
//!
//! `cargo run --release -p svc-stt --example convert -- <ct2 dir> <out dir>`: for development and
//! the tests; the installer calls `svc_stt::convert_ct2` itself.

use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [src, out] = args.as_slice() else {
        return Err("usage: convert <dir with model.bin, config.json, tokenizer.json> <out dir>".into());
    };
    let t = Instant::now();
    svc_stt::convert_ct2(src, out)?;
    eprintln!("converted {} into {} in {:.2} s", src.display(), out.display(), t.elapsed().as_secs_f64());
    Ok(())
}
