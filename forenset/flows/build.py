"""The build: a dynamic, pipelined DAG of shard tasks, wired from the stage classes.

Each stage is planned from committed upstream shards as soon as they exist, so a shard of
stage B starts when its input shard of stage A is done — no whole-stage barrier. A shard whose
committed file has the same fingerprint and the same input content is skipped without a task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextvars
import math
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from forenset.config import BuildConfig, RunnerConfig
from forenset.store.run_store import RunStore, ShardInfo
from forenset.tasks.base import ShardSpec, Stage, StageContext
from forenset.tasks.candidates import Candidates
from forenset.tasks.captions import Captions
from forenset.tasks.diffs import Diffs
from forenset.tasks.explain import Explanations
from forenset.tasks.instructions import Instructions
from forenset.tasks.judgments import Judgments
from forenset.tasks.perturb import Perturbations
from forenset.tasks.prompts import Prompts
from forenset.tasks.runner import context_for, run_shards
from forenset.tasks.scenarios import Scenarios
from forenset.tasks.sources import Sources
from forenset.tasks.splits import Splits
from forenset.tasks.verdicts import Verdicts

# The DAG, in topological order: adding a stage is one line here.
STAGES: list[type[Stage]] = [
    Sources,
    Captions,
    Instructions,
    Candidates,
    Diffs,
    Judgments,
    Verdicts,
    Splits,
    Perturbations,
    Explanations,
    Scenarios,
    Prompts,
]
STAGE_BY_NAME = {s.name: s for s in STAGES}
TABLES = list(dict.fromkeys([s.name for s in STAGES] + ["scenarios", "prompts", "annotations"]))


class BuildInterrupted(Exception):
    """The build stopped on request (Ctrl-C): nothing new started, running shards committed."""


@dataclass
class StageStats:
    planned: int = 0
    run: int = 0
    skipped: int = 0
    failed: int = 0
    rows: int = 0
    ok: int = 0
    error: int = 0
    kept: int = 0
    discarded: int = 0
    seconds: float = 0.0  # summed shard work time (read+process+write) of shards run now
    failures: list[str] = field(default_factory=list)


def shard_valid(existing: ShardInfo | None, spec: ShardSpec, retry_errors: bool) -> bool:
    if existing is None or existing.fingerprint != spec.fingerprint:
        return False
    if existing.inputs != spec.input_ids():
        return False
    if existing.counts.get("retryable", 0) > 0 or (
        retry_errors and existing.counts.get("error", 0)
    ):
        return False
    return True


@dataclass(frozen=True)
class Dispatch:
    """How the scheduler feeds one runner (``RunnerConfig`` says it; see ``dispatch_for``).

    ``slots`` tasks at most are in flight on ``runner`` (None: every shard is submitted when
    planned); queued shards of one stage are bundled into a task of about ``min_task_s`` of
    measured work, at most ``max_task_shards`` shards."""

    runner: str = "default"
    slots: int | None = None
    min_task_s: float = 0.0
    max_task_shards: int = 1


UNBOUNDED = Dispatch()  # one shard per task, submitted at once (bare loops, deployments)


def dispatch_for(cfg: BuildConfig, stage: str) -> Dispatch:
    rc = cfg.runner_for(stage)
    if rc.inflight_tasks() is None:  # deployments batch on their own; external clusters queue
        return Dispatch(runner=rc.model_dump_json())
    return Dispatch(
        runner=rc.model_dump_json(),
        slots=rc.inflight_tasks(),
        min_task_s=rc.task_seconds(),
        max_task_shards=rc.max_task_shards,
    )


@dataclass
class _Task:
    stage: str
    specs: list[ShardSpec]
    runner: str


class Scheduler:
    """Walks the DAG and feeds shards to runners.

    ``submit(stage_name, specs) -> future`` runs a bundle of shards of one stage; its result is
    one outcome per spec, in order (``forenset.tasks.runner.run_shards``). ``dispatch(stage)``
    says how many tasks may be in flight on that stage's runner and how shards are bundled;
    by default every shard is its own task, submitted as soon as it is planned."""

    def __init__(
        self,
        ctx: StageContext,
        submit: Callable[[str, list[ShardSpec]], Any],
        *,
        retry_errors: bool = False,
        on_event: Callable[[str, str, StageStats], None] | None = None,
        stages: list[type[Stage]] | None = None,
        barrier: bool = False,
        dispatch: Callable[[str], Dispatch] | None = None,
        stop: threading.Event | None = None,
    ):
        self.ctx = ctx
        self.stop = stop or threading.Event()  # set: submit nothing more, let running tasks end
        self.store: RunStore = ctx.store
        self.submit = submit
        self.retry_errors = retry_errors
        self.on_event = on_event or (lambda *a: None)
        self.stage_types = stages or STAGES
        self.stages = {s.name: s(ctx) for s in self.stage_types}
        self.dispatch = {n: dispatch(n) if dispatch else UNBOUNDED for n in self.stages}
        self.children: dict[str, list[Stage]] = defaultdict(list)
        for s in self.stages.values():
            for up in s.inputs:
                self.children[up].append(s)
        self.stats = {name: StageStats() for name in self.stages}
        self.done: dict[str, list[ShardInfo]] = defaultdict(list)
        self.inflight: dict[Any, _Task] = {}
        self.queued: dict[str, deque[ShardSpec]] = {name: deque() for name in self.stages}
        self.busy: Counter[str] = Counter()  # tasks in flight per runner
        self.timed: dict[str, list[float]] = {name: [0.0, 0] for name in self.stages}  # ms, n
        self.tasks_submitted = 0
        self._last_state = 0.0
        # barrier=True holds a stage's children until the whole stage is done (for comparison only)
        self.barrier = barrier
        self.held: dict[str, list[ShardInfo]] = defaultdict(list)
        self.ancestors = {n: self._ancestors(n) for n in self.stages}
        # Upstream stages first (every shard is persisted, so waiting work costs no memory): the
        # stages feeding an expensive runner (a GPU pool) are served early, and downstream queues
        # grow into larger bundles. On the demo this gave 37 tasks against 72 for downstream-first
        # at the same wall time (docs/benchmarks.md).
        self.priority = sorted(self.stages, key=lambda n: len(self.ancestors[n]))

    def _ancestors(self, name: str) -> set[str]:
        out: set[str] = set()
        for up in self.stages[name].inputs:
            if up in self.stages:
                out |= {up} | self._ancestors(up)
        return out

    # -- walking -----------------------------------------------------------------
    def offer(self, spec: ShardSpec) -> None:
        st = self.stats[spec.stage]
        st.planned += 1
        existing = self.store.shard_info(spec.stage, spec.shard_id, spec.partition)
        if shard_valid(existing, spec, self.retry_errors):
            st.skipped += 1
            self.completed(spec, existing, ran=False)
            return
        self.queued[spec.stage].append(spec)  # submitted by dispatch_queued()
        self.on_event("planned", spec.stage, st)

    def completed(self, spec: ShardSpec, info: ShardInfo, ran: bool) -> None:
        st = self.stats[spec.stage]
        self.done[spec.stage].append(info)
        st.rows += info.rows
        for k in ("ok", "error", "kept", "discarded"):
            setattr(st, k, getattr(st, k) + info.counts.get(k, 0))
        if "ms" in info.counts:  # a skipped shard's footer still tells what the stage costs
            self.timed[spec.stage][0] += info.counts["ms"]
            self.timed[spec.stage][1] += 1
        if ran:
            st.run += 1
            st.seconds += info.counts.get("ms", 0) / 1000  # work time, not time spent queued
        self.on_event("done", spec.stage, st)
        if self.barrier:
            self.held[spec.stage].append(info)
            return
        self.plan_children(spec.stage, info)

    def failed(self, spec: ShardSpec, error: str) -> None:
        st = self.stats[spec.stage]
        st.failed += 1
        st.failures.append(f"{spec.key()}: {error}")
        self.on_event("failed", spec.stage, st)

    def plan_children(self, stage: str, info: ShardInfo) -> None:
        for child in self.children[stage]:
            for s in child.plan(info):
                self.offer(s)

    def release_barriers(self) -> None:
        busy = {t.stage for t in self.inflight.values()} | {n for n, q in self.queued.items() if q}
        for name in list(self.stages):
            if name in self.held and not ({name} | self.ancestors[name]) & (
                busy | {n for n in self.held if n != name}
            ):
                for info in self.held.pop(name):
                    self.plan_children(name, info)

    # -- dispatching ---------------------------------------------------------------
    def bundle_size(self, stage: str, d: Dispatch, queued: int, free: int | None) -> int:
        """Shards for the next task of ``stage``: about ``min_task_s`` of measured work, but
        no more than an even share of the queue across the runner's free slots."""
        ms, n = self.timed[stage]
        if d.max_task_shards <= 1 or d.min_task_s <= 0 or n == 0:
            return 1  # nothing measured yet: the first shards time the stage
        want = math.ceil(d.min_task_s * 1000 / max(ms / n, 1.0))
        if free:
            want = min(want, math.ceil(queued / free))
        return max(1, min(want, d.max_task_shards, queued))

    def dispatch_queued(self) -> None:
        """Submit queued shards while their runners have free slots, upstream stages first."""
        progress = not self.stop.is_set()
        while progress:
            progress = False
            for name in self.priority:
                q = self.queued[name]
                if not q:
                    continue
                d = self.dispatch[name]
                free = None if d.slots is None else d.slots - self.busy[d.runner]
                if free is not None and free <= 0:
                    continue
                specs = [q.popleft() for _ in range(self.bundle_size(name, d, len(q), free))]
                fut = self.submit(name, specs)
                self.inflight[fut] = _Task(name, specs, d.runner)
                self.busy[d.runner] += 1
                self.tasks_submitted += 1
                progress = True
                break  # start again from the highest-priority stage

    def _pending(self) -> bool:
        if self.stop.is_set():
            return bool(self.inflight)  # running tasks finish and commit; nothing new starts
        return bool(self.inflight or self.held or any(self.queued.values()))

    def run(self) -> dict[str, StageStats]:
        self.write_state("running")
        for s in self.stages.values():
            if not s.inputs:
                for spec in s.plan_sources():
                    self.offer(spec)
        self.dispatch_queued()
        while self._pending():
            if self.barrier:
                self.release_barriers()
                self.dispatch_queued()
                if not self.inflight:
                    continue
            finished = wait_any(list(self.inflight))
            for fut in finished:
                task = self.inflight.pop(fut)
                self.busy[task.runner] -= 1
                try:
                    outcomes = result_of(fut)
                    if len(outcomes) != len(task.specs):
                        raise RuntimeError(f"{len(outcomes)} outcomes for {len(task.specs)} shards")
                except Exception as e:  # noqa: BLE001 - a failed task fails its shards, the rest goes on
                    outcomes = [{"error": f"{type(e).__name__}: {e}"}] * len(task.specs)
                for spec, out in zip(task.specs, outcomes, strict=True):
                    if "error" in out:
                        self.failed(spec, out["error"])
                    else:
                        self.completed(spec, ShardInfo(**out["info"]), ran=True)
            self.dispatch_queued()
            if time.monotonic() - self._last_state > 2:
                self.write_state("running")
        if self.stop.is_set():  # manifests keep the last complete view, as after a crash
            self.write_state("interrupted")
            done = sum(s.run for s in self.stats.values())
            raise BuildInterrupted(
                f"build interrupted: {done} shards committed; run the same command to resume"
            )
        self.write_manifests()
        failed = any(s.failed for s in self.stats.values())
        self.write_state("failed" if failed else "complete")
        return self.stats

    # -- records -----------------------------------------------------------------
    def write_manifests(self) -> None:
        import base64

        for name, stage in self.stages.items():
            infos = sorted(self.done.get(name, []), key=lambda i: i.path)
            schema = base64.b64encode(stage.output_schema.serialize().to_pybytes()).decode()
            meta = {"config_hash": self.ctx.config.config_hash(), "schema": schema}
            self.store.write_manifest(name, infos, meta)

    def write_state(self, status: str) -> None:
        self._last_state = time.monotonic()
        running = Counter(t.stage for t in self.inflight.values() for _ in t.specs)
        self.store.write_json(
            "state.json",
            {
                "status": status,
                "order": list(self.stats),  # DAG order (the JSON keys below are sorted)
                "config_hash": self.ctx.config.config_hash(),
                "time": time.time(),
                "tasks": self.tasks_submitted,
                "stages": {
                    n: {
                        "planned": s.planned,
                        "done": s.run + s.skipped,
                        "failed": s.failed,
                        "inflight": running[n],
                        "queued": len(self.queued[n]),
                    }
                    for n, s in self.stats.items()
                },
            },
        )


