"""Checks a `clef export --mlx` folder with real MLX (crates/clef-cli/tests/mlx_export.rs).

    python check_export.py MLX_DIR BUNDLE_DIR

1. mlx-lm loads MLX_DIR strictly (every tensor of model.safetensors used, none missing) with
   its adapters (`adapter_path`).
2. Every quantized module dequantizes (`mx.dequantize`, MLX's own code) to the weights the
   clef-ternary-v1 bundle defines (docs/formats.md), decoded here from the bundle's bytes
   independently of clef.rs: ternary `w = s·t` bit for bit; 4-bit `w = s·q + b` within one
   rounding of f32 (MLX may or may not fuse the multiply-add).
3. The adapters MLX applies are the bundle's (`lora_a` = Aᵀ, `lora_b` = Bᵀ, scale 1).

Prints one JSON line with the counts and the largest differences; exits 1 on a failure.
"""

import json
import sys

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm import load


def f32(a):
    return np.array(a.astype(mx.float32))


def bundle_prefix(mlx_path):
    """The bundle's (release) tensor prefix of an mlx-lm module path (clef's mlx_module_path,
    inverted); a quantized layer wrapped by a LoRA layer sits at `<path>.linear`."""
    if mlx_path.endswith(".linear"):
        mlx_path = mlx_path[: -len(".linear")]
    if mlx_path.startswith("language_model.model."):
        return "model.language_model." + mlx_path[len("language_model.model."):]
    if mlx_path.startswith("language_model."):
        return mlx_path[len("language_model."):]
    raise ValueError(mlx_path)


def trits(packed, cols):
    """Base-3 digits, first column least significant, t = d - 1 (formats.md)."""
    p = packed.astype(np.int32)
    digits = []
    for _ in range(5):
        digits.append(p % 3)
        p //= 3
    d = np.stack(digits, axis=-1).reshape(packed.shape[0], -1)[:, :cols]
    return (d - 1).astype(np.float32)


def nibbles(packed, cols):
    lo = packed & 0x0F
    hi = packed >> 4
    return np.stack([lo, hi], axis=-1).reshape(packed.shape[0], -1)[:, :cols].astype(np.float32)


def per_column(groups, cols):
    return np.repeat(groups, 64, axis=1)[:, :cols]


def main():
    mlx_dir, bundle_dir = sys.argv[1], sys.argv[2]
    model, _ = load(mlx_dir, adapter_path=mlx_dir)  # strict: mlx-lm's default
    bundle = mx.load(f"{bundle_dir}/model.safetensors")
    failures = []
    counts = {"ternary": 0, "4bit": 0, "adapters": 0}
    worst = {"ternary": 0.0, "4bit_ulps": 0.0, "adapters": 0.0}
    for path, m in model.named_modules():
        if not isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            continue
        p = bundle_prefix(path)
        got = f32(
            mx.dequantize(
                m.weight,
                m.scales.astype(mx.float32),
                m.biases.astype(mx.float32),
                group_size=m.group_size,
                bits=m.bits,
            )
        )
        rows, cols = got.shape
        scales = per_column(f32(bundle[f"{p}.scales"]), cols)
        if f"{p}.trits" in bundle:
            want = scales * trits(np.array(bundle[f"{p}.trits"]), cols)
            diff = float(np.max(np.abs(got - want)))
            worst["ternary"] = max(worst["ternary"], diff)
            counts["ternary"] += 1
            if diff != 0.0:
                failures.append(f"{p}: ternary weights differ by {diff}")
        elif f"{p}.q4" in bundle:
            biases = per_column(f32(bundle[f"{p}.biases"]), cols)
            q = nibbles(np.array(bundle[f"{p}.q4"]), cols)
            want = scales * q + biases
            ulp = np.spacing(np.maximum(np.abs(want), np.abs(got)).astype(np.float32))
            ulps = float(np.max(np.abs(got - want) / ulp))
            worst["4bit_ulps"] = max(worst["4bit_ulps"], ulps)
            counts["4bit"] += 1
            if ulps > 1.0:
                failures.append(f"{p}: 4-bit weights differ by {ulps} ulps")
        else:
            failures.append(f"{p}: quantized in MLX, not in the bundle")
    # The adapters: MLX's LoRA layers hold Aᵀ and Bᵀ of the bundle's CLoQ pair.
    for path, m in model.named_modules():
        if not (hasattr(m, "lora_a") and hasattr(m, "lora_b")):
            continue
        p = bundle_prefix(path)
        a = f32(bundle[f"{p}.lora_a"])
        b = f32(bundle[f"{p}.lora_b"])
        scale = float(getattr(m, "scale", 1.0))
        d = max(
            float(np.max(np.abs(f32(m.lora_a) - a.T))),
            float(np.max(np.abs(f32(m.lora_b) - b.T))),
        )
        worst["adapters"] = max(worst["adapters"], d)
        counts["adapters"] += 1
        if d != 0.0 or scale != 1.0:
            failures.append(f"{p}: adapter differs by {d} (scale {scale})")
    quantized_in_bundle = {
        k.rsplit(".", 1)[0] for k in bundle if k.endswith(".trits") or k.endswith(".q4")
    }
    if counts["ternary"] + counts["4bit"] != len(quantized_in_bundle):
        failures.append(
            f"{counts['ternary'] + counts['4bit']} quantized modules in MLX, "
            f"{len(quantized_in_bundle)} in the bundle"
        )
    print(json.dumps({"counts": counts, "worst": worst, "failures": failures}))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
