"""The DAG without Prefect: a thread pool runs the shards. For tests, benchmarks and debugging."""

from __future__ import annotations

import concurrent.futures as cf
from collections import Counter

from forenset.config import BuildConfig
from forenset.flows.build import STAGE_BY_NAME, Scheduler, StageStats
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.tasks.runner import execute_shard


def run_local(
    cfg: BuildConfig,
    run_dir: str | None = None,
    *,
    retry_errors: bool = False,
    workers: int = 2,
    barrier: bool = False,
) -> tuple[RunStore, dict[str, StageStats], Counter[str]]:
    """Run every pending shard; returns the store, per-stage stats and shards executed per stage."""
    store = RunStore(run_dir or cfg.run_dir)
    ctx = StageContext(store, cfg)
    executed: Counter[str] = Counter()
    with cf.ThreadPoolExecutor(workers) as ex:

        def submit(stage_name, spec):
            executed[stage_name] += 1
            stage = STAGE_BY_NAME[stage_name](ctx)
            return ex.submit(lambda: execute_shard(stage, spec).to_json())

        stats = Scheduler(ctx, submit, retry_errors=retry_errors, barrier=barrier).run()
    return store, stats, executed
