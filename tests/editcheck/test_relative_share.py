"""rules-v7: a removal of a low-contrast area takes all the structure there was with a small
absolute change (``relative_share``); a weak blend of other texture adds structure, which only
the absolute response may count."""

import cv2
import numpy as np
import pytest

from forenset.backends.edit_strength import StrengthRules, measure
from forenset.backends.rule_judge import judge_measured

BOX = [0.25, 0.25, 0.75, 0.75]
INS = {"kind": "removal", "text": "Erase the marked region", "change_bbox": BOX}
# the fill covers ~3/4 of the box (an editor's mask)
CORE = [0.28, 0.28, 0.72, 0.72]
# the artefact limits out of the way: this is about the strength of the edit
ART = {"blockiness": 9.0, "noise_residual": 9.0, "colour_cast": 9.0}


@pytest.fixture(scope="module")
def photo():
    """A pinkish field with fine grain and faint rings (the clone editor's renders): little
    structure, low contrast."""
    rng = np.random.default_rng(3)
    h = w = 96
    yy, xx = np.mgrid[:h, :w].astype(np.float32)
    rings = 6.0 * np.sin(np.hypot(yy - 48, xx - 48) / 2.0)
    grain = 3.0 * rng.normal(0, 1, (h, w)).astype(np.float32)
    base = np.array([190, 110, 120], np.float32)
    img = base + (rings + grain)[..., None]
    return np.clip(img, 0, 255).round().astype(np.uint8)


def core(shape):
    m = np.zeros(shape[:2], np.float32)
    h, w = shape[:2]
    m[int(CORE[1] * h) : int(CORE[3] * h), int(CORE[0] * w) : int(CORE[2] * w)] = 1
    return cv2.GaussianBlur(m, (0, 0), 1.0)


def blend(img, other, alpha):
    a = (alpha * core(img.shape))[..., None]
    return np.clip(img * (1 - a) + other * a, 0, 255).round().astype(np.uint8)


def smooth_fill(img):
    """What an inpaint leaves: the area's own colour with its structure gone."""
    return cv2.GaussianBlur(img.astype(np.float32), (0, 0), 8.0)


def rules(relative):
    r = StrengthRules(artefacts=ART)
    tex = r.changes["texture"].model_copy(
        update={"need": 0.4, "extent": 0.4, "share": 0.7, "relative": relative}
    )
    return r.model_copy(update={"changes": {**r.changes, "texture": tex}})


def test_full_removal_takes_the_structure_there_was(photo):
    full = measure(photo, blend(photo, smooth_fill(photo), 0.9), INS)
    # in absolute terms the removal is far short of the need: a low-contrast area
    assert full["coverage"] < 0.1, full
    assert full["weak_coverage"] >= 0.4, full
    assert full["relative_share"] >= 0.8, full
    # only texture changes carry it
    assert "relative_share" not in measure(photo, photo, {**INS, "kind": "recolor"})


def test_relative_rule_keeps_the_full_removal(photo):
    full = measure(photo, blend(photo, smooth_fill(photo), 0.9), INS)
    off = judge_measured(INS, full, rules(None), offtarget_dominance=1.0)
    assert (off["verdict"], off["failure_category"]) == ("DISCARD", "edit_partial"), off
    on = judge_measured(INS, full, rules(0.8), offtarget_dominance=1.0)
    assert (on["verdict"], on["failure_category"]) == ("KEEP", "none"), on
    assert "as far as it allowed" in on["rationale"]


def test_added_structure_is_not_relative_credit(photo):
    """A weak blend of other texture over the low-contrast area: large against the little
    structure the source had, but it adds structure rather than taking it away."""
    rng = np.random.default_rng(5)
    other = 150 + 20 * rng.normal(0, 1, photo.shape).astype(np.float32)
    m = measure(photo, blend(photo, other, 0.3), INS)
    assert m["weak_coverage"] >= 0.4 and m["coverage"] < 0.1, m
    assert m["relative_share"] < 0.2, m
    v = judge_measured(INS, m, rules(0.8), offtarget_dominance=1.0)
    assert v["verdict"] == "DISCARD", v
