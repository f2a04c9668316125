"""A model-using stage's two ways of computing a shard: its offline algorithm, its model path.

The stage keeps its contract (inputs, columns, partitions, schema, config, planning) and picks
one strategy from its config in one place (``StrategyStage.strategy``: ``llm`` set or not).
Both strategies isolate failures per item, so one bad item is one error row and the rest of
the shard is written:

- ``OfflineStrategy`` runs ``process_row`` per input row under RowStage's rule
  (``forenset.tasks.base.isolate``), unchanged.
- ``ModelStrategy`` keeps the model path's speed (all of a shard's requests in one
  ``call_validated``, one ``run_chat`` per round) and isolates around it: building one item's
  request (``prepare``) and turning one item's replies into rows (``convert``) each run in their
  own try. A reply that cannot be turned into rows, or whose rows Arrow cannot hold, is that
  item's error row ("unusable model reply: ...", not retryable: the cached reply would come
  back), carrying the calls' trace and usage so the spend still adds up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

import pyarrow as pa

from forenset.backends.llm.types import ChatRequest, LLMSettings
from forenset.errors import ConfigurationError
from forenset.tasks.base import (
    ContractError,
    ShardSpec,
    Stage,
    StageContext,
    StageRowError,
    describe,
    isolate,
    writable,
)
from forenset.tasks.modelcall import Outcome, Validator, call_validated

T = TypeVar("T")


class ModelConfig(Protocol):
    """A model stage's config: ``llm`` set picks the model path (``ModelStageConfig`` and the
    scenario and prompt stages' configs)."""

    @property
    def llm(self) -> LLMSettings | None: ...


class ModelCallConfig(ModelConfig, Protocol):
    """What ``ModelStrategy.call`` reads: the pool and the attempts per item."""

    @property
    def max_attempts(self) -> int: ...


MC = TypeVar("MC", bound=ModelConfig)  # a strategy stage's config type

# How an error row names a model reply that could not be turned into rows.
UNUSABLE = "unusable model reply"


S = TypeVar("S", bound="Stage[Any]")  # the strategy's stage class
SC = TypeVar("SC")  # that stage's config type


class Strategy(Generic[S, SC]):
    """One way of computing a stage's rows for a shard (the stage turns them into its table).
    Generic in its stage and that stage's config (``OfflineStrategy["Captions",
    CaptionsConfig]``), so ``self.stage`` and ``self.cfg`` are typed."""

    def __init__(self, stage: S):
        self.stage = stage

    @property
    def cfg(self) -> SC:
        return cast(SC, self.stage.cfg)

    @property
    def ctx(self) -> StageContext:
        return self.stage.ctx

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        raise TypeError(f"strategy {type(self).__name__} must define run()")


