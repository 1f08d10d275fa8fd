//! cargo-fuzz target: arbitrary client input to the session core (data-channel bytes, chunked
//! envelopes, RPC payloads, participants, audio, provider events) in virtual time. The program
//! format and the properties live in `crates/svc-session/tests/support/data_channel.rs`, which the
//! CI robustness test (`crates/svc-session/tests/robustness.rs`) runs too. See docs/FUZZING.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/svc-session/tests/support/data_channel.rs"]
mod data_channel;

fuzz_target!(|bytes: &[u8]| {
    data_channel::exercise(bytes);
});
