"""A real Prefect server on 127.0.0.1, a process worker, and a build whose candidates stage is
sent in shard batches to a deployed shard flow (as a GPU pool would run it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import small_config_dict

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prefect server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("prefect server did not become healthy")


@pytest.fixture
def prefect_server(tmp_path):
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = dict(
        os.environ,
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_API_URL=api,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_UI_ENABLED="false",
        PREFECT_WORKER_QUERY_SECONDS="1",
        PREFECT_WORKER_PREFETCH_SECONDS="5",
        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_healthy(api, server)
        yield env
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_build_through_deployments_with_a_process_worker(tmp_path, prefect_server):
    """docs/cluster.md's process-pool recipe as written: the two pools, ``prefect deploy --all``
    from prefect.yaml, a worker per pool. Two GPU workers; one is SIGKILLed with its flow-run
    process while it holds a batch: the heartbeat watch marks that run Crashed, its shards run
    again on the other worker, and the build completes with every shard."""
    env = prefect_server
    for pool in ("cpu", "gpu"):
        subprocess.run(
            [sys.executable, "-m", "prefect", "work-pool", "create", pool, "--type", "process"],
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
    dep = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dep.returncode == 0, dep.stdout[-3000:] + dep.stderr[-3000:]
    workers, logs = [], []
    for name, pool in (("cpu", "cpu"), ("gpu0", "gpu"), ("gpu1", "gpu")):
        log = open(tmp_path / f"worker-{name}.log", "w")
        logs.append(log)
        workers.append(
            subprocess.Popen(
                [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool]
                + ["--limit", "4" if pool == "cpu" else "1", "--name", name],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    run_dir = tmp_path / "run"
    cfg = small_config_dict(
        run_dir,
        runners={
            "default": {"kind": "threads", "max_workers": 2},
            "candidates": {
                "kind": "deployment",
                "deployment": "forenset-shards/gpu",
                "batch_wait_s": 1.0,
                "batch_shards": 2,
                "heartbeat_s": 1,
                "lost_after_s": 45,
                "retries": 2,
            },
        },
    )
    script = f"""
import json
from prefect.deployments import run_deployment
fr = run_deployment("forenset-build/build", parameters={{"run_uri": {str(run_dir)!r}, "config": {cfg!r}}},
                    timeout=900, poll_interval=1, as_subflow=False)
print(json.dumps({{"state": fr.state.type.value, "message": fr.state.message}}))
"""
    try:
        build = subprocess.Popen(
            [sys.executable, "-c", script],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # once a GPU worker runs a shard-batch flow (a child process), kill it and the child
        victim, deadline = None, time.time() + 600
        while victim is None and build.poll() is None and time.time() < deadline:
            for w in workers[1:]:
                if psutil.Process(w.pid).children(recursive=True):
                    victim = w
                    break
            time.sleep(0.2)
        assert victim is not None, "no GPU worker ever ran a batch"
        tree = [psutil.Process(victim.pid), *psutil.Process(victim.pid).children(recursive=True)]
        for proc in tree:
            proc.kill()
        out, err = build.communicate(timeout=900)  # never hangs: the lost run is detected
        p = subprocess.CompletedProcess(build.args, build.returncode, out, err)
    finally:
        if build.poll() is None:
            build.kill()
        for w in workers:
            if w.poll() is None:
                w.terminate()
                try:
                    w.wait(20)
                except subprocess.TimeoutExpired:
                    w.kill()
        for log in logs:
            log.close()
    assert p.returncode == 0, p.stderr[-3000:]
    assert '"COMPLETED"' in p.stdout, (p.stdout, (tmp_path / "worker-cpu.log").read_text()[-4000:])
    from forenset.store.run_store import RunStore
    from tests.helpers import rows

    store = RunStore(str(run_dir))
    cands = rows(store, "candidates")
    assert cands and {r["generator"] for r in cands} == {"cv-a", "cv-faulty"}
    assert (
        rows(store, "explanations") and (run_dir / "exports" / "parquet" / "train.parquet").exists()
    )
    # the candidates shards ran in batches inside deployment runs, not one run per shard
    listing = """
import asyncio, json
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowFilter, FlowFilterName
async def main():
    async with get_client() as c:
        runs = await c.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["forenset-shards"])))
        print(json.dumps([r.state.type.value for r in runs]))
asyncio.run(main())
"""
    q = subprocess.run(
        [sys.executable, "-c", listing], env=env, capture_output=True, text=True, timeout=120
    )
    states = json.loads(q.stdout.strip().splitlines()[-1])
    n_shards = len(store.manifest("candidates"))
    assert "CRASHED" in states  # the killed worker's run, marked by the heartbeat watch
    assert states.count("COMPLETED") < n_shards, (states, n_shards)  # batches, not one per shard
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "complete" and state["stages"]["candidates"]["retried"] >= 1
