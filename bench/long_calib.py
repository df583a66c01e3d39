#!/usr/bin/env python3
"""Long calibration records for conversion benchmarks (docs/quantization.md, "Conversion at real
sizes"): record i is the states of `--join` consecutive nano_calib records (from i, wrapping)
joined by spaces and repeated `--repeat` times, with record i's questions. The defaults give 128
records of ~800 tokens (101,922 tokens with the Qwen3.5 tokenizer).

    python3 bench/long_calib.py > calib128.jsonl
"""
import argparse
import json
import sys

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--source", default="tests/fixtures/records/nano_calib.jsonl")
p.add_argument("--records", type=int, default=128)
p.add_argument("--join", type=int, default=7)
p.add_argument("--repeat", type=int, default=4)
a = p.parse_args()

with open(a.source) as f:
    src = [json.loads(line) for line in f if line.strip()]
for i in range(a.records):
    states = []
    for k in range(a.join):
        s = src[(i + k) % len(src)]["request"]["state"]
        states.append(s if isinstance(s, str) else json.dumps(s))
    request = dict(src[i % len(src)]["request"])
    request["state"] = " ".join([" ".join(states)] * a.repeat)
    sys.stdout.write(json.dumps({"id": f"calib-{i}", "request": request}) + "\n")
