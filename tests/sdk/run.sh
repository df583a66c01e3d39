#!/usr/bin/env bash
# Client compatibility: a real `clef serve` driven by Cloudflare's official SDKs
# (PyPI `cloudflare` 5.9.0, npm `cloudflare` 7.3.0), plus an OpenAPI check of /openapi.json.
#
#   tests/sdk/run.sh target/release/clef
#
# Environments: target/sdk/venv (Python, from tests/sdk/python/requirements.txt) and
# tests/sdk/node/node_modules (npm ci). Exit status 0 only when every part passes.
# Environment: PYTHON (interpreter for the venv, default python3.11 or python3),
# CLEF_SDK_MODEL (model folder, default tests/fixtures/models/nano).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 CLEF_BINARY" >&2
  exit 2
fi
BIN=$(realpath "$1")
[[ -x $BIN ]] || { echo "not an executable: $BIN" >&2; exit 2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SDK=$ROOT/tests/sdk
WORK=$ROOT/target/sdk
VENV=$WORK/venv
MODEL_DIR=${CLEF_SDK_MODEL:-$ROOT/tests/fixtures/models/nano}
mkdir -p "$WORK"
START=$SECONDS

step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - START)); }

# --- Python environment -----------------------------------------------------
step "python venv: $VENV"
if [[ ! -x $VENV/bin/python ]]; then
  PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
  "$PYTHON" -m venv "$VENV"
fi
REQ=$SDK/python/requirements.txt
STAMP=$VENV/.clef-sdk-requirements
if [[ ${CLEF_SDK_REINSTALL:-0} == 1 || ! -f $STAMP ]] || ! cmp -s "$REQ" "$STAMP"; then
  timeout 600 "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --timeout 60 --retries 2 \
    -q --require-virtualenv -r "$REQ"
  cp "$REQ" "$STAMP"
else
  echo "requirements already installed"
fi

# --- Node environment -------------------------------------------------------
# npm ci deletes and re-extracts node_modules (about 10 s of disk work for this SDK), so it runs
# only when node_modules was not made from the committed lockfile; CLEF_SDK_REINSTALL=1 forces it.
step "npm ci in tests/sdk/node"
NODE_STAMP=$SDK/node/node_modules/.clef-sdk-package-lock.json
if [[ ${CLEF_SDK_REINSTALL:-0} == 1 || ! -f $NODE_STAMP ]] || ! cmp -s "$SDK/node/package-lock.json" "$NODE_STAMP"; then
  (cd "$SDK/node" && timeout 600 npm ci --no-audit --no-fund --fetch-timeout=60000 --fetch-retries=2 --loglevel=error)
  cp "$SDK/node/package-lock.json" "$NODE_STAMP"
else
  echo "node_modules already installed from package-lock.json"
fi

# --- Server -----------------------------------------------------------------
KEY="clef-sdk-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
SERVER_OUT=$WORK/server.stdout
SERVER_LOG=$WORK/server.log
SERVER_PID=
cleanup() {
  local rc=$?
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "start $BIN serve --model $MODEL_DIR"
"$BIN" serve --model "$MODEL_DIR" --addr 127.0.0.1:0 --api-key "$KEY" >"$SERVER_OUT" 2>"$SERVER_LOG" &
SERVER_PID=$!

server_failed() {
  echo "server: $*" >&2
  echo "--- server stdout" >&2; tail -n 20 "$SERVER_OUT" >&2 || true
  echo "--- server stderr" >&2; tail -n 40 "$SERVER_LOG" >&2 || true
  exit 1
}

PORT=
for _ in $(seq 300); do # 30 s to bind
  PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$SERVER_OUT" | head -n 1)
  [[ -n $PORT ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || server_failed "exited before listening"
  sleep 0.1
done
[[ -n $PORT ]] || server_failed "no 'listening on' line within 30 s"
BASE=http://127.0.0.1:$PORT
echo "listening on port $PORT"

# /readyz needs no token; 60 s for the model to load, 2 s per probe
"$VENV/bin/python" - "$BASE" "$SERVER_PID" <<'EOF' || server_failed "not ready within 60 s"
import os, sys, time, urllib.request
base, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=2) as resp:
            if resp.status == 200:
                print("ready:", resp.read().decode())
                sys.exit(0)
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("server exited while loading")
    time.sleep(0.2)
sys.exit(1)
EOF

export CLEF_SDK_BASE=$BASE CLEF_SDK_KEY=$KEY

# --- OpenAPI ----------------------------------------------------------------
step "openapi-spec-validator on /openapi.json"
OPENAPI=FAIL
if "$VENV/bin/python" -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1] + "/openapi.json", timeout=30).read())' \
    "$BASE" "$WORK/openapi.json" &&
  timeout 60 "$VENV/bin/openapi-spec-validator" --validation-errors all "$WORK/openapi.json"; then
  OPENAPI=PASS
fi

# --- SDK suites -------------------------------------------------------------
step "Python SDK suite"
PY=FAIL
if timeout 120 "$VENV/bin/python" "$SDK/python/test_sdk.py"; then PY=PASS; fi

step "Node SDK suite"
NODE=FAIL
if (cd "$SDK/node" && timeout 120 node --test --test-reporter=spec sdk.test.mjs); then NODE=PASS; fi

kill -0 "$SERVER_PID" 2>/dev/null || server_failed "exited during the suites"

PY_VERSION=$("$VENV/bin/python" -c 'import cloudflare; print(cloudflare.__version__)')
NODE_VERSION=$(cd "$SDK/node" && node -e 'import("cloudflare/version").then(m => console.log(m.VERSION))')
VALIDATOR_VERSION=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("openapi-spec-validator"))')
printf '\n== summary (%ds, server %s)\n' $((SECONDS - START)) "$BIN"
echo "SUMMARY python SDK (cloudflare $PY_VERSION): $PY"
echo "SUMMARY node SDK (cloudflare $NODE_VERSION): $NODE"
echo "SUMMARY openapi (openapi-spec-validator $VALIDATOR_VERSION): $OPENAPI"
[[ $PY == PASS && $NODE == PASS && $OPENAPI == PASS ]]
