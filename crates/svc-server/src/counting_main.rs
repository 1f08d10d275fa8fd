//! `svc-counting`: `svc` whose global allocator counts (`svc_server::heap`), for the benchmarks'
//! allocations per frame and the soak's live heap. Not for production: every allocation pays an
//! atomic add on counters the workers share.

use std::process::ExitCode;

use svc_server::heap::{self, HeapCounts};

#[global_allocator]
static ALLOCATOR: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

fn read_counts() -> HeapCounts {
    let stats = ALLOCATOR.stats();
    let made = stats.allocations.saturating_add(stats.reallocations);
    // A reallocation's growth or shrinkage is already in the allocated or freed bytes.
    let live = stats.bytes_allocated.saturating_sub(stats.bytes_deallocated);
    HeapCounts { allocations: made as u64, live_bytes: live as u64 }
}

fn main() -> ExitCode {
    heap::count_with(read_counts);
    svc_server::cli::main()
}

#[cfg(test)]
mod tests {
    use super::{heap, read_counts};

    #[test]
    fn an_allocation_is_counted_and_its_bytes_are_live_until_freed() {
        heap::count_with(read_counts);
        let before = heap::counts().expect("this binary counts");
        let block = std::hint::black_box(vec![0u8; 1 << 20]);
        let during = heap::counts().expect("this binary counts");
        assert!(during.allocations > before.allocations);
        assert!(during.live_bytes >= before.live_bytes + (1 << 20) - (1 << 16), "other threads may free a little");
        drop(block);
        let after = heap::counts().expect("this binary counts");
        assert!(after.live_bytes + (1 << 19) < during.live_bytes);
    }
}
