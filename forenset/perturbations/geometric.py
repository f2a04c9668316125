"""Geometric family: affine, perspective, elastic, optical and grid distortion, crop-resize.

Every op returns the input size (warps keep the canvas; crops are resized back).
"""

from __future__ import annotations

import cv2
import numpy as np

from .registry import (
    OpParams,
    albumentations,
    choice_field,
    register,
    run_albumentations,
    sev_field,
)

BORDER = cv2.BORDER_REFLECT_101


class AffineParams(OpParams):
    rotate: float = sev_field(0.0, 15.0)
    rotate_sign: int = choice_field([1, -1])
    scale: float = sev_field(1.0, 0.8)
    shear: float = sev_field(0.0, 10.0)
    translate: float = sev_field(0.0, 0.08)


def affine(
    img: np.ndarray,
    *,
    rng: np.random.Generator,
    rotate: float,
    rotate_sign: int,
    scale: float,
    shear: float,
    translate: float,
) -> np.ndarray:
    """Rotation + scale + shear + translation (albumentations Affine, fixed values)."""
    A = albumentations()

    r = rotate_sign * rotate
    t = A.Affine(
        scale=(scale, scale),
        rotate=(r, r),
        shear={"x": (shear, shear), "y": (0.0, 0.0)},
        translate_percent={"x": (translate, translate), "y": (translate, translate)},
        border_mode=BORDER,
        p=1,
    )
    return run_albumentations(t, img, rng)


class PerspectiveParams(OpParams):
    jitter: float = sev_field(0.0, 0.12)


def perspective(img: np.ndarray, *, rng: np.random.Generator, jitter: float) -> np.ndarray:
    """Random homography: each corner moves up to ``jitter`` x size (OpenCV)."""
    h, w = img.shape[:2]
    src = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], dtype=np.float32)
    d = rng.uniform(-jitter, jitter, size=(4, 2)) * np.array([w, h])
    m = cv2.getPerspectiveTransform(src, (src + d).astype(np.float32))
    return cv2.warpPerspective(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=BORDER)


class ElasticParams(OpParams):
    alpha: float = sev_field(0.0, 0.08)
    sigma: float = sev_field(0.04, 0.02)


def elastic(img: np.ndarray, *, rng: np.random.Generator, alpha: float, sigma: float) -> np.ndarray:
    """Elastic deformation: smoothed random displacement field.

    ``alpha`` is the peak displacement and ``sigma`` the smoothing, both as fractions of the
    shorter side so severity does not depend on resolution (OpenCV remap).
    """
    h, w = img.shape[:2]
    side = min(h, w)
    s = max(0.5, sigma * side)
    dx = cv2.GaussianBlur(rng.uniform(-1, 1, (h, w)).astype(np.float32), (0, 0), s)
    dy = cv2.GaussianBlur(rng.uniform(-1, 1, (h, w)).astype(np.float32), (0, 0), s)
    peak = max(float(np.abs(dx).max()), float(np.abs(dy).max()), 1e-8)
    dx *= alpha * side / peak
    dy *= alpha * side / peak
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return cv2.remap(img, gx + dx, gy + dy, cv2.INTER_LINEAR, borderMode=BORDER)


class OpticalDistortionParams(OpParams):
    k: float = sev_field(0.0, 0.5)
    sign: int = choice_field([1, -1])


def optical_distortion(
    img: np.ndarray, *, rng: np.random.Generator, k: float, sign: int
) -> np.ndarray:
    """Barrel / pincushion lens distortion (albumentations OpticalDistortion, fixed)."""
    A = albumentations()

    v = sign * k
    t = A.OpticalDistortion(distort_limit=(v, v), border_mode=BORDER, p=1)
    return run_albumentations(t, img, rng)


class GridDistortionParams(OpParams):
    limit: float = sev_field(0.0, 0.4)
    num_steps: int = choice_field([4, 5, 6, 8])


def grid_distortion(
    img: np.ndarray, *, rng: np.random.Generator, limit: float, num_steps: int
) -> np.ndarray:
    """Piecewise grid warp (albumentations GridDistortion, seeded from rng)."""
    A = albumentations()

    t = A.GridDistortion(
        num_steps=int(num_steps), distort_limit=(-limit, limit), border_mode=BORDER, p=1
    )
    return run_albumentations(t, img, rng)


class CropResizeParams(OpParams):
    keep: float = sev_field(1.0, 0.65)


def crop_resize(img: np.ndarray, *, rng: np.random.Generator, keep: float) -> np.ndarray:
    """Random crop keeping ``keep`` of each side, resized back to the input size."""
    h, w = img.shape[:2]
    ch, cw = max(1, round(h * keep)), max(1, round(w * keep))
    top = int(rng.integers(0, h - ch + 1))
    left = int(rng.integers(0, w - cw + 1))
    crop = img[top : top + ch, left : left + cw]
    return cv2.resize(crop, (w, h), interpolation=cv2.INTER_LINEAR)


register("affine", "geometric", "test", AffineParams, affine)
register("crop_resize", "geometric", "test", CropResizeParams, crop_resize)
register("perspective", "geometric", "test", PerspectiveParams, perspective)
register("optical_distortion", "geometric", "test", OpticalDistortionParams, optical_distortion)
register("elastic", "geometric", "test", ElasticParams, elastic)
register("grid_distortion", "geometric", "test", GridDistortionParams, grid_distortion)
