#!/usr/bin/env python3
"""The state cache's benchmark (docs/state-cache.md, docs/performance.md): on a model folder
(the `flash --layers 4` slice by default), 2 threads, a ~2,000-token state with question sets
of ~100 tokens:

  * hit vs cold: a request with new questions about a state the server has read, against the
    first request about it;
  * batch vs cold requests: one `POST /v1/systemone/batch` with 8 question sets against the same
    8 sets sent as 8 requests to a server with the cache off.

Each round uses a state no server has seen. Prints `lscpu` flags, every timing and the ratios
(wall time as the client sees it over loopback).

    bench/state_cache.py MODEL_DIR [ROUNDS]      (bench/state_cache.sh builds and synthesizes)
"""
import json
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = "target/release/clef"


def lscpu_flags():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return "\n".join(l for l in out.splitlines() if l.startswith(("Model name", "Flags")))


class Server:
    def __init__(self, model, *args):
        self.log = tempfile.NamedTemporaryFile(prefix="clef-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [BIN, "--threads", "2", "serve", "--model", model, "--addr", "127.0.0.1:0",
             "--deadline", "3600", *args],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("listening on "), line
        self.base = "http://" + line.split()[-1]
        for _ in range(6000):
            try:
                if urllib.request.urlopen(self.base + "/readyz").status == 200:
                    return
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("server not ready")

    def post(self, path, body):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=3600) as r:
            data = r.read()
            cache = r.headers.get("x-clef-state-cache")
        return time.perf_counter() - t0, cache, json.loads(data)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def state(round_no):
    lines = [f"Line {i}: customer {i * 7 % 97} in region {i % 5} reported error E{i * 13 % 1000} "
             f"at step {i % 9} of the round {round_no} export." for i in range(64)]
    return "Support log:\n" + "\n".join(lines)


def questions(k):
    return {
        f"urgent_{k}": {"type": "noul",
                        "instructions": f"Rubric {k}: does this log show an outage that needs a person now?"},
    }


def main():
    model = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    print(lscpu_flags())
    hit_ratios, batch_ratios = [], []
    for r in range(rounds):
        s = state(r)
        cached = Server(model, "--state-cache-mib", "2048")
        t_cold, c0, resp = cached.post("/v1/systemone", {"model": "clef", "state": s, "questions": questions(0)})
        t_hit, c1, resp1 = cached.post("/v1/systemone", {"model": "clef", "state": s, "questions": questions(1)})
        cached.close()
        assert (c0, c1) == ("miss", "hit"), (c0, c1)
        tokens = resp.get("usage", {}).get("input_tokens")
        print(f"round {r}: prompt tokens {tokens}; cold {t_cold:.2f} s (miss), other questions "
              f"{t_hit:.3f} s (hit): {t_cold / t_hit:.1f}x")
        hit_ratios.append(t_cold / t_hit)

        s = state(100 + r)
        off = Server(model, "--state-cache-mib", "0")
        cold_total = 0.0
        singles = []
        for k in range(8):
            t, c, body = off.post("/v1/systemone", {"model": "clef", "state": s, "questions": questions(k)})
            assert c == "off"
            cold_total += t
            singles.append(body)
        t_batch, c, batch = off.post("/v1/systemone/batch", {
            "model": "clef", "state": s,
            "question_sets": [{"questions": questions(k)} for k in range(8)]})
        off.close()
        assert batch["results"] == singles, "a batch result differs from its request alone"
        print(f"round {r}: 8 cold requests {cold_total:.1f} s, one batch of 8 sets {t_batch:.1f} s: "
              f"{cold_total / t_batch:.1f}x (results identical to the single requests)")
        batch_ratios.append(cold_total / t_batch)
    print(f"hit vs cold: {', '.join(f'{x:.1f}x' for x in hit_ratios)}; "
          f"batch of 8 vs 8 cold: {', '.join(f'{x:.1f}x' for x in batch_ratios)}")


if __name__ == "__main__":
    main()
