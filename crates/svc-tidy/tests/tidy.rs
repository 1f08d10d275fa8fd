//! ARCHITECTURE.md's structural rules, checked (after rust-analyzer's tidy tests): these read the
//! workspace's manifests and sources, so a change that breaks a rule the document states fails
//! here, with the file and line, instead of going unnoticed. A rule that must change changes here
//! and in ARCHITECTURE.md together.
//!
//! Sources are read as text: comments are dropped, and so are `#[cfg(test)]` modules (to their
//! closing brace: what follows one is read again), `tests.rs` files and files that declare
//! themselves test-only with `#![cfg(test)]` (test code may read the clock, open sockets and
//! unwrap).

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
    ("svc-http", 1),
    ("svc-store", 2),
    ("svc-import", 2),
    ("svc-provider-core", 2),
    ("svc-rtp", 2),
    ("svc-room", 2),
    ("svc-provider", 3),
    ("svc-local", 3),
    ("svc-tools", 3),
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
    "svc-http",
    "svc-provider-core",
    "svc-provider",
    "svc-room",
    "svc-stt",
    "svc-llm",
    "svc-sip",
    "svc-rtp",
    "svc-phone",
    "svc-local",
    "svc-tools",
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
    // The import body's scanner, WAV check and validation are sans-IO; `lib.rs` is their shell
    // (the spool files, and the big parses moved off the async threads).
    ("svc-import/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &["svc-import/src/lib.rs"]),
    ("svc-import/src/lib.rs", &[Clock, Sockets, Http], &[]),
    // The room's sans-IO core and its data model.
    ("svc-room/src/core/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/client/core.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/rtc.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/ids.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/stun.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    ("svc-room/src/model.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    // Agent dispatch's state machine; its task and socket are `service.rs` and `socket.rs`.
    ("svc-room/src/agents/dispatcher.rs", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
    // The provider interface is types: no IO at all; the running provider's handle holds the
    // channels' ends (tokio's types) but starts no task.
    ("svc-provider-core/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &["svc-provider-core/src/session.rs"]),
    ("svc-provider-core/src/session.rs", &[Clock, Spawn, Sockets, Files, Http], &[]),
    // Provider codecs are sans-IO; the driver and `svc provider check` are not.
    (
        "svc-provider/src/",
        &[Clock, Tokio, Spawn, Sockets, Files, Http],
        &["svc-provider/src/driver.rs", "svc-provider/src/check.rs"],
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
    // The outside tool backends: requests and answers are sans-IO; `http.rs` is their shell.
    ("svc-tools/src/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &["svc-tools/src/http.rs"]),
    // The session as a state machine.
    ("svc-session/src/core/", &[Clock, Tokio, Spawn, Sockets, Files, Http], &[]),
];

/// Where HTTP may appear: the API, the room's signal server, server API and agent workers'
/// socket, the outbound HTTP client, the tool backends' client, and the test doubles and tools.
const HTTP_EDGES: &[&str] = &[
    "svc-server/",
    "svc-room/src/signal.rs",
    "svc-room/src/server.rs",
    // LiveKit's server API (Twirp) and agent worker protocol (`/agent`): the room's other HTTP
    // edges.
    "svc-room/src/twirp.rs",
    "svc-room/src/agents/socket.rs",
    "svc-http/",
    "svc-local/src/install.rs",
    "svc-tools/src/http.rs",
    "svc-testkit/",
    "svc-bench/",
];

/// One Rust source file, as the rules see it.
struct Source {
    /// Relative to `crates/`.
    path: String,
    /// Lines without comments; test modules blanked ([`shipped_lines`]).
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
            let lines = shipped_lines(&text);
            let path = file.strip_prefix(&crates).expect("under crates/").to_string_lossy().replace('\\', "/");
            Source { path, lines }
        })
        .collect()
}

/// The lines of a source file that ship, comments dropped: a `#[cfg(test)]` module (inline, to
/// its closing brace, or declared `mod name;`) is blanked, and so is a whole file that says
/// `#![cfg(test)]`. Blanked lines stay as empty lines, so line numbers are the file's.
fn shipped_lines(text: &str) -> Vec<String> {
    let raw: Vec<&str> = text.lines().collect();
    if raw.iter().any(|line| line.trim() == "#![cfg(test)]") {
        return vec![String::new(); raw.len()];
    }
    let mut lines = Vec::with_capacity(raw.len());
    let mut at = 0;
    while at < raw.len() {
        let next_is_module = raw.get(at + 1).is_some_and(|next| {
            let next = next.trim_start();
            next.starts_with("mod ") || next.starts_with("pub mod ") || next.starts_with("pub(crate) mod ")
        });
        if raw[at].trim() == "#[cfg(test)]" && next_is_module {
            // Skip the attribute, then the module: one line when declared, else to the brace
            // that closes it.
            let end = module_end(&raw, at + 1);
            lines.extend(std::iter::repeat_n(String::new(), end + 1 - at));
            at = end + 1;
            continue;
        }
        lines.push(without_comment(raw[at]).to_owned());
        at += 1;
    }
    lines
}

/// The index of the last line of the module declared at `start` (`mod name;` or `mod name {…}`).
fn module_end(raw: &[&str], start: usize) -> usize {
    let mut depth = 0i64;
    let mut opened = false;
    for (index, line) in raw.iter().enumerate().skip(start) {
        let code = without_comment(line);
        if !opened && code.trim_end().ends_with(';') && !code.contains('{') {
            return index;
        }
        for delta in braces(code) {
            depth += delta;
            opened = true;
        }
        if opened && depth <= 0 {
            return index;
        }
    }
    raw.len() - 1
}

/// `+1` per `{` and `-1` per `}` outside string and character literals.
fn braces(code: &str) -> Vec<i64> {
    let bytes = code.as_bytes();
    let (mut in_string, mut escaped) = (false, false);
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        match byte {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            // A character literal such as '{' or '}' (not a lifetime: its quote closes two on).
            b'\'' if !in_string && bytes.get(at + 2) == Some(&b'\'') => at += 2,
            b'{' if !in_string => found.push(1),
            b'}' if !in_string => found.push(-1),
            _ => {}
        }
        at += 1;
    }
    found
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

/// The house keeps every source file under this many lines (split by concern past it).
const MAX_FILE_LINES: usize = 1_000;

/// Generated files: nobody reads or edits them by hand.
const GENERATED: &[&str] = &["sdk/js/src/openapi.d.ts"];

/// Every hand-written source of the project: Rust under `crates/` and `fuzz/`, the Python and
/// shell of the test harnesses, the TypeScript SDK and the playground, and the Markdown that
/// documents them (ARCHITECTURE.md and docs/ are read whole, so they are held to the same bound).
fn all_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules" | "dist" | "corpus" | "artifacts" | ".git") {
                all_sources(&path, out);
            }
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("rs" | "py" | "ts" | "js" | "mjs" | "sh" | "md")
        ) {
            out.push(path);
        }
    }
}

