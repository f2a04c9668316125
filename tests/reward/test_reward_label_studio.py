"""The Label Studio round trip: tasks out, a JSON export shaped like Label Studio's back in."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from forenset.benchmarks.reward.exports import label_studio_tasks
from forenset.cli import app
from forenset.config import validate_config
from forenset.store.run_store import RunStore
from tests.helpers import rows, run_local
from tests.reward.build import STAGES_AFTER_LABELS, copied_build, reward_config


def annotation(who, choice, lead, cancelled=False):
    """One annotation as Label Studio's JSON export writes it."""
    return {
        "id": 1,
        "completed_by": who,
        "was_cancelled": cancelled,
        "lead_time": lead,
        "result": [
            {
                "from_name": "choice",
                "to_name": "image",
                "type": "choices",
                "value": {"choices": [choice]},
                "origin": "manual",
            },
        ],  # fmt: skip
        "created_at": "2026-12-05T06:00:00.000000Z",
    }


def test_tasks_out_labels_in_filtered_voted_and_scored(tmp_path):
    run = copied_build(tmp_path / "run")
    store = RunStore(str(run))
    label_studio_tasks(store, tmp_path / "ls")
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    t = [task["data"]["triplet_id"] for task in tasks]
    alice, bob, carol = 1, {"id": 2, "email": "bob@example.org"}, 3
    plans = {
        t[0]: [annotation(alice, "First", 40.0), annotation(bob, "First", 31.5)],
        t[1]: [annotation(alice, "Both Bad", 22.0), annotation(bob, "Second", 4.0)],  # bob rushed
        t[2]: [annotation(alice, "First", 30.0), annotation(bob, "Second", 30.0)],  # a tie
        t[3]: [annotation(alice, "Tie", 30.0), annotation(bob, "Second", 30.0)],  # tie, resolved
        t[4]: [annotation(alice, "Second", 25.0), annotation(carol, "First", 25.0, cancelled=True)],
    }
    export = [
        {
            "id": i + 1,
            "data": task["data"],
            "annotations": plans.get(task["data"]["triplet_id"], []),
        }
        for i, task in enumerate(tasks)
    ]
    export.append({"id": 999, "data": {**tasks[0]["data"], "triplet_id": "nope#0"},
                   "annotations": [annotation(alice, "First", 30.0)]})  # fmt: skip
    export.append(
        {"id": 1000, "data": tasks[5]["data"], "annotations": [annotation(alice, "Maybe", 30.0)]}
    )
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    labels = {"path": str(path), "resolutions": {t[3]: "Tie"}}
    _, _, executed = run_local(validate_config(reward_config(run, labels=labels)))
    assert executed["reward_labels"] == 1 and executed["reward_scores"] == 1
    assert all(executed[s] == 0 for s in STAGES_AFTER_LABELS)  # nothing upstream of the labels
    got = {r["triplet_id"]: r for r in rows(store, "reward_labels")}
    ok = {k: r for k, r in got.items() if r["status"] == "ok"}
    assert set(ok) == set(t[:5]) and {r["source"] for r in ok.values()} == {"human"}
    assert ok[t[0]]["label"] == "First" and ok[t[0]]["n_annotations"] == 2
    anns = json.loads(ok[t[0]]["annotations"])
    assert {a["annotator"] for a in anns} == {"1", "bob@example.org"}
    assert ok[t[1]]["label"] == "BothBad" and ok[t[1]]["n_dropped"] == 1
    assert ok[t[2]]["tied"] and ok[t[2]]["label"] is None and ok[t[2]]["resolved_by"] is None
    assert ok[t[3]]["label"] == "Tie" and ok[t[3]]["resolved_by"] == "manual"
    assert ok[t[4]]["label"] == "Second" and ok[t[4]]["n_annotations"] == 1  # cancelled ignored
    errors = sorted(r["error"] for r in got.values() if r["status"] == "error")
    assert len(errors) == 2
    assert errors[0].startswith("1 annotation(s) do not pick exactly one") and t[5] in errors[0]
    assert errors[1].startswith(
        "1 task(s) name a triplet this run does not have and are not used (nope#0)"
    )
    sc = {r["score_id"]: r for r in rows(store, "reward_scores")}
    assert not any(r["labels_source"] == "simulated" for r in sc.values())  # never mixed
    assert sc["judge_accuracy/rules/shown/human/acc4"]["n"] == 4  # t0, t1, t3, t4: labelled
    ag = sc["agreement/annotators/4-way/human/agreement"]
    assert (ag["value"], ag["n"]) == (1 / 3, 3)  # t0 agree; t2, t3 disagree (t1: bob dropped)
    assert sc["agreement/annotators/clear/human/agreement"]["value"] == 0.5  # t0 yes, t2 no
    res = CliRunner().invoke(app, ["reward", str(run)])
    assert res.exit_code == 0, res.output
    assert f"1 tied triplet(s) to resolve (reward.labels.resolutions): {t[2]}" in res.output
    assert "SIMULATED" not in res.output
