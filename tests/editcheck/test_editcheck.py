"""Edit-Check parts on real pixels: differencing, grounding, the rule judge, aggregation."""

import numpy as np
import pytest
import skimage.data

from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.image.offline import OfflineEditor
from forenset.backends.offline_diff import ground, pixel_differences
from forenset.backends.rule_judge import aggregate, judge

J = {"offtarget_dominance": 1.0, "max_offtarget_frac": 0.06}


@pytest.fixture(scope="module")
def photo():
    import cv2

    return cv2.resize(skimage.data.astronaut(), (128, 128), interpolation=cv2.INTER_AREA)


def edit(photo, kind, box, **params):
    from PIL import Image

    from forenset.backends.image.base import EditRequest

    ins = {"kind": kind, "change_bbox": box, "bbox": box, "params": params}
    res = OfflineEditor(GeneratorConfig(name="t")).edit(
        [EditRequest(Image.fromarray(photo), ins, seed=1)]
    )[0]
    return ins, np.asarray(res.image)


def test_identical_images_have_no_differences(photo):
    d = pixel_differences(photo, photo.copy())
    assert d["differences"] == [] and d["changed_frac"] == 0.0


@pytest.mark.parametrize(
    "kind,params",
    [
        ("recolor", {"colour": "blue"}),
        ("removal", {}),
        ("liquify", {"mode": "bulge"}),
        ("lighting", {"gain": 0.5}),
    ],
)
def test_local_edit_is_found_at_its_box_and_kept(photo, kind, params):
    box = [0.55, 0.6, 0.95, 0.98]  # the helmet
    ins, fake = edit(photo, kind, box, **params)
    d = pixel_differences(photo, fake)
    assert d["differences"], kind
    top = d["differences"][0]
    cx, cy = (top["bbox"][0] + top["bbox"][2]) / 2, (top["bbox"][1] + top["bbox"][3]) / 2
    assert box[0] - 0.05 <= cx <= box[2] + 0.05 and box[1] - 0.05 <= cy <= box[3] + 0.05
    assert 1 <= top["salience"] <= 5
    v = judge(ins, d["differences"], **J)
    assert v["verdict"] in ("KEEP", "BORDERLINE"), v


def test_edit_elsewhere_is_off_target_or_missing(photo):
    ins, fake = edit(photo, "recolor", [0.05, 0.05, 0.4, 0.4], colour="green")
    ins = dict(ins, change_bbox=[0.55, 0.6, 0.95, 0.98])  # the instruction asked for another place
    v = judge(ins, pixel_differences(photo, fake)["differences"], **J)
    assert v["verdict"] == "DISCARD" and v["failure_category"] in ("off_target", "edit_missing")


def test_grounding_flags_hallucinated_and_missed():
    mask = np.zeros((100, 100), np.uint8)
    mask[10:30, 10:30] = 1  # a real change, listed
    mask[60:90, 60:90] = 1  # a real change, not listed
    diffs = [
        {"id": "d1", "bbox": [0.1, 0.1, 0.3, 0.3], "change_type": "content change", "area": 0.04},
        {"id": "d2", "bbox": [0.6, 0.05, 0.8, 0.25], "change_type": "colour change", "area": 0.04},
    ]
    g = ground(diffs, mask)
    assert g["hallucinated"] == ["d2"]
    assert len(g["missed"]) == 1 and g["missed"][0]["bbox"] == [0.6, 0.6, 0.9, 0.9]
    assert g["hallucination_rate"] == 0.5


def test_judge_ignores_hallucinated_evidence():
    ins = {"change_bbox": [0.6, 0.05, 0.8, 0.25]}
    diffs = [
        {
            "id": "d2",
            "bbox": [0.6, 0.05, 0.8, 0.25],
            "change_type": "colour change",
            "area": 0.04,
            "salience": 3,
        }
    ]
    assert judge(ins, diffs, **J)["verdict"] == "KEEP"
    v = judge(ins, diffs, grounding={"hallucinated": ["d2"], "missed": []}, **J)
    assert v["failure_category"] == "edit_missing"


def test_aggregation_hard_discards_and_rethresholds():
    keep = {"final_score": 0.9, "failure_category": "none", "rationale": "ok"}
    off = {"final_score": 0.7, "failure_category": "off_target", "rationale": "scene rewritten"}
    rule = {
        "combine": "mean",
        "keep_score": 0.6,
        "borderline_score": 0.35,
        "hard_discard": ["off_target"],
    }
    assert aggregate([keep], **rule)["verdict"] == "KEEP"
    v = aggregate([keep, off], **rule)
    assert v["verdict"] == "DISCARD" and v["failure_category"] == "off_target"
    score = dict(rule, decide="score", keep_score=0.95)
    assert aggregate([keep], **score)["verdict"] == "BORDERLINE"


def test_verdict_is_the_judges_own_unless_score_is_asked():
    """decide='judge' (default): the judge's KEEP/BORDERLINE/DISCARD stands whatever its score;
    several judges vote, a tie goes to the stricter verdict; off-target still hard-discards."""
    rule = {
        "combine": "mean",
        "keep_score": 0.6,
        "borderline_score": 0.35,
        "hard_discard": ["off_target"],
    }
    low_keep = {"final_score": 0.2, "verdict": "KEEP", "failure_category": "none", "rationale": "a"}
    high_bl = {
        "final_score": 0.9,
        "verdict": "BORDERLINE",
        "failure_category": "ambiguous",
        "rationale": "b",
    }
    disc = {
        "final_score": 0.9,
        "verdict": "DISCARD",
        "failure_category": "edit_partial",
        "rationale": "c",
    }
    assert aggregate([low_keep], **rule)["verdict"] == "KEEP"
    assert aggregate([low_keep], **rule, decide="score")["verdict"] == "DISCARD"
    assert aggregate([high_bl], **rule)["verdict"] == "BORDERLINE"
    assert aggregate([low_keep, low_keep, disc], **rule)["verdict"] == "KEEP"
    v = aggregate([low_keep, disc], **rule)
    assert v["verdict"] == "DISCARD" and v["failure_category"] == "edit_partial"
    off = dict(low_keep, failure_category="off_target", verdict="KEEP")
    assert aggregate([off], **rule)["verdict"] == "DISCARD"


def test_statistics_queries_run_on_a_build(small_cfg, small_built):
    from forenset import stats
    from forenset.flows.local import run_local
    from forenset.stages import table_names
    from forenset.store.views import connect

    store, _, _ = run_local(small_cfg)  # the session's small build, copied: nothing to run
    con = connect(store, table_names())
    out = {name: stats.run(con, name) for name in stats.QUERIES}
    gens = {r[0] for r in out["discard_by_generator"][1]}
    assert gens == {"cv-a", "cv-faulty"}
    assert all(1 <= r[0] <= 5 for r in out["salience_histogram"][1])
    outcomes = {r[0] for r in out["fidelity_by_verdict"][1]}
    assert "retained" in outcomes and "discarded" in outcomes
    cols, pres = out["preservation_by_verdict"]
    by = {(r[0], r[1]): dict(zip(cols, r, strict=True)) for r in pres}
    assert ("ID", "retained") in by and ("ID", "discarded") in by
    assert all(r["psnr_outside"] is not None and r["lpips"] is None for r in by.values())
    assert "LPIPS: no model configured" in by[("ID", "retained")]["note"]
    ((extractor, records, rate, missed),) = out["hallucination_by_extractor"][1]
    assert extractor.startswith("offline/") and records > 0 and rate == 0.0
