"""Prefect's ephemeral API server dies with the process that started it.

With no ``PREFECT_API_URL``, Prefect starts a uvicorn API server as a child process the first
time a flow runs and stops it from an ``atexit`` hook. A SIGKILL, the OOM killer or a cluster's
job timeout skip ``atexit``: the server then runs on, orphaned, holding ~225 MB and polling
SQLite, one more after every killed build. ``reap_server_with_this_process`` starts the server
itself (as the first flow would, so nothing else changes) and hands its pid to a small
watchdog process. The watchdog reads pids from a pipe whose other end only this process holds;
when the pipe closes, however this process ended, it terminates the pids that still run the
server.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

# The watchdog: stdlib only, so it starts in ~20 ms. Ctrl-C in a terminal reaches the whole
# foreground group; the watchdog ignores it and waits for the pipe like any other ending.
_WATCHDOG = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
pids = [int(line) for line in sys.stdin if line.strip()]  # blocks until the parent is gone

def runs_server(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"prefect.server.api.server" in f.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): trust the pid
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False

def send(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except OSError:
            pass

live = [p for p in pids if runs_server(p)]
send(live, signal.SIGTERM)
deadline = time.monotonic() + 10
while live and time.monotonic() < deadline:
    time.sleep(0.1)
    live = [p for p in live if runs_server(p)]
send(live, signal.SIGKILL)
"""

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "watchdog": Popen, "pids": set of registered server pids


def reap_server_with_this_process() -> int | None:
    """Start the ephemeral API server now, if this process would use one, and make sure it
    stops when this process ends, even by SIGKILL. Returns the server's pid (None: a
    ``PREFECT_API_URL`` is set or ephemeral mode is off, so there is nothing to reap)."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return None
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the instance Prefect's get_client() starts and reuses
    # start() waits 5-60 s for the server to answer; a kill of this process in that window
    # must not orphan it, so its pid goes to the watchdog as soon as the child exists
    started = threading.Event()

    def register_early() -> None:
        while not started.is_set():
            proc = server.server_process
            if proc is not None:
                stop_with_this_process(proc.pid)
                return
            started.wait(0.02)

    stop_with_this_process(None)  # the watchdog first: it must exist before the server does
    watcher = threading.Thread(target=register_early, daemon=True, name="reap-server")
    watcher.start()
    try:
        server.start()
    finally:
        started.set()
        watcher.join()
    proc = server.server_process
    if proc is None:
        return None
    stop_with_this_process(proc.pid)
    return proc.pid


def stop_with_this_process(pid: int | None) -> None:
    """Register ``pid`` with this process's watchdog (started on first use): when this process
    ends, ``pid`` gets SIGTERM, then SIGKILL after 10 s, if it still runs the Prefect server
    (its command line is checked, so a recycled pid is left alone). ``None`` only starts the
    watchdog. The watchdog runs in its own session: a kill of this process's whole group (what
    a job scheduler does) leaves it alive to do its work."""
    with _lock:
        pids: set[int] = _state.setdefault("pids", set())
        watchdog = _state.get("watchdog")
        if watchdog is None or watchdog.poll() is not None:
            watchdog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # outlives this process's group on purpose
                text=True,
            )
            _state["watchdog"] = watchdog
            pids.clear()
        if pid is not None and pid not in pids:
            assert watchdog.stdin is not None  # started with stdin=PIPE
            watchdog.stdin.write(f"{pid}\n")
            watchdog.stdin.flush()
            pids.add(pid)


def reap_servers_started_here() -> list[int]:
    """Worker side: hand every ephemeral API server this process has started to the watchdog,
    so that it stops when this process ends, however it ends. Returns their pids.

    A Dask worker (or any process running forenset's shard tasks) started without
    ``PREFECT_API_URL`` gets an ephemeral server of its own from Prefect's task engine, before
    any forenset code runs; Prefect stops it only from ``atexit``, which a stopped or killed
    worker skips (the server then ran on, orphaned). Cheap enough to call from every shard
    task: nothing is imported, and a pid is registered once."""
    mod = sys.modules.get("prefect.server.api.server")
    if mod is None:  # no server was ever started in this process
        return []
    pids = []
    for server in list(getattr(mod.SubprocessASGIServer, "_instances", {}).values()):
        proc = getattr(server, "server_process", None)
        if proc is not None and proc.poll() is None:
            stop_with_this_process(proc.pid)
            pids.append(proc.pid)
    return pids


def share_with_local_workers(enabled: bool = True) -> Any:
    """A context in which this process's ephemeral API server is Prefect's ``PREFECT_API_URL``,
    so that the processes a build starts on this host (a process pool, a local Dask cluster)
    report to it instead of each starting an ephemeral server of its own: Prefect hands a task
    the settings of the process that submits it, and with no URL there a worker's task engine
    starts a server (5-15 s, ~225 MB and one more writer of the same SQLite file, per worker).
    A no-op when ``enabled`` is false (workers on other hosts cannot reach a loopback server:
    they need a ``PREFECT_API_URL`` of their own, docs/cluster.md) or no server runs here."""
    from contextlib import nullcontext

    mod = sys.modules.get("prefect.server.api.server")
    if not enabled or mod is None:
        return nullcontext()
    server = mod.SubprocessASGIServer()  # the instance reap_server_with_this_process started
    if server.server_process is None or server.server_process.poll() is not None:
        return nullcontext()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    return temporary_settings(updates={PREFECT_API_URL: server.api_url})
