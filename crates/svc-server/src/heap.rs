//! svc's heap as a benchmark sees it. The `svc-counting` binary (`src/counting_main.rs`) is `svc`
//! with the system allocator behind `stats_alloc`'s counters (an atomic add or two per
//! allocation, contended between the workers, which is why the production `svc` leaves it out);
//! it registers a reader here before the server starts, and `/metrics` then reports the
//! allocations made and the bytes live: `session-load` divides the first by the frames it moved
//! to check that the steady state allocates nothing per frame, and the soak sets the second
//! beside RSS to tell a leak from memory the allocator keeps. A second binary rather than a cargo
//! feature, so that the test command builds and checks it once with everything else.

use std::sync::OnceLock;

/// What the counting allocator has seen since the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapCounts {
    /// Allocations and reallocations (a `Vec` growing is one), which a hot path should not make.
    pub allocations: u64,
    /// Bytes allocated and not yet freed.
    pub live_bytes: u64,
}

static READER: OnceLock<fn() -> HeapCounts> = OnceLock::new();

/// Registers how to read the process's counting allocator; the binary that installs one calls
/// this before anything reads the metrics. A second registration is ignored.
pub fn count_with(reader: fn() -> HeapCounts) {
    // Already registered (a test registering again): the first reader stays, as documented.
    let _ = READER.set(reader);
}

/// The counts, in a binary that counts (`svc-counting`); `None` in `svc`.
pub fn counts() -> Option<HeapCounts> {
    READER.get().map(|read| read())
}
