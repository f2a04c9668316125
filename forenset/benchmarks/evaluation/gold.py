"""Label Studio gold-reference task: humans write explanations of fake images (XPlainVerse §4,
App. 14.0.0.1 / 14.0.0.4), and the import of a completed export into ``gold_references``.

Each task shows a fake image beside the real photo it was edited from, with the paper's
annotator instructions, and asks for one free-text explanation (a ``TextArea``). Two task files
share one labeling config: ``gold_tasks.json`` (each task meant for one annotator) and
``gold_overlap_tasks.json``, the overlap set every annotator does (the paper: 2,000 images and
an overlap set of 10 images done by 5 annotators), on which the inter-annotator agreement is
measured by EntityScore / EvidenceScore (:mod:`forenset.benchmarks.common.scorers.agreement`). Tasks are
a seeded draw of the fakes of one split; the overlap set is the first ``overlap`` of the draw.

The import keeps every annotation: a good one is an ``ok`` row, a bad one an ``error`` row with
its problem class and one sentence, and the summary counts each class (:data:`PROBLEMS`).
Adds a task type next to :mod:`forenset.exports.labelstudio` and reuses its helpers; images are
copied and referenced the same way (``image_url_prefix``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from forenset.benchmarks.evaluation.schemas.gold_references import SCHEMA
from forenset.exports.data import rank, write_atomic, write_images
from forenset.exports.labelstudio import (
    AnnotationImportError,
    _annotator,
    _check_shape,
    _int,
    parse_json,
    read_import_file,
)
from forenset.store.run_store import RunStore, ShardInfo
from forenset.strict import finite, strict_bool

TABLE = "gold_references"
CONTROL = "explanation"  # the TextArea's name in the labeling config

# XPlainVerse App. 14.0.0.4, verbatim
INSTRUCTIONS = (
    "You will be shown an original image and an edited image. Your task is to write an "
    "explanation describing why the edited image appears manipulated. Focus only on visible "
    "evidence in the edited image. You may use the original image for context, but your "
    "explanation should refer to cues that can be observed in the edited image itself. Mention "
    "concrete regions, objects, people, boundaries, textures, lighting, geometry, or other "
    "visible artifacts. Do not speculate about hidden causes, model names, or metadata. If "
    "multiple cues are visible, describe all important ones clearly."
)

GOLD_XML = f"""<View>
  <Header value="Why does the edited image appear manipulated?"/>
  <Text name="instructions" value="$instructions"/>
  <View style="display: flex; gap: 12px">
    <View style="flex: 50%">
      <Header value="Original" size="5"/>
      <Image name="original" value="$original" zoom="true"/>
    </View>
    <View style="flex: 50%">
      <Header value="Edited" size="5"/>
      <Image name="edited" value="$edited" zoom="true"/>
    </View>
  </View>
  <TextArea name="{CONTROL}" toName="edited" rows="6" editable="true" required="true"
            maxSubmissions="1" placeholder="Describe every visible cue of the manipulation."/>
</View>
"""

# problem class -> the sentence said once per class (singular, plural), with its count
PROBLEMS: dict[str, tuple[str, str]] = {
    "not_a_task": ("task is not an object", "tasks are not objects"),
    "not_an_annotation": ("annotation is not an object", "annotations are not objects"),
    "wrong_type": (
        "task or annotation has a field of the wrong type (data, annotations, result, "
        "sample_id, overlap, was_cancelled, lead_time, explanation text)",
        "tasks or annotations have a field of the wrong type (data, annotations, result, "
        "sample_id, overlap, was_cancelled, lead_time, explanation text)",
    ),
    "unknown_sample": (
        "annotation names a sample_id that is not a fake sample of this run",
        "annotations name a sample_id that is not a fake sample of this run",
    ),
    "cancelled": (
        "annotation was cancelled (skipped) in Label Studio",
        "annotations were cancelled (skipped) in Label Studio",
    ),
    "no_text": (
        f"annotation has no '{CONTROL}' text result",
        f"annotations have no '{CONTROL}' text result",
    ),
    "empty_text": ("annotation has an empty explanation", "annotations have an empty explanation"),
    "duplicate": (
        "annotation repeats an annotator's explanation of the same sample (the first is kept)",
        "annotations repeat an annotator's explanation of the same sample (the first is kept)",
    ),
}


def problem_sentence(kind: str, n: int) -> str:
    """``"3 annotations have an empty explanation."``: one sentence per problem class."""
    one, many = PROBLEMS[kind]
    return f"{n} {one if n == 1 else many}."


# -- export -----------------------------------------------------------------------------------


def gold_pairs(samples: list[dict[str, Any]], split: str | None) -> list[dict[str, Any]]:
    """The fakes (of ``split``; all splits when None) that have the real image they were edited
    from, each with that real's sample id when the run keeps it as a sample."""
    reals = {s["image_id"]: s["sample_id"] for s in samples if s["label"] == "real"}
    return [
        {**s, "real_sample_id": reals.get(s["image_id"])}
        for s in samples
        if s["label"] == "fake" and s.get("source_blob") and (split is None or s["split"] == split)
    ]


