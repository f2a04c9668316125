"""``forenset fakebench-export --official``: a run's FakeBench items written in the official
release's layout (``Evaluation/*.json`` + ``FakeBench_images/``), so the release's ``eval_*.py``
scripts run from the export folder as from the repository. The format's rules are in
:mod:`forenset.benchmarks.fakebench.official`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forenset.benchmarks.fakebench.bench_export import load_items
from forenset.benchmarks.fakebench.official import (
    FOLDERS,
    ID_MAP,
    IMAGES,
    QUERY_FILES,
    dumps,
    image_ids,
    official_records,
)
from forenset.exports.data import write_atomic


def export_official(store: Any, out: Path) -> dict[str, Any]:
    """Write ``out/Evaluation/{FakeClass,FakeClue,FakeQA}.json``, the images under
    ``out/FakeBench_images/{fake_images,real_images}/<image_id>`` and ``out/forenset_image_ids.json``,
    so the official scripts run from ``out`` as from the repository."""
    items = load_items(store)
    if not items:
        raise ValueError("the run has no fakebench_items: build it with fakebench.enabled")
    recs = official_records(items)
    for task, rows in recs.items():
        write_atomic(out / "Evaluation" / QUERY_FILES[task], dumps(task, rows))
    ids = image_ids(items)
    written: set[str] = set()
    labels = {i["sample_id"]: (i["label"], i["blob"]) for i in items}
    for sid, (label, blob) in sorted(labels.items()):
        dest = out / IMAGES / FOLDERS[label] / ids[sid]
        if sid not in written:
            write_atomic(dest, store.get_blob(blob))
            written.add(sid)
    write_atomic(
        out / ID_MAP,
        json.dumps({ids[s]: s for s in sorted(labels)}, indent=1, ensure_ascii=False),
    )
    counts = {QUERY_FILES[t]: len(r) for t, r in recs.items()}
    counts["images"] = len(written)
    return {"format": "fakebench-official", "path": str(out), "counts": counts}
