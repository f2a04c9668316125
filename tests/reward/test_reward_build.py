"""The offline reward path end to end on one shared build: images, responses, triplets, judges,
simulated labels, scores, the CLI tables, the report section, and the exports."""

from __future__ import annotations

import json
from collections import Counter

import datasets
import pytest
from typer.testing import CliRunner

from forenset.benchmarks.reward.scorers.metrics import acc2, acc4, flip
from forenset.cli import app
from forenset.config import validate_config
from forenset.images import decode_rgb
from tests.helpers import rows, run_local
from tests.reward.build import offline_build, reward_config, store

pytestmark = pytest.mark.slow  # the reward example built end to end (tiny diffusers renders)

STAGES = ("reward_images", "reward_responses", "reward_triplets", "reward_judgments",
          "reward_labels", "reward_scores")  # fmt: skip


def ok(stage):
    got = rows(store(), stage)
    assert all(r["status"] == "ok" for r in got), [r["error"] for r in got if r["status"] != "ok"]
    return got


def test_every_reward_stage_ran_without_failures():
    _, stats = offline_build()
    for s in STAGES:
        assert stats[s].rows > 0 and stats[s].failed == 0, s


def test_images_are_square_reals_and_one_caption_group_per_generator():
    imgs = ok("reward_images")
    reals = [r for r in imgs if r["generator"] == "real"]
    fakes = [r for r in imgs if r["generator"] != "real"]
    assert len(reals) == len(fakes) == 4
    assert {r["label"] for r in reals} == {"real"} and {r["label"] for r in fakes} == {"fake"}
    assert Counter(r["generator"] for r in fakes) == {"sd-a": 2, "sd-b": 2}
    assert {r["group"] for r in fakes if r["generator"] == "sd-a"} == {0}
    caps = {r["image_id"]: r["caption"] for r in reals}
    assert {r["image_id"] for r in fakes} == set(caps)  # each real's caption made one fake
    assert all(r["caption"] == caps[r["image_id"]] for r in fakes)
    for r in imgs:
        a = decode_rgb(store().get_blob(r["blob"]))
        assert a.shape[0] == a.shape[1] == r["width"] == r["height"] <= 64
    assert {r["backend"] for r in fakes} == {"diffusers"}


def test_policies_answer_every_image_with_verdict_and_explanation():
    resp = ok("reward_responses")
    by = {p: [r for r in resp if r["policy"] == p] for p in {r["policy"] for r in resp}}
    assert set(by) == {"forensic-grounded", "forensic-plain", "always-real"}
    assert all(len(v) == 8 for v in by.values())
    assert all(r["reply"].lower().startswith(r["verdict"]) and r["explanation"] for r in resp)
    assert all(r["correct"] == (r["verdict"] == r["label"]) for r in resp)
    assert {r["verdict"] for r in by["always-real"]} == {"real"}
    grounded = {r["reward_image_id"]: r for r in by["forensic-grounded"]}
    for r in by["forensic-plain"]:  # same detector, same verdict, weaker explanation
        g = grounded[r["reward_image_id"]]
        assert r["verdict"] == g["verdict"] and "sigma" in g["explanation"]
        assert "sigma" not in r["explanation"]


def test_triplets_pair_round_robin_with_scrambled_order_and_position():
    trips = ok("reward_triplets")
    assert len(trips) == 3 * 8
    assert set(Counter(t["pair"] for t in trips).values()) == {8}  # 3 pairs, 8 times each
    assert set(Counter(p for t in trips for p in t["pair"].split("|")).values()) == {16}
    assert sorted(t["position"] for t in trips) == list(range(24))
    assert [t["triplet_id"] for t in sorted(trips, key=lambda t: t["position"])] != sorted(
        t["triplet_id"] for t in trips
    )
    assert 0 < sum(t["swapped"] for t in trips) < 24
    resp = {r["response_id"]: r for r in ok("reward_responses")}
    for t in trips:
        a, b = t["pair"].split("|")
        shown = (b, a) if t["swapped"] else (a, b)
        assert (t["first_policy"], t["second_policy"]) == shown
        assert resp[t["first_response_id"]]["reply"] == t["first_reply"]
        assert resp[t["second_response_id"]]["policy"] == t["second_policy"]


