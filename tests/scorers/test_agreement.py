"""Inter-annotator agreement by EntityScore / EvidenceScore: pairs, item means, set mean by hand."""

from __future__ import annotations

import pytest

from forenset.benchmarks.common.scorers.agreement import PAPER, agreement
from forenset.benchmarks.common.scorers.entity_evidence import OfflineEntityEvidenceEvaluator

H = "The hand is blurry."
S = "The shadow of the cyclist is inconsistent with the light."
HS = "The hand looks blurry and the sign text is warped."


def test_agreement_by_hand_with_the_offline_evaluator():
    texts = {
        "a": {"x": H, "y": H, "z": S},  # pairs 1, 0, 0 -> 1/3
        "b": {"x": HS, "y": H},  # entity P 1/2, R 1 -> 2/3 (evidence alike)
        "c": {"x": H},  # one annotator: not in the set
        "d": {"x": H, "y": "  "},  # an empty text is no annotation: one annotator left
    }
    ag = agreement(texts, OfflineEntityEvidenceEvaluator())
    assert (ag.n_items, ag.n_pairs, ag.n_failed) == (2, 4, 0)
    assert ag.per_item["a"]["entity_score"] == pytest.approx(1 / 3)
    assert ag.per_item["b"]["evidence_score"] == pytest.approx(2 / 3)
    # the set mean weighs images, not pairs: (1/3 + 2/3) / 2, not (1 + 0 + 0 + 2/3) / 4
    assert ag.entity_score == pytest.approx(0.5)
    assert ag.evidence_score == pytest.approx(0.5)
    assert (ag.model, ag.backend) == ("phrase-match-v1", "offline")
    assert PAPER == {"entity_score": 0.50, "evidence_score": 0.44}


def test_agreement_is_symmetric_in_annotator_order_and_null_without_pairs():
    ev = OfflineEntityEvidenceEvaluator()
    one = agreement({"b": {"x": HS, "y": H}}, ev)
    other = agreement({"b": {"y": HS, "x": H}}, ev)
    assert one.entity_score == pytest.approx(other.entity_score)
    none = agreement({"c": {"x": H}}, ev)
    assert (none.entity_score, none.evidence_score, none.n_items, none.n_pairs) == (
        None,
        None,
        0,
        0,
    )


def test_failed_evaluator_calls_are_left_out_and_counted(monkeypatch):
    from forenset.backends.llm import LLMSettings, reset_limiters
    from forenset.benchmarks.common.scorers.entity_evidence import ModelEntityEvidenceEvaluator
    from forenset.testing.fake_openai import FakeOpenAI, Fault

    monkeypatch.setenv("FAKE_AGREE_KEY", "sk-agree")
    reset_limiters()
    with FakeOpenAI() as server:
        server.fault_for = lambda body: Fault(content="not json")
        settings = LLMSettings.model_validate(
            {
                "pool": [
                    {"backend": "openai", "model": "gpt-fake", "base_url": server.base_url,
                     "api_key_env": "FAKE_AGREE_KEY", "timeout_s": 5.0}
                ],
                "backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_error_rate": 1.0,
                "repair_retries": 0,
            }
        )  # fmt: skip
        ag = agreement(
            {"b": {"x": HS, "y": H}}, ModelEntityEvidenceEvaluator(settings, stage="agree-test")
        )
    assert (ag.n_pairs, ag.n_failed, ag.entity_score) == (1, 1, None)
    assert ag.model == "gpt-fake"
