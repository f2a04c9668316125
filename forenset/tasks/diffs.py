"""diffs: Edit-Check stage 1 — the visual differences between real and candidate.

Offline: connected regions of the pixel-difference map. With a model pool: the VLM gets
[real, candidate] with the ``visual_differences`` template; its listed differences are then
cross-checked against the same pixel map (``ground``: hallucinated / missed flags). PSNR, SSIM
and the changed fraction are always measured from pixels.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from typing import Any

import cv2
import numpy as np
import pyarrow as pa
from pydantic import Field, model_validator

from forenset.backends.fidelity import check_local, clip_i, lpips, off_target
from forenset.backends.llm.types import ChatRequest
from forenset.backends.offline_diff import fidelity, ground, pixel_differences, ssim_map
from forenset.confbase import operational
from forenset.images import decode_rgb
from forenset.perturbations.encoder_specs import check_encoder_spec
from forenset.schemas.diffs import SCHEMA
from forenset.tasks.base import ShardSpec, StageRowError, dumps
from forenset.tasks.modelcall import ModelStageConfig, Outcome, model_stage_config, request
from forenset.tasks.shared import T2I_PREFIX
from forenset.tasks.strategy import ModelStrategy, OfflineStrategy, StrategyStage
from forenset.text.checks import validate_differences
from forenset.text.models import VisualDifferences


class DiffsConfig(ModelStageConfig):
    threshold: float = Field(0.08, gt=0, lt=1)  # per-pixel |Δ| (0..1) counted as a change
    min_region_frac: float = Field(0.0015, ge=0, lt=1)  # smaller connected regions are noise
    max_regions: int = Field(8, ge=1, le=64)
    # preservation fidelity models, from local paths only (null with the reason without one)
    clip_encoder: str | None = None  # CLIP-I: an image encoder spec, e.g. hf:/models/clip-vit
    lpips_model: str | None = None  # LPIPS: a TorchScript file of an LPIPS network
    fidelity_device: str = operational("cpu")

    @model_validator(mode="after")
    def _models_exist(self) -> DiffsConfig:
        check_local(self.lpips_model, "diffs.lpips_model")
        if self.clip_encoder:
            check_encoder_spec(self.clip_encoder)
        return self


TEMPLATES = ("visual_differences",)
CARRY = (
    "candidate_id",
    "instruction_id",
    "image_id",
    "generator",
    "generator_family",
    "source_blob",
    "blob",
    "caption",
    "instruction",
    "kind",
    "family",
    "truth",
)


def model_differences(reply: VisualDifferences) -> list[dict[str, Any]]:
    """A VLM's differences in the pixel extractor's record shape (ids d0.., box area)."""
    out = []
    for i, d in enumerate(reply.differences):
        rec = {"id": f"d{i}", **d.model_dump()}
        if d.bbox is not None:
            x0, y0, x1, y1 = d.bbox
            rec["area"] = round(max(0.0, x1 - x0) * max(0.0, y1 - y0), 5)
        out.append(rec)
    return out


class DiffsOffline(OfflineStrategy["Diffs", DiffsConfig]):
    """Connected regions of the pixel-difference map are the differences."""

    stage: Diffs

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        d, pixels, _, _ = self.stage.measure(row)
        yield {
            **{k: row[k] for k in CARRY},
            **pixels,
            "differences": dumps(d["differences"]),
            "n_differences": len(d["differences"]),
            "grounding": dumps(
                {"extractor": "offline/pixel-diff-v1", **ground(d["differences"], d["mask"])}
            ),
            "backend": "offline",
            "model": "pixel-diff-v1",
        }


class DiffsModel(ModelStrategy["Diffs", DiffsConfig]):
    """The VLM lists the differences of [real, candidate]; the pixel map grounds them."""

    stage: Diffs

    def ask(self, row: dict[str, Any]) -> tuple[ChatRequest, dict[str, Any], dict[str, Any]]:
        """The item's request, its pixel map and its fidelity measures."""
        try:
            d, pixels, real_png, fake_png = self.stage.measure(row)
        except Exception as e:  # noqa: BLE001 - an unreadable image is this row's error
            raise StageRowError(f"cannot measure the pair: {e}", retryable=True) from e
        req = request(
            "diffs",
            row["candidate_id"],
            "visual_differences",
            self.cfg.prompts_dir,
            images=[real_png, fake_png],
            response_model=VisualDifferences,
        )
        return req, d, pixels

    def record(
        self, row: dict[str, Any], d: dict[str, Any], pixels: dict[str, Any], o: Outcome
    ) -> dict[str, Any]:
        rec: dict[str, Any] = {**{k: row[k] for k in CARRY}, **pixels, **o.trace()}
        if o.ok:
            diffs = model_differences(o.parsed())
            flags = ground(diffs, d["mask"])
            rec.update(
                differences=dumps(diffs),
                n_differences=len(diffs),
                grounding=dumps({"extractor": f"{o.result.backend}/{o.result.model}", **flags}),
            )
        return rec

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        asks: dict[str, tuple[dict[str, Any], ChatRequest, dict[str, Any], dict[str, Any]]] = {}
        for row in batch.to_pylist():
            made = self.prepare(row, out, partial(self.ask, row))
            if made is not None:
                asks[row["candidate_id"]] = (row, *made)
        done = self.call([(req, validate_differences) for _, req, _, _ in asks.values()])
        for cid, (row, _, d, pixels) in asks.items():
            o = done[cid]
            out.extend(self.convert(row, o, partial(self.record, row, d, pixels, o)))
        return out


