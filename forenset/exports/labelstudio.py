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
from typing import Any, cast

import pyarrow as pa

from forenset.errors import ForensetError, clip
from forenset.exports.data import write_atomic, write_images
from forenset.schemas.annotations import SCHEMA
from forenset.store.run_store import RunStore, ShardInfo
from forenset.strict import finite, strict_bool
from forenset.text.taxonomy import load_taxonomy

TRIAGE_CHOICES = ("ann", "hard", "invalid")
ANOMALY_LABELS = ("commonsense", "physics", "text", "faces", "hands", "lighting", "other")
MODEL_VERSION = "forenset-diffs"

# The annotation protocol (docs/exports.md, `labelstudio`): stage 1 triage of every generated
# sample (reals are not triaged), stage 2 the region task, shown only once the sample is triaged
# ``ann``: per anomaly a box, one of the 7 labels and a short text explanation (a per-region
# TextArea, same region id as its box).
TRIAGE_XML = """<View>
  <Header value="Stage 1 - triage this generated image"/>
  <Image name="image" value="$image" zoom="true"/>
  <Text name="category" value="$category"/>
  <Text name="intended" value="$intended"/>
  <Choices name="triage" toName="image" choice="single" required="true" showInLine="true">
    <Choice value="ann" hint="at least one identifiable anomaly: annotate it"/>
    <Choice value="hard" hint="visually convincing: no defensible anomaly or suspicious region"/>
    <Choice value="invalid" hint="off-category, principal subject missing, placeholder text or severe generation failure"/>
  </Choices>
</View>
"""

BBOX_XML = """<View>
  <Header value="Stage 2 (images triaged ann) - box each anomaly, pick its label, say why"/>
  <Text name="explanation" value="$explanation"/>
  <RectangleLabels name="anomaly" toName="image">
{labels}
  </RectangleLabels>
  <Image name="image" value="$image" zoom="true"/>
  <View visibleWhen="region-selected">
    <Header value="Why is the selected region abnormal? (one short sentence)"/>
    <TextArea name="why" toName="image" perRegion="true" editable="true" maxSubmissions="1"
              required="true" rows="2" placeholder="what is wrong, and which expectation it violates"/>
  </View>
</View>
""".format(labels="\n".join(f'    <Label value="{x}"/>' for x in ANOMALY_LABELS))

_PEOPLE = {"face": "faces", "head": "faces", "eye": "faces", "mouth": "faces", "hand": "hands"}
_TEXT = ("text", "sign", "letter", "word", "label")


