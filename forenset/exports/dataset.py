"""exports: the dataset as Parquet with embedded image bytes, one file per split."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from forenset.exports.settings import ExportSettings
from forenset.store.run_store import RunStore

EXPORT_VERSION = "2"  # 2: generators (every generator that made the same bytes)
QUERY = """
SELECT s.sample_id, s.label, s.split, s.generator, s.generator_family, s.generators,
       s.holdout, s.image_id, s.blob, s.caption,
       max(CASE WHEN e.kind = 'complex' THEN e.text END) AS explanation_complex,
       max(CASE WHEN e.kind = 'simple' THEN e.text END) AS explanation_simple,
       max(CASE WHEN e.kind = 'authenticity' THEN e.text END) AS explanation_authenticity
FROM splits s LEFT JOIN explanations e ON e.sample_id = s.sample_id AND e.status = 'ok'
WHERE s.status = 'ok' AND s.split = ?
GROUP BY ALL ORDER BY s.sample_id
"""


MARKER = "exports/parquet/_fingerprint.json"


def _digest(obj: Any) -> str:
    return hashlib.blake2b(json.dumps(obj, sort_keys=True).encode(), digest_size=12).hexdigest()


def export_fingerprint(store: RunStore, settings: ExportSettings) -> tuple[str, dict[str, str]]:
    """The export's fingerprint, like a stage's: (version, settings, its inputs' fingerprints).

    An input's fingerprint hashes the (path, fingerprint, content id) of every shard its manifest
    lists: content ids cover keys and status only, a shard's fingerprint covers what made its
    values (config, code, inputs). So the export is rewritten exactly when a table it reads (or
    its settings) changed."""
    from forenset.exports.data import tables

    inputs = {
        n: _digest([[s.path, s.fingerprint, s.content_id] for s in store.manifest(n)])
        for n in tables(store)
    }
    return _digest([EXPORT_VERSION, inputs, settings.model_dump(mode="json")]), inputs


def export_up_to_date(store: RunStore, settings: ExportSettings) -> bool:
    """Whether the written export matches its inputs (nothing to rewrite)."""
    prev = store.read_json(MARKER, default={}) or {}
    return (
        bool(prev)
        and not prev.get("partial")  # a partial export is rewritten once the build is whole
        and prev.get("fingerprint") == export_fingerprint(store, settings)[0]
    )


def export_dataset(
    store: RunStore, settings: ExportSettings, partial: str | None = None
) -> dict[str, Any]:
    """Write exports/parquet/<split>.parquet; skipped when its inputs have not changed.

    ``partial``: why the build that writes it had failed shards. The export is then labelled
    partial (its marker, export.json and the dataset card say so and why), never presented
    as the dataset; a later build without failures rewrites it unlabelled."""
    from forenset.store.views import connect

    fp, inputs = export_fingerprint(store, settings)
    marker = MARKER
    prev = store.read_json(marker, default={}) or {}
    if prev.get("fingerprint") == fp and prev.get("partial_reason") == partial:
        return {"skipped": True, **prev}
    con = connect(store, ["splits", "perturbations", "explanations"])
    counts = {}
    for split in ("train", "validation", "test"):
        t = con.sql(QUERY, params=[split]).to_arrow_table()
        images = [store.get_blob(b) for b in t["blob"].to_pylist()]
        pert = con.execute(
            "SELECT sample_id, list(struct_pack(blob := blob, ops := ops, psnr := psnr, ssim := ssim) ORDER BY variant) AS v "
            "FROM perturbations WHERE status = 'ok' AND split = ? GROUP BY sample_id",
            [split],
        ).fetchall()
        pmap = {sid: v for sid, v in pert}
        variants = [
            [
                {
                    "image": store.get_blob(x["blob"]),
                    "ops": x["ops"],
                    "psnr": x["psnr"],
                    "ssim": x["ssim"],
                }
                for x in pmap.get(sid, [])
            ]
            for sid in t["sample_id"].to_pylist()
        ]
        t = t.drop(["blob"]).append_column("image", pa.array(images, pa.binary()))
        t = t.append_column("perturbed", pa.array(variants))
        buf = io.BytesIO()
        pq.write_table(t, buf, row_group_size=100, compression="zstd")
        store.write_bytes_atomic(f"exports/parquet/{split}.parquet", buf.getvalue())
        counts[split] = t.num_rows
    doc = {
        "fingerprint": fp,
        "counts": counts,
        "path": store.path("exports/parquet"),
        "inputs": inputs,  # the fingerprint of every table it read, as a stage's manifest has
        "partial": partial is not None,
        "partial_reason": partial,
    }
    extra = _extra_formats(store, settings, partial)
    if extra:
        doc["formats"] = extra
    store.write_json(marker, doc)
    return {"skipped": False, **doc}


def _extra_formats(
    store: RunStore, settings: ExportSettings, partial: str | None = None
) -> dict[str, Any]:
    """The formats named in ``export.formats`` (hf, sft, labelstudio and the families')."""
    from forenset.exports.api import run_export
    from forenset.exports.data import load_samples
    from forenset.exports.formats import formats

    wanted = [f for f in settings.formats if f in formats()]
    if not wanted or not store.is_local:
        return {}
    samples = load_samples(store)
    out: dict[str, Any] = {}
    for fmt in wanted:
        res = run_export(store, fmt, None, settings, samples=samples, partial=partial)
        out[fmt] = {"path": res["path"], "counts": res["counts"]}
    return out
