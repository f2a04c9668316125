"""FakeBench-style export: closed-ended QA and clue descriptions over FakeBench's 14 dimensions.

QA (``qa.jsonl``) has two forms per image:
  * ``yes_no``: "Is this image AI-edited?" (yes for fakes) or its negation "Is this image an
    unedited photograph?" (yes for reals). The polarity is chosen so that, over the export,
    yes and no answers alternate in a seeded order: the answers are balanced (±1) and the
    polarity carries no information about the label.
  * ``choice``: "What is the authenticity of this image? real/fake" -> real | fake.
Clues (``clues.jsonl``): each difference of a fake mapped onto the dimensions in
``CHANGE_TYPE_DIMENSIONS`` / ``KIND_DIMENSIONS`` of :mod:`forenset.text.fakebench` (both the
offline differencer's and the VLM diff backend's change types map; docs/exports.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from forenset.exports.data import rank, write_images, write_jsonl
from forenset.store.run_store import RunStore
from forenset.text.fakebench import (  # noqa: F401 - re-exported: the vocabulary lives there
    CHANGE_TYPE_DIMENSIONS,
    DIMENSIONS,
    KIND_DIMENSIONS,
    dimensions_for,
)

Q_EDITED = "Is this image AI-edited?"
Q_UNEDITED = "Is this image an unedited photograph?"
Q_CHOICE = "What is the authenticity of this image? Answer real or fake."


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
    order = sorted(
        samples, key=lambda s: rank(seed, "fakebench-yes-no", s["split"], s["sample_id"])
    )
    out = []
    for i, s in enumerate(order):
        want_yes = i % 2 == 0
        fake = s["label"] == "fake"
        # yes for a fake means asking "edited?"; yes for a real means asking "unedited?"
        question = (
            (Q_EDITED if fake else Q_UNEDITED) if want_yes else (Q_UNEDITED if fake else Q_EDITED)
        )
        base = {"image": refs[s["blob"]], "split": s["split"], "label": s["label"]}
        out.append(
            {
                "id": f"{s['sample_id']}-yn",
                "sample_id": s["sample_id"],
                "form": "yes_no",
                "question": question,
                "answer": "yes" if want_yes else "no",
                **base,
            }
        )
        out.append(
            {
                "id": f"{s['sample_id']}-choice",
                "sample_id": s["sample_id"],
                "form": "choice",
                "question": Q_CHOICE,
                "options": ["real", "fake"],
                "answer": s["label"],
                **base,
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
    answers = Counter(r["answer"] for r in qa if r["form"] == "yes_no")
    dims = Counter(d for c in clues for d in c["dimensions"])
    return {
        "format": "fakebench",
        "path": str(out),
        "counts": {"qa": len(qa), "clues": len(clues)},
        "yes_no": dict(answers),
        "dimensions": dict(dims),
    }
