"""The reward benchmark's tables from the reward_scores and reward_labels views, shaped like
XAIGID-RewardBench's: Tables 1-2 (policy accuracy overall / real / fake / per generator),
Tables 3 and 5 (policy Elo from the labels; a human-written policy is one more row), Table 4
(judges' Acc(4) / Acc(2)), position bias and swap consistency (Fig. 3), Elo from each judge's
labels, inter-annotator agreement, and the tied triplets left for manual resolution.

Every table is the shared :func:`~forenset.benchmarks.common.scoring.pivot` of the long rows,
with one column per registered reward metric in scope of its ``table`` (registry order), so a
metric added to ``scoring.BUILTIN["reward"]`` shows up here and in ``forenset reward`` with no
change to this module. Shared by the CLI (Rich tables) and the HTML report.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from forenset.benchmarks.common.scoring import Metric, Pivot, pivot, scorers
from forenset.store.run_store import RunStore

DASH = "\u2014"


@dataclass
class RewardTable:
    title: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class RewardTables:
    tables: list[RewardTable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ties: list[str] = field(default_factory=list)


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def metrics(table: str) -> list[Metric]:
    """The registered reward metrics that score ``table``'s groups, in registry order."""
    return [s for s in scorers("reward") if table in s.scope.get("table", ())]


def _add(
    out: RewardTables, title: str, rows: list[dict[str, Any]], table: str,
    index: Sequence[str], headers: Sequence[str], order: Any = None, by: str | None = None,
    by_order: Sequence[str] = (),
) -> Pivot | None:  # fmt: skip
    """Pivot ``rows`` into one table (columns from the registry) and collect its notes."""
    if not rows:
        return None
    p = pivot(rows, index, metrics(table), index_headers=headers, by=by, by_order=by_order)
    body = p.rows
    if order is not None:
        keys = sorted(p.cells, key=lambda k: tuple("" if v is None else str(v) for v in k))
        body = [r for _, r in sorted(zip(keys, p.rows, strict=True), key=lambda kr: order(kr[0]))]
    out.tables.append(RewardTable(title, p.headers, body))
    out.notes += [f"{title.split(':')[0]}: {line}" for line in p.note_lines()]
    return p


def reward_tables(con: Any) -> RewardTables:
    """All tables from a DuckDB connection with ``reward_scores`` and ``reward_labels`` views:
    the long rows pivoted to the paper's shapes, each number with its interval, n and caveat
    (``not meaningful (why)`` in place of a number)."""
    s = _rows(con, "SELECT * FROM reward_scores WHERE status = 'ok' ORDER BY score_id")
    out = RewardTables()
    part: dict[str, list[dict[str, Any]]] = {}
    for r in s:
        part.setdefault(r["table"], []).append(r)
    sources = sorted({r["labels_source"] for r in s if r["labels_source"]})
    src = ", ".join(sources) or "no"
    acc = part.get("policy_accuracy", [])
    overall = {r["subject"]: r["value"] or 0 for r in acc if r["group"] == "overall"}
    _add(
        out, "Tables 1-2: policy accuracy (detection, %) per set [95% CI]", acc,
        "policy_accuracy", ("subject",), ("policy",), order=lambda k: (-overall.get(k[0], 0), k[0]),
        by="group", by_order=("overall", "real", "fake"),
    )  # fmt: skip
    elo = part.get("elo", [])
    judges = sorted({r["subject"] for r in part.get("judge_accuracy", [])})
    ranks = {
        (r["labels_from"], r["subject"]): r["value"] for r in elo if r["metric"] == "rank"
    }  # fmt: skip
    for frm in sorted({r["labels_from"] for r in elo}, key=lambda x: (x in judges, x)):
        title = (
            f"Elo of policies from {frm} judge labels"
            if frm in judges
            else f"Tables 3/5: Elo of policies from {frm} labels"
        )
        _add(
            out, title + " (n = labelled games; mean Elo over shuffled orders, Bradley-Terry "
            "beside it; [95% bootstrap CI over games])",
            [r for r in elo if r["labels_from"] == frm], "elo", ("subject",), ("policy",),
            order=lambda k, f=frm: (ranks.get((f, k[0])) or 0, k[0]),
        )  # fmt: skip
    _add(
        out, f"Table 4: judges against {src} labels (%) [95% CI over triplets] n",
        part.get("judge_accuracy", []), "judge_accuracy", ("subject", "group"),
        ("judge", "order"),
    )  # fmt: skip
    _add(
        out, "Fig. 3: choice shares (%), position bias (First share of clear choices - 0.5) and "
        "swap consistency [95% CI]", part.get("position_bias", []), "position_bias",
        ("subject",), ("rater",),
    )  # fmt: skip
    _add(
        out, f"inter-annotator agreement ({src}, %; paper: 68.0% 4-way / 98.3% clear; "
        "n = annotator pairs, intervals resample triplets)", part.get("agreement", []),
        "agreement", ("group",), ("pairs",),
    )  # fmt: skip
    if "simulated" in sources:
        out.notes.append("labels are SIMULATED (the documented noisy rule), not human judgments")
    out.ties = [
        r["triplet_id"]
        for r in _rows(
            con,
            "SELECT triplet_id FROM reward_labels WHERE status = 'ok' AND tied AND label IS NULL ORDER BY triplet_id",
        )
    ]
    return out


# -- the HTML report's section (Family.report) ---------------------------------------------


def reward_section(store: RunStore, con: Any) -> str:
    """The reward benchmark's tables (XAIGID-RewardBench Tables 1-5); empty without
    ``reward_scores`` (the reward family is opt-in)."""
    from forenset.report.html import table

    if not store.manifest("reward_scores"):
        return ""
    got = reward_tables(con)
    out = "<h2>Reward benchmark (XAIGID-RewardBench)</h2>"
    for t in got.tables:
        out += f"<h3>{html.escape(t.title)}</h3>" + table(t.headers, t.rows)
    items = [*got.notes] + (
        [f"tied triplets to resolve: {', '.join(got.ties)}"] if got.ties else []
    )
    if items:
        out += "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in items) + "</ul>"
    return out
