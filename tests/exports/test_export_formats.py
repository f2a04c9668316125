"""Every export format over a real small build, read back with the tools that consume it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forenset.benchmarks.fakebench.exports import DIMENSIONS, KIND_DIMENSIONS, dimensions_for
from forenset.exports.api import run_export
from forenset.exports.data import balanced, eval_subset, load_samples
from forenset.exports.dataset import export_dataset
from forenset.exports.settings import ExportSettings, parse_eval_subset
from tests.helpers import rows


def test_samples_cover_both_labels_and_splits(built, samples):
    store, _ = built
    ok = [r for r in rows(store, "splits") if r["status"] == "ok"]
    assert sorted(s["sample_id"] for s in samples) == sorted(r["sample_id"] for r in ok)
    assert {s["label"] for s in samples} == {"real", "fake"}
    fakes = [s for s in samples if s["label"] == "fake"]
    assert all(s["explanation_complex"] and s["explanation_simple"] for s in fakes)
    assert all(s["license"] for s in samples)
    assert any(s["perturbed"] for s in samples)


def _hf_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


LOAD_SCRIPT = r"""
import glob, json, sys
import datasets
out = sys.argv[1]
files = {sp: sorted(glob.glob(f"{out}/data/{sp}-*.parquet")) for sp in ("train", "validation", "test")}
files = {k: v for k, v in files.items() if v}
d = datasets.load_dataset("parquet", data_files=files)
by_card = datasets.load_dataset(out)  # the card's configs/data_files
res = {}
for sp, ds in d.items():
    f = ds.features
    img = ds[0]["image"]
    pert = [p for r in ds for p in r["perturbed"]]
    res[sp] = {
        "n": ds.num_rows, "n_card": by_card[sp].num_rows,
        "label_type": type(f["label"]).__name__, "names": f["label"].names,
        "image_type": type(f["image"]).__name__, "size": list(img.size),
        "labels": list(ds["label"]), "ids": list(ds["sample_id"]),
        "pert_image": type(pert[0]["image"]).__module__.split(".")[0] if pert else None,
        "generators": dict(zip(ds["sample_id"], ds["generators"])),
    }
