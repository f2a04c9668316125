"""Scorers the benchmark stages share: detection F1, EntityScore / EvidenceScore, BERTScore, SLE,
BLEU-1/2, ROUGE-L and sentence similarity (a family's own scorers live in its package).

Each returns :class:`~forenset.benchmarks.common.scorers.types.Score` values that name the model and
backend that computed them, or null with the reason (no model configured, a failed call).
The names below are imported on first use (PEP 562), so reading detection scores does not
load torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Score": "types",
    "null_score": "types",
    "DetectionReport": "classification",
    "detection_by_group": "classification",
    "detection_scores": "classification",
    "CoverageJudgment": "entity_evidence",
    "EntityEvidenceResult": "entity_evidence",
    "ExplanationPair": "entity_evidence",
    "ExtractedExplanation": "entity_evidence",
    "ModelEntityEvidenceEvaluator": "entity_evidence",
    "OfflineEntityEvidenceEvaluator": "entity_evidence",
    "harmonic_mean": "entity_evidence",
    "BertScorer": "bertscore",
    "SleScorer": "sle",
    "sle_normalise": "sle",
    "overlap_scores": "text_overlap",
    "SentenceSimilarityScorer": "similarity",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
