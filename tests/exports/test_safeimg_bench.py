"""SafeIMG assembly and scores on a tiny hand-made run (real tables, real blobs)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pyarrow as pa
import pytest

from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.benchmarks.evaluation.schemas import detections
from forenset.benchmarks.safeimg.sets import (
    assemble,
    format_tables,
    run_safeimg,
    simulate_annotations,
)
from forenset.exports.labelstudio import annotation_rows, store_annotation_rows
from forenset.images import encode_png
from forenset.schemas import candidates, sources, splits
from forenset.store.run_store import RunStore


def _put(store, stage, schema, rows):
    info = store.write_shard(
        stage,
        "s0",
        pa.Table.from_pylist(rows, schema=schema),
        fingerprint="x",
        counts={"ok": len(rows), "error": 0},
        content_columns=[schema.names[0], "status"],
    )
    b64 = base64.b64encode(schema.serialize().to_pybytes()).decode()
    store.write_manifest(stage, [info], {"schema": b64})


@pytest.fixture
def run(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    blob = store.put_blob(encode_png(np.full((8, 8, 3), 90, np.uint8)))
    fakes = {"g1": "P3", "g2": "P3", "g3": "I2", "g4": "I2", "g5": "P1", "g6": "P1"}
    _put(
        store,
        "candidates",
        candidates.SCHEMA,
        [
            {"candidate_id": f"c-{s}", "kind": "t2i", "family": c, "blob": blob, "status": "ok"}
            for s, c in fakes.items()
        ]
        + [
            {
                "candidate_id": "c-edit",
                "kind": "splice",
                "family": "object",
                "blob": blob,
                "status": "ok",
            }
        ],
    )
    _put(
        store,
        "splits",
        splits.SCHEMA,
        [
            {
                "sample_id": s,
                "label": "fake",
                "candidate_id": f"c-{s}",
                "blob": blob,
                "status": "ok",
            }
            for s in fakes
        ]
        + [
            {
                "sample_id": "edit1",
                "label": "fake",
                "candidate_id": "c-edit",
                "blob": blob,
                "status": "ok",
            }
        ]
        + [
            {
                "sample_id": f"r{i}",
                "label": "real",
                "image_id": f"i{i}",
                "blob": blob,
                "status": "ok",
            }
            for i in range(4)
        ],
    )
    _put(
        store,
        "sources",
        sources.SCHEMA,
        [
            {"image_id": "i0", "uri": "/data/real/P3/a.jpg", "status": "ok"},
            {"image_id": "i1", "uri": "/data/real/P3/b.jpg", "status": "ok"},
            {
                "image_id": "i2",
                "uri": "/data/real/Private Receipts and Transaction Records/c.png",
                "status": "ok",
            },
            {"image_id": "i3", "uri": "/data/real/misc/d.png", "status": "ok"},
        ],
    )
    return store


def _ls_export():
    def task(tid, sid, choice, regions=()):
        res = [
            {
                "from_name": "triage",
                "to_name": "image",
                "type": "choices",
                "value": {"choices": [choice]},
            }
        ]
        for rid, lab, box, why in regions:
            v = {"x": box[0], "y": box[1], "width": box[2], "height": box[3], "rotation": 0}
            res.append(
                {
                    "id": rid,
                    "from_name": "anomaly",
                    "to_name": "image",
                    "type": "rectanglelabels",
                    "value": {**v, "rectanglelabels": [lab]},
                }
            )
            res.append(
                {
                    "id": rid,
                    "from_name": "why",
                    "to_name": "image",
                    "type": "textarea",
                    "value": {**v, "text": [why]},
                }
            )
        return {
            "id": tid,
            "data": {"sample_id": sid},
            "annotations": [{"id": tid, "result": res, "created_at": "2026-12-05"}],
        }

    return [
        task(
            1,
            "g1",
            "ann",
            [
                ("a", "text", (0, 0, 50, 50), "sign letters melt"),
                ("b", "physics", (50, 50, 50, 50), "car floats"),
            ],
        ),
        task(2, "g2", "hard"),
        task(3, "g3", "ann", [("c", "hands", (0, 0, 20, 20), "six fingers")]),
        task(4, "g4", "invalid"),
        task(5, "g5", "ann"),  # ann without a region: excluded (K = 0)
        task(6, "g6", "hard"),  # no detector answered it
    ]


def test_assembly_builds_the_papers_sets(run):
    store_annotation_rows(run, annotation_rows(_ls_export(), "h"), "import-h", "h", append=False)
    t = assemble(run, per_category=1, seed=1)
    assert [r["sample_id"] for r in t["D_ann"]] == ["g1", "g3"]
    assert [r["sample_id"] for r in t["D_hard"]] == ["g2", "g6"]
    assert t["D_ann"][0]["category_name"] == "Transportation Accidents"
    assert [(a["label"], a["text"]) for a in t["D_ann"][0]["anomalies"]] == [
        ("text", "sign letters melt"),
        ("physics", "car floats"),
    ]
    assert {r["sample_id"]: r["reason"] for r in t["excluded"]} == {
        "g4": "triaged invalid (eq. 7)",
        "g5": "triaged ann but no region annotated (K = 0, eq. 10)",
    }
    reals = [r for r in t["D_real"] if r.get("sample_id")]
    # 1 per category drawn, then the uncategorised real
    assert [r["category"] for r in reals] == ["P3", "I2", None]
    # the uncategorised real fills what the categories leave of 1 x 12
    assert t["D_real"][-1] == {"sample_id": None, "uncategorised": 1, "uncategorised_drawn": 1}


def test_scores_from_detections_hand_computed(run, tmp_path):
    store_annotation_rows(run, annotation_rows(_ls_export(), "h"), "import-h", "h", append=False)

    def det(sid, ans, expl="", variant="0x", bbox=None):
        return {
            "detection_id": f"d/complex/{sid}/{variant}",
            "detector": "d",
            "track": "complex",
            "sample_id": sid,
            "variant": variant,
            "answer": ans,
            "explanation": expl,
            "bbox": json.dumps(bbox) if bbox else None,
            "status": "ok",
        }

    _put(
        run,
        "detections",
        detections.SCHEMA,
        [
            det("g1", "fake", "The sign text is garbled. The sky is flat."),
            det("g2", "real"),
            det("g3", "fake", "Colours look fine"),
            det("g1", "real", variant="1x"),
            det("g2", "real", variant="1x"),
            det("r0", "real"),
            det("r1", "fake"),
            det("r2", "real"),
        ],
    )
    res = run_safeimg(run, per_category=5, seed=1, out=tmp_path / "b")
    t2 = res["table2"]
    assert t2["D_SafeIMG"]["d/complex"]["P3"]["value"] == 0.5  # g1 yes, g2 no
    assert t2["D_SafeIMG"]["d/complex"]["I2"]["value"] == 1.0  # g3 (g4 invalid: excluded)
    assert t2["D_SafeIMG"]["d/complex"]["Overall"]["value"] == pytest.approx(2 / 3)
    assert t2["D_hard"]["d/complex"]["Overall"]["value"] == 0.0
    # g6 (P1, hard) has no detection: neither hit nor miss, and the coverage says so
    assert t2["D_SafeIMG"]["d/complex"]["P1"] == {
        "value": None,
        "n": 0,
        "reason": "no generated images",
        "ci_low": None,
        "ci_high": None,
        "ci_reason": "no value",
    }
    assert res["coverage"]["d/complex"]["D_SafeIMG"] == [3, 4]
    assert res["real_accuracy"]["d/complex"]["P3"]["value"] == 0.5  # r0 real, r1 fake
    assert res["propagation"]["d/complex"]["1x"]["value"] == 0.0
    t3 = res["table3"]["d/complex"]
    # g1: text hit (sign/text), physics not -> 1/2; rationale 1 hits, 2 does not -> 1/2
    # g3: hands not hit by "Colours look fine" -> 0; its one rationale supports nothing -> 0
    assert t3["Human Covered by AI"]["Overall"]["value"] == pytest.approx(0.25)
    assert t3["AI Supported by Human"]["Overall"]["value"] == pytest.approx(0.25)
    assert t3["Human Covered by AI"]["P3"]["value"] == 0.5
    assert res["hit_rate"]["d/complex"]["text"]["value"] == 1.0
    assert res["hit_rate"]["d/complex"]["hands"]["value"] == 0.0
    assert res["matcher"] == "offline-vocab-box-v1"
    # no false negative in D_ann (g1, g3 both detected): delta undefined
    delta = res["delta"]["d/complex"]["Overall"]["text"]
    assert delta["value"] is None and delta["reason"] == "no false negative (missed image)"
    # issue 31: every number has n, a seeded interval or the reason, a caveat under min_n
    overall = t2["D_SafeIMG"]["d/complex"]["Overall"]
    assert overall["n"] == 3 and overall["ci_low"] <= overall["value"] <= overall["ci_high"]
    assert overall["caveat"] == "n = 3 is below the minimum of 10 items"
    again = run_safeimg(run, per_category=5, seed=1, out=tmp_path / "c")
    assert again["table2"] == t2  # seeded: the same intervals
    none = run_safeimg(
        run, per_category=5, seed=1, out=tmp_path / "d", intervals=IntervalsConfig(resamples=0)
    )
    cell = none["table2"]["D_SafeIMG"]["d/complex"]["Overall"]
    assert cell["ci_low"] is None and cell["ci_reason"] == "intervals.resamples is 0"
    loose = run_safeimg(
        run, per_category=5, seed=1, out=tmp_path / "e", intervals=IntervalsConfig(min_n=1)
    )
    assert "caveat" not in loose["table2"]["D_SafeIMG"]["d/complex"]["Overall"]
    text = format_tables(res)
    assert "Table 2" in text and "Table 3" in text and "SIMULATED" not in text
    assert "95% CI" in text and "not meaningful (" in text and "below the minimum of 10" in text
    # adding a metric = its scorer + a registry entry in scope of a table: score() scores it on
    # that table's items (the built-ins keep their numbers), the CLI's and report's pivots show it
    from forenset.benchmarks.common import scoring
    from forenset.benchmarks.safeimg.sets import pivots

    before = res
    unsure = scoring.ItemMean(
        "unparsed", "unparsed answers", lambda i: float(i["answer"] not in ("real", "fake")),
        needs=("answer",), scope={"table": ("table2",)}, percent=True,
    )  # fmt: skip
    scoring.register("safeimg", unsure)
    try:
        res = run_safeimg(run, per_category=5, seed=1, out=tmp_path / "f")
        titles = [t for t, _ in pivots(res)]
        text = format_tables(res)
    finally:
        scoring.unregister("safeimg", "unparsed")
    assert res["table2"] == before["table2"] and res["table3"] == before["table3"]
    mine = {r["score_id"]: r for r in res["scores"] if r["metric"] == "unparsed"}
    overall = mine["table2/unparsed/d/complex/D_SafeIMG/Overall"]
    assert overall["value"] == 0.0 and overall["n"] == 3
    assert len(res["scores"]) == len(before["scores"]) + len(mine)
    assert "Table 2 - AI detection rate (%) on D_SafeIMG (eq. 12): unparsed answers" in titles
    assert "on D_SafeIMG (eq. 12): unparsed answers" in text
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "b" / "D_ann.parquet"), split="train"
    )
    assert ds.num_rows == 2 and ds[0]["anomalies"][0]["label"] == "text"


def test_simulated_annotations_are_labelled(run):
    counts = simulate_annotations(run, seed=4)
    assert sum(counts.values()) == 6
    t = assemble(run)
    rows = t["D_ann"] + t["D_hard"] + t["excluded"]
    assert len(rows) == 6 and all(r["simulated"] for r in rows)
    assert all("simulated" in a["text"] for r in t["D_ann"] for a in r["anomalies"])


def test_cli_simulated_demo_prints_both_tables(run):
    from typer.testing import CliRunner

    from forenset.cli import app

    res = CliRunner().invoke(app, ["safeimg", str(run.root), "--simulate"])
    assert res.exit_code == 0, res.output
    assert "simulated triage" in res.output and "SIMULATED annotations" in res.output
    assert "Table 2" in res.output and "Table 3" in res.output
    scores = json.loads(open(run.path("benchmarks/safeimg/scores.json")).read())
    assert scores["simulated_annotations"] is True and scores["counts"]["D_SafeIMG"] >= 1


def test_report_section_shows_the_tables(run):
    from forenset.benchmarks.safeimg.report import safeimg_section

    assert safeimg_section(run) == ""  # no scores yet: no section
    _put(
        run,
        "detections",
        detections.SCHEMA,
        [
            {
                "detection_id": f"d/{s}",
                "detector": "d",
                "track": "complex",
                "sample_id": s,
                "variant": "0x",
                "answer": "real",
                "status": "ok",
            }
            for s in ("g1", "g2", "g3")
        ],
    )
    simulate_annotations(run, seed=2)
    run_safeimg(run, per_category=5)
    out = safeimg_section(run)
    assert "AI detection rate (%) on D_SafeIMG" in out and "Human-AI alignment" in out
    assert "SIMULATED" in out and "Transportation" not in out  # columns are ids P1..I4
    assert "<th>P3</th>" in out and "<th>Overall</th>" in out
    assert "<td>Public</td>" in out and "<td>Individual</td>" in out  # eq. 13 scopes


def test_labelstudio_task_names_the_intended_category(run):
    from forenset.exports.labelstudio import _data

    s = {
        "sample_id": "g1",
        "label": "fake",
        "split": "test",
        "generator": "flux",
        "caption": "a truck on its side after a crash",
        "instruction_obj": {"category": "P3", "scenario_id": "P3-abc"},
    }
    d = _data(s, "u")
    assert d["category"] == "P3 Transportation Accidents"
    assert d["intended"] == "a truck on its side after a crash"
    e = _data({**s, "instruction_obj": {"text": "remove the cup"}}, "u")
    assert (e["category"], e["intended"]) == ("", "remove the cup")


def test_reals_without_any_category_form_an_uncategorised_d_real(tmp_path):
    """Photos from a folder or CSV carry no safety category: D_real is then an uncategorised
    draw of per_category x categories (scored overall), not empty; categorised runs keep the
    per-category draw (test above)."""
    store = RunStore(str(tmp_path / "run"))
    blob = store.put_blob(encode_png(np.full((8, 8, 3), 90, np.uint8)))
    reals = [
        {"sample_id": f"r{i}", "label": "real", "image_id": f"i{i}", "blob": blob, "status": "ok"}
        for i in range(30)
    ]
    _put(store, "splits", splits.SCHEMA, reals)
    _put(
        store,
        "sources",
        sources.SCHEMA,
        [
            {"image_id": f"i{i}", "uri": f"/photos/tiles/t{i}.png", "status": "ok"}
            for i in range(30)
        ],
    )
    d_real = assemble(store, per_category=2, seed=1)["D_real"]
    drawn = [r for r in d_real if r.get("sample_id")]
    assert len(drawn) == 24 and all(r["category"] is None for r in drawn)  # 2 x 12 categories
    assert d_real[-1] == {"sample_id": None, "uncategorised": 30, "uncategorised_drawn": 24}
    again = assemble(store, per_category=3, seed=1)["D_real"]
    assert {r["sample_id"] for r in drawn} <= {r["sample_id"] for r in again if r.get("sample_id")}


def test_reals_get_their_category_from_caption_words(tmp_path):
    """A real whose caption names a category's content (two or more of its specific words) is
    drawn in that category, the method and words recorded; a caption of colours and textures
    only, or one shared word, stays uncategorised (no guess)."""
    store = RunStore(str(tmp_path / "run"))
    blob = store.put_blob(encode_png(np.full((8, 8, 3), 90, np.uint8)))
    captions = {
        "i0": "A bus overturned on a motorway after a collision, police tape around it.",
        "i1": "A till receipt from a supermarket lying on a kitchen table.",
        "i2": "A dark square colour photograph with smooth areas, lighter at the bottom.",
        "i3": "A red bus parked in the sun.",  # one specific word: chance, not a category
    }
    reals = [
        {"sample_id": f"r{i}", "label": "real", "image_id": f"i{i}", "blob": blob, "status": "ok"}
        for i in range(4)
    ]
    _put(store, "splits", splits.SCHEMA, reals)
    _put(
        store,
        "sources",
        sources.SCHEMA,
        [
            {"image_id": iid, "uri": f"/photos/{iid}.png", "caption": c, "status": "ok"}
            for iid, c in captions.items()
        ],
    )
    d_real = assemble(store, per_category=5, seed=1)["D_real"]
    drawn = {r["image_id"]: r for r in d_real if r.get("sample_id")}
    assert {k: (r["category"], r["category_method"]) for k, r in drawn.items()} == {
        "i0": ("P3", "caption-match"),
        "i1": ("I2", "caption-match"),
        "i2": (None, None),  # uncategorised, filling the draw's size
        "i3": (None, None),
    }
    assert {"bus", "collision", "motorway"} <= set(drawn["i0"]["category_words"].split(", "))
    assert d_real[-1] == {"sample_id": None, "uncategorised": 2, "uncategorised_drawn": 2}
