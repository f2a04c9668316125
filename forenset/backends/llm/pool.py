"""Model pools: one model per item, drawn by weight from an RNG seeded by (seed, stage, item)."""

from __future__ import annotations

import numpy as np

from forenset.backends.llm.types import ModelSpec
from forenset.seeds import rng_for


def choose_model(pool: list[ModelSpec], build_seed: int, stage: str, item_id: str) -> ModelSpec:
    """Weighted draw; the same (build seed, stage, item) always gets the same model."""
    if len(pool) == 1:
        return pool[0]
    weights = np.array([s.weight for s in pool], dtype=float)
    rng = rng_for(build_seed, stage, item_id, "model")
    return pool[int(rng.choice(len(pool), p=weights / weights.sum()))]


def fallback_model(
    pool: list[ModelSpec], refused: ModelSpec, build_seed: int, stage: str, item_id: str
) -> ModelSpec | None:
    """Another pool model for an item ``refused`` declined (weighted, seeded draw), or None.

    Why: a refusal is one model's policy, not the item's fate; a second model may answer.
    """
    others = [s for s in pool if s != refused]
    if not others:
        return None
    weights = np.array([s.weight for s in others], dtype=float)
    rng = rng_for(build_seed, stage, item_id, "fallback")
    return others[int(rng.choice(len(others), p=weights / weights.sum()))]
