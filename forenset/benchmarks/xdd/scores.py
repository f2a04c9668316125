"""The XDD leaderboard's ``scores.json``, computed as its scorer program computes it, each key
with n and a seeded bootstrap interval.

The scorer's rules (``evaluator_codabench/program/scoring.py`` and ``metrics/``):

* detection over the reference rows that have a prediction: macro F1 over {real, fake}, accuracy,
  the fake class's F1 and the real class's F1 (scikit-learn, ``zero_division=0``), each times the
  *coverage* (predicted rows / reference rows);
* explanations over the reference rows with ``score_explanations: true`` that have a non-empty
  submitted text: ``complex_bert_f1`` and ``simple_bert_f1`` the mean BERTScore-F1 against
  ``complex_reference`` / ``simple_reference``; ``simple_sle_raw`` the mean raw SLE of the simple
  texts (reference-free) and ``simple_sle_norm`` that mean clipped to [-1, 4] and mapped to
  [0, 1]; each then times its file's coverage (scored rows / explanation rows), and
  ``simple_sle_raw`` recomputed from the scaled norm (-1 + 5·norm) when any simple row was scored;
* ``simple_overall_score`` = 0.7·``simple_bert_f1`` + 0.3·``simple_sle_norm`` and
  ``explanation_score`` = 0.5·(``complex_bert_f1`` + ``simple_overall_score``), after coverage.

The validation phase's complex score (``evaluation/`` of the same repository) is
0.3·BERTScore + 0.4·entity coverage + 0.3·fact coverage, its entity and fact coverage judged by
a Qwen model; here ``validation_complex_score`` takes EntityScore and EvidenceScore from the
evaluator forenset is given (the offline phrase matcher by default), named in ``model``.

Every key is a :class:`XddScore`: the value (None with the reason when a model is missing),
n (the reference rows the key is over), the bootstrap interval (reference rows resampled,
the whole statistic recomputed, coverage included) and the models behind it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forenset.benchmarks.common.scorers.sle import SLE_MAX, SLE_MIN, sle_clip
from forenset.benchmarks.common.scoring.intervals import IntervalsConfig, row_seed, units_bootstrap
from forenset.benchmarks.xdd.format import Submission

DETECTION_KEYS = (
    "detection_macro_f1",
    "detection_accuracy",
    "detection_fake_f1",
    "detection_real_f1",
)
EXPLANATION_KEYS = (
    "complex_bert_f1",
    "simple_bert_f1",
    "simple_sle_raw",
    "simple_sle_norm",
    "simple_overall_score",
    "explanation_score",
)
SCORE_KEYS = (*DETECTION_KEYS, *EXPLANATION_KEYS)  # the leaderboard's scores.json, in its order
VALIDATION_KEY = "validation_complex_score"
SIMPLE_WEIGHTS = (0.7, 0.3)  # BERTScore, normalised SLE
VALIDATION_WEIGHTS = (0.3, 0.4, 0.3)  # BERTScore, entity, facts


@dataclass(frozen=True)
class XddScore:
    """One key of the leaderboard with its n, interval and the models behind it."""

    key: str
    value: float | None
    n: int
    ci_low: float | None = None
    ci_high: float | None = None
    model: str = ""
    reason: str | None = None

    def row(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "n": self.n, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "model": self.model, "reason": self.reason}  # fmt: skip


@dataclass(frozen=True)
class ItemValues:
    """Per reference id: the per-item numbers the statistics are built from (None: no model)."""

    complex_bert: Mapping[str, float | None]
    simple_bert: Mapping[str, float | None]
    simple_sle: Mapping[str, float | None]  # raw SLE of the submitted simple text
    entity: Mapping[str, float | None]
    facts: Mapping[str, float | None]


def sle_normalise(raw: float) -> float:
    """The scorer's ``normalize_sle``: raw clipped to [-1, 4], mapped to [0, 1]."""
    return (sle_clip(raw) - SLE_MIN) / (SLE_MAX - SLE_MIN)


def _f1(tp: int, fp: int, fn: int) -> float:
    """F1 with scikit-learn's ``zero_division=0``."""
    d = 2 * tp + fp + fn
    return 2 * tp / d if d else 0.0


