"""What several construction stages share, so that no stage imports another stage's module.

The shard-id prefix of text-to-image candidates (candidates writes it, diffs and splits read
it) and the base of the stages that map over splits shards (perturbations, explanations).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

T2I_PREFIX = "t2i-"  # candidates shards generated from prompts (no source photo)


class SplitPartitioned(Stage):
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
