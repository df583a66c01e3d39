"""PNG colour types and bit depths whose RGB conversion in Pillow differs from a plain
"expand to 8-bit RGBA" (run from this directory with Pillow and numpy: `python3 png_modes.py`).

The PNGs are written by hand (zlib + chunks) so the bit depth, colour type and tRNS are exactly
as intended. Expected outputs are transformers' `convert_to_rgb` on Pillow's decode (model.md
§7.1), which relies on Pillow's mode conversions; those did not change between Pillow 12.2 and
13.0, so either version regenerates the same files:

- decode/png_gray16.png: 16-bit greyscale opens as `I;16`; Pillow's I;16 -> RGB(A) clips each
  sample to 255 (it does not keep the high byte).
- decode/png_rgb8_trns.png, png_rgb16_trns.png: RGB with a tRNS colour key opens as mode `RGB`,
  which `convert_to_rgb` returns unchanged: the colour key is ignored (no compositing).
- decode/png_gray2_trns.png, png_gray4_trns.png: low-bit greyscale with tRNS opens as `L`
  (samples scaled to 8 bits) with the *raw* tRNS value as its transparency, so only pixels whose
  scaled value equals the raw key become transparent.
- decode/png_gray8_trns.png: 8-bit greyscale with tRNS: key pixels composited onto white.
"""
import io
import struct
import zlib

import numpy as np
from PIL import Image, ImageOps


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(w, h, depth, ctype, rows, extra=b""):
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    raw = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def packed(vals, depth):
    bits = "".join(format(int(v), f"0{depth}b") for v in vals)
    bits += "0" * (-len(bits) % 8)
    return int(bits, 2).to_bytes(len(bits) // 8, "big")


def convert_to_rgb(im):
    if im.mode == "RGB":
        return im
    rgba = im.convert("RGBA")
    bg = Image.new("RGBA", rgba.size, (255, 255, 255))
    return Image.alpha_composite(bg, rgba).convert("RGB")


rng = np.random.default_rng(7)
W, H = 7, 5
cases = {}
g16 = rng.integers(0, 65536, size=(H, W), dtype=np.uint16)
g16[0, :6] = [0, 1, 254, 255, 256, 300]
cases["gray16"] = png(W, H, 16, 0, [g16[y].astype(">u2").tobytes() for y in range(H)])
r8 = rng.integers(0, 4, size=(H, W, 3), dtype=np.uint8)
cases["rgb8_trns"] = png(W, H, 8, 2, [r8[y].tobytes() for y in range(H)],
                         chunk(b"tRNS", struct.pack(">HHH", 1, 2, 3)))
r16 = rng.integers(0, 4, size=(H, W, 3), dtype=np.uint16) * 21845
cases["rgb16_trns"] = png(W, H, 16, 2, [r16[y].astype(">u2").tobytes() for y in range(H)],
                          chunk(b"tRNS", struct.pack(">HHH", 21845, 0, 43690)))
for depth, key in ((2, 0), (4, 1)):
    vals = rng.integers(0, 2 ** depth, size=(H, W))
    cases[f"gray{depth}_trns"] = png(W, H, depth, 0, [packed(vals[y], depth) for y in range(H)],
                                     chunk(b"tRNS", struct.pack(">H", key)))
g8 = rng.integers(0, 256, size=(H, W), dtype=np.uint8)
g8[0, :3] = 77
cases["gray8_trns"] = png(W, H, 8, 0, [g8[y].tobytes() for y in range(H)],
                          chunk(b"tRNS", struct.pack(">H", 77)))

for name, data in cases.items():
    with open(f"decode/png_{name}.png", "wb") as f:
        f.write(data)
    im = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    convert_to_rgb(im).save(f"decode/png_{name}_rgb.png")
