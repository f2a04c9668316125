"""A real Prefect server on 127.0.0.1, a process worker, and a build whose candidates stage is
sent in shard batches to a deployed shard flow (as a GPU pool would run it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

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
    env = prefect_server
    pool = "forenset-test"
    subprocess.run(
        [sys.executable, "-m", "prefect", "work-pool", "create", pool, "--type", "process"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    deploy = f"""
from prefect import flow
flow.from_source(source={str(REPO)!r}, entrypoint="forenset/flows/deploy.py:shard_batch_flow").deploy(
    name="gpu", work_pool_name={pool!r})
flow.from_source(source={str(REPO)!r}, entrypoint="forenset/flows/build.py:build_flow").deploy(
    name="build", work_pool_name={pool!r})
"""
    subprocess.run(
        [sys.executable, "-c", deploy], env=env, check=True, capture_output=True, timeout=180
    )
    wlog = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--limit", "4"],
        env=env,
        stdout=wlog,
        stderr=subprocess.STDOUT,
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
                "batch_shards": 8,
            },
        },
    )
    script = f"""
import json
from prefect.deployments import run_deployment
fr = run_deployment("forenset-build/build", parameters={{"run_uri": {str(run_dir)!r}, "config": {cfg!r}}},
                    timeout=600, poll_interval=1, as_subflow=False)
print(json.dumps({{"state": fr.state.type.value, "message": fr.state.message}}))
"""
    try:
        p = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=700
        )
    finally:
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
        wlog.close()
    assert p.returncode == 0, p.stderr[-3000:]
    assert '"COMPLETED"' in p.stdout, (p.stdout, (tmp_path / "worker.log").read_text()[-4000:])
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
    import json

    states = json.loads(q.stdout.strip().splitlines()[-1])
    n_shards = len(store.manifest("candidates"))
    assert states and all(s == "COMPLETED" for s in states)
    assert len(states) < n_shards, (len(states), n_shards)
