"""JPEG layouts where a decoder other than libjpeg-turbo rounds differently (run from this
directory with Pillow and numpy: `python3 jpeg_modes.py`). Pillow decodes JPEG with
libjpeg-turbo (slow-integer IDCT, fancy upsampling), so the expected outputs are Pillow's
`Image.open(...).convert("RGB")`; Pillow 13.0 made the committed files.

- decode/jpeg_420_odd.jpg: 4:2:0 at 57x41 (neither side a multiple of 16: the chroma edge).
- decode/jpeg_422_odd.jpg: 4:2:2 at 45x30.
- decode/jpeg_progressive.jpg: progressive 4:2:0 at 70x50.
- decode/jpeg_gray.jpg: a one-component (greyscale) JPEG.
- decode/jpeg_cmyk.jpg: an Adobe CMYK JPEG (Pillow's CMYK -> RGB conversion).
- decode/jpeg_truncated.jpg: jpeg_progressive.jpg cut in the middle of its scans; Pillow
  refuses it ("image file is truncated").
"""
import io

import numpy as np
from PIL import Image


def photo(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (w + h)], axis=-1)
    noise = rng.normal(0, 40, (h, w, 3))
    return Image.fromarray(np.clip(base + noise, 0, 255).astype("uint8"))


def save(im, name, **kw):
    path = f"decode/{name}.jpg"
    im.save(path, **kw)
    Image.open(path).convert("RGB").save(f"decode/{name}_rgb.png")


save(photo(57, 41, 1), "jpeg_420_odd", quality=88, subsampling=2)
save(photo(45, 30, 2), "jpeg_422_odd", quality=80, subsampling=1)
save(photo(70, 50, 3), "jpeg_progressive", quality=85, subsampling=2, progressive=True)
save(photo(40, 33, 4).convert("L"), "jpeg_gray", quality=90)
save(photo(36, 28, 5).convert("CMYK"), "jpeg_cmyk", quality=90)

data = open("decode/jpeg_progressive.jpg", "rb").read()
cut = data[: len(data) * 2 // 3]
open("decode/jpeg_truncated.jpg", "wb").write(cut)
try:
    Image.open(io.BytesIO(cut)).load()
    raise SystemExit("Pillow accepted the truncated file")
except OSError as e:
    print("truncated:", e)
