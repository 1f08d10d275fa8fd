//! Percentiles and the Markdown report (ready to paste into `docs/benchmarks.md`).

use std::fmt::Write as _;

use svc_wire::rest::StartTimings;

use svc_bench::load::{Outcome, Plan, Target};

/// Reads one phase out of `timings`.
type Phase = fn(&StartTimings) -> f64;

/// Phases of `timings`, in the order the handler runs them, then the whole request.
const PHASES: [(&str, Phase); 8] = [
    ("version_check_ms", |t| t.version_check_ms),
    ("project_check_ms", |t| t.project_check_ms),
    ("resolve_ms", |t| t.resolve_ms),
    ("provider_resolve_ms", |t| t.provider_resolve_ms),
    ("db_insert_ms", |t| t.db_insert_ms),
    ("mint_tokens_ms", |t| t.mint_tokens_ms),
    ("dispatch_ms", |t| t.dispatch_ms),
    ("total_ms", |t| t.total_ms),
];

/// Everything about the run that is not a measurement.
#[derive(Debug)]
pub struct RunInfo {
    /// CPU model from /proc/cpuinfo.
    pub cpu: String,
    /// Usable cores (what `nproc` prints).
    pub nproc: usize,
    /// The command that reproduces the run.
    pub command: String,
    /// `git describe`-like identification of the tree, if known.
    pub commit: Option<String>,
    /// The store backend, in words.
    pub database: String,
    /// Load shape.
    pub plan: Plan,
    /// Optimized build.
    pub release: bool,
    /// Worker threads of the server's runtime.
    pub server_workers: usize,
}

/// Client-side numbers of one target.
#[derive(Debug, Clone, Copy)]
struct Summary {
    requests: usize,
    per_second: f64,
    p50: Option<f64>,
    p99: Option<f64>,
}

impl Summary {
    fn of(outcome: &Outcome) -> Summary {
        let sorted = sorted(outcome.latencies_ms.iter().copied());
        let wall = outcome.measured_wall.as_secs_f64();
        Summary {
            requests: sorted.len(),
            per_second: if wall > 0.0 { sorted.len() as f64 / wall } else { 0.0 },
            p50: percentile(&sorted, 50.0),
            p99: percentile(&sorted, 99.0),
        }
    }
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values
}

/// Nearest-rank percentile of sorted values; `None` when there are none.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

fn ms(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "–".to_owned(), |value| format!("{value:.decimals$}"))
}

fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> String {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 => format!("{:.2}×", n / d),
        _ => "–".to_owned(),
    }
}

/// The report: setup, the comparison table, the start phase breakdown, and failures if any.
pub fn markdown(info: &RunInfo, baseline: (&Target, &Outcome), start: (&Target, &Outcome)) -> String {
    let (verify_target, verify) = baseline;
    let (start_target, start) = start;
    let base = Summary::of(verify);
    let subject = Summary::of(start);
    let phase_values: Vec<Vec<f64>> = PHASES.iter().map(|(_, get)| sorted(start.timings.iter().map(get))).collect();
    // What `total_ms` covers but no phase does: authentication, reading and parsing the body,
    // and the middleware before the handler.
    let unattributed = sorted(start.timings.iter().map(|timings| {
        let phases: f64 = PHASES[..PHASES.len() - 1].iter().map(|(_, get)| get(timings)).sum();
        timings.total_ms - phases
    }));
    let total = phase_values.last().map(Vec::as_slice).unwrap_or_default();

    let mut out = String::new();
    let _ = writeln!(out, "### Session start vs. credential verify (svc-bench)\n");
    let _ = writeln!(out, "- Machine: {} (nproc {})", info.cpu, info.nproc);
    let _ = writeln!(out, "- Command: `{}`", info.command);
    if let Some(commit) = &info.commit {
        let _ = writeln!(out, "- Tree: {commit}");
    }
    let _ = writeln!(
        out,
        "- Setup: the real server (`svc_server::run`, {} runtime workers) and the load generator (one \
         thread, hand-written HTTP/1.1 keep-alive) in one process over 127.0.0.1; {}; {} connections, \
         each one request in flight; {} s warm-up, then {} s measured, per endpoint; baseline first.{}",
        info.server_workers,
        info.database,
        info.plan.connections,
        info.plan.warmup.as_secs_f64(),
        info.plan.measure.as_secs_f64(),
        if info.release { "" } else { " **Debug build: not representative.**" },
    );
    let _ = writeln!(
        out,
        "- Start body: inline agent, short instructions, tools `end_call` + one client tool; API key with \
         `realtime:start`; no concurrency limit.\n"
    );

    let _ = writeln!(
        out,
        "| Endpoint | Requests | Req/s | Client p50 (ms) | Client p99 (ms) | Server `total_ms` p50 | Server `total_ms` p99 |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|");
    let _ = writeln!(
        out,
        "| `{}` (baseline) | {} | {:.0} | {} | {} | – | – |",
        verify_target.label,
        base.requests,
        base.per_second,
        ms(base.p50, 2),
        ms(base.p99, 2)
    );
    let _ = writeln!(
        out,
        "| `{}` | {} | {:.0} | {} | {} | {} | {} |",
        start_target.label,
        subject.requests,
        subject.per_second,
        ms(subject.p50, 2),
        ms(subject.p99, 2),
        ms(percentile(total, 50.0), 2),
        ms(percentile(total, 99.0), 2)
    );
    let _ = writeln!(
        out,
        "| **start / verify** | | **{}** | **{}** | {} | | |\n",
        ratio(Some(subject.per_second), Some(base.per_second)),
        ratio(subject.p50, base.p50),
        ratio(subject.p99, base.p99)
    );

    let _ = writeln!(
        out,
        "Server-side phases of session start (ms, from the response's `timings`; *unattributed* is \
         `total_ms` minus the phases, per request: authentication, body read and parse, middleware):\n"
    );
    let header: Vec<String> = PHASES.iter().map(|(name, _)| format!("`{name}`")).collect();
    let _ = writeln!(out, "| | {} | *unattributed* |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "--:|".repeat(PHASES.len() + 1));
    for p in [50.0, 99.0] {
        let cells: Vec<String> = phase_values
            .iter()
            .chain(std::iter::once(&unattributed))
            .map(|values| ms(percentile(values, p), 3))
            .collect();
        let _ = writeln!(out, "| p{p:.0} | {} |", cells.join(" | "));
    }

    let failures = verify.failures.total() + start.failures.total();
    let _ = writeln!(out, "\nFailures (non-200 responses, transport errors, bad bodies; warm-up included): {failures}");
    for (target, outcome) in [(verify_target, verify), (start_target, start)] {
        for (kind, (count, example)) in &outcome.failures.0 {
            let _ = writeln!(out, "- `{}`: {kind} × {count}, first: {}", target.name, example.replace('\n', " "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), Some(50.0));
        assert_eq!(percentile(&values, 99.0), Some(99.0));
        assert_eq!(percentile(&values, 100.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
