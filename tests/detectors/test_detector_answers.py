"""The parser of detector replies (XPlainVerse App. 16 format) on hand-written cases.

The decisions these cases pin down are listed in ``answers.py``'s docstring: lenient on
case, spacing, quotes, bold and trailing punctuation inside the tag; strict on everything
that would mean guessing (labels outside the tag, sentences, two answers, unclosed tags).
"""

from __future__ import annotations

import pytest

from forenset.benchmarks.common.answers import format_reply, parse_answer


@pytest.mark.parametrize(
    "reply,answer,reasoning",
    [
        (
            "<reasoning>Lighting is off.</reasoning><answer>fake</answer>",
            "fake",
            "Lighting is off.",
        ),
        ("<reasoning>ok</reasoning>\n<answer>real</answer>", "real", "ok"),
        ("<REASONING>Edges.</REASONING><ANSWER>FAKE</ANSWER>", "fake", "Edges."),
        ("< reasoning >  a b \n</ reasoning>< Answer >  Real \n</answer >", "real", "a b"),
        ("<reasoning>x</reasoning><answer>Fake.</answer>", "fake", "x"),
        ("<reasoning>x</reasoning><answer>**fake**</answer>", "fake", "x"),
        ('<reasoning>x</reasoning><answer>"real"!</answer>', "real", "x"),
        ("```\n<reasoning>x</reasoning>\n<answer>fake</answer>\n```", "fake", "x"),
        ("<reasoning>a</reasoning><reasoning>b</reasoning><answer>fake</answer>", "fake", "a\n\nb"),
    ],
)
def test_valid_replies(reply, answer, reasoning):
    assert parse_answer(reply) == (answer, reasoning, None)


@pytest.mark.parametrize(
    "reply,why",
    [
        (None, "empty"),
        ("   ", "empty"),
        ("<reasoning>Looks edited.</reasoning> Answer: fake", "'fake' outside the tags"),
        ("The image is real.", "'real' outside the tags"),
        ("<reasoning>hm</reasoning>", "no <answer>"),
        ("<reasoning>x</reasoning><answer>fake", "never closes"),
        ("<answer>fake</answer><answer>real</answer>", "2 <answer> tags"),
        ("<answer>fake</answer> ... <answer>fake</answer>", "2 <answer> tags"),
        ("<answer>The image is fake</answer>", "neither 'real' nor 'fake'"),
        ("<answer>fake image</answer>", "neither 'real' nor 'fake'"),
        ("<answer>real or fake</answer>", "neither 'real' nor 'fake'"),
        ("<answer>AI-generated</answer>", "neither 'real' nor 'fake'"),
        ("<answer>not real</answer>", "neither 'real' nor 'fake'"),
        ("<answer> </answer>", "empty"),
    ],
)
def test_unparseable_replies_say_why_in_a_sentence(reply, why):
    answer, _, reason = parse_answer(reply)
    assert answer is None
    assert why in reason and reason.endswith(".") and reason[0].isupper(), reason


@pytest.mark.parametrize(
    "reply,why",
    [
        ("Sure! <answer>real</answer>", "no <reasoning>"),
        ("<reasoning>The hands look wrong.</answer> <answer>fake</answer>", "never closed"),
        ("<reasoning>  </reasoning><answer>fake</answer>", "is empty"),
    ],
)
def test_a_missing_or_empty_explanation_is_flagged_but_the_answer_kept(reply, why):
    answer, reasoning, reason = parse_answer(reply)
    assert answer in ("real", "fake") and reasoning == ""  # detection is still scored
    assert why in reason and "no explanation" in reason and reason.endswith("."), reason


def test_a_real_small_model_reply_is_flagged():
    """SmolLM2-135M's reply to the detector prompt (fixtures/llamacpp_replies.json)."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[1] / "llm" / "fixtures" / "llamacpp_replies.json"
    real = json.loads(path.read_text())["detector_reply"]["body"]
    answer, _, reason = parse_answer(real["choices"][0]["message"]["content"])
    assert answer is None and "no <answer>" in reason


def test_reasoning_is_kept_when_the_answer_is_unparseable():
    parsed = parse_answer("<reasoning>Two suns.</reasoning><answer>maybe</answer>")
    assert parsed.answer is None and parsed.reasoning == "Two suns."


def test_format_reply_round_trips_and_cannot_inject_tags():
    reply = format_reply("Noise <answer>real</answer> differs\nhere.", "fake")
    assert parse_answer(reply) == ("fake", "Noise ‹answer›real‹/answer› differs here.", None)
    with pytest.raises(ValueError):
        format_reply("x", "Fake")
