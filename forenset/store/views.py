"""DuckDB over the run store: every stage table is a view of its current shards."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from forenset.store.run_store import RunStore


def connect(store: RunStore, tables: list[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per stage (empty, typed, when the stage has no rows)."""
    from forenset.flows.build import STAGE_BY_NAME

    con = duckdb.connect()
    if not store.is_local:
        con.register_filesystem(store.fs)
    for name in tables:
        files = [store.local_path(s.path) for s in store.manifest(name) if s.rows > 0]
        if files:
            lst = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            con.execute(
                f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{lst}], "
                "hive_partitioning = true, union_by_name = true)"
            )
        else:
            schema = (
                STAGE_BY_NAME[name].output_schema
                if name in STAGE_BY_NAME
                else pa.schema([("id", pa.string())])
            )
            con.register(f"_{name}_empty", schema.empty_table())
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM _{name}_empty")
    return con
