"""A self-contained HTML report of a build: tables from DuckDB over the stage views, plots
(matplotlib Agg) and image galleries embedded as base64 PNG, so the file can be mailed or
attached to a CI run and opened offline.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forenset.exports.data import SPLITS, load_samples, rank, verdict_source, write_atomic
from forenset.report.text_metrics import (
    DIVERSITY_HEADERS,
    distinct_n,
    diversity,
    mention_rate,
    self_bleu,
)
from forenset.store.run_store import RunStore

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
.tw{max-width:100%;overflow-x:auto;margin:.5em 0 1.5em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f2f2f2;overflow-wrap:anywhere}td{overflow-wrap:anywhere}
td.n{text-align:right;white-space:nowrap}img{max-width:100%}
.gallery{display:grid;grid-template-columns:repeat(3,1fr);gap:8px;margin-bottom:1.5em}
.gallery figure{margin:0}.gallery figcaption{font-size:.8em;color:#555}
"""


# -- small helpers ---------------------------------------------------------------------------


def png_data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def fig_uri(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return png_data_uri(buf.getvalue())


def bar_figure(
    labels: Sequence[Any],
    values: Sequence[float],
    title: str,
    xlabel: str = "",
    errors: Sequence[tuple[float, float] | None] | None = None,
) -> Any:
    """A bar chart whose labels stay legible: vertical bars with short, few labels, horizontal
    bars (one label per row, the figure as tall as they need) otherwise. ``errors``: per bar
    (low, high) of an interval, drawn as error bars (None: no interval for that bar)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [str(x) for x in labels]
    err = None
    if errors is not None and any(e is not None for e in errors):
        lo = [v - e[0] if e else 0.0 for v, e in zip(values, errors, strict=True)]
        hi = [e[1] - v if e else 0.0 for v, e in zip(values, errors, strict=True)]
        err = [[max(0.0, x) for x in lo], [max(0.0, x) for x in hi]]
    vertical = len(names) <= 6 and sum(len(n) for n in names) <= 48
    if vertical:
        fig, ax = plt.subplots(figsize=(6, 2.6))
        ax.bar(names, list(values), color="#4a7ab5", yerr=err, capsize=4)
        ax.set_xlabel(xlabel)
    else:
        fig, ax = plt.subplots(figsize=(6, max(2.0, 0.6 + 0.28 * len(names))))
        ax.barh(names, list(values), color="#4a7ab5", xerr=err, capsize=3)
        ax.invert_yaxis()  # the first label on top, as a table reads
        ax.set_ylabel(xlabel)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def bar_plot(
    labels: Sequence[Any],
    values: Sequence[float],
    title: str,
    xlabel: str = "",
    errors: Sequence[tuple[float, float] | None] | None = None,
) -> str:
    return fig_uri(bar_figure(labels, values, title, xlabel, errors))


def hist_plot(series: Mapping[str, Sequence[float]], title: str, xlabel: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 2.6))
    for name, vals in series.items():
        if vals:
            ax.hist(list(vals), bins=15, alpha=0.6, label=name)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    if any(series.values()):
        ax.legend()
    return fig_uri(fig)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f'<td class="n">{v:.3f}</td>'
        if isinstance(v, int):
            return f'<td class="n">{v}</td>'
        return f"<td>{html.escape('' if v is None else str(v))}</td>"

    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(v) for v in r) + "</tr>" for r in rows)
    # a scroll container the width of the page: a table wider than the page (long cells wrap
    # first) scrolls inside it instead of running past the page's edge
    return f"<div class='tw'><table><tr>{head}</tr>{body}</table></div>"


def img_tag(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{html.escape(alt)}">'


def _q(con: Any, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


# -- sections --------------------------------------------------------------------------------


def counts_section(store: RunStore, con: Any) -> str:
    from forenset.stages import fold_idle, stage_names

    names = stage_names()
    names += [n for n in store.stages_present() if n not in names]
    rows = []
    for name in names:
        shards = store.manifest(name)
        c: Counter[str] = Counter()
        for s in shards:
            c.update(s.counts)
        rows.append([name, len(shards), sum(s.rows for s in shards), c["ok"], c["error"]])
    state = store.read_json("state.json", default={}) or {}
    complete = state.get("status") == "complete"
    shown, folded = fold_idle(names, {str(r[0]) for r in rows if not r[1] and not r[2]}, complete)
    out = "<h2>Counts per stage</h2>" + table(
        ["stage", "shards", "rows", "ok", "error"], [r for r in rows if r[0] in shown]
    )
    out += "".join(f"<p>{html.escape(line)}</p>" for line in folded)
    split_rows = _q(
        con,
        "SELECT split, count(*) FILTER (label='real'), count(*) FILTER (label='fake'), count(*) "
        "FROM splits WHERE status='ok' GROUP BY split",
    )
    order = {sp: i for i, sp in enumerate(SPLITS)}
    split_rows.sort(key=lambda r: order.get(r[0], 9))
    out += "<h3>Samples per split</h3>" + table(["split", "real", "fake", "total"], split_rows)
    per = _q(
        con,
        "SELECT split, "
        "(SELECT count(*) FROM perturbations p WHERE p.status='ok' AND p.split=s.split), "
        "(SELECT count(*) FROM explanations e WHERE e.status='ok' AND e.split=s.split) "
        "FROM (SELECT DISTINCT split FROM splits WHERE status='ok') s",
    )
    per.sort(key=lambda r: order.get(r[0], 9))
    out += "<h3>Downstream rows per split</h3>" + table(
        ["split", "perturbations", "explanations"], per
    )
    gen = _q(
        con,
        "SELECT split, generator, count(*) FROM splits WHERE status='ok' GROUP BY ALL ORDER BY ALL",
    )
    out += "<h3>Samples per split and generator</h3>" + table(["split", "generator", "n"], gen)
    return out


def funnel_section(store: RunStore) -> str:
    """The build's funnel (forenset.funnel, from footers): a chart of the rows left at each
    step, the table `forenset status --funnel` prints, and its warnings."""
    from forenset.funnel import funnel

    f = funnel(store)
    out = "<h2>Funnel: rows kept at each step, and why the rest were dropped</h2>"
    totals = [(s.step, s.n) for s in f.steps if not s.group]
    if totals:
        out += img_tag(funnel_plot(totals), "funnel")
    out += table(["step", "group", "n", "of", "dropped: why"], f.numbers())
    if f.warnings:
        out += "<ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in f.warnings) + "</ul>"
    return out


def funnel_plot(totals: Sequence[tuple[str, int]]) -> str:
    """Horizontal bars, first step on top: the rows each step kept."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 0.35 * len(totals) + 0.8))
    names = [t[0] for t in totals][::-1]
    values = [t[1] for t in totals][::-1]
    ax.barh(names, values, color="#4a7ab5")
    for i, v in enumerate(values):
        ax.text(v, i, f" {v}", va="center", fontsize=8)
    ax.set_title("funnel: rows kept at each step")
    ax.set_xlabel("rows")
    return fig_uri(fig)


def discard_section(con: Any, gates: Sequence[str] = ()) -> str:
    """Edit-Check's discard rates, then one line per later gate of the run (``gates``)."""
    vt = gates[0] if gates else verdict_source()[0]
    out = "<h2>Edit-Check: discard rates</h2>"
    from forenset.stats import discard_line, gate_line

    tot = _q(
        con,
        f"SELECT count(*) FILTER (keep), count(*) FILTER (NOT keep) FROM {vt} WHERE status='ok'",
    )
    if tot:
        out += f"<p>{html.escape(discard_line(int(tot[0][0] or 0), int(tot[0][1] or 0)))}</p>"
    for gate in gates[1:]:  # gates after Edit-Check narrow what reaches splits
        n = _q(con, f"SELECT count(*) FILTER (keep), count(*) FILTER (NOT keep) FROM {gate} "
               "WHERE status='ok'")  # fmt: skip
        if n:
            out += f"<p>{html.escape(gate_line(gate, int(n[0][0] or 0), int(n[0][1] or 0)))}</p>"
    for col, title in (
        ("generator", "generator"),
        ("family", "edit family"),
        ("kind", "edit kind"),
    ):
        r = _q(
            con,
            f"SELECT {col}, count(*), count(*) FILTER (NOT keep), "
            f"avg(CASE WHEN keep THEN 0.0 ELSE 1.0 END) FROM {vt} WHERE status='ok' "
            f"GROUP BY 1 ORDER BY 1",
        )
        out += f"<h3>by {title}</h3>" + table([title, "judged", "discarded", "discard rate"], r)
    r = _q(
        con,
        "SELECT failure_category, count(*), count(*) / sum(count(*)) OVER (), "
        f"count(*) / any_value(total) FROM {vt}, "
        f"(SELECT count(*) AS total FROM {vt} WHERE status='ok') "
        "WHERE status='ok' AND NOT keep GROUP BY 1 ORDER BY 2 DESC",
    )
    out += "<h3>Discarded candidates by failure category</h3>" + table(
        ["failure category", "discarded", "share of discarded", "share of judged"], r
    )
    if r:
        out += img_tag(
            bar_plot([x[0] for x in r], [x[1] for x in r], "discarded by failure category"),
            "failure categories",
        )
    fid = _q(
        con,
        f"SELECT verdict, count(*), avg(psnr), avg(ssim) FROM {vt} WHERE status='ok' "
        "GROUP BY 1 ORDER BY 1",
    )
    out += "<h3>Fidelity of retained vs discarded candidates</h3>" + table(
        ["verdict", "n", "mean PSNR (dB)", "mean SSIM"], fid
    )
    return out


# forenset.stats queries whose numbers the Edit-Check and salience sections already show
SHOWN_ABOVE = frozenset({"discard_by_generator", "salience_histogram", "fidelity_by_verdict"})


def shared_stats_section(con: Any) -> str:
    """The SQL statistics the CLI's `status --details` shows (forenset.stats), when present."""
    try:
        from forenset import stats
    except ImportError:
        return ""
    out = "<h2>Build statistics (forenset.stats)</h2>"
    for name in stats.QUERIES:
        if name in SHOWN_ABOVE:
            continue
        try:
            cols, rs = stats.run(con, name)
        except Exception as e:  # noqa: BLE001 - one bad query must not lose the report
            out += f"<h3>{html.escape(name)}</h3><p>not available: {html.escape(str(e).splitlines()[0])}</p>"
            continue
        heads = [c.replace("_", " ") for c in cols]  # long names wrap at the spaces
        out += f"<h3>{html.escape(name.replace('_', ' '))}</h3>" + table(heads, rs)
    return out


def salience_section(con: Any) -> str:
    c: Counter[int] = Counter()
    for (text,) in _q(con, "SELECT differences FROM diffs WHERE status='ok'"):
        try:
            for d in json.loads(text or "[]"):
                c[int(d.get("salience") or 0)] += 1
        except (ValueError, TypeError, AttributeError):
            continue
    levels = list(range(1, 6))
    out = "<h2>Difference salience</h2>"
    out += table(["salience", "differences"], [[k, c[k]] for k in levels])
    out += img_tag(
        bar_plot(levels, [c[k] for k in levels], "salience of listed differences", "salience"),
        "salience histogram",
    )
    return out


def perturbation_section(con: Any) -> str:
    ops = _q(
        con,
        "SELECT split, op, count(*), avg(psnr), avg(ssim) FROM (SELECT split, psnr, ssim, "
        "unnest(op_names) AS op FROM perturbations WHERE status='ok') "
        "GROUP BY split, op ORDER BY split, 3 DESC, op",
    )
    fid = _q(
        con,
        "SELECT split, count(*), avg(psnr), avg(ssim) FROM perturbations WHERE status='ok' "
        "GROUP BY 1 ORDER BY 1",
    )
    out = "<h2>Perturbations</h2>" + table(
        ["split", "variants", "mean PSNR (dB)", "mean SSIM"], fid
    )
    out += "<h3>Op frequency per split</h3>" + table(
        ["split", "op", "n", "mean PSNR of variants with it", "mean SSIM"], ops
    )
    tot: Counter[str] = Counter()
    for _, op, n, _, _ in ops:
        tot[op] += n
    if tot:
        names = sorted(tot, key=lambda k: -tot[k])
        out += img_tag(bar_plot(names, [tot[k] for k in names], "perturbation ops"), "op frequency")
    return out


def explanation_section(con: Any, seed: int) -> str:
    rs = _q(
        con,
        "SELECT kind, sample_id, text, n_words, entities_mentioned FROM explanations "
        "WHERE status='ok' ORDER BY kind, sample_id",
    )
    by: dict[str, list[tuple]] = {}
    for r in rs:
        by.setdefault(r[0], []).append(r)
    rows, lengths = [], {}
    for kind, items in sorted(by.items()):
        items = sorted(items, key=lambda r: rank(seed, "report-self-bleu", kind, r[1]))
        texts = [r[2] or "" for r in items]
        words = [int(r[3] or len(r[2].split())) for r in items]
        lengths[kind] = words
        rows.append(
            [
                kind,
                len(items),
                sum(words) / len(words),
                min(words),
                max(words),
                len(set(texts)),
                distinct_n(texts, 2),
                self_bleu(texts),
                mention_rate([r[4] for r in items]),
            ]
        )
    out = "<h2>Explanations</h2>" + table(
        [
            "kind",
            "n",
            "mean words",
            "min",
            "max",
            "distinct texts",
            "Distinct-2",
            "Self-BLEU-4",
            "entity-mention rate",
        ],
        rows,
    )
    out += (
        "<p>Self-BLEU-4: mean BLEU of each explanation against the others of its kind "
        "(lower = more diverse, up to 150 texts). Distinct-2: unique bigrams / bigrams. "
        "Entity-mention rate: share naming at least one scene entity.</p>"
    )
    if lengths:
        out += img_tag(hist_plot(lengths, "explanation length", "words"), "explanation lengths")
    return out


def explanation_diversity_section(con: Any) -> str:
    """Per split and kind: duplicates, Distinct-2 and texts that repeat a phrase inside
    themselves, so a builder sees templated or defective labels before training on them."""
    rs = _q(con, "SELECT split, kind, text FROM explanations WHERE status='ok'")
    if not rs:
        return ""
    out = "<h3>Explanation diversity per split</h3>" + table(DIVERSITY_HEADERS, diversity(rs))
    out += (
        "<p>Duplicate share: (n − distinct texts) / n, texts that copy an earlier one word for "
        "word. Distinct-2: unique bigrams / bigrams over the split's texts of that kind. "
        "Repeated 4-gram: texts in which a 4-word phrase occurs twice (the validator rejects "
        "them, so a non-zero count means texts from before that check).</p>"
    )
    return out


def _thumb(store: RunStore, blob: str | None, boxes: Sequence[Sequence[float]] = ()) -> str | None:
    """A PNG data URI of the blob (at most 256 px, boxes drawn), or None when it cannot be read."""
    from PIL import Image, ImageDraw, UnidentifiedImageError

    side = 256
    try:
        data = store.get_blob(blob) if blob else b""
        im: Image.Image = Image.open(io.BytesIO(data))
        im.load()
    except (OSError, UnidentifiedImageError):
        return None
    with im:
        im = im.convert("RGB")
    scale = side / max(im.size)
    if scale < 1 or max(im.size) < 128:
        im = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))))
    draw = ImageDraw.Draw(im)
    for b in boxes:
        x0, y0, x1, y1 = (float(v) for v in b)
        draw.rectangle(
            [x0 * im.width, y0 * im.height, x1 * im.width - 1, y1 * im.height - 1],
            outline=(255, 40, 40),
            width=2,
        )
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return png_data_uri(buf.getvalue())


