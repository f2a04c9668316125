"""diffs: Edit-Check stage 1 — the visual differences between real and candidate."""

from __future__ import annotations

from typing import Any

from forenset.backends.offline_diff import fidelity, ground, pixel_differences
from forenset.images import decode_rgb
from forenset.schemas.diffs import SCHEMA
from forenset.tasks.base import RowStage, ShardSpec, dumps

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


class Diffs(RowStage):
    name = "diffs"
    version = "1"
    inputs = ("candidates",)
    input_columns = CARRY
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)

    def stage_config(self) -> dict[str, Any]:
        return self.ctx.config.diffs.model_dump(mode="json")

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        c = self.ctx.config.diffs
        real = decode_rgb(self.ctx.store.get_blob(row["source_blob"]))
        fake = decode_rgb(self.ctx.store.get_blob(row["blob"]))
        d = pixel_differences(
            real,
            fake,
            threshold=c.threshold,
            min_region_frac=c.min_region_frac,
            max_regions=c.max_regions,
        )
        psnr, ssim = fidelity(real, fake)
        yield {
            **{k: row[k] for k in CARRY},
            "differences": dumps(d["differences"]),
            "n_differences": len(d["differences"]),
            "changed_frac": d["changed_frac"],
            "psnr": psnr,
            "ssim": ssim,
            "grounding": dumps(
                {"extractor": "offline/pixel-diff-v1", **ground(d["differences"], d["mask"])}
            ),
            "backend": "offline",
            "model": "pixel-diff-v1",
        }
