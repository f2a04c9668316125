"""rules-v7: a motion blur removes the gradient energy across its line and keeps what runs
along it (``directional_change``), so its isotropic high-frequency loss is about half; a weak
blend of a blur loses little in every direction."""

import cv2
import numpy as np
import pytest

from forenset.backends.edit_strength import StrengthRules, measure
from forenset.backends.rule_judge import judge_measured

BOX = [0.25, 0.25, 0.75, 0.75]
INS = {"kind": "blur", "text": "Motion-blur the marked region", "change_bbox": BOX}
ART = {"blockiness": 9.0, "noise_residual": 9.0, "colour_cast": 9.0}


@pytest.fixture(scope="module")
def photo():
    """Green bricks: a grid of light mortar lines, horizontal and vertical."""
    img = np.full((96, 96, 3), (90, 150, 90), np.uint8)
    for y in range(0, 96, 8):
        img[y : y + 2] = (170, 220, 170)
    for x in range(0, 96, 12):
        img[:, x : x + 2] = (170, 220, 170)
    return img


def motion(img, alpha, length=9):
    """A vertical line kernel over the box's middle (an editor's mask), blended at ``alpha``."""
    k = np.zeros((length, length), np.float32)
    k[:, length // 2] = 1.0 / length
    blurred = cv2.filter2D(img.astype(np.float32), -1, k)
    m = np.zeros(img.shape[:2], np.float32)
    m[26:70, 26:70] = 1
    a = (alpha * cv2.GaussianBlur(m, (0, 0), 1.0))[..., None]
    return np.clip(img * (1 - a) + blurred * a, 0, 255).round().astype(np.uint8)


def rules(directional):
    r = StrengthRules(artefacts=ART)
    blur = r.changes["blur"].model_copy(
        update={"need": 0.55, "full": 0.6, "extent": 0.45, "share": 0.8, "directional": directional}
    )
    return r.model_copy(update={"changes": {**r.changes, "blur": blur}})


def test_motion_blur_loses_along_one_direction(photo):
    full = measure(photo, motion(photo, 0.9), INS)
    weak = measure(photo, motion(photo, 0.3), INS)
    # the vertical mortar lines survive a vertical blur: the isotropic loss stays low
    assert full["kind_change"] < 0.6, full
    assert full["directional_change"] >= 0.7, full
    assert weak["directional_change"] < 0.55, weak
    assert "directional_change" not in measure(photo, photo, {**INS, "kind": "recolor"})


def test_directional_rule_keeps_the_motion_blur_only(photo):
    full = measure(photo, motion(photo, 0.9), INS)
    assert judge_measured(INS, full, rules(None), offtarget_dominance=1.0)["verdict"] != "KEEP"
    on = judge_measured(INS, full, rules(0.7), offtarget_dominance=1.0)
    assert (on["verdict"], on["failure_category"]) == ("KEEP", "none"), on
    assert "along one direction" in on["rationale"]
    weak = measure(photo, motion(photo, 0.3), INS)
    v = judge_measured(INS, weak, rules(0.7), offtarget_dominance=1.0)
    assert v["verdict"] == "DISCARD", v
