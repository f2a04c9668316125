"""Noise family: sensor-like additive, signal-dependent and impulse noise."""

from __future__ import annotations

import numpy as np

from . import corruptions as C
from .registry import OpParams, albumentations, register, run_albumentations, sev_field, to_u8


def _f(img: np.ndarray) -> np.ndarray:
    return img.astype(np.float32) / 255.0


class GaussianNoiseParams(OpParams):
    sigma: float = sev_field(0.01, 0.25)


def gaussian_noise(img: np.ndarray, *, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Additive white Gaussian noise (sigma as a fraction of full scale)."""
    return to_u8(C.gaussian_noise(_f(img), sigma, rng) * 255)


class ShotNoiseParams(OpParams):
    photons: float = sev_field(120.0, 4.0)


def shot_noise(img: np.ndarray, *, rng: np.random.Generator, photons: float) -> np.ndarray:
    """Poisson (photon) noise; fewer photons per unit intensity = noisier."""
    return to_u8(C.shot_noise(_f(img), photons, rng) * 255)


class ImpulseNoiseParams(OpParams):
    amount: float = sev_field(0.003, 0.15)


def impulse_noise(img: np.ndarray, *, rng: np.random.Generator, amount: float) -> np.ndarray:
    """Salt-and-pepper noise on a fraction ``amount`` of values."""
    return to_u8(C.impulse_noise(_f(img), amount, rng) * 255)


class SpeckleNoiseParams(OpParams):
    scale: float = sev_field(0.04, 0.5)


def speckle_noise(img: np.ndarray, *, rng: np.random.Generator, scale: float) -> np.ndarray:
    """Multiplicative Gaussian (speckle) noise."""
    return to_u8(C.speckle_noise(_f(img), scale, rng) * 255)


class IsoNoiseParams(OpParams):
    color_shift: float = sev_field(0.01, 0.06)
    intensity: float = sev_field(0.1, 1.0)


def iso_noise(
    img: np.ndarray, *, rng: np.random.Generator, color_shift: float, intensity: float
) -> np.ndarray:
    """Camera ISO noise (albumentations ISONoise, fixed values, seeded from rng)."""
    A = albumentations()

    t = A.ISONoise(color_shift=(color_shift, color_shift), intensity=(intensity, intensity), p=1)
    return run_albumentations(t, img, rng)


register("gaussian_noise", "noise", "train", GaussianNoiseParams, gaussian_noise)
register("shot_noise", "noise", "train", ShotNoiseParams, shot_noise)
register("impulse_noise", "noise", "validation", ImpulseNoiseParams, impulse_noise)
register("speckle_noise", "noise", "validation", SpeckleNoiseParams, speckle_noise)
register("iso_noise", "noise", "test", IsoNoiseParams, iso_noise)
