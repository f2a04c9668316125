"""The stage contract: plain Python units over Arrow batches, testable without Prefect.

A stage declares its inputs (upstream stage names), the columns it reads, its output schema
and a ``process(batch, shard)`` method. Planning (which shards exist, and their fingerprints)
is also the stage's job, so the flow only wires stages together.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from forenset.config import BuildConfig
from forenset.errors import ConfigurationError
from forenset.schemas.common import TRACE_NAMES
from forenset.store.run_store import RunStore, ShardInfo, fingerprint


@dataclass
class ShardSpec:
    """One unit of work: which input shards, which partition, which shard-specific params."""

    stage: str
    shard_id: str
    partition: dict[str, str]
    inputs: list[ShardInfo]
    params: dict[str, Any]
    fingerprint: str = ""

    def input_ids(self) -> dict[str, str]:
        return {f"{i.stage}/{i.path}": i.content_id for i in self.inputs}

    def key(self) -> str:
        part = "/".join(f"{k}={v}" for k, v in self.partition.items())
        return f"{self.stage}/{part}/{self.shard_id}" if part else f"{self.stage}/{self.shard_id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "shard_id": self.shard_id,
            "partition": self.partition,
            "inputs": [i.to_json() for i in self.inputs],
            "params": self.params,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ShardSpec:
        return cls(
            stage=d["stage"],
            shard_id=d["shard_id"],
            partition=dict(d["partition"]),
            inputs=[ShardInfo(**i) for i in d["inputs"]],
            params=dict(d["params"]),
            fingerprint=d["fingerprint"],
        )


@dataclass
class StageContext:
    store: RunStore
    config: BuildConfig
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return self.config.seed


class Stage:
    """Base class. Subclasses set the ClassVars and implement ``process`` (or ``process_row``)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    inputs: ClassVar[tuple[str, ...]] = ()
    input_columns: ClassVar[tuple[str, ...]] = ()
    output_schema: ClassVar[pa.Schema]
    key: ClassVar[str]  # the id column of the output table
    partition_by: ClassVar[tuple[str, ...]] = ()
    only_ok_inputs: ClassVar[bool] = True

    def __init__(self, ctx: StageContext):
        self.ctx = ctx

    # -- configuration ---------------------------------------------------------
    def stage_config(self) -> dict[str, Any]:
        """The resolved config that shapes this stage's output (fingerprinted)."""
        return {}

    # -- planning ------------------------------------------------------------------
    def plan_sources(self) -> list[ShardSpec]:
        """For stages without inputs: the shards to produce."""
        raise TypeError(f"stage {self.name} has inputs; it is planned from them")

    def plan(self, upstream: ShardInfo) -> list[ShardSpec]:
        """Shards this stage derives from one committed upstream shard (default: one, same id)."""
        return [self.spec(upstream.shard_id, dict(upstream.partition), [upstream], {})]

    def spec(
        self,
        shard_id: str,
        partition: dict[str, str],
        inputs: list[ShardInfo],
        params: dict[str, Any],
    ) -> ShardSpec:
        fp = fingerprint(
            self.name,
            self.version,
            {"stage": self.stage_config(), "shard": params, "partition": partition},
            [i.fingerprint for i in inputs],
        )
        return ShardSpec(self.name, shard_id, partition, inputs, params, fp)

    # -- processing ----------------------------------------------------------------
    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        tables = [self.ctx.store.read_shard(i) for i in shard.inputs]
        if not tables:
            return pa.table({})
        t = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
        if self.only_ok_inputs and "status" in t.column_names:
            t = t.filter(pc.equal(t["status"], "ok"))
        return t

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        raise TypeError(f"stage {self.name} must define process() or process_row()")

    def counts(self, table: pa.Table) -> dict[str, int]:
        """Row counts recorded in the shard footer (status reads these, not the data)."""
        status = table.column("status").to_pylist() if table.num_rows else []
        retry = table.column("retryable").to_pylist() if table.num_rows else []
        return {
            "ok": sum(1 for s in status if s == "ok"),
            "error": sum(1 for s in status if s == "error"),
            "retryable": sum(1 for s, r in zip(status, retry, strict=True) if s == "error" and r),
        }

    def to_table(self, rows: list[dict[str, Any]]) -> pa.Table:
        names = self.output_schema.names
        clean = [{n: r.get(n) for n in names} for r in rows]
        return pa.Table.from_pylist(clean, schema=self.output_schema)


class RowStage(Stage):
    """A stage computed row by row; an exception in one row becomes that row's error.

    Except ConfigurationError, which is about the stage, not the row: it leaves ``process``.
    """

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        raise TypeError(f"row stage {self.name} must define process_row()")

    def error_row(self, row: dict[str, Any], message: str, retryable: bool) -> dict[str, Any]:
        """Keep the input's ids so the failure can be traced; the key falls back to the input's."""
        out = {
            k: v for k, v in row.items() if k in self.output_schema.names and k not in TRACE_NAMES
        }
        if out.get(self.key) is None:
            out[self.key] = str(row.get(self.key) or row.get("candidate_id") or row.get("image_id"))
        return {**out, "status": "error", "error": message, "retryable": retryable}

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        out: list[dict[str, Any]] = []
        for row in batch.to_pylist():
            t0 = time.perf_counter()
            try:
                produced = list(self.process_row(row, shard))
            except ConfigurationError:
                raise  # every row would fail the same way: fail the shard, not each row
            except StageRowError as e:
                produced = [self.error_row(row, str(e), e.retryable)]
            except Exception as e:  # noqa: BLE001 - a bad row must not crash the shard
                where = traceback.extract_tb(e.__traceback__)[-1]
                msg = f"{type(e).__name__}: {e} (at {where.name}:{where.lineno})"
                produced = [self.error_row(row, msg, True)]
            ms = (time.perf_counter() - t0) * 1000 / max(1, len(produced))
            for r in produced:
                r.setdefault("status", "ok")
                r.setdefault("stage_version", self.version)
                r.setdefault("elapsed_ms", ms)
                out.append(r)
        return self.to_table(out)


class StageRowError(Exception):
    """Raised inside ``process_row`` for an expected, explained failure of one row."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=float)
