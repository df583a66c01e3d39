#!/usr/bin/env python3
"""Test vectors for clef-formats' ggml dequantization (tests/ggml_dequant.rs).

For every ggml type clef.rs decodes, this writes random blocks and what the reference,
`gguf.quants.dequantize` of the `gguf` package 0.19.0 (numpy), makes of them, to
`cases/<TYPE>.bin` next to this script. It is deterministic (fixed seeds), so rerunning it
rewrites the same files. Run from the repository root:

    python3 -m venv target/gguf-venv
    target/gguf-venv/bin/pip install gguf==0.19.0 numpy
    target/gguf-venv/bin/python crates/clef-formats/tests/ggml/make_cases.py

The committed files were made with numpy 2.4.6 on x86-64 (numpy 1.26.4 gives the same bytes).
With `--check` it writes nothing and instead compares what it would write with the committed
files (exit status 1 on a difference), e.g. to confirm that another numpy version agrees.

File layout, all little-endian:

    u32  ggml type id (as GGUF stores it)
    u32  n, the element count (a whole number of blocks)
    u32  m, the byte count
    m    bytes, the blocks
    n    f32, the reference's output

The blocks are random bytes, except that:

* every f16 scale field (`d`, `dmin`, `m`) holds a finite f16 of varied magnitude and sign:
  mostly the range real models use, some from the whole normal range, some subnormal, and, at
  random blocks (a quarter of them), the special values: always 0, then some of -0, +-65504, the
  smallest subnormal, +-1 (no inf or NaN: a scale is finite, and gguf-py would only spread the
  NaN);
* IQ1_M, whose f16 scale is split over the top nibbles of its four scale words, gets such a
  value there;
* MXFP4's scale byte (an e8m0 exponent) stays random, every value being valid, but six blocks
  get the edge values 0, 1 (subnormal), 2, 127, 254 and 255 (whose products overflow to inf);
* the I-quants with a lattice grid get their grid indices from permutations of the whole grid,
  so that every row of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S and IQ1_S (and so IQ1_M's) is
  decoded at least once;
* F32, F16 and BF16 (which have no blocks) get special values first: +-0, subnormals, +-inf,
  the largest finite, NaNs. NaNs are compared by bits like everything else: F32 and BF16 only move
  bits, and for F16 the NaNs are quiet ones (random signalling NaNs are made quiet), because an
  f16 -> f32 conversion may or may not quiet a signalling NaN (numpy's does not on this machine,
  the F16C instruction does) while a quiet NaN's payload is kept by all of them.
"""

import importlib.metadata
import pathlib
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

GGUF_VERSION = "0.19.0"
SEED = 20240611
OUT = pathlib.Path(__file__).resolve().parent / "cases"

# f16 bit patterns that each scale field gets at some block.
F16_SPECIAL_SCALES = [0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0001, 0x3C00, 0xBC00]


