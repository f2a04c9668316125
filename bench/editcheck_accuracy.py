"""Edit-Check measured against ground truth, in two modes.

``--mode independent`` (the headline, and the CI floor's mode): edits made by
bench/independent_edits.py, an OpenCV/numpy editor that shares no code with forenset's
editors, with known good / missing / partial / off-target / artefact truth at graded strengths
and coverages. Each candidate is imported as an external edit (``external_instruction`` of its
listing row: instruction, kind, target box) and goes through the default diffs -> judgments ->
verdicts configuration. Prints DISCARD precision/recall with BORDERLINE kept and discarded, per
fault and per strength band, partial recall, good edits falsely discarded and category
accuracy (the failure category named for each discarded fault). Tune on one ``--seed``'s set,
report on another.

    python bench/editcheck_accuracy.py --mode independent --seed 2 [--n 275] [--size 192]

``--mode leave-one-editor-out``: the three editors of bench/editors/ (clone, diffusion,
texture: no code shared with forenset's generators, bench/independent_edits.py or each
other). Each candidate is measured once (``edit_strength.measure``); a small grid of the rule
judge's thresholds (bench/editcheck_loeo.py) is chosen on two editors (fewest errors: good
edits discarded, faults kept, wrong categories), and the figures are reported on the third, every editor
in turn: per held-out editor and per edit kind, good edits falsely discarded, DISCARD
precision / recall (BORDERLINE kept), category accuracy, with n. Then the same grid on all
three editors' rows, checked against the shipped defaults (rules-v8: that choice at
``--min-per-kind 80 --max-sets 10``), and the shipped defaults on bench/independent_edits.py
sets 1-7, an editor their choice never saw.

    python bench/editcheck_accuracy.py --mode leave-one-editor-out [--seed 1] [--size 192]
        [--min-per-kind 40] [--max-sets 8] [--quick]

Each editor's sets of seeds ``--seed``, ``--seed`` + 1, ... are pooled until every edit kind
has ``--min-per-kind`` good edits (``--quick``: one set), and the per-kind false-discard rate
is printed with its 95 % Wilson interval.

``--mode tune``: the same grid on bench/independent_edits.py's sets ``--tune-seeds`` plus
``--tune-editors``' sets of ``--seed``: how the rules-v3 to v7 shipped thresholds were chosen.

``--mode faulty``: builds the sample photos through the offline pipeline with a faulty generator (known failures
injected at configured rates) beside a healthy one, then compares the verdicts with the truth:
a candidate should be discarded exactly when a fault was injected. Prints DISCARD precision
and recall on the faulty generator (goal >= 0.9 each), recall per fault, and the healthy
generator's discard rate (not truth-labelled: classical edits can genuinely fail).

    python bench/editcheck_accuracy.py --mode faulty [--seeds 4] [--max-side 256]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from forenset.config import validate_config
from forenset.flows.local import run_local
from forenset.store.views import connect

EXPECTED_CATEGORY: dict[str, str] = {}


HERE = Path(__file__).resolve().parent


def load_editor():
    """bench/independent_edits.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "independent_edits", HERE / "independent_edits.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def check(real: np.ndarray, fake: np.ndarray, instruction: dict) -> dict:
    """One imported candidate through the default diffs -> judgments -> verdicts rule."""
    from forenset.tasks.editcheck import offline_check

    return offline_check(real, fake, instruction)


