#!/usr/bin/env bash
# Run a command under a cgroup-v1 memory limit and report the cgroup's peak usage (page cache
# of the memory-mapped weights included), for the --low-memory measurement of
# docs/performance.md. Needs root and a writable /sys/fs/cgroup/memory.
#
#   bench/low_memory.sh 1536 target/release/clef --threads 2 bench --model DIR --tokens 512 --low-memory
set -euo pipefail
limit_mib=$1
shift
cg=/sys/fs/cgroup/memory/clef_low_memory_$$
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
echo $((limit_mib * 1024 * 1024)) > "$cg/memory.limit_in_bytes"
# A swapless machine: the limit bounds resident memory; file-backed pages are reclaimed.
( echo $BASHPID > "$cg/cgroup.procs"; exec "$@" )
echo "cgroup limit ${limit_mib} MiB; peak usage $(( $(cat "$cg/memory.max_usage_in_bytes") / 1024 / 1024 )) MiB; limit hits $(cat "$cg/memory.failcnt")"
