#!/usr/bin/env bash
# The hostile-client suite's long form (issue 15): the figures of docs/server.md, "Hostile
# clients", and a 10-minute fuzz run over HTTP. Loopback only; every part is bounded in time.
#   bench/hostile.sh            everything (about 15 minutes on 2 cores)
#   FUZZ_SECONDS=60 bench/hostile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
lscpu | grep -E '^(Model name|Flags)' | sed 's/^/# /'
cargo build --release -p clef-cli
python3 bench/hostile.py --seconds "${LOAD_SECONDS:-30}"
# The HTTP fuzz suite, long form, on the release build.
CLEF_FUZZ_SECONDS="${FUZZ_SECONDS:-600}" cargo test --release -p clef-cli --test serve_fuzz -- --nocapture
