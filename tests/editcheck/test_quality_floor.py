"""Edit-Check's core quality figure as a CI floor: DISCARD precision and recall against the
faults a faulty offline generator injects (seeded, ~2 s). bench/editcheck_accuracy.py keeps the
headline figure on full builds; this fails the suite when a change to differencing, the rule
judge or the verdict rule lowers it."""

from __future__ import annotations

import itertools

import numpy as np
from PIL import Image

from forenset.backends.image.base import EditRequest
from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.image.offline import OfflineEditor
from forenset.backends.offline_diff import ground, pixel_differences
from forenset.backends.rule_judge import aggregate, judge
from forenset.perturbations.photos import photos
from forenset.tasks.diffs import DiffsConfig
from forenset.tasks.judgments import JudgmentsConfig
from forenset.tasks.verdicts import VerdictsConfig

# measured 2026-12-05 with these seeds: precision 0.962, recall 1.000 (72 candidates, 50 faulty)
FLOOR = {"precision": 0.9, "recall": 0.95}

BOXES = [[0.3, 0.3, 0.65, 0.65], [0.05, 0.55, 0.4, 0.95], [0.55, 0.05, 0.95, 0.4]]
KINDS = [
    ("recolor", {"colour": "blue"}),
    ("removal", {}),
    ("copy_move", {}),
    ("splice", {}),
    ("liquify", {"mode": "bulge"}),
    ("lighting", {"gain": 0.5}),
]


def verdicts() -> list[tuple[str, bool]]:
    """(injected fault, kept) per candidate, through the default Edit-Check configuration."""
    gen = GeneratorConfig(
        name="faulty",
        family="faulty",
        faults={"missing": 0.15, "partial": 0.15, "offtarget": 0.15, "artifacts": 0.15},
    )
    editor = OfflineEditor(gen)
    d, j, v = DiffsConfig(), JudgmentsConfig(), VerdictsConfig()
    out = []
    for i, (img, (kind, params), box) in enumerate(
        itertools.product(photos(128)[:4], KINDS, BOXES)
    ):
        src = [1 - box[2], 1 - box[3], 1 - box[0], 1 - box[1]]
        ins = {
            "kind": kind,
            "change_bbox": box,
            "bbox": src if kind == "copy_move" else box,
            "params": params,
        }
        res = editor.edit([EditRequest(Image.fromarray(img), ins, seed=1000 + i)])[0]
        fake = np.asarray(res.image)
        px = pixel_differences(
            img,
            fake,
            threshold=d.threshold,
            min_region_frac=d.min_region_frac,
            max_regions=d.max_regions,
        )
        rec = judge(
            ins,
            px["differences"],
            offtarget_dominance=j.offtarget_dominance,
            max_offtarget_frac=j.max_offtarget_frac,
            grounding=ground(px["differences"], px["mask"]),
        )
        agg = aggregate(
            [rec],
            combine=v.combine,
            keep_score=v.keep_score,
            borderline_score=v.borderline_score,
            hard_discard=v.hard_discard,
            decide=v.decide,
        )
        keep = agg["verdict"] == "KEEP" or (
            agg["verdict"] == "BORDERLINE" and v.borderline_policy == "keep"
        )
        out.append((res.truth["fault"], keep))
    return out


def test_editcheck_precision_recall_floor():
    rows = verdicts()
    tp = sum(1 for f, k in rows if f != "none" and not k)
    fp = sum(1 for f, k in rows if f == "none" and not k)
    fn = sum(1 for f, k in rows if f != "none" and k)
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    faults = sum(1 for f, _ in rows if f != "none")
    assert 20 <= faults <= len(rows) - 20, "the seeds must give both faulty and clean candidates"
    figures = f"precision {precision:.3f}, recall {recall:.3f} over {len(rows)} candidates"
    assert precision >= FLOOR["precision"] and recall >= FLOOR["recall"], figures
