"""Label Studio: task JSON + labeling configs for triage and bbox anomaly annotation, and the
import of a completed Label Studio JSON export back into the run store (table ``annotations``).

Images are copied to ``<export>/images/`` and referenced as ``<image_url_prefix>images/<file>``;
with the default prefix, start Label Studio with local-file serving rooted at the export folder
(``LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT=<export>``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from forenset.exports.data import write_atomic, write_images
from forenset.store.run_store import RunStore, ShardInfo

TRIAGE_CHOICES = ("ann", "hard", "invalid")
ANOMALY_LABELS = ("commonsense", "physics", "text", "faces", "hands", "lighting", "other")
MODEL_VERSION = "forenset-diffs"

TRIAGE_XML = """<View>
  <Header value="Triage: can this sample be annotated?"/>
  <Image name="image" value="$image" zoom="true"/>
  <Text name="explanation" value="$explanation"/>
  <Choices name="triage" toName="image" choice="single" required="true" showInLine="true">
    <Choice value="ann" hint="clear enough to annotate"/>
    <Choice value="hard" hint="subtle: needs an expert"/>
    <Choice value="invalid" hint="broken, wrong label or no visible edit"/>
  </Choices>
</View>
"""

BBOX_XML = """<View>
  <Header value="Draw a box around each anomaly and pick its kind"/>
  <Text name="explanation" value="$explanation"/>
  <RectangleLabels name="anomaly" toName="image">
{labels}
  </RectangleLabels>
  <Image name="image" value="$image" zoom="true"/>
