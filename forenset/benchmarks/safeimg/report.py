"""The report's SafeIMG section: Tables 2-3 shapes from ``benchmarks/safeimg/scores.json``
(written by ``forenset safeimg``); empty when the run has none."""

from __future__ import annotations

import html
import json
from typing import Any

from forenset.store.run_store import RunStore


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def safeimg_section(store: RunStore, con: Any = None) -> str:
    """Tables 2-3 from the scores ``forenset safeimg`` wrote; "" before it ran (``con``: the
    report's connection, unused: the scores are a JSON file)."""
    from forenset.benchmarks.safeimg.sets import OUT, pivots

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
