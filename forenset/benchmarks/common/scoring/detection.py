"""Detection F1 (fake = positive) and accuracy as scorers: the point value by scikit-learn
(:func:`~forenset.benchmarks.common.scorers.classification.detection_scores`, unparseable answers
count as wrong), the bootstrap by the same rule on resampled (truth, prediction) pairs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from forenset.benchmarks.common.scorers.classification import BACKEND, MODEL, detection_scores
from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.benchmarks.common.scoring.protocol import Item

NO_FAKES = "no fake item in this group: the F1 of the fake class is undefined"


def _pairs(items: Sequence[Item], truth: str, pred: str) -> np.ndarray:
    """(truth, prediction) as 1 = fake; an unparseable prediction is the opposite of the truth."""
    out = np.empty((len(items), 2), dtype=float)
    for i, item in enumerate(items):
        t = float(str(item[truth]).lower() == "fake")
        p = item[pred]
        out[i] = (t, 1.0 - t if p is None else float(str(p).lower() == "fake"))
    return out.reshape(-1, 2)


@dataclass(frozen=True)
class _Detection:
    name: str
    header: str
    truth: str = "label"
    pred: str = "answer"
    scope: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    classes: tuple[str, ...] = ("real", "fake")
    percent: bool = True

    @property
    def needs(self) -> tuple[str, ...]:
        return (self.truth, self.pred)

    def _report(self, items: Sequence[Item]) -> tuple[Score, dict[str, int]]:
        rep = detection_scores([i[self.truth] for i in items], [i[self.pred] for i in items])
        counts = {"tp": rep.tp, "fp": rep.fp, "fn": rep.fn, "tn": rep.tn}
        counts["n_unparsed"] = rep.n_unparsed
        s = rep.f1 if self.name == "f1" else rep.accuracy
        return s, counts

    def sample(self, items: Sequence[Item]) -> np.ndarray | None:
        return _pairs(items, self.truth, self.pred)


@dataclass(frozen=True)
class F1(_Detection):
    """Binary F1 of the fake class; null when the group holds no fake (undefined)."""

    def score(self, items: Sequence[Item]) -> Score:
        s, counts = self._report(items)
        if s.value is not None and counts["tp"] + counts["fn"] == 0:
            return Score(self.name, None, MODEL, BACKEND, NO_FAKES, details=counts)
        if s.value is None:
            return null_score(self.name, s.reason or "no value", model=MODEL, backend=BACKEND)
        return Score(self.name, s.value, MODEL, BACKEND, details=counts)

    def statistic(self, x: np.ndarray) -> np.ndarray:
        t, p = x[..., 0], x[..., 1]
        tp = (t * p).sum(-1)
        fp = ((1 - t) * p).sum(-1)
        fn = (t * (1 - p)).sum(-1)
        den = 2 * tp + fp + fn
        with np.errstate(invalid="ignore", divide="ignore"):
            # a resample without a fake has no F1 of the fake class (NaN: left out)
            return np.where(tp + fn > 0, 2 * tp / np.where(den > 0, den, 1), np.nan)


@dataclass(frozen=True)
class Accuracy(_Detection):
    """Share of correct answers (an unparseable answer is wrong)."""

    def score(self, items: Sequence[Item]) -> Score:
        s, counts = self._report(items)
        if s.value is None:
            return null_score(self.name, s.reason or "no value", model=MODEL, backend=BACKEND)
        return Score(self.name, s.value, MODEL, BACKEND, details=counts)

    def statistic(self, x: np.ndarray) -> np.ndarray:
        return (x[..., 0] == x[..., 1]).mean(-1)