</View>
""".format(labels="\n".join(f'    <Label value="{x}"/>' for x in ANOMALY_LABELS))

_PEOPLE = {"face": "faces", "head": "faces", "eye": "faces", "mouth": "faces", "hand": "hands"}
_TEXT = ("text", "sign", "letter", "word", "label")


def anomaly_label(change_type: str | None, kind: str | None, target: str | None) -> str:
    """Map a difference onto the SafeIMG-style anomaly labels (documented in docs/exports.md)."""
    t = (target or "").lower()
    for word, lab in _PEOPLE.items():
        if word in t:
            return lab
    if any(w in t for w in _TEXT):
        return "text"
    if kind == "lighting" or change_type == "brightness change":
        return "lighting"
    if kind in ("local_warp", "liquify"):
        return "physics"
    if kind in ("splice", "copy_move", "removal", "recolor"):
        return "commonsense"
    return "other"


def _size(store: RunStore, s: dict[str, Any]) -> tuple[int, int]:
    if s.get("width") and s.get("height"):
        return int(s["width"]), int(s["height"])
    import io

    from PIL import Image

    with Image.open(io.BytesIO(store.get_blob(s["blob"]))) as im:
        return im.size


def _data(s: dict[str, Any], url: str) -> dict[str, Any]:
    expl = (
        s.get("explanation_complex") if s["label"] == "fake" else s.get("explanation_authenticity")
    )
    return {
        "image": url,
        "sample_id": s["sample_id"],
        "label": s["label"],
        "split": s["split"],
        "generator": s["generator"],
        "instruction": (s.get("instruction_obj") or {}).get("text", ""),
        "explanation": expl or "",
    }


def bbox_predictions(s: dict[str, Any], width: int, height: int) -> list[dict[str, Any]]:
    """The diff boxes as one Label Studio prediction (pre-annotations), percent coordinates."""
    target = (s.get("instruction_obj") or {}).get("target")
    result = []
    for d in s["differences_list"]:
        box = d.get("bbox")
        if not box or len(box) != 4:
            continue
        x0, y0, x1, y1 = (float(v) for v in box)
        result.append(
            {
                "id": f"{s['sample_id']}-{d.get('id')}",
                "from_name": "anomaly",
                "to_name": "image",
                "type": "rectanglelabels",
                "original_width": width,
                "original_height": height,
                "image_rotation": 0,
                "value": {
                    "x": round(x0 * 100, 3),
                    "y": round(y0 * 100, 3),
                    "width": round((x1 - x0) * 100, 3),
                    "height": round((y1 - y0) * 100, 3),
                    "rotation": 0,
                    "rectanglelabels": [anomaly_label(d.get("change_type"), s.get("kind"), target)],
                },
                "score": round(min(1.0, float(d.get("salience") or 0) / 5), 3),
            }
        )
    if not result:
        return []
    score = s.get("final_score")
    return [
        {
            "model_version": MODEL_VERSION,
            "score": float(score) if score is not None else 0.0,
            "result": result,
        }
    ]


def export_labelstudio(
    store: RunStore,
    samples: list[dict[str, Any]],
    out: Path,
    *,
    image_url_prefix: str = "/data/local-files/?d=",
) -> dict[str, Any]:
    """Write triage + bbox task files and their labeling configs; returns counts."""
    refs = write_images(store, [s["blob"] for s in samples], out)
    triage, bbox = [], []
    for s in samples:
        data = _data(s, image_url_prefix + refs[s["blob"]])
        triage.append({"data": data})
        if s["label"] == "fake":
            w, h = _size(store, s)
            bbox.append({"data": data, "predictions": bbox_predictions(s, w, h)})
    write_atomic(out / "triage_tasks.json", json.dumps(triage, indent=1, ensure_ascii=False))
    write_atomic(out / "bbox_tasks.json", json.dumps(bbox, indent=1, ensure_ascii=False))
    write_atomic(out / "triage_config.xml", TRIAGE_XML)
    write_atomic(out / "bbox_config.xml", BBOX_XML)
    boxes = sum(len(p["result"]) for t in bbox for p in t["predictions"])
    return {
        "format": "labelstudio",
        "path": str(out),
        "counts": {"triage": len(triage), "bbox": len(bbox), "predicted_boxes": boxes},
    }


# -- import ----------------------------------------------------------------------------------

ANNOTATIONS_SCHEMA = pa.schema(
    [
        pa.field("annotation_row_id", pa.string(), nullable=False),
        pa.field("task_id", pa.int64()),
        pa.field("annotation_id", pa.int64()),
        pa.field("sample_id", pa.string()),
        pa.field("task", pa.string()),  # triage | bbox | other (from the control name)
        pa.field("annotator", pa.string()),
        pa.field("result_type", pa.string()),
        pa.field("choice", pa.string()),
        pa.field("rect_label", pa.string()),
        pa.field("x", pa.float64()),  # box as fractions of the image
        pa.field("y", pa.float64()),
        pa.field("w", pa.float64()),
        pa.field("h", pa.float64()),
        pa.field("was_cancelled", pa.bool_()),
        pa.field("created_at", pa.string()),
        pa.field("lead_time", pa.float64()),
        pa.field("source_file_hash", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
    ]
)
_TASK_BY_CONTROL = {"triage": "triage", "anomaly": "bbox"}


class AnnotationImportError(ValueError):
    """The file is not a Label Studio JSON export; the message says why in one sentence."""


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _annotator(v: Any) -> str | None:
    if isinstance(v, dict):
        return str(v.get("email") or v.get("id") or "")
    return None if v is None else str(v)


def annotation_rows(doc: Any, file_hash: str) -> list[dict[str, Any]]:
    """One row per result item (a choice or a box) of each annotation; bad items become error rows."""
    if isinstance(doc, dict) and isinstance(doc.get("tasks"), list):
        doc = doc["tasks"]
    if not isinstance(doc, list):
        raise AnnotationImportError(
            "expected a Label Studio JSON export (a list of tasks with 'annotations')"
        )
    rows: list[dict[str, Any]] = []
    for ti, task in enumerate(doc):
        if not isinstance(task, dict):
            rows.append(_error_row(f"t{ti}", None, None, f"task {ti} is not an object", file_hash))
            continue
        tid = _int(task.get("id"))
        sample = (task.get("data") or {}).get("sample_id")
        for ai, ann in enumerate(task.get("annotations") or []):
            aid = _int(ann.get("id")) if isinstance(ann, dict) else None
            key = f"{tid if tid is not None else 't' + str(ti)}-{aid if aid is not None else ai}"
            if not isinstance(ann, dict):
                rows.append(_error_row(key, tid, sample, "annotation is not an object", file_hash))
                continue
            common = {
                "task_id": tid,
                "annotation_id": aid,
                "sample_id": sample,
                "annotator": _annotator(ann.get("completed_by")),
                "was_cancelled": bool(ann.get("was_cancelled", False)),
                "created_at": str(ann.get("created_at")) if ann.get("created_at") else None,
                "lead_time": float(ann["lead_time"])
                if isinstance(ann.get("lead_time"), int | float)
                else None,
                "source_file_hash": file_hash,
            }
            results = ann.get("result") or []
            if not results:
                rows.append(
                    {**common, "annotation_row_id": f"{key}-empty", "task": None, "status": "ok"}
                )
            for ri, res in enumerate(results):
                rows.append(_result_row(res, f"{key}-{ri}", common))
    return rows


def _error_row(key: str, tid: int | None, sample: Any, msg: str, fh: str) -> dict[str, Any]:
    return {
        "annotation_row_id": key,
        "task_id": tid,
        "sample_id": sample,
        "source_file_hash": fh,
        "status": "error",
        "error": msg,
    }


def _result_row(res: Any, key: str, common: dict[str, Any]) -> dict[str, Any]:
    row = {**common, "annotation_row_id": key, "status": "ok"}
    if not isinstance(res, dict) or not isinstance(res.get("value"), dict):
        return {**row, "status": "error", "error": "result item has no 'value' object"}
    v = res["value"]
    row["result_type"] = res.get("type")
    row["task"] = _TASK_BY_CONTROL.get(str(res.get("from_name")), "other")
    if "choices" in v:
        row["choice"] = ",".join(str(c) for c in v["choices"])
    if "rectanglelabels" in v or res.get("type") in ("rectanglelabels", "rectangle"):
        try:
            row["rect_label"] = ",".join(str(c) for c in v.get("rectanglelabels") or [])
            row.update(
                x=float(v["x"]) / 100,
                y=float(v["y"]) / 100,
                w=float(v["width"]) / 100,
                h=float(v["height"]) / 100,
            )
        except (KeyError, TypeError, ValueError) as e:
            return {**row, "status": "error", "error": f"rectangle without a valid {e} field"}
    return row


def import_annotations(store: RunStore, path: Path, *, append: bool = False) -> ShardInfo:
    """Read a Label Studio JSON export into ``stages/annotations/`` and its manifest.

    The shard's fingerprint is the file's content hash, so importing the same file again
    rewrites nothing new. ``append`` keeps the shards of earlier imports in the manifest.
    """
    raw = Path(path).read_bytes()
    fh = hashlib.blake2b(raw, digest_size=12).hexdigest()
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise AnnotationImportError(f"{path} is not valid JSON ({e})") from None
    rows = annotation_rows(doc, fh)
    table = pa.Table.from_pylist(rows, schema=ANNOTATIONS_SCHEMA)
    st = Counter(r["status"] for r in rows)
    shard_id = f"import-{fh}"
    existing = store.shard_info("annotations", shard_id, {})
    if existing is not None and existing.fingerprint == fh:
        info = existing
    else:
        info = store.write_shard(
            "annotations",
            shard_id,
            table,
            fingerprint=fh,
            counts={"ok": st.get("ok", 0), "error": st.get("error", 0)},
            content_columns=["annotation_row_id", "status"],
        )
    shards = [s for s in store.manifest("annotations") if s.shard_id != shard_id] if append else []
    store.write_manifest("annotations", shards + [info])
    return info
