"""SafeIMG metrics (§3, eq. 12-13, Tables 2-3, App. A) as pure functions, and the two matchers
that decide whether a model rationale hits a human anomaly (§3.5).

* AI detection rate (eq. 12): share of generated images predicted ``ai_generated`` (our
  detectors answer ``fake``); an unparseable answer (None) counts as not detected. Per category
  and "Overall" weighted by category size (Table 2), i.e. hits over all images.
* Real-image accuracy: share of D_real predicted real.
* Human-Covered-by-AI: per image, the share of its human anomalies hit by at least one
  rationale; AI-Supported-by-Human: per image, the share of its rationales that hit at least one
  anomaly; each averaged over images (Table 3). An image with no rationale covers 0 of its
  anomalies and has no defined AI-Supported value, so it is left out of that mean (counted).
* Hit rate per artefact label: over all human anomalies with that label, the share hit.
* Δ(l) (eq. 13), at image level (a label counted once per image):
  P(l | false negative) − P(l | all AI-generated images); None when there is no false negative.

Every number the CLI and report print also carries its n, a seeded 95 % percentile bootstrap
interval over its items (:class:`Intervals`: images; anomalies for the hit rate) and a caveat
when its set is below ``min_n`` (the paper reports neither n nor intervals).

Matchers: :class:`ModelAlignmentJudge` (an ``llm:`` pool, template ``safeimg_alignment``) as
the paper does, and :func:`offline_match` (``offline-vocab-box-v1``), the labelled fallback: a
rationale hits an anomaly when its text names a word of the anomaly label's vocabulary, or its
box overlaps the anomaly's box with IoU >= ``iou`` (boxes axis-aligned, rotation ignored).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from forenset.backends.llm.types import ChatRequest, ChatResult, LLMSettings
from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.benchmarks.common.scoring.intervals import (
    IntervalsConfig,
    bootstrap,
    degenerate,
    row_seed,
)
from forenset.benchmarks.common.scoring.protocol import Item, ItemMean, Scorer

if TYPE_CHECKING:
    from forenset.backends.llm.cache import ResponseCache

AI_ANSWERS = frozenset({"fake", "ai_generated"})
OFFLINE_MATCHER = "offline-vocab-box-v1"
TEMPLATE = "safeimg_alignment"

Box = tuple[float, float, float, float]  # x, y, w, h as fractions of the image

# Words that name each of the 7 labels in a rationale (lower-case stems, matched as prefixes).
LABEL_VOCABULARY: dict[str, tuple[str, ...]] = {
    "commonsense": (
        "commonsense",
        "common sense",
        "implausib",
        "illogical",
        "logic",
        "impossible",
        "inconsisten",
        "contradict",
        "unrealistic",
        "scale",
    ),
    "physics": (
        "physic",
        "gravity",
        "floating",
        "perspective",
        "support",
        "balanc",
        "collision",
        "impact",
        "fluid",
        "water flow",
    ),
    "text": (
        "text",
        "letter",
        "word",
        "sign",
        "font",
        "typo",
        "spelling",
        "writing",
        "caption",
        "number",
        "digit",
        "receipt",
        "label",
    ),
    "faces": ("face", "facial", "eye", "mouth", "teeth", "skin", "nose", "expression"),
    "hands": ("hand", "finger", "palm", "wrist", "thumb"),
    "lighting": ("light", "shadow", "illuminat", "reflection", "glare", "bright", "exposure"),
    "other": (
        "texture",
        "blur",
        "artifact",
        "artefact",
        "smooth",
        "noise",
        "pattern",
        "seam",
        "edge",
        "compression",
    ),
}


@dataclass(frozen=True)
class Rate:
    """A share with its denominator; ``value`` None (with ``reason``) when nothing to count."""

    value: float | None
    n: int
    reason: str | None = None


def _rate(hits: int, n: int, what: str) -> Rate:
    return Rate(hits / n, n) if n else Rate(None, 0, f"no {what}")


def is_ai(answer: str | None) -> bool:
    return (answer or "").strip().lower() in AI_ANSWERS


def ai_detection_rate(answers: Sequence[str | None]) -> Rate:
    """Eq. 12 over generated images."""
    return _rate(sum(is_ai(a) for a in answers), len(answers), "generated images")


def real_accuracy(answers: Sequence[str | None]) -> Rate:
    """Share of genuine images answered real (an unparseable answer is wrong)."""
    n = len(answers)
    return _rate(sum((a or "").strip().lower() == "real" for a in answers), n, "real images")


def rates_by_group(
    items: Iterable[tuple[str, str | None]], order: Sequence[str], *, real: bool = False
) -> dict[str, Rate]:
    """One rate per group in ``order`` plus "Overall" (weighted by group size = over all)."""
    groups: dict[str, list[str | None]] = defaultdict(list)
    for g, a in items:
        groups[g].append(a)
    f = real_accuracy if real else ai_detection_rate
    out = {g: f(groups.get(g, [])) for g in order}
    for g in sorted(set(groups) - set(order)):
        out[g] = f(groups[g])
    out["Overall"] = f([a for g in groups for a in groups[g]])
    return out


# -- alignment -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Anomaly:
    label: str
    box: Box | None = None
    text: str = ""


@dataclass(frozen=True)
class Rationale:
    text: str
    box: Box | None = None


def split_rationales(explanation: str | None) -> list[str]:
    """A model explanation as independently checkable rationales: one per sentence / line."""
    parts = re.split(r"(?<=[.!?])\s+|\n+|;\s+", explanation or "")
    return [p.strip(" -•*\t") for p in parts if len(p.strip(" -•*\t")) > 3]


def iou(a: Box, b: Box) -> float:
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw = max(0.0, min(ax1, bx1) - max(a[0], b[0]))
    ih = max(0.0, min(ay1, by1) - max(a[1], b[1]))
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def offline_match(anomaly: Anomaly, rationale: Rationale, iou_threshold: float = 0.3) -> bool:
    """The labelled fallback matcher: label vocabulary in the text, or overlapping boxes."""
    words = re.findall(r"[a-z]+(?: [a-z]+)?", rationale.text.lower())
    text = " ".join(words)
    if any(re.search(r"\b" + re.escape(v), text) for v in LABEL_VOCABULARY.get(anomaly.label, ())):
        return True
    if anomaly.box is not None and rationale.box is not None:
        return iou(anomaly.box, rationale.box) >= iou_threshold
    return False


def offline_matrix(
    anomalies: Sequence[Anomaly], rationales: Sequence[Rationale]
) -> list[list[bool]]:
    return [[offline_match(a, r) for r in rationales] for a in anomalies]


@dataclass(frozen=True)
class ImageAlignment:
    """One image's coverage values from its anomaly x rationale hit matrix."""

    human_covered: float | None  # None when the image has no anomaly
    ai_supported: float | None  # None when the model gave no rationale
    hits: tuple[bool, ...]  # per anomaly: hit by some rationale


