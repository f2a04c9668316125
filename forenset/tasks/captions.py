"""captions: dense factual captions; manifest captions are kept (caption_source='manifest').

Offline (``captions.llm`` unset): pixel statistics describe the image. With a model pool: the
``caption`` template and the stored PNG go to the VLM, replies failing ``validate_caption``
are regenerated. Entity *boxes* always come from the source manifest or the pixel regions (a
caption model names entities but does not place them); the names it gave are kept in
``model_entities``.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.offline_vision import describe
from forenset.images import decode_rgb
from forenset.schemas.captions import SCHEMA
from forenset.tasks.base import RowStage, ShardSpec, dumps
from forenset.tasks.modelcall import ModelStageConfig, call_validated, model_stage_config, request
from forenset.text.captions import validate_caption
from forenset.text.models import CaptionResponse


class CaptionsConfig(ModelStageConfig):
    keep_manifest: bool = (
        True  # captions shipped with the source are kept (caption_source='manifest')
    )
    min_words: int = Field(25, ge=1)  # model captions: validate_caption bounds
    max_words: int = Field(160, ge=1)


TEMPLATES = ("caption",)


class Captions(RowStage):
    name = "captions"
    config_model = CaptionsConfig
    version = "2"
    inputs = ("sources",)
    input_columns = ("image_id", "blob", "width", "height", "caption", "entities", "license")
    output_schema = SCHEMA
    key = "image_id"

    def stage_config(self) -> dict[str, Any]:
        return model_stage_config(self.cfg, TEMPLATES)

    @staticmethod
    def _base(row: dict[str, Any]) -> dict[str, Any]:
        """The columns carried from the source; ``model_entities`` only a caption model fills."""
        base = {k: row[k] for k in ("image_id", "blob", "width", "height", "license")}
        return {**base, "model_entities": None}

    def _manifest(self, row: dict[str, Any]) -> dict[str, Any] | None:
        if self.cfg.keep_manifest and row.get("caption"):
            return {
                **self._base(row),
                "caption": row["caption"],
                "caption_source": "manifest",
                "entities": dumps(json.loads(row.get("entities") or "[]")),
                "backend": "manifest",
                "model": None,
            }
        return None

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        kept = self._manifest(row)
        if kept is not None:
            yield kept
            return
        entities = json.loads(row.get("entities") or "[]")
        caption, regions = describe(decode_rgb(self.ctx.store.get_blob(row["blob"])))
        yield {
            **self._base(row),
            "caption": caption,
            "caption_source": "offline",
            "entities": dumps(entities or regions),
            "backend": "offline",
            "model": "pixel-statistics",
        }

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        cfg = self.cfg
        if cfg.llm is None:
            return super().process(batch, shard)
        out: list[dict[str, Any]] = []
        items, todo = [], {}
        for row in batch.to_pylist():
            kept = self._manifest(row)
            if kept is not None:
                out.append({**kept, "status": "ok", "stage_version": self.version})
                continue
            try:
                png = self.ctx.store.get_blob(row["blob"])
            except Exception as e:  # noqa: BLE001 - a missing blob is this row's error
                out.append(self.error_row(row, f"cannot read image blob: {e}", True))
                continue
            req = request(
                "caption",
                row["image_id"],
                "caption",
                cfg.prompts_dir,
                images=[png],
                response_model=CaptionResponse,
                min_words=str(cfg.min_words),
                max_words=str(cfg.max_words),
            )
            items.append((req, self._check))
            todo[row["image_id"]] = (row, png)
        done = call_validated(self.ctx, self.name, cfg.llm, items, cfg.max_attempts)
        for image_id, (row, png) in todo.items():
            o = done[image_id]
            entities = json.loads(row.get("entities") or "[]")
            if not entities:
                entities = describe(decode_rgb(png))[1]
            reply: CaptionResponse | None = o.parsed() if o.ok else None
            out.append(
                {
                    **self._base(row),
                    "caption": reply.caption if reply else None,
                    "caption_source": "model",
                    "entities": dumps(entities),
                    "model_entities": dumps(reply.entities) if reply else None,
                    **o.trace(),
                    "stage_version": self.version,
                }
            )
        return self.to_table(out)

    def _check(self, reply: CaptionResponse) -> list[str]:
        cfg = self.cfg
        return validate_caption(reply.caption, cfg.min_words, cfg.max_words)
