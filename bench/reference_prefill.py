#!/usr/bin/env python3
"""Time the PyTorch reference backbone (transformers) on a model folder, for the side-by-side
rows of docs/performance.md (bench/reference.sh runs it next to `clef bench`).

    python3 bench/reference_prefill.py --model DIR --tokens 512,2048 --threads 2 [--dtype bf16,f32]

For each dtype of --dtype (comma list of bf16 / f32, default f32) loads
Qwen3_5ForConditionalGeneration, keeps its text model in that dtype (for f32 the bf16 weights are
upcast, as the golden fixtures were produced; the vision tower and LM head are dropped before
timing), runs the text model over random ordinary token ids and reports tokens/s,
the best of --repeat timed runs after one 32-token warm-up and --warmup untimed runs at the full
length. One dtype is held in memory at a time. If the folder's full model does not load (no
weights, a text-only config, ...), Qwen3_5TextModel is built from the
folder's text config with random weights instead: the arithmetic, and so the speed, is the same,
and the output says so. The joint schema head is not included (its code ships only with the real
releases); clef.rs spends about 3% of a 512-token prefill in it.

Besides a human-readable line, each (dtype, length) prints one machine-readable line:

    RESULT engine=pytorch mode=bf16 tokens=512 tok_s=472.7 seconds=1.083 weights=loaded
"""
import argparse
import collections
import gc
import json
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder; never reach for the hub

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig, Qwen3_5TextModel  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}

# Run in a child with ONEDNN_VERBOSE=1 (it must be set before oneDNN's first use): one bf16 and
# one f32 linear of prefill-like shape, so the log names the kernels torch really dispatches to.
_PROBE = """
import torch
torch.set_num_threads(1)
for dt in (torch.bfloat16, torch.float32):
    x = torch.randn(64, 512, dtype=dt)
    w = torch.randn(512, 512, dtype=dt)
    torch.nn.functional.linear(x, w)
"""


def onednn_report():
    """What torch says about oneDNN and AMX here, and which oneDNN kernels a bf16 / f32 linear
    actually uses (from a child process with ONEDNN_VERBOSE=1; "none" means MKL or ATen)."""
    lines = [
        f"oneDNN (mkldnn) available: {torch.backends.mkldnn.is_available()}; "
        f"ATen CPU capability: {torch.backends.cpu.get_cpu_capability()}"
    ]
    caps = []
    for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported", "_is_vnni_supported"):
        fn = getattr(torch.cpu, name, None)
        if fn is not None:
            try:
                caps.append(f"{name[4:-10]}={fn()}")
            except Exception as e:  # noqa: BLE001 - a report, not a check
                caps.append(f"{name[4:-10]}=? ({e})")
    try:
        caps.append(f"mkldnn_bf16={torch.ops.mkldnn._is_mkldnn_bf16_supported()}")
    except Exception:  # noqa: BLE001
        pass
    if caps:
        lines.append("torch CPU support: " + " ".join(caps))
    try:
        env = dict(os.environ, ONEDNN_VERBOSE="1")
        out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                             text=True, timeout=120).stdout
        kernels = collections.OrderedDict()
        for line in out.splitlines():
            # onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_amx,...,src:bf16::...
            f = line.split(",")
            if len(f) > 7 and f[0] == "onednn_verbose" and "exec" in f:
                i = f.index("exec")
                prim, impl = f[i + 2], f[i + 3]
                src = next((x.split(":")[1] for x in f if x.startswith("src")), "?")
                kernels.setdefault(f"{prim}/{src}", impl)
        used = []
        for src in ("bf16", "f32"):
            impl = next((v for k, v in kernels.items() if k.endswith("/" + src)), None)
            used.append(f"{src} -> " + (f"oneDNN {impl}" if impl else "not oneDNN (MKL/ATen)"))
        lines.append("kernels of a linear (ONEDNN_VERBOSE probe): " + "; ".join(used))
    except Exception as e:  # noqa: BLE001
        lines.append(f"oneDNN kernel probe failed: {e}")
    return lines


