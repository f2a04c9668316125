"""Seeded bootstrap intervals and the degenerate-set check behind every benchmark number.

The papers report point values only (no intervals, no n). A number on a few hundred images can
move by several points between draws, so each group value gets a percentile bootstrap interval:
the group's items are resampled with replacement ``resamples`` times and the metric's statistic
recomputed on each resample (F1 from the resampled confusion counts, a mean from the resampled
item scores). The generator is seeded from the build seed and the row's key, so a rebuild gives
the same interval and one group's interval does not depend on which other groups exist.

A set with one class only, or fewer than ``min_n`` items, is *degenerate*: its F1 / accuracy is
not a detection score (a set of fakes only rewards answering "fake" always). Such rows keep their
value but carry a ``caveat``, and displays print "not meaningful (caveat)" in its place.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import Field

from forenset.confbase import Strict

# resampled items per block: bounds the memory of one bootstrap (resamples x n x k floats)
_BLOCK = 2_000_000


class IntervalsConfig(Strict):
    """``intervals:`` of a benchmark family's section: the bootstrap behind every interval."""

    resamples: int = Field(1000, ge=0)  # 0: no intervals (ci_reason says so)
    level: float = Field(0.95, gt=0.0, lt=1.0)  # two-sided percentile interval
    seed: int | None = None  # None: the build seed
    min_n: int = Field(10, ge=1)  # fewer items: the value carries a caveat


def row_seed(seed: int, key: str) -> list[int]:
    """A generator seed from the build seed and a row key (stable across runs and group sets)."""
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return [int(seed) & 0xFFFFFFFFFFFFFFFF, h]


def bootstrap(
    x: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    resamples: int,
    level: float,
    seed: Sequence[int] | int,
) -> tuple[float, float] | None:
    """The percentile interval of ``statistic`` over item resamples of ``x`` (shape (n, k)).

    ``statistic`` maps an array of shape (b, n, k) (b resamples) to b values; NaN values (a
    resample where the statistic is undefined) are left out. None when ``x`` has fewer than two
    items, no resamples are asked for, or every resample is undefined."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    n = len(x)
    if n < 2 or resamples < 1:
        return None
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK // max(1, n * x.shape[1]))
    stats = []
    for start in range(0, resamples, block):
        b = min(block, resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        stats.append(np.asarray(statistic(x[idx]), dtype=float))
    values = np.concatenate(stats)
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def units_bootstrap(
    units: Sequence[object],
    statistic: Callable[[list[object]], dict[str, float]],
    *,
    resamples: int,
    level: float,
    seed: Sequence[int] | int,
    strict: bool = False,
) -> tuple[dict[str, tuple[float, float] | None], int]:
    """Percentile intervals of a per-subject group statistic (a :class:`GroupStatistic`, e.g.
    Elo over games), as open leaderboard arenas compute them: each round draws len(units) units with
    replacement, in the drawn order, and recomputes ``statistic`` on that draw. Returns each
    subject's interval (None: no draw defined it) and the number of draws on which the statistic
    raised ``ArithmeticError``; with ``strict`` any such draw leaves every interval None."""
    if not units or resamples < 1:
        return {}, 0
    rng = np.random.default_rng(seed)
    per: dict[str, list[float]] = {}
    failed = 0
    for _ in range(resamples):
        draw = [units[i] for i in rng.integers(0, len(units), len(units))]
        try:
            got = statistic(draw)
        except ArithmeticError:
            failed += 1
            continue
        for k, v in got.items():
            per.setdefault(k, []).append(v)
    if strict and failed:
        return {}, failed
    alpha = (1.0 - level) / 2.0
    out: dict[str, tuple[float, float] | None] = {}
    for k, vals in per.items():
        finite = [v for v in vals if math.isfinite(v)]
        if finite:
            lo, hi = np.quantile(np.asarray(finite, dtype=float), [alpha, 1.0 - alpha])
            out[k] = (float(lo), float(hi))
    return out, failed


NO_REALS = "the set has no real images"
NO_FAKES = "the set has no fake images"


def degenerate(
    n: int, min_n: int, classes: Sequence[str] | None = None, expected: Sequence[str] = ()
) -> str | None:
    """Why a value on this set is not meaningful (displays print "not meaningful (why)"), or None. ``classes`` are the truth labels of its items
    (given for metrics that need both classes, such as F1 and accuracy), ``expected`` the
    classes a meaningful set holds."""
    if classes is not None and n:
        present = set(classes)
        for c in expected:
            if c not in present:
                return {"real": NO_REALS, "fake": NO_FAKES}.get(c, f"the set has no {c} items")
    if n < min_n:
        return f"n = {n} is below the minimum of {min_n} items"
    return None
