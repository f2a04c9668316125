"""Per-image mixture protocol: single / pair / chunk schedules over the split's cumulative op set.

All randomness derives from the caller's ``seed`` (itself derived from build seed, split and
image id), through ``forenset.seeds.derive_seed`` sub-streams:
``(seed, "schedule")`` picks schedule and ops, ``(seed, "params", i, name)`` the params of the
i-th op and ``(seed, "apply", i, name)`` the op's own noise. A record therefore replays alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np

from ..seeds import rng_for
from .config import PerturbationConfig
from .registry import REGISTRY, SPLITS, Op, split_index

SCHEDULES = ("single", "pair", "chunk")


def op_pool(split: str, config: PerturbationConfig) -> list[Op]:
    """The ops a split admits under ``config`` (registry order; cumulative over splits)."""
    split_index(split)
    pool = []
    for op in REGISTRY.values():
        if not op.admitted(split):
            continue
        if config.include is not None and op.name not in config.include:
            continue
        if op.name in config.exclude or op.family in config.exclude_families:
            continue
        if op.family == "adversarial" and not config.adversarial.enabled:
            continue
        pool.append(op)
    return pool


def sample_schedule(
    split: str, rng: np.random.Generator, config: PerturbationConfig
) -> tuple[str, int]:
    """Draw (schedule, number of ops) for one image."""
    s = config.schedule(split)
    probs = np.array([s.single, s.pair, s.chunk], dtype=np.float64)
    kind = SCHEDULES[int(rng.choice(3, p=probs / probs.sum()))]
    if kind == "single":
        return kind, 1
    if kind == "pair":
        return kind, 2
    return kind, int(rng.integers(s.chunk_min, s.chunk_max + 1))


def sample_ops(pool: list[Op], n: int, rng: np.random.Generator) -> list[Op]:
    """``n`` distinct ops, at most one adversarial, which goes last."""
    order = [pool[i] for i in rng.permutation(len(pool))]
    chosen: list[Op] = []
    adv: Op | None = None
    for op in order:
        if len(chosen) + (adv is not None) >= n:
            break
        if op.family == "adversarial":
            if adv is None:
                adv = op
            continue
        chosen.append(op)
    return chosen + ([adv] if adv is not None else [])


def _overrides(op: Op, split: str, rng: np.random.Generator, cfg: PerturbationConfig) -> dict:
    a = cfg.adversarial
    if op.name == "uap":
        lo, hi = a.uap_eps.get(split, a.uap_eps.get("test", (8.0, 12.0)))
        return {
            "eps": float(rng.uniform(lo, hi)),
            "uap_path": a.uap_path,
            "encoders": a.surrogates("uap"),
            "uap_size": a.uap_size,
            "uap_steps": a.uap_steps,
            "uap_seed": a.uap_seed,
        }
    if op.name == "foa":
        lo, hi = a.foa_eps.get(split, a.foa_eps.get("test", (8.0, 16.0)))
        return {
            "eps": float(rng.uniform(lo, hi)),
            "steps": a.foa_steps,
            "step_size": a.foa_step_size,
            "clusters": a.foa_clusters,
            "ot_weight": a.foa_ot_weight,
            "crop_min": a.foa_crop_min,
            "encoders": a.surrogates("foa"),
            "device": a.device,
        }
    if op.name == "pgd":
        lo, hi = a.pgd_eps.get(split, a.pgd_eps.get("test", (8.0, 16.0)))
        return {
            "eps": float(rng.uniform(lo, hi)),
            "steps": a.pgd_steps,
            "step_size": a.pgd_step_size,
            "encoders": a.surrogates("pgd"),
            "device": a.device,
        }
    return {}


def plan(split: str, seed: int, config: PerturbationConfig) -> dict[str, Any]:
    """The record for one image without touching pixels: schedule, ordered ops + params, seed."""
    pool = op_pool(split, config)
    if not pool:
        raise ValueError(f"no ops admitted for split {split!r} under this config")
    rng = rng_for(seed, "schedule")
    kind, n = sample_schedule(split, rng, config)
    ops = sample_ops(pool, min(n, len(pool)), rng)
    band = config.schedule(split).severity
    out = []
    for i, op in enumerate(ops):
        prng = rng_for(seed, "params", i, op.name)
        params = op.sample_params(split, prng, band, _overrides(op, split, prng, config))
        out.append({"name": op.name, "family": op.family, "params": params.model_dump(mode="json")})
    return {"schedule": kind, "ops": out, "seed": int(seed)}


@contextlib.contextmanager
def _one_cv2_thread(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    old = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(old)


def _check_image(img: np.ndarray) -> None:
    if (
        not isinstance(img, np.ndarray)
        or img.dtype != np.uint8
        or img.ndim != 3
        or img.shape[2] != 3
    ):
        shape = getattr(img, "shape", None)
        dtype = getattr(img, "dtype", None)
        raise ValueError(f"expected a uint8 HxWx3 RGB array, got shape={shape} dtype={dtype}")
    if min(img.shape[:2]) < 8:
        raise ValueError(f"image too small for perturbation: {img.shape}")


def surrogates(record: dict[str, Any]) -> list[str]:
    """The surrogate encoders a record's adversarial ops ran against ([] when none)."""
    out: list[str] = []
    for entry in record["ops"]:
        if entry.get("family") == "adversarial":
            out.extend(e for e in entry["params"].get("encoders", []) if e not in out)
    return out


def apply_record(
    img: np.ndarray, record: dict[str, Any], *, single_thread: bool = True
) -> np.ndarray:
    """Replay a record (from ``plan`` or ``perturb_image``) on ``img``: bit-identical output."""
    _check_image(img)
    seed = int(record["seed"])
    x = np.ascontiguousarray(img)
    with _one_cv2_thread(single_thread):
        for i, entry in enumerate(record["ops"]):
            op = REGISTRY[entry["name"]]
            try:
                x = op.apply(x, entry["params"], rng_for(seed, "apply", i, op.name))
            except Exception as e:  # re-raise with the op named so the stage can record it
                raise RuntimeError(f"op {i} {op.name} failed: {type(e).__name__}: {e}") from e
            x = np.ascontiguousarray(x)
    return x


def perturb_image(
    img: np.ndarray, *, split: str, seed: int, config: PerturbationConfig
) -> tuple[np.ndarray, dict[str, Any]]:
    """Perturb one uint8 HxWx3 RGB image for ``split``; returns (image, record).

    record = {"schedule": "single"|"pair"|"chunk", "ops": [{"name", "family", "params"}],
    "seed": seed}. Raises ValueError on a bad image and RuntimeError naming the failing op.
    """
    _check_image(img)
    record = plan(split, seed, config)
    return apply_record(img, record, single_thread=config.single_thread), record


__all__ = [
    "SPLITS",
    "apply_record",
    "op_pool",
    "perturb_image",
    "plan",
    "sample_schedule",
    "surrogates",
]
