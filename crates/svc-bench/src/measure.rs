//! What the load benchmarks measure with: latency histograms that cost the same at any
//! load (a fixed array of atomic counters, so measuring does not grow the RSS being measured),
//! and CPU and memory figures read from `/proc`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets of 10 µs below 20 ms…
const FINE_LIMIT_US: u64 = 20_000;
const FINE_STEP_US: u64 = 10;
/// …then of 1 ms up to 2 s; beyond that, one overflow bucket.
const COARSE_LIMIT_US: u64 = 2_000_000;
const COARSE_STEP_US: u64 = 1_000;
const FINE_BUCKETS: usize = (FINE_LIMIT_US / FINE_STEP_US) as usize;
const BUCKETS: usize = FINE_BUCKETS + ((COARSE_LIMIT_US - FINE_LIMIT_US) / COARSE_STEP_US) as usize + 1;

/// A latency histogram shared by every room of a phase.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram { buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), max_us: AtomicU64::new(0) }
    }

    /// Counts one latency.
    pub fn record(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let index = if us < FINE_LIMIT_US {
            (us / FINE_STEP_US) as usize
        } else if us < COARSE_LIMIT_US {
            FINE_BUCKETS + ((us - FINE_LIMIT_US) / COARSE_STEP_US) as usize
        } else {
            BUCKETS - 1
        };
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// Count, percentiles and maximum so far.
    pub fn summary(&self) -> Summary {
        let counts: Vec<u64> = self.buckets.iter().map(|bucket| bucket.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let quantile = |q: f64| -> Option<f64> {
            if total == 0 {
                return None;
            }
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (index, count) in counts.iter().enumerate() {
                seen += count;
                if seen >= rank {
                    // Beyond the last bucket only the maximum is known.
                    let us =
                        if index == BUCKETS - 1 { self.max_us.load(Ordering::Relaxed) } else { bucket_upper_us(index) };
                    return Some(us as f64 / 1000.0);
                }
            }
            None
        };
        Summary {
            count: total,
            p50_ms: quantile(0.50),
            p99_ms: quantile(0.99),
            max_ms: (total > 0).then(|| self.max_us.load(Ordering::Relaxed) as f64 / 1000.0),
        }
    }
}

/// Sleeps 5 ms at a time until `stop` and hands `record` how much later than asked each sleep
/// ended: the runtime's scheduling lag (plus the timer's 1 ms granularity), which every task of
/// the runtime it runs on sees.
pub async fn wake_lag(stop: std::sync::Arc<std::sync::atomic::AtomicBool>, mut record: impl FnMut(Duration)) {
    while !stop.load(Ordering::Relaxed) {
        let due = std::time::Instant::now() + Duration::from_millis(5);
        tokio::time::sleep_until(due.into()).await;
        record(std::time::Instant::now().saturating_duration_since(due));
    }
}

/// The upper edge of a bucket (what a percentile in it is reported as).
fn bucket_upper_us(index: usize) -> u64 {
    if index < FINE_BUCKETS {
        (index as u64 + 1) * FINE_STEP_US
    } else {
        FINE_LIMIT_US + (index - FINE_BUCKETS) as u64 * COARSE_STEP_US + COARSE_STEP_US
    }
}

/// Percentiles of one histogram, in milliseconds (upper bucket edges: 10 µs resolution below
/// 20 ms, 1 ms above).
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Latencies recorded.
    pub count: u64,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Largest.
    pub max_ms: Option<f64>,
}

/// CPU used so far by one process: user + system (from `/proc/<pid>/stat`, in clock ticks of
/// 10 ms) and on-CPU time per thread name (from each thread's `schedstat`, in nanoseconds).
#[derive(Debug, Clone)]
pub struct Cpu {
    process_ticks: u64,
    /// Busy ticks of the whole machine (all CPUs), from `/proc/stat`.
    machine_ticks: u64,
    by_thread_name: HashMap<String, u64>,
}

/// Clock ticks per second of `/proc` CPU times (`getconf CLK_TCK`; 100 on Linux x86-64).
const TICKS_PER_SECOND: f64 = 100.0;

impl Cpu {
    /// This process's counters now.
    pub fn now() -> Cpu {
        Cpu::read(std::path::Path::new("/proc/self"))
    }

    /// The counters of process `pid` now (zero once it is gone).
    pub fn of(pid: u32) -> Cpu {
        Cpu::read(&std::path::Path::new("/proc").join(pid.to_string()))
    }

