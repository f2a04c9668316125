"""Scoring XDD files: the per-item numbers from forenset's scorers, then the leaderboard keys
(:mod:`forenset.benchmarks.xdd.scores`). BERTScore and SLE load local models (null with the
reason without one, never a made-up number); ``sle_stand_in`` uses the scorer program's own
test stand-in instead, named in every key it feeds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forenset.benchmarks.common.scorers.bertscore import BertScorer
from forenset.benchmarks.common.scorers.entity_evidence import (
    ExplanationPair,
    OfflineEntityEvidenceEvaluator,
)
from forenset.benchmarks.common.scorers.sle import SleScorer
from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.benchmarks.xdd.format import Submission, read_reference, read_submission
from forenset.benchmarks.xdd.scores import (
    SCORE_KEYS,
    SLE_STAND_IN,
    VALIDATION_KEY,
    ItemValues,
    XddScore,
    leaderboard,
    xdd_stand_in_sle,
)
from forenset.exports.data import write_atomic

NO_BERT = "no BERTScore model configured (--bertscore-model)"
NO_SLE = "no SLE model configured (--sle-model, or --sle-stand-in for the scorer's stand-in)"
BERT_KEYS = ("complex_bert_f1", "simple_bert_f1", "simple_overall_score", "explanation_score",
             VALIDATION_KEY)  # fmt: skip
SLE_KEYS = ("simple_sle_raw", "simple_sle_norm", "simple_overall_score", "explanation_score")


def item_values(
    refs: Sequence[dict[str, Any]],
    sub: Submission,
    *,
    bertscore_model: str | None,
    sle_model: str | None,
    sle_stand_in: bool,
) -> tuple[ItemValues, dict[str, str], dict[str, str]]:
    """Per-id BERTScore (complex, simple), raw SLE, EntityScore and EvidenceScore of the
    explanation-scored rows, with each key's model label and null reason."""
    rows = {str(r["id"]): r for r in refs if r.get("score_explanations") is True}
    cids = [i for i in rows if i in sub.complex]
    sids = [i for i in rows if i in sub.simple]
    bert = BertScorer(bertscore_model)
    cb = bert.score(
        [sub.complex[i] for i in cids], [str(rows[i]["complex_reference"]) for i in cids]
    )
    sb = bert.score([sub.simple[i] for i in sids], [str(rows[i]["simple_reference"]) for i in sids])
    if sle_stand_in:
        sle: list[float | None] = [xdd_stand_in_sle(sub.simple[i]) for i in sids]
        sle_label = SLE_STAND_IN
    else:
        sc = SleScorer(sle_model)
        sle = [
            s.details.get("raw") if s.ok else None for s in sc.score([sub.simple[i] for i in sids])
        ]
        sle_label = sc.model_label if sle_model else ""
    ev = OfflineEntityEvidenceEvaluator()
    ee = ev.evaluate([ExplanationPair(i, sub.complex[i], str(rows[i]["complex_reference"]))
                      for i in cids])  # fmt: skip
    values = ItemValues(
        complex_bert=dict(zip(cids, (s.value for s in cb), strict=True)),
        simple_bert=dict(zip(sids, (s.value for s in sb), strict=True)),
        simple_sle=dict(zip(sids, sle, strict=True)),
        entity=dict(zip(cids, (r.entity.value for r in ee), strict=True)),
        facts=dict(zip(cids, (r.evidence.value for r in ee), strict=True)),
    )
    bert_label = bert.model_label if bertscore_model else ""
    models: dict[str, str] = {k: "" for k in (*SCORE_KEYS, VALIDATION_KEY)}
    reasons: dict[str, str] = {}
    for k in BERT_KEYS:
        models[k] = bert_label
        if not bertscore_model:
            reasons[k] = NO_BERT
    for k in SLE_KEYS:
        models[k] = "; ".join(x for x in (models[k], sle_label) if x)
        if not sle_label:
            reasons.setdefault(k, NO_SLE)
    models[VALIDATION_KEY] = "; ".join(x for x in (bert_label, f"entity/facts: {ev.model}") if x)
    return values, models, reasons


def score_files(
    reference: Path,
    submission: Path,
    *,
    bertscore_model: str | None = None,
    sle_model: str | None = None,
    sle_stand_in: bool = False,
    intervals: IntervalsConfig | None = None,
) -> list[XddScore]:
    """The leaderboard keys of a submission zip (or folder) against a reference JSONL."""
    refs = read_reference(reference)
    sub = read_submission(submission, refs)
    values, models, reasons = item_values(refs, sub, bertscore_model=bertscore_model,
                                          sle_model=sle_model, sle_stand_in=sle_stand_in)  # fmt: skip
    return leaderboard(refs, sub, values, models=models, reasons=reasons,
                       intervals=intervals or IntervalsConfig())  # fmt: skip


def write_scores(out: Path, scores: Sequence[XddScore]) -> None:
    """``scores.json`` as the leaderboard writes it (its ten keys, sorted, indent 2; a key
    without a value is null here, never 0) and ``scores_detail.json`` with n and intervals."""
    plain = {s.key: s.value for s in scores if s.key in SCORE_KEYS}
    write_atomic(out / "scores.json", json.dumps(plain, indent=2, sort_keys=True) + "\n")
    write_atomic(out / "scores_detail.json",
                 json.dumps([s.row() for s in scores], indent=1) + "\n")  # fmt: skip
