"""Edit-Check fidelity: retained vs discarded candidates, preserved outside the edit (issue 20, item 6).

XPlainVerse compares retained and discarded candidates on how well they preserve the image
outside the edited region, split by in-distribution (ID) and held-out (OOD) generators. This
builds the demo config (``forenset/data/demo.yaml``, offline backends) over several seeds
without Prefect and, for each holdout choice, prints PSNR/SSIM outside the instruction's target
box (``diffs.psnr_outside`` / ``ssim_outside``) for retained vs discarded, per ID/OOD: n, means,
and a bootstrap 95 % CI of the difference (retained minus discarded). The discards' judge
categories and injected faults show why a comparison goes the way it does.

Edit-Check does not read ``splits``: the holdout choice only decides which candidates count as
OOD. Each holdout choice is rebuilt in the same run dir (only ``splits`` and its descendants
rerun; the bench checks that no candidate, diff or verdict was recomputed), so all choices are
compared on the very same candidates. OOD = the candidate's generator family is in the
choice's ``holdout_families`` (the definition ``splits`` uses for its ``holdout`` column).

    python bench/fidelity.py [--seeds 5] [--holdouts poisson faulty poisson,faulty]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter, defaultdict
from importlib.resources import files

import numpy as np
import yaml

from forenset.config import validate_config
from forenset.flows.local import run_local
from forenset.store.views import connect

METRICS = ("psnr_outside", "ssim_outside")
UPSTREAM = ("candidates", "diffs", "judgments", "verdicts")
# judge categories of edits that went beyond the instruction (the failure preservation measures)
OVER_EDIT = ("off_target", "severe_artifacts")

ROWS_SQL = """
    SELECT v.candidate_id, v.image_id, v.generator, v.generator_family, v.keep, v.verdict,
           v.failure_category, d.truth, d.psnr, d.ssim, d.psnr_outside, d.ssim_outside
    FROM verdicts v JOIN diffs d USING (candidate_id)
    WHERE v.status = 'ok' AND d.status = 'ok' ORDER BY v.candidate_id"""  # stable bootstrap


def demo_config() -> dict:
    """The bundled demo config as a plain dict (what `forenset build` runs by default)."""
    return yaml.safe_load(files("forenset.data").joinpath("demo.yaml").read_text())


def bootstrap_diff(a: np.ndarray, b: np.ndarray, n_boot: int, rng: np.random.Generator) -> tuple:
    """Mean(a) - mean(b) and a percentile 95 % CI, resampling each group with replacement."""
    if len(a) == 0 or len(b) == 0:
        return float("nan"), float("nan"), float("nan")
    ma = a[rng.integers(0, len(a), (n_boot, len(a)))].mean(axis=1)
    mb = b[rng.integers(0, len(b), (n_boot, len(b)))].mean(axis=1)
    lo, hi = np.percentile(ma - mb, [2.5, 97.5])
    return float(a.mean() - b.mean()), float(lo), float(hi)


def fault_of(truth: str | None) -> str:
    """The injected fault from the offline editor's ground truth ('-' when none was recorded)."""
    if not truth:
        return "-"
    try:
        return str(json.loads(truth).get("fault", "-"))
    except (ValueError, AttributeError):
        return "-"


def build_seed(seed: int, holdouts: list[list[str]], workers: int) -> tuple[list[dict], dict]:
    """Build the demo for one seed under every holdout choice; candidate rows + OOD test counts."""
    rows: list[dict] = []
    ood_test: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as d:
        for i, fams in enumerate(holdouts):
            raw = demo_config()
            raw["seed"] = seed
            raw["run_dir"] = d
            raw["splits"]["holdout_families"] = fams
            store, stats, executed = run_local(validate_config(raw), workers=workers)
            failed = {k: s.failed for k, s in stats.items() if s.failed}
            if failed:
                raise SystemExit(f"seed {seed} holdout {fams}: failed shards {failed}")
            if i == 0:
                con = connect(store, ["verdicts", "diffs"])
                cur = con.execute(ROWS_SQL)
                cols = [c[0] for c in cur.description]
                rows = [dict(zip(cols, r, strict=True)) | {"seed": seed} for r in cur.fetchall()]
            else:
                redone = {s: executed[s] for s in UPSTREAM if executed[s]}
                if redone:
                    raise SystemExit(f"holdout change recomputed upstream shards: {redone}")
            con = connect(store, ["splits"])
            (n,) = con.execute(
                "SELECT count(*) FROM splits WHERE status = 'ok' AND holdout"
            ).fetchone()
            ood_test[",".join(fams)] = int(n)
    return rows, ood_test


