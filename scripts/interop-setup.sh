#!/usr/bin/env bash
# Installs what the interop tests (crates/svc-server/tests/interop.rs) need to run the official
# LiveKit clients against the embedded room: Debian packages, the Python SDK venv, the browser
# bundle and the test speech. Idempotent: every step is skipped when its stamp says it is done,
# so a second run takes about a second. Called by scripts/test.sh before any cargo step, so the
# main build links the system libopus (libopus-dev) and the last step proves the bundled one.
#
# Layout (all but the npm project are under the gitignored target/):
#   target/interop/venv/               livekit==1.2.1, livekit-api==1.2.2 (+ numpy)
#   target/interop/agents-venv/        livekit-agents==1.8.9 with its OpenAI plugin (LiveKit Agents
#                                      pins its own livekit client, 1.1.21: a venv of its own)
#   target/interop/audio/caller.wav    48 kHz mono s16 speech, published by the caller
#   target/interop/audio/responder.wav a different sentence, published by the responder
#   tests/interop/web/node_modules/    livekit-client, livekit-server-sdk, playwright-core, esbuild (npm ci)
#   tests/interop/web/dist/            bundle.js + index.html served to Chromium
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/interop
WEB=$ROOT/tests/interop/web

PY_REQUIREMENTS="livekit==1.2.1 livekit-api==1.2.2"
AGENTS_REQUIREMENTS="livekit-agents[openai]==1.8.9 livekit-plugins-openai==1.8.9"
# Two different sentences, so that A->B and B->A audio cannot be mistaken for each other.
CALLER_TEXT="The quick brown fox jumps over the lazy dog and runs into the forest."
RESPONDER_TEXT="Seven silver spoons were placed on the wooden kitchen table this morning."

step_start=0
step() { step_start=$(date +%s%N); printf '[interop-setup] %s ... ' "$1"; }
done_step() { printf '%s (%d ms)\n' "$1" $((($(date +%s%N) - step_start) / 1000000)); }
total_start=$(date +%s%N)

# --- Debian packages ----------------------------------------------------------------------------
# chromium: the browser peer; espeak-ng + sox: test speech; libopus-dev: the system libopus that
# svc-opus links when pkg-config finds it (without it svc compiles its bundled copy; the tests
# cover both); baresip: the phone svc-sip dials in its interop test; nodejs/npm and python3-venv
# only on a machine whose image lacks them.
step "Debian packages"
missing=()
for package in chromium espeak-ng sox libopus-dev baresip; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then missing+=(python3-venv); fi
if ((${#missing[@]})); then
  printf 'installing %s\n' "${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  done_step "installed"
else
  done_step "present"
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if ((node_major < 20)); then
  echo "[interop-setup] playwright-core 1.65 needs Node >= 20; this machine has $(node --version)" >&2
  exit 1
fi

# --- Python venvs ------------------------------------------------------------------------------
# venv TITLE DIR REQUIREMENTS IMPORTS: (re)creates DIR with REQUIREMENTS unless its stamp names
# them already, then proves IMPORTS load.
venv() {
  local title=$1 dir=$2 requirements=$3 imports=$4
  step "$title ($dir: $requirements)"
  if [[ -x $dir/bin/python && "$(cat "$dir/.interop-stamp" 2>/dev/null)" == "$requirements" ]]; then
    done_step "up to date"
    return
  fi
  printf '\n'
  rm -rf "$dir"
  python3 -m venv "$dir"
  # shellcheck disable=SC2086 # the requirement list is split on purpose
  "$dir/bin/pip" install --quiet --disable-pip-version-check $requirements
  "$dir/bin/python" -c "import $imports"
  echo "$requirements" >"$dir/.interop-stamp"
  done_step "[interop-setup] $title installed"
}
# The first import check proves the client SDK's FFI library loads.
venv "Python venv" "$OUT/venv" "$PY_REQUIREMENTS" "numpy, livekit.rtc, livekit.api"
venv "LiveKit Agents venv" "$OUT/agents-venv" "$AGENTS_REQUIREMENTS" "livekit.agents, livekit.plugins.openai"

# --- Browser peer: npm ci + bundle --------------------------------------------------------------
# Never `npx playwright install`: the harness drives Debian's /usr/bin/chromium.
step "npm ci (tests/interop/web)"
lock_sum=$(sha256sum "$WEB/package-lock.json" | cut -d' ' -f1)
if [[ "$(cat "$WEB/node_modules/.interop-stamp" 2>/dev/null)" == "$lock_sum" ]]; then
  done_step "up to date"
else
  printf '\n'
  (cd "$WEB" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_sum" >"$WEB/node_modules/.interop-stamp"
  done_step "[interop-setup] node_modules installed"
fi

step "bundle (tests/interop/web/dist)"
# Two pages: the interop peer (app.js, index.html) and the session client of the end-to-end
# session tests (session.js, session.html); recorder.js is shared.
sources=(app.js session.js recorder.js index.html session.html node_modules/.interop-stamp)
fresh=1
for source in "${sources[@]}"; do
  for built in bundle.js session.js; do
    [[ -f $WEB/dist/$built && $WEB/dist/$built -nt $WEB/$source ]] || fresh=0
  done
done
if ((fresh)); then
  done_step "up to date"
else
  (cd "$WEB" && ./node_modules/.bin/esbuild app.js --bundle --format=esm --target=es2020 --log-level=warning \
    --outfile=dist/bundle.js)
  (cd "$WEB" && ./node_modules/.bin/esbuild session.js --bundle --format=esm --target=es2020 --log-level=warning \
    --outfile=dist/session.js)
  cp "$WEB/index.html" "$WEB/session.html" "$WEB/dist/"
  done_step "built"
fi

# --- Test speech ----------------------------------------------------------------------------------
# espeak-ng speaks at 22.05 kHz; Chromium's fake microphone and the SDKs want 48 kHz mono s16.
# A short lead-in and tail of silence make each loop of the file sound like one utterance.
step "test speech (target/interop/audio)"
AUDIO=$OUT/audio
speech_stamp="$CALLER_TEXT|$RESPONDER_TEXT"
if [[ -f $AUDIO/caller.wav && -f $AUDIO/responder.wav && "$(cat "$AUDIO/.interop-stamp" 2>/dev/null)" == "$speech_stamp" ]]; then
  done_step "up to date"
else
  mkdir -p "$AUDIO"
  for pair in "caller:$CALLER_TEXT" "responder:$RESPONDER_TEXT"; do
    name=${pair%%:*} text=${pair#*:}
    espeak-ng -v en-us -s 150 -w "$AUDIO/$name.raw.wav" "$text"
    sox "$AUDIO/$name.raw.wav" -r 48000 -c 1 -b 16 -e signed-integer "$AUDIO/$name.wav" pad 0.2 0.4
    rm -f "$AUDIO/$name.raw.wav"
  done
  echo "$speech_stamp" >"$AUDIO/.interop-stamp"
  done_step "$(soxi -D "$AUDIO/caller.wav")s + $(soxi -D "$AUDIO/responder.wav")s"
fi

printf '[interop-setup] ready in %d ms\n' $((($(date +%s%N) - total_start) / 1000000))
