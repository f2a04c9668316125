"""rules-v4: missing vs partial read against the image's own background (``faint_excess``), and
off-target only for a located change (``outside_piece``)."""

import cv2
import numpy as np
import pytest

from forenset.backends.edit_strength import StrengthRules, measure
from forenset.backends.rule_judge import judge_measured

BOX = [0.3, 0.3, 0.7, 0.7]
INS = {"kind": "external", "text": "brighten it", "change_bbox": BOX, "params": {}}


@pytest.fixture(scope="module")
def photo():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 1, (96, 96, 3)).astype(np.float32)
    return np.clip(90 + 25 * cv2.GaussianBlur(noise, (0, 0), 2.0), 0, 255).astype(np.uint8)


def lighter(img, by, where=None):
    """``img`` with its L* raised by ``by`` (everywhere, or in ``where``)."""
    lab = cv2.cvtColor(img.astype(np.float32) / 255, cv2.COLOR_RGB2Lab)
    lab[..., 0] += by if where is None else by * where
    return np.clip(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255, 0, 255).round().astype(np.uint8)


def box_mask(shape, box=BOX):
    m = np.zeros(shape[:2], np.float32)
    h, w = shape[:2]
    m[int(box[1] * h) : int(box[3] * h), int(box[0] * w) : int(box[2] * w)] = 1
    return m


def test_faint_change_counts_only_above_the_images_background(photo):
    ins = dict(INS, params={"listed_kind": "brighten"})
    # the same faint change everywhere (a re-encode, a global tone shift): nothing at the target
    everywhere = measure(photo, lighter(photo, 4.0), ins)
    assert abs(everywhere["faint_excess"]) < 0.05, everywhere
    # a weak blend in the target only: clearly above the background
    there = measure(photo, lighter(photo, 4.0, box_mask(photo.shape)), ins)
    assert there["faint_excess"] > 0.8, there
    assert there["coverage"] == 0.0  # too weak to count as done anywhere


def test_off_target_change_is_measured_as_one_located_piece(photo):
    ins = dict(INS, params={"listed_kind": "brighten"})
    block = box_mask(photo.shape, [0.0, 0.0, 0.25, 0.25])
    # a codec-like speckle: 2x2 dots 7 px apart, outside the target and its margin
    speckle = np.zeros(photo.shape[:2], np.float32)
    for y in range(0, 96, 7):
        for x in range(0, 96, 7):
            speckle[y : y + 2, x : x + 2] = 1
    speckle *= 1 - box_mask(photo.shape, [0.2, 0.2, 0.8, 0.8])
    solid = measure(photo, lighter(photo, 30.0, block), ins)
    scattered = measure(photo, lighter(photo, 40.0, speckle), ins)
    assert solid["outside_piece"] > 0.5 * 0.25 * 0.25
    assert scattered["outside_frac"] > 0.02  # as much strong change outside ...
    assert scattered["outside_piece"] < 0.002  # ... but in no piece larger than a dot


def numbers(**over):
    base = {
        "change": "luminance",
        "box_area": 0.1,
        "coverage": 0.0,
        "weak_coverage": 0.0,
        "verifiable": True,
        "capable_share": 1.0,
        "kind_change": 0.0,
        "outside_frac": 0.0,
        "outside_any": 0.0,
        "outside_piece": 0.0,
        "outside_any_piece": 0.0,
        "faint_excess": 0.0,
        "blockiness": 0.0,
        "noise_residual": 0.0,
        "colour_cast": 0.0,
    }
    return base | over


def category(m, **rules):
    v = judge_measured({}, m, StrengthRules(**rules), offtarget_dominance=1.0)
    return v["verdict"], v["failure_category"]


def test_a_faint_change_over_the_target_alone_is_partial_not_missing():
    rules = StrengthRules()
    assert rules.partial_above is not None
    weak = numbers(weak_coverage=rules.missing_below / 2, faint_excess=rules.partial_above + 0.1)
    assert category(weak) == ("DISCARD", "edit_partial")
    assert category(weak, partial_above=None) == ("DISCARD", "edit_missing")  # the rule, off


def test_a_touched_target_that_changed_no_more_than_the_background_is_missing():
    codec = numbers(weak_coverage=0.4, coverage=0.02, faint_excess=0.0)
    assert category(codec, missing_excess=0.05) == ("DISCARD", "edit_missing")
    assert category(codec, missing_excess=None) == ("DISCARD", "edit_partial")  # off
    partial = numbers(weak_coverage=0.4, coverage=0.02, faint_excess=0.5)
    assert category(partial, missing_excess=0.05) == ("DISCARD", "edit_partial")


def test_off_target_needs_a_located_change_elsewhere():
    on = {"offtarget_located": 0.15}
    piece = 0.15 * 0.1  # of the image, for a target of 0.1
    spread = numbers(weak_coverage=0.3, outside_frac=0.02, outside_piece=piece / 4)
    assert category(spread, **on)[1] != "off_target"
    assert category(spread, offtarget_located=0.0) == ("DISCARD", "off_target")  # off
    located = numbers(weak_coverage=0.3, outside_frac=0.02, outside_piece=2 * piece)
    assert category(located, **on) == ("DISCARD", "off_target")
    # nothing reached the target, another change elsewhere: off-target only when located
    nothing = numbers(outside_any=0.05, outside_any_piece=piece / 4)
    assert category(nothing, **on) == ("DISCARD", "edit_missing")
    assert category(nothing | {"outside_any_piece": 2 * piece}, **on) == ("DISCARD", "off_target")


def test_a_target_that_got_the_edit_is_not_off_target_when_that_rule_is_on():
    rules = StrengthRules()
    need = rules.changes["blur"].need
    # a good blur (the target fully changed) and more of the same change elsewhere (a
    # re-encode of a noisy photo): off-target by dominance alone
    m = numbers(change="blur", coverage=need + 0.3, weak_coverage=0.95, outside_frac=0.12)
    m |= {"outside_piece": 0.05}
    assert category(m, reached_not_offtarget=False) == ("DISCARD", "off_target")
    assert category(m, reached_not_offtarget=True) == ("KEEP", "none")
    # a target short of its need stays off-target
    short = m | {"coverage": need / 4, "weak_coverage": need / 2}
    assert category(short, reached_not_offtarget=True) == ("DISCARD", "off_target")
