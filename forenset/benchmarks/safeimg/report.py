"""The report's SafeIMG section: Tables 2-3 shapes from ``benchmarks/safeimg/scores.json``
(written by ``forenset safeimg``); empty when the run has none."""

from __future__ import annotations

import html
import json
from typing import Any

from forenset.store.run_store import RunStore


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _cell(c: dict[str, Any] | None, notes: list[str], where: str) -> str:
    """value [95 % interval] n=…; "not meaningful" (its caveat to ``notes``); a dash."""
    c = c or {}
    if c.get("value") is None:
        return "–"
    if c.get("caveat"):
        notes.append(f"{where}: not meaningful ({c['caveat']})")
        return f"not meaningful (n={c.get('n')})"
    ci = f" [{_pct(c['ci_low'])}, {_pct(c['ci_high'])}]" if c.get("ci_low") is not None else ""
    return f"{_pct(c['value'])}{ci} n={c.get('n')}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def safeimg_section(store: RunStore) -> str:
    from forenset.benchmarks.safeimg.sets import OUT, SUBSETS, categories

    try:
        res: dict[str, Any] = json.loads(store.read_bytes(f"{OUT}/scores.json"))
    except FileNotFoundError:
        return ""
    cols = [*categories(), "Overall"]
    notes: list[str] = []
    out = "<h2>SafeIMG (Tables 2-3)</h2>"
    iv = res.get("intervals") or {}
    out += (
        f"<p>Each number: value [95% bootstrap interval, {iv.get('resamples')} resamples over "
        "images; hit rate: over anomalies] and n; not meaningful below "
        f"{iv.get('min_n')} items.</p>"
    )
    out += f"<p>sets: {html.escape(json.dumps(res['counts']))}</p>"
    if res.get("simulated_annotations"):
        out += "<p><b>Annotations are SIMULATED (demo only): not human judgements.</b></p>"
    for name in SUBSETS:
        rows = [
            [m] + [_cell(c.get(k), notes, f"{m} {name} {k}") for k in cols]
            for m, c in res["table2"].get(name, {}).items()
        ]
        out += f"<h3>AI detection rate (%) on {name} (eq. 12)</h3>" + _table(["model", *cols], rows)
    rows = [
        [m] + [_cell(c.get(k), notes, f"{m} D_real {k}") for k in cols]
        for m, c in res["real_accuracy"].items()
    ]
    out += "<h3>Real-image accuracy (%) on D_real</h3>" + _table(["model", *cols], rows)
    levels = sorted({lv for c in res["propagation"].values() for lv in c})
    rows = [
        [m] + [_cell(c.get(lv), notes, f"{m} {lv}") for lv in levels]
        for m, c in res["propagation"].items()
    ]
    out += "<h3>AI detection rate (%) by propagation level</h3>" + _table(["model", *levels], rows)
    rows = []
    for m, t3 in res["table3"].items():
        for metric in ("Human Covered by AI", "AI Supported by Human"):
            rows.append(
                [f"{metric} [{m}]"]
                + [_cell(t3[metric][k], notes, f"{metric} [{m}] {k}") for k in cols]
            )
    out += f"<h3>Human-AI alignment (%) on D_ann, matcher {html.escape(res['matcher'])}</h3>"
    out += _table(["metric", *cols], rows)
    labels = sorted({lab for c in res["hit_rate"].values() for lab in c})
    rows = [
        [m] + [_cell(c.get(lab), notes, f"{m} hit rate {lab}") for lab in labels]
        for m, c in res["hit_rate"].items()
    ]
    out += "<h3>Hit rate (%) per artefact label</h3>" + _table(["model", *labels], rows)
    for m, d in res["delta"].items():
        rows = [
            [sc] + [_cell(v.get(lab), notes, f"{m} Δ {sc} {lab}") for lab in labels]
            for sc, v in d.items()
        ]
        out += f"<h3>Δ(l) (eq. 13, points) per scope [{html.escape(m)}]</h3>"
        out += _table(["scope", *labels], rows)
    if notes:
        out += "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
    return out
