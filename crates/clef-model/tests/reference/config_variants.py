#!/usr/bin/env python3
"""Reference hidden states for tests/config_variants.rs: the tiny-a weights run by transformers
under configs that differ from tiny-a in values the engine must read rather than assume
(rope_theta precedence and default, mrope_section default, partial_rotary_factor truncation,
rms_norm_eps, attention_bias). Media-style 3-axis positions are used so every M-RoPE axis
matters.

Run with transformers 5.24.0 / torch (float32, CPU), from the repository root:

    python3 crates/clef-model/tests/reference/config_variants.py

Writes config_variants.json (the edits, read by the Rust test) and config_variants.safetensors
(input ids, positions, the bias tensors of the attention_bias variant, and each variant's
`last_hidden_state` after the final norm).
"""
import copy, json, math, pathlib, shutil, tempfile, torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3_5ForConditionalGeneration

here = pathlib.Path(__file__).resolve().parent
root = here.parents[3]
src = root / "tests/fixtures/models/tiny-a"
torch.set_num_threads(2)

# text_config edits: "set" overrides keys, "remove" deletes them (applied after "set").
variants = [
    # rope block without rope_theta / mrope_section: the top-level rope_theta applies and
    # transformers' default sections [11, 11, 10] place the H/W frequencies.
    {"name": "rope_theta_top_level", "set": {"rope_theta": 5000.0, "rope_parameters":
        {"rope_type": "default", "partial_rotary_factor": 0.5}}, "remove": []},
    # no rope_theta anywhere: transformers' default 10000.
    {"name": "rope_theta_absent", "set": {"rope_parameters":
        {"rope_type": "default", "mrope_section": [2, 1, 1]}}, "remove": []},
    # no rope block at all, only the legacy top-level keys.
    {"name": "rope_legacy_keys", "set": {"rope_theta": 20000.0, "partial_rotary_factor": 0.5},
        "remove": ["rope_parameters"]},
    # head_dim 32 x 0.33 = 10.56: int() gives 10 rotary dims (5 frequencies).
    {"name": "partial_rotary_truncates", "set": {"rope_parameters": {"rope_type": "default",
        "rope_theta": 1e6, "partial_rotary_factor": 0.33, "mrope_section": [3, 1, 1]}},
        "remove": ["partial_rotary_factor"]},
    {"name": "rms_norm_eps", "set": {"rms_norm_eps": 0.05}, "remove": []},
    {"name": "attention_bias", "set": {"attention_bias": True}, "remove": []},
]

ids = [(i * 37 + 5) % 768 for i in range(14)]
# 3 text rows, a 2x3 vision group at rows 3..9, then text (model.md §7.5).
t, h, w = [], [], []
p = 0
for r in range(3):
    t.append(p); h.append(p); w.append(p); p += 1
for r in range(2):
    for c in range(3):
        t.append(p); h.append(p + r); w.append(p + c)
p += 3
while len(t) < len(ids):
    t.append(p); h.append(p); w.append(p); p += 1

out = {
    "input_ids": torch.tensor(ids, dtype=torch.int64),
    "positions": torch.tensor([t, h, w], dtype=torch.int64),
}
base_cfg = json.loads((src / "config.json").read_text())
weights = load_file(str(src / "model.safetensors"))
for v in variants:
    cfg = copy.deepcopy(base_cfg)
    cfg["text_config"].update(v["set"])
    for k in v["remove"]:
        cfg["text_config"].pop(k, None)
    sd = dict(weights)
    if v["name"] == "attention_bias":
        k = 0
        for name in sorted(weights):
            if ".self_attn." in name and name.endswith("_proj.weight"):
                rows = weights[name].shape[0]
                b = torch.tensor([0.05 * math.sin(0.7 * j + k + 1) for j in range(rows)], dtype=torch.float32)
                bname = name[: -len("weight")] + "bias"
                sd[bname] = b
                out[bname] = b
                k += 1
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        (d / "config.json").write_text(json.dumps(cfg))
        save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
        m = Qwen3_5ForConditionalGeneration.from_pretrained(d, dtype=torch.float32).eval()
    pos = torch.tensor([list(range(len(ids))), t, h, w])[:, None, :]
    with torch.inference_mode():
        hs = m.model.language_model(input_ids=torch.tensor([ids]), position_ids=pos, use_cache=False).last_hidden_state[0]
    out[v["name"]] = hs.contiguous()
    print(v["name"], m.config.text_config.rope_parameters, float(hs.abs().mean()))

(here / "config_variants.json").write_text(json.dumps(variants, indent=1) + "\n")
save_file(out, str(here / "config_variants.safetensors"))
