"""MLX's backbone rows against clef.rs's (crates/clef-cli/tests/mlx_export.rs).

    python backbone_rows.py MLX_DIR ROWS.json

ROWS.json holds clef.rs's final-normed backbone rows of some requests on the bundle MLX_DIR
was exported from: {"hidden_size": H, "requests": [{"name", "ids", "hidden" (flattened)}]}.
mlx-lm loads MLX_DIR strictly with its adapters and runs its own text model (embedding,
Gated DeltaNet and attention layers, final norm) on the same token ids, in float32, twice:

- `as_loaded`: the model as mlx-lm builds it. Loading a folder in the Hugging Face layout,
  mlx-lm's `sanitize` turns the zero-centred RMSNorm gains `w` into `1 + w` in the tensors'
  dtype, bf16, which rounds them (relative 2⁻⁹ at most);
- `exact_norms`: the same model with those gains set to `1 + w` in float32, the arithmetic
  clef.rs (and the reference) does, so that what is left is MLX's own arithmetic.

Prints one JSON line: for each run the largest |difference| over all rows and requests, and
the largest |row value|.
"""

import json
import sys

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten
from mlx_lm import load

# The gains mlx-lm's qwen3_5 sanitize offsets by one.
NORM_SUFFIXES = (
    ".input_layernorm.weight",
    ".post_attention_layernorm.weight",
    "model.norm.weight",
    ".q_norm.weight",
    ".k_norm.weight",
)


def exact_norms(model, mlx_dir):
    """Sets every offset gain to 1 + w in float32, w read from the folder; how many."""
    stored = mx.load(f"{mlx_dir}/model.safetensors")
    stored = {k.replace("model.language_model", "language_model.model", 1): v for k, v in stored.items()}
    updates = []
    for path, value in tree_flatten(model.parameters()):
        if value.ndim == 1 and path.endswith(NORM_SUFFIXES):
            updates.append((path, stored[path].astype(mx.float32) + 1.0))
    model.load_weights(updates, strict=False)
    return len(updates)


def rows_diff(model, rows):
    h = rows["hidden_size"]
    worst = 0.0
    for r in rows["requests"]:
        got = np.array(model.language_model.model(mx.array([r["ids"]])).astype(mx.float32))[0]
        want = np.array(r["hidden"], dtype=np.float32).reshape(-1, h)
        if got.shape != want.shape:
            raise SystemExit(f"{r['name']}: MLX rows {got.shape}, clef.rs rows {want.shape}")
        worst = max(worst, float(np.max(np.abs(got - want))))
    return worst


def main():
    mlx_dir, rows_path = sys.argv[1], sys.argv[2]
    with open(rows_path) as f:
        rows = json.load(f)
    model, _ = load(mlx_dir, adapter_path=mlx_dir)
    model.set_dtype(mx.float32)
    as_loaded = rows_diff(model, rows)
    gains = exact_norms(model, mlx_dir)
    exact = rows_diff(model, rows)
    largest = max(float(np.max(np.abs(np.array(r["hidden"], dtype=np.float32)))) for r in rows["requests"])
    print(
        json.dumps(
            {
                "requests": len(rows["requests"]),
                "rows": sum(len(r["ids"]) for r in rows["requests"]),
                "gains_set": gains,
                "as_loaded_max_abs_diff": as_loaded,
                "exact_norms_max_abs_diff": exact,
                "largest_value": largest,
            }
        )
    )


if __name__ == "__main__":
    main()