def report(rows: list[dict], fams: list[str], n_boot: int, rng: np.random.Generator) -> None:
    """One holdout choice: retained vs discarded per ID/OOD, the CI of the difference, reasons."""
    groups: dict[tuple[str, bool], list[dict]] = defaultdict(list)
    for r in rows:
        setting = "OOD" if r["generator_family"] in fams else "ID"
        groups[(setting, bool(r["keep"]))].append(r)
    print(f"\n=== holdout_families: {fams} ===")
    print(
        f"{'setting':7} {'outcome':9} {'n':>4} {'PSNR':>7} {'PSNR out':>9} {'(n)':>4} "
        f"{'SSIM out':>9} {'(n)':>4}"
    )
    for setting in ("ID", "OOD"):
        for keep in (True, False):
            g = groups[(setting, keep)]
            psnr = [r["psnr"] for r in g if r["psnr"] is not None]
            line = f"{setting:7} {'retained' if keep else 'discarded':9} {len(g):>4} "
            line += f"{np.mean(psnr) if psnr else float('nan'):>7.2f} "
            for m in METRICS:
                v = [r[m] for r in g if r[m] is not None]
                line += f"{np.mean(v) if v else float('nan'):>9.3f} {len(v):>4} "
            print(line.rstrip())
    for setting in ("ID", "OOD"):
        for m in METRICS:
            for label, which in (("", None), ("[off-target/artefact discards only]", OVER_EDIT)):
                a = np.array([r[m] for r in groups[(setting, True)] if r[m] is not None], float)
                b = np.array(
                    [
                        r[m]
                        for r in groups[(setting, False)]
                        if r[m] is not None and (which is None or r["failure_category"] in which)
                    ],
                    float,
                )
                diff, lo, hi = bootstrap_diff(a, b, n_boot, rng)
                ahead = (
                    "no values"
                    if np.isnan(diff)
                    else "retained ahead"
                    if lo > 0
                    else "discarded ahead"
                    if hi < 0
                    else "CI spans 0"
                )
                print(
                    f"  {setting:3} {m:13} retained - discarded = {diff:+8.3f}  "
                    f"95% CI [{lo:+.3f}, {hi:+.3f}]  ({ahead}; n {len(a)}/{len(b)}) {label}".rstrip()
                )
        seeds = sorted({r["seed"] for r in rows})
        per_seed = []
        for s in seeds:
            a, b = (
                [
                    r["psnr_outside"]
                    for r in groups[(setting, k)]
                    if r["seed"] == s and r["psnr_outside"] is not None
                ]
                for k in (True, False)
            )
            per_seed.append(f"{np.mean(a) - np.mean(b):+.1f}" if a and b else "n/a")
        print(f"  {setting:3} PSNR-outside difference per seed: {' '.join(per_seed)}")
    for setting in ("ID", "OOD"):
        disc = groups[(setting, False)]
        cats: dict[tuple[str, str, str], list[float | None]] = defaultdict(list)
        for r in disc:
            cats[(r["generator_family"], fault_of(r["truth"]), r["failure_category"])].append(
                r["psnr_outside"]
            )
        print(f"  {setting} discards by (family, injected fault, judge category): n, mean PSNR out")
        for key, vals in sorted(cats.items(), key=lambda kv: -len(kv[1])):
            v = [x for x in vals if x is not None]
            nulls = len(vals) - len(v)
            mean = f"{np.mean(v):6.1f}" if v else "   n/a"
            extra = f" ({nulls} null: box covers the image)" if nulls else ""
            print(f"    {'/'.join(key):45} {len(vals):>3}  {mean}{extra}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=7)  # the demo's own seed first
    ap.add_argument(
        "--holdouts",
        nargs="+",
        default=["poisson", "faulty", "poisson,faulty"],
        help="holdout_families choices, comma-separated families each",
    )
    ap.add_argument("--boot", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    holdouts = [h.split(",") for h in args.holdouts]
    rows: list[dict] = []
    ood_test: Counter[str] = Counter()
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        t = time.perf_counter()
        r, o = build_seed(seed, holdouts, args.workers)
        rows += r
        ood_test.update(o)
        print(f"seed {seed}: {len(r)} candidates judged ({time.perf_counter() - t:.1f}s)")
    kept = sum(1 for r in rows if r["keep"])
    print(
        f"{len(rows)} candidates over {args.seeds} seeds, {kept} retained "
        f"(discard rate {1 - kept / len(rows):.1%}); {time.perf_counter() - t0:.0f}s in all"
    )
    print("held-out fake samples in test per choice:", dict(ood_test))
    rng = np.random.default_rng(0)
    for fams in holdouts:
        report(rows, fams, args.boot, rng)


if __name__ == "__main__":
    main()