def evaluate(cands: list, verdicts: list[dict]) -> dict:
    """The figures of one set: P/R both BORDERLINE policies, per fault/band, categories."""
    rows = [
        (c.fault, c.band, v["verdict"], v["failure_category"])
        for c, v in zip(cands, verdicts, strict=True)
    ]
    out: dict = {"n": len(rows)}
    for policy, kept in (("kept", ("KEEP", "BORDERLINE")), ("discarded", ("KEEP",))):
        tp = sum(1 for f, _, v, _ in rows if f != "good" and v not in kept)
        fp = sum(1 for f, _, v, _ in rows if f == "good" and v not in kept)
        fn = sum(1 for f, _, v, _ in rows if f != "good" and v in kept)
        out[f"borderline_{policy}"] = {
            "precision": round(tp / max(1, tp + fp), 3),
            "recall": round(tp / max(1, tp + fn), 3),
        }
    per: dict = {}
    for f, b, v, _ in rows:
        key = f"{f}/{b}"
        for k in (f, key):
            d = per.setdefault(k, {"n": 0, "DISCARD": 0, "BORDERLINE": 0, "KEEP": 0})
            d["n"] += 1
            d[v] += 1
    out["per_fault"] = dict(sorted(per.items()))
    good = per.get("good", {"n": 0, "DISCARD": 0})
    out["good_falsely_discarded"] = round(good["DISCARD"] / max(1, good["n"]), 3)
    part = per.get("partial", {"n": 0, "DISCARD": 0, "BORDERLINE": 0})
    out["partial_recall"] = {
        "borderline_kept": round(part["DISCARD"] / max(1, part["n"]), 3),
        "borderline_discarded": round(
            (part["DISCARD"] + part["BORDERLINE"]) / max(1, part["n"]), 3
        ),
    }
    caught = [(f, c) for f, _, v, c in rows if f != "good" and v == "DISCARD"]
    right = sum(1 for f, c in caught if c == EXPECTED_CATEGORY[f])
    out["category_accuracy"] = round(right / max(1, len(caught)), 3)
    out["categories"] = {
        f: dict(Counter(c for g, c in caught if g == f)) for f in sorted({f for f, _ in caught})
    }
    return out


def run_independent(seed: int, n: int, size: int) -> tuple[list, list[dict]]:
    from forenset.tasks.candidates import external_instruction

    ed = load_editor()
    cands = ed.make_set(seed, n=n, size=size)
    return cands, [check(c.real, c.fake, external_instruction(c.listing)) for c in cands]


def independent(args: argparse.Namespace) -> None:
    global EXPECTED_CATEGORY
    EXPECTED_CATEGORY = load_editor().EXPECTED_CATEGORY
    t0 = time.perf_counter()
    cands, verdicts = run_independent(args.seed, args.n, args.size)
    r = evaluate(cands, verdicts)
    print(
        f"independent editor, set seed {args.seed}: {r['n']} candidates in {time.perf_counter() - t0:.1f}s"
    )
    k, d = r["borderline_kept"], r["borderline_discarded"]
    print(
        f"DISCARD P/R, BORDERLINE kept:      {k['precision']:.3f} / {k['recall']:.3f}  (goal >= 0.97 / >= 0.95)"
    )
    print(f"DISCARD P/R, BORDERLINE discarded: {d['precision']:.3f} / {d['recall']:.3f}")
    pr = r["partial_recall"]
    print(
        f"partial recall: {pr['borderline_kept']:.3f} (BORDERLINE kept, goal >= 0.9) / {pr['borderline_discarded']:.3f} (discarded)"
    )
    print(f"good edits falsely discarded: {r['good_falsely_discarded']:.3f} (goal <= 0.02)")
    print(f"category accuracy of caught faults: {r['category_accuracy']:.3f} (goal >= 0.9)")
    print(f"  {'fault/band':<22} {'n':>4} {'DISCARD':>8} {'BORDER':>7} {'KEEP':>5}")
    for key, v in r["per_fault"].items():
        print(f"  {key:<22} {v['n']:>4} {v['DISCARD']:>8} {v['BORDERLINE']:>7} {v['KEEP']:>5}")
    print("  failure categories of DISCARDs per fault:", r["categories"])
    if args.rows:
        with open(args.rows, "w") as fh:
            for c, v in zip(cands, verdicts, strict=True):
                rec = {"fault": c.fault, "band": c.band, "op": c.op, **c.detail, **v}
                fh.write(json.dumps(rec, default=str) + "\n")