def export_gold(
    store: RunStore,
    samples: list[dict[str, Any]],
    out: Path,
    *,
    n: int = 2000,
    overlap: int = 10,
    seed: int = 0,
    split: str | None = "test",
    image_url_prefix: str = "/data/local-files/?d=",
) -> dict[str, Any]:
    """Write the gold task files and their labeling config; returns counts."""
    pairs = sorted(
        gold_pairs(samples, split),
        key=lambda s: (rank(seed, "gold", s["split"], s["sample_id"]), s["sample_id"]),
    )
    chosen = pairs[: overlap + n]
    refs = write_images(store, [b for s in chosen for b in (s["blob"], s["source_blob"])], out)
    tasks: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for i, s in enumerate(chosen):
        shared = i < overlap
        tasks[shared].append(
            {
                "data": {
                    "edited": image_url_prefix + refs[s["blob"]],
                    "original": image_url_prefix + refs[s["source_blob"]],
                    "instructions": INSTRUCTIONS,
                    "sample_id": s["sample_id"],
                    "real_sample_id": s["real_sample_id"],
                    "split": s["split"],
                    "overlap": shared,
                }
            }
        )
    dump = {"indent": 1, "ensure_ascii": False}
    write_atomic(out / "gold_tasks.json", json.dumps(tasks[False], **dump))  # type: ignore[arg-type]
    write_atomic(out / "gold_overlap_tasks.json", json.dumps(tasks[True], **dump))  # type: ignore[arg-type]
    write_atomic(out / "gold_config.xml", GOLD_XML)
    return {
        "format": "labelstudio-gold",
        "path": str(out),
        "counts": {"tasks": len(tasks[False]), "overlap": len(tasks[True]), "pairs": len(pairs)},
    }


# -- import -----------------------------------------------------------------------------------


def _text(results: Any) -> str | None:
    """The explanation of one annotation: the text of its ``explanation`` result(s), joined;
    None when it has none. ValueError when a text is not a string (``12345`` is no
    explanation: gold must be text)."""
    texts: list[str] = []
    found = False
    for res in results if isinstance(results, list) else []:
        if not isinstance(res, dict) or res.get("from_name") != CONTROL:
            continue
        value = res.get("value")
        raw = value.get("text") if isinstance(value, dict) else None
        if raw is None:
            continue
        found = True
        got = raw if isinstance(raw, list) else [raw]
        if not all(isinstance(t, str) for t in got):
            raise ValueError("an explanation text is not a string")
        texts.extend(got)
    return " ".join(t.strip() for t in texts if t.strip()) if found else None


def gold_rows(doc: Any, fakes: set[str], file_hash: str) -> list[dict[str, Any]]:
    """One row per annotation of a Label Studio JSON export of the gold task (module doc)."""
    doc = _check_shape(doc, kept="earlier gold is kept")
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str | None]] = set()

    def bad(row: dict[str, Any], kind: str) -> dict[str, Any]:
        return {**row, "status": "error", "problem": kind, "error": problem_sentence(kind, 1)}

    for ti, task in enumerate(doc):
        if not isinstance(task, dict):
            base: dict[str, Any] = {"gold_id": f"t{ti}", "source_file_hash": file_hash}
            rows.append(bad(base, "not_a_task"))
            continue
        tid = _int(task.get("id"))
        data = task.get("data") or {}
        anns = task.get("annotations") or []
        sample = data.get("sample_id") if isinstance(data, dict) else None
        overlap = strict_bool(data.get("overlap")) if isinstance(data, dict) else False
        typed = (
            isinstance(data, dict)
            and isinstance(anns, list)
            and overlap is not None
            and (sample is None or (isinstance(sample, str | int) and not isinstance(sample, bool)))
        )
        if not typed:
            base = {"gold_id": f"{tid if tid is not None else 't' + str(ti)}-task",
                    "task_id": tid, "source_file_hash": file_hash}  # fmt: skip
            rows.append(bad(base, "wrong_type"))
            continue
        real = data.get("real_sample_id")
        for ai, ann in enumerate(anns):
            aid = _int(ann.get("id")) if isinstance(ann, dict) else None
            row: dict[str, Any] = {
                "gold_id": f"{tid if tid is not None else 't' + str(ti)}-"
                f"{aid if aid is not None else 'a' + str(ai)}",
                "task_id": tid,
                "annotation_id": aid,
                "sample_id": None if sample is None else str(sample),
                "real_sample_id": None if real is None else str(real),
                "overlap": overlap,
                "source_file_hash": file_hash,
            }
            if not isinstance(ann, dict):
                rows.append(bad(row, "not_an_annotation"))
                continue
            cancelled = strict_bool(ann.get("was_cancelled"))
            lead = ann.get("lead_time")
            if (
                cancelled is None
                or not isinstance(ann.get("result") or [], list)
                or (lead is not None and finite(lead) is None)  # "fast" is no duration
            ):
                rows.append(bad(row, "wrong_type"))
                continue
            row.update(
                annotator=_annotator(ann.get("completed_by")),
                created_at=str(ann["created_at"]) if ann.get("created_at") else None,
                lead_time=finite(lead),
            )
            try:
                text = _text(ann.get("result"))
            except ValueError:
                rows.append(bad(row, "wrong_type"))
                continue
            row["text"] = text
            if row["sample_id"] not in fakes:
                rows.append(bad(row, "unknown_sample"))
            elif cancelled:
                rows.append(bad(row, "cancelled"))
            elif text is None:
                rows.append(bad(row, "no_text"))
            elif not text:
                rows.append(bad(row, "empty_text"))
            elif (row["sample_id"], row["annotator"]) in seen:
                rows.append(bad(row, "duplicate"))
            else:
                seen.add((row["sample_id"], row["annotator"]))
                rows.append({**row, "status": "ok"})
    return rows


