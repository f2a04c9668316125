"""Blur family: optical defocus, camera/object motion, zoom, filtering, glass."""

from __future__ import annotations

import cv2
import numpy as np

from . import corruptions as C
from .registry import OpParams, choice_field, register, sev_field, to_u8

ANGLES = [float(a) for a in range(0, 180, 15)]


class GaussianBlurParams(OpParams):
    sigma: float = sev_field(0.4, 4.0)


def gaussian_blur(img: np.ndarray, *, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Isotropic Gaussian blur (OpenCV)."""
    return cv2.GaussianBlur(img, (0, 0), sigmaX=sigma, borderType=cv2.BORDER_REFLECT)


class MedianBlurParams(OpParams):
    ksize: int = sev_field(3, 9, integer=True, odd=True)


def median_blur(img: np.ndarray, *, rng: np.random.Generator, ksize: int) -> np.ndarray:
    """Median filter (smooths texture, keeps edges: a denoiser signature)."""
    return cv2.medianBlur(img, int(ksize))


class MotionBlurParams(OpParams):
    length: int = sev_field(3, 25, integer=True)
    angle: float = choice_field(ANGLES)


def motion_blur(
    img: np.ndarray, *, rng: np.random.Generator, length: int, angle: float
) -> np.ndarray:
    """Linear motion blur along ``angle`` degrees."""
    k = C.motion_kernel(int(length), float(angle))
    return cv2.filter2D(img, -1, k, borderType=cv2.BORDER_REFLECT)


class DefocusBlurParams(OpParams):
    radius: float = sev_field(1.0, 8.0)
    alias_blur: float = sev_field(0.1, 0.5)


def defocus_blur(
    img: np.ndarray, *, rng: np.random.Generator, radius: float, alias_blur: float
) -> np.ndarray:
    """Disk (out-of-focus) blur, imagecorruptions-style."""
    x = img.astype(np.float32) / 255.0
    return to_u8(C.defocus_blur(x, radius, alias_blur) * 255)


class ZoomBlurParams(OpParams):
    max_zoom: float = sev_field(1.02, 1.3)
    n_steps: int = sev_field(4, 10, integer=True)


def zoom_blur(
    img: np.ndarray, *, rng: np.random.Generator, max_zoom: float, n_steps: int
) -> np.ndarray:
    """Radial zoom blur: average of centre zooms up to ``max_zoom``."""
    x = img.astype(np.float32) / 255.0
    return to_u8(C.zoom_blur(x, max_zoom, int(n_steps)) * 255)


class GlassBlurParams(OpParams):
    sigma: float = sev_field(0.5, 1.5)
    max_delta: int = sev_field(1, 4, integer=True)


def glass_blur(
    img: np.ndarray, *, rng: np.random.Generator, sigma: float, max_delta: int
) -> np.ndarray:
    """Frosted-glass blur: blur, jitter pixels by up to ``max_delta``, blur again.

    Vectorised (one random remap) instead of imagecorruptions' per-pixel swap loop, which
    takes seconds per image.
    """
    h, w = img.shape[:2]
    x = cv2.GaussianBlur(img, (0, 0), sigmaX=sigma)
    d = int(max_delta)
    dx = rng.integers(-d, d + 1, size=(h, w)).astype(np.float32)
    dy = rng.integers(-d, d + 1, size=(h, w)).astype(np.float32)
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    x = cv2.remap(x, gx + dx, gy + dy, cv2.INTER_NEAREST, borderMode=cv2.BORDER_REFLECT)
    return cv2.GaussianBlur(x, (0, 0), sigmaX=sigma)


register("gaussian_blur", "blur", "train", GaussianBlurParams, gaussian_blur)
register("median_blur", "blur", "train", MedianBlurParams, median_blur)
register("motion_blur", "blur", "train", MotionBlurParams, motion_blur)
register("defocus_blur", "blur", "validation", DefocusBlurParams, defocus_blur)
register("zoom_blur", "blur", "test", ZoomBlurParams, zoom_blur)
register("glass_blur", "blur", "test", GlassBlurParams, glass_blur)
