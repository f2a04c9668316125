"""FakeBench's result tables (Tables 4–7 shape) from the fakebench_scores table.

Shared by ``forenset fakebench RUN_DIR`` (Rich tables) and the HTML report, so both show the
same numbers: FakeClass accuracy (%) overall, on the real and fake subsets and per question
form; FakeClue and FakeQA with BLEU-1/2, ROUGE-L, similarity (0–1), judged Completeness /
Preciseness / Relevance (0–2, mean of the rounds), the two "Aver." columns of Tables 5–7
(automatic, 0–1; judged, 0–2) and the Overall (0–1): the mean of the automatic average and the
judged average halved. A null value is a dash with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DASH = "\u2014"
CLASS_HEADERS = ("model", "n", "Acc", "Acc real", "Acc fake", "Acc yes/no", "Acc what")
TEXT_METRICS = (
    ("bleu1", "B.-1"),
    ("bleu2", "B.-2"),
    ("rouge_l", "R.-L"),
    ("similarity", "Sim."),
    ("auto_average", "Aver. (auto)"),
    ("completeness", "Comp."),
    ("preciseness", "Prec."),
    ("relevance", "Rele."),
    ("judged_average", "Aver. (judged, 0-2)"),
    ("average", "Overall"),
)
TEXT_HEADERS = ("model", "n", *(h for _, h in TEXT_METRICS))
CLUE_HEADERS = ("model", "mode", *TEXT_HEADERS[1:], "Acc (CoT verdict)")


@dataclass
class FakeBenchTables:
    fakeclass: list[list[str]] = field(default_factory=list)
    fakeclue: list[list[str]] = field(default_factory=list)
    fakeqa: list[list[str]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    reasons: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def _num(v: float | None, pct: bool = False) -> str:
    if v is None:
        return DASH
    return f"{100 * v:.2f}" if pct else f"{v:.3f}"


def fakebench_tables(con: Any) -> FakeBenchTables | None:
    """The tables from a DuckDB connection with a ``fakebench_scores`` view (None: no rows)."""
    cur = con.execute(
        "SELECT * FROM fakebench_scores WHERE status = 'ok' ORDER BY answerer, task, group_kind"
    )
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if not rows:
        return None
    by: dict[tuple[str, str, str, str], dict[str, Any]] = {
        (r["answerer"], r["task"], r["group_kind"], r["group"]): r for r in rows
    }
    out = FakeBenchTables()
    for model in sorted({r["answerer"] for r in rows}):
        a = by.get((model, "fakeclass", "all", "all"))
        if a is not None:

            def acc(kind: str, group: str, model: str = model) -> str:
                r = by.get((model, "fakeclass", kind, group))
                return _num(r["accuracy"], pct=True) if r else DASH

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
            cells = [model, str(r["n"])]
            mode = key[1].replace("_", "-") + (" (verdict only)" if key[0] == "verdict" else "")
            if task == "fakeclue":
                cells.insert(1, mode)
            for m, h in TEXT_METRICS:
                cells.append(_num(r.get(m)))
                why = r.get(f"{m}_reason")
                if r.get(m) is None and why:
                    where = f"{model} {task}" + (f" {mode}" if task == "fakeclue" else "")
                    out.reasons.setdefault((h, why), []).append(where)
                if r.get(m) is not None and r.get(f"{m}_model"):
                    out.models.append(f"{h}: {r[f'{m}_model']}")
            if task == "fakeclue":
                cells.append(_num(r["accuracy"], pct=True))
            target.append(cells)
        for r in rows:
            if r["answerer"] == model and r.get("overlap_model"):
                out.models.append(f"BLEU/ROUGE-L: {r['overlap_model']}")
                break
    out.models = sorted(set(out.models))
    return out
