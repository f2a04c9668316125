"""The stage contract: plain Python units over Arrow batches, testable without Prefect.

A stage declares its inputs (upstream stage names), the columns it reads of each (the
projection of its input reads), its partitions, its output schema, its own config model and a
``process(batch, shard)`` method. Planning (which shards exist, and their fingerprints) is also
the stage's job, so the scheduler only wires stages together. The declarations are enforced:
``read_inputs`` reads only ``input_columns``, ``check_partition`` refuses a shard whose
partition or rows do not match ``partition_by``, and ``to_table`` refuses unknown keys (and,
in strict mode, ok rows that leave a column out).

A stage is generic in its config type (``class Captions(StrategyStage[CaptionsConfig])``), so
``self.cfg`` is typed. Another stage's config section is read only if declared in
``reads_config``, through ``config_of(section, ConfigType)`` (typed by the owner's config type); what a
stage reads of those sections is part of its shards' fingerprints (``read_config_view``).
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc

from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError, ForensetError, clip, resource_exhausted
from forenset.schemas.common import TRACE_NAMES, USAGE_FIELDS
from forenset.store.run_store import RunStore, ShardInfo, fingerprint

# Set (tests do) to make ``to_table`` refuse ok rows that leave an output column out.
STRICT_ROWS_ENV = "FORENSET_STRICT_ROWS"
ROW_ERROR_CHARS = 1000  # longest reason an error row keeps (the rest is cut with a marker)


class ContractError(ForensetError, RuntimeError):
    """A stage broke its declared contract (a bug in the stage, not a bad row)."""


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


class BuildConfigView(Protocol):
    """What stages and the scheduler read of the build config directly. The config class
    (``forenset.config.BuildConfig``) is assembled above this layer from the stages' own config
    models, so it is described here by the build-wide fields; stage sections are read through
    ``Stage.cfg`` and ``Stage.config_of``."""

    @property
    def seed(self) -> int: ...

    @property
    def shard_size(self) -> int: ...

    @property
    def tune_allocator(self) -> bool: ...

    def config_hash(self) -> str: ...


@dataclass
class StageContext:
    """What a stage runs with: the run store and the build config."""

    store: RunStore
    config: BuildConfigView

    @property
    def seed(self) -> int:
        return self.config.seed


C = TypeVar("C")  # a stage's config type
T = TypeVar("T")  # another stage's config type (``config_of``)


class Stage(Generic[C]):
    """Base class. Subclasses name their config type (``Stage[MyConfig]``), set the ClassVars and
    implement ``process`` (or ``process_row``)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    inputs: ClassVar[tuple[str, ...]] = ()
    # Columns read of each input: one tuple for every input, or {input stage: tuple}. Reads are
    # projected to these (plus ``status``), so wide upstream tables cost only what is used.
    input_columns: ClassVar[tuple[str, ...] | Mapping[str, tuple[str, ...]]] = ()
    output_schema: ClassVar[pa.Schema]
    key: ClassVar[str]  # the id column of the output table
    partition_by: ClassVar[tuple[str, ...]] = ()
    # The stage's own config model: the build config gets a ``config_key`` section (default:
    # the stage name) of this type, defaulting to ``config_default`` (else ``config_model()``).
    config_model: ClassVar[Any] = None
    config_key: ClassVar[str | None] = None
    config_default: ClassVar[Any] = None
    # Other stages' config sections this stage reads (``config_of``), by section name. What it
    # reads of them is fingerprinted (``read_config_view``).
    reads_config: ClassVar[tuple[str, ...]] = ()
    # A gathering stage is planned once, from every committed shard of its inputs, when all of
    # its ancestors are done (``plan_gathered``): sampling a benchmark set, training a detector
    # on a whole split. Its shards' fingerprints cover every input shard.
    gather: ClassVar[bool] = False
    # A gate keeps or discards candidates: its table has a boolean ``keep`` per candidate, its
    # shard footers count ``kept`` / ``discarded`` (status, the build table), and splits reads
    # the last gate of the chain (``forenset.stages.gate_names``); verdicts is the first.
    gate: ClassVar[bool] = False

    def __init__(self, ctx: StageContext):
        self.ctx = ctx

    # -- configuration ---------------------------------------------------------
    @classmethod
    def config_section(cls) -> str:
        return cls.config_key or cls.name

    @property
    def cfg(self) -> C:
        """This stage's section of the build config."""
        return cast(C, getattr(self.ctx.config, self.config_section()))

    def config_of(self, section: str, model: type[T]) -> T:
        """Another stage's config ``section``, typed by its config type ``model`` (named, not read
        from the owning stage class: no stage imports another). The section must be declared in
        ``reads_config`` (so the fingerprint covers it)."""
        if section not in self.reads_config:
            raise ContractError(
                f"stage {self.name} reads config section '{section}' without declaring it "
                "in reads_config"
            )
        return cast(T, getattr(self.ctx.config, section))

    def stage_config(self) -> Any:
        """The resolved config that shapes this stage's output (fingerprinted): by default the
        stage's config section without its operational fields (``forenset.confbase``)."""
        return fingerprint_view(self.cfg) if self.config_model is not None else {}

    def read_config_view(self, section: str, value: Any) -> Any:
        """What of another stage's config ``section`` (declared in ``reads_config``) shapes this
        stage's output, fingerprinted with its shards; by default the whole section without
        its operational fields. A stage narrows it (None: nothing) when only part of the
        section matters, or when its effect is already in ``stage_config`` or the shard
        params, so that a change elsewhere in that section does not recompute it."""
        return fingerprint_view(value)

    def read_config(self) -> dict[str, Any]:
        """The fingerprinted views of the sections in ``reads_config`` (empty views left out)."""
        views = {
            s: self.read_config_view(s, getattr(self.ctx.config, s)) for s in self.reads_config
        }
        return {s: v for s, v in views.items() if v not in (None, {}, [])}

    # -- planning ------------------------------------------------------------------
    def plan_sources(self) -> list[ShardSpec]:
        """For stages without inputs: the shards to produce."""
        raise TypeError(f"stage {self.name} has inputs; it is planned from them")

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        """For gathering stages: the shards to produce from all committed input shards."""
        raise TypeError(f"stage {self.name} is not a gathering stage")

    def plan(self, upstream: ShardInfo) -> list[ShardSpec]:
        """Shards this stage derives from one committed upstream shard (default: one, same id)."""
        return [self.spec(upstream.shard_id, dict(upstream.partition), [upstream], {})]

    def spec(
        self,
        shard_id: str,
        partition: dict[str, str],
        inputs: list[ShardInfo],
        params: dict[str, Any],
        config: Any = None,
    ) -> ShardSpec:
        """A shard and its fingerprint; ``config`` replaces ``stage_config()`` for stages whose
        shards depend on part of the stage's config only (one detector of several)."""
        payload: dict[str, Any] = {
            "seed": self.ctx.seed,  # every stage draws from it
            "stage": self.stage_config() if config is None else config,
            "shard": params,
            "partition": partition,
        }
        reads = self.read_config()
        if reads:  # absent when empty: a stage that reads no other section keeps its fingerprint
            payload["reads"] = reads
        fp = fingerprint(self.name, self.version, payload, [i.fingerprint for i in inputs])
        return ShardSpec(self.name, shard_id, partition, inputs, params, fp)

    # -- processing ----------------------------------------------------------------
    @classmethod
    def columns_of(cls, upstream: str) -> tuple[str, ...]:
        """The declared columns this stage reads of ``upstream``."""
        cols = cls.input_columns
        if isinstance(cols, Mapping):
            if upstream not in cols:
                raise ContractError(f"stage {cls.name} declares no input_columns for {upstream}")
            return tuple(cols[upstream])
        return tuple(cols)

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        """The ok rows of the input shards, projected to the declared ``input_columns``."""
        tables = []
        for info in shard.inputs:
            cols = list(dict.fromkeys([*self.columns_of(info.stage), "status"]))
            t = self.ctx.store.read_shard(info, columns=cols)
            tables.append(t.filter(pc.equal(t["status"], "ok")).drop_columns(["status"]))
        if not tables:
            return pa.table({})
        return (
            pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
        )

    def check_partition(self, shard: ShardSpec, out: pa.Table) -> None:
        """A shard's partition names exactly ``partition_by``, and its rows carry its values."""
        if set(shard.partition) != set(self.partition_by):
            raise ContractError(
                f"stage {self.name} shard {shard.shard_id} is partitioned by "
                f"{sorted(shard.partition)}, but the stage declares {list(self.partition_by)}"
            )
        for col, value in shard.partition.items():
            if col in out.column_names and out.num_rows:
                seen = set(out.column(col).drop_null().to_pylist())
                if seen - {value}:
                    raise ContractError(
                        f"stage {self.name} wrote {col}={sorted(seen - {value})} into the "
                        f"{col}={value} partition"
                    )

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
            **(self.gate_counts(table) if self.gate else {}),
        }

    def footer_counts(self, table: pa.Table, shard: ShardSpec) -> dict[str, int]:
        """What the shard's footer records: ``counts``, plus what a stage knows of the shard
        beyond its rows (splits: the rows it left out and why)."""
        return self.counts(table)

    @staticmethod
    def gate_counts(table: pa.Table) -> dict[str, int]:
        """A gate's footer counts: its ok rows kept and discarded, and for the funnel the same
        per edit kind, the discarded ones by reason (``kept/<kind>``,
        ``discarded/<kind>/<reason>``: the failure category, ``borderline`` for a BORDERLINE
        verdict the policy dropped)."""
        names = [c for c in ("kind", "verdict", "failure_category") if c in table.column_names]
        rows = table.select(["status", "keep", *names]).to_pylist() if table.num_rows else []
        ok = [r for r in rows if r["status"] == "ok"]
        out = {"kept": sum(bool(r["keep"]) for r in ok)}
        out["discarded"] = len(ok) - out["kept"]
        for r in ok:
            kind = r.get("kind") or "unknown"
            if r["keep"]:
                key = f"kept/{kind}"
            else:
                why = "borderline" if r.get("verdict") == "BORDERLINE" else None
                key = f"discarded/{kind}/{why or r.get('failure_category') or 'unknown'}"
            out[key] = out.get(key, 0) + 1
        return out

    def error_row(self, row: dict[str, Any], message: str, retryable: bool) -> dict[str, Any]:
        """Keep the input's ids so the failure can be traced; the key falls back to the input's."""
        out = {
            k: v for k, v in row.items() if k in self.output_schema.names and k not in TRACE_NAMES
        }
        if out.get(self.key) is None:
            out[self.key] = str(row.get(self.key) or row.get("candidate_id") or row.get("image_id"))
        return {**out, "status": "error", "error": message, "retryable": retryable}

    def to_table(self, rows: list[dict[str, Any]]) -> pa.Table:
        """Rows as the output table. A key the schema does not have is a bug in the stage and
        raises; with ``FORENSET_STRICT_ROWS`` set (the test suite), so does an ok row that
        leaves a column out (error rows may: they carry what was known when the row failed)."""
        names = self.output_schema.names
        known = set(names)
        # trace and usage columns default to null (no prompt, no tokens on the offline path)
        own = known - set(TRACE_NAMES) - {f.name for f in USAGE_FIELDS}
        strict = bool(os.environ.get(STRICT_ROWS_ENV))
        for r in rows:
            unknown = r.keys() - known
            if unknown:
                raise ContractError(f"stage {self.name} wrote unknown column(s) {sorted(unknown)}")
            if strict and r.get("status") == "ok" and not own <= r.keys():
                missing = sorted(own - r.keys())
                raise ContractError(f"stage {self.name} left column(s) {missing} out of an ok row")
        clean = [{n: r.get(n) for n in names} for r in rows]
        for r in clean:  # a reason quoting a 5 MB name is cut here, once, for every stage
            if isinstance(r.get("error"), str) and len(r["error"]) > ROW_ERROR_CHARS:
                r["error"] = clip(r["error"], ROW_ERROR_CHARS)
        return pa.Table.from_pylist(clean, schema=self.output_schema)


