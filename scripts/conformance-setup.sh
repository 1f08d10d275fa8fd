#!/usr/bin/env bash
# Installs the provider conformance harness (tests/conformance/): a Python venv with the providers'
# official SDKs at the versions pinned in tests/conformance/requirements.txt. Idempotent: a stamp
# holding the requirements' hash skips the install on a second run (about 0.1 s).
#
#   target/conformance/venv/   google-genai, openai, websockets, pydantic (pinned)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/conformance/venv
REQUIREMENTS=tests/conformance/requirements.txt
stamp=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [[ -x $VENV/bin/python && "$(cat "$VENV/.stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "[conformance-setup] venv up to date"
  exit 0
fi
echo "[conformance-setup] installing $VENV from $REQUIREMENTS"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
# The SDK types the oracle uses import (a broken install fails here, not in a test).
"$VENV/bin/python" -c 'import google.genai.types, google.genai._live_converters, openai.types.realtime, openai.types.live, websockets'
echo "$stamp" >"$VENV/.stamp"
echo "[conformance-setup] done"
