#!/usr/bin/env bash
# Side-by-side prefill speed: the PyTorch reference (transformers, bf16 and f32) against
# `clef bench` (each --matmul mode), one command, in one sitting.
#
#   bench/reference.sh [--tokens 512,2048] [--threads N] [--rounds 2] [--repeat 2] [--out DIR]
#                      [--dtypes bf16,f32] [--modes exact,bf16] [--bundle-modes int8]
#                      MODEL_DIR [BUNDLE_DIR...]
#
# MODEL_DIR is a release or a `clef synth` folder (config.json + model.safetensors); PyTorch
# times its text model (bench/reference_prefill.py: backbone + final norm, no head) and clef.rs
# runs it with each of --modes. Each BUNDLE_DIR (e.g. a q8 bundle) is run by clef.rs only, with
# each of --bundle-modes. A clef mode that the binary, the model or the CPU refuses is reported
# as "refused: <message>" and skipped. Each round runs every job once, PyTorch and clef.rs jobs
# interleaved, in reverse order on even rounds, so that drift in machine load hits all alike;
# the summary keeps the best tok/s over the rounds. clef's tok/s includes its joint head (about
# 3% at 512 tokens) and PyTorch's does not; the "backbone" column is clef without the head.
#
# Within a job, both engines warm up once at each timed length and report the fastest of
# --repeat timed runs (PyTorch: --warmup 1 --repeat R; clef bench: --warmup 1 --repeat R).
#
# Options (defaults): --tokens 512,2048; --threads: every core (nproc); --rounds 2; --repeat 2;
# --out target/reference-bench (raw logs in raw/, results.tsv, summary.txt; the folder is reused
# only if an earlier run of this script made it); --dtypes bf16,f32 (PyTorch; "none" skips it);
# --modes exact,bf16 (clef on MODEL_DIR); --bundle-modes int8 (clef on each BUNDLE_DIR).
#
# The first run makes a virtualenv in target/ref-venv with the pinned torch and transformers
# below (PyPI's Linux x86_64 torch is the CUDA build: about 5.6 GB with its nvidia-* wheels; it
# runs on the CPU as is. REF_TORCH_INDEX=URL installs torch from another index, e.g. a CPU-only
# one, instead). It builds target/release/clef if missing (CLEF_BIN=PATH uses another binary).
# Memory: PyTorch holds the text model in the timed dtype (4 bytes a parameter in f32; the
# full model, LM head included, is loaded first), one dtype at a time.
set -euo pipefail

TORCH_VERSION=2.15.0
TRANSFORMERS_VERSION=5.24.0

die() { echo "reference.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tokens=512,2048
threads=$(nproc)
rounds=2
repeat=2
out=
dtypes=bf16,f32
modes=exact,bf16
bundle_modes=int8
dirs=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage 0 ;;
    --tokens|--threads|--rounds|--repeat|--out|--dtypes|--modes|--bundle-modes)
      if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value"; fi
      case $1 in
        --tokens) tokens=$2 ;;
        --threads) threads=$2 ;;
        --rounds) rounds=$2 ;;
        --repeat) repeat=$2 ;;
        --out) out=$2 ;;
        --dtypes) dtypes=$2 ;;
        --modes) modes=$2 ;;
        --bundle-modes) bundle_modes=$2 ;;
      esac
      shift 2 ;;
    --tokens=*|--threads=*|--rounds=*|--repeat=*|--out=*|--dtypes=*|--modes=*|--bundle-modes=*)
      set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    --) shift; dirs+=("$@"); break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) dirs+=("$1"); shift ;;
  esac
done

