"""FakeBench's metrics as scorers: the registry's ``fakebench`` family (§3.2, §4.1, Tables 4-8).

The ``fakebench_scores`` stage computes the per-item values (exact match, BLEU / ROUGE-L,
similarity, judged rounds) and hands each group's units to these scorers: an item, or for
FakeQA ``all`` an image whose values are the means of its questions (§3.5: per image, then over
images). A unit is ``{"label", "hit"?, "scores": {metric: Score}}``. Every metric but the
averages is a mean over the units that have a value (:class:`ItemMean`); the averages are
Tables 5-7's: ``auto_average`` (BLEU-1, BLEU-2, ROUGE-L, similarity), ``judged_average``
(Completeness, Preciseness, Relevance on 0-2) and ``average`` = (auto + judged / 2) / 2, a side
with no measure left out (``details.of`` names the measures used). Their bootstrap resamples the
units once and recomputes every measure, then the averages, on that resample.

§4.1 "Measures": FakeClue and FakeQA answers are scored against the golden clues with BLEU-1,
BLEU-2 and ROUGE-L (:mod:`forenset.benchmarks.common.scorers.text_overlap`: sacrebleu without
smoothing, as the paper's near-zero FakeQA BLEU-2 values show) and "Sim.", the cosine similarity
of sentence embeddings (:mod:`forenset.benchmarks.common.scorers.similarity`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

import numpy as np

from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.benchmarks.common.scoring.protocol import Item, ItemMean

OVERLAP = ("bleu1", "bleu2", "rouge_l")
JUDGED = ("completeness", "preciseness", "relevance")
MODEL_METRICS = ("similarity", *JUDGED)
AUTOMATIC = (*OVERLAP, "similarity")
MEASURES = (*AUTOMATIC, *JUDGED)
NO_MEASURE = "none of its measures has a value"


def overall_average(
    row: Mapping[str, Any],
) -> tuple[float | None, float | None, float | None, str | None]:
    """(automatic Aver., judged Aver. on 0-2, overall on 0-1, the measures used), as FakeBench's
    Tables 5-7: overall = (automatic Aver. + judged Aver. / 2) / 2 (§4.1: "the average of
    automatic and GPT-assisted measures scaled to the range of [0,1]"). A side with no measure
    is None and the overall is the other side alone."""
    auto = [row[m] for m in AUTOMATIC if row.get(m) is not None]
    judged = [row[m] for m in JUDGED if row.get(m) is not None]
    a = fmean(auto) if auto else None
    j = fmean(judged) if judged else None
    sides = [v for v in (a, None if j is None else j / 2) if v is not None]
    if not sides:
        return None, None, None, None
    used = [m for m in (*AUTOMATIC, *JUDGED) if row.get(m) is not None]
    return a, j, fmean(sides), ",".join(used)


def _score(name: str):  # noqa: ANN201 - a small closure factory
    def value(unit: Item) -> Score | None:
        return (unit.get("scores") or {}).get(name)

    return value


def _hit(unit: Item) -> float | None:
    return unit.get("hit")


ACCURACY = ItemMean("accuracy", "Acc", _hit, percent=True, model="fakebench-exact-match")
BLEU1 = ItemMean("bleu1", "B.-1", _score("bleu1"))
BLEU2 = ItemMean("bleu2", "B.-2", _score("bleu2"))
ROUGE_L = ItemMean("rouge_l", "R.-L", _score("rouge_l"))
SIMILARITY = ItemMean("similarity", "Sim.", _score("similarity"))
COMPLETENESS = ItemMean("completeness", "Comp.", _score("completeness"))
PRECISENESS = ItemMean("preciseness", "Prec.", _score("preciseness"))
RELEVANCE = ItemMean("relevance", "Rele.", _score("relevance"))
MEANS = {s.name: s for s in (BLEU1, BLEU2, ROUGE_L, SIMILARITY, COMPLETENESS, PRECISENESS,
                             RELEVANCE)}  # fmt: skip


@dataclass(frozen=True)
class Average:
    """One of Tables 5-7's averages over the group's units (module doc)."""

    name: str
    header: str
    index: int  # 0: automatic Aver., 1: judged Aver. (0-2), 2: Overall
    needs: tuple[str, ...] = ()
    scope: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    classes: tuple[str, ...] = ()
    truth: str = "label"
    percent: bool = False

    def score(self, items: Sequence[Item]) -> Score:
        wide = {m: MEANS[m].score(items).value for m in MEASURES}
        auto, judged, overall, used = overall_average(wide)
        value = (auto, judged, overall)[self.index]
        if value is None:
            return null_score(self.name, NO_MEASURE)
        return Score(self.name, value, "", "", details={"of": used})

    def sample(self, items: Sequence[Item]) -> np.ndarray | None:
        """Per unit the seven measures (NaN where the unit has none)."""
        rows = []
        for unit in items:
            s = unit.get("scores") or {}
            rows.append([s[m].value if m in s and s[m].ok else np.nan for m in MEASURES])
        return np.asarray(rows, dtype=float).reshape(-1, len(MEASURES))

    def statistic(self, x: np.ndarray) -> np.ndarray:
        means = nan_mean(x, axis=1)  # (b, measures): NaN where a measure has no value
        auto = _row_mean(means[:, : len(AUTOMATIC)])
        judged = _row_mean(means[:, len(AUTOMATIC) :])
        overall = _row_mean(np.column_stack([auto, judged / 2]))
        return (auto, judged, overall)[self.index]


def _row_mean(a: np.ndarray) -> np.ndarray:
    """Mean of the defined columns per row (NaN when none), as overall_average's sides."""
    return nan_mean(a, axis=1)


def nan_mean(a: np.ndarray, axis: int) -> np.ndarray:
    """``np.nanmean`` without its "Mean of empty slice" warning: an all-NaN slice (a measure
    absent from a resample) is NaN, silently. Not ``warnings.catch_warnings``: it swaps the
    process's global filters, so shards scoring in parallel threads let each other's warnings
    through (seen as "RuntimeWarning: Mean of empty slice" in the fakebench build)."""
    a = np.asarray(a, dtype=float)
    ok = ~np.isnan(a)
    n = ok.sum(axis=axis)
    total = np.where(ok, a, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):  # thread-local: 0 / 0 -> NaN
        return total / n


AUTO_AVERAGE = Average("auto_average", "Aver. (auto)", 0)
JUDGED_AVERAGE = Average("judged_average", "Aver. (judged, 0-2)", 1)
AVERAGE = Average("average", "Overall", 2)
