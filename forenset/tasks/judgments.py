"""judgments: Edit-Check stage 2 — each judge's raw record from instruction + difference record.

Raw records only; the verdict is the ``verdicts`` stage's versioned rule, so a new threshold
or an extra judge needs no new judge calls for the others.
"""

from __future__ import annotations

import json
from typing import Any

from forenset.backends.rule_judge import RULE_VERSION, judge
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
    version = "2"
    inputs = ("diffs",)
    input_columns = CARRY + ("grounding",)
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
            offtarget_dominance=c.offtarget_dominance,
            max_offtarget_frac=c.max_offtarget_frac,
            grounding=json.loads(row.get("grounding") or "{}"),
        )
        yield {
            **{k: row[k] for k in CARRY},
            **v,
            "judge": f"offline/{RULE_VERSION}",
            "backend": "offline",
            "model": RULE_VERSION,
        }
