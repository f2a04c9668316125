"""verdicts: one KEEP / BORDERLINE / DISCARD per candidate from all its judges' raw records."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from forenset.backends.rule_judge import aggregate
from forenset.schemas.verdicts import SCHEMA
from forenset.tasks.base import ShardSpec, Stage, dumps
from forenset.tasks.judgments import CARRY


class Verdicts(Stage):
    name = "verdicts"
    version = "1"
    inputs = ("judgments",)
    input_columns = CARRY + ("judge", "final_score", "failure_category", "rationale")
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)

    def stage_config(self) -> dict[str, Any]:
        return self.ctx.config.verdicts.model_dump(mode="json")

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        c = self.ctx.config.verdicts
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in batch.to_pylist():
            groups[r["candidate_id"]].append(r)
        rule = dumps(c.model_dump(mode="json"))
        out = []
        for cid in sorted(groups):
            recs = groups[cid]
            v = aggregate(
                recs,
                combine=c.combine,
                keep_score=c.keep_score,
                borderline_score=c.borderline_score,
                hard_discard=c.hard_discard,
            )
            keep = v["verdict"] == "KEEP" or (
                v["verdict"] == "BORDERLINE" and c.borderline_policy == "keep"
            )
            out.append(
                {
                    **{k: recs[0][k] for k in CARRY},
                    **v,
                    "n_judges": len(recs),
                    "aggregation": rule,
                    "keep": keep,
                    "review": v["verdict"] == "BORDERLINE" and c.borderline_policy == "review",
                    "status": "ok",
                    "backend": "rules",
                    "model": c.rule_version,
                    "stage_version": self.version,
                    "elapsed_ms": 0.0,
                }
            )
        return self.to_table(out)

    def counts(self, table: pa.Table) -> dict[str, int]:
        out = super().counts(table)
        keep = table.column("keep").to_pylist() if table.num_rows else []
        out["kept"] = sum(1 for k in keep if k)
        out["discarded"] = sum(1 for k in keep if not k)
        return out
