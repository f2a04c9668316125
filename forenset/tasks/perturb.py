"""perturbations: per-split robustness variants with their op list, params, seed and PSNR/SSIM."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from forenset.images import decode_rgb, encode_png
from forenset.perturbations import (
    CATALOGUE_VERSION,
    PerturbationConfig,
    perturb_image,
    quality,
    surrogates,
)
from forenset.schemas.perturbations import SCHEMA
from forenset.seeds import derive_seed
from forenset.tasks.base import RowStage, ShardSpec, StageRowError
from forenset.tasks.shared import SplitPartitioned


class PerturbationsStageConfig(PerturbationConfig):
    """The catalogue's own config (schedules, severity bands, adversarial) + variants per sample."""

    variants: int = Field(1, ge=0, le=16)  # perturbed copies per sample


class Perturbations(SplitPartitioned[PerturbationsStageConfig], RowStage[PerturbationsStageConfig]):
    name = "perturbations"
    config_model = PerturbationsStageConfig
    version = "2"
    input_columns = ("sample_id", "label", "split", "blob")
    output_schema = SCHEMA
    key = "perturbation_id"

    def stage_config(self) -> dict[str, Any]:
        return {
            "catalogue": CATALOGUE_VERSION,
            **self.cfg.model_dump(mode="json"),
        }

    def catalogue_config(self) -> PerturbationConfig:
        d = self.cfg.model_dump()
        d.pop("variants")
        return PerturbationConfig.model_validate(d)

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        c = self.cfg
        pcfg = self.catalogue_config()
        clean = decode_rgb(self.ctx.store.get_blob(row["blob"]))
        for v in range(c.variants):
            seed = derive_seed(self.ctx.seed, self.name, row["split"], row["sample_id"], v)
            try:
                out, rec = perturb_image(clean, split=row["split"], seed=seed, config=pcfg)
            except (ValueError, RuntimeError) as e:  # deterministic for this seed: not retryable
                raise StageRowError(f"perturbation variant {v} failed: {e}") from None
            q = quality(clean, out, pcfg.ssim)
            yield {
                "perturbation_id": f"{row['sample_id']}-p{v}",
                "sample_id": row["sample_id"],
                "label": row["label"],
                "split": row["split"],
                "variant": v,
                "clean_blob": row["blob"],
                "blob": self.ctx.store.put_blob(encode_png(out)),
                "schedule": rec["schedule"],
                "ops": json.dumps(rec["ops"], sort_keys=True),
                "op_names": [o["name"] for o in rec["ops"]],
                "surrogates": surrogates(rec),
                "psnr": q["psnr"],
                "ssim": q["ssim"],
                "seed": seed,
                "backend": "offline",
                "model": "perturbation-catalogue",
            }
