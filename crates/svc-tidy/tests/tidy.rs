//! ARCHITECTURE.md's structural rules, checked (after rust-analyzer's tidy tests): these read the
//! workspace's manifests and sources, so a change that breaks a rule the document states fails
//! here, with the file and line, instead of going unnoticed. A rule that must change changes here
//! and in ARCHITECTURE.md together.
//!
//! Sources are read as text: comments are dropped, and so are `#[cfg(test)]` modules, `tests.rs`
//! files and files that declare themselves test-only with `#![cfg(test)]` (test code may read the
//! clock, open sockets and unwrap).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Each crate's layer: a crate depends only on crates of lower layers (dev-dependencies may also
/// use `svc-testkit`). Every crate of the workspace must be listed.
const LAYERS: &[(&str, u8)] = &[
    ("svc-wire", 0),
    ("svc-opus", 0),
    ("svc-testkit", 0),
    ("svc-tidy", 0),
    ("svc-domain", 1),
    ("svc-audio", 1),
    ("svc-stt", 1),
    ("svc-llm", 1),
    ("svc-sip", 1),
    ("svc-rtp", 1),
    ("svc-store", 2),
    ("svc-import", 2),
    ("svc-provider", 2),
    ("svc-room", 2),
    ("svc-local", 3),
    ("svc-phone", 3),
    ("svc-session", 4),
    ("svc-server", 5),
    ("svc-bench", 6),
];

/// Crates that ship in the `svc` binary (the rest are test doubles and tools).
const SHIPPED: &[&str] = &[
    "svc-wire",
    "svc-opus",
    "svc-domain",
    "svc-audio",
    "svc-store",
    "svc-import",
    "svc-provider",
    "svc-room",
    "svc-stt",
    "svc-llm",
    "svc-sip",
    "svc-rtp",
    "svc-phone",
    "svc-local",
    "svc-session",
    "svc-server",
];

/// What a piece of code may touch, and the text that gives each away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capability {
    Clock,
    Tokio,
    Spawn,
    Sockets,
    Files,
    Http,
}

impl Capability {
    fn needles(self) -> &'static [&'static str] {
        match self {
            Capability::Clock => &["Instant::now(", "SystemTime::now(", "Utc::now("],
            Capability::Tokio => &["tokio::"],
            Capability::Spawn => &["tokio::spawn", "thread::spawn", "spawn_blocking"],
            Capability::Sockets => &["TcpStream", "TcpListener", "UdpSocket", "tokio_tungstenite"],
            Capability::Files => &["std::fs", "tokio::fs", "File::open", "File::create"],
            Capability::Http => &["axum::", "hyper::", "reqwest::", "tower_http::", "hyper_util::"],
        }
    }
}

use Capability::*;

