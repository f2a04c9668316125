"""Propagation family: re-sharing degradation (resize + recompress + light sharpen, repeated).

``propagate(img, level, rng)`` is the standalone function (level 0 = untouched); the ops
``propagation_1x/2x/3x`` apply the same rounds with recorded params, and ``social_chain``
passes the image through a sampled chain of platform profiles.
"""

from __future__ import annotations

from typing import Any, ClassVar

import cv2
import numpy as np
from pydantic import Field, field_validator

from .compression import encode_decode, jpeg_roundtrip
from .registry import OpParams, register, sev_field, to_u8

# Approximate public re-encoding behaviour (longest side cap, JPEG quality, sharpening).
# Caps are relative to 1080-px uploads so that they act on small images too.
PLATFORMS: dict[str, dict[str, Any]] = {
    "whatsapp": {"scale": 0.75, "quality": 70, "sharpen": 0.25, "fmt": "JPEG"},
    "instagram": {"scale": 0.9, "quality": 80, "sharpen": 0.35, "fmt": "JPEG"},
    "facebook": {"scale": 0.85, "quality": 72, "sharpen": 0.2, "fmt": "JPEG"},
    "twitter": {"scale": 1.0, "quality": 85, "sharpen": 0.1, "fmt": "JPEG"},
    "telegram": {"scale": 0.8, "quality": 82, "sharpen": 0.15, "fmt": "JPEG"},
    "wechat": {"scale": 0.7, "quality": 65, "sharpen": 0.3, "fmt": "JPEG"},
    "webp_cdn": {"scale": 0.85, "quality": 75, "sharpen": 0.0, "fmt": "WEBP"},
}


def _sharpen(img: np.ndarray, amount: float) -> np.ndarray:
    if amount <= 0:
        return img
    x = img.astype(np.float32)
    return to_u8(x + amount * (x - cv2.GaussianBlur(x, (0, 0), sigmaX=1.0)))


def propagation_round(
    img: np.ndarray, scale: float, quality: int, sharpen: float, fmt: str = "JPEG"
) -> np.ndarray:
    """One share: resize by ``scale``, sharpen lightly, re-encode, resize back."""
    h, w = img.shape[:2]
    x = img
    if scale != 1.0:
        sw, sh = max(8, round(w * scale)), max(8, round(h * scale))
        x = cv2.resize(x, (sw, sh), interpolation=cv2.INTER_AREA)
    x = _sharpen(x, sharpen)
    x = jpeg_roundtrip(x, quality) if fmt == "JPEG" else encode_decode(x, fmt, quality)
    if x.shape[:2] != (h, w):
        x = cv2.resize(x, (w, h), interpolation=cv2.INTER_LINEAR)
    return x


def propagate(img: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    """Apply ``level`` (0-3, more allowed) re-sharing rounds with per-round params from rng."""
    if level < 0:
        raise ValueError("level must be >= 0")
    x = img.copy()
    for _ in range(int(level)):
        x = propagation_round(
            x,
            scale=float(rng.uniform(0.5, 0.9)),
            quality=int(rng.integers(60, 91)),
            sharpen=float(rng.uniform(0.1, 0.5)),
        )
    return x


class PropagationParams(OpParams):
    scale: float = sev_field(0.9, 0.5)
    quality: int = sev_field(90, 55, integer=True)
    sharpen: float = sev_field(0.1, 0.6)


def _make_level(level: int):
    def fn(
        img: np.ndarray, *, rng: np.random.Generator, scale: float, quality: int, sharpen: float
    ) -> np.ndarray:
        x = img
        for _ in range(level):
            x = propagation_round(x, scale, quality, sharpen)
        return x

    fn.__name__ = f"propagation_{level}x"
    fn.__doc__ = f"{level} re-sharing round(s): resize + sharpen + JPEG, back to input size."
    return fn


class SocialChainParams(OpParams):
    length: int = sev_field(1, 4, integer=True)
    platforms: list[str] = Field(
        default_factory=lambda: ["twitter"],
        json_schema_extra={"derived": "`length` draws from {" + ", ".join(PLATFORMS) + "}"},
    )
    PLATFORM_NAMES: ClassVar[tuple[str, ...]] = tuple(PLATFORMS)

    @field_validator("platforms")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = [p for p in v if p not in PLATFORMS]
        if unknown:
            raise ValueError(f"unknown platforms {unknown}; known: {sorted(PLATFORMS)}")
        return v

    @classmethod
    def refine(cls, values: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        n = int(values.get("length", 1))
        values["platforms"] = [str(rng.choice(cls.PLATFORM_NAMES)) for _ in range(n)]
        return values


def social_chain(
    img: np.ndarray, *, rng: np.random.Generator, length: int, platforms: list[str]
) -> np.ndarray:
    """Upload/download through a chain of platform profiles (see ``PLATFORMS``)."""
    x = img
    for name in platforms:
        p = PLATFORMS[name]
        x = propagation_round(x, p["scale"], p["quality"], p["sharpen"], p["fmt"])
    return x


register("propagation_1x", "propagation", "validation", PropagationParams, _make_level(1))
register("propagation_2x", "propagation", "validation", PropagationParams, _make_level(2))
register("propagation_3x", "propagation", "test", PropagationParams, _make_level(3))
register("social_chain", "propagation", "validation", SocialChainParams, social_chain)
