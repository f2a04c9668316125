"""Table 5 of XPlainVerse and the robustness table from the long ``eval_scores`` table, pivoted
through the scorer registry: one row per detector, track and set with n and every metric as
``value [95 % interval]`` (or "not meaningful (why)" on a degenerate set).

Shared by ``forenset eval`` (Rich tables) and the HTML report, so both show the same numbers.
A null metric is a dash with its reason; model-based metrics name the model that computed them.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forenset.benchmarks.common.scoring import DASH, Pivot, pivot, scorers
from forenset.store.run_store import RunStore

FAMILY = "evaluation"
INDEX = ("detector", "track", "eval_set")
INDEX_HEADERS = ("detector", "track", "set")


def _long_rows(con: Any, where: str) -> list[dict[str, Any]]:
    cur = con.execute(
        'SELECT detector, track, eval_set, group_kind, "group", metric, value, n, ci_low, '
        "ci_high, ci_reason, model, backend, reason, caveat, details FROM eval_scores "
        f"WHERE status = 'ok' AND {where}"
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _upper(v: Any) -> str:
    return str(v).upper()


@dataclass
class Table5:
    table: Pivot
    # (detector, track) -> (F1 ID, F1 OOD), None where missing or not meaningful (the F1 plot)
    f1: dict[tuple[str, str], tuple[float | None, float | None]] = field(default_factory=dict)

    @property
    def headers(self) -> list[str]:
        return self.table.headers

    @property
    def rows(self) -> list[list[str]]:
        return self.table.rows

    @property
    def models(self) -> list[str]:
        return self.table.models

    def notes(self) -> list[str]:
        return self.table.note_lines()


def meaningful(row: Mapping[str, Any] | None) -> float | None:
    """The value of a long row when it may be shown as a result (not null, no caveat)."""
    if row is None or row.get("caveat"):
        return None
    return row.get("value")


def table5(con: Any) -> Table5 | None:
    """The table from a DuckDB connection with an ``eval_scores`` view (None: no whole-set rows)."""
    rows = _long_rows(con, "group_kind = 'all'")
    if not rows:
        return None
    t = pivot(rows, INDEX, scorers(FAMILY), index_headers=INDEX_HEADERS, label={"eval_set": _upper})
    out = Table5(t)
    for det, track in sorted({k[:2] for k in t.cells}):
        out.f1[(det, track)] = tuple(  # type: ignore[assignment]
            meaningful(t.cells.get((det, track, s), {}).get("f1")) for s in ("id", "ood")
        )
    return out


# -- per-class accuracy: the reals of a set and the fakes of each generator family -----------

REAL = "real"


@dataclass
class PerClass:
    """Accuracy on each class of a set: the reals (the ``generator_family=real`` group) and
    the fakes of each generator family, each ``value [95 % interval] (n=…)``: on one class,
    accuracy is the share recognised, so F1 alone cannot hide a detector that calls all fake."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)


def per_class(con: Any) -> PerClass | None:
    """The per-class accuracy table (None: no generator-family groups were scored)."""
    from forenset.benchmarks.common.scoring.intervals import NO_FAKES, NO_REALS

    found = _long_rows(con, "group_kind = 'generator_family' AND metric = 'accuracy'")
    if not found:
        return None
    fakes = sorted({r["group"] for r in found if r["group"] != REAL})
    classes = [REAL, *fakes]
    heads = [REAL, *(("fake",) if len(fakes) == 1 else (f"fake: {f}" for f in fakes))]
    by: dict[tuple, dict[str, Mapping[str, Any]]] = {}
    for r in found:
        by.setdefault((r["detector"], r["track"], r["eval_set"]), {})[r["group"]] = r
    out = PerClass([*INDEX_HEADERS, *heads])
    for key in sorted(by):
        cells = []
        for c in classes:
            got = by[key].get(c)
            if got is None or got.get("value") is None:
                cells.append(DASH)
                continue
            caveat = got.get("caveat")
            if caveat and caveat not in (NO_REALS, NO_FAKES):  # one class is the point here
                cells.append(f"not meaningful ({caveat})")
                continue
            text = f"{100 * got['value']:.2f}"
            if got.get("ci_low") is not None and got.get("ci_high") is not None:
                text += f" [{100 * got['ci_low']:.2f}, {100 * got['ci_high']:.2f}]"
            cells.append(f"{text} (n={got['n']})")
        out.rows.append([key[0], key[1], _upper(key[2]), *cells])
    return out


# -- robustness: accuracy and F1 per propagation level and perturbation family / severity ------

ROBUST_KINDS = ("variant", "perturbation", "perturbation_severity", "severity")
ROBUST_METRICS = ("accuracy", "f1")
CLEAN = "clean (0x)"


