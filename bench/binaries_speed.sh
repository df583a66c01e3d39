#!/usr/bin/env bash
# Two `clef` binaries (before and after a change that should not change speed) alternating in
# one sitting on the `flash --layers 4` slice (Clef-Flash widths): the BF16 release on the exact
# path and the q8 bundle on the integer path, at 512 and 2,048 tokens, `clef bench` on 2
# threads. Prints `lscpu` flags, then per (model, tokens) the best tokens/s of each binary over
# the rounds and their ratio; every run is kept in OUT/runs.jsonl.
#
#   bench/binaries_speed.sh OLD_CLEF NEW_CLEF [OUT] [ROUNDS]   (default /tmp/binaries-speed, 3)
#
# The slice and its q8 bundle are written once under CLEF_BENCH_DIR (default /tmp; about 6 GB)
# with NEW_CLEF and reused.
set -euo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
out=${3:-/tmp/binaries-speed}
rounds=${4:-3}
work=${CLEF_BENCH_DIR:-/tmp}
mkdir -p "$out"
lscpu | grep -E '^(Model name|Flags)' | tee "$out/lscpu.txt"
[ -d "$work/flash4" ] || "$new" synth --preset flash --layers 4 --out "$work/flash4"
[ -d "$work/flash4-q8" ] || "$new" convert --format q8 --from "$work/flash4" --to "$work/flash4-q8"
for round in $(seq "$rounds"); do
  for model in flash4 flash4-q8; do
    # alternate which binary goes first, so that a drift within a round hits both alike
    if [ $((round % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
    for which in $order; do
      bin=$old
      [ "$which" = new ] && bin=$new
      "$bin" --threads 2 bench --model "$work/$model" --tokens 512,2048 --json \
        | sed "s/^{/{\"binary\":\"$which\",\"round\":$round,\"model\":\"$model\",/" \
        | tee -a "$out/runs.jsonl"
    done
  done
done
python3 - "$out/runs.jsonl" <<'PY'
import json, sys, collections
best = collections.defaultdict(float)
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["model"], r["matmul"], r["tokens"], r["binary"])
    best[key] = max(best[key], r["tokens_per_second"])
for (model, matmul, n) in sorted({k[:3] for k in best}):
    o, w = best[(model, matmul, n, "old")], best[(model, matmul, n, "new")]
    print(f"{model:>10} {matmul:>5} {n:>5} tokens: old {o:7.1f} tok/s, new {w:7.1f} tok/s, new/old {w / o:.3f}")
PY
