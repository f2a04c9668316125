"""Run the DAG without Prefect (a thread pool stands in), and read stage tables back."""

from __future__ import annotations

import concurrent.futures as cf
from collections import Counter

import pyarrow as pa

from forenset.config import BuildConfig
from forenset.flows.build import STAGE_BY_NAME, STAGES, Scheduler
from forenset.schemas.common import VOLATILE
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.tasks.runner import execute_shard


def run_local(cfg: BuildConfig, run_dir: str | None = None, retry_errors: bool = False):
    """The scheduler with a plain executor: proves stages and planning need no Prefect."""
    store = RunStore(run_dir or cfg.run_dir)
    ctx = StageContext(store, cfg)
    executed: Counter[str] = Counter()
    with cf.ThreadPoolExecutor(2) as ex:

        def submit(stage_name, spec):
            executed[stage_name] += 1
            stage = STAGE_BY_NAME[stage_name](ctx)
            return ex.submit(lambda: execute_shard(stage, spec).to_json())

        stats = Scheduler(ctx, submit, retry_errors=retry_errors).run()
    return store, stats, executed


def rows(store: RunStore, stage: str) -> list[dict]:
    """All rows of a stage's current shards, minus volatile columns, sorted by key."""
    key = STAGE_BY_NAME[stage].key
    out = []
    for info in store.manifest(stage):
        t: pa.Table = store.read_shard(info)
        out.extend({k: v for k, v in r.items() if k not in VOLATILE} for r in t.to_pylist())
    return sorted(out, key=lambda r: str(r[key]))


def all_rows(store: RunStore) -> dict[str, list[dict]]:
    return {s.name: rows(store, s.name) for s in STAGES}
