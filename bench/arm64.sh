#!/usr/bin/env bash
# Prefill speed of every matmul mode at every instruction-set level this CPU has: what a user
# with Arm hardware (Apple Silicon, Graviton, Grace, Axion, Ampere) runs to give the project
# measured Arm figures, which no machine of the project's can (the CI proves the Arm kernels
# correct under qemu, which says nothing of speed). It runs on x86-64 too, with x86's levels.
#
#   bench/arm64.sh [--tokens 512,2048] [--threads N] [--rounds 2] [--repeat 2]
#                  [--preset flash] [--layers 4] [--out DIR]
#
# Writes a `clef synth --preset P --layers L` slice (flash: Clef-Flash widths, about 6 GB; tiny:
# the fixture sizes, for a quick check) and its q8 and ternary (round-to-nearest) bundles under
# DIR/models (reused when present), then, for each round, each level (`CLEF_ISA`, lowest first)
# and each (model, mode) — the slice under `--matmul exact` and `bf16`, the bundles under `int8`
# — one `clef bench --json` run. A mode or level the binary or CPU refuses is recorded as
# refused with its message (on Arm, `--matmul bf16` until the BFMMLA tile exists). Prints the
# CPU's description and features, then per (model, mode, tokens) the best tok/s of each level
# over the rounds, its ratio to the `scalar` level's, and the linears' share of the prefill.
# Every run is kept in DIR/runs.jsonl, the summary in DIR/summary.txt: send both.
#
# Options (defaults): --tokens 512,2048; --threads: every core; --rounds 2; --repeat 2 (each
# run reports the fastest of that many timed runs after a warm-up); --preset flash; --layers 4;
# --out target/arm64-bench. It builds target/release/clef if missing (CLEF_BIN=PATH uses
# another binary).
set -euo pipefail

die() { echo "arm64.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tokens=512,2048
threads=$(nproc 2>/dev/null || sysctl -n hw.ncpu)
rounds=2
repeat=2
preset=flash
layers=4
out=$root/target/arm64-bench
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage 0 ;;
    --tokens|--threads|--rounds|--repeat|--preset|--layers|--out)
      if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value"; fi
      case $1 in
        --tokens) tokens=$2 ;;
        --threads) threads=$2 ;;
        --rounds) rounds=$2 ;;
        --repeat) repeat=$2 ;;
        --preset) preset=$2 ;;
        --layers) layers=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    *) die "unknown argument $1 (--help lists the options)" ;;
  esac
done
for n in "$threads" "$rounds" "$repeat" "$layers"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "expected a positive integer, got '$n'"
done
[[ $tokens =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--tokens wants N[,N...], got '$tokens'"

clef=${CLEF_BIN:-$root/target/release/clef}
if [ -z "${CLEF_BIN:-}" ] && [ ! -x "$clef" ]; then
  (cd "$root" && cargo build --release -p clef-cli)
fi
[ -x "$clef" ] || die "no clef binary at $clef"

case $(uname -m) in
  aarch64|arm64) levels="scalar neon dotprod i8mm" ;;
  x86_64|amd64) levels="scalar avx2 avxvnni avx512 amx" ;;
  *) levels="scalar" ;;
esac

mkdir -p "$out/models"
: > "$out/runs.jsonl"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: bench/arm64.sh --tokens $tokens --threads $threads --rounds $rounds --repeat $repeat --preset $preset --layers $layers"
  echo "machine: $(uname -srm)"
  if command -v lscpu >/dev/null 2>&1; then
    lscpu | grep -E '^(Model name|Vendor ID|CPU\(s\)|Flags)' || true
  fi
  if [ -r /proc/cpuinfo ]; then
    grep -m1 -E '^Features' /proc/cpuinfo || true
  fi
  if command -v sysctl >/dev/null 2>&1 && [ "$(uname -s)" = Darwin ]; then
    sysctl -n machdep.cpu.brand_string || true
    sysctl hw.optional.arm 2>/dev/null | grep ': 1' | sed 's/^hw.optional.arm.//' | tr '\n' ' ' || true
    echo
  fi
  echo "clef: $("$clef" --version)"
} | tee "$out/summary.txt"

