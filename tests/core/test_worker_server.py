"""Issue 40: a worker started without PREFECT_API_URL (a Dask worker) gets an ephemeral API
server of its own from Prefect's task engine; forenset's shard task hands it to the watchdog,
so it stops with the worker however the worker ends (here: SIGKILL, as a stopped nanny's
worker may be)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

WORKER = textwrap.dedent(
    """
    import os, sys, time
    os.environ.pop("PREFECT_API_URL", None)
    from prefect.client.orchestration import get_client
    get_client(sync_client=True)  # what the task engine does first: starts the server
    from prefect.server.api.server import SubprocessASGIServer
    pid = next(s.server_process.pid for s in SubprocessASGIServer._instances.values()
               if s.server_process is not None)
    from forenset.flows.build import _shard_task_fn
    try:  # the worker-side entry point of every shard task (it fails later: no run dir)
        _shard_task_fn("sources", [], sys.argv[1], "0" * 24)
    except Exception:
        pass
    print(pid, flush=True)
    time.sleep(300)
    """
)


@pytest.mark.slow
def test_a_workers_ephemeral_server_stops_with_the_worker(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    server = None
    try:
        line = worker.stdout.readline().strip()
        assert line.isdigit(), line
        server = psutil.Process(int(line))
        assert "prefect.server.api.server" in " ".join(server.cmdline())
        worker.send_signal(signal.SIGKILL)  # no atexit: Prefect's own cleanup never runs
        worker.wait(10)
        gone, alive = psutil.wait_procs([server], timeout=30)
        assert not alive, "the worker's ephemeral server outlived it"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if server is not None and server.is_running():
            server.kill()


@pytest.mark.slow
def test_local_process_workers_report_to_the_builds_server(tmp_path):
    """A build on a process pool: its workers report to the build's ephemeral server instead of
    starting one each (seen before: one more server per worker, all writing one SQLite file)."""
    import time

    import yaml

    from tests.reliability.clikit import descendants, tiny_config_dict

    cfg = tmp_path / "cfg.yaml"
    d = tiny_config_dict(tmp_path / "run")
    d["runners"] = {"default": {"kind": "processes", "max_workers": 2}}
    cfg.write_text(yaml.safe_dump(d))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    build = subprocess.Popen(
        [sys.executable, "-m", "forenset.cli", "build", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    servers: set[int] = set()
    workers_seen = 0
    try:
        deadline = time.monotonic() + 400
        while build.poll() is None and time.monotonic() < deadline:
            kids = descendants(build.pid)
            for pid in kids:
                try:
                    cmd = " ".join(psutil.Process(pid).cmdline())
                except psutil.Error:
                    continue
                if "prefect.server.api.server:create_app" in cmd:  # uvicorn, not the watchdog
                    servers.add(pid)
                elif "multiprocessing" in cmd:
                    workers_seen += 1
            time.sleep(0.2)
        _, err = build.communicate(timeout=60)
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
            build.communicate()
    assert build.returncode == 0, err[-3000:]
    assert workers_seen, "no process-pool worker was seen: nothing checked"
    assert len(servers) == 1, f"{len(servers)} Prefect servers for one build"
