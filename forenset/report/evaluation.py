"""Table 5 of XPlainVerse from the eval_scores table: one row per detector and track, detection
F1 on the ID and OOD sets and the explanation metrics, each cell "ID / OOD".

Shared by ``forenset eval`` (a Rich table) and the HTML report, so both show the same numbers.
A null metric is a dash with its reason; model-based metrics name the model that computed them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# (eval_scores column, header) of each explanation metric, in the paper's order
EVAL_METRICS = (
    ("entity_score", "EntityScore"),
    ("evidence_score", "EvidenceScore"),
    ("bertscore_f1", "BERTScore-F1"),
    ("sle", "SLE"),
)
HEADERS = ("detector", "track", "F1 ID", "F1 OOD", *(h for _, h in EVAL_METRICS))
DASH = "\u2014"


@dataclass
class Table5:
    rows: list[list[str]] = field(default_factory=list)
    f1: dict[tuple[str, str], tuple[float | None, float | None]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)  # "EntityScore: phrase-match-v1", ...
    reasons: dict[tuple[str, str], list[str]] = field(
        default_factory=dict
    )  # (metric, why) -> where


def table5(con: Any) -> Table5 | None:
    """The table from a DuckDB connection with an ``eval_scores`` view (None: no whole-set rows)."""
    metric_cols = ", ".join(f"{m}, {m}_model, {m}_reason" for m, _ in EVAL_METRICS)
    cur = con.execute(
        f"SELECT detector, track, eval_set, f1, f1_reason, {metric_cols} FROM eval_scores "
        "WHERE group_kind = 'all' AND status = 'ok' ORDER BY detector, track, eval_set"
    )
    names = [d[0] for d in cur.description]
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for r in cur.fetchall():
        row = dict(zip(names, r, strict=True))
        cells.setdefault((row["detector"], row["track"]), {})[row["eval_set"]] = row
    if not cells:
        return None
    out = Table5()

    def cell(key: tuple[str, str], eval_set: str, metric: str, header: str, pct: bool) -> str:
        row = cells[key].get(eval_set)
        where = f"{key[0]} {key[1]} {eval_set.upper()}"
        if row is None:
            out.reasons.setdefault((header, f"no {eval_set.upper()} items scored"), []).append(
                where
            )
            return DASH
        value = row[metric]
        if value is None:
            why = row[f"{metric}_reason"] or "no value"
            out.reasons.setdefault((header, why), []).append(where)
            return DASH
        return f"{100 * value:.2f}" if pct else f"{value:.3f}"

    for key in sorted(cells):
        out.rows.append(
            [
                *key,
                cell(key, "id", "f1", "F1", True),
                cell(key, "ood", "f1", "F1", True),
                *(
                    f"{cell(key, 'id', m, h, False)} / {cell(key, 'ood', m, h, False)}"
                    for m, h in EVAL_METRICS
                ),
            ]
        )
        out.f1[key] = tuple(  # type: ignore[assignment]
            (cells[key].get(s) or {}).get("f1") for s in ("id", "ood")
        )
    out.models = sorted(
        {
            f"{h}: {row[f'{m}_model']}"
            for sets in cells.values()
            for row in sets.values()
            for m, h in EVAL_METRICS
            if row[m] is not None and row[f"{m}_model"]
        }
    )
    return out
