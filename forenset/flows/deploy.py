"""Stages on deployments: batches of shards sent to a deployed shard flow (a GPU work pool).

``shard_batch_flow`` is the deployable unit: one flow run processes many shards of one stage
in one process, so a diffusers pipeline (cached per process by the stage's backend) loads once
per run. The build flow's scheduler talks to it through ``DeploymentDispatcher``, which gathers
pending shards for ``batch_wait_s`` (or until ``batch_shards``) and starts one run per batch
with ``run_deployment``. Results travel through the run store, which must be shared storage
(a shared filesystem or an fsspec URI such as s3://).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from typing import Any

from prefect import flow

from forenset.config import RunnerConfig
from forenset.store.run_store import RunStore
from forenset.tasks.base import ShardSpec


@flow(name="forenset-shards", log_prints=False, validate_parameters=False)
def shard_batch_flow(
    stage_name: str, specs: list[dict[str, Any]], run_uri: str, config: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run many shards of one stage in this process; returns their ShardInfo records."""
    from forenset.stages import stage_class
    from forenset.worker import context_for, execute_shard

    ctx = context_for(run_uri, config)
    stage = stage_class(stage_name)(ctx)
    return [execute_shard(stage, ShardSpec.from_json(s)).to_json() for s in specs]


class DeploymentDispatcher:
    """Batches shard specs into deployment runs; each spec gets a concurrent Future."""

    def __init__(self, rc: RunnerConfig, run_uri: str, config: dict[str, Any]):
        self.rc = rc
        self.run_uri = run_uri
        self.config = config
        self.pending: list[tuple[str, ShardSpec, cf.Future]] = []
        self.lock = threading.Lock()
        self.first_at = 0.0
        self.pool = cf.ThreadPoolExecutor(rc.max_concurrent_runs, thread_name_prefix="deployment")
        self.stop = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()

    def __enter__(self) -> DeploymentDispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
        self.stop.set()
        self.ticker.join(timeout=5)
        self.pool.shutdown(wait=True)

    def submit(self, stage_name: str, spec: ShardSpec) -> cf.Future:
        fut: cf.Future = cf.Future()
        with self.lock:
            if not self.pending:
                self.first_at = time.monotonic()
            self.pending.append((stage_name, spec, fut))
            full = len(self.pending) >= self.rc.batch_shards
        if full:
            self.flush()
        return fut

    def _tick(self) -> None:
        while not self.stop.wait(0.1):
            with self.lock:
                due = self.pending and time.monotonic() - self.first_at >= self.rc.batch_wait_s
            if due:
                self.flush()

    def flush(self) -> None:
        with self.lock:
            batch, self.pending = self.pending, []
        by_stage: dict[str, list[tuple[ShardSpec, cf.Future]]] = {}
        for name, spec, fut in batch:
            by_stage.setdefault(name, []).append((spec, fut))
        for name, items in by_stage.items():
            self.pool.submit(self._run, name, items)

    def _run(self, stage_name: str, items: list[tuple[ShardSpec, cf.Future]]) -> None:
        from prefect.deployments import run_deployment

        try:
            fr = run_deployment(
                self.rc.deployment,
                parameters={
                    "stage_name": stage_name,
                    "specs": [s.to_json() for s, _ in items],
                    "run_uri": self.run_uri,
                    "config": self.config,
                },
                timeout=None,
                poll_interval=1,
                as_subflow=True,
                flow_run_name=f"{stage_name}:{items[0][0].shard_id}+{len(items) - 1}",
            )
            state = fr.state
            ok = state is not None and state.is_completed()
            store = RunStore(self.run_uri)
            for spec, fut in items:
                info = store.shard_info(spec.stage, spec.shard_id, spec.partition)
                if ok and info is not None and info.fingerprint == spec.fingerprint:
                    fut.set_result(info.to_json())
                else:
                    why = state.message if state is not None else "no state"
                    fut.set_exception(
                        RuntimeError(
                            f"deployment run {fr.id} ended {state.type if state else '?'}: {why}"
                        )
                    )
        except Exception as e:  # noqa: BLE001 - every waiting shard learns why
            for _, fut in items:
                if not fut.done():
                    fut.set_exception(e)