print(json.dumps(res))
"""


def test_hf_export_loads_with_datasets(built, samples, tmp_path):
    store, cfg = built
    out = tmp_path / "hf"
    res = run_export(store, "hf", out, ExportSettings(rows_per_group=3), samples=samples)
    by_split = Counter(s["split"] for s in samples)
    assert res["counts"] == dict(by_split)
    f = next(iter((out / "data").glob("train-*.parquet")))
    md = pq.read_metadata(f)
    assert md.num_row_groups == -(-by_split["train"] // 3)  # row groups of the requested size
    assert b"huggingface" in md.metadata
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, str(out)],
        env=_hf_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for split, n in by_split.items():
        g = got[split]
        assert g["n"] == g["n_card"] == n
        assert g["label_type"] == "ClassLabel" and g["names"] == ["real", "fake"]
        assert g["image_type"] == "Image" and max(g["size"]) <= 96
        want = {s["sample_id"]: s["label"] for s in samples if s["split"] == split}
        assert {
            i: ["real", "fake"][lab] for i, lab in zip(g["ids"], g["labels"], strict=True)
        } == want
        # every generator that made a sample's exact bytes, its own generator among them
        gens = {s["sample_id"]: list(s["generators"]) for s in samples if s["split"] == split}
        assert g["generators"] == gens
        assert all(s["generator"] in gens[s["sample_id"]] for s in samples if s["split"] == split)
    assert any(g["pert_image"] == "PIL" for g in got.values())  # decoded images

    card = (out / "README.md").read_text()
    header = card.split("---\n")[1]
    import yaml

    meta = yaml.safe_load(header)
    assert {s["name"]: s["num_examples"] for s in meta["dataset_info"]["splits"]} == dict(by_split)
    assert meta["generators"] == sorted(
        {g.name for g in cfg.generators} & {s["generator"] for s in samples}
    )
    assert meta["license"] == "other" and "NASA" in meta["license_details"]
    assert [c["split"] for c in meta["configs"][0]["data_files"]] == [
        s for s in ("train", "validation", "test") if s in by_split
    ]


def test_sft_tracks_share_ids_and_images(built, samples, tmp_path):
    store, _ = built
    out = tmp_path / "sft"
    res = run_export(store, "sft", out, samples=samples)
    recs = {
        t: [
            json.loads(x)
            for p in sorted((out / t).glob("*.jsonl"))
            for x in p.read_text().splitlines()
        ]
        for t in ("complex", "simple")
    }
    assert [r["id"] for r in recs["complex"]] == [r["id"] for r in recs["simple"]]
    assert len(recs["complex"]) == len(samples)
    images = list((out / "images").iterdir())
    assert len(images) == len({s["blob"] for s in samples}) == res["images"]
    by_id = {s["sample_id"]: s for s in samples}
    pat = re.compile(r"^<reasoning>(.+)</reasoning><answer>(real|fake)</answer>$", re.S)
    for track, rs in recs.items():
        for r in rs:
            s = by_id[r["id"]]
            assert (out / r["image"]).is_file()
            m = pat.match(r["target"])
            assert m and m.group(2) == s["label"]
            want = (
                s["explanation_authenticity"] if s["label"] == "real" else s[f"explanation_{track}"]
            )
            assert m.group(1) == want.strip()
            assert r["messages"][-1]["content"] == r["target"]
    # the two tracks differ for fakes and agree for reals
    pairs = list(zip(recs["complex"], recs["simple"], strict=True))
    assert any(a["target"] != b["target"] for a, b in pairs if a["label"] == "fake")
    assert all(a["target"] == b["target"] for a, b in pairs if a["label"] == "real")


def test_sft_balanced_is_equal_and_deterministic(built, samples, tmp_path):
    store, _ = built
    st = ExportSettings(balanced=True, seed=11)
    a = run_export(store, "sft", tmp_path / "a", st, samples=samples)
    b = run_export(store, "sft", tmp_path / "b", st, samples=samples)
    ids = lambda d: (d / "complex" / "train.jsonl").read_text()  # noqa: E731
    assert ids(tmp_path / "a") == ids(tmp_path / "b")
    lab = Counter(json.loads(x)["label"] for x in ids(tmp_path / "a").splitlines())
    assert lab["real"] == lab["fake"] > 0
    assert a["samples"] == b["samples"] < len(samples)
    other = balanced(samples, seed=12)
    # another seed may choose other fakes but keeps the counts
    assert Counter((s["split"], s["label"]) for s in other) == Counter(
        (s["split"], s["label"]) for s in balanced(samples, seed=11)
    )


def test_eval_subset_quota_and_stability(samples):
    assert parse_eval_subset("10000:8500") == (10000, 8500)
    with pytest.raises(ValueError):
        parse_eval_subset("10:x")
    sub = eval_subset(samples, 2, 1, seed=5)
    c = Counter((s["split"], s["label"]) for s in sub)
    full = Counter((s["split"], s["label"]) for s in samples)
    for (split, label), n in full.items():
        assert c[(split, label)] == min(n, 2 if label == "fake" else 1)
    assert eval_subset(samples, 2, 1, seed=5) == sub
    # "all if fewer"
    assert len(eval_subset(samples, 10_000, 8_500, seed=5)) == len(samples)
    # a removed row does not reshuffle the others' selection
    dropped = [s for s in samples if s["sample_id"] != sub[0]["sample_id"]]
    kept = {s["sample_id"] for s in eval_subset(dropped, 2, 1, seed=5)}
    assert {s["sample_id"] for s in sub[1:]} <= kept


def test_fakebench_qa_balanced_and_clues_mapped(built, samples, tmp_path):
    store, _ = built
    out = tmp_path / "fb"
    res = run_export(store, "fakebench", out, samples=samples)
    qa = [json.loads(x) for x in (out / "qa.jsonl").read_text().splitlines()]
    assert sorted(r["sample_id"] for r in qa) == sorted(s["sample_id"] for s in samples)
    for split in {r["split"] for r in qa}:  # forms balanced (±1) per split and label
        for label in ("real", "fake"):
            forms = [r["form"] for r in qa if r["split"] == split and r["label"] == label]
            assert abs(forms.count("yes_no") - forms.count("what")) <= 1
    for r in qa:  # the paper's questions, and the answer is right for the question asked
        if r["form"] == "what":
            assert r["question"] == "What is the authenticity of this image?"
            assert r["answer"] == r["label"]
        else:
            asks = {"Is this a fake image?": "fake", "Is this a real image?": "real"}[r["question"]]
            assert r["answer"] == ("yes" if asks == r["label"] else "no")
    assert res["forms"] == dict(Counter(r["form"] for r in qa))
    clues = [json.loads(x) for x in (out / "clues.jsonl").read_text().splitlines()]
    assert all(d in DIMENSIONS for c in clues for d in c["dimensions"])
    fakes = [c for c in clues if c["label"] == "fake"]
    assert fakes and all(c["dimensions"] for c in fakes if c["clues"])
    for c in fakes:
        for d in KIND_DIMENSIONS.get(c["edit_kind"], ()):
            if c["clues"]:
                assert d in c["dimensions"]
    assert all(not c["clues"] and c["description"] for c in clues if c["label"] == "real")
    # every one of the 14 dimensions is reachable from some kind or change type
    assert set(DIMENSIONS) == {d for k in KIND_DIMENSIONS for d in dimensions_for(None, k)} | {
        d
        for t in ("colour change", "brightness change", "content change", "artifact")
        for d in dimensions_for(t, None)
    }


def test_labelstudio_tasks_and_import_roundtrip(built, samples, tmp_path):
    import xml.etree.ElementTree as ET

    from forenset.exports.labelstudio import ANOMALY_LABELS, import_annotations
    from forenset.store.views import connect

    store, _ = built
    out = tmp_path / "ls"
    run_export(store, "labelstudio", out, samples=samples)
    triage = json.loads((out / "triage_tasks.json").read_text())
    bbox = json.loads((out / "bbox_tasks.json").read_text())
    assert len(triage) == len(bbox) == sum(s["label"] == "fake" for s in samples)  # reals: none
    cfg = ET.fromstring((out / "bbox_config.xml").read_text())
    labels = [x.get("value") for x in cfg.iter("Label")]
    assert labels == list(ANOMALY_LABELS)
    tcfg = ET.fromstring((out / "triage_config.xml").read_text())
    assert [x.get("value") for x in tcfg.iter("Choice")] == ["ann", "hard", "invalid"]
    names = {x.get("name") for x in cfg.iter() if x.get("name")}
    by_id = {s["sample_id"]: s for s in samples}
    n_boxes = 0
    for t in bbox:
        s = by_id[t["data"]["sample_id"]]
        assert t["data"]["explanation"] == s["explanation_complex"]
        assert (out / t["data"]["image"].split("?d=")[1]).is_file()
        for p in t["predictions"]:
            for r in p["result"]:
                n_boxes += 1
                assert r["from_name"] in names and r["to_name"] in names
                v = r["value"]
                assert 0 <= v["x"] <= 100 and 0 < v["width"] <= 100
                assert v["rectanglelabels"][0] in labels
    assert n_boxes == sum(len(s["differences_list"]) for s in samples if s["label"] == "fake")

    # a completed Label Studio export: annotators accepted predictions and triaged
    done = []
    for i, t in enumerate(triage[:3]):
        done.append(
            {
                "id": 100 + i,
                "data": t["data"],
                "annotations": [
                    {
                        "id": 500 + i,
                        "completed_by": {"id": 1, "email": "a@example.org"},
                        "result": [
                            {
                                "from_name": "triage",
                                "to_name": "image",
                                "type": "choices",
                                "value": {"choices": ["hard" if i else "ann"]},
                            },
                            {
                                "from_name": "anomaly",
                                "to_name": "image",
                                "type": "rectanglelabels",
                                "value": {
                                    "x": 10,
                                    "y": 20,
                                    "width": 30,
                                    "height": 40,
                                    "rectanglelabels": ["lighting"],
                                },
                            },
                            {"from_name": "anomaly", "type": "rectanglelabels", "value": {"x": 1}},
                        ],
                        "was_cancelled": False,
                        "lead_time": 3.5,
                    }
                ],
            }
        )
    f = tmp_path / "ls-export.json"
    f.write_text(json.dumps(done))
    info = import_annotations(store, f)
    assert info.rows == 9 and info.counts == {"ok": 6, "error": 3}
    assert info.path.startswith("stages/annotations/")
    con = connect(store, ["annotations"])
    got = con.execute(
        "SELECT sample_id, choice FROM annotations WHERE task = 'triage' ORDER BY task_id"
    ).fetchall()
    assert got == [
        (t["data"]["sample_id"], c)
        for t, c in zip(triage[:3], ["ann", "hard", "hard"], strict=True)
    ]
    box = con.execute(
        "SELECT x, y, w, h, rect_label FROM annotations WHERE task='bbox' AND status='ok' LIMIT 1"
    ).fetchone()
    assert box[:4] == pytest.approx((0.1, 0.2, 0.3, 0.4)) and box[4] == "lighting"
    errs = con.execute("SELECT error FROM annotations WHERE status='error'").fetchall()
    assert len(errs) == 3 and all("'y'" in e[0] for e in errs)
    # the same file again is the same shard; --append keeps another file's rows beside it
    again = import_annotations(store, f)
    assert again.fingerprint == info.fingerprint and len(store.manifest("annotations")) == 1
    g = tmp_path / "other.json"
    g.write_text(json.dumps(done[:1]))
    import_annotations(store, g, append=True)
    assert len(store.manifest("annotations")) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    from forenset.exports.labelstudio import AnnotationImportError

    with pytest.raises(AnnotationImportError):
        import_annotations(store, bad)


def test_build_export_step_keeps_contract_and_writes_extra_formats(built, tmp_path):
    store, cfg = built
    first = export_dataset(store, cfg.export)
    assert set(first) >= {"skipped", "counts", "path"}
    again = export_dataset(store, cfg.export)
    assert again["skipped"] is True and again["counts"] == first["counts"]
    samples = load_samples(store)
    assert sum(first["counts"].values()) == len(samples)
    # with ExportSettings as the config's export section, the build also writes our formats
    res = export_dataset(store, ExportSettings(formats=["parquet", "sft"]))
    assert res["skipped"] is False and res["formats"]["sft"]["counts"]["complex"]
    assert Path(res["formats"]["sft"]["path"], "complex", "train.jsonl").is_file()


def test_missing_blob_is_reported_not_a_crash(built, tmp_path):
    import shutil

    from forenset.store.run_store import RunStore

    store, _ = built
    copy = tmp_path / "run"
    shutil.copytree(store.root, copy)
    c = RunStore(str(copy))
    samples = load_samples(c)
    gone = next(s for s in samples if s["label"] == "fake")
    (copy / gone["blob"]).unlink()
    res = run_export(c, "hf", tmp_path / "hf")
    assert res["missing_images"] == [gone["sample_id"]]
    assert res["samples"] == len(samples) - 1


def test_exports_are_reproducible_byte_for_byte(built, samples, tmp_path):
    store, _ = built
    st = ExportSettings(eval_subset="3:2")
    for fmt in ("hf", "sft", "fakebench", "labelstudio"):
        a, b = tmp_path / f"{fmt}-a", tmp_path / f"{fmt}-b"
        run_export(store, fmt, a, st, samples=samples)
        run_export(store, fmt, b, st, samples=load_samples(store))
        files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
        for rel in files:
            if rel.name == "export.json":
                continue  # names its own output path
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), (fmt, rel)
