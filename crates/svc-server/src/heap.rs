//! svc's heap as a benchmark sees it. Built with the `count-allocations` feature, the global
//! allocator is the system's behind `stats_alloc`'s counters (an atomic add or two per
//! allocation, contended between the workers, which is why production builds leave it out), and
//! `/metrics` reports the allocations made and the bytes live: `session-load` divides the first
//! by the frames it moved to check that the steady state allocates nothing per frame, and the
//! soak sets the second beside RSS to tell a leak from memory the allocator keeps.

#[cfg(feature = "count-allocations")]
#[global_allocator]
static ALLOCATOR: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// What the counting allocator has seen since the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapCounts {
    /// Allocations and reallocations (a `Vec` growing is one), which a hot path should not make.
    pub allocations: u64,
    /// Bytes allocated and not yet freed.
    pub live_bytes: u64,
}

/// The counts, when this build counts (the `count-allocations` feature); `None` otherwise.
pub fn counts() -> Option<HeapCounts> {
    #[cfg(feature = "count-allocations")]
    {
        let stats = ALLOCATOR.stats();
        let made = stats.allocations.saturating_add(stats.reallocations);
        // A reallocation's growth or shrinkage is already in the allocated or freed bytes.
        let live = stats.bytes_allocated.saturating_sub(stats.bytes_deallocated);
        Some(HeapCounts { allocations: made as u64, live_bytes: live as u64 })
    }
    #[cfg(not(feature = "count-allocations"))]
    None
}

#[cfg(all(test, feature = "count-allocations"))]
mod tests {
    use super::counts;

    #[test]
    fn an_allocation_is_counted_and_its_bytes_are_live_until_freed() {
        let before = counts().expect("this build counts");
        let block = std::hint::black_box(vec![0u8; 1 << 20]);
        let during = counts().expect("this build counts");
        assert!(during.allocations > before.allocations);
        assert!(during.live_bytes >= before.live_bytes + (1 << 20) - (1 << 16), "other threads may free a little");
        drop(block);
        let after = counts().expect("this build counts");
        assert!(after.live_bytes + (1 << 19) < during.live_bytes);
    }
}
