"""captions: dense factual captions; manifest captions are kept (caption_source='manifest')."""

from __future__ import annotations

import json
from typing import Any

from forenset.backends.offline_vision import describe
from forenset.images import decode_rgb
from forenset.schemas.captions import SCHEMA
from forenset.tasks.base import RowStage, ShardSpec, dumps


class Captions(RowStage):
    name = "captions"
    version = "1"
    inputs = ("sources",)
    input_columns = ("image_id", "blob", "width", "height", "caption", "entities", "license")
    output_schema = SCHEMA
    key = "image_id"

    def stage_config(self) -> dict[str, Any]:
        return self.ctx.config.captions.model_dump(mode="json")

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        cfg = self.ctx.config.captions
        base = {k: row[k] for k in ("image_id", "blob", "width", "height", "license")}
        entities = json.loads(row.get("entities") or "[]")
        if cfg.keep_manifest and row.get("caption"):
            yield {
                **base,
                "caption": row["caption"],
                "caption_source": "manifest",
                "entities": dumps(entities),
                "backend": "manifest",
                "model": None,
            }
            return
        caption, regions = describe(decode_rgb(self.ctx.store.get_blob(row["blob"])))
        yield {
            **base,
            "caption": caption,
            "caption_source": "offline",
            "entities": dumps(entities or regions),
            "backend": "offline",
            "model": "pixel-statistics",
        }
