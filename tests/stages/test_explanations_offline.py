"""Offline explanations: each kind is its own row and its own try (errors keyed like rows)."""

from __future__ import annotations

import json

import pyarrow as pa
import skimage.data
from PIL import Image

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
    for k in ("f2-complex", "f2-simple"):  # no difference record: both kinds, explained
        assert got[k]["status"] == "error" and "need a difference record" in got[k]["error"]
        assert got[k]["sample_id"] == "f2" and not got[k]["retryable"]
    unreadable = got["r1-authenticity"]  # a missing blob: retryable, keyed, its kind named
    assert unreadable["status"] == "error" and unreadable["retryable"]
    assert unreadable["kind"] == "authenticity" and unreadable["sample_id"] == "r1"
