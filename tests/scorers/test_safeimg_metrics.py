"""SafeIMG metrics against values computed by hand."""

from __future__ import annotations

import pytest

from forenset.benchmarks.safeimg.scorers import (
    AlignmentJudgment,
    Anomaly,
    Rationale,
    ai_detection_rate,
    align,
    alignment_request,
    delta_per_label,
    hit_rate_per_label,
    iou,
    matrix_from,
    mean_defined,
    offline_match,
    rates_by_group,
    real_accuracy,
    split_rationales,
)


def test_eq12_detection_rate_unparseable_counts_as_missed():
    r = ai_detection_rate(["fake", "real", None, "ai_generated"])
    assert (r.value, r.n) == (0.5, 4)
    assert ai_detection_rate([]).value is None and "no generated" in ai_detection_rate([]).reason
    assert real_accuracy(["real", "fake", None]).value == pytest.approx(1 / 3)


def test_overall_is_weighted_by_category_size():
    # P1: 1 of 1 detected; P3: 1 of 3 -> mean of rates 0.667, weighted overall 2/4
    items = [("P1", "fake"), ("P3", "fake"), ("P3", "real"), ("P3", None)]
    got = rates_by_group(items, ["P1", "P2", "P3"])
    assert got["P1"].value == 1.0 and got["P3"].value == pytest.approx(1 / 3)
    assert got["P2"].value is None and got["P2"].n == 0
    assert got["Overall"].value == 0.5 and got["Overall"].n == 4
    real = rates_by_group([("P1", "real"), ("P1", "fake")], ["P1"], real=True)
    assert real["P1"].value == 0.5


def test_alignment_per_image_then_averaged():
    # image 1: anomalies A,B ; rationales r1 hits A, r2 hits nothing, r3 hits A and B
    m1 = [[True, False, True], [False, False, True]]
    a1 = align(m1, 3)
    assert a1.human_covered == 1.0 and a1.ai_supported == pytest.approx(2 / 3)
    # image 2: 3 anomalies, 1 rationale hitting the second
    a2 = align([[False], [True], [False]], 1)
    assert a2.human_covered == pytest.approx(1 / 3) and a2.ai_supported == 1.0
    # image 3: no rationale: covers 0, AI-supported undefined (left out of that mean)
    a3 = align([[], []], 0)
    assert a3.human_covered == 0.0 and a3.ai_supported is None
    hc = mean_defined([a1.human_covered, a2.human_covered, a3.human_covered], "images")
    ai = mean_defined([a1.ai_supported, a2.ai_supported, a3.ai_supported], "images")
    assert hc.value == pytest.approx((1 + 1 / 3 + 0) / 3) and hc.n == 3
    assert ai.value == pytest.approx((2 / 3 + 1) / 2) and ai.n == 2
    # hit rate per label: text anomalies hit 1 of 2, hands 1 of 1, physics 0 of 2
    pairs = [
        ("text", True),
        ("text", False),
        ("hands", True),
        ("physics", False),
        ("physics", False),
    ]
    hr = hit_rate_per_label(pairs, ["text", "hands", "physics", "faces"])
    assert hr["text"].value == 0.5 and hr["hands"].value == 1.0 and hr["physics"].value == 0.0
    assert hr["faces"].value is None


def test_eq13_delta_image_level():
    imgs = [
        ({"text", "faces"}, True),  # false negative
        ({"text"}, True),  # false negative
        ({"physics"}, False),
        ({"text", "physics"}, False),
    ]
    d = delta_per_label(imgs, ["text", "faces", "physics", "hands"])
    # P(text|FN)=2/2, P(text|all)=3/4 -> 0.25; faces 1/2-1/4; physics 0-2/4; hands 0
    assert d == pytest.approx({"text": 0.25, "faces": 0.25, "physics": -0.5, "hands": 0.0})
    assert delta_per_label([({"text"}, False)], ["text"]) == {"text": None}


def test_offline_matcher_vocabulary_or_box_overlap():
    assert iou((0, 0, 0.5, 0.5), (0.25, 0.25, 0.5, 0.5)) == pytest.approx(0.0625 / 0.4375)
    hands = Anomaly("hands", (0.1, 0.1, 0.2, 0.2), "six fingers")
    assert offline_match(hands, Rationale("The left hand has six fingers."))
    assert not offline_match(hands, Rationale("The sky is too uniform."))
    assert offline_match(hands, Rationale("The sky is too uniform.", (0.1, 0.1, 0.2, 0.25)))
    assert not offline_match(hands, Rationale("The sky is too uniform.", (0.6, 0.6, 0.2, 0.2)))
    assert offline_match(Anomaly("lighting"), Rationale("Shadows fall in two directions"))
    assert split_rationales("Text is garbled. Shadows disagree!\n- hands look off") == [
        "Text is garbled.",
        "Shadows disagree!",
        "hands look off",
    ]


def test_judge_request_and_reply_to_matrix():
    req = alignment_request(
        "img1",
        [Anomaly("text", None, "garbled sign")],
        [Rationale("sign text unreadable"), Rationale("sky fine")],
    )
    assert "H1. [text] garbled sign" in req.user and "R2. sky fine" in req.user
    j = AlignmentJudgment.model_validate(
        {"matches": [{"anomaly": 1, "rationale": 1}, {"anomaly": 3, "rationale": 1}]}
    )
    assert matrix_from(j, 1, 2) == [[True, False]]  # H3 does not exist: ignored


def test_model_judge_through_the_fake_openai_server(openai_server, monkeypatch):
    import re

    from forenset.backends.llm.types import LLMSettings, ModelSpec
    from forenset.benchmarks.safeimg.scorers import ModelAlignmentJudge
    from forenset.testing.fake_openai import last_user_text

    def reply(body):
        # the scripted judge: a rationale hits an anomaly when they share a word of 5+ letters
        text = last_user_text(body)
        hs = re.findall(r"H(\d+)\. \[\w+\] (.*)", text)
        rs = re.findall(r"R(\d+)\. (.*)", text)
        words = lambda s: set(re.findall(r"[a-z]{5,}", s.lower()))  # noqa: E731
        return {
            "matches": [
                {"anomaly": int(h), "rationale": int(r)}
                for h, ht in hs
                for r, rt in rs
                if words(ht) & words(rt)
            ]
        }

    openai_server.reply = reply
    spec = ModelSpec(
        backend="openai",
        model="gpt-judge",
        base_url=openai_server.base_url,
        api_key_env="FAKE_SCORER_KEY",
        timeout_s=5.0,
    )
    judge = ModelAlignmentJudge(
        LLMSettings(pool=[spec], repair_retries=0), build_seed=1, stage="safeimg-test"
    )
    items = [
        (
            "i1",
            [
                Anomaly("text", None, "garbled letters on the banner"),
                Anomaly("physics", None, "truck floating above road"),
            ],
            [Rationale("banner letters are garbled"), Rationale("lighting is soft")],
        ),
        ("i2", [Anomaly("hands", None, "six fingers")], []),  # no rationale: no call
    ]
    (m1, r1), (m2, r2) = judge.judge(items)
    assert m1 == [[True, False], [False, False]] and r1.model == "gpt-judge"
    assert m2 == [[]] and r2 is None
    assert len(openai_server.requests) == 1
    a = align(m1, 2)
    assert (a.human_covered, a.ai_supported) == (0.5, 0.5)
