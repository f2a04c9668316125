"""Lost workers never hang a build: an external Dask scheduler with two workers on 127.0.0.1,
one worker (its nanny and the worker process under it) SIGKILLed while it runs diffs shards.
The build must end within a bound, complete on the other worker, and give the rows of a
local build."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from forenset.config import validate_config
from forenset.store.run_store import RunStore
from tests.conftest import small_config_dict
from tests.helpers import all_rows, run_local

REPO = Path(__file__).resolve().parents[2]
# CLI builds report to this worker's Prefect server (conftest.py: prefect_api)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_api")]

BOUND_S = 600  # the whole build, kill included: it ends (completes or fails) by then


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every process under it (a worker's nanny and its worker)."""
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for q in procs:
        try:
            q.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


@pytest.fixture
def dask_cluster(tmp_path):
    """``dask scheduler`` + 2 ``dask worker`` processes, all on 127.0.0.1, dashboards on
    loopback ephemeral ports; the workers preload a slow diffs stage."""
    pytest.importorskip("distributed")
    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        OMP_NUM_THREADS="1",
    )
    logs = []
    procs = []

    def start(name: str, args: list[str]) -> subprocess.Popen:
        log = open(tmp_path / f"{name}.log", "w")
        logs.append(log)
        p = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    start(
        "scheduler",
        [*dask, "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", "127.0.0.1:0"],
    )
    worker_cmd = [
        sys.executable,
        "-m",
        "distributed.cli.dask_worker",
        addr,
        "--host",
        "127.0.0.1",
        "--nthreads",
        "1",
        "--nworkers",
        "1",
        "--dashboard-address",
        "127.0.0.1:0",
        "--preload",
        "tests.integration.slow_shards",
    ]
    workers = [start(f"w{i}", [*worker_cmd, "--name", f"w{i}"]) for i in range(2)]
    from distributed import Client

    deadline = time.time() + 180
    while True:
        try:
            with Client(addr, timeout=10) as c:
                if len(c.scheduler_info()["workers"]) == 2:
                    break
        except OSError:
            pass
        assert time.time() < deadline, (tmp_path / "w0.log").read_text()[-2000:]
        time.sleep(1)

    def add_worker(name: str) -> subprocess.Popen:
        return start(name, [*worker_cmd, "--name", name])

    try:
        yield addr, workers, add_worker
    finally:
        for p in reversed(procs):
            kill_tree(p.pid)
        for log in logs:
            log.close()


def committed(run: Path, stage: str) -> int:
    return len(list((run / "stages" / stage).rglob("*.parquet")))


def start_build(path: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "forenset.cli", "build", str(path)],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ, FORENSET_PROGRESS_SECONDS="2"),
    )


def wait_for(cond, build: subprocess.Popen, t0: float, what: str) -> None:
    while not cond():
        assert build.poll() is None, f"the build ended before {what}"
        assert time.monotonic() - t0 < BOUND_S, f"{what} never happened"
        time.sleep(0.1)


def test_a_killed_dask_worker_does_not_hang_the_build_and_rows_are_identical(
    tmp_path, dask_cluster
):
    """Worker 0 (its nanny and worker process) SIGKILLed while diffs shards run: its shards
    move to worker 1 and the build completes, within a bound, with the rows of a local build.
    The other lost-work paths, where nothing is left to run a task (it times out, is retried,
    then fails with the reason), are in tests/core/test_lost_tasks.py and, for deployment runs
    whose worker died, tests/integration/test_deployment.py."""
    addr, workers, _ = dask_cluster
    base = small_config_dict(
        tmp_path / "ref",
        shard_size=1,  # several diffs shards per worker, so the kill finds work on both
        sources={"samples": ["astronaut", "coffee", "rocket"], "max_side": 64},
        scenarios={"enabled": False},
        evaluation={"enabled": False},
        fakebench={"enabled": False},
    )
    ref = all_rows(run_local(validate_config(base))[0])
    run = tmp_path / "run"
    cfg = dict(
        base,
        run_dir=str(run),
        runners={
            "default": {"kind": "threads", "max_workers": 2},
            # a safety net only (a loaded 2-core machine can take a minute per first task):
            # Dask itself moves the lost worker's tasks
            "diffs": {"kind": "dask", "address": addr, "inflight": 16, "timeout_s": 300},
        },
    )
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    t0 = time.monotonic()
    build = start_build(path, tmp_path / "build.out")
    try:
        wait_for(lambda: committed(run, "diffs") >= 1, build, t0, "a diffs shard committed")
        kill_tree(workers[0].pid)  # the nanny and its worker process
        killed_at = committed(run, "diffs")
        build.wait(timeout=BOUND_S - (time.monotonic() - t0))  # never hangs
    finally:
        kill_tree(build.pid)
    out = (tmp_path / "build.out").read_text()
    assert build.returncode == 0, out[-4000:]
    assert "progress: " in out  # piped output: periodic one-line progress
    assert json.loads((run / "state.json").read_text())["status"] == "complete"
    assert committed(run, "diffs") > killed_at  # the rest ran after the kill, on worker 1
    assert all_rows(RunStore(str(run))) == ref
