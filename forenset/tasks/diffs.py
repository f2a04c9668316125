"""diffs: Edit-Check stage 1 — the visual differences between real and candidate.

Offline: connected regions of the pixel-difference map. With a model pool: the VLM gets
[real, candidate] with the ``visual_differences`` template; its listed differences are then
cross-checked against the same pixel map (``ground``: hallucinated / missed flags). PSNR, SSIM
and the changed fraction are always measured from pixels.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.offline_diff import fidelity, ground, pixel_differences
from forenset.images import decode_rgb
from forenset.schemas.diffs import SCHEMA
from forenset.tasks.base import RowStage, ShardSpec, dumps
from forenset.tasks.modelcall import ModelStageConfig, call_validated, model_stage_config, request
from forenset.text.checks import validate_differences
from forenset.text.models import VisualDifferences


class DiffsConfig(ModelStageConfig):
    threshold: float = Field(0.08, gt=0, lt=1)  # per-pixel |Δ| (0..1) counted as a change
    min_region_frac: float = Field(0.0015, ge=0, lt=1)  # smaller connected regions are noise
    max_regions: int = Field(8, ge=1, le=64)


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


class Diffs(RowStage):
    name = "diffs"
    config_model = DiffsConfig
    version = "2"
    inputs = ("candidates",)

    def plan(self, upstream):
        from forenset.tasks.candidates import T2I_PREFIX

        if upstream.shard_id.startswith(T2I_PREFIX):
            return []  # text-to-image candidates have no real counterpart to compare with
        return super().plan(upstream)

    input_columns = CARRY
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)

    def stage_config(self) -> dict[str, Any]:
        return model_stage_config(self.cfg, TEMPLATES)

    def measure(self, row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
        """Pixel map + fidelity (every row), and the two PNGs for a VLM."""
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
        psnr, ssim = fidelity(real, fake)
        pixels = {"changed_frac": d["changed_frac"], "psnr": psnr, "ssim": ssim}
        return d, pixels, real_png, fake_png

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        d, pixels, _, _ = self.measure(row)
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

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        c = self.cfg
        if c.llm is None:
            return super().process(batch, shard)
        out: list[dict[str, Any]] = []
        measured: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        items = []
        for row in batch.to_pylist():
            try:
                d, pixels, real_png, fake_png = self.measure(row)
            except Exception as e:  # noqa: BLE001 - an unreadable image is this row's error
                out.append(self.error_row(row, f"cannot measure the pair: {e}", True))
                continue
            measured[row["candidate_id"]] = (row, d, pixels)
            req = request(
                "diffs",
                row["candidate_id"],
                "visual_differences",
                c.prompts_dir,
                images=[real_png, fake_png],
                response_model=VisualDifferences,
            )
            items.append((req, validate_differences))
        done = call_validated(self.ctx, self.name, c.llm, items, c.max_attempts)
        for cid, (row, d, pixels) in measured.items():
            o = done[cid]
            rec: dict[str, Any] = {**{k: row[k] for k in CARRY}, **pixels, **o.trace()}
            if o.ok:
                diffs = model_differences(o.parsed())
                flags = ground(diffs, d["mask"])
                rec.update(
                    differences=dumps(diffs),
                    n_differences=len(diffs),
                    grounding=dumps({"extractor": f"{o.result.backend}/{o.result.model}", **flags}),
                )
            rec["stage_version"] = self.version
            out.append(rec)
        return self.to_table(out)
