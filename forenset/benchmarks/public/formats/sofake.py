"""So-Fake-OOD (Huang et al. 2025; huggingface.co/datasets/saberzl/So-Fake-OOD, CC BY 4.0).

Layout read (verified against the dataset card's YAML ``dataset_info`` / ``configs``, both
revisions): the Hugging Face download, parquet shards ``data/test-*.parquet`` with columns
``image`` (``{bytes, path}``), ``mask``, ``label`` (a class label), ``filename`` and, from v2.0
on, ``generator``, ``source``, ``split``. The class names differ between versions (v1.0: 0
full_synthetic, 1 real, 2 tampered; v2.0: 0 real, 1 tampered, 2 full_synthetic): they are read
from the shard's ``huggingface`` schema metadata (what ``datasets`` writes; not seen on the
shards themselves); without it a shard with a ``generator`` column is taken as v2.0 and one
without as v1.0 (the two card revisions' column lists), and a row whose file name states
another class (``*_tampered.*``, v1.0's ``full_synthetic_*``) is an error row.

One ``judgement`` item per row: label ``real`` for real images, ``fake`` for full_synthetic and
tampered (``kind`` keeps the three classes, ``generator`` the source model). So-Fake-OOD has no
reference explanations; ``mask`` (localization) is not read.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from forenset import paths
from forenset.benchmarks.public.formats import records as rec

NAME = "sofake_ood"
SHARDS = ("data/test-*.parquet", "test-*.parquet", "data/*.parquet")
V1 = ["full_synthetic", "real", "tampered"]
V2 = ["real", "tampered", "full_synthetic"]
QUESTION = (
    "Is this image real, or AI-generated (fully synthetic or partly tampered)? Answer real or "
    "fake, then explain what you see."
)
BATCH = 64


def shards(root: str, annotations: str | None) -> list[str]:
    """The parquet shards, each resolved inside ``root`` (a symlink out raises)."""
    pattern = [annotations] if annotations else list(SHARDS)
    for p in pattern:
        found = sorted(glob.glob(os.path.join(root, p)))
        if found:
            return [paths.check(f, paths.ReadPolicy((root,))) for f in found]
    raise FileNotFoundError(
        f"no So-Fake-OOD parquet shards under {root} (looked for {', '.join(pattern)})"
    )


def files(root: str, annotations: str | None) -> list[str]:
    try:
        return shards(root, annotations)
    except (OSError, ValueError):
        return []


def label_names(schema: Any) -> tuple[list[str], bool]:
    """The label class names and whether they are the shard's own: the ``huggingface``
    metadata's, else by version (module doc)."""
    meta = (schema.metadata or {}).get(b"huggingface")
    if meta:
        try:
            names = json.loads(meta)["info"]["features"]["label"]["names"]
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                return [n.strip().lower().replace(" ", "_") for n in names], True
        except (ValueError, KeyError, TypeError):
            pass
    return (V2 if "generator" in schema.names else V1), False


def named_class(filename: str) -> str | None:
    """The class a file name states, in both card versions' previews: ``*_tampered.*`` is
    tampered, ``full_synthetic_*`` (v1.0) full_synthetic; None when the name says nothing."""
    name = filename.lower()
    if re.search(r"_tampered\.[a-z0-9]+$", name):
        return "tampered"
    if name.startswith("full_synthetic_"):
        return "full_synthetic"
    return None


def _image(cell: Any) -> bytes:
    data = cell.get("bytes") if isinstance(cell, dict) else cell
    if not isinstance(data, bytes) or not data:
        raise ValueError("the image cell holds no bytes")
    return data


def read(
    root: str, annotations: str | None = None, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """So-Fake-OOD's rows as judgement items (module doc); a bad row is an error row."""
    import pyarrow.parquet as pq

    n = 0
    for shard in shards(root, annotations):
        f = pq.ParquetFile(shard)
        names, own = label_names(f.schema_arrow)
        order = "v2.0" if names == V2 else "v1.0"
        cols = [
            c
            for c in ("image", "label", "filename", "generator", "source")
            if c in f.schema_arrow.names
        ]
        if "image" not in cols or "label" not in cols:
            raise ValueError(f"{os.path.basename(shard)} has no image or label column")
        for batch in f.iter_batches(batch_size=BATCH, columns=cols):
            for r in batch.to_pylist():
                if limit is not None and n >= limit:
                    return
                n += 1
                rid = str(r.get("filename") or f"{os.path.basename(shard)}#{n - 1}")
                lab = r.get("label")
                if not isinstance(lab, int) or not 0 <= lab < len(names):
                    yield rec.error(
                        NAME, "judgement", rid, f"label {lab!r} is not a class of {names}"
                    )
                    continue
                kind = names[lab]
                said = named_class(str(r.get("filename") or ""))
                if not own and said is not None and said != kind:
                    yield rec.error(
                        NAME, "judgement", rid,
                        f"label {lab} is {kind} in the {order} class order {names} (assumed: the "
                        "shard has no class names in its huggingface metadata), but the file "
                        f"name says {said}; expected a shard written by `datasets` (with class "
                        "names) or the card's v1.0 / v2.0 columns",
                    )  # fmt: skip
                    continue
                try:
                    image = _image(r.get("image"))
                except ValueError as e:
                    yield rec.error(NAME, "judgement", rid, str(e))
                    continue
                label = "real" if kind == "real" else "fake"
                yield rec.record(
                    NAME, "judgement", rid,
                    label=label, kind=kind, category=r.get("source"), generator=r.get("generator"),
                    question=QUESTION, choices=None, answer=label, asks=None, reference=None,
                    regions=None, images=[image],
                )  # fmt: skip
