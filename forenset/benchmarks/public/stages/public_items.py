"""public_items: each configured public benchmark imported from its folder, one shard per
benchmark (partition ``benchmark``).

The importer (``public.formats.importers``) reads the release's own layout and yields records; this
stage stores each record's images as blobs (content-addressed, so an image that two LOKI tasks
share is stored once) and writes one row per item. A bad record, a hostile or missing image
path, an unreadable image are error rows with the reason, and the import goes on; a release
that cannot be read at all (no annotation file, not JSON) is a ConfigurationError.

The fingerprint covers the benchmark's config and the size and mtime of each file the importer
reads (annotation files, parquet shards; AIGI-Holmes's images), not their bytes.
"""

from __future__ import annotations

import io
import os
from typing import Any

import pyarrow as pa

from forenset import paths
from forenset.benchmarks.public.config import PublicBenchmark, PublicConfig
from forenset.benchmarks.public.formats.importers import digest, import_records
from forenset.benchmarks.public.formats.records import reason
from forenset.benchmarks.public.schemas.public_items import SCHEMA
from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError
from forenset.tasks.base import ShardSpec, Stage, resource_exhausted

MAX_IMAGE_BYTES = 64 * 1024 * 1024


def _ext(image: str | bytes) -> str:
    if isinstance(image, str):
        return os.path.splitext(image)[1].lstrip(".").lower() or "png"
    from PIL import Image

    fmt = Image.open(io.BytesIO(image)).format  # the header only: raises on non-images
    return (fmt or "png").lower().replace("jpeg", "jpg")


class PublicItems(Stage[PublicConfig]):
    name = "public_items"
    version = "1"
    inputs = ()
    output_schema = SCHEMA
    key = "item_id"
    partition_by = ("benchmark",)
    config_model = PublicConfig
    config_key = "public"

    @property
    def pcfg(self) -> PublicConfig:
        return self.cfg

    def bench_config(self, b: PublicBenchmark) -> dict[str, Any]:
        return {
            "benchmark": fingerprint_view(b),
            "files": digest(b.name, b.path, b.annotations, b.tasks),
        }

    def stage_config(self) -> Any:
        return {
            "enabled": self.pcfg.enabled,
            "benchmarks": [self.bench_config(b) for b in self.pcfg.benchmarks],
        }

    def plan_sources(self) -> list[ShardSpec]:
        if not self.pcfg.enabled:
            return []
        return [
            self.spec(b.name, {"benchmark": b.name}, [], {"benchmark": b.name},
                      config=self.bench_config(b))
            for b in self.pcfg.benchmarks
        ]  # fmt: skip

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        b = next(x for x in self.pcfg.benchmarks if x.name == shard.params["benchmark"])
        out = []
        try:
            for r in import_records(b.name, b.path, b.annotations, b.limit, b.tasks):
                out.append(self.stored(r))
        except (OSError, ValueError) as e:  # the release itself cannot be read
            raise ConfigurationError(f"public benchmark {b.name} at {b.path}: {reason(e)}") from e
        seen: dict[str, int] = {}
        for r in out:  # a release that repeats an id: the later records are error rows
            k = seen.get(r["item_id"], 0)
            seen[r["item_id"]] = k + 1
            if k:
                r.update(item_id=f"{r['item_id']}#{k}", status="error",
                         error=f"id {r['record_id']!r} is repeated in the release",
                         retryable=False, blobs=None)  # fmt: skip
            r["stage_version"] = self.version
            r.setdefault("backend", "import")
        return self.to_table(out)

    def stored(self, r: dict[str, Any]) -> dict[str, Any]:
        """The record with its images as blobs, or an error row when one cannot be stored."""
        images = r.pop("images", None) or []
        if r["status"] != "ok":
            return r
        blobs = []
        try:
            for image in images:
                data = (
                    image if isinstance(image, bytes) else paths.read_local(image, MAX_IMAGE_BYTES)
                )
                blobs.append(self.ctx.store.put_blob(data, ext=_ext(image)))
        except Exception as e:  # noqa: BLE001 - one unreadable image must not fail the import
            if resource_exhausted(e):
                raise
            return {**r, "status": "error", "error": f"image not stored: {reason(e)}",
                    "retryable": False}  # fmt: skip
        return {**r, "blobs": blobs, "n_images": len(blobs)}
