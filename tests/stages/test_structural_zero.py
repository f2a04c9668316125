"""An EntityScore / EvidenceScore that is 0 by construction carries a caveat saying why
(issue 38 §3: the offline detector's explanations never name the references' entities)."""

from __future__ import annotations

from forenset.backends.offline_explain import complex_fake
from forenset.benchmarks.common.detector import explanation_text
from forenset.benchmarks.common.scorers.entity_evidence import (
    ExplanationPair,
    OfflineEntityEvidenceEvaluator,
)
from forenset.benchmarks.common.scorers.types import Score
from forenset.benchmarks.evaluation.stages.eval_scores import structural_zero


def member(metric: str, value: float, precision: float, recall: float) -> dict:
    s = Score(metric, value, "m", "offline", details={"precision": precision, "recall": recall})
    return {"scores": {metric: s}}


def test_a_zero_with_one_side_always_zero_is_explained():
    ms = [member("entity_score", 0.0, 0.25, 0.0), member("entity_score", 0.0, 0.0, 0.0)]
    why = structural_zero("entity_score", ms)
    assert why and "recall 0 on every item" in why and "2 reference texts" in why
    ms = [member("evidence_score", 0.0, 0.0, 0.5), member("evidence_score", 0.0, 0.0, 0.0)]
    assert "precision 0 on every item" in (structural_zero("evidence_score", ms) or "")


def test_no_caveat_on_a_measured_value_or_another_metric():
    assert structural_zero("entity_score", [member("entity_score", 0.4, 0.5, 0.33)]) is None
    mixed = [member("entity_score", 0.0, 0.5, 0.0), member("entity_score", 0.0, 0.0, 0.5)]
    assert structural_zero("entity_score", mixed) is None  # each side scored somewhere
    assert structural_zero("bertscore_f1", [member("bertscore_f1", 0.0, 0.0, 0.0)]) is None
    assert structural_zero("entity_score", [{"scores": {}}]) is None


def test_the_offline_detector_against_a_dataset_reference_gets_the_caveat():
    """The case the issue saw: the forensic detector names a position and its measures, the
    reference names the edited object; the phrase matcher gives 0 and the caveat says why."""
    region = {"bbox": [0.5, 0.6, 0.9, 1.0], "position": "lower right", "area": 0.16,
              "evidence": {"noise": -2.9, "ela": -3.8}, "strong": True}  # fmt: skip
    pred = explanation_text("fake", 0.97, region)
    ref = complex_fake(
        {"target": "coffee cup"},
        [{"region": "lower right", "change_type": "colour change", "area": 0.1,
          "magnitude": 0.3, "salience": 3}],
    )  # fmt: skip
    (res,) = OfflineEntityEvidenceEvaluator().evaluate([ExplanationPair("i", pred, ref)])
    assert res.entity.value == 0.0
    got = {"scores": {"entity_score": res.entity, "evidence_score": res.evidence}}
    assert structural_zero("entity_score", [got])
    assert structural_zero("evidence_score", [got])
