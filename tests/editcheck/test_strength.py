"""Strength-aware Edit-Check on real pixels: the cases the area rule got wrong.

Each edit is made here with plain numpy/OpenCV on a bundled photo; the rule judge sees the
pixel measurements (``edit_strength.measure``) and names the failure from them."""

import cv2
import numpy as np
import pytest

from forenset.backends.edit_strength import StrengthRules, measure
from forenset.backends.rule_judge import judge_measured
from forenset.tasks.editcheck import offline_check
from forenset.tasks.judgments import JudgmentsConfig

BOX = [0.3, 0.3, 0.7, 0.7]


@pytest.fixture(scope="module")
def photo():
    import skimage.data

    return cv2.resize(skimage.data.chelsea(), (160, 128), interpolation=cv2.INTER_AREA)


def region(shape, box=BOX, share=1.0):
    """A feathered mask over ``share`` of the box (from its left edge)."""
    h, w = shape[:2]
    m = np.zeros((h, w), np.float32)
    x0, y0, x1, y1 = int(box[0] * w), int(box[1] * h), int(box[2] * w), int(box[3] * h)
    m[y0:y1, x0 : x0 + max(1, int((x1 - x0) * share))] = 1
    return cv2.GaussianBlur(m, (0, 0), 1.0)[..., None]


def blend(img, edited, mask, alpha=1.0):
    f = img.astype(np.float32)
    return np.clip(f + (edited - f) * mask * alpha, 0, 255).astype(np.uint8)


def recolour(img):
    hsv = cv2.cvtColor(img.astype(np.float32) / 255, cv2.COLOR_RGB2HSV)
    hsv[..., 0] = (hsv[..., 0] + 180) % 360
    hsv[..., 1] = np.maximum(hsv[..., 1], 0.6)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB) * 255


def verdict(photo, fake, kind):
    return offline_check(photo, fake, {"kind": kind, "change_bbox": BOX, "params": {}})


def test_full_recolour_is_kept_and_a_quarter_blend_over_the_whole_box_is_partial(photo):
    full = verdict(photo, blend(photo, recolour(photo), region(photo.shape)), "recolor")
    assert (full["verdict"], full["failure_category"]) == ("KEEP", "none"), full["rationale"]
    weak = verdict(photo, blend(photo, recolour(photo), region(photo.shape), 0.25), "recolor")
    assert (weak["verdict"], weak["failure_category"]) == ("DISCARD", "edit_partial")
    assert "coverage" in weak["rationale"] and weak["measurements"]["weak_coverage"] > 0.5


def test_brighten_over_a_quarter_of_the_box_is_partial(photo):
    bright = np.clip(photo.astype(np.float32) * 1.45 + 35, 0, 255)
    v = verdict(photo, blend(photo, bright, region(photo.shape, share=0.27)), "lighting")
    assert (v["verdict"], v["failure_category"]) == ("DISCARD", "edit_partial"), v["rationale"]
    whole = verdict(photo, blend(photo, bright, region(photo.shape)), "lighting")
    assert whole["verdict"] == "KEEP", whole["rationale"]


def test_a_strong_blur_counts_its_lost_high_frequencies(photo):
    blurred = cv2.GaussianBlur(photo.astype(np.float32), (0, 0), 4.0)
    m = measure(
        photo,
        blend(photo, blurred, region(photo.shape)),
        {"kind": "x", "change_bbox": BOX, "params": {"listed_kind": "blur"}},
    )
    assert m["change"] == "blur" and m["coverage"] > 0.6
    v = judge_measured({}, m, StrengthRules(), offtarget_dominance=1.0)
    assert v["verdict"] == "KEEP", v["rationale"]


@pytest.mark.parametrize("how", ["jpeg", "noise", "cast"])
def test_global_degradation_is_a_severe_artefact_and_says_which(photo, how):
    fake = blend(photo, recolour(photo), region(photo.shape))
    if how == "jpeg":
        ok, buf = cv2.imencode(".jpg", fake[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 5])
        fake = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
    elif how == "noise":
        fake = np.clip(fake + np.random.default_rng(0).normal(0, 10, fake.shape), 0, 255)
    else:
        fake = np.clip(fake.astype(np.float32) + np.array([25.0, -5.0, -20.0]), 0, 255)
    v = verdict(photo, fake.astype(np.uint8), "recolor")
    assert (v["verdict"], v["failure_category"]) == ("DISCARD", "severe_artifacts")
    stat = {"jpeg": "blockiness", "noise": "noise_residual", "cast": "colour_cast"}[how]
    assert stat in v["rationale"], v["rationale"]


def test_a_light_reencode_alone_is_no_artefact(photo):
    fake = blend(photo, recolour(photo), region(photo.shape))
    ok, buf = cv2.imencode(".jpg", fake[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
    v = verdict(photo, cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1], "recolor")
    assert v["verdict"] == "KEEP", v["rationale"]


def test_edit_elsewhere_is_off_target_and_no_edit_is_missing(photo):
    away = [0.0, 0.0, 0.25, 0.25]
    v = verdict(photo, blend(photo, recolour(photo), region(photo.shape, away)), "recolor")
    assert (v["verdict"], v["failure_category"]) == ("DISCARD", "off_target"), v["rationale"]
    v = verdict(photo, photo.copy(), "recolor")
    assert (v["verdict"], v["failure_category"]) == ("DISCARD", "edit_missing"), v["rationale"]


def test_thresholds_are_configurable_per_change(photo):
    full = blend(photo, recolour(photo), region(photo.shape))
    rules = {k: r.model_dump() for k, r in StrengthRules().changes.items()}
    strict = JudgmentsConfig.model_validate(
        {"strength": {"changes": {**rules, "colour": {"strong": 14.0, "need": 1.0}}}}
    )
    v = offline_check(photo, full, {"kind": "recolor", "change_bbox": BOX, "params": {}}, strict)
    assert v["failure_category"] == "edit_partial" and "need 1.00" in v["rationale"]
    with pytest.raises(ValueError, match="unknown change classes"):
        StrengthRules(kinds={"recolor": "hue"})


def test_a_target_filling_the_frame_is_not_read_as_a_colour_cast(photo):
    """Outside a whole-frame target there is nothing to read a cast or noise from; the
    recolour itself must not count as one."""
    whole = [0.0, 0.0, 1.0, 1.0]
    fake = blend(photo, recolour(photo), region(photo.shape, whole))
    v = offline_check(photo, fake, {"kind": "recolor", "change_bbox": whole, "params": {}})
    assert v["verdict"] == "KEEP", v["rationale"]
    assert v["measurements"]["colour_cast"] == 0.0


def test_an_imported_edit_keeps_a_listed_kind_forenset_has_no_instruction_kind_for():
    from forenset.backends.edit_strength import change_of
    from forenset.tasks.candidates import external_instruction

    blur = external_instruction({"row": 3, "kind": "blur", "bbox": BOX, "instruction": "Blur it"})
    assert blur["kind"] == "external" and blur["params"]["listed_kind"] == "blur"
    assert change_of(blur) == "blur"
    recolor = external_instruction({"row": 4, "kind": "recolor", "bbox": BOX})
    assert "listed_kind" not in recolor["params"] and change_of(recolor) == "colour"
    assert change_of(external_instruction({"row": 5})) == "any"