@dataclass
class Robustness:
    """The robustness table and the accuracy series of its two plots."""

    table: Pivot
    # series "<detector>/<track> <SET>" -> x label -> accuracy in %
    by_family: dict[str, dict[str, float]] = field(default_factory=dict)
    by_level: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def headers(self) -> list[str]:
        return self.table.headers

    @property
    def rows(self) -> list[list[str]]:
        return self.table.rows


def robustness(con: Any) -> Robustness | None:
    """Accuracy and F1 of every propagation level and catalogue perturbation group (None: the
    run scored clean items only). The family plot starts from the clean items of the same
    samples (the ``variant=0x`` group), so a drop reads off the bars; values flagged as not
    meaningful are not plotted."""
    kinds = ", ".join(f"'{k}'" for k in ROBUST_KINDS)
    metrics = ", ".join(f"'{m}'" for m in ROBUST_METRICS)
    found = _long_rows(con, f"group_kind IN ({kinds}) AND metric IN ({metrics})")
    if not any(r["group_kind"] != "variant" or r["group"] != "0x" for r in found):
        return None
    shown = [s for s in scorers(FAMILY) if s.name in ROBUST_METRICS]
    shown.sort(key=lambda s: ROBUST_METRICS.index(s.name))
    index = (*INDEX, "group_kind", "group")
    t = pivot(
        found,
        index,
        shown,
        index_headers=(*INDEX_HEADERS, "group kind", "group"),
        label={"eval_set": _upper},
    )
    out = Robustness(t)
    for (det, track, eval_set, kind, group), got in sorted(t.cells.items()):
        acc = meaningful(got.get("accuracy"))
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
    # upright labels where many or long ones would run into each other (a slanted label's box
    # is wide; an upright one is one line high, and each group is 0.9 in wide)
    upright = len(labels) > 4 or any(len(str(x)) > 8 for x in labels)
    ax.set_xticklabels(labels, rotation=90 if upright else 0)
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


# -- the HTML report's section (Family.report) ---------------------------------------------


def evaluation_section(store: RunStore, con: Any) -> str:
    """Table 5 (XPlainVerse) and F1 ID vs OOD per detector and track; empty without
    ``eval_scores`` (the evaluation is opt-in)."""
    from forenset.report.html import bar_plot, img_tag, table

    if not store.manifest("eval_scores"):
        return ""
    t5 = table5(con)
    if t5 is None:
        return ""
    out = (
        "<h2>Evaluation (XPlainVerse Table 5: detection %, explanation scores; "
        "value [95 % bootstrap interval])</h2>"
    )
    out += table(t5.headers, t5.rows)
    if t5.models:
        out += "<p>models: " + html.escape("; ".join(t5.models)) + "</p>"
    notes = t5.notes()
    if notes:
        out += "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
    pc = per_class(con)
    if pc is not None:
        out += (
            "<h3>Per-class accuracy (%): reals and the fakes of each generator family, "
            "[95 % bootstrap interval] (n)</h3>" + table(pc.headers, pc.rows)
        )
    labels, values, errors = f1_series(t5)
    if values:
        out += img_tag(
            bar_plot(labels, values, "Detection F1 (%), ID vs OOD, 95 % interval", errors=errors),
            "F1 ID vs OOD",
        )
    ag = gold_agreement(store)
    if ag is not None:
        out += f"<p>{html.escape(agreement_line(ag))}</p>"
    out += robustness_section(con)
    return out


def f1_series(t5: Any) -> tuple[list[str], list[float], list[tuple[float, float] | None]]:
    """The F1 chart's bars (detector/track ID|OOD), values and stored 95 % intervals, in %;
    only the meaningful values (``Table5.f1``)."""
    labels: list[str] = []
    values: list[float] = []
    errors: list[tuple[float, float] | None] = []
    for (det, track), (f1_id, f1_ood) in t5.f1.items():
        for name, v in (("id", f1_id), ("ood", f1_ood)):
            if v is not None:
                labels.append(f"{det}/{track} {name.upper()}")
                values.append(100 * v)
                row = t5.table.cells.get((det, track, name), {}).get("f1") or {}
                lo, hi = row.get("ci_low"), row.get("ci_high")
                errors.append(None if lo is None or hi is None else (100 * lo, 100 * hi))
    return labels, values, errors


def robustness_section(con: Any) -> str:
    """Accuracy per perturbation family and per propagation level (plots) and the table of
    every robustness group; empty when only clean items were scored."""
    from forenset.report.html import fig_uri, img_tag, table

    rb = robustness(con)
    if rb is None:
        return ""
    out = "<h3>Robustness: accuracy per perturbation family and propagation level</h3>"
    if rb.by_family:
        fig = grouped_bars(rb.by_family, "Accuracy (%) per perturbation family", "family")
        out += img_tag(fig_uri(fig), "accuracy per perturbation family")
    if rb.by_level:
        fig = grouped_bars(rb.by_level, "Accuracy (%) per propagation level", "re-sharing rounds")
        out += img_tag(fig_uri(fig), "accuracy per propagation level")
    return out + table(rb.headers, rb.rows)
