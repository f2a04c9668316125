"""EntityScore / EvidenceScore (seed paper App. 15): hand-computed cases, the offline evaluator,
and the model evaluator end to end through run_chat against the loopback fake OpenAI server."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from pydantic import ValidationError

from forenset.backends.llm import LLMSettings, ModelSpec, choose_model
from forenset.benchmarks.common.scorers.entity_evidence import (
    CoverageJudgment,
    ExplanationPair,
    ExtractedExplanation,
    ModelEntityEvidenceEvaluator,
    OfflineEntityEvidenceEvaluator,
    combine,
    coverage_rate,
    harmonic_mean,
)
from forenset.testing.fake_openai import Fault, last_user_text, request_text
from forenset.text.templates import load_template

_stages = itertools.count()


def G(entities, claims) -> ExtractedExplanation:
    return ExtractedExplanation.model_validate(
        {
            "diagnostic_entities": [{"entity_id": i, "name": n} for i, n in entities],
            "evidence_claims": [{"claim_id": c, "entity_id": e, "claim": t} for c, e, t in claims],
        }
    )


def J(entities, claims) -> CoverageJudgment:
    return CoverageJudgment.model_validate(
        {
            "entities": [{"entity_id": i, "supported": s} for i, s in entities],
            "claims": [{"claim_id": i, "supported": s} for i, s in claims],
        }
    )


# -- eq. 1-6 by hand ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "p, r, want",
    [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.7, 0.0), (0.5, 1.0, 2 / 3), (1.0, 1.0, 1.0)],
)
def test_harmonic_mean_edges(p, r, want):
    assert harmonic_mean(p, r) == pytest.approx(want)


def test_coverage_rate_empty_and_unjudged():
    assert coverage_rate([], {}) == (0.0, 0)
    assert coverage_rate(["E1", "E2", "E3"], {"E1": True, "E2": False}) == (1 / 3, 1)
    assert coverage_rate(["E1"], {"E1": True, "E9": True}) == (1.0, 0)  # unknown id ignored


def test_combine_hand_computed():
    gp = G(
        [("E1", "cyclist's hands"), ("E2", "sign text")],
        [("C1", "E1", "hands are blurry"), ("C2", "E2", "text is warped")],
    )
    gr = G(
        [("E1", "sign text"), ("E2", "shadow"), ("E3", "car")],
        [("C1", "E1", "letters are warped"), ("C2", "E2", "shadow is missing")],
    )
    precision = J([("E1", False), ("E2", True)], [("C1", False), ("C2", True)])
    recall = J([("E1", True), ("E2", False)], [("C1", True)])  # E3 and C2 left unjudged
    r = combine("x", gp, gr, precision, recall, model="m", backend="b")
    # entity: P = 1/2, R = 1/3 -> 2 * (1/6) / (5/6) = 0.4 ; evidence: P = 1/2, R = 1/2 -> 0.5
    assert r.entity.value == pytest.approx(0.4)
    assert r.entity.details == {
        "precision": 0.5,
        "recall": pytest.approx(1 / 3),
        "n_pred": 2,
        "n_ref": 3,
        "unjudged": 1,
    }
    assert r.evidence.value == pytest.approx(0.5) and r.evidence.details["unjudged"] == 1
    assert (r.entity.model, r.entity.backend, r.evidence.model) == ("m", "b", "m")
    assert r.trace["precision_pass"]["entities"][1] == {"entity_id": "E2", "supported": True}


def test_one_side_zero_and_empty_prediction_give_zero():
    gp = G([("E1", "hands")], [("C1", "E1", "blurry")])
    gr = G([("E1", "hands")], [("C1", "E1", "blurry")])
    none = J([("E1", False)], [("C1", False)])
    full = J([("E1", True)], [("C1", True)])
    r = combine("x", gp, gr, full, none, model="m", backend="b")  # P = 1, R = 0
    assert (r.entity.value, r.evidence.value) == (0.0, 0.0)
    empty = G([], [])
    r = combine("x", empty, gr, CoverageJudgment(), none, model="m", backend="b")
    assert (r.entity.value, r.entity.details["precision"], r.entity.details["n_pred"]) == (
        0.0,
        0.0,
        0,
    )


def test_schema_is_the_papers_and_rejects_inconsistent_ids():
    schema = ExtractedExplanation.model_json_schema()
    assert set(schema["properties"]) == {"diagnostic_entities", "evidence_claims"}
    claim = schema["$defs"]["EvidenceClaim"]["properties"]
    assert set(claim) == {"claim_id", "entity_id", "claim"}
    with pytest.raises(ValidationError, match="entity ids repeat"):
        G([("E1", "a"), ("E1", "b")], [])
    with pytest.raises(ValidationError, match="not extracted"):
        G([("E1", "a")], [("C1", "E2", "blurry")])
    with pytest.raises(ValidationError, match="judged claim ids repeat"):
        J([], [("C1", True), ("C1", False)])
    assert G([], [("C1", None, "grain everywhere")]).evidence_claims[0].entity_id is None


# -- the offline evaluator ---------------------------------------------------------------
def offline(pred: str, ref: str):
    [r] = OfflineEntityEvidenceEvaluator().evaluate([ExplanationPair("p", pred, ref)])
    return r


def test_offline_same_cues_in_other_words():
    r = offline(
        "The cyclist's hands are blurry, and the sign text is distorted.",
        "The sign letters are warped. The hands look smeared.",
    )
    # entities: pred {cyclist hand, sign text}, ref {sign letter, hand}: each shares >= half
    # its lemmas with the other text; claims pair up by entity and cue family (blur, warp).
    assert r.trace["prediction_structure"]["diagnostic_entities"] == [
        {"entity_id": "E1", "name": "cyclist hand"},
        {"entity_id": "E2", "name": "sign text"},
    ]
    assert (r.entity.value, r.evidence.value) == (1.0, 1.0)
    assert (r.entity.model, r.entity.backend) == ("phrase-match-v1", "offline")


def test_offline_right_object_wrong_reason_gets_entity_credit_only():
    r = offline(
        "The hands are blurry. The sign is warped.",
        "The hands are blurry. The sign text looks overexposed.",
    )
    # entities: P = 2/2, R = 2/2 (sign text ~ sign: half its lemmas) -> 1.0
    # claims: pred (hand, blur) yes, (sign, warp) no -> P = 1/2; ref (hand, blur) yes,
    # (sign text, lighting) no -> R = 1/2 -> 0.5
    assert r.entity.value == 1.0
    assert r.evidence.details["precision"] == 0.5 and r.evidence.details["recall"] == 0.5
    assert r.evidence.value == pytest.approx(0.5)


def test_offline_same_object_other_reason_in_the_same_sentence_does_not_count():
    r = offline("The hands are blurry.", "The hands are fine, but the sign is blurry.")
    assert r.entity.details == {
        "precision": 1.0,  # "hands" occurs in the reference
        "recall": 0.0,  # the reference's only diagnostic entity, the sign, is not in the prediction
        "n_pred": 1,
        "n_ref": 1,
        "unjudged": 0,
    }
    assert (r.entity.value, r.evidence.value) == (0.0, 0.0)


def test_offline_no_evidence_scores_zero_and_is_deterministic():
    r = offline("The image looks real.", "The hands are blurry.")
    assert r.entity.details["n_pred"] == 0 and (r.entity.value, r.evidence.value) == (0.0, 0.0)
    a = offline("Shadows fall the wrong way; the wall texture is repeated.", "The wall is cloned.")
    b = offline("Shadows fall the wrong way; the wall texture is repeated.", "The wall is cloned.")
    assert a == b and a.evidence.value == pytest.approx(2 * 0.5 * 1.0 / 1.5)


# -- the model evaluator through run_chat and the fake server ------------------------------
PRED = "The cyclist's hands are blurry and the sign text is warped."
REF = "The sign text is warped. The shadow under the car is missing. Letters are misspelled."
EMPTY = "Looks real to me."
STRUCTURES = {
    PRED: {
        "diagnostic_entities": [
            {"entity_id": "E1", "name": "cyclist's hands"},
            {"entity_id": "E2", "name": "sign text"},
        ],
        "evidence_claims": [
            {"claim_id": "C1", "entity_id": "E1", "claim": "hands are blurry"},
            {"claim_id": "C2", "entity_id": "E2", "claim": "sign text is warped"},
        ],
    },
    REF: {
        "diagnostic_entities": [
            {"entity_id": "E1", "name": "sign text"},
            {"entity_id": "E2", "name": "car shadow"},
        ],
        "evidence_claims": [
            {"claim_id": "C1", "entity_id": "E1", "claim": "sign text is warped"},
            {"claim_id": "C2", "entity_id": "E2", "claim": "shadow is missing"},
            {"claim_id": "C3", "entity_id": "E1", "claim": "letters are misspelled"},
        ],
    },
    EMPTY: {"diagnostic_entities": [], "evidence_claims": []},
}
_FENCED = re.compile(r"<<<\n(.*?)\n>>>", re.S)


class ScriptedEvaluator:
    """Answers like a literal-minded evaluator: extraction from a table, coverage by the last
    word of each item appearing in the target text (so the scores can be computed by hand)."""

    def __init__(self):
        self.calls = {"extract": 0, "cover": 0}

    def __call__(self, body):
        system, user = " ".join(request_text(body).split()), last_user_text(body)
        if "convert one free-form explanation" in system:
            self.calls["extract"] += 1
            return STRUCTURES[_FENCED.search(user).group(1)]
        if "judge whether it is semantically supported" in system:
            self.calls["cover"] += 1
            src = json.loads(
                user.split("Source structure (JSON):\n", 1)[1].split("\n\nTarget", 1)[0]
            )
            target = _FENCED.search(user).group(1).lower()
            hit = lambda s: s.split()[-1].lower() in target  # noqa: E731
            return {
                "entities": [
                    {"entity_id": e["entity_id"], "supported": hit(e["name"])}
                    for e in src["diagnostic_entities"]
                ],
                "claims": [
                    {"claim_id": c["claim_id"], "supported": hit(c["claim"])}
                    for c in src["evidence_claims"]
                ],
            }
        raise AssertionError(f"unrouted request: {system[:80]!r}")


def spec(server, model="gpt-fake") -> ModelSpec:
    return ModelSpec(
        backend="openai",
        model=model,
        base_url=server.base_url,
        api_key_env="FAKE_SCORER_KEY",
        timeout_s=5.0,
    )


def llm(*pool: ModelSpec) -> LLMSettings:
    return LLMSettings(
        pool=list(pool),
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        max_error_rate=1.0,
        error_window=50,
        repair_retries=0,
        regenerations=0,  # a broken reply stays broken (no same-model re-ask)
    )


def evaluator(settings: LLMSettings) -> ModelEntityEvidenceEvaluator:
    return ModelEntityEvidenceEvaluator(settings, build_seed=7, stage=f"scores{next(_stages)}")


def test_model_evaluator_end_to_end(openai_server):
    script = ScriptedEvaluator()
    openai_server.reply = script
    pairs = [ExplanationPair("img1", PRED, REF), ExplanationPair("img2", EMPTY, REF)]
    r1, r2 = evaluator(llm(spec(openai_server))).evaluate(pairs)
    # img1 precision pass (pred items vs REF): hands no, text yes; blurry no, warped yes
    # recall pass (ref items vs PRED): text yes, shadow no; warped yes, missing no, misspelled no
    assert r1.entity.details["precision"] == 0.5 and r1.entity.details["recall"] == 0.5
    assert r1.entity.value == pytest.approx(0.5)
    assert r1.evidence.details["precision"] == 0.5
    assert r1.evidence.details["recall"] == pytest.approx(1 / 3)
    assert r1.evidence.value == pytest.approx(0.4)  # 2 * (1/2)(1/3) / (5/6)
    assert (r1.entity.model, r1.entity.backend) == ("gpt-fake", "openai")
    # img2: an empty prediction structure; no precision call, recall pass finds nothing
    assert (r2.entity.value, r2.evidence.value) == (0.0, 0.0)
    assert r2.entity.details["n_pred"] == 0 and r2.entity.details["n_ref"] == 2
    assert script.calls == {"extract": 4, "cover": 3}
    bodies = openai_server.requests
    assert all(b["response_format"]["type"] == "json_schema" for b in bodies)
    cover_targets = [
        _FENCED.search(last_user_text(b)).group(1)
        for b in bodies
        if "Source structure" in last_user_text(b)
    ]
    assert sorted(cover_targets) == sorted([REF, PRED, EMPTY])  # both directions ran


def test_failed_call_gives_null_scores_with_the_reason(openai_server):
    openai_server.reply = ScriptedEvaluator()
    openai_server.script(Fault(content="this is not json"))
    [r] = evaluator(llm(spec(openai_server))).evaluate([ExplanationPair("img1", PRED, REF)])
    assert r.entity.value is None and r.evidence.value is None
    assert r.entity.reason.startswith("extraction failed:")
    assert (r.entity.model, r.entity.backend) == ("gpt-fake", "openai")


def test_one_evaluator_model_per_pair(openai_server):
    script = ScriptedEvaluator()
    openai_server.reply = script
    settings = llm(spec(openai_server, "gpt-a"), spec(openai_server, "gpt-b"))
    ev = evaluator(settings)
    pairs = [ExplanationPair(f"img{i}", PRED, REF) for i in range(8)]
    results = ev.evaluate(pairs)
    want = [choose_model(settings.pool, 7, ev.stage, p.item_id).model for p in pairs]
    assert [r.entity.model for r in results] == want and set(want) == {"gpt-a", "gpt-b"}
    sent = [b["model"] for b in openai_server.requests]
    assert {m: sent.count(m) for m in set(sent)} == {m: 4 * want.count(m) for m in set(want)}
    assert all(r.entity.value == pytest.approx(0.5) for r in results)
    with pytest.raises(ValueError, match="unique"):
        ev.evaluate([pairs[0], pairs[0]])


def test_templates_carry_the_papers_definitions():
    ext, cov = load_template("explanation_extractor"), load_template("explanation_evaluator")
    assert ext.prompt_id == "explanation_extractor@1" and cov.prompt_id == "explanation_evaluator@1"
    assert "explicitly uses as evidence" in ext.system and "schema" in ext.variables
    assert "wording-invariant but evidence-sensitive" in cov.system
    assert cov.variables == {"structure", "target", "schema"}
