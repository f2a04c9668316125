"""Perturbation catalogue (minimal core set; the perturbation issue completes it)."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
from pydantic import BaseModel, ConfigDict
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

SPLITS = ("train", "validation", "test")


class PerturbationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _jpeg(
    img: np.ndarray, rng: np.random.Generator, band: tuple[int, int]
) -> tuple[np.ndarray, dict]:
    q = int(rng.integers(*band))
    ok, enc = cv2.imencode(".jpg", img[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, q])
    return cv2.imdecode(enc, cv2.IMREAD_COLOR)[..., ::-1].copy(), {"quality": q}


def _noise(
    img: np.ndarray, rng: np.random.Generator, band: tuple[float, float]
) -> tuple[np.ndarray, dict]:
    s = float(rng.uniform(*band))
    out = img.astype(np.float32) + rng.normal(0, s, img.shape)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8), {"sigma": round(s, 3)}


def _blur(
    img: np.ndarray, rng: np.random.Generator, band: tuple[float, float]
) -> tuple[np.ndarray, dict]:
    s = float(rng.uniform(*band))
    return cv2.GaussianBlur(img, (0, 0), s), {"sigma": round(s, 3)}


BANDS = {
    "jpeg": {"train": (70, 95), "validation": (45, 70), "test": (20, 45)},
    "gaussian_noise": {"train": (1, 4), "validation": (4, 9), "test": (9, 18)},
    "gaussian_blur": {"train": (0.3, 0.8), "validation": (0.8, 1.5), "test": (1.5, 2.5)},
}
OPS = {
    "jpeg": ("compression", _jpeg),
    "gaussian_noise": ("noise", _noise),
    "gaussian_blur": ("blur", _blur),
}


def perturb_image(
    img: np.ndarray, *, split: str, seed: int, config: PerturbationConfig
) -> tuple[np.ndarray, dict[str, Any]]:
    rng = np.random.Generator(np.random.PCG64(seed))
    name = list(OPS)[int(rng.integers(len(OPS)))]
    family, fn = OPS[name]
    out, params = fn(img, rng, BANDS[name][split])
    return out, {
        "schedule": "single",
        "ops": [{"name": name, "family": family, "params": params}],
        "seed": seed,
    }


def quality(clean: np.ndarray, perturbed: np.ndarray) -> dict[str, float]:
    psnr = float(peak_signal_noise_ratio(clean, perturbed, data_range=255))
    return {
        "psnr": min(psnr, 99.0) if np.isfinite(psnr) else 99.0,
        "ssim": float(structural_similarity(clean, perturbed, channel_axis=2, data_range=255)),
    }
