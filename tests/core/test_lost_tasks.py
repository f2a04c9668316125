"""Lost work never hangs a build: task timeouts and bounded retries in the scheduler, the
heartbeat watch of deployment runs (a real Prefect API), per-stage resource requests, and
a runner that cannot connect said in one sentence."""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import pytest

from forenset.config import Resources, memory_bytes, validate_config
from forenset.flows.build import resource_request, start_runner
from forenset.scheduler import Scheduler, TaskLost, dispatch_for
from forenset.stages import stage_class
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.worker import run_shards
from tests.conftest import small_config_dict
from tests.helpers import all_rows, run_local


def _cfg(run_dir, **diffs):
    return validate_config(
        small_config_dict(
            run_dir,
            sources={"samples": ["coffee", "rocket"], "max_side": 64},
            scenarios={"enabled": False},
            runners={"default": {"kind": "threads", "max_workers": 2}, "diffs": diffs},
        )
    )


def _build(cfg, lose):
    """The scheduler on a thread pool whose diffs tasks are 'lost' (a future that never
    completes, as when a worker dies under it) while ``lose(attempt)`` says so."""
    ctx = StageContext(RunStore(cfg.run_dir), cfg)
    pool = cf.ThreadPoolExecutor(2)
    attempts = {"n": 0}

    def submit(stage_name, specs):
        if stage_name == "diffs":
            attempts["n"] += 1
            if lose(attempts["n"]):
                return cf.Future()  # never resolved: its worker is gone
        return pool.submit(run_shards, stage_class(stage_name)(ctx), specs)

    try:
        sched = Scheduler(ctx, submit, dispatch=lambda s: dispatch_for(cfg, s))
        return sched, sched.run()
    finally:
        pool.shutdown(wait=True)


def test_a_lost_task_times_out_and_is_run_again_with_identical_rows(tmp_path):
    ref = all_rows(run_local(_cfg(tmp_path / "ref"))[0])
    cfg = _cfg(tmp_path / "run", kind="threads", timeout_s=1, retries=2, min_task_seconds=0)
    sched, stats = _build(cfg, lose=lambda n: n == 1)  # the first diffs task is lost
    assert stats["diffs"].retried == 1 and stats["diffs"].failed == 0
    assert "TaskLost" in sched.retry_reasons[0]
    assert all_rows(RunStore(cfg.run_dir)) == ref


def test_a_task_lost_every_time_fails_its_shards_with_the_reason_in_bounded_time(tmp_path):
    cfg = _cfg(tmp_path / "run", kind="threads", timeout_s=0.5, retries=1, min_task_seconds=0)
    t0 = time.monotonic()
    sched, stats = _build(cfg, lose=lambda n: True)  # no worker ever answers
    assert time.monotonic() - t0 < 120  # before: waited for ever on the first lost future
    st = stats["diffs"]
    assert st.failed == st.planned > 0 and st.retried == st.planned
    assert all("TaskLost: no result after 0.5 s" in f for f in st.failures)
    import json

    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["status"] == "failed" and "TaskLost" in state["message"]


@pytest.mark.slow  # waits out a missed heartbeat
def test_watch_flow_run_crashes_a_run_without_heartbeats_and_spares_a_beating_one(tmp_path):
    """A real flow run on Prefect's API: RUNNING with no heartbeat -> forced Crashed and
    TaskLost after lost_after_s; RUNNING with a live heartbeat past lost_after_s -> waited for
    until it completes."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Completed, Running

    from forenset.config import RunnerConfig
    from forenset.flows.deploy import Heartbeat, watch_flow_run

    @flow(name="forenset-watch-test")
    def noop():
        return 1

    store = RunStore(str(tmp_path / "run"))
    rc = RunnerConfig(kind="deployment", deployment="x/y", lost_after_s=1.5, heartbeat_s=0.2)
    with get_client(sync_client=True) as client:
        lost = client.create_flow_run(noop, state=Running())
        t0 = time.monotonic()
        with pytest.raises(TaskLost, match="no heartbeat"):
            watch_flow_run(client, lost.id, store, rc, poll_s=0.2)
        assert time.monotonic() - t0 < 30
        assert client.read_flow_run(lost.id).state.type.value == "CRASHED"

        alive = client.create_flow_run(noop, state=Running())

        def finish():
            time.sleep(4)  # well past lost_after_s, beating all along
            with get_client(sync_client=True) as c2:
                c2.set_flow_run_state(alive.id, Completed(), force=True)

        with Heartbeat(store, str(alive.id), 0.2):
            threading.Thread(target=finish, daemon=True).start()
            state = watch_flow_run(client, alive.id, store, rc, poll_s=0.2)
        assert state.is_completed()
        assert not store.exists(f"_heartbeats/{alive.id}.json")  # removed when the run ends


def test_resources_map_to_dask_ray_and_job_variables():
    import dask

    r = Resources(gpus=1, cpus=8, memory="48Gi")
    assert r.dask() == {"GPU": 1, "CPU": 8, "MEMORY": float(48 * 2**30)}
    assert r.ray() == {"num_gpus": 1, "num_cpus": 8, "memory": 48 * 2**30}
    assert r.job_variables() == {"gpus": 1, "cpus": 8, "memory": "48Gi"}
    assert memory_bytes("512M") == 512 * 10**6 and memory_bytes(1000) == 1000
    with pytest.raises(ValueError, match="not a size"):
        Resources(memory="lots")
    cfg = validate_config(
        {"runners": {"diffs": {"kind": "dask", "resources": {"gpus": 1, "memory": "16Gi"}}}}
    )
    with resource_request(cfg.runner_for("diffs")):  # what client.submit merges in
        assert dask.get_annotations() == {"resources": {"GPU": 1, "MEMORY": float(16 * 2**30)}}
    assert dask.get_annotations() == {}
    pytest.importorskip("prefect_ray")
    from prefect_ray.context import RemoteOptionsContext

    ray_cfg = validate_config({"runners": {"diffs": {"kind": "ray", "resources": {"gpus": 2}}}})
    with resource_request(ray_cfg.runner_for("diffs")):
        assert RemoteOptionsContext.get().current_remote_options == {"num_gpus": 2}


def test_a_runner_that_cannot_connect_is_one_sentence_not_a_run_dir_error():
    import contextlib
    import socket

    import dask

    # distributed's config defaults must load before dask.config.set below: leaving a set()
    # whose key did not exist yet deletes the whole 'distributed' section for later tests
    import distributed  # noqa: F401

    from forenset.config import RunnerConfig
    from forenset.errors import RunnerUnavailable

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    rc = RunnerConfig(kind="dask", address=f"tcp://127.0.0.1:{port}")
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        with contextlib.ExitStack() as stack, pytest.raises(RunnerUnavailable) as e:
            start_runner(stack, rc, "memory://x", {}, "diffs")
    msg = str(e.value)
    assert msg.startswith(f"the dask runner of stage diffs at tcp://127.0.0.1:{port} could not")
    assert "\n" not in msg and "run directory" not in msg