def test_rule_judge_answers_both_orders_mapped_back():
    js = ok("reward_judgments")
    assert Counter(j["order"] for j in js) == {"shown": 24, "swapped": 24}
    assert {j["backend"] for j in js} == {"offline"}
    by = {(j["triplet_id"], j["order"]): j for j in js}
    for (tid, order), j in by.items():
        assert j["choice"] in ("First", "Second", "Tie", "BothBad")
        assert j["choice_shown"] == (flip(j["choice"]) if order == "swapped" else j["choice"])
        # the rubric judge reads the texts only: exchanging them exchanges its answer
        assert by[(tid, "shown")]["choice_shown"] == by[(tid, "swapped")]["choice_shown"]


def test_simulated_labels_are_labelled_simulated_and_filtered():
    labs = ok("reward_labels")
    assert len(labs) == 24 and {r["source"] for r in labs} == {"simulated"}
    assert {r["backend"] for r in labs} == {"simulated"}
    for r in labs:
        anns = json.loads(r["annotations"])
        assert {a["annotator"] for a in anns} == {"sim-1", "sim-2", "sim-3"}
        assert all(a["dropped"] == (a["lead_time"] < 15) for a in anns)
        kept = [a["choice"] for a in anns if not a["dropped"]]
        assert r["n_annotations"] == len(kept) and r["n_dropped"] == 3 - len(kept)
        top = Counter(kept).most_common()
        if r["tied"]:
            assert r["label"] is None and len(top) > 1 and top[0][1] == top[1][1]
        elif kept:
            assert r["label"] == top[0][0] and r["resolved_by"] == "majority"


def test_scores_match_the_tables_they_come_from():
    sc = {r["score_id"]: r for r in ok("reward_scores")}
    labs = {r["triplet_id"]: r["label"] for r in ok("reward_labels") if r["label"]}
    shown = {
        j["triplet_id"]: j["choice_shown"] for j in ok("reward_judgments") if j["order"] == "shown"
    }
    j4 = sc["judge_accuracy/rules/shown/simulated/acc4"]
    j2 = sc["judge_accuracy/rules/shown/simulated/acc2"]
    assert (j4["value"], j4["n"]) == acc4(shown, labs) and (j2["value"], j2["n"]) == acc2(
        shown, labs
    )
    assert j4["labels_source"] == "simulated" and j4["metric"] == "acc4"
    resp = ok("reward_responses")
    for p in ("forensic-grounded", "always-real"):
        mine = [r for r in resp if r["policy"] == p and r["label"] == "fake"]
        got = sc[f"policy_accuracy/{p}/fake/-/accuracy"]
        assert got["value"] == sum(r["correct"] for r in mine) / 4 and got["n"] == 4
    assert sc["policy_accuracy/always-real/real/-/accuracy"]["value"] == 1.0
    elo: dict[str, dict[str, float]] = {}
    for r in sc.values():
        if r["table"] == "elo" and r["labels_from"] == "simulated":
            elo.setdefault(r["subject"], {})[r["metric"]] = r["value"]
    assert sorted(e["rank"] for e in elo.values()) == [1, 2, 3]
    games = sum(1 for v in labs.values() if v != "BothBad")
    assert sum(e["games"] + e["ties"] for e in elo.values()) == 2 * games
    assert all(e["games"] == e["wins"] + e["losses"] for e in elo.values())
    assert {r["labels_from"] for r in sc.values() if r["table"] == "elo"} == {"simulated", "rules"}
    assert sc["agreement/annotators/4-way/simulated/agreement"]["n"] > 0


def test_every_score_has_n_and_an_interval_or_the_reason_and_small_sets_a_caveat():
    """Issue 31: intervals bracket the value (seeded: the same on a rebuild); counts and the
    Elo spread have no interval and say so; a set under intervals.min_n (10) is flagged."""
    sc = ok("reward_scores")
    assert sc and all(r["n"] is not None for r in sc)
    for r in sc:
        if r["ci_low"] is None:
            assert r["ci_reason"], r["score_id"]
        else:
            assert r["ci_low"] - 1e-9 <= r["value"] <= r["ci_high"] + 1e-9, r["score_id"]
            assert r["ci_reason"] is None
    by = {r["score_id"]: r for r in sc}
    assert by["elo/always-real/overall/simulated/games"]["ci_reason"] == "a count: no interval"
    assert by["elo/always-real/overall/simulated/elo"]["ci_low"] is not None
    assert by["elo/always-real/overall/simulated/bt"]["ci_low"] is not None
    small = by["policy_accuracy/always-real/real/-/accuracy"]  # 4 reals in the test build
    assert small["n"] == 4 and small["caveat"].startswith("n = 4 is below")
    overall = by["policy_accuracy/always-real/overall/-/accuracy"]
    assert overall["n"] == 8 and "n = 8" in overall["caveat"]


