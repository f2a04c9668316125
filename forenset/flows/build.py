"""The build as a Prefect flow: the scheduler (``forenset.scheduler``) wired to task runners.

This module only connects: it makes a Prefect task of ``run_shards``, one task runner per
distinct runner config, a submit function for the scheduler, and the flow that runs the
blocking build in a worker thread. Planning, skipping, bundling and interruption live in the
scheduler; the stages live in ``forenset.stages``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from forenset.config import BuildConfig, RunnerConfig
from forenset.scheduler import (
    BuildControl,
    BuildFailed,
    BuildInterrupted,
    Scheduler,
    StageStats,
    dispatch_for,
    failure_summary,
    progress_line,
)
from forenset.stages import stage_class, stage_names
from forenset.store.run_store import LockLostError, RunStore
from forenset.store.storage import StorageError
from forenset.tasks.base import ShardSpec, StageContext
from forenset.worker import context_for, run_shards

if TYPE_CHECKING:
    from prefect.states import State

# -- Prefect wiring ----------------------------------------------------------------------


def _shard_task_fn(
    stage_name: str,
    specs: list[dict[str, Any]],
    run_uri: str,
    config_hash: str,
    fence: str | None = None,
) -> list[dict[str, Any]]:
    from forenset.flows.ephemeral import reap_servers_started_here

    # a worker without PREFECT_API_URL (a Dask worker) got an ephemeral API server of its own
    # from Prefect's task engine: it must stop with the worker (docs/cluster.md)
    reap_servers_started_here()
    ctx = context_for(run_uri, config_hash)  # the config itself is read from the run directory
    stage = stage_class(stage_name)(ctx)
    # fence: the build's lock token, checked before each commit (forenset.store.lock)
    return run_shards(stage, [ShardSpec.from_json(s) for s in specs], fence)


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
    quiet_dask()
    # the local cluster's dashboard on loopback only (Dask's default binds every interface)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": rc.max_workers,
            "threads_per_worker": 1,
            "dashboard_address": "127.0.0.1:8787",
            "silence_logs": logging.WARNING,
        }
    )


def quiet_dask() -> None:
    """A local Dask cluster says nothing unless something is wrong: distributed's loggers at
    WARNING here and in the worker processes it starts (``DASK_LOGGING__DISTRIBUTED``, read by
    distributed at import; a user's own setting wins)."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    level = getattr(logging, os.environ["DASK_LOGGING__DISTRIBUTED"].upper(), logging.WARNING)
    logging.getLogger("distributed").setLevel(level)


# what a local cluster says while it closes after a build that succeeded: a nanny killing an
# idle worker after its timeout ("Worker process still alive after 4.0 seconds, killing"), a
# comm closed under a pending heartbeat (CommClosedError): at ERROR only during the close
CLOSE_CHATTER = ("distributed.nanny", "distributed.comm", "distributed.core", "distributed.worker")


def close_chatter() -> tuple[Callable[[], None], Callable[[], None]]:
    """(quiet, restore): the loggers of :data:`CLOSE_CHATTER` to ERROR, and back to their
    levels now; ``start_runner`` runs them around a local cluster's close."""
    saved = {n: logging.getLogger(n).level for n in CLOSE_CHATTER}

    def quiet() -> None:
        for n in CLOSE_CHATTER:
            logging.getLogger(n).setLevel(max(logging.ERROR, saved[n]))

    def restore() -> None:
        for n, lvl in saved.items():
            logging.getLogger(n).setLevel(lvl)

    return quiet, restore


def start_runner(stack: Any, rc: RunnerConfig, run_uri: str, config: dict[str, Any], stage: str):
    """Enter ``rc``'s task runner; a runner that cannot start or connect stops the build with
    one sentence (``RunnerUnavailable``), not an OSError taken for a run-directory problem."""
    from forenset.errors import RunnerUnavailable

    try:
        local_dask = rc.kind == "dask" and not rc.address
        if local_dask:
            quiet, restore = close_chatter()
            stack.callback(restore)  # exits run last first: after the cluster has closed
        runner = stack.enter_context(make_runner(rc, run_uri, config))
        if local_dask:
            stack.callback(quiet)  # before the cluster closes
        if rc.kind == "dask":
            _ = runner.client  # prefect-dask connects lazily, at the first task: connect now
        return runner
    except Exception as e:  # noqa: BLE001 - whatever the cluster client raised, said once
        where = f" at {rc.address}" if rc.address else ""
        why = " ".join(str(e).split()) or type(e).__name__
        hint = ""
        if rc.kind == "ray" and "auth" in f"{type(e).__name__} {why}".lower():
            hint = (
                "; Ray 2.60 enables token authentication by default: give this process the "
                "cluster's token (RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, see docs/cluster.md)"
            )
        raise RunnerUnavailable(
            f"the {rc.kind} runner of stage {stage}{where} could not start: "
            f"{type(e).__name__}: {why[:300]}{hint}"
        ) from None


def resource_request(rc: RunnerConfig) -> Any:
    """What one task of this runner asks of its cluster (``runners.<stage>.resources``): Dask
    worker resources through ``dask.annotate``, Ray options through prefect-ray's
    ``remote_options``. Threads and processes run on this host: nothing to ask."""
    from contextlib import nullcontext

    res = rc.resources
    if res is None:
        return nullcontext()
    if rc.kind == "dask" and res.dask():
        import dask

        return dask.annotate(resources=res.dask())
    if rc.kind == "ray" and res.ray():
        from prefect_ray.context import remote_options

        return remote_options(**res.ray())
    return nullcontext()


# The BuildControl of each build this process runs, by run URI: flow parameters are recorded
# as JSON, so the control object (callbacks, stop flag) cannot travel as one.
_CONTROLS: dict[str, BuildControl] = {}
STORAGE_FAILED = "cannot write to run directory"


class _StorageFailureEcho:
    """Drops Prefect's log line ``Finished in state Failed('cannot write to run directory …')``
    (it would print above the CLI's sentence): run_build raises that error and the CLI prints it
    as its one sentence; the flow run's state keeps the same message for the UI."""

    def filter(self, record: Any) -> bool:
        msg = record.getMessage()
        return not (msg.startswith("Finished in state Failed(") and STORAGE_FAILED in msg)


def _quiet_storage_failure_echo() -> None:
    import logging

    flow_runs = logging.getLogger("prefect.flow_runs")  # the flow engine's logger
    if not any(isinstance(f, _StorageFailureEcho) for f in flow_runs.filters):
        flow_runs.addFilter(_StorageFailureEcho())


async def build_flow_fn(
    run_uri: str, config: dict[str, Any], retry_errors: bool = False
) -> dict[str, Any] | State[Any]:
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
    from prefect.states import Cancelled, Failed

    control = _CONTROLS.get(run_uri) or BuildControl()  # a deployed flow run has none yet
    ctx = contextvars.copy_context()  # what asyncio.to_thread does: the flow-run context
    build = asyncio.get_running_loop().run_in_executor(
        None, ctx.run, _build_in_flow_thread, run_uri, config, retry_errors, control
    )
    try:
        try:
            result = await asyncio.shield(build)
        except asyncio.CancelledError:
            control.interrupt()
            result = await build  # the scheduler raises BuildInterrupted once shards are in
    except BuildInterrupted as e:
        return Cancelled(message=str(e))
    except (BuildFailed, LockLostError, StorageError) as e:  # one sentence, not a traceback in
        return Failed(
            message=str(e)
        )  # Prefect's crash report (a lost lock: another build took over)
    except OSError as e:  # the run dir cannot be written (a full disk during the export …):
        # a Failed state with the error, which run_build raises for the CLI's one sentence;
        # raised from here, Prefect would print its traceback first
        why = f"{STORAGE_FAILED} {run_uri}: {e.strerror or e}"
        return Failed(message=why, data=e)
    if result.get("failed"):  # shards failed: the run says Failed, with counts and reasons
        return Failed(message=result["failed"], data=result)
    return result


def _build_in_flow_thread(
    run_uri: str, config: dict[str, Any], retry_errors: bool, control: BuildControl
) -> dict[str, Any]:
    """One sync API client for all shard tasks. An async flow's context holds only an async
    client, so each sync task run would build its own (an SSL context each: ~25 ms of CPU)."""
    from prefect.context import SyncClientContext

    with SyncClientContext.get_or_create():
        return build_blocking(run_uri, config, retry_errors, control)


def build_blocking(
    run_uri: str,
    config: dict[str, Any],
    retry_errors: bool = False,
    control: BuildControl | None = None,
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
        return _build(ctx, cfg, run_uri, config, retry_errors, control or BuildControl())
    finally:
        store.release_lock()


def _build(
    ctx: StageContext,
    cfg: BuildConfig,
    run_uri: str,
    config: dict[str, Any],
    retry_errors: bool,
    control: BuildControl,
) -> dict[str, Any]:
    from contextlib import ExitStack

    from prefect import task
    from prefect.cache_policies import NO_CACHE

    log = run_logger()
    watch_in_prefect_logs(control, log)
    shard_task = task(name="shard", cache_policy=NO_CACHE, persist_result=False, retries=0)(
        _shard_task_fn
    )
    names = stage_names()
    tasks = {
        name: shard_task.with_options(
            name=name, tags=[f"forenset:{name}"] if cfg.runner_for(name).concurrency_tag else []
        )
        for name in names
    }
    config_hash = cfg.config_hash()  # tasks carry only the hash; config.yaml holds the config
    with ExitStack() as stack:
        runners: dict[str, Any] = {}
        by_cfg: dict[str, Any] = {}
        for name in names:
            rc = cfg.runner_for(name)
            key = rc.model_dump_json()
            if key not in by_cfg:
                by_cfg[key] = start_runner(stack, rc, run_uri, config, name)
            runners[name] = by_cfg[key]

        def submit(stage_name: str, specs: list[ShardSpec]):
            rc = cfg.runner_for(stage_name)
            if rc.kind == "deployment":
                (spec,) = specs  # Dispatch for deployments: one shard per submit
                return _outcome_future(runners[stage_name].submit(stage_name, spec))
            t = tasks[stage_name].with_options(task_run_name=task_run_name(stage_name, specs))
            with resource_request(rc):
                return runners[stage_name].submit(
                    t,
                    parameters={
                        "stage_name": stage_name,
                        "specs": [spec.to_json() for spec in specs],
                        "run_uri": run_uri,
                        "config_hash": config_hash,
                        "fence": ctx.store.lock_token(),
                    },
                )

        scheduler = Scheduler(
            ctx,
            submit,
            retry_errors=retry_errors,
            control=control,
            dispatch=lambda stage: dispatch_for(cfg, stage),
        )
        stats = scheduler.run()
    from forenset.exports.dataset import export_dataset

    failed = failure_summary(stats)
    export = export_dataset(ctx.store, cfg.export, partial=failed or None)
    summary = {k: vars(v) for k, v in stats.items()}
    from forenset.report.artifact import create_summary_artifact

    create_summary_artifact(summary, export)  # a markdown artifact in the Prefect UI
    log.info("build done: %s", progress_line(stats))
    if failed:
        log.error("build failed: %s; the export at %s is labelled partial", failed, export["path"])
    return {
        "stages": summary,
        "export": export,
        "tasks": scheduler.tasks_submitted,
        "failed": failed,
    }


FAILURES_LOGGED = 20  # per stage: the first reasons go to the run log, the rest to state.json


def run_logger() -> Any:
    """The flow run's logger (``get_run_logger``): its lines show in the UI under the run.

    Its records go to the API at INFO whatever ``PREFECT_LOGGING_LEVEL`` says (the CLI sets
    WARNING to keep Prefect's lines off the terminal, where its own progress is drawn), and
    not to the console. Outside a flow run (``build_blocking`` called directly) a plain logger."""
    import logging

    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError
    from prefect.logging.handlers import APILogHandler
    from prefect.logging.loggers import PrefectLogAdapter

    try:
        base = get_run_logger()
    except MissingContextError:
        return logging.getLogger("forenset.build")
    logger = logging.getLogger("prefect.flow_runs.forenset")
    with _LOGGER_LOCK:
        if not any(isinstance(h, APILogHandler) for h in logger.handlers):
            logger.addHandler(APILogHandler())
            logger.setLevel(logging.INFO)
            logger.propagate = False
    return PrefectLogAdapter(logger, extra=dict(getattr(base, "extra", None) or {}))


_LOGGER_LOCK = threading.Lock()


def watch_in_prefect_logs(control: BuildControl, log: Any) -> None:
    """Send failures, retries and the periodic progress line to ``log`` as well as to the
    control's own sinks (the CLI's bars and piped progress)."""
    on_event, on_progress = control.on_event, control.on_progress
    t0 = time.monotonic()

    def event(kind: str, stage: str, st: StageStats) -> None:
        on_event(kind, stage, st)
        if kind == "failed" and len(st.failures) <= FAILURES_LOGGED:
            log.error("stage %s: %s", stage, st.failures[-1])
        elif kind == "retry":
            log.warning("stage %s: task lost, running it again (%d so far)", stage, st.retried)

    def progress(stats: dict[str, StageStats]) -> None:
        if on_progress is not None:
            on_progress(stats)
        log.info("progress: %s", progress_line(stats, time.monotonic() - t0))

    control.on_event = event
    control.on_progress = progress


def _make_build_flow():
    from prefect import flow

    return flow(name="forenset-build", log_prints=False, validate_parameters=False)(build_flow_fn)


build_flow = _make_build_flow()  # deployable: forenset/flows/build.py:build_flow


def run_build(
    run_uri: str,
    cfg: BuildConfig,
    *,
    retry_errors: bool = False,
    on_event: Callable[[str, str, StageStats], None] | None = None,
    on_interrupt: Callable[[], None] | None = None,
    on_progress: Callable[[dict[str, StageStats]], None] | None = None,
    progress_every_s: float = 30.0,
) -> dict[str, Any]:
    """Run the build as a Prefect flow (ephemeral API unless PREFECT_API_URL is set).

    ``on_progress`` gets the stage stats every ``progress_every_s`` (also while the build only
    waits on remote work); the same line goes to the flow run's log.

    ``on_interrupt`` runs once, on the event loop's thread (the main thread when called from
    the main thread), when the first Ctrl-C has stopped new work and the build waits for its
    running shards: the CLI says so there and arms a second Ctrl-C to quit at once."""
    from forenset.flows.ephemeral import reap_server_with_this_process, share_with_local_workers

    store = RunStore(run_uri, cfg.storage)
    store.acquire_lock()  # before the flow starts, so a refusal is one sentence, not a failed run
    _CONTROLS[run_uri] = BuildControl(
        on_event=on_event,
        on_interrupt=on_interrupt,
        on_progress=on_progress,
        progress_every_s=progress_every_s,
    )
    from prefect.exceptions import CancelledRun, FailedRun

    try:
        _quiet_storage_failure_echo()
        reap_server_with_this_process()  # a killed build leaves no orphaned ephemeral API server
        # this host's workers report to that server instead of starting their own; workers of a
        # remote cluster (address:) cannot reach it and keep their own (reaped with them)
        remote = any(rc.address for rc in cfg.runners.values())
        with share_with_local_workers(not remote):
            state = run_coroutine(
                build_flow(run_uri, cfg.resolved(), retry_errors, return_state=True)
            )
        return result_of_state(state)
    except CancelledRun as e:  # Ctrl-C: the flow run ended Cancelled after running shards committed
        raise BuildInterrupted(str(e)) from None
    except FailedRun as e:  # the scheduler stopped the build (BuildFailed) and the run says why
        raise BuildFailed(str(e)) from None
    finally:
        _CONTROLS.pop(run_uri, None)
        store.release_lock()


def result_of_state(state: Any) -> dict[str, Any]:
    """The build's summary from its flow run's final state. A run that ended Failed because
    shards failed still returns its summary (``failed`` says why; the CLI exits 1); a run
    cancelled or stopped early raises BuildInterrupted / BuildFailed with its sentence."""
    if state.is_cancelled():
        raise BuildInterrupted(state.message or "build interrupted")
    try:
        data = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - a state with no result: its message says why
        data = None
    if isinstance(data, BaseException):
        raise data
    if state.is_completed() or (isinstance(data, dict) and "stages" in data):
        return data
    raise BuildFailed(state.message or f"the build's flow run ended {state.type.value}")


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
