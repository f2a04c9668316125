"""The Typer commands the main CLI mounts: export, import-annotations, report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from forenset.exports.cli import app

runner = CliRunner()


def test_export_each_format_and_report(built, tmp_path):
    store, _ = built
    for fmt in ("hf", "sft", "fakebench", "labelstudio"):
        out = tmp_path / fmt
        r = runner.invoke(app, ["export", store.uri, "--format", fmt, "--out", str(out)])
        assert r.exit_code == 0, r.output
        doc = json.loads(r.output.strip().splitlines()[-1])
        assert doc["format"] == fmt and doc["samples"] > 0
        assert json.loads((out / "export.json").read_text())["counts"] == doc["counts"]
    # default location: <run>/exports/<format>
    r = runner.invoke(app, ["export", store.uri, "-f", "sft", "--eval-subset", "1:1", "--balanced"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output.strip().splitlines()[-1])
    assert doc["path"] == store.path("exports", "sft")
    recs = [
        json.loads(line)
        for p in (store.path("exports", "sft", "complex"),)
        for f in Path(p).glob("*.jsonl")
        for line in f.read_text().splitlines()
    ]
    per = Counter((r["split"], r["label"]) for r in recs)
    assert recs and all(n == 1 for n in per.values())  # 1 fake + 1 real per split, balanced
    for split in {r["split"] for r in recs}:
        assert per[(split, "real")] == per[(split, "fake")]

    r = runner.invoke(app, ["report", store.uri, "--out", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_import_annotations_command(built, tmp_path):
    store, _ = built
    f = tmp_path / "ls.json"
    f.write_text(
        json.dumps(
            [
                {
                    "id": 1,
                    "data": {"sample_id": "s1"},
                    "annotations": [
                        {
                            "id": 9,
                            "result": [
                                {
                                    "from_name": "triage",
                                    "type": "choices",
                                    "value": {"choices": ["invalid"]},
                                }
                            ],
                        }
                    ],
                }
            ]
        )
    )
    r = runner.invoke(app, ["import-annotations", store.uri, str(f)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output.strip().splitlines()[-1])
    assert doc["rows"] == 1 and doc["path"].startswith("stages/annotations/")


def test_errors_are_one_line_and_exit_2(built, tmp_path):
    store, _ = built
    cases = [
        ["export", str(tmp_path / "nope"), "-f", "hf"],
        ["export", store.uri, "-f", "tfrecord", "--out", str(tmp_path / "x")],
        ["export", store.uri, "-f", "hf", "--eval-subset", "ten:5"],
        ["import-annotations", store.uri, str(tmp_path / "missing.json")],
        ["report", str(tmp_path / "empty-run-does-not-exist")],
    ]
    for args in cases:
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        assert "error:" in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("[not json")
    r = runner.invoke(app, ["import-annotations", store.uri, str(bad)])
    assert r.exit_code == 2 and "not valid JSON" in r.output
    empty = tmp_path / "empty-run"
    empty.mkdir()
    r = runner.invoke(app, ["export", str(empty), "-f", "hf"])
    assert r.exit_code == 2 and "forenset build" in r.output
