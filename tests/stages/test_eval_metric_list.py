"""The evaluation family's explanation metrics are declared once (``EXPLANATION_METRICS`` in its
eval_scores schema): the stage's metric lists, the table's columns and the report's headers all
follow that list, in its order (issue 30: they were three hand-kept lists)."""

from __future__ import annotations

from forenset.benchmarks.evaluation import report
from forenset.benchmarks.evaluation.schemas.eval_scores import EXPLANATION_METRICS, SCHEMA
from forenset.benchmarks.evaluation.stages import eval_scores


def test_stage_schema_and_report_follow_the_one_list():
    names = [m.name for m in EXPLANATION_METRICS]
    assert list(eval_scores.METRICS) == names
    for track, metrics in eval_scores.TRACK_METRICS.items():
        assert list(metrics) == [m.name for m in EXPLANATION_METRICS if track in m.tracks]
    cols = [c for c in SCHEMA.names if any(c.startswith(n) for n in names)]
    assert cols == [f"{n}{s}" for n in names for s in ("", "_model", "_backend", "_reason")]
    assert report.HEADERS[4:] == tuple(m.header for m in EXPLANATION_METRICS)


def test_every_metric_scores_a_known_track():
    for m in EXPLANATION_METRICS:
        assert m.tracks and set(m.tracks) <= {"complex", "simple"}, m
