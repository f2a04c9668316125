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
