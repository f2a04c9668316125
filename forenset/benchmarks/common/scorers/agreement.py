"""Inter-annotator agreement of human gold references by EntityScore / EvidenceScore (§4).

XPlainVerse measures the consistency of its human explanations on an overlap set (10 images,
5 annotators each) with its own explanation metrics and reports 0.50 / 0.44. The paper does not
spell out the pairing, so it is fixed here: every unordered pair of two annotators' explanations
of the same image is scored once (one text as the prediction, the other as the reference; the
harmonic means of eq. 5–6 are the same either way round), an image's agreement is the mean over
its pairs, and the set's agreement is the mean over its images, so an image with more
annotators does not weigh more. Images with fewer than two annotators are not in the set. A
pair whose scores are null (a failed evaluator call) is left out and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from statistics import fmean
from typing import Any, Protocol

from forenset.benchmarks.common.scorers.entity_evidence import EntityEvidenceResult, ExplanationPair

PAPER = {"entity_score": 0.50, "evidence_score": 0.44}  # XPlainVerse §4, overlap set


class Evaluator(Protocol):
    def evaluate(self, pairs: list[ExplanationPair]) -> list[EntityEvidenceResult]: ...


@dataclass
class Agreement:
    """The set's agreement per metric (None: no scored pair), and what it was computed over."""

    entity_score: float | None
    evidence_score: float | None
    n_items: int
    n_pairs: int
    n_failed: int
    model: str
    backend: str
    per_item: dict[str, dict[str, float]] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "per_item"}


def agreement(texts: Mapping[str, Mapping[str, str]], evaluator: Evaluator) -> Agreement:
    """Agreement over ``texts`` (item id -> annotator -> explanation), module doc."""
    pairs: list[ExplanationPair] = []
    for item, by_annotator in sorted(texts.items()):
        names = sorted(a for a, t in by_annotator.items() if t and t.strip())
        for a, b in combinations(names, 2):
            pairs.append(ExplanationPair(f"{item}\x1f{a}\x1f{b}", by_annotator[a], by_annotator[b]))
    results = evaluator.evaluate(pairs) if pairs else []
    per: dict[str, dict[str, list[float]]] = {}
    failed = 0
    for r in results:
        if not (r.entity.ok and r.evidence.ok):
            failed += 1
            continue
        item = r.item_id.split("\x1f")[0]
        d = per.setdefault(item, {"entity_score": [], "evidence_score": []})
        d["entity_score"].append(float(r.entity.value))  # type: ignore[arg-type]
        d["evidence_score"].append(float(r.evidence.value))  # type: ignore[arg-type]
    per_item = {i: {m: fmean(v) for m, v in d.items()} for i, d in per.items()}

    def overall(metric: str) -> float | None:
        vals = [d[metric] for d in per_item.values()]
        return fmean(vals) if vals else None

    return Agreement(
        entity_score=overall("entity_score"),
        evidence_score=overall("evidence_score"),
        n_items=len({p.item_id.split("\x1f")[0] for p in pairs}),
        n_pairs=len(pairs),
        n_failed=failed,
        model=",".join(sorted({r.entity.model for r in results if r.entity.model}))
        or getattr(evaluator, "model", ""),
        backend=",".join(sorted({r.entity.backend for r in results if r.entity.backend}))
        or getattr(evaluator, "backend", ""),
        per_item=per_item,
    )
