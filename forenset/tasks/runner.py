"""Run one shard outside any orchestrator: read inputs, process, commit atomically."""

from __future__ import annotations

import threading
import time
from typing import Any

from forenset.config import BuildConfig
from forenset.runtime import tune_allocator
from forenset.store.run_store import RunStore, ShardInfo
from forenset.tasks.base import ShardSpec, Stage, StageContext

_CTX: dict[tuple[str, str], StageContext] = {}
_LOCK = threading.Lock()


def context_for(run_uri: str, config: BuildConfig | dict[str, Any]) -> StageContext:
    """One context (store + config) per process and config, reused across shards."""
    cfg = config if isinstance(config, BuildConfig) else BuildConfig.model_validate(config)
    key = (run_uri, cfg.config_hash())
    with _LOCK:
        if key not in _CTX:
            _CTX[key] = StageContext(RunStore(run_uri), cfg)
        return _CTX[key]


def execute_shard(stage: Stage, spec: ShardSpec) -> ShardInfo:
    if stage.ctx.config.tune_allocator:  # once per worker process; see forenset/runtime.py
        tune_allocator()
    t0 = time.perf_counter()
    batch = stage.read_inputs(spec)
    out = stage.process(batch, spec)
    counts = stage.counts(out)
    counts["ms"] = int((time.perf_counter() - t0) * 1000)
    return stage.ctx.store.write_shard(
        stage.name,
        spec.shard_id,
        out,
        fingerprint=spec.fingerprint,
        partition=spec.partition,
        counts=counts,
        inputs=spec.input_ids(),
        content_columns=(stage.key, "status", "error"),
    )
