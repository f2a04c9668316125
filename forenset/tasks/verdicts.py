"""verdicts: one KEEP / BORDERLINE / DISCARD per candidate from all its judges' raw records."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

import pyarrow as pa
from pydantic import Field, model_validator

from forenset.backends.rule_judge import aggregate
from forenset.confbase import Strict
from forenset.schemas.judgments import CARRY
from forenset.schemas.verdicts import SCHEMA
from forenset.tasks.base import ShardSpec, Stage, dumps


class VerdictsConfig(Strict):
    """The versioned aggregation rule: judges' raw records -> one verdict per candidate.

    ``combine``, ``keep_score`` and ``borderline_score`` apply with ``decide: score``; with the
    default ``decide: judge`` ``score`` is still the combined score, for the record. Changing a threshold here re-runs verdicts and what follows, never a judge call.
    """

    rule_version: str = "agg-v2"
    # "judge": the text judge's own KEEP / BORDERLINE / DISCARD is the verdict (XPlainVerse
    # Step 3; several judges vote, ties go to the stricter). "score": combine the judges'
    # final scores and re-threshold them (keep_score / borderline_score), an explicit option.
    decide: Literal["judge", "score"] = "judge"
    combine: Literal["mean", "min", "max"] = "mean"
    keep_score: float = Field(0.6, ge=0, le=1)
    borderline_score: float = Field(0.35, ge=0, le=1)
    hard_discard: list[str] = ["off_target", "severe_artifacts"]  # any judge saying so discards
    borderline_policy: Literal["keep", "drop", "review"] = "drop"

    @model_validator(mode="after")
    def _order(self) -> VerdictsConfig:
        if self.borderline_score > self.keep_score:
            raise ValueError("borderline_score must not exceed keep_score")
        return self


class Verdicts(Stage[VerdictsConfig]):
    name = "verdicts"
    config_model = VerdictsConfig
    version = "2"  # 2: footers count kept / discarded per edit kind and reason (the funnel)
    inputs = ("judgments",)
    input_columns = CARRY + ("judge", "final_score", "verdict", "failure_category", "rationale")
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)
    gate = True  # the first gate: Edit-Check's KEEP / BORDERLINE / DISCARD as ``keep``

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        c = self.cfg
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
                decide=c.decide,
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
