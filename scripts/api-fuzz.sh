#!/usr/bin/env bash
# Points the standard OpenAPI fuzzer, schemathesis (PyPI, pinned, in target/api-fuzz/venv), at a
# real `svc serve` and fails on any disagreement between the server and its own OpenAPI document:
# every check, every phase (examples, coverage, fuzzing, stateful), once with an API key holding
# every realtime scope and once with a user access token, on SQLite and on Postgres.
#
#   scripts/api-fuzz.sh                      fixed seed (the test command runs this, then --random)
#   scripts/api-fuzz.sh --random             a random seed, printed first, for replay with --seed
#   scripts/api-fuzz.sh --seed N [--max-examples N] [--backend sqlite|postgres|both]
#
# Sessions really start (every provider family points at svc-testkit's fake upstream). The one
# relaxation schemathesis gets is in tests/api-fuzz/schemathesis.toml, with its reasons. The
# backends run side by side, each with its own server; their outputs are printed in order once
# both are done. Outputs and JUnit reports land in target/api-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/api-fuzz
SCHEMATHESIS=schemathesis==4.32.5
seed=20261125
max_examples=25
backends="sqlite postgres"
while (($#)); do
  case $1 in
    --seed) seed=$2; shift 2 ;;
    --random) seed=$(( (RANDOM << 15) | RANDOM )); shift ;;
    --max-examples) max_examples=$2; shift 2 ;;
    --backend) backends=${2/both/sqlite postgres}; shift 2 ;;
    *) echo "api-fuzz: unknown argument $1" >&2; exit 64 ;;
  esac
done
echo "[api-fuzz] seed $seed (replay: scripts/api-fuzz.sh --seed $seed), $max_examples examples per operation"

mkdir -p "$OUT"
VENV=$OUT/venv
if [[ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$SCHEMATHESIS" ]]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$SCHEMATHESIS"
  echo "$SCHEMATHESIS" >"$VENV/.stamp"
fi

cargo build --locked --quiet -p svc-server --bin svc -p svc-testkit --bin fake-upstream
SVC=$ROOT/target/debug/svc

# Sessions really start: every provider family points at the fake upstream, so a schema-valid
# start is a 200 (a server without keys would answer 503, which is an operator's problem, not the
# contract's).
fake_pid=
"$ROOT/target/debug/fake-upstream" >"$OUT/fake.env" 2>"$OUT/fake.log" &
fake_pid=$!
# The fake prints its six variables once it listens; on a loaded machine that has taken over 5 s.
# A server started without them refuses every session (503), which would read as a contract failure.
for _ in $(seq 1 600); do [[ $(wc -l <"$OUT/fake.env") -ge 6 ]] && break; sleep 0.05; done
if [[ $(wc -l <"$OUT/fake.env") -lt 6 ]]; then
  echo "api-fuzz: the fake upstream did not start within 30 s (see $OUT/fake.log)" >&2
  exit 1
fi
while IFS= read -r line; do export "${line?}"; done <"$OUT/fake.env"

# One backend's runs: its own server, database and schemathesis cache, so that the backends run
# side by side (schemathesis spends most of its time generating cases in one Python thread: two
# backends at once take about the time of one on two cores). Exits with its failure count.
fuzz_backend() {
  local backend=$1 failures=0 data port base key user_token token credential
  # Not local: the exit trap reads them (the subshell keeps them apart from the other backend).
  server_pid= pg_db=
  cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    server_pid=
    if [[ -n $pg_db ]]; then psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null 2>&1 || true; fi
    pg_db=
  }
  trap cleanup EXIT
  data=$(mktemp -d "$OUT/data.XXXX")
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base=http://127.0.0.1:$port
  args=(--data-dir "$data" --listen "127.0.0.1:$port" --public-url "$base" --room-udp-port 0 --log warn)
  if [[ $backend == postgres ]]; then
    pg_db=svc_fuzz_$$_$RANDOM
    psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $pg_db" >/dev/null
    args+=(--database-url "postgres://postgres@127.0.0.1:5432/$pg_db")
  fi
  "$SVC" "${args[@]}" workspace create --slug fuzz --name Fuzz >/dev/null
  key=$("$SVC" "${args[@]}" key create --workspace fuzz --scope realtime:start --scope realtime:read \
    --scope realtime:logs --scope realtime:delete --scope support:write --scope user_tokens:mint)
  # The recordings capability too, so that `POST /sessions/import` is fuzzed past its 403.
  "$SVC" "${args[@]}" user create --workspace fuzz --email fuzz@example.com --role admin --capability recordings >/dev/null
  user_token=$("$SVC" "${args[@]}" user token --workspace fuzz --email fuzz@example.com)
  "$SVC" "${args[@]}" serve >"$OUT/svc.$backend.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do curl -fs "$base/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  mkdir -p "$OUT/cache.$backend"
  for credential in api_key user_token; do
    token=$key
    [[ $credential == user_token ]] && token=$user_token
    echo "[api-fuzz] $backend, $credential"
    # From the backend's own directory, where schemathesis keeps its cache.
    if ! (cd "$OUT/cache.$backend" && "$VENV/bin/schemathesis" --config-file "$ROOT/tests/api-fuzz/schemathesis.toml" run "$base/api/v1/external/openapi.json" \
      --header "Authorization: Bearer $token" --checks all --phases examples,coverage,fuzzing,stateful \
      --seed "$seed" --max-examples "$max_examples" --no-color --request-timeout 10 \
      --report junit --report-dir "$OUT/report.$backend.$credential" >"$OUT/$backend.$credential.txt" 2>&1); then
      failures=$((failures + 1))
      echo "[api-fuzz] FAILED: $backend, $credential (target/api-fuzz/$backend.$credential.txt):" >&2
      grep -E '^(FAILURES|_+ |[0-9]+\. |    |\[5|Summary|[A-Z][a-z]+ [a-z]+:)' "$OUT/$backend.$credential.txt" | head -80 >&2 || true
    else
      tail -n 4 "$OUT/$backend.$credential.txt"
    fi
  done
  cleanup
  rm -rf "$data"
  exit "$failures"
}

pids=()
trap 'for pid in "${pids[@]}" $fake_pid; do kill "$pid" 2>/dev/null || true; done' EXIT
for backend in $backends; do
  (fuzz_backend "$backend") >"$OUT/fuzz.$backend.out" 2>&1 &
  pids+=("$!")
done
failures=0
backend_list=($backends)
for i in "${!pids[@]}"; do
  # Its failed runs; a backend that failed to set up (set -e: another status) counts as one.
  status=0
  wait "${pids[$i]}" || status=$?
  failures=$((failures + (status > 2 ? 1 : status)))
  cat "$OUT/fuzz.${backend_list[$i]}.out"
done
if ((failures)); then
  echo "[api-fuzz] $failures run(s) failed; seed $seed" >&2
  exit 1
fi
echo "[api-fuzz] no failures (seed $seed)"
