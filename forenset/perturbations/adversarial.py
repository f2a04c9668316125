"""Adversarial family: stored universal perturbation (from train), FOA-style targeted attack
(from validation), PGD embedding attack (from test). Torch is imported inside the op
functions only. Surrogate encoders are specs (``forenset.perturbations.attacks.load_encoder``):
random-init tiny nets by default, any image encoder from a local folder (``hf:PATH``).

Params that are not severities (encoders, steps, UAP file) come from
``PerturbationConfig.adversarial`` and are recorded with every op so a record replays alone.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np
from pydantic import Field

from .photos import PHOTO_NAMES, photo, photos
from .registry import OpParams, choice_field, register, sev_field

DEFAULT_ENCODERS = ["tiny_conv:0", "tiny_vit:1"]


class UapParams(OpParams):
    eps: float = sev_field(2.0, 12.0)  # L-inf radius in 0..255 units
    uap_path: str | None = None
    encoders: list[str] = Field(default_factory=lambda: list(DEFAULT_ENCODERS))
    uap_size: int = 64
    uap_steps: int = 30
    uap_seed: int = 0


@functools.lru_cache(maxsize=4)
def default_uap(encoders: tuple[str, ...], size: int, steps: int, seed: int) -> np.ndarray:
    """UAP trained in-process on scikit-image photos when no ``uap_path`` is configured.

    Cached per process; deterministic (single-threaded CPU), so every worker gets the same one.
    """
    from .attacks import train_uap

    return train_uap(photos(128), list(encoders), size=size, steps=steps, seed=seed, device="cpu")


@functools.lru_cache(maxsize=4)
def _stored_uap(path: str) -> np.ndarray:
    from .attacks import load_uap

    return load_uap(path)


def uap(
    img: np.ndarray,
    *,
    rng: np.random.Generator,
    eps: float,
    uap_path: str | None,
    encoders: list[str],
    uap_size: int,
    uap_steps: int,
    uap_seed: int,
) -> np.ndarray:
    """Add a stored X-Transfer-style universal perturbation, resized to the image, at ``eps``."""
    if uap_path:
        u = _stored_uap(uap_path)
    else:
        u = default_uap(tuple(encoders), int(uap_size), int(uap_steps), int(uap_seed))
    h, w = img.shape[:2]
    u = cv2.resize(u, (w, h), interpolation=cv2.INTER_LINEAR)
    out = img.astype(np.float32) + eps * np.clip(u, -1.0, 1.0)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


class FoaParams(OpParams):
    eps: float = sev_field(4.0, 16.0)  # L-inf radius in 0..255 units
    target: str = choice_field(list(PHOTO_NAMES))
    steps: int = 8
    step_size: float = 1.0  # 0..255 units per signed step
    clusters: int = 10
    ot_weight: float = 0.2
    crop_min: float = 0.7
    encoders: list[str] = Field(default_factory=lambda: list(DEFAULT_ENCODERS))
    device: str = "cpu"


def foa(
    img: np.ndarray,
    *,
    rng: np.random.Generator,
    eps: float,
    target: str,
    steps: int,
    step_size: float,
    clusters: int,
    ot_weight: float,
    crop_min: float,
    encoders: list[str],
    device: str,
) -> np.ndarray:
    """FOA-style targeted attack toward a scikit-image photo (global cosine + Sinkhorn OT)."""
    from .attacks import foa_attack

    tgt = photo(target, 128)
    return foa_attack(
        img,
        tgt,
        encoders,
        eps=eps / 255.0,
        step_size=step_size / 255.0,
        steps=int(steps),
        clusters=int(clusters),
        ot_weight=float(ot_weight),
        crop_min=float(crop_min),
        rng=rng,
        device=device,
    )


class PgdParams(OpParams):
    eps: float = sev_field(4.0, 16.0)  # L-inf radius in 0..255 units
    steps: int = 10
    step_size: float = 2.0  # 0..255 units per signed step
    encoders: list[str] = Field(default_factory=lambda: list(DEFAULT_ENCODERS))
    device: str = "cpu"


def pgd(
    img: np.ndarray,
    *,
    rng: np.random.Generator,
    eps: float,
    steps: int,
    step_size: float,
    encoders: list[str],
    device: str,
) -> np.ndarray:
    """PGD embedding attack: push the surrogates' global embeddings away from the clean ones."""
    from .attacks import pgd_attack

    return pgd_attack(
        img,
        encoders,
        eps=eps / 255.0,
        step_size=step_size / 255.0,
        steps=int(steps),
        rng=rng,
        device=device,
    )


register("uap", "adversarial", "train", UapParams, uap)
register("foa", "adversarial", "validation", FoaParams, foa)
register("pgd", "adversarial", "test", PgdParams, pgd)
