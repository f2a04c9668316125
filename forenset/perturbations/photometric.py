"""Photometric family: exposure, contrast, colour, tone curves, quantisation."""

from __future__ import annotations

import numpy as np

from . import corruptions as C
from .registry import (
    OpParams,
    albumentations,
    choice_field,
    register,
    run_albumentations,
    sev_field,
    to_u8,
)


def _f(img: np.ndarray) -> np.ndarray:
    return img.astype(np.float32) / 255.0


class BrightnessParams(OpParams):
    delta: float = sev_field(0.04, 0.45)
    sign: int = choice_field([1, -1])


def brightness(img: np.ndarray, *, rng: np.random.Generator, delta: float, sign: int) -> np.ndarray:
    """Shift the HSV value channel by +-``delta`` (imagecorruptions ``brightness``)."""
    return to_u8(C.brightness(_f(img), sign * delta) * 255)


class ContrastParams(OpParams):
    factor: float = sev_field(0.9, 0.2)


def contrast(img: np.ndarray, *, rng: np.random.Generator, factor: float) -> np.ndarray:
    """Scale deviations from the per-channel mean (imagecorruptions ``contrast``)."""
    return to_u8(C.contrast(_f(img), factor) * 255)


class SaturationParams(OpParams):
    factor: float = sev_field(0.85, 0.05)


def saturation(img: np.ndarray, *, rng: np.random.Generator, factor: float) -> np.ndarray:
    """Desaturate: scale HSV saturation (imagecorruptions ``saturate``)."""
    return to_u8(C.saturate(_f(img), factor) * 255)


class GammaParams(OpParams):
    delta: float = sev_field(5.0, 60.0)
    sign: int = choice_field([1, -1])


def gamma(img: np.ndarray, *, rng: np.random.Generator, delta: float, sign: int) -> np.ndarray:
    """Gamma curve, gamma = (100 +- delta) / 100 (albumentations RandomGamma, fixed)."""
    A = albumentations()

    g = 100.0 + sign * delta
    return run_albumentations(A.RandomGamma(gamma_limit=(g, g), p=1), img, rng)


class HueShiftParams(OpParams):
    hue: float = sev_field(2.0, 40.0)
    sign: int = choice_field([1, -1])


def hue_shift(img: np.ndarray, *, rng: np.random.Generator, hue: float, sign: int) -> np.ndarray:
    """Rotate hue by +-``hue`` (OpenCV hue units, albumentations HueSaturationValue)."""
    A = albumentations()

    h = sign * hue
    t = A.HueSaturationValue(
        hue_shift_limit=(h, h), sat_shift_limit=(0, 0), val_shift_limit=(0, 0), p=1
    )
    return run_albumentations(t, img, rng)


class ClaheParams(OpParams):
    clip_limit: float = sev_field(1.0, 8.0)
    tiles: int = choice_field([4, 8, 16])


def clahe(
    img: np.ndarray, *, rng: np.random.Generator, clip_limit: float, tiles: int
) -> np.ndarray:
    """Contrast-limited adaptive histogram equalisation (albumentations CLAHE, fixed)."""
    A = albumentations()

    t = A.CLAHE(clip_limit=(clip_limit, clip_limit), tile_grid_size=(tiles, tiles), p=1)
    return run_albumentations(t, img, rng)


class PosterizeParams(OpParams):
    bits: int = sev_field(7, 2, integer=True)


def posterize(img: np.ndarray, *, rng: np.random.Generator, bits: int) -> np.ndarray:
    """Keep the top ``bits`` bits of every channel."""
    mask = np.uint8((0xFF << (8 - int(bits))) & 0xFF)
    return img & mask


class ChromaticAberrationParams(OpParams):
    primary: float = sev_field(0.005, 0.08)
    secondary: float = sev_field(0.005, 0.1)
    mode: str = choice_field(["green_purple", "red_blue"])


def chromatic_aberration(
    img: np.ndarray, *, rng: np.random.Generator, primary: float, secondary: float, mode: str
) -> np.ndarray:
    """Lateral chromatic aberration (albumentations ChromaticAberration, fixed)."""
    A = albumentations()

    t = A.ChromaticAberration(
        primary_distortion_limit=(primary, primary),
        secondary_distortion_limit=(secondary, secondary),
        mode=mode,
        p=1,
    )
    return run_albumentations(t, img, rng)


register("brightness", "photometric", "train", BrightnessParams, brightness)
register("contrast", "photometric", "train", ContrastParams, contrast)
register("saturation", "photometric", "train", SaturationParams, saturation)
register("gamma", "photometric", "validation", GammaParams, gamma)
register("hue_shift", "photometric", "validation", HueShiftParams, hue_shift)
register("clahe", "photometric", "validation", ClaheParams, clahe)
register("posterize", "photometric", "test", PosterizeParams, posterize)
register(
    "chromatic_aberration", "photometric", "test", ChromaticAberrationParams, chromatic_aberration
)
