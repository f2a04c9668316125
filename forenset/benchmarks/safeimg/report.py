"""The report's SafeIMG section: Tables 2-3 shapes from ``benchmarks/safeimg/scores.json``
(written by ``forenset safeimg``); empty when the run has none."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from forenset.benchmarks.common.scoring import Pivot, pivot, scorer
from forenset.store.run_store import RunStore


def pivots(res: dict[str, Any], columns: Sequence[str] | None = None) -> list[tuple[str, Pivot]]:
    """The SafeIMG tables as pivots of the long rows (``res["scores"]``): one column per
    category (Table 2, real accuracy, Table 3), level or label, one row per model (Δ(l): per
    model and scope). Shared by ``forenset safeimg`` and the report."""
    from forenset.benchmarks.safeimg.sets import SUBSETS, categories

    rows = res.get("scores") or []
    cols = list(columns or [*categories(), "Overall"])

    def one(title: str, metric: str, index: tuple[str, ...], headers: tuple[str, ...],
            **where: str) -> list[tuple[str, Pivot]]:  # fmt: skip
        mine = [
            r for r in rows
            if r["metric"] == metric and all(r[k] == v for k, v in where.items())
        ]  # fmt: skip
        p = pivot(mine, index, [scorer("safeimg", metric)], index_headers=headers,
                  by="column", by_order=cols)  # fmt: skip
        return [(title, p)]

    out: list[tuple[str, Pivot]] = []
    for name in SUBSETS:
        out += one(f"Table 2 - AI detection rate (%) on {name} (eq. 12)", "detection_rate",
                   ("detector",), ("model",), table="table2", set=name)  # fmt: skip
    out += one("Real-image accuracy (%) on D_real", "real_accuracy", ("detector",), ("model",))
    out += one("AI detection rate (%) by propagation level on D_SafeIMG", "detection_rate",
               ("detector",), ("model",), table="propagation")  # fmt: skip
    matcher = res.get("matcher", "")
    for metric, header in (("human_covered", "Human Covered by AI"),
                           ("ai_supported", "AI Supported by Human")):  # fmt: skip
        out += one(f"Table 3 - Human-AI alignment (%) on D_ann, matcher {matcher}: {header}",
                   metric, ("detector",), ("model",))  # fmt: skip
    out += one("Hit rate (%) per artefact label (over anomalies)", "hit_rate", ("detector",),
               ("model",))  # fmt: skip
    out += one("Δ(l) (eq. 13, points) per scope", "delta", ("detector", "set"), ("model", "scope"))
    return out


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def safeimg_section(store: RunStore) -> str:
    from forenset.benchmarks.safeimg.sets import OUT

    try:
        res: dict[str, Any] = json.loads(store.read_bytes(f"{OUT}/scores.json"))
    except FileNotFoundError:
        return ""
    out = "<h2>SafeIMG (Tables 2-3)</h2>"
    iv = res.get("intervals") or {}
    out += (
        f"<p>Each number: value [95% bootstrap interval, {iv.get('resamples')} resamples over "
        "images; hit rate: over anomalies] and n where it differs from the row's; not "
        f"meaningful below {iv.get('min_n')} items.</p>"
    )
    out += f"<p>sets: {html.escape(json.dumps(res['counts']))}</p>"
    if res.get("simulated_annotations"):
        out += "<p><b>Annotations are SIMULATED (demo only): not human judgements.</b></p>"
    if "scores" not in res:
        return out + "<p>scores.json predates the long rows: rerun forenset safeimg.</p>"
    notes: list[str] = []
    for title, p in pivots(res):
        out += f"<h3>{html.escape(title)}</h3>" + _table(p.headers, p.rows)
        notes += p.note_lines()
    if notes:
        out += "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
    return out
