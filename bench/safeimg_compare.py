"""SafeIMG's numbers before and after a change: ``scores.json`` of two ``forenset safeimg`` runs.

SafeIMG has no stage table (``bench/table_hashes.py --pivot`` checks the long-format score
tables); its numbers live in ``<run>/benchmarks/safeimg/scores.json``. Issue 31 turned each
number into a cell with n, an interval and a caveat; every number before (a cell's ``value``
and ``n``, Δ(l) a bare float) must be the same after. Exits 1 on a difference.

    python bench/safeimg_compare.py BEFORE/scores.json AFTER/scores.json
"""

from __future__ import annotations

import json
import sys
from typing import Any


def compare(before: str, after: str) -> tuple[int, list[str]]:
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
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__)
        return 2
    count, bad = compare(*args)
    for b in bad[:40]:
        print("DIFFERS", b)
    print(f"{count} numbers compared:", "identical" if not bad else f"{len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
