"""An XDD reference JSONL as a run's gold references: the challenge's hidden reference read the
other way, so that ``eval_scores`` (``scorers.references: gold``) scores a run's detectors
against the same texts the leaderboard's scorer uses.

Each record names a sample of the run: an id ``id/<sample>`` or ``ood/<sample>`` (forenset's
export) names that sample, any other id is taken as the sample id (as the ``kind: file``
detector reads a submission). A record with ``score_explanations`` true becomes two ok rows of
``gold_references``, its ``complex_reference`` (kind ``complex``) and ``simple_reference``
(kind ``simple``), for reals too; a record without it becomes one ok row with no text (its
label is checked, nothing is scored against it), as the scorer skips it. The annotator is
``xdd-reference``. A record the import cannot use is one error row with its problem class and
one sentence (:data:`PROBLEMS`), never a failed import: a line that is not a JSON object, a
field of the wrong type, an id naming no sample of the run, a label that disagrees with the
run's (detection is scored against the run's label, so a disagreement would score another
truth), an empty reference where the explanations are scored, a sample named twice."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from forenset.benchmarks.evaluation.gold import write_gold
from forenset.benchmarks.xdd.format import XddFormatError, sample_of
from forenset.errors import InputRefused
from forenset.paths import read_text_file
from forenset.store.run_store import RunStore, ShardInfo

ANNOTATOR = "xdd-reference"
TRACKS = ("complex", "simple")
LABEL_NAMES = {0: "real", 1: "fake"}

# problem class -> the sentence said once per class (singular, plural), with its count
PROBLEMS: dict[str, tuple[str, str]] = {
    "not_an_object": ("line is not a JSON object", "lines are not JSON objects"),
    "wrong_type": (
        "record has a field of the wrong type (id a non-empty string, label 0 or 1, the "
        "references strings, score_explanations true or false)",
        "records have a field of the wrong type (id a non-empty string, label 0 or 1, the "
        "references strings, score_explanations true or false)",
    ),
    "unknown_sample": (
        "record's id names no sample of this run",
        "records' ids name no sample of this run",
    ),
    "label_mismatch": (
        "record's label disagrees with the run's label of its sample",
        "records' labels disagree with the run's labels of their samples",
    ),
    "empty_reference": (
        "record scores its explanations but has an empty complex or simple reference",
        "records score their explanations but have an empty complex or simple reference",
    ),
    "duplicate": (
        "record names a sample an earlier record names (the first is kept)",
        "records name a sample an earlier record names (the first is kept)",
    ),
}


def problem_sentence(kind: str, n: int) -> str:
    one, many = PROBLEMS[kind]
    return f"{n} {one if n == 1 else many}."


def _typed(r: dict[str, Any]) -> bool:
    rid, label, se = r.get("id"), r.get("label"), r.get("score_explanations", False)
    return (
        isinstance(rid, str)
        and bool(rid.strip())
        and not isinstance(label, bool)
        and label in (0, 1)
        and isinstance(se, bool)
        and all(isinstance(r.get(f"{t}_reference", ""), str) for t in TRACKS)
    )


def xdd_gold_rows(text: str, labels: dict[str, str], file_hash: str) -> list[dict[str, Any]]:
    """The rows of ``gold_references`` for a reference JSONL's text, against the run's sample
    labels (sample id -> real | fake); module doc."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    base = {"annotator": ANNOTATOR, "source_file_hash": file_hash}

    def bad(row: dict[str, Any], kind: str) -> None:
        rows.append({**base, **row, "status": "error", "problem": kind,
                     "error": problem_sentence(kind, 1)})  # fmt: skip

    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except (ValueError, RecursionError):
            r = None
        if not isinstance(r, dict):
            bad({"gold_id": f"xdd:line-{n}"}, "not_an_object")
            continue
        if not _typed(r):
            rid = r.get("id")
            bad({"gold_id": f"xdd:line-{n}" if not isinstance(rid, str) else f"xdd:{rid}"},
                "wrong_type")  # fmt: skip
            continue
        rid, label = r["id"], LABEL_NAMES[r["label"]]
        sample = sample_of(rid)
        row = {"gold_id": f"xdd:{rid}", "sample_id": sample, "label": label}
        if sample in seen:
            bad(row, "duplicate")
            continue
        seen.add(sample)
        if sample not in labels:
            bad(row, "unknown_sample")
        elif labels[sample] != label:
            bad(row, "label_mismatch")
        elif not r.get("score_explanations"):
            rows.append({**base, **row, "status": "ok"})  # the label only: nothing scored
        elif not all((r.get(f"{t}_reference") or "").strip() for t in TRACKS):
            bad(row, "empty_reference")
        else:
            for t in TRACKS:
                rows.append({**base, **row, "gold_id": f"xdd:{rid}#{t}", "kind": t,
                             "text": r[f"{t}_reference"], "status": "ok"})  # fmt: skip
    return rows


def problems(rows: list[dict[str, Any]]) -> dict[str, str]:
    counts = Counter(r["problem"] for r in rows if r["status"] == "error")
    return {k: problem_sentence(k, counts[k]) for k in PROBLEMS if counts[k]}


def sample_labels(store: RunStore) -> dict[str, str]:
    """The run's samples (the ok rows of ``splits``) and their labels."""
    out: dict[str, str] = {}
    for info in store.manifest("splits"):
        t = store.read_shard(info, columns=["sample_id", "label", "status"]).to_pylist()
        out.update((r["sample_id"], r["label"]) for r in t if r["status"] == "ok")
    return out


def import_xdd_gold(
    store: RunStore, path: Path, *, append: bool = False
) -> tuple[ShardInfo, dict[str, str]]:
    """Read an XDD reference JSONL into ``gold_references`` (one shard, fingerprinted by the
    file's content); returns the shard and the counted problems. XddFormatError (one sentence)
    when the file cannot be read or holds no record: earlier gold is kept then."""
    try:
        text = read_text_file(path)
    except (OSError, InputRefused) as e:
        why = e.reason if isinstance(e, InputRefused) else (e.strerror or str(e))
        raise XddFormatError(f"cannot read the reference {path}: {why}") from None
    except UnicodeDecodeError:
        raise XddFormatError(f"the reference {path} is not UTF-8 text (JSONL)") from None
    if not text.strip():
        raise XddFormatError(f"{path} is empty; nothing was imported and earlier gold is kept")
    labels = sample_labels(store)
    if not labels:
        raise XddFormatError("the run has no samples yet (splits): run `forenset build` first")
    fh = hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()
    rows = xdd_gold_rows(text, labels, fh)
    return write_gold(store, rows, f"xdd-{fh}", fh, append=append), problems(rows)
