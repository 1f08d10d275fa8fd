//! Fuzz target `session_config`: the session-config body of `POST /realtime/session/start`, parsed
//! by `svc_domain::session_config::parse_start` and, when it parses, resolved by
//! `svc_domain::start::resolve_start` against the embedded model catalog. See docs/FUZZING.md.
//!
//! Input layout:
//!
//! - byte 0 is a selector: bits 0-2 choose the `X-Svc-SDK` header (see [`header`]; mode 7 takes
//!   the header text from the input, up to the first newline after the selector), bits 3-4 the
//!   server's session cap, bit 5 `resources:read`, bit 6 whether every server tool is available
//!   (else none), bit 7 the avatar flag and full recording consents;
//! - the rest is a stream of JSON values: the request body, then optionally the stored
//!   configuration of the catalog agent it names (a canned one otherwise). Inputs whose body is
//!   not JSON are skipped.
//!
//! Properties: no panic, no stack overflow, and the invariants of [`check`]. The checks are kept
//! in step with `crates/svc-domain/tests/robustness.rs`, which runs the same properties on stable
//! in CI.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(input) = decode(data) else { return };
    if let Err(violation) = check(&input.body, input.header.as_deref(), &input.stored, input.selector) {
        panic!("property violated: {violation}");
    }
});

#[path = "../../crates/svc-domain/tests/support/session_checks.rs"]
mod session_checks;
use session_checks::*;

