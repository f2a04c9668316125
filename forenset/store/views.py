"""DuckDB over the run store: every stage table is a view of its current shards."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from forenset.stages import NON_STAGE_TABLES
from forenset.stages import table_names as registered_tables
from forenset.store.run_store import RunStore


def table_names(store: RunStore) -> list[str]:
    """The tables of a run: its stages in DAG order as the last build recorded them
    (state.json), then the non-stage tables. Reads no stage code; a run never built falls back
    to the registered stages."""
    state = store.read_json("state.json", default={}) or {}
    stages = state.get("order") or store.stages_present()
    if not stages:
        return registered_tables()
    return list(dict.fromkeys([*stages, *NON_STAGE_TABLES]))


def _empty_schema(store: RunStore, name: str) -> pa.Schema:
    """A stage's schema from its manifest; the stage class only for runs built before
    manifests recorded it (importing every stage module costs seconds)."""
    schema = store.manifest_schema(name)
    if schema is not None:
        return schema
    if name == "annotations":  # typed before the first import, so documented queries work
        from forenset.schemas.annotations import SCHEMA

        return SCHEMA
    if name == "gold_references":
        from forenset.schemas.gold_references import SCHEMA as GOLD

        return GOLD
    if name in NON_STAGE_TABLES:
        return pa.schema([("id", pa.string())])
    from forenset.stages import stage_class

    try:
        return stage_class(name).output_schema
    except KeyError:  # a table of a plugin that is not installed here
        return pa.schema([("id", pa.string())])


def connect(store: RunStore, tables: list[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per stage (empty, typed, when the stage has no rows)."""
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
            # an empty typed table, its Arrow source unregistered at once: SHOW TABLES lists
            # the run's tables only, no internal helper
            schema = _empty_schema(store, name)
            tmp = f"_{name}_empty"
            con.register(tmp, schema.empty_table())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {tmp}")
            con.unregister(tmp)
    return con