def gallery_section(store: RunStore, samples: list[dict[str, Any]], n: int, seed: int) -> str:
    fakes = [s for s in samples if s["label"] == "fake"]
    fakes.sort(key=lambda s: rank(seed, "report-gallery", s["split"], s["sample_id"]))
    out = "<h2>Gallery: real | fake with difference boxes | perturbed</h2>"
    for s in fakes[:n]:
        boxes = [d["bbox"] for d in s["differences_list"] if d.get("bbox") and len(d["bbox"]) == 4]
        cells = [
            (_thumb(store, s["source_blob"]), "real"),
            (
                _thumb(store, s["blob"], boxes),
                f"fake ({s['generator']}, {len(boxes)} boxes)",
            ),
        ]
        if s["perturbed"]:
            p = s["perturbed"][0]
            cells.append((_thumb(store, p["blob"]), "perturbed: " + ", ".join(p["op_names"] or [])))
        instr = (s.get("instruction_obj") or {}).get("text", "")
        out += f"<h3>{html.escape(s['sample_id'])} ({html.escape(s['split'])})</h3>"
        out += f"<p>{html.escape(instr)}</p><div class='gallery'>"
        for uri, cap in cells:
            shown = img_tag(uri, cap) if uri else "<p>(image missing from the blob store)</p>"
            out += f"<figure>{shown}<figcaption>{html.escape(cap)}</figcaption></figure>"
        out += "</div>"
        if s.get("explanation_complex"):
            out += f"<p><em>{html.escape(s['explanation_complex'])}</em></p>"
    if not fakes:
        out += "<p>No fake samples in this build.</p>"
    return out


