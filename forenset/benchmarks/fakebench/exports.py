"""FakeBench-style export: closed-ended QA and clue descriptions over FakeBench's 14 dimensions.

QA (``qa.jsonl``, FakeClass §3.3): one closed question per image, in the paper's forms, balanced
per split and label: "Is this a fake image?" / "Is this a real image?" (yes / no) and "What is
the authenticity of this image?" (real / fake); scored by the exact-match rule of §3.2
(:func:`forenset.benchmarks.fakebench.text.exact_match`).
Clues (``clues.jsonl``): each difference of a fake mapped onto the dimensions in
``CHANGE_TYPE_DIMENSIONS`` / ``KIND_DIMENSIONS`` of :mod:`forenset.benchmarks.fakebench.text` (both the
offline differencer's and the VLM diff backend's change types map; docs/exports.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from forenset.benchmarks.fakebench.text import (  # noqa: F401 - re-exported: the vocabulary lives there
    CHANGE_TYPE_DIMENSIONS,
    DIMENSIONS,
    KIND_DIMENSIONS,
    dimensions_for,
    fakeclass_forms,
    fakeclass_question,
)
from forenset.exports.data import rank, write_images, write_jsonl
from forenset.store.run_store import RunStore


def clue_record(s: dict[str, Any], image: str) -> dict[str, Any]:
    clues = []
    if s["label"] == "fake":
        for d in s["differences_list"]:
            clues.append(
                {
                    "difference_id": d.get("id"),
                    "dimensions": dimensions_for(d.get("change_type"), s.get("kind")),
                    "change_type": d.get("change_type"),
                    "description": d.get("description"),
                    "region": d.get("region"),
                    "bbox": d.get("bbox"),
                    "salience": d.get("salience"),
                }
            )
    dims = sorted({x for c in clues for x in c["dimensions"]}, key=DIMENSIONS.index)
    text = (
        s.get("explanation_complex") if s["label"] == "fake" else s.get("explanation_authenticity")
    )
    return {
        "id": s["sample_id"],
        "image": image,
        "split": s["split"],
        "label": s["label"],
        "edit_kind": s.get("kind"),
        "dimensions": dims,
        "clues": clues,
        "description": text,
    }


def qa_records(samples: list[dict[str, Any]], refs: dict[str, str], seed: int) -> list[dict]:
    """FakeClass (§3.3): one closed question per image. Per (split, label), samples are put in
    a seeded order and the forms alternate along it as in :func:`fakeclass_forms` (yes/no and
    what balanced ±1; yes/no asking "fake?" and "real?" in turn), so the form says nothing
    about the label."""
    out = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in samples:
        groups.setdefault((s["split"], s["label"]), []).append(s)
    for (split, _), group in sorted(groups.items()):
        order = sorted(group, key=lambda s: rank(seed, "fakebench-form", split, s["sample_id"]))
        for s, (form, polarity) in zip(order, fakeclass_forms(len(order)), strict=True):
            question, answer = fakeclass_question(form, polarity, s["label"])
            out.append(
                {
                    "id": f"{s['sample_id']}-{form}",
                    "sample_id": s["sample_id"],
                    "form": form,
                    "question": question,
                    "answer": answer,
                    "image": refs[s["blob"]],
                    "split": s["split"],
                    "label": s["label"],
                }
            )
    return sorted(out, key=lambda r: (r["split"], r["id"]))


def export_fakebench(
    store: RunStore, samples: list[dict[str, Any]], out: Path, *, seed: int
) -> dict[str, Any]:
    """Write ``out/qa.jsonl``, ``out/clues.jsonl`` and ``out/images/``; returns counts."""
    refs = write_images(store, [s["blob"] for s in samples], out)
    qa = qa_records(samples, refs, seed)
    clues = [clue_record(s, refs[s["blob"]]) for s in samples]
    write_jsonl(out / "qa.jsonl", qa)
    write_jsonl(out / "clues.jsonl", clues)
    answers = Counter(r["answer"] for r in qa)
    dims = Counter(d for c in clues for d in c["dimensions"])
    return {
        "format": "fakebench",
        "path": str(out),
        "counts": {"qa": len(qa), "clues": len(clues)},
        "answers": dict(answers),
        "forms": dict(Counter(r["form"] for r in qa)),
        "dimensions": dict(dims),
    }
