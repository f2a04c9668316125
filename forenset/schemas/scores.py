"""The long-format score table shared by the benchmark families: one row per (group, metric).

A wide table (one column per metric) needs a schema change and a report change for every new
metric, and has no room for a metric's n, interval or caveat. A long table has the same columns
for every metric, so adding one is a scorer module and a registry line
(``forenset.benchmarks.common.scoring``), and the CLI and report pivot it back for display.
"""

from __future__ import annotations

import pyarrow as pa

from forenset.schemas.common import F64, I64, S, stage_schema

SCORE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("metric", S),  # the registry name of the metric (scoring.registry)
    pa.field("value", F64),  # null when not computable (then ``reason`` says why)
    pa.field("n", I64),  # the items behind the value
    pa.field("ci_low", F64),  # bootstrap percentile interval (``intervals``), null with ci_reason
    pa.field("ci_high", F64),
    pa.field("ci_reason", S),  # why there is no interval (null value, n < 2, no per-item data)
    pa.field("reason", S),  # why value is null
    # non-null when the value is not meaningful (one class in the set, n below intervals.min_n):
    # displays show "not meaningful (caveat)" instead of the number
    pa.field("caveat", S),
    pa.field("details", S),  # per-metric extras as a JSON object (confusion counts, ...)
)
SCORE_NAMES = tuple(f.name for f in SCORE_FIELDS)


def long_score_schema(*group_fields: str | pa.Field) -> pa.Schema:
    """``score_id`` (the group key and the metric), the family's group fields (a name is a
    string column), the score columns and the stage trace columns. The trace's ``model`` and
    ``backend`` name who computed the row's value (the metric's model or library, ``offline``
    or the backend of that model), so they are not repeated among the score columns."""
    fields = [f if isinstance(f, pa.Field) else pa.field(f, S) for f in group_fields]
    return stage_schema(pa.field("score_id", S, nullable=False), *fields, *SCORE_FIELDS)
