"""captions: dense factual captions; manifest captions are kept (caption_source='manifest').

Offline (``captions.llm`` unset): pixel statistics describe the image. With a model pool: the
``caption`` template and the stored PNG go to the VLM, replies failing ``validate_caption``
are regenerated. Entity *boxes* always come from the source manifest or the pixel regions (a
caption model names entities but does not place them); the names it gave are kept in
``model_entities``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.llm.types import ChatRequest
from forenset.backends.offline_vision import describe
from forenset.images import decode_rgb
from forenset.schemas.captions import SCHEMA
from forenset.tasks.base import ShardSpec, StageRowError, dumps
from forenset.tasks.modelcall import ModelStageConfig, Outcome, model_stage_config, request
from forenset.tasks.strategy import ModelStrategy, OfflineStrategy, StrategyStage
from forenset.text.captions import validate_caption
from forenset.text.models import CaptionResponse


class CaptionsConfig(ModelStageConfig):
    keep_manifest: bool = (
        True  # captions shipped with the source are kept (caption_source='manifest')
    )
    min_words: int = Field(25, ge=1)  # model captions: validate_caption bounds
    max_words: int = Field(160, ge=1)


TEMPLATES = ("caption",)


class CaptionsOffline(OfflineStrategy["Captions", CaptionsConfig]):
    """Pixel statistics describe each photo that has no manifest caption to keep."""

    stage: Captions

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        kept = self.stage.manifest(row)
        if kept is not None:
            yield kept
            return
        entities = json.loads(row.get("entities") or "[]")
        caption, regions = describe(decode_rgb(self.ctx.store.get_blob(row["blob"])))
        yield {
            **self.stage.carried(row),
            "caption": caption,
            "caption_source": "offline",
            "entities": dumps(entities or regions),
            "backend": "offline",
            "model": "pixel-statistics",
        }


class CaptionsModel(ModelStrategy["Captions", CaptionsConfig]):
    """The stored PNG and the ``caption`` template to the VLM, one round for the shard."""

    stage: Captions

    def ask(
        self, row: dict[str, Any], out: list[dict[str, Any]]
    ) -> tuple[ChatRequest, bytes] | None:
        """The item's request and PNG; None when a manifest caption is kept (added to ``out``)."""
        kept = self.stage.manifest(row)
        if kept is not None:
            out.append({**kept, "status": "ok", "stage_version": self.stage.version})
            return None
        try:
            png = self.ctx.store.get_blob(row["blob"])
        except Exception as e:  # noqa: BLE001 - a missing blob is this row's error
            raise StageRowError(f"cannot read image blob: {e}", retryable=True) from e
        cfg = self.cfg
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
        return req, png

    def record(self, row: dict[str, Any], png: bytes, o: Outcome) -> dict[str, Any]:
        entities = json.loads(row.get("entities") or "[]")
        if not entities:
            entities = describe(decode_rgb(png))[1]
        reply: CaptionResponse | None = o.parsed() if o.ok else None
        return {
            **self.stage.carried(row),
            "caption": reply.caption if reply else None,
            "caption_source": "model",
            "entities": dumps(entities),
            "model_entities": dumps(reply.entities) if reply else None,
            **o.trace(),
        }

    def check(self, reply: CaptionResponse) -> list[str]:
        cfg = self.cfg
        return validate_caption(reply.caption, cfg.min_words, cfg.max_words)

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        asks: dict[str, tuple[dict[str, Any], ChatRequest, bytes]] = {}
        for row in batch.to_pylist():
            made = self.prepare(row, out, partial(self.ask, row, out))
            if made is not None:
                asks[row["image_id"]] = (row, *made)
        done = self.call([(req, self.check) for _, req, _ in asks.values()])
        for image_id, (row, _, png) in asks.items():
            o = done[image_id]
            out.extend(self.convert(row, o, partial(self.record, row, png, o)))
        return out


class Captions(StrategyStage[CaptionsConfig]):
    name = "captions"
    config_model = CaptionsConfig
    version = "2"
    inputs = ("sources",)
    input_columns = ("image_id", "blob", "width", "height", "caption", "entities", "license")
    output_schema = SCHEMA
    key = "image_id"
    offline_strategy = CaptionsOffline
    model_strategy = CaptionsModel

    def stage_config(self) -> dict[str, Any]:
        return model_stage_config(self.cfg, TEMPLATES)

    @staticmethod
    def carried(row: dict[str, Any]) -> dict[str, Any]:
        """The columns carried from the source; ``model_entities`` only a caption model fills."""
        base = {k: row[k] for k in ("image_id", "blob", "width", "height", "license")}
        return {**base, "model_entities": None}

    def manifest(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The source's own caption as this stage's row, when kept (both strategies)."""
        if self.cfg.keep_manifest and row.get("caption"):
            return {
                **self.carried(row),
                "caption": row["caption"],
                "caption_source": "manifest",
                "entities": dumps(json.loads(row.get("entities") or "[]")),
                "backend": "manifest",
                "model": None,
            }
        return None
