"""Real photographs shipped with scikit-image (offline): preview, UAP training, FOA targets."""

from __future__ import annotations

import functools

import cv2
import numpy as np

PHOTO_NAMES: tuple[str, ...] = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
)


@functools.lru_cache(maxsize=32)
def _load(name: str) -> np.ndarray:
    import skimage.data

    img = getattr(skimage.data, name)()
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    return np.ascontiguousarray(img[..., :3].astype(np.uint8))


def photo(name: str, size: int | None = None) -> np.ndarray:
    """An RGB uint8 photo; with ``size``, centre-cropped to a square and resized to size^2."""
    img = _load(name)
    if size is None:
        return img.copy()
    h, w = img.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    sq = img[top : top + s, left : left + s]
    return cv2.resize(sq, (size, size), interpolation=cv2.INTER_AREA)


def photos(size: int | None = None, names: tuple[str, ...] = PHOTO_NAMES) -> list[np.ndarray]:
    return [photo(n, size) for n in names]
