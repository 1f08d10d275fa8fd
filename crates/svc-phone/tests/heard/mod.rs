//! "They hear each other", checked the way a live call can be expected to sound.

use svc_audio::analysis::piecewise_correlation;

/// Asserts that all of `reference` arrived in `heard` (recorded at `rate`) and sounds like it,
/// window by window (a quarter second each), each window allowed to sit up to 100 ms from the
/// whole signal's alignment: the receiving jitter buffer may grow its delay by a frame while the
/// signal plays (on a loaded machine it does), which costs the window it falls in and nothing
/// else. Audio that is garbled, missing or replaced fails in most windows.
pub fn assert_heard(what: &str, reference: &[i16], heard: &[i16], rate: usize) {
    let pieces = piecewise_correlation(reference, heard, rate / 4, rate / 10);
    let good = pieces.share_at_least(0.8);
    eprintln!(
        "{what}: {:.0} % of {} windows at ≥ 0.8 (over {} samples heard at {rate} Hz); overall {:?}",
        good * 100.0,
        pieces.windows.len(),
        heard.len(),
        pieces.overall
    );
    assert!(pieces.overall.overlap_samples >= reference.len() * 9 / 10, "{what}: not all of it arrived: {pieces:?}");
    assert!(good >= 0.8, "{what}: {pieces:?}");
}
