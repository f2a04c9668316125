"""Edit-Check measured against ground truth.

Builds the sample photos through the offline pipeline with a faulty generator (known failures
injected at configured rates) beside a healthy one, then compares the verdicts with the truth:
a candidate should be discarded exactly when a fault was injected. Prints DISCARD precision
and recall on the faulty generator (goal >= 0.9 each), recall per fault, and the healthy
generator's discard rate (not truth-labelled: classical edits can genuinely fail).

    python bench/editcheck_accuracy.py [--seeds 4] [--max-side 256]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter

from forenset.config import validate_config
from forenset.flows.local import run_local
from forenset.store.views import connect


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--max-side", type=int, default=256)
    args = ap.parse_args()
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
                "SELECT generator, truth, keep, verdict, failure_category, kind FROM verdicts "
                "WHERE status = 'ok'"
            ).fetchall()
    faulty = [
        (json.loads(t)["fault"], k, v, c, kind) for g, t, k, v, c, kind in rows if g == "faulty"
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
    healthy = [(k, c, kind) for g, t, k, v, c, kind in rows if g == "healthy"]
    hd = [(c, kind) for k, c, kind in healthy if not k]
    print(
        f"healthy generator discard rate {len(hd) / max(1, len(healthy)):.3f}: {dict(Counter(hd))}"
    )


if __name__ == "__main__":
    main()
