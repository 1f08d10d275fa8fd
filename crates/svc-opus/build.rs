//! Links libopus: the system library when pkg-config finds one (Debian's `libopus-dev`), otherwise
//! the bundled sources in `libopus/`, compiled with `cc` — so a machine with only the Rust
//! toolchain and a C compiler builds svc without an apt step or cmake.
//!
//! `SVC_OPUS_BUNDLED=1` skips the system library (CI uses it to prove the fallback). The choice
//! is passed to the crate as `cfg(svc_opus_bundled)`.

use std::path::{Path, PathBuf};

/// Which source lists of the `*_sources.mk` files the floating-point build compiles.
const SOURCE_LISTS: [(&str, &str); 5] = [
    ("celt_sources.mk", "CELT_SOURCES"),
    ("silk_sources.mk", "SILK_SOURCES"),
    ("silk_sources.mk", "SILK_SOURCES_FLOAT"),
    ("opus_sources.mk", "OPUS_SOURCES"),
    ("opus_sources.mk", "OPUS_SOURCES_FLOAT"),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=libopus");
    println!("cargo:rerun-if-env-changed=SVC_OPUS_BUNDLED");
    println!("cargo::rustc-check-cfg=cfg(svc_opus_bundled)");
    let forced = std::env::var("SVC_OPUS_BUNDLED").is_ok_and(|value| !value.is_empty() && value != "0");
    if !forced && pkg_config::Config::new().atleast_version("1.3").probe("opus").is_ok() {
        return;
    }
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("libopus");
    let mut build = cc::Build::new();
    for (list_file, variable) in SOURCE_LISTS {
        for source in sources(&root.join(list_file), variable) {
            build.file(root.join(source));
        }
    }
    build
        .include(root.join("include"))
        .include(root.join("celt"))
        .include(root.join("silk"))
        .include(root.join("silk/float"))
        .include(root.join("src"))
        // What libopus's own configure would put in config.h for a C99 compiler on Linux.
        .define("OPUS_BUILD", None)
        .define("VAR_ARRAYS", None)
        .define("HAVE_LRINT", None)
        .define("HAVE_LRINTF", None)
        .define("PACKAGE_VERSION", Some("\"1.3-svc-bundled\""))
        .opt_level(2)
        .warnings(false)
        .compile("opus");
    println!("cargo:rustc-cfg=svc_opus_bundled");
}

/// The files of `variable` in a libopus `*_sources.mk` list (`NAME = \` then one path a line).
fn sources(list: &Path, variable: &str) -> Vec<String> {
    let text = std::fs::read_to_string(list).unwrap_or_else(|error| panic!("reading {}: {error}", list.display()));
    let mut lines = text.lines().skip_while(|line| line.split('=').next().map(str::trim) != Some(variable));
    let Some(first) = lines.next() else { panic!("{variable} is not in {}", list.display()) };
    let mut files = Vec::new();
    let mut continues = first.trim_end().ends_with('\\');
    for line in lines {
        if !continues {
            break;
        }
        continues = line.trim_end().ends_with('\\');
        let file = line.trim().trim_end_matches('\\').trim();
        if !file.is_empty() {
            files.push(file.to_owned());
        }
    }
    assert!(!files.is_empty(), "{variable} in {} lists no file", list.display());
    files
}
