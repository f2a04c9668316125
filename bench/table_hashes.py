"""Content hash per stage table of a run: the before/after check of a refactor.

A refactor that moves code (issue 30) must leave every stage table identical. This prints one
line per table: its row count, a hash of its column names and types, and a hash of its rows
(rows sorted, timing columns dropped: they differ between identical runs). ``--save`` writes
them as JSON; ``--compare`` reads such a file and exits 1 when a table differs.

    python bench/table_hashes.py RUN_DIR [--save before.json] [--compare before.json]

Long-format score tables are compared by their pivoted values with ``--pivot TABLE``, which
turns one row per (group, metric) back into the wide rows the old table held (see
``pivot_rows``).
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


def pivot_rows(rows: list[dict[str, Any]], key: list[str]) -> list[dict[str, Any]]:
    """Long-format score rows (``metric``, ``value`` plus group columns) back to one wide row
    per group: the check that a long-format table holds the same values as the wide one."""
    wide: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        k = tuple(r.get(c) for c in key)
        w = wide.setdefault(k, {c: r.get(c) for c in key})
        w[r["metric"]] = r["value"]
    return list(wide.values())


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
    args = ap.parse_args(argv)
    now = hashes(args.run_dir)
    for name, d in now.items():
        print(f"{name:20s} rows={d['rows']:6d} schema={d['schema']} content={d['content']}")
    if args.save:
        Path(args.save).write_text(json.dumps(now, indent=1, sort_keys=True))
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        bad = [n for n in sorted(set(before) | set(now)) if before.get(n) != now.get(n)]
        for n in bad:
            print(f"DIFFERS {n}: before={before.get(n)} now={now.get(n)}")
        print("identical" if not bad else f"{len(bad)} table(s) differ")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
