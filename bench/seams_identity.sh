#!/usr/bin/env bash
# Behaviour-identity check for refactors (issue "One seam per concern"): runs one `clef` binary
# over every golden record (tiny-a, nano, tiny-b) with `decide --raw` on each available ISA, and
# converts nano to LUT-6 and clef-ternary-v1, writing every output and the SHA-256 of every
# bundle file under OUT. Run it with the binary before and after a change and `diff -r` the two
# folders: any difference is a behaviour change.
#
#   bench/seams_identity.sh path/to/clef OUT
set -euo pipefail
clef=$(realpath "$1")
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
fx=$root/tests/fixtures
mkdir -p "$out"
isas="scalar avx2"
grep -qw avx_vnni /proc/cpuinfo && isas="$isas avxvnni"
grep -qw avx512f /proc/cpuinfo && isas="$isas avx512"

raw() { # model request name isa [extra args]
  local model=$1 req=$2 name=$3 isa=$4
  shift 4
  mkdir -p "$out/raw/$isa"
  CLEF_ISA=$isa "$clef" decide --model "$model" --raw "$@" "$req" >"$out/raw/$isa/$name.json" 2>/dev/null ||
    echo "exit $?" >"$out/raw/$isa/$name.json"
}

for isa in $isas; do
  for f in "$fx"/golden/tiny-a/a*.json; do
    raw "$fx/models/tiny-a" "$f" "tiny-a_$(basename "$f" .json)" "$isa"
  done
  for f in "$fx"/golden/nano/n*.json; do
    raw "$fx/models/nano" "$f" "nano_$(basename "$f" .json)" "$isa"
  done
  for f in "$fx/golden/tiny-a/a01_support_basic.json" "$fx/golden/tiny-a/a27_image_and_video.json" \
    "$fx/reference/tiny-b/multi_media.json"; do
    raw "$fx/models/tiny-b" "$f" "tiny-b_$(basename "$f" .json)" "$isa"
  done
done

# Bundles of nano, then their answers (LUT-6 in f32 and FP16 emulation, ternary and q8 on both
# matmul paths), and the LUT-6 bundle's MIL program texts and programs.json.
"$clef" convert --format lut6 --from "$fx/models/nano" --to "$out/nano-lut6" --force >/dev/null 2>&1
"$clef" convert --format ternary --from "$fx/models/nano" --to "$out/nano-ternary" \
  --calib "$fx/records/nano_calib.jsonl" --force >/dev/null 2>&1
"$clef" convert --format q8 --from "$fx/models/nano" --to "$out/nano-q8" --force >/dev/null 2>&1
for b in nano-lut6 nano-ternary nano-q8; do
  (cd "$out/$b" && find . -type f | sort | xargs sha256sum) >"$out/$b.sha256"
done
"$clef" inspect --emit-mil "$out/mil" "$out/nano-lut6" >/dev/null 2>&1
rm -rf "$out/mil/weights"
for f in "$fx"/golden/nano/n*.json; do
  n=$(basename "$f" .json)
  raw "$out/nano-lut6" "$f" "lut6-f32_$n" avx2
  raw "$out/nano-lut6" "$f" "lut6-fp16_$n" avx2 --activations fp16
  for isa in $isas; do
    for mode in exact int8; do
      raw "$out/nano-ternary" "$f" "ternary-${mode}_$n" "$isa" --matmul $mode
      raw "$out/nano-q8" "$f" "q8-${mode}_$n" "$isa" --matmul $mode
    done
  done
done
rm -rf "$out/nano-lut6" "$out/nano-ternary" "$out/nano-q8"
echo "wrote $(find "$out" -type f | wc -l) files under $out"