[[ $tokens =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--tokens takes positive integers separated by commas, got '$tokens'"
[[ $threads =~ ^[1-9][0-9]*$ ]] || die "--threads takes a positive integer, got '$threads'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds takes a positive integer, got '$rounds'"
[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "--repeat takes a positive integer, got '$repeat'"
[ "$dtypes" = none ] || [[ $dtypes =~ ^(bf16|f32)(,(bf16|f32))*$ ]] || die "--dtypes takes bf16,f32 (or none), got '$dtypes'"
[[ $modes =~ ^((exact|int8|bf16)(,(exact|int8|bf16))*)?$ ]] || die "--modes takes a comma list of exact, int8, bf16, got '$modes'"
[[ $bundle_modes =~ ^((exact|int8|bf16)(,(exact|int8|bf16))*)?$ ]] || die "--bundle-modes takes a comma list of exact, int8, bf16, got '$bundle_modes'"
[ ${#dirs[@]} -ge 1 ] || { echo "reference.sh: MODEL_DIR missing" >&2; usage 2; }
for d in "${dirs[@]}"; do
  [ -d "$d" ] || die "no model folder at $d"
  [ -f "$d/config.json" ] || die "$d has no config.json: not a model folder"
done
model=$(realpath "${dirs[0]}")
bundles=()
for d in "${dirs[@]:1}"; do bundles+=("$(realpath "$d")"); done
[ -n "$out" ] || out=$root/target/reference-bench
mkdir -p "$out"
out=$(realpath "$out")
if [ -e "$out/.reference-bench" ]; then
  rm -rf "$out/raw" "$out/results.tsv" "$out/refused.tsv" "$out/failed.tsv" "$out/summary.txt" "$out/env.txt"
elif [ -n "$(ls -A "$out")" ]; then
  die "--out $out is not empty and was not made by this script; name an empty or new folder"
fi
touch "$out/.reference-bench"
mkdir -p "$out/raw"
cd "$root"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
command -v "$py" >/dev/null || die "$py not found (set PYTHON=...)"

# --- the PyTorch reference's virtualenv (once) ------------------------------------------------
venv=$root/target/ref-venv
pins="torch==$TORCH_VERSION transformers==$TRANSFORMERS_VERSION"
vpy=$venv/bin/python
venv_ok() {
  [ -x "$vpy" ] && [ "$(cat "$venv/.pins" 2>/dev/null)" = "$pins" ] \
    && "$vpy" -c 'import torch, transformers; from transformers import Qwen3_5TextModel, Qwen3_5ForConditionalGeneration' 2>/dev/null
}
if [ "$dtypes" != none ] && ! venv_ok; then
  echo "== making $venv ($pins); the first time takes a while" >&2
  rm -rf "$venv"
  "$py" -m venv "$venv"
  {
    "$vpy" -m pip install --upgrade pip
    if [ -n "${REF_TORCH_INDEX:-}" ]; then
      "$vpy" -m pip install --index-url "$REF_TORCH_INDEX" "torch==$TORCH_VERSION"
    fi
    "$vpy" -m pip install "torch==$TORCH_VERSION" "transformers==$TRANSFORMERS_VERSION"
  } 2>&1 | tee "$root/target/ref-venv-install.log" >&2
  echo "$pins" > "$venv/.pins"
  venv_ok || die "$venv does not import torch + transformers' Qwen3_5TextModel; see target/ref-venv-install.log"
fi

# --- clef ---------------------------------------------------------------------------------------
bin=${CLEF_BIN:-$root/target/release/clef}
if [ ! -x "$bin" ]; then
  [ -z "${CLEF_BIN:-}" ] || die "CLEF_BIN=$bin is not an executable"
  echo "== building clef (cargo build --release -p clef-cli)" >&2
  cargo build --release -p clef-cli >&2
fi

# --- the machine and the versions ---------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: bench/reference.sh --tokens $tokens --threads $threads --rounds $rounds --repeat $repeat --dtypes $dtypes --modes '$modes' --bundle-modes '$bundle_modes' $model ${bundles[*]}"
  lscpu | grep -E '^Model name' | sed 's/  */ /g' || true
  echo "cores: $(nproc); memory: $(free -g | awk '/^Mem:/ {print $2 " GiB total, " $7 " GiB available"}')"
  flags=$(lscpu | sed -n 's/^Flags: *//p')
  line="cpu flags:"
  for f in avx2 avx512f avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16; do
    if [[ " $flags " == *" $f "* ]]; then line+=" $f"; else line+=" -$f"; fi
  done
  echo "$line"
  echo "clef: $("$bin" --version 2>&1 | head -1) ($bin); git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' + local changes')"
  if [ "$dtypes" != none ]; then
    "$vpy" -c 'import platform, torch, transformers; print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}")'
    "$vpy" -c 'import sys; sys.path.insert(0, "bench"); import reference_prefill as r; print("\n".join(r.onednn_report()))'
  fi
} | tee "$out/env.txt" >&2

# --- the jobs -------------------------------------------------------------------------------------
# A job is "pytorch|DTYPE|MODEL" or "clef|MODE|DIR"; PyTorch and clef jobs alternate.
py_jobs=() clef_jobs=()
if [ "$dtypes" != none ]; then
  IFS=, read -ra ds <<< "$dtypes"
  for d in "${ds[@]}"; do py_jobs+=("pytorch|$d|$model"); done
fi
IFS=, read -ra ms <<< "$modes"
for m in "${ms[@]}"; do clef_jobs+=("clef|$m|$model"); done
IFS=, read -ra bms <<< "$bundle_modes"
for b in "${bundles[@]}"; do
  for m in "${bms[@]}"; do clef_jobs+=("clef|$m|$b"); done
done
jobs=()
for ((i = 0; i < ${#py_jobs[@]} || i < ${#clef_jobs[@]}; i++)); do
  [ $i -ge ${#py_jobs[@]} ] || jobs+=("${py_jobs[i]}")
  [ $i -ge ${#clef_jobs[@]} ] || jobs+=("${clef_jobs[i]}")
done
[ ${#jobs[@]} -gt 0 ] || die "nothing to run (--dtypes none and no clef modes)"

printf 'round\tengine\tmode\tmodel\ttokens\ttok_s\tseconds\tbackbone_tok_s\tdetail\n' > "$out/results.tsv"
: > "$out/refused.tsv"
: > "$out/failed.tsv"
declare -A refused=()
failures=0

run_pytorch() {  # round dtype model log
  "$vpy" bench/reference_prefill.py --model "$3" --tokens "$tokens" --threads "$threads" \
    --dtype "$2" --warmup 1 --repeat "$repeat" --no-probe > "$4" 2>&1 || return 1
  grep -q '^RESULT ' "$4" || return 1
  sed -n 's/^RESULT //p' "$4" | while read -r line; do
    declare -A kv=()
    for f in $line; do kv[${f%%=*}]=${f#*=}; done
    printf '%s\tpytorch\t%s\t%s\t%s\t%s\t%s\t%s\tweights=%s\n' "$1" "$2" "$(basename "$3")" \
      "${kv[tokens]}" "${kv[tok_s]}" "${kv[seconds]}" "${kv[tok_s]}" "${kv[weights]}" >> "$out/results.tsv"
  done
}

run_clef() {  # round mode model log
  "$bin" bench --model "$3" --threads "$threads" --tokens "$tokens" --json --matmul "$2" \
    --warmup 1 --repeat "$repeat" \
    > "$4" 2> "${4%.jsonl}.err" || return 1
  "$py" - "$1" "$2" "$(basename "$3")" "$4" >> "$out/results.tsv" <<'PY' || return 1
import json, sys
rnd, mode, model, path = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
if not rows:
    sys.exit(1)
for r in rows:
    detail = f"matmul={r.get('matmul')} isa={r.get('isa')} bf16_isa={r.get('bf16_isa')} " \
             f"int8_isa={r.get('int8_isa')} peak_rss_mib={r.get('peak_rss_bytes', 0) / 2**20:.0f}"
    print(f"{rnd}\tclef\t{mode}\t{model}\t{r['tokens']}\t{r['tokens_per_second']:.1f}\t"
          f"{r['seconds']:.3f}\t{r['tokens'] / r['backbone_seconds']:.1f}\t{detail}")
PY
}

for ((round = 1; round <= rounds; round++)); do
  order=("${jobs[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#jobs[@]} - 1; i >= 0; i--)); do order+=("${jobs[i]}"); done
  fi
  for job in "${order[@]}"; do
    IFS='|' read -r engine mode dir <<< "$job"
    name=$(basename "$dir")
    key="$engine $mode $name"
    [ -z "${refused[$key]:-}" ] || continue
    log=$out/raw/round$round-$engine-$mode-$name
    echo "== round $round/$rounds: $engine $mode on $name (tokens $tokens, threads $threads)" >&2
    if [ "$engine" = pytorch ]; then
      log+=.log
      if run_pytorch "$round" "$mode" "$dir" "$log"; then
        grep -E '^(\[|tokens |RESULT |  Qwen)' "$log" >&2 || true
      else
        msg=$(grep -v '^\s*$' "$log" | tail -1)
        echo "   failed: $msg (log: $log)" >&2
        printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$engine" "$mode" "$name" "$msg" >> "$out/failed.tsv"
        failures=$((failures + 1))
      fi
    else
      log+=.jsonl
      if run_clef "$round" "$mode" "$dir" "$log"; then
        awk -F'\t' -v r="$round" -v m="$mode" -v n="$name" \
          '$1 == r && $2 == "clef" && $3 == m && $4 == n {printf "   tokens %s: %s tok/s (backbone %s tok/s), %s\n", $5, $6, $8, $9}' \
          "$out/results.tsv" >&2
      else
        msg=$(grep -v '^\s*$' "${log%.jsonl}.err" | head -1 || true)
        [ -n "$msg" ] || msg="no JSON output"
        if ((round == 1)); then
          echo "   refused: $msg" >&2
          printf '%s\t%s\t%s\n' "$mode" "$name" "$msg" >> "$out/refused.tsv"
          refused[$key]=1
        else
          echo "   failed: $msg" >&2
          printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$engine" "$mode" "$name" "$msg" >> "$out/failed.tsv"
          failures=$((failures + 1))
        fi
      fi
    fi
  done
done

# --- the summary -----------------------------------------------------------------------------------
"$py" - "$out" <<'PY' | tee -a "$out/summary.txt"
import csv, collections, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.tsv")), delimiter="\t"))
best = {}
for r in rows:
    key = (int(r["tokens"]), r["engine"], r["mode"], r["model"])
    if key not in best or float(r["tok_s"]) > float(best[key]["tok_s"]):
        best[key] = r
print(open(os.path.join(out, "env.txt")).read().rstrip())
print()
print("best tok/s over the rounds; ratios = this row's tok/s / PyTorch's at the same length")
print("(clef's tok/s includes its joint head, PyTorch's does not; 'backbone' is clef without it)")
hdr = f"{'tokens':>6}  {'engine':<8} {'mode':<6} {'model':<20} {'tok/s':>8} {'backbone':>8} {'/pt-bf16':>8} {'/pt-f32':>8}  rounds"
print(hdr)
print("-" * len(hdr))
nrounds = collections.Counter((int(r["tokens"]), r["engine"], r["mode"], r["model"]) for r in rows)
for n in sorted({k[0] for k in best}):
    keys = sorted((k for k in best if k[0] == n), key=lambda k: (k[1] != "pytorch", k[1], k[3], k[2]))
    ref = {m: float(best[k]["tok_s"]) for k in keys if k[1] == "pytorch" for m in [k[2]]}
    for k in keys:
        r = best[k]
        v = float(r["tok_s"])
        ratio = lambda m: f"{v / ref[m]:.2f}x" if m in ref and ref[m] > 0 else "-"
        print(f"{n:>6}  {k[1]:<8} {k[2]:<6} {k[3]:<20} {v:>8.1f} {float(r['backbone_tok_s']):>8.1f} "
              f"{ratio('bf16'):>8} {ratio('f32'):>8}  {nrounds[k]}")
for r in csv.reader(open(os.path.join(out, "refused.tsv")), delimiter="\t"):
    print(f"refused: clef --matmul {r[0]} on {r[1]}: {r[2]}")
for r in csv.reader(open(os.path.join(out, "failed.tsv")), delimiter="\t"):
    print(f"FAILED: round {r[0]} {r[1]} {r[2]} on {r[3]}: {r[4]}")
weights = {r["detail"] for r in rows if r["engine"] == "pytorch"}
if "weights=random" in weights:
    print("note: PyTorch ran with random weights (the folder's full model did not load); speed is unaffected")
print(f"raw logs: {out}/raw; all runs: {out}/results.tsv")
PY
if ((failures > 0)); then
  echo "reference.sh: $failures run(s) failed; see $out/failed.tsv and $out/raw" >&2
  exit 1
fi
