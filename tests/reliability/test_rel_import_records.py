"""Label Studio imports with wrong-typed records (issue 32, cases 8 and 10): each bad task or
annotation is one error row, never a traceback; ``[]`` is refused and keeps the earlier table;
region numbers are validated; booleans are read strictly."""

from __future__ import annotations

import json

import pytest

from forenset.benchmarks.evaluation import gold as gold_mod
from forenset.benchmarks.evaluation.gold import import_gold
from forenset.exports.labelstudio import AnnotationImportError, import_annotations
from forenset.store.run_store import RunStore


def text_result(text):
    return [{"from_name": "explanation", "type": "textarea", "value": {"text": [text]}}]


def gold_doc():
    ok = {"id": 1, "completed_by": "a@lab", "result": text_result("The hand is blurry.")}
    return [
        {"id": 1, "data": {"sample_id": "s1", "overlap": "false"}, "annotations": [ok]},
        {"id": 2, "data": "a string", "annotations": [ok]},
        {"id": 3, "data": {"sample_id": "s1"}, "annotations": 7},
        {"id": 4, "data": {"sample_id": "s2"}, "annotations": [{"id": 1, "result": 5}]},
        {"id": 1e30, "data": {"sample_id": "s2", "overlap": "yes"},
         "annotations": [{"id": 1e30, "completed_by": "b@lab",
                          "result": text_result("Warped sign.")}]},
        {"id": 6, "data": {"sample_id": "s2", "overlap": "maybe"}, "annotations": [ok]},
        {"id": 7, "data": {"sample_id": ["s1"]}, "annotations": [ok]},
        {"id": 8, "data": {"sample_id": "s1"},
         "annotations": [{"id": 2, "completed_by": "c@lab", "was_cancelled": "false",
                          "result": text_result("Odd light.")}]},
    ]  # fmt: skip


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(gold_mod, "fake_ids", lambda store: {"s1", "s2"})
    return RunStore(str(tmp_path / "run"))


def test_gold_import_with_wrong_types_gives_rows(store, tmp_path):
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(gold_doc()))
    info, problems = import_gold(store, path)
    rows = {r["gold_id"]: r for r in store.read_shard(info).to_pylist()}
    ok = [r for r in rows.values() if r["status"] == "ok"]
    assert sorted((r["sample_id"], r["overlap"]) for r in ok) == [
        ("s1", False),  # "overlap": "false" is false
        ("s1", False),
        ("s2", True),  # "yes" is true; the 1e30 ids do not fit int64 and are left empty
    ]
    big = next(r for r in ok if r["sample_id"] == "s2")
    assert big["task_id"] is None and big["annotation_id"] is None
    wrong = [r for r in rows.values() if r["problem"] == "wrong_type"]
    assert len(wrong) == 5  # data string, annotations 7, result 5, overlap "maybe", id list
    assert "5 tasks or annotations have a field of the wrong type" in problems["wrong_type"]


def test_gold_import_of_nothing_is_refused_and_keeps_the_table(store, tmp_path):
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(gold_doc()))
    info, _ = import_gold(store, path)
    for body in ("[]", '{"tasks": []}', "  ", "[" * 100_000 + "]" * 100_000):
        path.write_text(body)
        with pytest.raises(AnnotationImportError, match="nothing was imported|nested too deep"):
            import_gold(store, path)
    assert [i.path for i in store.manifest("gold_references")] == [info.path]


def region(**value):
    return {
        "id": "r1",
        "from_name": "anomaly",
        "type": "rectanglelabels",
        "value": {"x": 10, "y": 10, "width": 20, "height": 20,
                  "rectanglelabels": ["hands"], **value},
    }  # fmt: skip


def test_annotation_import_with_wrong_types_and_bad_regions(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    ann = {"id": 1, "completed_by": 1, "result": [region()]}
    doc = [
        {"id": 1, "data": {"sample_id": "s1"}, "annotations": [ann]},
        {"id": 2, "data": "a string", "annotations": [ann]},
        {"id": 3, "data": {"sample_id": "s1"}, "annotations": 7},
        {"id": 4, "data": {"sample_id": "s1"}, "annotations": [{"id": 1, "result": 5}]},
        {"id": 5, "data": {"sample_id": "s1"},
         "annotations": [{"id": 1, "result": [{"type": "choices", "from_name": "triage",
                                              "value": {"choices": 9}}]}]},
        {"id": 6, "data": {"sample_id": "s1"},
         "annotations": [{"id": 1, "result": [region(x=float("nan"))]}]},
        {"id": 7, "data": {"sample_id": "s1"},
         "annotations": [{"id": 1, "result": [region(y=float("inf"))]}]},
        {"id": 8, "data": {"sample_id": "s1"},
         "annotations": [{"id": 1, "result": [region(width=-5)]}]},
        {"id": 1e30, "data": {"sample_id": "s1"},
         "annotations": [{"id": 1e30, "was_cancelled": "false", "result": [region()]}]},
        {"id": 10, "data": {"sample_id": "s1"},
         "annotations": [{"id": 1, "was_cancelled": "nope", "result": [region()]}]},
    ]  # fmt: skip
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    info = import_annotations(store, path)
    rows = store.read_shard(info).to_pylist()
    ok = [r for r in rows if r["status"] == "ok"]
    errors = sorted(r["error"] for r in rows if r["status"] == "error")
    assert len(ok) == 2 and all(r["w"] == pytest.approx(0.2) for r in ok)
    assert not next(r for r in ok if r["task_id"] is None)["was_cancelled"]  # "false" is false
    assert len(errors) == 8, errors
    for needle in (
        "task data is a str",
        "task annotations is a int",
        "annotation result is a int",
        "choices is not a list",
        "rectangle x is nan",
        "rectangle y is inf",
        "width and height must be positive",
        "was_cancelled is 'nope'",
    ):
        assert sum(needle in e for e in errors) == 1, (needle, errors)


def test_deeply_nested_annotation_export_is_one_sentence(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    path = tmp_path / "export.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(AnnotationImportError, match="nested too deeply"):
        import_annotations(store, path)
