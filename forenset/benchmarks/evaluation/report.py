"""Table 5 of XPlainVerse from the eval_scores table: one row per detector and track, detection
F1 on the ID and OOD sets and the explanation metrics, each cell "ID / OOD".

Shared by ``forenset eval`` (a Rich table) and the HTML report, so both show the same numbers.
A null metric is a dash with its reason; model-based metrics name the model that computed them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forenset.benchmarks.evaluation.schemas.eval_scores import EXPLANATION_METRICS

# (eval_scores column, header) of each explanation metric, in the paper's order
EVAL_METRICS = tuple((m.name, m.header) for m in EXPLANATION_METRICS)
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


# -- robustness: accuracy and F1 per propagation level and perturbation family / severity ------

ROBUST_KINDS = ("variant", "perturbation", "perturbation_severity", "severity")
ROBUST_HEADERS = ("detector", "track", "set", "group kind", "group", "n", "accuracy %", "F1 %")
CLEAN = "clean (0x)"


@dataclass
class Robustness:
    """Rows of the robustness table and the accuracy series of its two plots."""

    rows: list[list[str]] = field(default_factory=list)
    # series "<detector>/<track> <SET>" -> x label -> accuracy in %
    by_family: dict[str, dict[str, float]] = field(default_factory=dict)
    by_level: dict[str, dict[str, float]] = field(default_factory=dict)


def _pct(v: float | None) -> str:
    return DASH if v is None else f"{100 * v:.2f}"


def robustness(con: Any) -> Robustness | None:
    """Accuracy and F1 of every propagation level and catalogue perturbation group (None: the
    run scored clean items only). The family plot starts from the clean items of the same
    samples (the ``variant=0x`` group), so a drop reads off the bars."""
    kinds = ", ".join(f"'{k}'" for k in ROBUST_KINDS)
    cur = con.execute(
        'SELECT detector, track, eval_set, group_kind, "group", n, accuracy, f1 '
        f"FROM eval_scores WHERE group_kind IN ({kinds}) AND status = 'ok' "
        'ORDER BY detector, track, eval_set, group_kind, "group"'
    )
    found = cur.fetchall()
    if not any(k != "variant" or g != "0x" for _, _, _, k, g, *_ in found):
        return None
    out = Robustness()
    for det, track, eval_set, kind, group, n, acc, f1 in found:
        out.rows.append([det, track, eval_set.upper(), kind, group, str(n), _pct(acc), _pct(f1)])
        if acc is None:
            continue
        series = f"{det}/{track} {eval_set.upper()}"
        if kind == "variant":
            out.by_level.setdefault(series, {})[group] = 100 * acc
            if group == "0x":
                out.by_family.setdefault(series, {})[CLEAN] = 100 * acc
        elif kind == "perturbation":
            out.by_family.setdefault(series, {})[group] = 100 * acc
    # a plot needs more than its baseline: no family plot without perturbed groups, no level
    # plot with the clean level only
    if all(len(v) <= 1 for v in out.by_family.values()):
        out.by_family = {}
    if all(len(v) <= 1 for v in out.by_level.values()):
        out.by_level = {}
    return out


def grouped_bars(series: dict[str, dict[str, float]], title: str, xlabel: str) -> Any:
    """A matplotlib figure: one bar group per x label (in first-seen order), one bar per series;
    a series without a value at a label leaves a gap, not a zero."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(x for s in series.values() for x in s))
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 2.8))
    for i, (name, values) in enumerate(series.items()):
        xs = [j + i * width for j, x in enumerate(labels) if x in values]
        ax.bar(xs, [values[x] for x in labels if x in values], width, label=name)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels(labels, rotation=30 if len(labels) > 4 else 0)
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy %")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return fig


# -- human gold references: inter-annotator agreement -----------------------------------------


def gold_agreement(store: Any, evaluator: Any = None) -> Any:
    """Agreement of the ``gold_references`` table's annotators (an
    :class:`~forenset.benchmarks.common.scorers.agreement.Agreement`), by ``evaluator`` (default: the
    offline phrase matcher, labelled as such); None when nothing was imported."""
    from forenset.benchmarks.common.scorers.agreement import agreement
    from forenset.benchmarks.common.scorers.entity_evidence import OfflineEntityEvidenceEvaluator
    from forenset.benchmarks.evaluation.gold import TABLE, gold_texts

    if not store.manifest(TABLE):
        return None
    return agreement(gold_texts(store), evaluator or OfflineEntityEvidenceEvaluator())


def agreement_line(ag: Any) -> str:
    """One line for the terminal and the report, beside the paper's figures."""
    from forenset.benchmarks.common.scorers.agreement import PAPER

    def f(v: float | None) -> str:
        return DASH if v is None else f"{v:.2f}"

    return (
        f"inter-annotator agreement (gold references, {ag.n_items} images, {ag.n_pairs} pairs"
        + (f", {ag.n_failed} failed" if ag.n_failed else "")
        + f"): EntityScore {f(ag.entity_score)}, EvidenceScore {f(ag.evidence_score)} "
        f"[{ag.model}]; paper: {PAPER['entity_score']:.2f} / {PAPER['evidence_score']:.2f}"
    )
