"""Offline explanation templates: grammatical over every combination, measured facts only."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import skimage.data

from forenset.backends.offline_explain import (
    authenticity,
    complex_fake,
    mentioned,
    simple_fake,
    subject,
)

REGIONS = [
    "upper left",
    "upper centre",
    "middle right",
    "centre",
    "lower right",
    "whole image",
    None,
]
TYPES = ["colour change", "brightness change", "content change", "unlisted change"]
TARGETS = ["floor", "the face", "red car", "An apple", "", None]
KINDS = [
    "recolor",
    "removal",
    "splice",
    "copy_move",
    "liquify",
    "lighting",
    "local_warp",
    None,
    "pose",
]

BAD = [
    r"\b(\w+) \1\b",  # "the the"
    r"\b(at|in|on) the (at|in|on)\b",  # "at the on the trees"
    r"\bthe (in|at|on|across)\b",
    r"\s[,.:;]",
    r"\s{2,}",
    r"\.\.",
    r"[{}]|None|nan",
    r"\b(a|an) (a|an|the)\b",
    r"\ba [aeiou]",
]


def grammar_problems(text: str) -> list[str]:
    out = [p for p in BAD if re.search(p, text, re.I)]
    if not text.endswith("."):
        out.append("no final full stop")
    for sent in re.split(r"(?<=[.!?])\s+", text):
        if sent and not sent[0].isupper():
            out.append(f"sentence starts lower-case: {sent!r}")
    return out


def diff(ct: str, region: str | None, i: int = 1) -> dict:
    d = {
        "id": f"d{i}",
        "change_type": ct,
        "bbox": [0.1, 0.1, 0.4, 0.4],
        "area": 0.05 * i,
        "magnitude": 0.2,
        "salience": 3,
    }
    if region is not None:
        d["region"] = region
    return d


ARTIFACT = {
    "id": "a",
    "change_type": "artifact",
    "region": "whole image",
    "area": 1.0,
    "magnitude": 0.03,
    "salience": 2,
    "bbox": [0, 0, 1, 1],
}


def cases():
    for target, kind in itertools.product(TARGETS, KINDS):
        ins = {"target": target, "kind": kind, "location_hint": "on the trees"}
        if target is None:
            ins.pop("target")
        if kind is None:
            ins.pop("kind")
        for ct, region in itertools.product(TYPES, REGIONS):
            for diffs in (
                [diff(ct, region)],
                [diff(ct, region), diff("colour change", "lower left", 2)],
                [diff(ct, region), ARTIFACT],
            ):
                yield ins, diffs
        yield ins, []
        yield ins, [ARTIFACT]


def test_fake_templates_are_grammatical_and_name_their_entity():
    n = 0
    for ins, diffs in cases():
        entity = subject(ins, [d for d in diffs if d["change_type"] != "artifact"])[2]
        for v in (0, 1):
            for text in (complex_fake(ins, diffs, v), simple_fake(ins, diffs, v)):
                assert not grammar_problems(text), (text, grammar_problems(text))
                assert mentioned(text, [entity]), (text, entity)
                n += 1
    assert n > 1000


def test_fake_templates_do_not_depend_on_the_edit_kind():
    """The ground-truth edit kind must not leak: the text is a function of measurements."""
    diffs = [diff("content change", "upper left"), ARTIFACT]
    for v in (0, 1):
        texts = {
            (
                complex_fake({"target": "car", "kind": k}, diffs, v),
                simple_fake({"target": "car", "kind": k}, diffs, v),
            )
            for k in KINDS
        }
        assert len(texts) == 1
        joined = " ".join(texts.pop()).lower()
        for word in ("pasted", "splice", "copied", "wiped", "liquify", "melted", "removed", "warp"):
            assert word not in joined


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea", "rocket", "camera"])
def test_authenticity_template_is_grammatical(name):
    img = getattr(skimage.data, name)()
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    for ents, v in itertools.product(
        [[], ["cat"], ["cup", "saucer"], ["the man", "rocket"]], (0, 1)
    ):
        text = authenticity(img[:160, :160].copy(), "a caption", ents, v)
        assert not grammar_problems(text), (text, grammar_problems(text))
        for e in ents:
            assert e in text