def anomaly_label(change_type: str | None, kind: str | None, target: str | None) -> str:
    """Map a difference onto the region task's anomaly labels (documented in docs/exports.md)."""
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
    inst = s.get("instruction_obj") or {}
    cat = inst.get("category") if "scenario_id" in inst else None  # text-to-image provenance
    names = {c.id: c.name for c in load_taxonomy()}
    return {
        "image": url,
        "sample_id": s["sample_id"],
        # what the image was meant to show: triage `invalid` means it deviates from this
        "category": f"{cat} {names.get(cat, '')}".strip() if cat else "",
        "intended": (s.get("caption") or "") if cat else inst.get("text", ""),
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
    refs = write_images(store, [s["blob"] for s in samples if s["label"] == "fake"], out)
    triage: list[dict[str, Any]] = []
    bbox: list[dict[str, Any]] = []
    for s in samples:
        if s["label"] != "fake":  # §2.5: only generated samples are triaged and annotated
            continue
        data = _data(s, image_url_prefix + refs[s["blob"]])
        triage.append({"data": data})
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

ANNOTATIONS_SCHEMA = SCHEMA  # forenset/schemas/annotations.py (typed empty views need it)
_TASK_BY_CONTROL = {"triage": "triage", "anomaly": "bbox", "why": "bbox"}
_ORIGINS = {"prediction": "prediction", "prediction-changed": "prediction-changed"}


class AnnotationImportError(ForensetError, ValueError):
    """The file is not a usable Label Studio JSON export; the message says why in one sentence."""


def _int(v: Any) -> int | None:
    """An id that fits the int64 column (1e30, 1.5, a bool or a list: None)."""
    from forenset.strict import int64

    return int64(v)


def _annotator(v: Any) -> str | None:
    if isinstance(v, dict):
        return str(v.get("email") or v.get("id") or "")
    return None if v is None else str(v)


def _check_shape(doc: Any, kept: str = "earlier annotations are kept") -> list[Any]:
    """The task list, or one sentence on why this is not a Label Studio JSON export (``kept``:
    what an empty export leaves as it was)."""
    if isinstance(doc, dict) and isinstance(doc.get("tasks"), list):
        doc = doc["tasks"]
    if not isinstance(doc, list):
        raise AnnotationImportError(
            "expected a Label Studio JSON export (a list of tasks with 'annotations')"
        )
    if not doc:
        raise AnnotationImportError(f"the export holds no tasks; nothing was imported and {kept}")
    tasks = [t for t in doc if isinstance(t, dict)]
    if tasks and not any("annotations" in t or "data" in t for t in tasks):
        raise AnnotationImportError(
            "this looks like a JSON_MIN or CSV-style export (tasks without 'data' and "
            "'annotations'); export the project as JSON instead - nothing was imported"
        )
    return doc


def annotation_rows(
    doc: Any,
    file_hash: str,
    *,
    known: set[str] | None = None,
    expected: set[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per choice / region of each annotation; a region's box and its per-region text
    are one row (joined by the region id). Bad items become error rows: malformed results,
    choices or labels outside the labeling config, ``sample_id``s missing or not in ``known``
    (the run's generated samples), and ``expected`` sample ids whose task is absent."""
    tasks = _check_shape(doc)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for ti, task in enumerate(tasks):
        if not isinstance(task, dict):
            rows.append(_error_row(f"t{ti}", None, None, f"task {ti} is not an object", file_hash))
            continue
        tid = _int(task.get("id"))
        data = task.get("data") or {}
        tkey = str(tid) if tid is not None else f"t{ti}"
        if not isinstance(data, dict):
            msg = f"task data is a {type(data).__name__}, not an object"
            rows.append(_error_row(tkey, tid, None, msg, file_hash))
            continue
        sample = data.get("sample_id")
        if not sample:
            rows.append(_error_row(tkey, tid, None, "task has no data.sample_id", file_hash))
            continue
        if isinstance(sample, bool) or not isinstance(sample, str | int):
            msg = f"data.sample_id is a {type(sample).__name__}, not a string"
            rows.append(_error_row(tkey, tid, None, msg, file_hash))
            continue
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list):
            msg = f"task annotations is a {type(annotations).__name__}, not a list"
            rows.append(_error_row(tkey, tid, str(sample), msg, file_hash))
            continue
        sample = str(sample)
        seen.add(sample)
        if known is not None and sample not in known:
            msg = f"sample_id {clip(sample)!r} is not a generated sample of this run"
            rows.append(_error_row(tkey, tid, sample, msg, file_hash))
            continue
        for ai, ann in enumerate(annotations):
            aid = _int(ann.get("id")) if isinstance(ann, dict) else None
            key = f"{tkey}-{aid if aid is not None else ai}"
            if not isinstance(ann, dict):
                rows.append(_error_row(key, tid, sample, "annotation is not an object", file_hash))
                continue
            flags = {f: strict_bool(ann.get(f)) for f in ("was_cancelled", "simulated")}
            bad = [f for f, v in flags.items() if v is None]
            results = ann.get("result") or []
            lead = ann.get("lead_time")
            if lead is not None and finite(lead) is None:  # "fast" is no duration
                what = f"annotation lead_time is {clip(repr(lead), 80)}, not a number of seconds"
                rows.append(_error_row(key, tid, sample, what, file_hash))
                continue
            if bad or not isinstance(results, list):
                what = (
                    f"annotation {bad[0]} is {clip(repr(ann.get(bad[0])), 80)}, not true or false"
                    if bad
                    else f"annotation result is a {type(results).__name__}, not a list"
                )
                rows.append(_error_row(key, tid, sample, what, file_hash))
                continue
            common = {
                "task_id": tid,
                "annotation_id": aid,
                "sample_id": sample,
                "annotator": _annotator(ann.get("completed_by")),
                "was_cancelled": flags["was_cancelled"],
                "created_at": str(ann.get("created_at")) if ann.get("created_at") else None,
                "lead_time": finite(ann.get("lead_time")),
                "simulated": flags["simulated"],
                "source_file_hash": file_hash,
            }
            if not results:
                rows.append(
                    {**common, "annotation_row_id": f"{key}-empty", "task": None, "status": "ok"}
                )
            rows.extend(_result_rows(results, key, common))
    for sample in sorted((expected or set()) - seen):
        rows.append(
            _error_row(
                f"missing-{sample}",
                None,
                sample,
                "exported task missing from this Label Studio export (deleted in Label Studio, "
                "or the export left out unannotated tasks: `forenset labelstudio-pull` keeps them)",
                file_hash,
            )
        )
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


def _result_rows(results: list[Any], key: str, common: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of one annotation: per-region texts are merged into their region's box row."""
    rows: list[dict[str, Any]] = []
    by_region: dict[str, dict[str, Any]] = {}
    texts: list[tuple[str, str, str]] = []  # (row key, region id, text)
    for ri, res in enumerate(results):
        rk = f"{key}-{ri}"
        if isinstance(res, dict) and res.get("type") == "textarea" and res.get("id"):
            v = res["value"] if isinstance(res.get("value"), dict) else {}
            got = v.get("text") or []
            if not isinstance(got, list) or not all(isinstance(t, str) for t in got):
                bad_text = {**common, "annotation_row_id": rk, "status": "error",
                            "error": "region text is not a list of strings"}  # fmt: skip
                rows.append(bad_text)
                continue
            texts.append((rk, str(res["id"]), " ".join(got)))
            continue
        row = _result_row(res, rk, common)
        rows.append(row)
        if row.get("region_id") and row.get("task") == "bbox":
            by_region[row["region_id"]] = row
    for rk, rid, text in texts:
        if rid in by_region:
            by_region[rid]["region_text"] = text
        else:
            rows.append(
                {
                    **common,
                    "annotation_row_id": rk,
                    "task": "bbox",
                    "region_id": rid,
                    "result_type": "textarea",
                    "region_text": text,
                    "status": "error",
                    "error": "region text without a box of the same region id",
                }
            )
    return rows


def _result_row(res: Any, key: str, common: dict[str, Any]) -> dict[str, Any]:
    row = {**common, "annotation_row_id": key, "status": "ok"}
    if not isinstance(res, dict) or not isinstance(res.get("value"), dict):
        return {**row, "status": "error", "error": "result item has no 'value' object"}
    v = res["value"]
    row["result_type"] = res.get("type")
    row["task"] = _TASK_BY_CONTROL.get(str(res.get("from_name")), "other")
    if "choices" in v:
        if not isinstance(v["choices"], list) or not all(isinstance(c, str) for c in v["choices"]):
            return {**row, "status": "error", "error": "choices is not a list of strings"}
        row["choice"] = ",".join(str(c) for c in v["choices"])
        bad = [c for c in v["choices"] if row["task"] == "triage" and c not in TRIAGE_CHOICES]
        if bad:
            return {
                **row,
                "status": "error",
                "error": f"triage choice {bad[0]!r} is not in the config",
            }
    if "rectanglelabels" in v or res.get("type") in ("rectanglelabels", "rectangle"):
        labels = [str(c) for c in v.get("rectanglelabels") or []]
        rid = str(res["id"]) if res.get("id") is not None else None
        sample = str(common.get("sample_id") or "")
        row.update(
            rect_label=",".join(labels),
            region_id=rid,
            origin=_ORIGINS.get(str(res.get("origin")), "drawn"),
            difference_id=rid[len(sample) + 1 :]
            if rid and sample and rid.startswith(sample + "-")
            else None,
        )
        problem = _box_problem(v)
        if problem:
            return {**row, "status": "error", "error": problem}
        x, y, w, h = (cast(float, finite(v[k])) for k in ("x", "y", "width", "height"))
        row.update(  # finite numbers: _box_problem refuses the rest
            x=x / 100,
            y=y / 100,
            w=w / 100,
            h=h / 100,
            rotation=finite(v.get("rotation") or 0.0),
        )
        bad = [c for c in labels if c not in ANOMALY_LABELS]
        if bad:
            return {
                **row,
                "status": "error",
                "error": f"anomaly label {bad[0]!r} is not in the config",
            }
        if len(labels) != 1:
            return {**row, "status": "error", "error": "a region needs exactly one anomaly label"}
    return row


def _box_problem(v: dict[str, Any]) -> str | None:
    """Why a rectangle's numbers are unusable (missing, NaN/inf, outside 0-100 %, a width or
    height that is not positive), or None."""
    for f in ("x", "y", "width", "height"):
        if f not in v:
            return f"rectangle without a valid '{f}' field"
        if finite(v[f]) is None:
            return f"rectangle {f} is {v[f]!r}, not a finite number"
    if v.get("rotation") not in (None, "") and finite(v.get("rotation")) is None:
        return f"rectangle rotation is {v['rotation']!r}, not a finite number"
    x, y, w, h = (finite(v[f]) for f in ("x", "y", "width", "height"))
    if w <= 0 or h <= 0:  # type: ignore[operator]
        return f"rectangle width and height must be positive (got {w}, {h})"
    if not (0 <= x <= 100 and 0 <= y <= 100 and w <= 100 and h <= 100):  # type: ignore[operator]
        return f"rectangle x, y, width, height must be percentages 0-100 (got {x}, {y}, {w}, {h})"
    return None


def run_samples(store: RunStore) -> set[str] | None:
    """Generated (fake) sample ids of the run, or None when the run has no splits to check."""
    from forenset.store.views import connect

    if not store.manifest("splits"):
        return None
    con = connect(store, ["splits"])
    try:  # closed here, not at interpreter exit (DuckDB can abort a process there)
        return {
            r[0]
            for r in con.execute(
                "SELECT sample_id FROM splits WHERE status = 'ok' AND label = 'fake'"
            ).fetchall()
        }
    finally:
        con.close()


def exported_samples(tasks_file: Path | None) -> set[str] | None:
    """Sample ids of an exported task file (to notice tasks deleted in Label Studio)."""
    if tasks_file is None or not Path(tasks_file).is_file():
        return None
    doc = parse_json(read_import_file(tasks_file), tasks_file)
    return {
        str(t["data"]["sample_id"])
        for t in (doc if isinstance(doc, list) else [])
        if isinstance(t, dict) and isinstance(t.get("data"), dict) and "sample_id" in t["data"]
    }


IMPORT_MAX_BYTES = 1024 * 1024 * 1024


def read_import_file(path: Path | str) -> bytes:
    """An import file's bytes: a regular file (not a FIFO or a device), capped in bytes;
    AnnotationImportError with one sentence otherwise."""
    from forenset.paths import read_local

    try:
        return read_local(str(path), IMPORT_MAX_BYTES)
    except OSError as e:
        raise AnnotationImportError(f"cannot read {clip(str(path))}: {e.strerror or e}") from None


def parse_json(raw: bytes, path: Path | str) -> Any:
    """JSON of an import file; AnnotationImportError for bad JSON or nesting too deep."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise AnnotationImportError(f"{path} is nested too deeply to be an export") from None
    except ValueError as e:
        raise AnnotationImportError(f"{path} is not valid JSON ({e})") from None


def import_annotations(
    store: RunStore,
    path: Path,
    *,
    append: bool = False,
    tasks_file: Path | None = None,
) -> ShardInfo:
    """Read a Label Studio JSON export into ``stages/annotations/`` and its manifest.

    The shard's fingerprint is the file's content hash, so importing the same file again
    rewrites nothing new. ``append`` keeps the shards of earlier imports in the manifest. A file
    that is empty or not a JSON export is refused before anything is written, so earlier
    annotations are never wiped by a bad file. ``tasks_file`` (the exported task list) lets the
    import notice tasks deleted in Label Studio.
    """
    raw = read_import_file(path)
    if not raw.strip():
        raise AnnotationImportError(
            f"{path} is empty; nothing was imported and earlier annotations are kept"
        )
    fh = hashlib.blake2b(raw, digest_size=12).hexdigest()
    doc = parse_json(raw, path)
    rows = annotation_rows(doc, fh, known=run_samples(store), expected=exported_samples(tasks_file))
    return store_annotation_rows(store, rows, f"import-{fh}", fh, append=append)


def store_annotation_rows(
    store: RunStore, rows: list[dict[str, Any]], shard_id: str, fingerprint: str, *, append: bool
) -> ShardInfo:
    """Write rows as one ``annotations`` shard; the manifest records the schema (typed views)."""
    import base64

    table = pa.Table.from_pylist(rows, schema=ANNOTATIONS_SCHEMA)
    st = Counter(r["status"] for r in rows)
    existing = store.shard_info("annotations", shard_id, {})
    if existing is not None and existing.fingerprint == fingerprint:
        info = existing
    else:
        info = store.write_shard(
            "annotations",
            shard_id,
            table,
            fingerprint=fingerprint,
            counts={"ok": st.get("ok", 0), "error": st.get("error", 0)},
            content_columns=["annotation_row_id", "status"],
        )
    shards = [s for s in store.manifest("annotations") if s.shard_id != shard_id] if append else []
    schema = base64.b64encode(ANNOTATIONS_SCHEMA.serialize().to_pybytes()).decode()
    store.write_manifest("annotations", shards + [info], {"schema": schema})
    return info
