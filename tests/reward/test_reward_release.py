"""XAIGID-RewardBench's release format both ways: a release-shaped folder read as reward rows
and scored by the release's own analysis rules (checked against a transcription of its
``code/calculate_elo.py``, ``analyze_policy_accuracy.py`` and ``analyze_annotations.py`` on a
hand-made fixture), and a reward build exported in that shape and read back."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.benchmarks.reward import release as rb
from forenset.cli import app

# -- the release's scripts, transcribed (the reference the module is checked against) -------
NORMALIZE = {"response_1_better": "response_1_better", "response_2_better": "response_2_better",
             "caption_1_better": "response_1_better", "caption_2_better": "response_2_better",
             "response_1": "response_1_better", "response_2": "response_2_better",
             "tie": "tie", "both_good": "tie", "both_bad": "both_bad"}  # fmt: skip


def ref_norm(v):
    return NORMALIZE.get(str(v or "").strip().lower())


def ref_name(v):
    n = str(v or "").replace(".json", "")
    return n[2:] if n[:2] in {"FI", "RI"} else n


def ref_verdict(a):
    if not isinstance(a, str):
        return None
    m = re.match(r"^\s*[#>*_`~\-\s\"']*(real|fake)\b", a, re.IGNORECASE)
    return m.group(1).lower() if m else None


def ref_elo(data, include_neutral):
    ratings = defaultdict(lambda: 1200.0)
    for tid in sorted(data):
        rec = data[tid]
        a, b = ref_name(rec.get("csv1")), ref_name(rec.get("csv2"))
        if not a or not b:
            continue
        for ann in rec.get("annotations", {}).values():
            c = ref_norm(ann.get("choice"))
            s = 1.0 if c == "response_1_better" else 0.0 if c == "response_2_better" else (
                0.5 if include_neutral and c in {"tie", "both_bad"} else None)  # fmt: skip
            if s is None:
                continue
            e = 1.0 / (1.0 + 10 ** ((ratings[b] - ratings[a]) / 400.0))
            ratings[a] += 32.0 * (s - e)
            ratings[b] -= 32.0 * (s - e)
    return dict(ratings)


def ref_accuracy(folder: Path):
    out = {}
    for p in sorted((folder / "data" / "model_outputs").glob("*.json")):
        if not p.name.startswith(("FI", "RI")):
            continue
        rows = json.loads(p.read_text())
        exp = "fake" if p.name.startswith("FI") else "real"
        out.setdefault(p.stem[2:], []).append(
            (sum(ref_verdict(r.get("answer")) == exp for r in rows), len(rows)))  # fmt: skip
    return {m: sum(c for c, _ in v) / sum(n for _, n in v) for m, v in out.items()}


def ref_agreement(data, response_only):
    total = match = analyzed = unanimous = 0
    for rec in data.values():
        cs = [ref_norm(a.get("choice")) for a in rec.get("annotations", {}).values()]
        cs = [c for c in cs if c and (not response_only or c in {"response_1_better",
                                                                 "response_2_better"})]  # fmt: skip
        if len(cs) < 2:
            continue
        analyzed += 1
        unanimous += int(len(set(cs)) == 1)
        total += len(cs) * (len(cs) - 1) // 2
        match += sum(x == y for x, y in combinations(cs, 2))
    return unanimous / analyzed if analyzed else 0.0, match / total if total else 0.0


# -- a hand-made release ----------------------------------------------------------------------
def write_release(root: Path) -> Path:
    outs = root / "data" / "model_outputs"
    outs.mkdir(parents=True)
    imgs = [f"image_{k:04x}" for k in range(6)]

    def answer(k, right, model):
        v = ("Fake" if right else "Real") if k < 4 else ("Real" if right else "Fake")
        return [f"**{v}**\n\nBecause {model} says so.", f"{v}.\n\nSeams.", "I cannot tell."][k % 3]

    for model, skill in (("gpt4o", 1.0), ("o3", 0.5), ("qwen2.57B", 0.0)):
        for prefix, ks in (("FI", range(4)), ("RI", range(4, 6))):
            rows = [{"image_id": imgs[k], "image_type": "synthetic" if prefix == "FI" else "real",
                     "answer": answer(k, (k * 7 % 10) / 10 < skill, model)} for k in ks]  # fmt: skip
            (outs / f"{prefix}{model}.json").write_text(json.dumps(rows, indent=2))
    (outs / "README.md").write_text("not a policy file")
    choices = ["response_1_better", "response_2_better", "tie", "both_bad", "caption_1_better",
               "response_2", "both_good", "nonsense"]  # fmt: skip
    pairs = [("gpt4o", "o3"), ("o3", "qwen2.57B"), ("qwen2.57B", "gpt4o")]
    data = {}
    for n in range(18):
        a, b = pairs[n % 3]
        pre = "FI" if n % 2 else "RI"
        anns = {f"annotator_{(n + j) % 5 + 1:03d}": {"choice": choices[(n * 3 + j * 5) % 8]}
                for j in range(1 + n % 3)}  # fmt: skip
        data[f"benchmark_{n:04d}"] = {
            "triplet_id": f"triplet_{n:04x}", "image_id": imgs[n % 6],
            "image_type": "synthetic" if pre == "FI" else "real",
            "caption_1": f"{a} reply", "caption_2": f"{b} reply",
            "csv1": f"{pre}{a}.json", "csv2": f"{pre}{b}.json", "annotations": anns,
        }  # fmt: skip
    data["benchmark_broken"] = {"triplet_id": "t-x", "image_id": imgs[0], "csv1": "FIo3.json"}
    ann = root / "data" / "annotations"
    ann.mkdir(parents=True)
    (ann / "benchmark_annotations.json").write_text(json.dumps(data, indent=2))
    return root


def test_release_tables_follow_the_release_scripts(tmp_path):
    root = write_release(tmp_path / "rel")
    rel = rb.load_release(root)
    assert not rel.errors and sorted(rel.responses) == sorted(
        f"{p}{m}.json" for p in ("FI", "RI") for m in ("gpt4o", "o3", "qwen2.57B")
    )
    data = json.loads((root / "data/annotations/benchmark_annotations.json").read_text())
    t = rb.release_tables(rel, IntervalsConfig(resamples=200, seed=1))
    want = ref_accuracy(root)
    assert {m: s["overall"].value for m, s in t["policy_accuracy"].items()} == pytest.approx(want)
    assert all(s["overall"].n == 6 for s in t["policy_accuracy"].values())
    for neutral in (False, True):
        got = {r.model: r.elo.value for r in rb.elo_table(rel, IntervalsConfig(resamples=0),
                                                           include_neutral=neutral)}  # fmt: skip
        assert got == pytest.approx(ref_elo(data, neutral)), neutral
    ranked = t["elo"]
    assert [r.rank for r in ranked] == [1, 2, 3]
    assert ranked[0].elo.value >= ranked[1].elo.value >= ranked[2].elo.value
    assert all(r.elo.ci is not None and r.elo.ci[0] <= r.elo.ci[1] for r in ranked)
    for only in (False, True):
        a = rb.agreement(rel, response_only=only)
        assert (a["unanimous_rate"], a["pairwise_rate"]) == pytest.approx(ref_agreement(data, only))


def test_release_read_as_reward_rows_with_error_rows(tmp_path):
    root = write_release(tmp_path / "rel")
    rows = rb.read_release(rb.load_release(root))
    resp = [r for r in rows["reward_responses"] if r["status"] == "ok"]
    assert len(resp) == 18 and {r["policy_kind"] for r in resp} == {"file"}
    unparsed = [r for r in resp if r["verdict"] is None]
    assert unparsed and not any(r["correct"] for r in unparsed)  # an unparsed answer is wrong
    trip = [r for r in rows["reward_triplets"] if r["status"] == "ok"]
    assert len(trip) == 18
    bad = {r["id"]: r["error"] for t in rows.values() for r in t if r["status"] == "error"}
    assert "lacks image_id, csv1 or csv2" in bad["benchmark_broken"]
    assert any("hold none of the four choices" in e for e in bad.values())  # "nonsense"
    labels = {r["triplet_id"]: r for r in rows["reward_labels"] if r["status"] == "ok"}
    assert labels and {r["source"] for r in labels.values()} == {"human"}
    tied = [r for r in labels.values() if r["tied"]]
    assert all(r["label"] is None for r in tied)
    one = [r for r in labels.values() if r["n_annotations"] == 1]
    assert all(r["label"] in ("First", "Second", "Tie", "BothBad") for r in one)


def test_cli_prints_the_release_tables(tmp_path):
    root = write_release(tmp_path / "rel")
    res = CliRunner().invoke(app, ["reward-release", str(root), "--json-out",
                                   str(tmp_path / "t.json")])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "Policy accuracy" in res.output and "Elo" in res.output
    assert json.loads((tmp_path / "t.json").read_text())["elo"]
    bad = CliRunner().invoke(app, ["reward-release", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and "is not a folder" in bad.output


def test_a_reward_build_exports_in_the_release_shape_and_reads_back(tmp_path):
    from tests.reward.build import offline_build, store

    run, _ = offline_build()
    out = tmp_path / "export"
    res = CliRunner().invoke(app, ["reward-export-release", str(run), str(out)])
    assert res.exit_code == 0, res.output
    st = store()

    def ok(stage):
        return [r for info in st.manifest(stage) for r in st.read_shard(info).to_pylist()
                if r["status"] == "ok"]  # fmt: skip

    responses, triplets, labels = ok("reward_responses"), ok("reward_triplets"), ok("reward_labels")
    rel = rb.load_release(out)
    assert not rel.errors
    # every policy file's shape and names: FI/RI + policy, image_type, the reply as answer
    for name, rows in rel.responses.items():
        assert re.match(r"^(FI|RI).+\.json$", name)
        assert all(set(r) == {"image_id", "image_type", "answer"} for r in rows)
    assert sum(len(v) for v in rel.responses.values()) == len(responses)
    data = json.loads((out / "data/annotations/benchmark_annotations.json").read_text())
    assert all(re.fullmatch(r"annotator_\d{3}", a) for r in data.values() for a in r["annotations"])
    assert {r.get("source") for r in data.values()} == {"simulated"}  # never taken for human
    # read back: the same triplets and, per triplet, the same kept choices
    back = rb.read_release(rel)
    assert len([t for t in back["reward_triplets"] if t["status"] == "ok"]) == len(triplets)
    mine = {lab["triplet_id"]: sorted(a["choice"] for a in json.loads(lab["annotations"])
                                      if not a["dropped"]) for lab in labels}  # fmt: skip
    got = {lab["triplet_id"]: sorted(a["choice"] for a in json.loads(lab["annotations"]))
           for lab in back["reward_labels"] if lab["status"] == "ok"}  # fmt: skip
    assert got == {k: v for k, v in mine.items() if v}
    # policy accuracy by the release's rule equals the run's own where every reply parses
    acc = rb.policy_accuracy(rel, IntervalsConfig(resamples=0))
    for policy in {r["policy"] for r in responses}:
        mine_rows = [r for r in responses if r["policy"] == policy]
        if all(r["verdict"] for r in mine_rows):
            want = sum(r["correct"] for r in mine_rows) / len(mine_rows)
            assert acc[policy]["overall"].value == pytest.approx(want), policy
    # the release's own Elo on the export equals the transcribed script on the same file
    elo = {r.model: r.elo.value for r in rb.elo_table(rel, IntervalsConfig(resamples=0))}
    assert elo == pytest.approx(ref_elo(data, False))


def test_release_files_follow_the_read_policy(tmp_path):
    """A policy file that is a symlink out of the release, or a FIFO, is an error row."""
    import os

    root = write_release(tmp_path / "rel")
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps([{"image_id": "x", "answer": "fake"}]))
    outs = root / "data" / "model_outputs"
    (outs / "FIleak.json").symlink_to(outside)
    os.mkfifo(outs / "RIpipe.json")
    rel = rb.load_release(root)
    assert "FIleak.json" not in rel.responses and "RIpipe.json" not in rel.responses
    why = {e["id"]: e["error"] for e in rel.errors}
    assert "refused" in why["model_outputs/FIleak.json"]
    assert "refused" in why["model_outputs/RIpipe.json"]
    assert "FIgpt4o.json" in rel.responses  # the rest is read
