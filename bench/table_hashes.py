"""Content hash per stage table of a run: the before/after check of a refactor.

A refactor that moves code (issue 30) must leave every stage table identical. This prints one
line per table: its row count, a hash of its column names and types, and a hash of its rows
(rows sorted, timing columns dropped: they differ between identical runs). ``--save`` writes
them as JSON; ``--compare`` reads such a file and exits 1 when a table differs.

    python bench/table_hashes.py RUN_DIR [--save before.json] [--compare before.json]
        [--pivot TABLE [--before-run OLD_RUN_DIR]]

A table converted to long format (one row per group and metric) cannot hash like its old wide
form. ``--pivot TABLE`` compares it cell by cell instead: the new long rows are pivoted back
to one wide row per group (``forenset.benchmarks.common.scoring.pivot.wide_rows``) and every
column of the old wide table (read from ``--before-run``, by default the ``run-<name>`` folder
beside ``before/<name>.json``) must hold the same value, except the trace columns, the key and
timing columns; a metric that now has no row (outside its scope) must have been null. New
columns (intervals, caveats) are not compared. Exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

# Columns whose values differ between identical runs (wall-clock times and durations).
TIMING = ("elapsed", "latency", "duration", "timestamp", "created_at", "_seconds", "_ms")


def is_timing(column: str) -> bool:
    c = column.lower()
    return any(t in c for t in TIMING)


def _canon(v: Any) -> Any:
    """A JSON-stable form of one value (floats by repr, so 0.1 + 0.2 != 0.3 shows). A string
    holding a JSON object (``params``) loses its timing keys too (``batch_latency_s``)."""
    if isinstance(v, str) and v.startswith("{"):
        try:
            obj = json.loads(v)
        except ValueError:
            return v
        return _canon(obj) if isinstance(obj, dict) else v
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, dict):
        return {
            str(k): _canon(x)
            for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))
            if not is_timing(str(k))
        }
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    if isinstance(v, bytes):
        return hashlib.sha256(v).hexdigest()
    if isinstance(v, (dt.date, dt.datetime, dt.time, decimal.Decimal)):
        return str(v)
    return v


def table_rows(con: Any, name: str) -> tuple[list[str], list[dict[str, Any]]]:
    tbl = con.sql(f"SELECT * FROM {name}").to_arrow_table()
    keep = [c for c in tbl.column_names if not is_timing(c)]
    schema = [f"{f.name}:{f.type}" for f in tbl.schema if f.name in keep]
    return sorted(schema), [{c: row[c] for c in keep} for row in tbl.to_pylist()]


def digest(schema: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    lines = sorted(json.dumps(_canon(r), sort_keys=True, default=str) for r in rows)
    h = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    s = hashlib.sha256("\n".join(schema).encode()).hexdigest()[:12]
    return {"rows": len(rows), "schema": s, "content": h}


# old wide columns that are now derived from other wide columns of the pivot
def _count(metric: str) -> Any:
    """A count the long table holds as a float value (reward's games, wins, ...)."""
    return lambda w: None if w.get(metric) is None else int(w[metric])


# reward_scores: the old ``value`` repeated each table's headline metric, ``n`` was its n
# (position_bias: every choice, now the shares' n), ``extra`` held the shares and swap consistency
_HEADLINE = {"policy_accuracy": "accuracy", "elo": "elo", "judge_accuracy": "acc4",
             "position_bias": "position_bias", "agreement": "agreement"}  # fmt: skip
_N_OF = {**_HEADLINE, "position_bias": "share_First"}
_EXTRA = ("share_First", "share_Second", "share_Tie", "share_BothBad", "swap_consistency")

ALIASES: dict[str, dict[str, Any]] = {
    "eval_scores": {
        "detection_model": lambda w: w.get("f1_model"),
        "n_explained": lambda w: w["n"] - w["n_no_reference"],
    },
    "reward_scores": {
        "value": lambda w: w.get(_HEADLINE[w["table"]]),
        "n": lambda w: w.get(f"{_N_OF[w['table']]}_n"),
        "n2": lambda w: w.get("acc2_n"),
        "extra": lambda w: (
            {k: w[k] for k in _EXTRA if w.get(k) is not None}
            if w["table"] == "position_bias"
            else None
        ),
        **{c: _count(c) for c in ("games", "wins", "losses", "ties", "both_bad", "rank")},
    },
    "fakebench_scores": {
        "n": lambda w: w.get("n_items"),  # the group's answers; a metric's n counts its units
        "average_of": lambda w: w.get("of"),
        "overlap_model": lambda w: w.get("bleu1_model"),
    },
}
NOT_COMPARED = {"score_id", "status", "error", "retryable", "backend", "model", "prompt_id",
                "prompt_hash", "seed", "stage_version"}  # fmt: skip


def pivot_compare(con_new: Any, con_old: Any, name: str) -> tuple[int, list[str], list[str]]:
    """Cells compared, differences (one line each) and old columns left out, for long table
    ``name`` of the new run against its wide form in the old run (module doc)."""
    from forenset.benchmarks.common.scoring.pivot import wide_rows
    from forenset.schemas.common import TRACE_NAMES
    from forenset.schemas.scores import SCORE_NAMES

    _, new = table_rows(con_new, name)
    _, old = table_rows(con_old, name)
    skip = {*SCORE_NAMES, *TRACE_NAMES, "score_id"}
    group = [c for c in (new[0] if new else {}) if c not in skip]
    wide = {tuple(w[g] for g in group): w for w in wide_rows(new, group).values()}
    aliases = ALIASES.get(name, {})
    cells, diffs, left_out = 0, [], set()
    seen = set()
    for o in old:
        key = tuple(o.get(g) for g in group)
        seen.add(key)
        w = wide.get(key)
        if w is None:
            diffs.append(f"group {key} is missing from the new table")
            continue
        for col, v in o.items():
            if col in NOT_COMPARED or col in group or is_timing(col):
                continue
            if col in aliases:
                got = aliases[col](w)
            elif col in w:
                got = w[col]
            else:
                metric = next((m for m in _metrics(o) if col == m or col.startswith(m + "_")), None)
                if metric is None:
                    left_out.add(col)
                    continue
                if col != metric:  # the model / reason of a metric outside its scope
                    left_out.add(f"{col} (no row: outside the metric's scope)")
                    continue
                got = None  # no row: the old value must have been null
            cells += 1
            if json.dumps(_canon(got), default=str) != json.dumps(_canon(v), default=str):
                diffs.append(f"{key} {col}: before={v!r} now={got!r}")
    for key in set(wide) - seen:
        diffs.append(f"group {key} is new")
    return cells, diffs, sorted(left_out)


def _metrics(old_row: dict[str, Any]) -> list[str]:
    """The metric names of a wide row: the columns that have a ``_reason`` column."""
    return sorted((c[: -len("_reason")] for c in old_row if c.endswith("_reason")), key=len,
                  reverse=True)  # fmt: skip


def hashes(run_dir: str) -> dict[str, dict[str, Any]]:
    from forenset.store.run_store import RunStore
    from forenset.store.views import connect, table_names

    store = RunStore(run_dir)
    names = [n for n in table_names(store) if store.manifest(n)]
    con = connect(store, names)
    out = {}
    for name in names:
        schema, rows = table_rows(con, name)
        out[name] = digest(schema, rows)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--save", help="write the hashes to this JSON file")
    ap.add_argument("--compare", help="compare with hashes saved earlier; exit 1 on a difference")
    ap.add_argument("--pivot", action="append", default=[], help="long-format table to compare "
                    "cell by cell with its old wide form (repeatable)")  # fmt: skip
    ap.add_argument("--before-run", help="the old run (default: run-<name> beside --compare)")
    args = ap.parse_args(argv)
    now = hashes(args.run_dir)
    for name, d in now.items():
        print(f"{name:20s} rows={d['rows']:6d} schema={d['schema']} content={d['content']}")
    if args.save:
        Path(args.save).write_text(json.dumps(now, indent=1, sort_keys=True))
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        names = sorted(set(before) | set(now))
        bad = [n for n in names if n not in args.pivot and before.get(n) != now.get(n)]
        for n in bad:
            print(f"DIFFERS {n}: before={before.get(n)} now={now.get(n)}")
        if args.pivot:
            from forenset.store.run_store import RunStore
            from forenset.store.views import connect

            old_dir = args.before_run or str(
                Path(args.compare).with_name(f"run-{Path(args.compare).stem}")
            )
            if not Path(old_dir).is_dir():
                print(f"--pivot needs the old run: {old_dir} does not exist (give --before-run)")
                return 2
            new_con = connect(RunStore(args.run_dir), args.pivot)
            old_con = connect(RunStore(old_dir), args.pivot)
            for n in args.pivot:
                cells, diffs, left_out = pivot_compare(new_con, old_con, n)
                for line in diffs[:20]:
                    print(f"DIFFERS {n}: {line}")
                print(f"{n}: pivoted, {cells} cells compared with {old_dir}, {len(diffs)} differ"
                      + (f"; not compared: {', '.join(left_out)}" if left_out else ""))  # fmt: skip
                if diffs or not cells:
                    bad.append(n)
        print("identical" if not bad else f"{len(bad)} table(s) differ")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
