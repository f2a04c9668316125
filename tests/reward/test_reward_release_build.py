"""A XAIGID-RewardBench release as a build's reward input (issue 39.2): ``reward: {release:
PATH}`` makes reward_responses / reward_triplets / reward_labels the release's rows, and
reward_scores computes its tables on them; where a table is the same measure as
``forenset reward-release``'s, the numbers are equal."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.benchmarks.reward import release as rb
from forenset.cli import app
from forenset.config import validate_config
from forenset.errors import ConfigurationError
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.reward.test_reward_release import write_release


def release_config(run, root, **more):
    reward = {"enabled": True, "release": str(root), "elo_shuffles": 0,
              "intervals": {"resamples": 50}, **more}  # fmt: skip
    return small_config_dict(run, reward=reward)


def test_the_config_refuses_what_a_release_replaces(tmp_path):
    for bad, why in (
        ({"policies": [{"name": "a", "kind": "constant"}, {"name": "b", "kind": "constant"}]},
         "replaces policies"),
        ({"labels": {"path": "x.json"}}, "brings its own labels"),
        ({"judges": [{"name": "j", "kind": "llm", "llm": {"pool": [{
            "backend": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1",
            "api_key_env": "FAKE_OPENAI_KEY"}]}}]}, "ships no images"),
    ):  # fmt: skip
        with pytest.raises(ConfigurationError, match=why):
            validate_config(release_config(tmp_path / "r", tmp_path, **bad))
    cfg = validate_config(release_config(tmp_path / "r", tmp_path))
    assert cfg.reward.release is not None and cfg.reward.release.path == str(tmp_path)


def test_a_release_is_the_reward_input_and_scores_as_reward_release(tmp_path):
    root = write_release(tmp_path / "rel")
    (root / "data/model_outputs/FIbad name.json").write_text(
        json.dumps([{"image_id": "image_0000", "answer": "Fake."}]))  # fmt: skip
    ann = root / "data/annotations/benchmark_annotations.json"
    data = json.loads(ann.read_text())
    for n, (c, k) in enumerate((("response_1_better", 3), ("tie", 2), ("response_2_better", 2))):
        data[f"benchmark_agree{n}"] = {
            "triplet_id": f"agree_{n}", "image_id": "image_0001", "image_type": "synthetic",
            "caption_1": "x", "caption_2": "y", "csv1": "FIo3.json", "csv2": "FIgpt4o.json",
            "annotations": {f"annotator_{j:03d}": {"choice": c} for j in range(1, k + 1)},
        }  # fmt: skip
    ann.write_text(json.dumps(data))
    run = tmp_path / "run"
    store, stats, _ = run_local(validate_config(release_config(run, root)))
    assert not any(s.failed for s in stats.values()), stats
    assert not store.manifest("reward_images")  # a release ships no images
    resp, trips, labels = (rows(store, t) for t in
                           ("reward_responses", "reward_triplets", "reward_labels"))  # fmt: skip
    rel = rb.load_release(root)
    want = rb.stage_rows(rel)
    ok = [r for r in resp if r["status"] == "ok"]
    assert len(ok) == 18 and {r["policy_kind"] for r in ok} == {"file"}
    assert {r["policy"] for r in ok} == {"gpt4o", "o3", "qwen2.57B"}
    bad = {r["response_id"]: r["error"] for r in resp if r["status"] == "error"}
    assert any("not a usable policy name" in e for e in bad.values()), bad
    assert [t["triplet_id"] for t in trips if t["status"] == "ok"] == sorted(
        t["triplet_id"] for t in want["reward_triplets"] if t["status"] == "ok")  # fmt: skip
    assert any("lacks image_id, csv1 or csv2" in (t["error"] or "") for t in trips)
    lab = {r["triplet_id"]: r for r in labels if r["status"] == "ok"}
    read = {r["triplet_id"]: r for r in want["reward_labels"] if r["status"] == "ok"}
    assert {t: (r["label"], r["tied"], r["source"]) for t, r in lab.items()} == {
        t: (r["label"], r["tied"], "human") for t, r in read.items()}  # fmt: skip
    assert any("hold none of the four choices" in (r["error"] or "") for r in labels)
    # the judge runs on the release's texts; the tables are computed on the release
    assert [r for r in rows(store, "reward_judgments") if r["status"] == "ok"]
    scores = {r["score_id"]: r for r in rows(store, "reward_scores") if r["status"] == "ok"}
    t = rb.release_tables(rel, IntervalsConfig(resamples=0))
    assert set(t["policy_accuracy"]) == {"gpt4o", "o3", "qwen2.57B", "bad name"}
    for model, slices in t["policy_accuracy"].items():
        if model == "bad name":  # an error row here (no partition of that name)
            continue
        for ours, theirs in (("overall", "overall"), ("fake", "synthetic"), ("real", "real")):
            s = scores[f"policy_accuracy/{model}/{ours}/-/accuracy"]
            assert s["value"] == pytest.approx(slices[theirs].value, abs=1e-12), (model, ours)
            assert s["n"] == slices[theirs].n
    for group, only in (("4-way", False), ("clear", True)):
        s = scores[f"agreement/annotators/{group}/human/agreement"]
        a = rb.agreement(rel, response_only=only)
        assert s["value"] == pytest.approx(a["pairwise_rate"], abs=1e-12) and s["n"] == a["pairs"]
        assert 0 < s["value"] < 1
    # Elo as the release computes it (every clear annotation a game, one pass, records in
    # order): labels_from = annotations, with elo_shuffles 0; forenset's own (majority) beside
    for r in t["elo"]:
        got = {m: scores[f"elo/{r.model}/overall/annotations/{m}"]["value"]
               for m in ("elo", "games", "wins", "losses")}  # fmt: skip
        assert got["elo"] == pytest.approx(r.elo.value, abs=1e-9), r.model
        assert (got["games"], got["wins"], got["losses"]) == (r.games, r.wins, r.losses)
    assert any(k.startswith("judge_accuracy/rules/") for k in scores)  # Table 4: new here
    assert any(k.startswith("elo/gpt4o/overall/human/") for k in scores)
    res = CliRunner().invoke(app, ["reward", str(run)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["reward", str(run), "--label-studio", str(tmp_path / "ls")])
    assert res.exit_code == 2 and "have no images" in res.output, res.output
    # an edited release recomputes; the same one is a no-op
    _, again, _ = run_local(validate_config(release_config(run, root)))
    assert all(again[t].run == 0 for t in ("reward_responses", "reward_triplets",
                                           "reward_labels", "reward_scores"))  # fmt: skip
    shutil.rmtree(root / "data/model_outputs")
    (root / "data/model_outputs").mkdir()
    write_release(tmp_path / "rel2")
    shutil.copy(tmp_path / "rel2/data/model_outputs/FIo3.json", root / "data/model_outputs")
    st, third, _ = run_local(validate_config(release_config(run, root)))
    assert third["reward_scores"].run == 1
    assert {r["policy"] for r in rows(st, "reward_responses") if r["status"] == "ok"} == {"o3"}
