"""The DAG without Prefect: a thread pool runs the shards. For tests, benchmarks and debugging."""

from __future__ import annotations

import concurrent.futures as cf
from collections import Counter

from forenset.config import BuildConfig
from forenset.scheduler import BuildControl, Scheduler, StageStats, dispatch_for
from forenset.stages import stage_class
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.worker import run_shards


def run_local(
    cfg: BuildConfig,
    run_dir: str | None = None,
    *,
    retry_errors: bool = False,
    workers: int = 2,
    barrier: bool = False,
    bundled: bool = False,
    control: BuildControl | None = None,
) -> tuple[RunStore, dict[str, StageStats], Counter[str]]:
    """Run every pending shard; returns the store, per-stage stats and shards executed per stage.

    By default each shard is its own task, submitted when planned (a bare loop has no per-task
    cost to amortise). ``bundled=True`` feeds the pool as the Prefect build feeds its runners:
    the config's in-flight slots and task bundling."""
    store = RunStore(run_dir or cfg.run_dir)
    ctx = StageContext(store, cfg)
    executed: Counter[str] = Counter()
    with cf.ThreadPoolExecutor(workers) as ex:

        def submit(stage_name, specs):
            executed[stage_name] += len(specs)
            stage = stage_class(stage_name)(ctx)
            return ex.submit(run_shards, stage, specs)

        dispatch = (lambda stage: dispatch_for(cfg, stage)) if bundled else None
        stats = Scheduler(
            ctx,
            submit,
            retry_errors=retry_errors,
            barrier=barrier,
            dispatch=dispatch,
            control=control,
        ).run()
    return store, stats, executed
