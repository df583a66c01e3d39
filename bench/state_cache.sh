#!/usr/bin/env bash
# The state cache's benchmark on the `flash --layers 4` slice (Clef-Flash widths: 3 DeltaNet +
# 1 attention layer), 2 threads: a hit against a cold request, a batch of 8 question sets
# against 8 cold requests (bench/state_cache.py), then the peak-memory comparison under a load of
# distinct states (an ignored test of crates/clef-cli/tests/serve_state_cache.rs).
#
#   bench/state_cache.sh [ROUNDS]      (default 2; the slice is synthesized once, ~5 GB, in
#                                      CLEF_BENCH_DIR, default /tmp)
set -euo pipefail
rounds=${1:-2}
work=${CLEF_BENCH_DIR:-/tmp}
cargo build --release -p clef-cli >&2
[ -d "$work/flash4" ] || target/release/clef synth --preset flash --layers 4 --out "$work/flash4"
python3 bench/state_cache.py "$work/flash4" "$rounds"
CLEF_BENCH_ROUNDS=${CLEF_BENCH_ROUNDS:-3} cargo test --release -p clef-cli --test serve_state_cache \
  -- --ignored --nocapture peak_memory 2>&1 | grep -E 'round:|max over|test result|panicked'