def detection(refs: Sequence[Mapping[str, Any]], pred: Mapping[str, int]) -> dict[str, float]:
    """The four detection keys over ``refs`` (coverage-weighted), as the scorer computes them."""
    pairs = [(int(r["label"]), pred[str(r["id"])]) for r in refs if str(r["id"]) in pred]
    if not pairs or not refs:
        return dict.fromkeys(DETECTION_KEYS, 0.0)
    cov = len(pairs) / len(refs)
    tp = sum(t == 1 and p == 1 for t, p in pairs)
    tn = sum(t == 0 and p == 0 for t, p in pairs)
    fp = sum(t == 0 and p == 1 for t, p in pairs)
    fn = sum(t == 1 and p == 0 for t, p in pairs)
    fake, real = _f1(tp, fp, fn), _f1(tn, fn, fp)
    return {
        "detection_macro_f1": cov * (fake + real) / 2,
        "detection_accuracy": cov * (tp + tn) / len(pairs),
        "detection_fake_f1": cov * fake,
        "detection_real_f1": cov * real,
    }


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def explanations(
    refs: Sequence[Mapping[str, Any]], sub: Submission, v: ItemValues
) -> dict[str, float | None]:
    """The explanation keys and the validation complex score over ``refs`` (the scorer's
    coverage rules); a key whose model is missing for a scored row is None."""
    rows = [r for r in refs if r.get("score_explanations") is True]
    need = len(rows)
    cids = [str(r["id"]) for r in rows if str(r["id"]) in sub.complex]
    sids = [str(r["id"]) for r in rows if str(r["id"]) in sub.simple]
    cf = min(len(cids), need) / need if need else 1.0
    sf = min(len(sids), need) / need if need else 1.0

    def mean_of(values: Mapping[str, float | None], ids: list[str]) -> float | None:
        got = [values.get(i) for i in ids]
        if any(x is None for x in got):
            return None
        return _mean([float(x) for x in got if x is not None])

    cb = mean_of(v.complex_bert, cids)
    sb = mean_of(v.simple_bert, sids)
    raw = mean_of(v.simple_sle, sids)
    out: dict[str, float | None] = {}
    out["complex_bert_f1"] = None if cb is None else cb * cf
    out["simple_bert_f1"] = None if sb is None else sb * sf
    norm = None if raw is None else (sle_normalise(raw) if sids else 0.0) * sf
    out["simple_sle_norm"] = norm
    out["simple_sle_raw"] = (
        None if norm is None else (SLE_MIN + norm * (SLE_MAX - SLE_MIN) if sids else 0.0)
    )
    wb, ws = SIMPLE_WEIGHTS
    so = (
        None
        if out["simple_bert_f1"] is None or norm is None
        else wb * out["simple_bert_f1"] + ws * norm
    )
    out["simple_overall_score"] = so
    c = out["complex_bert_f1"]
    out["explanation_score"] = None if c is None or so is None else 0.5 * (c + so)
    ent, fac = mean_of(v.entity, cids), mean_of(v.facts, cids)
    a, b, d = VALIDATION_WEIGHTS
    out[VALIDATION_KEY] = (
        None if c is None or ent is None or fac is None else a * c + b * ent * cf + d * fac * cf
    )
    return out


def statistic(
    refs: Sequence[Mapping[str, Any]], sub: Submission, v: ItemValues
) -> dict[str, float]:
    """Every key over ``refs`` (NaN for a key without a value, left out of intervals)."""
    got: dict[str, float | None] = {**detection(refs, sub.detection), **explanations(refs, sub, v)}
    return {k: float("nan") if x is None else float(x) for k, x in got.items()}


def leaderboard(
    refs: Sequence[Mapping[str, Any]],
    sub: Submission,
    v: ItemValues,
    *,
    models: Mapping[str, str],
    reasons: Mapping[str, str],
    intervals: IntervalsConfig,
    seed: int = 0,
) -> list[XddScore]:
    """The leaderboard keys (and the validation complex score) with n and intervals.
    ``models`` / ``reasons`` name, per key, the model behind it / why it is null."""
    point = {**detection(refs, sub.detection), **explanations(refs, sub, v)}
    ci, _ = units_bootstrap(
        list(refs),
        lambda draw: statistic(draw, sub, v),  # type: ignore[arg-type]
        resamples=intervals.resamples,
        level=intervals.level,
        seed=row_seed(intervals.seed if intervals.seed is not None else seed, "xdd"),
    )
    n_expl = sum(1 for r in refs if r.get("score_explanations") is True)
    out = []
    for key in (*SCORE_KEYS, VALIDATION_KEY):
        value = point[key]
        lo_hi = ci.get(key) if value is not None else None
        out.append(XddScore(
            key=key, value=value, n=len(refs) if key in DETECTION_KEYS else n_expl,
            ci_low=lo_hi[0] if lo_hi else None, ci_high=lo_hi[1] if lo_hi else None,
            model=models.get(key, ""), reason=None if value is not None else reasons.get(key),
        ))  # fmt: skip
    return out


def xdd_stand_in_sle(text: str) -> float:
    """The scorer's own documented stand-in for SLE (``metrics/sle_metric._mock_sle_score``,
    "used only for tests"): words / 10, at most 4; an empty text -1. Only used when asked for,
    and every number it feeds is named for it."""
    words = len(text.split())
    return -1.0 if words == 0 else min(4.0, words / 10.0)


SLE_STAND_IN = "xdd-scorer stand-in SLE (words / 10, not a model)"
Values = Callable[[list[str], list[str]], list[float | None]]