    fn read(proc_dir: &std::path::Path) -> Cpu {
        let process_ticks =
            std::fs::read_to_string(proc_dir.join("stat")).ok().and_then(|stat| user_plus_system(&stat)).unwrap_or(0);
        let mut by_thread_name = HashMap::new();
        if let Ok(tasks) = std::fs::read_dir(proc_dir.join("task")) {
            for task in tasks.flatten() {
                let path = task.path();
                let name = std::fs::read_to_string(path.join("comm")).map(|n| n.trim().to_owned()).unwrap_or_default();
                let on_cpu = std::fs::read_to_string(path.join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()))
                    .unwrap_or(0);
                *by_thread_name.entry(group_name(&name)).or_insert(0) += on_cpu;
            }
        }
        let machine_ticks =
            std::fs::read_to_string("/proc/stat").ok().and_then(|stat| machine_busy(&stat)).unwrap_or(0);
        Cpu { process_ticks, machine_ticks, by_thread_name }
    }

    /// CPU used by everything else on the machine between `earlier` and `self`, in % of one
    /// core: a measurement is only as good as the machine was quiet.
    pub fn others_percent_since(&self, earlier: &Cpu, wall: Duration) -> f64 {
        let machine = self.machine_ticks.saturating_sub(earlier.machine_ticks) as f64;
        let process = self.process_ticks.saturating_sub(earlier.process_ticks) as f64;
        (100.0 * (machine - process) / TICKS_PER_SECOND / wall.as_secs_f64()).max(0.0)
    }

    /// Process CPU between `earlier` and `self` over `wall`, in % of one core.
    pub fn process_percent_since(&self, earlier: &Cpu, wall: Duration) -> f64 {
        let seconds = self.process_ticks.saturating_sub(earlier.process_ticks) as f64 / TICKS_PER_SECOND;
        100.0 * seconds / wall.as_secs_f64()
    }

    /// CPU of the threads named `group` between `earlier` and `self`, in % of one core.
    pub fn group_percent_since(&self, earlier: &Cpu, group: &str, wall: Duration) -> f64 {
        let now = self.by_thread_name.get(group).copied().unwrap_or(0);
        let before = earlier.by_thread_name.get(group).copied().unwrap_or(0);
        100.0 * now.saturating_sub(before) as f64 / 1e9 / wall.as_secs_f64()
    }
}

impl Cpu {
    /// CPU of every thread group between `earlier` and `self`, in % of one core, busiest first.
    pub fn groups_percent_since(&self, earlier: &Cpu, wall: Duration) -> Vec<(String, f64)> {
        let mut groups: Vec<(String, f64)> = self
            .by_thread_name
            .keys()
            .map(|group| (group.clone(), self.group_percent_since(earlier, group, wall)))
            .collect();
        groups.sort_by(|a, b| b.1.total_cmp(&a.1));
        groups
    }
}

/// Thread names with a numeric suffix (tokio's blocking pool, etc.) fold into their prefix.
fn group_name(name: &str) -> String {
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-').to_owned()
}

/// Busy ticks of all CPUs: the `cpu` line of `/proc/stat` without idle and iowait.
fn machine_busy(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let values: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let busy = values.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, v)| v).sum();
    Some(busy)
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line.
fn user_plus_system(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3, so field n is at index n - 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident memory now and at its peak, in MiB (`VmRSS`, `VmHWM` of `/proc/<pid>/status`).
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// Resident now.
    pub rss_mib: f64,
    /// Resident at the peak so far.
    pub peak_mib: f64,
}

impl Memory {
    /// This process's figures now.
    pub fn now() -> Memory {
        Memory::read(std::path::Path::new("/proc/self/status"))
    }

    /// The figures of process `pid` now (zero once it is gone).
    pub fn of(pid: u32) -> Memory {
        Memory::read(&std::path::Path::new("/proc").join(pid.to_string()).join("status"))
    }

    fn read(status_path: &std::path::Path) -> Memory {
        let status = std::fs::read_to_string(status_path).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(0.0, |kib| kib / 1024.0)
        };
        Memory { rss_mib: field("VmRSS:"), peak_mib: field("VmHWM:") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_bucket_edges() {
        let histogram = Histogram::new();
        for us in 1..=100u64 {
            histogram.record(Duration::from_micros(us * 100));
        }
        let summary = histogram.summary();
        assert_eq!(summary.count, 100);
        assert_eq!(summary.p50_ms, Some(5.01));
        assert_eq!(summary.p99_ms, Some(9.91));
        assert_eq!(summary.max_ms, Some(10.0));
        histogram.record(Duration::from_millis(25));
        histogram.record(Duration::from_secs(5));
        assert_eq!(histogram.summary().max_ms, Some(5000.0));
        let slow = Histogram::new();
        slow.record(Duration::from_secs(3));
        assert_eq!(slow.summary().p99_ms, Some(3000.0), "the overflow bucket reports the maximum");
        assert_eq!(bucket_upper_us(FINE_BUCKETS), 21_000);
    }

    #[test]
    fn proc_stat_fields_are_found_after_the_command_name() {
        let line = "42 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 111 222 0 0";
        assert_eq!(user_plus_system(line), Some(333));
        assert_eq!(group_name("room-server-3"), "room-server");
        assert_eq!(group_name("room-client"), "room-client");
        assert_eq!(machine_busy("cpu  10 1 5 100 7 1 2 3 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n"), Some(22));
    }
}
