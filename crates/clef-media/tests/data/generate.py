"""Regenerates the committed test data of clef-media (needs Pillow and numpy; tests do not).

Run from this directory: `python3 generate.py`, with Pillow 12.2.0 — the version of the
reference run (tests/fixtures/golden/tiny-a/manifest.json). Pillow 13 picks the order of the
two resampling passes by cost, which changes some results by a few levels; up to 12.2 the
horizontal pass always runs first, which is what the reference (and clef-media) does. Deterministic (fixed seeds), so a rerun on the
same Pillow gives the same files. Expected outputs are what Pillow itself produces, i.e. the
reference behaviour the Rust code must reproduce:

- resize/NAME_in.png -> resize/NAME_out_WxH.png: `Image.resize((W, H), Image.BICUBIC)`.
- decode/NAME.EXT -> decode/NAME_rgb.png: the RGB image transformers' `convert_to_rgb` gives
  (alpha composited onto white with `Image.alpha_composite`, then `convert("RGB")`).
- decode/NAME_drop.png: `convert("RGB")` alone (alpha discarded), what transformers'
  `load_image` does to data-URL images before the processor sees them.
- decode/exif6.jpg -> decode/exif6_rgb.png: `ImageOps.exif_transpose` then `convert("RGB")`.
- decode/animated.*: two-frame APNG and WebP, which must be refused.
"""

import io
import os

import numpy as np
import PIL
from PIL import Image, ImageOps

if PIL.__version__ != "12.2.0":
    raise SystemExit(f"use Pillow 12.2.0 (the reference's version), not {PIL.__version__}")

HERE = os.path.dirname(os.path.abspath(__file__))


def out(*parts):
    path = os.path.join(HERE, *parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def noise(rng, w, h, lo=0, hi=256):
    return Image.fromarray(rng.integers(lo, hi, size=(h, w, 3), dtype=np.uint8), "RGB")


def smooth(rng, w, h):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack(
        [
            127 + 100 * np.sin(x / 7.0 + y / 11.0),
            127 + 100 * np.cos(x / 5.0 - y / 9.0),
            (x * 255.0 / max(w - 1, 1) + y * 3) % 256,
        ],
        axis=-1,
    )
    base += rng.normal(0, 6, size=base.shape)
    return Image.fromarray(np.clip(base, 0, 255).astype(np.uint8), "RGB")


def binary(rng, w, h):
    bits = rng.integers(0, 2, size=(h, w, 3), dtype=np.uint8) * 255
    return Image.fromarray(bits, "RGB")


def convert_to_rgb(img):
    # transformers.image_transforms.convert_to_rgb
    if img.mode == "RGB":
        return img
    rgba = img.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (255, 255, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def resize_cases(rng):
    cases = [
        ("noise_down", noise(rng, 97, 61), [(64, 32), (32, 32), (96, 64)]),
        ("noise_up", noise(rng, 40, 30), [(96, 64), (41, 31)]),
        ("smooth_mixed", smooth(rng, 50, 150), [(96, 32), (64, 160)]),
        ("binary_wide", binary(rng, 300, 40), [(32, 32), (64, 96)]),
        ("smooth_one_axis", smooth(rng, 64, 64), [(64, 32), (128, 64)]),
        ("noise_odd", noise(rng, 33, 17), [(32, 32), (7, 5), (1, 1)]),
        ("smooth_big_down", smooth(rng, 161, 121), [(32, 64), (96, 96), (160, 128)]),
    ]
    for name, img, sizes in cases:
        img.save(out("resize", f"{name}_in.png"))
        for w, h in sizes:
            img.resize((w, h), Image.BICUBIC).save(out("resize", f"{name}_out_{w}x{h}.png"))


def decode_cases(rng):
    h, w = 24, 40
    rgba = np.concatenate(
        [
            rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8),
            rng.integers(0, 256, size=(h, w, 1), dtype=np.uint8),
        ],
        axis=-1,
    )
    rgba[0, :, 3] = 0
    rgba[1, :, 3] = 255
    img = Image.fromarray(rgba, "RGBA")
    img.save(out("decode", "rgba.png"))
    convert_to_rgb(img).save(out("decode", "rgba_rgb.png"))
    img.convert("RGB").save(out("decode", "rgba_drop.png"))

    la = Image.fromarray(rgba[:, :, 2:4].copy(), "LA")
    la.save(out("decode", "la.png"))
    convert_to_rgb(la).save(out("decode", "la_rgb.png"))
    la.convert("RGB").save(out("decode", "la_drop.png"))

    gray = Image.fromarray(rgba[:, :, 0].copy(), "L")
    gray.save(out("decode", "gray.png"))
    convert_to_rgb(gray).save(out("decode", "gray_rgb.png"))

    pal = noise(rng, w, h).quantize(colors=16)
    pal.info["transparency"] = 3
    pal.save(out("decode", "palette_trns.png"), transparency=3)
    convert_to_rgb(Image.open(out("decode", "palette_trns.png"))).save(
        out("decode", "palette_trns_rgb.png")
    )

    photo = smooth(rng, 64, 48)
    photo.save(out("decode", "photo420.jpg"), quality=90)
    Image.open(out("decode", "photo420.jpg")).convert("RGB").save(out("decode", "photo420_rgb.png"))
    photo.save(out("decode", "photo422.jpg"), quality=85, subsampling=1)
    Image.open(out("decode", "photo422.jpg")).convert("RGB").save(out("decode", "photo422_rgb.png"))
    photo.save(out("decode", "photo444.jpg"), quality=95, subsampling=0)
    Image.open(out("decode", "photo444.jpg")).convert("RGB").save(out("decode", "photo444_rgb.png"))

    photo.save(out("decode", "lossy.webp"), quality=80)
    convert_to_rgb(Image.open(out("decode", "lossy.webp"))).save(out("decode", "lossy_rgb.png"))
    img.save(out("decode", "lossless_alpha.webp"), lossless=True)
    convert_to_rgb(Image.open(out("decode", "lossless_alpha.webp"))).save(
        out("decode", "lossless_alpha_rgb.png")
    )

    exif = Image.Exif()
    exif[0x0112] = 6
    tall = smooth(rng, 48, 32)
    tall.save(out("decode", "exif6.jpg"), quality=95, exif=exif.tobytes())
    ImageOps.exif_transpose(Image.open(out("decode", "exif6.jpg"))).convert("RGB").save(
        out("decode", "exif6_rgb.png")
    )

    frames = [noise(rng, 16, 16), noise(rng, 16, 16)]
    frames[0].save(out("decode", "animated.png"), save_all=True, append_images=frames[1:], duration=100)
    frames[0].save(out("decode", "animated.webp"), save_all=True, append_images=frames[1:], duration=100)


if __name__ == "__main__":
    rng = np.random.default_rng(20240605)
    resize_cases(rng)
    decode_cases(rng)
