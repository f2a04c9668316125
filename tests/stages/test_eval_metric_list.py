"""The evaluation family's metrics are declared once, in the scorer registry: the stage writes a
row per registered metric of a group's track, and Table 5's columns follow the registry's order
and headers (issue 30: they were three hand-kept lists)."""

from __future__ import annotations

from forenset.benchmarks.common.scoring import scorers
from forenset.benchmarks.evaluation.report import table5
from forenset.store.views import connect
from tests.stages.test_eval_scores import run_stage


def test_every_metric_scores_a_known_track():
    for s in scorers("evaluation"):
        assert set(s.scope.get("track", ("complex", "simple"))) <= {"complex", "simple"}, s


def test_stage_rows_and_table5_columns_follow_the_registry(tmp_path):
    store, _, _, out = run_stage(tmp_path)
    for track in ("complex", "simple"):
        want = [s.name for s in scorers("evaluation") if track in s.scope.get("track", (track,))]
        row = out[f"d1/{track}/id/all=all"]
        assert [m for m in (s.name for s in scorers("evaluation")) if m in row] == want
    t5 = table5(connect(store, ["eval_scores"]))
    assert t5.headers == [
        "detector",
        "track",
        "set",
        "n",
        *(s.header for s in scorers("evaluation")),
    ]