def text_config_of(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config", cfg)  # a text-only config is its own text config
    text = {k: v for k, v in text.items() if k not in ("model_type", "architectures")}
    return Qwen3_5TextConfig(**text)


def load_text_model(model_dir, dtype):
    """(text model, how its weights came) in `dtype`; the full model first, else built."""
    try:
        # float32 is loaded in the stored dtype and the text model alone upcast afterwards: the
        # same exact bf16 -> f32 conversion as loading with dtype=float32, but the LM head and
        # vision tower are never held in f32 (about 7.5 GB at peak instead of 12 GB for the
        # 4-layer Clef-Flash slice).
        model, info = Qwen3_5ForConditionalGeneration.from_pretrained(
            model_dir, dtype="auto" if dtype == torch.float32 else dtype, output_loading_info=True)
        text = model.model.language_model
        # Only the text model is timed: drop the vision tower and the LM head (a vocab x hidden
        # matrix, 4 GB in f32 at Clef-Flash widths) so the timed runs do not compete for memory.
        model.lm_head = None
        model.model.visual = None
        del model
        gc.collect()
        stored = {p.dtype for p in text.parameters() if p.is_floating_point()}
        if stored != {dtype}:
            text.to(dtype)
        missing = [k for k in info.get("missing_keys", []) if "language_model" in k]
        mismatched = [k for k in info.get("mismatched_keys", []) if "language_model" in str(k)]
        if missing or mismatched:
            note = (f"loaded, {len(missing)} missing + {len(mismatched)} mismatched text weights "
                    f"randomly initialised (speed is unaffected)")
            how = "partial"
        else:
            note, how = "loaded from the folder", "loaded"
        if stored != {dtype}:
            note += " (stored " + "/".join(sorted(str(d)[6:] for d in stored)) + ", converted after load)"
    except Exception as e:  # noqa: BLE001 - any failure to load falls back to a built model
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"  Qwen3_5ForConditionalGeneration did not load ({type(e).__name__}: {first[:300]})")
        gc.collect()
        text = Qwen3_5TextModel._from_config(text_config_of(model_dir), dtype=dtype)
        note = ("built Qwen3_5TextModel from the folder's text config with RANDOM weights "
                "(weights do not matter for speed)")
        how = "random"
    text.eval()
    return text, how, note


def dtype_summary(module):
    count = collections.Counter()
    for p in module.parameters():
        count[str(p.dtype).replace("torch.", "")] += p.numel()
    return ", ".join(f"{k} {v / 1e9:.3f}B" for k, v in count.most_common())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="model folder (config.json, model*.safetensors)")
    ap.add_argument("--tokens", default="512", help="prompt lengths, comma separated")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per length; the best counts")
    ap.add_argument("--warmup", type=int, default=0,
                    help="untimed runs at the full length before timing (beyond the 32-token one)")
    ap.add_argument("--dtype", default="f32", help="comma list of bf16, f32 (default f32)")
    ap.add_argument("--no-probe", action="store_true", help="skip the oneDNN kernel probe")
    args = ap.parse_args()

    try:
        lengths = [int(x) for x in args.tokens.split(",")]
    except ValueError:
        ap.error(f"--tokens must be comma-separated integers, got {args.tokens!r}")
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        ap.error(f"--dtype takes a comma list of {', '.join(DTYPES)}; got {args.dtype!r}")
    if min(lengths) < 1 or args.repeat < 1 or args.threads < 1 or args.warmup < 0:
        ap.error("--tokens, --repeat and --threads must be positive, --warmup not negative")
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        ap.error(f"no config.json in {args.model}")

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"python {platform.python_version()}, threads {torch.get_num_threads()}")
    if not args.no_probe:
        for line in onednn_report():
            print(line)
    sys.stdout.flush()

    for name in dtypes:
        dtype = DTYPES[name]
        t0 = time.time()
        text, how, note = load_text_model(args.model, dtype)
        print(f"[{name}] {note}; ready in {time.time() - t0:.1f} s; "
              f"parameters: {dtype_summary(text)}; attention: {text.config._attn_implementation}")
        sys.stdout.flush()
        vocab = text.config.vocab_size
        gen = torch.Generator().manual_seed(0)
        for n in lengths:
            ids = torch.randint(0, int(vocab * 0.9), (1, n), generator=gen)
            with torch.inference_mode():
                text(input_ids=ids[:, :32], use_cache=False)  # warm-up
                for _ in range(args.warmup):
                    text(input_ids=ids, use_cache=False)
                best = None
                for _ in range(args.repeat):
                    t = time.time()
                    out = text(input_ids=ids, use_cache=False)
                    dt = time.time() - t
                    best = dt if best is None else min(best, dt)
            hidden = out.last_hidden_state
            assert hidden.dtype == dtype, f"output is {hidden.dtype}, expected {dtype}"
            assert torch.isfinite(hidden).all(), "non-finite output"
            print(f"tokens {n}: {best:.2f} s, {n / best:.1f} tok/s "
                  f"(backbone + final norm, {dtype_name(dtype)})")
            print(f"RESULT engine=pytorch mode={name} tokens={n} tok_s={n / best:.1f} "
                  f"seconds={best:.3f} weights={how}")
            sys.stdout.flush()
        del text, out, hidden
        gc.collect()


def dtype_name(dtype):
    return {torch.bfloat16: "bfloat16", torch.float32: "float32"}[dtype]


if __name__ == "__main__":
    main()
