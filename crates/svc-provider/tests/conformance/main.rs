//! The providers' own SDKs as the oracle: every adapter (the real codec in the real driver)
//! against `tests/conformance/fake.py`, whose server messages are built and serialized by the
//! SDKs' types and which validates every message svc sends with them (strict: an unknown or
//! misspelled field is a finding). Each scenario runs in several framings and packings (binary
//! frames, text frames with combined messages, a seeded random mix).
//!
//! Ignored in a plain `cargo test`: the harness needs the pinned SDK venv
//! (`scripts/conformance-setup.sh`, run by `scripts/test.sh`), which runs these with
//! `--include-ignored`. `SVC_CONFORMANCE_SEED=N` replays one random-mode run.
#![allow(missing_docs)]

mod fake;
mod gemini;
mod live;
mod openai;
mod recordings;
mod tables;
mod xai;
