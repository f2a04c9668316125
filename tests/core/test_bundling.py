"""Task bundling and in-flight slots in the scheduler, without Prefect.

Shards stay the unit of resume; a task may run several shards of one stage so that tiny shards
do not each pay an orchestrator's per-task cost. These tests drive the real Scheduler with a
thread pool and record every task it submits."""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading

import pytest

from forenset.config import validate_config
from forenset.scheduler import (
    BuildControl,
    BuildInterrupted,
    Dispatch,
    Scheduler,
    dispatch_for,
)
from forenset.stages import stage_class
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.tasks.diffs import Diffs
from forenset.worker import run_shards
from tests.conftest import small_config_dict
from tests.helpers import all_rows, run_local


def config(run_dir, **runner):
    d = small_config_dict(
        run_dir,
        shard_size=1,
        sources={"samples": ["astronaut", "coffee", "chelsea"], "max_side": 64},
        scenarios={"enabled": False},
        runners={"default": {"kind": "threads", "max_workers": 2, **runner}},
    )
    return validate_config(d)


class Recorder:
    """A thread-pool submit that records each task's shards and the tasks in flight."""

    def __init__(self, ctx: StageContext, workers: int = 2):
        self.ctx = ctx
        self.pool = cf.ThreadPoolExecutor(workers)
        self.tasks: list[tuple[str, list[str]]] = []
        self.running = 0
        self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, stage_name, specs):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.tasks.append((stage_name, [s.key() for s in specs]))

        def work():
            try:
                return run_shards(stage_class(stage_name)(self.ctx), specs)
            finally:
                with self.lock:
                    self.running -= 1

        return self.pool.submit(work)


def run_recorded(cfg, **kw):
    ctx = StageContext(RunStore(cfg.run_dir), cfg)
    rec = Recorder(ctx)
    sched = Scheduler(ctx, rec, dispatch=lambda s: dispatch_for(cfg, s), **kw)
    try:
        stats = sched.run()
    finally:
        rec.pool.shutdown(wait=True)
    return sched, stats, rec


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    cfg = config(tmp_path_factory.mktemp("ref") / "run")
    store, stats, executed = run_local(cfg)
    return all_rows(store), sum(executed.values())


def test_bundled_build_writes_the_same_rows_in_fewer_tasks(tmp_path, reference):
    ref, shards = reference
    cfg = config(tmp_path / "run", min_task_seconds=30, max_task_shards=3)
    sched, stats, rec = run_recorded(cfg)
    assert not any(s.failures for s in stats.values())
    assert all_rows(RunStore(cfg.run_dir)) == ref
    assert sum(len(ids) for _, ids in rec.tasks) == shards == sum(s.run for s in stats.values())
    assert len(rec.tasks) < shards and sched.tasks_submitted == len(rec.tasks)
    assert max(len(ids) for _, ids in rec.tasks) == 3  # bundles formed, capped at max_task_shards
    first = {}
    for stage, ids in rec.tasks:
        first.setdefault(stage, len(ids))
    assert set(first.values()) == {1}, first  # a stage's first task times it: one shard
    assert rec.peak <= 2  # threads: max_workers tasks in flight, the rest waits to be bundled


def test_no_bundling_runs_one_shard_per_task(tmp_path, reference):
    ref, shards = reference
    cfg = config(tmp_path / "run", min_task_seconds=0)
    _, _, rec = run_recorded(cfg)
    assert all(len(ids) == 1 for _, ids in rec.tasks) and len(rec.tasks) == shards
    assert all_rows(RunStore(cfg.run_dir)) == ref


def test_bundle_size_rule(tmp_path):
    cfg = config(tmp_path / "run")
    sched = Scheduler(StageContext(RunStore(cfg.run_dir), cfg), lambda *a: None)
    d = Dispatch(runner="r", slots=2, min_task_s=1.0, max_task_shards=64)
    assert sched.bundle_size("diffs", d, queued=30, free=2) == 1  # not timed yet
    sched.timed["diffs"] = [300.0, 3]  # 100 ms a shard
    assert sched.bundle_size("diffs", d, queued=30, free=1) == 10  # ~1 s of work
    assert sched.bundle_size("diffs", d, queued=8, free=2) == 4  # an even share per free slot
    assert sched.bundle_size("diffs", d, queued=1, free=1) == 1
    assert sched.bundle_size("diffs", Dispatch("r", 2, 1.0, 3), queued=30, free=1) == 3
    assert sched.bundle_size("diffs", Dispatch("r", 2, 0.0, 64), queued=30, free=1) == 1
    assert sched.bundle_size("diffs", Dispatch("r", None, 1.0, 64), queued=30, free=None) == 10


