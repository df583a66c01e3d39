#!/usr/bin/env bash
# The long form of the multi-replica test (crates/clef-cli/tests/scale_out.rs): three release
# `clef serve` replicas (tiny-a, 1 thread each) behind HAProxy with deploy/haproxy/haproxy.cfg,
# all on loopback. Two runs:
#   1. each replica's state cache sized for its share of the states plus one (what affinity
#      needs; the test asserts the hit rate with the header is at least 3x the rate without);
#   2. a cache that holds every state on every replica, the case most favourable to going
#      without the header (what is left of affinity's gain is the first visit to each replica).
# Each run also sends SIGTERM to one replica under load and counts every request.
#
#   bench/scale_out.sh [REPORT]      (default target/scale_out_report.txt)
#
# Sizes (override through the environment): CLEF_SCALE_OUT_STATES (31), _ROUNDS (8 question
# sets per state), _CLIENTS (3 at once for the follow-up workload), _LOAD_CLIENTS (8 during the
# SIGTERM), _LOAD_SECS (20). Figures from one run are in docs/deploy.md.
set -euo pipefail
cd "$(dirname "$0")/.."
report=${1:-target/scale_out_report.txt}
mkdir -p "$(dirname "$report")"
: > "$report"
# Debian installs haproxy in /usr/sbin, which is not on every user's PATH.
export PATH="$PATH:/usr/sbin"
command -v haproxy >/dev/null || { echo "error: haproxy not found (apt-get install haproxy)" >&2; exit 1; }

export CLEF_SCALE_OUT_STATES=${CLEF_SCALE_OUT_STATES:-31}
export CLEF_SCALE_OUT_ROUNDS=${CLEF_SCALE_OUT_ROUNDS:-8}
export CLEF_SCALE_OUT_CLIENTS=${CLEF_SCALE_OUT_CLIENTS:-3}
export CLEF_SCALE_OUT_LOAD_CLIENTS=${CLEF_SCALE_OUT_LOAD_CLIENTS:-8}
export CLEF_SCALE_OUT_LOAD_SECS=${CLEF_SCALE_OUT_LOAD_SECS:-20}
export CLEF_SCALE_OUT_REPORT="$PWD/$report"
unset CLEF_SCALE_OUT_CACHE_MIB

{
  echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p');" \
    "SIMD flags: $(grep -m1 -o -wE 'avx2|fma|f16c|avx512f|avx512_bf16|avx512_vnni|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "haproxy: $(haproxy -v | head -1)"
  echo "sizes: $CLEF_SCALE_OUT_STATES states x $CLEF_SCALE_OUT_ROUNDS question sets," \
    "$CLEF_SCALE_OUT_CLIENTS clients; SIGTERM under $CLEF_SCALE_OUT_LOAD_CLIENTS clients for" \
    "$CLEF_SCALE_OUT_LOAD_SECS s"
} >> "$report"

run() {
  echo "== $1" >> "$report"
  local t0=$SECONDS
  cargo test --release -p clef-cli --test scale_out -- --nocapture 2>&1 \
    | grep -E 'scale_out:|test result|panicked' >&2
  echo "(run took $((SECONDS - t0)) s)" >> "$report"
}

cargo test --release -p clef-cli --test scale_out --no-run >&2
run "run 1: state cache sized for a third of the states plus one"
# tiny-a keeps 0.77 MB per state: 64 MiB holds every state of the run.
CLEF_SCALE_OUT_CACHE_MIB=64 run "run 2: state cache holding every state (64 MiB)"
cat "$report"
