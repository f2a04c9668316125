"""Values of a long-format score table against the wide table it replaced (issue 30 D3).

``table_hashes.py --compare`` proves every other stage table identical; a score table that moved
to long format (one row per group and metric) cannot hash the same, so this compares its values:
the old run's wide rows are unpivoted by the table's spec below (each metric column, the headline
``value``, JSON ``extra`` keys, ``<metric>_model`` / ``<metric>_reason``) and every (group,
metric) must hold the same value (and n, model, reason where the old table had them) as the new
long rows. Floats compare exactly (repr).

    python bench/pivot_check.py BEFORE_RUN AFTER_RUN TABLE [TABLE ...]
    python bench/pivot_check.py BEFORE/scores.json AFTER/scores.json safeimg

Exits 1 on a difference and prints the first ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

# table -> how its old wide rows unpivot: group key columns, the metric columns, the metric the
# old ``value`` column repeated (per ``table`` for reward), where the old ``n`` went, JSON keys.
SPECS: dict[str, dict[str, Any]] = {
    "reward_scores": {
        "key": ("table", "subject", "group", "labels_from", "labels_source"),
        "metrics": ("acc4", "acc2", "elo", "elo_std", "bt", "games", "wins", "losses", "ties",
                    "both_bad", "win_rate", "rank"),
        "headline": {"policy_accuracy": "accuracy", "elo": "elo", "judge_accuracy": "acc4",
                     "position_bias": "position_bias", "agreement": "agreement"},
        # old n -> the n of this metric (position_bias: n counted every choice, so the shares)
        "n_of": {"policy_accuracy": "accuracy", "elo": "elo", "judge_accuracy": "acc4",
                 "position_bias": "share_First", "agreement": "agreement"},
        "n2_of": "acc2",
        "extra": "extra",
    },
    "fakebench_scores": {
        "key": ("answerer", "task", "group_kind", "group"),
        "metrics": ("accuracy", "bleu1", "bleu2", "rouge_l", "similarity", "completeness",
                    "preciseness", "relevance", "auto_average", "judged_average", "average"),
        "models": ("similarity", "completeness", "preciseness", "relevance"),
        # the old n (answers of the group) is every metric row's details.n_items (its own n
        # counts the units behind the value: items with a value, FakeQA all: images)
        "n_of": "details.n_items",
        # old column -> (metric, details key) in the long row's JSON details
        "details": {"average_of": ("average", "of"), "n_images": ("bleu1", "n_images")},
    },
}  # fmt: skip


def _rows(run: str, table: str) -> list[dict[str, Any]]:
    from forenset.store.run_store import RunStore
    from forenset.store.views import connect

    store = RunStore(run)
    con = connect(store, [table])
    return con.sql(f"SELECT * FROM {table} WHERE status = 'ok'").to_arrow_table().to_pylist()


def unpivot(rows: list[dict[str, Any]], spec: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    """Old wide rows -> {(group key..., metric): {value, n, model?, reason?}}."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = tuple(r[c] for c in spec["key"])

        def put(metric: str, key: tuple = key, **fields: Any) -> None:
            out.setdefault((*key, metric), {}).update(fields)

        for m in spec["metrics"]:
            if r.get(m) is not None:
                put(m, value=float(r[m]))
            elif f"{m}_reason" in r and r.get(f"{m}_reason"):
                put(m, value=None, reason=r[f"{m}_reason"])
        for m in spec.get("models", ()):
            if r.get(f"{m}_model") and (*key, m) in out:
                put(m, model=r[f"{m}_model"])
        head = spec.get("headline", {}).get(r.get("table"))
        if head and r.get("value") is not None:
            put(head, value=float(r["value"]))
        if isinstance(spec.get("n_of"), str):
            for m in spec["metrics"]:
                if (*key, m) in out:
                    put(m, **{spec["n_of"]: r["n"]})
        else:
            target = spec["n_of"].get(r.get("table"))
            if target and r.get("n") is not None:
                put(target, n=r["n"])
        if spec.get("n2_of") and r.get("n2") is not None:
            put(spec["n2_of"], n=r["n2"])
        for col, (metric, dkey) in spec.get("details", {}).items():
            if (*key, metric) in out and r.get(col) is not None:
                put(metric, **{f"details.{dkey}": r[col]})
        if spec.get("extra") and r.get(spec["extra"]):
            for k, v in json.loads(r[spec["extra"]]).items():
                if v is not None:
                    put(k, value=float(v))
    return out


def compare(before: str, after: str, table: str) -> list[str]:
    spec = SPECS[table]
    old = unpivot(_rows(before, table), spec)
    new = {(*(r[c] for c in spec["key"]), r["metric"]): r for r in _rows(after, table)}
    bad = []
    for k, want in sorted(old.items(), key=str):
        got = new.get(k)
        if got is None:
            if want.get("value") is not None:
                bad.append(f"{table} {k}: missing after (before {want})")
            continue
        for f, v in want.items():
            if f.startswith("details."):
                g = json.loads(got.get("details") or "{}").get(f.split(".", 1)[1])
            else:
                g = got.get(f)
            same = repr(float(g)) == repr(v) if isinstance(v, float) and g is not None else g == v
            if not same:
                bad.append(f"{table} {k} {f}: before {v!r}, after {g!r}")
    for k, got in new.items():
        if got["value"] is not None and k not in old:
            bad.append(f"{table} {k}: a value after ({got['value']!r}) that was not before")
    return bad


def compare_safeimg(before: str, after: str) -> tuple[int, list[str]]:
    """SafeIMG has no stage table: its numbers are ``scores.json`` (``forenset safeimg``). Every
    number before (a cell's value and n; Δ(l) a bare float) must be the value after."""
    a, b = json.loads(open(before).read()), json.loads(open(after).read())
    bad: list[str] = []
    count = 0

    def walk(x: Any, y: Any, path: str) -> None:
        nonlocal count
        if isinstance(x, dict) and "value" in x:
            count += 1
            if (
                not isinstance(y, dict)
                or repr(x["value"]) != repr(y.get("value"))
                or x.get("n") != y.get("n")
            ):
                bad.append(f"{path}: before {x}, after {y}")
        elif isinstance(x, dict):
            for k, v in x.items():
                if k != "path":
                    walk(v, y.get(k) if isinstance(y, dict) else None, f"{path}/{k}")
        elif isinstance(y, dict) and "value" in y:
            count += 1
            if repr(x) != repr(y["value"]):
                bad.append(f"{path}: before {x!r}, after {y['value']!r}")
        elif x != y:
            bad.append(f"{path}: before {x!r}, after {y!r}")

    walk(a, b, "")
    return count, bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("tables", nargs="+", choices=[*sorted(SPECS), "safeimg"])
    args = ap.parse_args(argv)
    if args.tables == ["safeimg"]:  # BEFORE and AFTER are two scores.json files
        count, bad = compare_safeimg(args.before, args.after)
        for b in bad[:40]:
            print("DIFFERS", b)
        print(f"{count} numbers compared:", "identical" if not bad else f"{len(bad)} differ")
        return 1 if bad else 0
    bad = [b for t in args.tables for b in compare(args.before, args.after, t)]
    for b in bad[:40]:
        print("DIFFERS", b)
    n = {t: len(_rows(args.after, t)) for t in args.tables}
    print("identical after pivoting" if not bad else f"{len(bad)} difference(s)", n)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
