"""The report as a reader sees it: laid out in headless Chromium at 1280 and 800 px (no table
past the page or clipped, no overlapping blocks), charts whose labels do not overlap (from
matplotlib's own text extents), F1 error bars from the stored intervals, per-class accuracy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from tests.helpers import dump_dom, needs_chromium

# writes, after load, what a reader would see wrong into the DOM (chromium --dump-dom reads it)
LAYOUT_PROBE = """<script>
window.addEventListener('load', () => {
  const vw = document.documentElement.clientWidth;
  const out = {vw: vw, tables: 0, blocks: 0, problems: []};
  const label = el => {
    let p = el.closest('.tw') || el;
    while (p && !/^H[23]$/.test(p.tagName)) p = p.previousElementSibling;
    return p ? p.textContent.slice(0, 50) : '?';
  };
  for (const t of document.querySelectorAll('table')) {
    out.tables++;
    const box = t.parentElement;
    const r = t.getBoundingClientRect();
    if (box.scrollWidth > box.clientWidth + 1)
      out.problems.push('table wider than its box: ' + label(t));
    if (r.right > vw + 1) out.problems.push('table past the page: ' + label(t));
    for (const c of t.querySelectorAll('td,th'))
      if (c.scrollWidth > c.clientWidth + 1)
        out.problems.push('cell clipped: ' + label(t) + ': ' + c.textContent.slice(0, 40));
  }
  const blocks = Array.from(document.body.children).filter(e => e.id !== 'layout-check');
  const rects = blocks.map(e => e.getBoundingClientRect()).filter(r => r.height > 0);
  out.blocks = rects.length;
  for (let i = 0; i < rects.length; i++) {
    if (rects[i].right > vw + 1) out.problems.push('block past the page: ' + i);
    for (let j = i + 1; j < rects.length; j++) {
      const a = rects[i], b = rects[j];
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) out.problems.push('blocks overlap: ' + i + ' and ' + j);
    }
  }
  const el = document.createElement('pre');
  el.id = 'layout-check';
  el.textContent = JSON.stringify(out);
  document.body.appendChild(el);
});
</script>"""


def layout(html_text: str, tmp_path: Path, width: int) -> dict:
    proc = dump_dom(html_text, LAYOUT_PROBE, tmp_path, width)
    m = re.search(r'<pre id="layout-check">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no layout check in the DOM (rc {proc.returncode}): {proc.stderr[-1500:]}"
    return json.loads(m.group(1).replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&"))


@needs_chromium
def test_report_fits_1280_and_800_px_without_clipped_tables(built, tmp_path):
    from forenset.report.html import render_report

    store, _ = built
    text = render_report(store, gallery=2)
    # a wide table of long unbroken words, as forenset.stats' category evidence can be
    wide = "<div class='tw'><table><tr>" + "<th>judge_contradicts_pixels</th>" * 14 + "</tr>"
    wide += "<tr>" + "<td>not meaningful (n = 6 is below the minimum of 10 items)</td>" * 14
    text = text.replace("</body>", wide + "</tr></table></div></body>")
    for width in (1280, 800):
        got = layout(text, tmp_path, width)
        assert got["tables"] > 10 and got["blocks"] > 20, got
        assert got["vw"] <= width
        assert got["problems"] == [], (width, got["problems"][:10])


def overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of tick labels (x and y) whose drawn extents intersect."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
            shown = [t for t in ticks if t.get_visible() and t.get_text()]
            boxes = [t.get_window_extent(renderer) for t in shown]
            for i in range(len(shown)):
                for j in range(i + 1, len(shown)):
                    a, b = boxes[i], boxes[j]
                    w = min(a.x1, b.x1) - max(a.x0, b.x0)
                    h = min(a.y1, b.y1) - max(a.y0, b.y0)
                    if w > 0.5 and h > 0.5:
                        out.append((shown[i].get_text(), shown[j].get_text()))
    return out


OPS = [
    "jpeg_recompress",
    "gaussian_blur",
    "resize_down_up",
    "gaussian_noise",
    "colour_jitter",
    "screenshot_rescale",
    "social_media_recompress",
    "crop_and_pad",
    "median_filter",
    "sharpen",
    "gamma",
    "webp_recompress",
]


@pytest.mark.parametrize("n", [2, 5, len(OPS)])
def test_bar_chart_labels_never_overlap(n):
    import matplotlib.pyplot as plt

    from forenset.report.html import bar_figure

    fig = bar_figure(OPS[:n], list(range(n, 0, -1)), "perturbation ops")
    try:
        assert overlaps(fig) == []
    finally:
        plt.close(fig)


def test_the_overlap_check_sees_overlapping_labels():
    """The check can fail: the old layout (vertical bars, 30 degree labels) of the same ops."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 2.6))
    ax.bar(OPS, list(range(len(OPS))))
    ax.tick_params(axis="x", labelrotation=30)
    try:
        assert overlaps(fig)
    finally:
        plt.close(fig)


def test_bar_chart_draws_the_given_intervals_as_error_bars():
    import matplotlib.pyplot as plt

    from forenset.report.html import bar_figure

    fig = bar_figure(["a ID", "a OOD"], [80.0, 60.0], "F1", errors=[(70.0, 90.0), None])
    try:
        from matplotlib.container import BarContainer

        (bars,) = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
        lines = bars.errorbar.lines[2][0].get_segments()
        assert [tuple(seg[:, 1]) for seg in lines] == [(70.0, 90.0), (60.0, 60.0)]
    finally:
        plt.close(fig)


