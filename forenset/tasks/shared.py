"""What several construction stages share, so that no stage imports another stage's module.

The shard-id prefix of text-to-image candidates (candidates writes it, diffs and splits read
it), the base of the stages that map over splits shards (perturbations, explanations), and the
base of a gate inserted after verdicts (``Gate``, ``gate_schema``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from forenset.schemas.common import B, stage_schema
from forenset.schemas.judgments import CARRY
from forenset.schemas.verdicts import SCHEMA as VERDICTS
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import C, RowStage, ShardSpec, Stage

T2I_PREFIX = "t2i-"  # candidates shards generated from prompts (no source photo)


class SplitPartitioned(Stage[C]):
    """Base for stages that map over splits shards, one output shard per split value."""

    inputs = ("splits",)
    partition_by = ("split",)

    def plan(self, upstream: ShardInfo) -> list[ShardSpec]:
        t = self.ctx.store.read_shard(upstream, columns=["split", "status"])
        values = sorted(
            {
                s
                for s, st in zip(t["split"].to_pylist(), t["status"].to_pylist(), strict=True)
                if st == "ok"
            }
        )
        return [
            self.spec(upstream.shard_id, {"split": v}, [upstream], {"split": v}) for v in values
        ]

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        t = super().read_inputs(shard)
        return t.filter(pc.equal(t["split"], shard.params["split"]))


def gate_schema(*fields: pa.Field) -> pa.Schema:
    """A gate's output: the candidate columns as verdicts writes them (declared once, in
    ``forenset.schemas.judgments.CARRY``), ``keep``, then the gate's own ``fields``."""
    return stage_schema(*[VERDICTS.field(n) for n in CARRY], pa.field("keep", B), *fields)


class Gate(RowStage[C]):
    """Base of a gate after verdicts: it reads the candidates the previous gate kept (name that
    gate in ``inputs``) and keeps or discards each (``decide``). Splits reads the last gate of
    the chain (``forenset.stages.final_gate``), so registering a gate inserts it; the candidate
    columns are carried for it. A subclass adds columns it reads to ``input_columns``."""

    gate = True
    key = "candidate_id"
    partition_by = ("generator",)
    input_columns = (*CARRY, "keep")

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        t = super().read_inputs(shard)
        return t.filter(pc.equal(t["keep"], True)) if t.num_rows else t

    def decide(self, row: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """(keep, the gate's own columns) for one kept candidate of the previous gate."""
        raise TypeError(f"gate {self.name} must define decide()")

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        keep, own = self.decide(row)
        yield {**{k: row[k] for k in CARRY}, **own, "keep": bool(keep)}