def align(matrix: Sequence[Sequence[bool]], n_rationales: int) -> ImageAlignment:
    hits = tuple(any(row) for row in matrix)
    covered = sum(hits) / len(hits) if hits else None
    supported = (
        sum(any(row[j] for row in matrix) for j in range(n_rationales)) / n_rationales
        if n_rationales
        else None
    )
    return ImageAlignment(covered, supported, hits)


def mean_defined(values: Iterable[float | None], what: str) -> Rate:
    vals = [v for v in values if v is not None]
    return Rate(sum(vals) / len(vals), len(vals)) if vals else Rate(None, 0, f"no {what}")


def hit_rate_per_label(pairs: Iterable[tuple[str, bool]], labels: Sequence[str]) -> dict[str, Rate]:
    """(label, hit) per human anomaly -> share hit per label."""
    n: Counter[str] = Counter()
    h: Counter[str] = Counter()
    for lab, hit in pairs:
        n[lab] += 1
        h[lab] += bool(hit)
    return {lab: _rate(h[lab], n[lab], f"{lab} anomalies") for lab in labels}


def delta_per_label(
    images: Sequence[tuple[frozenset[str] | set[str], bool]], labels: Sequence[str]
) -> dict[str, float | None]:
    """Eq. 13 at image level: (labels of the image, is a false negative) per generated image."""
    fn = [ls for ls, miss in images if miss]
    if not images or not fn:
        return {lab: None for lab in labels}
    return {
        lab: sum(lab in ls for ls in fn) / len(fn)
        - sum(lab in ls for ls, _ in images) / len(images)
        for lab in labels
    }


