//! The conformance tables (`docs/providers/*.md`) against the pinned SDKs: runs
//! `tests/conformance/tables.py --check docs/providers`, which enumerates every message type and
//! field path from google-genai and openai and fails when a page omits one or names one the SDK
//! does not have. So moving an SDK pin cannot leave the tables silently behind.

use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "needs the conformance venv (scripts/conformance-setup.sh)"]
fn provider_tables_cover_every_sdk_message_and_field() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = repo.join("target/conformance/venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/conformance-setup.sh", python.display());
    let output = Command::new(&python)
        .current_dir(&repo)
        .args(["tests/conformance/tables.py", "--check", "docs/providers"])
        .output()
        .expect("the venv's python runs");
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the provider tables are behind the SDKs:\n{report}");
}
