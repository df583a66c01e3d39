#!/usr/bin/env bash
# The integer matrix products against the exact BF16 path, end to end: `clef bench` on the
# `flash --layers 4` slice (Clef-Flash widths: 3 DeltaNet layers + 1 attention layer), BF16
# release vs q8 vs ternary bundles, alternating in one sitting so that machine load hits them
# alike, on the machine's best instruction set and with CLEF_ISA=avx2 (what an AVX2-only
# machine runs). Prints `lscpu` flags first; results go to OUT/*.json (one line per run).
#
#   bench/int8_speed.sh [OUT] [ROUNDS]      (default /tmp/int8-speed, 3 rounds)
#
# Needs about 16 GB of disk and, the first time, an hour or more on 2 cores: the ternary
# conversion (--method rtn) of the slice dominates. Existing folders are reused.
set -euo pipefail
out=${1:-/tmp/int8-speed}
rounds=${2:-3}
bin=${CLEF_BIN:-target/release/clef}
work=${CLEF_BENCH_DIR:-/tmp}
mkdir -p "$out"
cargo build --release -p clef-cli >&2
lscpu | grep -E '^(Model name|Flags)' | tee "$out/lscpu.txt"
[ -d "$work/flash4" ] || "$bin" synth --preset flash --layers 4 --out "$work/flash4"
# A q8 bundle written before clef-q8-v2 (no rotated linears) is converted again.
grep -qs '"clef-q8-v2"' "$work/flash4-q8/manifest.json" \
  || "$bin" convert --format q8 --force --from "$work/flash4" --to "$work/flash4-q8"
[ -d "$work/flash4-tern" ] || "$bin" convert --format ternary --method rtn --from "$work/flash4" --to "$work/flash4-tern"
for isa in best avx2; do
  for round in $(seq "$rounds"); do
    for model in flash4 flash4-q8 flash4-tern; do
      env_isa=()
      [ "$isa" = best ] || env_isa=(CLEF_ISA="$isa")
      env "${env_isa[@]}" "$bin" --threads 2 bench --model "$work/$model" --tokens 512,2048 --json \
        | sed "s/^{/{\"isa_setting\":\"$isa\",\"round\":$round,\"model\":\"$model\",/" \
        | tee -a "$out/runs.jsonl"
    done
  done
done
python3 - "$out/runs.jsonl" <<'PY'
import json, sys, collections
runs = [json.loads(l) for l in open(sys.argv[1])]
best = collections.defaultdict(float)
for r in runs:
    key = (r["isa_setting"], r["model"], r["tokens"])
    best[key] = max(best[key], r["tokens_per_second"])
for isa in ("best", "avx2"):
    for n in (512, 2048):
        base = best.get((isa, "flash4", n))
        if not base:
            continue
        row = [f"{isa:>5} {n:>5} tokens: bf16 {base:6.1f} tok/s"]
        for m in ("flash4-q8", "flash4-tern"):
            v = best.get((isa, m, n))
            if v:
                row.append(f"{m[7:]} {v:6.1f} ({v / base:.2f}x)")
        print(" | ".join(row))
PY
