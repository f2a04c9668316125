"""judgments: Edit-Check stage 2 — KEEP / BORDERLINE / DISCARD from instruction + difference record."""

from __future__ import annotations

import json
from typing import Any

from forenset.backends.rule_judge import judge
from forenset.schemas.judgments import SCHEMA
from forenset.tasks.base import RowStage, ShardSpec

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
    "differences",
    "psnr",
    "ssim",
)


class Judgments(RowStage):
    name = "judgments"
    version = "1"
    inputs = ("diffs",)
    input_columns = CARRY
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)

    def stage_config(self) -> dict[str, Any]:
        return self.ctx.config.judgments.model_dump(mode="json")

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        c = self.ctx.config.judgments
        v = judge(
            json.loads(row["instruction"]),
            json.loads(row["differences"]),
            keep_score=c.keep_score,
            borderline_score=c.borderline_score,
            offtarget_dominance=c.offtarget_dominance,
            max_offtarget_frac=c.max_offtarget_frac,
        )
        keep = v["verdict"] == "KEEP" or (
            v["verdict"] == "BORDERLINE" and c.borderline_policy == "keep"
        )
        review = v["verdict"] == "BORDERLINE" and c.borderline_policy == "review"
        yield {
            **{k: row[k] for k in CARRY},
            **v,
            "rule_version": c.rule_version + "/" + v["rule_version"],
            "keep": keep,
            "review": review,
            "backend": "offline",
            "model": v["rule_version"],
        }

    def counts(self, table):
        out = super().counts(table)
        keep = table.column("keep").to_pylist() if table.num_rows else []
        status = table.column("status").to_pylist() if table.num_rows else []
        out["kept"] = sum(1 for k, s in zip(keep, status, strict=True) if s == "ok" and k)
        out["discarded"] = sum(1 for k, s in zip(keep, status, strict=True) if s == "ok" and not k)
        return out
