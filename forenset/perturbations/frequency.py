"""Frequency-domain family: ringing/halo overshoot, low-pass ringing, spectral noise, moire."""

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
    to_u8,
)


def _radius(h: int, w: int) -> np.ndarray:
    """Normalised radial frequency on the rfft2 grid (0 at DC, 1 at Nyquist on each axis)."""
    fy = np.fft.fftfreq(h)[:, None] * 2
    fx = np.fft.rfftfreq(w)[None, :] * 2
    return np.sqrt(fx**2 + fy**2).astype(np.float32)


def _rfft(x: np.ndarray) -> np.ndarray:
    import scipy.fft

    return scipy.fft.rfft2(x, axes=(0, 1), workers=1)


def _irfft(f: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    import scipy.fft

    return scipy.fft.irfft2(f, s=shape[:2], axes=(0, 1), workers=1)


class RingingOvershootParams(OpParams):
    ksize: int = sev_field(7, 21, integer=True, odd=True)
    cutoff: float = sev_field(1.4, 0.35)


def ringing_overshoot(
    img: np.ndarray, *, rng: np.random.Generator, ksize: int, cutoff: float
) -> np.ndarray:
    """Sinc-filter ringing around edges (albumentations RingingOvershoot, fixed values)."""
    A = albumentations()

    t = A.RingingOvershoot(blur_limit=(int(ksize), int(ksize)), cutoff=(cutoff, cutoff), p=1)
    return run_albumentations(t, img, rng)


class UnsharpHaloParams(OpParams):
    sigma: float = sev_field(1.0, 6.0)
    amount: float = sev_field(0.3, 2.5)


def unsharp_halo(
    img: np.ndarray, *, rng: np.random.Generator, sigma: float, amount: float
) -> np.ndarray:
    """Over-sharpening: unsharp mask with a wide radius leaves bright/dark halos at edges."""
    x = img.astype(np.float32)
    blur = cv2.GaussianBlur(x, (0, 0), sigmaX=sigma)
    return to_u8(x + amount * (x - blur))


class LowpassRingingParams(OpParams):
    cutoff: float = sev_field(0.6, 0.08)


def lowpass_ringing(img: np.ndarray, *, rng: np.random.Generator, cutoff: float) -> np.ndarray:
    """Ideal (brick-wall) low-pass in the FFT domain: blur plus Gibbs ringing."""
    h, w = img.shape[:2]
    mask = (_radius(h, w) <= cutoff).astype(np.float32)
    f = _rfft(img.astype(np.float32)) * mask[..., None]
    return to_u8(_irfft(f, img.shape))


class SpectralNoiseParams(OpParams):
    strength: float = sev_field(0.03, 0.6)
    band_low: float = choice_field([0.05, 0.15, 0.3, 0.5])
    band_width: float = choice_field([0.1, 0.25, 0.5])


def spectral_noise(
    img: np.ndarray,
    *,
    rng: np.random.Generator,
    strength: float,
    band_low: float,
    band_width: float,
) -> np.ndarray:
    """Complex Gaussian noise added inside a radial frequency band.

    Noise amplitude is ``strength`` x the mean spectral magnitude in that band, so it scales
    with the image content (structured, band-limited noise rather than white noise).
    """
    h, w = img.shape[:2]
    r = _radius(h, w)
    band = ((r >= band_low) & (r < band_low + band_width)).astype(np.float32)
    f = _rfft(img.astype(np.float32))
    mag = float(np.abs(f)[band > 0].mean()) if band.any() else 0.0
    shape = f.shape
    noise = rng.standard_normal(shape, dtype=np.float32) + 1j * rng.standard_normal(
        shape, dtype=np.float32
    )
    f = f + np.float32(strength * mag) * noise * band[..., None]
    return to_u8(_irfft(f, img.shape))


class MoireParams(OpParams):
    amplitude: float = sev_field(0.03, 0.3)
    period: float = sev_field(2.2, 3.5)
    angle: float = choice_field([0.0, 15.0, 30.0, 45.0, 60.0, 75.0])


def moire(
    img: np.ndarray, *, rng: np.random.Generator, amplitude: float, period: float, angle: float
) -> np.ndarray:
    """Moire (screen re-capture): two near-equal fine gratings beat into low-frequency bands.

    The gratings are slightly rotated against each other (drawn from rng); their product is a
    luminance modulation with visible interference fringes.
    """
    h, w = img.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    t1 = np.deg2rad(angle)
    t2 = t1 + np.deg2rad(rng.uniform(1.0, 4.0))
    f2 = 1.0 / (period * rng.uniform(1.02, 1.08))
    g1 = np.cos(2 * np.pi / period * (xx * np.cos(t1) + yy * np.sin(t1)))
    g2 = np.cos(2 * np.pi * f2 * (xx * np.cos(t2) + yy * np.sin(t2)))
    pattern = g1 * g2
    pattern = cv2.GaussianBlur(pattern, (0, 0), sigmaX=0.8)  # camera optics smear the carrier
    pattern /= max(float(np.abs(pattern).max()), 1e-6)
    x = img.astype(np.float32) * (1.0 + amplitude * pattern[..., None])
    return to_u8(x)


register("unsharp_halo", "frequency", "test", UnsharpHaloParams, unsharp_halo)
register("ringing_overshoot", "frequency", "test", RingingOvershootParams, ringing_overshoot)
register("lowpass_ringing", "frequency", "test", LowpassRingingParams, lowpass_ringing)
register("spectral_noise", "frequency", "test", SpectralNoiseParams, spectral_noise)
register("moire", "frequency", "test", MoireParams, moire)
