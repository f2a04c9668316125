"""Long-format score rows of one group: every scorer's value, n, interval, caveat."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from forenset.benchmarks.common.scoring.intervals import (
    IntervalsConfig,
    bootstrap,
    degenerate,
    row_seed,
)
from forenset.benchmarks.common.scoring.protocol import Item, Metric, Scorer


def in_scope(scorer: Metric, group: Mapping[str, Any]) -> bool:
    return all(group.get(f) in allowed for f, allowed in scorer.scope.items())


def score_rows(
    group: Mapping[str, Any],
    group_id: str,
    items: Sequence[Item],
    scorers: Sequence[Metric],
    intervals: IntervalsConfig,
    seed: int,
) -> list[dict[str, Any]]:
    """One row per scorer in scope of ``group`` (its field values): ``score_id`` is
    ``<group_id>/<metric>``; the interval is seeded by ``intervals.seed`` (else ``seed``, the
    build seed) and the score_id; the row's ``seed`` column holds that seed. A
    :class:`GroupStatistic` (one value per subject of a whole group of units, e.g. Elo) has no
    per-group form: its family's stage scores it (e.g. an arena's Elo), so it is skipped here."""
    base = intervals.seed if intervals.seed is not None else seed
    rows = []
    for s in scorers:
        if not isinstance(s, Scorer) or not in_scope(s, group):
            continue
        score = s.score(items)
        x = s.sample(items)
        n = len(x) if x is not None else len(items)
        score_id = f"{group_id}/{s.name}"
        ci, ci_reason = None, None
        if score.value is None:
            ci_reason = "no value"
        elif x is None:
            ci_reason = "the metric has no per-item values to resample"
        elif intervals.resamples == 0:
            ci_reason = "intervals.resamples is 0"
        elif n < 2:
            ci_reason = f"n = {n}: an interval needs at least two items"
        else:
            ci = bootstrap(
                x,
                s.statistic,
                resamples=intervals.resamples,
                level=intervals.level,
                seed=row_seed(base, score_id),
            )
            if ci is None:
                ci_reason = "the metric is undefined on every resample"
        classes = [str(i[s.truth]).lower() for i in items] if s.classes else None
        details = {k: v for k, v in score.details.items() if k != "n"}
        rows.append(
            {
                "score_id": score_id,
                **group,
                "metric": s.name,
                "value": score.value,
                "n": n,
                "ci_low": ci[0] if ci else None,
                "ci_high": ci[1] if ci else None,
                "ci_reason": ci_reason,
                "model": score.model or None,
                "backend": score.backend or None,
                "reason": score.reason,
                "caveat": degenerate(n, intervals.min_n, classes, s.classes),
                "details": json.dumps(details, sort_keys=True) if details else None,
                "seed": base,  # the bootstrap's seed (with the score_id: row_seed)
            }
        )
    return rows