def test_inflight_defaults_per_runner_kind():
    cfg = validate_config(
        {
            "runners": {
                "default": {"kind": "threads", "max_workers": 3},
                "diffs": {"kind": "processes", "max_workers": 3},
                "splits": {"kind": "threads", "max_workers": 3, "inflight": 7},
                "perturbations": {"kind": "dask", "address": "tcp://sched:8786"},
                "explanations": {"kind": "dask", "address": "tcp://sched:8786", "inflight": 64},
                "candidates": {"kind": "deployment", "deployment": "forenset-shards/gpu"},
            }
        }
    )
    assert dispatch_for(cfg, "captions").slots == 3
    assert dispatch_for(cfg, "diffs").slots == 6  # a queued task hides process dispatch
    assert dispatch_for(cfg, "splits").slots == 7
    # an external cluster's size is unknown: every shard goes to it when planned, unless set
    assert dispatch_for(cfg, "perturbations").slots is None
    assert dispatch_for(cfg, "explanations").slots == 64
    assert dispatch_for(cfg, "candidates").slots is None  # deployments batch on their own
    assert dispatch_for(cfg, "candidates").max_task_shards == 1
    assert dispatch_for(cfg, "captions").runner == dispatch_for(cfg, "judgments").runner
    assert dispatch_for(cfg, "captions").runner != dispatch_for(cfg, "diffs").runner
    # work per task from Prefect's measured per-task cost (35 ms threads, 170 ms processes)
    assert dispatch_for(cfg, "captions").min_task_s == 1.0
    assert dispatch_for(cfg, "diffs").min_task_s == 20.0
    assert dispatch_for(cfg, "explanations").min_task_s == 20.0


def test_min_task_seconds_set_wins_over_the_runner_default():
    cfg = validate_config(
        {
            "runners": {
                "default": {"kind": "threads", "min_task_seconds": 0},
                "diffs": {"kind": "processes", "min_task_seconds": 3},
            }
        }
    )
    assert dispatch_for(cfg, "captions").min_task_s == 0.0
    assert dispatch_for(cfg, "diffs").min_task_s == 3.0


def test_a_failing_shard_fails_alone_and_resume_retries_only_it(tmp_path, reference, monkeypatch):
    ref, shards = reference
    cfg = config(tmp_path / "run", min_task_seconds=30, max_task_shards=8)
    real = Diffs.process
    seen: list[str] = []

    def flaky(self, batch, spec):
        seen.append(spec.key())
        if len(seen) == 2:
            raise RuntimeError("injected")
        return real(self, batch, spec)

    monkeypatch.setattr(Diffs, "process", flaky)
    _, stats, rec = run_recorded(cfg)
    assert stats["diffs"].failed == 1 and "RuntimeError: injected" in stats["diffs"].failures[0]
    assert stats["diffs"].run == len(seen) - 1  # the rest of its bundle committed
    monkeypatch.setattr(Diffs, "process", real)
    _, stats2, executed = run_local(cfg)
    assert executed["diffs"] == 1 and executed["sources"] == 0
    assert all_rows(RunStore(cfg.run_dir)) == ref


def test_stop_finishes_running_tasks_then_resume_completes(tmp_path, reference):
    ref, shards = reference
    cfg = config(tmp_path / "run", min_task_seconds=0)
    done = []
    heard = []

    def on_event(kind, stage, st):
        if kind == "done":
            done.append(stage)
            if len(done) == 6:
                control.interrupt()  # what Ctrl-C does to the flow
                control.interrupt()  # a second request changes nothing here

    control = BuildControl(on_event=on_event, on_interrupt=lambda: heard.append(1))
    with pytest.raises(BuildInterrupted, match="run the same command to resume"):
        run_recorded(cfg, control=control)
    assert heard == [1]  # the first request is announced once
    store = RunStore(cfg.run_dir)
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["status"] == "interrupted"
    assert not store.manifest("sources")  # no half view: manifests are written by complete builds
    committed = list((tmp_path / "run" / "stages").rglob("*.parquet"))
    assert 6 <= len(committed) < shards  # the running tasks finished and committed, no more
    _, stats, executed = run_local(cfg)
    assert sum(executed.values()) == shards - len(committed)
    assert all_rows(store) == ref


def test_run_shards_reports_each_shard_and_keeps_going(tmp_path, monkeypatch):
    """A bundle's failing shard is an error outcome; the shards after it still commit."""
    from forenset.tasks.sources import Sources

    cfg = config(tmp_path / "run")
    stage = Sources(StageContext(RunStore(cfg.run_dir), cfg))
    specs = list(stage.plan_sources())
    assert len(specs) == 3
    real = Sources.process

    def second_fails(self, batch, spec):
        if spec.shard_id == specs[1].shard_id:
            raise OSError(28, "No space left on device")
        return real(self, batch, spec)

    monkeypatch.setattr(Sources, "process", second_fails)
    out = run_shards(stage, specs)
    assert [sorted(o) for o in out] == [["info"], ["error"], ["info"]]
    assert out[1]["error"] == "OSError: [Errno 28] No space left on device"
    for spec, o in zip(specs, out, strict=True):
        info = stage.ctx.store.shard_info("sources", spec.shard_id, spec.partition)
        assert (info is not None) == ("info" in o)