def faulty(args: argparse.Namespace) -> None:
    rows = []
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as d:
            cfg = validate_config(
                {
                    "seed": seed,
                    "run_dir": d,
                    "shard_size": 5,
                    "sources": {"samples": "all", "max_side": args.max_side},
                    "instructions": {"min_edits": 3, "max_edits": 4},
                    "generators": [
                        {"name": "healthy", "family": "classical"},
                        {
                            "name": "faulty",
                            "family": "faulty",
                            "faults": {
                                "missing": 0.15,
                                "partial": 0.15,
                                "offtarget": 0.15,
                                "artifacts": 0.15,
                            },
                        },
                    ],
                }
            )
            store, _, _ = run_local(cfg)
            con = connect(store, ["verdicts"])
            rows += con.execute(
                "SELECT generator, truth, keep, verdict, failure_category, kind, rationale "
                "FROM verdicts WHERE status = 'ok'"
            ).fetchall()
    faulty = [
        (json.loads(t)["fault"], k, v, c, kind) for g, t, k, v, c, kind, _ in rows if g == "faulty"
    ]
    tp = sum(1 for f, k, *_ in faulty if f != "none" and not k)
    fp = sum(1 for f, k, *_ in faulty if f == "none" and not k)
    fn = sum(1 for f, k, *_ in faulty if f != "none" and k)
    precision = tp / max(1, tp + fp)
    recall = tp / max(1, tp + fn)
    print(
        f"candidates: {len(rows)} ({len(faulty)} from the faulty generator) in {time.perf_counter() - t0:.1f}s"
    )
    print(f"DISCARD precision {precision:.3f} (goal >= 0.9)   recall {recall:.3f} (goal >= 0.9)")
    per = Counter(f for f, *_ in faulty)
    caught = Counter(f for f, k, *_ in faulty if not k)
    for f in sorted(per):
        print(f"  fault={f:<10} n={per[f]:<4} discarded={caught[f] / per[f]:.2f}")
    cats = Counter((f, c) for f, k, v, c, _ in faulty if not k)
    print("  (fault, failure_category) of discards:", dict(sorted(cats.items())))
    healthy = [(k, v, c, kind, why) for g, t, k, v, c, kind, why in rows if g == "healthy"]
    hd = [(c, kind) for k, _, c, kind, _ in healthy if not k]
    hv = sum(1 for _, v, *_ in healthy if v == "DISCARD")
    print(
        f"healthy generator not kept {len(hd) / max(1, len(healthy)):.3f} ({len(hd)} of "
        f"{len(healthy)}; DISCARD verdicts {hv / max(1, len(healthy)):.3f}, the rest "
        f"BORDERLINE, dropped by verdicts.borderline_policy): {dict(Counter(hd))}"
    )
    for k, v, _, kind, why in healthy:
        if not k:
            print(f"  {kind:<12} {v:<10} {why}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--mode",
        choices=("independent", "faulty", "leave-one-editor-out", "tune"),
        default="independent",
    )
    ap.add_argument("--tune-seeds", default="1,3,4,5", help="tune: independent_edits sets")
    ap.add_argument(
        "--tune-editors", default="", help="tune: also these bench/editors sets (--seed)"
    )
    ap.add_argument("--seed", type=int, default=2, help="independent: the set's seed")
    ap.add_argument("--n", type=int, default=275, help="independent: candidates in the set")
    ap.add_argument("--size", type=int, default=192, help="independent: image long side")
    ap.add_argument("--seeds", type=int, default=4, help="faulty: pipeline builds")
    ap.add_argument("--max-side", type=int, default=256, help="faulty: photo long side")
    ap.add_argument(
        "--min-per-kind",
        type=int,
        default=40,
        help="leave-one-editor-out: pool each editor's sets of seeds --seed, --seed + 1, ... "
        "until every edit kind has this many good edits",
    )
    ap.add_argument("--max-sets", type=int, default=8, help="leave-one-editor-out: sets at most")
    ap.add_argument("--quick", action="store_true", help="leave-one-editor-out: one set per editor")
    ap.add_argument("--rows", help="independent: write one JSON line per candidate here")
    args = ap.parse_args()
    if args.mode == "faulty":
        faulty(args)
    elif args.mode in ("leave-one-editor-out", "tune"):
        from editcheck_loeo import leave_one_editor_out, tune

        (tune if args.mode == "tune" else leave_one_editor_out)(args)
    else:
        independent(args)


if __name__ == "__main__":
    main()