class Diffs(StrategyStage[DiffsConfig]):
    name = "diffs"
    config_model = DiffsConfig
    version = "3"
    inputs = ("candidates",)

    def plan(self, upstream):
        if upstream.shard_id.startswith(T2I_PREFIX):
            return []  # text-to-image candidates have no real counterpart to compare with
        return super().plan(upstream)

    input_columns = CARRY
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)
    offline_strategy = DiffsOffline
    model_strategy = DiffsModel

    def stage_config(self) -> dict[str, Any]:
        return model_stage_config(self.cfg, TEMPLATES)

    def measure(self, row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
        """Pixel map + fidelity (every row, both strategies), and the two PNGs for a VLM."""
        c = self.cfg
        real_png = self.ctx.store.get_blob(row["source_blob"])
        fake_png = self.ctx.store.get_blob(row["blob"])
        real, fake = decode_rgb(real_png), decode_rgb(fake_png)
        d = pixel_differences(
            real,
            fake,
            threshold=c.threshold,
            min_region_frac=c.min_region_frac,
            max_regions=c.max_regions,
        )
        if fake.shape != real.shape:  # as pixel_differences and fidelity compare them
            fake = cv2.resize(fake, (real.shape[1], real.shape[0]), interpolation=cv2.INTER_AREA)
        smap = ssim_map(real, fake)  # one RGB SSIM map for the whole-image and off-target SSIM
        psnr, ssim = fidelity(real, fake, smap)
        pixels = {"changed_frac": d["changed_frac"], "psnr": psnr, "ssim": ssim}
        pixels.update(self.preservation(row, real, fake, smap))
        return d, pixels, real_png, fake_png

    def preservation(
        self,
        row: dict[str, Any],
        real: np.ndarray,
        fake: np.ndarray,
        smap: tuple[np.ndarray, int] | None = None,
    ) -> dict[str, Any]:
        """Off-target PSNR/SSIM (outside the instruction's target box), LPIPS and CLIP-I; each
        null value's reason in ``fidelity_note``."""
        c = self.cfg
        try:
            box = json.loads(row.get("instruction") or "{}").get("change_bbox")
        except (ValueError, AttributeError):
            box = None
        out = off_target(real, fake, box, smap)
        notes = [out.pop("note")]
        out["lpips"], why = lpips(real, fake, c.lpips_model, c.fidelity_device)
        notes.append(why)
        out["clip_i"], why = clip_i(real, fake, c.clip_encoder, c.fidelity_device)
        notes.append(why)
        out["fidelity_note"] = "; ".join(n for n in notes if n) or None
        return out