def wait_any(futs: list[Any]) -> list[Any]:
    """Block until at least one future is done.

    Thread-runner futures wrap real ``concurrent.futures.Future`` objects (``cf.wait`` works);
    process-runner futures wrap an unpickling proxy, Dask futures and Ray object refs are their
    own kinds, so those are polled (``done()``, ``ray.wait``) — mixing runners in one build
    must not break waiting.
    """
    wrapped = {getattr(f, "wrapped_future", f): f for f in futs}
    real = [w for w in wrapped if type(w) is cf.Future]
    if len(real) == len(wrapped):
        done, _ = cf.wait(real, return_when=cf.FIRST_COMPLETED)
        return [wrapped[d] for d in done]
    while True:
        ready = [f for w, f in wrapped.items() if _is_done(w, f)]
        if ready:
            return ready
        if real:
            cf.wait(real, timeout=0.02, return_when=cf.FIRST_COMPLETED)
        else:
            time.sleep(0.02)


def _is_done(w: Any, f: Any) -> bool:
    if hasattr(w, "done"):
        return bool(w.done())
    if type(w).__name__ == "ObjectRef":  # Ray: ask Ray, not the Prefect API, every poll
        import ray

        ready, _ = ray.wait([w], timeout=0)
        return bool(ready)
    return f.state.is_final()