# -- the report ------------------------------------------------------------------------------


def render_report(store: RunStore, gallery: int = 4) -> str:
    """The report as one HTML string (no external resources)."""
    from forenset.exports.api import build_seed
    from forenset.families import families, load_target
    from forenset.store.views import connect, gate_tables, table_names

    seed = build_seed(store)
    # Every table of the run, as `forenset query` and `status --details` see them: the sections
    # (forenset.stats above all) query many stages, and a hand-kept subset fell out of date.
    con = connect(store, list(dict.fromkeys([*table_names(store), verdict_source(store)[0]])))
    samples = load_samples(store)
    parts = [
        counts_section(store, con),
        funnel_section(store),
        discard_section(con, gate_tables(store)),
        salience_section(con),
        perturbation_section(con),
        explanation_section(con, seed),
        explanation_diversity_section(con),
        # each benchmark family's section (``Family.report``), "" when it has nothing to show
        *(load_target(f.report)(store, con) for f in families() if f.report),
        shared_stats_section(con),
        gallery_section(store, samples, gallery, seed),
    ]
    con.close()
    title = f"forenset report — {html.escape(store.uri)}"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{CSS}</style></head><body><h1>{title}</h1>" + "".join(parts) + "</body></html>"
    )


def write_report(store: RunStore, out: Path, gallery: int = 4) -> Path:
    out = Path(out)
    write_atomic(out, render_report(store, gallery))
    return out
