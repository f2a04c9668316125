"""DuckDB over the run store: every stage table is a view of its current shards."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
from fsspec import AbstractFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from forenset.families import load_target, table_targets
from forenset.stages import non_stage_tables
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
    return list(dict.fromkeys([*stages, *non_stage_tables()]))


def gate_tables(store: RunStore) -> list[str]:
    """The run's gates (``Stage.gate``: stages that keep or discard candidates) in DAG order,
    as the last build recorded them from the registry (state.json), or, for a run built before
    that record, the stages whose shard footers count kept candidates. Reads no stage code."""
    state = store.read_json("state.json", default={}) or {}
    names = table_names(store)
    if "gates" in state:
        return [n for n in state["gates"] if n in names]
    return [n for n in names if any("kept" in s.counts for s in store.manifest(n))]


def _empty_schema(store: RunStore, name: str) -> pa.Schema:
    """A stage's schema from its manifest; the stage class only for runs built before
    manifests recorded it (importing every stage module costs seconds)."""
    schema = store.manifest_schema(name)
    if schema is not None:
        return schema
    if name == "annotations":  # typed before the first import, so documented queries work
        from forenset.schemas.annotations import SCHEMA

        return SCHEMA
    declared = table_targets()  # a family's non-stage table (``Family.tables``)
    if name in declared:
        schema = load_target(declared[name])
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"{declared[name]} is not an Arrow schema")
        return schema
    if name in non_stage_tables():
        return pa.schema([("id", pa.string())])
    from forenset.stages import stage_class

    try:
        return stage_class(name).output_schema
    except KeyError:  # a table of a plugin that is not installed here
        return pa.schema([("id", pa.string())])


class _ShardFiles(MemoryFileSystem):
    """The shard files of one connection's views, fetched by the run store (one GET each, or
    none when this process has them already) and held in memory for DuckDB: on an object
    store DuckDB's reads through fsspec cost a HEAD and ranged GETs per file and query."""

    protocol = ("forenset-shards",)
    _strip_protocol: Any = classmethod(AbstractFileSystem._strip_protocol.__func__)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.store = {}  # this instance's files (MemoryFileSystem shares a class-level dict)
        self.pseudo_dirs = [""]

    def add(self, store: RunStore, infos: list) -> list[str]:
        paths = []
        for info, data in zip(infos, store.shard_bytes(infos), strict=True):
            path = f"{store.root.strip('/')}/{info.path}"
            self.pipe_file(path, data)
            paths.append(f"forenset-shards://{path}")
        return paths


def connect(store: RunStore, tables: list[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per stage (empty, typed, when the stage has no rows).

    Local runs: views over the shard files. Object stores: over copies of them in memory,
    fetched once (``_ShardFiles``); manifests say which files, so no listing is involved."""
    con = duckdb.connect()
    mem = None
    if not store.is_local:
        mem = _ShardFiles(skip_instance_cache=True)
        con.register_filesystem(mem)
    for name in tables:
        infos = [s for s in store.manifest(name) if s.rows > 0]
        if mem is not None:
            files = mem.add(store, infos) if infos else []
        else:
            files = [store.local_path(s.path) for s in infos]
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