def result_of(fut: Any) -> dict[str, Any]:
    if hasattr(fut, "result") and hasattr(fut, "task_run_id"):
        return fut.result(raise_on_failure=True)
    return fut.result()


# -- Prefect wiring ----------------------------------------------------------------------


def _shard_task_fn(
    stage_name: str, specs: list[dict[str, Any]], run_uri: str, config_hash: str
) -> list[dict[str, Any]]:
    ctx = context_for(run_uri, config_hash)  # the config itself is read from the run directory
    stage = STAGE_BY_NAME[stage_name](ctx)
    return run_shards(stage, [ShardSpec.from_json(s) for s in specs])


def task_run_name(stage_name: str, specs: list[ShardSpec]) -> str:
    """``diffs:shard-0003`` for one shard, ``diffs:shard-0003+5`` for a bundle of six."""
    extra = f"+{len(specs) - 1}" if len(specs) > 1 else ""
    return f"{stage_name}:{specs[0].shard_id}{extra}"


def _outcome_future(fut: Any) -> cf.Future:
    """A deployment shard's ShardInfo future as a one-outcome bundle future."""
    out: cf.Future = cf.Future()

    def done(f: Any) -> None:
        try:
            out.set_result([{"info": f.result()}])
        except Exception as e:  # noqa: BLE001 - the scheduler reports it per shard
            out.set_exception(e)

    fut.add_done_callback(done)
    return out


