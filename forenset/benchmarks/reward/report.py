"""The reward benchmark's tables from the reward_scores and reward_labels views, shaped like
XAIGID-RewardBench's: Tables 1-2 (policy accuracy overall / real / fake / per generator),
Tables 3 and 5 (policy Elo from the labels; a human-written policy is one more row), Table 4
(judges' Acc(4) / Acc(2), with position bias), Elo from each judge's labels, inter-annotator
agreement, and the tied triplets left for manual resolution.

Shared by ``forenset reward`` (Rich tables) and the HTML report, so both show the same numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

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


def pct(v: float | None) -> str:
    return DASH if v is None else f"{100 * v:.2f}%"


def num(v: float | None, digits: int = 1) -> str:
    return DASH if v is None else f"{v:.{digits}f}"


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def reward_tables(con: Any) -> RewardTables:
    """All tables from a DuckDB connection with ``reward_scores`` and ``reward_labels`` views."""
    s = _rows(con, "SELECT * FROM reward_scores WHERE status = 'ok' ORDER BY score_id")
    out = RewardTables()
    acc = [r for r in s if r["table"] == "policy_accuracy"]
    gens = sorted({r["group"] for r in acc} - {"overall", "real", "fake"})
    heads = ["policy", "overall acc", "real acc", "fake acc", *gens]
    cells: dict[str, dict[str, float]] = {}
    for r in acc:
        cells.setdefault(r["subject"], {})[r["group"]] = r["value"]
    rows = [
        [p, *(pct(g.get(c)) for c in ("overall", "real", "fake", *gens))]
        for p, g in sorted(cells.items(), key=lambda kv: -(kv[1].get("overall") or 0))
    ]
    out.tables.append(RewardTable("Tables 1-2: policy accuracy (detection)", heads, rows))
    elo = [r for r in s if r["table"] == "elo"]
    sources = {r["labels_source"] for r in s if r["labels_source"]}
    judges = sorted({r["subject"] for r in s if r["table"] == "judge_accuracy"})
    for src in sorted({r["labels_from"] for r in elo}, key=lambda x: (x in judges, x)):
        mine = sorted((r for r in elo if r["labels_from"] == src), key=lambda r: r["rank"])
        title = (
            f"Elo of policies from {src} judge labels"
            if src in judges
            else f"Tables 3/5: Elo of policies from {src} labels"
        )
        out.tables.append(
            RewardTable(
                title + " (mean over shuffled orders; Bradley-Terry beside it)",
                ["rank", "policy", "Elo", "BT", "games", "wins", "losses", "ties", "win rate"],
                [
                    [
                        str(r["rank"]),
                        r["subject"],
                        num(r["elo"]),
                        num(r["bt"]),
                        str(r["games"]),
                        str(r["wins"]),
                        str(r["losses"]),
                        str(r["ties"]),
                        num(r["win_rate"], 3),
                    ]  # fmt: skip
                    for r in mine
                ],
            )
        )
    bias = {r["subject"]: r for r in s if r["table"] == "position_bias"}
    rows = []
    for j in judges:
        by = {r["group"]: r for r in s if r["table"] == "judge_accuracy" and r["subject"] == j}
        sh, sw = by.get("shown", {}), by.get("swapped", {})
        b = bias.get(j, {})
        extra = json.loads(b.get("extra") or "{}")
        rows.append(
            [
                j,
                num(_p(sh.get("acc4")), 2),
                num(_p(sh.get("acc2")), 2),
                num(_p(sw.get("acc4")), 2),
                num(_p(sw.get("acc2")), 2),
                num(b.get("value"), 3),
                num(extra.get("swap_consistency"), 3),
            ]  # fmt: skip
        )
    rows.sort(key=lambda r: r[2], reverse=True)
    src = ", ".join(sorted(sources)) or "no"
    out.tables.append(
        RewardTable(
            f"Table 4: judges against {src} labels (%)",
            [
                "judge",
                "4-way acc",
                "2-way acc",
                "4-way swapped",
                "2-way swapped",
                "position bias",
                "swap consistency",
            ],  # fmt: skip
            rows,
        )
    )
    agree = {r["group"]: r for r in s if r["table"] == "agreement"}
    if agree:
        a4, a2 = agree.get("4-way", {}), agree.get("clear", {})
        out.notes.append(
            f"inter-annotator agreement ({src}): {pct(a4.get('value'))} 4-way over "
            f"{a4.get('n')} pairs, {pct(a2.get('value'))} on clear winners over {a2.get('n')} "
            "pairs (paper: 68.0% / 98.3%)"
        )
    if "annotators" in bias:
        out.notes.append(
            f"annotators' position bias (First share of clear choices - 0.5): {num(bias['annotators']['value'], 3)}"
        )
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


def _p(v: float | None) -> float | None:
    return None if v is None else 100 * v