def problems(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Problem class -> its one counted sentence, for the rows' error classes."""
    counts = Counter(r["problem"] for r in rows if r["status"] == "error")
    return {k: problem_sentence(k, counts[k]) for k in PROBLEMS if counts[k]}


def fake_ids(store: RunStore) -> set[str]:
    """The run's fake sample ids (the ok rows of ``splits``)."""
    from forenset.store.views import connect

    con = connect(store, ["splits"])
    try:
        cur = con.execute("SELECT sample_id FROM splits WHERE status = 'ok' AND label = 'fake'")
        return {r[0] for r in cur.fetchall()}
    finally:
        con.close()


def import_gold(
    store: RunStore, path: Path, *, append: bool = False
) -> tuple[ShardInfo, dict[str, str]]:
    """Read a Label Studio JSON export of the gold task into ``gold_references``; returns the
    shard and the counted problems. The shard's fingerprint is the file's content hash (an
    import of the same file writes nothing new); ``append`` keeps earlier imports."""
    raw = read_import_file(path)
    if not raw.strip():
        raise AnnotationImportError(
            f"{path} is empty; nothing was imported and earlier gold is kept"
        )
    fh = hashlib.blake2b(raw, digest_size=12).hexdigest()
    doc = parse_json(raw, path)
    if doc == [] or (isinstance(doc, dict) and doc.get("tasks") == []):
        raise AnnotationImportError(
            f"{path} holds no tasks; nothing was imported and earlier gold is kept"
        )
    rows = gold_rows(doc, fake_ids(store), fh)
    return write_gold(store, rows, f"import-{fh}", fh, append=append), problems(rows)


def write_gold(
    store: RunStore, rows: list[dict[str, Any]], shard_id: str, fh: str, *, append: bool
) -> ShardInfo:
    """One imported file's rows as a ``gold_references`` shard (fingerprint: the file's content
    hash, so the same file writes nothing new); ``append`` keeps the other shards. Shared by
    every gold format so that the table has one writer."""
    table = pa.Table.from_pylist([{n: r.get(n) for n in SCHEMA.names} for r in rows], schema=SCHEMA)
    st = Counter(r["status"] for r in rows)
    existing = store.shard_info(TABLE, shard_id, {})
    if existing is not None and existing.fingerprint == fh:
        info = existing
    else:
        info = store.write_shard(
            TABLE,
            shard_id,
            table,
            fingerprint=fh,
            counts={"ok": st.get("ok", 0), "error": st.get("error", 0)},
            content_columns=["gold_id", "status"],
        )
    shards = [s for s in store.manifest(TABLE) if s.shard_id != shard_id] if append else []
    schema = base64.b64encode(SCHEMA.serialize().to_pybytes()).decode()
    store.write_manifest(TABLE, shards + [info], {"schema": schema})
    return info


def gold_texts(store: RunStore) -> dict[str, dict[str, str]]:
    """The ok gold explanations of the complex track (the ones annotators wrote; an XDD
    reference's simple text is another task): sample id -> annotator -> text (the first per
    annotator)."""
    out: dict[str, dict[str, str]] = {}
    for info in store.manifest(TABLE):
        for r in store.read_shard(info).to_pylist():
            if r["status"] == "ok" and r.get("text") and r.get("kind") in (None, "complex"):
                out.setdefault(r["sample_id"], {}).setdefault(r["annotator"] or "", r["text"])
    return out
