"""A run's evaluation set as the XDD challenge's files: the reference JSONL (the dataset's own
reference explanations as the hidden reference) and, per detector, the submission zip.

Ids are the eval items' ids (``<eval_set>/<sample_id>``), clean items only (propagated and
perturbed copies are robustness groups, not the challenge's set). A fake's references are its
``complex`` and ``simple`` explanations; a real's is its ``authenticity`` explanation for both,
as ``eval_scores`` scores them (:func:`reference_kind`); ``score_explanations`` is true where
both references exist. ``pred_label`` comes from the detector's complex-track answer (the
simple track's when the complex one is missing); an unparseable answer has no strict 0 / 1 and
is left out, which the scorer counts through its coverage factor, as it counts any missing
row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forenset.benchmarks.evaluation.stages.eval_scores import reference_kind
from forenset.benchmarks.xdd.format import LABELS, dumps_jsonl, submission_zip
from forenset.exports.data import write_atomic

TRACK_ORDER = ("complex", "simple")


def stage_rows(store: Any, stage: str) -> list[dict[str, Any]]:
    """The ok rows of a stage table (every shard of its manifest)."""
    out: list[dict[str, Any]] = []
    for info in store.manifest(stage):
        out.extend(r for r in store.read_shard(info).to_pylist() if r.get("status") == "ok")
    return out


def clean(item: dict[str, Any]) -> bool:
    return (item.get("variant") or "0x") == "0x" and not item.get("perturbation_family")


def reference_records(store: Any) -> list[dict[str, Any]]:
    """The reference rows of the run's clean eval items, in eval-set and rank order."""
    items = sorted((i for i in stage_rows(store, "eval_sets") if clean(i)),
                   key=lambda i: (i["eval_set"], i.get("rank") or 0, i["eval_item_id"]))  # fmt: skip
    texts = {(e["sample_id"], e["kind"]): e["text"] for e in stage_rows(store, "explanations")
             if e.get("text")}  # fmt: skip
    out = []
    for i in items:
        c = texts.get((i["sample_id"], reference_kind("complex", i["label"])))
        s = texts.get((i["sample_id"], reference_kind("simple", i["label"])))
        out.append({"id": i["eval_item_id"], "label": LABELS[i["label"]],
                    "complex_reference": c or "", "simple_reference": s or "",
                    "score_explanations": bool(c and s)})  # fmt: skip
    return out


def detectors(store: Any) -> list[str]:
    return sorted({d["detector"] for d in stage_rows(store, "detections")})


def submission_records(
    store: Any, detector: str, ids: set[str]
) -> tuple[list[dict], list[dict], list[dict]]:
    """(detection, complex, simple) rows of one detector over the reference ids."""
    by: dict[tuple[str, str], dict[str, Any]] = {}
    for d in stage_rows(store, "detections"):
        if d["detector"] == detector and d["eval_item_id"] in ids:
            by[(d["eval_item_id"], d["track"])] = d
    det: list[dict] = []
    cx: list[dict] = []
    sp: list[dict] = []
    for iid in sorted(ids):
        answers = [by[(iid, t)].get("answer") for t in TRACK_ORDER if (iid, t) in by]
        answer = next((a for a in answers if a in LABELS), None)
        if answer is not None:
            det.append({"id": iid, "pred_label": LABELS[answer]})
        for track, rows, key in ((("complex", cx, "complex_explanation")),
                                 ("simple", sp, "simple_explanation")):  # fmt: skip
            got = by.get((iid, track))
            if got is not None and (got.get("explanation") or "").strip():
                rows.append({"id": iid, key: got["explanation"]})
    return det, cx, sp


def export_xdd(store: Any, out: Path, detector: str | None = None) -> dict[str, Any]:
    """Write ``out/reference.jsonl`` and ``out/<detector>.zip`` (every detector, or the one
    named); returns the counts. ValueError (one sentence) when the run has no evaluation set or
    no such detector."""
    if not store.manifest("eval_sets"):
        raise ValueError("the run has no eval_sets: build it with evaluation.enabled")
    refs = reference_records(store)
    names = detectors(store)
    if detector is not None and detector not in names:
        known = ", ".join(names) or "none"
        raise ValueError(f"the run has no detections of detector {detector!r} (known: {known})")
    write_atomic(out / "reference.jsonl", dumps_jsonl(refs))
    ids = {r["id"] for r in refs}
    counts: dict[str, Any] = {"reference": len(refs),
                              "explanation_rows": sum(r["score_explanations"] for r in refs)}  # fmt: skip
    for name in [detector] if detector else names:
        det, cx, sp = submission_records(store, name, ids)
        write_atomic(out / f"{safe_name(name)}.zip", submission_zip(det, cx, sp))
        counts[name] = {"detection": len(det), "complex": len(cx), "simple": len(sp)}
    return {"format": "xdd", "path": str(out), "counts": counts}


def safe_name(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "detector"
