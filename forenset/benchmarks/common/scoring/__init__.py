"""The benchmark families' scoring infrastructure: one scorer protocol, a registry of metrics
per family, long-format score rows with n, seeded bootstrap intervals and degenerate-set caveats,
and the pivot that turns them into the CLI's and report's tables.

* :mod:`.protocol` — :class:`Scorer`, :class:`ItemMean` (a mean of per-item values),
  :class:`Ratio` (a ratio of per-item sums) and :class:`GroupStatistic` (a statistic of a whole
  group of units, one value per subject: Elo over games);
* :mod:`.detection` — detection F1 and accuracy (fake = positive);
* :mod:`.registry` — ``BUILTIN`` (one line per metric), :func:`register`, :func:`scorers`;
* :mod:`.intervals` — :class:`IntervalsConfig`, :func:`bootstrap`, :func:`units_bootstrap`,
  :func:`degenerate`;
* :mod:`.rows` — :func:`score_rows`: one long row per metric of a group;
* :mod:`.pivot` — :func:`pivot`: long rows -> display rows;
* the table schema is :func:`forenset.schemas.scores.long_score_schema` (schemas sit below).
"""

from __future__ import annotations

from forenset.benchmarks.common.scoring.intervals import (
    IntervalsConfig,
    bootstrap,
    degenerate,
    row_seed,
    units_bootstrap,
)
from forenset.benchmarks.common.scoring.pivot import DASH, Pivot, cell, pivot
from forenset.benchmarks.common.scoring.protocol import (
    GroupStatistic,
    Item,
    ItemMean,
    Metric,
    Ratio,
    Scorer,
)
from forenset.benchmarks.common.scoring.registry import (
    BUILTIN,
    metric_names,
    register,
    scorer,
    scorers,
    unregister,
)
from forenset.benchmarks.common.scoring.rows import score_rows
from forenset.schemas.scores import SCORE_NAMES, long_score_schema

__all__ = [
    "BUILTIN", "DASH", "SCORE_NAMES", "GroupStatistic", "IntervalsConfig", "Item", "ItemMean",
    "Metric", "Pivot", "Ratio", "Scorer",
    "bootstrap", "cell", "degenerate", "long_score_schema", "metric_names", "pivot", "register",
    "row_seed", "score_rows", "scorer", "scorers", "units_bootstrap", "unregister",
]  # fmt: skip
