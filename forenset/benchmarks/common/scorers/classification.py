"""Detection scores: binary F1 with fake as the positive class, and accuracy (scikit-learn).

The seed paper reports detection as binary F1 (§5, its protocol; App. 16.0.0.5 parses the
label from the ``<answer>`` field). It does not say how an answer that cannot be parsed counts; we
fix the rule here so that a detector cannot gain by refusing to answer:

* an unparseable prediction (``None``) is never equal to the truth, so it is wrong for accuracy;
* for F1 it is scored as the opposite of the truth: ``None`` on a fake image is a false negative,
  ``None`` on a real image is a false positive.

Both rules are applied by replacing ``None`` with the opposite label before scikit-learn sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sklearn
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

from forenset.benchmarks.common.scorers.types import Score, null_score

Label = Literal["real", "fake"]
LABELS: tuple[str, str] = ("real", "fake")
BACKEND = "offline"
MODEL = f"scikit-learn-{sklearn.__version__}"


@dataclass(frozen=True)
class DetectionReport:
    """F1 (fake = positive) and accuracy of one set of predictions, with the confusion counts."""

    f1: Score
    accuracy: Score
    n: int
    n_unparsed: int
    tp: int
    fp: int
    fn: int
    tn: int

    def row(self) -> dict[str, Any]:
        return {
            **self.f1.row(),
            **self.accuracy.row(),
            "n": self.n,
            "n_unparsed": self.n_unparsed,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
        }


def _truth(value: Any) -> int:
    if isinstance(value, str) and value.lower() in LABELS:
        return int(value.lower() == "fake")
    raise ValueError(f"truth label must be 'real' or 'fake', got {value!r}")


def _pred(value: Any, truth: int) -> int:
    if value is None:
        return 1 - truth  # never equal to the truth: FN on a fake, FP on a real
    if isinstance(value, str) and value.lower() in LABELS:
        return int(value.lower() == "fake")
    raise ValueError(f"prediction must be 'real', 'fake' or None (unparseable), got {value!r}")


def detection_scores(truth: Sequence[str], pred: Sequence[str | None]) -> DetectionReport:
    """Binary F1 (fake positive) and accuracy; None predictions count as wrong (module doc).

    Labels are 'real'/'fake' (any case); parse model output with
    :func:`forenset.benchmarks.common.answers.parse_answer` first, so
    that a typo in the caller's labels raises instead of silently counting as a wrong answer.
    """
    if len(truth) != len(pred):
        raise ValueError(f"{len(truth)} truth labels but {len(pred)} predictions")
    if not truth:
        reason = "no predictions to score"
        return DetectionReport(
            f1=null_score("f1", reason, model=MODEL, backend=BACKEND),
            accuracy=null_score("accuracy", reason, model=MODEL, backend=BACKEND),
            n=0,
            n_unparsed=0,
            tp=0,
            fp=0,
            fn=0,
            tn=0,
        )
    y = [_truth(t) for t in truth]
    p = [_pred(v, t) for v, t in zip(pred, y, strict=True)]
    tn, fp, fn, tp = (int(c) for c in confusion_matrix(y, p, labels=[0, 1]).ravel())
    # zero_division=0: with no fake in the truth and none predicted, F1 is 0, not undefined.
    f1 = float(f1_score(y, p, pos_label=1, average="binary", zero_division=0))
    acc = float(accuracy_score(y, p))
    n_unparsed = sum(v is None for v in pred)
    details = {"n": len(y), "n_unparsed": n_unparsed}
    return DetectionReport(
        f1=Score("f1", f1, MODEL, BACKEND, details=details),
        accuracy=Score("accuracy", acc, MODEL, BACKEND, details=details),
        n=len(y),
        n_unparsed=n_unparsed,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
    )


GroupKey = str | Sequence[str] | Callable[[Mapping[str, Any]], Hashable]


def _key_fn(key: GroupKey) -> Callable[[Mapping[str, Any]], Hashable]:
    if callable(key):
        return key
    if isinstance(key, str):
        return lambda row: row[key]
    cols = tuple(key)
    return lambda row: tuple(row[c] for c in cols)


def detection_by_group(
    rows: Iterable[Mapping[str, Any]],
    key: GroupKey,
    *,
    truth: str = "label",
    pred: str = "pred",
) -> dict[Hashable, DetectionReport]:
    """Detection scores per group of rows (ID/OOD, generator, perturbation family + severity).

    ``key`` is a column name, a sequence of column names (the group is then a tuple), or a
    function of the row. Groups come back in sorted order of their string form, so reports are
    stable across runs.
    """
    fn = _key_fn(key)
    groups: dict[Hashable, tuple[list[str], list[str | None]]] = {}
    for row in rows:
        t, p = groups.setdefault(fn(row), ([], []))
        t.append(row[truth])
        p.append(row[pred])
    return {g: detection_scores(*groups[g]) for g in sorted(groups, key=str)}
