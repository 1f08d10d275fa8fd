#!/usr/bin/env bash
# Builds the TypeScript SDK (sdk/js) and the playground that `svc serve` embeds at `/`.
#
#   scripts/build-playground.sh          regenerate sdk/js/src/openapi.d.ts from docs/openapi.json,
#                                        type-check, build sdk/js/dist, and write the playground's
#                                        assets to crates/svc-server/playground/ (commit them: the
#                                        server compiles them in, so `cargo run` needs no npm)
#   scripts/build-playground.sh --check  the same into a scratch directory, failing when the
#                                        committed REST types or assets differ from a fresh build
#                                        (the test command runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SDK=$ROOT/sdk/js
ASSETS=$ROOT/crates/svc-server/playground
check=0
[[ ${1:-} == --check ]] && check=1

# npm ci once per lockfile.
lock_sum=$(sha256sum "$SDK/package-lock.json" | cut -d' ' -f1)
if [[ "$(cat "$SDK/node_modules/.svc-stamp" 2>/dev/null)" != "$lock_sum" ]]; then
  (cd "$SDK" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_sum" >"$SDK/node_modules/.svc-stamp"
fi

out=$ASSETS
types=$SDK/src/openapi.d.ts
if ((check)); then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  out=$scratch/assets
  types=$scratch/openapi.d.ts
fi
mkdir -p "$out"

cd "$SDK"
# The REST types come from the OpenAPI document, so the two cannot drift.
./node_modules/.bin/openapi-typescript "$ROOT/docs/openapi.json" --empty-objects-unknown --output "$types" --silent
if ((check)) && ! cmp -s "$types" src/openapi.d.ts; then
  echo "sdk/js/src/openapi.d.ts is stale: docs/openapi.json changed; run scripts/build-playground.sh and commit" >&2
  diff -u src/openapi.d.ts "$types" | head -40 >&2 || true
  exit 1
fi
./node_modules/.bin/tsc -p tsconfig.json
./node_modules/.bin/tsc -p tsconfig.playground.json
./node_modules/.bin/esbuild playground/playground.ts --bundle --format=esm --target=es2020 --minify \
  --legal-comments=none --log-level=warning --outfile="$out/playground.js"
cp playground/index.html playground/playground.css playground/favicon.svg "$out/"

if ((check)); then
  for file in index.html playground.js playground.css favicon.svg; do
    if ! cmp -s "$out/$file" "$ASSETS/$file"; then
      echo "crates/svc-server/playground/$file differs from a fresh build of sdk/js: run scripts/build-playground.sh and commit" >&2
      exit 1
    fi
  done
  echo "playground assets and REST types are up to date"
else
  ls -l "$ASSETS"
fi
