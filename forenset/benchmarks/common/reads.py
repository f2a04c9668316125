"""Reading helpers the benchmark stages share (not a stage: stages never import each other)."""

from __future__ import annotations

import pyarrow as pa

from forenset.tasks.base import ShardSpec, Stage


def read_tagged(stage: Stage, shard: ShardSpec) -> pa.Table:
    """Each input shard's declared columns, tagged with the stage they came from (``input``)."""
    tables = []
    for info in shard.inputs:
        one = ShardSpec(shard.stage, shard.shard_id, shard.partition, [info], shard.params)
        t = Stage.read_inputs(stage, one)
        tables.append(t.append_column("input", pa.array([info.stage] * t.num_rows, pa.string())))
    if not tables:
        return pa.table({"input": pa.array([], pa.string())})
    return pa.concat_tables(tables, promote_options="permissive")
