//! What the benchmark binaries share: the HTTP load generator ([`load`]), latency histograms and
//! `/proc` readings ([`measure`]), svc as its own process ([`svc_process`]), and what a report says
//! about its run: machine, command and tree.

pub mod load;
pub mod measure;
pub mod svc_process;

/// The CPU model from /proc/cpuinfo.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

/// The cargo command that reproduces this run (credentials in URLs redacted); `target` is what
/// follows `-p svc-bench`, e.g. `" --bin room-load"` or empty for the default binary.
pub fn command_line(target: &str) -> String {
    let mut command = if cfg!(debug_assertions) {
        format!("cargo run -p svc-bench{target}")
    } else {
        format!("cargo run --release -p svc-bench{target}")
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.is_empty() {
        command.push_str(" --");
        for arg in args {
            let arg = if arg.contains("://") { svc_store::redact_url(&arg) } else { arg };
            command.push(' ');
            if arg.is_empty() || arg.chars().any(|c| !(c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c))) {
                command.push_str(&format!("'{}'", arg.replace('\'', r"'\''")));
            } else {
                command.push_str(&arg);
            }
        }
    }
    command
}

/// Short commit and whether the work tree has changes, when run inside the repository.
pub fn git_tree() -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|status| !status.is_empty());
    Some(if dirty { format!("`{commit}` with local changes") } else { format!("`{commit}`") })
}

/// The first lines of a load benchmark's report: machine, the command that reproduces the run
/// (`target` as for [`command_line`]) and the tree.
pub fn run_header(target: &str) -> String {
    format!(
        "- Machine: {} (nproc {})\n- Command: `{}`\n- Tree: {}\n",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, usize::from),
        command_line(target),
        git_tree().unwrap_or_else(|| "unknown".to_owned()),
    )
}

/// Locks a mutex shared by benchmark tasks; a task that panicked holding it leaves its data as
/// good as any other sample.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
