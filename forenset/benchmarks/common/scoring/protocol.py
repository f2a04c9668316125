"""The scorer protocol: what every metric of a benchmark family provides.

A scorer turns the items of one group (a detector's answers on a set, a model's replies on a
slice) into one :class:`~forenset.benchmarks.common.scorers.types.Score` — the group value, the
model that computed it, or null with the reason — and hands the bootstrap the per-item data it
resamples plus a vectorised statistic that recomputes the value on each resample. Most metrics
are a mean of per-item values: :class:`ItemMean` is that case, declared in one line; a share
whose denominator is not the item count (a position bias over clear choices, an agreement over
annotator pairs) is a :class:`Ratio` of per-item sums.

Some metrics are not a value of a group's items at all: an Elo or Bradley-Terry rating is a
statistic of a whole arena of games, one value per player, and its interval resamples the games
and recomputes the statistic on each draw (a sequential Elo pass in the drawn order). Such a
metric is a :class:`GroupStatistic`: it returns one value and n per subject of the group, and a
per-draw statistic over the resampled units (``units_bootstrap`` draws them).
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


@dataclass(frozen=True)
class Ratio:
    """A metric that is sum(numerator) / sum(denominator) over per-item columns, minus ``shift``:
    ``columns(item)`` returns (numerator, denominator) or None (the item is not counted). ``n``
    is the denominator's sum (the clear choices, the annotator pairs), not the item count; the
    bootstrap resamples items and recomputes the ratio (NaN where a draw's denominator is 0)."""

    name: str
    header: str
    columns: Callable[[Item], tuple[float, float] | None]
    shift: float = 0.0
    needs: tuple[str, ...] = ()
    scope: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    percent: bool = False
    model: str = "forenset"
    backend: str = "offline"
    empty_reason: str = "no item of this group has a value"
    classes: tuple[str, ...] = ()
    truth: str = "label"

    def sample(self, items: Sequence[Item]) -> np.ndarray | None:
        rows = [c for c in (self.columns(i) for i in items) if c is not None]
        return np.asarray(rows, dtype=float).reshape(-1, 2)

    def count(self, items: Sequence[Item]) -> int:
        """The n of the value: the denominator's sum."""
        x = self.sample(items)
        return int(x[:, 1].sum()) if x is not None and len(x) else 0

    def score(self, items: Sequence[Item]) -> Score:
        x = self.sample(items)
        if x is None or not len(x) or x[:, 1].sum() <= 0:
            return null_score(self.name, self.empty_reason, model=self.model, backend=self.backend)
        value = float(x[:, 0].sum() / x[:, 1].sum() - self.shift)
        return Score(self.name, value, self.model, self.backend)

    def statistic(self, x: np.ndarray) -> np.ndarray:
        top, bottom = x[..., 0].sum(axis=-1), x[..., 1].sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1) - self.shift, np.nan)


@runtime_checkable
class GroupStatistic(Protocol):
    """A metric of a whole group of units (the games of an arena), one value per subject (each
    player): not a mean of items, so it has no per-item ``sample``. ``values`` gives each
    subject's (value, n); ``resample`` the statistic on one draw of the units (with
    replacement, in the drawn order), or None when the metric has no interval by nature (a
    count); it may raise ``ArithmeticError`` on a draw where the statistic is undefined (a fit
    that does not converge). ``no_interval`` says why there is none by nature; ``strict``: one
    undefined draw voids every interval (no interval rather than one over the draws that
    worked). ``params`` are the family's settings (Elo's K, shuffles, the build seed)."""

    name: str
    header: str
    percent: bool
    scope: Mapping[str, tuple[str, ...]]
    no_interval: str | None
    strict: bool

    def values(
        self, units: Sequence[Any], subjects: Sequence[str], params: Mapping[str, Any]
    ) -> dict[str, tuple[float | None, int]]:
        """Each subject's value (None: undefined for it) and the n behind it."""
        ...

    def resample(
        self, draw: Sequence[Any], subjects: Sequence[str], params: Mapping[str, Any]
    ) -> dict[str, float] | None:
        """The value of each subject on one draw (a subject left out: undefined on it)."""
        ...


Metric = Scorer | GroupStatistic
