#!/usr/bin/env python3
"""Time the PyTorch reference backbone (transformers, float32) on a model folder, for the
side-by-side row of docs/performance.md.

    python3 bench/reference_prefill.py --model DIR --tokens 512,2048 --threads 2

Loads Qwen3_5ForConditionalGeneration in float32 (bf16 weights upcast, as the golden fixtures
were produced), runs the text model over random ordinary token ids and reports tokens/s. The
joint schema head is not included (its code ships only with the real releases); clef.rs spends
about 3% of a 512-token prefill in it.
"""
import argparse
import time

import torch
from transformers import Qwen3_5ForConditionalGeneration


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", default="512")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.time()
    model = Qwen3_5ForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    text = model.model.language_model
    print(f"loaded in {time.time() - t0:.1f} s; torch {torch.__version__}, threads {torch.get_num_threads()}")
    vocab = model.config.text_config.vocab_size
    gen = torch.Generator().manual_seed(0)
    for n in [int(x) for x in args.tokens.split(",")]:
        ids = torch.randint(0, int(vocab * 0.9), (1, n), generator=gen)
        with torch.inference_mode():
            text(input_ids=ids[:, :32])  # warm-up
            best = None
            for _ in range(args.repeat):
                t = time.time()
                out = text(input_ids=ids, use_cache=False)
                dt = time.time() - t
                best = dt if best is None else min(best, dt)
        assert torch.isfinite(out.last_hidden_state).all()
        print(f"tokens {n}: {best:.2f} s, {n / best:.1f} tok/s (backbone + final norm, float32)")


if __name__ == "__main__":
    main()