models=$out/models
slice=$models/$preset$layers
[ -d "$slice" ] || "$clef" synth --preset "$preset" --layers "$layers" --out "$slice"
[ -d "$slice-q8" ] || "$clef" convert --format q8 --from "$slice" --to "$slice-q8"
[ -d "$slice-tern" ] || "$clef" convert --format ternary --method rtn --from "$slice" --to "$slice-tern"

# (model folder, matmul mode) pairs
jobs=("$slice exact" "$slice bf16" "$slice-q8 int8" "$slice-tern int8")
for round in $(seq "$rounds"); do
  for level in $levels; do
    for job in "${jobs[@]}"; do
      read -r model mode <<<"$job"
      name=$(basename "$model")
      echo "== round $round/$rounds: CLEF_ISA=$level, $name, --matmul $mode" >&2
      set +e
      result=$(CLEF_ISA=$level "$clef" --threads "$threads" bench --model "$model" \
        --tokens "$tokens" --matmul "$mode" --repeat "$repeat" --json 2>"$out/last.err")
      rc=$?
      set -e
      if [ $rc -ne 0 ]; then
        why=$(grep -m1 -iE 'error|refus|lacks' "$out/last.err" | tr -d '"\\' || true)
        [ -n "$why" ] || why="exit code $rc"
        echo "   refused: $why" >&2
        printf '{"round":%d,"level":"%s","model":"%s","mode":"%s","refused":"%s"}\n' \
          "$round" "$level" "$name" "$mode" "$why" >>"$out/runs.jsonl"
        continue
      fi
      while IFS= read -r line; do
        case $line in
          "{"*) printf '{"round":%d,"level":"%s","model":"%s","mode":"%s",%s\n' \
            "$round" "$level" "$name" "$mode" "${line#\{}" >>"$out/runs.jsonl" ;;
        esac
      done <<<"$result"
    done
  done
done

python3 - "$out/runs.jsonl" "$levels" <<'PY' | tee -a "$out/summary.txt"
import collections, json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
levels = sys.argv[2].split()
best, share, refused = {}, {}, {}
for r in runs:
    if "refused" in r:
        refused[(r["model"], r["mode"], r["level"])] = r["refused"]
        continue
    key = (r["model"], r["mode"], r["tokens"], r["level"])
    if r["tokens_per_second"] > best.get(key, 0.0):
        best[key] = r["tokens_per_second"]
        share[key] = 100.0 * r["linear_seconds"] / r["seconds"]
print()
print("best tok/s over the rounds; x scalar = this level's tok/s / the scalar level's; "
      "linears = their share of the prefill")
print(f"{'model':<16} {'mode':<6} {'tokens':>6} {'level':<8} {'tok/s':>8} {'x scalar':>9} {'linears':>8}")
for model, mode, n in sorted({k[:3] for k in best}):
    base = best.get((model, mode, n, "scalar"))
    for level in levels:
        v = best.get((model, mode, n, level))
        if v is None:
            why = refused.get((model, mode, level), "not run")
            print(f"{model:<16} {mode:<6} {n:>6} {level:<8} refused: {why}")
            continue
        ratio = f"{v / base:.2f}x" if base else "-"
        print(f"{model:<16} {mode:<6} {n:>6} {level:<8} {v:8.1f} {ratio:>9} "
              f"{share[(model, mode, n, level)]:7.1f}%")
for (model, mode, level), why in sorted(refused.items()):
    if not any(k[0] == model and k[1] == mode for k in best):
        print(f"{model:<16} {mode:<6} {'':>6} {level:<8} refused: {why}")
PY
echo "runs: $out/runs.jsonl; summary: $out/summary.txt" >&2
