"""Long score rows -> the wide tables of ``forenset <family>`` and the HTML report.

Columns follow the family's registry order; a cell reads ``value [ci_low, ci_high]`` (percent
metrics x100), ``not meaningful (caveat)`` when the row carries a caveat, and a dash when the
value is null (its reason goes to the notes under the table). The ``n`` column is the largest n
of the row's metrics; a metric on fewer items says so in its cell (``n=…``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forenset.benchmarks.common.scoring.protocol import Metric

DASH = "\u2014"
NOT_MEANINGFUL = "not meaningful ({})"


def number(value: float | None, percent: bool, digits: int | None = None) -> str:
    """x100 with 2 decimals for a percent metric, else ``digits`` (the metric's, default 3)."""
    if value is None:
        return DASH
    if percent:
        return f"{100 * value:.2f}"
    return f"{value:.{3 if digits is None else digits}f}"


def cell(row: Mapping[str, Any] | None, scorer: Metric, n: int | None = None) -> str:
    """One long row as display text (module doc); a missing row is a dash."""
    if row is None or row.get("value") is None:
        return DASH
    if row.get("caveat"):
        return NOT_MEANINGFUL.format(row["caveat"])
    digits = getattr(scorer, "digits", None)
    text = number(row["value"], scorer.percent, digits)
    if row.get("ci_low") is not None and row.get("ci_high") is not None:
        lo, hi = (number(row[k], scorer.percent, digits) for k in ("ci_low", "ci_high"))
        text += f" [{lo}, {hi}]"
    if n is not None and row.get("n") is not None and row["n"] != n:
        text += f" n={row['n']}"
    return text


@dataclass
class Pivot:
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    # (header, reason) -> the rows (index values) where that metric is null for it
    notes: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # index tuple -> metric -> long row (for plots and tests)
    cells: dict[tuple, dict[str, Mapping[str, Any]]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)  # "EntityScore: phrase-match-v1", ...

    def note_lines(self) -> list[str]:
        return [f"{DASH} {h}: {why} ({', '.join(w)})" for (h, why), w in self.notes.items()]


def pivot(
    rows: Iterable[Mapping[str, Any]],
    index: Sequence[str],
    scorers: Sequence[Metric],
    *,
    index_headers: Sequence[str] | None = None,
    label: Mapping[str, Any] | None = None,
    by: str | None = None,
    by_order: Sequence[Any] = (),
) -> Pivot:
    """One display row per distinct ``index`` value (sorted), one column per scorer that has a
    row anywhere, in registry order. ``label`` maps an index field to a function formatting it.
    ``by``: a group field whose values become the columns (the paper's category columns), per
    scorer, in ``by_order`` (then the other values, sorted); a header is the value, prefixed by
    the scorer's header when more than one scorer is shown."""
    label = label or {}
    by_key: dict[tuple, dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        col = row["metric"] if by is None else (row["metric"], row[by])
        by_key.setdefault(tuple(row[f] for f in index), {})[col] = row  # type: ignore[index]
    present = {c if by is None else c[0] for got in by_key.values() for c in got}
    shown = [s for s in scorers if s.name in present]
    if by is None:
        cols: list[tuple[Metric, Any, str]] = [(s, s.name, s.header) for s in shown]
    else:
        seen = {c[1] for got in by_key.values() for c in got}
        values = [v for v in by_order if v in seen]
        values += sorted((v for v in seen if v not in values), key=str)
        cols = [
            (s, (s.name, v), str(v) if len(shown) == 1 else f"{s.header} {v}")
            for s in shown
            for v in values
        ]
    out = Pivot([*(index_headers or index), "n", *(h for _, _, h in cols)], cells=by_key)
    models = set()
    for key in sorted(by_key, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        got = by_key[key]
        ns = [g["n"] for g in got.values() if g.get("n") is not None]
        n = max(ns) if ns else None
        shown_key = [
            str(label[f](v)) if f in label else str(v) for f, v in zip(index, key, strict=True)
        ]
        where = " ".join(shown_key)
        line = [*shown_key, DASH if n is None else str(n)]
        for s, col, header in cols:
            r: Mapping[str, Any] | None = got.get(col)
            line.append(cell(r, s, n))
            if r is not None and r.get("value") is None and r.get("reason"):
                out.notes.setdefault((header, r["reason"]), []).append(where)
            if r is not None and r.get("value") is not None and r.get("model"):
                models.add(f"{s.header}: {r['model']}")
        out.rows.append(line)
    out.models = sorted(models)
    return out


def group_id(score_id: str) -> str:
    """The group part of a long row's ``score_id`` (``<group id>/<metric>``)."""
    return score_id.rsplit("/", 1)[0]


PER_METRIC = ("model", "backend", "reason", "n", "ci_low", "ci_high", "ci_reason", "caveat")


def wide_rows(
    rows: Iterable[Mapping[str, Any]], group_fields: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Long rows back to one wide row per group (keyed by its group id), in the shape of the
    old wide tables: ``<metric>`` (the value), ``<metric>_model`` / ``_backend`` / ``_reason`` /
    ``_n`` / ``_ci_low`` / ``_ci_high`` / ``_ci_reason`` / ``_caveat``, the ``details`` keys
    as they are (confusion counts), and ``n``, the largest n of the group's metrics. For
    checks and tests: the displays use :func:`pivot`."""
    import json

    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        w = out.setdefault(group_id(r["score_id"]), {f: r.get(f) for f in group_fields})
        m = r["metric"]
        w[m] = r.get("value")
        w.update({f"{m}_{k}": r.get(k) for k in PER_METRIC})
        if r.get("details"):
            w.update(json.loads(r["details"]))
        if r.get("n") is not None:
            w["n"] = max(w.get("n") or 0, r["n"])
    return out
