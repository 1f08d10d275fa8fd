//! `--local-threads` reaches candle's quantized matrix products too.
//!
//! candle 0.11 runs every quantized matrix product (SmolLM2's weights) on one process-wide pool
//! of spinning workers, sized once from `CANDLE_NUM_THREADS` (else the physical cores). Its
//! workers spin while they wait, so with two of them on a two-core machine any other work (a
//! second session's Whisper, a build, another service) stalls generation: a one-core hog beside
//! one session took the reply's p95 from about 2.7 s to 11.6 s (docs/benchmarks.md, "local
//! provider"). The pool can only be sized by the environment and svc may not set a variable in
//! its own running process (`set_var` is `unsafe`, which the workspace forbids), so `svc serve`
//! starts itself again, once, with the variable set to the session's inference threads, before
//! anything else runs. An operator's own `CANDLE_NUM_THREADS` is left alone.

use std::os::unix::process::CommandExt;

use crate::config::Config;

/// The variable candle reads.
const VARIABLE: &str = "CANDLE_NUM_THREADS";

/// Replaces this process with itself, `CANDLE_NUM_THREADS` set to the local provider's threads per
/// session, when the embedded brain is installed and the variable is not set. Returns only when
/// nothing needs doing or the new image could not start (then candle keeps its default; logged
/// by the caller once logging runs).
pub fn pin(config: &Config) -> Option<std::io::Error> {
    if std::env::var_os(VARIABLE).is_some()
        || !matches!(config.local.config().brain, svc_local::Brain::Embedded)
        || config.local.installed().is_err()
    {
        return None;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => return Some(error),
    };
    // `exec` returns only on failure.
    Some(
        std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(VARIABLE, config.local.threads().to_string())
            .exec(),
    )
}
