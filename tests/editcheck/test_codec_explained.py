"""rules-v6: a partial or off-target DISCARD whose difference a re-encode of the source explains
(``edit_strength.codec_explained``) is missing; a blend or an edit elsewhere is not explained."""

import cv2
import numpy as np
import pytest

from forenset.backends.edit_strength import (
    StrengthRules,
    codec_explained,
    codec_window,
    measure,
    reencode,
)
from forenset.backends.rule_judge import RULE_VERSION, judge_measured
from forenset.tasks.judgments import JudgmentsConfig, rule_record

BOX = [0.3, 0.3, 0.7, 0.7]
CORE = [0.34, 0.34, 0.66, 0.66]  # an editor's mask fills ~3/4 of its box
ELSEWHERE = [0.02, 0.02, 0.26, 0.26]
RECOLOUR = {
    "kind": "recolor",
    "text": "Give the marked region a different colour",
    "change_bbox": BOX,
}
REMOVAL = {"kind": "removal", "text": "Remove the marked object", "change_bbox": BOX}
# the artefact limits out of the way: this is about the category of a weak edit
ART = {"blockiness": 9.0, "noise_residual": 9.0, "colour_cast": 9.0}


@pytest.fixture(scope="module")
def checker():
    """A noisy coloured checker (the clone editor's renders): a re-encode changes its sharp
    edges inside the target as much as anywhere."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:96, :96]
    c = (((yy // 6) + (xx // 6)) % 2 * 160 + 40).astype(np.float32)
    img = np.stack([c, c / 2 + 60, 255 - c], -1) + rng.normal(0, 6, (96, 96, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def blend(img, alpha, box=CORE, colour=(230, 60, 200)):
    h, w = img.shape[:2]
    a = np.zeros((h, w, 1), np.float32)
    a[int(box[1] * h) : int(box[3] * h), int(box[0] * w) : int(box[2] * w)] = alpha
    out = img * (1 - a) + np.array(colour, np.float32) * a
    return np.clip(out, 0, 255).round().astype(np.uint8)


@pytest.mark.parametrize("fmt,q", [("JPEG", 91), ("WEBP", 87), ("JPEG", 75)])
def test_a_re_encode_is_explained(checker, fmt, q):
    """Any quality of either format, odd ones too (found beside the grid's step of 2)."""
    c = codec_explained(checker, reencode(checker, fmt, q), RECOLOUR)
    assert c["codec"] == f"{fmt} {q}", c
    assert c["codec_weak"] == 0.0 and c["codec_piece"] == 0.0, c
    # without the explanation the re-encode touches most of the target
    assert measure(checker, reencode(checker, fmt, q), RECOLOUR)["weak_coverage"] > 0.5


def test_a_blend_or_an_edit_elsewhere_is_not_explained(checker):
    weak = codec_explained(checker, reencode(blend(checker, 0.3), "JPEG", 88), RECOLOUR)
    assert weak["codec"] == "JPEG 88" and weak["codec_weak"] > 0.3, weak
    away = reencode(blend(checker, 1.0, ELSEWHERE), "WEBP", 90)
    off = codec_explained(checker, away, RECOLOUR)
    assert off["codec_weak"] < 0.02 and off["codec_piece"] > 0.02, off
    # an untouched, unencoded candidate: nothing to explain
    assert codec_explained(checker, checker.copy(), RECOLOUR)["codec"] == "none"


def rules(codec_missing=None):
    return StrengthRules(artefacts=ART, codec_missing=codec_missing)


@pytest.mark.parametrize("ins", [RECOLOUR, REMOVAL])
def test_a_re_encoded_missing_edit_is_missing(checker, ins):
    fake = reencode(checker, "JPEG", 87)
    m, rec = rule_record(checker, fake, ins, JudgmentsConfig(strength=rules()))
    # the codec's change of the sharp edges reads as a weak edit: partial
    assert (rec["verdict"], rec["failure_category"]) == ("DISCARD", "edit_partial")
    assert "codec" not in m  # rule off: the re-encodes are not paid for
    m, rec = rule_record(checker, fake, ins, JudgmentsConfig(strength=rules(0.02)))
    assert (rec["verdict"], rec["failure_category"]) == ("DISCARD", "edit_missing")
    assert m["codec"] == "JPEG 87" and "re-encode of the source (JPEG 87)" in rec["rationale"]


def test_a_weak_blend_stays_partial_and_an_edit_elsewhere_off_target(checker):
    cfg = JudgmentsConfig(strength=rules(0.02))
    _, rec = rule_record(checker, reencode(blend(checker, 0.3), "WEBP", 86), RECOLOUR, cfg)
    assert (rec["verdict"], rec["failure_category"]) == ("DISCARD", "edit_partial")
    away = reencode(blend(checker, 1.0, ELSEWHERE), "JPEG", 90)
    _, rec = rule_record(checker, away, RECOLOUR, cfg)
    assert (rec["verdict"], rec["failure_category"]) == ("DISCARD", "off_target")


def test_verdicts_never_change_and_kept_edits_are_not_measured(checker):
    fake = reencode(blend(checker, 1.0, BOX), "JPEG", 90)
    m, rec = rule_record(checker, fake, RECOLOUR, JudgmentsConfig(strength=rules(0.08)))
    assert rec["verdict"] == "KEEP" and "codec" not in m
    # the rule moves a category, never a verdict
    m = {
        **measure(checker, reencode(checker, "JPEG", 87), REMOVAL),
        **codec_explained(checker, reencode(checker, "JPEG", 87), REMOVAL),
    }
    for x in (None, 0.01, 0.08):
        v = judge_measured(REMOVAL, m, rules(x), offtarget_dominance=1.0)
        assert v["verdict"] == "DISCARD"


def test_a_large_image_is_read_in_a_window_around_the_target(checker):
    small = [0.4, 0.4, 0.55, 0.55]
    ins = {**RECOLOUR, "change_bbox": small}
    big = cv2.resize(checker, (1040, 820), interpolation=cv2.INTER_NEAREST)
    y0, y1, x0, x1 = codec_window(small, 820, 1040)
    assert y0 % 16 == 0 and x0 % 16 == 0 and (y1 - y0) * (x1 - x0) < 820 * 1040 / 2
    c = codec_explained(big, reencode(big, "WEBP", 90), ins)
    # WebP predicts from neighbouring blocks, so a window's re-encode is near, not exact
    assert c["codec"] in ("WEBP 89", "WEBP 90", "WEBP 91") and c["codec_weak"] < 0.01, c
    j = codec_explained(big, reencode(big, "JPEG", 83), ins)
    assert j["codec"] == "JPEG 83" and j["codec_weak"] == 0.0, j
    # an edit far from the target, outside the window, still counts (measured on the whole)
    away = reencode(blend(big, 1.0, [0.0, 0.0, 0.08, 0.08]), "WEBP", 90)
    assert codec_explained(big, away, ins)["codec_piece"] > 0.003


@pytest.fixture(scope="module")
def photo():
    """A yellow-green textured field."""
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 1, (96, 96, 3)).astype(np.float32)
    base = np.array([170, 180, 40], np.float32)
    return np.clip(base + 12 * cv2.GaussianBlur(noise, (0, 0), 1.0), 0, 255).astype(np.uint8)


