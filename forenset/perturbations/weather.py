"""Weather family: fog, snow, rain, spatter, sun flare, shadow."""

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


class FogParams(OpParams):
    strength: float = sev_field(0.4, 3.0)
    decay: float = sev_field(2.2, 1.4)


def fog(img: np.ndarray, *, rng: np.random.Generator, strength: float, decay: float) -> np.ndarray:
    """Plasma-fractal fog (imagecorruptions ``fog``, explicit rng)."""
    return to_u8(C.fog(img.astype(np.float32) / 255.0, strength, decay, rng) * 255)


class SnowParams(OpParams):
    density: float = sev_field(0.05, 0.55)
    zoom: float = sev_field(3.0, 2.0)
    blur_len: int = sev_field(5, 21, integer=True)
    blend: float = sev_field(0.85, 0.55)


def snow(
    img: np.ndarray,
    *,
    rng: np.random.Generator,
    density: float,
    zoom: float,
    blur_len: int,
    blend: float,
) -> np.ndarray:
    """Falling snow (imagecorruptions ``snow``, OpenCV motion blur, explicit rng)."""
    x = img.astype(np.float32) / 255.0
    out = C.snow(x, density, zoom, 0.6, int(blur_len), blend, rng)
    return to_u8(out * 255)


class RainParams(OpParams):
    brightness: float = sev_field(0.95, 0.6)
    blur: int = sev_field(1, 5, integer=True)
    rain_type: str = choice_field(["drizzle", "heavy", "torrential"])


def rain(
    img: np.ndarray, *, rng: np.random.Generator, brightness: float, blur: int, rain_type: str
) -> np.ndarray:
    """Rain streaks (albumentations RandomRain, fixed values, seeded from rng)."""
    A = albumentations()

    t = A.RandomRain(
        slant_range=(-10, 10),
        blur_value=max(1, int(blur)),
        brightness_coefficient=brightness,
        rain_type=rain_type,
        p=1,
    )
    return run_albumentations(t, img, rng)


class SpatterParams(OpParams):
    intensity: float = sev_field(0.2, 0.8)
    cutout: float = sev_field(0.75, 0.6)
    mode: str = choice_field(["rain", "mud"])


def spatter(
    img: np.ndarray, *, rng: np.random.Generator, intensity: float, cutout: float, mode: str
) -> np.ndarray:
    """Lens spatter, rain drops or mud (albumentations Spatter, seeded from rng)."""
    A = albumentations()

    t = A.Spatter(
        intensity=(intensity, intensity), cutout_threshold=(cutout, cutout), mode=mode, p=1
    )
    return run_albumentations(t, img, rng)


class SunFlareParams(OpParams):
    radius: float = sev_field(0.1, 0.5)
    circles: int = sev_field(2, 10, integer=True)


def sun_flare(
    img: np.ndarray, *, rng: np.random.Generator, radius: float, circles: int
) -> np.ndarray:
    """Sun flare with ghost circles (albumentations RandomSunFlare; radius as side fraction)."""
    A = albumentations()

    r = max(2, int(radius * max(img.shape[:2])))
    t = A.RandomSunFlare(src_radius=r, num_flare_circles_range=(int(circles), int(circles)), p=1)
    return run_albumentations(t, img, rng)


class ShadowParams(OpParams):
    intensity: float = sev_field(0.2, 0.8)
    count: int = sev_field(1, 3, integer=True)


def shadow(
    img: np.ndarray, *, rng: np.random.Generator, intensity: float, count: int
) -> np.ndarray:
    """Polygonal cast shadows (albumentations RandomShadow, seeded from rng)."""
    A = albumentations()

    t = A.RandomShadow(
        shadow_roi=(0, 0, 1, 1),
        num_shadows_limit=(int(count), int(count)),
        shadow_intensity_range=(intensity, intensity),
        p=1,
    )
    return run_albumentations(t, img, rng)


register("shadow", "weather", "validation", ShadowParams, shadow)
register("fog", "weather", "validation", FogParams, fog)
register("rain", "weather", "validation", RainParams, rain)
register("sun_flare", "weather", "validation", SunFlareParams, sun_flare)
register("snow", "weather", "test", SnowParams, snow)
register("spatter", "weather", "test", SpatterParams, spatter)
