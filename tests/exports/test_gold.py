"""Gold references: the Label Studio gold task (export) and the import of a completed export
shaped like Label Studio's JSON export, with its problem classes counted and the agreement."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forenset.benchmarks.evaluation.gold import (
    INSTRUCTIONS,
    export_gold,
    gold_texts,
    import_gold,
    problem_sentence,
)
from forenset.store.run_store import RunStore

H = "The hand is blurry."
S = "The shadow of the cyclist is inconsistent with the light."
HS = "The hand looks blurry and the sign text is warped."


@pytest.fixture(scope="module")
def exported(built, samples, tmp_path_factory):
    store, _ = built
    out = tmp_path_factory.mktemp("gold-export") / "gold"
    res = export_gold(store, samples, out, n=3, overlap=1, seed=5, split=None)
    return store, out, res


def test_export_writes_pairs_config_and_overlap_set(exported, samples, tmp_path):
    store, out, res = exported
    fakes = {s["sample_id"]: s for s in samples if s["label"] == "fake" and s["source_blob"]}
    tasks = json.loads((out / "gold_tasks.json").read_text())
    shared = json.loads((out / "gold_overlap_tasks.json").read_text())
    assert res["counts"] == {"tasks": len(tasks), "overlap": 1, "pairs": len(fakes)}
    assert len(shared) == 1 and len(tasks) == min(3, len(fakes) - 1)
    assert shared[0]["data"]["overlap"] is True and not tasks[0]["data"]["overlap"]
    for t in shared + tasks:
        d = t["data"]
        s = fakes[d["sample_id"]]
        assert d["instructions"] == INSTRUCTIONS
        for key, blob in (("edited", s["blob"]), ("original", s["source_blob"])):
            rel = d[key].split("?d=", 1)[1]
            assert (out / rel).read_bytes() == store.get_blob(blob)
        if d["real_sample_id"] is not None:
            real = next(x for x in samples if x["sample_id"] == d["real_sample_id"])
            assert real["label"] == "real" and real["image_id"] == s["image_id"]
    root = ET.fromstring((out / "gold_config.xml").read_text())
    area = root.find(".//TextArea")
    assert area is not None and (area.get("name"), area.get("toName")) == ("explanation", "edited")
    assert {i.get("name") for i in root.iter("Image")} == {"original", "edited"}
    # seeded: the same draw again, another seed another order
    again = export_gold(store, samples, tmp_path / "again", n=3, overlap=1, seed=5, split=None)
    assert again["counts"] == res["counts"]
    assert json.loads((tmp_path / "again" / "gold_tasks.json").read_text()) == tasks


def _annotation(aid, who, text, **extra):
    result = [] if text is None else [
        {"id": f"r{aid}", "from_name": "explanation", "to_name": "edited", "type": "textarea",
         "value": {"text": [text]}, "origin": "manual"}
    ]  # fmt: skip
    return {
        "id": aid, "completed_by": {"id": len(who), "email": who}, "result": result,
        "was_cancelled": False, "ground_truth": False, "lead_time": 12.5,
        "created_at": "2026-12-01T10:00:00.000000Z", **extra,
    }  # fmt: skip


def ls_export(tasks, shared):
    """A Label Studio JSON export of the gold projects: the overlap task done by three
    annotators, the other tasks by one each, and one instance of every problem class."""
    o, t1, t2 = shared[0], tasks[0], tasks[1]
    return [
        {"id": 1, "data": o["data"], "annotations": [
            _annotation(11, "ann1@lab", H), _annotation(12, "ann2@lab", H),
            _annotation(13, "ann3@lab", S),
            _annotation(14, "ann3@lab", "A second try by the same annotator."),  # duplicate
        ], "predictions": []},
        {"id": 2, "data": t1["data"], "annotations": [
            _annotation(21, "ann1@lab", HS), _annotation(22, "ann2@lab", H),
            _annotation(23, "ann4@lab", "   "),  # empty text
            _annotation(24, "ann5@lab", None),  # no text result
            _annotation(25, "ann6@lab", H, was_cancelled=True),  # cancelled
        ]},
        {"id": 3, "data": {**t2["data"], "sample_id": "nope"},  # unknown id
         "annotations": [_annotation(31, "ann1@lab", H), _annotation(32, "ann2@lab", H)]},
        {"id": 4, "data": t2["data"], "annotations": [_annotation(41, "ann1@lab", HS)]},
        "not a task",
    ]  # fmt: skip


def test_import_counts_problems_and_keeps_every_annotation(exported, tmp_path):
    store, out, _ = exported
    run = tmp_path / "run"
    shutil.copytree(store.root, run)  # the session build stays unchanged
    store = RunStore(str(run))
    tasks = json.loads((out / "gold_tasks.json").read_text())
    shared = json.loads((out / "gold_overlap_tasks.json").read_text())
    doc = ls_export(tasks, shared)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    info, problems = import_gold(store, path)
    assert problems == {
        "not_a_task": "1 task is not an object.",
        "unknown_sample": "2 annotations name a sample_id that is not a fake sample of this run.",
        "cancelled": "1 annotation was cancelled (skipped) in Label Studio.",
        "no_text": "1 annotation has no 'explanation' text result.",
        "empty_text": "1 annotation has an empty explanation.",
        "duplicate": (
            "1 annotation repeats an annotator's explanation of the same sample "
            "(the first is kept)."
        ),
    }
    assert info.counts == {"ok": 6, "error": 7}  # 14 annotations + 1 bad task, none lost
    rows = store.read_shard(info).to_pylist()
    assert len(rows) == 13  # 12 annotations + the bad task, which is one row
    ok = {(r["sample_id"], r["annotator"]): r for r in rows if r["status"] == "ok"}
    o = shared[0]["data"]["sample_id"]
    assert ok[(o, "ann1@lab")]["overlap"] is True and ok[(o, "ann3@lab")]["text"] == S
    assert ok[(o, "ann1@lab")]["lead_time"] == 12.5
    assert all(r["error"] and r["problem"] for r in rows if r["status"] == "error")
    texts = gold_texts(store)
    assert texts[o] == {"ann1@lab": H, "ann2@lab": H, "ann3@lab": S}  # the first of ann3 kept
    # importing the same file again writes nothing new
    again, _ = import_gold(store, path)
    assert again.path == info.path and len(store.manifest("gold_references")) == 1


def run_with_export(exported, tmp_path) -> tuple[Path, Path]:
    """A copy of the exported run and a Label Studio-shaped export of its gold tasks."""
    store, out, _ = exported
    run = tmp_path / "run"
    shutil.copytree(store.root, run)
    tasks = json.loads((out / "gold_tasks.json").read_text())
    shared = json.loads((out / "gold_overlap_tasks.json").read_text())
    path = tmp_path / "export.json"
    path.write_text(json.dumps(ls_export(tasks, shared)))
    return run, path


def test_import_gold_cli_prints_problems_and_agreement(exported, tmp_path):
    from forenset.cli import app

    run, path = run_with_export(exported, tmp_path)
    res = CliRunner().invoke(app, ["import-gold", str(run), str(path)], terminal_width=200)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert "1 annotation has an empty explanation." in doc["problems"]
    ag = doc["agreement"]
    # overlap task: pairs (H, H) 1, (H, S) 0, (H, S) 0 -> 1/3; task 2: (HS, H) -> 2/3
    assert (ag["n_items"], ag["n_pairs"], ag["model"]) == (2, 4, "phrase-match-v1")
    assert ag["entity_score"] == pytest.approx(0.5)
    bad = tmp_path / "bad.json"
    bad.write_text('{"tasks": 3}')
    res = CliRunner().invoke(app, ["import-gold", str(run), str(bad)])
    assert res.exit_code == 2 and "expected a Label Studio JSON export" in res.output


def test_problem_sentences_count():
    assert problem_sentence("empty_text", 3) == "3 annotations have an empty explanation."


def test_import_gold_agreement_by_a_model_evaluator(exported, tmp_path, monkeypatch):
    """--evaluator: the agreement's EntityScore / EvidenceScore from an llm: pool (the fake
    OpenAI server finds one entity and one claim in every text and supports them all)."""
    import yaml

    from forenset.backends.llm import reset_limiters
    from forenset.cli import app
    from forenset.testing.fake_openai import FakeOpenAI
    from tests.helpers import agreeing_evaluator

    run, path = run_with_export(exported, tmp_path)
    monkeypatch.setenv("FAKE_GOLD_KEY", "sk-gold")
    reset_limiters()
    with FakeOpenAI() as server:
        server.reply = agreeing_evaluator
        pool = {
            "backend": "openai", "model": "gpt-fake", "base_url": server.base_url,
            "api_key_env": "FAKE_GOLD_KEY", "timeout_s": 5.0,
        }  # fmt: skip
        cfg = tmp_path / "evaluator.yaml"
        cfg.write_text(yaml.safe_dump({"pool": [pool], "backoff_base_s": 0.01}))
        res = CliRunner().invoke(
            app, ["import-gold", str(run), str(path), "--evaluator", str(cfg)], terminal_width=200
        )
    assert res.exit_code == 0, res.output
    ag = json.loads(res.output)["agreement"]
    assert (ag["model"], ag["backend"], ag["n_pairs"], ag["n_failed"]) == (
        "gpt-fake",
        "openai",
        4,
        0,
    )
    assert ag["entity_score"] == pytest.approx(1.0) and ag["evidence_score"] == pytest.approx(1.0)


def test_export_gold_cli(built, tmp_path):
    from forenset.cli import app

    store, _ = built
    out = tmp_path / "gold"
    args = ["export-gold", store.root, "--out", str(out), "--n", "1", "--overlap", "1"]
    res = CliRunner().invoke(app, [*args, "--split", "all"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["counts"]["overlap"] == 1
    assert (out / "gold_config.xml").exists() and (out / "gold_tasks.json").exists()
    res = CliRunner().invoke(app, ["export-gold", str(tmp_path / "nothing")])
    assert res.exit_code != 0 and "does not exist" in res.output
