"""A bad record is one error row, never a failed shard (issue 32, case 5); a failed input never
empties a score table that was complete before."""

from __future__ import annotations

import json

import pytest

from forenset.benchmarks.evaluation.stages.detections import Detections
from forenset.benchmarks.reward.stages.reward_labels import read_export
from forenset.config import validate_config
from forenset.errors import ConfigurationError
from tests.helpers import rows, run_local
from tests.stages.test_detections import config, fresh_detections, items

__all__ = ["fresh_detections"]  # the autouse fixture, imported for its side effect


def _scores_by_detector(store) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows(store, "eval_scores"):
        if r["status"] == "ok":
            out[r["detector"]] = out.get(r["detector"], 0) + 1
    return out


def test_wrong_typed_prediction_is_one_error_row_and_scores_stay(tmp_path, monkeypatch):
    store, _, _ = run_local(validate_config(config(tmp_path)))
    ids = sorted({e["sample_id"] for e in items(store)})
    path = tmp_path / "preds.jsonl"
    good = [{"sample_id": s, "answer": "fake", "explanation": "Edges."} for s in ids]
    path.write_text("\n".join(json.dumps(x) for x in good) + "\n")
    dets = [{"name": "forensic"}, {"name": "mine", "kind": "file", "path": str(path)}]
    cfg = validate_config(config(tmp_path, detectors=dets))
    store, stats, _ = run_local(cfg)
    assert not stats["detections"].failures
    before = _scores_by_detector(store)
    assert before.get("mine", 0) > 0 and before.get("forensic", 0) > 0

    # one line with "explanation": 123, one with an id of 1e30, one nested 100k deep
    bad = list(good)
    bad[0] = {**good[0], "explanation": 123}
    lines = [json.dumps(x) for x in bad]
    lines.append(json.dumps({"sample_id": 1e30, "answer": "fake", "explanation": "x"}))
    lines.append('{"sample_id": ' + "[" * 100_000 + "]" * 100_000 + "}")
    path.write_text("\n".join(lines) + "\n")
    store, stats, _ = run_local(cfg)
    assert not stats["detections"].failures, stats["detections"].failures
    mine = {r["detection_id"]: r for r in rows(store, "detections") if r["detector"] == "mine"}
    wrong = mine["mine/file-problem/wrong_type"]
    assert (
        wrong["status"] == "error"
        and "2 lines of preds.jsonl have a field of the wrong" in (wrong["error"])
    )
    assert "line 1" in wrong["error"] and "1e+30" in wrong["error"]
    assert "mine/file-problem/not_a_record" in mine  # the deep line
    after = _scores_by_detector(store)
    assert after.get("mine", 0) > 0 and after.get("forensic") == before["forensic"]

    # a detections shard that fails outright: the scores keep their last complete output
    real = Detections.process

    def broken(self, batch, shard=None):
        if shard is not None and "mine" in json.dumps(shard.params, default=str):
            raise RuntimeError("injected failure")
        return real(self, batch, shard)

    monkeypatch.setattr(Detections, "process", broken)
    path.write_text("\n".join(json.dumps(x) for x in good) + "\n")  # mine's shard reruns
    store, stats, _ = run_local(cfg)
    assert stats["detections"].failures
    assert any("last complete output is kept" in f for f in stats["eval_scores"].failures)
    assert _scores_by_detector(store) == after


def test_reward_label_export_with_wrong_types_gives_counted_problems(tmp_path):
    ann = {"completed_by": 1, "result": [{"type": "choices", "value": {"choices": ["First"]}}]}
    tasks = [
        {"id": 1, "data": "a string", "annotations": [ann]},
        {"id": 2, "data": {"triplet_id": "t2"}, "annotations": 7},
        {"id": 3, "data": {"triplet_id": "t3"}, "annotations": [{"result": 5}]},
        {"id": 4, "data": {"triplet_id": "t4"},
         "annotations": [{"result": [{"type": "choices", "value": {"choices": 9}}]}]},
        {"id": 5, "data": {"triplet_id": 1e30}, "annotations": [ann]},
        {"id": 6, "data": {"triplet_id": "t6"}, "annotations": [ann]},
        7,
    ]  # fmt: skip
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(tasks))
    found, problems = read_export(str(path))
    assert set(found) == {"t6"}
    # data as a string, a float id, a task that is no object; annotations / result not lists
    assert sorted(problems["bad_record"]) == ["t2", "t3", "task 0", "task 4", "task 6"]
    assert problems["bad_choice"] == ["t4"]
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigurationError, match="nested too deeply"):
        read_export(str(deep))