# -- the model judge -------------------------------------------------------------------------
class Match(BaseModel):
    model_config = ConfigDict(extra="ignore")
    anomaly: int = Field(description="H-number of the human anomaly")
    rationale: int = Field(description="R-number of the model rationale")


class AlignmentJudgment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    matches: list[Match] = Field(default_factory=list)


def alignment_request(
    item_id: str,
    anomalies: Sequence[Anomaly],
    rationales: Sequence[Rationale],
    prompts_root: str | Path | None = None,
) -> ChatRequest:
    return ChatRequest.from_template(
        TEMPLATE,
        item_id,
        TEMPLATE,
        prompts_root,
        response_model=AlignmentJudgment,
        anomalies="\n".join(f"H{i + 1}. [{a.label}] {a.text}" for i, a in enumerate(anomalies)),
        rationales="\n".join(f"R{j + 1}. {r.text}" for j, r in enumerate(rationales)),
        schema=json.dumps(AlignmentJudgment.model_json_schema(), sort_keys=True),
    )


def matrix_from(judgment: AlignmentJudgment, n_anom: int, n_rat: int) -> list[list[bool]]:
    """Out-of-range numbers in the reply are ignored (they name nothing)."""
    m = [[False] * n_rat for _ in range(n_anom)]
    for x in judgment.matches:
        if 1 <= x.anomaly <= n_anom and 1 <= x.rationale <= n_rat:
            m[x.anomaly - 1][x.rationale - 1] = True
    return m