class RowStage(Stage[C]):
    """A stage computed row by row; an exception in one row becomes that row's error.

    Except ``ConfigurationError`` and ``ContractError``, which are about the stage, not the row:
    they leave ``process`` (the shard fails as fatal and the build stops).
    """

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        raise TypeError(f"row stage {self.name} must define process_row()")

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        out: list[dict[str, Any]] = []
        for row in batch.to_pylist():
            out.extend(isolate(self, row, partial(self.process_row, row, shard)))
        return self.to_table(out)


def describe(e: BaseException) -> str:
    """An unexpected exception as a row's error: type, message and the line that raised."""
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" (at {where.name}:{where.lineno})" if where else ""
    return writable(f"{type(e).__name__}: {e}{at}")


def writable(text: str) -> str:
    """``text`` as Arrow can store it: a lone surrogate (say, quoted from a broken model reply)
    is escaped, so the error row that reports it does not fail the shard in its turn."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def isolate(
    stage: Stage[Any],
    row: dict[str, Any],
    produce: Callable[[], Iterable[dict[str, Any]]],
    *,
    timed: bool = True,
) -> list[dict[str, Any]]:
    """The rows ``produce()`` makes from one input row, with RowStage's error rule: an exception
    is that row's error (``StageRowError``: explained, with its own ``retryable``); a
    ``ConfigurationError`` or ``ContractError`` would fail every row alike, so it fails the
    shard. Rows get ``status``/``stage_version`` defaults and, when ``timed``, ``elapsed_ms``."""
    t0 = time.perf_counter()
    try:
        produced = list(produce())
    except StageRowError as e:
        produced = [stage.error_row(row, writable(str(e)), e.retryable)]
    except (ConfigurationError, ContractError):
        raise  # every row would fail alike: the shard fails, the build stops
    except Exception as e:  # noqa: BLE001 - a bad row must not crash the shard
        if resource_exhausted(e):  # a full disk is no row's fault: the shard fails, a rerun
            raise  # after the cause is fixed redoes it (never a terminal row)
        produced = [stage.error_row(row, describe(e), True)]
    ms = (time.perf_counter() - t0) * 1000 / max(1, len(produced))
    for r in produced:
        r.setdefault("status", "ok")
        r.setdefault("stage_version", stage.version)
        if timed:
            r.setdefault("elapsed_ms", ms)
    return produced


class StageRowError(ForensetError):
    """Raised inside ``process_row`` for an expected, explained failure of one row."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=float)