def test_a_re_encodes_quantisation_noise_is_not_an_artefact(checker, photo):
    noise_only = {"blockiness": 9.0, "noise_residual": 1.8, "colour_cast": 9.0}
    off = JudgmentsConfig(strength=StrengthRules(artefacts=noise_only, codec_noise=False))
    on = JudgmentsConfig(strength=StrengthRules(artefacts=noise_only, codec_noise=True))
    # a complete recolour, re-encoded: the codec's requantisation of the checker's edges
    # reads as noise outside the target
    good = reencode(blend(checker, 1.0, BOX), "JPEG", 90)
    m, rec = rule_record(checker, good, RECOLOUR, off)
    assert m["noise_residual"] > 1.8 and rec["failure_category"] == "severe_artifacts"
    assert "codec" not in m
    m, rec = rule_record(checker, good, RECOLOUR, on)
    assert m["codec"] == "JPEG 90" and m["codec_noise"] <= 1.8, m
    assert rec["verdict"] == "KEEP", rec
    # added noise is not explained by any re-encode
    rng = np.random.default_rng(1)
    noisy = blend(photo, 1.0, BOX) + rng.normal(0, 6, photo.shape[:2])[..., None]
    noisy = np.clip(noisy, 0, 255).astype(np.uint8)
    m, rec = rule_record(photo, noisy, RECOLOUR, on)
    assert (rec["verdict"], rec["failure_category"]) == ("DISCARD", "severe_artifacts"), m
    assert m["codec_noise"] > 1.8, m


def test_the_shipped_default_reads_a_re_encode_as_missing(checker):
    # rules-v8 defaults: the leave-one-editor-out grid's choice on all three bench editors
    assert StrengthRules().codec_missing == 0.08 and StrengthRules().codec_noise
    fake = reencode(checker, "WEBP", 92)
    # (the shipped noise limit reads this re-encode of the checker as noise: out of the way)
    cfg = JudgmentsConfig(strength=StrengthRules(artefacts=ART))
    m, rec = rule_record(checker, fake, REMOVAL, cfg)
    assert (rec["verdict"], rec["failure_category"]) == ("DISCARD", "edit_missing"), rec
    assert m["codec"] == "WEBP 92" and rec["rule_version"] == RULE_VERSION