def test_cli_prints_tables_2_to_5_and_writes_both_exports(tmp_path):
    run = str(offline_build()[0])
    res = CliRunner().invoke(
        app, ["reward", run, "--label-studio", str(tmp_path / "ls"), "--hf", str(tmp_path / "hf")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    for text in ("Tables 1-2", "Tables 3/5", "Table 4", "sd-a", "forensic-grounded", "SIMULATED",
                 "inter-annotator agreement", "24 tasks", "24 triplets", "95% CI",
                 "not meaningful", "Fig. 3", "win rate"):  # fmt: skip
        assert text in res.output, text
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    assert len(tasks) == 24 and "policy" not in json.dumps(tasks)  # sources hidden (App. B)
    xml = (tmp_path / "ls" / "config.xml").read_text()
    assert all(f'value="{c}"' in xml for c in ("First", "Second", "Tie", "Both Bad"))
    assert "Hallucination" in xml and "Counterargument" in xml
    ds = datasets.load_dataset(str(tmp_path / "hf"), split="test")
    assert ds.num_rows == 24 and set(ds["label_source"]) == {"simulated"}
    assert ds[0]["image"].size == (64, 64) and ds[0]["first_response"]


def test_report_has_the_reward_section():
    from forenset.report.html import render_report

    html = render_report(store(), gallery=0)
    assert "Reward benchmark" in html and "Table 4" in html


def test_rerun_does_no_work_and_changing_k_rescores_only():
    run, _ = offline_build()
    _, _, executed = run_local(validate_config(reward_config(run)))
    assert all(executed[s] == 0 for s in STAGES)
    _, _, executed = run_local(validate_config(reward_config(run, elo_k=16)))
    assert executed["reward_scores"] == 1 and all(executed[s] == 0 for s in STAGES[:-1])
    _, _, executed = run_local(validate_config(reward_config(run)))  # back to the shared state
    assert executed["reward_scores"] == 1


def test_human_written_baseline_is_imported_paired_and_ranked(tmp_path):
    """Table 5: written responses as one more policy; only its shard and what follows run."""
    from tests.reward.build import REWARD, copied_build

    run = copied_build(tmp_path / "run")
    images = sorted(r["reward_image_id"] for r in ok("reward_images"))
    lines = [
        json.dumps({"sample_id": images[0], "answer": "fake", "explanation": "The cup's handle "
                    "melts into the saucer at the lower right, a clear generation artifact."}),
        json.dumps({"sample_id": images[1], "answer": "Real", "explanation": "Consistent "
                    "shadows and sensor noise across the whole frame."}),
        json.dumps({"sample_id": "nowhere/x", "answer": "real", "explanation": "?"}),
        "not json",
    ]  # fmt: skip
    path = tmp_path / "human.jsonl"
    path.write_text("\n".join(lines) + "\n")
    policies = [
        {"name": "forensic-grounded"},
        {"name": "forensic-plain", "grounded": False},
        {"name": "always-real", "kind": "constant"},
        {"name": "human", "kind": "file", "path": str(path)},
    ]
    assert [p["name"] for p in policies[:3]] == [
        "forensic-grounded", "forensic-plain", "always-real",
    ]  # fmt: skip  # the defaults, unchanged
    store2, _, executed = run_local(validate_config(reward_config(run, policies=policies)))
    assert executed["reward_images"] == 0 and executed["reward_responses"] == 1
    assert REWARD["enabled"]
    resp = [r for r in rows(store2, "reward_responses") if r["policy"] == "human"]
    good = [r for r in resp if r["status"] == "ok"]
    assert sorted(r["reward_image_id"] for r in good) == images[:2]
    assert {r["verdict"] for r in good} == {"fake", "real"} and {r["backend"] for r in good} == {
        "file"
    }
    assert len([r for r in resp if r["status"] == "error"]) == 2  # unknown id, not a record
    trips = rows(store2, "reward_triplets")
    human = [t for t in trips if "human" in t["pair"]]
    assert len(human) == 6 and {t["reward_image_id"] for t in human} == set(images[:2])
    assert len(trips) == 24  # still 3 per image
    elo = {
        r["subject"]: r
        for r in rows(store2, "reward_scores")
        if r["table"] == "elo" and r["labels_from"] == "simulated" and r["metric"] == "rank"
    }
    assert set(elo) == {"forensic-grounded", "forensic-plain", "always-real", "human"}
    assert sorted(r["value"] for r in elo.values()) == [1, 2, 3, 4]
