"""rules-v5: a "missing" read whose smooth change stands well above its surroundings
(``located_ratio``) is a partial edit — a blend has an edge inside the box, a re-encode changes
the target and its surroundings alike."""

import cv2
import numpy as np
import pytest

from forenset.backends.edit_strength import StrengthRules, measure
from forenset.backends.rule_judge import judge_measured

BOX = [0.3, 0.3, 0.7, 0.7]
INS = {"kind": "recolor", "text": "Give the marked region a different colour", "change_bbox": BOX}
# the blend covers the middle of the box (an editor's mask fills ~3/4 of it)
CORE = [0.34, 0.34, 0.66, 0.66]


@pytest.fixture(scope="module")
def photo():
    """A yellow-green textured field (the clone editor's renders)."""
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 1, (96, 96, 3)).astype(np.float32)
    base = np.array([170, 180, 40], np.float32)
    return np.clip(base + 12 * cv2.GaussianBlur(noise, (0, 0), 1.0), 0, 255).astype(np.uint8)


def in_box(shape, box=BOX):
    m = np.zeros(shape[:2], np.float32)
    h, w = shape[:2]
    m[int(box[1] * h) : int(box[3] * h), int(box[0] * w) : int(box[2] * w)] = 1
    return m


def toward_grey(img, alpha, where):
    """A weak blend toward grey (it lowers chroma, it does not turn the hue)."""
    a = (alpha * where)[..., None]
    grey = np.full_like(img, 200, dtype=np.float32)
    return np.clip(img * (1 - a) + grey * a, 0, 255).round().astype(np.uint8)


def jpeg(img, q=88):
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, q])
    assert ok
    return cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)


def test_located_ratio_separates_a_blend_from_a_re_encode(photo):
    blend = measure(photo, toward_grey(photo, 0.3, in_box(photo.shape, CORE)), INS)
    recoded = measure(photo, jpeg(photo), INS)
    everywhere = measure(photo, toward_grey(photo, 0.3, np.ones(photo.shape[:2])), INS)
    assert blend["located_ratio"] > 4.0, blend
    assert recoded["located_ratio"] < 2.0, recoded
    assert everywhere["located_ratio"] < 2.0, everywhere


def test_weak_blend_read_as_missing_is_partial(photo):
    m = measure(photo, jpeg(toward_grey(photo, 0.3, in_box(photo.shape, CORE))), INS)
    # the artefact limits out of the way: this is about the category of a weak edit
    art = {"blockiness": 9.0, "noise_residual": 9.0, "colour_cast": 9.0}
    rules = StrengthRules(
        missing_excess=0.08, partial_above=0.3, artefacts=art, located_partial=None
    )
    without = judge_measured(INS, m, rules, offtarget_dominance=1.0)
    # the hue barely turned, so the background rule reads it as nothing: missing
    assert (without["verdict"], without["failure_category"]) == ("DISCARD", "edit_missing")
    with_rule = judge_measured(
        INS, m, rules.model_copy(update={"located_partial": 4.0}), offtarget_dominance=1.0
    )
    assert (with_rule["verdict"], with_rule["failure_category"]) == ("DISCARD", "edit_partial")
    assert "smooth change" in with_rule["rationale"]
    # a re-encode alone stays missing under the rule
    plain = measure(photo, jpeg(photo), INS)
    v = judge_measured(
        INS, plain, rules.model_copy(update={"located_partial": 4.0}), offtarget_dominance=1.0
    )
    assert v["failure_category"] != "edit_partial", v
