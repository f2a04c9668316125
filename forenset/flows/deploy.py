"""Stages on deployments: batches of shards sent to a deployed shard flow (a GPU work pool).

``shard_batch_flow`` is the deployable unit: one flow run processes many shards of one stage
in one process, so a diffusers pipeline (cached per process by the stage's backend) loads once
per run. The build flow's scheduler talks to it through ``DeploymentDispatcher``, which gathers
pending shards for ``batch_wait_s`` (or until ``batch_shards``) and starts one run per batch
with ``run_deployment``. Results travel through the run store, which must be shared storage
(a shared filesystem or an fsspec URI such as s3://).

Lost runs: each shard-batch run writes a heartbeat object (``_heartbeats/<flow run id>.json``,
a counter) to the run store every ``heartbeat_s``. The dispatcher polls the run's state and
the heartbeat; a run RUNNING whose counter has not moved for ``lost_after_s`` (measured on the
dispatcher's own clock: no clock skew between hosts), or PENDING as long (a worker took it and
died starting it), or any run past ``timeout_s``, is lost:
it is forced Crashed through the API (it no longer shows as running anywhere) and
its shards fail with ``TaskLost``, which the scheduler retries up to ``retries`` times.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from typing import TYPE_CHECKING, Any

from prefect import flow

from forenset.config import RunnerConfig
from forenset.store.run_store import RunStore
from forenset.tasks.base import ShardSpec

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

HEARTBEATS = "_heartbeats"


@flow(name="forenset-shards", log_prints=False, validate_parameters=False)
def shard_batch_flow(
    stage_name: str,
    specs: list[dict[str, Any]],
    run_uri: str,
    config: dict[str, Any],
    heartbeat_s: float = 5.0,
) -> list[dict[str, Any]]:
    """Run many shards of one stage in this process; returns their ShardInfo records.
    A heartbeat thread tells the dispatcher this run's worker is alive."""
    from prefect import get_run_logger
    from prefect.runtime import flow_run

    from forenset.stages import stage_class
    from forenset.worker import context_for, execute_shard

    ctx = context_for(run_uri, config)
    stage = stage_class(stage_name)(ctx)
    log = get_run_logger()
    out = []
    with Heartbeat(ctx.store, str(flow_run.id or "local"), heartbeat_s):
        for i, s in enumerate(specs):
            out.append(execute_shard(stage, ShardSpec.from_json(s)).to_json())
            log.info("%s: %d/%d shards committed", stage_name, i + 1, len(specs))
    return out


class Heartbeat:
    """Writes ``_heartbeats/<run id>.json`` (a counter) every ``every_s`` from a thread."""

    def __init__(self, store: RunStore, run_id: str, every_s: float):
        self.store, self.rel, self.every_s = store, f"{HEARTBEATS}/{run_id}.json", every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name="heartbeat")

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=self.every_s + 5)
        try:
            self.store.fs.rm(self.store.path(self.rel))
        except Exception:  # noqa: BLE001, S110 - a stray heartbeat is harmless
            pass

    def _beat(self) -> None:
        import os
        import socket

        n = 0
        while True:
            n += 1
            try:
                self.store.write_json(
                    self.rel, {"beat": n, "host": socket.gethostname(), "pid": os.getpid()}
                )
            except Exception:  # noqa: BLE001, S110 - a missed beat; the next one may land
                pass
            if self.stop.wait(self.every_s):
                return


def read_beat(store: RunStore, run_id: str) -> int | None:
    """The heartbeat counter of a run, fresh from the store (no cached listing)."""
    path = store.path(f"{HEARTBEATS}/{run_id}.json")
    inv = getattr(store.fs, "invalidate_cache", None)
    if inv is not None:
        inv(path)
    try:
        return int(store.read_json(f"{HEARTBEATS}/{run_id}.json", default={}).get("beat", 0))
    except (OSError, ValueError):
        return None


def watch_flow_run(
    client: Any,
    flow_run_id: Any,
    store: RunStore,
    rc: RunnerConfig,
    *,
    poll_s: float = 1.0,
    label: str = "",
) -> Any:
    """Poll a deployment run until it ends; returns its final state. A run RUNNING with no
    heartbeat for ``rc.lost_after_s`` or any run past ``rc.timeout_s`` is forced Crashed and
    ``TaskLost`` raised (the scheduler re-runs its shards)."""
    from prefect.states import Crashed

    from forenset.scheduler import TaskLost

    started = time.monotonic()
    last_beat: int | None = None
    beat_at: float | None = None  # when the counter last moved (or the run was seen running)
    while True:
        run = client.read_flow_run(flow_run_id)
        state = run.state
        if state is not None and state.is_final():
            return state
        now = time.monotonic()
        why = None
        if rc.timeout_s is not None and now - started > rc.timeout_s:
            why = f"no result after {rc.timeout_s:g} s (timeout_s)"
        elif state is not None and (state.is_running() or state.is_pending()):
            # PENDING: a worker took the run and is starting its process. A worker that dies
            # then leaves it PENDING for ever, so it is timed like a silent RUNNING run
            beat = read_beat(store, str(flow_run_id))
            if beat_at is None or (beat and beat != last_beat):
                last_beat, beat_at = beat, now
            if now - beat_at > rc.lost_after_s:
                why = f"no heartbeat for {now - beat_at:.0f} s (lost_after_s {rc.lost_after_s:g})"
        else:
            beat_at = None  # scheduled: waiting for a free worker is not being lost
        if why is not None:
            client.set_flow_run_state(flow_run_id, Crashed(message=f"forenset: {why}"), force=True)
            raise TaskLost(f"deployment run {label or flow_run_id} lost: {why}")
        time.sleep(poll_s)


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
        from prefect.client.orchestration import get_client
        from prefect.deployments import run_deployment

        try:
            label = f"{stage_name}:{items[0][0].shard_id}+{len(items) - 1}"
            assert self.rc.deployment is not None  # RunnerConfig refuses kind=deployment without
            # run_deployment is sync-compatible: called from this thread it returns the FlowRun
            fr: FlowRun = run_deployment(  # type: ignore[assignment]
                self.rc.deployment,
                parameters={
                    "stage_name": stage_name,
                    "specs": [s.to_json() for s, _ in items],
                    "run_uri": self.run_uri,
                    "config": self.config,
                    "heartbeat_s": self.rc.heartbeat_s,
                },
                timeout=0,  # created, not awaited: watch_flow_run waits, with heartbeats
                as_subflow=True,
                flow_run_name=label,
                job_variables=self.rc.resources.job_variables() if self.rc.resources else None,
            )
            store = RunStore(self.run_uri)
            with get_client(sync_client=True) as client:
                state = watch_flow_run(client, fr.id, store, self.rc, label=label)
            ok = state is not None and state.is_completed()
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