def random_f16_scales(rng, n):
    """n finite f16 bit patterns: 70 % with exponents 2^-12..2^3 (real scales), 20 % anywhere in
    the normal range, 10 % subnormal; random sign and mantissa; the specials at random places."""
    kind = rng.random(n)
    exp = np.where(kind < 0.7, rng.integers(3, 19, n), rng.integers(1, 31, n))
    exp = np.where(kind >= 0.9, 0, exp)
    man = rng.integers(0, 1024, n)
    man = np.where((exp == 0) & (man == 0), 1, man)
    sign = rng.integers(0, 2, n)
    bits = (sign << 15) | (exp << 10) | man
    # A quarter of the blocks (at least one) get specials: always +0, then others at random.
    k = min(max(1, n // 4), len(F16_SPECIAL_SCALES))
    special = [F16_SPECIAL_SCALES[0]] + list(rng.permutation(F16_SPECIAL_SCALES[1:])[: k - 1])
    bits[rng.choice(n, size=k, replace=False)] = special
    return bits.astype(np.uint16)


def put_u16(blocks, offset, values):
    blocks[:, offset : offset + 2] = values.astype("<u2").view(np.uint8).reshape(-1, 2)


def get_u16(blocks, offset):
    return blocks[:, offset : offset + 2].copy().view("<u2").reshape(-1).astype(np.int64)


def grid_indices(rng, grid_rows, count):
    """`count` grid indices covering all rows: concatenated permutations of the grid."""
    reps = -(-count // grid_rows)
    return np.concatenate([rng.permutation(grid_rows) for _ in range(reps)])[:count]


# --- grid coverage: set each block's grid indices (its other bits stay random) ---


def cover_iq2_xxs(rng, blocks):
    n = blocks.shape[0]
    idx = grid_indices(rng, 256, n * 32).reshape(n, 8, 4)
    for ib in range(8):
        blocks[:, 2 + 8 * ib : 2 + 8 * ib + 4] = idx[:, ib, :]


def cover_iq2_xs(rng, blocks):
    n = blocks.shape[0]
    idx = grid_indices(rng, 512, n * 32).reshape(n, 32)
    for g in range(32):
        q = get_u16(blocks, 2 + 2 * g)
        put_u16(blocks, 2 + 2 * g, (q & 0xFE00) | idx[:, g])


def cover_iq2_s(rng, blocks):
    n = blocks.shape[0]
    idx = grid_indices(rng, 1024, n * 32).reshape(n, 32)
    for g in range(32):
        ib, l = divmod(g, 4)
        blocks[:, 2 + g] = idx[:, g] & 0xFF
        qh = blocks[:, 66 + ib].astype(np.int64)
        qh = (qh & ~(3 << (2 * l))) | ((idx[:, g] >> 8) << (2 * l))
        blocks[:, 66 + ib] = qh


def cover_iq3_xxs(rng, blocks):
    n = blocks.shape[0]
    blocks[:, 2:66] = grid_indices(rng, 256, n * 64).reshape(n, 64)


def cover_iq3_s(rng, blocks):
    n = blocks.shape[0]
    idx = grid_indices(rng, 512, n * 64).reshape(n, 64)
    blocks[:, 2:66] = idx & 0xFF
    for ib in range(8):
        bits = idx[:, 8 * ib : 8 * ib + 8] >> 8
        blocks[:, 66 + ib] = (bits << np.arange(8)).sum(axis=1)


def cover_iq1_s(rng, blocks):
    n = blocks.shape[0]
    idx = grid_indices(rng, 2048, n * 32).reshape(n, 8, 4)
    for ib in range(8):
        blocks[:, 2 + 4 * ib : 2 + 4 * ib + 4] = idx[:, ib, :] & 0xFF
        qh = get_u16(blocks, 34 + 2 * ib) & 0xF000
        for l in range(4):
            qh |= (idx[:, ib, l] >> 8) << (3 * l)
        put_u16(blocks, 34 + 2 * ib, qh)


def iq1_m_scale(rng, blocks):
    """IQ1_M's f16 scale: nibble w of d is the top nibble of scale word w (bytes 48 + 2w)."""
    d = random_f16_scales(rng, blocks.shape[0]).astype(np.int64)
    for w in range(4):
        word = get_u16(blocks, 48 + 2 * w)
        put_u16(blocks, 48 + 2 * w, (word & 0x0FFF) | (((d >> (4 * w)) & 0xF) << 12))


def mxfp4_exponents(rng, blocks):
    """MXFP4's e8m0 scale byte: every value is valid; put the edge ones at random blocks: 0 and 1
    (subnormal halves), 2 (the smallest normal), 127 (d = 0.5), 254 and 255 (12·d overflows)."""
    blocks[rng.choice(blocks.shape[0], size=6, replace=False), 0] = [0, 1, 2, 127, 254, 255]


# type: (blocks, byte offsets of its f16 scale fields, extra fix-up of the random blocks)
QUANT_CASES = {
    T.Q4_0: (32, [0], None),
    T.Q4_1: (32, [0, 2], None),
    T.Q5_0: (32, [0], None),
    T.Q5_1: (32, [0, 2], None),
    T.Q8_0: (32, [0], None),
    T.IQ4_NL: (32, [0], None),
    T.MXFP4: (32, [], mxfp4_exponents),
    T.Q2_K: (8, [80, 82], None),
    T.Q3_K: (8, [108], None),
    T.Q4_K: (8, [0, 2], None),
    T.Q5_K: (8, [0, 2], None),
    T.Q6_K: (8, [208], None),
    T.IQ4_XS: (8, [0], None),
    T.IQ3_XXS: (8, [0], cover_iq3_xxs),
    T.IQ3_S: (8, [0], cover_iq3_s),
    T.IQ2_XXS: (8, [0], cover_iq2_xxs),
    T.IQ2_XS: (16, [0], cover_iq2_xs),
    T.IQ2_S: (32, [0], cover_iq2_s),
    T.IQ1_S: (64, [0], cover_iq1_s),
    T.IQ1_M: (16, [], iq1_m_scale),
    T.TQ1_0: (8, [52], None),
    T.TQ2_0: (8, [64], None),
}


def quant_case(rng, qtype, n_blocks, scale_fields, fixup):
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for offset in scale_fields:
        put_u16(blocks, offset, random_f16_scales(rng, n_blocks))
    if fixup is not None:
        fixup(rng, blocks)
    return blocks.reshape(-1)


def specials_then_random(rng, special, dtype, n=1024):
    """The special bit patterns, then random ones (any bits) up to n values."""
    info = np.iinfo(dtype)
    rest = rng.integers(0, int(info.max) + 1, n - len(special), dtype=dtype)
    return np.concatenate([np.array(special, dtype), rest])


def f32_case(rng):
    special = [
        0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
        0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00005, 0x3F800000,
    ]
    return specials_then_random(rng, special, np.uint32).astype("<u4").view(np.uint8)


def f16_case(rng):
    special = [
        0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF,
        0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7E01, 0xFFFF, 0x3C00,
    ]
    bits = specials_then_random(rng, special, np.uint16)
    # Signalling NaNs made quiet (see the module docs).
    snan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0) & ((bits & 0x0200) == 0)
    bits = np.where(snan, bits | 0x0200, bits).astype(np.uint16)
    return bits.astype("<u2").view(np.uint8)


def bf16_case(rng):
    special = [
        0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F,
        0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFA5, 0x3F80,
    ]
    return specials_then_random(rng, special, np.uint16).astype("<u2").view(np.uint8)


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit(f"usage: {sys.argv[0]} [--check]")
    version = importlib.metadata.version("gguf")
    if version != GGUF_VERSION:
        sys.exit(f"gguf {version} is installed; the reference is gguf {GGUF_VERSION}")
    if not check:
        OUT.mkdir(exist_ok=True)
    differ = []
    cases = {T.F32: f32_case, T.F16: f16_case, T.BF16: bf16_case}
    for q, spec in QUANT_CASES.items():
        cases[q] = lambda rng, q=q, spec=spec: quant_case(rng, q, *spec)
    total = 0
    for qtype, make in cases.items():
        rng = np.random.default_rng([SEED, int(qtype)])
        data = np.ascontiguousarray(make(rng), dtype=np.uint8)
        # MXFP4's largest exponents overflow to inf, which numpy would warn about.
        with np.errstate(all="ignore"):
            expected = np.asarray(dequantize(data, qtype), dtype=np.float32).reshape(-1)
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        assert data.size % type_size == 0 and expected.size == data.size // type_size * block_size
        header = struct.pack("<III", int(qtype), expected.size, data.size)
        blob = header + data.tobytes() + expected.astype("<f4").tobytes()
        path = OUT / f"{qtype.name}.bin"
        total += len(blob)
        if check:
            same = path.exists() and path.read_bytes() == blob
            differ += [] if same else [path.name]
            print(f"{qtype.name:8} {'same' if same else 'DIFFERS'}")
            continue
        path.write_bytes(blob)
        print(f"{qtype.name:8} {expected.size:6} elements, {data.size:5} bytes: {len(blob)} bytes")
    print(f"total {total} bytes; gguf {version}, numpy {np.__version__}")
    if differ:
        sys.exit(f"differ from the committed files: {', '.join(differ)}")


if __name__ == "__main__":
    main()
