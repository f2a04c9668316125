"""SafeIMG benchmark half (§2.5, §3): assemble D_ann, D_hard (= D_SafeIMG), the excluded set
and D_real from a run's tables and annotations, and score the run's detections on them.

* D_gen: the run's text-to-image fakes (``candidates.kind = 't2i'``; their category is the
  candidate's ``family``, a taxonomy id P1-P8 / I1-I4). Only they are triaged.
* Triage (latest ok, not cancelled triage annotation per sample): ``ann`` samples with K >= 1
  regions (box + label + text) form D_ann (eq. 10), ``hard`` ones D_hard (eq. 8); ``invalid``
  (eq. 7), ``ann`` without a region, and untriaged samples form the excluded table, with the reason.
* D_real: the run's real samples, drawn ``per_category`` (50 by default, §2.5) per category by a
  seeded rank. A real's category (the paper's reals come from per-category sources) is, first
  to last: given by a CSV ``image_id,category``; a path component of its source ``uri`` / name
  equal to a category id (``P3``) or name; or matched from its caption and file name against
  the taxonomy's content vocabulary (``taxonomy.match_category``: two or more category-specific
  words). Each row records ``category_method`` (mapping / path / caption-match) and the words
  matched. Reals without a category fill what the categories leave of per_category x 12
  (scored as "uncategorised" and in Overall).
* Scores read the ``detections`` table (the evaluation family's detectors: no second detector
  here): Table 2 rates per detector × track on D_SafeIMG, D_ann and D_hard, real accuracy on
  D_real, rates per propagation level, and on D_ann the Table 3 alignment, hit rate per label
  and Δ(l). Images without a detection are counted as not covered, never guessed.

Simulated annotations (``simulate_annotations``) are for the offline demo only: every row has
``annotator = 'simulated'`` and ``simulated = true``, and the scores say so.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from forenset.benchmarks.common.scoring import Pivot, pivot, scorers
from forenset.benchmarks.safeimg import scorers as m
from forenset.exports.data import write_atomic, write_images
from forenset.exports.labelstudio import ANOMALY_LABELS, TRIAGE_CHOICES, store_annotation_rows
from forenset.seeds import derive_seed
from forenset.store.run_store import RunStore
from forenset.text.taxonomy import load_taxonomy, match_category

OUT = "benchmarks/safeimg"
SUBSETS = ("D_SafeIMG", "D_ann", "D_hard")


def _con(store: RunStore, tables: list[str]):
    from forenset.store.views import connect

    return connect(store, tables)


def categories() -> dict[str, dict[str, str]]:
    return {c.id: {"name": c.name, "group": c.group} for c in load_taxonomy()}


def generated(store: RunStore) -> list[dict[str, Any]]:
    """D_gen: text-to-image fakes with their category (sample order)."""
    if not store.manifest("candidates") or not store.manifest("splits"):
        return []
    con = _con(store, ["splits", "candidates"])
    rows = con.execute(
        """SELECT s.sample_id, s.blob, s.generator, c.family AS category, c.caption AS prompt
           FROM splits s JOIN candidates c ON c.candidate_id = s.candidate_id
           WHERE s.status = 'ok' AND s.label = 'fake' AND c.status = 'ok' AND c.kind = 't2i'
           ORDER BY s.sample_id"""
    ).fetchall()
    cols = ("sample_id", "blob", "generator", "category", "prompt")
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _annotations(store: RunStore) -> list[dict[str, Any]]:
    if not store.manifest("annotations"):
        return []
    con = _con(store, ["annotations"])
    cur = con.execute(
        "SELECT * FROM annotations WHERE status = 'ok' AND NOT coalesce(was_cancelled, false)"
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _key(r: dict[str, Any]) -> tuple[str, int]:
    return (str(r.get("created_at") or ""), int(r.get("annotation_id") or 0))


def assemble(
    store: RunStore,
    *,
    per_category: int = 50,
    seed: int = 0,
    real_categories: Path | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The four tables: D_ann, D_hard, excluded, D_real (rows are plain dicts)."""
    cats = categories()
    anns = _annotations(store)
    triage: dict[str, dict[str, Any]] = {}
    for r in anns:
        if r["task"] == "triage" and r.get("choice") in TRIAGE_CHOICES:
            if r["sample_id"] not in triage or _key(r) >= _key(triage[r["sample_id"]]):
                triage[r["sample_id"]] = r
    regions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in anns:
        if r["task"] == "bbox" and r.get("rect_label") in ANOMALY_LABELS and r.get("w"):
            regions[r["sample_id"]].append(r)
    d_ann, d_hard, excluded = [], [], []
    for g in generated(store):
        c = cats.get(g["category"] or "", {"name": None, "group": None})
        base = {**g, "category_name": c["name"], "group": c["group"]}
        t = triage.get(g["sample_id"])
        q = t["choice"] if t else None
        sim = bool(t and t.get("simulated"))
        if q == "hard":
            d_hard.append({**base, "triage": "hard", "anomalies": [], "simulated": sim})
        elif q == "ann" and regions.get(g["sample_id"]):
            an = [
                {
                    "label": r["rect_label"],
                    "x": r["x"],
                    "y": r["y"],
                    "w": r["w"],
                    "h": r["h"],
                    "rotation": r.get("rotation") or 0.0,
                    "text": r.get("region_text") or "",
                    "region_id": r.get("region_id"),
                    "origin": r.get("origin"),
                }
                for r in sorted(regions[g["sample_id"]], key=lambda r: r["annotation_row_id"])
            ]
            sim = sim or any(r.get("simulated") for r in regions[g["sample_id"]])
            d_ann.append({**base, "triage": "ann", "anomalies": an, "simulated": sim})
        else:
            reason = {
                "invalid": "triaged invalid (eq. 7)",
                "ann": "triaged ann but no region annotated (K = 0, eq. 10)",
            }.get(q or "", "not triaged")
            excluded.append({**base, "triage": q, "reason": reason, "simulated": sim})
    d_real = draw_reals(store, cats, per_category, seed, real_categories)
    return {"D_ann": d_ann, "D_hard": d_hard, "excluded": excluded, "D_real": d_real}


