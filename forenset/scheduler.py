"""The scheduler: plans shards, skips the up-to-date ones and feeds the rest to runners.

Prefect-free: ``submit(stage, specs) -> future`` is all it needs of an executor, so the same
scheduler drives the Prefect flow (``forenset.flows.build``), the bare thread pool of tests and
benchmarks (``forenset.flows.local``) and synthetic stages (``bench/scale.py``). Each stage is
planned from committed upstream shards as soon as they exist, so a shard of stage B starts when
its input shard of stage A is done (no whole-stage barrier). A shard whose committed file has
the same fingerprint and the same input content is skipped without a task.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import math
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from forenset.config import BuildSettings
from forenset.errors import ConfigurationError, ForensetError, clip
from forenset.stages import stage_classes
from forenset.store.run_store import RunStore, ShardInfo
from forenset.tasks.base import ContractError, ShardSpec, Stage, StageContext


class BuildFailed(ForensetError):
    """A configuration problem that every shard of a stage would hit (``ConfigurationError``):
    the build stopped early. The message is one sentence."""


class BuildControl:
    """Owns a build's interruption, in one place: the stop flag the scheduler reads, the
    progress sink, and what happens on the first Ctrl-C.

    ``interrupt()`` is the one entry point (the flow calls it when Prefect cancels it; tests
    call it directly): nothing new starts, running shards commit, and ``on_interrupt`` runs
    once — the CLI uses it to say so and to make a second Ctrl-C quit at once."""

    def __init__(
        self,
        on_event: Callable[[str, str, StageStats], None] | None = None,
        on_interrupt: Callable[[], None] | None = None,
        on_progress: Callable[[dict[str, StageStats]], None] | None = None,
        progress_every_s: float = 30.0,
    ):
        self.stop = threading.Event()
        self.on_event = on_event or (lambda *a: None)
        # called every ``progress_every_s`` while the build runs, also while it only waits
        # (a piped build's periodic line, the Prefect run logger)
        self.on_progress = on_progress
        self.progress_every_s = progress_every_s
        self._on_interrupt = on_interrupt
        self._lock = threading.Lock()

    @property
    def interrupted(self) -> bool:
        return self.stop.is_set()

    def interrupt(self) -> None:
        with self._lock:
            first = not self.stop.is_set()
            self.stop.set()
        if first and self._on_interrupt is not None:
            self._on_interrupt()


class BuildInterrupted(ForensetError):
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
    retried: int = 0  # tasks re-run after a lost worker, a crashed run or a timeout
    failures: list[str] = field(default_factory=list)


REASON_CHARS = 1000  # a failure reason kept in stats, state.json, the build log and the CLI


def progress_line(stats: dict[str, StageStats], elapsed: float | None = None) -> str:
    """One line for logs: ``12s candidates 8/16 diffs 2/8 (1 failed) ...`` — stages with work
    only, done = run + skipped out of planned."""
    parts = []
    for name, st in stats.items():
        if not st.planned and not st.failed:
            continue
        part = f"{name} {st.run + st.skipped}/{st.planned}"
        if st.failed:
            part += f" ({st.failed} failed)"
        if st.retried:
            part += f" ({st.retried} retried)"
        parts.append(part)
    head = f"{elapsed:.0f}s " if elapsed is not None else ""
    return head + ("; ".join(parts) if parts else "planning")


def failure_summary(stats: dict[str, StageStats], first: int = 3) -> str:
    """``3 shards failed (diffs 2, judgments 1); first: diffs/shard-0001: ValueError: ...``"""
    per = {n: st.failed for n, st in stats.items() if st.failed}
    if not per:
        return ""
    reasons = [f for st in stats.values() for f in st.failures][:first]
    total = sum(per.values())
    head = f"{total} shard{'s' if total != 1 else ''} failed ("
    head += ", ".join(f"{n} {k}" for n, k in per.items()) + ")"
    return head + ("; first: " + " | ".join(reasons) if reasons else "")


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
    retries: int = 0  # re-runs of a task lost with its worker (or timed out)
    timeout_s: float | None = None  # a task running longer is presumed lost


UNBOUNDED = Dispatch()  # one shard per task, submitted at once (bare loops, deployments)


def dispatch_for(cfg: BuildSettings, stage: str) -> Dispatch:
    rc = cfg.runner_for(stage)
    if rc.inflight_tasks() is None:  # deployments batch on their own; external clusters queue
        return Dispatch(runner=rc.model_dump_json(), retries=rc.retries, timeout_s=rc.timeout_s)
    return Dispatch(
        runner=rc.model_dump_json(),
        slots=rc.inflight_tasks(),
        min_task_s=rc.task_seconds(),
        max_task_shards=rc.max_task_shards,
        retries=rc.retries,
        timeout_s=rc.timeout_s,
    )


class TaskLost(ForensetError):
    """A task's worker is gone (or it ran past its runner's ``timeout_s``): retried when the
    runner allows, else its shards fail with this reason."""


@dataclass
class _Task:
    stage: str
    specs: list[ShardSpec]
    runner: str
    attempt: int = 0
    started: float = field(default_factory=time.monotonic)


TICK_S = 1.0  # the scheduler wakes at least this often: timeouts, state.json, progress
STATE_EVERY_S = 2.0


class Scheduler:
    """Walks the DAG and feeds shards to runners.

    ``submit(stage_name, specs) -> future`` runs a bundle of shards of one stage; its result is
    one outcome per spec, in order (``forenset.worker.run_shards``). ``dispatch(stage)``
    says how many tasks may be in flight on that stage's runner and how shards are bundled;
    by default every shard is its own task, submitted as soon as it is planned."""

    def __init__(
        self,
        ctx: StageContext,
        submit: Callable[[str, list[ShardSpec]], Any],
        *,
        retry_errors: bool = False,
        control: BuildControl | None = None,
        stages: list[type[Stage]] | None = None,
        barrier: bool = False,
        dispatch: Callable[[str], Dispatch] | None = None,
    ):
        self.ctx = ctx
        self.control = control or BuildControl()
        self.stop = self.control.stop  # set: submit nothing more, let running tasks end
        self.store: RunStore = ctx.store
        self.submit = submit
        self.retry_errors = retry_errors
        self.on_event = self.control.on_event
        self.fatal: str | None = None  # a ConfigurationError's sentence: the build stops
        self.stage_types = stages or stage_classes()
        self.stages = {s.name: s(ctx) for s in self.stage_types}
        self.dispatch = {n: dispatch(n) if dispatch else UNBOUNDED for n in self.stages}
        self.children: dict[str, list[Stage]] = defaultdict(list)
        for s in self.stages.values():
            for up in s.inputs:
                self.children[up].append(s)
        self.stats = {name: StageStats() for name in self.stages}
        self.retry_reasons: list[str] = []  # why tasks were re-run (logs, state.json)
        self.done: dict[str, list[ShardInfo]] = defaultdict(list)
        self.inflight: dict[Any, _Task] = {}
        self.queued: dict[str, deque[ShardSpec]] = {name: deque() for name in self.stages}
        self.busy: Counter[str] = Counter()  # tasks in flight per runner
        self.timed: dict[str, list[float]] = {name: [0.0, 0] for name in self.stages}  # ms, n
        self.tasks_submitted = 0
        self._last_state = 0.0
        self._started = time.monotonic()
        self._last_progress = self._started
        # barrier=True holds a stage's children until the whole stage is done (for comparison only)
        self.barrier = barrier
        self.held: dict[str, list[ShardInfo]] = defaultdict(list)
        # gathering stages wait here for every shard of their inputs (see Stage.gather)
        self.gathered: dict[str, list[ShardInfo]] = defaultdict(list)
        self.gather_waiting = {n for n, s in self.stages.items() if s.gather}
        # gathering stages left unplanned because an input failed: their manifests keep the
        # last complete output (a failed input never empties a score table)
        self.kept: set[str] = set()
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
        if existing is not None and shard_valid(existing, spec, self.retry_errors):
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

    def failed(self, spec: ShardSpec, error: str, fatal: bool = False) -> None:
        from forenset.redact import redact

        # printed by the CLI, logged and kept in state.json: no secret in it, and bounded (a
        # reason quoting a 5 MB id is cut here, once, for all three)
        error = clip(redact(error), REASON_CHARS)
        st = self.stats[spec.stage]
        st.failed += 1
        st.failures.append(f"{spec.key()}: {error}")
        if fatal and self.fatal is None:  # every shard would fail alike: spend no more on it
            self.fatal = f"stage {spec.stage}: {error}"
            self.stop.set()
        self.on_event("failed", spec.stage, st)

    def plan_children(self, stage: str, info: ShardInfo) -> None:
        for child in self.children[stage]:
            if child.gather:
                self.gathered[child.name].append(info)
                continue
            try:
                specs = child.plan(info)
            except ConfigurationError as e:  # planning hit a bad setting: every shard would
                self.plan_failed(child.name, e)
                continue
            for s in specs:
                self.offer(s)

    def release_gathers(self) -> None:
        """Plan each gathering stage once none of its ancestors has work left. If an ancestor
        had failed shards its input is incomplete: it is not planned, and says why."""
        for name in sorted(self.gather_waiting, key=lambda n: len(self.ancestors[n])):
            if self.ancestors[name] & (self._busy_stages() | self.gather_waiting):
                continue
            self.gather_waiting.discard(name)
            failed = sorted(a for a in self.ancestors[name] if self.stats[a].failed)
            if failed:
                self.kept.add(name)
                self.failed_unplanned(
                    name,
                    f"not planned: input stage(s) {', '.join(failed)} failed "
                    "(its last complete output is kept)",
                )
                continue
            infos = sorted(self.gathered.pop(name, []), key=lambda i: (i.stage, i.path))
            try:
                specs = self.stages[name].plan_gathered(infos)
            except ConfigurationError as e:
                self.plan_failed(name, e)
                continue
            for spec in specs:
                self.offer(spec)

    def plan_failed(self, name: str, error: ConfigurationError) -> None:
        """A ``ConfigurationError`` while planning is as fatal as one while running a shard:
        nothing new starts and the build ends with the sentence, not a traceback."""
        self.failed_unplanned(name, str(error))
        if self.fatal is None:
            self.fatal = f"stage {name}: {error}"
            self.stop.set()

    def failed_unplanned(self, name: str, why: str) -> None:
        why = clip(why, REASON_CHARS)
        st = self.stats[name]
        st.failed += 1
        st.failures.append(f"{name}: {why}")
        self.on_event("failed", name, st)

    def _busy_stages(self) -> set[str]:
        return (
            {t.stage for t in self.inflight.values()}
            | {n for n, q in self.queued.items() if q}
            | {n for n, h in self.held.items() if h}
        )

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
        return bool(self.inflight or self.held or self.gather_waiting or any(self.queued.values()))

    def run(self) -> dict[str, StageStats]:
        self.write_state("running")
        for s in self.stages.values():
            if not s.inputs:
                try:
                    specs = s.plan_sources()
                except ConfigurationError as e:  # a bad listing (sources:, external generators)
                    self.fatal = f"{s.name}: {e}"
                    self.write_state("failed")
                    raise BuildFailed(f"{s.name}: {e}") from None
                for spec in specs:
                    self.offer(spec)
        self.dispatch_queued()
        while self._pending():
            if self.barrier:
                self.release_barriers()
            if self.gather_waiting:
                self.release_gathers()
            if self.barrier or self.gather_waiting or not self.inflight:
                self.dispatch_queued()
                if not self.inflight:
                    continue
            # wake at least every TICK_S: a lost task times out, state.json and progress stay live
            finished = wait_any(list(self.inflight), timeout=TICK_S)
            for fut in finished:
                task = self.inflight.pop(fut)
                self.busy[task.runner] -= 1
                try:
                    outcomes = result_of(fut)
                    if len(outcomes) != len(task.specs):
                        raise RuntimeError(f"{len(outcomes)} outcomes for {len(task.specs)} shards")
                except Exception as e:  # noqa: BLE001 - a failed task fails its shards, the rest goes on
                    # run_shards returns a shard's own errors as outcomes: an exception here is
                    # the task's (its worker died, its deployment run crashed): run it again
                    fatal = isinstance(e, ConfigurationError | ContractError)
                    why = f"{type(e).__name__}: {e}"
                    if not fatal and self.retry(task, why):
                        continue
                    outcomes = [{"error": why, "fatal": fatal}] * len(task.specs)
                self.record(task, outcomes)
            self.expire_overdue()
            self.dispatch_queued()
            self.tick()
        if self.fatal is not None:  # manifests keep the last complete view
            self.write_state("failed")
            raise BuildFailed(self.fatal)
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

    def record(self, task: _Task, outcomes: list[dict[str, Any]]) -> None:
        for spec, out in zip(task.specs, outcomes, strict=True):
            if "error" in out:
                self.failed(spec, out["error"], bool(out.get("fatal")))
            else:
                self.completed(spec, ShardInfo(**out["info"]), ran=True)

    def retry(self, task: _Task, why: str) -> bool:
        """Submit a lost task's shards again, if its runner's ``retries`` allow; the build
        goes on meanwhile. A shard that did commit before the loss commits the same rows."""
        d = self.dispatch[task.stage]
        if self.stop.is_set() or task.attempt >= d.retries:
            return False
        st = self.stats[task.stage]
        st.retried += 1
        self.retry_reasons.append(
            clip(f"{task.stage} attempt {task.attempt + 2}: {why}", REASON_CHARS)
        )
        fut = self.submit(task.stage, task.specs)
        self.inflight[fut] = _Task(task.stage, task.specs, task.runner, attempt=task.attempt + 1)
        self.busy[task.runner] += 1
        self.tasks_submitted += 1
        self.on_event("retry", task.stage, st)
        return True

    def expire_overdue(self) -> None:
        """Tasks past their runner's ``timeout_s`` (counted from submission) are presumed
        lost: cancelled where the runner can, then retried or failed with the reason."""
        now = time.monotonic()
        for fut, task in list(self.inflight.items()):
            limit = self.dispatch[task.stage].timeout_s
            if limit is None or now - task.started <= limit:
                continue
            self.inflight.pop(fut)
            self.busy[task.runner] -= 1
            _cancel(fut)
            why = f"TaskLost: no result after {limit:g} s (the runner's timeout_s)"
            if not self.retry(task, why):
                self.record(task, [{"error": why}] * len(task.specs))

    def tick(self) -> None:
        now = time.monotonic()
        if now - self._last_state > STATE_EVERY_S:
            self.write_state("running")
        if (
            self.control.on_progress is not None
            and now - self._last_progress >= self.control.progress_every_s
        ):
            self._last_progress = now
            self.control.on_progress(self.stats)

    # -- records -----------------------------------------------------------------
    def write_manifests(self) -> None:
        for name, stage in self.stages.items():
            if name in self.kept:
                continue  # the last complete view stays
            infos = sorted(self.done.get(name, []), key=lambda i: i.path)
            schema = base64.b64encode(stage.output_schema.serialize().to_pybytes()).decode()
            meta = {"config_hash": self.ctx.config.config_hash(), "schema": schema}
            self.store.write_manifest(name, infos, meta)

    def write_state(self, status: str) -> None:
        self._last_state = time.monotonic()
        running = Counter(t.stage for t in self.inflight.values() for _ in t.specs)
        message = (self.fatal or failure_summary(self.stats)) if status == "failed" else ""
        self.store.write_json(
            "state.json",
            {
                "status": status,
                "message": clip(message, REASON_CHARS),  # why a failed build failed, in one line
                "order": list(self.stats),  # DAG order (the JSON keys below are sorted)
                # the gates in DAG order (Stage.gate): status counts their kept / discarded
                "gates": [n for n, s in self.stages.items() if s.gate],
                "config_hash": self.ctx.config.config_hash(),
                "time": time.time(),
                "started": time.time() - (time.monotonic() - self._started),
                "tasks": self.tasks_submitted,
                "retries": self.retry_reasons[-20:],
                "stages": {
                    n: {
                        "planned": s.planned,
                        "done": s.run + s.skipped,
                        "failed": s.failed,
                        "retried": s.retried,
                        "inflight": running[n],
                        "queued": len(self.queued[n]),
                        "failures": s.failures[:10],  # the first reasons, as the shards failed
                    }
                    for n, s in self.stats.items()
                },
            },
        )


class _Pending(ForensetError):
    """Raised by the dry walk of ``shards_up_to_date`` at the first shard with work to do."""


def _refuse(stage: str, specs: list[ShardSpec]) -> Any:
    raise _Pending(stage)


def shards_up_to_date(ctx: StageContext, *, retry_errors: bool = False) -> int | None:
    """The number of shards when a build of ``ctx.config`` has nothing to do, else None.

    A dry walk of the scheduler's own planning (no task runner, no Prefect, nothing written):
    every planned shard — gathering stages included — must be skipped as ``offer`` would skip
    it, the last build must have ended ``complete`` with this config, and each stage's manifest
    must list exactly the shards the walk found. Anything else (a missing shard, a changed
    fingerprint, retryable errors, a failed or interrupted build) answers None at once, and the
    caller runs the real build. Cheap: it reads footers and manifests only."""
    state = ctx.store.read_json("state.json", default=None) or {}
    if state.get("status") != "complete" or state.get("config_hash") != ctx.config.config_hash():
        return None
    sched = Scheduler(ctx, _refuse, retry_errors=retry_errors)
    try:
        for s in sched.stages.values():
            if not s.inputs:
                for spec in s.plan_sources():
                    sched.offer(spec)
                    sched.dispatch_queued()  # a queued shard is work: _refuse raises
        for _ in range(len(sched.stages) + 1):
            if not sched.gather_waiting:
                break
            sched.release_gathers()
            sched.dispatch_queued()
    except _Pending:
        return None
    if sched.gather_waiting or any(st.failed for st in sched.stats.values()):
        return None
    for name in sched.stages:
        found = sorted((i.path, i.content_id) for i in sched.done.get(name, []))
        listed = sorted((i.path, i.content_id) for i in ctx.store.manifest(name))
        if found != listed:
            return None
    return sum(st.planned for st in sched.stats.values())


def wait_any(futs: list[Any], timeout: float | None = None) -> list[Any]:
    """Block until at least one future is done, or ``timeout`` seconds passed (then ``[]``).

    Thread-runner futures wrap real ``concurrent.futures.Future`` objects (``cf.wait`` works);
    process-runner futures wrap an unpickling proxy, Dask futures and Ray object refs are their
    own kinds, so those are polled (``done()``, ``ray.wait``) — mixing runners in one build
    must not break waiting.
    """
    wrapped = {getattr(f, "wrapped_future", f): f for f in futs}
    real = [w for w in wrapped if type(w) is cf.Future]
    if len(real) == len(wrapped):
        done, _ = cf.wait(real, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return [wrapped[d] for d in done]
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        ready = [f for w, f in wrapped.items() if _is_done(w, f)]
        if ready:
            return ready
        if deadline is not None and time.monotonic() >= deadline:
            return []
        if real:
            cf.wait(real, timeout=0.02, return_when=cf.FIRST_COMPLETED)
        else:
            time.sleep(0.02)


def _cancel(fut: Any) -> None:
    """Best effort: stop a task presumed lost (a Dask or concurrent future, a Ray object ref)."""
    w = getattr(fut, "wrapped_future", fut)
    try:
        if type(w).__name__ == "ObjectRef":
            import ray

            ray.cancel(w)
        elif hasattr(w, "cancel"):
            w.cancel()
    except Exception:  # noqa: BLE001, S110 - it is abandoned either way; a late commit is identical
        pass


def _is_done(w: Any, f: Any) -> bool:
    if hasattr(w, "done"):
        return bool(w.done())
    if type(w).__name__ == "ObjectRef":  # Ray: ask Ray, not the Prefect API, every poll
        import ray

        ready, _ = ray.wait([w], timeout=0)
        return bool(ready)
    return f.state.is_final()


def result_of(fut: Any) -> list[dict[str, Any]]:
    if hasattr(fut, "result") and hasattr(fut, "task_run_id"):
        return fut.result(raise_on_failure=True)
    return fut.result()