/// `(source path prefix, capabilities it may not use, files under it that are exempt)`.
const CONFINED: &[(&str, &[Capability], &[&str])] = &[
    ("svc-wire/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-domain/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    // The store never reads the clock: callers pass `now_us`. (`testing.rs` is the test-database
    // helper behind the `testing` feature.)
    ("svc-store/src/", &[Clock, Spawn, Files, Http], &["svc-store/src/testing.rs"]),
    // Pure signal processing; the WAV file helpers are its only file access.
    ("svc-audio/src/", &[Clock, Tokio, Spawn, Sockets, Http], &[]),
    ("svc-audio/src/", &[Files], &["svc-audio/src/wav.rs"]),
    ("svc-opus/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    // The telephone media path: packets in, packets and PCM out; the caller owns clock and socket.
    ("svc-rtp/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-import/src/", &[Clock, Spawn, Sockets, Http], &[]),
    // The room's sans-IO core and its data model.
    ("svc-room/src/core/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/client/core.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/rtc.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/ids.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/model.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    // Provider codecs are sans-IO; the driver, the HTTP client and `svc provider check` are not.
    (
        "svc-provider/src/",
        &[Clock, Tokio, Spawn, Sockets, Files, Http],
        &["svc-provider/src/driver.rs", "svc-provider/src/http.rs", "svc-provider/src/check.rs"],
    ),
    // The local models compute; they read their files and nothing else.
    ("svc-stt/src/", &[Tokio, Spawn, Sockets, Http], &[]),
    ("svc-llm/src/", &[Tokio, Spawn, Sockets, Http], &[]),
    // The local provider's conversation is sans-IO like the codecs; its shell, installer and
    // speech program are not.
    ("svc-local/src/core.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-local/src/sentences.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    // The SIP user agent is sans-IO; its shell owns the socket, the clock and the task.
    ("svc-sip/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &["svc-sip/src/shell.rs"]),
    // The phone bridge's mix and attribute vocabulary are sans-IO; its service and call tasks are not.
    ("svc-phone/src/mixer.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-phone/src/attributes.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    // The session as a state machine.
    ("svc-session/src/core/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
];

/// Where HTTP may appear: the API, the room's signal server, the provider's HTTP client, and the
/// test doubles and tools.
const HTTP_EDGES: &[&str] = &[
    "svc-server/",
    "svc-room/src/signal.rs",
    "svc-room/src/server.rs",
    "svc-provider/src/http.rs",
    "svc-local/src/install.rs",
    "svc-testkit/",
    "svc-bench/",
];

/// One Rust source file, as the rules see it.
struct Source {
    /// Relative to `crates/`.
    path: String,
    /// Lines without comments, up to the first `#[cfg(test)]` module.
    lines: Vec<String>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "tests") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<Source> {
    let crates = workspace().join("crates");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/").flatten() {
        rust_files(&entry.path().join("src"), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            let mut lines = Vec::new();
            let mut raw = text.lines().peekable();
            while let Some(line) = raw.next() {
                // A test-only file (a test harness module): none of it ships.
                if line.trim() == "#![cfg(test)]" {
                    lines.clear();
                    break;
                }
                if line.trim() == "#[cfg(test)]"
                    && raw.peek().is_some_and(|next| {
                        next.trim_start().starts_with("mod ") || next.trim_start().starts_with("pub mod ")
                    })
                {
                    break;
                }
                lines.push(without_comment(line).to_owned());
            }
            let path = file.strip_prefix(&crates).expect("under crates/").to_string_lossy().replace('\\', "/");
            Source { path, lines }
        })
        .collect()
}

/// `line` up to a `//` comment that is not inside a string literal.
fn without_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let (mut in_string, mut escaped) = (false, false);
    for (at, &byte) in bytes.iter().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(at + 1) == Some(&b'/') => return &line[..at],
            _ => {}
        }
    }
    line
}

fn violations(sources: &[Source], matches: impl Fn(&Source, &str) -> Option<String>) -> Vec<String> {
    let mut found = Vec::new();
    for source in sources {
        for (number, line) in source.lines.iter().enumerate() {
            if let Some(what) = matches(source, line) {
                found.push(format!("crates/{}:{}: {what}: {}", source.path, number + 1, line.trim()));
            }
        }
    }
    found
}

fn manifests() -> BTreeMap<String, toml::Value> {
    let mut manifests = BTreeMap::new();
    for entry in std::fs::read_dir(workspace().join("crates")).expect("crates/").flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let value: toml::Value = text.parse().expect("a Cargo.toml");
        let name = value["package"]["name"].as_str().expect("package name").to_owned();
        manifests.insert(name, value);
    }
    manifests
}

fn svc_dependencies(manifest: &toml::Value, table: &str) -> Vec<String> {
    manifest
        .get(table)
        .and_then(toml::Value::as_table)
        .map(|deps| deps.keys().filter(|name| name.starts_with("svc-")).cloned().collect())
        .unwrap_or_default()
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let layer: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut problems = Vec::new();
    for (name, manifest) in manifests() {
        let Some(&own) = layer.get(name.as_str()) else {
            problems.push(format!("{name} has no layer in svc-tidy's LAYERS (and ARCHITECTURE.md's code map)"));
            continue;
        };
        for dependency in svc_dependencies(&manifest, "dependencies") {
            match layer.get(dependency.as_str()) {
                Some(&theirs) if theirs < own => {}
                _ => problems.push(format!("{name} (layer {own}) depends on {dependency}, which is not below it")),
            }
        }
        for dependency in svc_dependencies(&manifest, "dev-dependencies") {
            let allowed = dependency == "svc-testkit"
                || dependency == name
                || layer.get(dependency.as_str()).is_some_and(|&theirs| theirs < own);
            if !allowed {
                problems
                    .push(format!("{name} (layer {own}) has a dev-dependency on {dependency}, which is not below it"));
            }
        }
    }
    assert!(problems.is_empty(), "layering broken:\n{}", problems.join("\n"));
}

#[test]
fn only_the_benchmark_tool_depends_on_the_server() {
    let dependents: Vec<String> = manifests()
        .into_iter()
        .filter(|(_, manifest)| svc_dependencies(manifest, "dependencies").iter().any(|d| d == "svc-server"))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(dependents, ["svc-bench"], "crates that depend on svc-server");
}

#[test]
fn sans_io_code_touches_no_clock_socket_file_task_or_http() {
    let sources = sources();
    let found = violations(&sources, |source, line| {
        CONFINED.iter().find_map(|(prefix, forbidden, exempt)| {
            if !source.path.starts_with(prefix) || exempt.contains(&source.path.as_str()) {
                return None;
            }
            forbidden.iter().find_map(|capability| {
                capability
                    .needles()
                    .iter()
                    .find(|needle| line.contains(**needle))
                    .map(|needle| format!("{capability:?} ({needle})"))
            })
        })
    });
    assert!(found.is_empty(), "confined code reaches out:\n{}", found.join("\n"));
}

#[test]
fn http_lives_only_at_its_edges() {
    let sources = sources();
    let found = violations(&sources, |source, line| {
        if HTTP_EDGES.iter().any(|edge| source.path.starts_with(edge)) {
            return None;
        }
        Http.needles().iter().find(|needle| line.contains(**needle)).map(|needle| format!("HTTP ({needle})"))
    });
    assert!(found.is_empty(), "HTTP outside its edges:\n{}", found.join("\n"));
}

#[test]
fn shipped_code_neither_unwraps_nor_claims_the_unreachable() {
    let sources = sources();
    let found = violations(&sources, |source, line| {
        let krate = source.path.split('/').next().unwrap_or_default();
        if !SHIPPED.contains(&krate) {
            return None;
        }
        [".unwrap()", "unreachable!(", "unimplemented!(", "todo!("]
            .iter()
            .find(|needle| line.contains(**needle))
            .map(|needle| format!("panics on a path that is not proven ({needle})"))
    });
    assert!(found.is_empty(), "shipped code that panics:\n{}", found.join("\n"));
}

#[test]
fn shipped_code_says_why_it_ignores_a_result() {
    // `let _ =` throws a result away. Where that is right (a reply to a receiver that is gone, a
    // best-effort close) a comment on the line or the line above says so in a word; everything
    // else is logged or counted instead.
    let crates = workspace().join("crates");
    let mut found = Vec::new();
    for source in sources() {
        let krate = source.path.split('/').next().unwrap_or_default();
        if !SHIPPED.contains(&krate) {
            continue;
        }
        let raw = std::fs::read_to_string(crates.join(&source.path)).expect("read");
        let raw: Vec<&str> = raw.lines().collect();
        for (number, line) in source.lines.iter().enumerate() {
            if !line.contains("let _ =") {
                continue;
            }
            let explained = raw.get(number).is_some_and(|l| l.contains("//"))
                || number
                    .checked_sub(1)
                    .and_then(|above| raw.get(above))
                    .is_some_and(|l| l.trim_start().starts_with("//"));
            if !explained {
                found.push(format!("crates/{}:{}: {}", source.path, number + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "results thrown away without a word of why ({}):\n{}", found.len(), found.join("\n"));
}

#[test]
fn the_rules_see_the_code() {
    // The scanner found sources, and it drops comments and test modules as it claims.
    let sources = sources();
    assert!(sources.len() > 50, "only {} sources found", sources.len());
    let core = sources.iter().find(|s| s.path == "svc-session/src/core/mod.rs").expect("the session core");
    assert!(core.lines.iter().any(|line| line.contains("pub struct SessionCore")));
    assert!(!core.lines.iter().any(|line| line.trim_start().starts_with("///")), "doc comments are dropped");
    assert_eq!(without_comment(r#"let url = "http://x"; // note"#), r#"let url = "http://x"; "#);
    assert_eq!(without_comment(r#"let s = "a\"b//c";"#), r#"let s = "a\"b//c";"#);
    let playback = sources.iter().find(|s| s.path == "svc-session/src/core/playback.rs").expect("playback");
    assert!(!playback.lines.iter().any(|line| line.contains("Instant::now(")), "its test module is dropped");
}
