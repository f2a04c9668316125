"""Offline explanations: each kind is its own row and its own try (errors keyed like rows)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import skimage.data
from PIL import Image

from forenset.backends.offline_explain import (
    GRAINLESS,
    PERIODIC,
    complex_generated,
    generated_evidence,
    simple_generated,
)
from forenset.config import validate_config
from forenset.images import encode_png
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.tasks.explain import Explanations
from tests.conftest import small_config_dict

INSTRUCTION = {"edit_type": "recolor", "target": "red car", "change_bbox": [0.2, 0.2, 0.6, 0.6]}
DIFFERENCE = {
    "id": "d1",
    "region": "centre",
    "change_type": "colour change",
    "description": "colour change over 16.0% of the image at the centre",
    "salience": 3,
    "bbox": [0.2, 0.2, 0.6, 0.6],
    "area": 0.16,
    "magnitude": 0.3,
}


def rows(store: RunStore) -> list[dict]:
    photo = store.put_blob(encode_png(Image.fromarray(skimage.data.astronaut()[:96, :96])))
    base = {"split": "train", "blob": photo, "source_blob": photo, "caption": "an astronaut"}
    return [
        {**base, "sample_id": "f1", "label": "fake", "instruction": json.dumps(INSTRUCTION),
         "differences": json.dumps([DIFFERENCE]), "entities": None},
        {**base, "sample_id": "f2", "label": "fake", "instruction": json.dumps(INSTRUCTION),
         "differences": None, "entities": None},
        {**base, "sample_id": "r1", "label": "real", "instruction": None, "differences": None,
         "entities": None, "blob": "0" * 64},
    ]  # fmt: skip


def explain(tmp_path, **explanations) -> dict[str, dict]:
    cfg = validate_config(small_config_dict(tmp_path / "run", explanations=explanations))
    store = RunStore(str(cfg.run_dir))
    stage = Explanations(StageContext(store, cfg))
    out = stage.strategy().run(pa.Table.from_pylist(rows(store)), None)
    stage.to_table(out)  # the stage contract holds for every row
    return {r["explanation_id"]: r for r in out}


def test_a_failing_simple_text_keeps_the_complex_one(tmp_path):
    got = explain(tmp_path, max_words={"complex": 160, "simple": 3, "authenticity": 140})
    assert got["f1-complex"]["status"] == "ok" and "red car" in got["f1-complex"]["text"]
    simple = got["f1-simple"]
    assert simple["status"] == "error" and simple["kind"] == "simple"
    assert (
        "simple explanation failed validation" in simple["error"]
        and "outside 12–3" in simple["error"]
    )
    assert not simple["retryable"]


def test_error_rows_are_keyed_by_explanation_id_never_none(tmp_path):
    got = explain(tmp_path)
    assert sorted(got) == ["f1-complex", "f1-simple", "f2-complex", "f2-simple", "r1-authenticity"]
    assert [got[k]["status"] for k in ("f1-complex", "f1-simple")] == ["ok", "ok"]
    for k in ("f2-complex", "f2-simple"):  # text-to-image (no difference record): measured
        assert got[k]["status"] == "ok" and got[k]["sample_id"] == "f2"
        assert "generated" in got[k]["text"] and got[k]["entities_mentioned"]
    unreadable = got["r1-authenticity"]  # a missing blob: retryable, keyed, its kind named
    assert unreadable["status"] == "error" and unreadable["retryable"]
    assert unreadable["kind"] == "authenticity" and unreadable["sample_id"] == "r1"


def test_text_to_image_explanations_state_what_the_pixels_measure():
    """No canned text: a grain-free render with a periodic upsampling grid and a grainy one
    without any get different, measured statements (the numbers are generated_evidence's)."""
    yy, xx = np.mgrid[:96, :96]
    smooth = np.clip(64 + yy + xx // 2, 0, 255).astype(np.float64)
    grid = smooth + 12.0 * ((yy % 2 == 0) & (xx % 2 == 0))  # a 2-pixel checker, like upsampling
    rng = np.random.default_rng(3)
    grainy = smooth + rng.normal(0, 6, smooth.shape)

    def rgb(a):
        return np.repeat(np.clip(a, 0, 255).astype(np.uint8)[..., None], 3, axis=2)

    ev_grid, ev_grainy = generated_evidence(rgb(grid)), generated_evidence(rgb(grainy))
    assert ev_grid["peak_ratio"] >= PERIODIC > ev_grainy["peak_ratio"]
    assert ev_grainy["noise_min"] > GRAINLESS
    text = complex_generated(ev_grid, "grey region at the top left")
    assert "repeating pattern of the kind upsampling layers leave" in text
    assert f"{ev_grid['noise_min']:.1f} to {ev_grid['noise_max']:.1f} grey levels" in text
    assert "no repeating pattern stands out" in complex_generated(ev_grainy, "sky")
    assert "repeating grid" in simple_generated(ev_grid, "sky")
    assert "repeating grid" not in simple_generated(ev_grainy, "sky")
