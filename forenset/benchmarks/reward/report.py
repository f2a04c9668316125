"""The reward benchmark's tables from the reward_scores and reward_labels views, shaped like
XAIGID-RewardBench's: Tables 1-2 (policy accuracy overall / real / fake / per generator),
Tables 3 and 5 (policy Elo from the labels; a human-written policy is one more row), Table 4
(judges' Acc(4) / Acc(2), with position bias), Elo from each judge's labels, inter-annotator
agreement, and the tied triplets left for manual resolution.

Shared by ``forenset reward`` (Rich tables) and the HTML report, so both show the same numbers.
"""

from __future__ import annotations

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


NOT_MEANINGFUL = "not meaningful"


def cell(
    r: dict[str, Any] | None,
    fmt: Any = pct,
    notes: list[str] | None = None,
    where: str = "",
    with_n: bool = True,
) -> str:
    """One number as the tables show it: value [95 % interval] and n; a dash when null; "not
    meaningful" when the row has a caveat (the caveat goes to ``notes``, never a number)."""
    if r is None or r.get("value") is None:
        return DASH
    if r.get("caveat"):
        if notes is not None:
            notes.append(f"{where}: not meaningful ({r['caveat']})")
        return f"{NOT_MEANINGFUL} (n={r['n']})"
    out = fmt(r["value"])
    if r.get("ci_low") is not None:
        out += f" [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"
    return out + (f" n={r['n']}" if with_n else "")


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def reward_tables(con: Any) -> RewardTables:
    """All tables from a DuckDB connection with ``reward_scores`` and ``reward_labels`` views:
    the long rows pivoted to the paper's shapes, each number with its interval and n."""
    s = _rows(con, "SELECT * FROM reward_scores WHERE status = 'ok' ORDER BY score_id")
    # (table, subject, group, labels_from) -> metric -> row
    g: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in s:
        g.setdefault((r["table"], r["subject"], r["group"], r["labels_from"]), {})[r["metric"]] = r
    out = RewardTables()
    caveats: list[str] = []
    acc = {k: v["accuracy"] for k, v in g.items() if k[0] == "policy_accuracy"}
    gens = sorted({k[2] for k in acc} - {"overall", "real", "fake"})
    heads = ["policy", "overall acc", "real acc", "fake acc", *gens]
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for k, r in acc.items():
        cells.setdefault(k[1], {})[k[2]] = r
    rows = [
        [p, *(cell(gr.get(c), pct, caveats, f"{p} {c} acc") for c in ("overall", "real", "fake",
                                                                       *gens))]
        for p, gr in sorted(cells.items(), key=lambda kv: -(kv[1]["overall"]["value"] or 0))
    ]  # fmt: skip
    out.tables.append(
        RewardTable("Tables 1-2: policy accuracy (detection) [95% CI] n", heads, rows)
    )
    elo = {k: v for k, v in g.items() if k[0] == "elo"}
    sources = {r["labels_source"] for r in s if r["labels_source"]}
    judges = sorted({k[1] for k in g if k[0] == "judge_accuracy"})
    for src in sorted({k[3] for k in elo}, key=lambda x: (x in judges, x)):
        mine = sorted((v for k, v in elo.items() if k[3] == src), key=lambda m: m["rank"]["value"])
        n = mine[0]["elo"]["n"] if mine else 0
        title = (
            f"Elo of policies from {src} judge labels"
            if src in judges
            else f"Tables 3/5: Elo of policies from {src} labels"
        )
        out.tables.append(
            RewardTable(
                title + f" (n = {n} labelled games; mean Elo over shuffled orders, Bradley-Terry "
                "beside it; [95% bootstrap CI over games])",
                ["rank", "policy", "Elo", "BT", "games", "wins", "losses", "ties", "win rate"],
                [
                    [
                        str(int(m["rank"]["value"])),
                        m["elo"]["subject"],
                        cell(m["elo"], num, caveats, f"{src}: {m['elo']['subject']} Elo", False),
                        cell(m["bt"], num, caveats, f"{src}: {m['bt']['subject']} BT", False),
                        *(str(int(m[c]["value"])) for c in ("games", "wins", "losses", "ties")),
                        cell(
                            m["win_rate"],
                            lambda v: num(v, 3),
                            caveats,
                            f"{src}: {m['elo']['subject']} win rate",
                            False,
                        ),
                    ]  # fmt: skip
                    for m in mine
                ],
            )
        )
    rows = []
    for j in judges:
        sh = g.get(("judge_accuracy", j, "shown", _src(sources)), {})
        sw = g.get(("judge_accuracy", j, "swapped", _src(sources)), {})
        b = g.get(("position_bias", j, "shown", j), {})
        rows.append(
            [
                j,
                cell(sh.get("acc4"), pct, caveats, f"{j} 4-way acc"),
                cell(sh.get("acc2"), pct, caveats, f"{j} 2-way acc"),
                cell(sw.get("acc4"), pct, caveats, f"{j} 4-way swapped"),
                cell(sw.get("acc2"), pct, caveats, f"{j} 2-way swapped"),
                cell(b.get("position_bias"), lambda v: num(v, 3), caveats, f"{j} position bias"),
                cell(
                    b.get("swap_consistency"), lambda v: num(v, 3), caveats, f"{j} swap consistency"
                ),
            ]  # fmt: skip
        )
    rows.sort(key=lambda r: r[2], reverse=True)
    src = ", ".join(sorted(sources)) or "no"
    out.tables.append(
        RewardTable(
            f"Table 4: judges against {src} labels [95% CI over triplets] n",
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
    a4 = g.get(("agreement", "annotators", "4-way", _src(sources)), {}).get("agreement")
    a2 = g.get(("agreement", "annotators", "clear", _src(sources)), {}).get("agreement")
    if a4 or a2:
        out.notes.append(
            f"inter-annotator agreement ({src}): {cell(a4, pct, caveats, '4-way agreement', False)}"
            f" 4-way over {(a4 or {}).get('n')} pairs, "
            f"{cell(a2, pct, caveats, 'clear agreement', False)} on clear winners over "
            f"{(a2 or {}).get('n')} pairs (paper: 68.0% / 98.3%; intervals resample triplets)"
        )
    ab = g.get(("position_bias", "annotators", "shown", _src(sources)), {}).get("position_bias")
    if ab:
        out.notes.append(
            "annotators' position bias (First share of clear choices - 0.5): "
            + cell(ab, lambda v: num(v, 3), caveats, "annotators' position bias")
        )
    if "simulated" in sources:
        out.notes.append("labels are SIMULATED (the documented noisy rule), not human judgments")
    out.notes += caveats
    out.ties = [
        r["triplet_id"]
        for r in _rows(
            con,
            "SELECT triplet_id FROM reward_labels WHERE status = 'ok' AND tied AND label IS NULL ORDER BY triplet_id",
        )
    ]
    return out


def _src(sources: set[str]) -> str | None:
    return next(iter(sorted(sources)), None)
