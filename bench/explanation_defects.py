"""Explanation defects and diversity of a built run (issue 38 §3): the before/after figures.

Per explanation kind: how many texts repeat a word 4-gram inside themselves (lower-cased,
punctuation stripped: ``forenset.text.checks.repeated_ngrams``, the validator's rule), and how
many state one place twice in a sentence ("The grey region at the upper left in the upper
left"); then the report's diversity table per split and kind (distinct texts, duplicate share,
Distinct-2). Reads the ``explanations`` table's ok rows only; prints, writes nothing.

    python bench/explanation_defects.py RUN_DIR
"""

from __future__ import annotations

import re
import sys
from collections import Counter

from forenset.backends.offline_explain import positions
from forenset.report.text_metrics import DIVERSITY_HEADERS, diversity
from forenset.store.run_store import RunStore
from forenset.text.checks import repeated_ngrams


def doubled_place(text: str) -> bool:
    """A sentence naming one position twice."""
    for s in re.split(r"(?<=[.!?])\s+", text):
        found = positions(s)
        if len(found) != len(set(found)):
            return True
    return False


def main(run_dir: str) -> None:
    store = RunStore(run_dir)
    rows = []
    for info in store.manifest("explanations"):
        t = store.read_shard(info, columns=["split", "kind", "text", "status"])
        rows.extend(r for r in t.to_pylist() if r["status"] == "ok")
    n, rep, dbl = Counter(), Counter(), Counter()
    for r in rows:
        n[r["kind"]] += 1
        rep[r["kind"]] += bool(repeated_ngrams(r["text"]))
        dbl[r["kind"]] += doubled_place(r["text"])
    print(f"{'kind':<14}{'n':>5}{'repeated 4-gram':>17}{'place twice':>13}")
    for k in sorted(n):
        print(f"{k:<14}{n[k]:>5}{rep[k]:>17}{dbl[k]:>13}")
    print(f"{'all':<14}{sum(n.values()):>5}{sum(rep.values()):>17}{sum(dbl.values()):>13}\n")
    print(" | ".join(DIVERSITY_HEADERS))
    for row in diversity([(r["split"], r["kind"], r["text"]) for r in rows]):
        print(" | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))


if __name__ == "__main__":
    main(sys.argv[1])
