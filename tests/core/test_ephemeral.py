"""The watchdog that stops Prefect's ephemeral server when the build process is SIGKILLed.

The end-to-end case (a real CLI build, a real server) is in test_cli.py's kill test; this one
checks the watchdog's own rules in ~2 s, with stand-in processes: the registered pid is stopped
when its owner dies however it dies, and a pid whose command line is not the Prefect server (a
recycled pid) is left alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

SLEEP = "import time; time.sleep(120)"


def sleeper(*marker: str) -> subprocess.Popen:
    # the extra argv shows up in /proc/<pid>/cmdline, which is what the watchdog checks
    return subprocess.Popen([sys.executable, "-c", SLEEP, *marker])


def test_registered_server_stops_when_its_owner_is_killed_and_others_survive():
    server = sleeper("prefect.server.api.server")  # stand-in for the uvicorn child
    innocent = sleeper("some-other-program")  # e.g. the server's pid, recycled
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from forenset.flows.ephemeral import stop_with_this_process
                stop_with_this_process({server.pid})
                stop_with_this_process({innocent.pid})
                stop_with_this_process({server.pid})  # registering twice is harmless
                print("registered", flush=True)
                time.sleep(120)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout.readline().strip() == "registered"
        watchdogs = psutil.Process(owner.pid).children()
        assert len(watchdogs) == 1  # one watchdog per process
        time.sleep(0.3)
        assert server.poll() is None  # nothing happens while the owner lives
        owner.send_signal(signal.SIGKILL)  # no atexit, no finally
        owner.wait(10)
        assert server.wait(30) == -signal.SIGTERM
        psutil.wait_procs(watchdogs, timeout=15)
        assert not watchdogs[0].is_running()  # the watchdog itself exits
        assert innocent.poll() is None  # not the Prefect server: left alone
    finally:
        for p in (server, innocent, owner):
            if p.poll() is None:
                p.kill()
                p.wait()


def _server_children(pid: int) -> list:
    out = []
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return out
    for c in kids:
        try:
            if "prefect.server.api.server" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.slow
@pytest.mark.parametrize("when", ["server-starting", "shards-running"])
def test_killed_build_group_or_process_leaves_no_prefect_server(tmp_path, when):
    """A real ``forenset build`` as a job scheduler runs it (its own process group).
    server-starting: the build process alone is SIGKILLed while Prefect's server is still
    starting (before this fix its pid reached the watchdog only once it answered: orphaned).
    shards-running: the whole process group is SIGKILLed mid-build. Either way the server's
    pid is gone within 30 s."""
    import os

    import yaml

    from tests.conftest import small_config_dict

    cfg = small_config_dict(tmp_path / "run")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with open(tmp_path / "build.log", "w") as log:
        build = subprocess.Popen(
            [sys.executable, "-m", "forenset.cli", "build", str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a job: its own group, as under a batch scheduler
        )
    servers: list = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and build.poll() is None:
            servers = servers or _server_children(build.pid)
            if when == "server-starting" and servers:
                break
            if (
                when == "shards-running"
                and servers
                and any((tmp_path / "run" / "stages").rglob("*.parquet"))
            ):
                break
            time.sleep(0.02)
        assert build.poll() is None and servers, (tmp_path / "build.log").read_text()[-2000:]
        if when == "server-starting":
            build.kill()  # the build process only: the server is its child, in its group
        else:
            os.killpg(build.pid, signal.SIGKILL)
        build.wait(30)
        _, alive = psutil.wait_procs(servers, timeout=30)
        assert not alive, f"orphaned Prefect server(s): {[p.pid for p in alive]}"
    finally:
        for p in _server_children(build.pid) + servers:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        if build.poll() is None:
            build.kill()
