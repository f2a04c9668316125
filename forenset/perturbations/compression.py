"""Compression family: JPEG, WebP, double JPEG, downscaling, pixelation.

Encoders are called directly (Pillow) on RGB data; albumentations' ImageCompression is not
used because it treats RGB input as BGR.
"""

from __future__ import annotations

import io

import cv2
import numpy as np
from PIL import Image

from .registry import OpParams, choice_field, register, sev_field

INTERPOLATIONS = {
    "area": cv2.INTER_AREA,
    "linear": cv2.INTER_LINEAR,
    "cubic": cv2.INTER_CUBIC,
    "nearest": cv2.INTER_NEAREST,
}


def encode_decode(img: np.ndarray, fmt: str, quality: int, **kw: object) -> np.ndarray:
    """Round-trip an RGB uint8 image through Pillow's ``fmt`` encoder at ``quality``."""
    buf = io.BytesIO()
    Image.fromarray(img, "RGB").save(buf, format=fmt, quality=int(quality), **kw)
    buf.seek(0)
    with Image.open(buf) as im:
        return np.asarray(im.convert("RGB")).copy()


def jpeg_roundtrip(img: np.ndarray, quality: int) -> np.ndarray:
    return encode_decode(img, "JPEG", quality, subsampling=2)  # 4:2:0, like most cameras/sites


class JpegParams(OpParams):
    quality: int = sev_field(92, 8, integer=True)


def jpeg(img: np.ndarray, *, rng: np.random.Generator, quality: int) -> np.ndarray:
    """JPEG re-encoding (Pillow/libjpeg, 4:2:0)."""
    return jpeg_roundtrip(img, quality)


class WebpParams(OpParams):
    quality: int = sev_field(90, 5, integer=True)


def webp(img: np.ndarray, *, rng: np.random.Generator, quality: int) -> np.ndarray:
    """Lossy WebP re-encoding (Pillow/libwebp)."""
    return encode_decode(img, "WEBP", quality, method=4)


class DoubleJpegParams(OpParams):
    quality1: int = sev_field(95, 35, integer=True)
    quality2: int = sev_field(92, 20, integer=True)
    shift: int = choice_field(list(range(8)))


def double_jpeg(
    img: np.ndarray, *, rng: np.random.Generator, quality1: int, quality2: int, shift: int
) -> np.ndarray:
    """Two JPEG passes; the second on a grid shifted by ``shift`` px (non-aligned DJPEG)."""
    h, w = img.shape[:2]
    x = jpeg_roundtrip(img, quality1)
    s = int(shift)
    if s and h > s and w > s:
        y = jpeg_roundtrip(np.ascontiguousarray(x[s:, s:]), quality2)
        return cv2.copyMakeBorder(y, s, 0, s, 0, cv2.BORDER_REPLICATE)
    return jpeg_roundtrip(x, quality2)


class DownscaleParams(OpParams):
    scale: float = sev_field(0.9, 0.2)
    down: str = choice_field(list(INTERPOLATIONS))


def downscale(img: np.ndarray, *, rng: np.random.Generator, scale: float, down: str) -> np.ndarray:
    """Downscale by ``scale`` with ``down`` interpolation, upscale back (bilinear)."""
    h, w = img.shape[:2]
    sw, sh = max(1, round(w * scale)), max(1, round(h * scale))
    small = cv2.resize(img, (sw, sh), interpolation=INTERPOLATIONS[down])
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


class PixelateParams(OpParams):
    scale: float = sev_field(0.7, 0.12)


def pixelate(img: np.ndarray, *, rng: np.random.Generator, scale: float) -> np.ndarray:
    """Box-downsample then box-upsample (imagecorruptions ``pixelate``)."""
    h, w = img.shape[:2]
    im = Image.fromarray(img, "RGB")
    small = im.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.BOX)
    return np.asarray(small.resize((w, h), Image.Resampling.BOX)).copy()


register("jpeg", "compression", "train", JpegParams, jpeg)
register("downscale", "compression", "train", DownscaleParams, downscale)
register("webp", "compression", "validation", WebpParams, webp)
register("double_jpeg", "compression", "validation", DoubleJpegParams, double_jpeg)
register("pixelate", "compression", "test", PixelateParams, pixelate)