def _real_category(
    uri: str | None, name: str | None, cats: dict[str, dict[str, str]]
) -> str | None:
    by_name = {v["name"].lower(): k for k, v in cats.items()}
    parts = [p for s in (uri or "", name or "") for p in s.replace("\\", "/").split("/")]
    for p in parts:
        if p in cats:
            return p
        if p.lower() in by_name:
            return by_name[p.lower()]
    return None


def draw_reals(
    store: RunStore,
    cats: dict[str, dict[str, str]],
    per_category: int,
    seed: int,
    mapping: Path | None = None,
) -> list[dict[str, Any]]:
    """D_real: up to ``per_category`` real samples per category, seeded rank (stable under
    additions), then reals with no category up to ``per_category`` × categories in all
    (``uncategorised`` / ``uncategorised_drawn`` in the summary row)."""
    if not store.manifest("splits"):
        return []
    con = _con(store, ["splits", "sources"])
    rows = con.execute(
        """SELECT s.sample_id, s.image_id, s.blob, any_value(src.uri), any_value(src.name),
                  any_value(src.caption)
           FROM splits s LEFT JOIN sources src ON src.image_id = s.image_id
           WHERE s.status = 'ok' AND s.label = 'real'
           GROUP BY s.sample_id, s.image_id, s.blob ORDER BY s.sample_id"""
    ).fetchall()
    given: dict[str, str] = {}
    if mapping is not None:
        with open(mapping, newline="", encoding="utf-8") as f:
            given = {r["image_id"]: r["category"] for r in csv.DictReader(f)}
    pools: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for sid, iid, blob, uri, name, caption in rows:
        cat, method = given.get(iid), "mapping"
        matched: list[str] = []
        if not cat:
            cat, method = _real_category(uri, name, cats), "path"
        if not cat:
            cat, matched = match_category(f"{caption or ''} {Path(name or '').stem}")
            method = "caption-match"
        rec = {
            "sample_id": sid,
            "image_id": iid,
            "blob": blob,
            "source_uri": uri,
            "category": cat,
            "category_method": method if cat else None,
            "category_words": ", ".join(matched) or None,
            "category_name": cats.get(cat or "", {}).get("name"),
            "group": cats.get(cat or "", {}).get("group"),
        }
        pools[cat or ""].append(rec)

    def ranked(pool: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(pool, key=lambda r: derive_seed(seed, "safeimg-real", r["sample_id"]))

    out = []
    for cat in cats:
        out += ranked(pools.get(cat, []))[:per_category]
    unc = pools.get("", [])
    if unc:
        # Reals without a category fill what the categories leave of the paper's size
        # (per_category x categories), scored as "uncategorised" and in Overall: a few
        # categorised reals must not shrink D_real (and real-image accuracy) to those few.
        drawn = ranked(unc)[: max(0, per_category * len(cats) - len(out))]
        out += drawn
        out.append(
            {"sample_id": None, "uncategorised": len(unc), "uncategorised_drawn": len(drawn)}
        )
    return out


def simulate_annotations(store: RunStore, seed: int) -> dict[str, int]:
    """Demo-only annotations, labelled ``simulated`` in every row: triage drawn ~8 % invalid,
    ~12 % hard (the paper's hard share), the rest ann with 1-3 random regions and labels."""
    rows: list[dict[str, Any]] = []
    for i, g in enumerate(generated(store)):
        rng = np.random.default_rng(derive_seed(seed, "safeimg-simulated", g["sample_id"]))
        u = float(rng.random())
        q = "invalid" if u < 0.08 else "hard" if u < 0.2 else "ann"
        common = {
            "task_id": i,
            "annotation_id": i,
            "sample_id": g["sample_id"],
            "annotator": "simulated",
            "simulated": True,
            "was_cancelled": False,
            "source_file_hash": f"simulated-{seed}",
            "status": "ok",
        }
        rows.append(
            {
                **common,
                "annotation_row_id": f"sim-{g['sample_id']}-t",
                "task": "triage",
                "result_type": "choices",
                "choice": q,
            }
        )
        for k in range(int(rng.integers(1, 4)) if q == "ann" else 0):
            lab = str(rng.choice(ANOMALY_LABELS))
            x, y = (float(v) for v in rng.uniform(0, 0.7, 2))
            w, h = (float(v) for v in rng.uniform(0.1, 0.3, 2))
            rows.append(
                {
                    **common,
                    "annotation_row_id": f"sim-{g['sample_id']}-r{k}",
                    "task": "bbox",
                    "result_type": "rectanglelabels",
                    "rect_label": lab,
                    "x": x,
                    "y": y,
                    "w": w,
                    "h": h,
                    "rotation": 0.0,
                    "region_id": f"sim{k}",
                    "origin": "drawn",
                    "region_text": f"simulated {lab} anomaly (not a human annotation)",
                }
            )
    store_annotation_rows(
        store, rows, f"simulated-{seed}", f"simulated-{seed}-{len(rows)}", append=True
    )
    return dict(Counter(r["choice"] for r in rows if r["task"] == "triage"))


# -- scores ----------------------------------------------------------------------------------
def _detections(store: RunStore) -> list[dict[str, Any]]:
    if not store.manifest("detections"):
        return []
    con = _con(store, ["detections"])
    cur = con.execute(
        "SELECT detector, track, sample_id, variant, answer, explanation, bbox FROM detections "
        "WHERE status = 'ok' ORDER BY detector, track, sample_id, variant"
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _box(bbox: str | None) -> m.Box | None:
    try:
        x0, y0, x1, y1 = (float(v) for v in json.loads(bbox or "null"))
    except (TypeError, ValueError):
        return None
    return (x0, y0, x1 - x0, y1 - y0)


# The seed key of each built-in metric's cells as before they were registry scorers (so a rerun
# keeps its intervals); a metric added later is seeded by "<table>/<metric>/<detector>/<set>".
SEED_PREFIX = {
    ("table2", "detection_rate"): "table2/{set}/{detector}",
    ("propagation", "detection_rate"): "propagation/{detector}",
    ("real_accuracy", "real_accuracy"): "real_accuracy/{detector}",
    ("table3", "human_covered"): "hc/{detector}",
    ("table3", "ai_supported"): "as/{detector}",
    ("hit_rate", "hit_rate"): "hit/{detector}",
    ("delta", "delta"): "delta/{detector}/{set}",
}


def table_metrics(table: str) -> list[Any]:
    """The registered SafeIMG metrics whose ``scope`` names ``table``, in registry order."""
    return [s for s in scorers("safeimg") if table in s.scope.get("table", ())]


def _metric_cells(
    groups: dict[str, list[dict[str, Any]]], iv: m.Intervals, group: dict[str, Any],
    reason: str | Callable[[str], str | None] | None = None,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Every registered metric in scope of ``group["table"]`` on each column's items (``column``:
    the category, level or label): metric -> column -> cell (n, interval, caveat), each kept as
    a long row too. A metric whose ``needs`` no item carries is left out."""
    out: dict[str, dict[str, Any]] = {}
    everything = [i for items in groups.values() for i in items]
    for s in table_metrics(group["table"]):
        needs = getattr(s, "needs", ())
        if everything and needs and not any(all(f in i for f in needs) for i in everything):
            continue
        fmt = SEED_PREFIX.get(
            (group["table"], s.name), f"{group['table']}/{s.name}/{{detector}}/{{set}}"
        )
        key = fmt.format(**group)
        out[s.name] = {
            k: iv.metric(
                s.name, items, f"{key}/{k}", {**group, "column": k},
                reason(k) if callable(reason) else reason,
            )
            for k, items in groups.items()
        }  # fmt: skip
    return out


def _answers_by_group(
    items: list[tuple[str, str | None]], order: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """Per category in ``order`` (then any other, sorted) and Overall (every image, in order)
    the images' answers as metric items."""
    out: dict[str, list[dict[str, Any]]] = {g: [] for g in order}
    extra: dict[str, list[dict[str, Any]]] = {}
    for g, a in items:
        (out if g in out else extra).setdefault(g, []).append({"answer": a})
    out.update({g: extra[g] for g in sorted(extra)})
    out["Overall"] = [{"answer": a} for _, a in items]
    return out


def score(
    tables: dict[str, list[dict[str, Any]]],
    detections: list[dict[str, Any]],
    judge: m.ModelAlignmentJudge | None = None,
    intervals: m.Intervals | None = None,
) -> dict[str, Any]:
    """Tables 2-3 and the appendix statistics from the assembled sets and detections; every
    number a cell ``{value, n, ci_low, ci_high, ...}`` (``m.Intervals``)."""
    iv = intervals or m.Intervals(m.IntervalsConfig(), 0)
    order = list(categories())
    groups = {
        "ann": {r["sample_id"]: r for r in tables["D_ann"]},
        "hard": {r["sample_id"]: r for r in tables["D_hard"]},
    }
    safe = {**groups["ann"], **groups["hard"]}
    reals = {r["sample_id"]: r for r in tables["D_real"] if r.get("sample_id")}
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in detections:
        by_model[f"{d['detector']}/{d['track']}"].append(d)
    out: dict[str, Any] = {
        "table2": {},
        "real_accuracy": {},
        "propagation": {},
        "table3": {},
        "hit_rate": {},
        "delta": {},
        "coverage": {},
    }
    matcher = m.OFFLINE_MATCHER if judge is None else "model-judge"
    out["matcher"] = matcher
    out["intervals"] = iv.config.model_dump()
    for model, rows in sorted(by_model.items()):
        clean = {r["sample_id"]: r for r in rows if (r["variant"] or "0x") == "0x"}
        # Rates are over the images this model answered (``n``); ``coverage`` says how many of
        # each set that is - an image without a detection is neither a hit nor a miss.
        for name, pool in (
            ("D_SafeIMG", safe),
            ("D_ann", groups["ann"]),
            ("D_hard", groups["hard"]),
        ):
            items = [
                (s["category"], clean[sid]["answer"]) for sid, s in pool.items() if sid in clean
            ]
            out["table2"].setdefault(name, {})[model] = _metric_cells(
                _answers_by_group(items, order), iv,
                {"table": "table2", "detector": model, "set": name},
            )["detection_rate"]  # fmt: skip
        out["coverage"][model] = {
            "D_SafeIMG": [sum(s in clean for s in safe), len(safe)],
            "D_real": [sum(s in clean for s in reals), len(reals)],
        }
        items = [
            (s["category"] or "uncategorised", clean[sid]["answer"])
            for sid, s in reals.items()
            if sid in clean
        ]
        out["real_accuracy"][model] = _metric_cells(
            _answers_by_group(items, order), iv,
            {"table": "real_accuracy", "detector": model, "set": "D_real"},
            # say why rather than "no real images" alone
            None if reals else "no real images (D_real is empty)",
        )["real_accuracy"]  # fmt: skip
        levels: dict[str, list[str | None]] = defaultdict(list)
        for r in rows:
            if r["sample_id"] in safe and r["sample_id"] in clean:  # the same images per level
                levels[r["variant"] or "0x"].append(r["answer"])
        out["propagation"][model] = _metric_cells(
            {lv: [{"answer": x} for x in a] for lv, a in sorted(levels.items())}, iv,
            {"table": "propagation", "detector": model, "set": "D_SafeIMG"},
        )["detection_rate"]  # fmt: skip
        out["table3"][model], out["hit_rate"][model], out["delta"][model] = _alignment(
            groups["ann"], safe, clean, order, judge, iv, model
        )
    out["scores"] = list(iv.rows)  # the long rows: what the CLI and report pivot
    return out


def _alignment(ann, safe, clean, order, judge, iv: m.Intervals, model: str):
    items = []
    for sid, s in ann.items():
        if sid not in clean:  # not answered by this model: not part of its alignment
            continue
        anoms = [
            m.Anomaly(a["label"], (a["x"], a["y"], a["w"], a["h"]), a["text"])
            for a in s["anomalies"]
        ]
        det = clean.get(sid, {})
        box = _box(det.get("bbox"))
        rats = [m.Rationale(t, box) for t in m.split_rationales(det.get("explanation"))]
        items.append((sid, anoms, rats))
    if judge is None:
        mats = [m.offline_matrix(a, r) for _, a, r in items]
        failed = 0
    else:
        got = judge.judge(items)
        mats = [g[0] for g in got]
        failed = sum(g[0] is None for g in got)
    per_cat: dict[str, list[m.ImageAlignment]] = defaultdict(list)
    pairs = []
    for (sid, anoms, rats), mat in zip(items, mats, strict=True):
        if mat is None:
            continue
        al = m.align(mat, len(rats))
        per_cat[ann[sid]["category"]].append(al)
        per_cat["Overall"].append(al)
        pairs += [(a.label, h) for a, h in zip(anoms, al.hits, strict=True)]
    t3_cells = _metric_cells(
        {c: [vars(a) for a in per_cat.get(c, [])] for c in [*order, "Overall"]}, iv,
        {"table": "table3", "detector": model, "set": "D_ann"},
    )  # fmt: skip
    t3 = {
        "Human Covered by AI": t3_cells["human_covered"],
        "AI Supported by Human": t3_cells["ai_supported"],
        "judge_failures": failed,
    }
    hit = _metric_cells(
        {lab: [{"hit": h} for la, h in pairs if la == lab] for lab in ANOMALY_LABELS}, iv,
        {"table": "hit_rate", "detector": model, "set": "D_ann"},
        lambda lab: f"no {lab} anomalies",
    )["hit_rate"]  # fmt: skip
    cats = categories()
    labelled = [
        (
            s["category"],
            {a["label"] for a in s["anomalies"]},
            not m.is_ai(clean.get(sid, {}).get("answer")),
        )
        for sid, s in ann.items()
        if sid in clean
    ]
    scopes = {
        **{c: [c] for c in order},
        "Public": [c for c in order if cats[c]["group"] == "public"],
        "Individual": [c for c in order if cats[c]["group"] == "individual"],
        "Overall": order,
    }
    delta = {
        sc: _metric_cells(
            {
                lab: [{"has": lab in ls, "missed": fn} for c, ls, fn in labelled if c in cs]
                for lab in ANOMALY_LABELS
            },
            iv, {"table": "delta", "detector": model, "set": sc},
        )["delta"]
        for sc, cs in scopes.items()
    }  # fmt: skip
    return t3, hit, delta


def write_tables(
    store: RunStore, tables: dict[str, list[dict[str, Any]]], out: Path
) -> dict[str, int]:
    """Parquet per table (``datasets.load_dataset('parquet', ...)`` reads them), images copied
    to ``images/`` and referenced by ``image_file``."""
    counts = {}
    for name, rows in tables.items():
        rows = [r for r in rows if r.get("sample_id")]
        refs = write_images(store, [r["blob"] for r in rows if r.get("blob")], out)
        rows = [
            {
                **{k: v for k, v in r.items() if k != "blob"},
                "image_file": refs.get(r["blob"]) if r.get("blob") else None,
            }
            for r in rows
        ]
        table = (
            pa.Table.from_pylist(rows)
            if rows
            else pa.table({"sample_id": pa.array([], pa.string())})
        )
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / f".{name}.parquet.tmp"
        pq.write_table(table, tmp)
        tmp.replace(out / f"{name}.parquet")
        counts[name] = len(rows)
    return counts


def run_safeimg(
    store: RunStore,
    *,
    per_category: int = 50,
    seed: int = 0,
    real_categories: Path | None = None,
    judge: m.ModelAlignmentJudge | None = None,
    out: Path | None = None,
    intervals: m.IntervalsConfig | None = None,
) -> dict[str, Any]:
    """Assemble, write the tables and ``scores.json`` under ``<run>/benchmarks/safeimg``; the
    intervals are seeded by ``intervals.seed`` or else ``seed``."""
    tables = assemble(store, per_category=per_category, seed=seed, real_categories=real_categories)
    out = Path(out) if out else Path(store.path(OUT))
    counts = write_tables(store, tables, out)
    sim = any(r.get("simulated") for k in ("D_ann", "D_hard", "excluded") for r in tables[k])
    summary = next((r for r in tables["D_real"] if "uncategorised" in r), {})
    unc = summary.get("uncategorised", 0)
    res = {
        "path": str(out),
        "counts": {
            **counts,
            "D_SafeIMG": counts["D_ann"] + counts["D_hard"],
            "reals_uncategorised": unc,
            "reals_uncategorised_drawn": summary.get("uncategorised_drawn", 0),
        },
        "simulated_annotations": sim,
        "excluded_reasons": dict(Counter(r["reason"] for r in tables["excluded"])),
        **score(
            tables, _detections(store), judge, m.Intervals(intervals or m.IntervalsConfig(), seed)
        ),
    }
    write_atomic(out / "scores.json", json.dumps(res, indent=1, sort_keys=True, default=str))
    return res


def pivots(res: dict[str, Any], columns: Sequence[str] | None = None) -> list[tuple[str, Pivot]]:
    """The SafeIMG tables as pivots of the long rows (``res["scores"]``): per table, one pivot
    per registered metric in its scope (the metric's header after the title when the table has
    several), one column per category (Table 2, real accuracy, Table 3), level or label, one
    row per model (Δ(l): per model and scope). Shared by ``forenset safeimg`` and the report
    (``safeimg.report``)."""
    rows = res.get("scores") or []
    cols = list(columns or [*categories(), "Overall"])

    def one(title: str, table: str, index: tuple[str, ...], headers: tuple[str, ...],
            **where: str) -> list[tuple[str, Pivot]]:  # fmt: skip
        found = []
        metrics = table_metrics(table)
        for s in metrics:
            mine = [
                r for r in rows
                if r["table"] == table and r["metric"] == s.name
                and all(r[k] == v for k, v in where.items())
            ]  # fmt: skip
            p = pivot(mine, index, [s], index_headers=headers, by="column", by_order=cols)
            found.append((f"{title}: {s.header}" if len(metrics) > 1 else title, p))
        return found

    out: list[tuple[str, Pivot]] = []
    for name in SUBSETS:
        out += one(f"Table 2 - AI detection rate (%) on {name} (eq. 12)", "table2",
                   ("detector",), ("model",), set=name)  # fmt: skip
    out += one("Real-image accuracy (%) on D_real", "real_accuracy", ("detector",), ("model",))
    out += one("AI detection rate (%) by propagation level on D_SafeIMG", "propagation",
               ("detector",), ("model",))  # fmt: skip
    out += one(f"Table 3 - Human-AI alignment (%) on D_ann, matcher {res.get('matcher', '')}",
               "table3", ("detector",), ("model",))  # fmt: skip
    out += one("Hit rate (%) per artefact label (over anomalies)", "hit_rate", ("detector",),
               ("model",))  # fmt: skip
    out += one("Δ(l) (eq. 13, points) per scope", "delta", ("detector", "set"), ("model", "scope"))
    return out


def format_tables(res: dict[str, Any], columns: Sequence[str] | None = None) -> str:
    """Plain-text Tables 2-3 (percent), in the paper's column order: the long rows of
    ``res["scores"]`` pivoted by the shared ``scoring.pivot`` (:func:`pivots`),
    every number with its 95 % bootstrap interval and n, "not meaningful (why)" where its set
    is degenerate."""
    lines = [
        f"SafeIMG: {json.dumps(res['counts'])}"
        + ("  [SIMULATED annotations: demo only]" if res.get("simulated_annotations") else "")
    ]
    for model, cov in res.get("coverage", {}).items():
        lines.append(
            f"{model}: answered {cov['D_SafeIMG'][0]} of {cov['D_SafeIMG'][1]} D_SafeIMG images, "
            f"{cov['D_real'][0]} of {cov['D_real'][1]} D_real images (rates are over answered ones)"
        )
    iv = res.get("intervals") or {}
    lines.append(
        f"each number: value [95% CI] ({iv.get('resamples')} bootstrap resamples over images; hit"
        f" rate: anomalies; {iv.get('level')} percentile) and n=… where it differs from the row's"
        f" n; not meaningful below {iv.get('min_n')} items"
    )
    for title, p in pivots(res, columns):
        widths = [max(len(x) for x in col) for col in zip(p.headers, *p.rows, strict=True)]
        lines += ["", title]
        if not p.rows:
            lines.append("  (no model answered these images)")
            continue
        for row in [p.headers, *p.rows]:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        lines += [f"  {n}" for n in p.note_lines()]
    return "\n".join(lines)
