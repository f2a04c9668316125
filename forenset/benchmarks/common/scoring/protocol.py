"""The scorer protocol: what every metric of a benchmark family provides.

A scorer turns the items of one group (a detector's answers on a set, a model's replies on a
slice) into one :class:`~forenset.benchmarks.common.scorers.types.Score` — the group value, the
model that computed it, or null with the reason — and hands the bootstrap the per-item data it
resamples plus a vectorised statistic that recomputes the value on each resample. Most metrics
are a mean of per-item values: :class:`ItemMean` is that case, declared in one line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Protocol, runtime_checkable

import numpy as np

from forenset.benchmarks.common.scorers.types import Score, null_score

Item = Mapping[str, Any]


@runtime_checkable
class Scorer(Protocol):
    """One metric. ``name`` is its ``metric`` value in the long table, ``header`` its column in
    the CLI and report; ``needs`` the item fields it reads; ``scope`` the group fields and the
    values of them it scores (empty: every group); ``classes`` the truth classes a meaningful
    set must hold (read from the ``truth`` field; empty: any set); ``percent`` shows it x100."""

    name: str
    header: str
    needs: tuple[str, ...]
    scope: Mapping[str, tuple[str, ...]]
    classes: tuple[str, ...]
    truth: str
    percent: bool

    def score(self, items: Sequence[Item]) -> Score:
        """The group value (or null with the reason)."""
        ...

    def sample(self, items: Sequence[Item]) -> np.ndarray | None:
        """Per-item data of shape (n, k) that the bootstrap resamples (n = the items behind the
        value); None: the metric has no per-item form and gets no interval."""
        ...

    def statistic(self, x: np.ndarray) -> np.ndarray:
        """The value of each resample: (b, n, k) -> (b,), NaN where undefined."""
        ...


def _mean_last(x: np.ndarray) -> np.ndarray:
    return np.asarray(x)[..., 0].mean(axis=-1)


@dataclass(frozen=True)
class ItemMean:
    """A metric that is the mean of per-item values. ``value(item)`` returns a float, a
    :class:`Score` (a model-based item score: the group names its models, and null item scores
    are left out of the mean) or None (the item has no value)."""

    name: str
    header: str
    value: Callable[[Item], Score | float | None]
    needs: tuple[str, ...] = ()
    scope: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    percent: bool = False
    model: str = "forenset"  # who computed plain float values
    backend: str = "offline"
    empty_reason: str = "no item of this group has a value"
    classes: tuple[str, ...] = ()
    truth: str = "label"

    def _scores(self, items: Sequence[Item]) -> list[Score]:
        out = []
        for item in items:
            v = self.value(item)
            if v is None:
                continue
            out.append(
                v if isinstance(v, Score) else Score(self.name, float(v), self.model, self.backend)
            )
        return out

    def score(self, items: Sequence[Item]) -> Score:
        scores = self._scores(items)
        ok = [s for s in scores if s.ok]
        models = ",".join(sorted({s.model for s in scores if s.model}))
        backends = ",".join(sorted({s.backend for s in scores if s.backend}))
        if not ok:
            reasons = Counter(s.reason for s in scores if s.reason)
            reason = reasons.most_common(1)[0][0] if reasons else self.empty_reason
            return null_score(self.name, reason, model=models, backend=backends)
        return Score(self.name, fmean(s.value for s in ok), models, backends)  # type: ignore[misc]

    def sample(self, items: Sequence[Item]) -> np.ndarray | None:
        return np.array([[s.value] for s in self._scores(items) if s.ok], dtype=float).reshape(
            -1, 1
        )

    def statistic(self, x: np.ndarray) -> np.ndarray:
        return _mean_last(x)
