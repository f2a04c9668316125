"""FakeBench vocabulary: dimensions, change-type mapping of both diff backends, question forms,
the exact-match rule of §3.2, offline clues and Label Studio clue edits."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from forenset.benchmarks.fakebench import text as fb
from forenset.text.models import ChangeType

OFFLINE_TYPES = ("colour change", "brightness change", "content change", "artifact")


def test_fourteen_dimensions_and_both_diff_vocabularies_map():
    assert len(fb.DIMENSIONS) == 14 == len(set(fb.DIMENSIONS))
    for t in (*OFFLINE_TYPES, *get_args(ChangeType)):
        dims = fb.dimensions_for(t)
        assert dims and set(dims) <= set(fb.DIMENSIONS), t
    assert fb.dimensions_for("Reshaped") == ["shape", "distortion"]
    assert fb.dimensions_for("removed", "splice") == [
        "edge", "light & shadow", "theme", "content deficiency", "texture",
    ]  # fmt: skip
    assert fb.dimensions_for("no such type") == []


@pytest.mark.parametrize(
    ("form", "answer", "reply", "ok"),
    [
        ("yes_no", "yes", "Yes, it is.", True),
        ("yes_no", "yes", "fake", False),  # §3.2: "fake" to a yes/no question is wrong
        ("yes_no", "yes", "I cannot answer yes or no.", False),  # §3.2
        ("yes_no", "no", "No. The lighting is consistent.", True),
        ("yes_no", "no", "Nobody can tell; yes.", False),  # whole words only: "yes"
        ("yes_no", "yes", "", False),
        ("what", "fake", "This image is FAKE.", True),
        ("what", "fake", "It looks real to me.", False),
        ("what", "real", "Real or fake? Real.", False),  # both keywords: no answer given
        ("what", "real", "yes", False),
    ],
)
def test_exact_match_rule(form, answer, reply, ok):
    assert fb.exact_match(form, answer, reply) is ok


def test_fakeclass_forms_are_balanced_and_answers_follow_the_label():
    forms = fb.fakeclass_forms(7)
    assert sum(f == "yes_no" for f, _ in forms) == 4 and sum(f == "what" for f, _ in forms) == 3
    assert [p for f, p in forms if f == "yes_no"] == ["fake", "real", "fake", "real"]
    assert fb.fakeclass_question("yes_no", "fake", "fake") == ("Is this a fake image?", "yes")
    assert fb.fakeclass_question("yes_no", "real", "fake") == ("Is this a real image?", "no")
    assert fb.fakeclass_question("yes_no", "real", "real") == ("Is this a real image?", "yes")
    assert fb.fakeclass_question("what", None, "real") == (
        "What is the authenticity of this image?", "real",
    )  # fmt: skip


def test_fakeqa_question_and_golden_answers_by_dimension():
    assert fb.fakeqa_question("texture") == (
        "How is the texture regarding the authenticity of this image?"
    )
    with pytest.raises(ValueError):
        fb.fakeqa_question("colour")
    clues = [
        {"dimension": "edge", "clue": "The edge of the cup is jagged"},
        {"dimension": "texture", "clue": "The wall is too smooth."},
        {"dimension": "edge", "clue": "A halo runs along the arm."},
    ]
    assert fb.clue_text(clues).startswith("The edge of the cup is jagged. The wall")
    assert fb.by_dimension(clues) == {
        "edge": "The edge of the cup is jagged. A halo runs along the arm.",
        "texture": "The wall is too smooth.",
    }


def test_offline_clues_follow_salience_and_dimensions():
    diffs = [
        {"region": "upper left", "change_type": "artifact", "description": "noise", "salience": 1},
        {"region": "centre", "change_type": "colour change", "description": "a hue shift",
         "salience": 4},
    ]  # fmt: skip
    got = fb.offline_clues(diffs, None, limit=3)
    assert [c["dimension"] for c in got] == ["overall tone", "irreality", "texture"]
    assert got[0]["clue"] == (
        "At the centre, the colour tone differs from the rest of the image (a hue shift)."
    )
    assert set(fb.DIMENSION_CUES) == set(fb.DIMENSIONS)
    # a VLM diff record (its change-type vocabulary) gives clues too
    vlm = [{"region": "the shop sign", "change_type": "text", "description": "garbled letters",
            "salience": 3}]  # fmt: skip
    assert [c["dimension"] for c in fb.offline_clues(vlm, None)] == ["irreality", "distortion"]


def test_read_clue_edits_takes_the_last_non_cancelled_annotation():
    def ann(text, cancelled=False):
        return {
            "was_cancelled": cancelled,
            "result": [{"from_name": "golden_clue", "to_name": "image", "type": "textarea",
                        "value": {"text": [text]}}],
        }  # fmt: skip

    export = [
        {"data": {"sample_id": "a"}, "annotations": [ann("first"), ann("second  edit")]},
        {"data": {"sample_id": "b"}, "annotations": [ann("skipped", cancelled=True)]},
        {"data": {"sample_id": "c"}, "annotations": []},
    ]
    assert fb.read_clue_edits(json.dumps(export)) == {"a": "second edit"}
    with pytest.raises(ValueError):
        fb.read_clue_edits("{}")
