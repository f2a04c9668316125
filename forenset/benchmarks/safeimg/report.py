"""The report's SafeIMG section: Tables 2-3 shapes from ``benchmarks/safeimg/scores.json``
(written by ``forenset safeimg``); empty when the run has none."""

from __future__ import annotations

import html
import json
from typing import Any

from forenset.store.run_store import RunStore


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


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
    out = "<h2>SafeIMG (Tables 2-3)</h2>"
    out += f"<p>sets: {html.escape(json.dumps(res['counts']))}</p>"
    if res.get("simulated_annotations"):
        out += "<p><b>Annotations are SIMULATED (demo only): not human judgements.</b></p>"
    for name in SUBSETS:
        rows = [
            [m] + [_pct(c.get(k, {}).get("value")) for k in cols]
            for m, c in res["table2"].get(name, {}).items()
        ]
        out += f"<h3>AI detection rate (%) on {name} (eq. 12)</h3>" + _table(["model", *cols], rows)
    rows = [
        [m] + [_pct(c.get(k, {}).get("value")) for k in cols]
        for m, c in res["real_accuracy"].items()
    ]
    out += "<h3>Real-image accuracy (%) on D_real</h3>" + _table(["model", *cols], rows)
    levels = sorted({lv for c in res["propagation"].values() for lv in c})
    rows = [
        [m] + [_pct(c.get(lv, {}).get("value")) for lv in levels]
        for m, c in res["propagation"].items()
    ]
    out += "<h3>AI detection rate (%) by propagation level</h3>" + _table(["model", *levels], rows)
    rows = []
    for m, t3 in res["table3"].items():
        for metric in ("Human Covered by AI", "AI Supported by Human"):
            rows.append([f"{metric} [{m}]"] + [_pct(t3[metric][k]["value"]) for k in cols])
    out += f"<h3>Human-AI alignment (%) on D_ann, matcher {html.escape(res['matcher'])}</h3>"
    out += _table(["metric", *cols], rows)
    labels = sorted({lab for c in res["hit_rate"].values() for lab in c})
    rows = [[m] + [_pct(c[lab]["value"]) for lab in labels] for m, c in res["hit_rate"].items()]
    out += "<h3>Hit rate (%) per artefact label</h3>" + _table(["model", *labels], rows)
    for m, d in res["delta"].items():
        rows = [[sc] + [_pct(v.get(lab)) for lab in labels] for sc, v in d.items()]
        out += f"<h3>Δ(l) (eq. 13, points) per scope [{html.escape(m)}]</h3>"
        out += _table(["scope", *labels], rows)
    return out