#[test]
fn no_source_or_document_is_over_a_thousand_lines() {
    let root = workspace().canonicalize().expect("the workspace");
    let mut files = Vec::new();
    for dir in ["crates", "fuzz", "tests", "scripts", "sdk/js/src", "sdk/js/playground", "sdk/js/test", "docs"] {
        all_sources(&root.join(dir), &mut files);
    }
    files.extend(["ARCHITECTURE.md", "README.md"].map(|name| root.join(name)));
    assert!(files.len() > 100, "only {} sources found", files.len());
    let mut problems = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&root).expect("under the workspace").to_string_lossy().replace('\\', "/");
        if GENERATED.contains(&relative.as_str()) {
            continue;
        }
        let lines = std::fs::read_to_string(&file).map(|text| text.lines().count()).unwrap_or(0);
        if lines > MAX_FILE_LINES {
            problems.push(format!("{relative}: {lines} lines (at most {MAX_FILE_LINES}: split it by concern)"));
        }
    }
    assert!(problems.is_empty(), "files over the limit:\n{}", problems.join("\n"));
}

#[test]
fn test_modules_are_blanked_and_what_follows_them_is_read() {
    let text = "fn shipped() {}\n#[cfg(test)]\nmod tests {\n    fn t() { let _ = '{'; let s = \"}\"; }\n}\nfn after() { Instant::now(); }\n#[cfg(test)]\nmod sim;\nfn last() {}\n";
    let lines = shipped_lines(text);
    assert_eq!(lines.len(), 9, "line numbers are the file's");
    assert_eq!(lines[0], "fn shipped() {}");
    assert!(lines[1..5].iter().all(String::is_empty), "{lines:?}");
    assert_eq!(lines[5], "fn after() { Instant::now(); }", "the code after a test module is read");
    assert!(lines[6..8].iter().all(String::is_empty));
    assert_eq!(lines[8], "fn last() {}");
    assert!(shipped_lines("#![cfg(test)]\nfn x() {}\n").iter().all(String::is_empty));
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