class ModelAlignmentJudge:
    """The paper's judge: one request per image through ``run_chat`` (cache, retries, pool)."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        build_seed: int,
        cache: ResponseCache | None = None,
        stage: str = "safeimg",
        prompts_root: str | Path | None = None,
    ):
        self.settings, self.build_seed, self.cache = settings, build_seed, cache
        self.stage, self.prompts_root = stage, prompts_root

    def judge(
        self, items: Sequence[tuple[str, Sequence[Anomaly], Sequence[Rationale]]]
    ) -> list[tuple[list[list[bool]] | None, ChatResult | None]]:
        """Per item (id, anomalies, rationales): its hit matrix and the call, or (None, result)
        with the error when the call failed; items with nothing to compare need no call."""
        from forenset.backends.llm.engine import run_chat

        todo = [(i, it) for i, it in enumerate(items) if it[1] and it[2]]
        reqs = [alignment_request(it[0], it[1], it[2], self.prompts_root) for _, it in todo]
        results = run_chat(
            reqs, self.settings, build_seed=self.build_seed, stage=self.stage, cache=self.cache
        )
        out: list[tuple[list[list[bool]] | None, ChatResult | None]] = [
            ([[False] * len(it[2]) for _ in it[1]], None) for it in items
        ]
        for (i, it), res in zip(todo, results, strict=True):
            if res.ok and isinstance(res.parsed, AlignmentJudgment):
                out[i] = (matrix_from(res.parsed, len(it[1]), len(it[2])), res)
            else:
                out[i] = (None, res)
        return out


# -- n, intervals and caveats ----------------------------------------------------------------
def _share(a: np.ndarray) -> np.ndarray:
    return a[..., 0].mean(axis=1)


def _delta(a: np.ndarray) -> np.ndarray:
    """Eq. 13 per resample from per-image columns (label and missed, missed, label)."""
    fn = a[..., 1].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(fn > 0, a[..., 0].sum(axis=1) / np.where(fn > 0, fn, 1), np.nan) - a[
            ..., 2
        ].mean(axis=1)


# -- the registry's SafeIMG metrics (scoring.BUILTIN["safeimg"]) -------------------------------
# Items: one per image with its detector ``answer`` (detection rate, real accuracy), one per
# annotated image with its ``human_covered`` / ``ai_supported`` value (None: undefined, left
# out), one per human anomaly with ``hit``, and for Δ(l) one per generated annotated image with
# ``has`` (the label is among its anomalies) and ``missed`` (a false negative).


@dataclass(frozen=True)
class SumMean(ItemMean):
    """An :class:`ItemMean` whose value is sum / count in item order (Table 3's per-image
    averages, as ``scores.json`` has always held them) rather than a compensated sum."""

    def score(self, items: Sequence[Item]) -> Score:
        vals = [float(v) for v in (self.value(i) for i in items) if isinstance(v, int | float)]
        if not vals:
            return null_score(self.name, self.empty_reason, model=self.model, backend=self.backend)
        return Score(self.name, sum(vals) / len(vals), self.model, self.backend)


@dataclass(frozen=True)
class Delta:
    """Eq. 13 for one label: P(l | false negative) - P(l | all generated images), at image level;
    the bootstrap resamples images and recomputes both shares (NaN: a draw with no miss)."""

    name: str = "delta"
    header: str = "Δ(l)"
    needs: tuple[str, ...] = ("has", "missed")
    scope: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    classes: tuple[str, ...] = ()
    truth: str = "label"
    percent: bool = True

    def score(self, items: Sequence[Item]) -> Score:
        fn = sum(bool(i["missed"]) for i in items)
        if not items or not fn:
            why = "no annotated images" if not items else "no false negative (missed image)"
            return null_score(self.name, why, model="forenset", backend="offline")
        hm = sum(bool(i["has"]) and bool(i["missed"]) for i in items)
        value = hm / fn - sum(bool(i["has"]) for i in items) / len(items)
        return Score(self.name, value, "forenset", "offline")

    def sample(self, items: Sequence[Item]) -> np.ndarray | None:
        rows = [[i["has"] and i["missed"], i["missed"], i["has"]] for i in items]
        return np.asarray(rows, dtype=float).reshape(-1, 3)

    def statistic(self, x: np.ndarray) -> np.ndarray:
        return _delta(x)


def _answered_ai(item: Item) -> float:
    return float(is_ai(item["answer"]))


def _answered_real(item: Item) -> float:
    return float((item["answer"] or "").strip().lower() == "real")


DETECTION_RATE = ItemMean(
    "detection_rate", "AI detection rate", _answered_ai, needs=("answer",), percent=True,
    empty_reason="no generated images", scope={"table": ("table2", "propagation")},
)  # fmt: skip
REAL_ACCURACY = ItemMean(
    "real_accuracy", "real-image accuracy", _answered_real, needs=("answer",), percent=True,
    empty_reason="no real images", scope={"table": ("real_accuracy",)},
)  # fmt: skip
HUMAN_COVERED = SumMean(
    "human_covered", "Human Covered by AI", lambda i: i["human_covered"],
    needs=("human_covered",), percent=True, empty_reason="no images",
    scope={"table": ("table3",)},
)  # fmt: skip
AI_SUPPORTED = SumMean(
    "ai_supported", "AI Supported by Human", lambda i: i["ai_supported"],
    needs=("ai_supported",), percent=True, empty_reason="no images with rationales",
    scope={"table": ("table3",)},
)  # fmt: skip
HIT_RATE = ItemMean(
    "hit_rate", "hit rate", lambda i: float(bool(i["hit"])), needs=("hit",), percent=True,
    empty_reason="no anomalies", scope={"table": ("hit_rate",)},
)  # fmt: skip
DELTA = Delta(scope={"table": ("delta",)})


@dataclass
class Intervals:
    """What every printed SafeIMG number carries (issue 31): a seeded percentile bootstrap over
    its items (images; anomalies for the hit rate) and a caveat when the set is degenerate.
    :meth:`metric` scores a registered SafeIMG metric on a group's items and keeps its long
    row (``rows``: the table ``forenset safeimg`` and the report pivot)."""

    config: IntervalsConfig
    seed: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    def metric(
        self, name: str, items: Sequence[Item], key: str, group: Mapping[str, Any],
        reason: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The cell of the registered SafeIMG metric ``name`` on ``items`` (its interval
        seeded by ``key``), also kept as a long row with ``group``'s fields."""
        from forenset.benchmarks.common.scoring import scorer

        s = scorer("safeimg", name)
        assert isinstance(s, Scorer)
        score = s.score(items)
        x = s.sample(items)
        if x is None:
            x = np.zeros((0, 1))
        c = self.cell(score.value, x, key, reason=reason or score.reason, stat=s.statistic)
        self.rows.append(
            {
                "score_id": key, **group, "metric": name,
                **{f: c.get(f) for f in ("value", "n", "ci_low", "ci_high", "ci_reason",
                                         "reason", "caveat")},
                "model": score.model or None, "backend": score.backend or None,
            }
        )  # fmt: skip
        return c

    def cell(
        self, value: float | None, x: np.ndarray, key: str, *, reason: str | None = None,
        stat: Callable[[np.ndarray], np.ndarray] = _share, classes: Sequence[str] | None = None,
        expected: Sequence[str] = (),
    ) -> dict[str, Any]:  # fmt: skip
        """``{value, n, reason?, ci_low, ci_high, ci_reason?, caveat?}`` for one number."""
        iv = self.config
        n = len(x)
        out: dict[str, Any] = {"value": value, "n": n}
        ci = None
        if value is None:
            out["reason"] = reason or "no items"
            out["ci_reason"] = "no value"
        elif iv.resamples < 1:
            out["ci_reason"] = "intervals.resamples is 0"
        elif n < 2:
            out["ci_reason"] = f"n = {n}: an interval needs at least two items"
        else:
            seed = row_seed(self.seed if iv.seed is None else iv.seed, key)
            ci = bootstrap(x, stat, resamples=iv.resamples, level=iv.level, seed=seed)
            if ci is None:
                out["ci_reason"] = "the value is undefined on every resample"
        out["ci_low"], out["ci_high"] = ci if ci else (None, None)
        caveat = degenerate(n, iv.min_n, classes, expected) if value is not None else None
        if caveat:
            out["caveat"] = caveat
        return out

    def rate(self, rate: Rate, hits: Sequence[bool], key: str) -> dict[str, Any]:
        x = np.asarray(hits, dtype=float).reshape(-1, 1)
        return self.cell(rate.value, x, key, reason=rate.reason)

    def mean(self, values: Iterable[float | None], what: str, key: str) -> dict[str, Any]:
        vals = [v for v in values if v is not None]
        r = mean_defined(vals, what)
        return self.cell(
            r.value, np.asarray(vals, dtype=float).reshape(-1, 1), key, reason=r.reason
        )

    def delta(
        self, images: Sequence[tuple[frozenset[str] | set[str], bool]], labels: Sequence[str],
        key: str,
    ) -> dict[str, dict[str, Any]]:  # fmt: skip
        """Eq. 13 per label with its interval over images (None: no false negative)."""
        values = delta_per_label(images, labels)
        why = "no annotated images" if not images else "no false negative (missed image)"
        out = {}
        for lab in labels:
            x = np.asarray(
                [[lab in ls and miss, miss, lab in ls] for ls, miss in images], dtype=float
            ).reshape(-1, 3)
            out[lab] = self.cell(values[lab], x, f"{key}/{lab}", reason=why, stat=_delta)
        return out
