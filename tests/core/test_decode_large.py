"""Large photos decode fast (JPEG at a reduced DCT scale, whole-factor reduction before Lanczos)
and stay within the documented tolerance of a full decode + Lanczos: same size and steps, mean
difference <= 1 grey level, <= 8 away from the 2-pixel border (where the last, partial JPEG block
is), PSNR >= 40 dB (forenset.images.normalise)."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
import skimage.data
from PIL import Image

from forenset.images import normalise


def _photo(w: int, h: int) -> np.ndarray:
    big = cv2.resize(skimage.data.astronaut(), (w, h), interpolation=cv2.INTER_CUBIC)
    noise = np.random.default_rng(w).normal(0, 5, big.shape)
    return np.clip(big + noise, 0, 255).astype(np.uint8)


def _encode(arr: np.ndarray, fmt: str, orientation: int = 1) -> bytes:
    im = Image.fromarray(arr)
    exif = Image.Exif()
    if orientation != 1:
        exif[0x0112] = orientation
    buf = io.BytesIO()
    im.save(buf, fmt, **({"quality": 92, "exif": exif.tobytes()} if fmt == "JPEG" else {}))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("fmt", "orientation", "max_side"),
    [("JPEG", 1, 128), ("JPEG", 6, 128), ("JPEG", 3, 200), ("PNG", 1, 100), ("WEBP", 1, 100)],
)
def test_fast_decode_within_tolerance_of_full_decode(fmt, orientation, max_side):
    data = _encode(_photo(1203, 901), fmt, orientation)  # 1/4 DCT scale: partial last blocks
    full = normalise(data, max_side=max_side, max_pixels=10**8, fast=False)
    fast = normalise(data, max_side=max_side, max_pixels=10**8)
    assert fast.image.size == full.image.size and fast.steps == full.steps
    assert (fast.orig_width, fast.orig_height, fast.orig_format) == (1203, 901, fmt)
    a = np.asarray(full.image, dtype=np.int16)
    b = np.asarray(fast.image, dtype=np.int16)
    d = np.abs(a - b)
    psnr = 10 * np.log10(255**2 / max(float((d.astype(np.float64) ** 2).mean()), 1e-9))
    assert d.mean() <= 1.0 and d[2:-2, 2:-2].max() <= 8 and psnr >= 40, (d.mean(), d.max(), psnr)
    if orientation == 6:  # a quarter turn: portrait result, like the full decode's
        assert full.image.height > full.image.width and "exif_transpose(6)" in full.steps


def test_small_photos_decode_exactly_as_before():
    data = _encode(_photo(300, 200), "JPEG")
    full = normalise(data, max_side=256, max_pixels=10**8, fast=False)
    fast = normalise(data, max_side=256, max_pixels=10**8)
    assert np.array_equal(np.asarray(full.image), np.asarray(fast.image))
