"""Image decoding, normalisation and encoding shared by all stages."""

from __future__ import annotations

import functools
import io
import warnings
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from forenset.errors import ForensetError


class BadImage(ForensetError, ValueError):
    """The bytes are not an image we can use; the message says why, in one sentence."""


@dataclass
class Normalised:
    image: Image.Image  # RGB
    orig_width: int
    orig_height: int
    orig_mode: str
    orig_format: str
    steps: list[str] = field(default_factory=list)


# Large photos are decoded straight to a smaller size (JPEG DCT scaling, ``Image.draft``) and
# reduced by whole factors before the final Lanczos step (``reducing_gap``), but never below
# this multiple of the target side, so Lanczos still does the last, antialiasing step. Against
# a full decode + Lanczos: same size, mean difference <= 1 grey level, <= 8 away from the image
# border (the partial last JPEG block), PSNR >= 40 dB (tests/core/test_decode_large.py).
DECODE_MARGIN = 2.0
REDUCING_GAP = 3.0


def normalise(data: bytes, *, max_side: int, max_pixels: int, fast: bool = True) -> Normalised:
    """Decode and normalise: EXIF transpose, 8-bit RGB (alpha on white), longest side <= max_side.

    ``fast`` (the default) decodes a large JPEG at a reduced DCT scale and reduces other
    formats by whole factors before the final Lanczos resize: a 24-megapixel JPEG to 512 px
    decodes ~5-10× faster, within the tolerance above of ``fast=False`` (full decode + Lanczos)."""
    if not data:
        raise BadImage("empty file (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im: Image.Image = Image.open(io.BytesIO(data))
            w, h = im.size
            if w * h > max_pixels:
                raise BadImage(
                    f"image header declares {w}x{h} = {w * h} pixels, over the {max_pixels} limit "
                    "(possible decompression bomb)"
                )
            fmt, mode = im.format or "unknown", im.mode
            if fast and fmt == "JPEG" and max(w, h) > DECODE_MARGIN * max_side:
                f = DECODE_MARGIN * max_side / max(w, h)  # draft keeps size >= the request
                im.draft(im.mode, (max(1, int(w * f + 0.5)), max(1, int(h * f + 0.5))))
            im.load()
    except BadImage:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise BadImage(f"refused as a decompression bomb ({e})") from None
    except UnidentifiedImageError:
        raise BadImage("not a recognised image format") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise BadImage(f"truncated or corrupt image data ({e})") from None
    steps: list[str] = []
    if getattr(im, "n_frames", 1) > 1:
        im.seek(0)
        steps.append("first_frame")
    if im.size != (w, h) and max(w, h) > max_side:
        return _from_draft(im, w, h, mode, fmt, steps, max_side)
    t = ImageOps.exif_transpose(im)
    if t is not None and t.size != im.size or (t is not None and t is not im):
        orient = im.getexif().get(0x0112, 1)
        if orient not in (None, 1):
            steps.append(f"exif_transpose({orient})")
        im = t
    im = to_rgb8(im, steps)
    if max(w, h) > max_side:
        size = _target_size(w, h, max_side)
        if (im.width > im.height) != (w > h):  # EXIF-transposed by a quarter turn
            size = size[::-1]
        im = im.resize(size, Image.Resampling.LANCZOS, reducing_gap=REDUCING_GAP if fast else None)
        steps.append(f"resize_to_{im.width}x{im.height}")
    return Normalised(im, w, h, mode, fmt, steps)


def _target_size(w: int, h: int, max_side: int) -> tuple[int, int]:
    scale = max_side / max(w, h)
    return max(1, round(w * scale)), max(1, round(h * scale))


def _from_draft(
    im: Image.Image, w: int, h: int, mode: str, fmt: str, steps: list[str], max_side: int
) -> Normalised:
    """Finish a JPEG decoded at a reduced DCT scale 1/k: its last row and column may cover only
    part of a block, so Lanczos reads exactly the box of the original extent (w/k × h/k), in
    the file's orientation; the EXIF orientation is applied after the resize (the two commute),
    and the steps are recorded as a full decode records them."""
    k = next((k for k in (2, 4, 8) if (-(-w // k), -(-h // k)) == im.size), w / im.width)
    orient = im.getexif().get(0x0112, 1)
    method = _EXIF_TRANSPOSE.get(orient)
    if method is not None:
        steps.append(f"exif_transpose({orient})")
    im = to_rgb8(im, steps)
    box = (0.0, 0.0, w / k, h / k)
    im = im.resize(
        _target_size(w, h, max_side), Image.Resampling.LANCZOS, box=box, reducing_gap=REDUCING_GAP
    )
    if method is not None:
        im = im.transpose(method)
    steps.append(f"resize_to_{im.width}x{im.height}")
    return Normalised(im, w, h, mode, fmt, steps)


_EXIF_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}  # what ImageOps.exif_transpose applies per EXIF orientation


def to_rgb8(im: Image.Image, steps: list[str]) -> Image.Image:
    mode = im.mode
    if mode == "RGB":
        return im
    if mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.asarray(im, dtype=np.float64)
        hi = 65535.0 if mode.startswith("I;16") or a.max() > 255 else 255.0
        a = np.clip(a / hi * 255.0 + 0.5, 0, 255).astype(np.uint8)
        steps.append(f"{mode}_to_8bit")
        return Image.fromarray(np.stack([a] * 3, -1), "RGB")
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        bg = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        steps.append("alpha_on_white")
        return Image.alpha_composite(bg, rgba).convert("RGB")
    if mode == "CMYK":
        steps.append("cmyk_to_rgb")
    elif mode in ("L", "1"):
        steps.append("grey_to_rgb")
    else:
        steps.append(f"{mode}_to_rgb")
    return im.convert("RGB")


def encode_png(img: Image.Image | np.ndarray) -> bytes:
    """Lossless PNG of an RGB image, tuned for speed: OpenCV, zlib level 1, the "Up" row filter
    and run-length matching. On 512² photos this encodes ~2x faster than OpenCV's adaptive
    filters at level 1 (and ~4x faster than Pillow's default), decodes ~1.5x faster and is a
    few % *smaller*; deterministic for the same pixels (``bench/perturb_stage.py``)."""
    import cv2

    arr = np.asarray(img.convert("RGB")) if isinstance(img, Image.Image) else img
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, -1)
    ok, enc = cv2.imencode(".png", np.ascontiguousarray(arr[..., ::-1]), _png_params())
    if not ok:  # pragma: no cover - OpenCV refuses only malformed arrays
        raise ValueError("PNG encoding failed")
    return enc.tobytes()


@functools.cache
def _png_params() -> list[int]:
    import cv2

    return [
        cv2.IMWRITE_PNG_COMPRESSION, 1,
        cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_UP,
        cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE,
    ]  # fmt: skip


def decode_rgb(data: bytes) -> np.ndarray:
    """Bytes of a stored (already normalised) blob -> uint8 HxWx3."""
    import cv2

    arr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if arr is None:  # not something OpenCV reads: fall back to Pillow
        with Image.open(io.BytesIO(data)) as im:
            return np.asarray(im.convert("RGB"))
    return np.ascontiguousarray(arr[..., ::-1])