def eval_scores_con(rows: list[dict]) -> duckdb.DuckDBPyConnection:
    """An in-memory ``eval_scores`` with the columns the evaluation report reads."""
    types = {"value": "DOUBLE", "n": "BIGINT", "ci_low": "DOUBLE", "ci_high": "DOUBLE"}
    cols = (
        "detector track eval_set group_kind group metric value n ci_low ci_high ci_reason "
        "model backend reason caveat details status"
    ).split()
    con = duckdb.connect()
    decl = ", ".join(f'"{c}" {types.get(c, "VARCHAR")}' for c in cols)
    con.execute(f"CREATE TABLE eval_scores ({decl})")
    for r in rows:
        full = {"status": "ok", "model": "scikit-learn", "backend": "sklearn", **r}
        con.execute(
            f"INSERT INTO eval_scores VALUES ({', '.join('?' for _ in cols)})",
            [full.get(c) for c in cols],
        )
    return con


def score(set_, kind, group, metric, value, n, lo, hi, caveat=None):
    return {
        "detector": "forensic",
        "track": "simple",
        "eval_set": set_,
        "group_kind": kind,
        "group": group,
        "metric": metric,
        "value": value,
        "n": n,
        "ci_low": lo,
        "ci_high": hi,
        "caveat": caveat,
    }


def test_f1_chart_series_carry_the_stored_intervals():
    from forenset.benchmarks.evaluation.report import f1_series, table5

    con = eval_scores_con(
        [
            score("id", "all", "all", "f1", 0.8, 40, 0.7, 0.9),
            score("ood", "all", "all", "f1", 0.6, 40, 0.45, 0.72),
            score("id", "all", "all", "accuracy", 0.75, 40, 0.6, 0.85),
        ]
    )
    t5 = table5(con)
    assert t5 is not None
    labels, values, errors = f1_series(t5)
    assert labels == ["forensic/simple ID", "forensic/simple OOD"]
    assert values == pytest.approx([80.0, 60.0])
    assert errors == [pytest.approx((70.0, 90.0)), pytest.approx((45.0, 72.0))]


def test_per_class_accuracy_reads_the_stored_groups():
    from forenset.benchmarks.common.scoring.intervals import NO_FAKES, NO_REALS
    from forenset.benchmarks.evaluation.report import per_class

    con = eval_scores_con(
        [
            score("id", "generator_family", "real", "accuracy", 0.9, 20, 0.8, 1.0, NO_FAKES),
            score("id", "generator_family", "classical", "accuracy", 0.25, 12, 0.1, 0.5, NO_REALS),
            score(
                "id",
                "generator_family",
                "poisson",
                "accuracy",
                0.5,
                4,
                0.0,
                1.0,
                "n = 4 is below the minimum of 10 items",
            ),
            score("id", "generator_family", "real", "f1", None, 20, None, None),
        ]
    )
    pc = per_class(con)
    assert pc is not None
    assert pc.headers == ["detector", "track", "set", "real", "fake: classical", "fake: poisson"]
    assert pc.rows == [
        [
            "forensic",
            "simple",
            "ID",
            "90.00 [80.00, 100.00] (n=20)",
            "25.00 [10.00, 50.00] (n=12)",
            "not meaningful (n = 4 is below the minimum of 10 items)",
        ]
    ]
    assert per_class(eval_scores_con([score("id", "all", "all", "f1", 0.8, 40, 0.7, 0.9)])) is None


def test_eval_cli_and_report_show_per_class_accuracy(built):
    from typer.testing import CliRunner

    from forenset.cli import app
    from forenset.report.html import render_report

    store, _ = built
    res = CliRunner().invoke(app, ["eval", store.uri])
    assert res.exit_code == 0, res.output
    assert "Per-class accuracy" in res.output
    from forenset.store.views import connect

    con = connect(store, ["eval_scores"])
    (real,) = con.execute(
        "SELECT value, n FROM eval_scores WHERE group_kind = 'generator_family' "
        "AND \"group\" = 'real' AND metric = 'accuracy' AND status = 'ok' LIMIT 1"
    ).fetchall()
    assert f"{100 * real[0]:.2f}" in res.output and f"(n={real[1]})" in res.output
    text = render_report(store, gallery=0)
    assert "Per-class accuracy" in text and f"(n={real[1]})" in text


def test_report_folds_idle_stages_and_does_not_repeat_the_discard_table(built):
    from forenset.report.html import render_report

    store, _ = built
    text = render_report(store, gallery=0)
    # the shared build fixture enables evaluation and FakeBench, not the reward and public families
    assert "<p>9 benchmark stages not enabled</p>" in text
    assert "<td>reward_images</td>" not in text and "<td>eval_scores</td>" in text
    stats = text[text.index("Build statistics") :]
    assert "discard by generator" not in stats and "salience histogram" not in stats
    assert text.count("<h3>by generator</h3>") == 1
    assert "category evidence" in stats and "judge contradicts pixels" in stats


@pytest.mark.parametrize("n", [3, 6, len(OPS)])
def test_robustness_chart_labels_never_overlap(n):
    import matplotlib.pyplot as plt

    from forenset.benchmarks.evaluation.report import grouped_bars

    groups = ["clean (0x)", *OPS][:n]
    series = {
        "forensic/simple ID": dict.fromkeys(groups, 50.0),
        "forensic/complex OOD": dict.fromkeys(groups, 40.0),
    }
    fig = grouped_bars(series, "Accuracy (%) per perturbation family", "family")
    try:
        assert overlaps(fig) == []
    finally:
        plt.close(fig)