class OfflineStrategy(Strategy[S, SC]):
    """The offline algorithm, row by row under RowStage's rule. (Its values come from Arrow
    inputs and the stage's own code, so rows are not written as a table per row, as model
    replies are: that would cost about 0.15 ms a row, as much as some stages' work.)"""

    # Rows get a measured ``elapsed_ms`` unless the stage's rows never had one.
    timed: ClassVar[bool] = True

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        raise TypeError(f"the offline strategy of {self.stage.name} must define process_row()")

    def isolated(
        self,
        row: dict[str, Any],
        produce: Callable[[], dict[str, Any] | Iterable[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        """The row(s) ``produce()`` makes of one input row, or that row's error row."""

        def rows() -> Iterable[dict[str, Any]]:
            made = produce()
            return [made] if isinstance(made, dict) else made

        return isolate(self.stage, row, rows, timed=self.timed)

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for row in batch.to_pylist():
            out.extend(self.isolated(row, partial(self.process_row, row, shard)))
        return out


class ModelStrategy(Strategy[S, SC]):
    """The model path: ``prepare`` each item's request, ``call`` once per round, ``convert``
    each item's outcome; the first and last in a try per item."""

    def call(
        self, items: Sequence[tuple[ChatRequest, Validator]], settings: LLMSettings | None = None
    ) -> dict[str, Outcome]:
        """One round for the whole shard (one run_chat per attempt) through the stage's pool."""
        c = cast(ModelCallConfig, self.cfg)  # model stages' configs; some pass their own pool
        pool = settings or c.llm
        if pool is None:  # the model path is taken only with ``llm`` set
            raise ConfigurationError(f"stage {self.stage.name} has no model pool (llm) to call")
        return call_validated(self.ctx, self.stage.name, pool, items, c.max_attempts)

    def prepare(
        self, row: dict[str, Any], out: list[dict[str, Any]], make: Callable[[], T]
    ) -> T | None:
        """``make()`` for one item (read its images, build its request; it must not return
        None), or None with the item's error row added to ``out``: a ``StageRowError`` as
        explained, any other exception as retryable (RowStage's rule)."""
        try:
            return make()
        except StageRowError as e:
            out.append(self.stage.error_row(row, writable(str(e)), e.retryable))
        except (ConfigurationError, ContractError):
            raise
        except Exception as e:  # noqa: BLE001 - one item's input must not fail the shard
            out.append(self.stage.error_row(row, describe(e), True))
        return None

    def from_replies(
        self,
        row: dict[str, Any],
        outcomes: Outcome | Sequence[Outcome],
        out: list[dict[str, Any]],
        make: Callable[[], T],
    ) -> T | None:
        """``make()`` over one item's replies (it must not return None), or None with the
        item's error row added to ``out``: an exception there means a reply is unusable (not
        retryable: the cached reply would come back)."""
        try:
            return make()
        except (ConfigurationError, ContractError):
            raise
        except StageRowError as e:
            out.append(self.reply_error(row, outcomes, writable(str(e)), e.retryable))
        except Exception as e:  # noqa: BLE001 - one bad reply must not fail the shard
            out.append(self.reply_error(row, outcomes, f"{UNUSABLE}: {describe(e)}", False))
        return None

    def convert(
        self,
        row: dict[str, Any],
        outcomes: Outcome | Sequence[Outcome],
        make: Callable[[], dict[str, Any] | list[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        """The row(s) ``make()`` turns one item's replies into, written as a table here already
        (so a value Arrow cannot hold, such as a lone surrogate in a reply's text, fails this
        item only), or the item's error row."""

        def checked() -> list[dict[str, Any]]:
            made = make()
            rows = [made] if isinstance(made, dict) else made
            self.stage.to_table(rows)
            return rows

        out: list[dict[str, Any]] = []
        rows = self.from_replies(row, outcomes, out, checked)
        return out if rows is None else rows

    def reply_error(
        self,
        row: dict[str, Any],
        outcomes: Outcome | Sequence[Outcome],
        message: str,
        retryable: bool,
    ) -> dict[str, Any]:
        """An item's error row after its calls: the input's ids, the first call's trace and
        the usage of all of them (they were paid for)."""
        calls = [outcomes] if isinstance(outcomes, Outcome) else list(outcomes)
        trace = calls[0].trace()
        trace.update(
            input_tokens=sum(o.input_tokens for o in calls),
            output_tokens=sum(o.output_tokens for o in calls),
            cost_usd=sum(o.cost_usd for o in calls),
            cached=all(o.cached for o in calls),
        )
        return {**trace, **self.stage.error_row(row, message, retryable)}


class StrategyStage(Stage[MC]):
    """A stage with an offline algorithm and a model path; the config picks one, here only."""

    offline_strategy: ClassVar[type[OfflineStrategy[Any, Any]]]
    model_strategy: ClassVar[type[ModelStrategy[Any, Any]]]

    def strategy(self) -> Strategy[Any, Any]:
        """The model path when the stage's config names a model pool (``llm``), else offline."""
        kind = self.offline_strategy if self.cfg.llm is None else self.model_strategy
        return kind(self)

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        rows = self.strategy().run(batch, shard)
        for r in rows:
            r.setdefault("stage_version", self.version)
        return self.to_table(rows)
