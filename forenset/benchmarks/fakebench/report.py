"""FakeBench's result tables (Tables 4–7 shape) from the fakebench_scores table.

Shared by ``forenset fakebench RUN_DIR`` (Rich tables) and the HTML report, so both show the
same numbers: FakeClass accuracy (%) overall, on the real and fake subsets and per question
form; FakeClue and FakeQA with BLEU-1/2, ROUGE-L, similarity (0–1), judged Completeness /
Preciseness / Relevance (0–2, mean of the rounds), the two "Aver." columns of Tables 5–7
(automatic, 0–1; judged, 0–2) and the Overall (0–1): the mean of the automatic average and the
judged average halved. A null value is a dash with its reason. Every number shows its 95 %
bootstrap interval; a value with a caveat (one class, too few items) shows "not meaningful" and
the caveat is listed under the tables.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any

from forenset.benchmarks.common.scoring import metric_names, scorers
from forenset.store.run_store import RunStore

DASH = "\u2014"
CLASS_HEADERS = ("model", "n", "Acc", "Acc real", "Acc fake", "Acc yes/no", "Acc what")
# Tables 5-7's columns: the registry's fakebench metrics in its order, with their headers
TEXT_METRICS = tuple((s.name, s.header) for s in scorers("fakebench") if s.name != "accuracy")
METRICS = tuple(metric_names("fakebench"))
TEXT_HEADERS = ("model", "n", *(h for _, h in TEXT_METRICS))
CLUE_HEADERS = ("model", "mode", *TEXT_HEADERS[1:], "Acc (CoT verdict)")


@dataclass
class FakeBenchTables:
    fakeclass: list[list[str]] = field(default_factory=list)
    fakeclue: list[list[str]] = field(default_factory=list)
    fakeqa: list[list[str]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    reasons: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)


def _num(v: float | None, pct: bool = False) -> str:
    if v is None:
        return DASH
    return f"{100 * v:.2f}" if pct else f"{v:.3f}"


def _cell(r: dict[str, Any] | None, pct: bool, caveats: list[str], where: str) -> str:
    """value [95 % interval], or "not meaningful" (its caveat to ``caveats``), or a dash."""
    if r is None or r.get("value") is None:
        return DASH
    if r.get("caveat"):
        caveats.append(f"{where}: not meaningful ({r['caveat']})")
        return "not meaningful"
    out = _num(r["value"], pct)
    if r.get("ci_low") is not None:
        out += f" [{_num(r['ci_low'], pct)}, {_num(r['ci_high'], pct)}]"
    return out


def pivot_scores(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Long ``fakebench_scores`` rows back to one dict per group, keyed
    ``<answerer>/<task>/<group_kind>=<group>``: the group columns, ``n`` (the group's answers;
    each metric row's own ``n`` counts the units behind its value), and per metric its
    value, ``<metric>_model``, ``<metric>_reason`` and the whole row as ``<metric>_row``
    (``average_of`` from the averages' details)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.get("metric") is None:
            continue
        k = f"{r['answerer']}/{r['task']}/{r['group_kind']}={r['group']}"
        g = out.setdefault(
            k,
            {
                **{c: r[c] for c in ("answerer", "task", "group_kind", "group", "n", "status")},
                **dict.fromkeys(METRICS),
            },
        )
        m = r["metric"]
        g[m], g[f"{m}_model"], g[f"{m}_reason"], g[f"{m}_row"] = (
            r["value"], r["model"], r["reason"], r,
        )  # fmt: skip
        details = json.loads(r.get("details") or "{}")
        g["n"] = details.get("n_items", g["n"])  # the group's answers (FakeQA: questions)
        g["n_images"] = details.get("n_images")
        if m == "average":
            g["average_of"] = details.get("of")
    return out


def fakebench_tables(con: Any) -> FakeBenchTables | None:
    """The tables from a DuckDB connection with a ``fakebench_scores`` view (None: no rows)."""
    cur = con.execute("SELECT * FROM fakebench_scores WHERE status = 'ok' ORDER BY score_id")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if not rows:
        return None
    by: dict[tuple[str, str, str, str], dict[str, Any]] = {
        (g["answerer"], g["task"], g["group_kind"], g["group"]): g
        for g in pivot_scores(rows).values()
    }
    out = FakeBenchTables()
    for model in sorted({r["answerer"] for r in rows}):
        a = by.get((model, "fakeclass", "all", "all"))
        if a is not None:

            def acc(kind: str, group: str, model: str = model) -> str:
                r = by.get((model, "fakeclass", kind, group))
                where = f"{model} FakeClass {group if kind != 'all' else 'all'}"
                return _cell(r and r.get("accuracy_row"), True, out.caveats, where)

            out.fakeclass.append(
                [model, str(a["n"]), acc("all", "all"), acc("label", "real"), acc("label", "fake"),
                 acc("form", "yes_no"), acc("form", "what")]
            )  # fmt: skip
        for task, key, target in (
            ("fakeclue", ("mode", "inference"), out.fakeclue),
            ("fakeclue", ("mode", "fault_finding"), out.fakeclue),
            ("fakeclue", ("verdict", "inference"), out.fakeclue),
            ("fakeqa", ("all", "all"), out.fakeqa),
        ):
            r = by.get((model, task, *key))
            if r is None:
                continue
            n = str(r["n"]) + (f" ({r['n_images']} images)" if task == "fakeqa" else "")
            cells = [model, n]
            mode = key[1].replace("_", "-") + (" (verdict only)" if key[0] == "verdict" else "")
            if task == "fakeclue":
                cells.insert(1, mode)
            where = f"{model} {task}" + (f" {mode}" if task == "fakeclue" else "")
            for m, h in TEXT_METRICS:
                cells.append(_cell(r.get(f"{m}_row"), False, out.caveats, f"{where} {h}"))
                why = r.get(f"{m}_reason")
                if r.get(m) is None and why:
                    out.reasons.setdefault((h, why), []).append(where)
                if r.get(m) is not None and r.get(f"{m}_model") and m not in (
                    "bleu1", "bleu2", "rouge_l"
                ):  # fmt: skip
                    out.models.append(f"{h}: {r[f'{m}_model']}")
            if task == "fakeclue":
                cells.append(_cell(r.get("accuracy_row"), True, out.caveats, f"{where} Acc"))
            target.append(cells)
        for r in rows:
            if r["answerer"] == model and r["metric"] == "bleu1" and r.get("model"):
                out.models.append(f"BLEU/ROUGE-L: {r['model']}")
                break
    out.models = sorted(set(out.models))
    return out


# -- the HTML report's section (Family.report) ---------------------------------------------


def fakebench_section(store: RunStore, con: Any) -> str:
    """FakeBench's FakeClass / FakeClue / FakeQA tables; empty without ``fakebench_scores``."""
    from forenset.report.html import table

    if not store.manifest("fakebench_scores"):
        return ""
    t = fakebench_tables(con)
    if t is None:
        return ""
    out = "<h2>FakeBench</h2><h3>FakeClass: accuracy (%), §3.2 exact match [95% CI]</h3>"
    out += table(CLASS_HEADERS, t.fakeclass)
    out += "<h3>FakeClue (inference mode) against the golden clues [95% CI]</h3>"
    out += table(CLUE_HEADERS, t.fakeclue)
    out += "<h3>FakeQA (free mode), per image then over images [95% CI over images]</h3>"
    out += table(TEXT_HEADERS, t.fakeqa)
    if t.models:
        out += "<p>models: " + html.escape("; ".join(t.models)) + "</p>"
    notes = [f"{DASH} {h}: {why} ({', '.join(w)})" for (h, why), w in t.reasons.items()]
    notes += t.caveats
    if notes:
        out += "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
    return out