def make_runner(rc: RunnerConfig, run_uri: str = "", config: dict[str, Any] | None = None):
    from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

    if rc.kind == "deployment":
        from forenset.flows.deploy import DeploymentDispatcher

        return DeploymentDispatcher(rc, run_uri, config or {})
    if rc.kind == "threads":
        return ThreadPoolTaskRunner(max_workers=rc.max_workers)
    if rc.kind == "processes":
        return ProcessPoolTaskRunner(max_workers=rc.max_workers)
    if rc.kind == "ray":  # RunnerConfig refused kind 'ray' already if prefect-ray is missing
        from prefect_ray import RayTaskRunner

        if rc.address:
            return RayTaskRunner(address=rc.address)
        return RayTaskRunner(init_kwargs={"num_cpus": rc.max_workers, "include_dashboard": False})
    from prefect_dask import DaskTaskRunner

    if rc.address:
        return DaskTaskRunner(address=rc.address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": rc.max_workers, "threads_per_worker": 1})


# run_build's callbacks: not flow parameters (those are recorded as JSON), so held here
_CALLBACKS: dict[str, Callable[..., None] | None] = {"on_event": None, "on_interrupt": None}


async def build_flow_fn(
    run_uri: str, config: dict[str, Any], retry_errors: bool = False
) -> dict[str, Any]:
    """Body of the Prefect flow: shard tasks for every pending shard, on each stage's runner.

    The flow is async only for Prefect's sake: the sync flow engine of Prefect 3.9 joins its
    heartbeat thread at the end of every flow run, and that thread sleeps in 1 s steps (~1 s
    per build, docs/benchmarks.md); the async engine does not wait for it. The build itself is
    plain blocking code in a worker thread, which inherits the flow-run context, so its tasks
    and artifacts belong to this flow run.

    Ctrl-C cancels this coroutine once: the build then starts nothing new, waits for its running
    shards to commit and ends the flow run Cancelled (not Crashed, and without Prefect's crash
    report on the terminal). ``on_interrupt`` (run_build) hears of the first; the CLI makes
    a second Ctrl-C quit at once."""
    from prefect.states import Cancelled

    stop = threading.Event()
    ctx = contextvars.copy_context()  # what asyncio.to_thread does: the flow-run context
    build = asyncio.get_running_loop().run_in_executor(
        None, ctx.run, _build_in_flow_thread, run_uri, config, retry_errors, stop
    )
    try:
        try:
            return await asyncio.shield(build)
        except asyncio.CancelledError:
            stop.set()
            if _CALLBACKS["on_interrupt"] is not None:  # the caller may say so, arm a force-quit
                _CALLBACKS["on_interrupt"]()
        return await build  # the scheduler raises BuildInterrupted once running shards are in
    except BuildInterrupted as e:
        return Cancelled(message=str(e))


def _build_in_flow_thread(
    run_uri: str, config: dict[str, Any], retry_errors: bool, stop: threading.Event
) -> dict[str, Any]:
    """One sync API client for all shard tasks. An async flow's context holds only an async
    client, so each sync task run would build its own (an SSL context each: ~25 ms of CPU)."""
    from prefect.context import SyncClientContext

    with SyncClientContext.get_or_create():
        return build_blocking(run_uri, config, retry_errors, stop)


def build_blocking(
    run_uri: str,
    config: dict[str, Any],
    retry_errors: bool = False,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """The build under the run-directory lock (the flow runs it in a worker thread)."""
    cfg = BuildConfig.model_validate(config)
    ctx = context_for(run_uri, cfg)
    store = ctx.store
    store.acquire_lock()  # one build per run directory, however it was started
    try:
        store.remove_temp_files()
        store.write_bytes_atomic("config.yaml", _yaml(cfg.resolved()).encode())
        store.write_bytes_atomic("config_hash.txt", (cfg.config_hash() + "\n").encode())
        return _build(ctx, cfg, run_uri, config, retry_errors, stop)
    finally:
        store.release_lock()


def _build(
    ctx: StageContext,
    cfg: BuildConfig,
    run_uri: str,
    config: dict[str, Any],
    retry_errors: bool,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    from contextlib import ExitStack

    from prefect import task
    from prefect.cache_policies import NO_CACHE

    shard_task = task(
        _shard_task_fn, name="shard", cache_policy=NO_CACHE, persist_result=False, retries=0
    )
    tasks = {
        s.name: shard_task.with_options(
            name=s.name,
            tags=[f"forenset:{s.name}"] if cfg.runner_for(s.name).concurrency_tag else [],
        )
        for s in STAGES
    }
    config_hash = cfg.config_hash()  # tasks carry only the hash; config.yaml holds the config
    with ExitStack() as stack:
        runners: dict[str, Any] = {}
        by_cfg: dict[str, Any] = {}
        for s in STAGES:
            rc = cfg.runner_for(s.name)
            key = rc.model_dump_json()
            if key not in by_cfg:
                by_cfg[key] = stack.enter_context(make_runner(rc, run_uri, config))
            runners[s.name] = by_cfg[key]

        def submit(stage_name: str, specs: list[ShardSpec]):
            if cfg.runner_for(stage_name).kind == "deployment":
                (spec,) = specs  # Dispatch for deployments: one shard per submit
                return _outcome_future(runners[stage_name].submit(stage_name, spec))
            t = tasks[stage_name].with_options(task_run_name=task_run_name(stage_name, specs))
            return runners[stage_name].submit(
                t,
                parameters={
                    "stage_name": stage_name,
                    "specs": [spec.to_json() for spec in specs],
                    "run_uri": run_uri,
                    "config_hash": config_hash,
                },
            )

        scheduler = Scheduler(
            ctx,
            submit,
            retry_errors=retry_errors,
            on_event=_CALLBACKS["on_event"],
            dispatch=lambda stage: dispatch_for(cfg, stage),
            stop=stop,
        )
        stats = scheduler.run()
    from forenset.tasks.export import export_dataset

    export = export_dataset(ctx.store, cfg)
    summary = {k: vars(v) for k, v in stats.items()}
    from forenset.report.artifact import create_summary_artifact

    create_summary_artifact(summary, export)  # a markdown artifact in the Prefect UI
    return {"stages": summary, "export": export, "tasks": scheduler.tasks_submitted}


def _make_build_flow():
    from prefect import flow

    return flow(build_flow_fn, name="forenset-build", log_prints=False, validate_parameters=False)


build_flow = _make_build_flow()  # deployable: forenset/flows/build.py:build_flow


def run_build(
    run_uri: str,
    cfg: BuildConfig,
    *,
    retry_errors: bool = False,
    on_event: Callable[[str, str, StageStats], None] | None = None,
    on_interrupt: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the build as a Prefect flow (ephemeral API unless PREFECT_API_URL is set).

    ``on_interrupt`` runs once, on the event loop's thread (the main thread when called from
    the main thread), when the first Ctrl-C has stopped new work and the build waits for its
    running shards: the CLI says so there and arms a second Ctrl-C to quit at once."""
    from forenset.flows.ephemeral import reap_server_with_this_process

    store = RunStore(run_uri)
    store.acquire_lock()  # before the flow starts, so a refusal is one sentence, not a failed run
    _CALLBACKS.update(on_event=on_event, on_interrupt=on_interrupt)
    from prefect.exceptions import CancelledRun

    try:
        reap_server_with_this_process()  # a killed build leaves no orphaned ephemeral API server
        return run_coroutine(build_flow(run_uri, cfg.resolved(), retry_errors))
    except CancelledRun as e:  # Ctrl-C: the flow run ended Cancelled after running shards committed
        raise BuildInterrupted(str(e)) from None
    finally:
        _CALLBACKS.update(on_event=None, on_interrupt=None)
        store.release_lock()


def run_coroutine(coro: Any) -> Any:
    """``asyncio.run``, also from code that already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with cf.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


def _yaml(d: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(d, sort_keys=False)
